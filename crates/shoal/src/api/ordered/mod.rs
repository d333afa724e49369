//! Handles on ordered maps: reads of snapshots, and write transactions.

mod cursor;

pub use cursor::{CursorMoves, CursorPlace, OrderedCursor, OrderedIter, WriteCursor, WriteIter};

use crate::error::{Error, Result};
use crate::format::{MARKERS, OF_DUPS, OF_U64_KEYS};
use crate::kinds::ordered::keys;
use crate::kinds::ordered::map::{begin_many, commit_all, snapshot_many, Snap, Write};
use crate::kinds::ordered::tree::PutMode;
use crate::kinds::ordered::OrderedRef;
use crate::shared::Shared;
use crate::txn::Txn;
use std::borrow::Cow;
use std::marker::PhantomData;
use std::sync::Arc;
use std::time::Duration;

/// The most bytes of key and value together an ordered map keeps in its tree's leaf (a
/// quarter of a page, so that any page split leaves room for the entry that caused it). A
/// larger value is kept out of line, in pages of its own, and so is a key longer than
/// `MAX_ORDERED_ENTRY - 16` bytes (its leaf keeps its first 64 bytes).
pub const MAX_ORDERED_ENTRY: usize = 1000;

/// The longest key of an ordered map (16 KiB), and the longest value of a multimap.
pub const MAX_ORDERED_KEY: usize = 16 * 1024;

/// A map whose keys are kept sorted (bytewise), shared by every process that opens the
/// store: point reads, range scans and counts over consistent snapshots, and write
/// transactions that commit all or nothing. Cheap to clone.
///
/// A map created with [`OrderedOptions::u64_keys`] takes keys of 8 bytes, each a u64 in
/// little-endian order (`n.to_le_bytes()`, the conventions' `u64`), and sorts them as
/// numbers. A map created with [`OrderedOptions::duplicates`] (a multimap) keeps several
/// values per key, sorted: see each method for what it does there.
#[derive(Clone)]
pub struct OrderedMap {
    sh: Arc<Shared>,
    m: OrderedRef,
    name: Arc<str>,
    timeout: Duration,
}

impl std::fmt::Debug for OrderedMap {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("OrderedMap")
            .field("name", &self.name)
            .finish()
    }
}

impl OrderedMap {
    pub(crate) fn new(sh: Arc<Shared>, m: OrderedRef, name: &str) -> OrderedMap {
        let timeout = sh.lock_timeout;
        OrderedMap {
            sh,
            m,
            name: name.into(),
            timeout,
        }
    }

    /// The map's name.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// The options the map was created with.
    pub fn options(&self) -> OrderedOptions {
        OrderedOptions {
            u64_keys: self.m.flags & OF_U64_KEYS != 0,
            duplicates: self.m.flags & OF_DUPS != 0,
        }
    }

