//! The checker: verifies every invariant of a store file and reports each violation.
//!
//! Run it on a quiet store (no writes in flight): counters are per-thread deltas that a
//! running write may have half-updated. It first recovers dead processes' leftovers, as
//! any opener would, then verifies:
//! * chunks tile the file; the free list holds exactly the free runs, with no cycle;
//!   the data and free byte totals in the header add up;
//! * each map's directory is well formed (entries of a segment agree, depths and prefixes
//!   match), every segment lies in one of the map's index chunks;
//! * every bucket's seq is even and its overflow count exact; every slot points inside a
//!   data chunk, below its used mark, at a complete record of this map whose key hashes to
//!   that segment, bucket (or stash) and tag; no record is referenced twice; no key twice;
//! * entry and byte counters equal what the index holds;
//! * fixed-size maps (`fixed.rs`): the same directory checks; every occupied cell (bitmap
//!   bit set) holds a key of its segment and bucket, no key twice, no bit past the
//!   bucket's cells, overflow counts and entry counters exact;
//! * no lock is held by a dead process, no intent is left unapplied.

use crate::error::Result;
use crate::format::*;
use crate::kinds::varmap::{map_ref_unchecked, read_record_header_in};
use crate::shared::Shared;
use std::collections::{HashMap, HashSet};
use std::sync::atomic::Ordering::*;

/// What [`Store::check`](crate::Store::check) found.
#[derive(Clone, Debug, Default)]
pub struct Report {
    /// Every violation, each saying what and where. Empty for a sound store.
    pub problems: Vec<String>,
    /// Maps checked.
    pub maps: u64,
    /// Entries checked, over all maps.
    pub entries: u64,
    /// Index segments checked.
    pub segments: u64,
    /// Chunks walked.
    pub chunks: u64,
}

impl Report {
    /// True when no problem was found.
    pub fn is_ok(&self) -> bool {
        self.problems.is_empty()
    }
}

impl std::fmt::Display for Report {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        writeln!(
            f,
            "{} maps, {} entries, {} segments, {} chunks",
            self.maps, self.entries, self.segments, self.chunks
        )?;
        if self.problems.is_empty() {
            write!(f, "ok")
        } else {
            for p in &self.problems {
                writeln!(f, "problem: {p}")?;
            }
            write!(f, "{} problems", self.problems.len())
        }
    }
}

const MAX_PROBLEMS: usize = 1000;

struct Ck<'a> {
    sh: &'a Shared,
    r: Report,
}

impl Ck<'_> {
    fn bad(&mut self, what: String) {
        if self.r.problems.len() < MAX_PROBLEMS {
            self.r.problems.push(what);
        }
    }

    fn lock_ok(&mut self, off: u64, what: &str) {
        let v = self.sh.w(off).load(Acquire) & (WAITERS - 1);
        if v != 0 && !self.sh.txn_alive(v - 1) {
            self.bad(format!(
                "{what} lock at {off:#x} held by dead txn {}",
                v - 1
            ));
        }
    }
}

/// Walks data chunk `c`'s records as the cleaner walks them: from its first record (or
/// `from`, a record start) up to `used`, stopping at the first bytes that are no record. Calls `f` on each record's
/// offset and returns where the walk stopped (`used` exactly, in a sound chunk: its
/// records tile it).
pub(crate) fn walk_records(
    sh: &Shared,
    c: u64,
    from: u64,
    used: u64,
    mut f: impl FnMut(u64),
) -> u64 {
    let mut pos = from.max(c + CHUNK_HDR);
    let used = used.min(c + sh.g.chunk_size());
    while pos < used {
        let Some((_, k, v, hl)) = read_record_header_in(sh, pos, used) else {
            break;
        };
        f(pos);
        pos += hl + k + v + sh.g.trailer;
    }
    pos
}

/// The offsets where [`walk_records`] finds records in chunk `c`.
fn record_walk(sh: &Shared, c: u64, used: u64) -> HashSet<u64> {
    let mut starts = HashSet::new();
    walk_records(sh, c, c + CHUNK_HDR, used, |pos| {
        starts.insert(pos);
    });
    starts
}

