//! `Map`: one named hash map inside a store.

use crate::error::{Error, Result};
use crate::format::*;
use crate::index::{read_record_header, MapRef};
use crate::shared::{thread_txn, Shared};
use crate::txn::Txn;
use std::collections::VecDeque;
use std::sync::atomic::Ordering::*;
use std::sync::Arc;

/// A named hash map in a [`Store`](crate::Store): binary keys and values, shared by every
/// process and thread that opens the store.
///
/// All methods take `&self`; a `Map` is `Send + Sync` and cheap to clone. Reads never
/// block and never write to shared memory; writes lock one small segment of the index.
#[derive(Clone)]
pub struct Map {
    pub(crate) sh: Arc<Shared>,
    pub(crate) m: MapRef,
    pub(crate) name: Arc<str>,
}

/// What [`Map::put`] did.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum PutOutcome {
    /// The key was absent and is now present.
    Inserted,
    /// The key was present; its value was replaced.
    Replaced,
}

/// Figures about one map (see [`Map::stats`]).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct MapStats {
    /// Entries in the map.
    pub entries: u64,
    /// Bytes of the map's live records (headers, keys and values).
    pub live_bytes: u64,
    /// Index segments.
    pub segments: u64,
    /// Segment splits so far.
    pub splits: u64,
    /// Global depth of the directory (it has 2^depth entries).
    pub directory_depth: u64,
    /// Bytes of record space in the store no longer referenced by any map, not yet reclaimed.
    pub store_dead_bytes: u64,
    /// Bytes in the store's data chunks (live + dead).
    pub store_data_bytes: u64,
    /// Size of the store file.
    pub file_size: u64,
}

/// Cleaning steps (each at most 64 records) tried when a write finds the store full.
const COMPACT_ON_FULL_STEPS: usize = 4096;

#[derive(Clone, Copy, PartialEq, Eq)]
enum Mode {
    Upsert,
    InsertOnly,
    ReplaceOnly,
}

fn check_sizes(key: &[u8], value: Option<&[u8]>) -> Result<()> {
    if key.len() > MAX_KEY {
        return Err(Error::InvalidArgument(format!(
            "key of {} bytes; the limit is {MAX_KEY}",
            key.len()
        )));
    }
    if let Some(v) = value {
        if v.len() as u64 > MAX_VALUE {
            return Err(Error::InvalidArgument(format!(
                "value of {} bytes; the limit is {MAX_VALUE}",
                v.len()
            )));
        }
    }
    Ok(())
}

impl Map {
    /// The map's name.
    pub fn name(&self) -> &str {
        &self.name
    }