    fn form(&self) -> Form<'_> {
        Form {
            flags: self.m.flags,
            sh: &self.sh,
        }
    }

    fn txn(&self) -> Result<crate::txn::Op<'_>> {
        let t = crate::txn::thread_txn(&self.sh)?;
        let mut tx = crate::txn::Op::new(&self.sh, t);
        tx.timeout = self.timeout;
        Ok(tx)
    }

    /// A snapshot of the map: every read through it sees the map as of one commit, for as
    /// long as it lives, whatever writers do meanwhile (they are never blocked by it). It
    /// belongs to the thread that took it.
    pub fn snapshot(&self) -> Result<Snapshot<'_>> {
        let t = crate::txn::thread_txn(&self.sh)?;
        let snap = self.m.snapshot(&self.sh, t)?;
        Ok(Snapshot {
            map: self,
            snap,
            _thread: PhantomData,
        })
    }

    /// Starts a write transaction: its writes are seen by no one else until it commits,
    /// and all together then. One write transaction at a time per map (others wait for
    /// it, up to the store's lock timeout); readers never wait.
    pub fn write(&self) -> Result<WriteTxn<'_>> {
        let _call = crate::deadline::call();
        let op = self.txn()?;
        let w = self.m.begin(op.tx)?;
        Ok(WriteTxn {
            w: Some(w),
            markers: Vec::new(),
            saved_markers: Vec::new(),
            _section: op.section,
        })
    }

    /// The value of `key` (in a multimap, its first value).
    pub fn get(&self, key: &[u8]) -> Result<Option<Vec<u8>>> {
        let mut out = Vec::new();
        Ok(self.get_into(key, &mut out)?.then_some(out))
    }

    /// The value of `key` (in a multimap, its first value), copied into `out` (its
    /// contents replaced, its allocation reused); returns whether `key` is in the map (if
    /// not, `out`'s contents are unspecified). Takes no snapshot unless a commit lands
    /// during the lookup: the lookup reads the current tree and then checks that no
    /// commit came between.
    pub fn get_into(&self, key: &[u8], out: &mut Vec<u8>) -> Result<bool> {
        let form = self.form();
        if !form.dups() {
            if let Some(found) = self.m.get_unpinned(&self.sh, &form.key(key)?, out)? {
                return Ok(found);
            }
        }
        self.snapshot()?.get_into(key, out)
    }

    /// Whether `key` is in the map.
    pub fn contains_key(&self, key: &[u8]) -> Result<bool> {
        Ok(self.get(key)?.is_some())
    }

    /// Entries in the map (in a multimap, (key, value) pairs).
    pub fn len(&self) -> Result<u64> {
        Ok(self.snapshot()?.len())
    }

    /// Whether the map is empty.
    pub fn is_empty(&self) -> Result<bool> {
        Ok(self.len()? == 0)
    }

    fn write_one(&self, f: impl FnOnce(&mut WriteTxn<'_>) -> Result<bool>) -> Result<bool> {
        let mut w = self.write()?;
        let r = f(&mut w)?;
        if r {
            w.commit()?;
        }
        Ok(r)
    }

    /// Sets `key` to `value` (insert or replace), in a transaction of its own. In a
    /// multimap, adds the pair (`key`, `value`) beside the key's other values.
    pub fn put(&self, key: &[u8], value: &[u8]) -> Result<()> {
        self.write_one(|w| w.put(key, value).map(|_| true))
            .map(|_| ())
    }

    /// Sets `key` to `value` only if `key` is absent (has no value); returns whether it
    /// did.
    pub fn put_if_absent(&self, key: &[u8], value: &[u8]) -> Result<bool> {
        self.write_one(|w| w.put_if_absent(key, value))
    }

    /// Sets `key` to `value` only if `key` is present; returns whether it did. In a
    /// multimap, `value` replaces every value of the key.
    pub fn put_if_present(&self, key: &[u8], value: &[u8]) -> Result<bool> {
        self.write_one(|w| w.put_if_present(key, value))
    }

    /// Removes `key` (in a multimap, every value of it); returns whether it was there.
    pub fn remove(&self, key: &[u8]) -> Result<bool> {
        self.write_one(|w| w.remove(key))
    }

    /// Removes the pair (`key`, `value`) (in a map without duplicates: `key`, if its
    /// value is `value`); returns whether it was there.
    pub fn remove_value(&self, key: &[u8], value: &[u8]) -> Result<bool> {
        self.write_one(|w| w.remove_value(key, value))
    }

    /// Every value of `key`, sorted (at most one in a map without duplicates).
    pub fn get_all(&self, key: &[u8]) -> Result<Vec<Vec<u8>>> {
        self.snapshot()?.get_all(key)
    }

    /// The number of values of `key` (0 or 1 in a map without duplicates), exact, in time
    /// logarithmic in the map's size.
    pub fn count_values(&self, key: &[u8]) -> Result<u64> {
        self.snapshot()?.count_values(key)
    }

    /// The entries with `lo <= key < hi` (no bound where `None`), in key order (in a
    /// multimap, every pair of those keys, by key then value).
    pub fn range(&self, lo: Option<&[u8]>, hi: Option<&[u8]>) -> Result<Vec<(Vec<u8>, Vec<u8>)>> {
        self.snapshot()?.range(lo, hi)
    }

    /// The number of entries (in a multimap, pairs) with `lo <= key < hi`, exact, in time
    /// logarithmic in the map's size.
    pub fn count_range(&self, lo: Option<&[u8]>, hi: Option<&[u8]>) -> Result<u64> {
        self.snapshot()?.count_range(lo, hi)
    }

    /// The entry with the smallest key (in a multimap, its first value).
    pub fn first(&self) -> Result<Option<(Vec<u8>, Vec<u8>)>> {
        self.snapshot()?.first()
    }

    /// The entry with the largest key (in a multimap, its last value).
    pub fn last(&self) -> Result<Option<(Vec<u8>, Vec<u8>)>> {
        self.snapshot()?.last()
    }

    /// The number of entries with `lo <= key < hi`: libmdbx's `estimate_range`, which
    /// here is exact, from the counts the branches keep, in the time of two descents.
    pub fn estimate_range(&self, lo: Option<&[u8]>, hi: Option<&[u8]>) -> Result<u64> {
        self.count_range(lo, hi)
    }

    /// Compare-and-swap in a transaction of its own: see [`WriteTxn::compare_and_swap`].
    pub fn compare_and_swap(
        &self,
        key: &[u8],
        expected: Option<&[u8]>,
        new: Option<&[u8]>,
    ) -> Result<bool> {
        self.write_one(|w| w.compare_and_swap(key, expected, new))
    }

    /// Removes every entry with `lo <= key < hi`, in a transaction of its own; returns
    /// how many.
    pub fn remove_range(&self, lo: Option<&[u8]>, hi: Option<&[u8]>) -> Result<u64> {
        let mut w = self.write()?;
        let n = w.remove_range(lo, hi)?;
        if n > 0 {
            w.commit()?;
        }
        Ok(n)
    }

    /// The map's sequence (a persistent counter, 0 in a new map).
    pub fn map_sequence(&self) -> Result<u64> {
        Ok(self.snapshot()?.map_sequence())
    }

    /// Adds `n` to the map's sequence, in a transaction of its own; returns its value
    /// before (so that concurrent callers each get their own range of `n` numbers).
    pub fn next_sequence(&self, n: u64) -> Result<u64> {
        let mut w = self.write()?;
        let v = w.next_sequence(n)?;
        w.commit()?;
        Ok(v)
    }
}

/// Whether `i` names a marker.
pub(crate) fn check_marker(i: u64) -> Result<()> {
    if i >= MARKERS {
        return Err(Error::InvalidArgument(format!(
            "a store has {MARKERS} ordered-map markers (0 to {}), not {i}",
            MARKERS - 1
        )));
    }
    Ok(())
}

/// How an ordered map is created ([`crate::Store::ordered_map_with`]): fixed for its
/// lifetime.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct OrderedOptions {
    /// Keys are unsigned 64-bit integers, given as 8 little-endian bytes and sorted as
    /// numbers.
    pub u64_keys: bool,
    /// Several values per key (a multimap), sorted bytewise; a (key, value) pair takes
    /// the room of one entry.
    pub duplicates: bool,
}

impl OrderedOptions {
    pub(crate) fn flags(&self) -> u64 {
        (if self.u64_keys { OF_U64_KEYS } else { 0 }) | (if self.duplicates { OF_DUPS } else { 0 })
    }
}

/// How a map's keys and values become the tree's entries ([`keys`]).
#[derive(Clone, Copy)]
struct Form<'s> {
    flags: u64,
    sh: &'s Shared,
}

