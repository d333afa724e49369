//! Growth of the file: space allocated ahead of the writers, the growth itself, and the cleaner's reserve.

use super::*;
use crate::error::{Error, Result};
use crate::shared::Shared;
use crate::txn::Txn;

/// How much space past the file's end writers keep allocated (in steps of
/// `AHEAD_STEP`): see [`ahead_window`]; never more than `AHEAD_MAX`.
pub(crate) const AHEAD_MAX: u64 = 4 << 20;
pub(crate) const AHEAD_STEP: u64 = 32 << 10;

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
pub(crate) fn grow_file(sh: &Shared, end: u64, new_end: u64) -> Result<()> {
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
pub(crate) fn ahead_window(end: u64, cs: u64) -> u64 {
    (end / 16)
        .clamp(2 * cs, ARENA_MAX_CHUNKS * cs)
        .min(AHEAD_MAX)
}

/// Makes sure the chunk past `end` (the reserve, see [`Purpose`]) is allocated, unless
/// the maximum size leaves no room for it there. On a filesystem that cannot allocate
/// past a file's end there is no reserve, and nothing is refused for want of it.
/// Everything before `end` must be allocated already: what this allocates then extends
/// what this process knows to be allocated past the file's end (`ahead_done`), which
/// growth skips.
#[cfg(not(shuttle))]
pub(crate) fn keep_reserve(sh: &Shared, end: u64) -> Result<()> {
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
