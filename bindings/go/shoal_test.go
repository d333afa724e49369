package shoal

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sort"
	"sync"
	"testing"
)

// storePath is a fresh store file in /dev/shm (tmpfs, like production) removed after
// the test.
func storePath(t testing.TB) string {
	t.Helper()
	p := filepath.Join("/dev/shm", fmt.Sprintf("shoal-go-%d-%s.shoal", os.Getpid(), sanitize(t.Name())))
	_ = os.Remove(p)
	t.Cleanup(func() { _ = os.Remove(p) })
	return p
}

func sanitize(s string) string {
	b := []byte(s)
	for i, c := range b {
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '-') {
			b[i] = '_'
		}
	}
	return string(b)
}

func openStore(t testing.TB, opts *Options) *Store {
	t.Helper()
	s, err := Open(storePath(t), opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

func openMap(t testing.TB, s *Store, name string) *Map {
	t.Helper()
	m, err := s.Map(name, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { m.Close() })
	return m
}

func must[T any](t testing.TB) func(T, error) T {
	return func(v T, err error) T {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
		return v
	}
}

func TestBasicMap(t *testing.T) {
	s := openStore(t, nil)
	m := openMap(t, s, "users")
	if m.Name() != "users" {
		t.Fatalf("name %q", m.Name())
	}
	if err := m.Put([]byte("alice"), []byte("admin")); err != nil {
		t.Fatal(err)
	}
	v := must[[]byte](t)(m.Get([]byte("alice")))
	if string(v) != "admin" {
		t.Fatalf("got %q", v)
	}
	if _, err := m.Get([]byte("bob")); !errors.Is(err, ErrNotFound) {
		t.Fatalf("missing key: %v", err)
	}
	// Empty keys and values are ordinary entries.
	if err := m.Put(nil, nil); err != nil {
		t.Fatal(err)
	}
	v = must[[]byte](t)(m.Get([]byte{}))
	if v == nil || len(v) != 0 {
		t.Fatalf("empty value: %#v", v)
	}
	// A value larger than Get's first buffer and than GetInto's buffer.
	big := bytes.Repeat([]byte("xyz"), 100000)
	if err := m.Put([]byte("big"), big); err != nil {
		t.Fatal(err)
	}
	if v := must[[]byte](t)(m.Get([]byte("big"))); !bytes.Equal(v, big) {
		t.Fatal("big value differs")
	}
	small := make([]byte, 10)
	if v := must[[]byte](t)(m.GetInto([]byte("big"), small)); !bytes.Equal(v, big) {
		t.Fatal("GetInto of a big value differs")
	}
	buf := make([]byte, 0, 64)
	v = must[[]byte](t)(m.GetInto([]byte("alice"), buf))
	if string(v) != "admin" || &v[0] != &buf[:1][0] {
		t.Fatalf("GetInto did not use the buffer: %q", v)
	}

	if ok := must[bool](t)(m.PutIfAbsent([]byte("alice"), []byte("x"))); ok {
		t.Fatal("PutIfAbsent over a present key")
	}
	if ok := must[bool](t)(m.PutIfAbsent([]byte("carol"), []byte("c"))); !ok {
		t.Fatal("PutIfAbsent of an absent key")
	}
	if ok := must[bool](t)(m.PutIfPresent([]byte("dave"), []byte("d"))); ok {
		t.Fatal("PutIfPresent of an absent key")
	}
	if ok := must[bool](t)(m.PutIfPresent([]byte("carol"), []byte("C"))); !ok {
		t.Fatal("PutIfPresent of a present key")
	}
	if ok := must[bool](t)(m.CompareAndSwap([]byte("carol"), []byte("c"), []byte("z"))); ok {
		t.Fatal("CAS with a wrong old value")
	}
	if ok := must[bool](t)(m.CompareAndSwap([]byte("carol"), []byte("C"), []byte("z"))); !ok {
		t.Fatal("CAS with the right old value")
	}
	if ok := must[bool](t)(m.CompareAndDelete([]byte("carol"), []byte("C"))); ok {
		t.Fatal("CompareAndDelete with a wrong old value")
	}
	if ok := must[bool](t)(m.CompareAndDelete([]byte("carol"), []byte("z"))); !ok {
		t.Fatal("CompareAndDelete with the right old value")
	}
	if ok := must[bool](t)(m.Contains([]byte("carol"))); ok {
		t.Fatal("carol still present")
	}
	if ok := must[bool](t)(m.Delete([]byte("alice"))); !ok {
		t.Fatal("Delete of a present key")
	}
	if ok := must[bool](t)(m.Delete([]byte("alice"))); ok {
		t.Fatal("Delete of an absent key")
	}
	if n := must[int64](t)(m.Add([]byte("hits"), 5)); n != 5 {
		t.Fatalf("add: %d", n)
	}
	if n := must[int64](t)(m.Add([]byte("hits"), -7)); n != -2 {
		t.Fatalf("add: %d", n)
	}
	if c := must[int64](t)(Int64(must[[]byte](t)(m.Get([]byte("hits"))))); c != -2 {
		t.Fatalf("counter bytes: %d", c)
	}
	if _, err := m.Add([]byte("big"), 1); !errors.Is(err, ErrInvalid) {
		t.Fatalf("Add on a non-counter: %v", err)
	}
	if n := must[int](t)(m.Len()); n != 3 { // "", big, hits
		t.Fatalf("len %d", n)
	}
	if err := m.Clear(); err != nil {
		t.Fatal(err)
	}
	if n := must[int](t)(m.Len()); n != 0 {
		t.Fatalf("len after clear %d", n)
	}
}

func TestUpdate(t *testing.T) {
	s := openStore(t, nil)
	m := openMap(t, s, "u")
	key := []byte("k")
	err := m.Update(key, func(v []byte, present bool) ([]byte, bool) {
		if present {
			t.Errorf("absent key seen as present: %q", v)
		}
		return []byte("one"), true
	})
	if err != nil {
		t.Fatal(err)
	}
	err = m.Update(key, func(v []byte, present bool) ([]byte, bool) {
		return append(v, "+two"...), true
	})
	if err != nil {
		t.Fatal(err)
	}
	if v := must[[]byte](t)(m.Get(key)); string(v) != "one+two" {
		t.Fatalf("got %q", v)
	}
	// The function may read the map itself: no lock is held while it runs.
	err = m.Update(key, func(v []byte, present bool) ([]byte, bool) {
		again, err := m.Get(key)
		if err != nil || !bytes.Equal(again, v) {
			t.Errorf("Get inside Update: %q %v", again, err)
		}
		return nil, false
	})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := m.Get(key); !errors.Is(err, ErrNotFound) {
		t.Fatalf("removed by Update: %v", err)
	}
	// A panic cancels the update and comes back out of Update.
	if err := m.Put(key, []byte("kept")); err != nil {
		t.Fatal(err)
	}
	func() {
		defer func() {
			if r := recover(); r != "boom" {
				t.Fatalf("recovered %v", r)
			}
		}()
		_ = m.Update(key, func([]byte, bool) ([]byte, bool) { panic("boom") })
		t.Fatal("no panic")
	}()
	if v := must[[]byte](t)(m.Get(key)); string(v) != "kept" {
		t.Fatalf("after a panicking update: %q", v)
	}
	// Racing goroutines: every update lands once.
	ctr := []byte("ctr")
	var wg sync.WaitGroup
	const G, N = 4, 200
	for g := 0; g < G; g++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; i < N; i++ {
				err := m.Update(ctr, func(v []byte, present bool) ([]byte, bool) {
					var n int64
					if present {
						n, _ = Int64(v)
					}
					return PutInt64(n + 1), true
				})
				if err != nil {
					t.Error(err)
					return
				}
			}
		}()
	}
	wg.Wait()
	if n := must[int64](t)(Int64(must[[]byte](t)(m.Get(ctr)))); n != G*N {
		t.Fatalf("counter %d, want %d", n, G*N)
	}
}

