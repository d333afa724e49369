package shoal

/*
#include <shoal.h>
#include "helpers.h"
*/
import "C"

import (
	"encoding/binary"
	"runtime"
	"sync"
	"unsafe"
)

// Map is a named hash map of a store: keys of up to 65536 bytes and values of any
// length, shared by every process that opens the store. It may be used by any number
// of goroutines at once. Reads never block; a write locks one small index segment.
type Map struct {
	g    guard
	p    *C.shoal_map
	name string
}

// Name is the map's name.
func (m *Map) Name() string { return m.name }

// Close closes the handle (the map and its entries stay). Calls in flight on other
// goroutines finish first; later calls fail with ErrClosed. Closing twice is not an
// error. Do not close a map from inside the function given to its own Update.
func (m *Map) Close() error {
	if m.g.close() {
		C.shoal_map_close(m.p)
		m.p = nil
	}
	return nil
}

// getSmall is the stack buffer Get first reads into: values up to this size take one
// C call and one allocation (the result).
const getSmall = 128

// Get returns a copy of the value of key, or an error matching ErrNotFound when the key
// is absent.
func (m *Map) Get(key []byte) ([]byte, error) {
	var small [getSmall]byte
	n, grown, err := m.get("Map.Get", key, small[:])
	if err != nil {
		return nil, err
	}
	if grown != nil {
		return grown, nil
	}
	out := make([]byte, n)
	copy(out, small[:n])
	return out, nil
}

// GetInto copies the value of key into buf[:cap(buf)] and returns the slice of buf
// that holds it, without allocating. A value longer than cap(buf) is returned in a new
// slice (buf is then left with unspecified contents). An absent key is an error
// matching ErrNotFound.
func (m *Map) GetInto(key, buf []byte) ([]byte, error) {
	buf = buf[:cap(buf)]
	n, grown, err := m.get("Map.GetInto", key, buf)
	if err != nil {
		return nil, err
	}
	if grown != nil {
		return grown, nil
	}
	return buf[:n], nil
}

// get copies the value into buf and returns its length, or, when buf was too small, a
// new slice holding it. Returning the length rather than a slice of buf keeps a
// caller's stack buffer on the stack.
func (m *Map) get(op string, key, buf []byte) (int, []byte, error) {
	if !m.g.acquire() {
		return 0, nil, closedError(op)
	}
	defer m.g.release()
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	var grown []byte
	for {
		var n C.size_t
		st := C.shoal_map_get(m.p, bytesPtr(key), C.size_t(len(key)), bytesPtr(buf), C.size_t(len(buf)), &n)
		switch st {
		case C.SHOAL_OK:
			if grown != nil {
				return int(n), grown[:n], nil
			}
			return int(n), nil, nil
		case C.SHOAL_BUFFER_TOO_SMALL:
			// The value may change again before the next try: loop until it fits.
			grown = make([]byte, int(n))
			buf = grown
		default:
			return 0, nil, statusError(op, st)
		}
	}
}

// Contains tells whether key is present.
func (m *Map) Contains(key []byte) (bool, error) {
	const op = "Map.Contains"
	if !m.g.acquire() {
		return false, closedError(op)
	}
	defer m.g.release()
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	var present C.bool
	if st := C.shoal_map_contains(m.p, bytesPtr(key), C.size_t(len(key)), &present); st != C.SHOAL_OK {
		return false, statusError(op, st)
	}
	return bool(present), nil
}

// Put inserts or replaces the value of key.
func (m *Map) Put(key, value []byte) error {
	const op = "Map.Put"
	if !m.g.acquire() {
		return closedError(op)
	}
	defer m.g.release()
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	if st := C.shoal_map_put(m.p, bytesPtr(key), C.size_t(len(key)), bytesPtr(value), C.size_t(len(value)), nil); st != C.SHOAL_OK {
		return statusError(op, st)
	}
	return nil
}

// PutIfAbsent inserts key only if it is absent, and reports whether it did (false:
// the key is present and nothing changed). It is the insert of the C ABI
// (shoal_map_put_if_absent).
func (m *Map) PutIfAbsent(key, value []byte) (bool, error) {
	const op = "Map.PutIfAbsent"
	if !m.g.acquire() {
		return false, closedError(op)
	}
	defer m.g.release()
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	switch st := C.shoal_map_put_if_absent(m.p, bytesPtr(key), C.size_t(len(key)), bytesPtr(value), C.size_t(len(value))); st {
	case C.SHOAL_OK:
		return true, nil
	case C.SHOAL_EXISTS:
		return false, nil
	default:
		return false, statusError(op, st)
	}
}

