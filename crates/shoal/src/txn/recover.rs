//! Recovery of what a thread that died left: its committed intent finished, its locks
//! released, its slot freed.

use super::redo::apply_entry;
use super::wake;
use crate::error::{Error, Result};
use crate::format::*;
use crate::shared::{Intent, Shared};
use std::sync::atomic::Ordering::*;

/// Finishes what dead txn `t` left: applies its committed intent (redo list or split) and
/// releases every lock it held.
///
/// The lock words keep naming the dead txn while this runs, so nobody else can take them;
/// recoverers exclude each other with the slot's `T_RECOVERING` claim, which holds the
/// claimant's process owner word and is stolen when that process is dead too. Everything
/// done here is idempotent, so a recoverer killed halfway is simply followed by another.
/// Returns Ok(()) also when a live recoverer is already at work (the caller waits on).
///
/// The caller's verdict "t is dead" is re-checked under the claim: it may have gone stale
/// (the slot recovered, freed and claimed by a live thread meanwhile), and a live txn's
/// locks and intent must never be touched. A slot is freed only under the claim (see
/// `recover_slot`), so once the check passes the slot stays the dead txn's until we
/// are done.
pub(crate) fn recover_txn(sh: &Shared, t: u64) -> Result<()> {
    // Readers recover too (a bucket a dead writer left odd): outside any section of
    // theirs, and a replay is a write (`section`).
    let _section = super::section::AnySection::enter(sh);
    recover_slot(sh, t, false).map(|_| ())
}

/// Whether `val`, a file end in dead txn `t`'s redo list, is one the store can take: a
/// chunk boundary no further than the maximum size, the reserved address space and the
/// file's real size.
fn check_new_file_end(sh: &Shared, t: u64, val: u64) -> Result<()> {
    // The model checker's region is memory, not the file (which it never grows).
    #[cfg(shuttle)]
    let size = sh.reserve;
    #[cfg(not(shuttle))]
    let size = sh
        .file
        .metadata()
        .map_err(|e| Error::io(&sh.path, e))?
        .len();
    let cs = sh.g.chunk_size();
    if val < sh.g.chunks_off
        || (val - sh.g.chunks_off) % cs != 0
        || val > sh.g.max_size
        || val > sh.reserve
        || val > size
    {
        return Err(sh.corrupt(format!(
            "txn slot {t}: its redo list sets the file end to {val:#x} (the file has {size:#x} bytes)"
        )));
    }
    Ok(())
}

/// [`recover_txn`], then, if `free`, frees the slot (still under the claim). Returns
/// whether it freed it.
fn recover_slot(sh: &Shared, t: u64, free: bool) -> Result<bool> {
    // `t` comes from a lock word in the file: a slot that does not exist is corruption,
    // not a dead owner (its slot would lie outside the table).
    if t >= sh.g.n_txn {
        return Err(sh.corrupt(format!(
            "a lock names txn slot {t}; the store has {}",
            sh.g.n_txn
        )));
    }
    let base = sh.g.txn_slot(t);
    let claim = sh.w(base + T_RECOVERING);
    let mine = sh.owner_word.load(Relaxed);
    loop {
        let cur = claim.load(Acquire);
        if cur != 0 && sh.owner_alive(cur) {
            return Ok(false);
        }
        if claim.compare_exchange(cur, mine, AcqRel, Relaxed).is_ok() {
            break;
        }
    }
    crate::rt::failpoint!("recover.claimed");
    let owner_w = sh.w(base + T_OWNER);
    let owner = owner_w.load(Acquire);
    if owner != 0 && sh.owner_alive(owner) {
        claim.store(0, Release);
        return Ok(false);
    }
    // A free slot (owner 0) may still name locks if its thread exited holding them: hold
    // it while we look, so that no thread claims it meanwhile.
    if owner == 0 && owner_w.compare_exchange(0, mine, AcqRel, Relaxed).is_err() {
        claim.store(0, Release);
        return Ok(false);
    }
    crate::rt::trace!("recover txn {t} (owner {owner:#x}, free {free})");
    let result = recover_claimed(sh, t, base);
    let mut freed = false;
    if owner == 0 {
        owner_w.store(0, Release);
    } else if free && result.is_ok() {
        // Its unpublished large run, if any, is forgotten: the cleaner finds it
        // unreferenced and frees it.
        sh.w(sh.g.txn_slot(t) + T_LARGE).store(0, Release);
        freed = owner_w.compare_exchange(owner, 0, AcqRel, Relaxed).is_ok();
    }
    claim.store(0, Release);
    result.map(|_| freed)
}