func TestGetMany(t *testing.T) {
	s := openStore(t, nil)
	m := openMap(t, s, "many")
	var keys [][]byte
	want := map[string][]byte{}
	for i := 0; i < 1000; i++ {
		k := []byte(fmt.Sprintf("key-%d", i))
		keys = append(keys, k)
		if i%3 == 0 {
			continue // absent
		}
		v := bytes.Repeat([]byte{byte(i)}, i%50) // some empty values
		if i == 500 {
			v = bytes.Repeat([]byte("L"), 20000) // past the first scratch buffer
		}
		want[string(k)] = v
		if err := m.Put(k, v); err != nil {
			t.Fatal(err)
		}
	}
	got := must[[][]byte](t)(m.GetMany(keys))
	if len(got) != len(keys) {
		t.Fatalf("%d results for %d keys", len(got), len(keys))
	}
	for i, k := range keys {
		w, ok := want[string(k)]
		if !ok {
			if got[i] != nil {
				t.Fatalf("%s: absent key gave %q", k, got[i])
			}
			continue
		}
		if got[i] == nil || !bytes.Equal(got[i], w) {
			t.Fatalf("%s: got %q want %q", k, got[i], w)
		}
	}
	if r := must[[][]byte](t)(m.GetMany(nil)); len(r) != 0 {
		t.Fatal("empty batch")
	}
	if _, err := m.GetMany([][]byte{make([]byte, 70000)}); !errors.Is(err, ErrInvalid) {
		t.Fatalf("too long a key: %v", err)
	}
}

