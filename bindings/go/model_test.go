package shoal

import (
	"bytes"
	"errors"
	"math/rand/v2"
	"os"
	"strconv"
	"testing"
	"time"
)

// seed is SHOAL_GO_SEED when set (to replay a failure), else a new one; failures print it.
func seed(t *testing.T) uint64 {
	if s := os.Getenv("SHOAL_GO_SEED"); s != "" {
		v, err := strconv.ParseUint(s, 10, 64)
		if err != nil {
			t.Fatalf("SHOAL_GO_SEED: %v", err)
		}
		return v
	}
	return uint64(time.Now().UnixNano())
}

// Random operations on a Map checked, one by one, against a Go map.
func TestModel(t *testing.T) {
	sd := seed(t)
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("replay with SHOAL_GO_SEED=%d", sd)
		}
	})
	rng := rand.New(rand.NewPCG(sd, sd^0x9e3779b97f4a7c15))
	s := openStore(t, nil)
	m := openMap(t, s, "model")
	model := map[string][]byte{}
	keyOf := func() []byte {
		if rng.IntN(50) == 0 {
			return nil // the empty key
		}
		return []byte("k" + strconv.Itoa(rng.IntN(60)))
	}
	valOf := func() []byte {
		n := rng.IntN(40)
		switch rng.IntN(20) {
		case 0:
			n = 0
		case 1:
			n = 200 + rng.IntN(5000) // past Get's stack buffer
		}
		v := make([]byte, n)
		for i := range v {
			v[i] = byte(rng.Uint32())
		}
		return v
	}
	check := func(op string, err error) {
		t.Helper()
		if err != nil {
			t.Fatalf("%s: %v", op, err)
		}
	}
	buf := make([]byte, 64)
	const ops = 20000
	for i := 0; i < ops; i++ {
		k := keyOf()
		cur, present := model[string(k)]
		switch op := rng.IntN(12); op {
		case 0, 1:
			v := valOf()
			check("Put", m.Put(k, v))
			model[string(k)] = v
		case 2:
			v, err := m.Get(k)
			if present {
				check("Get", err)
				if !bytes.Equal(v, cur) {
					t.Fatalf("op %d Get %q: %x want %x", i, k, v, cur)
				}
			} else if err == nil || !isNotFound(err) {
				t.Fatalf("op %d Get %q of an absent key: %v %x", i, k, err, v)
			}
		case 3:
			v, err := m.GetInto(k, buf)
			if present {
				check("GetInto", err)
				if !bytes.Equal(v, cur) {
					t.Fatalf("op %d GetInto %q: %x want %x", i, k, v, cur)
				}
			} else if !isNotFound(err) {
				t.Fatalf("op %d GetInto absent: %v", i, err)
			}
		case 4:
			v := valOf()
			ok, err := m.PutIfAbsent(k, v)
			check("PutIfAbsent", err)
			if ok == present {
				t.Fatalf("op %d PutIfAbsent %q: %v with present=%v", i, k, ok, present)
			}
			if ok {
				model[string(k)] = v
			}
		case 5:
			ok, err := m.Delete(k)
			check("Delete", err)
			if ok != present {
				t.Fatalf("op %d Delete %q: %v with present=%v", i, k, ok, present)
			}
			delete(model, string(k))
		case 6:
			// Half the time the right old value, half a wrong one.
			old := cur
			if rng.IntN(2) == 0 || !present {
				old = valOf()
			}
			v := valOf()
			ok, err := m.CompareAndSwap(k, old, v)
			check("CompareAndSwap", err)
			want := present && bytes.Equal(old, cur)
			if ok != want {
				t.Fatalf("op %d CAS %q: %v want %v", i, k, ok, want)
			}
			if ok {
				model[string(k)] = v
			}
		case 7:
			old := cur
			if rng.IntN(2) == 0 || !present {
				old = valOf()
			}
			ok, err := m.CompareAndDelete(k, old)
			check("CompareAndDelete", err)
			want := present && bytes.Equal(old, cur)
			if ok != want {
				t.Fatalf("op %d CompareAndDelete %q: %v want %v", i, k, ok, want)
			}
			if ok {
				delete(model, string(k))
			}
		case 8:
			d := int64(rng.IntN(1000)) - 500
			n, err := m.Add(k, d)
			if present && len(cur) != 8 {
				if !isInvalid(err) {
					t.Fatalf("op %d Add on a %d-byte value: %v", i, len(cur), err)
				}
				break
			}
			check("Add", err)
			var base int64
			if present {
				base, _ = Int64(cur)
			}
			if n != base+d {
				t.Fatalf("op %d Add: %d want %d", i, n, base+d)
			}
			model[string(k)] = PutInt64(n)
		case 9:
			v := valOf()
			del := rng.IntN(4) == 0
			err := m.Update(k, func(got []byte, p bool) ([]byte, bool) {
				if p != present || !bytes.Equal(got, cur) {
					t.Errorf("op %d Update saw %x (%v), want %x (%v)", i, got, p, cur, present)
				}
				return v, !del
			})
			check("Update", err)
			if del {
				delete(model, string(k))
			} else {
				model[string(k)] = v
			}
		case 10:
			keys := make([][]byte, rng.IntN(300))
			for j := range keys {
				keys[j] = keyOf()
			}
			vals, err := m.GetMany(keys)
			check("GetMany", err)
			for j, kk := range keys {
				w, ok := model[string(kk)]
				if ok != (vals[j] != nil) || !bytes.Equal(vals[j], w) {
					t.Fatalf("op %d GetMany[%d] %q: %x want %x (%v)", i, j, kk, vals[j], w, ok)
				}
			}
		case 11:
			if rng.IntN(10) == 0 {
				n, err := m.Len()
				check("Len", err)
				if n != len(model) {
					t.Fatalf("op %d Len %d want %d", i, n, len(model))
				}
				it := m.Iter()
				seen := map[string]bool{}
				for k, v := range it.All() {
					if seen[string(k)] || !bytes.Equal(model[string(k)], v) {
						t.Fatalf("op %d iteration: %q dup=%v", i, k, seen[string(k)])
					}
					seen[string(k)] = true
				}
				check("Iter", it.Err())
				if len(seen) != len(model) {
					t.Fatalf("op %d iteration saw %d of %d", i, len(seen), len(model))
				}
			}
		}
	}
}

