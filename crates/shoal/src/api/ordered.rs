//! Handles on ordered maps: reads of snapshots, and write transactions.

use crate::error::{Error, Result};
use crate::kinds::ordered::map::{begin_many, commit_all, snapshot_many, Snap, Write};
use crate::kinds::ordered::tree::PutMode;
use crate::kinds::ordered::OrderedRef;
use crate::shared::Shared;
use crate::txn::Txn;
use std::marker::PhantomData;
use std::sync::Arc;
use std::time::Duration;

/// The most bytes of key and value together an ordered map keeps in one entry (a
/// quarter of a page, so that any page split leaves room for the entry that caused it).
pub const MAX_ORDERED_ENTRY: usize = 1000;

/// A map whose keys are kept sorted (bytewise), shared by every process that opens the
/// store: point reads, range scans and counts over consistent snapshots, and write
/// transactions that commit all or nothing. Cheap to clone.
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

    fn txn(&self) -> Result<Txn<'_>> {
        let t = crate::txn::thread_txn(&self.sh)?;
        let mut tx = Txn::new(&self.sh, t);
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
        let tx = self.txn()?;
        let w = self.m.begin(tx)?;
        Ok(WriteTxn { w: Some(w) })
    }

    /// The value of `key`.
    pub fn get(&self, key: &[u8]) -> Result<Option<Vec<u8>>> {
        let mut out = Vec::new();
        Ok(self.get_into(key, &mut out)?.then_some(out))
    }

    /// The value of `key`, copied into `out` (its contents replaced, its allocation
    /// reused); returns whether `key` is in the map (if not, `out`'s contents are
    /// unspecified). Takes no snapshot unless a commit lands during the lookup: the
    /// lookup reads the current tree and then checks that no commit came between.
    pub fn get_into(&self, key: &[u8], out: &mut Vec<u8>) -> Result<bool> {
        if let Some(found) = self.m.get_unpinned(&self.sh, key, out)? {
            return Ok(found);
        }
        self.snapshot()?.get_into(key, out)
    }

    /// Whether `key` is in the map.
    pub fn contains_key(&self, key: &[u8]) -> Result<bool> {
        Ok(self.get(key)?.is_some())
    }

    /// Entries in the map.
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

    /// Sets `key` to `value` (insert or replace), in a transaction of its own.
    pub fn put(&self, key: &[u8], value: &[u8]) -> Result<()> {
        self.write_one(|w| w.put(key, value).map(|_| true))
            .map(|_| ())
    }

    /// Sets `key` to `value` only if `key` is absent; returns whether it did.
    pub fn put_if_absent(&self, key: &[u8], value: &[u8]) -> Result<bool> {
        self.write_one(|w| w.put_if_absent(key, value))
    }

    /// Sets `key` to `value` only if `key` is present; returns whether it did.
    pub fn put_if_present(&self, key: &[u8], value: &[u8]) -> Result<bool> {
        self.write_one(|w| w.put_if_present(key, value))
    }

    /// Removes `key`; returns whether it was there.
    pub fn remove(&self, key: &[u8]) -> Result<bool> {
        self.write_one(|w| w.remove(key))
    }

    /// The entries with `lo <= key < hi` (no bound where `None`), in key order.
    pub fn range(&self, lo: Option<&[u8]>, hi: Option<&[u8]>) -> Result<Vec<(Vec<u8>, Vec<u8>)>> {
        self.snapshot()?.range(lo, hi)
    }

    /// The number of entries with `lo <= key < hi`, exact, in time logarithmic in the
    /// map's size.
    pub fn count_range(&self, lo: Option<&[u8]>, hi: Option<&[u8]>) -> Result<u64> {
        self.snapshot()?.count_range(lo, hi)
    }
}

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

    /// Entries in the map.
    pub fn len(&self) -> u64 {
        self.snap.root.count
    }

    /// Whether the map was empty.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The value of `key`.
    pub fn get(&self, key: &[u8]) -> Result<Option<Vec<u8>>> {
        self.snap.get(&self.map.sh, key)
    }

    /// The value of `key`, copied into `out` (its contents replaced, its allocation
    /// reused: no allocation per get once `out` is large enough); returns whether `key`
    /// is in the map (`out` is unchanged if not).
    pub fn get_into(&self, key: &[u8], out: &mut Vec<u8>) -> Result<bool> {
        self.snap.get_into(&self.map.sh, key, out)
    }

    /// The entries with `lo <= key < hi`, in key order.
    pub fn range(&self, lo: Option<&[u8]>, hi: Option<&[u8]>) -> Result<Vec<(Vec<u8>, Vec<u8>)>> {
        let mut out = Vec::new();
        self.snap.walk(&self.map.sh, lo, hi, false, |k, v| {
            out.push((k.to_vec(), v.to_vec()));
            true
        })?;
        Ok(out)
    }

    /// The entries with `lo <= key < hi`, in reverse key order.
    pub fn range_rev(
        &self,
        lo: Option<&[u8]>,
        hi: Option<&[u8]>,
    ) -> Result<Vec<(Vec<u8>, Vec<u8>)>> {
        let mut out = Vec::new();
        self.snap.walk(&self.map.sh, lo, hi, true, |k, v| {
            out.push((k.to_vec(), v.to_vec()));
            true
        })?;
        Ok(out)
    }

    /// Calls `f` with each entry with `lo <= key < hi` in key order (reverse order with
    /// `rev`) until it returns false: no copies beyond the ones `f` makes.
    pub fn for_each(
        &self,
        lo: Option<&[u8]>,
        hi: Option<&[u8]>,
        rev: bool,
        f: impl FnMut(&[u8], &[u8]) -> bool,
    ) -> Result<()> {
        self.snap.walk(&self.map.sh, lo, hi, rev, f)
    }

    /// The number of entries with `lo <= key < hi`, exact.
    pub fn count_range(&self, lo: Option<&[u8]>, hi: Option<&[u8]>) -> Result<u64> {
        self.snap.count_range(&self.map.sh, lo, hi)
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
}

