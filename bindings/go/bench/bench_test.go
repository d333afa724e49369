package bench

import (
	"os"
	"strconv"
	"testing"
)

// BenchmarkGo runs every case as a sub-benchmark:
//
//	go test -run '^$' -bench . -benchtime 1s   (SHOAL_BENCH_KEYS=1000000 for the report's size)
func BenchmarkGo(b *testing.B) {
	n := 10000
	if s := os.Getenv("SHOAL_BENCH_KEYS"); s != "" {
		v, err := strconv.Atoi(s)
		if err != nil || v < 1 {
			b.Fatalf("SHOAL_BENCH_KEYS=%q", s)
		}
		n = v
	}
	d, err := Setup(n)
	if err != nil {
		b.Fatal(err)
	}
	defer d.Close()
	for _, c := range d.Cases() {
		b.Run(c.Group+"/"+c.Name, c.F)
	}
}
