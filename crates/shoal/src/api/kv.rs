//! `KvMap`: the operations every kind of map has, so that code written once (the C ABI,
//! the Python binding, a user's generic code) serves all of them.

use crate::api::fixed::{FixedIter, FixedMap, FixedStats};
use crate::api::map::{Iter, Map, MapStats, PutOutcome};
use crate::error::{Error, Result};
use std::time::Duration;

mod sealed {
    /// Only the library's kinds of map implement [`KvMap`](super::KvMap): a new operation
    /// can then be added to it without breaking anyone.
    pub trait Sealed {}
    impl Sealed for crate::Map {}
    impl Sealed for crate::FixedMap {}
}

/// The operations [`Map`] and [`FixedMap`] share, with one contract for both, so that
/// code written once serves every kind of map:
///
/// ```no_run
/// use shoal::KvMap;
///
/// fn bump<M: KvMap>(m: &M, key: &[u8]) -> shoal::Result<i64> {
///     m.add(key, 1)
/// }
///
/// let store = shoal::Store::open("demo")?;
/// bump(&store.map("hits")?, b"home")?;
/// bump(&store.fixed_map("counters", 8, 8)?, &7u64.to_le_bytes())?;
/// # Ok::<(), shoal::Error>(())
/// ```
///
/// Each method does what the method of the same name of `Map` and of `FixedMap` does
/// (they are the same calls): the documentation of [`Map`] says more. Where the kinds
/// differ, in the sizes of keys and values, [`key_size`](KvMap::key_size) and
/// [`value_size`](KvMap::value_size) say which applies; a key or value of the wrong size
/// is [`Error::InvalidArgument`] either way.
///
/// Sealed: the kinds of map are the library's. Several methods are generic, so the trait
/// is for static dispatch (`impl KvMap`, `<M: KvMap>`), not `dyn KvMap`.
pub trait KvMap: Clone + Send + Sync + sealed::Sealed {
    /// The map's iterator over `(key, value)` pairs.
    type Iter: Iterator<Item = Result<(Vec<u8>, Vec<u8>)>>;
    /// The map's figures ([`MapStats`], [`FixedStats`]).
    type Stats: Clone + std::fmt::Debug;

    /// The map's name.
    fn name(&self) -> &str;
    /// `Some(n)`: every key has exactly `n` bytes; `None`: a key has any length up to
    /// [`MAX_KEY_LEN`](crate::MAX_KEY_LEN).
    fn key_size(&self) -> Option<usize>;
    /// `Some(n)`: every value has exactly `n` bytes; `None`: a value has any length up to
    /// [`MAX_VALUE_LEN`](crate::MAX_VALUE_LEN).
    fn value_size(&self) -> Option<usize>;
    /// A handle on the same map whose calls wait at most `timeout` for a lock held by a
    /// live process ([`Map::with_timeout`]).
    fn with_timeout(&self, timeout: Duration) -> Self;
    /// The lock timeout of this handle.
    fn timeout(&self) -> Duration;
    /// The key type recorded when the map was created ([`Map::key_type`]).
    fn key_type(&self) -> Option<crate::DataType>;
    /// The value type recorded when the map was created ([`Map::value_type`]).
    fn value_type(&self) -> Option<crate::DataType>;

