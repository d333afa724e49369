package shoal

/*
#include <stdlib.h>
#include <shoal.h>
*/
import "C"

import (
	"runtime"
	"time"
	"unsafe"
)

// QueueOptions create a queue set ([Store.Queues]): a pool of Elements fixed-size
// elements, zeroed, that named queues pass between processes by reference.
type QueueOptions struct {
	// ElementSize is the number of bytes per element, 1 to 2^30.
	ElementSize int
	// Elements is the number of elements in the set, 1 to 2^32 - 1.
	Elements uint64
	// Queues names the set's queues (1 to 120 bytes of UTF-8 each). The set also has a
	// queue "free", first, unless Initial names another queue.
	Queues []string
	// Limits gives the depth limit of queues of Queues by name (absent or 0: none): a
	// push that would pass it fails with ErrQueueFull.
	Limits map[string]uint64
	// Initial names the queue every element starts in, which is also where a dead
	// holder's elements go unless Redeliver is set. Default "free".
	Initial string
	// Redeliver sends a dead holder's elements back to the queue each was pulled from,
	// marked Redelivered.
	Redeliver bool
}

// QueueSet is a queue set of a store: elements in shared memory that processes pull
// from named queues, read and write in place, and push on to other queues. It may be
// used by any number of goroutines at once. Queues are named by the index [QueueSet.Queue]
// gives, the same in every process.
type QueueSet struct {
	g    guard
	p    *C.shoal_queue
	name string
}

// Element is an element this process holds, from a pull until it is pushed or
// released. Data is the element's memory in the store itself: read and write it while
// the element is held; after a push or release, another process owns those bytes.
type Element struct {
	// Data is the element's bytes in place (ElementSize of them).
	Data []byte
	// Index is the element's index in its set, the same in every process.
	Index uint64
	// From is the queue it was pulled from.
	From int
	// Redelivered is true when it is back in its queue because a process died holding it.
	Redelivered bool
	c           C.shoal_element
}

func newElement(c C.shoal_element) *Element {
	return &Element{
		Data:        unsafe.Slice((*byte)(unsafe.Pointer(c.data)), int(c.len)),
		Index:       uint64(c.index),
		From:        int(c.from),
		Redelivered: c.redelivered != 0,
		c:           c,
	}
}

// Queues opens the queue set name, creating it with opts if opts is not nil and there
// is none (an existing set keeps its geometry and queues). With opts nil a missing set
// is ErrNotFound.
func (s *Store) Queues(name string, opts *QueueOptions) (*QueueSet, error) {
	const op = "Store.Queues"
	cname, err := cString(op, name)
	if err != nil {
		return nil, err
	}
	defer C.free(unsafe.Pointer(cname))
	var co *C.shoal_queue_options
	if opts != nil {
		if opts.ElementSize < 1 {
			return nil, errorf(op, StatusInvalid, "element size %d", opts.ElementSize)
		}
		co = (*C.shoal_queue_options)(C.calloc(1, C.size_t(unsafe.Sizeof(C.shoal_queue_options{}))))
		defer C.free(unsafe.Pointer(co))
		co.struct_size = C.size_t(unsafe.Sizeof(*co))
		co.element_size = C.size_t(opts.ElementSize)
		co.elements = C.uint64_t(opts.Elements)
		if n := len(opts.Queues); n > 0 {
			// The names and limits go in C memory: C may not hold Go pointers.
			names := unsafe.Slice((**C.char)(C.calloc(C.size_t(n), C.size_t(unsafe.Sizeof((*C.char)(nil))))), n)
			limits := unsafe.Slice((*C.uint64_t)(C.calloc(C.size_t(n), 8)), n)
			defer func() {
				for _, p := range names {
					C.free(unsafe.Pointer(p))
				}
				C.free(unsafe.Pointer(&names[0]))
				C.free(unsafe.Pointer(&limits[0]))
			}()
			for i, q := range opts.Queues {
				if names[i], err = cString(op, q); err != nil {
					return nil, err
				}
				limits[i] = C.uint64_t(opts.Limits[q])
			}
			for q := range opts.Limits {
				found := false
				for _, n := range opts.Queues {
					found = found || n == q
				}
				if !found {
					return nil, errorf(op, StatusInvalid, "a limit for %q, which is not in Queues", q)
				}
			}
			co.queues = &names[0]
			co.n_queues = C.size_t(n)
			co.limits = &limits[0]
		} else if len(opts.Limits) > 0 {
			return nil, errorf(op, StatusInvalid, "limits without Queues")
		}
		if opts.Initial != "" {
			ci, err := cString(op, opts.Initial)
			if err != nil {
				return nil, err
			}
			defer C.free(unsafe.Pointer(ci))
			co.initial = ci
		}
		if opts.Redeliver {
			co.redeliver = 1
		}
	}
	if !s.g.acquire() {
		return nil, closedError(op)
	}
	defer s.g.release()
	var p *C.shoal_queue
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	if st := C.shoal_queue_open(s.p, cname, co, &p); st != C.SHOAL_OK {
		return nil, statusError(op, st)
	}
	return &QueueSet{p: p, name: name}, nil
}

