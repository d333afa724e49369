//! The copy-on-write B+tree over pages: reads of a snapshot and a writer's transaction.
//!
//! A snapshot is a root page and the tree's entry count. A write transaction copies every
//! page it changes (once: a page it allocated itself it edits in place, as LMDB does), so
//! every snapshot stays whole for its readers; at commit the new pages are written and the
//! pages it replaced become free once no snapshot older than the commit is read.
//!
//! Where pages live is the [`Pages`] trait's business: the file in the engine, a hash map
//! in the tests.

use super::overflow;
use super::page::{
    Key, KeyRest, PageBuf, PageRead, BRANCH, KEY_INLINE_MAX, KEY_PREFIX, KEY_REF, LEAF,
};
use crate::error::Result;
use std::cell::RefCell;
use std::collections::{HashMap as StdHashMap, HashSet as StdHashSet};
use std::hash::{BuildHasherDefault, Hasher};

/// A hasher for page offsets: the transaction's maps are keyed by them, looked up on every
/// step of every put, and SipHash (the standard maps' default, built against crafted keys
/// that a writer's own page offsets cannot be) costs more than the lookup around it.
#[derive(Default, Clone, Copy)]
pub struct PageHasher(u64);

impl Hasher for PageHasher {
    fn finish(&self) -> u64 {
        // Offsets are multiples of a page: the page number (`>> 12`) carries the entropy.
        // A multiply spreads it to the high bits (the table's tags), and the fold brings
        // them back to the low ones (its bucket index).
        let h = (self.0 ^ (self.0 >> 12)).wrapping_mul(0x9e37_79b9_7f4a_7c15);
        h ^ (h >> 32)
    }
    fn write(&mut self, bytes: &[u8]) {
        for &b in bytes {
            self.0 = self.0.rotate_left(8) ^ u64::from(b);
        }
    }
    fn write_u64(&mut self, v: u64) {
        self.0 ^= v;
    }
}

/// A map keyed by page offset.
pub type HashMap<K, V> = StdHashMap<K, V, BuildHasherDefault<PageHasher>>;
/// A set of page offsets.
pub type HashSet<K> = StdHashSet<K, BuildHasherDefault<PageHasher>>;

thread_local! {
    /// The page map of this thread's last committed write transaction, emptied, for its
    /// next one: a transaction of one put otherwise spends more on the map's allocation
    /// and growth than on a page's edit.
    static SPARE_OWN: RefCell<Option<HashMap<u64, PageBuf>>> = const { RefCell::new(None) };
    /// Lists of page offsets, emptied, for the same reason.
    static SPARE_LISTS: RefCell<Vec<Vec<u64>>> = const { RefCell::new(Vec::new()) };
}

/// A page map for a write transaction (the thread's spare one if it has one).
fn spare_own() -> HashMap<u64, PageBuf> {
    SPARE_OWN
        .with(|s| s.borrow_mut().take())
        .unwrap_or_default()
}

/// Keeps a write transaction's page map, its pages taken out, for the thread's next one
/// (unless it grew large: a bulk load's).
pub fn give_back_own(mut m: HashMap<u64, PageBuf>) {
    m.clear();
    if m.capacity() <= 1024 {
        SPARE_OWN.with(|s| *s.borrow_mut() = Some(m));
    }
}

/// An empty list of page offsets (a spare one if the thread has one).
pub fn spare_list() -> Vec<u64> {
    SPARE_LISTS
        .with(|s| s.borrow_mut().pop())
        .unwrap_or_default()
}

/// Keeps a list of page offsets, emptied, for the thread's next write transaction.
pub fn give_back_list(mut v: Vec<u64>) {
    v.clear();
    if v.capacity() <= 4096 {
        SPARE_LISTS.with(|s| {
            let mut s = s.borrow_mut();
            if s.len() < 8 {
                s.push(v);
            }
        });
    }
}

/// The offset of no page (an empty tree's root).
pub const NO_PAGE: u64 = 0;

/// A committed tree: what one snapshot of one map reads.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub struct Root {
    /// The root page, or [`NO_PAGE`].
    pub page: u64,
    /// Levels of branches above the leaves (0: the root is a leaf).
    pub depth: u32,
    /// Entries in the tree.
    pub count: u64,
}

/// Where committed pages are read.
pub trait PageSource {
    /// A committed page.
    type Page<'a>: PageRead
    where
        Self: 'a;
    /// Reads page `off`.
    fn page(&self, off: u64) -> Self::Page<'_>;
    /// Asks for the lines of page `off` a search reads, before it reads them (`n`: its
    /// entry count, once known); nothing where pages are in private memory.
    fn prefetch_search(&self, _off: u64, _n: Option<usize>) {}
}

/// Where a write transaction also allocates new pages.
pub trait Pages: PageSource {
    /// A fresh page offset for the transaction.
    fn alloc(&mut self) -> Result<u64>;
    /// A page [`Pages::alloc`] gave this transaction, no longer used: free at once (the
    /// next `alloc` may return it).
    fn recycle(&mut self, off: u64);
    /// The error for a committed page that is not what the tree needs there.
    fn corrupt(&self, what: String) -> crate::error::Error;
    /// Writes page `off`, which [`Pages::alloc`] gave this transaction, where readers of
    /// this transaction's tree will read it (an overflow page, never edited again).
    fn write_direct(&mut self, off: u64, p: &PageBuf);
    /// What the pages' owner has handed out so far.
    type Mark;
    /// The owner's state now, for [`Pages::rewind`].
    fn mark(&self) -> Self::Mark;
    /// Makes every page handed out since `m` free again, as if never handed out.
    fn rewind(&mut self, m: Self::Mark);
}

