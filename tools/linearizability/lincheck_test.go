package main

// Self-tests: the model and the checker accept linearizable histories and, above all,
// REJECT corrupted ones, so a passing storm means something.

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/anishathalye/porcupine"
)

// op builds an operation; ret == Infinity makes it pending (killed in flight).
func op(client int, call, ret int64, in Input, out Output) porcupine.Operation {
	if ret == Infinity {
		out = Output{Unknown: true}
	}
	return porcupine.Operation{ClientId: client, Input: in, Call: call, Output: out, Return: ret}
}

func put(k string, v int64) Input { return Input{Op: "put", Key: k, A: v} }
func get(k string) Input          { return Input{Op: "get", Key: k} }
func add(k string, d int64) Input { return Input{Op: "add", Key: k, A: d} }
func found(v int64) Output        { return Output{Ok: true, V: v} }
func absent() Output              { return Output{} }
func applied(b bool) Output       { return Output{Ok: b} }
func casIn(k string, exp, nw int64) Input {
	return Input{Op: "cas", Key: k, A: exp, HasA: true, B: nw, HasB: true}
}

func check(t *testing.T, h []porcupine.Operation) porcupine.CheckResult {
	t.Helper()
	return porcupine.CheckOperationsTimeout(kvModel, h, 0)
}

func TestSequentialSpecification(t *testing.T) {
	h := []porcupine.Operation{
		op(0, 0, 1, get("a"), absent()),
		op(0, 2, 3, put("a", 5), applied(false)), // inserted
		op(0, 4, 5, Input{Op: "ins", Key: "a", A: 6}, applied(false)),
		op(0, 6, 7, Input{Op: "rep", Key: "a", A: 7}, applied(true)),
		op(0, 8, 9, casIn("a", 7, 8), applied(true)),
		op(0, 10, 11, casIn("a", 7, 9), applied(false)),
		op(0, 12, 13, add("a", 2), found(10)),
		op(0, 14, 15, Input{Op: "swap", Key: "a", A: 1}, found(10)),
		op(0, 16, 17, Input{Op: "take", Key: "a"}, found(1)),
		op(0, 18, 19, Input{Op: "del", Key: "a"}, applied(false)),
		op(0, 20, 21, add("a", 3), found(3)),
		op(0, 22, 23, Input{Op: "cas", Key: "a", A: 3, HasA: true}, applied(true)), // compare-and-remove
		op(0, 24, 25, Input{Op: "cas", Key: "a", B: 4, HasB: true}, applied(true)), // insert-if-absent
		op(0, 26, 27, get("a"), found(4)),
		op(0, 28, 29, put("a", 5), applied(true)), // replaced
	}
	if r := check(t, h); r != porcupine.Ok {
		t.Fatalf("a correct sequential history: %s", r)
	}
}

func TestConcurrentReorderingAccepted(t *testing.T) {
	// The get overlaps the put: it may see either state.
	for _, out := range []Output{absent(), found(1)} {
		h := []porcupine.Operation{
			op(0, 0, 10, put("a", 1), applied(false)),
			op(1, 5, 15, get("a"), out),
		}
		if r := check(t, h); r != porcupine.Ok {
			t.Fatalf("overlapping get returning %+v: %s", out, r)
		}
	}
}

func TestGetOfValueNeverWrittenRejected(t *testing.T) {
	h := []porcupine.Operation{
		op(0, 0, 10, put("a", 1), applied(false)),
		op(1, 5, 15, get("a"), found(99)), // 99 was never written
	}
	if r := check(t, h); r != porcupine.Illegal {
		t.Fatalf("a get of a value never written: %s, want Illegal", r)
	}
}

func TestStaleReadRejected(t *testing.T) {
	// put(2) completed before the get started: the get cannot see 1 any more.
	h := []porcupine.Operation{
		op(0, 0, 1, put("a", 1), applied(false)),
		op(0, 2, 3, put("a", 2), applied(true)),
		op(1, 4, 5, get("a"), found(1)),
	}
	if r := check(t, h); r != porcupine.Illegal {
		t.Fatalf("a stale read: %s, want Illegal", r)
	}
}

func TestLostAddRejected(t *testing.T) {
	// Two concurrent adds of 1 cannot both return 1.
	h := []porcupine.Operation{
		op(0, 0, 10, add("a", 1), found(1)),
		op(1, 0, 10, add("a", 1), found(1)),
	}
	if r := check(t, h); r != porcupine.Illegal {
		t.Fatalf("a lost update: %s, want Illegal", r)
	}
}

func TestDoubleCasRejected(t *testing.T) {
	// Two compare_and_swaps from the same expected value cannot both succeed.
	h := []porcupine.Operation{
		op(0, 0, 1, put("a", 1), applied(false)),
		op(1, 2, 10, casIn("a", 1, 2), applied(true)),
		op(2, 2, 10, casIn("a", 1, 3), applied(true)),
	}
	if r := check(t, h); r != porcupine.Illegal {
		t.Fatalf("two successful cas from one value: %s, want Illegal", r)
	}
}

func TestPartitionsAreIndependentButEachChecked(t *testing.T) {
	// Key b is fine, key a is not: the whole history is illegal.
	h := []porcupine.Operation{
		op(0, 0, 1, put("b", 1), applied(false)),
		op(1, 2, 3, get("b"), found(1)),
		op(0, 4, 5, put("a", 1), applied(false)),
		op(1, 6, 7, get("a"), absent()),
	}
	if r := check(t, h); r != porcupine.Illegal {
		t.Fatalf("key a reads absent after a completed put: %s, want Illegal", r)
	}
}

