package shoal

/*
#include <shoal.h>
#include "helpers.h"
*/
import "C"

import (
	"runtime"
	"unsafe"
)

// FixedMap is a named fixed-size map of a store: every key is exactly KeySize bytes
// and every value exactly ValueSize bytes, stored in the index itself (values updated
// in place; Add on a present key takes no lock). Keys and values of other lengths are
// refused with ErrInvalid. It may be used by any number of goroutines at once.
type FixedMap struct {
	g         guard
	p         *C.shoal_fixed
	name      string
	keySize   int
	valueSize int
}

// Name is the map's name.
func (m *FixedMap) Name() string { return m.name }

// KeySize is the length of every key, in bytes.
func (m *FixedMap) KeySize() int { return m.keySize }

// ValueSize is the length of every value, in bytes.
func (m *FixedMap) ValueSize() int { return m.valueSize }

// Close closes the handle (the map and its entries stay). Calls in flight on other
// goroutines finish first; later calls fail with ErrClosed. Closing twice is not an
// error. Do not close a map from inside the function given to its own Update.
func (m *FixedMap) Close() error {
	if m.g.close() {
		C.shoal_fixed_close(m.p)
		m.p = nil
	}
	return nil
}

func (m *FixedMap) checkKey(op string, key []byte) error {
	if len(key) != m.keySize {
		return errorf(op, StatusInvalid, "map %q has %d-byte keys, not %d", m.name, m.keySize, len(key))
	}
	return nil
}

func (m *FixedMap) checkValue(op string, value []byte) error {
	if len(value) != m.valueSize {
		return errorf(op, StatusInvalid, "map %q has %d-byte values, not %d", m.name, m.valueSize, len(value))
	}
	return nil
}

// Get returns a copy of the value of key, or an error matching ErrNotFound when the key
// is absent.
func (m *FixedMap) Get(key []byte) ([]byte, error) {
	return m.GetInto(key, nil)
}

// GetInto copies the value of key into buf (when cap(buf) >= ValueSize, without
// allocating; else into a new slice) and returns the slice holding it. An absent key is
// an error matching ErrNotFound.
func (m *FixedMap) GetInto(key, buf []byte) ([]byte, error) {
	const op = "FixedMap.Get"
	if err := m.checkKey(op, key); err != nil {
		return nil, err
	}
	if cap(buf) < m.valueSize {
		buf = make([]byte, m.valueSize)
	}
	buf = buf[:m.valueSize]
	if !m.g.acquire() {
		return nil, closedError(op)
	}
	defer m.g.release()
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	if st := C.shoal_fixed_get(m.p, bytesPtr(key), C.size_t(len(key)), bytesPtr(buf), C.size_t(len(buf))); st != C.SHOAL_OK {
		return nil, statusError(op, st)
	}
	return buf, nil
}

// Contains tells whether key is present.
func (m *FixedMap) Contains(key []byte) (bool, error) {
	const op = "FixedMap.Contains"
	if err := m.checkKey(op, key); err != nil {
		return false, err
	}
	if !m.g.acquire() {
		return false, closedError(op)
	}
	defer m.g.release()
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	var present C.bool
	if st := C.shoal_fixed_contains(m.p, bytesPtr(key), C.size_t(len(key)), &present); st != C.SHOAL_OK {
		return false, statusError(op, st)
	}
	return bool(present), nil
}

// Put inserts or replaces the value of key.
func (m *FixedMap) Put(key, value []byte) error {
	const op = "FixedMap.Put"
	if err := m.checkKey(op, key); err != nil {
		return err
	}
	if err := m.checkValue(op, value); err != nil {
		return err
	}
	if !m.g.acquire() {
		return closedError(op)
	}
	defer m.g.release()
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	if st := C.shoal_fixed_put(m.p, bytesPtr(key), C.size_t(len(key)), bytesPtr(value), C.size_t(len(value)), nil); st != C.SHOAL_OK {
		return statusError(op, st)
	}
	return nil
}

// PutIfAbsent inserts key only if it is absent, and reports whether it did.
func (m *FixedMap) PutIfAbsent(key, value []byte) (bool, error) {
	const op = "FixedMap.PutIfAbsent"
	if err := m.checkKey(op, key); err != nil {
		return false, err
	}
	if err := m.checkValue(op, value); err != nil {
		return false, err
	}
	if !m.g.acquire() {
		return false, closedError(op)
	}
	defer m.g.release()
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	switch st := C.shoal_fixed_put_if_absent(m.p, bytesPtr(key), C.size_t(len(key)), bytesPtr(value), C.size_t(len(value))); st {
	case C.SHOAL_OK:
		return true, nil
	case C.SHOAL_EXISTS:
		return false, nil
	default:
		return false, statusError(op, st)
	}
}

