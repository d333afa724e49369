//! Returning free runs' pages to the filesystem (`compact`).

use super::*;
use crate::error::{Error, Result};
use crate::shared::Shared;
use crate::txn::{Redo, Txn};

/// How many runs one release step marks (one redo entry each).
pub(crate) const RELEASES_PER_REDO: usize = 16;

/// How many bytes one hold of the alloc lock releases at most (see [`release_free`]).
pub(crate) const RELEASE_SLICE: u64 = 8 << 20;

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
pub(crate) fn release_run(tx: &Txn, run: u64, k: u64) -> Result<Option<u64>> {
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
pub(crate) fn release_pages(sh: &Shared, off: u64, len: u64) -> Result<bool> {
    crate::sys::release(&sh.file, off, len).map_err(|e| Error::io(&sh.path, e))
}

/// The model checker has no file to release pages of.
#[cfg(shuttle)]
pub(crate) fn release_pages(_: &Shared, _: u64, _: u64) -> Result<bool> {
    Ok(false)
}

/// Under the alloc lock: merges neighbouring free runs, then marks every free run
/// [`RELEASED`] that is not yet (committed, applied, and on disk flushed). Returns the
/// runs it marked, `(start, chunks)`.
pub(crate) fn mark_released(tx: &Txn) -> Result<Vec<(u64, u64)>> {
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
pub(crate) fn still_released(sh: &Shared, run: u64, end: u64) -> Result<bool> {
    let cs = sh.g.chunk_size();
    let found = walk_free_list(sh, |cur, k| {
        (cur == run).then(|| sh.w(run + K_USED).load(Acquire) == RELEASED && run + k * cs >= end)
    })?;
    Ok(found.unwrap_or(false))
}

/// Under the alloc lock: calls `f(run start, chunks)` for each free run in list order
/// until it returns `Some`, and returns that. A list longer than the file has chunks is a
/// cycle: corrupt.
pub(crate) fn walk_free_list<T>(
    sh: &Shared,
    mut f: impl FnMut(u64, u64) -> Option<T>,
) -> Result<Option<T>> {
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
