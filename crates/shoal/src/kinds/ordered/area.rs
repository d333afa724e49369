//! The store's ordered area: the commit lock, the ring of root tables and the pins.
//!
//! A commit copies the current root table into the next slot of the ring, changes the
//! entries of the maps it wrote, and stores the new sequence number in [`OA_SEQ`]: that
//! one store is the commit point, for any number of maps, so neither a reader nor a crash
//! sees part of a commit. What was written before it (pages, the table) is unreachable
//! until then: a writer killed before it leaves nothing to undo.
//!
//! A reader pins the sequence number it reads in its txn slot's pin, so that no page of
//! its snapshot is reused while it reads; a dead thread's pin is ignored (liveness), so a
//! killed reader holds nothing.

use crate::error::Result;
use crate::format::*;
use crate::mem::fence;
use crate::shared::Shared;
use crate::txn::Txn;
use std::sync::atomic::Ordering::*;

/// The ordered area of a store, once made.
pub(crate) fn area(sh: &Shared) -> Result<Option<u64>> {
    match sh.w(H_ORDERED).load(Acquire) {
        0 => Ok(None),
        a if area_ok(&sh.g, a, sh.file_end()) => Ok(Some(a)),
        a => Err(sh.corrupt(format!(
            "header: the ordered area at {a:#x} is not a run's, or lies past the file end"
        ))),
    }
}

/// Root table of commit `seq`.
pub(crate) fn table(sh: &Shared, a: u64, seq: u64) -> u64 {
    a + ring_start(sh.g.n_txn) + (seq % RING) * TABLE
}

/// Makes the area if the store has none (the caller holds the catalog lock).
pub(crate) fn ensure_area(tx: &Txn) -> Result<u64> {
    let sh = tx.sh;
    if let Some(a) = area(sh)? {
        return Ok(a);
    }
    let cs = sh.g.chunk_size();
    let k = (CHUNK_HDR + area_bytes(sh.g.n_txn)).div_ceil(cs);
    crate::alloc::with_alloc_lock(tx, |redo| {
        let c = crate::alloc::take_run(tx, k, redo, crate::alloc::Purpose::Normal)?;
        let a = c + CHUNK_HDR;
        // The run may hold old bytes; nothing references it before the redo list
        // applies, so it is cleared here, unlocked.
        zero(sh, a, area_bytes(sh.g.n_txn));
        let t1 = a + ring_start(sh.g.n_txn) + TABLE;
        sh.w(t1 + RT_SEQ).store(1, Release);
        sh.w(a + OA_SEQ).store(1, Release);
        redo.push(c + K_KIND, CK_INDEX);
        redo.push(c + K_RUN, k);
        redo.push(c + K_NEXT, 0);
        redo.push(c + K_OWNER, u64::MAX);
        redo.push(H_ORDERED, a);
        Ok(a)
    })
}

fn zero(sh: &Shared, mut off: u64, len: u64) {
    let end = off + len;
    let z = [0u8; 4096];
    while off < end {
        let n = (end - off).min(4096);
        sh.r.write_bytes(off, &z[..n as usize]);
        off += n;
    }
}

/// A copy of one map's entry in a root table.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(crate) struct Entry {
    pub root: u64,
    pub depth: u64,
    pub count: u64,
    pub pool: u64,
    pub fq_head: u64,
    pub fq_pos: u64,
    pub fq_tail: u64,
    pub fq_tail_n: u64,
    pub sequence: u64,
    pub owner: u64,
}

const WORDS: [u64; 10] = [
    E_ROOT,
    E_DEPTH,
    E_COUNT,
    E_POOL,
    E_FQ_HEAD,
    E_FQ_POS,
    E_FQ_TAIL,
    E_FQ_TAIL_N,
    E_SEQUENCE,
    E_OWNER,
];

impl Entry {
    fn read(sh: &Shared, at: u64) -> Entry {
        let w: Vec<u64> = WORDS.iter().map(|o| sh.w(at + o).load(Acquire)).collect();
        Entry {
            root: w[0],
            depth: w[1],
            count: w[2],
            pool: w[3],
            fq_head: w[4],
            fq_pos: w[5],
            fq_tail: w[6],
            fq_tail_n: w[7],
            sequence: w[8],
            owner: w[9],
        }
    }

