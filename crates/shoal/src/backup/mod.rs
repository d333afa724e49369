//! Hot backup: a point-in-time copy of a store in use (docs/DESIGN.md, "Hot backup").
//!
//! * `epoch`: the header's epoch word, its phases, and who may end it;
//! * `state`: the state file every process of the store shares during a backup (one word
//!   per copy block, and the blocks that writers copied before their first writes), and
//!   this process's copier over it;
//! * `run`: the backup itself: preparation, the instant, the walk over the blocks.
//!
//! Write sections (`txn::section`) are what makes the instant exist: this module only
//! reads the sections' counts.

pub(crate) mod epoch;
#[cfg(not(shuttle))]
mod run;
#[cfg(not(shuttle))]
mod state;

#[cfg(not(shuttle))]
pub(crate) use run::run;

use crate::shared::Shared;
use std::sync::atomic::Ordering::*;

/// Makes this process copy blocks of the store mapped by `sh` before writing them, for
/// the active epoch `e`. False if it cannot (the backup is gone, or its state file cannot
/// be opened): the caller must then end the epoch before it writes.
pub(crate) fn join(sh: &Shared, e: u64) -> bool {
    #[cfg(not(shuttle))]
    {
        let _g = sh.backup_join.lock().unwrap_or_else(|x| x.into_inner());
        if sh.backup_joined.load(Acquire) == e {
            return true;
        }
        if !epoch::owner_alive(sh, e) {
            return false;
        }
        match state::Copier::open(sh, e) {
            Ok(c) => {
                let len = c.limit() as usize;
                crate::mem::copy::register(sh.r.base_ptr() as usize, len, std::sync::Arc::new(c));
                sh.backup_joined.store(e, Release);
                true
            }
            Err(_) => false,
        }
    }
    #[cfg(shuttle)]
    {
        let _ = (sh, e);
        false
    }
}

/// Stops copying before writes to `sh`'s mapping (its backup ended).
pub(crate) fn leave(sh: &Shared) {
    let _g = sh.backup_join.lock().unwrap_or_else(|x| x.into_inner());
    if sh.backup_joined.load(Acquire) != 0 {
        crate::mem::copy::forget(sh.r.base_ptr() as usize);
        sh.backup_joined.store(0, Release);
    }
}
