//! Txn slots: one per thread that uses a store, claimed on first use and released when
//! the thread ends (its data chunk stays with the slot, for the next thread to fill).

use crate::error::{Error, Result};
use crate::format::*;
use crate::shared::Shared;
use std::cell::RefCell;
use std::sync::atomic::Ordering::*;
use std::sync::{Arc, Weak};

/// Claims a free txn slot for the calling thread.
fn claim(sh: &Shared) -> Result<u64> {
    let owner = sh.owner_word.load(SeqCst);
    for pass in 0..2 {
        for t in 0..sh.g.n_txn {
            let w = sh.w(sh.g.txn_slot(t) + T_OWNER);
            let cur = w.load(Relaxed);
            if cur == 0 && w.compare_exchange(0, owner, AcqRel, Relaxed).is_ok() {
                scrub(sh, t);
                return Ok(t);
            }
        }
        if pass == 0 {
            super::reclaim_dead(sh)?;
        }
    }
    Err(Error::TooManyUsers(format!(
        "all {} thread slots are in use",
        sh.g.n_txn
    )))
}

/// A slot just claimed is free, so by the protocol it holds no lock, intent or
/// pending run. Make that so even in a damaged file (never trust leftovers), and
/// forget a data chunk that is not really this slot's.
fn scrub(sh: &Shared, t: u64) {
    let b = sh.g.txn_slot(t);
    for i in 0..T_NHELD {
        sh.w(b + T_HELD + 8 * i).store(0, Relaxed);
    }
    for o in [T_RECOVERING, T_INTENT, T_KIND, T_LARGE, T_ADDING] {
        sh.w(b + o).store(0, Relaxed);
    }
    // Dead bytes the slot's last thread counted but did not report (it died first).
    sh.flush_dead_pending(t);
    // A snapshot pin of the slot's last thread (ordered maps) would keep the pages of
    // its snapshot from reuse for as long as this thread holds the slot.
    let area = sh.w(H_ORDERED).load(Acquire);
    if area != 0 && area_ok(&sh.g, area, sh.file_end()) {
        sh.w(area + OA_PINS + 8 * t).store(0, Relaxed);
    }
    let c = sh.w(b + T_DATA_CHUNK).load(Acquire);
    let bump = sh.w(b + T_BUMP).load(Acquire);
    let cs = sh.g.chunk_size();
    let ok = c == 0
        || (c >= sh.g.chunks_off
            && c < sh.file_end()
            && (c - sh.g.chunks_off) % cs == 0
            && sh.w(c + K_KIND).load(Acquire) == CK_DATA
            && sh.w(c + K_OWNER).load(Acquire) == t
            && (c + CHUNK_HDR..=c + cs).contains(&bump));
    if !ok {
        sh.w(b + T_DATA_CHUNK).store(0, Relaxed);
        sh.w(b + T_BUMP).store(0, Relaxed);
    }
}

/// Frees a txn slot this process owns. Its data chunk stays with the slot, so the next
/// thread to claim it goes on filling the same chunk.
pub(crate) fn release(sh: &Shared, t: u64) {
    sh.flush_dead_pending(t);
    let w = sh.w(sh.g.txn_slot(t) + T_OWNER);
    let _ = w.compare_exchange(sh.owner_word.load(SeqCst), 0, AcqRel, Relaxed);
}

struct TlsEntry {
    store_id: u64,
    epoch: u64,
    txn: u64,
    sh: Weak<Shared>,
}

impl Drop for TlsEntry {
    fn drop(&mut self) {
        if let Some(sh) = self.sh.upgrade() {
            if sh.epoch.load(SeqCst) == self.epoch {
                release(&sh, self.txn);
            }
        }
    }
}

#[cfg(not(shuttle))]
thread_local! {
    static TXNS: RefCell<Vec<TlsEntry>> = const { RefCell::new(Vec::new()) };
}
// Shuttle's threads share one OS thread, so they need its own thread-locals.
#[cfg(shuttle)]
shuttle::thread_local! {
    static TXNS: RefCell<Vec<TlsEntry>> = RefCell::new(Vec::new());
}

/// The calling thread's txn slot in `sh` if it has one (none claimed; none either in a
/// thread-local destructor).
pub(crate) fn thread_slot(sh: &Shared) -> Option<u64> {
    let epoch = sh.epoch.load(Relaxed);
    TXNS.try_with(|v| {
        v.try_borrow().ok().and_then(|v| {
            v.iter()
                .find(|e| e.store_id == sh.id && e.epoch == epoch)
                .map(|e| e.txn)
        })
    })
    .ok()
    .flatten()
}

/// The calling thread's txn slot in `sh`, claiming one on first use.
#[inline]
pub(crate) fn thread_txn(sh: &Arc<Shared>) -> Result<u64> {
    if sh.read_only {
        return Err(sh.read_only_error("writing needs a store opened for writing"));
    }
    sh.ensure_registered()?;
    let epoch = sh.epoch.load(Relaxed);
    let found = TXNS.with(|v| {
        let v = v.borrow();
        v.iter()
            .find(|e| e.store_id == sh.id && e.epoch == epoch)
            .map(|e| e.txn)
    });
    if let Some(t) = found {
        return Ok(t);
    }
    let t = claim(sh)?;
    TXNS.with(|v| {
        let mut v = v.borrow_mut();
        // Entries of closed stores or of a pre-fork identity are dead weight: drop them
        // (their Drop releases nothing that is not ours).
        v.retain(|e| e.sh.strong_count() > 0 && !(e.store_id == sh.id && e.epoch != epoch));
        v.push(TlsEntry {
            store_id: sh.id,
            epoch,
            txn: t,
            sh: Arc::downgrade(sh),
        });
    });
    Ok(t)
}