/// What a savepoint restores.
struct Savepoint<M> {
    root: Root,
    replaced: usize,
    deferred: usize,
    direct: HashSet<u64>,
    /// Own pages as they were at the savepoint, for every page changed since (`None`: not
    /// an own page then).
    undo: HashMap<u64, Option<PageBuf>>,
    mark: M,
}

/// A page as a write transaction sees it: its own copy, or a committed page.
pub enum View<'a, P: PageRead> {
    /// A page this transaction wrote.
    Own(&'a PageBuf),
    /// A committed page.
    Committed(P),
}

macro_rules! view {
    ($v:expr, $p:ident => $e:expr) => {
        match $v {
            View::Own($p) => $e,
            View::Committed(ref $p) => $e,
        }
    };
}

impl<P: PageRead> PageRead for View<'_, P> {
    fn u16_at(&self, at: usize) -> u16 {
        view!(*self, p => p.u16_at(at))
    }
    fn u32_at(&self, at: usize) -> u32 {
        view!(*self, p => p.u32_at(at))
    }
    fn u64_at(&self, at: usize) -> u64 {
        view!(*self, p => p.u64_at(at))
    }
    fn cmp_bytes(&self, at: usize, len: usize, key: &[u8]) -> std::cmp::Ordering {
        view!(*self, p => p.cmp_bytes(at, len, key))
    }
    fn copy_out(&self, at: usize, dst: &mut [u8]) {
        view!(*self, p => p.copy_out(at, dst))
    }
}

/// A write transaction's tree as a source of pages (its own copies over the committed
/// ones), so that the cursors of snapshots walk it as they walk a snapshot's tree.
impl<S: Pages> PageSource for WriteTxn<S> {
    type Page<'a>
        = View<'a, S::Page<'a>>
    where
        Self: 'a;
    fn page(&self, off: u64) -> Self::Page<'_> {
        self.view(off)
    }
}

/// What a put does when the key is there, or is not.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum PutMode {
    /// Insert or replace.
    Upsert,
    /// Only if the key is absent.
    Insert,
    /// Only if the key is present.
    Replace,
}

/// A write transaction on one tree.
pub struct WriteTxn<S: Pages> {
    /// The pages.
    pub store: S,
    root: Root,
    /// Pages this transaction wrote, by offset.
    own: HashMap<u64, PageBuf>,
    /// Committed pages this transaction replaced (free once no older snapshot is read).
    replaced: Vec<u64>,
    /// Overflow pages this transaction wrote (not committed: free at once if dropped).
    direct: HashSet<u64>,
    /// Values and keys the last edit dropped, out of line: (first page, length), to free.
    dropped_values: Vec<(u64, u64)>,
    /// Open savepoints, the innermost last.
    saves: Vec<Savepoint<S::Mark>>,
    /// An append is under way: full pages on the right edge split at their end.
    appending: bool,
    /// The last put added a key (rather than replaced a value or wrote nothing).
    added: bool,
    /// Overflow pages this transaction wrote and then dropped while a savepoint was open:
    /// not handed back to the pool until no savepoint is, because their bytes are in the
    /// file, where a rollback could not restore them if they were written over.
    deferred: Vec<u64>,
}

/// What a write transaction leaves to commit.
pub struct Finished {
    /// The new tree.
    pub root: Root,
    /// The pages to copy into the file, by offset.
    pub written: HashMap<u64, PageBuf>,
    /// Committed pages replaced: free once no snapshot older than the commit is read.
    pub replaced: Vec<u64>,
}

/// A split travelling up: the separator of the new right page, its offset and entry
/// count.
struct Split {
    sep: Sep,
    page: u64,
    count: u64,
}

/// A separator: the whole key, and its bytes in a branch (a prefix and a reference to
/// overflow pages that the branch entry owns if `out`).
struct Sep {
    full: Vec<u8>,
    stored: Vec<u8>,
    out: bool,
}

impl<S: Pages> WriteTxn<S> {
    /// A transaction over the committed tree `root`.
    pub fn new(store: S, root: Root) -> WriteTxn<S> {
        WriteTxn {
            store,
            root,
            own: spare_own(),
            replaced: spare_list(),
            direct: HashSet::default(),
            dropped_values: Vec::new(),
            saves: Vec::new(),
            deferred: Vec::new(),
            appending: false,
            added: false,
        }
    }

    /// The largest key, copied.
    pub fn last_key(&self) -> Option<Vec<u8>> {
        if self.root.page == NO_PAGE {
            return None;
        }
        let mut off = self.root.page;
        for _ in 0..self.root.depth {
            off = view!(self.view(off), p => p.child(p.n()).0);
        }
        view!(self.view(off), p => p.n().checked_sub(1).and_then(|i| p.key_of(i, &self.rest())))
    }