impl<'s> Form<'s> {
    fn of(w: &Write<'s>) -> Form<'s> {
        Form {
            flags: w.m.flags,
            sh: w.tree.store_ref().pool.tx.sh,
        }
    }

    fn dups(&self) -> bool {
        self.flags & OF_DUPS != 0
    }

    /// The tree key of `key` (in a multimap: the prefix of its pairs).
    fn key<'k>(&self, key: &'k [u8]) -> Result<Cow<'k, [u8]>> {
        let k = keys::tree_key(self.flags, key)?;
        Ok(if self.dups() {
            Cow::Owned(keys::dup_prefix(&k))
        } else {
            k
        })
    }

    /// The tree key range of `key`'s entries, `[lo, hi)`.
    fn key_span(&self, key: &[u8]) -> Result<(Vec<u8>, Vec<u8>)> {
        let lo = self.key(key)?.into_owned();
        let hi = if self.dups() {
            keys::dup_end(&lo)
        } else {
            let mut h = lo.clone();
            h.push(0);
            h
        };
        Ok((lo, hi))
    }

    /// The tree entry of (`key`, `value`), checked against the entry limit.
    fn entry<'k>(&self, key: &'k [u8], value: &'k [u8]) -> Result<(Cow<'k, [u8]>, &'k [u8])> {
        let (k, v) = if self.dups() {
            let k = keys::tree_key(self.flags, key)?;
            (Cow::Owned(keys::dup_entry(&k, value)), &[][..])
        } else {
            (keys::tree_key(self.flags, key)?, value)
        };
        if self.dups() && value.len() > MAX_ORDERED_KEY {
            return Err(Error::InvalidArgument(format!(
                "a multimap keeps values of at most {MAX_ORDERED_KEY} bytes (this one has {})",
                value.len()
            )));
        }
        if key.len() > MAX_ORDERED_KEY {
            return Err(Error::InvalidArgument(format!(
                "ordered maps keep keys of at most {MAX_ORDERED_KEY} bytes (this one has {})",
                key.len()
            )));
        }
        Ok((k, v))
    }

    fn bounds(&self, lo: Option<&[u8]>, hi: Option<&[u8]>) -> Result<Bounds> {
        Ok((
            lo.map(|k| self.key(k).map(Cow::into_owned)).transpose()?,
            hi.map(|k| self.key(k).map(Cow::into_owned)).transpose()?,
        ))
    }

    /// The user's (key, value) of the tree entry (`k`, `v`); `None` when the map's
    /// bytes need no change.
    #[inline]
    fn decode(&self, k: &[u8], v: &[u8]) -> Result<Option<(Vec<u8>, Vec<u8>)>> {
        if self.flags == 0 {
            return Ok(None);
        }
        self.decode_form(k, v)
    }

    /// [`Form::decode`] for a map whose flags change its bytes.
    fn decode_form(&self, k: &[u8], v: &[u8]) -> Result<Option<(Vec<u8>, Vec<u8>)>> {
        let bad = |what: String| self.sh.corrupt(what);
        if self.dups() {
            let (key, value) = keys::split_dup(k).map_err(bad)?;
            if !v.is_empty() {
                return Err(bad("ordered multimap entry with a value".into()));
            }
            Ok(Some((
                keys::user_key(self.flags, &key).map_err(bad)?,
                value.to_vec(),
            )))
        } else {
            Ok(Some((
                keys::user_key(self.flags, k).map_err(bad)?,
                v.to_vec(),
            )))
        }
    }

    /// The value of the tree entry (`k`, `v`).
    fn value(&self, k: &[u8], v: &[u8]) -> Result<Vec<u8>> {
        Ok(match self.decode(k, v)? {
            Some((_, v)) => v,
            None => v.to_vec(),
        })
    }
}

type Bounds = (Option<Vec<u8>>, Option<Vec<u8>>);

/// A consistent view of an ordered map ([`OrderedMap::snapshot`]).
pub struct Snapshot<'m> {
    map: &'m OrderedMap,
    snap: Snap,
    /// The pin is the taking thread's: a snapshot stays on it.
    _thread: PhantomData<*const ()>,
}

impl Snapshot<'_> {
    /// The commit this snapshot shows.
    pub fn sequence(&self) -> u64 {
        self.snap.seq
    }

    /// The map's sequence (its persistent counter) in this snapshot.
    pub fn map_sequence(&self) -> u64 {
        self.snap.map_sequence
    }

    /// The number of entries with `lo <= key < hi`: exact (see
    /// [`OrderedMap::estimate_range`]).
    pub fn estimate_range(&self, lo: Option<&[u8]>, hi: Option<&[u8]>) -> Result<u64> {
        self.count_range(lo, hi)
    }

    /// Entries in the map (in a multimap, pairs).
    pub fn len(&self) -> u64 {
        self.snap.root.count
    }

    /// Whether the map was empty.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The value of `key` (in a multimap, its first value).
    pub fn get(&self, key: &[u8]) -> Result<Option<Vec<u8>>> {
        let form = self.map.form();
        if !form.dups() {
            return self.snap.get(&self.map.sh, &form.key(key)?);
        }
        let (lo, hi) = form.key_span(key)?;
        let mut out = None;
        self.snap
            .walk(&self.map.sh, Some(&lo), Some(&hi), false, |k, v| {
                out = Some(form.value(k, v));
                false
            })?;
        out.transpose()
    }

    /// The value of `key` (in a multimap, its first value), copied into `out` (its
    /// contents replaced, its allocation reused: no allocation per get once `out` is
    /// large enough); returns whether `key` is in the map (`out` is unchanged if not).
    pub fn get_into(&self, key: &[u8], out: &mut Vec<u8>) -> Result<bool> {
        let form = self.map.form();
        if form.dups() {
            return Ok(match self.get(key)? {
                Some(v) => {
                    *out = v;
                    true
                }
                None => false,
            });
        }
        self.snap.get_into(&self.map.sh, &form.key(key)?, out)
    }

    /// Every value of `key`, sorted (at most one in a map without duplicates).
    pub fn get_all(&self, key: &[u8]) -> Result<Vec<Vec<u8>>> {
        let form = self.map.form();
        if !form.dups() {
            return Ok(self.get(key)?.into_iter().collect());
        }
        let (lo, hi) = form.key_span(key)?;
        let mut out = Vec::new();
        let mut err = None;
        self.snap
            .walk(&self.map.sh, Some(&lo), Some(&hi), false, |k, v| {
                match form.value(k, v) {
                    Ok(v) => out.push(v),
                    Err(e) => err = Some(e),
                }
                err.is_none()
            })?;
        err.map_or(Ok(out), Err)
    }

    /// The number of values of `key` (0 or 1 in a map without duplicates).
    pub fn count_values(&self, key: &[u8]) -> Result<u64> {
        let (lo, hi) = self.map.form().key_span(key)?;
        self.snap.count_range(&self.map.sh, Some(&lo), Some(&hi))
    }

    /// The entries with `lo <= key < hi`, in key order.
    pub fn range(&self, lo: Option<&[u8]>, hi: Option<&[u8]>) -> Result<Vec<(Vec<u8>, Vec<u8>)>> {
        self.collect(lo, hi, false)
    }

    /// The entries with `lo <= key < hi`, in reverse key order.
    pub fn range_rev(
        &self,
        lo: Option<&[u8]>,
        hi: Option<&[u8]>,
    ) -> Result<Vec<(Vec<u8>, Vec<u8>)>> {
        self.collect(lo, hi, true)
    }

    fn collect(
        &self,
        lo: Option<&[u8]>,
        hi: Option<&[u8]>,
        rev: bool,
    ) -> Result<Vec<(Vec<u8>, Vec<u8>)>> {
        let mut out = Vec::new();
        self.for_each(lo, hi, rev, |k, v| {
            out.push((k.to_vec(), v.to_vec()));
            true
        })?;
        Ok(out)
    }

    /// Calls `f` with each entry with `lo <= key < hi` in key order (reverse order with
    /// `rev`) until it returns false: no copies beyond the ones `f` makes (and, in a map
    /// of integer keys or a multimap, the decoding of each entry).
    pub fn for_each(
        &self,
        lo: Option<&[u8]>,
        hi: Option<&[u8]>,
        rev: bool,
        mut f: impl FnMut(&[u8], &[u8]) -> bool,
    ) -> Result<()> {
        let form = self.map.form();
        let (lo, hi) = form.bounds(lo, hi)?;
        let mut err = None;
        self.snap.walk(
            &self.map.sh,
            lo.as_deref(),
            hi.as_deref(),
            rev,
            |k, v| match form.decode(k, v) {
                Ok(None) => f(k, v),
                Ok(Some((k, v))) => f(&k, &v),
                Err(e) => {
                    err = Some(e);
                    false
                }
            },
        )?;
        err.map_or(Ok(()), Err)
    }

    /// The number of entries (in a multimap, pairs) with `lo <= key < hi`, exact.
    pub fn count_range(&self, lo: Option<&[u8]>, hi: Option<&[u8]>) -> Result<u64> {
        let (lo, hi) = self.map.form().bounds(lo, hi)?;
        self.snap
            .count_range(&self.map.sh, lo.as_deref(), hi.as_deref())
    }

    /// A cursor over this snapshot, standing on no entry until it moves.
    pub fn cursor(&self) -> OrderedCursor<'_> {
        OrderedCursor::new(self)
    }

    /// The entries with `lo <= key < hi` (no bound where `None`), one by one in key
    /// order, or from the end with `next_back` / `.rev()`.
    pub fn iter(&self, lo: Option<&[u8]>, hi: Option<&[u8]>) -> Result<OrderedIter<'_>> {
        let (lo, hi) = self.map.form().bounds(lo, hi)?;
        OrderedIter::new(self, lo, hi)
    }

    /// The entries whose key starts with `prefix`, in key order (or reversed); a map of
    /// integer keys has no prefixes (`InvalidArgument`: use [`Snapshot::iter`]).
    pub fn prefix(&self, prefix: &[u8]) -> Result<OrderedIter<'_>> {
        let (lo, hi) = cursor::prefix_bounds(&self.map.form(), prefix)?;
        OrderedIter::new(self, Some(lo), hi)
    }

    /// The first entry.
    pub fn first(&self) -> Result<Option<(Vec<u8>, Vec<u8>)>> {
        let mut out = None;
        self.for_each(None, None, false, |k, v| {
            out = Some((k.to_vec(), v.to_vec()));
            false
        })?;
        Ok(out)
    }

    /// The last entry.
    pub fn last(&self) -> Result<Option<(Vec<u8>, Vec<u8>)>> {
        let mut out = None;
        self.for_each(None, None, true, |k, v| {
            out = Some((k.to_vec(), v.to_vec()));
            false
        })?;
        Ok(out)
    }
}

