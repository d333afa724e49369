// Package bench measures the Go binding of Shoal against what Go programs use for the
// same job, in one run: a Go map behind a sync.RWMutex (one process only), bbolt
// (go.etcd.io/bbolt) and LMDB called the way lmdb-go calls it (package lmdb). The
// cases are testing.B functions, run by `go test -bench .` in this directory and by
// the report command cmd/gobench, which prints the ratios as a markdown table.
package bench

import (
	"encoding/binary"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"sync"
	"testing"

	shoal "example.invalid/shoal/bindings/go"
	"example.invalid/shoal/bindings/go/bench/lmdb"
	bolt "go.etcd.io/bbolt"
)

// Batch is the number of keys per GetMany call, per bbolt or LMDB read transaction in
// the batched cases, and per write transaction in the batched puts.
const Batch = 256

// Case is one measurement: Group names what is measured (the ratios compare cases of
// one group), Name the contender.
type Case struct {
	// Group is what is measured; Name is the contender.
	Group, Name string
	// Shoal marks the Shoal cases; the others are the peers.
	Shoal bool
	// F is the measurement.
	F func(b *testing.B)
}

// Data holds every contender loaded with the same n entries: 16-byte keys
// "key:%012d" and 16-byte values, all in /dev/shm.
type Data struct {
	// N is the number of entries.
	N      int
	keys   [][]byte // in a random order, so that lookups miss the caches as in use
	value  []byte
	dir    string
	store  *shoal.Store
	m      *shoal.Map
	fixed  *shoal.FixedMap
	gomap  map[string][]byte
	mu     sync.RWMutex
	flat   []byte // the keys of keys, end to end
	small  *shoal.Map
	c      *cShoal
	bolt   *bolt.DB
	lmdb   *lmdb.Env
	bucket []byte
}

// Setup creates and loads the data sets in a fresh directory under /dev/shm.
func Setup(n int) (*Data, error) {
	dir, err := os.MkdirTemp("/dev/shm", "shoal-go-bench-")
	if err != nil {
		return nil, err
	}
	d := &Data{N: n, dir: dir, value: []byte("value:0123456789"), gomap: make(map[string][]byte, n), bucket: []byte("b")}
	sorted := make([][]byte, n)
	for i := range sorted {
		sorted[i] = []byte(fmt.Sprintf("key:%012d", i))
	}
	d.keys = make([][]byte, n)
	rng := rand.New(rand.NewPCG(1, 2))
	for i, j := range rng.Perm(n) {
		d.keys[i] = sorted[j]
	}
	val := func(i int) []byte {
		v := append([]byte(nil), d.value...)
		binary.LittleEndian.PutUint64(v[8:], uint64(i))
		return v
	}

	if d.store, err = shoal.Open(filepath.Join(dir, "shoal.shoal"), nil); err != nil {
		return nil, err
	}
	if d.m, err = d.store.Map("bench", nil); err != nil {
		return nil, err
	}
	if d.fixed, err = d.store.FixedMap("fixed", 16, 16, nil); err != nil {
		return nil, err
	}
	if d.small, err = d.store.Map("small", nil); err != nil {
		return nil, err
	}
	for i := 0; i < min(n, 1000); i++ {
		if err := d.small.Put(sorted[i], val(i)); err != nil {
			return nil, err
		}
	}
	for _, k := range d.keys {
		d.flat = append(d.flat, k...)
	}
	for i, k := range sorted {
		if err := d.m.Put(k, val(i)); err != nil {
			return nil, err
		}
		if err := d.fixed.Put(k, val(i)); err != nil {
			return nil, err
		}
		d.gomap[string(k)] = val(i)
	}

	if d.c, err = openCShoal(filepath.Join(dir, "shoal.shoal"), "bench"); err != nil {
		return nil, err
	}

	if d.bolt, err = bolt.Open(filepath.Join(dir, "bolt.db"), 0o600, &bolt.Options{NoSync: true, NoFreelistSync: true}); err != nil {
		return nil, err
	}
	for lo := 0; lo < n; lo += 10000 {
		err := d.bolt.Update(func(tx *bolt.Tx) error {
			b, err := tx.CreateBucketIfNotExists(d.bucket)
			if err != nil {
				return err
			}
			for i := lo; i < lo+10000 && i < n; i++ {
				if err := b.Put(sorted[i], val(i)); err != nil {
					return err
				}
			}
			return nil
		})
		if err != nil {
			return nil, err
		}
	}

	if err := os.Mkdir(filepath.Join(dir, "lmdb"), 0o700); err != nil {
		return nil, err
	}
	if d.lmdb, err = lmdb.Open(filepath.Join(dir, "lmdb"), int64(n)*200+64<<20); err != nil {
		return nil, err
	}
	for lo := 0; lo < n; lo += 10000 {
		if err := d.lmdbWrite(sorted[lo:min(lo+10000, n)], val); err != nil {
			return nil, err
		}
	}
	return d, nil
}