// PutIfPresent replaces the value of key only if it is present, and reports whether
// it did.
func (m *FixedMap) PutIfPresent(key, value []byte) (bool, error) {
	const op = "FixedMap.PutIfPresent"
	if err := m.checkKey(op, key); err != nil {
		return false, err
	}
	if err := m.checkValue(op, value); err != nil {
		return false, err
	}
	if !m.g.acquire() {
		return false, closedError(op)
	}
	defer m.g.release()
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	switch st := C.shoal_fixed_put_if_present(m.p, bytesPtr(key), C.size_t(len(key)), bytesPtr(value), C.size_t(len(value))); st {
	case C.SHOAL_OK:
		return true, nil
	case C.SHOAL_NOT_FOUND:
		return false, m.dropped(op)
	default:
		return false, statusError(op, st)
	}
}

// Delete removes key and reports whether it was present.
func (m *FixedMap) Delete(key []byte) (bool, error) {
	const op = "FixedMap.Delete"
	if err := m.checkKey(op, key); err != nil {
		return false, err
	}
	if !m.g.acquire() {
		return false, closedError(op)
	}
	defer m.g.release()
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	switch st := C.shoal_fixed_remove(m.p, bytesPtr(key), C.size_t(len(key))); st {
	case C.SHOAL_OK:
		return true, nil
	case C.SHOAL_NOT_FOUND:
		return false, m.dropped(op)
	default:
		return false, statusError(op, st)
	}
}

// dropped tells a dropped map apart from an absent key after a NOT_FOUND (see
// Map.dropped). Called with the OS thread locked.
func (m *FixedMap) dropped(op string) error {
	var n C.uint64_t
	if st := C.shoal_fixed_len(m.p, &n); st != C.SHOAL_OK {
		return statusError(op, st)
	}
	return nil
}

// CompareAndSwap sets the value of key to new if its current value is old, atomically
// across processes, and reports whether it did.
func (m *FixedMap) CompareAndSwap(key, old, new []byte) (bool, error) {
	const op = "FixedMap.CompareAndSwap"
	if err := m.checkValue(op, old); err != nil {
		return false, err
	}
	if err := m.checkValue(op, new); err != nil {
		return false, err
	}
	return m.cas(op, key, old, new, 0)
}

// CompareAndDelete removes key if its current value is old, atomically across
// processes, and reports whether it did.
func (m *FixedMap) CompareAndDelete(key, old []byte) (bool, error) {
	const op = "FixedMap.CompareAndDelete"
	if err := m.checkValue(op, old); err != nil {
		return false, err
	}
	return m.cas(op, key, old, nil, C.SHOAL_CAS_REMOVE)
}

func (m *FixedMap) cas(op string, key, old, new []byte, flags C.uint32_t) (bool, error) {
	if err := m.checkKey(op, key); err != nil {
		return false, err
	}
	if !m.g.acquire() {
		return false, closedError(op)
	}
	defer m.g.release()
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	switch st := C.shoal_fixed_compare_and_swap(m.p, bytesPtr(key), C.size_t(len(key)), bytesPtr(old), C.size_t(len(old)), bytesPtr(new), C.size_t(len(new)), flags); st {
	case C.SHOAL_OK:
		return true, nil
	case C.SHOAL_MISMATCH:
		return false, nil
	default:
		return false, statusError(op, st)
	}
}

// Add adds delta (wrapping) to the counter at key, atomically across processes, and
// returns the new value; lock-free on a present key. The map's values must be 8 bytes
// (little-endian signed integers); an absent key counts as 0 and is created.
func (m *FixedMap) Add(key []byte, delta int64) (int64, error) {
	const op = "FixedMap.Add"
	if err := m.checkKey(op, key); err != nil {
		return 0, err
	}
	if !m.g.acquire() {
		return 0, closedError(op)
	}
	defer m.g.release()
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	var out C.int64_t
	if st := C.shoal_fixed_add(m.p, bytesPtr(key), C.size_t(len(key)), C.int64_t(delta), &out); st != C.SHOAL_OK {
		return 0, statusError(op, st)
	}
	return int64(out), nil
}