impl Drop for Snapshot<'_> {
    fn drop(&mut self) {
        self.snap.release(&self.map.sh);
    }
}

/// A write transaction on an ordered map ([`OrderedMap::write`]). Dropping it without
/// [`WriteTxn::commit`] aborts it.
pub struct WriteTxn<'m> {
    w: Option<Write<'m>>,
    /// Markers this transaction sets (at its commit).
    markers: Vec<(u64, u64)>,
    /// `markers` at each open savepoint.
    saved_markers: Vec<Vec<(u64, u64)>>,
    /// Open for the transaction's life: its pages and writer lock are half a write until
    /// it ends (see `txn::section`). Dropped after `Drop::drop` has aborted it.
    _section: crate::txn::Section<'m>,
}

/// The writes of a transaction on one map, the same for [`WriteTxn`] and
/// [`MultiWriteTxn`].
mod ops {
    use super::*;

    /// Whether `key` has an entry, and the first one's value.
    fn first_of(w: &Write<'_>, form: Form<'_>, key: &[u8]) -> Result<Option<Vec<u8>>> {
        if !form.dups() {
            return w.get(&form.key(key)?);
        }
        let (lo, hi) = form.key_span(key)?;
        match w.first_ge(&lo)? {
            Some((k, v)) if k < hi => Ok(Some(form.value(&k, &v)?)),
            _ => Ok(None),
        }
    }

    pub(super) fn get(w: &Write<'_>, key: &[u8]) -> Result<Option<Vec<u8>>> {
        first_of(w, Form::of(w), key)
    }

    pub(super) fn iter<'t, 'm>(
        w: &'t Write<'m>,
        lo: Option<&[u8]>,
        hi: Option<&[u8]>,
    ) -> Result<WriteIter<'t, 'm>> {
        let (lo, hi) = Form::of(w).bounds(lo, hi)?;
        WriteIter::new(w, lo, hi)
    }

    pub(super) fn prefix<'t, 'm>(w: &'t Write<'m>, prefix: &[u8]) -> Result<WriteIter<'t, 'm>> {
        let (lo, hi) = cursor::prefix_bounds(&Form::of(w), prefix)?;
        WriteIter::new(w, Some(lo), hi)
    }

    pub(super) fn range(
        w: &Write<'_>,
        lo: Option<&[u8]>,
        hi: Option<&[u8]>,
        rev: bool,
    ) -> Result<Vec<(Vec<u8>, Vec<u8>)>> {
        let it = iter(w, lo, hi)?;
        if rev {
            it.rev().collect()
        } else {
            it.collect()
        }
    }

    pub(super) fn end(w: &Write<'_>, last: bool) -> Result<Option<(Vec<u8>, Vec<u8>)>> {
        let mut it = iter(w, None, None)?;
        if last { it.next_back() } else { it.next() }.transpose()
    }

    pub(super) fn count_range(w: &Write<'_>, lo: Option<&[u8]>, hi: Option<&[u8]>) -> Result<u64> {
        let (lo, hi) = Form::of(w).bounds(lo, hi)?;
        Ok(w.count_range(lo.as_deref(), hi.as_deref()))
    }