    /// The value of `key`, copied out, or `None`.
    fn get(&self, key: &[u8]) -> Result<Option<Vec<u8>>>;
    /// Copies the value of `key` into `buf` if it fits; returns the value's length, or
    /// `None` if the key is absent ([`Map::get_to_slice`]: `buf[..n]` is the value only
    /// when the result is `Some(n)` with `n <= buf.len()`).
    fn get_to_slice(&self, key: &[u8], buf: &mut [u8]) -> Result<Option<usize>>;
    /// Whether `key` is present.
    fn contains(&self, key: &[u8]) -> Result<bool>;
    /// Inserts or replaces; says which.
    fn put(&self, key: &[u8], value: &[u8]) -> Result<PutOutcome>;
    /// Inserts only if `key` is absent; returns whether it did.
    fn put_if_absent(&self, key: &[u8], value: &[u8]) -> Result<bool>;
    /// Replaces only if `key` is present; returns whether it did.
    fn put_if_present(&self, key: &[u8], value: &[u8]) -> Result<bool>;
    /// Removes `key`; returns whether it was present.
    fn remove(&self, key: &[u8]) -> Result<bool>;
    /// Inserts or replaces, returning the previous value.
    fn swap(&self, key: &[u8], value: &[u8]) -> Result<Option<Vec<u8>>>;
    /// Removes `key` and returns its value, if it was present.
    fn take(&self, key: &[u8]) -> Result<Option<Vec<u8>>>;
    /// Returns the value of `key`, first inserting `default` if the key is absent
    /// (atomically: of several racing callers, exactly one inserts).
    fn get_or_insert(&self, key: &[u8], default: &[u8]) -> Result<Vec<u8>>;
    /// Atomically: if the current value of `key` equals `expected` (`None` = absent),
    /// sets it to `new` (`None` = remove) and returns true; else changes nothing and
    /// returns false.
    fn compare_and_swap(
        &self,
        key: &[u8],
        expected: Option<&[u8]>,
        new: Option<&[u8]>,
    ) -> Result<bool>;
    /// Atomic read-modify-write ([`Map::update`]): `f` may run several times, with no
    /// lock held, and must have no side effects.
    fn update(
        &self,
        key: &[u8],
        f: impl FnMut(Option<&[u8]>) -> Option<Vec<u8>>,
    ) -> Result<Option<Vec<u8>>>;
    /// Atomically adds `delta` (wrapping) to the 8-byte little-endian signed integer value
    /// of `key` (an absent key counts as 0 and is created); returns the new value.
    fn add(&self, key: &[u8], delta: i64) -> Result<i64>;
    /// Looks up many keys at once, overlapping their memory misses.
    fn get_many(&self, keys: &[&[u8]]) -> Result<Vec<Option<Vec<u8>>>>;
    /// [`get_many`](KvMap::get_many) without allocating: calls `f(i, value)` for the
    /// `i`-th key, in order, the value borrowed for the call only.
    fn get_many_with(&self, keys: &[&[u8]], f: impl FnMut(usize, Option<&[u8]>)) -> Result<()>;
    /// Puts many entries, each atomic on its own; stops at the first error, whose message
    /// names the item when the item itself is invalid.
    fn put_many(&self, items: &[(&[u8], &[u8])]) -> Result<()>;
    /// [`put_many`](KvMap::put_many) that says where it stopped: `Err((i, e))` when the
    /// put of `items[i]` failed with `e` (its message as the put alone would give it),
    /// `Err((items.len(), e))` when the flush after the last item failed.
    fn put_many_indexed(&self, items: &[(&[u8], &[u8])])
        -> std::result::Result<(), (usize, Error)>;
    /// Removes many keys, each removal atomic on its own; returns how many were present.
    fn remove_many(&self, keys: &[&[u8]]) -> Result<u64>;
    /// [`remove_many`](KvMap::remove_many) that says where it stopped, as
    /// [`put_many_indexed`](KvMap::put_many_indexed) does.
    fn remove_many_indexed(&self, keys: &[&[u8]]) -> std::result::Result<u64, (usize, Error)>;
    /// Runs `f` in a batch of the map's store ([`Store::batch`](crate::Store::batch)).
    fn batch<T, E: From<Error>>(
        &self,
        f: impl FnOnce() -> std::result::Result<T, E>,
    ) -> std::result::Result<T, E>;
    /// Number of entries.
    fn len(&self) -> Result<u64>;
    /// Whether the map has no entries.
    fn is_empty(&self) -> Result<bool>;
    /// Removes every entry, one segment at a time.
    fn clear(&self) -> Result<()>;
    /// Iterates over `(key, value)` pairs, weakly consistently ([`Map::iter`]).
    fn iter(&self) -> Self::Iter;
    /// Figures about this map.
    fn stats(&self) -> Result<Self::Stats>;
}

