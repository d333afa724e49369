//! `FixedMap`: the public handle on a fixed-size map.

use crate::deadline::Wait;
use crate::error::{Error, Result};
use crate::format::*;
use crate::hashmap::{self, STAGE};
use crate::kinds::fixed::*;
use crate::shared::Shared;

use std::sync::atomic::Ordering::*;
use std::time::Duration;

use crate::api::map::PutOutcome;
use std::sync::Arc;

/// Options for creating a fixed-size map ([`Store::fixed_map_with`](crate::Store::fixed_map_with)).
#[derive(Clone, Debug, Default)]
pub struct FixedOptions {
    /// Main buckets per segment; 0 (the default) chooses segments of about 8 KiB. Small
    /// segments fill and grow (move groups, or split in stores of format version 6) more
    /// often (useful in tests).
    pub segment_buckets: u32,
    /// Stash buckets per segment; 0 (the default) chooses a twelfth of the buckets (a
    /// sixteenth in stores of format version 6).
    pub stash_buckets: u32,
    /// The key type to record in the map when it is created (see
    /// [`DataType`](crate::DataType)); an existing map that recorded another is
    /// `InvalidArgument`. The numbers (`I64`, `U64`, `F64`) need 8-byte keys.
    pub key_type: Option<crate::DataType>,
    /// The value type to record, as `key_type`. The numbers need 8-byte values.
    pub value_type: Option<crate::DataType>,
}

/// A named map whose keys all have one size and whose values all have one size, stored
/// as fixed-size cells in the index buckets themselves: no records, no per-entry lengths
/// or offsets, values updated in place. With `key_size + value_size <= 16` (u64 → u64
/// counters, u32 → u32 ids) it is an *inline* map: a lookup reads one bucket (one cache
/// line for cells of up to 8 bytes, an aligned pair of lines up to 16) and nothing else.
///
/// Created with [`Store::fixed_map`](crate::Store::fixed_map). All methods take `&self`;
/// a `FixedMap` is `Send + Sync` and cheap to clone. A key or value of the wrong size is
/// [`Error::InvalidArgument`]. Reads never lock and never write; writes lock one segment;
/// [`FixedMap::add`] on a present key with 8-byte values takes no lock at all.
#[derive(Clone)]
pub struct FixedMap {
    pub(crate) sh: Arc<Shared>,
    pub(crate) f: FixedRef,
    pub(crate) name: Arc<str>,
}

/// Figures about one fixed-size map (see [`FixedMap::stats`]).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct FixedStats {
    /// Entries in the map.
    pub entries: u64,
    /// Key size in bytes.
    pub key_size: u64,
    /// Value size in bytes.
    pub value_size: u64,
    /// Bytes per cell (key, padding, value).
    pub cell_bytes: u64,
    /// Bytes per bucket.
    pub bucket_bytes: u64,
    /// Cells per bucket.
    pub cells_per_bucket: u64,
    /// Index segments.
    pub segments: u64,
    /// Bytes of the segments (cells, bucket headers, segment headers).
    pub segment_bytes: u64,
    /// Cells in all segments (the map's capacity before it next grows).
    pub capacity: u64,
    /// Growth steps so far: moves of a directory group to another segment (stores of
    /// format version 7), or segment splits (fixed maps of older stores).
    pub splits: u64,
    /// Global depth of the directory.
    pub directory_depth: u64,
    /// Size of the store file.
    pub file_size: u64,
}

impl FixedMap {
    /// The map's name.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// The key type recorded when the map was created (`None`: none recorded); see
    /// [`DataType`](crate::DataType).
    pub fn key_type(&self) -> Option<crate::DataType> {
        crate::store::recorded_types(&self.sh, self.f.m.hdr).0
    }

    /// The value type recorded when the map was created (`None`: none recorded).
    pub fn value_type(&self) -> Option<crate::DataType> {
        crate::store::recorded_types(&self.sh, self.f.m.hdr).1
    }

