//! One ordered map in the file: its header, its snapshots and its write transactions.

use super::area;
use super::cursor::{self, Cursor};
use super::file::{is_page, prefetch_search, FilePage, FilePages};
use super::page::{PageBuf, PageCopy, PageRead, BRANCH, LEAF, PAGE};
use super::pool::Pool;
use super::tree::{
    give_back_list, give_back_own, Finished, PageSource, Pages, PutMode, Root, WriteTxn,
};
use crate::error::{Error, Result};
use crate::format::*;
use crate::shared::Shared;
use crate::txn::Txn;
use std::cell::RefCell;
use std::sync::atomic::fence;
use std::sync::atomic::Ordering::*;

/// An ordered map, as its catalog entry and header say.
#[derive(Clone, Copy, Debug)]
pub(crate) struct OrderedRef {
    /// Catalog id.
    pub id: u64,
    /// The catalog word it was opened with (`state | incarnation << 8`).
    pub cat_word: u64,
    /// Its header.
    pub hdr: u64,
    /// Its entry in the root tables.
    pub e: u64,
    /// Its flags ([`OF_U64_KEYS`], [`OF_DUPS`]).
    pub flags: u64,
    /// The store's ordered area.
    pub area: u64,
}

/// Whether catalog entry `id` is an ordered map.
pub(crate) fn is_ordered(sh: &Shared, id: u64) -> bool {
    sh.w(sh.g.cat_entry(id) + C_KIND).load(Acquire) == KIND_ORDERED
}

/// The owner word of a table entry: the map's id and incarnation.
pub(crate) fn owner_word(id: u64, cat_word: u64) -> u64 {
    id << 32 | (cat_word >> 8) & 0xffff_ffff
}

/// The ordered map of catalog entry `id`, its header checked.
pub(crate) fn ordered_ref(sh: &Shared, id: u64) -> Result<OrderedRef> {
    let ce = sh.g.cat_entry(id);
    let cat_word = sh.w(ce + C_STATE).load(Acquire);
    let hdr = sh.w(ce + C_HDR).load(Acquire);
    let bad = |what: String| sh.corrupt(format!("ordered map {id}: {what}"));
    let (_, run_end) = crate::object::own_run(sh, id, hdr).map_err(bad)?;
    if hdr + MO_RUNS + 8 * MAX_RUNS > run_end {
        return Err(bad(format!("its header at {hdr:#x} does not fit its run")));
    }
    if sh.w(hdr + MO_MAGIC).load(Acquire) != ORDERED_MAGIC {
        return Err(bad("header has no ordered-map magic".into()));
    }
    let e = sh.w(hdr + MO_ENTRY).load(Acquire);
    if !(1..=MAX_ORDERED).contains(&e) {
        return Err(bad(format!("root-table entry {e} is out of range")));
    }
    let flags = sh.w(hdr + MO_FLAGS).load(Acquire);
    if flags & !super::keys::KNOWN_FLAGS != 0 {
        return Err(bad(format!("unknown flags {flags:#x}")));
    }
    let Some(area) = area::area(sh)? else {
        return Err(bad("the store has no ordered area".into()));
    };
    Ok(OrderedRef {
        id,
        cat_word,
        hdr,
        e,
        flags,
        area,
    })
}

/// Writes a new map's header into its first run `c` (nothing references it yet).
pub(crate) fn init_header(sh: &Shared, c: u64, e: u64, flags: u64) -> u64 {
    let hdr = c + CHUNK_HDR;
    sh.r.write_bytes(hdr, &[0u8; (PAGE_BYTES - CHUNK_HDR) as usize]);
    sh.w(hdr + MO_MAGIC).store(ORDERED_MAGIC, Release);
    sh.w(hdr + MO_CHAIN).store(c, Release);
    sh.w(hdr + MO_FLAGS).store(flags, Release);
    sh.w(hdr + MO_ENTRY).store(e, Release);
    sh.w(hdr + MO_NRUNS).store(1, Release);
    sh.w(hdr + MO_RUNS).store(c, Release);
    hdr
}