fn recover_claimed(sh: &Shared, t: u64, base: u64) -> Result<()> {
    if sh.w(base + T_INTENT).load(Acquire) == 1 {
        let kind = sh.w(base + T_KIND).load(Acquire) & KIND_MASK;
        match kind {
            I_REDO => {
                let n = sh.w(base + T_REDO_N).load(Acquire).min(T_NREDO);
                // A new file end must lie on pages the file has: every later read
                // trusts it, and past the file's size a read is a SIGBUS. A real grower
                // `fallocate`d the range before committing, so only a corrupt slot fails.
                for i in 0..n {
                    let at = sh.w(base + T_REDO + 16 * i).load(Acquire);
                    if redo_target(at).0 == H_FILE_END {
                        let val = sh.w(base + T_REDO + 16 * i + 8).load(Acquire);
                        // Only ever written whole: a masked entry is corruption.
                        let val = if at == H_FILE_END { val } else { u64::MAX };
                        check_new_file_end(sh, t, val)?;
                    }
                }
                for i in 0..n {
                    let at = sh.w(base + T_REDO + 16 * i).load(Acquire);
                    let val = sh.w(base + T_REDO + 16 * i + 8).load(Acquire);
                    // The mutable header words (file end, free list, totals, cleaner
                    // cursor) from H_FILE_END on are redo targets too; only the fixed
                    // geometry below it never is.
                    let (off, _) = redo_target(at);
                    if off % 8 == 0 && off >= H_FILE_END && off + 8 <= sh.file_end() {
                        apply_entry(sh, at, val);
                    }
                }
            }
            k => {
                let handler = sh
                    .hooks
                    .intents
                    .get(k as usize)
                    .copied()
                    .flatten()
                    .ok_or_else(|| sh.corrupt(format!("txn slot {t}: unknown intent kind {k}")))?;
                let mut args = [0u64; T_NARGS as usize];
                for (i, a) in args.iter_mut().enumerate() {
                    *a = sh.w(base + T_ARGS + 8 * i as u64).load(Acquire);
                }
                let n = sh.w(base + T_REDO_N).load(Acquire).min(T_NREDO);
                let redo = (0..n)
                    .map(|i| {
                        (
                            sh.w(base + T_REDO + 16 * i).load(Acquire),
                            sh.w(base + T_REDO + 16 * i + 8).load(Acquire),
                        )
                    })
                    .collect();
                handler(sh, &Intent { args, redo })?;
            }
        }
        sh.w(base + T_INTENT).store(0, Release);
    }
    crate::rt::failpoint!("recover.replayed");
    let dead = t + 1;
    for i in 0..T_NHELD {
        let hw = sh.w(base + T_HELD + 8 * i);
        let l = hw.load(Acquire);
        if l != 0 && l % 8 == 0 && l + 8 <= sh.file_end() {
            let w = sh.w(l);
            let cur = w.load(Acquire);
            if cur & OWNER_MASK == dead
                && w.compare_exchange(cur, cur & LOCK_HIGH, AcqRel, Relaxed)
                    .is_ok()
            {
                wake(sh, l, i32::MAX as u32);
            }
        }
        hw.store(0, Release);
    }
    Ok(())
}

/// Recovers and frees every txn slot whose owner process is dead, and marks dead process
/// slots free. Called when a process attaches and when txn slots run out. The dead
/// slots' data chunks stay with them, to be filled by the next thread that claims them.
pub(crate) fn reclaim_dead(sh: &Shared) -> Result<usize> {
    // Replaying a dead thread's writes is a write like any other (`section`).
    let _section = super::section::AnySection::enter(sh);
    let mut freed = 0;
    for t in 0..sh.g.n_txn {
        let w = sh.w(sh.g.txn_slot(t) + T_OWNER);
        let owner = w.load(Acquire);
        if owner == 0 || sh.owner_alive(owner) {
            continue;
        }
        // Freed under the recovery claim, so that no recoverer holding it meets the slot
        // reused by a live thread.
        if recover_slot(sh, t, true)? {
            freed += 1;
        }
    }
    for p in 0..sh.g.n_proc {
        let slot = sh.g.proc_slot(p);
        if sh.w(slot + P_STATE).load(Acquire) != 0
            && p != sh.proc_idx.load(Relaxed)
            && !sh.proc_locked(p)
        {
            crate::rt::failpoint!("reclaim.proc_unlocked");
            sh.clear_dead_proc(p);
        }
    }
    Ok(freed)
}
