package shoal

/*
#cgo pkg-config: shoal
#cgo noescape shoal_store_open
#cgo nocallback shoal_store_open
#cgo noescape shoal_map_open
#cgo nocallback shoal_map_open
#cgo noescape shoal_fixed_open_with
#cgo nocallback shoal_fixed_open_with
#cgo noescape shoal_map_get
#cgo nocallback shoal_map_get
#cgo noescape shoal_map_put
#cgo nocallback shoal_map_put
#cgo noescape shoal_map_put_if_absent
#cgo nocallback shoal_map_put_if_absent
#cgo noescape shoal_map_put_if_present
#cgo nocallback shoal_map_put_if_present
#cgo noescape shoal_map_remove
#cgo nocallback shoal_map_remove
#cgo noescape shoal_map_contains
#cgo nocallback shoal_map_contains
#cgo noescape shoal_map_len
#cgo nocallback shoal_map_len
#cgo noescape shoal_map_compare_and_swap
#cgo nocallback shoal_map_compare_and_swap
#cgo noescape shoal_map_add
#cgo nocallback shoal_map_add
#cgo noescape shoal_iter_open
#cgo nocallback shoal_iter_open
#cgo noescape shoal_iter_next
#cgo nocallback shoal_iter_next
#cgo noescape shoal_fixed_get
#cgo nocallback shoal_fixed_get
#cgo noescape shoal_fixed_put
#cgo nocallback shoal_fixed_put
#cgo noescape shoal_fixed_put_if_absent
#cgo nocallback shoal_fixed_put_if_absent
#cgo noescape shoal_fixed_put_if_present
#cgo nocallback shoal_fixed_put_if_present
#cgo noescape shoal_fixed_remove
#cgo nocallback shoal_fixed_remove
#cgo noescape shoal_fixed_contains
#cgo nocallback shoal_fixed_contains
#cgo noescape shoal_fixed_len
#cgo nocallback shoal_fixed_len
#cgo noescape shoal_fixed_compare_and_swap
#cgo nocallback shoal_fixed_compare_and_swap
#cgo noescape shoal_fixed_add
#cgo nocallback shoal_fixed_add
#cgo noescape shoal_fixed_iter_open
#cgo nocallback shoal_fixed_iter_open
#cgo noescape shoal_fixed_iter_next
#cgo nocallback shoal_fixed_iter_next
#cgo noescape goshoal_map_get_many
#cgo nocallback goshoal_map_get_many
#cgo noescape goshoal_fixed_get_many
#cgo nocallback goshoal_fixed_get_many
#cgo noescape shoal_store_path
#cgo nocallback shoal_store_path
#include <stdlib.h>
#include <shoal.h>
#include "helpers.h"
*/
import "C"

import (
	"os"
	"runtime"
	"sync/atomic"
	"time"
	"unsafe"
)

// Version is the version of the C library the program runs with (shoal_version).
func Version() string { return C.GoString(C.shoal_version()) }

// OpenMode says how [Open] treats an existing or missing file.
type OpenMode uint32

const (
	// ModeOpenOrCreate opens the store, creating it if it does not exist (the default).
	ModeOpenOrCreate OpenMode = C.SHOAL_OPEN_OR_CREATE
	// ModeOpenExisting opens an existing store; ErrNotFound if there is none.
	ModeOpenExisting OpenMode = C.SHOAL_OPEN_EXISTING
	// ModeCreateNew creates a new store; ErrExists if the file exists.
	ModeCreateNew OpenMode = C.SHOAL_CREATE_NEW
	// ModeReadOnly opens an existing store for reading only, with no write access to
	// the file needed; every call that writes fails with ErrReadOnly.
	ModeReadOnly OpenMode = C.SHOAL_OPEN_READ_ONLY
)

// Switch is a three-way setting: the library's default, on, or off.
type Switch uint32

const (
	// Default leaves the choice to the library.
	Default Switch = 0
	// On turns the feature on.
	On Switch = 1
	// Off turns the feature off.
	Off Switch = 2
)

