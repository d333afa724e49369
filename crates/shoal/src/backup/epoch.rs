//! The backup epoch in the header ([`H_BACKUP`]): 0, or a backup's phase and identity.

use crate::format::*;
use crate::shared::Shared;
use std::sync::atomic::Ordering::*;
use std::time::Duration;

/// Whether the backup that stored epoch `e` is still running (its txn slot still owned by
/// the same attachment of a live process).
pub(crate) fn owner_alive(sh: &Shared, e: u64) -> bool {
    let (_, slot, gen) = backup_epoch_parts(e);
    if slot >= sh.g.n_txn {
        return false;
    }
    let owner = sh.w(sh.g.txn_slot(slot) + T_OWNER).load(Acquire);
    owner != 0 && txn_owner_parts(owner).1 & EPOCH_GEN_MASK == gen && sh.owner_alive(owner)
}

/// Ends epoch `e` if it is still the store's (its backup finished, gave up or died) and
/// wakes the writers waiting on it.
pub(crate) fn end(sh: &Shared, e: u64) -> bool {
    let ended = sh
        .w(H_BACKUP)
        .compare_exchange(e, 0, SeqCst, Relaxed)
        .is_ok();
    if ended {
        wake(sh);
    }
    ended
}

/// Sleeps until the epoch word may have changed from `e`, `t` at most.
pub(crate) fn wait(sh: &Shared, e: u64, t: Duration) {
    #[cfg(not(shuttle))]
    crate::sys::futex_wait(sh.r.futex_word(H_BACKUP), e as u32, t);
    #[cfg(shuttle)]
    {
        let _ = (sh, e, t);
        crate::rt::yield_now();
    }
}

/// Wakes every thread waiting on the epoch word.
pub(crate) fn wake(sh: &Shared) {
    #[cfg(not(shuttle))]
    crate::sys::futex_wake(sh.r.futex_word(H_BACKUP), u32::MAX);
    #[cfg(shuttle)]
    let _ = sh;
}

/// Whether txn slot `t` has a write section open by a live owner (a dead thread's
/// sections were cut short by its death, which a copy takes as a crash does).
pub(crate) fn in_section(sh: &Shared, t: u64) -> bool {
    sh.w(sh.g.txn_slot(t) + T_KIND).load(SeqCst) >= SECTION_ONE && sh.txn_alive(t)
}

/// Whether process slot `p` has a slotless write section open (`P_SECTIONS`) by a live
/// process.
pub(crate) fn process_in_section(sh: &Shared, p: u64) -> bool {
    let slot = sh.g.proc_slot(p);
    sh.w(slot + P_SECTIONS).load(SeqCst) >= SECTION_ONE
        && sh.w(slot + P_STATE).load(Acquire) != 0
        && (p == sh.proc_idx.load(Relaxed) || sh.proc_locked(p))
}

/// Write sections open on txn slot `t` (the calling thread's).
pub(crate) fn depth(sh: &Shared, t: u64) -> u64 {
    sh.w(sh.g.txn_slot(t) + T_KIND).load(Relaxed) >> 32
}
