//! Iteration: copying out one segment's entries at a time, in bit-reversed hash order.

use super::*;
use crate::error::Result;
use crate::mem::fence;
use crate::shared::Shared;

/// Copies out the segment that covers iteration position `cursor`, and returns the next
/// position (None at the end).
///
/// Positions are hashes with their bits reversed. A segment of local depth d holds exactly
/// the keys whose low d hash bits equal its prefix: an aligned interval of length 2^(64-d)
/// in reversed order. Splits only cut intervals in two, so walking intervals in order,
/// and keeping only keys at or past the cursor, visits every key that stays put exactly
/// once whatever splits happen meanwhile.
///
/// Damage (a slot that leads to no record of the map, a record that fails its checksum, a
/// bucket left mid-write) looks like interference to an optimistic copy, which retries.
/// Under the segment's lock nothing can change, so what is still wrong there is damage:
/// the slots that can be read are returned, and the step says what it skipped (`map`
/// names the map), so that an iteration reports it as corruption and goes on with the
/// next segment. It used to fail the whole iteration with "segment ... changed under its
/// lock", which read like a race, and hid every other segment and map from `shoal dump`.
pub(crate) fn snapshot(
    sh: &std::sync::Arc<Shared>,
    m: &MapRef,
    map: &str,
    cursor: u64,
    values: bool,
) -> Result<Step> {
    m.snapshot_step(
        sh,
        map,
        cursor,
        |locked| snapshot_once(sh, m, map, cursor, values, locked),
        |tx, h| m.lock_segment(tx, h),
    )
}

pub(crate) fn snapshot_once(
    sh: &Shared,
    m: &MapRef,
    map: &str,
    cursor: u64,
    values: bool,
    locked: Option<u64>,
) -> Result<Option<Step>> {
    // Tests make every optimistic copy fail here, to reach the locked one.
    #[cfg(feature = "failpoints")]
    if locked.is_none() {
        fail::fail_point!("snapshot.optimistic", |_| Ok(None));
    }
    let end = sh.file_end();
    let h = cursor.reverse_bits();
    let (root, eoff, e) = m.locate(sh, h, end)?;
    let seg = entry_seg(e);
    if locked.is_some_and(|l| l != seg) {
        return Ok(None);
    }
    if locked.is_some() {
        crate::rt::failpoint!("snapshot.locked");
    }
    let d = entry_depth(e);
    if d > MAX_DEPTH {
        return Err(m.bad(
            sh,
            format!("map {map:?}: directory entry {eoff:#x} has depth {d}"),
        ));
    }
    let next = if d == 0 {
        None
    } else {
        let span = 1u64 << (64 - d);
        (cursor & !(span - 1)).checked_add(span)
    };
    if !segment_matches(sh, seg, d, h) {
        if locked.is_none() {
            return Ok(None); // a split publishing: entries first, then the depths
        }
        if !m.alive(sh) {
            return Err(m.dropped());
        }
        // The directory says which keys the segment covers: the iteration goes on past it.
        return Ok(Some(Step {
            items: Vec::new(),
            next,
            damage: Some((
                seg,
                format!(
                    "map {map:?}: segment {seg:#x} skipped: {}",
                    segment_mismatch(sh, m.id, seg, d, h)
                ),
            )),
        }));
    }
    let nb = m.n_main + m.n_stash;
    let mut hdrs = Vec::with_capacity(nb as usize);
    let mut items = Vec::new();
    // Under the lock: what could not be read (how many, and the first few).
    let (mut bad, mut said) = (0u64, Vec::new());
    let mut damaged = |what: String| {
        bad += 1;
        if said.len() < 3 {
            said.push(what);
        }
    };
    let trailer = sh.g.trailer;
    for b in 0..nb {
        let bo = bucket_off(seg, b);
        let h1 = sh.w(bo).load(Acquire);
        if hdr_seq(h1) & 1 == 1 {
            if locked.is_none() {
                return Ok(None);
            }
            // No writer can be in it (we hold the lock, and taking it recovered a dead
            // holder): a bucket left mid-write by a crash that nobody repaired. Its slots
            // may be half changed: skipped.
            damaged(format!("bucket {bo:#x} left mid-write"));
            hdrs.push(h1);
            continue;
        }
        hdrs.push(h1);
        for i in 0..SLOTS {
            let so = slot_off(seg, b, i);
            let s = sh.w(so).load(Relaxed);
            if s == 0 {
                continue;
            }
            let off = slot_off_of(s);
            let hdr = read_record_header(sh, off, end).filter(|r| r.0 == m.id);
            let Some((_, k, v, hl)) = hdr else {
                if locked.is_none() {
                    return Ok(None);
                }
                damaged(format!(
                    "slot {so:#x} leads to {off:#x}, which is no record of the map"
                ));
                continue;
            };
            if trailer != 0 || values {
                // Validate the bucket before trusting the length with an allocation (or
                // a checksum's read of the whole record).
                fence(Acquire);
                if sh.w(bo).load(Relaxed) != h1 {
                    return Ok(None);
                }
            }
            // The checksum is checked for key-only iterations too: a damaged record's key
            // is no more to be trusted than its value.
            if trailer != 0 && !record_crc_ok(sh, off, off + hl + k + v) {
                if locked.is_none() {
                    return Ok(None);
                }
                damaged(format!(
                    "the record at {off:#x} (slot {so:#x}) fails its checksum"
                ));
                continue;
            }
            let mut key = vec![0u8; k as usize];
            sh.r.read_bytes(off + hl, &mut key);
            // Only keys of this segment's interval: between a split's publication and the
            // removal of the moved keys, the old segment still holds keys that belong to
            // the new one (which returns them).
            let pos = hash(sh.g.seed, &key).reverse_bits();
            if pos < cursor || next.is_some_and(|n| pos >= n) {
                continue;
            }
            let mut val = Vec::new();
            if values {
                sh.r.read_to_vec(off + hl + k, v.saturating_sub(m.vtrail) as usize, &mut val);
            }
            items.push((key, val));
        }
    }
    fence(Acquire);
    for b in 0..nb {
        if sh.w(bucket_off(seg, b)).load(Relaxed) != hdrs[b as usize] {
            return Ok(None);
        }
    }
    // Optimistic copies also check that the directory did not change. Under the segment
    // lock it may (another segment's split doubles it, taking only the directory lock),
    // and that is no interference: the segment, its depth and its keys cannot change
    // while we hold its lock, and it is what covers the cursor. Checked there too, a
    // doubling during a locked copy was reported as a corrupt store (CI, a Python test
    // iterating while three processes inserted).
    if locked.is_none()
        && (sh.w(eoff).load(Relaxed) != e || sh.w(m.hdr + M_ROOT).load(Relaxed) != root)
    {
        return Ok(None);
    }
    if !m.alive(sh) {
        return Err(m.dropped());
    }
    let damage = (bad > 0).then(|| {
        let what = format!(
            "map {map:?}: segment {seg:#x}: {bad} damaged entr{} skipped ({}{})",
            if bad == 1 { "y" } else { "ies" },
            said.join("; "),
            if bad > said.len() as u64 { "; ..." } else { "" }
        );
        (seg, what)
    });
    Ok(Some(Step {
        items,
        next,
        damage,
    }))
}
