//! Space: chunks, the free-run list, file growth, per-thread data chunks, large records.
//!
//! The file after the tables is a sequence of fixed-size chunks (256 KiB by default).
//! Free chunks form runs on one list guarded by the store's alloc lock. The file grows
//! only under that lock, and only after `fallocate` has made the new range real, so a
//! full filesystem is an `ENOSPC` error, never a `SIGBUS`; the new end is published in the
//! header after that, and no process ever remaps (the whole maximum size is reserved as
//! address space when the store is opened).
//!
//! Records are appended to the calling thread's own data chunk with no lock at all; the
//! alloc lock is taken once per chunk. A record too big for a chunk gets a run of its own.

pub(crate) mod record;

use crate::error::{Error, Result};
use crate::format::*;
use crate::shared::Shared;
use crate::txn::{Redo, Txn};
use std::sync::atomic::Ordering::*;

/// How many free runs a search looks at for an exact fit before taking the first run
/// that is big enough.
const FIRST_FIT_LIMIT: usize = 64;
/// How far a search for a multi-chunk run goes on when none of the first
/// `FIRST_FIT_LIMIT` fits, before growing the file instead.
const WHOLE_LIST_LIMIT: usize = 4096;

/// How much space past the file's end writers keep allocated (in steps of
/// `AHEAD_STEP`): see [`ahead_window`]; never more than `AHEAD_MAX`.
const AHEAD_MAX: u64 = 4 << 20;
const AHEAD_STEP: u64 = 32 << 10;

/// After a write, with no lock held: allocates the next `AHEAD_STEP` bytes past the end
/// of the file (without changing its size), until [`ahead_window`] bytes past the end are allocated.
///
/// Why: growing the file by a chunk is an `fallocate` whose cost is proportional to its
/// size (the kernel allocates and zeroes every page: 70 µs for a 256 KiB chunk on this
/// tmpfs, with tails past 400 µs), and it happens inside the write that needs the chunk,
/// on top of whatever else that write does (a split). Done ahead in small steps, the same
/// work is spread over many writes, and the growth itself finds its pages there (an
/// `fallocate` over allocated pages only extends the size). Only a hint: the growth still
/// `fallocate`s its whole range, so nothing relies on this space being there, and an error
/// here (a full filesystem) is left for that growth to report.
///
/// Each process keeps its own mark (`Shared::ahead`), so two processes may both allocate
/// the same step; the second finds the pages present, which costs a few µs. The file
/// never shrinks, so space allocated ahead is never lost; it is released with the file.
pub(crate) fn allocate_ahead(sh: &Shared) {
    let ahead = sh.ahead.load(Relaxed);
    let end = sh.file_end();
    let want = end
        .saturating_add(ahead_window(end, sh.g.chunk_size()))
        .min(sh.g.max_size)
        .min(sh.reserve);
    let from = ahead.max(end);
    if from >= want {
        return;
    }
    let len = AHEAD_STEP.min(want - from);
    if sh
        .ahead
        .compare_exchange(ahead, from + len, Relaxed, Relaxed)
        .is_err()
    {
        return; // another thread of this process took this step
    }
    #[cfg(not(shuttle))]
    match crate::sys::allocate_ahead(&sh.file, from, len) {
        Ok(true) => {
            // Confirmed only if it extends a backed range: from the file's end, or from
            // what earlier steps confirmed. A step that finished before an earlier one
            // (another thread's) is not counted: the growth then allocates it again.
            let _ = sh.ahead_done.fetch_update(Release, Acquire, |done| {
                (from <= done.max(end)).then_some(done.max(from + len))
            });
        }
        Ok(false) => sh.ahead.store(u64::MAX, Relaxed),
        Err(_) => {}
    }
}

/// Under the alloc lock: makes `[end, new_end)` of the file backed and the file that
/// long (the growth of the store's end).
///
/// What this process allocated ahead (`ahead_done`) is not allocated again: only the
/// rest, or, when it is all there, the last page (which moves the file's size). Why:
/// on tmpfs, pages allocated ahead with `FALLOC_FL_KEEP_SIZE` are zeroed when the file's
/// size comes to cover them, by whoever does that first; a second `fallocate` over the
/// whole range zeroed all of them in the put that grew the file. On these VMs, where
/// the host takes back memory the guest freed (free page reporting), zeroing a page it
/// took back costs ~8.6 µs: a 2 MiB index arena run took 4.7-8.1 ms in one put
/// (`put_tail` with another process holding 2-9 GiB). Left to the page faults, the
/// zeroing is spread over the writes that first touch each page.
#[cfg(not(shuttle))]
fn grow_file(sh: &Shared, end: u64, new_end: u64) -> Result<()> {
    let done = sh.ahead_done.load(Acquire).clamp(end, new_end);
    let (off, len) = if done < new_end {
        (done, new_end - done)
    } else {
        (
            new_end - HEADER_PAGE.min(new_end - end),
            HEADER_PAGE.min(new_end - end),
        )
    };
    crate::sys::allocate(&sh.file, off, len).map_err(|e| Error::io(&sh.path, e))
}

/// How far past the file end `allocate_ahead` keeps space: two chunks, and on a larger
/// file (a sixteenth of it) up to a map's longest index arena.
///
/// Why the arena: a large map takes its index space in runs of `ARENA_MAX_CHUNKS` chunks
/// (2 MiB with 256 KiB chunks), and with two chunks ahead the put that took one still
/// `fallocate`d 1.5 MiB itself. Every one of the 69 puts over 250 µs in a 10 M-key load
/// had grown the file, most by such a run, the slowest ~0.5-0.9 ms
/// (`cargo run --release -p shoal --example put_tail`). A sixteenth of the file bounds
/// the space held ahead on small stores, which never take long arenas (a map's arena
/// reaches 8 chunks only past 8,192 segments: 64 MiB of index).
fn ahead_window(end: u64, cs: u64) -> u64 {
    (end / 16)
        .clamp(2 * cs, ARENA_MAX_CHUNKS * cs)
        .min(AHEAD_MAX)
}

/// Who is asking for space. The cleaner needs a chunk to move a victim's live records
/// into before it can free the victim, so a store whose dead records fill it can always
/// be reclaimed only if a chunk is kept for the cleaner. Two limits can fill a store:
/// - its maximum size: ordinary callers leave the last chunk of room below it;
/// - the filesystem: ordinary growth keeps the **reserve**, one chunk allocated past the
///   file's end (`FALLOC_FL_KEEP_SIZE`: the filesystem holds it for the file, and the
///   file's size does not cover it), and fails with `NoSpace` rather than grow without
///   it. The cleaner grows into it, which needs no new space from the filesystem, and
///   [`restore_reserve`] takes it back after a compaction.
#[derive(Clone, Copy, PartialEq, Eq)]
pub(crate) enum Purpose {
    Normal,
    Cleaner,
}

