package shoal

/*
#include <shoal.h>
*/
import "C"

import (
	"errors"
	"fmt"
)

// Status is a status code of the C ABI (shoal_status). Errors returned by this package
// carry one; compare errors with [errors.Is] and the Err* values rather than with codes.
type Status int32

// The status codes of the C ABI, in the order of shoal.h.
const (
	StatusOK             Status = C.SHOAL_OK
	StatusNotFound       Status = C.SHOAL_NOT_FOUND
	StatusExists         Status = C.SHOAL_EXISTS
	StatusFull           Status = C.SHOAL_FULL
	StatusNoSpace        Status = C.SHOAL_NO_SPACE
	StatusCorrupt        Status = C.SHOAL_CORRUPT
	StatusVersion        Status = C.SHOAL_VERSION
	StatusPermission     Status = C.SHOAL_PERMISSION
	StatusInvalid        Status = C.SHOAL_INVALID
	StatusTimeout        Status = C.SHOAL_TIMEOUT
	StatusTooMany        Status = C.SHOAL_TOO_MANY
	StatusIO             Status = C.SHOAL_IO
	StatusBufferTooSmall Status = C.SHOAL_BUFFER_TOO_SMALL
	StatusNullPointer    Status = C.SHOAL_NULL_POINTER
	StatusPanic          Status = C.SHOAL_PANIC
	StatusNotAStore      Status = C.SHOAL_NOT_A_STORE
	StatusDone           Status = C.SHOAL_DONE
	StatusError          Status = C.SHOAL_ERROR
	StatusMismatch       Status = C.SHOAL_MISMATCH
	StatusStaleUID       Status = C.SHOAL_STALE_UID
	StatusReadOnly       Status = C.SHOAL_READ_ONLY
	StatusEmpty          Status = C.SHOAL_EMPTY
	StatusQueueFull      Status = C.SHOAL_QUEUE_FULL
)

// String names the status as the library does (shoal_strerror).
func (s Status) String() string {
	return C.GoString(C.shoal_strerror(C.int32_t(s)))
}

// The sentinel errors, one per status code. Every error this package returns for a
// failed call is an [*Error] that matches exactly one of them with [errors.Is].
var (
	// ErrNotFound: the store file, the map or the key does not exist; also a map that
	// another process dropped.
	ErrNotFound = errors.New("shoal: not found")
	// ErrExists: the store file exists (ModeCreateNew).
	ErrExists = errors.New("shoal: already exists")
	// ErrFull: the store reached its maximum size or its maximum number of maps.
	ErrFull = errors.New("shoal: store full")
	// ErrNoSpace: the filesystem has no room left (for example a full /dev/shm).
	ErrNoSpace = errors.New("shoal: no space left on the filesystem")
	// ErrCorrupt: the file is not a consistent store, or a check found problems.
	ErrCorrupt = errors.New("shoal: corrupt store")
	// ErrVersion: the file's format version is newer than this library reads, or needs
	// an upgrade that only a process alone with the file may make.
	ErrVersion = errors.New("shoal: unsupported format version")
	// ErrPermission: the operating system refused access to the file.
	ErrPermission = errors.New("shoal: permission denied")
	// ErrInvalid: an argument is out of range (a key, value or name too long, a map of
	// the other kind, a key of the wrong size for a fixed map, bad options).
	ErrInvalid = errors.New("shoal: invalid argument")
	// ErrTimeout: a lock held by a live but stuck process was not released in time.
	ErrTimeout = errors.New("shoal: timed out waiting for a lock")
	// ErrTooMany: more processes or threads use the store than it has slots for.
	ErrTooMany = errors.New("shoal: too many users of the store")
	// ErrIO: any other I/O error.
	ErrIO = errors.New("shoal: I/O error")
	// ErrPanic: a bug inside the library (it panicked; the handles stay usable).
	ErrPanic = errors.New("shoal: internal panic")
	// ErrNotAStore: the file is not a Shoal store at all.
	ErrNotAStore = errors.New("shoal: not a shoal store")
	// ErrMismatch: a compare-and-swap found another value (the bool-returning methods
	// report it as false instead).
	ErrMismatch = errors.New("shoal: value mismatch")
	// ErrStaleUID: a by-UID call named a removed key.
	ErrStaleUID = errors.New("shoal: stale uid")
	// ErrReadOnly: the store was opened with ModeReadOnly and the call writes.
	ErrReadOnly = errors.New("shoal: store opened read-only")
	// ErrEmpty: a queue pull found the queue empty for its whole timeout.
	ErrEmpty = errors.New("shoal: queue empty")
	// ErrQueueFull: a push would pass the queue's depth limit; the elements stay held.
	ErrQueueFull = errors.New("shoal: queue full")
	// ErrClosed: the handle was closed by this program (no C call was made).
	ErrClosed = errors.New("shoal: handle closed")
	// ErrUnknown: a status this version of the binding does not know (a newer library),
	// or SHOAL_ERROR; also the statuses that mean a bug in the binding
	// (SHOAL_NULL_POINTER, SHOAL_BUFFER_TOO_SMALL left unhandled).
	ErrUnknown = errors.New("shoal: error")
)

