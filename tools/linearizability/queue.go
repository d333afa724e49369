package main

// The queue-set check (lincheck -queues LOGDIR): histories logged by shoal-queue-worker
// --lin processes (a kill storm, crates/shoal-torture/tests/queue_storm.rs), checked per
// queue against a FIFO queue of element indexes.
//
// Log (LOGDIR/*.qlin, one per process; each line written with one write(2), so a SIGKILL
// leaves whole lines, at worst a last one without its newline, which is ignored):
//
//	W <slot> <gen> <pid>                     first line
//	C <ns> push <queue> <limit> <e1,e2,...>  before a push of those elements, in order
//	R <ns> ok | full                         after it returned (full: the queue's depth
//	                                         limit refused the whole batch)
//	C <ns> pull <queue> <max>                before a pull of up to max elements
//	R <ns> <e1,...> | -                      after it returned: the elements, in order, or
//	                                         none (the queue was empty)
//
// Every push into a checked queue and every pull from it is logged (the storm's workers
// push nothing else there, and a dead holder's elements go to a queue that is not
// checked), so each queue's history is complete but for operations a kill cut short:
// those get return time +infinity and an unknown output (they may or may not have
// taken effect; if they did, as the state says: a pull takes min(max, len)).

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

// QInput is a push or a pull on one queue.
type QInput struct {
	Push  bool
	Queue string
	Limit int    // push: the queue's depth limit (0: none)
	Elems string // push: the elements, comma-separated
	N     int    // push: how many; pull: the most it takes
}

// QOutput is what it returned.
type QOutput struct {
	Unknown bool
	Full    bool   // push: refused by the depth limit
	Elems   string // pull: the elements taken, comma-separated ("" = none)
	N       int    // pull: how many
}

func splitElems(s string) []string {
	if s == "" {
		return nil
	}
	return strings.Split(s, ",")
}

// qstep: the queue's state is its elements, comma-separated, head first.
func qstep(state, input, output interface{}) (bool, interface{}) {
	st, in, out := state.(string), input.(QInput), output.(QOutput)
	elems := splitElems(st)
	if in.Push {
		full := in.Limit != 0 && len(elems)+in.N > in.Limit
		if out.Unknown {
			if full {
				return true, st
			}
		} else if out.Full != full {
			return false, st
		} else if full {
			return true, st
		}
		if st == "" {
			return true, in.Elems
		}
		return true, st + "," + in.Elems
	}
	take := min(in.N, len(elems))
	if !out.Unknown && (out.N != take || strings.Join(elems[:take], ",") != out.Elems) {
		return false, st
	}
	return true, strings.Join(elems[take:], ",")
}

var queueModel = porcupine.Model{
	Init:  func() interface{} { return "" },
	Step:  qstep,
	Equal: func(a, b interface{}) bool { return a.(string) == b.(string) },
	DescribeOperation: func(input, output interface{}) string {
		in, out := input.(QInput), output.(QOutput)
		res := "?"
		switch {
		case out.Unknown:
		case in.Push && out.Full:
			res = "full"
		case in.Push:
			res = "ok"
		case out.Elems == "":
			res = "-"
		default:
			res = out.Elems
		}
		if in.Push {
			return fmt.Sprintf("push(%s) -> %s", in.Elems, res)
		}
		return fmt.Sprintf("pull(%d) -> %s", in.N, res)
	},
	DescribeState: func(state interface{}) string { return "[" + state.(string) + "]" },
}