// Options of [Open]. The zero value (or a nil *Options) takes every default. The size
// and table options apply when the store is created and are then fixed in its file;
// LockTimeout, SyncWrites and Pretouch apply to this process only.
type Options struct {
	// Mode says how an existing or missing file is treated. Default ModeOpenOrCreate.
	Mode OpenMode
	// FileMode holds the permission bits of a new file (at most 07777). Default 0600.
	FileMode os.FileMode
	// MaxSize is the largest size the file may grow to, in bytes, reserved as address
	// space (not memory). Default 1 TiB; at most 2^48.
	MaxSize uint64
	// InitialSize is the number of bytes allocated at creation. Default: the tables.
	InitialSize uint64
	// ChunkSize is the unit of file growth, a power of two from 64 KiB to 64 MiB.
	// Default 256 KiB. Every map takes at least one chunk.
	ChunkSize uint64
	// LockTimeout bounds how long a call waits for a lock held by a live process
	// before failing with ErrTimeout; rounded up to whole milliseconds. Default 5 s.
	// (Locks of dead processes are recovered within milliseconds whatever it is.)
	LockTimeout time.Duration
	// MaxProcesses is the number of processes that may have the store open at once
	// (1..65535). Default 1024.
	MaxProcesses uint32
	// MaxThreads is the number of OS threads, over all processes, that may use the
	// store at once (1..2^20). Default 1024. A Go program uses as many threads as
	// GOMAXPROCS plus those blocked in system calls.
	MaxThreads uint32
	// MaxMaps is the number of named maps the store can hold (1..65536). Default 1024.
	MaxMaps uint32
	// Checksums: whether records end with a CRC32C so that a value torn by an OS
	// crash is detected. Default: on for files on disk, off on tmpfs. Fixed at creation.
	Checksums Switch
	// SyncWrites flushes (msync + fsync) after every write call, so that each
	// acknowledged write survives an OS crash. Meaningful only for files on disk.
	SyncWrites bool
	// Pretouch: whether a background thread faults in the pages the store grows into
	// before writers reach them (tmpfs only). Default on.
	Pretouch Switch
}

// guard counts the calls in flight on a handle so that Close can wait for them: the
// C ABI forbids closing a handle while another thread uses it, and in Go a Close from
// one goroutine racing calls from others must not free memory under them. Cheaper than
// a sync.RWMutex for the same job, and never blocks a call behind a pending Close (a
// call during a Close fails with ErrClosed instead), so an Update function may call
// other methods of its own map.
type guard struct{ n atomic.Int64 }

const closedBit = 1 << 62

// acquire registers a call; false when the handle is closed (or closing).
func (g *guard) acquire() bool {
	if g.n.Add(1)&closedBit != 0 {
		g.n.Add(-1)
		return false
	}
	return true
}

// release ends a call registered by acquire.
func (g *guard) release() { g.n.Add(-1) }

// close marks the handle closed and waits for the calls in flight; false when it was
// already closed.
func (g *guard) close() bool {
	for {
		v := g.n.Load()
		if v&closedBit != 0 {
			return false
		}
		if g.n.CompareAndSwap(v, v|closedBit) {
			break
		}
	}
	for g.n.Load() != closedBit {
		time.Sleep(20 * time.Microsecond)
	}
	return true
}

// Store is an open store file. It may be used by any number of goroutines at once.
// Maps opened from it stay valid after it is closed (they keep the file mapped).
type Store struct {
	g    guard
	p    *C.shoal_store
	path string
}