var sentinels = map[Status]error{
	StatusNotFound:   ErrNotFound,
	StatusExists:     ErrExists,
	StatusFull:       ErrFull,
	StatusNoSpace:    ErrNoSpace,
	StatusCorrupt:    ErrCorrupt,
	StatusVersion:    ErrVersion,
	StatusPermission: ErrPermission,
	StatusInvalid:    ErrInvalid,
	StatusTimeout:    ErrTimeout,
	StatusTooMany:    ErrTooMany,
	StatusIO:         ErrIO,
	StatusPanic:      ErrPanic,
	StatusNotAStore:  ErrNotAStore,
	StatusMismatch:   ErrMismatch,
	StatusStaleUID:   ErrStaleUID,
	StatusReadOnly:   ErrReadOnly,
	StatusEmpty:      ErrEmpty,
	StatusQueueFull:  ErrQueueFull,
}

// Error is a failed call: the operation, the library's status and its detail message
// (shoal_last_error_message, which names the file, map or item concerned).
type Error struct {
	// Op is the binding's operation, for example "Map.Put".
	Op string
	// Status is the C ABI's status code.
	Status Status
	// Message is the library's detail message ("" when it gave none).
	Message string
}

// Error formats the operation and the message (which starts with the status's name),
// or the status alone when there is no message.
func (e *Error) Error() string {
	if e.Message == "" {
		return fmt.Sprintf("shoal: %s: %s", e.Op, e.Status)
	}
	return fmt.Sprintf("shoal: %s: %s", e.Op, e.Message)
}

// Unwrap returns the sentinel of the status (ErrNotFound, ErrInvalid, ...), so that
// errors.Is(err, shoal.ErrNotFound) works on any error of this package.
func (e *Error) Unwrap() error {
	if s, ok := sentinels[e.Status]; ok {
		return s
	}
	return ErrUnknown
}

// statusError builds the error of a failed call. The library keeps the detail message
// per OS thread, so the caller must have made the call under runtime.LockOSThread and
// call this before unlocking: otherwise the goroutine may have moved to another thread
// and read another call's message.
func statusError(op string, st C.shoal_status) error {
	msg := C.GoString(C.shoal_last_error_message())
	return &Error{Op: op, Status: Status(st), Message: msg}
}

// errorf is a failure found by the binding itself before any C call.
func errorf(op string, st Status, format string, args ...any) error {
	return &Error{Op: op, Status: st, Message: st.String() + ": " + fmt.Sprintf(format, args...)}
}

// closedError reports the use of a closed handle.
func closedError(op string) error {
	return fmt.Errorf("shoal: %s: %w", op, ErrClosed)
}