/// Makes sure the chunk past `end` (the reserve, see [`Purpose`]) is allocated, unless
/// the maximum size leaves no room for it there. On a filesystem that cannot allocate
/// past a file's end there is no reserve, and nothing is refused for want of it.
/// Everything before `end` must be allocated already: what this allocates then extends
/// what this process knows to be allocated past the file's end (`ahead_done`), which
/// growth skips.
#[cfg(not(shuttle))]
fn keep_reserve(sh: &Shared, end: u64) -> Result<()> {
    let cs = sh.g.chunk_size();
    let want = end + cs;
    let done = sh.ahead_done.load(Acquire);
    // Space past the end is never released (only free runs below it are), so what this
    // process confirmed allocated there still is.
    if want > sh.g.max_size.min(sh.reserve) || done >= want {
        return Ok(());
    }
    let from = if done >= end && done < want {
        done
    } else {
        end
    };
    match crate::sys::allocate_ahead(&sh.file, from, want - from) {
        Ok(true) => {
            let _ = sh.ahead_done.fetch_update(Release, Acquire, |d| {
                (from <= d.max(end)).then_some(d.max(want))
            });
            Ok(())
        }
        Ok(false) => Ok(()),
        Err(e) => Err(Error::io(&sh.path, e)),
    }
}

/// After a compaction: takes the reserve (see [`Purpose`]) back if the cleaner grew into
/// it. On a full filesystem that needs room, so the free runs' pages are returned to the
/// filesystem first (compaction has just freed chunks: one of them becomes the reserve).
pub(crate) fn restore_reserve(tx: &Txn) -> Result<()> {
    #[cfg(not(shuttle))]
    {
        let sh = tx.sh;
        match keep_reserve(sh, sh.file_end()) {
            Err(Error::NoSpace { .. }) => {
                release_free(tx)?;
                match keep_reserve(sh, sh.file_end()) {
                    Err(Error::NoSpace { .. }) | Ok(()) => Ok(()),
                    Err(e) => Err(e),
                }
            }
            r => r,
        }
    }
    #[cfg(shuttle)]
    {
        let _ = tx;
        Ok(())
    }
}

/// Under the alloc lock: finds `k` contiguous chunks (best fit over the first runs of the
/// free list, else, for several chunks, after merging address-adjacent free runs, else at
/// the end of the file, growing it) and adds to `redo` the stores that take them. The
/// caller adds the new run's header. Returns the run's offset.
pub(crate) fn take_run(tx: &Txn, k: u64, redo: &mut Redo, purpose: Purpose) -> Result<u64> {
    let sh = tx.sh;
    let cs = sh.g.chunk_size();
    // Room left = free runs + growth still allowed. Ordinary callers leave one chunk of it
    // to the cleaner.
    let limit = sh.g.max_size.min(sh.reserve);
    let room = sh.w(H_FREE_BYTES).load(Acquire) + limit.saturating_sub(sh.file_end());
    if purpose == Purpose::Normal && room < (k + 1) * cs {
        return Err(Error::StoreFull(format!(
            "the store is at its maximum size of {limit} bytes (the last chunk is kept for reclaiming space)"
        )));
    }
    let mut fit = find_fit(sh, k)?;
    // No run is long enough, yet the free runs together are: merge neighbours. Only with
    // an empty redo list and no intent of ours pending, since merging commits its own
    // redo lists (the caller's planned stores were computed before them).
    if fit.is_none()
        && k > 1
        && redo.n == 0
        && sh.w(tx.base + T_INTENT).load(Acquire) == 0
        && sh.w(H_FREE_BYTES).load(Acquire) >= k * cs
        && coalesce(tx)? > 0
    {
        fit = find_fit(sh, k)?;
    }
    if let Some((_, cur, run, _)) = fit {
        crate::rt::trace!("take {cur:#x}: {k} of a free run of {run} (txn {})", tx.idx);
        crate::paranoid::unreferenced!(sh, cur, cur + run * cs, "take {k} of free run {cur:#x}");
        // A released run's pages are holes: allocate what is taken (and the page the
        // rest's header goes to) before anything writes there, so that a full filesystem
        // is an error here and never a SIGBUS later.
        let released = sh.w(cur + K_USED).load(Acquire) == RELEASED;
        #[cfg(not(shuttle))]
        if released {
            let mut len = k * cs;
            if run > k {
                len += HEADER_PAGE;
            }
            match crate::sys::allocate(&sh.file, cur, len).map_err(|e| Error::io(&sh.path, e)) {
                Ok(()) => sh.pretouch(cur, k * cs),
                // A full filesystem: the cleaner grows into the reserve instead.
                Err(Error::NoSpace { .. }) if purpose == Purpose::Cleaner => fit = None,
                Err(e) => return Err(e),
            }
        }
    }
    if let Some((link, cur, run, next)) = fit {
        let released = sh.w(cur + K_USED).load(Acquire) == RELEASED;
        if run == k {
            redo.push(link, next);
        } else {
            let rest = cur + k * cs;
            redo.push(rest + K_KIND, CK_FREE);
            redo.push(rest + K_RUN, run - k);
            redo.push(rest + K_NEXT, next);
            redo.push(rest + K_USED, if released { RELEASED } else { 0 });
            redo.push(link, rest);
        }
        let fb = sh.w(H_FREE_BYTES).load(Acquire);
        redo.push(H_FREE_BYTES, fb.saturating_sub(k * cs));
        return Ok(cur);
    }
    let end = sh.file_end();
    let new_end = end
        .checked_add(
            k.checked_mul(cs)
                .ok_or_else(|| Error::StoreFull("allocation too large".into()))?,
        )
        .ok_or_else(|| Error::StoreFull("allocation too large".into()))?;
    if new_end > sh.g.max_size || new_end > sh.reserve {
        return Err(Error::StoreFull(format!(
            "growing to {new_end} bytes would pass the maximum size of {} bytes",
            sh.g.max_size
        )));
    }
    #[cfg(not(shuttle))]
    {
        grow_file(sh, end, new_end)?;
        if purpose == Purpose::Normal {
            // Refused, the growth is not published: the file is longer than its end, as
            // after a crash here, and the next growth finds those pages allocated.
            keep_reserve(sh, new_end)?;
        }
        sh.pretouch(end, new_end - end);
    }
    crate::rt::failpoint!("alloc.grown");
    redo.push(H_FILE_END, new_end);
    crate::rt::trace!(
        "grow: take {k} at {end:#x} (txn {}); free list: {}",
        tx.idx,
        crate::paranoid::free_list_summary(sh)
    );
    Ok(end)
}

/// Under the alloc lock: the free run to take `k` chunks from, as (link to it, run
/// offset, its chunks, next run), or None.
///
/// Best fit over the first FIRST_FIT_LIMIT runs: an exact fit if there is one, else the
/// first run that is big enough (split). Taking the first big-enough run instead let
/// single-chunk refills split every multi-chunk run that a freed large record left at the
/// head of the list, so large records never found room again and the file grew by the
/// size of every large record written (found by the soak, scripts/soak.sh).
///
/// Past the window the search goes on only while nothing fits and `k` > 1 (a large
/// record, a big directory), up to WHOLE_LIST_LIMIT runs. The cleaner frees single chunks
/// all the time and the list is LIFO, so its head fills with single-chunk runs while the
/// runs freed large records left sink past the window: stopping at the window, every
/// large record grew the file. The soak (`scripts/soak.sh 4 --seed
/// 10357184184072318369`) ended with a 36 MiB file, 24 MiB of it free and growing by ~1
/// MiB every 10 s; searching on, 18-19 MiB and flat.
fn find_fit(sh: &Shared, k: u64) -> Result<Option<(u64, u64, u64, u64)>> {
    let mut link = H_FREE_HEAD;
    let mut cur = sh.w(H_FREE_HEAD).load(Acquire);
    let mut fit: Option<(u64, u64, u64, u64)> = None;
    for i in 0..WHOLE_LIST_LIMIT {
        if cur == 0 || i >= FIRST_FIT_LIMIT && (fit.is_some() || k == 1) {
            break;
        }
        let (run, next) = free_run_at(sh, cur)?;
        if run == k {
            return Ok(Some((link, cur, run, next)));
        }
        if run > k && fit.is_none() {
            fit = Some((link, cur, run, next));
        }
        link = cur + K_NEXT;
        cur = next;
    }
    Ok(fit)
}

