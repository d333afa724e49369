package shoal

import (
	"context"
	"errors"
	"os"
	"os/exec"
	"syscall"
	"testing"
	"time"
)

func TestQueues(t *testing.T) {
	s := openStore(t, nil)
	if _, err := s.Queues("jobs", nil); !errors.Is(err, ErrNotFound) {
		t.Fatalf("missing set: %v", err)
	}
	qs, err := s.Queues("jobs", &QueueOptions{ElementSize: 64, Elements: 4, Queues: []string{"work"}, Limits: map[string]uint64{"work": 3}})
	if err != nil {
		t.Fatal(err)
	}
	defer qs.Close()
	free := must[int](t)(qs.Queue("free"))
	work := must[int](t)(qs.Queue("work"))
	if _, err := qs.Queue("nope"); !errors.Is(err, ErrNotFound) {
		t.Fatalf("unknown queue: %v", err)
	}
	if n := must[int](t)(qs.Len(free)); n != 4 {
		t.Fatalf("free holds %d", n)
	}
	// Write in place, push, pull it back elsewhere: the bytes travel by reference.
	e := must[*Element](t)(qs.Pull(free, 0))
	if len(e.Data) != 64 || e.From != free {
		t.Fatalf("element %+v", e)
	}
	copy(e.Data, "hello")
	if err := qs.Push(work, e); err != nil {
		t.Fatal(err)
	}
	got := must[*Element](t)(qs.Pull(work, time.Second))
	if string(got.Data[:5]) != "hello" || got.Index != e.Index {
		t.Fatalf("pulled %q #%d", got.Data[:5], got.Index)
	}
	if _, err := qs.Pull(work, 10*time.Millisecond); !errors.Is(err, ErrEmpty) {
		t.Fatalf("empty queue: %v", err)
	}
	if err := qs.Release(got); err != nil { // back to work, where it came from
		t.Fatal(err)
	}
	// The depth limit: work holds 1; 3 more would pass 3, so none go.
	rest := must[[]*Element](t)(qs.PullMany(free, 10))
	if len(rest) != 3 {
		t.Fatalf("pulled %d", len(rest))
	}
	if err := qs.PushMany(work, rest); !errors.Is(err, ErrQueueFull) {
		t.Fatalf("past the limit: %v", err)
	}
	if err := qs.PushMany(work, rest[:2]); err != nil {
		t.Fatal(err)
	}
	if err := qs.Push(work, rest[2]); !errors.Is(err, ErrQueueFull) {
		t.Fatalf("past the limit: %v", err)
	}
	if err := qs.Push(free, rest[2]); err != nil {
		t.Fatal(err)
	}
	if err := qs.Push(free, rest[2]); !errors.Is(err, ErrInvalid) {
		t.Fatalf("pushing an element no longer held: %v", err)
	}
	if n := must[int](t)(qs.Move(work, free, 10)); n != 3 {
		t.Fatalf("moved %d", n)
	}
	if n := must[int](t)(qs.Len(free)); n != 4 {
		t.Fatalf("free holds %d", n)
	}
	// The existing set keeps its geometry.
	again := must[*QueueSet](t)(s.Queues("jobs", nil))
	again.Close()
	if _, err := s.Map("jobs", nil); !errors.Is(err, ErrInvalid) {
		t.Fatalf("a map named like a queue set: %v", err)
	}
	if _, err := s.Queues("bad", &QueueOptions{ElementSize: 8, Elements: 1, Limits: map[string]uint64{"x": 1}}); !errors.Is(err, ErrInvalid) {
		t.Fatalf("a limit without its queue: %v", err)
	}
}

// queueHolder is the worker that pulls an element, says so, and waits to be killed.
func queueHolder() error {
	s, err := Open(os.Getenv("SHOAL_GO_STORE"), &Options{Mode: ModeOpenExisting})
	if err != nil {
		return err
	}
	qs, err := s.Queues("held", nil)
	if err != nil {
		return err
	}
	e, err := qs.Pull(0, time.Second)
	if err != nil {
		return err
	}
	copy(e.Data, "mine")
	m, err := s.Map("signals", nil)
	if err != nil {
		return err
	}
	if err := m.Put([]byte("holding"), nil); err != nil {
		return err
	}
	time.Sleep(3 * time.Minute)
	return errors.New("not killed")
}

// A process killed with SIGKILL while it holds an element: Reclaim gives it back.
func TestQueueHolderKilled(t *testing.T) {
	path := storePath(t)
	s := must[*Store](t)(Open(path, nil))
	defer s.Close()
	qs := must[*QueueSet](t)(s.Queues("held", &QueueOptions{ElementSize: 16, Elements: 2}))
	defer qs.Close()
	m := must[*Map](t)(s.Map("signals", nil))
	defer m.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), "SHOAL_GO_WORKER=queue-holder", "SHOAL_GO_STORE="+path)
	cmd.Stdout, cmd.Stderr = os.Stdout, os.Stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(time.Minute)
	for {
		if ok, err := m.Contains([]byte("holding")); err != nil {
			t.Fatal(err)
		} else if ok {
			break
		}
		if time.Now().After(deadline) {
			cmd.Process.Kill()
			t.Fatal("the worker did not pull in a minute")
		}
		time.Sleep(2 * time.Millisecond)
	}
	if n := must[int](t)(qs.Len(0)); n != 1 {
		t.Fatalf("free holds %d while the worker holds one", n)
	}
	if err := cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	_ = cmd.Wait()
	if n := must[int](t)(qs.Reclaim()); n != 1 {
		t.Fatalf("reclaimed %d", n)
	}
	es := must[[]*Element](t)(qs.PullMany(0, 2))
	found := false
	for _, e := range es {
		found = found || string(e.Data[:4]) == "mine"
	}
	if len(es) != 2 || !found {
		t.Fatalf("after the reclaim: %d elements, the worker's among them: %v", len(es), found)
	}
}