    /// Reads keys kept out of line, for compares.
    fn rest(&self) -> impl Fn(u64, u64) -> Option<Vec<u8>> + '_ {
        let store = &self.store;
        move |first, len| overflow::read_key(store, first, len)
    }

    /// Entry `i`'s whole key; the store's error if it is kept out of line and cannot be
    /// read.
    fn key_of(&self, p: &impl PageRead, i: usize) -> Result<Vec<u8>> {
        p.key_of(i, &self.rest()).ok_or_else(|| {
            self.store
                .corrupt(format!("entry {i}: a key reference that leads nowhere"))
        })
    }

    /// The separator of key `full`: inline, or written out of line if too long.
    fn sep_of(&mut self, full: Vec<u8>) -> Result<Sep> {
        if full.len() <= KEY_INLINE_MAX {
            return Ok(Sep {
                stored: full.clone(),
                full,
                out: false,
            });
        }
        let stored = self.write_key(&full)?;
        Ok(Sep {
            full,
            stored,
            out: true,
        })
    }

    /// Writes `key` to overflow pages of this transaction: its bytes in an entry (a
    /// prefix and the reference).
    fn write_key(&mut self, key: &[u8]) -> Result<Vec<u8>> {
        let (first, pages) = overflow::write(&mut self.store, key)?;
        self.direct.extend(pages);
        let mut stored = Vec::with_capacity(KEY_REF);
        stored.extend_from_slice(&key[..KEY_PREFIX]);
        stored.extend_from_slice(&overflow::reference(first, key.len() as u64));
        Ok(stored)
    }

    /// Adds `key` → `value` past the largest key, filling pages on the right edge to the
    /// brim instead of splitting them in halves (a sorted bulk load); false, changing
    /// nothing, if `key` is not above the largest key.
    pub fn append(&mut self, key: &[u8], value: &[u8]) -> Result<bool> {
        if self.last_key().is_some_and(|last| key <= last.as_slice()) {
            return Ok(false);
        }
        self.appending = true;
        let r = self.put(key, value, PutMode::Insert);
        self.appending = false;
        r
    }

    /// Opens a savepoint: [`WriteTxn::rollback`] brings the transaction back to this
    /// instant, [`WriteTxn::release`] keeps what came since. Savepoints nest.
    pub fn savepoint(&mut self) {
        let sp = Savepoint {
            root: self.root,
            replaced: self.replaced.len(),
            deferred: self.deferred.len(),
            direct: self.direct.clone(),
            undo: HashMap::default(),
            mark: self.store.mark(),
        };
        self.saves.push(sp);
    }

    /// Undoes everything since the innermost savepoint and closes it; false if none is
    /// open. The pages taken since are free again.
    pub fn rollback(&mut self) -> bool {
        let Some(sp) = self.saves.pop() else {
            return false;
        };
        for (off, old) in sp.undo {
            match old {
                Some(p) => self.own.insert(off, p),
                None => self.own.remove(&off),
            };
        }
        self.root = sp.root;
        self.replaced.truncate(sp.replaced);
        // Dropped since the savepoint: pages of values the rollback brings back.
        self.deferred.truncate(sp.deferred);
        self.direct = sp.direct;
        self.dropped_values.clear();
        self.store.rewind(sp.mark);
        true
    }

    /// Closes the innermost savepoint, keeping what came since (an enclosing savepoint
    /// still undoes it); false if none is open.
    pub fn release(&mut self) -> bool {
        let Some(sp) = self.saves.pop() else {
            return false;
        };
        if let Some(outer) = self.saves.last_mut() {
            for (off, old) in sp.undo {
                outer.undo.entry(off).or_insert(old);
            }
        } else {
            for off in std::mem::take(&mut self.deferred) {
                self.store.recycle(off);
            }
        }
        true
    }

    /// Records own page `off` as it is before a change, if a savepoint is open and has
    /// not recorded it yet.
    fn touch(&mut self, off: u64) {
        if let Some(sp) = self.saves.last_mut() {
            let own = &self.own;
            sp.undo.entry(off).or_insert_with(|| own.get(&off).cloned());
        }
    }

    /// The pages' owner.
    pub fn store_ref(&self) -> &S {
        &self.store
    }

    /// The outcome: the new tree, the pages to write into the file and the committed
    /// pages it replaced.
    pub fn finish(mut self) -> (S, Finished) {
        // Savepoints still open are kept, as a release of each would.
        for off in std::mem::take(&mut self.deferred) {
            self.store.recycle(off);
        }
        // Pages without a prefix (filled by appends, or new) get the longest their keys
        // share before readers search them; the others got one at their last split or
        // compaction, and keep it valid.
        for p in self.own.values_mut().filter(|p| p.plen() == 0) {
            p.refresh_prefix();
        }
        let f = Finished {
            root: self.root,
            written: self.own,
            replaced: self.replaced,
        };
        (self.store, f)
    }

    /// An own page the tree no longer uses goes straight back to the pages' owner, so a
    /// transaction that empties pages reuses them for the next ones it copies.
    fn drop_own(&mut self, off: u64) {
        self.touch(off);
        if let Some(p) = self.own.remove(&off) {
            p.recycle();
        }
        self.store.recycle(off);
    }

    fn view(&self, off: u64) -> View<'_, S::Page<'_>> {
        match self.own.get(&off) {
            Some(p) => View::Own(p),
            None => View::Committed(self.store.page(off)),
        }
    }

    /// Page `off`, at `level` (0: a leaf), made this transaction's own: its new offset.
    fn own(&mut self, off: u64, level: u32) -> Result<u64> {
        if self.own.contains_key(&off) {
            return Ok(off);
        }
        let copy = PageBuf::copy_of(&self.store.page(off));
        let kind = if level == 0 { LEAF } else { BRANCH };
        if let Err(what) = copy.validate(kind) {
            return Err(self.store.corrupt(format!("page {off:#x}: {what}")));
        }
        let new = self.store.alloc()?;
        self.touch(new);
        self.own.insert(new, copy);
        self.replaced.push(off);
        Ok(new)
    }

    fn fresh(&mut self, p: PageBuf) -> Result<u64> {
        let off = self.store.alloc()?;
        self.touch(off);
        self.own.insert(off, p);
        Ok(off)
    }

    /// The tree as this transaction has it now.
    pub fn root(&self) -> Root {
        self.root
    }

    /// The (key, value) of the entry cursor `c` stands on in this transaction's tree,
    /// copied; `None` if it stands on none.
    pub fn entry_at(&self, c: &super::cursor::Cursor) -> Result<Option<(Vec<u8>, Vec<u8>)>> {
        let Some((leaf, i)) = c.at() else {
            return Ok(None);
        };
        view!(self.view(leaf), p => {
            if p.kind() != LEAF || i >= p.n() {
                return Err(self.store.corrupt(format!(
                    "page {leaf:#x} is not a leaf with an entry {i}"
                )));
            }
            let k = self.key_of(p, i)?;
            self.value_of(p, i).map(|v| Some((k, v)))
        })
    }

    /// The value of `key`, copied.
    pub fn get(&self, key: &[u8]) -> Result<Option<Vec<u8>>> {
        if self.root.page == NO_PAGE {
            return Ok(None);
        }
        let mut off = self.root.page;
        let rest = self.rest();
        for _ in 0..self.root.depth {
            off = view!(self.view(off), p => p.child(p.child_index(key, &rest)).0);
        }
        view!(self.view(off), p => match p.search(key, &rest) {
            Ok(i) => self.value_of(p, i).map(Some),
            Err(_) => Ok(None),
        })
    }

    /// Leaf entry `i`'s value, read from its overflow pages if it is kept out of line.
    fn value_of(&self, p: &impl PageRead, i: usize) -> Result<Vec<u8>> {
        if let Some((first, len)) = p.value_ref(i) {
            return overflow::read(&self.store, first, len).map_err(|w| self.store.corrupt(w));
        }
        let (at, len) = p.value_at(i);
        let mut v = vec![0u8; len];
        p.copy_out(at, &mut v);
        Ok(v)
    }

    /// Frees the values that the last edit dropped: pages this transaction wrote go back
    /// at once, committed ones wait for older snapshots to end.
    fn free_dropped_values(&mut self) -> Result<()> {
        while let Some((first, len)) = self.dropped_values.pop() {
            let pages =
                overflow::pages(&self.store, first, len).map_err(|w| self.store.corrupt(w))?;
            for off in pages {
                if self.direct.remove(&off) {
                    if self.saves.is_empty() {
                        self.store.recycle(off);
                    } else {
                        self.deferred.push(off);
                    }
                } else {
                    self.replaced.push(off);
                }
            }
        }
        Ok(())
    }

    /// The first entry whose key is at least `key`, as this transaction has it: (key,
    /// value), copied.
    pub fn first_ge(&self, key: &[u8]) -> Result<Option<(Vec<u8>, Vec<u8>)>> {
        if self.root.page == NO_PAGE {
            return Ok(None);
        }
        // The branches passed, with the child taken, so that the walk can step right
        // past a leaf whose keys are all below `key`.
        let mut path: Vec<(u64, usize)> = Vec::with_capacity(self.root.depth as usize);
        let mut off = self.root.page;
        let rest = self.rest();
        for _ in 0..self.root.depth {
            let c = view!(self.view(off), p => p.child_index(key, &rest));
            path.push((off, c));
            off = view!(self.view(off), p => p.child(c).0);
        }
        let mut i = view!(self.view(off), p => match p.search(key, &rest) { Ok(i) | Err(i) => i });
        loop {
            let found = view!(self.view(off), p => (i < p.n()).then(|| {
                let k = self.key_of(p, i)?;
                self.value_of(p, i).map(|v| (k, v))
            }));
            if let Some(kv) = found {
                return kv.map(Some);
            }
            // Up to the lowest branch with a child right of the one taken, then down its
            // leftmost edge.
            let (b, c) = loop {
                let Some((b, c)) = path.pop() else {
                    return Ok(None);
                };
                if c < view!(self.view(b), p => p.n()) {
                    break (b, c + 1);
                }
            };
            path.push((b, c));
            off = view!(self.view(b), p => p.child(c).0);
            for _ in path.len()..self.root.depth as usize {
                path.push((off, 0));
                off = view!(self.view(off), p => p.child(0).0);
            }
            i = 0;
        }
    }

    /// Puts `key` → `value` as `mode` says; returns whether it wrote. An error (no page
    /// to allocate) leaves the transaction in no defined state: it must be dropped.
    pub fn put(&mut self, key: &[u8], value: &[u8], mode: PutMode) -> Result<bool> {
        self.added = false;
        let long = key.len() > KEY_INLINE_MAX;
        let klen = if long { KEY_REF } else { key.len() };
        let value_out = overflow::goes_out_of_line(klen, value.len());
        if !long && !value_out {
            return self.put_as(key, (key, false), value, false, mode);
        }
        // A value or a key of its own pages: written first (if the put will happen), then
        // referenced from the leaf. A key already there keeps its pages.
        let had = self.has(key);
        if mode != PutMode::Upsert && had != (mode == PutMode::Replace) {
            return Ok(false);
        }
        let stored = if long && !had {
            self.write_key(key)?
        } else {
            key[..klen.min(key.len())].to_vec()
        };
        let stored = (stored.as_slice(), long);
        if !value_out {
            return self.put_as(key, stored, value, false, mode);
        }
        let (first, pages) = overflow::write(&mut self.store, value)?;
        self.direct.extend(pages);
        let r = overflow::reference(first, value.len() as u64);
        self.put_as(key, stored, &r, true, mode)
    }

    /// Whether the last [`WriteTxn::put`] added its key (false: it replaced a value, or
    /// wrote nothing): an upsert that must say so needs no search of its own before it.
    pub fn last_put_added(&self) -> bool {
        self.added
    }

    /// Whether `key` has an entry (its value not read).
    pub fn has(&self, key: &[u8]) -> bool {
        if self.root.page == NO_PAGE {
            return false;
        }
        let mut off = self.root.page;
        let rest = self.rest();
        for _ in 0..self.root.depth {
            off = view!(self.view(off), p => p.child(p.child_index(key, &rest)).0);
        }
        view!(self.view(off), p => p.search(key, &rest).is_ok())
    }

    /// Puts `key` (its bytes in a leaf `stored`, used only if it is added).
    fn put_as(
        &mut self,
        key: &[u8],
        stored: Key<'_>,
        value: &[u8],
        out: bool,
        mode: PutMode,
    ) -> Result<bool> {
        if self.root.page == NO_PAGE {
            if mode == PutMode::Replace {
                return Ok(false);
            }
            let mut leaf = PageBuf::new(LEAF);
            leaf.leaf_insert_as(0, stored, value, out)
                .expect("an empty page takes an entry");
            self.root = Root {
                page: self.fresh(leaf)?,
                depth: 0,
                count: 1,
            };
            self.added = true;
            return Ok(true);
        }
        let root = self.own(self.root.page, self.root.depth)?;
        let (wrote, added, split) =
            self.put_at(root, self.root.depth, (key, stored), (value, out), mode)?;
        self.root.page = root;
        self.added = added;
        if added {
            self.root.count += 1;
        }
        if let Some(s) = split {
            let left_count = self.root.count - s.count;
            let mut b = PageBuf::new(BRANCH);
            b.set_child0(root, left_count);
            b.branch_insert(0, (&s.sep.stored, s.sep.out), s.page, s.count)
                .expect("an empty page takes an entry");
            self.root.page = self.fresh(b)?;
            self.root.depth += 1;
        }
        self.free_dropped_values()?;
        Ok(wrote)
    }

    /// Puts under the owned page `off` at `level` (0 = leaf): (wrote, added, split).
    fn put_at(
        &mut self,
        off: u64,
        level: u32,
        (key, stored): (&[u8], Key<'_>),
        value: (&[u8], bool),
        mode: PutMode,
    ) -> Result<(bool, bool, Option<Split>)> {
        let appending = self.appending;
        if level == 0 {
            self.touch(off);
            let store = &self.store;
            let rest = |first, len| overflow::read_key(store, first, len);
            let page = self.own.get_mut(&off).expect("owned");
            let found = page.search(key, &rest);
            let ok = match (found, mode) {
                (Ok(_), PutMode::Insert) | (Err(_), PutMode::Replace) => {
                    return Ok((false, false, None))
                }
                (Ok(i), _) => {
                    self.dropped_values.extend(page.value_ref(i));
                    page.leaf_set_as(i, value.0, value.1)
                }
                (Err(i), _) => page.leaf_insert_as(i, stored, value.0, value.1),
            };
            let added = found.is_err();
            if ok.is_ok() {
                return Ok((true, added, None));
            }
            let n = page.n();
            let corrupt = || format!("page {off:#x}: a key reference that leads nowhere");
            let (right, sep) = if appending && found == Err(n) {
                // A bulk load past the last key: the full page stays full, and the new
                // entry starts the next one (a split in halves would leave every page of
                // a sorted load half empty).
                let mut right = PageBuf::new(LEAF);
                put_in_leaf(&mut right, (key, stored), value, &rest);
                let Some(last) = page.key_of(n - 1, &rest) else {
                    return Err(self.store.corrupt(corrupt()));
                };
                (right, separator(&last, key))
            } else {
                let (mut right, _) = page.split();
                let (Some(lo), Some(hi)) =
                    (page.key_of(page.n() - 1, &rest), right.key_of(0, &rest))
                else {
                    return Err(self.store.corrupt(corrupt()));
                };
                let sep = separator(&lo, &hi);
                if key >= sep.as_slice() {
                    put_in_leaf(&mut right, (key, stored), value, &rest);
                } else {
                    put_in_leaf(page, (key, stored), value, &rest);
                }
                (right, sep)
            };
            let sep = self.sep_of(sep)?;
            let count = right.n() as u64;
            let page = self.fresh(right)?;
            return Ok((true, added, Some(Split { sep, page, count })));
        }
        let c = view!(self.view(off), p => p.child_index(key, &self.rest()));
        let (child, child_count) = view!(self.view(off), p => p.child(c));
        let child = self.own(child, level - 1)?;
        let (wrote, added, split) = self.put_at(child, level - 1, (key, stored), value, mode)?;
        self.touch(off);
        let page = self.own.get_mut(&off).expect("owned");
        let mut child_count = child_count + added as u64;
        if let Some(s) = &split {
            child_count -= s.count;
        }
        page.set_child(c, child, child_count);
        let Some(s) = split else {
            return Ok((wrote, added, None));
        };
        if page
            .branch_insert(c, (&s.sep.stored, s.sep.out), s.page, s.count)
            .is_ok()
        {
            return Ok((wrote, added, None));
        }
        if appending && c == page.n() {
            // As for leaves: the new child starts the next branch.
            let mut right = PageBuf::new(BRANCH);
            right.set_child0(s.page, s.count);
            let page = self.fresh(right)?;
            return Ok((
                wrote,
                added,
                Some(Split {
                    sep: s.sep,
                    page,
                    count: s.count,
                }),
            ));
        }
        let (mut right, (stored, out)) = page.split();
        // The middle entry's separator (and its overflow pages) moves up.
        let store = &self.store;
        let rest = |first, len| overflow::read_key(store, first, len);
        let full = if out {
            let first =
                u64::from_le_bytes(stored[KEY_PREFIX..KEY_PREFIX + 8].try_into().expect("8"));
            let len = u64::from_le_bytes(stored[KEY_PREFIX + 8..].try_into().expect("8"));
            rest(first, len)
        } else {
            Some(stored.clone())
        };
        let Some(full) = full else {
            return Err(self.store.corrupt(format!(
                "page {off:#x}: a separator reference that leads nowhere"
            )));
        };
        let mid = Sep { full, stored, out };
        if s.sep.full >= mid.full {
            let i = right.search(&s.sep.full, &rest).unwrap_err();
            right
                .branch_insert(i, (&s.sep.stored, s.sep.out), s.page, s.count)
                .expect("half a page has room");
        } else {
            page.branch_insert(c, (&s.sep.stored, s.sep.out), s.page, s.count)
                .expect("half a page has room");
        }
        let sep = mid;
        let count = right.total_count();
        let page = self.fresh(right)?;
        Ok((wrote, added, Some(Split { sep, page, count })))
    }

    /// Removes `key`; returns whether it was there. An error leaves the transaction in
    /// no defined state, as for [`WriteTxn::put`].
    pub fn remove(&mut self, key: &[u8]) -> Result<bool> {
        if !self.has(key) {
            return Ok(false);
        }
        let root = self.own(self.root.page, self.root.depth)?;
        let empty = self.remove_at(root, self.root.depth, key)?;
        self.free_dropped_values()?;
        self.root.count -= 1;
        self.root.page = root;
        if empty {
            self.drop_own(root);
            self.root = Root::default();
            return Ok(true);
        }
        // A root branch left with one child gives way to it.
        while self.root.depth > 0 {
            let p = &self.own[&self.root.page];
            if p.n() > 0 {
                break;
            }
            let (child, _) = p.child(0);
            let old = self.root.page;
            self.drop_own(old);
            self.root.page = child;
            self.root.depth -= 1;
        }
        Ok(true)
    }

    /// Removes `key` (present) under the owned page `off`; returns whether the page is
    /// now empty (and should leave its parent).
    fn remove_at(&mut self, off: u64, level: u32, key: &[u8]) -> Result<bool> {
        if level == 0 {
            self.touch(off);
            let page = self.own.get_mut(&off).expect("owned");
            let store = &self.store;
            let i = page
                .search(key, &|first, len| overflow::read_key(store, first, len))
                .expect("present");
            self.dropped_values.extend(page.value_ref(i));
            self.dropped_values.extend(page.key_ref(i));
            page.remove(i);
            return Ok(page.n() == 0);
        }
        let c = view!(self.view(off), p => p.child_index(key, &self.rest()));
        let (child, count) = view!(self.view(off), p => p.child(c));
        let child = self.own(child, level - 1)?;
        let child_empty = self.remove_at(child, level - 1, key)?;
        self.touch(off);
        let page = self.own.get_mut(&off).expect("owned");
        if !child_empty {
            page.set_child(c, child, count - 1);
            return Ok(false);
        }
        // The child is gone: drop its page and its entry (for child0, entry 0's child
        // takes its place, and entry 0's separator goes).
        if page.n() == 0 {
            self.drop_own(child);
            return Ok(true);
        }
        let gone = c.saturating_sub(1);
        // The separator goes with its entry, and the pages of one kept out of line.
        self.dropped_values.extend(page.key_ref(gone));
        if c == 0 {
            let (c1, n1) = page.child(1);
            page.set_child0(c1, n1);
        }
        page.remove(gone);
        self.drop_own(child);
        Ok(false)
    }
}