// Open opens (or creates) a store file. A bare name without '/' means
// /dev/shm/NAME.shoal. opts may be nil for all defaults.
func Open(path string, opts *Options) (*Store, error) {
	const op = "Open"
	var co C.shoal_options
	co.struct_size = C.size_t(unsafe.Sizeof(co))
	if opts != nil {
		co.open_mode = C.uint32_t(opts.Mode)
		if opts.FileMode&^os.FileMode(0o7777) != 0 {
			return nil, errorf(op, StatusInvalid, "FileMode %v has bits beyond 07777", opts.FileMode)
		}
		co.file_mode = C.uint32_t(opts.FileMode.Perm())
		if opts.FileMode&os.ModeSetuid != 0 {
			co.file_mode |= 0o4000
		}
		if opts.FileMode&os.ModeSetgid != 0 {
			co.file_mode |= 0o2000
		}
		if opts.FileMode&os.ModeSticky != 0 {
			co.file_mode |= 0o1000
		}
		co.max_size = C.uint64_t(opts.MaxSize)
		co.initial_size = C.uint64_t(opts.InitialSize)
		co.chunk_size = C.uint64_t(opts.ChunkSize)
		if opts.LockTimeout < 0 {
			return nil, errorf(op, StatusInvalid, "negative LockTimeout %v", opts.LockTimeout)
		}
		ms := (opts.LockTimeout + time.Millisecond - 1) / time.Millisecond
		if ms > 1<<32-1 {
			return nil, errorf(op, StatusInvalid, "LockTimeout %v is too long", opts.LockTimeout)
		}
		co.lock_timeout_ms = C.uint32_t(ms)
		co.max_processes = C.uint32_t(opts.MaxProcesses)
		co.max_threads = C.uint32_t(opts.MaxThreads)
		co.max_maps = C.uint32_t(opts.MaxMaps)
		co.checksums = C.uint32_t(opts.Checksums)
		if opts.SyncWrites {
			co.sync_writes = 1
		}
		co.pretouch = C.uint32_t(opts.Pretouch)
	}
	cpath, err := cString(op, path)
	if err != nil {
		return nil, err
	}
	defer C.free(unsafe.Pointer(cpath))
	var p *C.shoal_store
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	if st := C.shoal_store_open(cpath, &co, &p); st != C.SHOAL_OK {
		return nil, statusError(op, st)
	}
	s := &Store{p: p}
	s.path = s.readPath()
	return s, nil
}

// cString copies a Go string to C memory (free it with C.free); a string holding a NUL
// byte cannot cross and is refused.
func cString(op, s string) (*C.char, error) {
	for i := 0; i < len(s); i++ {
		if s[i] == 0 {
			return nil, errorf(op, StatusInvalid, "%q holds a NUL byte", s)
		}
	}
	return C.CString(s), nil
}

func (s *Store) readPath() string {
	var buf [256]byte
	var n C.size_t
	st := C.shoal_store_path(s.p, (*C.char)(unsafe.Pointer(&buf[0])), C.size_t(len(buf)), &n)
	if st == C.SHOAL_OK {
		return string(buf[:n])
	}
	big := make([]byte, int(n)+1)
	if C.shoal_store_path(s.p, (*C.char)(unsafe.Pointer(&big[0])), C.size_t(len(big)), &n) == C.SHOAL_OK {
		return string(big[:n])
	}
	return ""
}

// Path is the store file's path (a bare name given to Open is resolved to
// /dev/shm/NAME.shoal).
func (s *Store) Path() string { return s.path }

// Close closes the store handle; the file stays. Maps opened from it stay usable.
// Calls in flight on other goroutines finish first. Closing twice is not an error.
func (s *Store) Close() error {
	if s.g.close() {
		C.shoal_store_close(s.p)
		s.p = nil
	}
	return nil
}

// Remove deletes a store file (path as for [Open]). Processes that have it open keep
// their mapping until they close it; later opens create a new, empty store.
func Remove(path string) error {
	const op = "Remove"
	cpath, err := cString(op, path)
	if err != nil {
		return err
	}
	defer C.free(unsafe.Pointer(cpath))
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	if st := C.shoal_store_destroy(cpath); st != C.SHOAL_OK {
		return statusError(op, st)
	}
	return nil
}