    pub(super) fn count_values(w: &Write<'_>, key: &[u8]) -> Result<u64> {
        let (lo, hi) = Form::of(w).key_span(key)?;
        Ok(w.count_range(Some(&lo), Some(&hi)))
    }

    pub(super) fn get_all(w: &Write<'_>, key: &[u8]) -> Result<Vec<Vec<u8>>> {
        let (lo, hi) = Form::of(w).key_span(key)?;
        WriteIter::new(w, Some(lo), Some(hi))?
            .map(|kv| kv.map(|(_, v)| v))
            .collect()
    }

    pub(super) fn put(w: &mut Write<'_>, key: &[u8], value: &[u8]) -> Result<bool> {
        let form = Form::of(w);
        let (k, v) = form.entry(key, value)?;
        if form.dups() {
            return w.put(&k, v, PutMode::Insert);
        }
        w.put(&k, v, PutMode::Upsert)?;
        Ok(w.tree.last_put_added())
    }

    pub(super) fn put_if_absent(w: &mut Write<'_>, key: &[u8], value: &[u8]) -> Result<bool> {
        let form = Form::of(w);
        let (k, v) = form.entry(key, value)?;
        if form.dups() && first_of(w, form, key)?.is_some() {
            return Ok(false);
        }
        w.put(&k, v, PutMode::Insert)
    }

    pub(super) fn put_if_present(w: &mut Write<'_>, key: &[u8], value: &[u8]) -> Result<bool> {
        let form = Form::of(w);
        let (k, v) = form.entry(key, value)?;
        if !form.dups() {
            return w.put(&k, v, PutMode::Replace);
        }
        if !remove(w, key)? {
            return Ok(false);
        }
        w.put(&k, v, PutMode::Insert)
    }

    pub(super) fn remove(w: &mut Write<'_>, key: &[u8]) -> Result<bool> {
        let form = Form::of(w);
        if !form.dups() {
            return w.remove(&form.key(key)?);
        }
        let (lo, hi) = form.key_span(key)?;
        let mut any = false;
        while let Some((k, _)) = w.first_ge(&lo)?.filter(|(k, _)| *k < hi) {
            w.remove(&k)?;
            any = true;
        }
        Ok(any)
    }

    pub(super) fn compare_and_swap(
        w: &mut Write<'_>,
        key: &[u8],
        expected: Option<&[u8]>,
        new: Option<&[u8]>,
    ) -> Result<bool> {
        let form = Form::of(w);
        if form.dups() {
            return Err(Error::InvalidArgument(
                "compare-and-swap needs one value per key; in a multimap use put and \
                 remove_value in one transaction"
                    .into(),
            ));
        }
        if let Some(v) = new {
            form.entry(key, v)?;
        }
        let k = form.key(key)?;
        if w.get(&k)?.as_deref() != expected {
            return Ok(false);
        }
        match new {
            Some(v) => w.put(&k, v, PutMode::Upsert)?,
            None => w.remove(&k)?,
        };
        Ok(true)
    }

    pub(super) fn remove_range(
        w: &mut Write<'_>,
        lo: Option<&[u8]>,
        hi: Option<&[u8]>,
    ) -> Result<u64> {
        let (lo, hi) = Form::of(w).bounds(lo, hi)?;
        let start = lo.unwrap_or_default();
        let mut n = 0;
        while let Some((k, _)) = w
            .first_ge(&start)?
            .filter(|(k, _)| hi.as_ref().is_none_or(|h| k < h))
        {
            w.remove(&k)?;
            n += 1;
        }
        Ok(n)
    }

    pub(super) fn append(w: &mut Write<'_>, key: &[u8], value: &[u8]) -> Result<()> {
        let (k, v) = Form::of(w).entry(key, value)?;
        if !w.append(&k, v)? {
            return Err(Error::InvalidArgument(format!(
                "append takes keys in increasing order (in a multimap, pairs): this {} is not \
                 above the map's last",
                if Form::of(w).dups() { "pair" } else { "key" }
            )));
        }
        Ok(())
    }

    pub(super) fn set_marker(markers: &mut Vec<(u64, u64)>, i: u64, v: u64) -> Result<()> {
        check_marker(i)?;
        markers.retain(|(j, _)| *j != i);
        markers.push((i, v));
        Ok(())
    }

    pub(super) fn remove_value(w: &mut Write<'_>, key: &[u8], value: &[u8]) -> Result<bool> {
        let form = Form::of(w);
        if form.dups() {
            let (k, _) = form.entry(key, value)?;
            return w.remove(&k);
        }
        let k = form.key(key)?;
        if w.get(&k)?.as_deref() != Some(value) {
            return Ok(false);
        }
        w.remove(&k)
    }
}

