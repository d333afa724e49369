//! What every kind of object in a store (a variable-size map, a fixed-size map; queues,
//! logs and ordered maps to come) offers the rest of the engine: the [`Kind`] interface,
//! through which the cleaner, the checker, repair and the store's catalog reach a kind
//! without naming it (`kinds::AnyKind` dispatches), and the contexts they hand it.

use crate::error::Result;
use crate::format::*;
use crate::shared::Shared;
use crate::txn::Txn;
use std::collections::{HashMap, HashSet};
use std::sync::atomic::Ordering::*;
use std::time::Duration;

/// One kind of object. A new kind implements this (and registers its intents in
/// `kinds::HOOKS`) and changes nothing in txn, alloc, the cleaner, the checker or repair.
pub(crate) trait Kind {
    /// Whether the kind keeps records in data chunks: only such objects are asked about
    /// records (by the cleaner, the checker's record walks and repair's retiling).
    fn has_records(&self) -> bool;

    /// The cleaner: whether the record at `off`, of this object and with key `key`, is the
    /// one the object references now. Waits at most `timeout` for a bucket being written,
    /// then fails with `Timeout`: a record is never judged dead on doubt.
    fn is_live(&self, sh: &Shared, key: &[u8], off: u64, timeout: Duration) -> Result<bool>;

    /// The cleaner: starts loading what `is_live` (and a move) of a record with `key` will
    /// touch, ahead of it.
    fn prefetch_live(&self, sh: &Shared, key: &[u8], end: u64);

    /// The cleaner: makes `new` (offset, length), an unpublished copy of the record at
    /// `old`, the object's record for `key`, if `old` still is. False when it is not (the
    /// copy is then dead).
    fn relocate(&self, tx: &Txn, key: &[u8], old: u64, new: (u64, u64)) -> Result<bool>;

    /// Bytes of the records the object references (summed for the dead-space accounting).
    fn live_record_bytes(&self, sh: &Shared) -> u64;

    /// Calls `f` with the offset of every record the object references (repair's
    /// retiling of data chunks).
    fn for_each_record(&self, sh: &Shared, f: &mut dyn FnMut(u64)) -> Result<()>;

    /// The checker: verifies every invariant of the object, reporting each violation.
    fn check(&self, ck: &mut CheckCtx<'_>);

    /// Repair (alone in the store): drops the entries whose records cannot be trusted,
    /// reporting each.
    fn drop_untrusted(&self, sh: &Shared, rep: &mut RepairCtx) -> Result<()>;

    /// Repair (alone in the store): the lossless rebuild of locks, sequence numbers,
    /// counts and counters from what the object holds.
    fn rebuild(&self, sh: &Shared, rep: &mut RepairCtx) -> Result<()>;

    /// A drop, once the catalog entry is marked dropping: waits out every writer still
    /// inside the object. Its space is then freed with its chain of index runs.
    fn drop_barrier(&self, tx: &Txn) -> Result<()>;

    /// Figures about the object, for `Store::object_stats` and the tools.
    fn stats(&self, sh: &Shared) -> Result<ObjectStats>;
}

/// Checks that `hdr`, an object's header as its catalog entry names it, starts a run of
/// index chunks that catalog entry `id` owns, inside the file: the run's (start, end), or
/// what is wrong. Every kind whose header opens its own run checks it so before it trusts
/// an offset in it.
pub(crate) fn own_run(sh: &Shared, id: u64, hdr: u64) -> std::result::Result<(u64, u64), String> {
    let end = sh.file_end();
    let cs = sh.g.chunk_size();
    if hdr < sh.g.chunks_off + CHUNK_HDR || (hdr - sh.g.chunks_off) % cs != CHUNK_HDR {
        return Err(format!("its header offset {hdr:#x} is not a run's"));
    }
    let c = hdr - CHUNK_HDR;
    if c + cs > end {
        return Err(format!("its header {hdr:#x} lies past the file end"));
    }
    let k = sh.w(c + K_RUN).load(Acquire);
    if sh.w(c + K_KIND).load(Acquire) != CK_INDEX
        || sh.w(c + K_OWNER).load(Acquire) != id
        || k == 0
        || k.checked_mul(cs)
            .and_then(|b| b.checked_add(c))
            .is_none_or(|e| e > end)
    {
        return Err(format!(
            "its run at {c:#x} is not an index run of {k} chunks that it owns"
        ));
    }
    Ok((c, c + k * cs))
}

/// Figures about one object of a store, whatever its kind
/// ([`Store::object_stats`](crate::Store::object_stats)). A kind without one of these
/// concepts reports 0 for it.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct ObjectStats {
    /// Entries (keys) in the object.
    pub entries: u64,
    /// Bytes of the entries themselves: the records of a variable-size map (headers,
    /// keys and values), the keys and values of a fixed-size one.
    pub live_bytes: u64,
    /// Bytes of the object's index: its segments.
    pub index_bytes: u64,
    /// Index segments.
    pub segments: u64,
    /// Segment splits (or, in a fixed-size map, group moves) so far.
    pub splits: u64,
    /// Global depth of the directory (it has 2^depth entries).
    pub directory_depth: u64,
}