// lmdbWrite writes keys in one transaction, on one OS thread: LMDB's writer mutex
// must be unlocked by the thread that locked it.
func (d *Data) lmdbWrite(keys [][]byte, val func(int) []byte) error {
	runtimeLock()
	defer runtimeUnlock()
	t, err := d.lmdb.Begin(false)
	if err != nil {
		return err
	}
	for i, k := range keys {
		if err := t.Put(k, val(i)); err != nil {
			t.Abort()
			return err
		}
	}
	return t.Commit()
}

// Close closes everything and removes the files.
func (d *Data) Close() {
	if d.m != nil {
		d.m.Close()
	}
	if d.fixed != nil {
		d.fixed.Close()
	}
	if d.small != nil {
		d.small.Close()
	}
	if d.c != nil {
		d.c.close()
	}
	if d.store != nil {
		d.store.Close()
	}
	if d.bolt != nil {
		d.bolt.Close()
	}
	if d.lmdb != nil {
		d.lmdb.Close()
	}
	os.RemoveAll(d.dir)
}

// fail stops the benchmark on an error. b.Helper is called only then: it costs
// hundreds of nanoseconds, which would be charged to every call measured.
func fail(b *testing.B, err error) {
	if err != nil {
		b.Helper()
		b.Fatal(err)
	}
}