func TestIteration(t *testing.T) {
	s := openStore(t, nil)
	m := openMap(t, s, "it")
	want := map[string]string{}
	for i := 0; i < 500; i++ {
		k, v := fmt.Sprintf("k%03d", i), string(bytes.Repeat([]byte("v"), i*7))
		want[k] = v
		if err := m.Put([]byte(k), []byte(v)); err != nil {
			t.Fatal(err)
		}
	}
	it := m.Iter()
	got := map[string]string{}
	for k, v := range it.All() {
		if _, dup := got[string(k)]; dup {
			t.Fatalf("key %s twice", k)
		}
		got[string(k)] = string(v)
	}
	if err := it.Err(); err != nil {
		t.Fatal(err)
	}
	if len(got) != len(want) {
		t.Fatalf("%d entries, want %d", len(got), len(want))
	}
	for k, v := range want {
		if got[k] != v {
			t.Fatalf("%s: %d bytes, want %d", k, len(got[k]), len(v))
		}
	}
	var keys []string
	for k := range it.Keys() {
		keys = append(keys, string(k))
	}
	sort.Strings(keys)
	if len(keys) != 500 || keys[0] != "k000" || keys[499] != "k499" {
		t.Fatalf("keys: %d", len(keys))
	}
	n := 0
	for range it.All() {
		n++
		if n == 10 {
			break
		}
	}
	if n != 10 || it.Err() != nil {
		t.Fatalf("break: %d %v", n, it.Err())
	}
}

