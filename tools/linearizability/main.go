// lincheck: checks the histories logged by shoal-lin-worker processes (a kill storm,
// crates/shoal-torture/tests/linearizability.rs) for linearizability with Porcupine,
// against a key-value map model partitioned per key (model.go).
//
//	lincheck [-kills FILE] [-max-wait 10s] [-timeout 10m] [-viz FILE.html] LOGDIR
//	lincheck -queues [-timeout 10m] [-viz FILE.html] LOGDIR
//	lincheck -ordered -keys N (-accounts N -initial N | -init V,...) [-max-wait 10s] [-timeout 10m] [-viz FILE.html] LOGDIR
//	lincheck -txn -keys N (-initial N | -init V,...) [-max-wait 10s] [-timeout 10m] [-viz FILE.html] LOGDIR
//
// With -queues it checks queue-set histories instead (queue.go); with -ordered,
// ordered-map transaction histories (ordered.go); with -txn, hash-map transaction
// histories (txn.go).
//
// Reads LOGDIR/*.lin (one per process; format in shoal-lin-worker.rs; any map kind:
// variable, fixed-size, with UIDs). An operation whose process was killed before it
// returned gets return time +infinity and an unknown output (see step in model.go).
// -kills names a file of "SENT_NS REAPED_NS" lines, one per SIGKILL, for the latency
// figures.
//
// Exit status: 0 linearizable and every operation within -max-wait; 1 not
// linearizable (the failing keys' histories are written as HTML next to -viz, and the
// paths printed); 2 the check timed out; 3 an operation took longer than -max-wait;
// 4 bad input.
package main

import (
	"bufio"
	"flag"
	"fmt"
	"os"
	"runtime"
	"runtime/debug"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/anishathalye/porcupine"
)

type kill struct{ sent, reaped int64 }

func readKills(path string) ([]kill, error) {
	if path == "" {
		return nil, nil
	}
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	var ks []kill
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		fs := strings.Fields(sc.Text())
		if len(fs) != 2 {
			return nil, fmt.Errorf("%s: bad line %q", path, sc.Text())
		}
		a, e1 := strconv.ParseInt(fs[0], 10, 64)
		b, e2 := strconv.ParseInt(fs[1], 10, 64)
		if e1 != nil || e2 != nil {
			return nil, fmt.Errorf("%s: bad line %q", path, sc.Text())
		}
		ks = append(ks, kill{a, b})
	}
	return ks, sc.Err()
}

// afterKill: the operation was running when a process was killed, or started within
// 10 ms after (so it may have waited for the dead process's locks).
func afterKill(op porcupine.Operation, ks []kill) bool {
	const grace = int64(10 * time.Millisecond)
	i := sort.Search(len(ks), func(i int) bool { return ks[i].reaped+grace >= op.Call })
	return i < len(ks) && ks[i].sent <= op.Return
}

