//! Lock-free adders: waiting out the adds counted in a segment's lock word, and a drop's barrier.

use super::*;
use crate::deadline::Wait;
use crate::error::Result;
use crate::hashmap::{self};
use crate::txn::Txn;
use std::time::Duration;

/// Called by a writer that owns segment lock `seg + S_LOCK`: waits until no lock-free
/// adder is counted in it. A count nobody live announces (left by killed adders) is
/// cleared after 10 ms.
pub(crate) fn wait_adders(tx: &Txn, seg: u64, timeout: Duration) -> Result<()> {
    let sh = tx.sh;
    let lw = sh.w(seg + S_LOCK);
    if lw.load(Acquire) & LOCK_HIGH == 0 {
        return Ok(());
    }
    let wait = Wait::begin(timeout, timeout);
    let mut spins = 0u32;
    let mut next_check = Duration::from_millis(10);
    loop {
        let cur = lw.load(Acquire);
        if cur & LOCK_HIGH == 0 {
            return Ok(());
        }
        spins += 1;
        if spins < 64 {
            std::hint::spin_loop();
            continue;
        }
        // As for locks (`txn`, `lock_slow`): the live adders every 10 ms, and the
        // deadline before every sleep, with the adders looked at first, since a count only
        // dead adders left must be cleared whatever the deadline (a zero one, the Python
        // binding's first try, used to sleep out the first 10 ms).
        let waited = wait.waited();
        let expired = wait.expired();
        if waited >= next_check || expired {
            next_check = waited + Duration::from_millis(10);
            let live = (0..sh.g.n_txn).any(|t| {
                t != tx.idx
                    && sh.w(sh.g.txn_slot(t) + T_ADDING).load(SeqCst) == seg
                    && sh.txn_alive(t)
            });
            if !live {
                // We own the lock, so no adder can count itself in meanwhile: the count
                // left is all stale.
                let _ = lw.compare_exchange(cur, cur & !LOCK_HIGH, AcqRel, Relaxed);
                continue;
            }
            if expired {
                return Err(wait.timeout());
            }
        }
        crate::rt::sleep(Duration::from_micros(20));
    }
}

/// The barrier of a drop (catalog lock held, map marked dropping): once every segment
/// lock has been taken and its adders drained, no writer or adder is left in the map.
pub(crate) fn drop_barrier(tx: &Txn, f: &FixedRef) -> Result<()> {
    for (seg, _) in hashmap::segments(tx.sh, &f.m)? {
        tx.lock(seg + S_LOCK)?;
        let r = wait_adders(tx, seg, f.m.timeout);
        tx.unlock(seg + S_LOCK);
        r?;
    }
    Ok(())
}
