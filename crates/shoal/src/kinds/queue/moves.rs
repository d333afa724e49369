//! Moves of element chains into and out of queues, each one intent (`I_QMOVE`), and their
//! recovery.
//!
//! A move locks its queue (two, in index order, for a move between queues), computes the
//! queue words it will write into a redo list, commits the intent with the chain (first
//! element, length) and the state word its elements take, then sets the states along the
//! chain, applies the list, and clears the intent. The chain is stable while the intent is
//! pending: a pushed chain is the pusher's own (held elements, linked by it), a pulled one
//! sits at the head of a queue whose lock the intent's txn holds. So a recoverer walks the
//! same chain and writes the same words: replay is idempotent.

use super::wait::wake_sleepers;
use super::QueueRef;
use crate::error::{Error, Result};
use crate::format::*;
use crate::shared::{Intent, Shared};
use crate::txn::{Redo, Txn};
use std::sync::atomic::Ordering::*;

/// Sets the state of the `n` elements of the chain from `first` (a recoverer's chain may
/// be damaged: every index is checked).
fn set_states(sh: &Shared, q: &QueueRef, first: u64, n: u64, state: u64) -> Result<()> {
    let mut e = first;
    for i in 0..n {
        let e_ok = q.elem_at(sh, e, "a moving chain")?;
        sh.w(q.link(e_ok) + L_STATE).store(state, Release);
        if i + 1 < n {
            e = sh.w(q.link(e_ok) + L_NEXT).load(Acquire);
        }
    }
    Ok(())
}

/// Pushes `elems`, held by the caller, onto the tail of queue `qi`, in order. With
/// `limit`, fails with [`Error::QueueFull`] (and moves nothing) when the queue's depth
/// limit would be passed; without, a returned element always finds room.
pub(crate) fn push_chain(
    tx: &Txn,
    q: &QueueRef,
    qi: u64,
    elems: &[u64],
    redelivered: bool,
    limit: bool,
) -> Result<()> {
    let sh = tx.sh;
    let n = elems.len() as u64;
    if n == 0 {
        return Ok(());
    }
    let (first, last) = (elems[0], elems[elems.len() - 1]);
    // The chain is ours (held elements): linked before the lock, unseen by anyone.
    for w in elems.windows(2) {
        sh.w(q.link(w[0]) + L_NEXT).store(w[1], Relaxed);
    }
    let qe = q.queue(qi);
    tx.lock(qe + Q_LOCK)?;
    crate::rt::failpoint!("queue.push.locked");
    let r = (|| {
        if !q.alive(sh) {
            return Err(q.dropped());
        }
        let len = sh.w(qe + Q_LEN).load(Acquire);
        let max = sh.w(qe + Q_LIMIT).load(Acquire);
        if limit && max != 0 && len + n > max {
            return Err(Error::QueueFull(format!(
                "queue {:?} holds {len} of its limit of {max} elements; {n} more do not fit",
                q.queue_name(sh, qi)
            )));
        }
        let tail = sh.w(qe + Q_TAIL).load(Acquire);
        let mut redo = Redo::new();
        if tail == NO_ELEMENT {
            redo.push(qe + Q_HEAD, first);
        } else {
            let tail = q.elem_at(sh, tail, "a queue's tail")?;
            redo.push(q.link(tail) + L_NEXT, first);
        }
        redo.push(q.link(last) + L_NEXT, NO_ELEMENT);
        redo.push(qe + Q_TAIL, last);
        redo.push(qe + Q_LEN, len + n);
        redo.push(qe + Q_PUSHES, sh.w(qe + Q_PUSHES).load(Relaxed) + n);
        let state = qs_in_queue(qi, redelivered);
        tx.commit(I_QMOVE, &[q.hdr, first, n, state], &redo);
        crate::rt::failpoint!("queue.push.committed");
        // The chain's elements are `elems`, in order (linked above): the same stores a
        // recoverer's walk of the links makes, without a load that waits on the one before.
        for &e in elems {
            sh.w(q.link(e) + L_STATE).store(state, Release);
        }
        crate::rt::failpoint!("queue.push.half_applied");
        tx.apply(&redo);
        crate::rt::failpoint!("queue.push.applied");
        tx.done();
        Ok(())
    })();
    tx.unlock(qe + Q_LOCK);
    if r.is_ok() {
        wake_sleepers(sh, qe, n);
    }
    r
}

