//! Growth by halving a segment (maps of stores older than format version 7).

use super::*;
use crate::error::{Error, Result};
use crate::hashmap::{self};
use crate::shared::Shared;
use crate::txn::{Redo, Txn};

/// Splits full segment `seg` (locked by the caller, adders drained).
pub(crate) fn split(tx: &Txn, f: &FixedRef, seg: u64) -> Result<()> {
    let sh = tx.sh;
    let d = sh.w(seg + S_DEPTH).load(Acquire);
    if d >= MAX_DEPTH {
        return Err(Error::StoreFull(format!(
            "map {}: segment at depth {d} is full; keys collide on {MAX_DEPTH} hash bits",
            f.m.id
        )));
    }
    let dir_lock = f.m.hdr + M_DIR_LOCK;
    tx.lock(dir_lock)?;
    let r = split_locked(tx, f, seg, d);
    tx.unlock(dir_lock);
    r
}

pub(crate) fn split_locked(tx: &Txn, f: &FixedRef, seg: u64, d: u64) -> Result<()> {
    let sh = tx.sh;
    let m = &f.m;
    let root = sh.w(m.hdr + M_ROOT).load(Acquire);
    if d == root >> 48 {
        hashmap::double_directory(tx, m, root)?;
    }
    hashmap::ensure_spares(tx, m, None)?;
    let s1 = hashmap::spare_segment(sh, m, seg)?;
    let prefix = sh.w(seg + S_PREFIX).load(Acquire);
    let me = tx.idx + 1;
    tx.held_note(s1 + S_LOCK)?;
    let r = (|| -> Result<()> {
        let mut args = [0u64; T_NARGS as usize];
        args[A_MAP] = m.id;
        args[A_SEG] = seg;
        args[A_NEW] = s1;
        args[A_DEPTH] = d;
        args[A_PHASE] = 0;
        tx.commit(I_FSPLIT, &args, &Redo::new());
        hashmap::init_segment(sh, m, s1, me, d + 1, prefix | (1 << d));
        // The new segment takes the cells whose hash bit d is 1, at the same positions
        // (so it cannot overflow). The old segment cannot change meanwhile: we hold its
        // lock and no adder is counted in it.
        copy_cells_where(
            sh,
            f,
            seg,
            s1,
            || {
                crate::rt::failpoint!("fixed.split.building");
            },
            |kh| (kh >> d) & 1 == 1,
            true,
        );
        sh.persist(s1, m.seg_size)?;
        crate::rt::failpoint!("fixed.split.built");
        tx.set_arg(A_PHASE as u64, 1);
        finish_split(sh, f, seg, s1, d)?;
        crate::rt::failpoint!("fixed.split.done");
        let so = m.hdr + M_COUNTERS + MC_SIZE * tx.idx + MC_SPLITS;
        sh.w(so).store(sh.w(so).load(Relaxed) + 1, Relaxed);
        Ok(())
    })();
    tx.done();
    sh.w(s1 + S_LOCK).fetch_and(LOCK_HIGH, Release);
    tx.held_forget(s1 + S_LOCK);
    r
}

/// The split's second half, idempotent (a recoverer runs it again): repoint the
/// directory, set depths, clear the moved cells' bits in the old segment, recount its
/// overflow counts.
pub(crate) fn finish_split(sh: &Shared, f: &FixedRef, seg: u64, s1: u64, d: u64) -> Result<()> {
    let m = &f.m;
    m.publish_split(sh, seg, s1, d)?;
    crate::rt::failpoint!("fixed.split.published");
    clear_cells_where(
        sh,
        f,
        seg,
        || {
            crate::rt::failpoint!("fixed.split.removing");
        },
        |kh| (kh >> d) & 1 == 1,
    );
    Ok(())
}

/// Sets the main buckets' overflow counts (bumping the seq of each bucket it changes).
pub(crate) fn set_overflow_counts(sh: &Shared, f: &FixedRef, seg: u64, counts: &[u64]) {
    for (b, c) in counts.iter().enumerate() {
        let bo = f.bucket(seg, b as u64);
        let h0 = sh.w(bo).load(Acquire);
        let c = (*c).min(0xff);
        if fh_over(h0) != c || fh_seq(h0) & 1 == 1 {
            let seq = fh_seq(h0) | 1;
            sh.w(bo).store(fh(seq, fh_over(h0), fh_bits(h0)), Relaxed);
            sh.w(bo).store(fh(seq + 1, c, fh_bits(h0)), Release);
        }
    }
}

/// The overflow counts a segment's cells imply (keys outside their home bucket).
pub(crate) fn overflow_counts(sh: &Shared, f: &FixedRef, seg: u64) -> Vec<u64> {
    let mut counts = vec![0u64; f.m.n_main as usize];
    let mut key = vec![0u8; f.geo.key_size as usize];
    for b in 0..f.m.n_main + f.m.n_stash {
        let bo = f.bucket(seg, b);
        let mut bits = fh_bits(sh.w(bo).load(Acquire)) & f.all_bits();
        while bits != 0 {
            let i = bits.trailing_zeros() as u64;
            bits &= bits - 1;
            sh.r.read_bytes(f.cell_off(bo, i), &mut key);
            let home = home_bucket(hash(sh.g.seed, &key), f.m.n_main);
            if home != b {
                counts[home as usize] += 1;
            }
        }
    }
    counts
}

/// Recovery of a fixed map's split whose thread died (its locks still name it).
pub(crate) fn recover_split(sh: &Shared, intent: &crate::shared::Intent) -> Result<()> {
    let args = &intent.args;
    let f = fixed_ref_unchecked(sh, args[A_MAP])?;
    if f.m.groups {
        return Err(sh.corrupt(format!(
            "map {}: a dead txn's split intent in a map that grows by moves",
            f.m.id
        )));
    }
    if args[A_PHASE] == 0 {
        return Ok(()); // the new segment is still the map's spare; nothing else changed
    }
    hashmap::check_split_args(sh, &f.m, args)?;
    finish_split(sh, &f, args[A_SEG], args[A_NEW], args[A_DEPTH])
}

// ---------------------------------------------------------------------------------------
// Growth by moving groups (maps with MF_GROUPS; see DESIGN.md, "How fixed maps grow").