impl<'m> WriteTxn<'m> {
    fn w(&mut self) -> &mut Write<'m> {
        self.w.as_mut().expect("a live transaction")
    }

    /// Sets `key` to `value`; returns whether the key was new. In a multimap, adds the
    /// pair; returns whether the pair was new.
    pub fn put(&mut self, key: &[u8], value: &[u8]) -> Result<bool> {
        ops::put(self.w(), key, value)
    }

    /// Sets `key` to `value` if `key` is absent (has no value); returns whether it did.
    pub fn put_if_absent(&mut self, key: &[u8], value: &[u8]) -> Result<bool> {
        ops::put_if_absent(self.w(), key, value)
    }

    /// Sets `key` to `value` if `key` is present; returns whether it did. In a multimap,
    /// `value` replaces every value of the key.
    pub fn put_if_present(&mut self, key: &[u8], value: &[u8]) -> Result<bool> {
        ops::put_if_present(self.w(), key, value)
    }

    /// Removes `key` (in a multimap, every value of it); returns whether it was there.
    pub fn remove(&mut self, key: &[u8]) -> Result<bool> {
        ops::remove(self.w(), key)
    }

    /// Removes the pair (`key`, `value`) (in a map without duplicates: `key`, if its
    /// value is `value`); returns whether it was there.
    pub fn remove_value(&mut self, key: &[u8], value: &[u8]) -> Result<bool> {
        ops::remove_value(self.w(), key, value)
    }

    /// The value of `key` (in a multimap, its first value) as this transaction has it.
    pub fn get(&self, key: &[u8]) -> Result<Option<Vec<u8>>> {
        ops::get(self.w.as_ref().expect("a live transaction"), key)
    }

    fn r(&self) -> &Write<'m> {
        self.w.as_ref().expect("a live transaction")
    }

    /// A cursor over the map as this transaction has it (its own writes included),
    /// standing on no entry until it moves: see [`WriteCursor`]. The transaction writes
    /// only through the cursor while the cursor lives.
    pub fn cursor(&mut self) -> WriteCursor<'_, 'm> {
        WriteCursor::new(self.w(), None).expect("a cursor on no entry finds nothing to read")
    }

    /// A cursor taken up again where [`WriteCursor::into_place`] left it, after any
    /// writes since: on its entry as they left it, or in the gap they left (see
    /// [`WriteCursor`]). A place of another map is `InvalidArgument`.
    pub fn cursor_at(&mut self, place: CursorPlace) -> Result<WriteCursor<'_, 'm>> {
        WriteCursor::new(self.w(), Some(place))
    }

    /// The entries with `lo <= key < hi` (no bound where `None`) as this transaction has
    /// them, one by one in key order, or from the end with `next_back` / `.rev()`.
    pub fn iter(&self, lo: Option<&[u8]>, hi: Option<&[u8]>) -> Result<WriteIter<'_, 'm>> {
        ops::iter(self.r(), lo, hi)
    }

    /// The entries whose key starts with `prefix`, as this transaction has them; see
    /// [`Snapshot::prefix`].
    pub fn prefix(&self, prefix: &[u8]) -> Result<WriteIter<'_, 'm>> {
        ops::prefix(self.r(), prefix)
    }

    /// The entries with `lo <= key < hi` as this transaction has them, in key order.
    pub fn range(&self, lo: Option<&[u8]>, hi: Option<&[u8]>) -> Result<Vec<(Vec<u8>, Vec<u8>)>> {
        ops::range(self.r(), lo, hi, false)
    }

    /// The entries with `lo <= key < hi` as this transaction has them, in reverse key
    /// order.
    pub fn range_rev(
        &self,
        lo: Option<&[u8]>,
        hi: Option<&[u8]>,
    ) -> Result<Vec<(Vec<u8>, Vec<u8>)>> {
        ops::range(self.r(), lo, hi, true)
    }

    /// The first entry as this transaction has it.
    pub fn first(&self) -> Result<Option<(Vec<u8>, Vec<u8>)>> {
        ops::end(self.r(), false)
    }

    /// The last entry as this transaction has it.
    pub fn last(&self) -> Result<Option<(Vec<u8>, Vec<u8>)>> {
        ops::end(self.r(), true)
    }

    /// The number of entries (in a multimap, pairs) with `lo <= key < hi` as this
    /// transaction has them, exact, in time logarithmic in the map's size.
    pub fn count_range(&self, lo: Option<&[u8]>, hi: Option<&[u8]>) -> Result<u64> {
        ops::count_range(self.r(), lo, hi)
    }

    /// Entries in the map (in a multimap, pairs) as this transaction has it.
    pub fn len(&self) -> u64 {
        self.r().len()
    }

    /// Whether the map is empty as this transaction has it.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Every value of `key` as this transaction has them, sorted.
    pub fn get_all(&self, key: &[u8]) -> Result<Vec<Vec<u8>>> {
        ops::get_all(self.r(), key)
    }

    /// The number of values of `key` as this transaction has them.
    pub fn count_values(&self, key: &[u8]) -> Result<u64> {
        ops::count_values(self.r(), key)
    }

    /// If the value of `key` is `expected` (`None`: absent), sets it to `new` (`None`:
    /// removes it) and returns true; else changes nothing and returns false. Not in a
    /// multimap (`InvalidArgument`).
    pub fn compare_and_swap(
        &mut self,
        key: &[u8],
        expected: Option<&[u8]>,
        new: Option<&[u8]>,
    ) -> Result<bool> {
        ops::compare_and_swap(self.w(), key, expected, new)
    }

    /// Removes every entry with `lo <= key < hi` (no bound where `None`); returns how
    /// many it removed.
    pub fn remove_range(&mut self, lo: Option<&[u8]>, hi: Option<&[u8]>) -> Result<u64> {
        ops::remove_range(self.w(), lo, hi)
    }

    /// Adds `key` → `value` past the map's largest key (in a multimap, past its largest
    /// pair): a sorted bulk load, which fills pages to the brim instead of splitting them
    /// in halves. A key not above the largest is `InvalidArgument`, and the transaction
    /// stays usable.
    pub fn append(&mut self, key: &[u8], value: &[u8]) -> Result<()> {
        ops::append(self.w(), key, value)
    }

    /// The map's sequence (a persistent counter, 0 in a new map) as this transaction has
    /// it, then adds `n` to it: the transaction's commit keeps the sum, an abort drops it.
    pub fn next_sequence(&mut self, n: u64) -> Result<u64> {
        self.w().next_sequence(n)
    }

    /// Sets the store's marker `i` (below [`MARKERS`]) to `v` at this transaction's commit
    /// (see [`crate::Store::ordered_marker`]).
    pub fn set_marker(&mut self, i: u64, v: u64) -> Result<()> {
        ops::set_marker(&mut self.markers, i, v)
    }

    /// A nested transaction (libmdbx's nested transactions, a savepoint): its writes join
    /// this transaction when it commits, and are undone, as if never made, when it aborts
    /// or is dropped. Nested ones nest again.
    pub fn nested(&mut self) -> Nested<'_, Self> {
        nest::Sealed::open(self);
        Nested {
            txn: self,
            open: true,
        }
    }

    /// Commits every write of the transaction at once; returns the commit's sequence
    /// number.
    pub fn commit(mut self) -> Result<u64> {
        self.w
            .take()
            .expect("a live transaction")
            .commit(&self.markers)
    }

    /// Drops every write of the transaction.
    pub fn abort(mut self) {
        if let Some(w) = self.w.take() {
            w.abort();
        }
    }
}

impl Drop for WriteTxn<'_> {
    fn drop(&mut self) {
        if let Some(w) = self.w.take() {
            w.abort();
        }
    }
}

/// A write transaction over several ordered maps of one store
/// ([`OrderedMap::write_with`]): its writes to all of them are seen together, by every
/// reader, or (aborted, or its writer killed) not at all.
pub struct MultiWriteTxn<'m> {
    tx: Txn<'m>,
    parts: Vec<Write<'m>>,
    markers: Vec<(u64, u64)>,
    saved_markers: Vec<Vec<(u64, u64)>>,
    /// Open for the transaction's life, as [`WriteTxn`]'s.
    _section: crate::txn::Section<'m>,
}