// Cases lists every measurement.
func (d *Data) Cases() []Case {
	n := d.N
	key := func(i int) []byte { return d.keys[i%n] }
	// batched runs b.N keys in calls of Batch keys; ns/op is then per key.
	batched := func(b *testing.B, call func(keys [][]byte)) {
		for i := 0; i < b.N; i += Batch {
			lo := i % n
			hi := min(lo+Batch, n, lo+b.N-i)
			call(d.keys[lo:hi])
		}
	}
	return []Case{
		{"get", "Shoal Map.Get (copy, 1 alloc)", true, func(b *testing.B) {
			for i := 0; i < b.N; i++ {
				_, err := d.m.Get(key(i))
				fail(b, err)
			}
		}},
		{"get", "Shoal Map.GetInto (caller's buffer)", true, func(b *testing.B) {
			buf := make([]byte, 64)
			for i := 0; i < b.N; i++ {
				_, err := d.m.GetInto(key(i), buf)
				fail(b, err)
			}
		}},
		{"get", "Shoal FixedMap.GetInto (16+16)", true, func(b *testing.B) {
			buf := make([]byte, 16)
			for i := 0; i < b.N; i++ {
				_, err := d.fixed.GetInto(key(i), buf)
				fail(b, err)
			}
		}},
		{"get", "Go map + sync.RWMutex (copy into a buffer)", false, func(b *testing.B) {
			buf := make([]byte, 64)
			for i := 0; i < b.N; i++ {
				d.mu.RLock()
				v := d.gomap[string(key(i))]
				copy(buf, v)
				d.mu.RUnlock()
			}
		}},
		{"get", "bbolt: a View per Get (copy)", false, func(b *testing.B) {
			for i := 0; i < b.N; i++ {
				var out []byte
				fail(b, d.bolt.View(func(tx *bolt.Tx) error {
					out = append(out[:0], tx.Bucket(d.bucket).Get(key(i))...)
					return nil
				}))
			}
		}},
		{"get", "lmdb-go style: a View per Get (copy)", false, func(b *testing.B) {
			for i := 0; i < b.N; i++ {
				_, err := d.lmdb.Get(key(i))
				fail(b, err)
			}
		}},
		{"get", "bbolt: Get inside one read txn (no copy)", false, func(b *testing.B) {
			tx, err := d.bolt.Begin(false)
			fail(b, err)
			defer tx.Rollback()
			bk := tx.Bucket(d.bucket)
			for i := 0; i < b.N; i++ {
				if bk.Get(key(i)) == nil {
					b.Fatal("missing")
				}
			}
		}},
		{"get", "LMDB: Get inside one read txn (1 cgo call, no copy)", false, func(b *testing.B) {
			runtimeLock()
			defer runtimeUnlock()
			t, err := d.lmdb.Begin(true)
			fail(b, err)
			defer t.Abort()
			for i := 0; i < b.N; i++ {
				if t.GetRaw(key(i)) == nil {
					b.Fatal("missing")
				}
			}
		}},

		{"get many (per key)", fmt.Sprintf("Shoal Map.GetMany (%d keys per call)", Batch), true, func(b *testing.B) {
			batched(b, func(keys [][]byte) {
				_, err := d.m.GetMany(keys)
				fail(b, err)
			})
		}},
		{"get many (per key)", fmt.Sprintf("Shoal FixedMap.GetMany (%d keys per call)", Batch), true, func(b *testing.B) {
			batched(b, func(keys [][]byte) {
				_, err := d.fixed.GetMany(keys)
				fail(b, err)
			})
		}},
		{"get many (per key)", fmt.Sprintf("bbolt: %d Gets per read txn (no copy)", Batch), false, func(b *testing.B) {
			batched(b, func(keys [][]byte) {
				fail(b, d.bolt.View(func(tx *bolt.Tx) error {
					bk := tx.Bucket(d.bucket)
					for _, k := range keys {
						if bk.Get(k) == nil {
							b.Fatal("missing")
						}
					}
					return nil
				}))
			})
		}},
		{"get many (per key)", fmt.Sprintf("LMDB: %d Gets per read txn (no copy)", Batch), false, func(b *testing.B) {
			runtimeLock()
			defer runtimeUnlock()
			batched(b, func(keys [][]byte) {
				t, err := d.lmdb.Begin(true)
				fail(b, err)
				for _, k := range keys {
					if t.GetRaw(k) == nil {
						b.Fatal("missing")
					}
				}
				t.Abort()
			})
		}},
		{"get many (per key)", "Go map + sync.RWMutex, one RLock per batch (copy)", false, func(b *testing.B) {
			buf := make([]byte, 64)
			batched(b, func(keys [][]byte) {
				d.mu.RLock()
				for _, k := range keys {
					copy(buf, d.gomap[string(k)])
				}
				d.mu.RUnlock()
			})
		}},

		{"why (per get)", "cgo: one call of a C function that does nothing", false, func(b *testing.B) {
			for i := 0; i < b.N; i++ {
				cgoFloor()
			}
		}},
		{"why (per get)", "Shoal Map.GetInto on a 1,000-entry map (in cache)", true, func(b *testing.B) {
			buf := make([]byte, 64)
			keys := make([][]byte, min(n, 1000))
			for i := range keys {
				keys[i] = []byte(fmt.Sprintf("key:%012d", i))
			}
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				_, err := d.small.GetInto(keys[i%len(keys)], buf)
				fail(b, err)
			}
		}},
		{"why (per get)", "Shoal Map.GetInto, keys read from one flat array (as the C loop)", true, func(b *testing.B) {
			buf := make([]byte, 64)
			for i := 0; i < b.N; i++ {
				j := i % n
				_, err := d.m.GetInto(d.flat[j*16:j*16+16], buf)
				fail(b, err)
			}
		}},
		{"why (per get)", "Shoal: shoal_map_get in a loop in C (no cgo call per get)", true, func(b *testing.B) {
			fail(b, d.c.loopGet(d.flat, b.N))
		}},
		{"why (per get)", "Shoal: the same loop in C as a dependent chain (no overlap between gets)", true, func(b *testing.B) {
			fail(b, d.c.loopGetChain(d.flat, b.N))
		}},
		{"why (per get)", "LMDB: mdb_get in a loop in C, one txn (no cgo call per get)", false, func(b *testing.B) {
			runtimeLock()
			defer runtimeUnlock()
			t, err := d.lmdb.Begin(true)
			fail(b, err)
			defer t.Abort()
			fail(b, t.LoopGet(d.flat, b.N))
		}},

		{"put (replace)", "Shoal Map.Put", true, func(b *testing.B) {
			for i := 0; i < b.N; i++ {
				fail(b, d.m.Put(key(i), d.value))
			}
		}},
		{"put (replace)", "Shoal FixedMap.Put (16+16)", true, func(b *testing.B) {
			for i := 0; i < b.N; i++ {
				fail(b, d.fixed.Put(key(i), d.value))
			}
		}},
		{"put (replace)", "Go map + sync.RWMutex", false, func(b *testing.B) {
			for i := 0; i < b.N; i++ {
				k := key(i)
				d.mu.Lock()
				copy(d.gomap[string(k)], d.value)
				d.mu.Unlock()
			}
		}},
		{"put (replace)", "bbolt: an Update per Put (NoSync)", false, func(b *testing.B) {
			for i := 0; i < b.N; i++ {
				fail(b, d.bolt.Update(func(tx *bolt.Tx) error { return tx.Bucket(d.bucket).Put(key(i), d.value) }))
			}
		}},
		{"put (replace)", "lmdb-go style: an Update per Put (NOSYNC)", false, func(b *testing.B) {
			for i := 0; i < b.N; i++ {
				fail(b, d.lmdb.Put(key(i), d.value))
			}
		}},
		{"put (replace)", fmt.Sprintf("bbolt: %d Puts per Update (per key)", Batch), false, func(b *testing.B) {
			batched(b, func(keys [][]byte) {
				fail(b, d.bolt.Update(func(tx *bolt.Tx) error {
					bk := tx.Bucket(d.bucket)
					for _, k := range keys {
						if err := bk.Put(k, d.value); err != nil {
							return err
						}
					}
					return nil
				}))
			})
		}},
		{"put (replace)", fmt.Sprintf("LMDB: %d Puts per write txn (per key)", Batch), false, func(b *testing.B) {
			batched(b, func(keys [][]byte) {
				fail(b, d.lmdbWrite(keys, func(int) []byte { return d.value }))
			})
		}},
	}
}
