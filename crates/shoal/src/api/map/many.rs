//! Batched calls: gets, puts and removes of many keys, each staged ahead of the others' misses.

use super::*;
use crate::error::{Error, Result};
use crate::kinds::varmap::STAGE;
use crate::shared::Shared;

/// How many items ahead `put_many` and `remove_many` ask for the lines a write waits on:
/// about a miss's latency in puts, with room (3, 4, 6 and 10 measured alike, 10 M keys).
pub(crate) const WRITE_AHEAD: usize = 6;

/// Runs `each` on the items in order; before each, `prefetch` on the key of the item
/// [`WRITE_AHEAD`] places further on, so that the lines its write will wait on are loaded
/// by the time it comes.
pub(crate) fn each_looking_ahead<I, E>(
    items: &[I],
    key: impl Fn(&I) -> &[u8],
    mut prefetch: impl FnMut(&[u8]),
    mut each: impl FnMut(usize, &I) -> std::result::Result<(), E>,
) -> std::result::Result<(), E> {
    for item in items.iter().take(WRITE_AHEAD) {
        prefetch(key(item));
    }
    for (i, item) in items.iter().enumerate() {
        if let Some(next) = items.get(i + WRITE_AHEAD) {
            prefetch(key(next));
        }
        each(i, item)?;
    }
    Ok(())
}

/// Where a batched write stopped: at an item (its index), or in the flush after them.
enum Stopped {
    At(usize, Error),
    Flush(Error),
}

impl From<Error> for Stopped {
    fn from(e: Error) -> Stopped {
        Stopped::Flush(e)
    }
}

impl Stopped {
    /// As `put_many_indexed` reports it: a flush's failure at index `n`, past the items.
    fn indexed(self, n: usize) -> (usize, Error) {
        match self {
            Stopped::At(i, e) => (i, e),
            Stopped::Flush(e) => (n, e),
        }
    }
}

/// The loop of `put_many_indexed` (variable and fixed maps): each put atomic on its own,
/// the first error stops it, one flush at the end. `prefetch` starts loading what the put
/// of a key will wait on.
pub(crate) fn put_each(
    sh: &Shared,
    items: &[(&[u8], &[u8])],
    prefetch: impl FnMut(&[u8]),
    mut put: impl FnMut(&[u8], &[u8]) -> Result<()>,
) -> std::result::Result<(), (usize, Error)> {
    crate::api::batch::run(sh, || {
        each_looking_ahead(
            items,
            |(k, _)| k,
            prefetch,
            |i, (k, v)| put(k, v).map_err(|e| Stopped::At(i, e)),
        )
    })
    .map_err(|s| s.indexed(items.len()))
}

/// The loop of `remove_many_indexed`: how many of `keys` `remove` found, one flush at the
/// end. `prefetch` as for [`put_each`].
pub(crate) fn remove_each(
    sh: &Shared,
    keys: &[&[u8]],
    prefetch: impl FnMut(&[u8]),
    mut remove: impl FnMut(&[u8]) -> Result<bool>,
) -> std::result::Result<u64, (usize, Error)> {
    crate::api::batch::run(sh, || {
        let mut n = 0;
        each_looking_ahead(
            keys,
            |k| k,
            prefetch,
            |i, k| {
                n += remove(k).map_err(|e| Stopped::At(i, e))? as u64;
                Ok::<_, Stopped>(())
            },
        )?;
        Ok(n)
    })
    .map_err(|s: Stopped| s.indexed(keys.len()))
}

/// The error of `put_many` from that of `put_many_indexed`: an invalid item's message
/// names the item (the others are the put's or the flush's own).
pub(crate) fn item_named((i, e): (usize, Error)) -> Error {
    match e {
        Error::InvalidArgument(m) => Error::InvalidArgument(format!("item {i}: {m}")),
        e => e,
    }
}

impl Map {
    /// Looks up many keys at once, overlapping their memory misses (software prefetch in
    /// stages); several times faster per key than single gets on tables much larger than
    /// the cache. Each lookup is individually consistent.
    pub fn get_many(&self, keys: &[&[u8]]) -> Result<Vec<Option<Vec<u8>>>> {
        let _call = crate::deadline::call();
        let mut out: Vec<Option<Vec<u8>>> = vec![None; keys.len()];
        self.get_many_with(keys, |i, v| out[i] = v.map(|v| v.to_vec()))?;
        Ok(out)
    }

