package shoal

/*
#include <shoal.h>
*/
import "C"

import (
	"iter"
	"runtime"
)

// Iter is one pass over a map's entries, weakly consistent: every key present for the
// whole pass is yielded exactly once, no key twice; keys added or removed meanwhile may
// or may not be. Range over All or Keys, then check Err, as with bufio.Scanner:
//
//	it := m.Iter()
//	for k, v := range it.All() { ... }
//	if err := it.Err(); err != nil { ... }
//
// Each range starts a new pass. The yielded slices are fresh copies the loop may keep.
// An Iter is for one goroutine at a time.
type Iter struct {
	m     *Map
	fixed *FixedMap
	err   error
}

// Iter returns a pass over the map's entries; nothing is read until it is ranged over.
func (m *Map) Iter() *Iter { return &Iter{m: m} }

// Err is the error that ended the last pass early, or nil when it ended because every
// entry was yielded or the loop stopped.
func (it *Iter) Err() error { return it.err }

// All yields every entry's key and value.
func (it *Iter) All() iter.Seq2[[]byte, []byte] {
	return func(yield func([]byte, []byte) bool) {
		if it.fixed != nil {
			it.err = it.fixed.each(true, yield)
		} else {
			it.err = it.m.each(true, yield)
		}
	}
}

// Keys yields every key (the values are not copied out).
func (it *Iter) Keys() iter.Seq[[]byte] {
	return func(yield func([]byte) bool) {
		y := func(k, _ []byte) bool { return yield(k) }
		if it.fixed != nil {
			it.err = it.fixed.each(false, y)
		} else {
			it.err = it.m.each(false, y)
		}
	}
}

// each runs one pass; the C iterator copies entries into buffers of this goroutine
// that grow to fit, and each entry is handed out as one fresh allocation.
func (m *Map) each(values bool, yield func([]byte, []byte) bool) error {
	const op = "Map.Iter"
	if !m.g.acquire() {
		return closedError(op)
	}
	var flags C.uint32_t
	if !values {
		flags = C.SHOAL_ITER_KEYS_ONLY
	}
	var it *C.shoal_iter
	runtime.LockOSThread()
	st := C.shoal_iter_open(m.p, flags, &it)
	var err error
	if st != C.SHOAL_OK {
		err = statusError(op, st)
	}
	runtime.UnlockOSThread()
	// The iterator holds its own reference to the map: the handle may close meanwhile.
	m.g.release()
	if err != nil {
		return err
	}
	defer C.shoal_iter_close(it)
	kbuf := make([]byte, 256)
	vbuf := make([]byte, 1024)
	for {
		var kn, vn C.size_t
		runtime.LockOSThread()
		st := C.shoal_iter_next(it, bytesPtr(kbuf), C.size_t(len(kbuf)), &kn, bytesPtr(vbuf), C.size_t(len(vbuf)), &vn)
		if st != C.SHOAL_OK && st != C.SHOAL_DONE && st != C.SHOAL_BUFFER_TOO_SMALL {
			err = statusError(op, st)
		}
		runtime.UnlockOSThread()
		switch st {
		case C.SHOAL_OK:
		case C.SHOAL_DONE:
			return nil
		case C.SHOAL_BUFFER_TOO_SMALL:
			// Nothing was consumed: retry the same entry with buffers that fit.
			if int(kn) > len(kbuf) {
				kbuf = make([]byte, int(kn))
			}
			if values && int(vn) > len(vbuf) {
				vbuf = make([]byte, int(vn))
			}
			continue
		default:
			return err
		}
		var entry []byte
		if values {
			entry = make([]byte, int(kn)+int(vn))
			copy(entry, kbuf[:kn])
			copy(entry[kn:], vbuf[:vn])
			if !yield(entry[:kn:kn], entry[kn:]) {
				return nil
			}
		} else {
			entry = make([]byte, int(kn))
			copy(entry, kbuf[:kn])
			if !yield(entry, nil) {
				return nil
			}
		}
	}
}