/// The (chunks, next) of free-list entry `cur`, checked: the words come from the file, and
/// a run past the file end is corruption (splitting it would write the rest's header
/// beyond the end: SIGBUS).
fn free_run_at(sh: &Shared, cur: u64) -> Result<(u64, u64)> {
    check_chunk(sh, cur, "free list")?;
    let run = sh.w(cur + K_RUN).load(Acquire);
    let next = sh.w(cur + K_NEXT).load(Acquire);
    if run == 0
        || run > (sh.file_end() - cur) / sh.g.chunk_size()
        || sh.w(cur + K_KIND).load(Acquire) != CK_FREE
    {
        return Err(sh.corrupt(format!("free list entry at {cur:#x} is not a free run")));
    }
    Ok((run, next))
}

/// How many runs one merge step absorbs at most: two redo entries each, plus the merged
/// run's length, its released mark and the cleaner's cursor, within `T_NREDO`.
const MERGES_PER_REDO: usize = 8;
const _: () = assert!(2 * MERGES_PER_REDO as u64 + 3 <= T_NREDO);

/// Under the alloc lock, with no intent of `tx` pending: merges every run of the first
/// WHOLE_LIST_LIMIT free-list entries into the free run just before it in the file, when
/// there is one. Returns how many runs were absorbed.
///
/// Why: runs were never merged, so a workload of large records of varying sizes split the
/// long runs for shorter records and then found no run long enough for the next long
/// record: the file grew without bound (overwriting 50 keys with values of 0 to 3 MiB,
/// 754 MiB of file for 80 MiB of live values after 20,000 puts, 649 MiB of it free).
///
/// Merging is done here, lazily, when a multi-chunk request finds no run long enough, so
/// that the frequent single-chunk frees stay O(1) (the list is singly linked: unlinking a
/// run needs its predecessor, which only a walk finds).
///
/// A merged run's inner chunks stop being run starts, and the rest of the engine must
/// never take one for a header again:
/// - the cleaner's scan cursor (`clean_scan`) is moved back to the merged run's start in
///   the same redo list, and the cleaner reads and writes it only under the alloc lock;
/// - the absorbed header's kind is cleared, and a late free of a large run names the
///   run's random serial (`K_SERIAL`), which the bytes of a record written over the old
///   header do not match;
/// - dead bytes of a replaced record are noted on its chunk's header before the
///   replacement is published, while the record is live and its chunk cannot be freed.
///
/// Each step is its own redo list, so a crash between steps leaves fewer merges done,
/// never a broken list; `clean_scan` is always a run start (the checker verifies it).
fn coalesce(tx: &Txn) -> Result<u64> {
    let sh = tx.sh;
    let cs = sh.g.chunk_size();
    // The list as walked: entry -> (chunks, next), and where each entry is linked from.
    let mut runs: Vec<(u64, u64)> = Vec::new(); // (offset, chunks)
    let mut next_of: std::collections::HashMap<u64, u64> = std::collections::HashMap::new();
    let mut link_of: std::collections::HashMap<u64, u64> = std::collections::HashMap::new();
    let mut link = H_FREE_HEAD;
    let mut cur = sh.w(H_FREE_HEAD).load(Acquire);
    while cur != 0 && runs.len() < WHOLE_LIST_LIMIT {
        let (run, next) = free_run_at(sh, cur)?;
        if link_of.insert(cur, link).is_some() {
            return Err(sh.corrupt(format!("free list: cycle at {cur:#x}")));
        }
        runs.push((cur, run));
        next_of.insert(cur, next);
        link = cur + K_NEXT;
        cur = next;
    }
    runs.sort_unstable();
    let mut absorbed = 0u64;
    let mut i = 0;
    while i < runs.len() {
        let (a, mut a_run) = runs[i];
        let mut a_released = false;
        i += 1;
        while i < runs.len() && runs[i].0 == a + a_run * cs {
            let mut redo = Redo::new();
            let mut merged = 0;
            while merged < MERGES_PER_REDO && i < runs.len() && runs[i].0 == a + a_run * cs {
                let (b, b_run) = runs[i];
                crate::rt::trace!("merge: {a:#x} absorbs {b:#x} ({b_run} chunks)");
                crate::paranoid::unreferenced!(
                    sh,
                    b,
                    b + b_run * cs,
                    "merge of {b:#x} into {a:#x}"
                );
                // Unlink b: whatever links to it now links to its successor.
                let l = link_of[&b];
                let n = next_of[&b];
                redo.push(l, n);
                if l != H_FREE_HEAD {
                    next_of.insert(l - K_NEXT, n);
                }
                if n != 0 {
                    link_of.insert(n, l);
                }
                redo.push(b + K_KIND, CK_ZERO);
                if sh.w(b + K_USED).load(Acquire) == RELEASED {
                    a_released = true;
                }
                a_run += b_run;
                merged += 1;
                i += 1;
            }
            redo.push(a + K_RUN, a_run);
            if a_released {
                // Some of it is holes now: whoever takes it allocates it first.
                redo.push(a + K_USED, RELEASED);
            }
            let scan = sh.w(H_CLEAN_SCAN).load(Acquire);
            if scan > a && scan < a + a_run * cs {
                redo.push(H_CLEAN_SCAN, a);
            }
            tx.commit(I_REDO, &[], &redo);
            crate::rt::failpoint!("alloc.merge_committed");
            tx.apply(&redo);
            tx.done();
            crate::rt::failpoint!("alloc.merged");
            absorbed += merged as u64;
        }
    }
    Ok(absorbed)
}

/// How many runs one release step marks (one redo entry each).
const RELEASES_PER_REDO: usize = 16;

/// How many bytes one hold of the alloc lock releases at most (see [`release_free`]).
const RELEASE_SLICE: u64 = 8 << 20;