/// Entry indexes that live ordered maps' headers name (a crash between a map's creation
/// and its first commit leaves its entry unmarked in the table).
pub(crate) fn named_entries(sh: &Shared) -> u64 {
    let mut used = 0u64;
    for id in 0..sh.g.n_catalog {
        let st = sh.w(sh.g.cat_entry(id) + C_STATE).load(Acquire) & 0xff;
        if st != CAT_FREE && is_ordered(sh, id) {
            if let Ok(m) = ordered_ref(sh, id) {
                used |= 1 << m.e;
            }
        }
    }
    used
}

thread_local! {
    /// Snapshots this thread holds, per (store id, txn slot): their sequence numbers.
    static PINS: RefCell<Vec<(u64, u64, Vec<u64>)>> = const { RefCell::new(Vec::new()) };
}

/// A pinned snapshot of one map (on the thread that took it).
pub(crate) struct Snap {
    pub seq: u64,
    pub root: Root,
    /// The map's sequence (its persistent counter) in this snapshot.
    pub map_sequence: u64,
    store_id: u64,
    txn: u64,
    area: u64,
}

impl OrderedRef {
    /// Takes a snapshot of the map (pinning it for this thread's txn slot `t`).
    pub fn snapshot(&self, sh: &Shared, t: u64) -> Result<Snap> {
        Ok(snapshot_many(sh, t, std::slice::from_ref(self))?.remove(0))
    }
}

/// Snapshots of `maps` (of one store) all as of one commit, pinned for this thread's txn
/// slot `t`.
pub(crate) fn snapshot_many(sh: &Shared, t: u64, maps: &[OrderedRef]) -> Result<Vec<Snap>> {
    let Some(a) = maps.first().map(|m| m.area) else {
        return Ok(Vec::new());
    };
    'retry: loop {
        let held = PINS.with(|p| {
            p.borrow()
                .iter()
                .any(|(s, tt, v)| *s == sh.id && *tt == t && !v.is_empty())
        });
        let seq = area::pin(sh, a, t, held);
        let mut snaps = Vec::with_capacity(maps.len());
        for m in maps {
            let Some(en) = area::read_entry(sh, a, seq, m.e) else {
                if !held {
                    area::set_pin(sh, a, t, None);
                }
                area::stable_or_corrupt(sh, a, seq)?;
                continue 'retry;
            };
            if en.owner != owner_word(m.id, m.cat_word) {
                if !held {
                    area::set_pin(sh, a, t, None);
                }
                return Err(Error::NotFound("the ordered map was dropped".into()));
            }
            if en.depth > MAX_TREE_DEPTH {
                if !held {
                    area::set_pin(sh, a, t, None);
                }
                return Err(deep(sh, en.depth));
            }
            snaps.push(Snap {
                seq,
                root: Root {
                    page: en.root,
                    depth: en.depth as u32,
                    count: en.count,
                },
                map_sequence: en.sequence,
                store_id: sh.id,
                txn: t,
                area: a,
            });
        }
        PINS.with(|p| {
            let mut p = p.borrow_mut();
            let i = match p.iter().position(|(s, tt, _)| *s == sh.id && *tt == t) {
                Some(i) => i,
                None => {
                    p.push((sh.id, t, Vec::new()));
                    p.len() - 1
                }
            };
            p[i].2.extend(std::iter::repeat_n(seq, snaps.len()));
        });
        return Ok(snaps);
    }
}

impl Snap {
    /// Releases the pin (keeping the thread's oldest other snapshot pinned).
    pub fn release(&self, sh: &Shared) {
        let oldest = PINS.with(|p| {
            let mut p = p.borrow_mut();
            let i = p
                .iter()
                .position(|(s, t, _)| *s == self.store_id && *t == self.txn)?;
            let v = &mut p[i].2;
            if let Some(j) = v.iter().position(|s| *s == self.seq) {
                v.swap_remove(j);
            }
            let oldest = v.iter().min().copied();
            if v.is_empty() {
                p.swap_remove(i);
            }
            oldest
        });
        area::set_pin(sh, self.area, self.txn, oldest);
    }

    /// The value of `key`.
    pub fn get(&self, sh: &Shared, key: &[u8]) -> Result<Option<Vec<u8>>> {
        let Some((leaf, i)) = self.find(sh, key)? else {
            return Ok(None);
        };
        leaf_value(sh, &FilePage { sh, off: leaf }, i).map(Some)
    }

