//! Merging neighbouring free runs, so that multi-chunk requests find room.

use super::*;
use crate::error::Result;
use crate::txn::{Redo, Txn};

/// How many runs one merge step absorbs at most: two redo entries each, plus the merged
/// run's length, its released mark and the cleaner's cursor, within `T_NREDO`.
pub(crate) const MERGES_PER_REDO: usize = 8;
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
pub(crate) fn coalesce(tx: &Txn) -> Result<u64> {
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
