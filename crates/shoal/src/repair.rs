//! Verification and repair of a store on disk that was not closed cleanly, and of any
//! store on request.
//!
//! Between two flushes, an OS crash may persist any subset of the pages a process wrote.
//! The first process to open such a file holds the seize lock exclusively (nobody else is
//! attached) and runs the full check. Problems that lose nothing (locks, sequence numbers,
//! counters, overflow counts, the free list, a half-written cleaner cursor) are rebuilt
//! from the index and the chunk headers. An entry whose record is incomplete (it fails its
//! checksum, or lies past what its chunk says was written) cannot be trusted. Then the open
//! is refused with [`Error::NeedsRepair`] naming the problem, unless the caller asked for
//! [`Store::repair`](crate::Store::repair), which drops such entries and reports each.
//! Nothing is ever silently wrong. A repair runs the same verification on a store closed
//! cleanly too: a record can fail its checksum there as well (a bad sector, a stray
//! write), and reads and `check` report it. A truncated file is salvaged instead
//! (`salvage.rs`).

use crate::error::{Error, Result};
use crate::format::*;
use crate::kinds::varmap::{map_ref_unchecked, read_record_header_in, segments};
use crate::shared::Shared;
use std::collections::{HashMap, HashSet};
use std::sync::atomic::Ordering::*;

/// What repairing a store found and did.
#[derive(Clone, Debug, Default)]
pub struct RepairReport {
    /// Problems the check found before anything was repaired.
    pub found: Vec<String>,
    /// Entries dropped because their records could not be trusted: (map name, slot
    /// description and why). Their keys are not reported: they may be torn too. A
    /// salvage (of a truncated file) also lists here the segments and maps whose index
    /// was lost with the missing part of the file.
    pub dropped: Vec<(String, String)>,
    /// What was rebuilt.
    pub rebuilt: Vec<String>,
}

/// Called by the first opener of an unclean disk store, and by a repair of any store
/// (alone, seize lock held exclusively). Returns the report when something had to be
/// repaired; with `drop_untrusted`, entries that cannot be trusted are dropped.
pub(crate) fn verify_unclean(sh: &Shared, drop_untrusted: bool) -> Result<Option<RepairReport>> {
    let first = crate::check::check(sh)?;
    if first.is_ok() {
        return Ok(None);
    }
    let mut rep = RepairReport {
        found: first.problems.clone(),
        ..Default::default()
    };
    if drop_untrusted {
        drop_untrusted_entries(sh, &mut rep)?;
    }
    rebuild(sh, &mut rep)?;
    let second = crate::check::check(sh)?;
    if second.is_ok() {
        sh.flush()?;
        return Ok(Some(rep));
    }
    let (n, first) = (second.problems.len(), &second.problems[0]);
    Err(if drop_untrusted {
        // The repair itself left problems: naming the repair again would send the caller
        // in a circle.
        Error::corrupt(
            &sh.path,
            format!(
                "not closed cleanly and {n} problem(s) remain after the repair, first: {first}"
            ),
        )
    } else {
        Error::NeedsRepair {
            path: sh.path.clone(),
            what: format!(
                "not closed cleanly (an OS crash?) and {n} problem(s) remain after the lossless \
                 repairs, first: {first}"
            ),
        }
    })
}

/// The chunk-level used mark below which records of the chunk holding `off` are complete,
/// or None when `off` is not in a data chunk.
pub(crate) fn data_limit(sh: &Shared, off: u64) -> Option<u64> {
    let g = &sh.g;
    if off < g.chunks_off || off >= sh.file_end() {
        return None;
    }
    let c = g.chunk_of(off);
    let used = match sh.w(c + K_KIND).load(Acquire) {
        CK_SEALED | CK_LARGE => sh.w(c + K_USED).load(Acquire),
        CK_DATA => {
            let t = sh.w(c + K_OWNER).load(Acquire);
            if t < g.n_txn && sh.w(g.txn_slot(t) + T_DATA_CHUNK).load(Acquire) == c {
                sh.w(g.txn_slot(t) + T_BUMP).load(Acquire)
            } else {
                c + g.chunk_size()
            }
        }
        _ => return None,
    };
    // Records are read below the mark, which comes from the file: never past the file
    // end (as in the checker, where such a mark was a SIGBUS).
    Some(used.min(sh.file_end()))
}