// Name is the set's name.
func (q *QueueSet) Name() string { return q.name }

// Close closes the handle. Elements this process holds stay held (until it ends) and
// their Data stays valid while the store is open. Calls in flight finish first (a Pull
// waits out its timeout).
func (q *QueueSet) Close() error {
	if q.g.close() {
		C.shoal_queue_close(q.p)
		q.p = nil
	}
	return nil
}

// Queue is the index of the queue called name, which the other calls take.
func (q *QueueSet) Queue(name string) (int, error) {
	const op = "QueueSet.Queue"
	cname, err := cString(op, name)
	if err != nil {
		return 0, err
	}
	defer C.free(unsafe.Pointer(cname))
	if !q.g.acquire() {
		return 0, closedError(op)
	}
	defer q.g.release()
	var idx C.uint32_t
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	if st := C.shoal_queue_index(q.p, cname, &idx); st != C.SHOAL_OK {
		return 0, statusError(op, st)
	}
	return int(idx), nil
}

// Pull takes the element at the head of queue, waiting up to timeout for a push from
// any process if the queue is empty (0: not at all). No element is an error matching
// ErrEmpty.
func (q *QueueSet) Pull(queue int, timeout time.Duration) (*Element, error) {
	const op = "QueueSet.Pull"
	if queue < 0 || timeout < 0 {
		return nil, errorf(op, StatusInvalid, "queue %d, timeout %v", queue, timeout)
	}
	if !q.g.acquire() {
		return nil, closedError(op)
	}
	defer q.g.release()
	var e C.shoal_element
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	ms := (timeout + time.Millisecond - 1) / time.Millisecond
	if st := C.shoal_queue_pull(q.p, C.uint32_t(queue), C.uint64_t(ms), &e); st != C.SHOAL_OK {
		return nil, statusError(op, st)
	}
	return newElement(e), nil
}

// PullMany takes up to max elements from the head of queue in one step (none when it
// is empty: not an error).
func (q *QueueSet) PullMany(queue, max int) ([]*Element, error) {
	const op = "QueueSet.PullMany"
	if queue < 0 || max < 0 {
		return nil, errorf(op, StatusInvalid, "queue %d, max %d", queue, max)
	}
	if max == 0 {
		return nil, nil
	}
	if !q.g.acquire() {
		return nil, closedError(op)
	}
	defer q.g.release()
	out := make([]C.shoal_element, max)
	var got C.size_t
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	if st := C.shoal_queue_pull_many(q.p, C.uint32_t(queue), &out[0], C.size_t(max), &got); st != C.SHOAL_OK {
		return nil, statusError(op, st)
	}
	es := make([]*Element, int(got))
	for i := range es {
		es[i] = newElement(out[i])
	}
	return es, nil
}

