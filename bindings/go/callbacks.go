package shoal

// The Go functions the C helpers call back. A file with //export may hold only
// declarations in its preamble, so these live apart from the C calls.

/*
#include <stdint.h>
#include <stdbool.h>
#include <stddef.h>
*/
import "C"

import (
	"runtime"
	"runtime/cgo"
	"unsafe"
)

// newHandle registers a Go value for a C callback's context: C receives an integer,
// never a Go pointer, as cgo's rules require.
func newHandle(v any) cgo.Handle { return cgo.NewHandle(v) }

// updateState is the context of one Update call.
type updateState struct {
	f func(value []byte, present bool) ([]byte, bool)
	// pin keeps the new value where it is while C holds its address (the C ABI reads
	// it after the callback returns); a pinned Go pointer may be stored in C memory.
	pin      runtime.Pinner
	panicked bool
	panicVal any
}

// Return values of goshoalUpdate: SHOAL_UPDATE_SET, SHOAL_UPDATE_REMOVE, and a value
// that is neither, which cancels the update.
const (
	updateSet    = 0
	updateRemove = 1
	updateCancel = 2
)

// finish releases the context after the C call and re-raises a panic of f.
func (u *updateState) finish(h cgo.Handle, err error) error {
	u.pin.Unpin()
	h.Delete()
	if u.panicked {
		panic(u.panicVal)
	}
	return err
}

//export goshoalUpdate
func goshoalUpdate(h C.uintptr_t, cur unsafe.Pointer, curLen C.size_t, present C.bool, newValue *unsafe.Pointer, newLen *C.size_t) (ret C.int) {
	u := cgo.Handle(h).Value().(*updateState)
	// A panic must not unwind through the C frames between here and Update.
	defer func() {
		if r := recover(); r != nil {
			u.panicked = true
			u.panicVal = r
			ret = updateCancel
		}
	}()
	var old []byte
	if present {
		old = make([]byte, int(curLen))
		if curLen > 0 {
			copy(old, unsafe.Slice((*byte)(cur), int(curLen)))
		}
	}
	// The previous attempt's value is no longer needed by C.
	u.pin.Unpin()
	v, keep := u.f(old, bool(present))
	if !keep {
		return updateRemove
	}
	if len(v) > 0 {
		u.pin.Pin(unsafe.SliceData(v))
		*newValue = unsafe.Pointer(unsafe.SliceData(v))
	} else {
		*newValue = nil
	}
	*newLen = C.size_t(len(v))
	return updateSet
}

//export goshoalName
func goshoalName(h C.uintptr_t, text *C.char, n C.size_t) C.int {
	names := cgo.Handle(h).Value().(*[]string)
	*names = append(*names, C.GoStringN(text, C.int(n)))
	return 0
}