/// The key and the user's value (without a UID trailer) of the record that slot `s` of
/// bucket `b` points at, if it can be trusted: a complete record of map `m`, below what
/// its chunk says was written and below `bound`, that matches its checksum (in a store
/// with them) and whose key belongs exactly where the slot is (the segment's prefix bits
/// `seg_prefix` = (prefix, depth), the slot's tag, the home bucket). Otherwise why not.
pub(crate) fn slot_entry(
    sh: &Shared,
    m: &crate::hashmap::MapRef,
    seg_prefix: (u64, u64),
    b: u64,
    s: u64,
    bound: u64,
) -> std::result::Result<(Vec<u8>, Vec<u8>), &'static str> {
    let off = slot_off_of(s);
    let limit = data_limit(sh, off)
        .ok_or("the record lies outside every data chunk")?
        .min(bound);
    let (mid, k, v, hl) =
        read_record_header_in(sh, off, limit).ok_or("no complete record there")?;
    if mid != m.id {
        return Err("a record of another map");
    }
    if v < m.vtrail {
        return Err("the record has no room for its UID");
    }
    let mut rec = vec![0u8; (hl + k + v) as usize];
    sh.r.read_bytes(off, &mut rec);
    if sh.g.trailer == 4 {
        let mut crc = [0u8; 4];
        sh.r.read_bytes(off + hl + k + v, &mut crc);
        if record_crc(&[&rec]) != u32::from_le_bytes(crc) {
            return Err("the record fails its checksum");
        }
    }
    let key = rec[hl as usize..(hl + k) as usize].to_vec();
    let h = hash(sh.g.seed, &key);
    let (prefix, d) = seg_prefix;
    let home = home_bucket(h, m.n_main);
    if h & ((1 << d) - 1) != prefix || slot_tag(s) != hash_tag(h) || (b < m.n_main && b != home) {
        return Err("the record's key belongs elsewhere");
    }
    let value = rec[(hl + k) as usize..(hl + k + v - m.vtrail) as usize].to_vec();
    Ok((key, value))
}

pub(crate) fn map_name(sh: &Shared, id: u64) -> String {
    let ce = sh.g.cat_entry(id);
    let n = sh.w(ce + C_NAME_LEN).load(Acquire).min(MAX_NAME as u64) as usize;
    let mut b = vec![0u8; n];
    sh.r.read_bytes(ce + C_NAME, &mut b);
    String::from_utf8_lossy(&b).into_owned()
}

/// Clears every slot whose record cannot be trusted, and the second of two slots with
/// the same key.
fn drop_untrusted_entries(sh: &Shared, rep: &mut RepairReport) -> Result<()> {
    let mut seen_records = HashSet::new();
    for id in 0..sh.g.n_catalog {
        if sh.w(sh.g.cat_entry(id) + C_STATE).load(Acquire) & 0xff != CAT_LIVE
            || crate::kinds::fixed::is_fixed(sh, id)
        {
            continue; // fixed maps have no records to distrust
        }
        let m = map_ref_unchecked(sh, id)?;
        let name = map_name(sh, id);
        let mut keys = HashSet::new();
        for (seg, d) in segments(sh, &m)? {
            let prefix = sh.w(seg + S_PREFIX).load(Acquire) & ((1 << d) - 1);
            for b in 0..m.n_main + m.n_stash {
                for i in 0..SLOTS {
                    let so = slot_off(seg, b, i);
                    let s = sh.w(so).load(Acquire);
                    if s == 0 {
                        continue;
                    }
                    let why = match slot_entry(sh, &m, (prefix, d), b, s, sh.file_end()) {
                        Err(why) => why,
                        Ok((k, _)) => {
                            if !keys.insert(k) {
                                "its key is present twice"
                            } else if !seen_records.insert(slot_off_of(s)) {
                                "the record is another slot's"
                            } else {
                                continue;
                            }
                        }
                    };
                    sh.w(so).store(0, Release);
                    rep.dropped.push((
                        name.clone(),
                        format!("slot {so:#x} -> record {:#x}: {why}", slot_off_of(s)),
                    ));
                }
            }
        }
    }
    Ok(())
}