/// The forwards of one kind's `KvMap` methods to its inherent methods of the same name.
macro_rules! forward_kv {
    () => {
        #[inline]
        fn name(&self) -> &str {
            Self::name(self)
        }
        #[inline]
        fn with_timeout(&self, timeout: Duration) -> Self {
            Self::with_timeout(self, timeout)
        }
        #[inline]
        fn timeout(&self) -> Duration {
            Self::timeout(self)
        }
        #[inline]
        fn key_type(&self) -> Option<crate::DataType> {
            Self::key_type(self)
        }
        #[inline]
        fn value_type(&self) -> Option<crate::DataType> {
            Self::value_type(self)
        }
        #[inline]
        fn get(&self, key: &[u8]) -> Result<Option<Vec<u8>>> {
            Self::get(self, key)
        }
        #[inline]
        fn get_to_slice(&self, key: &[u8], buf: &mut [u8]) -> Result<Option<usize>> {
            Self::get_to_slice(self, key, buf)
        }
        #[inline]
        fn contains(&self, key: &[u8]) -> Result<bool> {
            Self::contains(self, key)
        }
        #[inline]
        fn put(&self, key: &[u8], value: &[u8]) -> Result<PutOutcome> {
            Self::put(self, key, value)
        }
        #[inline]
        fn put_if_absent(&self, key: &[u8], value: &[u8]) -> Result<bool> {
            Self::put_if_absent(self, key, value)
        }
        #[inline]
        fn put_if_present(&self, key: &[u8], value: &[u8]) -> Result<bool> {
            Self::put_if_present(self, key, value)
        }
        #[inline]
        fn remove(&self, key: &[u8]) -> Result<bool> {
            Self::remove(self, key)
        }
        #[inline]
        fn swap(&self, key: &[u8], value: &[u8]) -> Result<Option<Vec<u8>>> {
            Self::swap(self, key, value)
        }
        #[inline]
        fn take(&self, key: &[u8]) -> Result<Option<Vec<u8>>> {
            Self::take(self, key)
        }
        #[inline]
        fn get_or_insert(&self, key: &[u8], default: &[u8]) -> Result<Vec<u8>> {
            Self::get_or_insert(self, key, default)
        }
        #[inline]
        fn compare_and_swap(
            &self,
            key: &[u8],
            expected: Option<&[u8]>,
            new: Option<&[u8]>,
        ) -> Result<bool> {
            Self::compare_and_swap(self, key, expected, new)
        }
        #[inline]
        fn update(
            &self,
            key: &[u8],
            f: impl FnMut(Option<&[u8]>) -> Option<Vec<u8>>,
        ) -> Result<Option<Vec<u8>>> {
            Self::update(self, key, f)
        }
        #[inline]
        fn add(&self, key: &[u8], delta: i64) -> Result<i64> {
            Self::add(self, key, delta)
        }
        #[inline]
        fn get_many(&self, keys: &[&[u8]]) -> Result<Vec<Option<Vec<u8>>>> {
            Self::get_many(self, keys)
        }
        #[inline]
        fn get_many_with(&self, keys: &[&[u8]], f: impl FnMut(usize, Option<&[u8]>)) -> Result<()> {
            Self::get_many_with(self, keys, f)
        }
        #[inline]
        fn put_many(&self, items: &[(&[u8], &[u8])]) -> Result<()> {
            Self::put_many(self, items)
        }
        #[inline]
        fn put_many_indexed(
            &self,
            items: &[(&[u8], &[u8])],
        ) -> std::result::Result<(), (usize, Error)> {
            Self::put_many_indexed(self, items)
        }
        #[inline]
        fn remove_many(&self, keys: &[&[u8]]) -> Result<u64> {
            Self::remove_many(self, keys)
        }
        #[inline]
        fn remove_many_indexed(&self, keys: &[&[u8]]) -> std::result::Result<u64, (usize, Error)> {
            Self::remove_many_indexed(self, keys)
        }
        #[inline]
        fn batch<T, E: From<Error>>(
            &self,
            f: impl FnOnce() -> std::result::Result<T, E>,
        ) -> std::result::Result<T, E> {
            Self::batch(self, f)
        }
        #[inline]
        fn len(&self) -> Result<u64> {
            Self::len(self)
        }
        #[inline]
        fn is_empty(&self) -> Result<bool> {
            Self::is_empty(self)
        }
        #[inline]
        fn clear(&self) -> Result<()> {
            Self::clear(self)
        }
        #[inline]
        fn iter(&self) -> Self::Iter {
            Self::iter(self)
        }
        #[inline]
        fn stats(&self) -> Result<Self::Stats> {
            Self::stats(self)
        }
    };
}

impl KvMap for Map {
    type Iter = Iter;
    type Stats = MapStats;

    #[inline]
    fn key_size(&self) -> Option<usize> {
        None
    }

    #[inline]
    fn value_size(&self) -> Option<usize> {
        None
    }

    forward_kv!();
}

impl KvMap for FixedMap {
    type Iter = FixedIter;
    type Stats = FixedStats;

    #[inline]
    fn key_size(&self) -> Option<usize> {
        Some(FixedMap::key_size(self))
    }

    #[inline]
    fn value_size(&self) -> Option<usize> {
        Some(FixedMap::value_size(self))
    }

    forward_kv!();
}
