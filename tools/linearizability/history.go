package main

import (
	"bufio"
	"bytes"
	"fmt"
	"io"
	"math"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"

	"github.com/anishathalye/porcupine"
)

// Infinity is the return time of an operation whose process was killed before it
// returned: after every other event.
const Infinity = int64(math.MaxInt64)

func parseOpt(s string) (int64, bool, error) {
	if s == "-" {
		return 0, false, nil
	}
	v, err := strconv.ParseInt(s, 10, 64)
	return v, true, err
}

// interned strings: operations and keys then share one copy each, and a log's text
// is not kept alive by them (long runs log millions of operations).
var interned = map[string]string{}

func intern(s string) string {
	if t, ok := interned[s]; ok {
		return t
	}
	s = strings.Clone(s)
	interned[s] = s
	return s
}

// parseUid: a UID in its 64-bit form (never 0).
func parseUid(s string) (uint64, error) {
	u, err := strconv.ParseUint(s, 10, 64)
	if err == nil && u == 0 {
		err = fmt.Errorf("UID 0")
	}
	return u, err
}

// callFields: the number of fields of each operation's call (op, key, arguments).
var callFields = map[string]int{
	"get": 2, "del": 2, "take": 2, "has": 2, "uid": 2,
	"put": 3, "ins": 3, "rep": 3, "swap": 3, "add": 3, "upd": 3, "putu": 3,
	"uget": 3, "udel": 3, "ukey": 3,
	"cas": 4, "uput": 4, "uupd": 4, "uadd": 4,
}

func parseCall(f []string) (Input, error) {
	if len(f) < 2 {
		return Input{}, fmt.Errorf("short call")
	}
	in := Input{Op: intern(f[0]), Key: intern(f[1])}
	n, ok := callFields[in.Op]
	if !ok {
		return in, fmt.Errorf("unknown op %q", in.Op)
	}
	if len(f) != n {
		return in, fmt.Errorf("%s takes %d fields, not %d", in.Op, n, len(f))
	}
	args := f[2:]
	var err error
	if isByUid(in.Op) {
		in.U, err = parseUid(args[0])
		if err != nil {
			return in, err
		}
		args = args[1:]
	}
	switch in.Op {
	case "put", "ins", "rep", "swap", "add", "putu", "uput", "uadd":
		in.A, err = strconv.ParseInt(args[0], 10, 64)
	case "upd", "uupd":
		in.A, in.HasA, err = parseOpt(args[0])
	case "cas":
		var e2 error
		in.A, in.HasA, err = parseOpt(args[0])
		in.B, in.HasB, e2 = parseOpt(args[1])
		if err == nil {
			err = e2
		}
	}
	return in, err
}

func parseRet(in Input, s string) (Output, error) {
	var out Output
	var err error
	if isByUid(in.Op) && s == "stale" {
		out.Stale = true
		return out, nil
	}
	switch in.Op {
	case "get", "swap", "take", "upd", "uupd":
		out.V, out.Ok, err = parseOpt(s)
	case "add", "uadd", "uget", "udel":
		out.V, err = strconv.ParseInt(s, 10, 64)
		out.Ok = true
	case "uid":
		if s != "-" {
			out.U, err = parseUid(s)
			out.Ok = true
		}
	case "put", "putu":
		what, uid, hasUid := strings.Cut(s, ":")
		if hasUid != (in.Op == "putu") {
			return out, fmt.Errorf("bad %s outcome %q", in.Op, s)
		}
		switch what {
		case "ins":
		case "rep":
			out.Ok = true
		default:
			return out, fmt.Errorf("bad %s outcome %q", in.Op, s)
		}
		if hasUid {
			out.U, err = parseUid(uid)
		}
	case "uput":
		if s != "ok" {
			err = fmt.Errorf("bad uput outcome %q", s)
		}
		out.Ok = true
	default:
		switch s {
		case "0":
		case "1":
			out.Ok = true
		default:
			err = fmt.Errorf("bad outcome %q", s)
		}
	}
	return out, err
}