/// Merges neighbouring free runs, then returns the pages of every free run (past each
/// run's header page) to the filesystem: on tmpfs, the memory they hold. Returns the bytes
/// released.
///
/// Why: the file never shrinks (other processes map it, and a reader may still look at an
/// old offset), so a store that once held much more than it holds now kept all that
/// memory in its free runs. Releasing is done under the alloc lock, which every use of a
/// free run takes: each run is first marked [`RELEASED`] (committed and applied, and on
/// disk flushed), and only then its pages are released, so a crash in between leaves a
/// marked run with its pages, never unmarked holes. Whoever takes a marked run allocates
/// its pages again first (`take_run`), so a full filesystem is an error there, never a
/// SIGBUS; merging keeps the mark. Reads of released pages (an optimistic reader holding
/// an old offset) see zeros, which fail their checks like any stale bytes.
///
/// The pages go back [`RELEASE_SLICE`] bytes per hold of the lock, not all in one: every
/// writer that needs a chunk waits for that lock, and releasing 451 MiB took 80-95 ms.
/// Between two holds the run may have been taken (from its front, so its start is no
/// longer a free run), merged away or shortened, so each hold first finds the run on the
/// free list (a start reached there is a genuine run header, whatever bytes lie elsewhere),
/// still marked and still covering the slice; otherwise the rest of it is left alone.
pub(crate) fn release_free(tx: &Txn) -> Result<u64> {
    tx.lock(H_ALLOC_LOCK)?;
    let marked = mark_released(tx);
    tx.unlock(H_ALLOC_LOCK);
    let mut released = 0u64;
    for (run, k) in marked? {
        match release_run(tx, run, k)? {
            Some(n) => released += n,
            None => break, // the filesystem cannot: nothing to gain
        }
    }
    Ok(released)
}

/// Releases the pages of marked free run `run` of `k` chunks past its header page, a
/// slice per hold of the alloc lock, as long as the run is still a marked free run that
/// covers the slice (see [`release_free`]). Returns the bytes released, or `None` if the
/// filesystem cannot release pages.
fn release_run(tx: &Txn, run: u64, k: u64) -> Result<Option<u64>> {
    let sh = tx.sh;
    let end = run + k * sh.g.chunk_size();
    let mut off = run + HEADER_PAGE;
    let mut released = 0u64;
    while off < end {
        let n = (end - off).min(RELEASE_SLICE);
        tx.lock(H_ALLOC_LOCK)?;
        let r = match still_released(sh, run, off + n) {
            Ok(true) => {
                crate::rt::trace!("release {off:#x}+{n:#x} of free run {run:#x}");
                crate::paranoid::unreferenced!(
                    sh,
                    off,
                    off + n,
                    "page release in free run {run:#x}"
                );
                release_pages(sh, off, n).map(|done| done.then_some(n))
            }
            Ok(false) => Ok(Some(0)),
            Err(e) => Err(e),
        };
        tx.unlock(H_ALLOC_LOCK);
        crate::rt::failpoint!("alloc.release_slice");
        match r? {
            None => return Ok(None),
            Some(0) => break, // no longer a marked free run
            Some(n) => released += n,
        }
        off += n;
    }
    Ok(Some(released))
}

#[cfg(not(shuttle))]
fn release_pages(sh: &Shared, off: u64, len: u64) -> Result<bool> {
    crate::sys::release(&sh.file, off, len).map_err(|e| Error::io(&sh.path, e))
}

/// The model checker has no file to release pages of.
#[cfg(shuttle)]
fn release_pages(_: &Shared, _: u64, _: u64) -> Result<bool> {
    Ok(false)
}

/// Under the alloc lock: merges neighbouring free runs, then marks every free run
/// [`RELEASED`] that is not yet (committed, applied, and on disk flushed). Returns the
/// runs it marked, `(start, chunks)`.
fn mark_released(tx: &Txn) -> Result<Vec<(u64, u64)>> {
    let sh = tx.sh;
    // Neighbours merged first: fewer, longer runs to release, and ready for long records.
    coalesce(tx)?;
    let mut todo: Vec<(u64, u64)> = Vec::new();
    walk_free_list(sh, |cur, run| {
        if sh.w(cur + K_USED).load(Acquire) != RELEASED {
            todo.push((cur, run));
        }
        None::<()>
    })?;
    for batch in todo.chunks(RELEASES_PER_REDO) {
        let mut redo = Redo::new();
        for (run, _) in batch {
            redo.push(run + K_USED, RELEASED);
        }
        tx.commit(I_REDO, &[], &redo);
        tx.apply(&redo);
        tx.done();
    }
    if sh.durable && !todo.is_empty() {
        sh.flush()?;
    }
    crate::rt::failpoint!("alloc.released_marked");
    Ok(todo)
}

/// Under the alloc lock: whether `run` is on the free list, marked [`RELEASED`], and
/// reaches at least to `end`.
fn still_released(sh: &Shared, run: u64, end: u64) -> Result<bool> {
    let cs = sh.g.chunk_size();
    let found = walk_free_list(sh, |cur, k| {
        (cur == run).then(|| sh.w(run + K_USED).load(Acquire) == RELEASED && run + k * cs >= end)
    })?;
    Ok(found.unwrap_or(false))
}

/// Under the alloc lock: calls `f(run start, chunks)` for each free run in list order
/// until it returns `Some`, and returns that. A list longer than the file has chunks is a
/// cycle: corrupt.
fn walk_free_list<T>(sh: &Shared, mut f: impl FnMut(u64, u64) -> Option<T>) -> Result<Option<T>> {
    let limit = (sh.file_end() - sh.g.chunks_off) / sh.g.chunk_size();
    let mut cur = sh.w(H_FREE_HEAD).load(Acquire);
    let mut seen = 0u64;
    while cur != 0 {
        seen += 1;
        if seen > limit {
            return Err(sh.corrupt(format!("free list: cycle at {cur:#x}")));
        }
        let (run, next) = free_run_at(sh, cur)?;
        if let Some(r) = f(cur, run) {
            return Ok(Some(r));
        }
        cur = next;
    }
    Ok(None)
}

/// Upgrades a store of format version `from` (1 or 2), opened by this process alone (so
/// no older library shares it), to version 3 (`UPGRADED_VERSION`: version 4 differs only
/// in the records' headers, which cannot be recoded in place): for version 1, every LARGE run
/// gets its serial (version 1 files have no serials, merged free runs or RELEASED marks);
/// for both, `large_slack` is summed from the LARGE runs (older libraries never kept it);
/// then the header's version moves. Each store stands alone, so a crash midway leaves an
/// old-version file whose next opener does it all again.
pub(crate) fn upgrade(sh: &Shared, from: u32) -> Result<()> {
    let cs = sh.g.chunk_size();
    let end = sh.file_end();
    let mut c = sh.g.chunks_off;
    let mut slack = 0u64;
    while c < end {
        let run = sh.w(c + K_RUN).load(Acquire);
        if run == 0 || run > (end - c) / cs {
            return Err(sh.corrupt(format!(
                "chunk {c:#x}: run of {run} chunks does not fit the file"
            )));
        }
        if sh.w(c + K_KIND).load(Acquire) == CK_LARGE {
            if from < 2 && sh.w(c + K_SERIAL).load(Acquire) == 0 {
                sh.w(c + K_SERIAL).store(new_serial(sh, c), Release);
            }
            slack += large_slack(sh, c, run);
        }
        c += run * cs;
    }
    sh.w(H_LARGE_SLACK).store(slack, Release);
    let word = sh.w(H_VERSION).load(Acquire);
    sh.w(H_VERSION)
        .store((word & !0xffff_ffff) | u64::from(UPGRADED_VERSION), Release);
    Ok(())
}

