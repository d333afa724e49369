package main

import (
	"fmt"
	"strconv"

	"github.com/anishathalye/porcupine"
)

// Input is one operation on one key (see shoal-lin-worker for the log format).
type Input struct {
	Op   string // get put ins rep del cas add swap take
	Key  string
	A    int64 // the value (put ins rep swap), the expected value (cas), the delta (add)
	HasA bool  // cas: whether an expected value is given (else: expects absence)
	B    int64 // cas: the new value
	HasB bool  // cas: whether a new value is given (else: removes)
}

// Output is what the operation returned. Unknown: the process was killed before the
// operation returned (it may or may not have taken effect).
type Output struct {
	Unknown bool
	Ok      bool  // get/swap/take: found; put: replaced; ins/rep/del/cas: applied
	V       int64 // get/swap/take (when found): the value; add: the new value
}

// State is one key's value.
type State struct {
	Present bool
	V       int64
}

// apply is the sequential specification: what op does to st and what it returns.
func apply(st State, in Input) (State, Output) {
	switch in.Op {
	case "get":
		return st, Output{Ok: st.Present, V: st.V}
	case "put":
		return State{true, in.A}, Output{Ok: st.Present}
	case "ins":
		if st.Present {
			return st, Output{}
		}
		return State{true, in.A}, Output{Ok: true}
	case "rep":
		if !st.Present {
			return st, Output{}
		}
		return State{true, in.A}, Output{Ok: true}
	case "del":
		return State{}, Output{Ok: st.Present}
	case "cas":
		if st.Present != in.HasA || (st.Present && st.V != in.A) {
			return st, Output{}
		}
		if in.HasB {
			return State{true, in.B}, Output{Ok: true}
		}
		return State{}, Output{Ok: true}
	case "add":
		var cur int64
		if st.Present {
			cur = st.V
		}
		v := cur + in.A // wrapping, as in the engine
		return State{true, v}, Output{Ok: true, V: v}
	case "swap":
		return State{true, in.A}, Output{Ok: st.Present, V: st.V}
	case "take":
		return State{}, Output{Ok: st.Present, V: st.V}
	}
	panic("unknown op " + in.Op)
}

// matches: whether a returned output is the one the specification gives.
func matches(in Input, want, got Output) bool {
	switch in.Op {
	case "get", "swap", "take":
		return want.Ok == got.Ok && (!want.Ok || want.V == got.V)
	case "add":
		return want.V == got.V
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

func describeOp(input, output interface{}) string {
	in := input.(Input)
	out := output.(Output)
	var call string
	switch in.Op {
	case "get", "del", "take":
		call = fmt.Sprintf("%s(%s)", in.Op, in.Key)
	case "cas":
		call = fmt.Sprintf("cas(%s, %s, %s)", in.Key, describeOpt(in.HasA, in.A), describeOpt(in.HasB, in.B))
	default:
		call = fmt.Sprintf("%s(%s, %d)", in.Op, in.Key, in.A)
	}
	if out.Unknown {
		return call + " -> ? (killed)"
	}
	var ret string
	switch in.Op {
	case "get", "swap", "take":
		ret = describeOpt(out.Ok, out.V)
	case "add":
		ret = strconv.FormatInt(out.V, 10)
	case "put":
		ret = map[bool]string{true: "replaced", false: "inserted"}[out.Ok]
	default:
		ret = strconv.FormatBool(out.Ok)
	}
	return call + " -> " + ret
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
		if !st.Present {
			return 0x9e3779b97f4a7c15
		}
		return uint64(st.V) * 0xff51afd7ed558ccd
	},
	DescribeOperation: describeOp,
	DescribeState: func(s interface{}) string {
		st := s.(State)
		return describeOpt(st.Present, st.V)
	},
}