func TestKilledOperationMayOrMayNotApply(t *testing.T) {
	// A killed put (pending, return +inf) may be seen ...
	seen := []porcupine.Operation{
		op(0, 0, 1, put("a", 1), applied(false)),
		op(1, 2, Infinity, put("a", 2), Output{}),
		op(0, 10, 11, get("a"), found(2)),
		op(0, 12, 13, get("a"), found(2)),
	}
	if r := check(t, seen); r != porcupine.Ok {
		t.Fatalf("a killed put observed: %s", r)
	}
	// ... or never seen ...
	unseen := []porcupine.Operation{
		op(0, 0, 1, put("a", 1), applied(false)),
		op(1, 2, Infinity, put("a", 2), Output{}),
		op(0, 10, 11, get("a"), found(1)),
		op(0, 12, 13, get("a"), found(1)),
	}
	if r := check(t, unseen); r != porcupine.Ok {
		t.Fatalf("a killed put never applied: %s", r)
	}
	// ... or seen late (applied by recovery), but it cannot be undone once seen,
	flicker := []porcupine.Operation{
		op(0, 0, 1, put("a", 1), applied(false)),
		op(1, 2, Infinity, put("a", 2), Output{}),
		op(0, 10, 11, get("a"), found(2)),
		op(0, 12, 13, get("a"), found(1)),
	}
	if r := check(t, flicker); r != porcupine.Illegal {
		t.Fatalf("a killed put seen, then gone: %s, want Illegal", r)
	}
	// and it cannot take effect before it was invoked.
	early := []porcupine.Operation{
		op(0, 0, 1, put("a", 1), applied(false)),
		op(0, 2, 3, get("a"), found(2)),
		op(1, 5, Infinity, put("a", 2), Output{}),
	}
	if r := check(t, early); r != porcupine.Illegal {
		t.Fatalf("a killed put seen before its invocation: %s, want Illegal", r)
	}
}

