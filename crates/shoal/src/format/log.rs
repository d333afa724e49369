//! Logs: a ring of fixed-size record slots that any thread of any process appends to
//! without a lock, and named readers drain in reservation order (FORMAT.md, "Logs").

// ---- Log header: at CHUNK_HDR inside the log's one index run ----
/// Flags: the full policy in bits 0..1 ([`LP_OVERWRITE`], [`LP_WAIT`], [`LP_DROP`]);
/// other bits 0.
pub const LH_FLAGS: u64 = 0;
/// The log's run, for a drop (the word is a map's `M_CHAIN`: a log has one run).
pub const LH_CHAIN: u64 = 8;
/// Record slots in the ring (N, 2 ..= [`MAX_LOG_SLOTS`]).
pub const LH_SLOTS: u64 = 16;
/// Most payload bytes a record carries (P, 1 ..= [`MAX_LOG_RECORD`]): its message and its
/// fields, encoded.
pub const LH_MAX_RECORD: u64 = 24;
/// Bytes from one slot to the next: [`SLOT_HDR`] + P rounded up to 64.
pub const LH_STRIDE: u64 = 32;
/// Reader entries (R, 1 ..= [`MAX_LOG_READERS`]).
pub const LH_READERS: u64 = 40;
/// Absolute offsets of the reader table, the writer table and the first slot.
pub const LH_READER_TAB: u64 = 48;
pub const LH_WRITER_TAB: u64 = 56;
pub const LH_SLOT_TAB: u64 = 64;
/// The next sequence number to reserve (alone on its line: every append adds to it).
pub const LH_TAIL: u64 = 128;
/// Futex word (low 32 bits) a writer bumps after publishing when readers sleep.
pub const LH_WAKE: u64 = 192;
/// Readers asleep on [`LH_WAKE`] (a hint: a sleeper killed leaves it high, which costs
/// appends a wake call each, never a lost wake-up).
pub const LH_SLEEPERS: u64 = 200;
/// Futex word a reader bumps after moving its cursor when writers wait for room.
pub const LH_ROOM: u64 = 256;
/// Writers asleep on [`LH_ROOM`] (a hint, as [`LH_SLEEPERS`]).
pub const LH_ROOM_WAITERS: u64 = 264;
/// The wait and drop policies' floor: no reader's cursor is below it, so a writer may
/// reserve sequence s while s < floor + N. Raised (never lowered) by writers that found
/// no room, to the smallest cursor.
pub const LH_FLOOR: u64 = 320;
/// Records dropped by the drop policy (a figure).
pub const LH_DROPPED: u64 = 328;
/// Records turned into holes because their writer died before publishing (a figure).
pub const LH_HOLES: u64 = 336;
/// Lock word of the reader table (a registration or a removal holds it).
pub const LH_READERS_LOCK: u64 = 384;
/// The header's size; the reader table follows it.
pub const LOG_HEADER: u64 = 448;

/// Full policies.
pub const LP_OVERWRITE: u64 = 0;
pub const LP_WAIT: u64 = 1;
pub const LP_DROP: u64 = 2;

// ---- Reader table: one 128-byte entry per named reader ----
pub const READER_ENTRY: u64 = 128;
/// `used | incarnation << 8`; used 0 free, 1 in use. The incarnation changes on every
/// registration and removal, so a handle knows when its reader was removed.
pub const R_STATE: u64 = 0;
/// The next sequence number this reader reads.
pub const R_CURSOR: u64 = 8;
/// Records overwritten before this reader read them, and holes it passed (figures).
pub const R_MISSED: u64 = 16;
pub const R_SKIPPED: u64 = 24;
/// The reader's name: length (1 ..= [`MAX_READER_NAME`]), then UTF-8 bytes.
pub const R_NAME_LEN: u64 = 32;
pub const R_NAME: u64 = 40;
pub const MAX_READER_NAME: usize = 88;

// ---- Writer table: one 64-byte entry per txn slot ----
pub const WRITER_ENTRY: u64 = 64;
/// The owner word (`txn_owner`) of the process whose thread last used the entry.
pub const W_OWNER: u64 = 0;
/// What that thread is doing: [`W_IDLE`], or a kind in bits 62..63 and a sequence
/// number below: [`W_RESERVING`] (with a lower bound of what it will reserve),
/// [`W_WRITING`] (with what it reserved), [`W_INSIDE`] (reading).
pub const W_STATE: u64 = 8;
pub const W_IDLE: u64 = 0;
pub const W_RESERVING: u64 = 1 << 62;
pub const W_WRITING: u64 = 2 << 62;
pub const W_INSIDE: u64 = 3 << 62;
/// The sequence number of a writer state word.
pub const W_SEQ_MASK: u64 = (1 << 62) - 1;

// ---- Record slots: `stride` bytes each, slot of sequence s at s mod N ----
/// `seq << 2 | status` ([`RS_EMPTY`] .. [`RS_HOLE`]).
pub const S_STATE: u64 = 0;
/// Unix time of the append, nanoseconds.
pub const S_TIME: u64 = 8;
/// The writer's process id (bits 0..31) and thread id (bits 32..63).
pub const S_PID_TID: u64 = 16;
/// The level (bits 0..7) and the number of fields (bits 8..23).
pub const S_LEVEL: u64 = 24;
/// Bytes of the message, and of the whole payload (message then fields).
pub const S_MSG_LEN: u64 = 32;
pub const S_PAYLOAD_LEN: u64 = 40;
/// The payload starts here.
pub const SLOT_HDR: u64 = 48;
/// Slot statuses.
pub const RS_EMPTY: u64 = 0;
pub const RS_WRITING: u64 = 1;
pub const RS_PUBLISHED: u64 = 2;
pub const RS_HOLE: u64 = 3;

/// A slot state word.
#[inline]
pub fn slot_state(seq: u64, status: u64) -> u64 {
    seq << 2 | status
}

/// The most record slots in a log.
pub const MAX_LOG_SLOTS: u64 = 1 << 32;
/// The largest record payload.
pub const MAX_LOG_RECORD: u64 = 1 << 20;
/// The most readers of a log.
pub const MAX_LOG_READERS: u64 = 256;
/// The most fields of a record.
pub const MAX_LOG_FIELDS: u64 = 0xffff;
/// Bytes a field takes in a payload besides its key and value: two u32 lengths.
pub const FIELD_HDR: u64 = 8;
