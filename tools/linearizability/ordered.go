package main

// The ordered-map transaction check (lincheck -ordered LOGDIR): histories logged by
// shoal-ordered-worker processes (a kill storm, crates/shoal-torture/tests/ordered_storm.rs),
// checked for strict serializability: the whole store (every key of both maps) is one
// object, each committed transaction one atomic step of it, each snapshot read one
// instant of it, each at some point between its call and its return.
//
// Keys are numbered 0..N-1 (N given by -keys); the first -accounts of each map's keys
// are accounts starting at -initial, the others start at 0 (or every key starts at the
// value -init lists: a storm run in rounds checks each round from where the last one
// ended); key i is in map i / (N/2), slot i % (N/2), accounts first.
//
// Porcupine's memory grows with the square of a history's length (a 300,000-transaction
// history took over 10 GB), so a long storm runs in rounds of a few tens of thousands of
// transactions, each checked apart: between rounds every worker is stopped, so no
// transaction spans two.
//
// Log (LOGDIR/*.olin, one per process, a mapped file whose lines are stored text first,
// newline last: a SIGKILL leaves whole lines, at worst a last one without its newline,
// which is ignored, then zero bytes):
//
//	W <ns> <slot> <gen> <pid>        first line
//	C <ns> xfer <from> <to> <amt>     a transfer transaction: reads both balances, moves
//	R <ns> <va> <vb> ok | no          amt if from holds that much (ok), else aborts (no)
//	C <ns> opt <from> <to> <amt>      the same transfer, optimistic (read, compute, commit
//	R <ns> <va> <vb> ok | no          if unchanged): one atomic step alike
//	C <ns> ver <from> <to> <amt>      the same again, committed if a version is unchanged
//	R <ns> <va> <vb> ok | no
//	C <ns> abort <from> <to>          a transaction that reads both balances and aborts
//	R <ns> <va> <vb>
//	C <ns> put <key> <value>          a single put (its own transaction)
//	R <ns> ok
//	C <ns> read <k1,k2,...>           a snapshot of both maps: the values of those keys
//	R <ns> <v1,v2,...>
//
// A transaction whose process was killed before its R line gets return time +infinity
// and an unknown output: it may or may not have committed, and if it did, as the state
// says (a transfer moves the money when the balance allows). The harness adds a final
// read of every key, taken after all workers stopped (final.olin), so every transaction
// that committed is accounted for.

import (
	"bufio"
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/anishathalye/porcupine"
)

// OInput is one transaction.
type OInput struct {
	Kind     string // xfer, opt, ver, abort, put, read
	From, To int    // xfer, opt, ver, abort
	Amt      uint64 // xfer, opt, ver
	Key      int    // put
	Val      uint64 // put
	Keys     []int  // read
}

// OOutput is what it returned.
type OOutput struct {
	Unknown bool
	Vals    []uint64 // xfer, opt, ver, abort: the two balances read; read: the values
	Moved   bool     // xfer, opt, ver
}

// ostate: every key's value (never modified in place: a step copies).
type ostate []uint64

func ostep(state, input, output interface{}) (bool, interface{}) {
	st, in, out := state.(ostate), input.(OInput), output.(OOutput)
	switch in.Kind {
	case "xfer", "opt", "ver":
		va, vb := st[in.From], st[in.To]
		moved := va >= in.Amt
		if !out.Unknown && (out.Vals[0] != va || out.Vals[1] != vb || out.Moved != moved) {
			return false, st
		}
		if !moved {
			return true, st
		}
		next := append(ostate(nil), st...)
		next[in.From] -= in.Amt
		next[in.To] += in.Amt
		return true, next
	case "abort":
		return out.Unknown || (out.Vals[0] == st[in.From] && out.Vals[1] == st[in.To]), st
	case "put":
		next := append(ostate(nil), st...)
		next[in.Key] = in.Val
		return true, next
	default:
		if out.Unknown {
			return true, st
		}
		for j, k := range in.Keys {
			if out.Vals[j] != st[k] {
				return false, st
			}
		}
		return true, st
	}
}

func orderedModel(keys, accounts int, initial uint64, init []uint64) porcupine.Model {
	return porcupine.Model{
		Init: func() interface{} {
			st := make(ostate, keys)
			if init != nil {
				copy(st, init)
				return st
			}
			for i := range st {
				if i%(keys/2) < accounts {
					st[i] = initial
				}
			}
			return st
		},
		Step: ostep,
		Equal: func(a, b interface{}) bool {
			x, y := a.(ostate), b.(ostate)
			for i := range x {
				if x[i] != y[i] {
					return false
				}
			}
			return true
		},
		DescribeOperation: func(input, output interface{}) string {
			in, out := input.(OInput), output.(OOutput)
			res := "?"
			if !out.Unknown {
				res = fmt.Sprint(out.Vals)
				if in.Kind == "xfer" || in.Kind == "opt" || in.Kind == "ver" {
					res += fmt.Sprintf(" moved=%v", out.Moved)
				}
			}
			switch in.Kind {
			case "xfer", "opt", "ver":
				return fmt.Sprintf("%s(%d->%d, %d) -> %s", in.Kind, in.From, in.To, in.Amt, res)
			case "abort":
				return fmt.Sprintf("abort(%d, %d) -> %s", in.From, in.To, res)
			case "put":
				return fmt.Sprintf("put(%d, %d)", in.Key, in.Val)
			}
			return fmt.Sprintf("read(%v) -> %s", in.Keys, res)
		},
		DescribeState: func(state interface{}) string { return fmt.Sprint([]uint64(state.(ostate))) },
	}
}