/// The lossless repairs. Runs alone (seize lock exclusive): every lock, intent and
/// counter left by the dead processes is reset from what the index and chunks say.
fn rebuild(sh: &Shared, rep: &mut RepairReport) -> Result<()> {
    let g = sh.g;
    let cs = g.chunk_size();
    let mine = sh.owner_word.load(SeqCst);
    // Txn slots of the dead: free them (their intents were replayed when we attached).
    for t in 0..g.n_txn {
        let b = g.txn_slot(t);
        if sh.w(b + T_OWNER).load(Acquire) != mine {
            for o in (T_RECOVERING..T_REDO)
                .step_by(8)
                .filter(|o| *o != T_DATA_CHUNK && *o != T_BUMP)
            {
                sh.w(b + o).store(0, Release);
            }
            sh.w(b + T_LARGE).store(0, Release);
            sh.w(b + T_OWNER).store(0, Release);
        }
    }
    // Txn slots pointing at a chunk that is not their data chunk start afresh.
    for t in 0..g.n_txn {
        let b = g.txn_slot(t);
        let c = sh.w(b + T_DATA_CHUNK).load(Acquire);
        if c != 0 {
            let ok = c >= g.chunks_off
                && c < sh.file_end()
                && (c - g.chunks_off) % cs == 0
                && sh.w(c + K_KIND).load(Acquire) == CK_DATA
                && sh.w(c + K_OWNER).load(Acquire) == t;
            if !ok {
                sh.w(b + T_DATA_CHUNK).store(0, Release);
                sh.w(b + T_BUMP).store(0, Release);
            }
        }
    }
    for l in [H_ALLOC_LOCK, H_CATALOG_LOCK] {
        sh.w(l).store(0, Release);
    }
    for i in 0..sh.g.clean_lanes {
        let (lock, victim, pos) = lane(i);
        for w in [lock, victim, pos] {
            sh.w(w).store(0, Release);
        }
    }
    // A merge of free runs may have reached the disk without the cursor it moved.
    sh.w(H_CLEAN_SCAN).store(0, Release);
    // Chunks: rebuild the free list and the byte totals from the chunk headers.
    let end = sh.file_end();
    let (mut data, mut free, mut head, mut slack) = (0u64, 0u64, 0u64, 0u64);
    let mut c = g.chunks_off;
    while c < end {
        let kind = sh.w(c + K_KIND).load(Acquire);
        let mut run = sh.w(c + K_RUN).load(Acquire);
        // `run` comes from the file: compare without overflowing.
        if run == 0 || run > (end - c) / cs {
            run = 1;
        }
        if kind == CK_DATA {
            // A data chunk whose owner's slot does not point back at it (torn across a
            // refill) is sealed; its tail past the last record is garbage the cleaner
            // recognises (liveness is decided by the index).
            let t = sh.w(c + K_OWNER).load(Acquire);
            if t >= g.n_txn || sh.w(g.txn_slot(t) + T_DATA_CHUNK).load(Acquire) != c {
                sh.w(c + K_USED).store(c + cs, Release);
                sh.w(c + K_KIND).store(CK_SEALED, Release);
                rep.rebuilt
                    .push(format!("data chunk {c:#x} without its owner sealed"));
            }
        }
        if sh.w(c + K_KIND).load(Acquire) == CK_LARGE {
            slack += crate::alloc::large_slack(sh, c, run);
        }
        match sh.w(c + K_KIND).load(Acquire) {
            CK_DATA | CK_SEALED | CK_LARGE => data += run * cs,
            CK_INDEX => {}
            _ => {
                if kind != CK_FREE {
                    rep.rebuilt.push(format!(
                        "chunk {c:#x} of unknown kind {kind} returned to the free list"
                    ));
                }
                sh.w(c + K_KIND).store(CK_FREE, Release);
                sh.w(c + K_RUN).store(run, Release);
                sh.w(c + K_NEXT).store(head, Release);
                head = c;
                free += run * cs;
            }
        }
        c += run * cs;
    }
    sh.w(H_FREE_HEAD).store(head, Release);
    sh.w(H_DATA_BYTES).store(data, Release);
    sh.w(H_LARGE_SLACK).store(slack, Release);
    sh.w(H_FREE_BYTES).store(free, Release);
    rep.rebuilt.push("free list and byte totals".into());
    retile(sh, rep)?;
    // Maps: locks, sequence numbers, overflow counts, counters.
    for id in 0..g.n_catalog {
        if sh.w(g.cat_entry(id) + C_STATE).load(Acquire) & 0xff != CAT_LIVE {
            continue;
        }
        if crate::kinds::fixed::is_fixed(sh, id) {
            crate::kinds::fixed::rebuild(sh, id)?;
            rep.rebuilt.push(format!(
                "fixed map {:?}: locks, sequence numbers, overflow counts, counters",
                map_name(sh, id)
            ));
            continue;
        }
        let m = map_ref_unchecked(sh, id)?;
        sh.w(m.hdr + M_DIR_LOCK).store(0, Release);
        sh.w(m.hdr + M_UID_LOCK).store(0, Release);
        let (mut count, mut bytes) = (0u64, 0u64);
        let mut uids: Vec<(u64, u64)> = Vec::new();
        for (seg, _) in segments(sh, &m)? {
            sh.w(seg + S_LOCK).store(0, Release);
            for b in 0..m.n_main + m.n_stash {
                let bo = bucket_off(seg, b);
                let h = sh.w(bo).load(Acquire);
                if hdr_seq(h) & 1 == 1 {
                    sh.w(bo).store(
                        make_hdr(hdr_seq(h).wrapping_add(1), hdr_overflow(h)),
                        Release,
                    );
                }
                for i in 0..SLOTS {
                    let s = sh.w(slot_off(seg, b, i)).load(Acquire);
                    if s == 0 {
                        continue;
                    }
                    let off = slot_off_of(s);
                    let limit = data_limit(sh, off).unwrap_or(off);
                    if let Some((_, k, v, hl)) = read_record_header_in(sh, off, limit) {
                        count += 1;
                        bytes += hl + k + v + g.trailer;
                        if m.vtrail != 0 && v >= m.vtrail {
                            let len = hl + k + v + g.trailer;
                            uids.push((off, crate::kinds::varmap::uid::record_index(sh, off, len)));
                        }
                    }
                }
            }
            crate::kinds::varmap::recount_overflow(sh, &m, seg, end)?;
        }
        for t in 0..g.n_txn {
            let c = m.hdr + M_COUNTERS + MC_SIZE * t;
            sh.w(c + MC_COUNT)
                .store(if t == 0 { count } else { 0 }, Release);
            sh.w(c + MC_BYTES)
                .store(if t == 0 { bytes } else { 0 }, Release);
        }
        if m.vtrail != 0 {
            crate::kinds::varmap::uid::rebuild(sh, &m, &uids)?;
        }
        rep.rebuilt.push(format!(
            "map {:?}: locks, sequence numbers, overflow counts, counters{}",
            map_name(sh, id),
            if m.vtrail != 0 { ", UID table" } else { "" }
        ));
    }
    Ok(())
}