// writeLogs writes worker logs into a fresh directory.
func writeLogs(t *testing.T, logs map[string]string) string {
	t.Helper()
	dir := t.TempDir()
	for name, text := range logs {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

func TestParseLogs(t *testing.T) {
	dir := writeLogs(t, map[string]string{
		"w0.00000.lin": "W 0 0 1\nC 10 put k0 5\nR 20 ins\nC 30 cas k0 5 -\nR 40 1\nC 50 add k0 3\n\x00\x00\x00",
		"w1.00000.lin": "W 1 0 2\nC 15 get k0\nR 25 5\nC 35 swap k0 7\nR 45 -\nC 55 get k0\nR 6", // torn
	})
	h, err := LoadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	if len(h.Clients) != 2 || len(h.Keys) != 1 || h.Len() != 5 { // the pending get is dropped
		t.Fatalf("parsed %d clients, keys %v, %d operations", len(h.Clients), h.Keys, h.Len())
	}
	ops := h.Ops(0)
	var pending []porcupine.Operation
	for _, op := range ops {
		if op.Return == Infinity {
			pending = append(pending, op)
		}
	}
	if len(pending) != 1 || pending[0].Input.(Input).Op != "add" || !pending[0].Output.(Output).Unknown {
		t.Fatalf("the killed add is not the one pending operation: %+v", pending)
	}
	if r := check(t, ops); r != porcupine.Ok {
		t.Fatalf("parsed history: %s", r)
	}
	for _, bad := range []string{
		"W 0 0 1\nC 10 frob k0\n",
		"W 0 0 1\nR 10 1\n",
		"W 0 0 1\nC 10 get k0\nC 20 get k0\n",
		"W 0 0 1\nC 10 put k0 x\n",
		"W 0 0 1\nC 10 put k0 1\nR 5 ins\n",
	} {
		if _, err := LoadDir(writeLogs(t, map[string]string{"w.lin": bad})); err == nil {
			t.Errorf("malformed log accepted: %q", bad)
		}
	}
}

// TestBinaryFailsOnCorruptedHistory runs the real command on a history whose get
// returns a value never written, and on the same history made consistent.
func TestBinaryFailsOnCorruptedHistory(t *testing.T) {
	exe := filepath.Join(t.TempDir(), "lincheck")
	if out, err := exec.Command("go", "build", "-o", exe, ".").CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	good := map[string]string{
		"w0.lin": "W 0 0 1\nC 10 put k0 5\nR 20 ins\nC 30 add k0 2\nR 40 7\n",
		"w1.lin": "W 1 0 2\nC 15 get k0\nR 25 5\nC 45 get k0\nR 50 7\nC 60 take k1\n",
	}
	dir := writeLogs(t, good)
	if out, err := exec.Command(exe, dir).CombinedOutput(); err != nil {
		t.Fatalf("a good history rejected: %v\n%s", err, out)
	}
	good["w1.lin"] = strings.Replace(good["w1.lin"], "R 50 7", "R 50 6", 1)
	dir = writeLogs(t, good)
	out, err := exec.Command(exe, "-viz", filepath.Join(dir, "viz.html"), dir).CombinedOutput()
	ee, ok := err.(*exec.ExitError)
	if !ok || ee.ExitCode() != 1 {
		t.Fatalf("a corrupted history: %v, want exit status 1\n%s", err, out)
	}
	if !strings.Contains(string(out), "NOT LINEARIZABLE: key k0") {
		t.Fatalf("no report of key k0:\n%s", out)
	}
	if _, err := os.Stat(filepath.Join(dir, "viz-k0.html")); err != nil {
		t.Fatalf("no visualization written: %v\n%s", err, out)
	}
}

// Fixed-size maps: has and update.

func has(k string) Input          { return Input{Op: "has", Key: k} }
func upd(k string, a int64) Input { return Input{Op: "upd", Key: k, A: a, HasA: true} }
func updRemove(k string) Input    { return Input{Op: "upd", Key: k} }
func del(k string) Input          { return Input{Op: "del", Key: k} }
func ins(k string, v int64) Input { return Input{Op: "ins", Key: k, A: v} }
func pending(client int, call int64, in Input) porcupine.Operation {
	return op(client, call, Infinity, in, Output{})
}

func TestFixedSequentialSpecification(t *testing.T) {
	h := []porcupine.Operation{
		op(0, 0, 1, has("a"), applied(false)),
		op(0, 2, 3, updRemove("a"), absent()), // f(absent) = remove: stays absent
		op(0, 4, 5, has("a"), applied(false)),
		op(0, 6, 7, upd("a", 12), found(12)), // f(absent) = 12
		op(0, 8, 9, has("a"), applied(true)),
		op(0, 10, 11, upd("a", 10), found(12^10)), // f(c) = c ^ 10
		op(0, 12, 13, get("a"), found(6)),
		op(0, 14, 15, add("a", 4), found(10)),
		op(0, 16, 17, updRemove("a"), absent()), // f(c) = remove
		op(0, 18, 19, get("a"), absent()),
	}
	if r := check(t, h); r != porcupine.Ok {
		t.Fatalf("a correct sequential history: %s", r)
	}
}

func TestFixedCorruptionsRejected(t *testing.T) {
	for name, h := range map[string][]porcupine.Operation{
		"has sees a key removed before it started": {
			op(0, 0, 1, put("a", 1), applied(false)),
			op(0, 2, 3, del("a"), applied(true)),
			op(1, 4, 5, has("a"), applied(true)),
		},
		"update returns a value its function cannot give": {
			op(0, 0, 1, put("a", 12), applied(false)),
			op(0, 2, 3, upd("a", 10), found(22)),
		},
		"two concurrent updates both from one value (a lost update)": {
			op(0, 0, 1, put("a", 12), applied(false)),
			op(1, 2, 10, upd("a", 1), found(13)),
			op(2, 2, 10, upd("a", 2), found(14)),
		},
		"an update that removed, then the old value read": {
			op(0, 0, 1, put("a", 12), applied(false)),
			op(0, 2, 3, updRemove("a"), absent()),
			op(1, 4, 5, get("a"), found(12)),
		},
		"a killed update seen, then undone": {
			op(0, 0, 1, put("a", 12), applied(false)),
			pending(1, 2, upd("a", 1)),
			op(0, 10, 11, get("a"), found(13)),
			op(0, 12, 13, get("a"), found(12)),
		},
	} {
		if r := check(t, h); r != porcupine.Illegal {
			t.Errorf("%s: %s, want Illegal", name, r)
		}
	}
}

// Maps with UIDs.

func uidOf(k string) Input                   { return Input{Op: "uid", Key: k} }
func putu(k string, v int64) Input           { return Input{Op: "putu", Key: k, A: v} }
func uget(k string, u uint64) Input          { return Input{Op: "uget", Key: k, U: u} }
func uput(k string, u uint64, v int64) Input { return Input{Op: "uput", Key: k, U: u, A: v} }
func uadd(k string, u uint64, d int64) Input { return Input{Op: "uadd", Key: k, U: u, A: d} }
func uupd(k string, u uint64, a int64) Input {
	return Input{Op: "uupd", Key: k, U: u, A: a, HasA: true}
}
func udel(k string, u uint64) Input { return Input{Op: "udel", Key: k, U: u} }
func ukey(k string, u uint64) Input { return Input{Op: "ukey", Key: k, U: u} }
func handle(u uint64) Output        { return Output{Ok: true, U: u} }
func inserted(u uint64) Output      { return Output{U: u} }
func replaced(u uint64) Output      { return Output{Ok: true, U: u} }
func stale() Output                 { return Output{Stale: true} }
func ok() Output                    { return Output{Ok: true} }

const u1, u2 = 1<<48 | 7, 2<<48 | 7 // one table entry, two generations

func TestUidSequentialSpecification(t *testing.T) {
	h := []porcupine.Operation{
		op(0, 0, 1, uidOf("a"), absent()),
		op(0, 2, 3, putu("a", 5), inserted(u1)),
		op(0, 4, 5, uidOf("a"), handle(u1)),
		op(0, 6, 7, uget("a", u1), found(5)),
		op(0, 8, 9, uput("a", u1, 6), ok()),
		op(0, 10, 11, uadd("a", u1, 2), found(8)),
		op(0, 12, 13, uupd("a", u1, 3), found(8^3)),
		op(0, 14, 15, ukey("a", u1), ok()),
		op(0, 16, 17, putu("a", 9), replaced(u1)), // same incarnation, same handle
		op(0, 18, 19, udel("a", u1), found(9)),
		op(0, 20, 21, uget("a", u1), stale()), // removed: stale ...
		op(0, 22, 23, ins("a", 10), applied(true)),
		op(0, 24, 25, uget("a", u1), stale()), // ... for ever, even once the key is back
		op(0, 26, 27, ukey("a", u1), stale()),
		op(0, 28, 29, uidOf("a"), handle(u2)), // the new incarnation's UID
		op(0, 30, 31, uget("a", u2), found(10)),
		op(0, 32, 33, Input{Op: "uupd", Key: "a", U: u2}, absent()), // update_by_uid removing
		op(0, 34, 35, uput("a", u2, 1), stale()),
		op(0, 36, 37, get("a"), absent()),
	}
	if r := check(t, h); r != porcupine.Ok {
		t.Fatalf("a correct sequential history: %s", r)
	}
}

func TestUidConcurrencyAccepted(t *testing.T) {
	// A by-UID read overlapping the key's removal may see it or find the handle stale.
	for _, out := range []Output{found(5), stale()} {
		h := []porcupine.Operation{
			op(0, 0, 1, putu("a", 5), inserted(u1)),
			op(0, 2, 10, del("a"), applied(true)),
			op(0, 11, 12, ins("a", 6), applied(true)),
			op(1, 5, 15, uget("a", u1), out),
		}
		if r := check(t, h); r != porcupine.Ok {
			t.Fatalf("uget overlapping a remove, returning %+v: %s", out, r)
		}
	}
	// A killed remove_by_uid may have applied or not.
	for _, out := range []Output{found(5), absent()} {
		h := []porcupine.Operation{
			op(0, 0, 1, putu("a", 5), inserted(u1)),
			pending(0, 2, udel("a", u1)),
			op(1, 10, 11, get("a"), out),
		}
		if r := check(t, h); r != porcupine.Ok {
			t.Fatalf("a killed udel, then get returning %+v: %s", out, r)
		}
	}
	// The UID of an incarnation nobody asked about stays unknown: a later one may
	// have any UID not retired.
	h := []porcupine.Operation{
		op(0, 0, 1, put("a", 5), applied(false)),
		op(0, 2, 3, del("a"), applied(true)),
		op(0, 4, 5, putu("a", 6), inserted(u1)),
	}
	if r := check(t, h); r != porcupine.Ok {
		t.Fatalf("a first UID learned after an unobserved incarnation: %s", r)
	}
}

func TestUidCorruptionsRejected(t *testing.T) {
	learn := op(0, 0, 1, putu("a", 5), inserted(u1))
	for name, h := range map[string][]porcupine.Operation{
		"an old handle reads the key's next incarnation": {
			learn,
			op(0, 2, 3, del("a"), applied(true)),
			op(0, 4, 5, ins("a", 6), applied(true)),
			op(0, 6, 7, uget("a", u1), found(6)),
		},
		"an old handle writes the key's next incarnation": {
			learn,
			op(0, 2, 3, del("a"), applied(true)),
			op(0, 4, 5, ins("a", 6), applied(true)),
			op(0, 6, 7, uput("a", u1, 7), ok()),
		},
		"a handle works on a removed key": {
			learn,
			op(0, 2, 3, del("a"), applied(true)),
			op(0, 4, 5, uadd("a", u1, 1), found(1)),
		},
		"a removed key's handle names a key": {
			learn,
			op(0, 2, 3, udel("a", u1), found(5)),
			op(0, 4, 5, ukey("a", u1), ok()),
		},
		"a live handle reported stale": {
			learn,
			op(0, 2, 3, uput("a", u1, 6), ok()),
			op(0, 4, 5, uget("a", u1), stale()),
		},
		"a handle names another key": {
			learn,
			op(0, 2, 3, ukey("a", u1), applied(false)),
		},
		"the next incarnation gets the old UID back": {
			learn,
			op(0, 2, 3, del("a"), applied(true)),
			op(0, 4, 5, ins("a", 6), applied(true)),
			op(0, 6, 7, uidOf("a"), handle(u1)),
		},
		"putu inserting gets the old UID back": {
			learn,
			op(0, 2, 3, del("a"), applied(true)),
			op(0, 4, 5, putu("a", 6), inserted(u1)),
		},
		"the UID changes while the key stays": {
			learn,
			op(0, 2, 3, put("a", 6), applied(true)),
			op(0, 4, 5, uidOf("a"), handle(u2)),
		},
		"putu replacing returns another UID": {
			learn,
			op(0, 2, 3, putu("a", 6), replaced(u2)),
		},
		"uid of an absent key": {
			learn,
			op(0, 2, 3, del("a"), applied(true)),
			op(0, 4, 5, uidOf("a"), handle(u2)),
		},
		"uid finds nothing on a present key": {
			learn,
			op(0, 2, 3, uidOf("a"), absent()),
		},
		"a lost by-UID add": {
			learn,
			op(0, 2, 10, uadd("a", u1, 1), found(6)),
			op(1, 2, 10, add("a", 1), found(6)),
		},
		"by-UID read of a value never written": {
			learn,
			op(0, 2, 3, uget("a", u1), found(99)),
		},
		"by-UID update from a stale value": {
			learn,
			op(0, 2, 3, uput("a", u1, 6), ok()),
			op(0, 4, 5, uupd("a", u1, 1), found(5^1)),
		},
		"a killed by-UID write through a stale handle seen": {
			learn,
			op(0, 2, 3, del("a"), applied(true)),
			pending(0, 4, uput("a", u1, 77)),
			op(1, 10, 11, get("a"), found(77)),
		},
	} {
		if r := check(t, h); r != porcupine.Illegal {
			t.Errorf("%s: %s, want Illegal", name, r)
		}
	}
}

func TestByUidWriteToAnotherKeyRejected(t *testing.T) {
	// A write through a's handle that landed on b: b's history shows a value nobody
	// wrote to b (and a's, a write that did not happen).
	h := []porcupine.Operation{
		op(0, 0, 1, putu("a", 5), inserted(u1)),
		op(1, 0, 1, put("b", 6), applied(false)),
		op(0, 2, 3, uput("a", u1, 7), ok()),
		op(1, 4, 5, get("b"), found(7)),
	}
	if r := check(t, h); r != porcupine.Illegal {
		t.Fatalf("a by-UID write seen on another key: %s, want Illegal", r)
	}
}

func TestParseNewOps(t *testing.T) {
	dir := writeLogs(t, map[string]string{
		"w0.lin": "W 0 0 1\nC 10 putu k0 5\nR 20 ins:281474976710663\nC 30 uget k0 281474976710663\nR 40 5\n" +
			"C 50 uupd k0 281474976710663 -\nR 60 -\nC 70 uput k0 281474976710663 3\nR 80 stale\n" +
			"C 90 uid k0\nR 100 -\nC 110 ukey k0 281474976710663\n",
		"w1.lin": "W 1 0 2\nC 10 has k1\nR 20 0\nC 30 upd k1 4\nR 40 4\nC 50 upd k1 -\nR 60 -\nC 70 uid k1\n",
	})
	h, err := LoadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	// Pending pure reads (ukey, uid) are dropped.
	if len(h.Keys) != 2 || h.Len() != 8 {
		t.Fatalf("parsed keys %v, %d operations", h.Keys, h.Len())
	}
	ops := h.Ops(0)
	if in, out := ops[0].Input.(Input), ops[0].Output.(Output); in.Op != "putu" || out.Ok || out.U != u1 {
		t.Fatalf("putu parsed as %+v -> %+v", in, out)
	}
	if in := ops[1].Input.(Input); in.Op != "uget" || in.U != u1 || in.B != 0 {
		t.Fatalf("uget parsed as %+v", in)
	}
	if in, out := ops[3].Input.(Input), ops[3].Output.(Output); in.Op != "uput" || in.A != 3 || !out.Stale {
		t.Fatalf("uput parsed as %+v -> %+v", in, out)
	}
	for i := range h.Keys {
		if r := check(t, h.Ops(i)); r != porcupine.Ok {
			t.Fatalf("key %s: %s", h.Keys[i], r)
		}
	}
	const learn = "W 0 0 1\nC 10 putu k0 5\nR 20 ins:7\n"
	for _, bad := range []map[string]string{
		{"w.lin": "W 0 0 1\nC 10 uget k0 7\nR 20 5\n"},                   // a handle never learned
		{"w.lin": learn + "C 30 uget k1 7\nR 40 5\n"},                    // learned on another key
		{"w0.lin": learn, "w1.lin": "W 1 0 2\nC 30 uget k0 7\nR 40 5\n"}, // by another process
		{"w.lin": "W 0 0 1\nC 10 putu k0 5\nC 30 uget k0 7\n"},           // its putu never returned
		{"w.lin": "W 0 0 1\nC 10 putu k0 5\nR 20 ins\n"},                 // putu without its UID
		{"w.lin": "W 0 0 1\nC 10 put k0 5\nR 20 ins:7\n"},                // put with one
		{"w.lin": "W 0 0 1\nC 10 putu k0 5\nR 20 ins:0\n"},               // UID 0
		{"w.lin": "W 0 0 1\nC 10 get k0\nR 20 stale\n"},                  // stale by key
		{"w.lin": learn + "C 30 uput k0 7\nR 40 ok\n"},                   // uput without a value
		{"w.lin": learn + "C 30 uput k0 7 1\nR 40 1\n"},                  // uput's outcome is ok
		{"w.lin": learn + "C 30 ukey k0 7\nR 40 k0\n"},                   // ukey's is 0/1
		{"w.lin": "W 0 0 1\nC 10 uid k0\nR 20 x\n"},                      // not a UID
		{"w.lin": "W 0 0 1\nC 10 upd k0 x\n"},                            // not a value
	} {
		if _, err := LoadDir(writeLogs(t, bad)); err == nil {
			t.Errorf("malformed log accepted: %q", bad)
		}
	}
}

// TestBinaryFailsOnOldHandle runs the real command on a history where a handle
// outlives its key's removal and reads the next incarnation, and on the same history
// with the read reported stale.
func TestBinaryFailsOnOldHandle(t *testing.T) {
	exe := filepath.Join(t.TempDir(), "lincheck")
	if out, err := exec.Command("go", "build", "-o", exe, ".").CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	logs := map[string]string{
		"w0.lin": "W 0 0 1\nC 10 putu k0 5\nR 20 ins:281474976710663\nC 30 del k0\nR 40 1\n" +
			"C 50 putu k0 6\nR 60 ins:562949953421319\nC 70 uget k0 281474976710663\nR 80 stale\n" +
			"C 90 uget k0 562949953421319\nR 100 6\n",
	}
	dir := writeLogs(t, logs)
	out, err := exec.Command(exe, dir).CombinedOutput()
	if err != nil {
		t.Fatalf("a good history rejected: %v\n%s", err, out)
	}
	if !strings.Contains(string(out), "by UID: 2 (1 stale)") {
		t.Fatalf("no by-UID figures:\n%s", out)
	}
	logs["w0.lin"] = strings.Replace(logs["w0.lin"], "R 80 stale", "R 80 6", 1)
	dir = writeLogs(t, logs)
	out, err = exec.Command(exe, dir).CombinedOutput()
	ee, isExit := err.(*exec.ExitError)
	if !isExit || ee.ExitCode() != 1 || !strings.Contains(string(out), "NOT LINEARIZABLE: key k0") {
		t.Fatalf("an old handle reading a new incarnation: %v, want exit status 1\n%s", err, out)
	}
}

func qop(client int, in QInput, out QOutput, call, ret int64) porcupine.Operation {
	return porcupine.Operation{ClientId: client, Input: in, Output: out, Call: call, Return: ret}
}

func qpush(q, elems string, limit int) QInput {
	return QInput{Push: true, Queue: q, Limit: limit, Elems: elems, N: len(splitElems(elems))}
}

func qpulled(elems string) QOutput {
	return QOutput{Elems: elems, N: len(splitElems(elems))}
}

func TestQueueModelAcceptsFifoAndRejectsReordering(t *testing.T) {
	pull := func(n int) QInput { return QInput{Queue: "w", N: n} }
	fifo := []porcupine.Operation{
		qop(0, qpush("w", "1,2", 0), QOutput{}, 0, 10),
		qop(1, qpush("w", "3", 0), QOutput{}, 20, 30),
		qop(2, pull(2), qpulled("1,2"), 40, 50),
		qop(2, pull(5), qpulled("3"), 60, 70),
		qop(1, pull(1), qpulled(""), 80, 90),
	}
	if !porcupine.CheckOperations(queueModel, fifo) {
		t.Fatal("a FIFO history was rejected")
	}
	reordered := append([]porcupine.Operation{}, fifo...)
	reordered[2] = qop(2, pull(2), qpulled("2,1"), 40, 50)
	if porcupine.CheckOperations(queueModel, reordered) {
		t.Fatal("a reordered pull was accepted")
	}
	twice := append([]porcupine.Operation{}, fifo[:3]...)
	twice = append(twice, qop(1, pull(1), qpulled("1"), 60, 70))
	if porcupine.CheckOperations(queueModel, twice) {
		t.Fatal("an element pulled twice was accepted")
	}
	short := append([]porcupine.Operation{}, fifo[:2]...)
	short = append(short, qop(2, pull(2), qpulled("1"), 40, 50))
	if porcupine.CheckOperations(queueModel, short) {
		t.Fatal("a pull that took fewer than it could was accepted")
	}
}

func TestQueueModelLimitsAndKilledOperations(t *testing.T) {
	full := []porcupine.Operation{
		qop(0, qpush("w", "1,2", 2), QOutput{}, 0, 10),
		qop(0, qpush("w", "3", 2), QOutput{Full: true}, 20, 30),
	}
	if !porcupine.CheckOperations(queueModel, full) {
		t.Fatal("a push refused at the limit was rejected")
	}
	notFull := []porcupine.Operation{qop(0, qpush("w", "1", 2), QOutput{Full: true}, 0, 10)}
	if porcupine.CheckOperations(queueModel, notFull) {
		t.Fatal("a push refused below the limit was accepted")
	}
	// A push cut short by a kill may or may not have taken effect.
	killed := qop(0, qpush("w", "9", 0), QOutput{Unknown: true}, 0, Infinity)
	for _, then := range []QOutput{qpulled("9"), qpulled("")} {
		h := []porcupine.Operation{killed, qop(1, QInput{Queue: "w", N: 1}, then, 10, 20)}
		if !porcupine.CheckOperations(queueModel, h) {
			t.Fatalf("a killed push followed by a pull of %q was rejected", then.Elems)
		}
	}
	h := []porcupine.Operation{killed, qop(1, QInput{Queue: "w", N: 1}, qpulled("8"), 10, 20)}
	if porcupine.CheckOperations(queueModel, h) {
		t.Fatal("an element never pushed was accepted")
	}
}

// Ordered-map transactions: 4 keys (2 per map, 1 account each), accounts at 100.

func oop(client int, in OInput, out OOutput, call, ret int64) porcupine.Operation {
	return porcupine.Operation{ClientId: client, Input: in, Call: call, Output: out, Return: ret}
}

func oxfer(from, to int, amt uint64) OInput {
	return OInput{Kind: "xfer", From: from, To: to, Amt: amt}
}
func oread(keys ...int) OInput  { return OInput{Kind: "read", Keys: keys} }
func ovals(v ...uint64) OOutput { return OOutput{Vals: v} }

func TestOrderedModelTransactionsAreAtomic(t *testing.T) {
	m := orderedModel(4, 1, 100, nil)
	moved := OOutput{Vals: []uint64{100, 100}, Moved: true}
	ok := []porcupine.Operation{
		oop(0, oxfer(0, 2, 30), moved, 0, 10),
		oop(1, oread(0, 1, 2, 3), ovals(70, 0, 130, 0), 20, 30),
		oop(1, OInput{Kind: "put", Key: 3, Val: 9}, OOutput{}, 40, 50),
		oop(0, OInput{Kind: "abort", From: 2, To: 0}, ovals(130, 70), 60, 70),
		oop(1, oread(3, 0), ovals(9, 70), 80, 90),
		oop(0, oxfer(0, 2, 71), OOutput{Vals: []uint64{70, 130}}, 100, 110),
	}
	if !porcupine.CheckOperations(m, ok) {
		t.Fatal("a sequential history of transactions was rejected")
	}
	// A snapshot that saw half a transfer (the debit, not the credit).
	half := []porcupine.Operation{
		oop(0, oxfer(0, 2, 30), moved, 0, 10),
		oop(1, oread(0, 2), ovals(70, 100), 5, 30),
	}
	if porcupine.CheckOperations(m, half) {
		t.Fatal("a read of half a transfer was accepted")
	}
	// A transfer after an earlier one that read stale balances (a lost update).
	lost := []porcupine.Operation{
		oop(0, oxfer(0, 2, 30), moved, 0, 10),
		oop(1, oxfer(0, 2, 10), OOutput{Vals: []uint64{100, 100}, Moved: true}, 20, 30),
	}
	if porcupine.CheckOperations(m, lost) {
		t.Fatal("a lost update was accepted")
	}
	// A read that returns, then a later read sees an older state (not strict).
	stale := []porcupine.Operation{
		oop(0, oxfer(0, 2, 30), moved, 0, 10),
		oop(1, oread(0), ovals(100), 20, 30),
	}
	if porcupine.CheckOperations(m, stale) {
		t.Fatal("a read of a state older than a completed commit was accepted")
	}
	// An aborted transaction's writes are never seen.
	aborted := []porcupine.Operation{
		oop(0, OInput{Kind: "abort", From: 0, To: 2}, ovals(100, 100), 0, 10),
		oop(1, oread(0), ovals(70), 20, 30),
	}
	if porcupine.CheckOperations(m, aborted) {
		t.Fatal("a value no commit wrote was accepted")
	}
}

func TestOrderedModelKilledTransactionsMayOrMayNotCommit(t *testing.T) {
	m := orderedModel(4, 1, 100, nil)
	killed := oop(0, oxfer(0, 2, 30), OOutput{Unknown: true}, 0, Infinity)
	for _, seen := range [][]uint64{{100, 100}, {70, 130}} {
		h := []porcupine.Operation{killed, oop(1, oread(0, 2), ovals(seen...), 10, 20)}
		if !porcupine.CheckOperations(m, h) {
			t.Fatalf("a killed transfer then a read of %v was rejected", seen)
		}
	}
	// Committed, it committed whole.
	h := []porcupine.Operation{killed, oop(1, oread(0, 2), ovals(70, 100), 10, 20)}
	if porcupine.CheckOperations(m, h) {
		t.Fatal("half a killed transfer was accepted")
	}
	// Once seen, it stays.
	h = []porcupine.Operation{
		killed,
		oop(1, oread(0), ovals(70), 10, 20),
		oop(1, oread(0), ovals(100), 30, 40),
	}
	if porcupine.CheckOperations(m, h) {
		t.Fatal("a killed transfer seen, then unseen, was accepted")
	}
}

func TestOrderedLogsParseAndTheBinaryRejectsCorruption(t *testing.T) {
	good := map[string]string{
		"w0.olin": "W 1 0 0 11\nC 10 xfer 0 2 30\nR 20 100 100 ok\nC 30 put 3 7\nR 40 ok\nC 50 xfer 2 0 500\n",
		"w1.olin": "W 2 1 0 12\nC 25 read 0,2\nR 28 70,130\nC 45 abort 0 2\nR 48 70 130\nC 60 read 0,1,2,3\nR 7",
	}
	dir := writeLogs(t, good)
	var ops []porcupine.Operation
	for i, name := range []string{"w0.olin", "w1.olin"} {
		if err := parseOLog(filepath.Join(dir, name), i, 4, func(op porcupine.Operation) { ops = append(ops, op) }); err != nil {
			t.Fatal(err)
		}
	}
	// The torn read of w1 had no complete call line after its R: it is dropped, and the
	// killed transfer of w0 is pending.
	if len(ops) != 6 || ops[2].Return != Infinity || !ops[2].Output.(OOutput).Unknown {
		t.Fatalf("parsed %d operations: %+v", len(ops), ops)
	}
	for _, bad := range []string{
		"W 1 0 0 1\nC 10 xfer 0 9 1\n",
		"W 1 0 0 1\nC 10 frob 0\n",
		"W 1 0 0 1\nC 10 read 0\nR 20 1,2\n",
		"W 1 0 0 1\nC 10 xfer 0 1 5\nR 20 1 2 maybe\n",
		"W 1 0 0 1\nC 10 put 0 1\nR 5 ok\n",
	} {
		err := parseOLog(filepath.Join(writeLogs(t, map[string]string{"w.olin": bad}), "w.olin"), 0, 4, func(porcupine.Operation) {})
		if err == nil {
			t.Errorf("malformed log accepted: %q", bad)
		}
	}
	exe := filepath.Join(t.TempDir(), "lincheck")
	if out, err := exec.Command("go", "build", "-o", exe, ".").CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	args := []string{"-ordered", "-keys", "4", "-accounts", "1", "-initial", "100"}
	if out, err := exec.Command(exe, append(args, dir)...).CombinedOutput(); err != nil {
		t.Fatalf("a good history rejected: %v\n%s", err, out)
	}
	// A transaction longer than -max-wait fails the check (exit status 3).
	out, err := exec.Command(exe, append(append(args[:len(args):len(args)], "-max-wait", "5ns"), dir)...).CombinedOutput()
	if ee, ok := err.(*exec.ExitError); !ok || ee.ExitCode() != 3 {
		t.Fatalf("a transaction over -max-wait: %v, want exit status 3\n%s", err, out)
	}
	// The same history from another starting state (a later round) is not explained.
	other := append(args[:len(args):len(args)], "-init", "100,0,101,0")
	if _, err := exec.Command(exe, append(other, dir)...).CombinedOutput(); err == nil {
		t.Fatal("a history checked from a starting state that does not explain it was accepted")
	}
	good["w1.olin"] = strings.Replace(good["w1.olin"], "R 28 70,130", "R 28 70,100", 1)
	dir = writeLogs(t, good)
	out, err = exec.Command(exe, append(args, dir)...).CombinedOutput()
	ee, ok := err.(*exec.ExitError)
	if !ok || ee.ExitCode() != 1 || !strings.Contains(string(out), "NOT LINEARIZABLE") {
		t.Fatalf("a history with a half transfer seen: %v, want exit status 1\n%s", err, out)
	}
}

// Hash-map transactions (-txn): 3 accounts at 100, transfers locked (xfer) and
// optimistic (opt), consistent multi-key reads.

func topt(from, to int, amt uint64) OInput {
	return OInput{Kind: "opt", From: from, To: to, Amt: amt}
}

func TestTxnModelRejectsWhatNoSerialOrderExplains(t *testing.T) {
	m := orderedModel(3, 0, 0, []uint64{100, 100, 100})
	moved := func(a, b uint64) OOutput { return OOutput{Vals: []uint64{a, b}, Moved: true} }
	good := []porcupine.Operation{
		oop(0, oxfer(0, 1, 30), moved(100, 100), 0, 10),
		oop(1, topt(1, 2, 50), moved(130, 100), 5, 20), // overlaps: after the xfer
		oop(2, oread(0, 1, 2), ovals(70, 80, 150), 25, 30),
		oop(0, topt(0, 2, 71), OOutput{Vals: []uint64{70, 150}}, 40, 50), // too little: no move
		oop(2, oread(2, 0), ovals(150, 70), 60, 70),
		oop(1, OInput{Kind: "ver", From: 1, To: 0, Amt: 80}, moved(80, 70), 80, 90),
		oop(2, oread(0, 1), ovals(150, 0), 100, 110),
	}
	if !porcupine.CheckOperations(m, good) {
		t.Fatal("a serializable history of locked and optimistic transfers was rejected")
	}
	for name, h := range map[string][]porcupine.Operation{
		// A consistent read that saw the debit of a transfer and not its credit.
		"a read of half a transfer": {
			oop(0, oxfer(0, 1, 30), moved(100, 100), 0, 10),
			oop(1, oread(0, 1, 2), ovals(70, 100, 100), 5, 30),
		},
		// An optimistic commit on balances that had changed before it (a lost update).
		"an optimistic commit on stale reads": {
			oop(0, oxfer(0, 1, 30), moved(100, 100), 0, 10),
			oop(1, topt(0, 2, 10), moved(100, 100), 20, 30),
		},
		// Two concurrent transfers both read the balance before the other: no order.
		"two transfers each before the other": {
			oop(0, oxfer(0, 1, 30), moved(100, 100), 0, 10),
			oop(1, topt(0, 2, 20), moved(100, 100), 0, 10),
		},
		// A condition that failed although the balance sufficed.
		"a transfer refused with money enough": {
			oop(0, oxfer(0, 1, 30), OOutput{Vals: []uint64{100, 100}}, 0, 10),
		},
		// A transfer watching a version that committed on a value changed before it.
		"a versioned commit on a stale value": {
			oop(0, oxfer(1, 0, 30), moved(100, 100), 0, 10),
			oop(1, OInput{Kind: "ver", From: 1, To: 2, Amt: 5}, moved(100, 100), 20, 30),
		},
		// Strictness: a read after a completed commit sees it.
		"a read older than a completed commit": {
			oop(0, topt(0, 1, 30), moved(100, 100), 0, 10),
			oop(1, oread(0), ovals(100), 20, 30),
		},
	} {
		if porcupine.CheckOperations(m, h) {
			t.Errorf("%s: accepted", name)
		}
	}
	// A transfer killed in flight committed whole or not at all, and once seen, stays.
	killed := oop(0, topt(0, 1, 30), OOutput{Unknown: true}, 0, Infinity)
	for _, seen := range [][]uint64{{100, 100}, {70, 130}} {
		if !porcupine.CheckOperations(m, []porcupine.Operation{killed, oop(1, oread(0, 1), ovals(seen...), 10, 20)}) {
			t.Errorf("a killed transfer then a read of %v was rejected", seen)
		}
	}
	if porcupine.CheckOperations(m, []porcupine.Operation{killed, oop(1, oread(0, 1), ovals(70, 100), 10, 20)}) {
		t.Error("half a killed transfer was accepted")
	}
	if porcupine.CheckOperations(m, []porcupine.Operation{killed,
		oop(1, oread(1), ovals(130), 10, 20), oop(1, oread(1), ovals(100), 30, 40)}) {
		t.Error("a killed transfer seen, then unseen, was accepted")
	}
}

func TestTxnBinaryAcceptsAndRejects(t *testing.T) {
	exe := filepath.Join(t.TempDir(), "lincheck")
	if out, err := exec.Command("go", "build", "-o", exe, ".").CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	good := map[string]string{
		"w0.tlin":    "W 1 0 0 11\nC 10 xfer 0 2 30\nR 20 100 100 ok\nC 30 ver 1 0 500\nR 40 100 70 no\nC 50 opt 2 1 5\n",
		"w1.tlin":    "W 2 1 0 12\nC 25 read 0,2\nR 28 70,130\nC 45 xfer 2 1 30\nR 48 130 100 ok\nC 60 read 0,1\nR 7",
		"final.tlin": "W 99 99 0 13\nC 100 read 0,1,2\nR 110 70,135,95\n",
	}
	dir := writeLogs(t, good)
	args := []string{"-txn", "-keys", "3", "-initial", "100"}
	out, err := exec.Command(exe, append(args, dir)...).CombinedOutput()
	if err != nil {
		t.Fatalf("a good history rejected: %v\n%s", err, out)
	}
	if !strings.Contains(string(out), "lincheck: txn: totals: ops=6 xfer=2 opt=0 ver=1 moved=2 abort=0 put=0 read=2 pending=2") {
		t.Fatalf("wrong counts:\n%s", out)
	}
	// The killed optimistic transfer (w0's last) must have committed: without it the
	// final read is not explained.
	noKill := map[string]string{}
	for k, v := range good {
		noKill[k] = v
	}
	noKill["w0.tlin"] = strings.TrimSuffix(noKill["w0.tlin"], "C 50 opt 2 1 5\n")
	if _, err := exec.Command(exe, append(args, writeLogs(t, noKill))...).CombinedOutput(); err == nil {
		t.Fatal("a final read explained only by a transfer that never ran was accepted")
	}
	// The same history from other starting values is not explained.
	if _, err := exec.Command(exe, append([]string{"-txn", "-keys", "3", "-init", "100,100,99"}, dir)...).CombinedOutput(); err == nil {
		t.Fatal("a history checked from a starting state that does not explain it was accepted")
	}
	// A read of half a transfer: exit status 1, with a visualization.
	good["w1.tlin"] = strings.Replace(good["w1.tlin"], "R 28 70,130", "R 28 70,100", 1)
	dir = writeLogs(t, good)
	out, err = exec.Command(exe, append(args, dir)...).CombinedOutput()
	ee, ok := err.(*exec.ExitError)
	if !ok || ee.ExitCode() != 1 || !strings.Contains(string(out), "NOT LINEARIZABLE: txn transactions") {
		t.Fatalf("a history with a half transfer seen: %v, want exit status 1\n%s", err, out)
	}
	if _, err := os.Stat(filepath.Join(dir, "lin-txn.html")); err != nil {
		t.Fatalf("no visualization written: %v\n%s", err, out)
	}
	// Bad input: exit status 4.
	for _, a := range [][]string{{"-txn", dir}, {"-txn", "-keys", "3", "-init", "1,2", dir}, {"-txn", "-keys", "3", t.TempDir()}} {
		_, err := exec.Command(exe, a...).CombinedOutput()
		if ee, ok := err.(*exec.ExitError); !ok || ee.ExitCode() != 4 {
			t.Errorf("lincheck %v: %v, want exit status 4", a, err)
		}
	}
}