// Update is the atomic read-modify-write of [Map.Update]; f must return values of
// exactly ValueSize bytes (another length cancels the update with ErrInvalid).
func (m *FixedMap) Update(key []byte, f func(value []byte, present bool) (newValue []byte, keep bool)) error {
	const op = "FixedMap.Update"
	if err := m.checkKey(op, key); err != nil {
		return err
	}
	if !m.g.acquire() {
		return closedError(op)
	}
	defer m.g.release()
	u := &updateState{f: f}
	h := newHandle(u)
	runtime.LockOSThread()
	st := C.goshoal_fixed_update(m.p, bytesPtr(key), C.size_t(len(key)), C.uintptr_t(h))
	var err error
	if st != C.SHOAL_OK && !u.panicked {
		err = statusError(op, st)
	}
	runtime.UnlockOSThread()
	return u.finish(h, err)
}

// Len is the number of entries.
func (m *FixedMap) Len() (int, error) {
	const op = "FixedMap.Len"
	if !m.g.acquire() {
		return 0, closedError(op)
	}
	defer m.g.release()
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	var n C.uint64_t
	if st := C.shoal_fixed_len(m.p, &n); st != C.SHOAL_OK {
		return 0, statusError(op, st)
	}
	return int(n), nil
}

// Clear removes every entry, one index segment at a time.
func (m *FixedMap) Clear() error {
	const op = "FixedMap.Clear"
	if !m.g.acquire() {
		return closedError(op)
	}
	defer m.g.release()
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	if st := C.shoal_fixed_clear(m.p); st != C.SHOAL_OK {
		return statusError(op, st)
	}
	return nil
}

// GetMany looks up every key in one C call and returns their values in key order (nil
// for an absent key); the values share one backing array. See [Map.GetMany].
func (m *FixedMap) GetMany(keys [][]byte) ([][]byte, error) {
	const op = "FixedMap.GetMany"
	sc := manyPool.Get().(*manyScratch)
	defer manyPool.Put(sc)
	sc.keys = grow(sc.keys, len(keys)*m.keySize)[:0]
	for i, k := range keys {
		if len(k) != m.keySize {
			return nil, errorf(op, StatusInvalid, "key %d: map %q has %d-byte keys, not %d", i, m.name, m.keySize, len(k))
		}
		sc.keys = append(sc.keys, k...)
	}
	data := make([]byte, len(keys)*m.valueSize)
	present := make([]byte, len(keys))
	if !m.g.acquire() {
		return nil, closedError(op)
	}
	defer m.g.release()
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	st := C.goshoal_fixed_get_many(m.p, (*C.uchar)(bytesPtr(sc.keys)), C.size_t(m.keySize), C.size_t(len(keys)),
		(*C.uchar)(bytesPtr(data)), C.size_t(m.valueSize), (*C.uchar)(bytesPtr(present)))
	if st != C.SHOAL_OK {
		return nil, statusError(op, st)
	}
	out := make([][]byte, len(keys))
	vs := m.valueSize
	for i, p := range present {
		if p != 0 {
			out[i] = data[i*vs : (i+1)*vs : (i+1)*vs]
		}
	}
	return out, nil
}

// Iter returns a pass over the map's entries (see [Iter]).
func (m *FixedMap) Iter() *Iter { return &Iter{fixed: m} }

func (m *FixedMap) each(values bool, yield func([]byte, []byte) bool) error {
	const op = "FixedMap.Iter"
	if !m.g.acquire() {
		return closedError(op)
	}
	var it *C.shoal_fixed_iter
	runtime.LockOSThread()
	st := C.shoal_fixed_iter_open(m.p, &it)
	var err error
	if st != C.SHOAL_OK {
		err = statusError(op, st)
	}
	runtime.UnlockOSThread()
	m.g.release()
	if err != nil {
		return err
	}
	defer C.shoal_fixed_iter_close(it)
	ks, vs := m.keySize, m.valueSize
	for {
		entry := make([]byte, ks+vs)
		var vp unsafe.Pointer
		vlen := 0
		if values && vs > 0 {
			vp = unsafe.Pointer(&entry[ks])
			vlen = vs
		}
		runtime.LockOSThread()
		st := C.shoal_fixed_iter_next(it, unsafe.Pointer(&entry[0]), C.size_t(ks), vp, C.size_t(vlen))
		if st != C.SHOAL_OK && st != C.SHOAL_DONE {
			err = statusError(op, st)
		}
		runtime.UnlockOSThread()
		switch st {
		case C.SHOAL_OK:
		case C.SHOAL_DONE:
			return nil
		default:
			return err
		}
		var v []byte
		if values {
			v = entry[ks:]
		}
		if !yield(entry[:ks:ks], v) {
			return nil
		}
	}
}
