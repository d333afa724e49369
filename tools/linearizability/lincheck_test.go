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
