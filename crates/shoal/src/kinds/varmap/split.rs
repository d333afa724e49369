//! Growth: a full segment split in two, and the recovery of a split a dead writer left.

use super::*;
use crate::error::{Error, Result};
use crate::shared::Shared;
use crate::txn::{Redo, Txn};

/// Splits full segment `seg` (locked by the caller).
pub(crate) fn split(tx: &Txn, m: &MapRef, seg: u64) -> Result<()> {
    let sh = tx.sh;
    let d = sh.w(seg + S_DEPTH).load(Acquire);
    if d >= MAX_DEPTH {
        return Err(Error::StoreFull(format!(
            "map {}: segment at depth {d} is full; keys collide on {MAX_DEPTH} hash bits",
            m.id
        )));
    }
    let dir_lock = m.hdr + M_DIR_LOCK;
    tx.lock(dir_lock)?;
    let r = split_locked(tx, m, seg, d);
    tx.unlock(dir_lock);
    r
}

pub(crate) fn split_locked(tx: &Txn, m: &MapRef, seg: u64, d: u64) -> Result<()> {
    let sh = tx.sh;
    let root = sh.w(m.hdr + M_ROOT).load(Acquire);
    let g = root >> 48;
    // 1. Double the directory if this segment is as deep as it: copy into the spare
    //    directory of depth g+1 and publish it with one store. The old one is abandoned
    //    (readers may still be in it; it is never reused while the map lives).
    SPLIT_IN_WRITE.with(|c| c.set(true));
    if d == g {
        double_directory(tx, m, root)?;
    }
    ensure_spares(tx, m, None)?;
    let s1 = spare_segment(sh, m, seg)?;
    let prefix = sh.w(seg + S_PREFIX).load(Acquire);
    // 2. Build the new segment, locked by us, private until published. Intent first: a
    //    crash before publication leaves it as the map's spare, untouched.
    let me = tx.idx + 1;
    tx.held_note(s1 + S_LOCK)?;
    let r = (|| -> Result<()> {
        let mut args = [0u64; T_NARGS as usize];
        args[A_MAP] = m.id;
        args[A_SEG] = seg;
        args[A_NEW] = s1;
        args[A_DEPTH] = d;
        args[A_PHASE] = 0;
        tx.commit(I_SPLIT, &args, &Redo::new());
        init_segment(sh, m, s1, me, d + 1, prefix | (1 << d));
        let end = sh.file_end();
        let nb = m.n_main + m.n_stash;
        let mut overflow = vec![0u64; m.n_main as usize];
        // Every key's hash, computed once here and reused to finish the split (the old
        // segment cannot change meanwhile: we hold its lock).
        let mut hashes = vec![0u64; (nb * SLOTS) as usize];
        for b in 0..nb {
            if b == nb / 2 {
                crate::rt::failpoint!("split.building");
            }
            // Start the bucket's record misses together rather than one after another.
            for i in 0..SLOTS {
                let s = sh.w(slot_off(seg, b, i)).load(Relaxed);
                if s != 0 && slot_off_of(s) < end {
                    sh.r.prefetch(slot_off_of(s));
                }
            }
            for i in 0..SLOTS {
                let s = sh.w(slot_off(seg, b, i)).load(Acquire);
                if s == 0 {
                    continue;
                }
                let kh = key_hash_of(sh, m, slot_off_of(s), end)?;
                hashes[(b * SLOTS + i) as usize] = kh;
                if (kh >> d) & 1 == 1 {
                    sh.w(slot_off(s1, b, i)).store(s, Relaxed);
                    if b >= m.n_main {
                        overflow[home_bucket(kh, m.n_main) as usize] += 1;
                    }
                }
            }
        }
        for (b, ov) in overflow.iter().enumerate() {
            if *ov > 0 {
                sh.w(bucket_off(s1, b as u64) + B_HDR)
                    .store(make_hdr(0, *ov), Relaxed);
            }
        }
        // 3. Publish: from here on recovery rolls forward.
        // On disk, the new segment must be durable before any key leaves the old one.
        sh.persist(s1, m.seg_size)?;
        crate::rt::failpoint!("split.built");
        tx.set_arg(A_PHASE as u64, 1);
        finish_split(sh, m, seg, s1, d, Some(&hashes))?;
        crate::rt::failpoint!("split.done");
        // Statistics only (not covered by the intent: a crash may lose one count).
        let so = m.hdr + M_COUNTERS + MC_SIZE * tx.idx + MC_SPLITS;
        sh.w(so).store(sh.w(so).load(Relaxed) + 1, Relaxed);
        Ok(())
    })();
    // Also after an error (a slot that is not a record, a failed flush): clear the
    // intent and release the new segment, or its lock and its held-list entry would
    // stay taken, and a few such errors would overflow the held list (a panic).
    tx.done();
    sh.w(s1 + S_LOCK).store(0, Release);
    tx.held_forget(s1 + S_LOCK);
    r
}

