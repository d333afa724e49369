//! Extendible hashing, shared by both hash-map kinds (variable and fixed-size): a map's
//! handle, its directory and segments, segment locks, index arenas and growth.
//!
//! ```text
//! root (one word)  = directory offset | global depth g << 48
//! directory[i]     = segment offset | local depth << 48,  i = hash & (2^g - 1)
//! segment          = header line (lock, depth, prefix) + n_main buckets + n_stash buckets
//! ```
//!
//! A key's directory entry is `hash & (2^g - 1)`; splits (and, in fixed-size maps of
//! groups, moves of directory groups) repoint entries, and the directory doubles into a
//! fresh region, published with one store of the root word, when it must.

mod arena;
mod check;
mod dir;
mod segment;
mod skeleton;
mod wait;

pub(crate) use arena::*;
pub(crate) use check::*;
pub(crate) use dir::*;
pub(crate) use segment::*;
pub(crate) use skeleton::*;
pub(crate) use wait::*;

use crate::error::{Error, Result};
use crate::format::*;
use crate::mem::Region;
use crate::shared::Shared;
use std::sync::atomic::Ordering::*;
use std::time::Duration;

/// What a handle knows about a map: its id, header and segment geometry.
#[derive(Clone, Copy, Debug)]
pub(crate) struct MapRef {
    pub id: u64,
    pub hdr: u64,
    pub n_main: u64,
    pub n_stash: u64,
    pub seg_size: u64,
    /// The catalog state word when the handle was made; any change means the map was
    /// dropped (and perhaps its id reused).
    pub cat_word: u64,
    /// How long a read may wait for a bucket that a live writer keeps busy.
    pub timeout: Duration,
    /// Bytes at the end of every record's value that are not the user's value:
    /// [`UID_TRAILER`] in a map with UIDs, else 0.
    pub vtrail: u64,
    /// A fixed-size map that grows by moving directory groups ([`MF_GROUPS`]): its
    /// directory entries carry no depths, and a segment may be named by any set of them.
    pub groups: bool,
}

impl MapRef {
    /// The sum of one field (`MC_COUNT`, `MC_BYTES`, `MC_SPLITS`) of the map's per-txn-slot
    /// counter blocks. Per-thread deltas may be read mid-operation, so a momentarily
    /// negative sum reads as 0.
    pub fn counter_sum(&self, sh: &Shared, field: u64) -> u64 {
        let mut n: u64 = 0;
        for t in 0..sh.g.n_txn {
            n = n.wrapping_add(
                sh.w(self.hdr + M_COUNTERS + MC_SIZE * t + field)
                    .load(Relaxed),
            );
        }
        if (n as i64) < 0 {
            0
        } else {
            n
        }
    }

    /// The figures both kinds of maps share: entries, index bytes, segments, splits and
    /// directory depth (`live_bytes` is the kind's to fill in).
    pub fn stats(&self, sh: &Shared) -> Result<crate::object::ObjectStats> {
        let segments = segments(sh, self)?.len() as u64;
        Ok(crate::object::ObjectStats {
            entries: self.counter_sum(sh, MC_COUNT),
            live_bytes: 0,
            index_bytes: segments * self.seg_size,
            segments,
            splits: self.counter_sum(sh, MC_SPLITS),
            directory_depth: sh.w(self.hdr + M_ROOT).load(Acquire) >> 48,
        })
    }

    #[inline]
    pub fn alive(&self, sh: &Shared) -> bool {
        self.alive_in(&sh.r, &sh.g)
    }

    #[inline(always)]
    pub(crate) fn alive_in(&self, r: &Region, g: &Geometry) -> bool {
        r.word(g.cat_entry(self.id) + C_STATE).load(Acquire) == self.cat_word
    }

    pub(crate) fn dropped(&self) -> Error {
        Error::NotFound(format!("map {} was dropped", self.id))
    }

    /// Loads root and the directory entry for `h`: (root, entry offset, entry).
    #[inline(always)]
    pub(crate) fn locate(&self, sh: &Shared, h: u64, end: u64) -> Result<(u64, u64, u64)> {
        match self.locate_in(&sh.r, &sh.g, h, end) {
            Some(found) => Ok(found),
            None => self.locate_slow(sh, h),
        }
    }

    /// [`MapRef::locate`] without its slow path: `None` when a check fails.
    #[inline(always)]
    pub(crate) fn locate_in(
        &self,
        r: &Region,
        g: &Geometry,
        h: u64,
        end: u64,
    ) -> Option<(u64, u64, u64)> {
        let root = r.word(self.hdr + M_ROOT).load(Acquire);
        let depth = root >> 48;
        let dir = root & OFF_MASK;
        // `depth` comes from the file: checked below, but never shift by more than 63 first.
        let eoff = dir + 8 * (h & ((1u64 << depth.min(MAX_DEPTH)) - 1));
        // One branch for all the bounds checks: they pass on every healthy lookup.
        if (depth > MAX_DEPTH) | (eoff + 8 > end) | (dir < g.chunks_off) | (dir % 8 != 0) {
            return None;
        }
        let e = r.word(eoff).load(Acquire);
        let seg = entry_seg(e);
        if (seg < g.chunks_off) | (seg + self.seg_size > end) | (seg % BUCKET != 0) {
            return None;
        }
        Some((root, eoff, e))
    }

    /// [`MapRef::locate`] when a check failed: `end` may be stale (the file grew since),
    /// so look again with a fresh one before calling the file corrupt.
    #[cold]
    #[inline(never)]
    pub(crate) fn locate_slow(&self, sh: &Shared, h: u64) -> Result<(u64, u64, u64)> {
        let end = sh.file_end();
        let root = sh.w(self.hdr + M_ROOT).load(Acquire);
        let g = root >> 48;
        let dir = root & OFF_MASK;
        let eoff = dir + 8 * (h & ((1u64 << g.min(MAX_DEPTH)) - 1));
        if g > MAX_DEPTH || eoff + 8 > end || dir < sh.g.chunks_off || dir % 8 != 0 {
            return Err(self.bad(
                sh,
                format!("map {}: directory root {root:#x} out of the file", self.id),
            ));
        }
        let e = sh.w(eoff).load(Acquire);
        let seg = entry_seg(e);
        if seg < sh.g.chunks_off || seg + self.seg_size > end || seg % BUCKET != 0 {
            return Err(self.bad(
                sh,
                format!(
                    "map {}: directory entry {eoff:#x} = {e:#x} out of the file",
                    self.id
                ),
            ));
        }
        Ok((root, eoff, e))
    }

    /// A structural error: "dropped" if the map is gone, else corruption.
    pub(crate) fn bad(&self, sh: &Shared, what: String) -> Error {
        if !self.alive(sh) {
            self.dropped()
        } else {
            sh.corrupt(what)
        }
    }
}

/// Items of one iteration step.
pub(crate) type Items = Vec<(Vec<u8>, Vec<u8>)>;

/// One step of an iteration: the items of one segment, the position after it (None at
/// the end), and what of the segment was damaged and skipped (then the items are what
/// could be read): the segment and what to say.
pub(crate) struct Step {
    pub items: Items,
    pub next: Option<u64>,
    pub damage: Option<(u64, String)>,
}

/// Keys per stage of a staged lookup (`Map::get_many_with`, `FixedMap::get_many_with`):
/// while one stage's keys are read, the next stage's buckets are on their way. 8
/// measured best at 10 M keys (5.39-5.54 M/s against 5.19 for 12, 4.66-4.84 for 16 and
/// 24, 5.20 for 6).
pub(crate) const STAGE: usize = 8;
