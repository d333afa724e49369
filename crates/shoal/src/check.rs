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
//! * fixed-size maps (`kinds::fixed`): the same directory checks; every occupied cell (bitmap
//!   bit set) holds a key of its segment and bucket, no key twice, no bit past the
//!   bucket's cells, overflow counts and entry counters exact;
//! * queue sets (`kinds::queue`): every element in exactly one queue or held by a holder
//!   of record (each queue's links, length and tail agree with the element states), queue
//!   names distinct, holder words well formed;
//! * no lock is held by a dead process, no intent is left unapplied.

use crate::alloc::record::walk_records;
use crate::error::Result;
use crate::format::*;
use crate::kinds::AnyKind;
use crate::object::{CheckCtx, Kind};
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
    let ordered = sh.w(H_ORDERED).load(Acquire);
    if ordered != 0 && !area_ok(&g, ordered, end) {
        ck.bad(format!(
            "header: the ordered area at {ordered:#x} is not a run's, or lies past the file end"
        ));
    }
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
    // Every object checks itself, through its kind.
    let mut objects = CheckCtx::new(sh, &kinds);
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
        match AnyKind::open_any(sh, id) {
            Ok(k) => k.check(&mut objects),
            Err(e) => objects.bad(format!("map {id}: {e}")),
        }
    }
    for p in objects.problems {
        ck.bad(p);
    }
    ck.r.entries += objects.entries;
    ck.r.segments += objects.segments;
    Ok(ck.r)
}
