//! Iteration: copying out one segment's cells at a time, in bit-reversed hash order.

use super::*;
use crate::error::Result;
use crate::hashmap::{self};
use crate::mem::fence;
use crate::shared::Shared;

/// Copies out the segment covering iteration position `cursor` (bit-reversed hash
/// order, as `hashmap::snapshot`) and returns the next position. As there, what is still
/// wrong under the segment's lock (a bucket left mid-write) is damage: skipped, and said
/// in the step (`map` names the map), so that the iteration reports it and goes on.
pub(crate) fn snapshot(
    sh: &std::sync::Arc<Shared>,
    f: &FixedRef,
    map: &str,
    cursor: u64,
) -> Result<hashmap::Step> {
    f.m.snapshot_step(
        sh,
        map,
        cursor,
        |locked| snapshot_once(sh, f, map, cursor, locked),
        |tx, h| f.lock_segment(tx, h),
    )
}

pub(crate) fn snapshot_once(
    sh: &Shared,
    f: &FixedRef,
    map: &str,
    cursor: u64,
    locked: Option<u64>,
) -> Result<Option<hashmap::Step>> {
    // Tests make every optimistic copy fail here, to reach the locked one.
    #[cfg(feature = "failpoints")]
    if locked.is_none() {
        fail::fail_point!("snapshot.optimistic", |_| Ok(None));
    }
    let m = &f.m;
    let end = sh.file_end();
    let (root, eoff, e) = m.locate(sh, cursor.reverse_bits(), end)?;
    let seg = entry_seg(e);
    if locked.is_some_and(|l| l != seg) {
        return Ok(None);
    }
    if locked.is_some() {
        crate::rt::failpoint!("snapshot.locked");
    }
    // A segment of a map of groups holds the keys of any set of directory entries: the
    // step is the cursor's entry alone (its keys are in `seg`, whatever else is).
    let d = if m.groups { root >> 48 } else { entry_depth(e) };
    if d > MAX_DEPTH {
        return Err(sh.corrupt(format!(
            "map {}: directory entry {eoff:#x} has depth {d}",
            m.id
        )));
    }
    let h = cursor.reverse_bits();
    let mut next = if d == 0 {
        None
    } else {
        let span = 1u64 << (64 - d);
        (cursor & !(span - 1)).checked_add(span)
    };
    if !m.groups && !hashmap::segment_matches(sh, seg, d, h) {
        if locked.is_none() {
            return Ok(None); // a split publishing: entries first, then the depths
        }
        if !m.alive(sh) {
            return Err(m.dropped());
        }
        return Ok(Some(hashmap::Step {
            items: Vec::new(),
            next,
            damage: Some((
                seg,
                format!(
                    "map {map:?}: segment {seg:#x} skipped: {}",
                    hashmap::segment_mismatch(sh, m.id, seg, d, h)
                ),
            )),
        }));
    }
    // A map of groups: the step takes the following entries too while they name the same
    // segment (siblings of a doubling mostly do), so that a segment is copied about once
    // per run of its entries, not once per entry. They are validated with the first.
    let mut merged: Vec<u64> = Vec::new();
    if m.groups {
        if entry_depth(e) != 0 {
            return Err(sh.corrupt(format!(
                "map {}: directory entry {eoff:#x} has depth {} in a map of groups",
                m.id,
                entry_depth(e)
            )));
        }
        let dir = root & OFF_MASK;
        if d > 0 && dir.checked_add(8 << d).is_some_and(|x| x <= end) {
            let span = 1u64 << (64 - d);
            while let Some(n) = next {
                let o = dir + 8 * (n.reverse_bits() & ((1 << d) - 1));
                if sh.w(o).load(Acquire) != e {
                    break;
                }
                merged.push(o);
                next = n.checked_add(span);
            }
        }
    }
    let nb = m.n_main + m.n_stash;
    let mut hdrs = Vec::with_capacity(nb as usize);
    let mut items = Vec::new();
    let mut damaged: Vec<u64> = Vec::new();
    for b in 0..nb {
        let bo = f.bucket(seg, b);
        let h1 = sh.w(bo).load(Acquire);
        hdrs.push(h1);
        if fh_seq(h1) & 1 == 1 {
            if locked.is_none() {
                return Ok(None);
            }
            // Under the lock no writer can be in it (taking the lock recovered a dead
            // holder): a crash left it mid-write and nobody repaired it. Its cells may
            // be half written: skipped.
            damaged.push(bo);
            continue;
        }
        let mut bits = fh_bits(h1) & f.all_bits();
        while bits != 0 {
            let i = bits.trailing_zeros() as u64;
            bits &= bits - 1;
            let co = f.cell_off(bo, i);
            let mut key = vec![0u8; f.geo.key_size as usize];
            sh.r.read_bytes(co, &mut key);
            // Only keys of this step's interval (a split in flight may leave moved keys
            // in the old segment for a moment, the new one returns them; a segment of a
            // map of groups holds other entries' keys too).
            let pos = hash(sh.g.seed, &key).reverse_bits();
            if pos < cursor || next.is_some_and(|n| pos >= n) {
                continue;
            }
            let mut val = vec![0u8; f.geo.value_size as usize];
            sh.r.read_bytes(co + f.geo.kstride, &mut val);
            items.push((key, val));
        }
    }
    fence(Acquire);
    for b in 0..nb {
        if sh.w(f.bucket(seg, b)).load(Relaxed) != hdrs[b as usize] {
            return Ok(None);
        }
    }
    // Only optimistic copies check the directory: under the segment lock another
    // segment's split may double it, which is no interference (as in
    // `hashmap::snapshot_once`; test `locked_iteration`).
    if locked.is_none()
        && (sh.w(eoff).load(Relaxed) != e
            || sh.w(m.hdr + M_ROOT).load(Relaxed) != root
            || merged.iter().any(|&o| sh.w(o).load(Relaxed) != e))
    {
        return Ok(None);
    }
    if !m.alive(sh) {
        return Err(m.dropped());
    }
    let damage = (!damaged.is_empty()).then(|| {
        let what = format!(
            "map {map:?}: segment {seg:#x}: {} bucket(s) left mid-write skipped (first {:#x})",
            damaged.len(),
            damaged[0]
        );
        (seg, what)
    });
    Ok(Some(hashmap::Step {
        items,
        next,
        damage,
    }))
}