/// The hash of the key of the record at `off` (during a split or a check).
pub(crate) fn key_hash_of(sh: &Shared, m: &MapRef, off: u64, end: u64) -> Result<u64> {
    let (mid, k, _, hl) = read_record_header(sh, off, end).ok_or_else(|| {
        sh.corrupt(format!(
            "map {}: slot points at {off:#x}, not a record",
            m.id
        ))
    })?;
    if mid != m.id {
        return Err(sh.corrupt(format!(
            "map {}: record at {off:#x} belongs to map {mid}",
            m.id
        )));
    }
    // Splits hash every key of a segment: no allocation for ordinary key sizes.
    let mut small = [0u8; 256];
    if k as usize <= small.len() {
        let key = &mut small[..k as usize];
        sh.r.read_bytes(off + hl, key);
        return Ok(hash(sh.g.seed, key));
    }
    let mut key = vec![0u8; k as usize];
    sh.r.read_bytes(off + hl, &mut key);
    Ok(hash(sh.g.seed, &key))
}

/// Steps 3-4 of a split, idempotent: repoint the directory, set depths, drop the moved
/// keys from the old segment. Runs with the segment, new segment and directory locked
/// (by the splitter, or by the dead splitter whose recovery this is).
/// `known` holds the hash of every slot's key (0 for empty slots) when the caller has them
/// (a live split); recovery passes None and reads the records again.
pub(crate) fn finish_split(
    sh: &Shared,
    m: &MapRef,
    seg: u64,
    s1: u64,
    d: u64,
    known: Option<&[u64]>,
) -> Result<()> {
    m.publish_split(sh, seg, s1, d)?;
    crate::rt::failpoint!("split.published");
    let end = sh.file_end();
    let nb = m.n_main + m.n_stash;
    let mut overflow_drop = vec![0u64; m.n_main as usize];
    for b in 0..nb {
        if b == nb / 2 {
            crate::rt::failpoint!("split.removing");
        }
        let bo = bucket_off(seg, b);
        let mut moved = [false; SLOTS as usize];
        let mut any = false;
        for i in 0..SLOTS {
            let s = sh.w(slot_off(seg, b, i)).load(Acquire);
            if s == 0 {
                continue;
            }
            let kh = match known {
                Some(k) => k[(b * SLOTS + i) as usize],
                None => key_hash_of(sh, m, slot_off_of(s), end)?,
            };
            if (kh >> d) & 1 == 1 {
                moved[i as usize] = true;
                any = true;
                if b >= m.n_main {
                    overflow_drop[home_bucket(kh, m.n_main) as usize] += 1;
                }
            }
        }
        if any {
            let h0 = sh.w(bo).load(Acquire);
            let seq = hdr_seq(h0) | 1; // odd (a dead splitter may have left it odd already)
            sh.w(bo).store(make_hdr(seq, hdr_overflow(h0)), Relaxed);
            for i in 0..SLOTS {
                if moved[i as usize] {
                    sh.w(slot_off(seg, b, i)).store(0, Release);
                }
            }
            sh.w(bo)
                .store(make_hdr(seq.wrapping_add(1), hdr_overflow(h0)), Release);
        }
    }
    // Overflow counts of the old segment: recount from its stash, which is exact whatever
    // point a previous attempt reached (with known hashes, without reading records).
    let _ = overflow_drop;
    match known {
        Some(k) => {
            let mut counts = vec![0u64; m.n_main as usize];
            for st in 0..m.n_stash {
                let b = m.n_main + st;
                for i in 0..SLOTS {
                    if sh.w(slot_off(seg, b, i)).load(Acquire) != 0 {
                        counts[home_bucket(k[(b * SLOTS + i) as usize], m.n_main) as usize] += 1;
                    }
                }
            }
            set_overflow_counts(sh, seg, &counts);
        }
        None => recount_overflow(sh, m, seg, end)?,
    }
    Ok(())
}

/// Sets every main bucket's overflow count to the number of its keys in the stash.
pub(crate) fn recount_overflow(sh: &Shared, m: &MapRef, seg: u64, end: u64) -> Result<()> {
    let mut counts = vec![0u64; m.n_main as usize];
    for s in 0..m.n_stash {
        for i in 0..SLOTS {
            let v = sh.w(slot_off(seg, m.n_main + s, i)).load(Acquire);
            if v != 0 {
                let kh = key_hash_of(sh, m, slot_off_of(v), end)?;
                counts[home_bucket(kh, m.n_main) as usize] += 1;
            }
        }
    }
    set_overflow_counts(sh, seg, &counts);
    Ok(())
}

/// Stores the main buckets' overflow counts (bumping the seq of each bucket it changes).
pub(crate) fn set_overflow_counts(sh: &Shared, seg: u64, counts: &[u64]) {
    for (b, c) in counts.iter().enumerate() {
        let bo = bucket_off(seg, b as u64);
        let h0 = sh.w(bo).load(Acquire);
        if hdr_overflow(h0) != *c || hdr_seq(h0) & 1 == 1 {
            let seq = hdr_seq(h0) | 1;
            sh.w(bo).store(make_hdr(seq, hdr_overflow(h0)), Relaxed);
            sh.w(bo).store(make_hdr(seq.wrapping_add(1), *c), Release);
        }
    }
}

/// Recovery of a split whose thread died (called with its locks still naming it).
pub(crate) fn recover_split(sh: &Shared, intent: &crate::shared::Intent) -> Result<()> {
    let args = &intent.args;
    let id = args[A_MAP];
    let m = map_ref_unchecked(sh, id)?;
    if args[A_PHASE] == 0 {
        // The new segment was never published: it is still the map's spare. Nothing in
        // the old segment changed.
        return Ok(());
    }
    check_split_args(sh, &m, args)?;
    finish_split(sh, &m, args[A_SEG], args[A_NEW], args[A_DEPTH], None)
}