    fn txn(&self) -> Result<Txn<'_>> {
        let t = thread_txn(&self.sh)?;
        Ok(Txn::new(&self.sh, t))
    }

    /// The value of `key`, copied out, or `None`.
    pub fn get(&self, key: &[u8]) -> Result<Option<Vec<u8>>> {
        check_sizes(key, None)?;
        self.sh.ensure_registered()?;
        let sh = &*self.sh;
        self.m.read(sh, key, |_, voff, vlen| {
            let mut v = vec![0u8; vlen as usize];
            sh.r.read_bytes(voff, &mut v);
            v
        })
    }

    /// Copies the value of `key` into `buf` (replacing its contents); returns false (and
    /// leaves `buf` empty) if the key is absent. Reuses `buf`'s allocation.
    pub fn get_into(&self, key: &[u8], buf: &mut Vec<u8>) -> Result<bool> {
        check_sizes(key, None)?;
        self.sh.ensure_registered()?;
        let sh = &*self.sh;
        let found = self.m.read(sh, key, |_, voff, vlen| {
            buf.clear();
            buf.resize(vlen as usize, 0);
            sh.r.read_bytes(voff, buf);
        })?;
        if found.is_none() {
            buf.clear();
        }
        Ok(found.is_some())
    }

    /// Whether `key` is present.
    pub fn contains(&self, key: &[u8]) -> Result<bool> {
        check_sizes(key, None)?;
        self.sh.ensure_registered()?;
        Ok(self.m.read(&self.sh, key, |_, _, _| ())?.is_some())
    }

    /// Inserts or replaces; says which.
    pub fn put(&self, key: &[u8], value: &[u8]) -> Result<PutOutcome> {
        let (_, existed, _) = self.write(key, Some(value), Mode::Upsert, false)?;
        Ok(if existed {
            PutOutcome::Replaced
        } else {
            PutOutcome::Inserted
        })
    }

    /// Inserts or replaces, returning the previous value.
    pub fn swap(&self, key: &[u8], value: &[u8]) -> Result<Option<Vec<u8>>> {
        Ok(self.write(key, Some(value), Mode::Upsert, true)?.2)
    }

    /// Inserts only if `key` is absent; returns whether it did.
    pub fn insert(&self, key: &[u8], value: &[u8]) -> Result<bool> {
        Ok(self.write(key, Some(value), Mode::InsertOnly, false)?.0)
    }

    /// Replaces only if `key` is present; returns whether it did.
    pub fn replace(&self, key: &[u8], value: &[u8]) -> Result<bool> {
        Ok(self.write(key, Some(value), Mode::ReplaceOnly, false)?.0)
    }

    /// Removes `key`; returns whether it was present.
    pub fn remove(&self, key: &[u8]) -> Result<bool> {
        Ok(self.write(key, None, Mode::ReplaceOnly, false)?.0)
    }

    /// Removes `key` and returns its value, if it was present.
    pub fn take(&self, key: &[u8]) -> Result<Option<Vec<u8>>> {
        Ok(self.write(key, None, Mode::ReplaceOnly, true)?.2)
    }

    /// The one write path: returns (applied, existed, old value if asked). A store that
    /// is full but holds dead records is compacted once before giving up.
    fn write(
        &self,
        key: &[u8],
        value: Option<&[u8]>,
        mode: Mode,
        want_old: bool,
    ) -> Result<(bool, bool, Option<Vec<u8>>)> {
        match self.write_once(key, value, mode, want_old) {
            Err(Error::StoreFull(why)) => {
                let tx = self.txn()?;
                if crate::cleaner::compact(&tx, COMPACT_ON_FULL_STEPS)? == 0 {
                    return Err(Error::StoreFull(why));
                }
                self.write_once(key, value, mode, want_old)
            }
            r => r,
        }
    }

    fn write_once(
        &self,
        key: &[u8],
        value: Option<&[u8]>,
        mode: Mode,
        want_old: bool,
    ) -> Result<(bool, bool, Option<Vec<u8>>)> {
        check_sizes(key, value)?;
        let tx = self.txn()?;
        let sh = &*self.sh;
        // Cheap optimistic pre-checks, so that a failing conditional write appends nothing.
        match mode {
            Mode::InsertOnly if self.contains(key)? => return Ok((false, true, None)),
            Mode::ReplaceOnly if !self.contains(key)? => return Ok((false, false, None)),
            _ => {}
        }
        let new = match value {
            Some(v) => {
                let hdr = record_header(self.m.id, key.len() as u64, v.len() as u64);
                let off =
                    crate::alloc::append(&tx, &[&hdr, key, v], crate::alloc::Purpose::Normal)?;
                Some((off, (hdr.len() + key.len() + v.len()) as u64))
            }
            None => None,
        };
        let mut existed = false;
        let mut old_val = None;
        let r = self.m.write(
            &tx,
            key,
            new,
            &mut |hit| {
                existed = hit.is_some();
                Ok(match mode {
                    Mode::Upsert => true,
                    Mode::InsertOnly => hit.is_none(),
                    Mode::ReplaceOnly => hit.is_some(),
                })
            },
            &mut |sh, hit| {
                if want_old {
                    let mut v = vec![0u8; hit.vlen as usize];
                    sh.r.read_bytes(hit.val_off, &mut v);
                    old_val = Some(v);
                }
            },
        );
        let mut dead = 0u64;
        let applied = match &r {
            Ok(w) => w.applied,
            Err(_) => false,
        };
        if !applied {
            if let Some((off, len)) = new {
                crate::alloc::free_if_large(&tx, off);
                dead += len;
            }
        }
        if let Ok(w) = &r {
            if w.applied {
                if let Some((old_off, old_len)) = w.old {
                    crate::alloc::free_if_large(&tx, old_off);
                    dead += old_len;
                }
            }
        }
        if dead > 0 {
            crate::cleaner::note_dead(&tx, dead);
        }
        r?;
        crate::cleaner::maybe_clean(&tx);
        let _ = sh;
        Ok((applied, existed, old_val))
    }

    /// Number of entries.
    pub fn len(&self) -> Result<u64> {
        let sh = &*self.sh;
        let mut n: u64 = 0;
        for t in 0..sh.g.n_txn {
            n = n.wrapping_add(
                sh.w(self.m.hdr + M_COUNTERS + MC_SIZE * t + MC_COUNT)
                    .load(Relaxed),
            );
        }
        if !self.m.alive(sh) {
            return Err(Error::NotFound(format!("map {} was dropped", self.name)));
        }
        // Per-thread deltas may be read mid-operation; a momentarily negative sum is 0.
        Ok(if (n as i64) < 0 { 0 } else { n })
    }

    /// Whether the map has no entries.
    pub fn is_empty(&self) -> Result<bool> {
        Ok(self.len()? == 0)
    }

    /// Removes every entry, one segment at a time (other operations go on meanwhile).
    pub fn clear(&self) -> Result<()> {
        let tx = self.txn()?;
        let dead = crate::index::clear(&tx, &self.m)?;
        crate::cleaner::note_dead(&tx, dead);
        Ok(())
    }

    /// Iterates over `(key, value)` pairs, weakly consistently: every key present for the
    /// whole iteration is returned exactly once, no key twice; keys added or removed
    /// meanwhile may or may not appear. Items are copied out a segment at a time.
    pub fn iter(&self) -> Iter {
        Iter {
            map: self.clone(),
            cursor: 0,
            done: false,
            buf: VecDeque::new(),
            values: true,
        }
    }

    /// Iterates over keys (see [`Map::iter`]).
    pub fn keys(&self) -> Keys {
        Keys(Iter {
            map: self.clone(),
            cursor: 0,
            done: false,
            buf: VecDeque::new(),
            values: false,
        })
    }

    /// Figures about this map and its store.
    pub fn stats(&self) -> Result<MapStats> {
        let sh = &*self.sh;
        let mut s = MapStats {
            entries: self.len()?,
            ..Default::default()
        };
        let mut bytes: u64 = 0;
        let mut splits: u64 = 0;
        for t in 0..sh.g.n_txn {
            let c = self.m.hdr + M_COUNTERS + MC_SIZE * t;
            bytes = bytes.wrapping_add(sh.w(c + MC_BYTES).load(Relaxed));
            splits = splits.wrapping_add(sh.w(c + MC_SPLITS).load(Relaxed));
        }
        s.live_bytes = bytes;
        s.splits = splits;
        s.segments = crate::index::segments(sh, &self.m)?.len() as u64;
        s.directory_depth = sh.w(self.m.hdr + M_ROOT).load(Acquire) >> 48;
        s.store_data_bytes = sh.w(H_DATA_BYTES).load(Acquire);
        s.store_dead_bytes = s
            .store_data_bytes
            .saturating_sub(crate::cleaner::total_live_bytes(sh));
        s.file_size = sh.file_end();
        Ok(s)
    }
}

