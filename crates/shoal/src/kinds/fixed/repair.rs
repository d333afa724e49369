//! Repair: the salvage of cells from a damaged file, and the lossless rebuild of counts and seqs.

use super::*;
use crate::error::Result;
use crate::hashmap::{self};
use crate::shared::Shared;

/// The salvage of a truncated file's fixed map (`store::salvage`): calls `each(key, value)`
/// on every cell that lies wholly below `bound` (the file's real size), in a bucket whose
/// header survived, and that the directory leads its key to (cells elsewhere are
/// leftovers no read would find), each key once; `lost(what)` on what could not be read
/// (a directory entry or segment lost or damaged, cells cut by the bound). The directory
/// must lie below `bound` (checked by the caller). Reads nothing at or past `bound`.
pub(crate) fn salvage_cells(
    sh: &Shared,
    f: &FixedRef,
    bound: u64,
    mut each: impl FnMut(&[u8], &[u8]) -> Result<()>,
    mut lost: impl FnMut(String),
) -> Result<()> {
    let m = &f.m;
    let root = sh.w(m.hdr + M_ROOT).load(Acquire);
    let (gd, dir) = (root >> 48, root & OFF_MASK);
    let mut keys = std::collections::HashSet::new();
    let mut visited = std::collections::HashSet::new();
    let (mut key, mut value) = (
        vec![0u8; f.geo.key_size as usize],
        vec![0u8; f.geo.value_size as usize],
    );
    for j in 0..(1u64 << gd) {
        let e = sh.w(dir + 8 * j).load(Acquire);
        let (seg, d) = (entry_seg(e), entry_depth(e));
        if (m.groups && d != 0) || d > gd {
            lost(format!(
                "directory entry {j} is damaged (depth {d}): its keys are lost"
            ));
            continue;
        }
        if (m.groups && !visited.insert(seg)) || (!m.groups && j >= 1 << d) {
            continue;
        }
        if seg < sh.g.chunks_off || seg % BUCKET != 0 {
            lost(format!(
                "directory entry {j} names {seg:#x}, which is no segment: its keys are lost"
            ));
            continue;
        }
        if seg >= bound {
            lost(format!(
                "segment {seg:#x} lies in the missing part of the file: its entries are lost"
            ));
            continue;
        }
        if seg + m.seg_size > bound {
            lost(format!("segment {seg:#x} runs into the missing part of the file: the entries there are lost"));
        }
        let prefix = j & ((1 << d) - 1);
        for b in 0..m.n_main + m.n_stash {
            let bo = f.bucket(seg, b);
            if bo + 8 > bound {
                break;
            }
            let mut bits = fh_bits(sh.w(bo).load(Acquire)) & f.all_bits();
            while bits != 0 {
                let i = bits.trailing_zeros() as u64;
                bits &= bits - 1;
                let co = f.cell_off(bo, i);
                if co + f.geo.cell > bound {
                    lost(format!(
                        "cell {i} of bucket {bo:#x} runs into the missing part of the file"
                    ));
                    continue;
                }
                sh.r.read_bytes(co, &mut key);
                let h = hash(sh.g.seed, &key);
                let here = if m.groups {
                    entry_seg(sh.w(dir + 8 * (h & ((1 << gd) - 1))).load(Acquire)) == seg
                } else {
                    h & ((1 << d) - 1) == prefix
                };
                if here && keys.insert(key.clone()) {
                    sh.r.read_bytes(co + f.geo.kstride, &mut value);
                    each(&key, &value)?;
                }
            }
        }
    }
    Ok(())
}

/// The lossless repairs of a fixed map (alone, after an unclean shutdown): locks and
/// adder counts cleared, odd seqs made even, overflow counts and the entry counter
/// rebuilt from the cells. (Cells have no checksums: a value torn by an OS crash between
/// two flushes is not detected.)
pub(crate) fn rebuild(sh: &Shared, id: u64) -> Result<()> {
    let f = fixed_ref_unchecked(sh, id)?;
    sh.w(f.m.hdr + M_DIR_LOCK).store(0, Release);
    hashmap::repair_type_words(sh, f.m.hdr);
    let mut count = 0u64;
    let root = sh.w(f.m.hdr + M_ROOT).load(Acquire);
    for (seg, _) in hashmap::segments(sh, &f.m)? {
        sh.w(seg + S_LOCK).store(0, Release);
        if f.m.groups {
            drop_strays(sh, &f, seg, root);
        }
        for b in 0..f.m.n_main + f.m.n_stash {
            let bo = f.bucket(seg, b);
            let h = sh.w(bo).load(Acquire);
            let bits = fh_bits(h) & f.all_bits();
            let over = if b < f.m.n_main { fh_over(h) } else { 0 };
            sh.w(bo)
                .store(fh((fh_seq(h) + 1) & !1, over, bits), Release);
            count += bits.count_ones() as u64;
            if f.geo.tags {
                // A tag is written before its cell's bit is set, but an OS crash may keep
                // the bit and lose the tag's page: tags are rebuilt from the keys.
                let mut key = vec![0u8; f.geo.key_size as usize];
                let mut rest = bits;
                while rest != 0 {
                    let i = rest.trailing_zeros() as u64;
                    rest &= rest - 1;
                    sh.r.read_bytes(f.cell_off(bo, i), &mut key);
                    f.set_tag(sh, bo, i, hash(sh.g.seed, &key));
                }
            }
        }
        let counts = overflow_counts(sh, &f, seg);
        set_overflow_counts(sh, &f, seg, &counts);
    }
    if f.m.groups {
        // The group and segment counts, from the directory (a move interrupted by an OS
        // crash may have reached the file only in part).
        let root = sh.w(f.m.hdr + M_ROOT).load(Acquire);
        let (g, dir) = (root >> 48, root & OFF_MASK);
        let mut named: std::collections::HashMap<u64, u64> = std::collections::HashMap::new();
        for j in 0..(1u64 << g) {
            *named
                .entry(entry_seg(sh.w(dir + 8 * j).load(Acquire)))
                .or_default() += 1;
        }
        for (&seg, &n) in &named {
            sh.w(seg + S_GROUPS).store(group_count(n, g), Release);
            sh.w(seg + S_MARK).store(group_segment_mark(id), Release);
        }
        sh.w(f.m.hdr + M_N_SEGS).store(named.len() as u64, Release);
        let open = sh.w(f.m.hdr + M_OPEN_SEG).load(Acquire);
        if !named.contains_key(&open) {
            sh.w(f.m.hdr + M_OPEN_SEG).store(0, Release);
        }
    }
    for t in 0..sh.g.n_txn {
        let c = f.m.hdr + M_COUNTERS + MC_SIZE * t;
        sh.w(c + MC_COUNT)
            .store(if t == 0 { count } else { 0 }, Release);
        sh.w(c + MC_BYTES).store(0, Release);
    }
    Ok(())
}

// ---------------------------------------------------------------------------------------
// The public type.