/// Pulls up to `out.len()` elements from the head of queue `qi`; they become held by the
/// calling process (state `held`). Fills `out` with (index, the state word it had in its
/// queue) and returns how many it pulled (0 when the queue is empty).
pub(crate) fn pull_chain(
    tx: &Txn,
    q: &QueueRef,
    qi: u64,
    out: &mut [(u64, u64)],
    held: u64,
) -> Result<usize> {
    let max = out.len() as u64;
    let sh = tx.sh;
    let qe = q.queue(qi);
    // Empty now (one load of a word the pushers write): no lock. A consumer polling an
    // empty queue then writes nothing the producers must take back from its cache.
    if max == 0 || sh.w(qe + Q_LEN).load(Acquire) == 0 {
        q.check_open(sh)?;
        return Ok(0);
    }
    tx.lock(qe + Q_LOCK)?;
    crate::rt::failpoint!("queue.pull.locked");
    let r = (|| {
        q.check_open(sh)?;
        let len = sh.w(qe + Q_LEN).load(Acquire);
        let n = max.min(len);
        if n == 0 {
            return Ok(0);
        }
        let mut e = q.elem_at(sh, sh.w(qe + Q_HEAD).load(Acquire), "a queue's head")?;
        let first = e;
        let mut next = NO_ELEMENT;
        for i in 0..n {
            let st = sh.w(q.link(e) + L_STATE).load(Acquire);
            if st & 3 != QS_IN_QUEUE || qs_queue(st) != qi {
                return Err(sh.corrupt(format!(
                    "queue set {}: element {e} is linked in queue {qi} but its state is {st:#x}",
                    q.id
                )));
            }
            out[i as usize] = (e, st);
            next = sh.w(q.link(e) + L_NEXT).load(Acquire);
            if i + 1 < n {
                e = q.elem_at(sh, next, "a queue's link")?;
            }
        }
        let mut redo = Redo::new();
        if n == len {
            redo.push(qe + Q_HEAD, NO_ELEMENT);
            redo.push(qe + Q_TAIL, NO_ELEMENT);
        } else {
            redo.push(qe + Q_HEAD, q.elem_at(sh, next, "a queue's link")?);
        }
        redo.push(qe + Q_LEN, len - n);
        redo.push(qe + Q_PULLS, sh.w(qe + Q_PULLS).load(Relaxed) + n);
        tx.commit(I_QMOVE, &[q.hdr, first, n, held], &redo);
        crate::rt::failpoint!("queue.pull.committed");
        // The chain's elements were read into `out` as it was walked, checked.
        for &(e, _) in &out[..n as usize] {
            sh.w(q.link(e) + L_STATE).store(held, Release);
        }
        crate::rt::failpoint!("queue.pull.half_applied");
        tx.apply(&redo);
        crate::rt::failpoint!("queue.pull.applied");
        tx.done();
        Ok(n as usize)
    })();
    tx.unlock(qe + Q_LOCK);
    r
}

