package main

import (
	"fmt"
	"sort"
	"strconv"

	"github.com/anishathalye/porcupine"
)

// Input is one operation on one key (see shoal-lin-worker for the log format).
//
// By-key operations of every map kind: get put ins rep del cas add swap take (variable
// maps), has upd (fixed maps). Operations of maps with UIDs: uid and putu learn a key's
// UID (its handle); uget uput uupd uadd udel ukey act through a handle U.
type Input struct {
	Op   string
	Key  string
	A    int64  // the value (put ins rep swap putu uput upd uupd), the expected value (cas), the delta (add uadd)
	HasA bool   // cas: whether an expected value is given (else: expects absence); upd, uupd: else removes
	B    int64  // cas: the new value
	HasB bool   // cas: whether a new value is given (else: removes)
	U    uint64 // by-UID operations: the handle used (its 64-bit form, never 0)
}

// Output is what the operation returned. Unknown: the process was killed before the
// operation returned (it may or may not have taken effect).
type Output struct {
	Unknown bool
	Ok      bool   // get/swap/take/uid/upd/uupd: found (or kept); put/putu: replaced; ins/rep/del/cas/has: applied or present; ukey: named this key
	V       int64  // get/swap/take/upd/uget/udel/uupd (when found): the value; add/uadd: the new value
	U       uint64 // uid (when found), putu: the key's UID
	Stale   bool   // by-UID operations: failed with StaleUid
}

// State is one key's value and, for maps with UIDs, what is known of its handles.
//
// A key's *incarnation* runs from its insertion (absent -> present) to its removal; its
// UID is fixed for that long and no later incarnation may have the same UID (the engine
// bumps a freed UID's generation). Which UID a new incarnation gets is the engine's
// choice, so Uid starts unknown (0: UIDs are never 0) and is bound by the first
// operation that reports it (uid, putu) or uses it successfully. On removal a bound UID
// moves to Retired: a handle there is stale forever.
//
// Every handle a worker uses, it learned earlier on the same key from a completed uid
// or putu (LoadDir rejects a history where it did not); that operation returned before
// the use was invoked, so every linearization binds the handle first. So at a by-UID
// operation, its handle is either the current incarnation's (live) or retired (stale):
// the model is exact, with no guess about which UID a fresh incarnation gets.
type State struct {
	Present bool
	V       int64
	Uid     uint64 // the current incarnation's UID, 0 if unknown (always 0 when absent)
	Retired string // the UIDs of removed incarnations: sorted, 8 big-endian bytes each
}

// set: the key holds v; the same incarnation if it was present, else a new one.
func (st State) set(v int64) State {
	if st.Present {
		st.V = v
		return st
	}
	return State{Present: true, V: v, Retired: st.Retired}
}

// clear: the key is removed; its incarnation's UID, if known, is retired.
func (st State) clear() State {
	if st.Present && st.Uid != 0 {
		return State{Retired: retire(st.Retired, st.Uid)}
	}
	return State{Retired: st.Retired}
}

func uidBytes(u uint64) string {
	var b [8]byte
	for i := 0; i < 8; i++ {
		b[i] = byte(u >> (56 - 8*i))
	}
	return string(b[:])
}

// retiredAt: where u is or would go in the sorted set r, and whether it is there.
func retiredAt(r string, u uint64) (int, bool) {
	ub := uidBytes(u)
	n := len(r) / 8
	i := sort.Search(n, func(i int) bool { return r[8*i:8*i+8] >= ub })
	return i, i < n && r[8*i:8*i+8] == ub
}

func isRetired(r string, u uint64) bool {
	_, ok := retiredAt(r, u)
	return ok
}

func retire(r string, u uint64) string {
	i, ok := retiredAt(r, u)
	if ok {
		return r
	}
	return r[:8*i] + uidBytes(u) + r[8*i:]
}

// bind: the key (present) reports UID u: it must be the current incarnation's, if that
// is known, and never a retired one. Returns the state with u bound.
func bind(st State, u uint64) (State, bool) {
	if !st.Present || u == 0 {
		return st, false
	}
	if st.Uid != 0 {
		return st, st.Uid == u
	}
	if isRetired(st.Retired, u) {
		return st, false
	}
	st.Uid = u
	return st, true
}