/// Mends data chunks whose record walk breaks before a live record (or, in the chunk a
/// thread is filling, before its bump): bytes an OS crash tore or never wrote, below what
/// the chunk says was written. The cleaner finds a chunk's records by that walk, so it
/// would free the records behind the break with the chunk. The broken stretch, up to the
/// next live record (or the bump), becomes one dead *filler* record (map 0, an empty key,
/// the stretch's bytes as its value) that the walk steps over. Lossless: the stretch holds
/// no live record (live ones are where slots point).
fn retile(sh: &Shared, rep: &mut RepairReport) -> Result<()> {
    let g = sh.g;
    let cs = g.chunk_size();
    let end = sh.file_end();
    let mut live: HashMap<u64, Vec<u64>> = HashMap::new();
    for id in 0..g.n_catalog {
        if sh.w(g.cat_entry(id) + C_STATE).load(Acquire) & 0xff != CAT_LIVE
            || crate::kinds::fixed::is_fixed(sh, id)
        {
            continue;
        }
        let m = map_ref_unchecked(sh, id)?;
        for (seg, _) in segments(sh, &m)? {
            for b in 0..m.n_main + m.n_stash {
                for i in 0..SLOTS {
                    let off = slot_off_of(sh.w(slot_off(seg, b, i)).load(Acquire));
                    if off >= g.chunks_off && off < end {
                        live.entry(g.chunk_of(off)).or_default().push(off);
                    }
                }
            }
        }
    }
    let mut c = g.chunks_off;
    while c < end {
        let run = sh.w(c + K_RUN).load(Acquire).clamp(1, (end - c) / cs);
        let kind = sh.w(c + K_KIND).load(Acquire);
        let used = match kind {
            CK_SEALED => sh.w(c + K_USED).load(Acquire),
            CK_DATA => {
                let t = sh.w(c + K_OWNER).load(Acquire);
                sh.w(g.txn_slot(t.min(g.n_txn - 1)) + T_BUMP).load(Acquire)
            }
            _ => 0,
        };
        if used > c + CHUNK_HDR && used <= c + cs {
            let mut targets = live.remove(&c).unwrap_or_default();
            targets.sort_unstable();
            mend_walk(sh, rep, c, kind == CK_DATA, used, &targets);
        }
        c += run * cs;
    }
    Ok(())
}

