package shoal

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"syscall"
	"testing"
	"time"
)

// The multi-process test re-executes this test binary as its workers: TestMain runs
// the worker instead of the tests when SHOAL_GO_WORKER is set.
func TestMain(m *testing.M) {
	if kind := os.Getenv("SHOAL_GO_WORKER"); kind != "" {
		run := worker
		if kind == "queue-holder" {
			run = queueHolder
		}
		if err := run(); err != nil {
			fmt.Fprintln(os.Stderr, "worker:", err)
			os.Exit(1)
		}
		os.Exit(0)
	}
	os.Exit(m.Run())
}

const (
	counterKeys = 4
	// The victim adds victimUnit where the others add 1, so a total splits exactly into
	// the survivors' count (low 32 bits) and the victim's (high bits): an add of the
	// victim torn by SIGKILL would show in the low bits.
	victimUnit = int64(1) << 32
)

func counterKey(j int) []byte { return []byte(fmt.Sprintf("counter-%d", j)) }
func fixedKey(j int) []byte   { return []byte(fmt.Sprintf("fixed-%02d", j)) }

// worker increments the shared counters three ways: Map.Add, FixedMap.Add and
// Map.Update (optimistic, the Go function run by the library). Survivors do
// SHOAL_GO_N rounds and, halfway, wait for the parent to have killed the victim; the
// victim loops until it is killed, counting each op it completed in its own key.
func worker() error {
	path := os.Getenv("SHOAL_GO_STORE")
	n, _ := strconv.Atoi(os.Getenv("SHOAL_GO_N"))
	victim := os.Getenv("SHOAL_GO_WORKER") == "victim"
	s, err := Open(path, &Options{Mode: ModeOpenExisting})
	if err != nil {
		return err
	}
	defer s.Close()
	m, err := s.Map("counters", nil)
	if err != nil {
		return err
	}
	f, err := s.FixedMap("fixed", 8, 8, nil)
	if err != nil {
		return err
	}
	unit := int64(1)
	if victim {
		unit = victimUnit
		n = 1 << 40
	}
	inc := func(v []byte, present bool) ([]byte, bool) {
		var c int64
		if present {
			c, _ = Int64(v)
		}
		return PutInt64(c + unit), true
	}
	deadline := time.Now().Add(3 * time.Minute)
	for i := 0; i < n; i++ {
		if time.Now().After(deadline) {
			return fmt.Errorf("still running after 3 minutes (round %d)", i)
		}
		j := i % counterKeys
		if !victim && i == n/2 {
			for {
				if ok, err := m.Contains([]byte("victim-killed")); err != nil {
					return err
				} else if ok {
					break
				}
				if time.Now().After(deadline) {
					return fmt.Errorf("the victim was never killed")
				}
				time.Sleep(5 * time.Millisecond)
			}
		}
		if _, err := m.Add(counterKey(j), unit); err != nil {
			return err
		}
		if victim {
			if _, err := m.Add([]byte("victim-add"), 1); err != nil {
				return err
			}
		}
		if _, err := f.Add(fixedKey(j), unit); err != nil {
			return err
		}
		if victim {
			if _, err := m.Add([]byte("victim-fixed"), 1); err != nil {
				return err
			}
		}
		if err := m.Update([]byte(fmt.Sprintf("update-%d", j)), inc); err != nil {
			return err
		}
		if victim {
			if _, err := m.Add([]byte("victim-update"), 1); err != nil {
				return err
			}
		}
	}
	return nil
}