    /// The value of `key` into `out` (its contents replaced, its allocation reused);
    /// whether found.
    pub fn get_into(&self, sh: &Shared, key: &[u8], out: &mut Vec<u8>) -> Result<bool> {
        let Some((leaf, i)) = self.find(sh, key)? else {
            return Ok(false);
        };
        leaf_value_into(sh, &FilePage { sh, off: leaf }, i, out)?;
        Ok(true)
    }

    /// The leaf and index of `key`.
    fn find(&self, sh: &Shared, key: &[u8]) -> Result<Option<(u64, usize)>> {
        let src = FilePages { sh };
        find(sh, self.root, key, &|first, len| {
            super::overflow::read_key(&src, first, len)
        })
    }

    /// A cursor's walk: calls `f` with each (key, value) from `lo` (inclusive) up to `hi`
    /// (exclusive), or down when `rev`; stops when `f` returns false.
    pub fn walk(
        &self,
        sh: &Shared,
        lo: Option<&[u8]>,
        hi: Option<&[u8]>,
        rev: bool,
        mut f: impl FnMut(&[u8], &[u8]) -> bool,
    ) -> Result<()> {
        self.check_tree_top(sh)?;
        let src = FilePages { sh };
        let mut c = Cursor::new();
        let mut on = if rev {
            match hi {
                // The last key below `hi`: the one at or before it, stepping off `hi`.
                Some(h) => {
                    let at = c.seek_le(&src, self.root, h);
                    if at && entry_key(sh, &c) == h {
                        c.prev(&src)
                    } else {
                        at
                    }
                }
                None => c.last(&src, self.root),
            }
        } else {
            match lo {
                Some(l) => c.seek_ge(&src, self.root, l),
                None => c.first(&src, self.root),
            }
        };
        let mut steps = 0u64;
        // Each leaf checked once, copied whole into one buffer for the whole walk (the
        // snapshot's pin keeps it from changing), and read entry after entry from the copy:
        // the cursor moves only from leaf to leaf.
        let mut buf = WalkBuf::take();
        let mut v;
        let mut kbuf;
        while on {
            let (leaf, mut i) = c.at().expect("on an entry");
            let fp = page_of(sh, leaf, 0)?;
            let n = fp.n();
            // Only the bytes the leaf uses, in block copies: a scan of a hundred entries
            // spends most of its time bringing leaves into the cache.
            fp.copy_used(buf.page());
            let p = PageCopy(buf.page());
            loop {
                steps += 1;
                if steps > self.root.count.saturating_add(1) {
                    return Err(sh.corrupt("ordered map: a walk passes more entries than it holds"));
                }
                let e = p.leaf_entry(i);
                let k = if !e.key_out {
                    e.key
                } else {
                    kbuf = copied_key(sh, &p, leaf, i)?;
                    &kbuf[..]
                };
                if rev && lo.is_some_and(|l| k < l) {
                    return Ok(());
                }
                if !rev && hi.is_some_and(|h| k >= h) {
                    return Ok(());
                }
                let value = if !e.value_out {
                    e.value
                } else if let Some((first, len)) = p.value_ref(i) {
                    v = super::overflow::read(&FilePages { sh }, first, len)
                        .map_err(|w| sh.corrupt(format!("ordered map: {w}")))?;
                    &v[..]
                } else {
                    return Err(sh.corrupt(format!(
                        "ordered map: page {leaf:#x} entry {i} has a value reference of the wrong size"
                    )));
                };
                if !f(k, value) {
                    return Ok(());
                }
                if rev {
                    if i == 0 {
                        break;
                    }
                    i -= 1;
                } else {
                    i += 1;
                    if i >= n {
                        break;
                    }
                }
            }
            c.set_leaf_index(if rev { 0 } else { n.saturating_sub(1) });
            on = if rev { c.prev(&src) } else { c.next(&src) };
        }
        Ok(())
    }

    /// The (key, value) of the entry cursor `c` stands on (in the tree's form), its leaf
    /// checked first; `None` if it stands on none.
    pub fn entry_at(&self, sh: &Shared, c: &Cursor) -> Result<Option<(Vec<u8>, Vec<u8>)>> {
        let Some((leaf, i)) = c.at() else {
            return Ok(None);
        };
        let p = page_of(sh, leaf, 0)?;
        let k = leaf_key(sh, &p, i)?;
        Ok(Some((k, leaf_value(sh, &p, i)?)))
    }

