//! The checker's verification of every invariant of a fixed-size map.

use super::*;
use crate::shared::Shared;

/// The checker's part for one fixed map: returns (entries, segments) and pushes problems.
pub(crate) fn check_map(
    sh: &Shared,
    id: u64,
    in_index: &dyn Fn(u64, u64) -> bool,
    problems: &mut Vec<String>,
) -> (u64, u64) {
    let f = match fixed_ref_unchecked(sh, id) {
        Ok(f) => f,
        Err(e) => {
            problems.push(format!("map {id}: {e}"));
            return (0, 0);
        }
    };
    let m = &f.m;
    let end = sh.file_end();
    let lock_ok = |off: u64, what: &str, problems: &mut Vec<String>| {
        let v = sh.w(off).load(Acquire) & (WAITERS - 1);
        if v != 0 && !sh.txn_alive(v - 1) {
            problems.push(format!(
                "map {id}: {what} lock at {off:#x} held by dead txn {}",
                v - 1
            ));
        }
    };
    lock_ok(m.hdr + M_DIR_LOCK, "directory", problems);
    let root = sh.w(m.hdr + M_ROOT).load(Acquire);
    let (gd, dir) = (root >> 48, root & OFF_MASK);
    if gd > MAX_DEPTH || dir < sh.g.chunks_off || dir % 8 != 0 || dir + (8 << gd) > end {
        problems.push(format!("map {id}: directory {root:#x} out of the file"));
        return (0, 0);
    }
    if !in_index(dir, 8 << gd) {
        problems.push(format!(
            "map {id}: directory {dir:#x} is not inside an index chunk"
        ));
    }
    let (mut count, mut segs) = (0u64, 0u64);
    let mut keys: std::collections::HashSet<Vec<u8>> = std::collections::HashSet::new();
    let mut key = vec![0u8; f.geo.key_size as usize];
    // A map of groups: how many entries name each segment (each is checked once, at
    // its first entry).
    let mut named: std::collections::HashMap<u64, u64> = std::collections::HashMap::new();
    if m.groups {
        for j in 0..(1u64 << gd) {
            *named
                .entry(entry_seg(sh.w(dir + 8 * j).load(Acquire)))
                .or_default() += 1;
        }
    }
    let mut visited = std::collections::HashSet::new();
    for j in 0..(1u64 << gd) {
        let e = sh.w(dir + 8 * j).load(Acquire);
        let (seg, d) = (entry_seg(e), entry_depth(e));
        if d > gd || (m.groups && d != 0) {
            problems.push(format!("map {id}: directory entry {j} depth {d} > {gd}"));
            continue;
        }
        let first = j & ((1 << d) - 1);
        if m.groups && !visited.insert(seg) {
            continue;
        }
        if !m.groups && j != first {
            if sh.w(dir + 8 * first).load(Acquire) != e {
                problems.push(format!(
                    "map {id}: directory entries {first} and {j} disagree"
                ));
            }
            continue;
        }
        segs += 1;
        if seg % BUCKET != 0 || !in_index(seg, m.seg_size) {
            problems.push(format!(
                "map {id}: segment {seg:#x} is not inside an index chunk"
            ));
            continue;
        }
        // An adder count in the lock word's high half may be left by killed adders: it
        // is harmless (the next writer of the segment recognises and clears it).
        lock_ok(seg + S_LOCK, "segment", problems);
        if m.groups {
            if sh.w(seg + S_MARK).load(Acquire) != group_segment_mark(id) {
                problems.push(format!(
                    "map {id}: segment {seg:#x} has mark {:#x}, not the map's segment mark",
                    sh.w(seg + S_MARK).load(Acquire)
                ));
            }
            let n = named.get(&seg).copied().unwrap_or(0);
            if groups_of(sh, seg, gd) != Some(n) {
                problems.push(format!(
                    "map {id}: segment {seg:#x} group count {:#x}, the directory names it {n} times",
                    sh.w(seg + S_GROUPS).load(Acquire)
                ));
            }
        } else if sh.w(seg + S_DEPTH).load(Acquire) != d
            || sh.w(seg + S_PREFIX).load(Acquire) != first
        {
            problems.push(format!(
                "map {id}: segment {seg:#x} depth/prefix disagree with the directory"
            ));
        }
        let mut over = vec![0u64; m.n_main as usize];
        for b in 0..m.n_main + m.n_stash {
            let bo = f.bucket(seg, b);
            let hw = sh.w(bo).load(Acquire);
            if fh_seq(hw) & 1 == 1 {
                problems.push(format!("map {id}: bucket {bo:#x} left mid-write (odd seq)"));
            }
            if fh_bits(hw) & !f.all_bits() != 0 {
                problems.push(format!(
                    "map {id}: bucket {bo:#x} bitmap {:#x} names cells past its {}",
                    fh_bits(hw),
                    f.geo.cells
                ));
            }
            if b >= m.n_main && fh_over(hw) != 0 {
                problems.push(format!(
                    "map {id}: stash bucket {bo:#x} has an overflow count"
                ));
            }
            let mut bits = fh_bits(hw) & f.all_bits();
            while bits != 0 {
                let i = bits.trailing_zeros() as u64;
                bits &= bits - 1;
                sh.r.read_bytes(f.cell_off(bo, i), &mut key);
                let h = hash(sh.g.seed, &key);
                let elsewhere = if m.groups {
                    entry_seg(sh.w(dir + 8 * (h & ((1 << gd) - 1))).load(Acquire)) != seg
                } else {
                    h & ((1 << d) - 1) != first
                };
                if elsewhere {
                    problems.push(format!(
                        "map {id}: cell {i} of bucket {bo:#x} hashes outside its segment"
                    ));
                }
                let home = home_bucket(h, m.n_main);
                if !f.may_hold(home, b) {
                    problems.push(format!(
                        "map {id}: cell {i} of bucket {b} of {seg:#x}: its home {home} may not overflow there"
                    ));
                }
                if f.geo.tags {
                    let mut tag = [0u8; 1];
                    sh.r.read_bytes(bo + 8 + i, &mut tag);
                    if tag[0] as u64 != cell_tag(h) {
                        problems.push(format!(
                            "map {id}: cell {i} of bucket {bo:#x} has tag {:#04x}, its key's is {:#04x} (lookups would miss it)",
                            tag[0],
                            cell_tag(h)
                        ));
                    }
                }
                if b != home {
                    over[home as usize] += 1;
                }
                if !keys.insert(key.clone()) {
                    problems.push(format!(
                        "map {id}: a key is present twice (cell {i} of {bo:#x})"
                    ));
                }
                count += 1;
            }
        }
        for b in 0..m.n_main {
            let ov = fh_over(sh.w(f.bucket(seg, b)).load(Acquire));
            if ov != over[b as usize].min(0xff) {
                problems.push(format!(
                    "map {id}: bucket {b} of {seg:#x} has overflow {ov}, stash holds {}",
                    over[b as usize]
                ));
            }
        }
    }
    if m.groups {
        let n = sh.w(m.hdr + M_N_SEGS).load(Acquire);
        if n != segs {
            problems.push(format!(
                "map {id}: segment count {n}, the directory names {segs}"
            ));
        }
        let open = sh.w(m.hdr + M_OPEN_SEG).load(Acquire);
        if open != 0 && !named.contains_key(&open) {
            problems.push(format!(
                "map {id}: open segment {open:#x} is not one of the map's"
            ));
        }
    }
    let (mut c_count, mut c_bytes) = (0u64, 0u64);
    for t in 0..sh.g.n_txn {
        let c = m.hdr + M_COUNTERS + MC_SIZE * t;
        c_count = c_count.wrapping_add(sh.w(c + MC_COUNT).load(Acquire));
        c_bytes = c_bytes.wrapping_add(sh.w(c + MC_BYTES).load(Acquire));
    }
    if c_count != count {
        problems.push(format!(
            "map {id}: counters say {} entries, the cells hold {count}",
            c_count as i64
        ));
    }
    if c_bytes != 0 {
        problems.push(format!(
            "map {id}: a fixed map's live byte counters sum to {c_bytes}, not 0"
        ));
    }
    (count, segs)
}