fn not_in_txn(map: &OrderedMap) -> Error {
    Error::InvalidArgument(format!(
        "ordered map {:?} is not in this transaction",
        map.name
    ))
}

impl<'m> MultiWriteTxn<'m> {
    fn part(&mut self, map: &OrderedMap) -> Result<&mut Write<'m>> {
        self.parts
            .iter_mut()
            .find(|w| w.m.id == map.m.id && w.m.cat_word == map.m.cat_word)
            .ok_or_else(|| not_in_txn(map))
    }

    fn part_ref(&self, map: &OrderedMap) -> Result<&Write<'m>> {
        self.parts
            .iter()
            .find(|w| w.m.id == map.m.id && w.m.cat_word == map.m.cat_word)
            .ok_or_else(|| not_in_txn(map))
    }

    /// A cursor over `map` as this transaction has it: see [`WriteTxn::cursor`].
    pub fn cursor(&mut self, map: &OrderedMap) -> Result<WriteCursor<'_, 'm>> {
        WriteCursor::new(self.part(map)?, None)
    }

    /// A cursor on `map` taken up again where it was left: see [`WriteTxn::cursor_at`].
    pub fn cursor_at(
        &mut self,
        map: &OrderedMap,
        place: CursorPlace,
    ) -> Result<WriteCursor<'_, 'm>> {
        WriteCursor::new(self.part(map)?, Some(place))
    }

    /// The entries of `map` with `lo <= key < hi` as this transaction has them: see
    /// [`WriteTxn::iter`].
    pub fn iter(
        &self,
        map: &OrderedMap,
        lo: Option<&[u8]>,
        hi: Option<&[u8]>,
    ) -> Result<WriteIter<'_, 'm>> {
        ops::iter(self.part_ref(map)?, lo, hi)
    }

    /// The entries of `map` whose key starts with `prefix`: see [`WriteTxn::prefix`].
    pub fn prefix(&self, map: &OrderedMap, prefix: &[u8]) -> Result<WriteIter<'_, 'm>> {
        ops::prefix(self.part_ref(map)?, prefix)
    }

    /// The entries of `map` with `lo <= key < hi`, in key order: see [`WriteTxn::range`].
    pub fn range(
        &self,
        map: &OrderedMap,
        lo: Option<&[u8]>,
        hi: Option<&[u8]>,
    ) -> Result<Vec<(Vec<u8>, Vec<u8>)>> {
        ops::range(self.part_ref(map)?, lo, hi, false)
    }

    /// The entries of `map` with `lo <= key < hi`, in reverse key order.
    pub fn range_rev(
        &self,
        map: &OrderedMap,
        lo: Option<&[u8]>,
        hi: Option<&[u8]>,
    ) -> Result<Vec<(Vec<u8>, Vec<u8>)>> {
        ops::range(self.part_ref(map)?, lo, hi, true)
    }

    /// The first entry of `map` as this transaction has it.
    pub fn first(&self, map: &OrderedMap) -> Result<Option<(Vec<u8>, Vec<u8>)>> {
        ops::end(self.part_ref(map)?, false)
    }

    /// The last entry of `map` as this transaction has it.
    pub fn last(&self, map: &OrderedMap) -> Result<Option<(Vec<u8>, Vec<u8>)>> {
        ops::end(self.part_ref(map)?, true)
    }

    /// The number of entries of `map` with `lo <= key < hi`: see
    /// [`WriteTxn::count_range`].
    pub fn count_range(
        &self,
        map: &OrderedMap,
        lo: Option<&[u8]>,
        hi: Option<&[u8]>,
    ) -> Result<u64> {
        ops::count_range(self.part_ref(map)?, lo, hi)
    }

    /// Entries in `map` as this transaction has it.
    pub fn len(&self, map: &OrderedMap) -> Result<u64> {
        Ok(self.part_ref(map)?.len())
    }

    /// Every value of `key` in `map` as this transaction has them, sorted.
    pub fn get_all(&self, map: &OrderedMap, key: &[u8]) -> Result<Vec<Vec<u8>>> {
        ops::get_all(self.part_ref(map)?, key)
    }

    /// The number of values of `key` in `map` as this transaction has them.
    pub fn count_values(&self, map: &OrderedMap, key: &[u8]) -> Result<u64> {
        ops::count_values(self.part_ref(map)?, key)
    }

    /// Sets `key` to `value` in `map`; returns whether the key (in a multimap, the pair)
    /// was new. See [`WriteTxn::put`].
    pub fn put(&mut self, map: &OrderedMap, key: &[u8], value: &[u8]) -> Result<bool> {
        ops::put(self.part(map)?, key, value)
    }

    /// Sets `key` to `value` in `map` if `key` is absent; returns whether it did.
    pub fn put_if_absent(&mut self, map: &OrderedMap, key: &[u8], value: &[u8]) -> Result<bool> {
        ops::put_if_absent(self.part(map)?, key, value)
    }

    /// Sets `key` to `value` in `map` if `key` is present; returns whether it did. See
    /// [`WriteTxn::put_if_present`].
    pub fn put_if_present(&mut self, map: &OrderedMap, key: &[u8], value: &[u8]) -> Result<bool> {
        ops::put_if_present(self.part(map)?, key, value)
    }

    /// Removes `key` (in a multimap, every value of it) from `map`; returns whether it was
    /// there.
    pub fn remove(&mut self, map: &OrderedMap, key: &[u8]) -> Result<bool> {
        ops::remove(self.part(map)?, key)
    }

    /// Removes the pair (`key`, `value`) from `map`; see [`WriteTxn::remove_value`].
    pub fn remove_value(&mut self, map: &OrderedMap, key: &[u8], value: &[u8]) -> Result<bool> {
        ops::remove_value(self.part(map)?, key, value)
    }

    /// The value of `key` in `map` as this transaction has it (in a multimap, its first
    /// value).
    pub fn get(&mut self, map: &OrderedMap, key: &[u8]) -> Result<Option<Vec<u8>>> {
        ops::get(self.part(map)?, key)
    }

    /// Compare-and-swap of `key` in `map`: see [`WriteTxn::compare_and_swap`].
    pub fn compare_and_swap(
        &mut self,
        map: &OrderedMap,
        key: &[u8],
        expected: Option<&[u8]>,
        new: Option<&[u8]>,
    ) -> Result<bool> {
        ops::compare_and_swap(self.part(map)?, key, expected, new)
    }

    /// Removes every entry of `map` with `lo <= key < hi`; returns how many.
    pub fn remove_range(
        &mut self,
        map: &OrderedMap,
        lo: Option<&[u8]>,
        hi: Option<&[u8]>,
    ) -> Result<u64> {
        ops::remove_range(self.part(map)?, lo, hi)
    }

    /// Appends `key` → `value` past `map`'s largest key: see [`WriteTxn::append`].
    pub fn append(&mut self, map: &OrderedMap, key: &[u8], value: &[u8]) -> Result<()> {
        ops::append(self.part(map)?, key, value)
    }

    /// `map`'s sequence, then adds `n` to it: see [`WriteTxn::next_sequence`].
    pub fn next_sequence(&mut self, map: &OrderedMap, n: u64) -> Result<u64> {
        self.part(map)?.next_sequence(n)
    }

    /// Sets the store's marker `i` to `v` at the commit: see [`WriteTxn::set_marker`].
    pub fn set_marker(&mut self, i: u64, v: u64) -> Result<()> {
        ops::set_marker(&mut self.markers, i, v)
    }

    /// A nested transaction over the same maps: see [`WriteTxn::nested`].
    pub fn nested(&mut self) -> Nested<'_, Self> {
        nest::Sealed::open(self);
        Nested {
            txn: self,
            open: true,
        }
    }

    /// Commits every write, to every map, at once; returns the commit's sequence number.
    pub fn commit(mut self) -> Result<u64> {
        let parts = std::mem::take(&mut self.parts);
        commit_all(&self.tx, parts, &self.markers)
    }

    /// Drops every write of the transaction.
    pub fn abort(self) {}
}