    /// The number of entries whose key is below `key`.
    pub fn rank(&self, sh: &Shared, key: &[u8]) -> Result<u64> {
        self.check_tree_top(sh)?;
        Ok(cursor::rank(&FilePages { sh }, self.root, key))
    }

    /// Moves `c` as `how` says, over this snapshot's tree; whether it stands on an entry.
    pub fn step(&self, sh: &Shared, c: &mut Cursor, how: Step<'_>) -> Result<bool> {
        self.check_tree_top(sh)?;
        Ok(how.apply(c, &FilePages { sh }, self.root))
    }

    /// Entries with `lo <= key < hi`.
    pub fn count_range(&self, sh: &Shared, lo: Option<&[u8]>, hi: Option<&[u8]>) -> Result<u64> {
        self.check_tree_top(sh)?;
        Ok(cursor::count_range(&FilePages { sh }, self.root, lo, hi))
    }

    fn check_tree_top(&self, sh: &Shared) -> Result<()> {
        if self.root.page != 0 {
            page_of(sh, self.root.page, self.root.depth)?;
        }
        Ok(())
    }
}

/// Entry `i` of the copy `p` of leaf `leaf`: its key kept out of line, read from its
/// overflow pages (out of the walk's loop, which short keys keep small).
#[cold]
#[inline(never)]
fn copied_key(sh: &Shared, p: &PageCopy<'_>, leaf: u64, i: usize) -> Result<Vec<u8>> {
    let src = FilePages { sh };
    p.key_of(i, &|first, len| super::overflow::read_key(&src, first, len))
        .ok_or_else(|| {
            sh.corrupt(format!(
                "ordered map: page {leaf:#x} entry {i}: a key reference that leads nowhere"
            ))
        })
}

/// Leaf entry `i`'s key, read from its overflow pages if it is kept out of line.
pub(crate) fn leaf_key(sh: &Shared, p: &FilePage<'_>, i: usize) -> Result<Vec<u8>> {
    let src = FilePages { sh };
    p.key_of(i, &|first, len| super::overflow::read_key(&src, first, len))
        .ok_or_else(|| {
            sh.corrupt(format!(
                "ordered map: page {:#x} entry {i}: a key reference that leads nowhere",
                p.off
            ))
        })
}

/// Leaf entry `i`'s value, read from its overflow pages if it is kept out of line.
pub(crate) fn leaf_value(sh: &Shared, p: &FilePage<'_>, i: usize) -> Result<Vec<u8>> {
    if let Some((first, len)) = p.value_ref(i) {
        return super::overflow::read(&FilePages { sh }, first, len)
            .map_err(|w| sh.corrupt(format!("ordered map: {w}")));
    }
    if p.out_of_line(i) {
        return Err(sh.corrupt(format!(
            "ordered map: page {:#x} entry {i} has a value reference of the wrong size",
            p.off
        )));
    }
    let mut v = Vec::new();
    leaf_value_into(sh, p, i, &mut v)?;
    Ok(v)
}

/// Leaf entry `i`'s value into `out` (its contents replaced, its allocation reused), read
/// from its overflow pages if it is kept out of line.
pub(crate) fn leaf_value_into(
    sh: &Shared,
    p: &FilePage<'_>,
    i: usize,
    out: &mut Vec<u8>,
) -> Result<()> {
    if let Some((first, len)) = p.value_ref(i) {
        *out = super::overflow::read(&FilePages { sh }, first, len)
            .map_err(|w| sh.corrupt(format!("ordered map: {w}")))?;
        return Ok(());
    }
    if p.out_of_line(i) {
        return Err(sh.corrupt(format!(
            "ordered map: page {:#x} entry {i} has a value reference of the wrong size",
            p.off
        )));
    }
    let (at, len) = p.value_at(i);
    p.read_into(at, len, out);
    Ok(())
}