/// A map's index space as writes will use it: the arena its next segments are carved
/// from (`M_ARENA`, `M_ARENA_BUMP`), and the spare segment and directory the next split
/// and doubling write into. All come from the file and are written through, so a store
/// that checks clean must have them right: the arena an index run of this map with its
/// bump inside it, the spares whole inside index runs, and nothing the map uses (its
/// header, directory, segments, spares) at or past the bump, where the next segment would
/// be carved over it. (A fuzzed header's arena lay past the file, and the store checked
/// clean: the next put's spare segment crashed it.)
fn check_index_space(
    sh: &Shared,
    m: &crate::hashmap::MapRef,
    kinds: &HashMap<u64, (u64, u64)>,
    in_index: &dyn Fn(u64, u64) -> bool,
    problems: &mut Vec<String>,
) {
    let (g, id) = (&sh.g, m.id);
    let cs = g.chunk_size();
    let word = |o: u64| sh.w(m.hdr + o).load(Acquire);
    let mut used: Vec<(u64, u64, &str)> = vec![(m.hdr, map_header_size(g.n_txn), "header")];
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
        if spare % BUCKET != 0 || spare > OFF_MASK || !in_index(spare, m.seg_size) {
            problems.push(format!(
                "map {id}: spare segment {spare:#x} is not inside an index chunk"
            ));
        }
        used.push((spare, m.seg_size, "spare segment"));
    }
    let (sdir, sg) = (word(M_SPARE_DIR), word(M_SPARE_DIR_G));
    if sdir != 0 {
        if sg > MAX_DEPTH || sdir % 8 != 0 || sdir > OFF_MASK || !in_index(sdir, 8 << sg) {
            problems.push(format!(
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
    let top = match kinds.get(&arena) {
        Some(&(CK_INDEX, run)) if sh.w(arena + K_OWNER).load(Acquire) == id => {
            arena + run.clamp(1, crate::hashmap::arena_max_chunks(sh, m)) * cs
        }
        _ => {
            problems.push(format!(
                "map {id}: index arena {arena:#x} is not an index run of the map"
            ));
            return;
        }
    };
    if bump < arena + CHUNK_HDR || bump > top || bump % BUCKET != 0 {
        problems.push(format!(
            "map {id}: index arena bump {bump:#x} is outside its arena {arena:#x}..{top:#x}"
        ));
        return;
    }
    for (off, len, what) in used {
        if off < top && off.saturating_add(len) > bump && off + len > arena {
            problems.push(format!(
                "map {id}: its {what} at {off:#x} lies past its arena's bump {bump:#x} (the next segment would be carved over it)"
            ));
        }
    }
}

pub(crate) fn check(sh: &Shared) -> Result<Report> {
    sh.ensure_registered()?;
    let mut ck = Ck {
        sh,
        r: Report::default(),
    };
    if sh.read_only {
        // What writers that died left half done is recovered only by a process that can
        // write the store; until then the words it covers may not add up.
        for t in 0..sh.g.n_txn {
            let b = sh.g.txn_slot(t);
            if sh.w(b + T_OWNER).load(Acquire) != 0
                && sh.w(b + T_INTENT).load(Acquire) != 0
                && !sh.txn_alive(t)
            {
                ck.bad(format!(
                    "txn slot {t}: its thread died mid-write and is not recovered yet (open \
                     the store for writing to recover it)"
                ));
            }
        }
    } else {
        crate::txn::reclaim_dead(sh)?;
    }
    let g = sh.g;
    let cs = g.chunk_size();
    let end = sh.file_end();
    // Chunks.
    let mut kinds: HashMap<u64, (u64, u64)> = HashMap::new(); // run start -> (kind, run)
    let (mut data, mut free, mut slack) = (0u64, 0u64, 0u64);
    let mut c = g.chunks_off;
    while c < end {
        let kind = sh.w(c + K_KIND).load(Acquire);
        let run = sh.w(c + K_RUN).load(Acquire);
        ck.r.chunks += 1;
        if run == 0 || run > (end - c) / cs {
            ck.bad(format!(
                "chunk {c:#x}: run of {run} chunks does not fit the file"
            ));
            break;
        }
        if kind == CK_LARGE {
            slack += crate::alloc::large_slack(sh, c, run);
        }
        match kind {
            CK_DATA | CK_SEALED | CK_LARGE => data += run * cs,
            CK_FREE => free += run * cs,
            CK_INDEX => {}
            CK_ZERO => ck.bad(format!(
                "chunk {c:#x}: never formatted (leaked by an interrupted growth)"
            )),
            _ => ck.bad(format!(
                "chunk {c:#x}: unknown kind {kind} (leaked or corrupt)"
            )),
        }
        if kind == CK_DATA {
            let t = sh.w(c + K_OWNER).load(Acquire);
            if t >= g.n_txn || sh.w(g.txn_slot(t) + T_DATA_CHUNK).load(Acquire) != c {
                ck.bad(format!(
                    "chunk {c:#x}: active data chunk not owned by txn slot {t}"
                ));
            } else {
                // The next thread to claim the slot would forget such a chunk (see
                // `scrub_claimed_txn`), leaving it orphaned: it is unsound already.
                let bump = sh.w(g.txn_slot(t) + T_BUMP).load(Acquire);
                if !(c + CHUNK_HDR..=c + cs).contains(&bump) {
                    ck.bad(format!(
                        "chunk {c:#x}: txn slot {t}'s bump {bump:#x} is outside its data chunk"
                    ));
                }
            }
        }
        // The cleaner finds a sealed chunk's records by walking them: bytes that stop
        // the walk short hide every record after them, which would be freed with the
        // chunk if live. A sealed chunk may end in such bytes (repair seals a data chunk
        // torn across a refill, garbage tail and all; the cleaner stops there), so for
        // it only the live records are checked (below). An active data chunk must tile
        // up to its bump: the next record appended behind a broken walk would be lost
        // (corrupt dead records are otherwise invisible: no slot points at them).
        let used = match kind {
            CK_DATA => {
                let t = sh.w(c + K_OWNER).load(Acquire);
                (t < g.n_txn).then(|| sh.w(g.txn_slot(t) + T_BUMP).load(Acquire))
            }
            _ => None,
        };
        if let Some(used) = used.filter(|u| (c + CHUNK_HDR..=c + cs).contains(u)) {
            let stop = walk_records(sh, c, c + CHUNK_HDR, used, |_| {});
            if stop != used {
                ck.bad(format!(
                    "chunk {c:#x}: its records do not tile it: a walk from its start stops at {stop:#x}, its records end at {used:#x}"
                ));
            }
        }
        kinds.insert(c, (kind, run));
        c += run * cs;
    }
    if data != sh.w(H_DATA_BYTES).load(Acquire) {
        ck.bad(format!(
            "header: data bytes {} but data chunks hold {data}",
            sh.w(H_DATA_BYTES).load(Acquire)
        ));
    }
    if slack != sh.w(H_LARGE_SLACK).load(Acquire) {
        ck.bad(format!(
            "header: large slack {} but large runs hold {slack} bytes past their records",
            sh.w(H_LARGE_SLACK).load(Acquire)
        ));
    }
    if free != sh.w(H_FREE_BYTES).load(Acquire) {
        ck.bad(format!(
            "header: free bytes {} but free runs hold {free}",
            sh.w(H_FREE_BYTES).load(Acquire)
        ));
    }
    // The cleaner reads a chunk header where its cursor points: a merge of free runs
    // must have moved it off the chunks it absorbed.
    let scan = sh.w(H_CLEAN_SCAN).load(Acquire);
    if scan != 0 && scan < end && !kinds.contains_key(&scan) {
        ck.bad(format!(
            "header: the cleaner's scan cursor {scan:#x} is not the start of a run"
        ));
    }
    let mut on_list = HashSet::new();
    let mut f = sh.w(H_FREE_HEAD).load(Acquire);
    while f != 0 {
        if !on_list.insert(f) {
            ck.bad(format!("free list: cycle at {f:#x}"));
            break;
        }
        match kinds.get(&f) {
            Some((CK_FREE, _)) => {}
            _ => {
                ck.bad(format!("free list: {f:#x} is not a free run"));
                break;
            }
        }
        f = sh.w(f + K_NEXT).load(Acquire);
    }
    for (c, (k, _)) in &kinds {
        if *k == CK_FREE && !on_list.contains(c) {
            ck.bad(format!("free run {c:#x} is not on the free list (leaked)"));
        }
    }
    // Global locks and intents.
    ck.lock_ok(H_ALLOC_LOCK, "alloc");
    ck.lock_ok(H_CATALOG_LOCK, "catalog");
    // Each cleaning lane: its lock, and a victim that is a sealed chunk no other lane
    // names (two lanes cleaning one chunk would both free it).
    let mut victims = HashSet::new();
    for i in 0..g.clean_lanes {
        let (lock, victim, _) = lane(i);
        ck.lock_ok(lock, if i == 0 { "cleaner" } else { "cleaning lane" });
        let v = sh.w(victim).load(Acquire);
        if v == 0 {
            continue;
        }
        if !matches!(kinds.get(&v), Some((CK_SEALED, _))) {
            ck.bad(format!(
                "cleaning lane {i}: its victim {v:#x} is not a sealed chunk"
            ));
        }
        if !victims.insert(v) {
            ck.bad(format!(
                "cleaning lane {i}: its victim {v:#x} is another lane's too"
            ));
        }
    }
    for t in 0..g.n_txn {
        let b = g.txn_slot(t);
        if sh.w(b + T_INTENT).load(Acquire) != 0 && !sh.txn_alive(t) {
            ck.bad(format!(
                "txn slot {t}: intent of a dead thread left unapplied"
            ));
        }
    }
    // Which offsets may records have: map each data chunk to its used end.
    let used_end = |off: u64| -> Option<u64> {
        if off < g.chunks_off || off >= end {
            return None;
        }
        // Records live in the first chunk of a run.
        let c = g.chunk_of(off);
        let (kind, run) = kinds.get(&c)?;
        let used = match *kind {
            CK_SEALED | CK_LARGE => sh.w(c + K_USED).load(Acquire),
            CK_DATA => {
                let t = sh.w(c + K_OWNER).load(Acquire);
                sh.w(g.txn_slot(t.min(g.n_txn - 1)) + T_BUMP).load(Acquire)
            }
            _ => return None,
        };
        // The mark comes from the file, and records are read below it: never past the
        // run or the file (a used mark past the file end was a SIGBUS here; fuzz,
        // open_check). A mark out of its chunk is reported with the chunk.
        let run_end = c.saturating_add((*run).max(1).saturating_mul(g.chunk_size()));
        Some(used.min(run_end).min(end))
    };
    let mut seen_records: HashSet<u64> = HashSet::new();
    // Per data chunk, the record starts its walk reaches (filled as slots point there).
    let mut walks: HashMap<u64, HashSet<u64>> = HashMap::new();
    for id in 0..g.n_catalog {
        let ce = g.cat_entry(id);
        let st = sh.w(ce + C_STATE).load(Acquire) & 0xff;
        if st == CAT_FREE {
            continue;
        }
        if st != CAT_LIVE {
            ck.bad(format!(
                "catalog entry {id}: state {st} (drop not finished)"
            ));
            continue;
        }
        ck.r.maps += 1;
        if crate::kinds::fixed::is_fixed(sh, id) {
            let in_index = |off: u64, len: u64| -> bool {
                if off < g.chunks_off {
                    return false;
                }
                let c = g.chunk_of(off);
                kinds.iter().any(|(s, (k, r))| {
                    *k == CK_INDEX && off >= *s && off + len <= s + r * cs && (*s == c || *r > 1)
                })
            };
            let mut problems = Vec::new();
            let (n, segs) = crate::kinds::fixed::check_map(sh, id, &in_index, &mut problems);
            if let Ok(f) = crate::kinds::fixed::fixed_ref_unchecked(sh, id) {
                check_index_space(sh, &f.m, &kinds, &in_index, &mut problems);
            }
            for p in problems {
                ck.bad(p);
            }
            ck.r.entries += n;
            ck.r.segments += segs;
            continue;
        }
        let m = match map_ref_unchecked(sh, id) {
            Ok(m) => m,
            Err(e) => {
                ck.bad(format!("map {id}: {e}"));
                continue;
            }
        };
        ck.lock_ok(m.hdr + M_DIR_LOCK, "directory");
        let root = sh.w(m.hdr + M_ROOT).load(Acquire);
        let (gd, dir) = (root >> 48, root & OFF_MASK);
        if gd > MAX_DEPTH || dir < g.chunks_off || dir % 8 != 0 || dir + (8 << gd) > end {
            ck.bad(format!("map {id}: directory {root:#x} out of the file"));
            continue;
        }
        let in_index = |off: u64, len: u64| -> bool {
            let c = if off >= g.chunks_off {
                g.chunk_of(off)
            } else {
                return false;
            };
            // A directory may span a multi-chunk run; segments lie in one chunk.
            kinds.iter().any(|(s, (k, r))| {
                *k == CK_INDEX && off >= *s && off + len <= s + r * cs && (*s == c || *r > 1)
            })
        };
        let mut problems = Vec::new();
        check_index_space(sh, &m, &kinds, &in_index, &mut problems);
        for p in problems {
            ck.bad(p);
        }
        if !in_index(dir, 8 << gd) {
            ck.bad(format!(
                "map {id}: directory {dir:#x} is not inside an index chunk"
            ));
        }
        let (mut count, mut bytes) = (0u64, 0u64);
        let mut keys: HashSet<Vec<u8>> = HashSet::new();
        // (record, UID index) of every live record of a map with UIDs.
        let mut uids: Vec<(u64, u64)> = Vec::new();
        for j in 0..(1u64 << gd) {
            let e = sh.w(dir + 8 * j).load(Acquire);
            let (seg, d) = (entry_seg(e), entry_depth(e));
            if d > gd {
                ck.bad(format!("map {id}: directory entry {j} depth {d} > {gd}"));
                continue;
            }
            let first = j & ((1 << d) - 1);
            if j != first {
                let e0 = sh.w(dir + 8 * first).load(Acquire);
                if e0 != e {
                    ck.bad(format!(
                        "map {id}: directory entries {first} and {j} disagree ({e0:#x} vs {e:#x})"
                    ));
                }
                continue;
            }
            ck.r.segments += 1;
            if seg % BUCKET != 0 || !in_index(seg, m.seg_size) {
                ck.bad(format!(
                    "map {id}: segment {seg:#x} is not inside an index chunk"
                ));
                continue;
            }
            ck.lock_ok(seg + S_LOCK, "segment");
            if sh.w(seg + S_DEPTH).load(Acquire) != d || sh.w(seg + S_PREFIX).load(Acquire) != first
            {
                ck.bad(format!(
                    "map {id}: segment {seg:#x} has depth {} prefix {:#x}, directory says {d} / {first:#x}",
                    sh.w(seg + S_DEPTH).load(Acquire),
                    sh.w(seg + S_PREFIX).load(Acquire)
                ));
            }
            let mut overflow = vec![0u64; m.n_main as usize];
            for b in 0..m.n_main + m.n_stash {
                let bo = bucket_off(seg, b);
                let hw = sh.w(bo).load(Acquire);
                if hdr_seq(hw) & 1 == 1 {
                    ck.bad(format!("map {id}: bucket {bo:#x} left mid-write (odd seq)"));
                }
                for i in 0..SLOTS {
                    let so = slot_off(seg, b, i);
                    let s = sh.w(so).load(Acquire);
                    if s == 0 {
                        continue;
                    }
                    let off = slot_off_of(s);
                    let Some(limit) = used_end(off) else {
                        ck.bad(format!(
                            "map {id}: slot {so:#x} points at {off:#x}, outside every data chunk"
                        ));
                        continue;
                    };
                    let Some((mid, k, v, hl)) = read_record_header_in(sh, off, limit) else {
                        ck.bad(format!("map {id}: slot {so:#x} points at {off:#x}: no complete record below {limit:#x}"));
                        continue;
                    };
                    // The cleaner finds a chunk's live records by walking its records from
                    // the first: one it cannot reach that way (a corrupt dead record
                    // before it derails the walk) would be freed with the chunk.
                    let c = g.chunk_of(off);
                    if matches!(kinds.get(&c), Some((CK_SEALED | CK_DATA, _)))
                        && !walks
                            .entry(c)
                            .or_insert_with(|| record_walk(sh, c, limit))
                            .contains(&off)
                    {
                        ck.bad(format!(
                            "map {id}: slot {so:#x} points at {off:#x}, which a walk of chunk {c:#x}'s records from its start does not reach (a corrupt record before it: cleaning the chunk would lose it)"
                        ));
                    }
                    if mid != id {
                        ck.bad(format!(
                            "map {id}: slot {so:#x}: record at {off:#x} belongs to map {mid}"
                        ));
                    }
                    if !seen_records.insert(off) {
                        ck.bad(format!("map {id}: record {off:#x} referenced twice"));
                    }
                    let mut key = vec![0u8; k as usize];
                    sh.r.read_bytes(off + hl, &mut key);
                    let h = hash(g.seed, &key);
                    if h & ((1 << d) - 1) != first {
                        ck.bad(format!(
                            "map {id}: key at {off:#x} hashes outside segment {seg:#x}"
                        ));
                    }
                    if slot_tag(s) != hash_tag(h) {
                        ck.bad(format!("map {id}: slot {so:#x} tag does not match its key"));
                    }
                    let home = home_bucket(h, m.n_main);
                    if b < m.n_main && b != home {
                        ck.bad(format!(
                            "map {id}: key at {off:#x} in bucket {b}, its home is {home}"
                        ));
                    }
                    if b >= m.n_main {
                        overflow[home as usize] += 1;
                    }
                    if !keys.insert(key) {
                        ck.bad(format!(
                            "map {id}: a key is present twice (second at {off:#x})"
                        ));
                    }
                    count += 1;
                    if m.vtrail != 0 {
                        if v < m.vtrail {
                            ck.bad(format!("map {id}: record {off:#x} has no room for its UID"));
                        } else {
                            let rec_len = hl + k + v + g.trailer;
                            uids.push((
                                off,
                                crate::kinds::varmap::uid::record_index(sh, off, rec_len),
                            ));
                        }
                    }
                    if g.trailer == 4 {
                        let mut rec = vec![0u8; (hl + k + v) as usize];
                        sh.r.read_bytes(off, &mut rec);
                        let mut crc = [0u8; 4];
                        sh.r.read_bytes(off + hl + k + v, &mut crc);
                        if record_crc(&[&rec]) != u32::from_le_bytes(crc) {
                            ck.bad(format!(
                                "map {id}: record {off:#x} fails its checksum (torn or corrupt)"
                            ));
                        }
                    }
                    bytes += hl + k + v + g.trailer;
                }
            }
            for b in 0..m.n_main {
                let ov = hdr_overflow(sh.w(bucket_off(seg, b)).load(Acquire));
                if ov != overflow[b as usize] {
                    ck.bad(format!(
                        "map {id}: bucket {b} of {seg:#x} has overflow {ov}, stash holds {}",
                        overflow[b as usize]
                    ));
                }
            }
        }
        let (mut c_count, mut c_bytes) = (0u64, 0u64);
        for t in 0..g.n_txn {
            c_count = c_count.wrapping_add(
                sh.w(m.hdr + M_COUNTERS + MC_SIZE * t + MC_COUNT)
                    .load(Acquire),
            );
            c_bytes = c_bytes.wrapping_add(
                sh.w(m.hdr + M_COUNTERS + MC_SIZE * t + MC_BYTES)
                    .load(Acquire),
            );
        }
        if c_count != count {
            ck.bad(format!(
                "map {id}: counters say {} entries, the index holds {count}",
                c_count as i64
            ));
        }
        if c_bytes != bytes {
            ck.bad(format!(
                "map {id}: counters say {} live bytes, the index holds {bytes}",
                c_bytes as i64
            ));
        }
        if m.vtrail != 0 {
            if let Err(why) = crate::kinds::varmap::uid::check(sh, &m, &uids) {
                ck.bad(format!("map {id}: {why}"));
            }
            ck.lock_ok(m.hdr + M_UID_LOCK, "UID");
        }
        ck.r.entries += count;
    }
    Ok(ck.r)
}
