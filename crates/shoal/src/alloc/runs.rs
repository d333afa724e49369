//! Free runs: taking chunks from the free list (best fit) or by growing the file, and freeing them.

use super::*;
use crate::error::{Error, Result};
use crate::shared::Shared;
use crate::txn::{Redo, Txn};

/// How many free runs a search looks at for an exact fit before taking the first run
/// that is big enough.
pub(crate) const FIRST_FIT_LIMIT: usize = 64;
/// How far a search for a multi-chunk run goes on when none of the first
/// `FIRST_FIT_LIMIT` fits, before growing the file instead.
pub(crate) const WHOLE_LIST_LIMIT: usize = 4096;

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
pub(crate) fn find_fit(sh: &Shared, k: u64) -> Result<Option<(u64, u64, u64, u64)>> {
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
pub(crate) fn free_run_at(sh: &Shared, cur: u64) -> Result<(u64, u64)> {
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