/// A move of a cursor ([`Snap::step`]).
#[derive(Clone, Copy)]
pub(crate) enum Step<'k> {
    /// To the first entry.
    First,
    /// To the last entry.
    Last,
    /// To the first entry at or above the key.
    Ge(&'k [u8]),
    /// To the last entry at or below the key.
    Le(&'k [u8]),
    /// One entry on.
    Next,
    /// One entry back.
    Prev,
}

impl Step<'_> {
    /// Moves `c` over the tree of `root` in `s`; whether it stands on an entry.
    pub fn apply<S: PageSource>(self, c: &mut Cursor, s: &S, root: Root) -> bool {
        match self {
            Step::First => c.first(s, root),
            Step::Last => c.last(s, root),
            Step::Ge(k) => c.seek_ge(s, root, k),
            Step::Le(k) => c.seek_le(s, root, k),
            Step::Next => c.next(s),
            Step::Prev => c.prev(s),
        }
    }
}

/// The leaf and index of `key` in the tree of `root`.
/// `rest` reads keys kept out of line.
fn find(
    sh: &Shared,
    root: Root,
    key: &[u8],
    rest: &impl super::page::KeyRest,
) -> Result<Option<(u64, usize)>> {
    if root.page == 0 {
        return Ok(None);
    }
    let mut off = root.page;
    for level in (0..=root.depth).rev() {
        prefetch_search(sh, off, None);
        let p = page_of(sh, off, level)?;
        prefetch_search(sh, off, Some(p.n()));
        if level == 0 {
            return Ok(p.search(key, rest).ok().map(|i| (off, i)));
        }
        off = p.child(p.child_index(key, rest)).0;
    }
    unreachable!("the loop returns at level 0")
}

impl OrderedRef {
    /// A get without a pin: reads the current root, searches and copies the value into
    /// `out`, then checks that no commit of any ordered map happened meanwhile. The pages
    /// of a committed tree change only after a later commit frees them (which moves the
    /// sequence number first), so an unchanged number means every byte read was of that
    /// tree. `Ok(None)`: a commit came between, or the entry needs the checks of the
    /// pinned path; take a snapshot instead. Nothing shared is written, so a reader
    /// killed here leaves nothing behind, and a get costs no pin (a fenced store) and no
    /// release.
    pub fn get_unpinned(&self, sh: &Shared, key: &[u8], out: &mut Vec<u8>) -> Result<Option<bool>> {
        let a = self.area;
        let s1 = sh.w(a + OA_SEQ).load(Acquire);
        let Some(en) = area::read_entry(sh, a, s1, self.e) else {
            return Ok(None);
        };
        if en.owner != owner_word(self.id, self.cat_word) || en.depth > MAX_TREE_DEPTH {
            return Ok(None);
        }
        let root = Root {
            page: en.root,
            depth: en.depth as u32,
            count: en.count,
        };
        // A key kept out of line is read with a pin: its reference, read from a page that
        // a commit may have reused meanwhile, could name any pages.
        let long = std::cell::Cell::new(false);
        let rest = |_, _| {
            long.set(true);
            None
        };
        let r = find(sh, root, key, &rest).map(|at| match at {
            None => Some(false),
            Some((leaf, i)) => {
                let p = FilePage { sh, off: leaf };
                // A value kept out of line is read with a pin: its reference, read from
                // a page that a commit may have reused meanwhile, could name any pages.
                if p.out_of_line(i) {
                    return None;
                }
                let (va, vl) = p.value_at(i);
                p.read_into(va, vl, out);
                Some(true)
            }
        });
        // The reads above come before the second look at the sequence number (a seqlock's
        // read side): a page rewritten after a commit is seen with that commit's number.
        fence(Acquire);
        if sh.w(a + OA_SEQ).load(Relaxed) != s1 || long.get() {
            return Ok(None);
        }
        // An error (a page of the wrong kind) on an unchanged tree is the tree's own.
        r
    }
}

fn entry_key(sh: &Shared, c: &Cursor) -> Vec<u8> {
    let (leaf, i) = c.at().expect("on an entry");
    let p = FilePage { sh, off: leaf };
    // A reference that leads nowhere reads as no key: the walk that follows reports it.
    leaf_key(sh, &p, i).unwrap_or_default()
}

fn deep(sh: &Shared, depth: u64) -> Error {
    sh.corrupt(format!(
        "ordered map: a tree of {depth} levels (at most {MAX_TREE_DEPTH} can exist)"
    ))
}

/// Page `off` of the file, checked to be a page of the kind `level` needs.
/// A walk's copy of a leaf: the thread's spare one if it has one (short scans come by the
/// million, and each would allocate and zero a page), handed back when the walk ends. A
/// walk inside a walk's callback takes a new one.
struct WalkBuf(Option<Box<[u8; PAGE]>>);

