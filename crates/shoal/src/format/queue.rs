//! Queue sets: a pool of fixed-size elements and the named queues that pass them between
//! processes by reference (FORMAT.md, "Queue sets").

// ---- Queue set header: at CHUNK_HDR inside the set's one index run ----
/// Flags: [`QF_REDELIVER`]; other bits must be 0.
pub const QH_FLAGS: u64 = 0;
/// The set's run, for a drop (the word is a map's `M_CHAIN`: a set has one run).
pub const QH_CHAIN: u64 = 8;
/// Bytes per element (1 ..= [`MAX_ELEMENT_SIZE`]).
pub const QH_ELEM_SIZE: u64 = 16;
/// Elements in the set (1 ..= [`MAX_ELEMENTS`]).
pub const QH_ELEMS: u64 = 24;
/// Queues in the set (1 ..= [`MAX_QUEUES`]).
pub const QH_NQUEUES: u64 = 32;
/// The queue a dead holder's elements go to when the set does not redeliver them.
pub const QH_RETURN: u64 = 40;
/// Bytes from one element's first byte to the next's: the size rounded up to 64.
pub const QH_STRIDE: u64 = 48;
/// Absolute offsets of the queue table, the link table and the first element.
pub const QH_QUEUES: u64 = 56;
pub const QH_LINKS: u64 = 64;
pub const QH_DATA: u64 = 72;
/// The owner word of a process dropping the set (0: none). While that process is
/// alive, pulls fail: a drop waits out the pulls in flight and then checks that no live
/// process holds an element, whose bytes would otherwise be written after the set's space
/// went to another object.
pub const QH_CLOSING: u64 = 80;
/// Lock word of the sweep that hands a dead holder's elements back (alone on its line).
pub const QH_SWEEP_LOCK: u64 = 128;
/// One word per process slot from here: the owner word (`txn_owner`) of the process
/// attached there when it last took elements from the set, 0 when none.
pub const QH_HOLDERS: u64 = 192;

/// Set flag: a dead holder's elements go back to the queue each was pulled from, marked
/// redelivered, instead of to the return queue.
pub const QF_REDELIVER: u64 = 1;

// ---- Queue table: one 256-byte entry per queue ----
pub const QUEUE_ENTRY: u64 = 256;
/// The queue's lock word (FORMAT.md, "Locks").
pub const Q_LOCK: u64 = 0;
/// First and last element, [`NO_ELEMENT`] when the queue is empty.
pub const Q_HEAD: u64 = 8;
pub const Q_TAIL: u64 = 16;
/// Elements in the queue.
pub const Q_LEN: u64 = 24;
/// Most elements the queue takes from a push (0: no limit).
pub const Q_LIMIT: u64 = 32;
/// Elements pushed and pulled so far (written under the lock, in redo lists).
pub const Q_PUSHES: u64 = 40;
pub const Q_PULLS: u64 = 48;
/// Times a pull slept waiting for the queue (a hint: added to without the lock).
pub const Q_WAITS: u64 = 56;
/// Futex word (low 32 bits) that a push bumps when the queue has sleepers, on its own
/// line: waiters sleep on it.
pub const Q_WAKE: u64 = 64;
/// Pulls sleeping on [`Q_WAKE`] (a hint: a sleeper killed leaves it high, which costs
/// pushes a wake call each, never a lost wake-up).
pub const Q_SLEEPERS: u64 = 72;
/// The queue's name: length, then UTF-8 bytes.
pub const Q_NAME_LEN: u64 = 128;
pub const Q_NAME: u64 = 136;
pub const MAX_QUEUE_NAME: usize = 120;

// ---- Link table: 16 bytes per element ----
pub const LINK_ENTRY: u64 = 16;
/// Where the element is: see [`qs_in_queue`] and [`qs_held`].
pub const L_STATE: u64 = 0;
/// The next element in its queue ([`NO_ELEMENT`] after the last); while held, the
/// holder's own.
pub const L_NEXT: u64 = 8;
/// No element: an empty queue's head and tail, the last element's next.
pub const NO_ELEMENT: u64 = u64::MAX;

/// State kinds (bits 0..1 of a state word).
pub const QS_IN_QUEUE: u64 = 1;
pub const QS_HELD: u64 = 2;
/// State bit 2: the element is in its queue again because its holder died.
pub const QS_REDELIVERED: u64 = 4;

/// The state word of an element in queue `q`.
#[inline]
pub fn qs_in_queue(q: u64, redelivered: bool) -> u64 {
    QS_IN_QUEUE | (redelivered as u64) << 2 | (q & 0xff) << 8
}

/// The state word of an element pulled from queue `q` by the process attached at slot
/// `p` with generation `gen` (its low 32 bits are kept).
#[inline]
pub fn qs_held(q: u64, p: u64, gen: u64) -> u64 {
    QS_HELD | (q & 0xff) << 8 | (p & 0xffff) << 16 | (gen & 0xffff_ffff) << 32
}

/// The queue of a state word (where it is, or where it was pulled from).
#[inline]
pub fn qs_queue(s: u64) -> u64 {
    (s >> 8) & 0xff
}

/// The holder (process slot, low 32 bits of its generation) of a held state word.
#[inline]
pub fn qs_holder(s: u64) -> (u64, u64) {
    ((s >> 16) & 0xffff, s >> 32)
}

/// The most queues in a set.
pub const MAX_QUEUES: u64 = 256;
/// The most elements in a set.
pub const MAX_ELEMENTS: u64 = (1 << 32) - 1;
/// The largest element.
pub const MAX_ELEMENT_SIZE: u64 = 1 << 30;

/// Intent kind 5 (`I_QMOVE`) arguments: the set's header, the first element of the chain
/// the move hands over, the chain's length and the state word its elements take.
pub const QA_SET: usize = 0;
pub const QA_FIRST: usize = 1;
pub const QA_COUNT: usize = 2;
pub const QA_STATE: usize = 3;

/// The size of a queue set's header (up to the queue table) in a store of `n_proc`
/// process slots.
pub fn queue_header_size(n_proc: u64) -> u64 {
    (QH_HOLDERS + 8 * n_proc).next_multiple_of(128)
}