/// Bytes of LARGE run `run`, of `k` chunks, past the end of its record (`K_USED`, clamped
/// into the run: it comes from the file).
pub(crate) fn large_slack(sh: &Shared, run: u64, k: u64) -> u64 {
    let end = run + k * sh.g.chunk_size();
    end - sh.w(run + K_USED).load(Acquire).clamp(run + CHUNK_HDR, end)
}

/// Adds to `redo` the stores that put run `run` of `k` chunks on the free list.
pub(crate) fn free_run_redo(sh: &Shared, run: u64, k: u64, redo: &mut Redo) {
    let cs = sh.g.chunk_size();
    redo.push(run + K_KIND, CK_FREE);
    redo.push(run + K_RUN, k);
    redo.push(run + K_NEXT, sh.w(H_FREE_HEAD).load(Acquire));
    redo.push(run + K_OWNER, 0);
    redo.push(H_FREE_HEAD, run);
    redo.push(H_FREE_BYTES, sh.w(H_FREE_BYTES).load(Acquire) + k * cs);
}

/// Checks that `c` is the start of a chunk inside the file.
pub(crate) fn check_chunk(sh: &Shared, c: u64, what: &str) -> Result<()> {
    let g = &sh.g;
    if c < g.chunks_off || c >= sh.file_end() || (c - g.chunks_off) % g.chunk_size() != 0 {
        return Err(sh.corrupt(format!("{what}: {c:#x} is not a chunk of this file")));
    }
    Ok(())
}

/// Runs `f` with the alloc lock held; `f` builds a redo list, which is then committed and
/// applied. Returns what `f` returned.
pub(crate) fn with_alloc_lock<T>(tx: &Txn, f: impl FnOnce(&mut Redo) -> Result<T>) -> Result<T> {
    tx.lock(H_ALLOC_LOCK)?;
    let mut redo = Redo::new();
    let r = f(&mut redo);
    if r.is_ok() && redo.n > 0 {
        tx.commit(I_REDO, &[], &redo);
        crate::rt::failpoint!("alloc.committed");
        tx.apply(&redo);
        crate::rt::failpoint!("alloc.applied");
        tx.done();
    }
    tx.unlock(H_ALLOC_LOCK);
    r
}

/// Seals the thread's data chunk (if any) and gives it a fresh one.
fn refill(tx: &Txn, purpose: Purpose) -> Result<()> {
    let sh = tx.sh;
    let cs = sh.g.chunk_size();
    with_alloc_lock(tx, |redo| {
        let old = sh.w(tx.base + T_DATA_CHUNK).load(Acquire);
        if old != 0
            && (sh.w(old + K_KIND).load(Acquire) != CK_DATA
                || sh.w(old + K_OWNER).load(Acquire) != tx.idx)
        {
            // Sealing it would rewrite the header of some other chunk.
            return Err(sh.corrupt(format!(
                "txn slot {}: data chunk {old:#x} is not its data chunk",
                tx.idx
            )));
        }
        if old != 0 {
            redo.push(old + K_USED, sh.w(tx.base + T_BUMP).load(Acquire));
            redo.push(old + K_KIND, CK_SEALED);
        }
        let c = take_run(tx, 1, redo, purpose)?;
        crate::rt::trace!(
            "refill txn {}: seal {old:#x}, new data chunk {c:#x}",
            tx.idx
        );
        redo.push(c + K_KIND, CK_DATA);
        redo.push(c + K_RUN, 1);
        redo.push(c + K_NEXT, 0);
        redo.push(c + K_OWNER, tx.idx);
        redo.push(c + K_USED, c + CHUNK_HDR);
        redo.push(c + K_DEAD, 0);
        redo.push(tx.base + T_DATA_CHUNK, c);
        redo.push(tx.base + T_BUMP, c + CHUNK_HDR);
        redo.push(H_DATA_BYTES, sh.w(H_DATA_BYTES).load(Acquire) + cs);
        Ok(())
    })
}

/// Appends a record made of `parts` (header, key, value) and returns its offset. The
/// record is complete in memory before this returns, and unreferenced: the caller
/// publishes it (or leaves it as dead bytes for the cleaner).
pub(crate) fn append(tx: &Txn, parts: &[&[u8]], purpose: Purpose) -> Result<u64> {
    let sh = tx.sh;
    let len: u64 = parts.iter().map(|p| p.len() as u64).sum();
    let cs = sh.g.chunk_size();
    if len > cs - CHUNK_HDR {
        let off = alloc_large(tx, len)?;
        write_parts(sh, off, parts);
        return Ok(off);
    }
    let mut chunk = sh.w(tx.base + T_DATA_CHUNK).load(Acquire);
    let mut bump = sh.w(tx.base + T_BUMP).load(Acquire);
    // Both come from the file: never write a record where a corrupt slot points.
    if chunk != 0
        && (chunk < sh.g.chunks_off
            || chunk >= sh.file_end()
            || (chunk - sh.g.chunks_off) % cs != 0
            || bump < chunk + CHUNK_HDR
            || bump > chunk + cs
            || sh.w(chunk + K_KIND).load(Acquire) != CK_DATA
            || sh.w(chunk + K_OWNER).load(Acquire) != tx.idx)
    {
        return Err(sh.corrupt(format!(
            "txn slot {}: data chunk {chunk:#x} with bump {bump:#x} is not a chunk of this file",
            tx.idx
        )));
    }
    if chunk == 0 || bump + len > chunk + cs {
        refill(tx, purpose)?;
        chunk = sh.w(tx.base + T_DATA_CHUNK).load(Acquire);
        bump = sh.w(tx.base + T_BUMP).load(Acquire);
        debug_assert!(bump + len <= chunk + cs);
    }
    write_parts(sh, bump, parts);
    crate::rt::failpoint!("append.written");
    // Bytes below the bump are complete records; only then may the bump pass them.
    sh.w(tx.base + T_BUMP).store(bump + len, Release);
    crate::rt::failpoint!("append.bumped");
    Ok(bump)
}

fn write_parts(sh: &Shared, mut off: u64, parts: &[&[u8]]) {
    for p in parts {
        sh.r.write_bytes(off, p);
        off += p.len() as u64;
    }
}

/// Allocates a run for one large record of `len` bytes; returns the record's offset.
/// The run stays marked as this txn's until a put publishes it (see `publish_large`).
fn alloc_large(tx: &Txn, len: u64) -> Result<u64> {
    let sh = tx.sh;
    let cs = sh.g.chunk_size();
    let k = (len + CHUNK_HDR).div_ceil(cs);
    let run = with_alloc_lock(tx, |redo| {
        let run = take_run(tx, k, redo, Purpose::Normal)?;
        crate::rt::trace!("large run {run:#x} ({k} chunks) for txn {}", tx.idx);
        redo.push(run + K_KIND, CK_LARGE);
        redo.push(run + K_SERIAL, new_serial(sh, run));
        redo.push(run + K_RUN, k);
        redo.push(run + K_NEXT, 0);
        redo.push(run + K_OWNER, tx.idx + 1);
        redo.push(run + K_USED, run + CHUNK_HDR + len);
        redo.push(tx.base + T_LARGE, run);
        redo.push(H_DATA_BYTES, sh.w(H_DATA_BYTES).load(Acquire) + k * cs);
        redo.push(
            H_LARGE_SLACK,
            sh.w(H_LARGE_SLACK).load(Acquire) + (k * cs - CHUNK_HDR - len),
        );
        Ok(run)
    })?;
    Ok(run + CHUNK_HDR)
}