    fn write(&self, sh: &Shared, at: u64) {
        let v = [
            self.root,
            self.depth,
            self.count,
            self.pool,
            self.fq_head,
            self.fq_pos,
            self.fq_tail,
            self.fq_tail_n,
            self.sequence,
            self.owner,
        ];
        for (o, v) in WORDS.iter().zip(v) {
            sh.w(at + o).store(v, Release);
        }
    }
}

/// Reads entry `e` of the table of commit `seq`: None if that table has been reused
/// meanwhile (the caller takes a newer snapshot).
pub(crate) fn read_entry(sh: &Shared, a: u64, seq: u64, e: u64) -> Option<Entry> {
    let t = table(sh, a, seq);
    if sh.w(t + RT_SEQ).load(Acquire) != seq {
        return None;
    }
    let entry = Entry::read(sh, t + e * ENTRY);
    // The copy counts only if the table was not rewritten during it.
    fence(Acquire);
    (sh.w(t + RT_SEQ).load(Relaxed) == seq).then_some(entry)
}

/// The current entry `e`, for the map's writer (who alone changes it, so it is stable
/// while the writer lock is held).
pub(crate) fn current_entry(sh: &Shared, a: u64, e: u64) -> Result<Entry> {
    loop {
        let s = sh.w(a + OA_SEQ).load(Acquire);
        if let Some(en) = read_entry(sh, a, s, e) {
            return Ok(en);
        }
        stable_or_corrupt(sh, a, s)?;
    }
}

/// After a table of commit `s` was found rewritten: fine if a commit has happened since
/// (retry), corrupt if not (the current table is never being written).
pub(crate) fn stable_or_corrupt(sh: &Shared, a: u64, s: u64) -> Result<()> {
    if sh.w(a + OA_SEQ).load(Acquire) == s {
        return Err(sh.corrupt(format!(
            "ordered area at {a:#x}: the root table of commit {s} says it is of commit {}",
            sh.w(table(sh, a, s) + RT_SEQ).load(Acquire)
        )));
    }
    Ok(())
}

/// Pins the current snapshot in txn slot `t`'s pin and returns its sequence number. With
/// `held`, the thread already pins an older snapshot, which protects this one too (pages
/// of this snapshot are freed only by commits after it), so the pin stays.
pub(crate) fn pin(sh: &Shared, a: u64, t: u64, held: bool) -> u64 {
    let p = sh.w(a + OA_PINS + 8 * t);
    if held {
        return sh.w(a + OA_SEQ).load(Acquire);
    }
    loop {
        let s = sh.w(a + OA_SEQ).load(Acquire);
        p.store(s + 1, SeqCst);
        // A writer that reuses pages scans the pins after its commit; if it committed
        // after our load above, the sequence number has moved and we pin again, so every
        // writer either sees this pin or committed before the snapshot we keep.
        fence(SeqCst);
        if sh.w(a + OA_SEQ).load(SeqCst) == s {
            return s;
        }
    }
}

/// Sets txn slot `t`'s pin to `seq` (the oldest snapshot its thread still reads), or
/// clears it (`None`).
pub(crate) fn set_pin(sh: &Shared, a: u64, t: u64, seq: Option<u64>) {
    sh.w(a + OA_PINS + 8 * t)
        .store(seq.map_or(0, |s| s + 1), Release);
}

/// The oldest snapshot any live thread reads (or the current one if none reads): pages
/// freed by a commit at or below it are reusable.
pub(crate) fn oldest_read(sh: &Shared, a: u64) -> u64 {
    fence(SeqCst);
    let mut oldest = sh.w(a + OA_SEQ).load(SeqCst);
    let pins = sh.r.words(a + OA_PINS, sh.g.n_txn as usize);
    let mut consider = |t: usize, p: u64| {
        if p != 0 && p - 1 < oldest && sh.txn_alive(t as u64) {
            oldest = p - 1;
        }
    };
    let mut groups = pins.chunks_exact(8);
    for (c, group) in groups.by_ref().enumerate() {
        // Most slots pin nothing: eight loads and one branch per eight slots, where a
        // branch per slot made this scan a tenth of a small write transaction's time.
        let p: [u64; 8] = std::array::from_fn(|i| group[i].load(SeqCst));
        if p.iter().fold(0, |acc, v| acc | v) != 0 {
            for (i, v) in p.into_iter().enumerate() {
                consider(8 * c + i, v);
            }
        }
    }
    let base = pins.len() - groups.remainder().len();
    for (i, w) in groups.remainder().iter().enumerate() {
        consider(base + i, w.load(SeqCst));
    }
    oldest
}