// PutIfPresent replaces the value of key only if it is present, and reports whether it
// did (false: the key is absent and nothing changed).
func (m *Map) PutIfPresent(key, value []byte) (bool, error) {
	const op = "Map.PutIfPresent"
	if !m.g.acquire() {
		return false, closedError(op)
	}
	defer m.g.release()
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	switch st := C.shoal_map_put_if_present(m.p, bytesPtr(key), C.size_t(len(key)), bytesPtr(value), C.size_t(len(value))); st {
	case C.SHOAL_OK:
		return true, nil
	case C.SHOAL_NOT_FOUND:
		return false, m.dropped(op)
	default:
		return false, statusError(op, st)
	}
}

// Delete removes key and reports whether it was present.
func (m *Map) Delete(key []byte) (bool, error) {
	const op = "Map.Delete"
	if !m.g.acquire() {
		return false, closedError(op)
	}
	defer m.g.release()
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	switch st := C.shoal_map_remove(m.p, bytesPtr(key), C.size_t(len(key)), nil, 0, nil); st {
	case C.SHOAL_OK:
		return true, nil
	case C.SHOAL_NOT_FOUND:
		return false, m.dropped(op)
	default:
		return false, statusError(op, st)
	}
}

// dropped tells a dropped map apart from an absent key after a NOT_FOUND, which the C
// ABI gives for both: the map's length is NOT_FOUND only for a dropped map. Called with
// the OS thread locked.
func (m *Map) dropped(op string) error {
	var n C.uint64_t
	if st := C.shoal_map_len(m.p, &n); st != C.SHOAL_OK {
		return statusError(op, st)
	}
	return nil
}

// CompareAndSwap sets the value of key to new if its current value is old, atomically
// across processes, and reports whether it did. To expect an absent key use
// PutIfAbsent; to remove on a match, CompareAndDelete.
func (m *Map) CompareAndSwap(key, old, new []byte) (bool, error) {
	return m.cas("Map.CompareAndSwap", key, old, new, 0)
}

// CompareAndDelete removes key if its current value is old, atomically across
// processes, and reports whether it did.
func (m *Map) CompareAndDelete(key, old []byte) (bool, error) {
	return m.cas("Map.CompareAndDelete", key, old, nil, C.SHOAL_CAS_REMOVE)
}

func (m *Map) cas(op string, key, old, new []byte, flags C.uint32_t) (bool, error) {
	if !m.g.acquire() {
		return false, closedError(op)
	}
	defer m.g.release()
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	switch st := C.shoal_map_compare_and_swap(m.p, bytesPtr(key), C.size_t(len(key)), bytesPtr(old), C.size_t(len(old)), bytesPtr(new), C.size_t(len(new)), flags); st {
	case C.SHOAL_OK:
		return true, nil
	case C.SHOAL_MISMATCH:
		return false, nil
	default:
		return false, statusError(op, st)
	}
}

// Add adds delta (wrapping) to the counter at key, an 8-byte little-endian signed
// integer, atomically across processes, and returns the new value. An absent key
// counts as 0 and is created; a value of another length is ErrInvalid.
func (m *Map) Add(key []byte, delta int64) (int64, error) {
	const op = "Map.Add"
	if !m.g.acquire() {
		return 0, closedError(op)
	}
	defer m.g.release()
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	var out C.int64_t
	if st := C.shoal_map_add(m.p, bytesPtr(key), C.size_t(len(key)), C.int64_t(delta), &out); st != C.SHOAL_OK {
		return 0, statusError(op, st)
	}
	return int64(out), nil
}

// Update is an atomic read-modify-write of key: f receives the current value (a copy
// it may keep; present false when the key is absent) and returns the new one, or keep
// false to remove the key (or leave it absent). No lock is held while f runs: if another
// write to the key comes in between, f runs again on the newer value, so f must have no
// side effects but on its own variables; the value of its last run is the one stored.
// A panic in f cancels the update (nothing is written) and is re-raised by Update. f
// may call other methods of the map, but not Close.
func (m *Map) Update(key []byte, f func(value []byte, present bool) (newValue []byte, keep bool)) error {
	const op = "Map.Update"
	if !m.g.acquire() {
		return closedError(op)
	}
	defer m.g.release()
	u := &updateState{f: f}
	h := newHandle(u)
	runtime.LockOSThread()
	st := C.goshoal_map_update(m.p, bytesPtr(key), C.size_t(len(key)), C.uintptr_t(h))
	var err error
	if st != C.SHOAL_OK && !u.panicked {
		err = statusError(op, st)
	}
	runtime.UnlockOSThread()
	return u.finish(h, err)
}

