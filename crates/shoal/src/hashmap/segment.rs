//! Segments: locking one, a fresh one, the spare a split builds into, and the spares
//! made ahead of growth.
use super::*;
use crate::error::Result;
use crate::format::*;
use crate::shared::Shared;
use crate::txn::{Redo, Txn};
use std::sync::atomic::Ordering::*;

impl MapRef {
    /// Whether some writer holds the lock of the segment that holds `h` right now.
    pub(crate) fn segment_locked(&self, sh: &Shared, h: u64) -> Result<bool> {
        let (_, _, e) = self.locate(sh, h, sh.file_end())?;
        Ok(sh.w(entry_seg(e) + S_LOCK).load(Acquire) & (WAITERS - 1) != 0)
    }
}

impl MapRef {
    /// [`MapRef::lock_segment`] with `before_lock(segment)` called before each attempt to
    /// take the lock (fixed maps ask for their own buckets' lines there).
    pub(crate) fn lock_segment_with(
        &self,
        tx: &Txn,
        h: u64,
        before_lock: impl Fn(u64),
    ) -> Result<u64> {
        let sh = tx.sh;
        loop {
            // A handle on a dropped map must not lock whatever its stale header (perhaps
            // a reused chunk by now) points at.
            if !self.alive(sh) {
                return Err(self.dropped());
            }
            let end = sh.file_end();
            let (_, _, e) = self.locate(sh, h, end)?;
            let seg = entry_seg(e);
            before_lock(seg);
            tx.lock(seg + S_LOCK)?;
            if !self.alive(sh) {
                tx.unlock(seg + S_LOCK);
                return Err(self.dropped());
            }
            let (_, _, e2) = self.locate(sh, h, sh.file_end())?;
            if entry_seg(e2) == seg {
                return Ok(seg);
            }
            tx.unlock(seg + S_LOCK);
        }
    }
}

/// Makes sure the map has a spare segment (and, when `dir_g` is given, a spare directory
/// of that depth), allocating from its index arena. Called with the directory lock held.
pub(crate) fn ensure_spares(tx: &Txn, m: &MapRef, dir_g: Option<u64>) -> Result<()> {
    let sh = tx.sh;
    let need_seg = sh.w(m.hdr + M_SPARE_SEG).load(Acquire) == 0;
    let need_dir = match dir_g {
        Some(g) => {
            sh.w(m.hdr + M_SPARE_DIR).load(Acquire) == 0
                || sh.w(m.hdr + M_SPARE_DIR_G).load(Acquire) != g
        }
        None => false,
    };
    if need_seg {
        let s = arena_alloc(tx, m, m.seg_size)?;
        let mut redo = Redo::new();
        redo.push(m.hdr + M_SPARE_SEG, s.0);
        commit_apply(tx, &mut redo, &s.1);
    }
    if need_dir {
        let g = dir_g.unwrap_or(0);
        let d = arena_alloc(tx, m, 8 << g)?;
        let mut redo = Redo::new();
        redo.push(m.hdr + M_SPARE_DIR, d.0);
        redo.push(m.hdr + M_SPARE_DIR_G, g);
        commit_apply(tx, &mut redo, &d.1);
    }
    Ok(())
}

thread_local! {
    /// Set by a split, taken by [`prepare_growth`]: the write that split has paid enough.
    pub(crate) static SPLIT_IN_WRITE: std::cell::Cell<bool> = const { std::cell::Cell::new(false) };
}

/// After a write, with no lock held: takes the spare segment the next split will use,
/// and the spare directory the next doubling will use, if the map lacks them, so that a
/// split never also pays for growing the file (a new index chunk is a `fallocate` of a
/// chunk, 0.1-0.3 ms on tmpfs here; with a split and a directory doubling in the same
/// put that made the longest put 1.3 ms). Skipped by the write that itself split, and
/// when another thread holds the directory lock. Errors (a full store) are left for the
/// next split to report.
pub(crate) fn prepare_growth(tx: &Txn, m: &MapRef) {
    let sh = tx.sh;
    if SPLIT_IN_WRITE.with(|c| c.replace(false)) {
        return;
    }
    let g = sh.w(m.hdr + M_ROOT).load(Relaxed) >> 48;
    let has_seg = sh.w(m.hdr + M_SPARE_SEG).load(Relaxed) != 0;
    let has_dir = sh.w(m.hdr + M_SPARE_DIR).load(Relaxed) != 0
        && sh.w(m.hdr + M_SPARE_DIR_G).load(Relaxed) == g + 1;
    // A directory of depth MAX_DEPTH is never doubled; a tiny map's spare directory is a
    // few bytes of its arena.
    let want_dir = !has_dir && g < MAX_DEPTH;
    if has_seg && !want_dir {
        return;
    }
    let lock = m.hdr + M_DIR_LOCK;
    if !tx.try_lock(lock) {
        return;
    }
    // A drop's barrier takes the directory lock after marking the map dropping: seen
    // alive under the lock, the map's chain cannot be freed until we release it.
    if m.alive(sh) {
        let _ = ensure_spares(tx, m, want_dir.then_some(g + 1));
    }
    tx.unlock(lock);
}

/// The map's spare segment, which a split of `seg` is about to build its new segment in.
/// It comes from the file and is written next: it must be a whole segment inside the file
/// and not `seg` itself. Shared by the variable and the fixed-size maps.
pub(crate) fn spare_segment(sh: &Shared, m: &MapRef, seg: u64) -> Result<u64> {
    let s1 = sh.w(m.hdr + M_SPARE_SEG).load(Acquire);
    let fits = s1 >= sh.g.chunks_off
        && s1 % BUCKET == 0
        && s1
            .checked_add(m.seg_size)
            .is_some_and(|e| e <= sh.file_end())
        && (s1 + m.seg_size <= seg || seg + m.seg_size <= s1);
    if !fits {
        return Err(m.bad(
            sh,
            format!("map {}: spare segment {s1:#x} does not fit the file", m.id),
        ));
    }
    Ok(s1)
}

/// Zeroes a segment's memory (it may be a reused chunk) and sets its header.
pub(crate) fn init_segment(sh: &Shared, m: &MapRef, seg: u64, lock: u64, depth: u64, prefix: u64) {
    let mut o = seg;
    while o < seg + m.seg_size {
        sh.w(o).store(0, Relaxed);
        o += 8;
    }
    sh.w(seg + S_DEPTH).store(depth, Relaxed);
    sh.w(seg + S_PREFIX).store(prefix, Relaxed);
    sh.w(seg + S_LOCK).store(lock, Release);
}