func isNotFound(err error) bool { return err != nil && errors.Is(err, ErrNotFound) }
func isInvalid(err error) bool  { return err != nil && errors.Is(err, ErrInvalid) }

// Random operations on a FixedMap (8-byte keys and values) checked against a Go map.
func TestFixedModel(t *testing.T) {
	sd := seed(t)
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("replay with SHOAL_GO_SEED=%d", sd)
		}
	})
	rng := rand.New(rand.NewPCG(sd, sd^0x5851f42d4c957f2d))
	s := openStore(t, nil)
	f, err := s.FixedMap("fmodel", 8, 8, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	model := map[string][]byte{}
	keyOf := func() []byte { return PutInt64(int64(rng.IntN(80))) }
	valOf := func() []byte { return PutInt64(int64(rng.IntN(5)) - 2) } // few values: CAS matches often
	buf := make([]byte, 8)
	for i := 0; i < 8000; i++ {
		k := keyOf()
		cur, present := model[string(k)]
		fail := func(what string, args ...any) {
			t.Helper()
			t.Fatalf("op %d %s key %x (model %x, present %v): %v", i, what, k, cur, present, args)
		}
		switch rng.IntN(10) {
		case 0, 1:
			v := valOf()
			if err := f.Put(k, v); err != nil {
				fail("Put", err)
			}
			model[string(k)] = v
		case 2:
			v, err := f.GetInto(k, buf)
			if present != (err == nil) || (present && !bytes.Equal(v, cur)) || (!present && !errors.Is(err, ErrNotFound)) {
				fail("GetInto", v, err)
			}
		case 3:
			v := valOf()
			ok, err := f.PutIfAbsent(k, v)
			if err != nil || ok == present {
				fail("PutIfAbsent", ok, err)
			}
			if ok {
				model[string(k)] = v
			}
		case 4:
			v := valOf()
			ok, err := f.PutIfPresent(k, v)
			if err != nil || ok != present {
				fail("PutIfPresent", ok, err)
			}
			if ok {
				model[string(k)] = v
			}
		case 5:
			ok, err := f.Delete(k)
			if err != nil || ok != present {
				fail("Delete", ok, err)
			}
			delete(model, string(k))
		case 6:
			old, v := valOf(), valOf()
			ok, err := f.CompareAndSwap(k, old, v)
			if err != nil || ok != (present && bytes.Equal(old, cur)) {
				fail("CompareAndSwap", ok, err)
			}
			if ok {
				model[string(k)] = v
			}
		case 7:
			d := int64(rng.IntN(7)) - 3
			n, err := f.Add(k, d)
			var base int64
			if present {
				base, _ = Int64(cur)
			}
			if err != nil || n != base+d {
				fail("Add", n, err)
			}
			model[string(k)] = PutInt64(n)
		case 8:
			del := rng.IntN(3) == 0
			err := f.Update(k, func(v []byte, p bool) ([]byte, bool) {
				if p != present || !bytes.Equal(v, cur) {
					t.Errorf("op %d Update saw %x %v", i, v, p)
				}
				n, _ := Int64(v)
				return PutInt64(n*2 + 1), !del
			})
			if err != nil {
				fail("Update", err)
			}
			if del {
				delete(model, string(k))
			} else {
				n, _ := Int64(cur)
				model[string(k)] = PutInt64(n*2 + 1)
			}
		case 9:
			keys := make([][]byte, rng.IntN(600))
			for j := range keys {
				keys[j] = keyOf()
			}
			vals, err := f.GetMany(keys)
			if err != nil {
				fail("GetMany", err)
			}
			for j, kk := range keys {
				w, ok := model[string(kk)]
				if ok != (vals[j] != nil) || !bytes.Equal(vals[j], w) {
					fail("GetMany", j, vals[j], w)
				}
			}
			if n, err := f.Len(); err != nil || n != len(model) {
				fail("Len", n, err)
			}
		}
	}
	it := f.Iter()
	seen := 0
	for k, v := range it.All() {
		if !bytes.Equal(model[string(k)], v) {
			t.Fatalf("iteration: %x = %x, model %x", k, v, model[string(k)])
		}
		seen++
	}
	if it.Err() != nil || seen != len(model) {
		t.Fatalf("iteration saw %d of %d: %v", seen, len(model), it.Err())
	}
}