thread_local! {
    static WALK_BUF: std::cell::Cell<Option<Box<[u8; PAGE]>>> =
        const { std::cell::Cell::new(None) };
}

impl WalkBuf {
    fn take() -> WalkBuf {
        let b = WALK_BUF.with(|b| b.take());
        WalkBuf(Some(b.unwrap_or_else(|| Box::new([0u8; PAGE]))))
    }
    fn page(&mut self) -> &mut [u8; PAGE] {
        self.0.as_mut().expect("held until dropped")
    }
}

impl Drop for WalkBuf {
    fn drop(&mut self) {
        let b = self.0.take();
        WALK_BUF.with(|c| c.set(b));
    }
}

fn page_of(sh: &Shared, off: u64, level: u32) -> Result<FilePage<'_>> {
    if !is_page(sh, off) {
        return Err(sh.corrupt(format!("ordered map: page offset {off:#x} is not a page")));
    }
    let p = FilePage { sh, off };
    let want = if level == 0 { LEAF } else { BRANCH };
    if p.kind() != want || 32 + 8 * p.n() > 4096 {
        return Err(sh.corrupt(format!(
            "ordered map: page {off:#x} is not a {} page (kind {}, {} entries)",
            if level == 0 { "leaf" } else { "branch" },
            p.kind(),
            p.n()
        )));
    }
    Ok(p)
}

/// A write transaction's pages: the file for reads, the pool for new pages.
pub(crate) struct PoolPages<'a> {
    pub pool: Pool<'a>,
}

impl PageSource for PoolPages<'_> {
    type Page<'b>
        = FilePage<'b>
    where
        Self: 'b;
    fn page(&self, off: u64) -> FilePage<'_> {
        let sh: &Shared = self.pool.tx.sh;
        let off = if is_page(sh, off) {
            off
        } else {
            sh.g.chunks_off
        };
        FilePage { sh, off }
    }
}

impl Pages for PoolPages<'_> {
    fn alloc(&mut self) -> Result<u64> {
        self.pool.alloc()
    }
    fn recycle(&mut self, off: u64) {
        self.pool.recycle(off);
    }
    fn corrupt(&self, what: String) -> Error {
        self.pool.tx.sh.corrupt(format!("ordered map: {what}"))
    }
    fn write_direct(&mut self, off: u64, p: &PageBuf) {
        write_page(self.pool.tx.sh, off, p);
    }
    type Mark = super::pool::PoolMark;
    fn mark(&self) -> Self::Mark {
        self.pool.mark()
    }
    fn rewind(&mut self, m: Self::Mark) {
        self.pool.rewind(m);
    }
}

/// A write transaction on one ordered map: its writer lock is held from `begin` to
/// `commit` or `abort`.
pub(crate) struct Write<'a> {
    pub m: OrderedRef,
    pub tree: WriteTxn<PoolPages<'a>>,
    /// An operation failed midway: the transaction can only be aborted (or rolled back
    /// to a savepoint before the failure).
    pub poisoned: bool,
    /// `poisoned` at each open savepoint.
    saved_poison: Vec<bool>,
    /// Moves on at every change of the tree (a write, a rollback): a cursor that walked
    /// an older state finds its place again by its key, as its path may name pages the
    /// change copied, freed or reused.
    pub changes: u64,
}

impl OrderedRef {
    /// Starts a write transaction (takes the map's writer lock).
    pub fn begin<'a>(&self, tx: Txn<'a>) -> Result<Write<'a>> {
        tx.lock(self.hdr + MO_WLOCK)?;
        self.begin_locked(tx)
    }

    /// Starts a write transaction whose writer lock the caller took (it is released on
    /// error).
    fn begin_locked<'a>(&self, tx: Txn<'a>) -> Result<Write<'a>> {
        let sh = tx.sh;
        let en = match area::current_entry(sh, self.area, self.e) {
            Ok(en) => en,
            Err(e) => {
                tx.unlock(self.hdr + MO_WLOCK);
                return Err(e);
            }
        };
        if en.owner != owner_word(self.id, self.cat_word) {
            tx.unlock(self.hdr + MO_WLOCK);
            return Err(Error::NotFound("the ordered map was dropped".into()));
        }
        if en.depth > MAX_TREE_DEPTH {
            tx.unlock(self.hdr + MO_WLOCK);
            return Err(deep(sh, en.depth));
        }
        let root = Root {
            page: en.root,
            depth: en.depth as u32,
            count: en.count,
        };
        let pool = Pool::new(tx, self.id, self.hdr, self.area, en);
        Ok(Write {
            m: *self,
            tree: WriteTxn::new(PoolPages { pool }, root),
            poisoned: false,
            saved_poison: Vec::new(),
            changes: 0,
        })
    }
}