func TestProcessesCountExactlyWithAKill(t *testing.T) {
	const survivors, rounds = 3, 5000
	path := storePath(t)
	s := must[*Store](t)(Open(path, nil))
	defer s.Close()
	m := must[*Map](t)(s.Map("counters", nil))
	defer m.Close()
	f := must[*FixedMap](t)(s.FixedMap("fixed", 8, 8, nil))
	defer f.Close()

	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	start := func(kind string) *exec.Cmd {
		cmd := exec.CommandContext(ctx, os.Args[0], "-test.run=^$")
		cmd.Env = append(os.Environ(), "SHOAL_GO_WORKER="+kind, "SHOAL_GO_STORE="+path,
			"SHOAL_GO_N="+strconv.Itoa(rounds))
		cmd.Stdout, cmd.Stderr = os.Stdout, os.Stderr
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		return cmd
	}
	victim := start("victim")
	var cmds []*exec.Cmd
	for i := 0; i < survivors; i++ {
		cmds = append(cmds, start("survivor"))
	}
	// Kill the victim once it is well into its run (bounded, generous wait).
	deadline := time.Now().Add(2 * time.Minute)
	for {
		v, err := m.Get([]byte("victim-update"))
		if err == nil {
			if n, _ := Int64(v); n >= 50 {
				break
			}
		}
		if time.Now().After(deadline) {
			victim.Process.Kill()
			t.Fatal("the victim made no progress in 2 minutes")
		}
		time.Sleep(2 * time.Millisecond)
	}
	if err := victim.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	_ = victim.Wait()
	if err := m.Put([]byte("victim-killed"), nil); err != nil {
		t.Fatal(err)
	}
	for i, c := range cmds {
		if err := c.Wait(); err != nil {
			t.Fatalf("survivor %d: %v", i, err)
		}
	}

	perKey := func(j int) int64 { // survivors' increments of key j, each way
		n := int64(0)
		for i := 0; i < rounds; i++ {
			if i%counterKeys == j {
				n++
			}
		}
		return n * survivors
	}
	victimDone := func(name string) int64 {
		v, err := m.Get([]byte(name))
		if err != nil {
			t.Fatal(name, err)
		}
		n, _ := Int64(v)
		return n
	}
	// The victim's completed ops per way; the one in flight at the kill may or may not
	// have landed, but whole.
	doneAdd, doneFixed, doneUpdate := victimDone("victim-add"), victimDone("victim-fixed"), victimDone("victim-update")
	checkTotal := func(way string, total int64, done int64) {
		t.Helper()
		survivorsTotal := total & (victimUnit - 1)
		victimTotal := total >> 32
		want := int64(0)
		for j := 0; j < counterKeys; j++ {
			want += perKey(j)
		}
		if survivorsTotal != want {
			t.Errorf("%s: survivors' increments %d, want exactly %d", way, survivorsTotal, want)
		}
		if victimTotal != done && victimTotal != done+1 {
			t.Errorf("%s: the victim's increments %d, it completed %d", way, victimTotal, done)
		}
	}
	sum := func(get func(j int) (int64, error)) int64 {
		var total int64
		for j := 0; j < counterKeys; j++ {
			n, err := get(j)
			if err != nil {
				t.Fatal(err)
			}
			if n&(victimUnit-1) != perKey(j) {
				t.Errorf("key %d: survivors' part %d, want %d", j, n&(victimUnit-1), perKey(j))
			}
			total += n
		}
		return total
	}
	checkTotal("Map.Add", sum(func(j int) (int64, error) {
		v, err := m.Get(counterKey(j))
		if err != nil {
			return 0, err
		}
		return Int64(v)
	}), doneAdd)
	checkTotal("FixedMap.Add", sum(func(j int) (int64, error) {
		v, err := f.Get(fixedKey(j))
		if err != nil {
			return 0, err
		}
		return Int64(v)
	}), doneFixed)
	checkTotal("Map.Update", sum(func(j int) (int64, error) {
		v, err := m.Get([]byte(fmt.Sprintf("update-%d", j)))
		if err != nil {
			return 0, err
		}
		return Int64(v)
	}), doneUpdate)
	t.Logf("victim killed after %d/%d/%d ops", doneAdd, doneFixed, doneUpdate)
	problems, err := s.Check()
	if err != nil || len(problems) > 0 {
		t.Fatalf("store check after the kill: %v %v", err, problems)
	}
}
