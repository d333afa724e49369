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
//! (`store::salvage`).

use crate::alloc::record::read_record_header_in;
use crate::error::{Error, Result};
use crate::format::*;
use crate::kinds::AnyKind;
use crate::object::{object_name, Kind, RepairCtx};
use crate::shared::Shared;
use std::collections::HashMap;
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

/// Has every object drop the entries whose records cannot be trusted (and the second of
/// two entries with the same key, or the same record).
fn drop_untrusted_entries(sh: &Shared, rep: &mut RepairReport) -> Result<()> {
    let mut ctx = RepairCtx::default();
    for id in 0..sh.g.n_catalog {
        let Some(k) = AnyKind::open(sh, id)? else {
            continue;
        };
        ctx.name = object_name(sh, id);
        k.drop_untrusted(sh, &mut ctx)?;
    }
    rep.dropped.append(&mut ctx.dropped);
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
    // Objects: locks, sequence numbers, overflow counts, counters.
    let mut ctx = RepairCtx::default();
    for id in 0..g.n_catalog {
        let Some(k) = AnyKind::open(sh, id)? else {
            continue;
        };
        ctx.name = object_name(sh, id);
        k.rebuild(sh, &mut ctx)?;
    }
    rep.rebuilt.append(&mut ctx.rebuilt);
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
        let Some(k) = AnyKind::open(sh, id)? else {
            continue;
        };
        k.for_each_record(sh, &mut |off| {
            if off >= g.chunks_off && off < end {
                live.entry(g.chunk_of(off)).or_default().push(off);
            }
        })?;
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