impl<'a> Write<'a> {
    /// Puts as `mode` says.
    pub fn put(&mut self, key: &[u8], value: &[u8], mode: PutMode) -> Result<bool> {
        self.usable()?;
        self.changes += 1;
        let r = self.tree.put(key, value, mode);
        self.poisoned |= r.is_err();
        r
    }

    /// Appends past the largest key (a sorted bulk load); false if `key` is not above it.
    pub fn append(&mut self, key: &[u8], value: &[u8]) -> Result<bool> {
        self.usable()?;
        self.changes += 1;
        let r = self.tree.append(key, value);
        self.poisoned |= r.is_err();
        r
    }

    /// Removes `key`.
    pub fn remove(&mut self, key: &[u8]) -> Result<bool> {
        self.usable()?;
        self.changes += 1;
        let r = self.tree.remove(key);
        self.poisoned |= r.is_err();
        r
    }

    fn usable(&self) -> Result<()> {
        if self.poisoned {
            return Err(Error::InvalidArgument(
                "an operation of this transaction failed: it can only be aborted".into(),
            ));
        }
        Ok(())
    }

    /// Commits: writes the new pages, queues the replaced ones, publishes the new root
    /// (and sets the store's `markers`).
    pub fn commit(self, markers: &[(u64, u64)]) -> Result<u64> {
        let tx = self.tree.store_ref().pool.tx;
        commit_all(&tx, vec![self], markers)
    }

    /// Opens a savepoint (see the tree's).
    pub fn savepoint(&mut self) {
        self.tree.savepoint();
        self.saved_poison.push(self.poisoned);
    }

    /// Closes the innermost savepoint: `keep` what came since, or roll it back (which
    /// also undoes a failure since, so the transaction is usable again).
    pub fn close_savepoint(&mut self, keep: bool) {
        let Some(p) = self.saved_poison.pop() else {
            return;
        };
        if keep {
            self.tree.release();
        } else {
            self.tree.rollback();
            self.poisoned = p;
            self.changes += 1;
        }
    }

    /// The map's sequence as this transaction has it; adds `n` to it.
    pub fn next_sequence(&mut self, n: u64) -> Result<u64> {
        self.usable()?;
        let e = &mut self.tree.store.pool.entry;
        let cur = e.sequence;
        e.sequence = cur.checked_add(n).ok_or_else(|| {
            Error::InvalidArgument(format!(
                "the ordered map's sequence {cur} plus {n} passes 2^64"
            ))
        })?;
        Ok(cur)
    }

    /// Writes the transaction's pages and queues the pages it freed, ahead of the commit
    /// that publishes its new root: (the pool, the map's new entry).
    fn prepare(self) -> Result<(OrderedRef, Pool<'a>, area::Entry)> {
        self.usable()?;
        let m = self.m;
        let (pages, f) = self.tree.finish();
        let Finished {
            root,
            written,
            replaced,
        } = f;
        let mut pool = pages.pool;
        let sh = pool.tx.sh;
        let mut written = written;
        for (off, buf) in written.drain() {
            write_page(sh, off, &buf);
            buf.recycle();
        }
        give_back_own(written);
        pool.free_all(&replaced);
        give_back_list(replaced);
        pool.queue_freed()?;
        let mut en = pool.entry;
        en.root = root.page;
        en.depth = root.depth as u64;
        en.count = root.count;
        Ok((m, pool, en))
    }

    /// Drops the transaction: nothing it did is seen, and its pages stay free (they were
    /// never taken in any committed state).
    pub fn abort(self) {
        let tx = self.tree.store_ref().pool.tx;
        tx.unlock(self.m.hdr + MO_WLOCK);
    }

