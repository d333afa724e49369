//! The elements of dead holders, handed back.
//!
//! A process records itself in the set's holders table (one word per process slot) before
//! it first pulls, so finding who may hold elements costs a look at that table, not at
//! every element. A holder of record that is dead (its process slot reused or its
//! liveness lock free) is swept under the set's sweep lock: first every dead txn is
//! recovered (a move it committed is finished, so its chain sits wholly in a queue or
//! wholly with the holder), then every element still held by it goes, in chains of up to
//! [`SWEEP_BATCH`], to its queue (the return queue, or the queue it came from, marked
//! redelivered), and last its holders word is cleared. A sweeper killed on the way leaves
//! the word set: the next sweep goes on from where it stopped.

use super::{push_chain, QueueRef};
use crate::error::Result;
use crate::format::*;
use crate::txn::Txn;
use std::sync::atomic::Ordering::*;

/// Elements handed back per move.
const SWEEP_BATCH: usize = 256;

/// The holders word of process slot `p`.
fn holder_word(q: &QueueRef, p: u64) -> u64 {
    q.hdr + QH_HOLDERS + 8 * p
}

/// Makes the calling process the holder of record at its process slot, sweeping what a
/// dead process that had the slot before left there first. Called before its first pull.
pub(crate) fn register(tx: &Txn, q: &QueueRef) -> Result<()> {
    let sh = tx.sh;
    let me = sh.owner_word.load(Relaxed);
    let p = sh.proc_idx.load(Relaxed);
    let w = sh.w(holder_word(q, p));
    let wait = crate::deadline::Wait::begin(tx.timeout, tx.timeout);
    loop {
        let cur = w.load(Acquire);
        if cur == me {
            return Ok(());
        }
        if cur == 0 {
            if w.compare_exchange(0, me, AcqRel, Acquire).is_ok() {
                return Ok(());
            }
            continue;
        }
        // The slot is ours now, so whoever had it is dead.
        if sweep_holder(tx, q, p, cur)?.is_none() {
            if wait.expired() {
                return Err(wait.timeout());
            }
            crate::rt::sleep(std::time::Duration::from_millis(1));
        }
    }
}

/// Sweeps every holder of record that is dead. Returns how many elements went back.
pub(crate) fn sweep_dead(tx: &Txn, q: &QueueRef) -> Result<u64> {
    let sh = tx.sh;
    let me = sh.owner_word.load(Relaxed);
    let mut moved = 0;
    for p in 0..sh.g.n_proc {
        let cur = sh.w(holder_word(q, p)).load(Acquire);
        if cur != 0 && cur != me && !sh.owner_alive(cur) {
            moved += sweep_holder(tx, q, p, cur)?.unwrap_or(0);
        }
    }
    Ok(moved)
}

/// Hands back every element held by `owner`, the dead process of record at slot `p`, and
/// clears its holders word; how many went back. None when that cannot be done yet (one of
/// its txns is being recovered by another process).
fn sweep_holder(tx: &Txn, q: &QueueRef, p: u64, owner: u64) -> Result<Option<u64>> {
    let sh = tx.sh;
    let lock = q.hdr + QH_SWEEP_LOCK;
    tx.lock(lock)?;
    crate::rt::failpoint!("queue.sweep.locked");
    let r = (|| {
        let w = sh.w(holder_word(q, p));
        if w.load(Acquire) != owner {
            return Ok(Some(0)); // swept by someone else meanwhile
        }
        crate::txn::reclaim_dead(sh)?;
        if (0..sh.g.n_txn).any(|t| sh.w(sh.g.txn_slot(t) + T_OWNER).load(Acquire) == owner) {
            return Ok(None);
        }
        let mine = (p, txn_owner_parts(owner).1 & 0xffff_ffff);
        let mut back: Vec<Vec<u64>> = vec![Vec::new(); q.nq as usize];
        for e in 0..q.elems {
            let st = sh.w(q.link(e) + L_STATE).load(Acquire);
            if st & 3 == QS_HELD && qs_holder(st) == mine {
                let to = if q.redeliver && qs_queue(st) < q.nq {
                    qs_queue(st)
                } else {
                    q.ret
                };
                back[to as usize].push(e);
            }
        }
        for (to, elems) in back.iter().enumerate() {
            for chunk in elems.chunks(SWEEP_BATCH) {
                push_chain(tx, q, to as u64, chunk, q.redeliver, false)?;
                crate::rt::failpoint!("queue.sweep.returned");
            }
        }
        let _ = w.compare_exchange(owner, 0, AcqRel, Relaxed);
        Ok(Some(back.iter().map(|v| v.len() as u64).sum()))
    })();
    tx.unlock(lock);
    r
}