/// The most problems a check reports.
const MAX_PROBLEMS: usize = 1000;

/// What the checker hands each object: the chunk walk's results, what other objects
/// referenced, and the list of problems.
pub(crate) struct CheckCtx<'a> {
    /// The store.
    pub sh: &'a Shared,
    /// Run start -> (chunk kind, run length), from the chunk walk.
    pub runs: &'a HashMap<u64, (u64, u64)>,
    /// Every violation found so far.
    pub problems: Vec<String>,
    /// Entries and index segments checked.
    pub entries: u64,
    /// Index segments checked.
    pub segments: u64,
    /// Records referenced so far, by any object (a record referenced twice is a problem).
    seen_records: HashSet<u64>,
    /// Per data chunk, the record starts its walk reaches (filled as references point
    /// into it).
    walks: HashMap<u64, HashSet<u64>>,
}

impl<'a> CheckCtx<'a> {
    /// A context for the objects of `sh`, whose chunk walk found `runs`.
    pub fn new(sh: &'a Shared, runs: &'a HashMap<u64, (u64, u64)>) -> CheckCtx<'a> {
        CheckCtx {
            sh,
            runs,
            problems: Vec::new(),
            entries: 0,
            segments: 0,
            seen_records: HashSet::new(),
            walks: HashMap::new(),
        }
    }

    /// Reports a violation.
    pub fn bad(&mut self, what: String) {
        if self.problems.len() < MAX_PROBLEMS {
            self.problems.push(what);
        }
    }

    /// Reports the lock word at `off` if a dead txn holds it; `prefix` starts the message.
    pub fn lock_ok(&mut self, off: u64, prefix: &str, what: &str) {
        let v = self.sh.w(off).load(Acquire) & (WAITERS - 1);
        if v != 0 && !self.sh.txn_alive(v - 1) {
            self.bad(format!(
                "{prefix}{what} lock at {off:#x} held by dead txn {}",
                v - 1
            ));
        }
    }

    /// Whether `[off, off + len)` lies inside an index run (a directory may span a run of
    /// several chunks; anything else lies in one chunk).
    pub fn in_index(&self, off: u64, len: u64) -> bool {
        let g = &self.sh.g;
        if off < g.chunks_off {
            return false;
        }
        let (c, cs) = (g.chunk_of(off), g.chunk_size());
        self.runs.iter().any(|(s, (k, r))| {
            *k == CK_INDEX && off >= *s && off + len <= s + r * cs && (*s == c || *r > 1)
        })
    }

    /// The used mark of the data run holding `off` (records lie below it), or None when
    /// `off` is in no data run. Never past the run or the file.
    pub fn used_end(&self, off: u64) -> Option<u64> {
        let (sh, g) = (self.sh, &self.sh.g);
        let end = sh.file_end();
        if off < g.chunks_off || off >= end {
            return None;
        }
        // Records live in the first chunk of a run.
        let c = g.chunk_of(off);
        let (kind, run) = self.runs.get(&c)?;
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
    }

    /// Whether the walk of the records of data chunk `c` (below `limit`) from its start
    /// reaches the record at `off`, as the cleaner's walk must (a record it cannot reach
    /// would be freed with the chunk). True for runs that are not walked (large records).
    pub fn walk_reaches(&mut self, c: u64, limit: u64, off: u64) -> bool {
        if !matches!(self.runs.get(&c), Some((CK_SEALED | CK_DATA, _))) {
            return true;
        }
        let sh = self.sh;
        self.walks
            .entry(c)
            .or_insert_with(|| {
                let mut starts = HashSet::new();
                crate::alloc::record::walk_records(sh, c, c + CHUNK_HDR, limit, |pos| {
                    starts.insert(pos);
                });
                starts
            })
            .contains(&off)
    }

    /// Notes that the record at `off` is referenced; false if something referenced it
    /// already.
    pub fn first_reference(&mut self, off: u64) -> bool {
        self.seen_records.insert(off)
    }
}

/// What repair hands each object, and gets back: the object's name, the records other
/// objects referenced, and what it dropped and rebuilt.
#[derive(Default)]
pub(crate) struct RepairCtx {
    /// The object's name (reports name it).
    pub name: String,
    /// Records referenced so far, by any object.
    pub seen_records: HashSet<u64>,
    /// Entries dropped: (object name, what and why).
    pub dropped: Vec<(String, String)>,
    /// What was rebuilt.
    pub rebuilt: Vec<String>,
}

/// The name of catalog entry `id`, as its bytes say (lossily decoded: for reports).
pub(crate) fn object_name(sh: &Shared, id: u64) -> String {
    let ce = sh.g.cat_entry(id);
    let n = sh.w(ce + C_NAME_LEN).load(Acquire).min(MAX_NAME as u64) as usize;
    let mut b = vec![0u8; n];
    sh.r.read_bytes(ce + C_NAME, &mut b);
    String::from_utf8_lossy(&b).into_owned()
}
