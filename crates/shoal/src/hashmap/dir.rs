//! The directory: a map's segments, doubling, and the checks of a split's arguments.
use super::*;
use crate::error::Result;
use crate::format::*;
use crate::shared::Shared;
use crate::txn::{Redo, Txn};
use std::sync::atomic::Ordering::*;

/// Doubles the directory of depth g (`root` is the current root; the directory lock is
/// held): copies it twice into the spare directory of depth g+1 and publishes that with
/// one store of the root. The old one is abandoned (readers may still be in it; it is
/// never reused while the map lives). Shared by the variable and the fixed-size maps.
pub(crate) fn double_directory(tx: &Txn, m: &MapRef, root: u64) -> Result<()> {
    let sh = tx.sh;
    let g = root >> 48;
    ensure_spares(tx, m, Some(g + 1))?;
    let nd = sh.w(m.hdr + M_SPARE_DIR).load(Acquire);
    // From the file, and written next: inside it, and not over the directory it copies
    // (which is read whole, so it must be inside the file too).
    let od = root & OFF_MASK;
    let end = sh.file_end();
    let fits = g < MAX_DEPTH
        && nd >= sh.g.chunks_off
        && nd % BUCKET == 0
        && nd.checked_add(16 << g).is_some_and(|e| e <= end)
        && od >= sh.g.chunks_off
        && od % 8 == 0
        && od + (8 << g) <= end
        && (nd + (16 << g) <= od || od + (8 << g) <= nd);
    if !fits {
        return Err(m.bad(
            sh,
            format!(
                "map {}: spare directory {nd:#x} (depth {}) does not fit the file",
                m.id,
                g + 1
            ),
        ));
    }
    let half = 1u64 << g;
    for i in 0..half {
        let e = sh.w(od + 8 * i).load(Acquire);
        sh.w(nd + 8 * i).store(e, Relaxed);
        sh.w(nd + 8 * (i + half)).store(e, Relaxed);
    }
    // On disk, the new directory must be durable before the root points at it.
    sh.persist(nd, 16 << g)?;
    let mut redo = Redo::new();
    redo.push(m.hdr + M_ROOT, make_root(nd, g + 1));
    redo.push(m.hdr + M_SPARE_DIR, 0);
    commit_apply(tx, &mut redo, &[]);
    crate::rt::failpoint!("split.doubled");
    Ok(())
}

/// Checks a dead txn's split intent against the file before recovery acts on it: the
/// two segments inside the file and distinct, the depth below the directory's, the
/// directory itself inside the file. Recovery writes the directory and both segments
/// at these offsets, so a corrupt slot must fail here, not touch memory past the file.
pub(crate) fn check_split_args(sh: &Shared, m: &MapRef, args: &[u64]) -> Result<()> {
    let end = sh.file_end();
    let (seg, s1, d) = (args[A_SEG], args[A_NEW], args[A_DEPTH]);
    let root = sh.w(m.hdr + M_ROOT).load(Acquire);
    let (g, dir) = (root >> 48, root & OFF_MASK);
    let seg_ok = |s: u64| {
        s >= sh.g.chunks_off
            && s % BUCKET == 0
            && s.checked_add(m.seg_size).is_some_and(|e| e <= end)
    };
    let dir_ok = g <= MAX_DEPTH
        && dir >= sh.g.chunks_off
        && dir % 8 == 0
        && dir.checked_add(8 << g).is_some_and(|e| e <= end);
    if !(dir_ok && d < g && seg_ok(seg) && seg_ok(s1) && seg != s1) {
        return Err(sh.corrupt(format!(
            "map {}: a dead txn's split intent (segment {seg:#x}, new {s1:#x}, depth {d}) \
             does not fit its directory (root {root:#x}) or the file",
            m.id
        )));
    }
    Ok(())
}

/// Every distinct segment of the map, in directory order, with its depth and prefix.
pub(crate) fn segments(sh: &Shared, m: &MapRef) -> Result<Vec<(u64, u64)>> {
    let end = sh.file_end();
    let root = sh.w(m.hdr + M_ROOT).load(Acquire);
    let g = root >> 48;
    let dir = root & OFF_MASK;
    if g > MAX_DEPTH || dir < sh.g.chunks_off || dir % 8 != 0 || dir + (8 << g) > end {
        return Err(sh.corrupt(format!("map {}: directory {root:#x} out of the file", m.id)));
    }
    let mut out = Vec::new();
    // In a map of groups (`MF_GROUPS`) any entries may name a segment: every entry is
    // looked at, and each segment listed once.
    let mut seen = std::collections::HashSet::new();
    for j in 0..(1u64 << g) {
        let e = sh.w(dir + 8 * j).load(Acquire);
        let d = entry_depth(e);
        if m.groups && (d != 0 || !seen.insert(entry_seg(e))) {
            if d != 0 {
                return Err(sh.corrupt(format!(
                    "map {}: entry {j} has depth {d} in a map of groups",
                    m.id
                )));
            }
            continue;
        }
        if d > g {
            return Err(sh.corrupt(format!(
                "map {}: entry {j} has depth {d} > global {g}",
                m.id
            )));
        }
        if m.groups || j < (1 << d) {
            // Callers lock and read the segments: never trust an offset from the file
            // (`end` may be stale: the file may have grown since; look again first).
            let seg = entry_seg(e);
            if seg < sh.g.chunks_off
                || seg % BUCKET != 0
                || (seg + m.seg_size > end && seg + m.seg_size > sh.file_end())
            {
                return Err(sh.corrupt(format!(
                    "map {}: directory entry {j} = {e:#x} out of the file",
                    m.id
                )));
            }
            out.push((seg, d));
        }
    }
    Ok(out)
}

/// Whether segment `seg`'s own depth and prefix (its line 0) are those of the directory
/// entry that led to it from hash `h`: depth `d`, prefix `h`'s low `d` bits.
///
/// Iteration relies on it to visit each segment once. In a healthy map they differ only
/// while a split publishes (entries first, then depths), under the segment's lock. In a
/// corrupt one, a directory whose 2^g entries all named one segment at depth g made
/// iteration copy that segment 2^g times, one interval at a time (fuzz, open_check: 17 s
/// for one 500 KB input); checked, each segment is copied at most once.
pub(crate) fn segment_matches(sh: &Shared, seg: u64, d: u64, h: u64) -> bool {
    debug_assert!(d <= MAX_DEPTH);
    sh.w(seg + S_DEPTH).load(Acquire) == d
        && sh.w(seg + S_PREFIX).load(Acquire) == h & ((1u64 << d) - 1)
}

/// The corruption [`segment_matches`] found, found under the segment's lock.
pub(crate) fn segment_mismatch(sh: &Shared, id: u64, seg: u64, d: u64, h: u64) -> String {
    format!(
        "map {id}: segment {seg:#x} has depth {} prefix {:#x}, the directory says {d} / {:#x}",
        sh.w(seg + S_DEPTH).load(Acquire),
        sh.w(seg + S_PREFIX).load(Acquire),
        h & ((1u64 << d) - 1)
    )
}
