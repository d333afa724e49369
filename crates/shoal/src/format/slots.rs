//! The process table and the txn slots, and the words those slots own: lock words and
//! intent kinds.

use super::REDO_MASK_SHIFT;

// ---- Process table: one 64-byte slot per attached process ----
pub const PROC_SLOT: u64 = 64;
/// Slot state: 0 = free, 1 = attached.
pub const P_STATE: u64 = 0;
/// Incremented on every attach; part of the identity of the slot's txn slots.
pub const P_GEN: u64 = 8;
pub const P_PID: u64 = 16;
/// Write sections open by threads of the process that have no txn slot of the store (the
/// recovery of dead threads at attach), in the high half (see `T_KIND`); 0 at attach.
pub const P_SECTIONS: u64 = 24;

// ---- Txn slots: one 512-byte slot per thread that uses the store ----
pub const TXN_SLOT: u64 = 512;
/// 0 = free; else `1 | proc << 1 | proc_gen << 17` (see [`txn_owner`]).
pub const T_OWNER: u64 = 0;
/// Txn id + 1 of whoever is recovering this slot after its owner died (0 = nobody).
pub const T_RECOVERING: u64 = 8;
/// The thread's current data chunk (0 = none) and its bump offset (absolute).
pub const T_DATA_CHUNK: u64 = 16;
pub const T_BUMP: u64 = 24;
/// Intent state: 0 none, 1 committed (redo list must be applied).
pub const T_INTENT: u64 = 32;
/// Intent kind (see `txn::Intent`), and its arguments.
pub const T_KIND: u64 = 40;
pub const T_ARGS: u64 = 48;
pub const T_NARGS: u64 = 6;
/// Locks the thread holds or is about to take: offsets of lock words (0 = empty).
pub const T_HELD: u64 = 96;
pub const T_NHELD: u64 = 8;
/// Redo list: count, then (offset, value) pairs.
pub const T_REDO_N: u64 = 160;
pub const T_REDO: u64 = 168;
pub const T_NREDO: u64 = 20;
/// A large-record run this txn allocated and has not published yet (0 = none).
pub const T_LARGE: u64 = 488;
/// Dead bytes this txn produced and has not yet added to the store's `H_DEAD_HINT`.
pub const T_DEAD_PEND: u64 = 496;
/// The segment a lock-free add of this txn is counted in (0 = none); see `kinds::fixed`.
pub const T_ADDING: u64 = 504;

/// Encodes the owner word of a txn slot.
pub fn txn_owner(proc_idx: u64, proc_gen: u64) -> u64 {
    1 | (proc_idx << 1) | ((proc_gen & ((1 << 47) - 1)) << 17)
}
/// Decodes (process slot, process generation) from an owner word.
pub fn txn_owner_parts(owner: u64) -> (u64, u64) {
    ((owner >> 1) & 0xffff, owner >> 17)
}

// ---- Lock words (FORMAT.md, "Locks") ----
/// Bit 31 of a lock word: waiters may sleep on it (a release must wake one).
pub const WAITERS: u64 = 1 << 31;
/// Bits 0..30 of a lock word: the owning txn slot + 1 (0: free).
pub const OWNER_MASK: u64 = WAITERS - 1;
/// The high half of a lock word is not the lock's: segment locks of fixed-size maps count
/// the lock-free adders in flight there (see `kinds::fixed`). Taking and releasing a lock
/// keeps it; in every other lock word it is always 0.
pub const LOCK_HIGH: u64 = !((1u64 << 32) - 1);

// ---- Intent kinds (`T_KIND`; FORMAT.md, "Intents") ----
/// A redo list: absolute values for words, replayed as they are.
pub const I_REDO: u64 = 1;
/// A split of a variable-size map's segment (arguments `A_*` of the split).
pub const I_SPLIT: u64 = 2;
/// A split of a fixed-size map's segment (same arguments as `I_SPLIT`).
pub const I_FSPLIT: u64 = 3;
/// A fixed-size map's move of a directory group to another segment.
pub const I_FMOVE: u64 = 4;
/// A queue set's move of a chain of elements into or out of a queue (arguments `QA_*`).
pub const I_QMOVE: u64 = 5;

/// A redo entry's word offset and the mask of the bytes it writes (all 64 bits for a
/// plain entry).
#[inline]
pub fn redo_target(at: u64) -> (u64, u64) {
    let mask8 = at >> REDO_MASK_SHIFT;
    let off = at & ((1 << REDO_MASK_SHIFT) - 1);
    if mask8 == 0 {
        return (off, u64::MAX);
    }
    let mut mask = 0u64;
    for j in 0..8 {
        if mask8 >> j & 1 == 1 {
            mask |= 0xff << (8 * j);
        }
    }
    (off, mask)
}

// ---- Intent arguments (`T_ARGS`) ----
/// Split arguments, stored in the txn slot's intent.
pub const A_MAP: usize = 0;
pub const A_SEG: usize = 1;
pub const A_NEW: usize = 2;
pub const A_DEPTH: usize = 3;
pub const A_PHASE: usize = 4;
/// Move arguments, stored in the txn slot's intent (kind `I_FMOVE`).
pub const V_MAP: usize = 0;
pub const V_SRC: usize = 1;
pub const V_DST: usize = 2;
pub const V_GROUP: usize = 3;
/// Bit 0: the phase (1 once the destination holds the group's cells); bit 1: the
/// destination is the map's spare segment, new to the map.
pub const V_PHASE: usize = 4;
pub const V_DEPTH: usize = 5;