impl Drop for MultiWriteTxn<'_> {
    fn drop(&mut self) {
        for w in self.parts.drain(..) {
            w.abort();
        }
    }
}

impl OrderedMap {
    /// Starts a write transaction over this map and `others` (ordered maps of the same
    /// store): see [`MultiWriteTxn`]. The maps' writer locks are taken in one global
    /// order, so transactions over overlapping sets of maps never deadlock.
    pub fn write_with<'m>(&'m self, others: &[&'m OrderedMap]) -> Result<MultiWriteTxn<'m>> {
        let _call = crate::deadline::call();
        self.same_store(others)?;
        let op = self.txn()?;
        let mut refs = vec![self.m];
        refs.extend(others.iter().map(|o| o.m));
        let parts = begin_many(op.tx, &refs)?;
        Ok(MultiWriteTxn {
            tx: op.tx,
            parts,
            markers: Vec::new(),
            saved_markers: Vec::new(),
            _section: op.section,
        })
    }

    fn same_store(&self, others: &[&OrderedMap]) -> Result<()> {
        match others.iter().find(|o| o.sh.id != self.sh.id) {
            Some(o) => Err(Error::InvalidArgument(format!(
                "ordered map {:?} belongs to another store handle",
                o.name
            ))),
            None => Ok(()),
        }
    }

    /// Snapshots of this map and of `others` (ordered maps of the same store), all as of
    /// one commit: a transaction over several of them is in all of these snapshots or in
    /// none. The first is this map's.
    pub fn snapshot_with<'m>(&'m self, others: &[&'m OrderedMap]) -> Result<Vec<Snapshot<'m>>> {
        self.same_store(others)?;
        let t = crate::txn::thread_txn(&self.sh)?;
        let mut maps = vec![self];
        maps.extend_from_slice(others);
        let refs: Vec<OrderedRef> = maps.iter().map(|m| m.m).collect();
        let snaps = snapshot_many(&self.sh, t, &refs)?;
        Ok(maps
            .into_iter()
            .zip(snaps)
            .map(|(map, snap)| Snapshot {
                map,
                snap,
                _thread: PhantomData,
            })
            .collect())
    }
}

mod nest {
    /// How a transaction opens and closes a savepoint: sealed, so that only this crate's
    /// write transactions nest.
    pub trait Sealed {
        fn open(&mut self);
        fn close(&mut self, keep: bool);
    }
}

/// A write transaction that nests ([`WriteTxn::nested`], [`MultiWriteTxn::nested`]).
pub trait Nestable: nest::Sealed {}

impl nest::Sealed for WriteTxn<'_> {
    fn open(&mut self) {
        if let Some(w) = self.w.as_mut() {
            w.savepoint();
        }
        self.saved_markers.push(self.markers.clone());
    }
    fn close(&mut self, keep: bool) {
        if let Some(w) = self.w.as_mut() {
            w.close_savepoint(keep);
        }
        if let Some(m) = self.saved_markers.pop() {
            if !keep {
                self.markers = m;
            }
        }
    }
}

impl Nestable for WriteTxn<'_> {}

impl nest::Sealed for MultiWriteTxn<'_> {
    fn open(&mut self) {
        for w in &mut self.parts {
            w.savepoint();
        }
        self.saved_markers.push(self.markers.clone());
    }
    fn close(&mut self, keep: bool) {
        for w in &mut self.parts {
            w.close_savepoint(keep);
        }
        if let Some(m) = self.saved_markers.pop() {
            if !keep {
                self.markers = m;
            }
        }
    }
}

impl Nestable for MultiWriteTxn<'_> {}

/// A transaction nested in another ([`WriteTxn::nested`]): it reads and writes as its
/// parent does (it dereferences to it), and its writes stay the parent's when it commits
/// or go when it aborts or is dropped. The parent is borrowed until then.
pub struct Nested<'t, T: Nestable> {
    txn: &'t mut T,
    open: bool,
}

impl<T: Nestable> Nested<'_, T> {
    /// Keeps this nested transaction's writes in its parent.
    pub fn commit(mut self) {
        self.open = false;
        self.txn.close(true);
    }

    /// Undoes this nested transaction's writes (as dropping it does).
    pub fn abort(self) {}
}

impl<T: Nestable> std::ops::Deref for Nested<'_, T> {
    type Target = T;
    fn deref(&self) -> &T {
        self.txn
    }
}

impl<T: Nestable> std::ops::DerefMut for Nested<'_, T> {
    fn deref_mut(&mut self) -> &mut T {
        self.txn
    }
}

impl<T: Nestable> Drop for Nested<'_, T> {
    fn drop(&mut self) {
        if self.open {
            self.txn.close(false);
        }
    }
}