// MapOptions are the options of [Store.Map]. A nil *MapOptions opens the map,
// creating it with default options if it does not exist.
type MapOptions struct {
	// OpenExisting fails with ErrNotFound instead of creating a missing map.
	OpenExisting bool
	// SegmentBuckets is the number of main buckets per index segment (1..4096) of a
	// new map. Default 59.
	SegmentBuckets uint32
	// StashBuckets is the number of stash buckets per segment (1..1024) of a new map.
	// Default 4.
	StashBuckets uint32
	// UIDs gives a new map a stable 64-bit handle per key (see the C ABI's by-UID
	// calls). Opening an existing map without UIDs with UIDs set fails with ErrInvalid.
	UIDs bool
	// KeyType and ValueType are recorded in a new map for programs in every language
	// (see [DataType]); an existing map that recorded other types fails with ErrInvalid
	// (TypeBytes opens any map). Zero: none.
	KeyType, ValueType DataType
}

// Map opens the map name (1 to 224 bytes of UTF-8), creating it unless
// opts.OpenExisting. A map of the other kind (fixed-size) is ErrInvalid.
func (s *Store) Map(name string, opts *MapOptions) (*Map, error) {
	const op = "Store.Map"
	if !s.g.acquire() {
		return nil, closedError(op)
	}
	defer s.g.release()
	var co C.shoal_map_options
	co.struct_size = C.size_t(unsafe.Sizeof(co))
	flags := C.uint32_t(C.SHOAL_MAP_CREATE)
	if opts != nil {
		if opts.OpenExisting {
			flags = 0
		}
		co.segment_buckets = C.uint32_t(opts.SegmentBuckets)
		co.stash_buckets = C.uint32_t(opts.StashBuckets)
		if opts.UIDs {
			co.uids = 1
		}
		co.key_type, co.key_tag = C.uint32_t(opts.KeyType.Code), C.uint64_t(opts.KeyType.Tag)
		co.value_type, co.value_tag = C.uint32_t(opts.ValueType.Code), C.uint64_t(opts.ValueType.Tag)
	}
	cname, err := cString(op, name)
	if err != nil {
		return nil, err
	}
	defer C.free(unsafe.Pointer(cname))
	var p *C.shoal_map
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	if st := C.shoal_map_open(s.p, cname, flags, &co, &p); st != C.SHOAL_OK {
		return nil, statusError(op, st)
	}
	return &Map{p: p, name: name}, nil
}

// FixedOptions are the options of [Store.FixedMap]. A nil *FixedOptions opens the map,
// creating it with default options if it does not exist.
type FixedOptions struct {
	// OpenExisting fails with ErrNotFound instead of creating a missing map.
	OpenExisting bool
	// SegmentBuckets is the number of main buckets per index segment (1..4096) of a
	// new map. Default: segments of about 8 KiB.
	SegmentBuckets uint32
	// StashBuckets is the number of stash buckets per segment (1..1024) of a new map.
	StashBuckets uint32
	// KeyType and ValueType are recorded in a new map, as in [MapOptions]; TypeI64,
	// TypeU64 and TypeF64 need 8-byte keys or values.
	KeyType, ValueType DataType
}

// FixedMap opens the fixed-size map name, whose keys are exactly keySize bytes (1 to
// 512) and values exactly valueSize bytes (0 to 128), creating it unless
// opts.OpenExisting. An existing map with other sizes, or a variable-size map of that
// name, is ErrInvalid.
func (s *Store) FixedMap(name string, keySize, valueSize int, opts *FixedOptions) (*FixedMap, error) {
	const op = "Store.FixedMap"
	if keySize < 1 || keySize > C.SHOAL_FIXED_MAX_KEY_SIZE {
		return nil, errorf(op, StatusInvalid, "key size %d is outside 1..%d", keySize, C.SHOAL_FIXED_MAX_KEY_SIZE)
	}
	if valueSize < 0 || valueSize > C.SHOAL_FIXED_MAX_VALUE_SIZE {
		return nil, errorf(op, StatusInvalid, "value size %d is outside 0..%d", valueSize, C.SHOAL_FIXED_MAX_VALUE_SIZE)
	}
	if !s.g.acquire() {
		return nil, closedError(op)
	}
	defer s.g.release()
	var co C.shoal_fixed_options
	co.struct_size = C.size_t(unsafe.Sizeof(co))
	flags := C.uint32_t(C.SHOAL_MAP_CREATE)
	if opts != nil {
		if opts.OpenExisting {
			flags = 0
		}
		co.segment_buckets = C.uint32_t(opts.SegmentBuckets)
		co.stash_buckets = C.uint32_t(opts.StashBuckets)
		co.key_type, co.key_tag = C.uint32_t(opts.KeyType.Code), C.uint64_t(opts.KeyType.Tag)
		co.value_type, co.value_tag = C.uint32_t(opts.ValueType.Code), C.uint64_t(opts.ValueType.Tag)
	}
	cname, err := cString(op, name)
	if err != nil {
		return nil, err
	}
	defer C.free(unsafe.Pointer(cname))
	var p *C.shoal_fixed
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	if st := C.shoal_fixed_open_with(s.p, cname, C.size_t(keySize), C.size_t(valueSize), flags, &co, &p); st != C.SHOAL_OK {
		return nil, statusError(op, st)
	}
	return &FixedMap{p: p, name: name, keySize: keySize, valueSize: valueSize}, nil
}