// parseQLog reads one worker's log and emits its operations in order.
func parseQLog(path string, client int, emit func(porcupine.Operation)) error {
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
		if len(f) == 0 {
			return bad("empty line")
		}
		switch f[0] {
		case "W":
		case "C":
			if pending || len(f) < 5 {
				return bad("call while pending, or short")
			}
			t, err := strconv.ParseInt(f[1], 10, 64)
			if err != nil {
				return bad("bad time")
			}
			var in QInput
			switch {
			case f[2] == "push" && len(f) == 6:
				lim, err := strconv.Atoi(f[4])
				if err != nil {
					return bad("bad limit")
				}
				in = QInput{Push: true, Queue: intern(f[3]), Limit: lim, Elems: f[5], N: len(splitElems(f[5]))}
			case f[2] == "pull" && len(f) == 5:
				n, err := strconv.Atoi(f[4])
				if err != nil {
					return bad("bad count")
				}
				in = QInput{Queue: intern(f[3]), N: n}
			default:
				return bad("unknown call")
			}
			cur = porcupine.Operation{ClientId: client, Input: in, Call: t, Output: QOutput{Unknown: true}, Return: Infinity}
			pending = true
		case "R":
			if !pending || len(f) != 3 {
				return bad("response without a call, or malformed")
			}
			t, err := strconv.ParseInt(f[1], 10, 64)
			if err != nil || t < cur.Call {
				return bad("bad response time")
			}
			in := cur.Input.(QInput)
			var out QOutput
			switch {
			case in.Push && f[2] == "ok":
			case in.Push && f[2] == "full":
				out.Full = true
			case in.Push:
				return bad("bad push result")
			case f[2] == "-":
			default:
				out.Elems, out.N = f[2], len(splitElems(f[2]))
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

// checkQueues runs the queue check on LOGDIR and exits with lincheck's statuses.
func checkQueues(dir string, timeout time.Duration, viz string) {
	paths, err := filepath.Glob(filepath.Join(dir, "*.qlin"))
	if err != nil || len(paths) == 0 {
		fmt.Fprintf(os.Stderr, "lincheck: no *.qlin logs in %s\n", dir)
		os.Exit(4)
	}
	sort.Strings(paths)
	perQueue := map[string][]porcupine.Operation{}
	pending, pulls, pushes, moved := 0, 0, 0, 0
	for i, p := range paths {
		err := parseQLog(p, i, func(op porcupine.Operation) {
			in := op.Input.(QInput)
			perQueue[in.Queue] = append(perQueue[in.Queue], op)
			out := op.Output.(QOutput)
			if out.Unknown {
				pending++
			} else if in.Push {
				pushes++
				if !out.Full {
					moved += in.N
				}
			} else {
				pulls++
			}
		})
		if err != nil {
			fmt.Fprintln(os.Stderr, "lincheck:", err)
			os.Exit(4)
		}
	}
	var names []string
	for q := range perQueue {
		names = append(names, q)
	}
	sort.Strings(names)
	fmt.Printf("lincheck: queues: %d processes, %d pushes (%d elements), %d pulls, %d pending (killed in flight)\n",
		len(paths), pushes, moved, pulls, pending)
	fmt.Printf("lincheck: queues: totals: pushes=%d pulls=%d pending=%d\n", pushes, pulls, pending)
	failed := false
	for _, q := range names {
		ops := perQueue[q]
		start := time.Now()
		res, info := porcupine.CheckOperationsVerbose(queueModel, ops, timeout)
		fmt.Printf("lincheck: queue %s: %d operations: %s in %v\n", q, len(ops), res, time.Since(start).Round(time.Millisecond))
		switch res {
		case porcupine.Illegal:
			path := viz
			if path == "" {
				path = filepath.Join(dir, "lin-"+q+".html")
			}
			if err := porcupine.VisualizePath(queueModel, info, path); err != nil {
				path = "(none: " + err.Error() + ")"
			}
			fmt.Printf("lincheck: NOT LINEARIZABLE: queue %s; visualization: %s\n", q, path)
			failed = true
		case porcupine.Unknown:
			fmt.Printf("lincheck: FAIL: the check of queue %s did not finish within %v\n", q, timeout)
			os.Exit(2)
		}
	}
	if failed {
		fmt.Println("lincheck: FAIL: the history is not linearizable")
		os.Exit(1)
	}
	fmt.Println("lincheck: OK: linearizable")
}
