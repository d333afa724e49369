// Command gobench runs the Go binding's benchmarks (package bench) and prints a
// markdown report: each case's time per operation (per key for the batched ones), the
// median of several runs, and each Shoal case's ratio to every peer of its group
// (peer time / Shoal time: above 1 means Shoal is faster).
//
//	go run ./cmd/gobench -keys 1000000 -runs 3 -benchtime 1s
package main

import (
	"flag"
	"fmt"
	"os"
	"sort"
	"strings"
	"testing"
	"time"

	"example.invalid/shoal/bindings/go/bench"
)

func main() {
	testing.Init()
	keys := flag.Int("keys", 1000000, "entries loaded in every contender")
	runs := flag.Int("runs", 3, "runs of each case (the median is reported)")
	benchtime := flag.Duration("benchtime", time.Second, "time per run")
	flag.Parse()
	if err := flag.Set("test.benchtime", benchtime.String()); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(2)
	}
	start := time.Now()
	d, err := bench.Setup(*keys)
	if err != nil {
		fmt.Fprintln(os.Stderr, "setup:", err)
		os.Exit(1)
	}
	defer d.Close()
	fmt.Fprintf(os.Stderr, "loaded %d entries into each contender in %v\n", *keys, time.Since(start).Round(time.Millisecond))

	type result struct {
		c  bench.Case
		ns float64
	}
	var results []result
	// Rounds rather than runs back to back, so that a burst of load from the machine's
	// other users spreads over every case instead of falling on one.
	cases := d.Cases()
	samples := make([][]float64, len(cases))
	for r := 0; r < *runs; r++ {
		for i, c := range cases {
			res := testing.Benchmark(c.F)
			if res.N == 0 {
				fmt.Fprintf(os.Stderr, "%s / %s failed\n", c.Group, c.Name)
				os.Exit(1)
			}
			samples[i] = append(samples[i], float64(res.T.Nanoseconds())/float64(res.N))
		}
	}
	for i, c := range cases {
		s := samples[i]
		sort.Float64s(s)
		results = append(results, result{c, s[len(s)/2]})
	}

	fmt.Printf("%d entries (16-byte keys, 16-byte values), median of %d runs of %v each.\n\n", *keys, *runs, *benchtime)
	fmt.Println("| group | contender | ns/op | M ops/s |")
	fmt.Println("|---|---|---:|---:|")
	for _, r := range results {
		fmt.Printf("| %s | %s | %.0f | %.2f |\n", r.c.Group, r.c.Name, r.ns, 1e3/r.ns)
	}
	fmt.Println()
	fmt.Println("| group | Shoal | peer | peer time / Shoal time |")
	fmt.Println("|---|---|---|---:|")
	for _, s := range results {
		if !s.c.Shoal || strings.HasPrefix(s.c.Group, "why") {
			continue
		}
		for _, p := range results {
			if p.c.Shoal || p.c.Group != s.c.Group {
				continue
			}
			fmt.Printf("| %s | %s | %s | %.2f× |\n", s.c.Group, s.c.Name, p.c.Name, p.ns/s.ns)
		}
	}
}