func parseInts(s string) ([]uint64, error) {
	var out []uint64
	for _, f := range strings.Split(s, ",") {
		v, err := strconv.ParseUint(f, 10, 64)
		if err != nil {
			return nil, err
		}
		out = append(out, v)
	}
	return out, nil
}

// parseOLog reads one worker's log and emits its transactions in order.
func parseOLog(path string, client, keys int, emit func(porcupine.Operation)) error {
	data, err := readToZero(path)
	if err != nil {
		return err
	}
	if i := bytes.LastIndexByte(data, '\n'); i+1 != len(data) {
		data = data[:i+1]
	}
	sc := bufio.NewScanner(bytes.NewReader(data))
	sc.Buffer(make([]byte, 1<<16), 1<<24)
	var cur porcupine.Operation
	pending := false
	line := 0
	for sc.Scan() {
		line++
		f := strings.Fields(sc.Text())
		bad := func(why string) error { return fmt.Errorf("%s:%d: %q: %s", path, line, sc.Text(), why) }
		if len(f) < 2 {
			return bad("short line")
		}
		if f[0] == "W" {
			continue
		}
		t, err := strconv.ParseInt(f[1], 10, 64)
		if err != nil {
			return bad("bad time")
		}
		num := func(s string) int {
			v, e := strconv.Atoi(s)
			if e != nil || v < 0 || v >= keys {
				err = fmt.Errorf("bad key %q", s)
			}
			return v
		}
		switch f[0] {
		case "C":
			if pending || len(f) < 4 {
				return bad("call while pending, or short")
			}
			var in OInput
			switch {
			case (f[2] == "xfer" || f[2] == "opt" || f[2] == "ver") && len(f) == 6:
				amt, e := strconv.ParseUint(f[5], 10, 64)
				if e != nil {
					return bad("bad amount")
				}
				in = OInput{Kind: f[2], From: num(f[3]), To: num(f[4]), Amt: amt}
			case f[2] == "abort" && len(f) == 5:
				in = OInput{Kind: "abort", From: num(f[3]), To: num(f[4])}
			case f[2] == "put" && len(f) == 5:
				v, e := strconv.ParseUint(f[4], 10, 64)
				if e != nil {
					return bad("bad value")
				}
				in = OInput{Kind: "put", Key: num(f[3]), Val: v}
			case f[2] == "read" && len(f) == 4:
				ks, e := parseInts(f[3])
				if e != nil {
					return bad("bad keys")
				}
				in.Kind = "read"
				for _, k := range ks {
					in.Keys = append(in.Keys, num(strconv.FormatUint(k, 10)))
				}
			default:
				return bad("unknown call")
			}
			if err != nil {
				return bad(err.Error())
			}
			cur = porcupine.Operation{ClientId: client, Input: in, Call: t, Output: OOutput{Unknown: true}, Return: Infinity}
			pending = true
		case "R":
			if !pending || t < cur.Call {
				return bad("response without a call, or before it")
			}
			in := cur.Input.(OInput)
			var out OOutput
			switch in.Kind {
			case "xfer", "opt", "ver", "abort":
				want := map[string]int{"xfer": 5, "opt": 5, "ver": 5, "abort": 4}[in.Kind]
				if len(f) != want {
					return bad("malformed result")
				}
				a, e1 := strconv.ParseUint(f[2], 10, 64)
				b, e2 := strconv.ParseUint(f[3], 10, 64)
				if e1 != nil || e2 != nil {
					return bad("bad balances")
				}
				out.Vals = []uint64{a, b}
				if in.Kind != "abort" {
					if f[4] != "ok" && f[4] != "no" {
						return bad("bad transfer result")
					}
					out.Moved = f[4] == "ok"
				}
			case "put":
				if len(f) != 3 || f[2] != "ok" {
					return bad("bad put result")
				}
			default:
				if len(f) != 3 {
					return bad("malformed result")
				}
				vs, e := parseInts(f[2])
				if e != nil || len(vs) != len(in.Keys) {
					return bad("bad values")
				}
				out.Vals = vs
			}
			cur.Output, cur.Return = out, t
			pending = false
			emit(cur)
		default:
			return bad("unknown line kind")
		}
	}
	if err := sc.Err(); err != nil {
		return err
	}
	if pending {
		emit(cur)
	}
	return nil
}