fn check_sizes(key: &[u8], value: &[u8]) -> Result<()> {
    if key.len() + value.len() > MAX_ORDERED_ENTRY {
        return Err(Error::InvalidArgument(format!(
            "ordered maps keep at most {MAX_ORDERED_ENTRY} bytes of key and value together \
             (this key has {}, this value {})",
            key.len(),
            value.len()
        )));
    }
    Ok(())
}

impl<'m> WriteTxn<'m> {
    fn w(&mut self) -> &mut Write<'m> {
        self.w.as_mut().expect("a live transaction")
    }

    /// Sets `key` to `value`; returns whether the key was new.
    pub fn put(&mut self, key: &[u8], value: &[u8]) -> Result<bool> {
        check_sizes(key, value)?;
        let had = self.get(key).is_some();
        self.w().put(key, value, PutMode::Upsert)?;
        Ok(!had)
    }

    /// Sets `key` to `value` if `key` is absent; returns whether it did.
    pub fn put_if_absent(&mut self, key: &[u8], value: &[u8]) -> Result<bool> {
        check_sizes(key, value)?;
        self.w().put(key, value, PutMode::Insert)
    }

    /// Sets `key` to `value` if `key` is present; returns whether it did.
    pub fn put_if_present(&mut self, key: &[u8], value: &[u8]) -> Result<bool> {
        check_sizes(key, value)?;
        self.w().put(key, value, PutMode::Replace)
    }

    /// Removes `key`; returns whether it was there.
    pub fn remove(&mut self, key: &[u8]) -> Result<bool> {
        self.w().remove(key)
    }

    /// The value of `key` as this transaction has it.
    pub fn get(&self, key: &[u8]) -> Option<Vec<u8>> {
        self.w.as_ref().expect("a live transaction").get(key)
    }

    /// Commits every write of the transaction at once; returns the commit's sequence
    /// number.
    pub fn commit(mut self) -> Result<u64> {
        self.w.take().expect("a live transaction").commit()
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
}

impl<'m> MultiWriteTxn<'m> {
    fn part(&mut self, map: &OrderedMap) -> Result<&mut Write<'m>> {
        self.parts
            .iter_mut()
            .find(|w| w.m.id == map.m.id && w.m.cat_word == map.m.cat_word)
            .ok_or_else(|| {
                Error::InvalidArgument(format!(
                    "ordered map {:?} is not in this transaction",
                    map.name
                ))
            })
    }

    /// Sets `key` to `value` in `map`; returns whether the key was new.
    pub fn put(&mut self, map: &OrderedMap, key: &[u8], value: &[u8]) -> Result<bool> {
        check_sizes(key, value)?;
        let w = self.part(map)?;
        let had = w.get(key).is_some();
        w.put(key, value, PutMode::Upsert)?;
        Ok(!had)
    }

    /// Sets `key` to `value` in `map` if `key` is absent; returns whether it did.
    pub fn put_if_absent(&mut self, map: &OrderedMap, key: &[u8], value: &[u8]) -> Result<bool> {
        check_sizes(key, value)?;
        self.part(map)?.put(key, value, PutMode::Insert)
    }

    /// Sets `key` to `value` in `map` if `key` is present; returns whether it did.
    pub fn put_if_present(&mut self, map: &OrderedMap, key: &[u8], value: &[u8]) -> Result<bool> {
        check_sizes(key, value)?;
        self.part(map)?.put(key, value, PutMode::Replace)
    }

    /// Removes `key` from `map`; returns whether it was there.
    pub fn remove(&mut self, map: &OrderedMap, key: &[u8]) -> Result<bool> {
        self.part(map)?.remove(key)
    }

    /// The value of `key` in `map` as this transaction has it.
    pub fn get(&mut self, map: &OrderedMap, key: &[u8]) -> Result<Option<Vec<u8>>> {
        Ok(self.part(map)?.get(key))
    }

    /// Commits every write, to every map, at once; returns the commit's sequence number.
    pub fn commit(mut self) -> Result<u64> {
        let parts = std::mem::take(&mut self.parts);
        commit_all(&self.tx, parts)
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
        let tx = self.txn()?;
        let mut refs = vec![self.m];
        refs.extend(others.iter().map(|o| o.m));
        let parts = begin_many(tx, &refs)?;
        Ok(MultiWriteTxn { tx, parts })
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
