//! The algorithms both hash-map layouts share, written once and specialised per layout
//! at compile time (closures and generics, inlined as the originals were): the optimistic
//! read loop and its backoff, a split's publication in the directory, clearing segment by
//! segment, and an iteration step's retries and locked fallback. What touches a bucket
//! (probes, the first read attempt, builds, removals, copies) stays each layout's own.

use super::*;
use crate::deadline::Wait;
use crate::error::Result;
use crate::format::*;
use crate::shared::Shared;
use crate::txn::Txn;
use std::sync::atomic::Ordering::*;
use std::time::Duration;

/// Outcome of one optimistic attempt (a read, a probe of the stash).
pub(crate) enum Attempt<T> {
    /// It validated: this is the answer.
    Done(T),
    /// Something changed meanwhile: try again.
    Retry,
}

impl MapRef {
    /// The optimistic read loop: `once` again and again, with [`MapRef::backoff`] between
    /// attempts, until one validates. `h` is the key's hash (for the writer's liveness).
    #[inline]
    pub(crate) fn retry_reads<T>(
        &self,
        sh: &Shared,
        h: u64,
        mut once: impl FnMut() -> Result<Attempt<T>>,
    ) -> Result<T> {
        // The clock is read only once a retry happens: the common read never needs it.
        let wait = Wait::begin(self.timeout, self.timeout);
        let mut tries = 0u32;
        loop {
            tries += 1;
            self.backoff(sh, h, tries, &wait)?;
            if let Attempt::Done(r) = once()? {
                return Ok(r);
            }
        }
    }

    /// Between optimistic retries: spin, then yield, then sleep; after 10 ms check whether
    /// the segment's writer died (and recover it), and give up at the lock timeout.
    #[cold]
    pub(crate) fn backoff(&self, sh: &Shared, h: u64, tries: u32, wait: &Wait) -> Result<()> {
        if tries < 16 {
            std::hint::spin_loop();
            return Ok(());
        }
        if tries < 64 {
            crate::rt::yield_now();
            return Ok(());
        }
        if !self.alive(sh) {
            return Err(self.dropped());
        }
        let expired = wait.expired();
        // The deadline is checked here too, not only with the writer's liveness every
        // 10 ms: a deadline below that (zero: "only if not busy now") gives up after the
        // spins and yields.
        if wait.waited() > Duration::from_millis(10) || expired {
            let (_, _, e) = self.locate(sh, h, sh.file_end())?;
            let lockw = sh.w(entry_seg(e) + S_LOCK).load(Acquire) & (WAITERS - 1);
            if lockw != 0 && !sh.txn_alive(lockw - 1) {
                if !sh.read_only {
                    crate::txn::recover_txn(sh, lockw - 1)?;
                } else if expired {
                    return Err(dead_writer_error(sh));
                }
            }
            if expired {
                return Err(wait.timeout());
            }
        }
        crate::rt::sleep(Duration::from_micros(50));
        Ok(())
    }

    /// A split's publication (phase 1, idempotent): the directory entries of `seg`'s
    /// interval repointed at `seg` and the new segment `s1` by hash bit `d`, both depths
    /// and `s1`'s prefix set, the spare taken; on disk made durable before the caller
    /// removes the moved entries from `seg`.
    pub(crate) fn publish_split(&self, sh: &Shared, seg: u64, s1: u64, d: u64) -> Result<()> {
        let root = sh.w(self.hdr + M_ROOT).load(Acquire);
        let g = root >> 48;
        let dir = root & OFF_MASK;
        let prefix = sh.w(seg + S_PREFIX).load(Acquire) & ((1 << d) - 1);
        let mut j = prefix;
        while j < (1 << g) {
            let e = if (j >> d) & 1 == 1 {
                dir_entry(s1, d + 1)
            } else {
                dir_entry(seg, d + 1)
            };
            sh.w(dir + 8 * j).store(e, Release);
            j += 1 << d;
        }
        sh.w(s1 + S_DEPTH).store(d + 1, Release);
        sh.w(s1 + S_PREFIX).store(prefix | (1 << d), Release);
        sh.w(seg + S_DEPTH).store(d + 1, Release);
        sh.w(self.hdr + M_SPARE_SEG).store(0, Release);
        // On disk, the repointed directory (and the depths) must be durable before the
        // moved entries are removed from the old segment.
        sh.persist(dir, 8 << g)?;
        sh.persist(self.hdr, 8)?;
        sh.persist(seg, BUCKET)?;
        sh.persist(s1, BUCKET)
    }

    /// Clears the map segment by segment: `clear_one` on each, under its lock, until a
    /// fresh listing names no segment not yet cleared (splits may add some meanwhile).
    /// Returns the sum of what `clear_one` returned.
    pub(crate) fn clear_segments(
        &self,
        tx: &Txn,
        mut clear_one: impl FnMut(&Txn, u64) -> Result<u64>,
    ) -> Result<u64> {
        let sh = tx.sh;
        let mut done = std::collections::HashSet::new();
        let mut total = 0u64;
        loop {
            // As in `lock_segment`: never walk the stale header of a dropped map.
            if !self.alive(sh) {
                return Err(self.dropped());
            }
            let todo: Vec<u64> = segments(sh, self)?
                .into_iter()
                .map(|(s, _)| s)
                .filter(|s| !done.contains(s))
                .collect();
            if todo.is_empty() {
                return Ok(total);
            }
            for seg in todo {
                done.insert(seg);
                tx.lock(seg + S_LOCK)?;
                let r = clear_one(tx, seg);
                tx.unlock(seg + S_LOCK);
                total += r?;
            }
        }
    }

    /// One iteration step of map `map` at `cursor`: `once(None)` (an optimistic copy of
    /// the segment covering the cursor) up to 16 times; then, in a store opened
    /// read-only, more optimistic tries until the timeout; else, under persistent
    /// interference (or damage), the copy `once(Some(seg))` under the segment's lock,
    /// which `lock` takes (the layout's `lock_segment`).
    pub(crate) fn snapshot_step(
        &self,
        sh: &std::sync::Arc<Shared>,
        map: &str,
        cursor: u64,
        mut once: impl FnMut(Option<u64>) -> Result<Option<Step>>,
        lock: impl FnOnce(&Txn, u64) -> Result<u64>,
    ) -> Result<Step> {
        for attempt in 0..16 {
            if let Some(r) = once(None)? {
                return Ok(r);
            }
            if attempt > 4 {
                crate::rt::yield_now();
            }
        }
        if sh.read_only {
            return read_only_retries(sh, self, cursor, || once(None));
        }
        let t = crate::txn::thread_txn(sh)?;
        let tx = crate::txn::Op::new(sh, t);
        let seg = lock(&tx, cursor.reverse_bits())?;
        let r = once(Some(seg));
        tx.unlock(seg + S_LOCK);
        r?.ok_or_else(|| {
            // Under the lock only the directory may change, and only by a doubling, which
            // keeps the entry naming this segment: the entry itself is damaged.
            self.bad(
                sh,
                format!("map {map:?}: the directory no longer names segment {seg:#x}, whose lock the iteration holds"),
            )
        })
    }
}
