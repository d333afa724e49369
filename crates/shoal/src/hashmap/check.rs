//! What the checker verifies of a map's index space, for both hash-map kinds.

use super::*;
use crate::format::*;
use crate::object::CheckCtx;
use std::sync::atomic::Ordering::*;

/// A map's index space as writes will use it: the arena its next segments are carved
/// from (`M_ARENA`, `M_ARENA_BUMP`), and the spare segment and directory the next split
/// and doubling write into. All come from the file and are written through, so a store
/// that checks clean must have them right: the arena an index run of this map with its
/// bump inside it, the spares whole inside index runs, and nothing the map uses (its
/// header, directory, segments, spares) at or past the bump, where the next segment would
/// be carved over it. (A fuzzed header's arena lay past the file, and the store checked
/// clean: the next put's spare segment crashed it.)
pub(crate) fn check_index_space(ck: &mut CheckCtx<'_>, m: &MapRef) {
    let sh = ck.sh;
    let (g, id) = (&sh.g, m.id);
    let cs = g.chunk_size();
    let word = |o: u64| sh.w(m.hdr + o).load(Acquire);
    let mut used: Vec<(u64, u64, &str)> = vec![(m.hdr, map_header_size(g.n_txn), "header")];
    // The recorded types: two codes and nothing else in their word, a tag only for a
    // `user` type (code 7).
    let types = word(M_TYPES);
    let (kc, vc) = (types & 0xff, (types >> 8) & 0xff);
    if types >> 16 != 0 || (kc != 7 && word(M_KEY_TAG) != 0) || (vc != 7 && word(M_VALUE_TAG) != 0)
    {
        ck.bad(format!(
            "map {id}: its type words ({types:#x}, tags {:#x} and {:#x}) are not a key and a \
             value type",
            word(M_KEY_TAG),
            word(M_VALUE_TAG)
        ));
    }
    let root = word(M_ROOT);
    let (rg, dir) = (root >> 48, root & OFF_MASK);
    // A directory out of the file or misaligned is reported by the caller; only a sound
    // one is read here (an unaligned one made this read a misaligned word: fuzz).
    if rg <= MAX_DEPTH && dir >= g.chunks_off && dir % 8 == 0 && dir + (8 << rg) <= sh.file_end() {
        used.push((dir, 8 << rg, "directory"));
        for j in 0..1u64 << rg {
            let e = sh.w(dir + 8 * j).load(Acquire);
            used.push((entry_seg(e), m.seg_size, "segment"));
        }
    }
    let spare = word(M_SPARE_SEG);
    if spare != 0 {
        // Offsets are below 2^48; a larger one would overflow `in_index`'s sums.
        if spare % BUCKET != 0 || spare > OFF_MASK || !ck.in_index(spare, m.seg_size) {
            ck.bad(format!(
                "map {id}: spare segment {spare:#x} is not inside an index chunk"
            ));
        }
        used.push((spare, m.seg_size, "spare segment"));
    }
    let (sdir, sg) = (word(M_SPARE_DIR), word(M_SPARE_DIR_G));
    if sdir != 0 {
        if sg > MAX_DEPTH || sdir % 8 != 0 || sdir > OFF_MASK || !ck.in_index(sdir, 8 << sg) {
            ck.bad(format!(
                "map {id}: spare directory {sdir:#x} (depth {sg}) is not inside an index chunk"
            ));
        } else {
            used.push((sdir, 8 << sg, "spare directory"));
        }
    }
    let (arena, bump) = (word(M_ARENA), word(M_ARENA_BUMP));
    if arena == 0 {
        return;
    }
    let top = match ck.runs.get(&arena) {
        Some(&(CK_INDEX, run)) if sh.w(arena + K_OWNER).load(Acquire) == id => {
            arena + run.clamp(1, arena_max_chunks(sh, m)) * cs
        }
        _ => {
            ck.bad(format!(
                "map {id}: index arena {arena:#x} is not an index run of the map"
            ));
            return;
        }
    };
    if bump < arena + CHUNK_HDR || bump > top || bump % BUCKET != 0 {
        ck.bad(format!(
            "map {id}: index arena bump {bump:#x} is outside its arena {arena:#x}..{top:#x}"
        ));
        return;
    }
    for (off, len, what) in used {
        if off < top && off.saturating_add(len) > bump && off + len > arena {
            ck.bad(format!(
                "map {id}: its {what} at {off:#x} lies past its arena's bump {bump:#x} (the next segment would be carved over it)"
            ));
        }
    }
}

/// Repair's half of the type words' check: keeps the two codes, clears the bits above
/// them and a tag whose type is not `user`.
pub(crate) fn repair_type_words(sh: &crate::shared::Shared, hdr: u64) {
    let types = sh.w(hdr + M_TYPES).load(Acquire);
    sh.w(hdr + M_TYPES).store(types & 0xffff, Release);
    for (code, tag) in [
        (types & 0xff, M_KEY_TAG),
        ((types >> 8) & 0xff, M_VALUE_TAG),
    ] {
        if code != 7 {
            sh.w(hdr + tag).store(0, Release);
        }
    }
}