/// Adds to a put's redo list the stores that mark its large record (if `off` is one)
/// as published.
pub(crate) fn publish_large_redo(tx: &Txn, off: u64, redo: &mut Redo) {
    let sh = tx.sh;
    let run = sh.w(tx.base + T_LARGE).load(Acquire);
    if run != 0 && run + CHUNK_HDR == off {
        redo.push(run + K_OWNER, 0);
        redo.push(tx.base + T_LARGE, 0);
    }
}

/// The serial (`K_SERIAL`) of the large run whose record is at `off`, or 0 if `off` is no
/// large record's. Only meaningful while something keeps the run from being freed: a slot
/// still pointing at the record (under its segment lock), or the run pending in our own
/// txn slot.
pub(crate) fn large_serial(sh: &Shared, off: u64) -> u64 {
    if off < sh.g.chunks_off + CHUNK_HDR || off >= sh.file_end() {
        return 0;
    }
    let run = sh.g.chunk_of(off);
    if run + CHUNK_HDR != off || sh.w(run + K_KIND).load(Acquire) != CK_LARGE {
        return 0;
    }
    sh.w(run + K_SERIAL).load(Acquire)
}

/// [`large_serial`] of `off` if its run is the one pending in `tx`'s slot (taken, not yet
/// published or freed, so nobody else frees it meanwhile), else 0.
pub(crate) fn pending_large_serial(tx: &Txn, off: u64) -> u64 {
    let sh = tx.sh;
    let run = sh.w(tx.base + T_LARGE).load(Acquire);
    if run == 0 || run + CHUNK_HDR != off {
        return 0;
    }
    large_serial(sh, off)
}

/// A fresh serial for a large run: nonzero, and not predictable from the values users
/// write (a value that repeats an old run's header must not pass for it).
fn new_serial(sh: &Shared, run: u64) -> u64 {
    use std::sync::atomic::AtomicU64;
    static COUNTER: AtomicU64 = AtomicU64::new(0);
    let t = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos() as u64);
    let mut b = [0u8; 32];
    b[..8].copy_from_slice(&run.to_le_bytes());
    b[8..16].copy_from_slice(&t.to_le_bytes());
    b[16..24].copy_from_slice(&u64::from(std::process::id()).to_le_bytes());
    b[24..].copy_from_slice(&COUNTER.fetch_add(1, Relaxed).to_le_bytes());
    hash(sh.g.seed ^ 0x5e71_a15e_71a1_5e71, &b) | 1
}

/// Frees the large record at `off` with serial `serial` if it is one (after it was
/// unpublished or never published). Errors are ignored: the cleaner frees dead runs it
/// finds. On disk the run is left to the cleaner, which flushes before it frees (so that
/// an OS crash never finds a slot still pointing into a reused run).
pub(crate) fn free_if_large(tx: &Txn, off: u64, serial: u64) {
    if !tx.sh.durable && serial != 0 {
        free_large(tx, off, serial);
    }
}

/// Frees the large-record run whose record is at `off`, now, if it is still that run
/// (its serial is `serial`) and still dead.
///
/// Callers decide that the run is dead (a writer has just replaced or removed its record,
/// or did not publish it; the cleaner found no key referencing it) before they take the
/// alloc lock. Meanwhile the other one may have freed it, and it may have been handed out
/// again (the free list gives out the run freed last first) for a record being written or
/// already live, or merged into a longer free run (its start is then inside another
/// run, where a record's bytes may lie). So it is checked again under the alloc lock,
/// which every allocation, free and merge of a run takes: the same serial (a merge clears
/// the kind of the header it absorbs, and a record written over it would have to repeat a
/// random word), then liveness (see [`large_run_dead`]).
pub(crate) fn free_large(tx: &Txn, off: u64, serial: u64) {
    let sh = tx.sh;
    if off < sh.g.chunks_off || off >= sh.file_end() {
        return;
    }
    let run = sh.g.chunk_of(off);
    if run + CHUNK_HDR != off || serial == 0 {
        return;
    }
    let _ = with_alloc_lock(tx, |redo| {
        if sh.w(run + K_KIND).load(Acquire) != CK_LARGE
            || sh.w(run + K_SERIAL).load(Acquire) != serial
            || !large_run_dead(tx, run)
        {
            return Ok(());
        }
        let k = sh.w(run + K_RUN).load(Acquire);
        if k == 0 || k > (sh.file_end() - run) / sh.g.chunk_size() {
            return Err(sh.corrupt(format!(
                "large run {run:#x} of {k} chunks does not fit the file"
            )));
        }
        redo.push(
            H_LARGE_SLACK,
            sh.w(H_LARGE_SLACK)
                .load(Acquire)
                .saturating_sub(large_slack(sh, run, k)),
        );
        crate::rt::trace!("free large run {run:#x} ({k} chunks, serial {serial:#x})");
        crate::paranoid::unreferenced!(
            sh,
            run,
            run + k * sh.g.chunk_size(),
            "free of large run {run:#x}"
        );
        free_run_redo(sh, run, k, redo);
        redo.push(
            H_DATA_BYTES,
            sh.w(H_DATA_BYTES)
                .load(Acquire)
                .saturating_sub(k * sh.g.chunk_size()),
        );
        if sh.w(tx.base + T_LARGE).load(Acquire) == run {
            redo.push(tx.base + T_LARGE, 0);
        }
        Ok(())
    });
}

/// Under the alloc lock: whether large run `run` is dead. It is alive while a live txn
/// other than `tx` is writing it (the run's owner mark names that txn, and the txn's pending
/// run is this one) and while its key maps to its record. A dead owner's committed intent,
/// which may be the very put that publishes the run, is recovered first. On doubt (an
/// intent still being recovered, a failed read) it counts as alive: a leaked run is found
/// again by the cleaner, a live one freed is lost data.
fn large_run_dead(tx: &Txn, run: u64) -> bool {
    let sh = tx.sh;
    let owner = sh.w(run + K_OWNER).load(Acquire);
    if owner != 0 && owner - 1 < sh.g.n_txn {
        let t = owner - 1;
        let pending = sh.w(sh.g.txn_slot(t) + T_LARGE).load(Acquire) == run;
        if t == tx.idx {
            if pending {
                return true; // our own, never published
            }
        } else if sh.txn_alive(t) {
            if pending {
                return false; // being written
            }
        } else if crate::txn::recover_txn(sh, t).is_err()
            || sh.w(sh.g.txn_slot(t) + T_INTENT).load(Acquire) != 0
        {
            return false;
        }
    }
    // Whether an object still references the run's record is the kinds' to say.
    (sh.hooks.record_unreferenced)(sh, run + CHUNK_HDR)
}

/// Dead bytes a thread batches before adding them to the shared hint. The hint lags the
/// truth by up to this much per thread, and the cleaner stops when the hint is below its
/// threshold: at 64 KiB, dead space in a 4 MB store overshot the threshold by 2 points.
const DEAD_FLUSH: u64 = 16 * 1024;