// Len is the number of entries.
func (m *Map) Len() (int, error) {
	const op = "Map.Len"
	if !m.g.acquire() {
		return 0, closedError(op)
	}
	defer m.g.release()
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	var n C.uint64_t
	if st := C.shoal_map_len(m.p, &n); st != C.SHOAL_OK {
		return 0, statusError(op, st)
	}
	return int(n), nil
}

// Clear removes every entry, one index segment at a time (other calls go on meanwhile).
func (m *Map) Clear() error {
	const op = "Map.Clear"
	if !m.g.acquire() {
		return closedError(op)
	}
	defer m.g.release()
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	if st := C.shoal_map_clear(m.p); st != C.SHOAL_OK {
		return statusError(op, st)
	}
	return nil
}

// manyScratch is the per-call memory of GetMany that does not outlive it, pooled so
// that a batch allocates only its results.
type manyScratch struct {
	keys  []byte
	klens []C.size_t
	lens  []C.size_t
	vals  []byte
}

var manyPool = sync.Pool{New: func() any { return new(manyScratch) }}

// GetMany looks up every key in one C call and returns their values in key order: nil
// for an absent key, a non-nil slice (maybe empty) for a present one. The lookups
// overlap their memory misses, so on a map larger than the CPU caches a key costs less
// than a Get. Each lookup is individually consistent; the batch is not a snapshot.
// The values share one backing array.
func (m *Map) GetMany(keys [][]byte) ([][]byte, error) {
	const op = "Map.GetMany"
	sc := manyPool.Get().(*manyScratch)
	defer manyPool.Put(sc)
	total := 0
	for _, k := range keys {
		total += len(k)
	}
	sc.keys = grow(sc.keys, total)[:0]
	for _, k := range keys {
		sc.keys = append(sc.keys, k...)
	}
	if cap(sc.lens) < len(keys) {
		sc.lens = make([]C.size_t, len(keys))
	}
	lens := sc.lens[:len(keys)]
	if cap(sc.klens) < len(keys) {
		sc.klens = make([]C.size_t, len(keys))
	}
	klens := sc.klens[:len(keys)]
	for i, k := range keys {
		klens[i] = C.size_t(len(k))
	}
	if len(sc.vals) == 0 {
		sc.vals = make([]byte, 4096)
	}
	if !m.g.acquire() {
		return nil, closedError(op)
	}
	defer m.g.release()
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	for {
		var need C.size_t
		st := C.goshoal_map_get_many(m.p, (*C.uchar)(bytesPtr(sc.keys)), unsafe.SliceData(klens), C.size_t(len(keys)),
			(*C.uchar)(bytesPtr(sc.vals)), C.size_t(len(sc.vals)), unsafe.SliceData(lens), &need)
		if st != C.SHOAL_OK {
			return nil, statusError(op, st)
		}
		if int(need) > len(sc.vals) {
			sc.vals = make([]byte, int(need)+int(need)/4)
			continue
		}
		data := make([]byte, int(need))
		copy(data, sc.vals[:need])
		out := make([][]byte, len(keys))
		off := 0
		for i, l := range lens {
			if l == C.GOSHOAL_ABSENT {
				continue
			}
			out[i] = data[off : off+int(l) : off+int(l)]
			off += int(l)
		}
		return out, nil
	}
}

// grow returns b with a capacity of at least n.
func grow(b []byte, n int) []byte {
	if cap(b) >= n {
		return b
	}
	return make([]byte, n)
}

// PutInt64 encodes v as a counter value: 8 bytes, little-endian, as Add and every
// other language's binding read it.
func PutInt64(v int64) []byte {
	return binary.LittleEndian.AppendUint64(make([]byte, 0, 8), uint64(v))
}

// Int64 decodes a counter value written by Add or PutInt64; ErrInvalid when b is not
// 8 bytes long.
func Int64(b []byte) (int64, error) {
	if len(b) != 8 {
		return 0, errorf("Int64", StatusInvalid, "a counter is 8 bytes, not %d", len(b))
	}
	return int64(binary.LittleEndian.Uint64(b)), nil
}