// apply is the sequential specification of the by-key operations: what op does to st
// and what it returns. (uid and putu, whose outputs bind a UID, are in step.)
func apply(st State, in Input) (State, Output) {
	switch in.Op {
	case "get":
		return st, Output{Ok: st.Present, V: st.V}
	case "has":
		return st, Output{Ok: st.Present}
	case "put":
		return st.set(in.A), Output{Ok: st.Present}
	case "ins":
		if st.Present {
			return st, Output{}
		}
		return st.set(in.A), Output{Ok: true}
	case "rep":
		if !st.Present {
			return st, Output{}
		}
		return st.set(in.A), Output{Ok: true}
	case "del":
		return st.clear(), Output{Ok: st.Present}
	case "cas":
		if st.Present != in.HasA || (st.Present && st.V != in.A) {
			return st, Output{}
		}
		if in.HasB {
			return st.set(in.B), Output{Ok: true}
		}
		return st.clear(), Output{Ok: true}
	case "add":
		var cur int64
		if st.Present {
			cur = st.V
		}
		v := cur + in.A // wrapping, as in the engine
		return st.set(v), Output{Ok: true, V: v}
	case "swap":
		return st.set(in.A), Output{Ok: st.Present, V: st.V}
	case "take":
		return st.clear(), Output{Ok: st.Present, V: st.V}
	case "upd":
		// update(f): f(absent) = A, f(c) = c ^ A; without A, f removes.
		if !in.HasA {
			return st.clear(), Output{}
		}
		v := in.A
		if st.Present {
			v = st.V ^ in.A
		}
		return st.set(v), Output{Ok: true, V: v}
	}
	panic("unknown op " + in.Op)
}

// applyLive: what a by-UID operation does to a key its handle names (present).
func applyLive(st State, in Input) (State, Output) {
	switch in.Op {
	case "uget":
		return st, Output{Ok: true, V: st.V}
	case "uput":
		return st.set(in.A), Output{Ok: true}
	case "uupd":
		// update_by_uid(f): f(c) = c ^ A; without A, f removes.
		if !in.HasA {
			return st.clear(), Output{}
		}
		v := st.V ^ in.A
		return st.set(v), Output{Ok: true, V: v}
	case "uadd":
		v := st.V + in.A
		return st.set(v), Output{Ok: true, V: v}
	case "udel":
		return st.clear(), Output{Ok: true, V: st.V}
	case "ukey":
		return st, Output{Ok: true}
	}
	panic("unknown op " + in.Op)
}

func isByUid(op string) bool {
	switch op {
	case "uget", "uput", "uupd", "uadd", "udel", "ukey":
		return true
	}
	return false
}

// matches: whether a returned output is the one the specification gives.
func matches(in Input, want, got Output) bool {
	if got.Stale {
		return false // stale outcomes are decided in step
	}
	switch in.Op {
	case "get", "swap", "take", "upd", "uupd":
		return want.Ok == got.Ok && (!want.Ok || want.V == got.V)
	case "add", "uadd", "uget", "udel":
		return want.V == got.V
	case "uput":
		return true
	default:
		return want.Ok == got.Ok
	}
}

// step: an operation with a known output must return what the specification says; one
// whose process was killed (Unknown output) is accepted in any state and applied.
// Its "not applied" branch is covered by its return time: it is +infinity (after
// every other event), so porcupine may linearize it after all other operations, where
// applying it affects nothing observed. Between the two, porcupine tries every point.
func step(state, input, output interface{}) (bool, interface{}) {
	st := state.(State)
	in := input.(Input)
	out := output.(Output)
	switch {
	case in.Op == "uid":
		if out.Unknown {
			return true, st
		}
		if !out.Ok {
			return !st.Present, st
		}
		next, ok := bind(st, out.U)
		return ok, next
	case in.Op == "putu":
		next := st.set(in.A)
		if out.Unknown {
			return true, next
		}
		if out.Ok != st.Present {
			return false, next
		}
		next, ok := bind(next, out.U)
		return ok, next
	case isByUid(in.Op):
		live := st.Present && st.Uid == in.U
		if !live && !isRetired(st.Retired, in.U) {
			// The handle was learned before (LoadDir checks) so it is bound: this
			// branch is reached only by a history LoadDir would reject.
			return false, st
		}
		if !live {
			return out.Unknown || out.Stale, st
		}
		next, want := applyLive(st, in)
		if out.Unknown {
			return true, next
		}
		return matches(in, want, out), next
	}
	next, want := apply(st, in)
	if out.Unknown {
		return true, next
	}
	return matches(in, want, out), next
}