    /// The size of every key, in bytes.
    pub fn key_size(&self) -> usize {
        self.f.geo.key_size as usize
    }

    /// The size of every value, in bytes.
    pub fn value_size(&self) -> usize {
        self.f.geo.value_size as usize
    }

    /// A handle on the same map whose operations wait at most `timeout` for a lock held by
    /// a live process (see [`Map::with_timeout`](crate::Map::with_timeout)).
    pub fn with_timeout(&self, timeout: Duration) -> FixedMap {
        let mut m = self.clone();
        m.f.m.timeout = timeout;
        m
    }

    /// The lock timeout of this handle (see [`FixedMap::with_timeout`]).
    pub fn timeout(&self) -> Duration {
        self.f.m.timeout
    }

    pub(crate) fn txn(&self) -> Result<crate::txn::Op<'_>> {
        let t = crate::txn::thread_txn(&self.sh)?;
        let mut tx = crate::txn::Op::new(&self.sh, t);
        tx.timeout = self.f.m.timeout;
        Ok(tx)
    }

    pub(crate) fn check_key(&self, key: &[u8]) -> Result<()> {
        if key.len() as u64 != self.f.geo.key_size {
            return Err(Error::InvalidArgument(format!(
                "map {:?} has {}-byte keys; this key has {} bytes",
                self.name,
                self.f.geo.key_size,
                key.len()
            )));
        }
        Ok(())
    }

    pub(crate) fn check_value(&self, v: &[u8]) -> Result<()> {
        if v.len() as u64 != self.f.geo.value_size {
            return Err(Error::InvalidArgument(format!(
                "map {:?} has {}-byte values; this value has {} bytes",
                self.name,
                self.f.geo.value_size,
                v.len()
            )));
        }
        Ok(())
    }

    /// The value of `key`, copied out, or `None`.
    pub fn get(&self, key: &[u8]) -> Result<Option<Vec<u8>>> {
        self.check_key(key)?;
        self.sh.ensure_registered()?;
        let sh = &*self.sh;
        let n = self.f.geo.value_size as usize;
        self.f.read(sh, key, |voff| {
            let mut v = vec![0u8; n];
            sh.r.read_bytes(voff, &mut v);
            v
        })
    }

    /// Copies the value of `key` into `buf`, which must be exactly `value_size` bytes;
    /// returns whether the key was present (`buf` is left alone when it is not).
    pub fn get_into(&self, key: &[u8], buf: &mut [u8]) -> Result<bool> {
        self.check_key(key)?;
        self.check_value(buf)?;
        self.sh.ensure_registered()?;
        let sh = &*self.sh;
        let n = buf.len();
        if n <= 16 {
            // A small value goes through a small buffer: zeroing the large one below took
            // eight stores on every get.
            let mut tmp = [0u8; 16];
            let found = self
                .f
                .read(sh, key, |voff| sh.r.read_bytes(voff, &mut tmp[..n]))?;
            if found.is_some() {
                if n >= 8 {
                    // Two overlapping words: a `copy_from_slice` of a runtime length is a
                    // `memcpy` call.
                    buf[..8].copy_from_slice(&tmp[..8]);
                    buf[n - 8..].copy_from_slice(&tmp[n - 8..n]);
                } else {
                    buf.copy_from_slice(&tmp[..n]);
                }
            }
            return Ok(found.is_some());
        }
        let mut tmp = [0u8; MAX_VALUE_SIZE as usize];
        let found = self
            .f
            .read(sh, key, |voff| sh.r.read_bytes(voff, &mut tmp[..n]))?;
        if found.is_some() {
            if (8..=16).contains(&n) {
                // Two overlapping words: a `copy_from_slice` of a runtime length is a
                // `memcpy` call.
                buf[..8].copy_from_slice(&tmp[..8]);
                buf[n - 8..].copy_from_slice(&tmp[n - 8..n]);
            } else {
                buf.copy_from_slice(&tmp[..n]);
            }
        }
        Ok(found.is_some())
    }

    /// Copies the value of `key` into `buf` if it fits; returns the value's length (the
    /// map's value size), or `None` if the key is absent. A `buf` shorter than the value
    /// size is left alone: the result says how large a buffer the value needs. The
    /// contract of [`Map::get_to_slice`](crate::Map::get_to_slice), for code written for
    /// both kinds ([`KvMap`](crate::KvMap)); [`FixedMap::get_into`] is the exact-size
    /// call.
    pub fn get_to_slice(&self, key: &[u8], buf: &mut [u8]) -> Result<Option<usize>> {
        let n = self.value_size();
        let found = match buf.get_mut(..n) {
            Some(dst) => self.get_into(key, dst)?,
            None => self.contains(key)?,
        };
        Ok(found.then_some(n))
    }

    /// Whether `key` is present.
    pub fn contains(&self, key: &[u8]) -> Result<bool> {
        self.check_key(key)?;
        self.sh.ensure_registered()?;
        Ok(self.f.read(&self.sh, key, |_| ())?.is_some())
    }

    /// The locked write path with a decision made under the lock.
    pub(crate) fn write<'v>(
        &self,
        key: &[u8],
        produce: &mut dyn FnMut(Option<u64>) -> Result<Act<'v>>,
    ) -> Result<(bool, bool)> {
        self.check_key(key)?;
        let tx = self.txn()?;
        let r = self.f.write(&tx, key, produce);
        if r.is_ok() {
            crate::api::batch::flush_unless_batching(&self.sh)?;
        }
        r
    }

    /// Inserts or replaces; says which.
    pub fn put(&self, key: &[u8], value: &[u8]) -> Result<PutOutcome> {
        let _call = crate::deadline::call();
        self.check_value(value)?;
        let (existed, _) = self.write(key, &mut |_| Ok(Act::Put(value)))?;
        Ok(if existed {
            PutOutcome::Replaced
        } else {
            PutOutcome::Inserted
        })
    }

    /// Inserts only if `key` is absent; returns whether it did.
    pub fn put_if_absent(&self, key: &[u8], value: &[u8]) -> Result<bool> {
        let _call = crate::deadline::call();
        self.check_value(value)?;
        let (_, applied) = self.write(key, &mut |cur| {
            Ok(if cur.is_none() {
                Act::Put(value)
            } else {
                Act::Keep
            })
        })?;
        Ok(applied)
    }

    /// Replaces only if `key` is present; returns whether it did.
    pub fn put_if_present(&self, key: &[u8], value: &[u8]) -> Result<bool> {
        let _call = crate::deadline::call();
        self.check_value(value)?;
        let (_, applied) = self.write(key, &mut |cur| {
            Ok(if cur.is_some() {
                Act::Put(value)
            } else {
                Act::Keep
            })
        })?;
        Ok(applied)
    }

    /// The former name of [`FixedMap::put_if_absent`].
    #[deprecated(since = "0.2.0", note = "renamed put_if_absent")]
    #[inline]
    pub fn insert(&self, key: &[u8], value: &[u8]) -> Result<bool> {
        self.put_if_absent(key, value)
    }

    /// The former name of [`FixedMap::put_if_present`].
    #[deprecated(since = "0.2.0", note = "renamed put_if_present")]
    #[inline]
    pub fn replace(&self, key: &[u8], value: &[u8]) -> Result<bool> {
        self.put_if_present(key, value)
    }

    /// Removes `key`; returns whether it was present.
    pub fn remove(&self, key: &[u8]) -> Result<bool> {
        let _call = crate::deadline::call();
        let (_, applied) = self.write(key, &mut |_| Ok(Act::Remove))?;
        Ok(applied)
    }

    /// Inserts or replaces, returning the previous value (read under the segment lock,
    /// so no other write comes between the two).
    pub fn swap(&self, key: &[u8], value: &[u8]) -> Result<Option<Vec<u8>>> {
        let _call = crate::deadline::call();
        self.check_value(value)?;
        let mut old = None;
        self.write(key, &mut |cur| {
            old = cur.map(|off| self.value_at(off));
            Ok(Act::Put(value))
        })?;
        Ok(old)
    }

    /// Removes `key` and returns its value, if it was present.
    pub fn take(&self, key: &[u8]) -> Result<Option<Vec<u8>>> {
        let _call = crate::deadline::call();
        let mut old = None;
        self.write(key, &mut |cur| {
            old = cur.map(|off| self.value_at(off));
            Ok(if cur.is_some() {
                Act::Remove
            } else {
                Act::Keep
            })
        })?;
        Ok(old)
    }

    /// Returns the value of `key`, first inserting `default` if the key is absent
    /// (atomically: of several racing callers, exactly one inserts).
    pub fn get_or_insert(&self, key: &[u8], default: &[u8]) -> Result<Vec<u8>> {
        let _call = crate::deadline::call();
        self.check_value(default)?;
        if let Some(v) = self.get(key)? {
            return Ok(v);
        }
        let mut out = Vec::new();
        self.write(key, &mut |cur| {
            Ok(match cur {
                Some(off) => {
                    out = self.value_at(off);
                    Act::Keep
                }
                None => {
                    out = default.to_vec();
                    Act::Put(default)
                }
            })
        })?;
        Ok(out)
    }

    /// Under the segment lock: a copy of the value at `off`.
    pub(crate) fn value_at(&self, off: u64) -> Vec<u8> {
        let mut v = vec![0u8; self.f.geo.value_size as usize];
        self.sh.r.read_bytes(off, &mut v);
        v
    }

    /// Runs `f` in a batch of this map's store, exactly as
    /// [`Store::batch`](crate::Store::batch) does: under `sync_writes`, the writes this
    /// thread makes to the store are flushed once, when `f` returns, not each.
    pub fn batch<T, E: From<Error>>(
        &self,
        f: impl FnOnce() -> std::result::Result<T, E>,
    ) -> std::result::Result<T, E> {
        crate::api::batch::run(&self.sh, f)
    }

    /// Puts many entries; each put is atomic on its own (the batch is not). Stops at the
    /// first error, which names the item. With
    /// [`Options::sync_writes`](crate::Options::sync_writes), flushes once for the batch.
    /// Faster than the same puts one by one on a large map: the buckets and segment locks
    /// of the puts a few entries ahead are loaded while one is written.
    pub fn put_many(&self, items: &[(&[u8], &[u8])]) -> Result<()> {
        self.put_many_indexed(items)
            .map_err(crate::api::map::item_named)
    }

    /// [`FixedMap::put_many`] that says where it stopped, as
    /// [`Map::put_many_indexed`](crate::Map::put_many_indexed) does.
    pub fn put_many_indexed(
        &self,
        items: &[(&[u8], &[u8])],
    ) -> std::result::Result<(), (usize, Error)> {
        let _call = crate::deadline::call();
        let sh = &*self.sh;
        crate::api::map::put_each(
            sh,
            items,
            |k| self.f.prefetch_write(sh, k, sh.file_end()),
            |k, v| self.put(k, v).map(|_| ()),
        )
    }

    /// Removes many keys (each removal atomic on its own); returns how many were present.
    /// Looks ahead as [`FixedMap::put_many`] does.
    pub fn remove_many(&self, keys: &[&[u8]]) -> Result<u64> {
        self.remove_many_indexed(keys).map_err(|(_, e)| e)
    }

    /// [`FixedMap::remove_many`] that says where it stopped, as
    /// [`Map::put_many_indexed`](crate::Map::put_many_indexed) does.
    pub fn remove_many_indexed(&self, keys: &[&[u8]]) -> std::result::Result<u64, (usize, Error)> {
        let _call = crate::deadline::call();
        let sh = &*self.sh;
        crate::api::map::remove_each(
            sh,
            keys,
            |k| self.f.prefetch_write(sh, k, sh.file_end()),
            |k| self.remove(k),
        )
    }

    /// Atomically: if the current value of `key` equals `expected` (`None` = absent), sets
    /// it to `new` (`None` = remove) and returns true; else changes nothing and returns
    /// false. Decided under the segment lock.
    pub fn compare_and_swap(
        &self,
        key: &[u8],
        expected: Option<&[u8]>,
        new: Option<&[u8]>,
    ) -> Result<bool> {
        let _call = crate::deadline::call();
        if let Some(e) = expected {
            self.check_value(e)?;
        }
        if let Some(n) = new {
            self.check_value(n)?;
        }
        let sh = &*self.sh;
        let mut same = false;
        let (_, applied) = self.write(key, &mut |cur| {
            same = match (cur, expected) {
                (None, None) => true,
                (Some(off), Some(e)) => sh.r.bytes_eq(off, e),
                _ => false,
            };
            Ok(match (same, new) {
                (false, _) => Act::Keep,
                (true, Some(v)) => Act::Put(v),
                (true, None) => Act::Remove,
            })
        })?;
        Ok(applied || same)
    }

    /// Atomic read-modify-write: `f` sees the current value (or `None`) and returns the
    /// new one (or `None` to remove the key); no other write to the key comes in between.
    /// Returns what `f` returned for the value that was installed.
    ///
    /// `f` runs without any lock held; the result is installed only if the value is still
    /// the one `f` saw, otherwise `f` runs again (so it must have no side effects). A new
    /// value of the wrong size is `InvalidArgument`. Gives up with [`Error::Timeout`]
    /// after the lock timeout of retries.
    pub fn update(
        &self,
        key: &[u8],
        mut f: impl FnMut(Option<&[u8]>) -> Option<Vec<u8>>,
    ) -> Result<Option<Vec<u8>>> {
        self.check_key(key)?;
        let _call = crate::deadline::call();
        let wait = Wait::begin(self.f.m.timeout, self.f.m.timeout);
        let mut tries = 0u32;
        loop {
            let cur = self.get(key)?;
            let new = f(cur.as_deref());
            if let Some(v) = &new {
                self.check_value(v)?;
            }
            if self.compare_and_swap(key, cur.as_deref(), new.as_deref())? {
                return Ok(new);
            }
            tries += 1;
            if wait.expired() {
                return Err(wait.timeout());
            }
            if tries > 4 {
                crate::rt::sleep(Duration::from_micros(10 << tries.min(10)));
            } else {
                crate::rt::yield_now();
            }
        }
    }

    /// Atomically adds `delta` (wrapping) to the 8-byte little-endian integer value of
    /// `key` and returns the new value; an absent key counts as 0 and is created. For
    /// unsigned counters, cast: `add(k, d as i64)? as u64` is the wrapping u64 sum.
    ///
    /// On a present key this is **lock-free**: one `fetch_add` on the value word, which
    /// is 8-aligned (values whose size is a multiple of 8 always are; see FORMAT.md), with
    /// no lock and no redo list. Only while a writer restructures the same segment (an
    /// insert, remove, split or clear there) does it take the locked path instead.
    /// `InvalidArgument` unless the map's values are 8 bytes.
    pub fn add(&self, key: &[u8], delta: i64) -> Result<i64> {
        let _call = crate::deadline::call();
        self.check_key(key)?;
        if self.f.geo.value_size != 8 {
            return Err(Error::InvalidArgument(format!(
                "add needs 8-byte values; map {:?} has {}-byte values",
                self.name, self.f.geo.value_size
            )));
        }
        let tx = self.txn()?;
        if let Some(v) = self.f.add_in_place(&tx, key, delta)? {
            crate::api::batch::flush_unless_batching(&self.sh)?;
            return Ok(v);
        }
        let sh = &*self.sh;
        let mut out = 0i64;
        self.write(key, &mut |cur| {
            let old = match cur {
                Some(off) => sh.w(off).load(Acquire) as i64,
                None => 0,
            };
            out = old.wrapping_add(delta);
            Ok(Act::PutWord(out as u64))
        })?;
        Ok(out)
    }

    /// Looks up many keys at once, prefetching their buckets in batches so that their
    /// cache misses overlap. Each lookup is individually consistent.
    pub fn get_many(&self, keys: &[&[u8]]) -> Result<Vec<Option<Vec<u8>>>> {
        let _call = crate::deadline::call();
        let mut out = Vec::with_capacity(keys.len());
        self.get_many_with(keys, |_, v| out.push(v.map(<[u8]>::to_vec)))?;
        Ok(out)
    }

    /// [`FixedMap::get_many`] without allocating: calls `f(i, value)` for the `i`-th key
    /// in order, the value (`None` if absent) borrowed for the call only.
    pub fn get_many_with(
        &self,
        keys: &[&[u8]],
        mut f: impl FnMut(usize, Option<&[u8]>),
    ) -> Result<()> {
        let _call = crate::deadline::call();
        for k in keys {
            self.check_key(k)?;
        }
        self.sh.ensure_registered()?;
        let sh = &*self.sh;
        let n = self.f.geo.value_size as usize;
        // Values are at most MAX_VALUE_SIZE bytes: one buffer on the stack serves them all.
        let mut buf = [0u8; MAX_VALUE_SIZE as usize];
        // The stages of `Map::get_many_with`: while a stage's keys are read, the next
        // stage's buckets and the keys of the stage after it are on their way, and each
        // key is hashed once. (At 5 M keys of 16+16 bytes this was no faster than the
        // batches of 16 keys it replaced, prefetched, then read: ~3.0 M/s both, with
        // the keys prefetched; without that 2.65 M/s. Stages of 4 were no faster.)
        let end = sh.file_end();
        let mut ring = [0u64; 2 * STAGE];
        let len = keys.len();
        crate::mem::prefetch_keys(&keys[..len.min(2 * STAGE)]);
        for (i, k) in keys.iter().enumerate().take(STAGE) {
            ring[i] = self.f.prefetch_bucket(sh, k, end);
        }
        let mut start = 0;
        while start < len {
            let stop = (start + STAGE).min(len);
            for i in stop..(stop + STAGE).min(len) {
                ring[i % (2 * STAGE)] = self.f.prefetch_bucket(sh, keys[i], end);
                if let Some(k) = keys.get(i + STAGE) {
                    crate::mem::prefetch_ptr(k.as_ptr());
                }
            }
            for (j, k) in keys.iter().enumerate().take(stop).skip(start) {
                let got = self.f.read_hashed(sh, k, ring[j % (2 * STAGE)], |voff| {
                    sh.r.read_bytes(voff, &mut buf[..n])
                })?;
                f(j, got.map(|_| &buf[..n]));
            }
            start = stop;
        }
        Ok(())
    }

    /// Number of entries.
    pub fn len(&self) -> Result<u64> {
        let sh = &*self.sh;
        let mut n: u64 = 0;
        for t in 0..sh.g.n_txn {
            n = n.wrapping_add(
                sh.w(self.f.m.hdr + M_COUNTERS + MC_SIZE * t + MC_COUNT)
                    .load(Relaxed),
            );
        }
        if !self.f.m.alive(sh) {
            return Err(Error::NotFound(format!("map {} was dropped", self.name)));
        }
        Ok(if (n as i64) < 0 { 0 } else { n })
    }

    /// Whether the map has no entries.
    pub fn is_empty(&self) -> Result<bool> {
        Ok(self.len()? == 0)
    }

    /// Removes every entry, one segment at a time (other operations go on meanwhile).
    pub fn clear(&self) -> Result<()> {
        let _call = crate::deadline::call();
        let tx = self.txn()?;
        clear(&tx, &self.f)
    }

    /// Iterates over `(key, value)` pairs, weakly consistently (as [`Map::iter`](crate::Map::iter)):
    /// every key present for the whole iteration is returned exactly once.
    pub fn iter(&self) -> FixedIter {
        FixedIter {
            map: self.clone(),
            cursor: 0,
            done: false,
            buf: std::collections::VecDeque::new(),
            damage: None,
            reported: std::collections::HashSet::new(),
        }
    }

    /// Figures about this map.
    pub fn stats(&self) -> Result<FixedStats> {
        let sh = &*self.sh;
        let entries = self.len()?;
        let mut splits: u64 = 0;
        for t in 0..sh.g.n_txn {
            let c = self.f.m.hdr + M_COUNTERS + MC_SIZE * t;
            splits = splits.wrapping_add(sh.w(c + MC_SPLITS).load(Relaxed));
        }
        let segments = hashmap::segments(sh, &self.f.m)?.len() as u64;
        let g = self.f.geo;
        Ok(FixedStats {
            entries,
            key_size: g.key_size,
            value_size: g.value_size,
            cell_bytes: g.cell,
            bucket_bytes: g.bsize,
            cells_per_bucket: g.cells,
            segments,
            segment_bytes: segments * self.f.m.seg_size,
            capacity: segments * (self.f.m.n_main + self.f.m.n_stash) * g.cells,
            splits,
            directory_depth: sh.w(self.f.m.hdr + M_ROOT).load(Acquire) >> 48,
            file_size: sh.file_end(),
        })
    }
}