    /// The value of `key` as this transaction sees it.
    pub fn get(&self, key: &[u8]) -> Result<Option<Vec<u8>>> {
        self.tree.get(key)
    }

    /// The first entry at or after `key` as this transaction sees it.
    pub fn first_ge(&self, key: &[u8]) -> Result<Option<(Vec<u8>, Vec<u8>)>> {
        self.tree.first_ge(key)
    }

    /// Moves `c` as `how` says over the tree as this transaction has it; whether it
    /// stands on an entry.
    pub fn step(&self, c: &mut Cursor, how: Step<'_>) -> bool {
        how.apply(c, &self.tree, self.tree.root())
    }

    /// The (key, value) of the entry `c` stands on, as this transaction has it.
    pub fn entry_at(&self, c: &Cursor) -> Result<Option<(Vec<u8>, Vec<u8>)>> {
        self.tree.entry_at(c)
    }

    /// The number of entries whose key is below `key`, as this transaction has them.
    pub fn rank(&self, key: &[u8]) -> u64 {
        cursor::rank(&self.tree, self.tree.root(), key)
    }

    /// Entries with `lo <= key < hi`, as this transaction has them.
    pub fn count_range(&self, lo: Option<&[u8]>, hi: Option<&[u8]>) -> u64 {
        cursor::count_range(&self.tree, self.tree.root(), lo, hi)
    }

    /// Entries in the tree as this transaction has it.
    pub fn len(&self) -> u64 {
        self.tree.root().count
    }
}

/// Writes page `p` at `off`, a page this transaction took (no committed tree reaches it
/// before the commit's publication, so no other writer touches it and no reader trusts
/// it): of a leaf or branch only the bytes it uses, in block copies (the commit's hot
/// loop), of an overflow page all of it.
fn write_page(sh: &Shared, off: u64, p: &PageBuf) {
    let b = p.bytes();
    if p.kind() == LEAF || p.kind() == BRANCH {
        let (head, heap) = p.used_ranges();
        sh.r.write_block(off + head.start as u64, &b[head]);
        sh.r.write_block(off + heap.start as u64, &b[heap]);
    } else {
        sh.r.write_block(off, &b[..]);
    }
}

/// Starts one write transaction on each map of `maps` (of one store), taking their writer
/// locks in the order of their headers' offsets, the one order every transaction takes
/// them in, so that two transactions never wait for each other.
pub(crate) fn begin_many<'a>(tx: Txn<'a>, maps: &[OrderedRef]) -> Result<Vec<Write<'a>>> {
    let mut sorted: Vec<OrderedRef> = maps.to_vec();
    sorted.sort_by_key(|m| m.hdr);
    sorted.dedup_by_key(|m| m.hdr);
    let mut out: Vec<Write<'a>> = Vec::with_capacity(sorted.len());
    for m in &sorted {
        let w = tx.lock(m.hdr + MO_WLOCK).and_then(|()| m.begin_locked(tx));
        match w {
            Ok(w) => out.push(w),
            Err(e) => {
                for w in out {
                    w.abort();
                }
                return Err(e);
            }
        }
    }
    Ok(out)
}

/// Commits the write transactions `writes` (of one store) as one step: all of them or,
/// after a crash at any instant, none; releases their writer locks either way.
pub(crate) fn commit_all(tx: &Txn, writes: Vec<Write<'_>>, markers: &[(u64, u64)]) -> Result<u64> {
    let locks: Vec<u64> = writes.iter().map(|w| w.m.hdr + MO_WLOCK).collect();
    let area = writes.first().map(|w| w.m.area);
    let r = (|| {
        let mut prepared = Vec::with_capacity(writes.len());
        for w in writes {
            prepared.push(w.prepare()?);
        }
        crate::rt::failpoint!("ordered.commit.pages_written");
        let entries: Vec<(u64, area::Entry)> =
            prepared.iter().map(|(m, _, en)| (m.e, *en)).collect();
        let Some(a) = area else {
            return Ok(0); // no map: nothing to commit
        };
        area::commit(tx, a, &entries, None, markers, |seq| {
            for (_, pool, _) in &prepared {
                pool.stamp(seq);
            }
        })
    })();
    for l in locks.iter().rev() {
        tx.unlock(*l);
    }
    r
}