/// Records `bytes` of new dead space (batched per thread to keep a shared line cold).
pub(crate) fn note_dead(tx: &Txn, bytes: u64) {
    let sh = tx.sh;
    let w = sh.w(tx.base + T_DEAD_PEND);
    let pend = w.load(Relaxed) + bytes;
    if pend >= DEAD_FLUSH {
        sh.w(H_DEAD_HINT).fetch_add(pend, Relaxed);
        w.store(0, Relaxed);
    } else {
        w.store(pend, Relaxed);
    }
}

/// [`note_dead`] for the record at `off`, also adding its length to its data chunk's
/// dead-bytes hint (`K_DEAD`), by which the cleaner picks its victims.
///
/// Only while the chunk cannot be freed: a slot still points at the record (its writer
/// holds the segment lock), or the chunk is the caller's own data chunk (a cleaning step's
/// copies are published while they all lie there: `publish_moves`). A chunk freed
/// meanwhile may have been merged into a longer run, and the add would land in another
/// record's bytes.
pub(crate) fn note_dead_at(tx: &Txn, off: u64, len: u64) {
    let sh = tx.sh;
    let cs = sh.g.chunk_size();
    if len <= cs - CHUNK_HDR && off >= sh.g.chunks_off + CHUNK_HDR && off < sh.file_end() {
        let c = sh.g.chunks_off + ((off - sh.g.chunks_off) & !(cs - 1));
        sh.w(c + K_DEAD).fetch_add(len, Relaxed);
    }
    note_dead(tx, len);
}

/// [`note_dead_at`] for a record this txn appended and did not publish: its chunk's hint
/// only while the chunk is still this txn's data chunk. A chunk it sealed since may have
/// been cleaned, freed and merged into a longer run already, where the add would land in
/// another record's bytes.
pub(crate) fn note_dead_own(tx: &Txn, off: u64, len: u64) {
    let sh = tx.sh;
    let chunk = sh.w(tx.base + T_DATA_CHUNK).load(Acquire);
    if chunk != 0 && off >= sh.g.chunks_off && sh.g.chunk_of(off) == chunk {
        note_dead_at(tx, off, len);
    } else {
        note_dead(tx, len);
    }
}

#[cfg(all(test, not(shuttle)))]
pub(crate) mod tests {
    use super::*;

    /// Whoever decided that a large run is dead (the cleaner, or a writer that has just
    /// replaced the record in it) frees it a little later, under the alloc lock. Meanwhile
    /// the run may have been freed by the other one and handed out again (the free list
    /// gives the run freed last first) for a record that is live now: that incarnation
    /// must not be freed.
    #[test]
    fn a_late_free_of_a_dead_large_run_spares_its_new_incarnation() {
        // In memory (/dev/shm): on disk, frees wait for a flush instead.
        let d = tempfile::tempdir_in("/dev/shm").unwrap();
        let opts = crate::Options {
            chunk_size: 1 << 16,
            ..crate::Options::default()
        };
        let s =
            crate::Store::open_with(d.path().join("a.shoal"), &opts, crate::OpenMode::CreateNew)
                .unwrap();
        let m = s.map("m").unwrap();
        let (va, vb) = (vec![1u8; 100_000], vec![2u8; 100_000]);
        m.put(b"a", &va).unwrap();
        let off = m.m.record_of(&s.sh, b"a").unwrap();
        let serial = large_serial(&s.sh, off);
        assert_ne!(serial, 0);
        m.remove(b"a").unwrap(); // a's run is freed
        m.put(b"b", &vb).unwrap(); // and handed out again for b
        assert_eq!(
            m.m.record_of(&s.sh, b"b"),
            Some(off),
            "precondition: the run is reused"
        );
        // The late free of "a's dead record".
        let tx = Txn::new(&s.sh, crate::txn::thread_txn(&s.sh).unwrap());
        free_large(&tx, off, serial);
        assert_eq!(m.get(b"b").unwrap(), Some(vb.clone()));
        // Even naming the run's current serial, a free finds b live and keeps it.
        free_large(&tx, off, large_serial(&s.sh, off));
        assert_eq!(m.get(b"b").unwrap(), Some(vb));
        let r = s.check().unwrap();
        assert!(r.is_ok(), "{r}");
    }

    /// A store in /dev/shm with 64 KiB chunks and a map "m": (its directory, the store, the
    /// map, the chunk size).
    /// A new store in /dev/shm with 64 KiB chunks and its map "m" (also used by the
    /// cleaner's tests).
    pub(crate) fn store_with_64k_chunks() -> (tempfile::TempDir, crate::Store, crate::Map, u64) {
        let d = tempfile::tempdir_in("/dev/shm").unwrap();
        let cs = 1u64 << 16;
        let opts = crate::Options {
            chunk_size: cs,
            ..crate::Options::default()
        };
        let s =
            crate::Store::open_with(d.path().join("a.shoal"), &opts, crate::OpenMode::CreateNew)
                .unwrap();
        let m = s.map("m").unwrap();
        (d, s, m, cs)
    }

    /// Puts keys "a" and "b" with records of `chunks` chunks each, side by side at the end
    /// of the file; returns their runs.
    fn adjacent_large_records(s: &crate::Store, m: &crate::Map, chunks: u64) -> (u64, u64) {
        let (sh, cs) = (&*s.sh, s.sh.g.chunk_size());
        let v = vec![1u8; ((chunks - 1) * cs + cs / 2) as usize];
        m.put(b"a", &v).unwrap();
        m.put(b"b", &v).unwrap();
        let ra = m.m.record_of(sh, b"a").unwrap() - CHUNK_HDR;
        let rb = m.m.record_of(sh, b"b").unwrap() - CHUNK_HDR;
        assert_eq!(rb, ra + chunks * cs, "precondition: adjacent runs");
        (ra, rb)
    }

