//! Large records: a run of their own, its serial, and its free once no object references it.

use super::*;
use crate::error::Result;
use crate::shared::Shared;
use crate::txn::{Redo, Txn};

/// Bytes of LARGE run `run`, of `k` chunks, past the end of its record (`K_USED`, clamped
/// into the run: it comes from the file).
pub(crate) fn large_slack(sh: &Shared, run: u64, k: u64) -> u64 {
    let end = run + k * sh.g.chunk_size();
    end - sh.w(run + K_USED).load(Acquire).clamp(run + CHUNK_HDR, end)
}

/// Allocates a run for one large record of `len` bytes; returns the record's offset.
/// The run stays marked as this txn's until a put publishes it (see `publish_large`).
pub(crate) fn alloc_large(tx: &Txn, len: u64) -> Result<u64> {
    let sh = tx.sh;
    let cs = sh.g.chunk_size();
    let k = (len + CHUNK_HDR).div_ceil(cs);
    let run = with_alloc_lock(tx, |redo| {
        let run = take_run(tx, k, redo, Purpose::Normal)?;
        crate::rt::trace!("large run {run:#x} ({k} chunks) for txn {}", tx.idx);
        redo.push(run + K_KIND, CK_LARGE);
        redo.push(run + K_SERIAL, new_serial(sh, run));
        redo.push(run + K_RUN, k);
        redo.push(run + K_NEXT, 0);
        redo.push(run + K_OWNER, tx.idx + 1);
        redo.push(run + K_USED, run + CHUNK_HDR + len);
        redo.push(tx.base + T_LARGE, run);
        redo.push(H_DATA_BYTES, sh.w(H_DATA_BYTES).load(Acquire) + k * cs);
        redo.push(
            H_LARGE_SLACK,
            sh.w(H_LARGE_SLACK).load(Acquire) + (k * cs - CHUNK_HDR - len),
        );
        Ok(run)
    })?;
    Ok(run + CHUNK_HDR)
}

/// Adds to a put's redo list the stores that mark its large record (if `off` is one)
/// as published.
pub(crate) fn publish_large_redo(tx: &Txn, off: u64, redo: &mut Redo) {
    let sh = tx.sh;
    let run = sh.w(tx.base + T_LARGE).load(Acquire);
    if run != 0 && run + CHUNK_HDR == off {
        redo.push(run + K_OWNER, 0);
        redo.push(tx.base + T_LARGE, 0);
    }
}

/// The serial (`K_SERIAL`) of the large run whose record is at `off`, or 0 if `off` is no
/// large record's. Only meaningful while something keeps the run from being freed: a slot
/// still pointing at the record (under its segment lock), or the run pending in our own
/// txn slot.
pub(crate) fn large_serial(sh: &Shared, off: u64) -> u64 {
    if off < sh.g.chunks_off + CHUNK_HDR || off >= sh.file_end() {
        return 0;
    }
    let run = sh.g.chunk_of(off);
    if run + CHUNK_HDR != off || sh.w(run + K_KIND).load(Acquire) != CK_LARGE {
        return 0;
    }
    sh.w(run + K_SERIAL).load(Acquire)
}

/// [`large_serial`] of `off` if its run is the one pending in `tx`'s slot (taken, not yet
/// published or freed, so nobody else frees it meanwhile), else 0.
pub(crate) fn pending_large_serial(tx: &Txn, off: u64) -> u64 {
    let sh = tx.sh;
    let run = sh.w(tx.base + T_LARGE).load(Acquire);
    if run == 0 || run + CHUNK_HDR != off {
        return 0;
    }
    large_serial(sh, off)
}

/// A fresh serial for a large run: nonzero, and not predictable from the values users
/// write (a value that repeats an old run's header must not pass for it).
pub(crate) fn new_serial(sh: &Shared, run: u64) -> u64 {
    use std::sync::atomic::AtomicU64;
    pub(crate) static COUNTER: AtomicU64 = AtomicU64::new(0);
    let t = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos() as u64);
    let mut b = [0u8; 32];
    b[..8].copy_from_slice(&run.to_le_bytes());
    b[8..16].copy_from_slice(&t.to_le_bytes());
    b[16..24].copy_from_slice(&u64::from(std::process::id()).to_le_bytes());
    b[24..].copy_from_slice(&COUNTER.fetch_add(1, Relaxed).to_le_bytes());
    hash(sh.g.seed ^ 0x5e71_a15e_71a1_5e71, &b) | 1
}