/// Moves up to `max` elements from the head of queue `from` to the tail of queue `to`,
/// as one step (no process holds them on the way), within `to`'s depth limit. Returns how
/// many moved.
pub(crate) fn move_between(tx: &Txn, q: &QueueRef, from: u64, to: u64, max: u64) -> Result<u64> {
    let sh = tx.sh;
    let (fe, te) = (q.queue(from), q.queue(to));
    let (a, b) = if from < to { (fe, te) } else { (te, fe) };
    tx.lock(a + Q_LOCK)?;
    if let Err(e) = tx.lock(b + Q_LOCK) {
        tx.unlock(a + Q_LOCK);
        return Err(e);
    }
    crate::rt::failpoint!("queue.move.locked");
    let r = (|| {
        if !q.alive(sh) {
            return Err(q.dropped());
        }
        let flen = sh.w(fe + Q_LEN).load(Acquire);
        let tlen = sh.w(te + Q_LEN).load(Acquire);
        let lim = sh.w(te + Q_LIMIT).load(Acquire);
        let room = if lim == 0 {
            u64::MAX
        } else {
            lim.saturating_sub(tlen)
        };
        let n = max.min(flen).min(room);
        if n == 0 {
            return Ok(0);
        }
        let first = q.elem_at(sh, sh.w(fe + Q_HEAD).load(Acquire), "a queue's head")?;
        let (mut e, mut next) = (first, NO_ELEMENT);
        for i in 0..n {
            next = sh.w(q.link(e) + L_NEXT).load(Acquire);
            if i + 1 < n {
                e = q.elem_at(sh, next, "a queue's link")?;
            }
        }
        let last = e;
        let mut redo = Redo::new();
        if n == flen {
            redo.push(fe + Q_HEAD, NO_ELEMENT);
            redo.push(fe + Q_TAIL, NO_ELEMENT);
        } else {
            redo.push(fe + Q_HEAD, q.elem_at(sh, next, "a queue's link")?);
        }
        redo.push(fe + Q_LEN, flen - n);
        redo.push(fe + Q_PULLS, sh.w(fe + Q_PULLS).load(Relaxed) + n);
        let tail = sh.w(te + Q_TAIL).load(Acquire);
        if tail == NO_ELEMENT {
            redo.push(te + Q_HEAD, first);
        } else {
            redo.push(
                q.link(q.elem_at(sh, tail, "a queue's tail")?) + L_NEXT,
                first,
            );
        }
        redo.push(q.link(last) + L_NEXT, NO_ELEMENT);
        redo.push(te + Q_TAIL, last);
        redo.push(te + Q_LEN, tlen + n);
        redo.push(te + Q_PUSHES, sh.w(te + Q_PUSHES).load(Relaxed) + n);
        let state = qs_in_queue(to, false);
        tx.commit(I_QMOVE, &[q.hdr, first, n, state], &redo);
        crate::rt::failpoint!("queue.move.committed");
        set_states(sh, q, first, n, state)?;
        tx.apply(&redo);
        tx.done();
        Ok(n)
    })();
    tx.unlock(b + Q_LOCK);
    tx.unlock(a + Q_LOCK);
    if let Ok(n) = r {
        if n > 0 {
            wake_sleepers(sh, te, n);
        }
    }
    r
}

/// Recovery of intent kind `I_QMOVE` left by a dead txn: sets the states along its chain
/// and replays its redo list, every word of which must lie in the set's header, queue
/// table or link table.
pub(crate) fn recover_move(sh: &Shared, intent: &Intent) -> Result<()> {
    let hdr = intent.args[QA_SET];
    let id = (0..sh.g.n_catalog)
        .find(|&id| {
            let ce = sh.g.cat_entry(id);
            sh.w(ce + C_KIND).load(Acquire) == KIND_QUEUES
                && sh.w(ce + C_STATE).load(Acquire) & 0xff != CAT_FREE
                && sh.w(ce + C_HDR).load(Acquire) == hdr
        })
        .ok_or_else(|| {
            sh.corrupt(format!(
                "a queue move's intent names {hdr:#x}, the header of no queue set"
            ))
        })?;
    let q = super::queue_ref_unchecked(sh, id)?;
    let (first, n, state) = (
        intent.args[QA_FIRST],
        intent.args[QA_COUNT],
        intent.args[QA_STATE],
    );
    let kind = state & 3;
    if n > q.elems || !(kind == QS_IN_QUEUE || kind == QS_HELD) || qs_queue(state) >= q.nq {
        return Err(sh.corrupt(format!(
            "queue set {id}: a move's intent (chain of {n} from {first}, state {state:#x}) is out of range"
        )));
    }
    for &(at, _) in &intent.redo {
        if at % 8 != 0 || at < q.hdr || at + 8 > q.data {
            return Err(sh.corrupt(format!(
                "queue set {id}: a move's redo list writes {at:#x}, outside the set's tables"
            )));
        }
    }
    set_states(sh, &q, first, n, state)?;
    for &(at, val) in &intent.redo {
        sh.w(at).store(val, Release);
    }
    Ok(())
}
