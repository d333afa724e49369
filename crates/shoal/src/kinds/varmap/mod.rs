//! Variable-size maps: extendible hashing (see `hashmap`) over small segments of 128-byte
//! buckets whose slots point at records.
//!
//! ```text
//! root (one word)  = directory offset | global depth g << 48
//! directory[i]     = segment offset | local depth << 48,  i = hash & (2^g - 1)
//! segment          = header line (lock, depth, prefix) + n_main buckets + n_stash buckets
//! bucket (128 B)   = header word (seq u32 | overflow u16 << 32) + 15 slots
//! slot             = tag (hash >> 48) << 48 | record offset (0 = empty)
//! ```
//!
//! A key lives in its home bucket (`format::home_bucket`) or, when that is full, in one of
//! the stash buckets; the home bucket's *overflow* count says how many of its keys are in
//! the stash, so a lookup reads the stash only then (F14's overflow counts: no tombstones).
//! Keys never move between buckets of a segment; they move only to a new segment in a split.
//!
//! Readers write nothing: they read the bucket header, scan the slots, compare the key in
//! the record, copy the value, and then re-read the header and the directory entry; any
//! change means retry. Writers lock the segment (one word in its header line), and bump the
//! bucket's seq to odd and back to even around every change, through a redo intent.
//!
//! Growth splits one full segment at a time: a new segment receives the keys whose hash
//! bit `depth` is 1 at the *same bucket and slot positions* (so it never overflows), the
//! directory entries are repointed (the directory doubles first, into a fresh region, when
//! the segment's depth equals the global depth), and the moved keys are then removed from
//! the old segment. Only writers of that one segment wait; readers never do.

use crate::error::{Error, Result};
use crate::format::*;
use crate::shared::Shared;

pub(crate) use crate::alloc::record::*;
pub(crate) use crate::hashmap::*;
use std::sync::atomic::Ordering::*;

mod clear;
mod kind;
mod prefetch;
mod read;
mod relocate;
mod snapshot;
mod split;
mod txn;
pub(crate) mod uid;
mod write;

pub(crate) use clear::*;
pub(crate) use kind::*;
pub(crate) use read::*;
pub(crate) use snapshot::*;
pub(crate) use split::*;
pub(crate) use txn::*;
pub(crate) use write::*;

/// Where a key was found: the slot's location and the record's layout.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Hit {
    pub bucket: u64,
    pub slot: u64,
    pub off: u64,
    pub rec_len: u64,
    /// The record header's length (the key starts at `off + hl`).
    pub hl: u64,
    pub val_off: u64,
    /// The user's value length (without a UID trailer).
    pub vlen: u64,
}

/// A MapRef read straight from the catalog (recovery and checks).
pub(crate) fn map_ref_unchecked(sh: &Shared, id: u64) -> Result<MapRef> {
    if id >= sh.g.n_catalog {
        return Err(sh.corrupt(format!("map id {id} out of range")));
    }
    let ce = sh.g.cat_entry(id);
    let cat_word = sh.w(ce + C_STATE).load(Acquire);
    let hdr = sh.w(ce + C_HDR).load(Acquire);
    let end = sh.file_end();
    if !sh.g.map_header_fits(hdr, end) {
        return Err(sh.corrupt(format!("map {id}: header offset {hdr:#x} out of the file")));
    }
    if sh.w(hdr + M_FLAGS).load(Acquire) & MF_FIXED != 0 {
        // A fixed-size map's segments hold cells, not slots: never walk them as slots.
        return Err(Error::InvalidArgument(format!(
            "map {id} is a fixed-size map, not a variable-size one"
        )));
    }
    let n_main = sh.w(hdr + M_N_MAIN).load(Acquire);
    let n_stash = sh.w(hdr + M_N_STASH).load(Acquire);
    if !(1..=4096).contains(&n_main) || !(1..=1024).contains(&n_stash) || n_main > u16::MAX as u64 {
        return Err(sh.corrupt(format!("map {id}: bad geometry {n_main}+{n_stash} buckets")));
    }
    let flags = sh.w(hdr + M_FLAGS).load(Acquire);
    if flags & !MF_UIDS != 0 {
        return Err(sh.corrupt(format!("map {id}: unknown map flags {flags:#x}")));
    }
    Ok(MapRef {
        id,
        hdr,
        n_main,
        n_stash,
        seg_size: segment_size(n_main, n_stash),
        cat_word,
        timeout: sh.lock_timeout,
        vtrail: if flags & MF_UIDS != 0 { UID_TRAILER } else { 0 },
        groups: false,
    })
}

/// Creates the index of a new map inside its first chunk `c` (already taken by the caller
/// and zero-initialised as needed): header, a one-entry directory, one segment.
pub(crate) fn init_map(
    sh: &Shared,
    c: u64,
    id: u64,
    n_main: u64,
    n_stash: u64,
    flags: u64,
) -> MapRef {
    let hdr = c + CHUNK_HDR;
    let hsize = map_header_size(sh.g.n_txn);
    let mut o = hdr;
    while o < hdr + hsize {
        sh.w(o).store(0, Relaxed);
        o += 8;
    }
    let dir = hdr + hsize;
    let seg = dir + BUCKET;
    let m = MapRef {
        id,
        hdr,
        n_main,
        n_stash,
        seg_size: segment_size(n_main, n_stash),
        cat_word: 0,
        timeout: sh.lock_timeout,
        vtrail: if flags & MF_UIDS != 0 { UID_TRAILER } else { 0 },
        groups: false,
    };
    init_segment(sh, &m, seg, 0, 0, 0);
    sh.w(dir).store(dir_entry(seg, 0), Relaxed);
    sh.w(hdr + M_N_MAIN).store(n_main, Relaxed);
    sh.w(hdr + M_N_STASH).store(n_stash, Relaxed);
    sh.w(hdr + M_FLAGS).store(flags, Relaxed);
    sh.w(hdr + M_CHAIN).store(c, Relaxed);
    sh.w(hdr + M_ARENA).store(c, Relaxed);
    sh.w(hdr + M_ARENA_BUMP).store(seg + m.seg_size, Relaxed);
    sh.w(hdr + M_ROOT).store(make_root(dir, 0), Release);
    m
}

/// Space the first chunk of a map needs for its header, directory and first segment.
pub(crate) fn first_chunk_need(sh: &Shared, n_main: u64, n_stash: u64) -> u64 {
    CHUNK_HDR + map_header_size(sh.g.n_txn) + BUCKET + segment_size(n_main, n_stash)
}

#[cfg(test)]
impl MapRef {
    /// Where `key`'s record is, by an optimistic read (tests).
    pub(crate) fn record_of(&self, sh: &Shared, key: &[u8]) -> Option<u64> {
        self.read(sh, key, |rec, _, _| rec).ok().flatten()
    }
}