// readToZero reads a file up to its first zero byte: a killed worker's mapped log is
// a large sparse file, zero after what was written.
func readToZero(path string) ([]byte, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	var data []byte
	buf := make([]byte, 1<<20)
	for {
		n, err := f.Read(buf)
		if i := bytes.IndexByte(buf[:n], 0); i >= 0 {
			return append(data, buf[:i]...), nil
		}
		data = append(data, buf[:n]...)
		if err == io.EOF {
			return data, nil
		}
		if err != nil {
			return nil, err
		}
	}
}

// ParseLog reads one worker log, up to its first zero byte, and hands each operation
// to emit, in order: the last one pending (Return == Infinity, Output unknown) if the
// worker was killed before it returned. A last line without its newline (cut by a
// SIGKILL) is ignored: if it was a call, the operation had not started; if a response,
// the operation stays pending, which only weakens what is checked.
func ParseLog(path string, client int, emit func(porcupine.Operation)) error {
	data, err := readToZero(path)
	if err != nil {
		return err
	}
	if i := bytes.LastIndexByte(data, '\n'); i+1 != len(data) {
		data = data[:i+1]
	}
	sc := bufio.NewScanner(bytes.NewReader(data))
	sc.Buffer(make([]byte, 1<<16), 1<<20)
	var cur porcupine.Operation
	pending := false
	lastReturn := int64(0)
	line := 0
	for sc.Scan() {
		line++
		f := strings.Fields(sc.Text())
		bad := func(why string, args ...interface{}) error {
			return fmt.Errorf("%s:%d: %q: %s", path, line, sc.Text(), fmt.Sprintf(why, args...))
		}
		if len(f) == 0 {
			return bad("empty line")
		}
		switch f[0] {
		case "W":
			if line != 1 {
				return bad("W line after the start")
			}
		case "C":
			if pending {
				return bad("call while the previous operation is pending")
			}
			if len(f) < 3 {
				return bad("short call line")
			}
			t, err := strconv.ParseInt(f[1], 10, 64)
			if err != nil {
				return bad("bad time: %v", err)
			}
			in, err := parseCall(f[2:])
			if err != nil {
				return bad("%v", err)
			}
			if lastReturn > t {
				return bad("call at %d before the previous response at %d", t, lastReturn)
			}
			cur = porcupine.Operation{ClientId: client, Input: in, Call: t, Output: Output{Unknown: true}, Return: Infinity}
			pending = true
		case "R":
			if !pending || len(f) != 3 {
				return bad("response without a call, or malformed")
			}
			t, err := strconv.ParseInt(f[1], 10, 64)
			if err != nil || t < cur.Call {
				return bad("bad response time")
			}
			out, err := parseRet(cur.Input.(Input), f[2])
			if err != nil {
				return bad("%v", err)
			}
			cur.Output, cur.Return = out, t
			lastReturn = t
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

// rec is an operation stored compactly (long runs log millions): porcupine's form is
// built one key at a time, when that key is checked. A by-UID operation's handle is
// kept in b (only cas has a B otherwise), a returned UID (uid, putu) in v.
type rec struct {
	call, ret, a, b, v int64
	client             int32
	op                 uint8 // index in opNames
	flags              uint8
}

const (
	fHasA = 1 << iota
	fHasB
	fOk
	fUnknown
	fStale
)

var opNames = []string{"get", "put", "ins", "rep", "del", "cas", "add", "swap", "take",
	"has", "upd", "uid", "putu", "uget", "uput", "uupd", "uadd", "udel", "ukey"}

// returnsUid: operations whose output carries a UID (kept in rec.v).
func returnsUid(op string) bool { return op == "uid" || op == "putu" }

// pureRead: operations that change nothing, dropped when pending.
func pureRead(op string) bool {
	switch op {
	case "get", "has", "uid", "uget", "ukey":
		return true
	}
	return false
}

func flagIf(b bool, f uint8) uint8 {
	if b {
		return f
	}
	return 0
}

// Histories: every process's operations, grouped by key.
type Histories struct {
	Clients []string // log file names, by client id
	Keys    []string // sorted
	recs    [][]rec  // per key, as Keys
}

// Ops: key i's operations in porcupine's form.
func (h *Histories) Ops(i int) []porcupine.Operation {
	ops := make([]porcupine.Operation, len(h.recs[i]))
	for j, r := range h.recs[i] {
		op := opNames[r.op]
		in := Input{Op: op, Key: h.Keys[i], A: r.a, HasA: r.flags&fHasA != 0,
			B: r.b, HasB: r.flags&fHasB != 0}
		if isByUid(op) {
			in.B, in.U = 0, uint64(r.b)
		}
		out := Output{Unknown: r.flags&fUnknown != 0, Ok: r.flags&fOk != 0, V: r.v,
			Stale: r.flags&fStale != 0}
		if returnsUid(op) {
			out.V, out.U = 0, uint64(r.v)
		}
		ops[j] = porcupine.Operation{ClientId: int(r.client), Input: in, Call: r.call,
			Output: out, Return: r.ret}
	}
	return ops
}

// Len: the number of operations.
func (h *Histories) Len() int {
	n := 0
	for _, r := range h.recs {
		n += len(r)
	}
	return n
}

// LoadDir reads every *.lin file of dir, in name order, one client each. Pending
// pure reads are dropped (they change nothing and return nothing known). A by-UID
// operation must use a handle its own process learned earlier on the same key (from a
// completed uid or putu), which the model relies on (see State).
func LoadDir(dir string) (*Histories, error) {
	paths, err := filepath.Glob(filepath.Join(dir, "*.lin"))
	if err != nil {
		return nil, err
	}
	sort.Strings(paths)
	opIdx := map[string]uint8{}
	for i, n := range opNames {
		opIdx[n] = uint8(i)
	}
	h := &Histories{}
	keyIdx := map[string]int{}
	type handle struct {
		key string
		uid uint64
	}
	for i, p := range paths {
		h.Clients = append(h.Clients, filepath.Base(p))
		learned := map[handle]bool{}
		var bad error
		err := ParseLog(p, i, func(op porcupine.Operation) {
			in, out := op.Input.(Input), op.Output.(Output)
			if isByUid(in.Op) && !learned[handle{in.Key, in.U}] && bad == nil {
				bad = fmt.Errorf("%s: %s on key %s uses UID %s, which this process had not learned on that key",
					p, in.Op, in.Key, describeUid(in.U))
			}
			if returnsUid(in.Op) && !out.Unknown && out.U != 0 {
				learned[handle{in.Key, out.U}] = true
			}
			if out.Unknown && pureRead(in.Op) {
				return
			}
			k, ok := keyIdx[in.Key]
			if !ok {
				k = len(h.Keys)
				keyIdx[in.Key] = k
				h.Keys = append(h.Keys, in.Key)
				h.recs = append(h.recs, nil)
			}
			r := rec{
				call: op.Call, ret: op.Return, a: in.A, b: in.B, v: out.V,
				client: int32(op.ClientId), op: opIdx[in.Op],
				flags: flagIf(in.HasA, fHasA) | flagIf(in.HasB, fHasB) | flagIf(out.Ok, fOk) |
					flagIf(out.Unknown, fUnknown) | flagIf(out.Stale, fStale),
			}
			if isByUid(in.Op) {
				r.b = int64(in.U)
			}
			if returnsUid(in.Op) {
				r.v = int64(out.U)
			}
			h.recs[k] = append(h.recs[k], r)
		})
		if err == nil {
			err = bad
		}
		if err != nil {
			return nil, err
		}
	}
	order := make([]int, len(h.Keys))
	for i := range order {
		order[i] = i
	}
	sort.Slice(order, func(a, b int) bool { return h.Keys[order[a]] < h.Keys[order[b]] })
	keys, recs := make([]string, len(order)), make([][]rec, len(order))
	for i, o := range order {
		keys[i], recs[i] = h.Keys[o], append([]rec(nil), h.recs[o]...) // no spare capacity
	}
	h.Keys, h.recs = keys, recs
	return h, nil
}