// Push puts the held element e at the tail of queue; it is no longer this process's.
// At the queue's depth limit it fails with ErrQueueFull and e stays held.
func (q *QueueSet) Push(queue int, e *Element) error {
	const op = "QueueSet.Push"
	if queue < 0 || e == nil {
		return errorf(op, StatusInvalid, "queue %d, element %v", queue, e)
	}
	if !q.g.acquire() {
		return closedError(op)
	}
	defer q.g.release()
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	if st := C.shoal_queue_push(q.p, C.uint32_t(queue), &e.c); st != C.SHOAL_OK {
		return statusError(op, st)
	}
	return nil
}

// PushMany puts the held elements at the tail of queue in order, in one step: all of
// them, or (ErrQueueFull) none, which then stay held.
func (q *QueueSet) PushMany(queue int, es []*Element) error {
	const op = "QueueSet.PushMany"
	if queue < 0 {
		return errorf(op, StatusInvalid, "queue %d", queue)
	}
	if len(es) == 0 {
		return nil
	}
	cs := make([]C.shoal_element, len(es))
	for i, e := range es {
		if e == nil {
			return errorf(op, StatusInvalid, "element %d is nil", i)
		}
		cs[i] = e.c
	}
	if !q.g.acquire() {
		return closedError(op)
	}
	defer q.g.release()
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	if st := C.shoal_queue_push_many(q.p, C.uint32_t(queue), &cs[0], C.size_t(len(cs))); st != C.SHOAL_OK {
		return statusError(op, st)
	}
	return nil
}

// Release gives the held element e back to the queue it was pulled from (past that
// queue's depth limit if need be).
func (q *QueueSet) Release(e *Element) error {
	const op = "QueueSet.Release"
	if e == nil {
		return errorf(op, StatusInvalid, "nil element")
	}
	if !q.g.acquire() {
		return closedError(op)
	}
	defer q.g.release()
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	if st := C.shoal_queue_release(q.p, &e.c); st != C.SHOAL_OK {
		return statusError(op, st)
	}
	return nil
}

// Move moves up to max elements from the head of queue from to the tail of queue to in
// one step, within to's depth limit, and returns how many it moved.
func (q *QueueSet) Move(from, to, max int) (int, error) {
	const op = "QueueSet.Move"
	if from < 0 || to < 0 || max < 0 {
		return 0, errorf(op, StatusInvalid, "from %d, to %d, max %d", from, to, max)
	}
	if !q.g.acquire() {
		return 0, closedError(op)
	}
	defer q.g.release()
	var moved C.size_t
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	if st := C.shoal_queue_move(q.p, C.uint32_t(from), C.uint32_t(to), C.size_t(max), &moved); st != C.SHOAL_OK {
		return 0, statusError(op, st)
	}
	return int(moved), nil
}

// Len is the number of elements in queue now.
func (q *QueueSet) Len(queue int) (int, error) {
	const op = "QueueSet.Len"
	if queue < 0 {
		return 0, errorf(op, StatusInvalid, "queue %d", queue)
	}
	if !q.g.acquire() {
		return 0, closedError(op)
	}
	defer q.g.release()
	var n C.uint64_t
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	if st := C.shoal_queue_len(q.p, C.uint32_t(queue), &n); st != C.SHOAL_OK {
		return 0, statusError(op, st)
	}
	return int(n), nil
}

// Reclaim hands back now the elements of every process that died holding some, and
// returns how many went back (pulls do this on their own when they find a queue empty).
func (q *QueueSet) Reclaim() (int, error) {
	const op = "QueueSet.Reclaim"
	if !q.g.acquire() {
		return 0, closedError(op)
	}
	defer q.g.release()
	var n C.uint64_t
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	if st := C.shoal_queue_reclaim(q.p, &n); st != C.SHOAL_OK {
		return 0, statusError(op, st)
	}
	return int(n), nil
}