    /// Two adjacent free runs are merged for a record longer than either. A late free
    /// aimed at the second run's old start (now inside the new record, whose bytes there
    /// repeat a large run's header and a dead record's) frees nothing: it names the old
    /// run's serial, which those bytes do not hold. The cleaner's cursor, left at the old
    /// start, is moved back to the merged run's start.
    #[test]
    fn a_late_free_into_a_merged_run_frees_nothing() {
        let (_d, s, m, cs) = store_with_64k_chunks();
        let sh = &*s.sh;
        // Two records of two chunks each, one after the other at the end of the file.
        let (ra, rb) = adjacent_large_records(&s, &m, 2);
        let serial_b = large_serial(sh, rb + CHUNK_HDR);
        assert_ne!(serial_b, 0);
        m.remove(b"a").unwrap();
        m.remove(b"b").unwrap();
        sh.w(H_CLEAN_SCAN).store(rb, Release);
        // A record of four chunks: no free run is that long until the two merge. Its
        // bytes at b's old header forge a large run's header (without b's serial), and
        // after it a record of a key nobody holds (so the run would read as dead).
        let key = b"c";
        let hl = record_header(m.m.id, key.len() as u64, 3 * cs, sh.g.short_records).len() as u64;
        let mut v = vec![2u8; 3 * cs as usize];
        let at = (rb - (ra + CHUNK_HDR + hl + key.len() as u64)) as usize;
        v[at..at + 8].copy_from_slice(&CK_LARGE.to_le_bytes());
        v[at + 8..at + 16].copy_from_slice(&2u64.to_le_bytes());
        let forged = record_header(m.m.id, 2, 10, sh.g.short_records);
        let rec = at + CHUNK_HDR as usize;
        v[rec..rec + forged.len()].copy_from_slice(&forged);
        v[rec + forged.len()..rec + forged.len() + 2].copy_from_slice(b"zz");
        let before = s.stats().unwrap().file_size;
        // The cleaner is kept out: the new run's unused end counts as dead space, so the
        // put would end with a cleaning step, whose walk moves the cursor on (to another
        // run start) and hides where the merge left it. Another thread holds every lane
        // (this one's txn has room for the put's locks only).
        let (hold_tx, hold_rx) = std::sync::mpsc::channel::<()>();
        let (held_tx, held_rx) = std::sync::mpsc::channel::<()>();
        let holder = {
            let sh = s.sh.clone();
            std::thread::spawn(move || {
                let tx = Txn::new(&sh, crate::txn::thread_txn(&sh).unwrap());
                for i in 0..sh.g.clean_lanes {
                    assert!(tx.try_lock(lane(i).0));
                }
                held_tx.send(()).unwrap();
                let _ = hold_rx.recv();
                for i in 0..sh.g.clean_lanes {
                    tx.unlock(lane(i).0);
                }
            })
        };
        held_rx.recv().unwrap();
        m.put(key, &v).unwrap();
        hold_tx.send(()).unwrap();
        holder.join().unwrap();
        let tx = Txn::new(sh, crate::txn::thread_txn(&s.sh).unwrap());
        assert_eq!(
            s.stats().unwrap().file_size,
            before,
            "the merged runs were not reused"
        );
        assert_eq!(m.m.record_of(sh, key), Some(ra + CHUNK_HDR));
        assert_eq!(
            sh.w(H_CLEAN_SCAN).load(Acquire),
            ra,
            "the cursor was left inside"
        );
        free_large(&tx, rb + CHUNK_HDR, serial_b);
        // Without the serial, the late free took the forged header and record for a dead
        // run and freed the second half of c's.
        let r = s.check().unwrap();
        assert!(r.is_ok(), "{r}");
        assert!(m.get(key).unwrap() == Some(v), "c's value changed");
    }

    /// Bytes of storage the file holds (tmpfs: memory), from its block count.
    fn allocated(sh: &Shared) -> u64 {
        use std::os::unix::fs::MetadataExt;
        sh.file.metadata().unwrap().blocks() * 512
    }

    /// Pages are released a slice per hold of the alloc lock, so a marked run may be taken
    /// between two holds: then nothing more of it is released (its start is no longer on
    /// the free list), and the record written there keeps its bytes. A run still free is
    /// released whole, slice by slice.
    #[test]
    fn a_marked_run_taken_between_slices_keeps_its_pages() {
        let (_d, s, m, cs) = store_with_64k_chunks();
        let sh = &*s.sh;
        let (ra, rb) = adjacent_large_records(&s, &m, 3);
        m.remove(b"a").unwrap();
        let tx = Txn::new(sh, crate::txn::thread_txn(&s.sh).unwrap());
        let mark = || {
            tx.lock(H_ALLOC_LOCK).unwrap();
            let marked = mark_released(&tx).unwrap();
            tx.unlock(H_ALLOC_LOCK);
            marked
        };
        let marked = mark();
        assert!(marked.contains(&(ra, 3)), "{marked:?}");
        // Between marking and releasing: a record of three chunks takes a's run.
        let v = vec![5u8; (2 * cs + cs / 2) as usize];
        m.put(b"c", &v).unwrap();
        assert_eq!(m.m.record_of(sh, b"c"), Some(ra + CHUNK_HDR));
        assert_eq!(release_run(&tx, ra, 3).unwrap(), Some(0));
        assert!(m.get(b"c").unwrap() == Some(v), "c's bytes were released");
        // b's run, freed and still free: released whole.
        m.remove(b"b").unwrap();
        let marked = mark();
        assert!(marked.contains(&(rb, 3)), "{marked:?}");
        let before = allocated(sh);
        assert_eq!(release_run(&tx, rb, 3).unwrap(), Some(3 * cs - HEADER_PAGE));
        assert!(allocated(sh) + 2 * cs <= before, "nothing released");
        let r = s.check().unwrap();
        assert!(r.is_ok(), "{r}");
    }

    /// Free runs released to the filesystem are holes; taking one (merged into the run
    /// before it, which then carries the mark, and split, whose rest keeps it too)
    /// allocates what is taken before anything is written there.
    #[test]
    fn a_released_run_is_allocated_again_before_it_is_used() {
        let (_d, s, m, cs) = store_with_64k_chunks();
        let sh = &*s.sh;
        let (ra, rb) = adjacent_large_records(&s, &m, 3);
        // b's run is released while a is live; then a's run is freed, not released.
        m.remove(b"b").unwrap();
        let tx = Txn::new(sh, crate::txn::thread_txn(&s.sh).unwrap());
        let before = allocated(sh);
        let released = release_free(&tx).unwrap();
        assert!(released >= 3 * cs - HEADER_PAGE, "released {released}");
        assert!(
            allocated(sh) + released <= before,
            "the file still holds {} of {before} bytes after releasing {released}",
            allocated(sh)
        );
        assert_eq!(sh.w(rb + K_USED).load(Acquire), RELEASED);
        m.remove(b"a").unwrap();
        assert_ne!(sh.w(ra + K_USED).load(Acquire), RELEASED);
        // Five chunks: only the two runs merged hold them; the sixth chunk stays free.
        let held = allocated(sh);
        let taken: Result<()> = with_alloc_lock(&tx, |redo| {
            let r = take_run(&tx, 5, redo, Purpose::Normal)?;
            // Before the caller writes anything: the pages taken are there again (a's
            // three chunks never left; b's first two but its header page did), with the
            // page where the rest's header goes.
            assert!(
                allocated(sh) >= held + 2 * cs,
                "taken before its pages were allocated: {} -> {}",
                held,
                allocated(sh)
            );
            assert_eq!(r, ra, "the merged runs were not taken");
            assert!(
                redo.e[..redo.n].contains(&(r + 5 * cs + K_USED, RELEASED)),
                "the rest lost its mark"
            );
            // Not committed: only the merge stays.
            Err(Error::InvalidArgument("rolled back".into()))
        });
        assert!(taken.is_err());
        assert_eq!(
            sh.w(ra + K_USED).load(Acquire),
            RELEASED,
            "the merged run lost its mark"
        );
        let r = s.check().unwrap();
        assert!(r.is_ok(), "{r}");
        // And for real: a record of five chunks takes the merged run.
        let five = vec![2u8; (4 * cs + cs / 2) as usize];
        m.put(b"c", &five).unwrap();
        assert_eq!(m.m.record_of(sh, b"c"), Some(ra + CHUNK_HDR));
        assert!(m.get(b"c").unwrap() == Some(five));
        let r = s.check().unwrap();
        assert!(r.is_ok(), "{r}");
    }
}