/// [`retile`] for chunk `c`: walks its records towards each live record in turn (then, in
/// an active chunk, towards `used`); where the walk stops short of it or steps over it,
/// the stretch from where it went wrong to the goal becomes one dead record.
fn mend_walk(sh: &Shared, rep: &mut RepairReport, c: u64, active: bool, used: u64, live: &[u64]) {
    let len_at =
        |p: u64| read_record_header_in(sh, p, used).map(|(_, k, v, hl)| hl + k + v + sh.g.trailer);
    let first = c + CHUNK_HDR;
    let mut pos = first;
    let mut goals = live.iter().copied().filter(|&t| t >= first).peekable();
    loop {
        let goal = match goals.peek() {
            Some(&t) => t,
            None if active => used,
            None => return,
        };
        // Walk towards the goal: `p` where the walk is, `stood` the records it stood on.
        let (mut p, mut stood) = (pos, vec![pos]);
        while p < goal {
            let Some(len) = len_at(p) else { break };
            p += len;
            stood.push(p);
        }
        if p != goal {
            // Stopped at unparseable bytes or stepped over the goal: mend from the last
            // place the walk stood that leaves room for a record before the goal. All of
            // it is dead: the walk stood on the previous live record's end (or the
            // chunk's start), and no slot points between that and the goal.
            let Some(from) = stood
                .iter()
                .rev()
                .copied()
                .find(|&q| q < goal && goal - q >= FILLER_MIN)
            else {
                return; // no room for a record header: check reports it
            };
            if !write_filler(sh, from, goal - from) {
                return;
            }
            rep.rebuilt.push(format!(
                "chunk {c:#x}: bytes {from:#x}..{goal:#x}, where its record walk went wrong, made one dead record"
            ));
        }
        if goals.next().is_none() {
            return; // reached `used` in an active chunk
        }
        match len_at(goal) {
            Some(len) => pos = goal + len,
            None => return, // not a record: check reports the slot
        }
    }
}

/// The shortest dead record [`write_filler`] writes in every store: a 3-byte header
/// (or 2), no key, no value, and a 4-byte checksum if the store has them.
const FILLER_MIN: u64 = 7;

/// Writes at `at` a dead record of exactly `len` bytes (map 0, empty key, the bytes
/// already there as its value, and their checksum in a checksummed store). False when
/// `len` is too short for any header.
fn write_filler(sh: &Shared, at: u64, len: u64) -> bool {
    let t = sh.g.trailer;
    for hl in 2..=6u64 {
        let Some(vlen) = len.checked_sub(hl + t) else {
            continue;
        };
        let hdr = record_header(0, 0, vlen, sh.g.short_records);
        if hdr.len() as u64 != hl {
            continue;
        }
        sh.r.write_bytes(at, &hdr);
        if t == 4 {
            let mut rec = vec![0u8; (hl + vlen) as usize];
            sh.r.read_bytes(at, &mut rec);
            sh.r.write_bytes(at + hl + vlen, &record_crc(&[&rec]).to_le_bytes());
        }
        return true;
    }
    false
}