func describeOpt(ok bool, v int64) string {
	if !ok {
		return "-"
	}
	return strconv.FormatInt(v, 10)
}

func describeUid(u uint64) string {
	return fmt.Sprintf("%d.%d", u&(1<<32-1), u>>48) // index.generation, as shoal prints it
}

func describeOp(input, output interface{}) string {
	in := input.(Input)
	out := output.(Output)
	var call string
	switch in.Op {
	case "get", "del", "take", "has", "uid":
		call = fmt.Sprintf("%s(%s)", in.Op, in.Key)
	case "cas":
		call = fmt.Sprintf("cas(%s, %s, %s)", in.Key, describeOpt(in.HasA, in.A), describeOpt(in.HasB, in.B))
	case "upd":
		call = fmt.Sprintf("upd(%s, %s)", in.Key, describeOpt(in.HasA, in.A))
	case "uget", "udel", "ukey":
		call = fmt.Sprintf("%s(%s @%s)", in.Op, in.Key, describeUid(in.U))
	case "uupd":
		call = fmt.Sprintf("uupd(%s @%s, %s)", in.Key, describeUid(in.U), describeOpt(in.HasA, in.A))
	case "uput", "uadd":
		call = fmt.Sprintf("%s(%s @%s, %d)", in.Op, in.Key, describeUid(in.U), in.A)
	default:
		call = fmt.Sprintf("%s(%s, %d)", in.Op, in.Key, in.A)
	}
	if out.Unknown {
		return call + " -> ? (killed)"
	}
	if out.Stale {
		return call + " -> stale"
	}
	var ret string
	switch in.Op {
	case "get", "swap", "take", "upd", "uupd":
		ret = describeOpt(out.Ok, out.V)
	case "add", "uadd", "uget", "udel":
		ret = strconv.FormatInt(out.V, 10)
	case "put":
		ret = map[bool]string{true: "replaced", false: "inserted"}[out.Ok]
	case "putu":
		ret = map[bool]string{true: "replaced", false: "inserted"}[out.Ok] + " @" + describeUid(out.U)
	case "uid":
		ret = "-"
		if out.Ok {
			ret = "@" + describeUid(out.U)
		}
	case "uput":
		ret = "ok"
	case "ukey":
		ret = map[bool]string{true: "this key", false: "ANOTHER key"}[out.Ok]
	default:
		ret = strconv.FormatBool(out.Ok)
	}
	return call + " -> " + ret
}

func describeState(s interface{}) string {
	st := s.(State)
	d := describeOpt(st.Present, st.V)
	if st.Uid != 0 {
		d += " @" + describeUid(st.Uid)
	}
	if n := len(st.Retired) / 8; n > 0 {
		d += fmt.Sprintf(" (%d UIDs retired)", n)
	}
	return d
}

// partitionByKey: the map is linearizable iff each key's history is.
func partitionByKey(history []porcupine.Operation) [][]porcupine.Operation {
	idx := map[string]int{}
	var parts [][]porcupine.Operation
	for _, op := range history {
		k := op.Input.(Input).Key
		i, ok := idx[k]
		if !ok {
			i = len(parts)
			idx[k] = i
			parts = append(parts, nil)
		}
		parts[i] = append(parts[i], op)
	}
	return parts
}

// kvModel is a key-value map partitioned per key, each key starting absent.
var kvModel = porcupine.Model{
	Partition: partitionByKey,
	Init:      func() interface{} { return State{} },
	Step:      step,
	Equal:     func(a, b interface{}) bool { return a.(State) == b.(State) },
	Hash: func(s interface{}) uint64 {
		st := s.(State)
		h := uint64(len(st.Retired)) * 0xc2b2ae3d27d4eb4f
		h ^= st.Uid * 0x165667b19e3779f9
		if !st.Present {
			return h ^ 0x9e3779b97f4a7c15
		}
		return h ^ uint64(st.V)*0xff51afd7ed558ccd
	},
	DescribeOperation: describeOp,
	DescribeState:     describeState,
}