func main() {
	killsPath := flag.String("kills", "", "file of SIGKILL times (SENT_NS REAPED_NS per line)")
	maxWait := flag.Duration("max-wait", 10*time.Second, "fail if an operation took longer")
	timeout := flag.Duration("timeout", 10*time.Minute, "give up checking after this long (exit 2)")
	viz := flag.String("viz", "", "on failure, write the failing keys' histories as HTML to FILE-KEY.html (default LOGDIR/lin-KEY.html)")
	queues := flag.Bool("queues", false, "check queue-set histories (LOGDIR/*.qlin, see queue.go) instead of map histories")
	ordered := flag.Bool("ordered", false, "check ordered-map transaction histories (LOGDIR/*.olin, see ordered.go) instead of map histories")
	txn := flag.Bool("txn", false, "check hash-map transaction histories (LOGDIR/*.tlin, see txn.go) instead of map histories")
	keys := flag.Int("keys", 0, "-ordered, -txn: keys in the store (-ordered: both maps)")
	accounts := flag.Int("accounts", 0, "-ordered: accounts at the start of each map's keys")
	initial := flag.Uint64("initial", 0, "-ordered: each account's starting balance; -txn: every key's")
	initList := flag.String("init", "", "-ordered, -txn: every key's starting value, comma-separated (instead of -accounts/-initial)")
	flag.Parse()
	if flag.NArg() != 1 {
		fmt.Fprintln(os.Stderr, "usage: lincheck [-kills FILE] [-max-wait D] [-timeout D] [-viz FILE.html] LOGDIR")
		os.Exit(4)
	}
	dir := flag.Arg(0)
	if *queues {
		checkQueues(dir, *timeout, *viz)
		return
	}
	if *txn {
		checkTxn(dir, *timeout, *maxWait, *viz, *keys, *initial, *initList)
		return
	}
	if *ordered {
		checkOrdered(dir, *timeout, *maxWait, *viz, *keys, *accounts, *initial, *initList)
		return
	}
	debug.SetGCPercent(50) // long runs: millions of operations; keep the heap tight
	h, err := LoadDir(dir)
	if err != nil {
		fmt.Fprintln(os.Stderr, "lincheck:", err)
		os.Exit(4)
	}
	ks, err := readKills(*killsPath)
	if err != nil {
		fmt.Fprintln(os.Stderr, "lincheck:", err)
		os.Exit(4)
	}
	sort.Slice(ks, func(i, j int) bool { return ks[i].reaped < ks[j].reaped })

	// Figures: operations, pending ones, latencies.
	var done, pending, nAfterKill, byUid, stale int
	var longest, longestAfterKill porcupine.Operation
	perOp := map[string]int{}
	fewest, most := h.Len(), 0
	for i := range h.Keys {
		ops := h.Ops(i)
		fewest, most = min(fewest, len(ops)), max(most, len(ops))
		for _, op := range ops {
			in, out := op.Input.(Input), op.Output.(Output)
			perOp[in.Op]++
			if isByUid(in.Op) {
				byUid++
			}
			if out.Stale {
				stale++
			}
			if op.Return == Infinity {
				pending++
				continue
			}
			done++
			if op.Return-op.Call > longest.Return-longest.Call {
				longest = op
			}
			if afterKill(op, ks) {
				nAfterKill++
				if op.Return-op.Call > longestAfterKill.Return-longestAfterKill.Call {
					longestAfterKill = op
				}
			}
		}
	}
	lat := func(op porcupine.Operation) string {
		if op.Input == nil {
			return "none"
		}
		return fmt.Sprintf("%v (%s by %s)", time.Duration(op.Return-op.Call),
			describeOp(op.Input, op.Output), h.Clients[op.ClientId])
	}
	fmt.Printf("lincheck: %d processes, %d operations checked (%d completed, %d pending: killed in flight), %d kills\n",
		len(h.Clients), done+pending, done, pending, len(ks))
	fmt.Printf("lincheck: %d keys, %d to %d operations each\n", len(h.Keys), fewest, most)
	var counts []string
	for _, name := range opNames {
		if perOp[name] > 0 {
			counts = append(counts, fmt.Sprintf("%s %d", name, perOp[name]))
		}
	}
	fmt.Printf("lincheck: by operation: %s; by UID: %d (%d stale)\n", strings.Join(counts, ", "), byUid, stale)
	fmt.Printf("lincheck: totals: ops=%d completed=%d pending=%d kills=%d byuid=%d stale=%d longest_ns=%d\n",
		done+pending, done, pending, len(ks), byUid, stale, max(longest.Return-longest.Call, 0))
	fmt.Printf("lincheck: longest operation: %s\n", lat(longest))
	fmt.Printf("lincheck: longest of the %d operations in flight at a kill or started within 10 ms after one: %s\n", nAfterKill, lat(longestAfterKill))

	// Each key's history is checked apart (the map is linearizable iff each key is),
	// by at most GOMAXPROCS at a time, each built only when checked: Porcupine's memory
	// grows with the square of a history's length, so checking every key at once (as
	// its own partitioning does) could take far more memory than any one key.
	start := time.Now()
	deadline := start.Add(*timeout)
	results := make([]porcupine.CheckResult, len(h.Keys))
	next := make(chan int)
	var wg sync.WaitGroup
	for w := 0; w < runtime.GOMAXPROCS(0); w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range next {
				left := time.Until(deadline)
				if left <= 0 {
					results[i] = porcupine.Unknown
					continue
				}
				results[i] = porcupine.CheckOperationsTimeout(kvModel, h.Ops(i), left)
			}
		}()
	}
	for i := range h.Keys {
		next <- i
	}
	close(next)
	wg.Wait()
	var illegal, unknown []int
	for i, r := range results {
		switch r {
		case porcupine.Illegal:
			illegal = append(illegal, i)
		case porcupine.Unknown:
			unknown = append(unknown, i)
		}
	}
	fmt.Printf("lincheck: porcupine: %d keys (longest history %d operations): %d linearizable, %d not, %d unknown (timed out) in %v\n",
		len(h.Keys), most, len(h.Keys)-len(illegal)-len(unknown), len(illegal), len(unknown), time.Since(start).Round(time.Millisecond))
	if len(illegal) > 0 {
		base := *viz
		if base == "" {
			base = dir + "/lin.html"
		}
		base = strings.TrimSuffix(base, ".html")
		for n, i := range illegal {
			key := h.Keys[i]
			if n == 3 {
				fmt.Printf("lincheck: (and %d more keys not linearizable; visualized: the first 3)\n", len(illegal)-n)
				break
			}
			ops := h.Ops(i)
			_, info := porcupine.CheckOperationsVerbose(kvModel, ops, *timeout)
			path := fmt.Sprintf("%s-%s.html", base, key)
			if err := porcupine.VisualizePath(kvModel, info, path); err != nil {
				fmt.Fprintf(os.Stderr, "lincheck: visualization of key %s: %v\n", key, err)
				path = "(none)"
			}
			fmt.Printf("lincheck: NOT LINEARIZABLE: key %s (%d operations); visualization: %s\n", key, len(ops), path)
		}
		fmt.Println("lincheck: FAIL: the history is not linearizable")
		os.Exit(1)
	}
	if len(unknown) > 0 {
		fmt.Printf("lincheck: FAIL: the check did not finish within %v\n", *timeout)
		os.Exit(2)
	}
	if longest.Input != nil && time.Duration(longest.Return-longest.Call) > *maxWait {
		fmt.Printf("lincheck: FAIL: an operation took %s, over the bound of %v\n", lat(longest), *maxWait)
		os.Exit(3)
	}
	fmt.Println("lincheck: OK: linearizable")
}
