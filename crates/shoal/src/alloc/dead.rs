//! Dead space: what overwrites and removes leave, batched per thread into the cleaner's hint.

use super::*;
use crate::txn::Txn;

/// Dead bytes a thread batches before adding them to the shared hint. The hint lags the
/// truth by up to this much per thread, and the cleaner stops when the hint is below its
/// threshold: at 64 KiB, dead space in a 4 MB store overshot the threshold by 2 points.
pub(crate) const DEAD_FLUSH: u64 = 16 * 1024;

/// Records `bytes` of new dead space (batched per thread to keep a shared line cold).
pub(crate) fn note_dead(tx: &Txn, bytes: u64) {
    let sh = tx.sh;
    let w = sh.w(tx.base + T_DEAD_PEND);
    let pend = w.load(Relaxed) + bytes;
    if pend >= DEAD_FLUSH {
        sh.w(H_DEAD_HINT).fetch_add(pend, Relaxed);
        w.store(0, Relaxed);
    } else {
        w.store(pend, Relaxed);
    }
}

/// [`note_dead`] for the record at `off`, also adding its length to its data chunk's
/// dead-bytes hint (`K_DEAD`), by which the cleaner picks its victims.
///
/// Only while the chunk cannot be freed: a slot still points at the record (its writer
/// holds the segment lock), or the chunk is the caller's own data chunk (a cleaning step's
/// copies are published while they all lie there: `publish_moves`). A chunk freed
/// meanwhile may have been merged into a longer run, and the add would land in another
/// record's bytes.
pub(crate) fn note_dead_at(tx: &Txn, off: u64, len: u64) {
    let sh = tx.sh;
    let cs = sh.g.chunk_size();
    if len <= cs - CHUNK_HDR && off >= sh.g.chunks_off + CHUNK_HDR && off < sh.file_end() {
        let c = sh.g.chunks_off + ((off - sh.g.chunks_off) & !(cs - 1));
        sh.w(c + K_DEAD).fetch_add(len, Relaxed);
    }
    note_dead(tx, len);
}

/// [`note_dead_at`] for a record this txn appended and did not publish: its chunk's hint
/// only while the chunk is still this txn's data chunk. A chunk it sealed since may have
/// been cleaned, freed and merged into a longer run already, where the add would land in
/// another record's bytes.
pub(crate) fn note_dead_own(tx: &Txn, off: u64, len: u64) {
    let sh = tx.sh;
    let chunk = sh.w(tx.base + T_DATA_CHUNK).load(Acquire);
    if chunk != 0 && off >= sh.g.chunks_off && sh.g.chunk_of(off) == chunk {
        note_dead_at(tx, off, len);
    } else {
        note_dead(tx, len);
    }
}