func TestFixedMap(t *testing.T) {
	s := openStore(t, nil)
	f, err := s.FixedMap("fixed", 8, 8, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if f.KeySize() != 8 || f.ValueSize() != 8 {
		t.Fatal("sizes")
	}
	k := []byte("counter1")
	if _, err := f.Get(k); !errors.Is(err, ErrNotFound) {
		t.Fatalf("absent: %v", err)
	}
	if n := must[int64](t)(f.Add(k, 3)); n != 3 {
		t.Fatalf("add %d", n)
	}
	if err := f.Put(k, PutInt64(40)); err != nil {
		t.Fatal(err)
	}
	if n := must[int64](t)(f.Add(k, 2)); n != 42 {
		t.Fatalf("add %d", n)
	}
	if _, err := f.Get([]byte("short")); !errors.Is(err, ErrInvalid) {
		t.Fatalf("short key: %v", err)
	}
	if err := f.Put(k, []byte("x")); !errors.Is(err, ErrInvalid) {
		t.Fatalf("short value: %v", err)
	}
	if ok := must[bool](t)(f.PutIfAbsent(k, PutInt64(0))); ok {
		t.Fatal("PutIfAbsent over a present key")
	}
	if ok := must[bool](t)(f.CompareAndSwap(k, PutInt64(42), PutInt64(7))); !ok {
		t.Fatal("CAS")
	}
	err = f.Update(k, func(v []byte, present bool) ([]byte, bool) {
		n, _ := Int64(v)
		return PutInt64(n * 3), true
	})
	if err != nil {
		t.Fatal(err)
	}
	buf := make([]byte, 8)
	if v := must[[]byte](t)(f.GetInto(k, buf)); must[int64](t)(Int64(v)) != 21 {
		t.Fatalf("after update: %v", v)
	}
	err = f.Update(k, func(v []byte, present bool) ([]byte, bool) { return []byte("bad"), true })
	if !errors.Is(err, ErrInvalid) {
		t.Fatalf("Update with a wrong-size value: %v", err)
	}
	var keys [][]byte
	for i := 0; i < 600; i++ {
		key := []byte(fmt.Sprintf("key%05d", i))
		keys = append(keys, key)
		if i%2 == 0 {
			if err := f.Put(key, PutInt64(int64(i))); err != nil {
				t.Fatal(err)
			}
		}
	}
	vals := must[[][]byte](t)(f.GetMany(keys))
	for i, v := range vals {
		if i%2 == 1 {
			if v != nil {
				t.Fatalf("%d: absent gave %v", i, v)
			}
		} else if n, _ := Int64(v); n != int64(i) {
			t.Fatalf("%d: %v", i, v)
		}
	}
	cnt := 0
	it := f.Iter()
	for k, v := range it.All() {
		if len(k) != 8 || len(v) != 8 {
			t.Fatal("entry sizes")
		}
		cnt++
	}
	if it.Err() != nil || cnt != 301 {
		t.Fatalf("iterated %d: %v", cnt, it.Err())
	}
	if ok := must[bool](t)(f.CompareAndDelete(k, PutInt64(21))); !ok {
		t.Fatal("CompareAndDelete")
	}
	if ok := must[bool](t)(f.Delete(keys[0])); !ok {
		t.Fatal("Delete")
	}
	if n := must[int](t)(f.Len()); n != 299 {
		t.Fatalf("len %d", n)
	}
	// The other kind under the same name is refused.
	if _, err := s.Map("fixed", nil); !errors.Is(err, ErrInvalid) {
		t.Fatalf("Map on a fixed map: %v", err)
	}
	if _, err := s.FixedMap("fixed", 8, 16, nil); !errors.Is(err, ErrInvalid) {
		t.Fatalf("other sizes: %v", err)
	}
	if _, err := s.FixedMap("x", 0, 8, nil); !errors.Is(err, ErrInvalid) {
		t.Fatalf("key size 0: %v", err)
	}
}

func TestErrors(t *testing.T) {
	p := storePath(t)
	_, err := Open(p, &Options{Mode: ModeOpenExisting})
	if !errors.Is(err, ErrNotFound) {
		t.Fatalf("open missing: %v", err)
	}
	var se *Error
	if !errors.As(err, &se) || se.Status != StatusNotFound || se.Message == "" {
		t.Fatalf("error detail: %#v", err)
	}
	s := must[*Store](t)(Open(p, nil))
	if s.Path() != p {
		t.Fatalf("path %q", s.Path())
	}
	if _, err := Open(p, &Options{Mode: ModeCreateNew}); !errors.Is(err, ErrExists) {
		t.Fatalf("create new over a file: %v", err)
	}
	if _, err := s.Map("", nil); !errors.Is(err, ErrInvalid) {
		t.Fatalf("empty name: %v", err)
	}
	if _, err := s.Map("a\x00b", nil); !errors.Is(err, ErrInvalid) {
		t.Fatalf("NUL in name: %v", err)
	}
	if _, err := s.Map(string(bytes.Repeat([]byte("n"), 300)), nil); !errors.Is(err, ErrInvalid) {
		t.Fatalf("long name: %v", err)
	}
	if _, err := s.Map("nope", &MapOptions{OpenExisting: true}); !errors.Is(err, ErrNotFound) {
		t.Fatalf("missing map: %v", err)
	}
	m := must[*Map](t)(s.Map("m", nil))
	if err := m.Put(make([]byte, 65537), nil); !errors.Is(err, ErrInvalid) {
		t.Fatalf("long key: %v", err)
	}
	if err := m.Put([]byte("k"), []byte("v")); err != nil {
		t.Fatal(err)
	}
	names := must[[]string](t)(s.Maps())
	if len(names) != 1 || names[0] != "m" {
		t.Fatalf("maps %v", names)
	}
	// A dropped map is an error, not an absent key.
	if ok := must[bool](t)(s.DropMap("m")); !ok {
		t.Fatal("drop")
	}
	if _, err := m.Get([]byte("k")); !errors.Is(err, ErrNotFound) {
		t.Fatalf("get on a dropped map: %v", err)
	}
	if _, err := m.Delete([]byte("k")); !errors.Is(err, ErrNotFound) {
		t.Fatalf("delete on a dropped map: %v", err)
	}
	if ok := must[bool](t)(s.DropMap("m")); ok {
		t.Fatal("drop twice")
	}
	// Closed handles: ErrClosed, never a crash; Close twice is fine; io.Closer.
	var c io.Closer = m
	if err := c.Close(); err != nil {
		t.Fatal(err)
	}
	if err := m.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := m.Get([]byte("k")); !errors.Is(err, ErrClosed) {
		t.Fatalf("closed map: %v", err)
	}
	c = s
	c.Close()
	if _, err := s.Map("m", nil); !errors.Is(err, ErrClosed) {
		t.Fatalf("closed store: %v", err)
	}
	// Read-only stores refuse writes.
	ro := must[*Store](t)(Open(p, &Options{Mode: ModeReadOnly}))
	defer ro.Close()
	if _, err := ro.Map("new", nil); !errors.Is(err, ErrReadOnly) {
		t.Fatalf("create a map read-only: %v", err)
	}
	if _, err := Open(p, &Options{LockTimeout: -1}); !errors.Is(err, ErrInvalid) {
		t.Fatalf("negative timeout: %v", err)
	}
	if _, err := Open(p, &Options{ChunkSize: 12345}); err != nil {
		// The chunk size applies at creation only: an existing store ignores it.
		t.Logf("chunk size on an existing store: %v", err)
	}
	if _, err := Open(p+"x", &Options{ChunkSize: 12345}); !errors.Is(err, ErrInvalid) {
		t.Fatalf("bad chunk size: %v", err)
	}
	if err := testPanic(); !errors.Is(err, ErrPanic) {
		t.Fatalf("library panic: %v", err)
	}
	if err := Remove(p); err != nil {
		t.Fatal(err)
	}
	if err := Remove(p); !errors.Is(err, ErrNotFound) {
		t.Fatalf("remove twice: %v", err)
	}
	if Version() == "" {
		t.Fatal("no version")
	}
}

// Close racing calls on other goroutines: the calls either succeed or fail with
// ErrClosed; nothing crashes (the guard makes Close wait for calls in flight).
func TestCloseRace(t *testing.T) {
	s := openStore(t, nil)
	for round := 0; round < 20; round++ {
		m := must[*Map](t)(s.Map("race", nil))
		var wg sync.WaitGroup
		for g := 0; g < 4; g++ {
			wg.Add(1)
			go func(g int) {
				defer wg.Done()
				key := []byte{byte(g)}
				for i := 0; i < 1000; i++ {
					if err := m.Put(key, key); err != nil {
						if !errors.Is(err, ErrClosed) {
							t.Error(err)
						}
						return
					}
				}
			}(g)
		}
		m.Close()
		wg.Wait()
	}
}

func TestAllocs(t *testing.T) {
	if raceEnabled {
		t.Skip("the race detector allocates")
	}
	s := openStore(t, nil)
	m := openMap(t, s, "allocs")
	f := must[*FixedMap](t)(s.FixedMap("fallocs", 8, 8, nil))
	defer f.Close()
	key, val := []byte("some-key"), []byte("some value of 32 bytes, or so...")
	if err := m.Put(key, val); err != nil {
		t.Fatal(err)
	}
	if err := f.Put(key, PutInt64(1)); err != nil {
		t.Fatal(err)
	}
	buf := make([]byte, 64)
	fbuf := make([]byte, 8)
	cases := []struct {
		name string
		want float64
		f    func()
	}{
		{"Map.GetInto", 0, func() { _, _ = m.GetInto(key, buf) }},
		{"Map.Get", 1, func() { _, _ = m.Get(key) }},
		{"Map.Put", 0, func() { _ = m.Put(key, val) }},
		{"Map.Add", 0, func() { _, _ = m.Add([]byte("n"), 1) }},
		{"Map.Contains", 0, func() { _, _ = m.Contains(key) }},
		{"Map.Delete", 0, func() { _, _ = m.Delete([]byte("absent")) }},
		{"Map.PutIfAbsent", 0, func() { _, _ = m.PutIfAbsent(key, val) }},
		{"Map.CompareAndSwap", 0, func() { _, _ = m.CompareAndSwap(key, val, val) }},
		{"FixedMap.GetInto", 0, func() { _, _ = f.GetInto(key, fbuf) }},
		{"FixedMap.Add", 0, func() { _, _ = f.Add(key, 1) }},
		{"FixedMap.Put", 0, func() { _ = f.Put(key, fbuf) }},
	}
	for _, c := range cases {
		if got := testing.AllocsPerRun(1000, c.f); got != c.want {
			t.Errorf("%s: %v allocations per call, want %v", c.name, got, c.want)
		}
	}
	// Stack buffers stay on the stack too (the C calls are declared noescape).
	stackGet := func() {
		var b [64]byte
		_, _ = m.GetInto(key, b[:])
	}
	if got := testing.AllocsPerRun(1000, stackGet); got != 0 {
		t.Errorf("GetInto into a stack array: %v allocations", got)
	}
}