/// Frees the large record at `off` with serial `serial` if it is one (after it was
/// unpublished or never published). Errors are ignored: the cleaner frees dead runs it
/// finds. On disk the run is left to the cleaner, which flushes before it frees (so that
/// an OS crash never finds a slot still pointing into a reused run).
pub(crate) fn free_if_large(tx: &Txn, off: u64, serial: u64) {
    if !tx.sh.durable && serial != 0 {
        free_large(tx, off, serial);
    }
}

/// Frees the large-record run whose record is at `off`, now, if it is still that run
/// (its serial is `serial`) and still dead.
///
/// Callers decide that the run is dead (a writer has just replaced or removed its record,
/// or did not publish it; the cleaner found no key referencing it) before they take the
/// alloc lock. Meanwhile the other one may have freed it, and it may have been handed out
/// again (the free list gives out the run freed last first) for a record being written or
/// already live, or merged into a longer free run (its start is then inside another
/// run, where a record's bytes may lie). So it is checked again under the alloc lock,
/// which every allocation, free and merge of a run takes: the same serial (a merge clears
/// the kind of the header it absorbs, and a record written over it would have to repeat a
/// random word), then liveness (see [`large_run_dead`]).
pub(crate) fn free_large(tx: &Txn, off: u64, serial: u64) {
    let sh = tx.sh;
    if off < sh.g.chunks_off || off >= sh.file_end() {
        return;
    }
    let run = sh.g.chunk_of(off);
    if run + CHUNK_HDR != off || serial == 0 {
        return;
    }
    let _ = with_alloc_lock(tx, |redo| {
        if sh.w(run + K_KIND).load(Acquire) != CK_LARGE
            || sh.w(run + K_SERIAL).load(Acquire) != serial
            || !large_run_dead(tx, run)
        {
            return Ok(());
        }
        let k = sh.w(run + K_RUN).load(Acquire);
        if k == 0 || k > (sh.file_end() - run) / sh.g.chunk_size() {
            return Err(sh.corrupt(format!(
                "large run {run:#x} of {k} chunks does not fit the file"
            )));
        }
        redo.push(
            H_LARGE_SLACK,
            sh.w(H_LARGE_SLACK)
                .load(Acquire)
                .saturating_sub(large_slack(sh, run, k)),
        );
        crate::rt::trace!("free large run {run:#x} ({k} chunks, serial {serial:#x})");
        crate::paranoid::unreferenced!(
            sh,
            run,
            run + k * sh.g.chunk_size(),
            "free of large run {run:#x}"
        );
        free_run_redo(sh, run, k, redo);
        redo.push(
            H_DATA_BYTES,
            sh.w(H_DATA_BYTES)
                .load(Acquire)
                .saturating_sub(k * sh.g.chunk_size()),
        );
        if sh.w(tx.base + T_LARGE).load(Acquire) == run {
            redo.push(tx.base + T_LARGE, 0);
        }
        Ok(())
    });
}

/// Under the alloc lock: whether large run `run` is dead. It is alive while a live txn
/// other than `tx` is writing it (the run's owner mark names that txn, and the txn's pending
/// run is this one) and while its key maps to its record. A dead owner's committed intent,
/// which may be the very put that publishes the run, is recovered first. On doubt (an
/// intent still being recovered, a failed read) it counts as alive: a leaked run is found
/// again by the cleaner, a live one freed is lost data.
pub(crate) fn large_run_dead(tx: &Txn, run: u64) -> bool {
    let sh = tx.sh;
    let owner = sh.w(run + K_OWNER).load(Acquire);
    if owner != 0 && owner - 1 < sh.g.n_txn {
        let t = owner - 1;
        let pending = sh.w(sh.g.txn_slot(t) + T_LARGE).load(Acquire) == run;
        if t == tx.idx {
            if pending {
                return true; // our own, never published
            }
        } else if sh.txn_alive(t) {
            if pending {
                return false; // being written
            }
        } else if crate::txn::recover_txn(sh, t).is_err()
            || sh.w(sh.g.txn_slot(t) + T_INTENT).load(Acquire) != 0
        {
            return false;
        }
    }
    // Whether an object still references the run's record is the kinds' to say.
    (sh.hooks.record_unreferenced)(sh, run + CHUNK_HDR)
}