// Maps lists the names of the store's maps (of both kinds), in no particular order.
func (s *Store) Maps() ([]string, error) {
	const op = "Store.Maps"
	if !s.g.acquire() {
		return nil, closedError(op)
	}
	defer s.g.release()
	var names []string
	h := newHandle(&names)
	defer h.Delete()
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	if st := C.goshoal_map_names(s.p, C.uintptr_t(h)); st != C.SHOAL_OK {
		return nil, statusError(op, st)
	}
	return names, nil
}

// DropMap drops the map name and everything in it; false when there was no such map.
// Handles on it, in every process, get ErrNotFound from then on.
func (s *Store) DropMap(name string) (bool, error) {
	const op = "Store.DropMap"
	if !s.g.acquire() {
		return false, closedError(op)
	}
	defer s.g.release()
	cname, err := cString(op, name)
	if err != nil {
		return false, err
	}
	defer C.free(unsafe.Pointer(cname))
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	switch st := C.shoal_store_drop_map(s.p, cname); st {
	case C.SHOAL_OK:
		return true, nil
	case C.SHOAL_NOT_FOUND:
		return false, nil
	default:
		return false, statusError(op, st)
	}
}

// Check verifies every invariant of the store file and returns the problems found
// (none for a sound store). Run it on a quiet store: writes in flight can look like
// problems. A store too damaged to walk is an error matching ErrCorrupt.
func (s *Store) Check() ([]string, error) {
	const op = "Store.Check"
	if !s.g.acquire() {
		return nil, closedError(op)
	}
	defer s.g.release()
	var problems []string
	h := newHandle(&problems)
	defer h.Delete()
	var n C.uint64_t
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	st := C.goshoal_store_check(s.p, &n, C.uintptr_t(h))
	switch {
	case st == C.SHOAL_OK:
		return nil, nil
	case st == C.SHOAL_CORRUPT && len(problems) > 0:
		return problems, nil
	default:
		return problems, statusError(op, st)
	}
}

// Flush writes everything in the store through to stable storage (msync + fsync), so
// that an OS crash loses nothing written before it. Useful only for files on disk.
func (s *Store) Flush() error {
	const op = "Store.Flush"
	if !s.g.acquire() {
		return closedError(op)
	}
	defer s.g.release()
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	if st := C.shoal_store_flush(s.p); st != C.SHOAL_OK {
		return statusError(op, st)
	}
	return nil
}

// testPanic makes the library panic inside a call and returns the error every call
// returns then; the tests use it to show that no panic crosses into Go.
func testPanic() error {
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	if st := C.shoal_test_panic(); st != C.SHOAL_OK {
		return statusError("testPanic", st)
	}
	return nil
}

// bytesPtr is the address of b's first element for C (nil for a nil or empty-capacity
// slice, which the C ABI accepts with a zero length).
func bytesPtr(b []byte) unsafe.Pointer {
	return unsafe.Pointer(unsafe.SliceData(b))
}