    /// Like [`Map::get_many`], but hands each value to `f(index, value)` from a reused
    /// buffer instead of allocating (`None` for absent keys), in key order.
    pub fn get_many_with(
        &self,
        keys: &[&[u8]],
        mut f: impl FnMut(usize, Option<&[u8]>),
    ) -> Result<()> {
        let _call = crate::deadline::call();
        for k in keys {
            check_sizes(k, None)?;
        }
        self.sh.ensure_registered()?;
        let sh = &*self.sh;
        let mut buf = Vec::new();
        // Each stage of STAGE keys: prefetch their records (their buckets were
        // prefetched one stage earlier and have had a stage's reads to arrive), prefetch
        // the next stage's buckets and the keys of the stage after it, then read the
        // keys, validated as any get. The caller's keys are prefetched because hashing
        // a key not in the cache stalled every stage: a batch's keys usually come from
        // all over the caller's memory (5.1 against 7.2 M/s at 10 M keys). The figures
        // behind this shape are in docs/benchmarks/single-get.md.
        let end = sh.file_end();
        let mut ring = [(0u64, 0u64); 2 * STAGE];
        let n = keys.len();
        crate::mem::prefetch_keys(&keys[..n.min(2 * STAGE)]);
        for (i, k) in keys.iter().enumerate().take(STAGE) {
            ring[i] = self.m.prefetch_bucket(sh, k, end);
        }
        let mut start = 0;
        while start < n {
            let stop = (start + STAGE).min(n);
            for &(h, bo) in &ring[start % (2 * STAGE)..][..stop - start] {
                self.m.prefetch_record(sh, h, bo, end);
            }
            for i in stop..(stop + STAGE).min(n) {
                ring[i % (2 * STAGE)] = self.m.prefetch_bucket(sh, keys[i], end);
                if let Some(k) = keys.get(i + STAGE) {
                    crate::mem::prefetch_ptr(k.as_ptr());
                }
            }
            for j in start..stop {
                let (h, _) = ring[j % (2 * STAGE)];
                let got =
                    self.m
                        .read_value_hashed(sh, keys[j], h, &self.name, |_, voff, vlen| {
                            buf.clear();
                            buf.resize(vlen as usize, 0);
                            sh.r.read_bytes(voff, &mut buf);
                        })?;
                f(j, got.map(|_| &buf[..]));
            }
            start = stop;
        }
        Ok(())
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
    /// first error. With [`Options::sync_writes`](crate::Options::sync_writes), flushes
    /// once for the batch. Faster than the same puts one by one on a large map: while one
    /// entry is written, the lines the puts a few entries ahead will wait on (their
    /// segment locks and buckets) are already on their way.
    pub fn put_many(&self, items: &[(&[u8], &[u8])]) -> Result<()> {
        self.put_many_indexed(items).map_err(item_named)
    }

    /// [`Map::put_many`] that says where it stopped: `Err((i, e))` when the put of
    /// `items[i]` failed with `e` (its message as the put alone would give it), or
    /// `Err((items.len(), e))` when the flush after the last item failed. For callers
    /// that report the failing item in words of their own (the C ABI).
    pub fn put_many_indexed(
        &self,
        items: &[(&[u8], &[u8])],
    ) -> std::result::Result<(), (usize, Error)> {
        let _call = crate::deadline::call();
        let sh = &*self.sh;
        put_each(
            sh,
            items,
            |k| self.m.prefetch_hash(sh, hash(sh.g.seed, k), sh.file_end()),
            |k, v| self.put(k, v).map(|_| ()),
        )
    }

    /// Removes many keys (each removal atomic on its own); returns how many were present.
    /// Looks ahead as [`Map::put_many`] does.
    pub fn remove_many(&self, keys: &[&[u8]]) -> Result<u64> {
        self.remove_many_indexed(keys).map_err(|(_, e)| e)
    }

    /// [`Map::remove_many`] that says where it stopped, as [`Map::put_many_indexed`]
    /// does.
    pub fn remove_many_indexed(&self, keys: &[&[u8]]) -> std::result::Result<u64, (usize, Error)> {
        let _call = crate::deadline::call();
        let sh = &*self.sh;
        remove_each(
            sh,
            keys,
            |k| self.m.prefetch_hash(sh, hash(sh.g.seed, k), sh.file_end()),
            |k| self.remove(k),
        )
    }
}