/// The separator between keys `left` and `right` (`left < right`): `right` itself if a
/// page keeps it whole, else the shortest prefix of `right` above `left`, so that long keys
/// rarely make separators kept out of line. Short keys keep whole separators: a compare
/// reads whole 8-byte words of the file, and a separator cut short would end in a partial
/// one, which costs more than the bytes it saves (gets were 10% slower).
fn separator(left: &[u8], right: &[u8]) -> Vec<u8> {
    if right.len() <= KEY_INLINE_MAX {
        return right.to_vec();
    }
    let common = left.iter().zip(right).take_while(|(a, b)| a == b).count();
    right[..(common + 1).min(right.len())].to_vec()
}

fn put_in_leaf(
    p: &mut PageBuf,
    (key, stored): (&[u8], Key<'_>),
    (value, out): (&[u8], bool),
    rest: &impl KeyRest,
) {
    match p.search(key, rest) {
        Ok(i) => p.leaf_set_as(i, value, out),
        Err(i) => p.leaf_insert_as(i, stored, value, out),
    }
    .expect("half a page has room for an entry of at most a quarter page")
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use std::collections::BTreeMap;
    use std::collections::{HashMap, HashSet};

    /// Pages in a hash map: committed ones shared, as the file would be.
    pub(crate) struct Mem<'a> {
        pub pages: &'a HashMap<u64, PageBuf>,
        pub next: &'a mut u64,
        /// Pages recycled by the transaction, handed out again first.
        pub free: Vec<u64>,
        /// Overflow pages the transaction wrote.
        pub direct: HashMap<u64, PageBuf>,
    }

    impl PageSource for Mem<'_> {
        type Page<'b>
            = &'b PageBuf
        where
            Self: 'b;
        fn page(&self, off: u64) -> &PageBuf {
            self.direct.get(&off).unwrap_or_else(|| &self.pages[&off])
        }
    }

    impl Pages for Mem<'_> {
        fn alloc(&mut self) -> Result<u64> {
            if let Some(p) = self.free.pop() {
                return Ok(p);
            }
            *self.next += 1;
            Ok(*self.next)
        }
        fn recycle(&mut self, off: u64) {
            self.direct.remove(&off);
            self.free.push(off);
        }
        fn corrupt(&self, what: String) -> crate::error::Error {
            crate::error::Error::InvalidArgument(what)
        }
        fn write_direct(&mut self, off: u64, p: &PageBuf) {
            self.direct.insert(off, p.clone());
        }
        type Mark = (u64, Vec<u64>, Vec<u64>);
        fn mark(&self) -> Self::Mark {
            (
                *self.next,
                self.free.clone(),
                self.direct.keys().copied().collect(),
            )
        }
        fn rewind(&mut self, (next, free, direct): Self::Mark) {
            *self.next = next;
            self.free = free;
            self.direct.retain(|off, _| direct.contains(off));
        }
    }

    impl PageRead for &PageBuf {
        fn u16_at(&self, at: usize) -> u16 {
            (**self).u16_at(at)
        }
        fn u32_at(&self, at: usize) -> u32 {
            (**self).u32_at(at)
        }
        fn u64_at(&self, at: usize) -> u64 {
            (**self).u64_at(at)
        }
        fn cmp_bytes(&self, at: usize, len: usize, key: &[u8]) -> std::cmp::Ordering {
            (**self).cmp_bytes(at, len, key)
        }
        fn copy_out(&self, at: usize, dst: &mut [u8]) {
            (**self).copy_out(at, dst)
        }
    }

    pub(crate) fn rng(seed: &mut u64) -> u64 {
        *seed ^= *seed << 13;
        *seed ^= *seed >> 7;
        *seed ^= *seed << 17;
        *seed
    }

    type Entries = Vec<(Vec<u8>, Vec<u8>)>;
    type Model = BTreeMap<Vec<u8>, Vec<u8>>;

    /// Walks the tree: every key in order, counts and separators consistent; returns the
    /// entries and the pages reached.
    fn walk(pages: &HashMap<u64, PageBuf>, root: Root) -> (Entries, Vec<u64>) {
        fn rec(
            pages: &HashMap<u64, PageBuf>,
            off: u64,
            level: u32,
            lo: Option<&[u8]>,
            hi: Option<&[u8]>,
            out: &mut (Entries, Vec<u64>),
        ) -> u64 {
            out.1.push(off);
            let p = &pages[&off];
            let src = Mem {
                pages,
                next: &mut 0,
                free: Vec::new(),
                direct: HashMap::new(),
            };
            for i in 0..p.n() {
                if let Some((first, len)) = p.key_ref(i) {
                    assert!(len as usize > KEY_INLINE_MAX, "a short key out of line");
                    out.1.extend(overflow::pages(&src, first, len).unwrap());
                }
            }
            let key = |i| p.key_of(i, &|f, l| overflow::read_key(&src, f, l)).unwrap();
            for i in 0..p.n() {
                let k = key(i);
                assert!(
                    lo.is_none_or(|lo| k.as_slice() >= lo),
                    "key below its separator"
                );
                assert!(
                    hi.is_none_or(|hi| k.as_slice() < hi),
                    "key at or above the next one"
                );
            }
            if level == 0 {
                assert_eq!(p.kind(), LEAF);
                for i in 0..p.n() {
                    let v = match p.value_ref(i) {
                        Some((first, len)) => {
                            let src = Mem {
                                pages,
                                next: &mut 0,
                                free: Vec::new(),
                                direct: HashMap::new(),
                            };
                            out.1.extend(overflow::pages(&src, first, len).unwrap());
                            overflow::read(&src, first, len).unwrap()
                        }
                        None => {
                            let (a, l) = p.value_at(i);
                            p.bytes()[a..a + l].to_vec()
                        }
                    };
                    out.0.push((key(i), v));
                }
                assert!(p.n() > 0, "empty leaf left in the tree");
                return p.n() as u64;
            }
            assert_eq!(p.kind(), BRANCH);
            let mut total = 0;
            for c in 0..=p.n() {
                let clo = if c == 0 {
                    lo.map(|l| l.to_vec())
                } else {
                    Some(key(c - 1))
                };
                let chi = if c == p.n() {
                    hi.map(|h| h.to_vec())
                } else {
                    Some(key(c))
                };
                let (child, count) = p.child(c);
                let got = rec(pages, child, level - 1, clo.as_deref(), chi.as_deref(), out);
                assert_eq!(got, count, "a branch's count of a child is wrong");
                total += got;
            }
            total
        }
        let mut out = (Vec::new(), Vec::new());
        if root.page != NO_PAGE {
            let n = rec(pages, root.page, root.depth, None, None, &mut out);
            assert_eq!(n, root.count);
        } else {
            assert_eq!(root.count, 0);
        }
        out
    }

    #[test]
    fn transactions_follow_a_btreemap_and_leave_older_snapshots_whole() {
        for seed0 in 1..12u64 {
            let mut seed = seed0.wrapping_mul(0x9e37_79b9_7f4a_7c15);
            let mut pages: HashMap<u64, PageBuf> = HashMap::new();
            let mut next = 0u64;
            let mut root = Root::default();
            let mut model: BTreeMap<Vec<u8>, Vec<u8>> = BTreeMap::new();
            let mut snapshots: Vec<(Root, Model)> = Vec::new();
            let mut deepest = 0;
            for _txn in 0..60 {
                let mut t = WriteTxn::new(
                    Mem {
                        pages: &pages,
                        next: &mut next,
                        free: Vec::new(),
                        direct: HashMap::new(),
                    },
                    root,
                );
                let mut m = model.clone();
                let ops = rng(&mut seed) % 400;
                for _ in 0..ops {
                    let r = rng(&mut seed);
                    let kn = r % 3000;
                    // Some keys are long, so branches hold few and the tree grows deep.
                    // Some are longer than a page keeps whole, sharing long prefixes (the
                    // zeros of the padding), so compares read their overflow pages.
                    let w = match (r >> 20) % 8 {
                        0 => 300 + (r >> 24) as usize % 500,
                        1 => 900 + (r >> 24) as usize % 9000,
                        _ => (r >> 24) as usize % 12,
                    };
                    let key = format!("k{kn:0w$}").into_bytes();
                    // Some values are kept out of line, a few over several pages.
                    let vlen = match (r >> 44) % 16 {
                        0 => 990 + ((r >> 48) % 9000) as usize,
                        _ => ((r >> 40) % 200) as usize,
                    };
                    let val = vec![(r >> 30) as u8; vlen];
                    match (r >> 60) % 8 {
                        0..=3 => {
                            assert!(t.put(&key, &val, PutMode::Upsert).unwrap());
                            assert_eq!(t.last_put_added(), !m.contains_key(&key));
                            m.insert(key, val);
                        }
                        4 => {
                            let had = m.contains_key(&key);
                            assert_eq!(t.put(&key, &val, PutMode::Insert).unwrap(), !had);
                            m.entry(key).or_insert(val);
                        }
                        5 => {
                            let had = m.contains_key(&key);
                            assert_eq!(t.put(&key, &val, PutMode::Replace).unwrap(), had);
                            if had {
                                m.insert(key, val);
                            }
                        }
                        _ => assert_eq!(t.remove(&key).unwrap(), m.remove(&key).is_some()),
                    }
                    assert_eq!(t.get(b"k1").unwrap(), m.get(b"k1".as_slice()).cloned());
                    let probe = format!("k{}", rng(&mut seed) % 3100).into_bytes();
                    let want = m
                        .range(probe.clone()..)
                        .next()
                        .map(|(k, v)| (k.clone(), v.clone()));
                    assert_eq!(
                        t.first_ge(&probe).unwrap(),
                        want,
                        "seed {seed0}: first_ge({probe:?})"
                    );
                }
                let (store, f) = t.finish();
                let direct = store.direct;
                // Nothing a committed snapshot reads was written over, and every page
                // replaced or dropped is accounted for once.
                for off in f.written.keys() {
                    assert!(!pages.contains_key(off), "seed {seed0}: page {off} reused");
                }
                for off in &f.replaced {
                    assert!(pages.contains_key(off), "seed {seed0}: {off} not committed");
                }
                for off in direct.keys() {
                    assert!(!pages.contains_key(off), "seed {seed0}: page {off} reused");
                    assert!(
                        !f.written.contains_key(off),
                        "seed {seed0}: page {off} twice"
                    );
                }
                pages.extend(f.written);
                pages.extend(direct);
                root = f.root;
                model = m;
                let (entries, reached) = walk(&pages, root);
                assert_eq!(entries, model.clone().into_iter().collect::<Vec<_>>());
                for off in &f.replaced {
                    assert!(
                        !reached.contains(off),
                        "seed {seed0}: freed page {off} in use"
                    );
                }
                deepest = deepest.max(root.depth);
                snapshots.push((root, model.clone()));
            }
            for (r, m) in snapshots {
                let entries = walk(&pages, r).0;
                assert_eq!(entries, m.into_iter().collect::<Vec<_>>(), "seed {seed0}");
            }
            assert!(
                deepest >= 2,
                "seed {seed0}: the tree never grew two branch levels"
            );
        }
    }

    /// Every entry of a transaction's tree, by stepping with `first_ge`.
    fn entries_of<S: Pages>(t: &WriteTxn<S>) -> Entries {
        let mut out: Entries = Vec::new();
        let mut from = Vec::new();
        while let Some((k, v)) = t.first_ge(&from).unwrap() {
            from = k.clone();
            from.push(0);
            out.push((k, v));
        }
        out
    }

    #[test]
    fn savepoints_roll_back_to_their_instant_and_nest() {
        for seed0 in 1..9u64 {
            let mut seed = seed0.wrapping_mul(0x2545_f491_4f6c_dd1d);
            let mut pages: HashMap<u64, PageBuf> = HashMap::new();
            let mut next = 0u64;
            let mut root = Root::default();
            let mut model = Model::new();
            for txn in 0..25 {
                let mut t = WriteTxn::new(
                    Mem {
                        pages: &pages,
                        next: &mut next,
                        free: Vec::new(),
                        direct: HashMap::new(),
                    },
                    root,
                );
                let mut m = model.clone();
                let mut stack: Vec<Model> = Vec::new();
                for step in 0..300 {
                    let r = rng(&mut seed);
                    match r % 20 {
                        0 | 1 => {
                            t.savepoint();
                            stack.push(m.clone());
                        }
                        2 => {
                            let back = stack.pop();
                            assert_eq!(t.rollback(), back.is_some());
                            if let Some(b) = back {
                                m = b;
                            }
                        }
                        3 => assert_eq!(t.release(), stack.pop().is_some()),
                        _ => {
                            let key = format!("k{:03}", (r >> 8) % 400).into_bytes();
                            let vlen = match (r >> 20) % 8 {
                                0 => 1000 + ((r >> 24) % 6000) as usize,
                                _ => ((r >> 24) % 150) as usize,
                            };
                            if (r >> 40) % 4 == 0 {
                                assert_eq!(t.remove(&key).unwrap(), m.remove(&key).is_some());
                            } else {
                                let val = vec![(r >> 44) as u8; vlen];
                                t.put(&key, &val, PutMode::Upsert).unwrap();
                                m.insert(key, val);
                            }
                        }
                    }
                    if step % 37 == 0 {
                        assert_eq!(
                            entries_of(&t),
                            m.clone().into_iter().collect::<Vec<_>>(),
                            "seed {seed0} txn {txn} step {step}"
                        );
                    }
                }
                // Savepoints left open are kept, as a commit keeps them.
                let (store, f) = t.finish();
                let (direct, free) = (store.direct, store.free);
                for off in direct.keys().chain(f.written.keys()) {
                    assert!(!pages.contains_key(off), "seed {seed0}: page {off} reused");
                }
                pages.extend(f.written);
                pages.extend(direct);
                root = f.root;
                model = m;
                let (entries, reached) = walk(&pages, root);
                assert_eq!(
                    entries,
                    model.clone().into_iter().collect::<Vec<_>>(),
                    "seed {seed0} txn {txn}"
                );
                let unique: HashSet<u64> = reached.iter().copied().collect();
                assert_eq!(
                    unique.len(),
                    reached.len(),
                    "seed {seed0}: a page reached twice"
                );
                for off in f.replaced.iter().chain(&free) {
                    assert!(
                        !unique.contains(off),
                        "seed {seed0}: page {off} freed but in use"
                    );
                }
            }
        }
    }
}