/// Iterator over a map's entries; see [`Map::iter`]. Yields `Result`s: an error (the map
/// was dropped, the file is corrupt, a timeout) ends the iteration.
pub struct Iter {
    map: Map,
    /// Position in bit-reversed hash order (see `index::snapshot`).
    cursor: u64,
    done: bool,
    buf: VecDeque<(Vec<u8>, Vec<u8>)>,
    values: bool,
}

impl Iterator for Iter {
    type Item = Result<(Vec<u8>, Vec<u8>)>;

    fn next(&mut self) -> Option<Self::Item> {
        loop {
            if let Some(item) = self.buf.pop_front() {
                return Some(Ok(item));
            }
            if self.done {
                return None;
            }
            let sh = &*self.map.sh;
            if let Err(e) = sh.ensure_registered() {
                self.done = true;
                return Some(Err(e));
            }
            match crate::index::snapshot(&self.map.sh, &self.map.m, self.cursor, self.values) {
                Ok((items, next)) => {
                    self.buf.extend(items);
                    match next {
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

/// Iterator over a map's keys; see [`Map::keys`].
pub struct Keys(Iter);

impl Iterator for Keys {
    type Item = Result<Vec<u8>>;
    fn next(&mut self) -> Option<Self::Item> {
        self.0.next().map(|r| r.map(|(k, _)| k))
    }
}

impl std::fmt::Debug for Map {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Map")
            .field("name", &self.name)
            .field("store", &self.sh.path)
            .finish()
    }
}

#[allow(dead_code)]
fn _assert_send_sync() {
    fn is<T: Send + Sync>() {}
    is::<Map>();
    let _ = read_record_header;
}