// checkOrdered runs the ordered-map check on LOGDIR and exits with lincheck's statuses.
func checkOrdered(dir string, timeout, maxWait time.Duration, viz string, keys, accounts int, initial uint64, initList string) {
	if keys <= 0 || keys%2 != 0 || accounts > keys/2 {
		fmt.Fprintln(os.Stderr, "lincheck: -ordered needs an even -keys and -accounts at most half of it")
		os.Exit(4)
	}
	var init []uint64
	if initList != "" {
		var err error
		init, err = parseInts(initList)
		if err != nil || len(init) != keys {
			fmt.Fprintf(os.Stderr, "lincheck: -init needs %d values, comma-separated\n", keys)
			os.Exit(4)
		}
	}
	paths, err := filepath.Glob(filepath.Join(dir, "*.olin"))
	if err != nil || len(paths) == 0 {
		fmt.Fprintf(os.Stderr, "lincheck: no *.olin logs in %s\n", dir)
		os.Exit(4)
	}
	checkTransactions("ordered", dir, paths, keys, orderedModel(keys, accounts, initial, init), timeout, maxWait, viz)
}

// checkTransactions checks the transaction logs `paths` (the *.olin format above) of
// `keys` keys against `model`, prints what it counted (its lines start "lincheck:
// LABEL:"), and exits with lincheck's statuses on failure.
func checkTransactions(label, dir string, paths []string, keys int, model porcupine.Model, timeout, maxWait time.Duration, viz string) {
	sort.Strings(paths)
	var ops []porcupine.Operation
	counts := map[string]int{}
	pending, moved := 0, 0
	var longest porcupine.Operation
	for i, p := range paths {
		err := parseOLog(p, i, keys, func(op porcupine.Operation) {
			in, out := op.Input.(OInput), op.Output.(OOutput)
			if out.Unknown {
				pending++
				// A read or an aborted transaction cut short changed nothing and
				// returned nothing: it constrains no order, and left in it would
				// only widen the search.
				if in.Kind == "read" || in.Kind == "abort" {
					return
				}
			}
			ops = append(ops, op)
			if out.Unknown {
				return
			}
			counts[in.Kind]++
			if longest.Input == nil || op.Return-op.Call > longest.Return-longest.Call {
				longest = op
			}
			if out.Moved {
				moved++
			}
		})
		if err != nil {
			fmt.Fprintln(os.Stderr, "lincheck:", err)
			os.Exit(4)
		}
	}
	fmt.Printf("lincheck: %s: %d processes, %d transactions: %d transfers, %d optimistic ones and %d on a version (%d moved money), %d aborted, %d puts, %d snapshot reads, %d pending (killed in flight)\n",
		label, len(paths), len(ops), counts["xfer"], counts["opt"], counts["ver"], moved, counts["abort"], counts["put"], counts["read"], pending)
	longestNs := int64(0)
	if longest.Input != nil {
		longestNs = longest.Return - longest.Call
		fmt.Printf("lincheck: %s: longest transaction: %v (%s)\n", label, time.Duration(longestNs),
			model.DescribeOperation(longest.Input, longest.Output))
	}
	fmt.Printf("lincheck: %s: totals: ops=%d xfer=%d opt=%d ver=%d moved=%d abort=%d put=%d read=%d pending=%d longest_ns=%d\n",
		label, len(ops), counts["xfer"], counts["opt"], counts["ver"], moved, counts["abort"], counts["put"], counts["read"], pending, longestNs)
	start := time.Now()
	res, info := porcupine.CheckOperationsVerbose(model, ops, timeout)
	fmt.Printf("lincheck: %s: %s in %v\n", label, res, time.Since(start).Round(time.Millisecond))
	switch res {
	case porcupine.Illegal:
		path := viz
		if path == "" {
			path = filepath.Join(dir, "lin-"+label+".html")
		}
		if err := porcupine.VisualizePath(model, info, path); err != nil {
			path = "(none: " + err.Error() + ")"
		}
		fmt.Printf("lincheck: NOT LINEARIZABLE: %s transactions; visualization: %s\n", label, path)
		fmt.Println("lincheck: FAIL: the history is not linearizable")
		os.Exit(1)
	case porcupine.Unknown:
		fmt.Printf("lincheck: FAIL: the check did not finish within %v\n", timeout)
		os.Exit(2)
	}
	if time.Duration(longestNs) > maxWait {
		fmt.Printf("lincheck: FAIL: a transaction took %v, over the bound of %v\n", time.Duration(longestNs), maxWait)
		os.Exit(3)
	}
	fmt.Println("lincheck: OK: linearizable")
}