/// Commits the entries `changed` ((entry index, new entry)) as one step, with the table's
/// use word set to `used` if given; `stamp` runs first, under the commit lock, with the
/// new sequence number (the free-page queues record it). Returns the new sequence
/// number. The caller holds the writer locks of those maps.
pub(crate) fn commit(
    tx: &Txn,
    a: u64,
    changed: &[(u64, Entry)],
    used: Option<u64>,
    markers: &[(u64, u64)],
    stamp: impl FnOnce(u64),
) -> Result<u64> {
    let sh = tx.sh;
    tx.lock(a + OA_LOCK)?;
    let s = sh.w(a + OA_SEQ).load(Acquire);
    stamp(s + 1);
    let (src, dst) = (table(sh, a, s), table(sh, a, s + 1));
    sh.w(dst + RT_SEQ).store(0, Release);
    crate::rt::failpoint!("ordered.commit.table_cleared");
    // The header, and the entries in use (before and after this commit).
    let old_used = sh.w(src + RT_USED).load(Acquire);
    let new_used = used.unwrap_or(old_used);
    for w in (8..ENTRY).step_by(8) {
        sh.w(dst + w).store(sh.w(src + w).load(Acquire), Relaxed);
    }
    sh.w(dst + RT_USED).store(new_used, Relaxed);
    for (i, v) in markers {
        debug_assert!(*i < MARKERS);
        sh.w(dst + RT_MARKERS + 8 * i).store(*v, Relaxed);
    }
    let mut copy = (old_used | new_used) & !1;
    while copy != 0 {
        let e = copy.trailing_zeros() as u64;
        copy &= copy - 1;
        let (from, to) = (src + e * ENTRY, dst + e * ENTRY);
        if new_used & (1 << e) == 0 {
            Entry::default().write(sh, to);
        } else {
            Entry::read(sh, from).write(sh, to);
        }
    }
    for (e, en) in changed {
        en.write(sh, dst + e * ENTRY);
    }
    sh.w(dst + RT_SEQ).store(s + 1, Release);
    crate::rt::failpoint!("ordered.commit.table_written");
    sh.w(a + OA_SEQ).store(s + 1, SeqCst);
    crate::rt::failpoint!("ordered.commit.published");
    tx.unlock(a + OA_LOCK);
    Ok(s + 1)
}

/// Marker `i` (below [`MARKERS`]) as the current table has it.
pub(crate) fn marker(sh: &Shared, a: u64, i: u64) -> Result<u64> {
    loop {
        let s = sh.w(a + OA_SEQ).load(Acquire);
        let t = table(sh, a, s);
        let ok = sh.w(t + RT_SEQ).load(Acquire) == s;
        let v = sh.w(t + RT_MARKERS + 8 * i).load(Acquire);
        fence(Acquire);
        if ok && sh.w(t + RT_SEQ).load(Relaxed) == s {
            return Ok(v);
        }
        stable_or_corrupt(sh, a, s)?;
    }
}

/// The table-use word of the current table.
pub(crate) fn used_entries(sh: &Shared, a: u64) -> Result<u64> {
    loop {
        let s = sh.w(a + OA_SEQ).load(Acquire);
        let t = table(sh, a, s);
        let ok = sh.w(t + RT_SEQ).load(Acquire) == s;
        let u = sh.w(t + RT_USED).load(Acquire);
        fence(Acquire);
        if ok && sh.w(t + RT_SEQ).load(Relaxed) == s {
            return Ok(u);
        }
        stable_or_corrupt(sh, a, s)?;
    }
}
