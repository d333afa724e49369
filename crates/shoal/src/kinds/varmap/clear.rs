//! Clearing a map, one segment at a time.

use super::*;
use crate::error::Result;
use crate::txn::{Redo, Txn};

/// Removes every entry of the map, segment by segment. Returns the record bytes freed.
pub(crate) fn clear(tx: &Txn, m: &MapRef) -> Result<u64> {
    m.clear_segments(tx, |tx, seg| clear_segment(tx, m, seg))
}

pub(crate) fn clear_segment(tx: &Txn, m: &MapRef, seg: u64) -> Result<u64> {
    let sh = tx.sh;
    if !m.alive(sh) {
        return Err(m.dropped());
    }
    if m.vtrail != 0 {
        let uid_lock = m.hdr + M_UID_LOCK;
        tx.lock(uid_lock)?;
        let r = clear_segment_uids(tx, m, seg);
        tx.unlock(uid_lock);
        return r;
    }
    let end = sh.file_end();
    let cnt_off = m.hdr + M_COUNTERS + MC_SIZE * tx.idx + MC_COUNT;
    let bytes_off = m.hdr + M_COUNTERS + MC_SIZE * tx.idx + MC_BYTES;
    let mut freed = 0;
    for b in 0..m.n_main + m.n_stash {
        let bo = bucket_off(seg, b);
        let h0 = sh.w(bo).load(Acquire);
        let mut redo = Redo::new();
        let (mut n, mut bytes) = (0u64, 0u64);
        for i in 0..SLOTS {
            let s = sh.w(slot_off(seg, b, i)).load(Acquire);
            if s != 0 {
                let (_, k, v, hl) =
                    read_record_header(sh, slot_off_of(s), end).ok_or_else(|| {
                        sh.corrupt(format!(
                            "map {}: slot at {:#x} points at no record",
                            m.id,
                            slot_off(seg, b, i)
                        ))
                    })?;
                redo.push(slot_off(seg, b, i), 0);
                n += 1;
                bytes += hl + k + v + sh.g.trailer;
            }
        }
        if n == 0 && hdr_overflow(h0) == 0 {
            continue;
        }
        redo.push(bo, make_hdr(hdr_seq(h0).wrapping_add(2), 0));
        redo.push(cnt_off, sh.w(cnt_off).load(Relaxed).wrapping_sub(n));
        redo.push(bytes_off, sh.w(bytes_off).load(Relaxed).wrapping_sub(bytes));
        tx.commit(I_REDO, &[], &redo);
        sh.w(bo).store(
            make_hdr(hdr_seq(h0).wrapping_add(1), hdr_overflow(h0)),
            Relaxed,
        );
        tx.apply(&redo);
        tx.done();
        freed += bytes;
    }
    Ok(freed)
}

/// [`clear_segment`] for a map with UIDs (segment and UID locks held): one redo list per
/// entry, since each also frees the entry's UID; the bucket headers' overflow counts are
/// reset once the segment is empty.
pub(crate) fn clear_segment_uids(tx: &Txn, m: &MapRef, seg: u64) -> Result<u64> {
    let sh = tx.sh;
    let end = sh.file_end();
    let cnt_off = m.hdr + M_COUNTERS + MC_SIZE * tx.idx + MC_COUNT;
    let bytes_off = m.hdr + M_COUNTERS + MC_SIZE * tx.idx + MC_BYTES;
    let mut freed = 0;
    for b in 0..m.n_main + m.n_stash {
        let bo = bucket_off(seg, b);
        for i in 0..SLOTS {
            let so = slot_off(seg, b, i);
            let s = sh.w(so).load(Acquire);
            if s == 0 {
                continue;
            }
            let off = slot_off_of(s);
            let (_, k, v, hl) = read_record_header(sh, off, end)
                .filter(|r| r.2 >= UID_TRAILER)
                .ok_or_else(|| {
                    sh.corrupt(format!("map {}: slot at {so:#x} points at no record", m.id))
                })?;
            let len = hl + k + v + sh.g.trailer;
            let h0 = sh.w(bo).load(Acquire);
            let mut redo = Redo::new();
            redo.push(so, 0);
            redo.push(bo, make_hdr(hdr_seq(h0).wrapping_add(2), hdr_overflow(h0)));
            redo.push(cnt_off, sh.w(cnt_off).load(Relaxed).wrapping_sub(1));
            redo.push(bytes_off, sh.w(bytes_off).load(Relaxed).wrapping_sub(len));
            crate::kinds::varmap::uid::push_free(
                tx,
                m,
                &mut redo,
                crate::kinds::varmap::uid::record_index(sh, off, len),
            )?;
            tx.commit(I_REDO, &[], &redo);
            sh.w(bo).store(
                make_hdr(hdr_seq(h0).wrapping_add(1), hdr_overflow(h0)),
                Relaxed,
            );
            tx.apply(&redo);
            tx.done();
            freed += len;
        }
    }
    // Every slot is empty now (the segment lock kept inserts out): no bucket overflows.
    for b in 0..m.n_main {
        let bo = bucket_off(seg, b);
        let h0 = sh.w(bo).load(Acquire);
        if hdr_overflow(h0) != 0 {
            let mut redo = Redo::new();
            redo.push(bo, make_hdr(hdr_seq(h0).wrapping_add(2), 0));
            tx.commit(I_REDO, &[], &redo);
            sh.w(bo).store(
                make_hdr(hdr_seq(h0).wrapping_add(1), hdr_overflow(h0)),
                Relaxed,
            );
            tx.apply(&redo);
            tx.done();
        }
    }
    Ok(freed)
}