/// Iterator over a fixed map's entries; see [`FixedMap::iter`]. A damaged segment is
/// reported as one `Err` item ([`Error::Corrupt`](crate::Error::Corrupt), naming the map
/// and the segment) and the iteration goes on past it, as [`Iter`](crate::Iter) does;
/// any other error ends it.
pub struct FixedIter {
    map: FixedMap,
    cursor: u64,
    done: bool,
    buf: std::collections::VecDeque<(Vec<u8>, Vec<u8>)>,
    /// The damage of the segment whose items are in `buf`, reported after them.
    damage: Option<crate::Error>,
    /// The damaged segments reported so far: a segment of a map of groups holds several
    /// directory entries' keys, and is visited once for each of them.
    reported: std::collections::HashSet<u64>,
}

impl Iterator for FixedIter {
    type Item = Result<(Vec<u8>, Vec<u8>)>;

    fn next(&mut self) -> Option<Self::Item> {
        loop {
            if let Some(item) = self.buf.pop_front() {
                return Some(Ok(item));
            }
            if let Some(e) = self.damage.take() {
                return Some(Err(e));
            }
            if self.done {
                return None;
            }
            if let Err(e) = self.map.sh.ensure_registered() {
                self.done = true;
                return Some(Err(e));
            }
            match snapshot(&self.map.sh, &self.map.f, &self.map.name, self.cursor) {
                Ok(step) => {
                    self.buf.extend(step.items);
                    self.damage = step
                        .damage
                        .filter(|(seg, _)| self.reported.insert(*seg))
                        .map(|(_, what)| self.map.sh.corrupt(what));
                    match step.next {
                        Some(c) => self.cursor = c,
                        None => self.done = true,
                    }
                }
                Err(e) => {
                    self.done = true;
                    return Some(Err(e));
                }
            }
        }
    }
}

impl std::fmt::Debug for FixedMap {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("FixedMap")
            .field("name", &self.name)
            .field("key_size", &self.f.geo.key_size)
            .field("value_size", &self.f.geo.value_size)
            .finish()
    }
}

#[allow(dead_code)]
pub(crate) fn _assert_send_sync() {
    pub(crate) fn is<T: Send + Sync>() {}
    is::<FixedMap>();
}
