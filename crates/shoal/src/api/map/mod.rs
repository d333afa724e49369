//! `Map`: one named hash map inside a store.

use crate::error::{Error, Result};
use crate::format::*;
use crate::kinds::varmap::{checksum_failed, read_record_header, record_crc_ok, Hit, MapRef};
use crate::shared::Shared;
use crate::txn::thread_txn;

use std::collections::VecDeque;
use std::sync::atomic::Ordering::*;
use std::sync::Arc;

mod iter;
mod many;
mod rmw;
mod uid;
mod write;

pub use iter::{Iter, Keys};
pub(crate) use many::*;
pub(crate) use write::*;

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

/// The value of the record `hit` names, copied out under the key's lock, once its
/// checksum is verified ([`verify_hit`]).
pub(crate) fn copy_value(sh: &Shared, hit: &Hit, map: &str) -> Result<Vec<u8>> {
    verify_hit(sh, hit, map)?;
    let mut v = vec![0u8; hit.vlen as usize];
    sh.r.read_bytes(hit.val_off, &mut v);
    Ok(v)
}

/// Under the key's segment lock, in a store with checksums: fails with `Corrupt` when the
/// record `hit` names fails its checksum, so that a write never hands out a corrupt old
/// value, nor computes a new one from it (`add`). Under the lock the record cannot change
/// (the cleaner moves records under it too), so a mismatch is never a torn copy.
fn verify_hit(sh: &Shared, hit: &Hit, map: &str) -> Result<()> {
    if sh.g.trailer != 0 && !record_crc_ok(sh, hit.off, hit.off + hit.rec_len - sh.g.trailer) {
        return Err(checksum_failed(sh, map, hit.off));
    }
    Ok(())
}

/// Calls `f` with the key of the record a hit names (copied to the stack when short).
fn with_hit_key<T>(sh: &Shared, hit: &Hit, f: impl FnOnce(&[u8]) -> T) -> T {
    let koff = hit.off + hit.hl;
    let klen = (hit.val_off - koff) as usize;
    let mut small = [0u8; 256];
    if klen <= small.len() {
        sh.r.read_bytes(koff, &mut small[..klen]);
        return f(&small[..klen]);
    }
    let mut k = Vec::new();
    sh.r.read_to_vec(koff, klen, &mut k);
    f(&k)
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
    /// Bytes of dead records in the store (no longer referenced by any map), not yet
    /// reclaimed.
    pub store_dead_bytes: u64,
    /// Bytes in the store's data chunks (live + dead).
    pub store_data_bytes: u64,
    /// Size of the store file.
    pub file_size: u64,
}

#[derive(Clone, Copy, PartialEq, Eq)]
pub(crate) enum Mode {
    Upsert,
    InsertOnly,
    ReplaceOnly,
}

impl Mode {
    /// Whether a write in this mode changes the map, the key being `present` or not.
    fn applies(self, present: bool) -> bool {
        match self {
            Mode::Upsert => true,
            Mode::InsertOnly => !present,
            Mode::ReplaceOnly => present,
        }
    }
}

pub(crate) fn check_sizes(key: &[u8], value: Option<&[u8]>) -> Result<()> {
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

    /// The key type recorded when the map was created (`None`: none recorded); see
    /// [`DataType`](crate::DataType).
    pub fn key_type(&self) -> Option<crate::DataType> {
        crate::store::recorded_types(&self.sh, self.m.hdr).0
    }

    /// The value type recorded when the map was created (`None`: none recorded).
    pub fn value_type(&self) -> Option<crate::DataType> {
        crate::store::recorded_types(&self.sh, self.m.hdr).1
    }

    /// The map's number in the store's catalog, which its records carry (FORMAT.md,
    /// "Records": maps numbered below 8 get 2-byte headers for small records). Numbers
    /// of dropped maps are reused.
    pub fn id(&self) -> u64 {
        self.m.id
    }

    fn txn(&self) -> Result<crate::txn::Op<'_>> {
        let t = thread_txn(&self.sh)?;
        let mut tx = crate::txn::Op::new(&self.sh, t);
        tx.timeout = self.m.timeout;
        Ok(tx)
    }

    /// A handle on the same map whose operations wait at most `timeout` for locks (or
    /// buckets) held by a live process before failing with [`Error::Timeout`], which says
    /// how long the call waited. The timeout bounds all the waits of one call together,
    /// from its first; the housekeeping a write does for everyone (a cleaning step,
    /// index space made ahead) waits at most milliseconds and is left for later. The
    /// store's default is [`Options::lock_timeout`](crate::Options::lock_timeout). Locks
    /// of dead processes are recovered within milliseconds whatever the timeout.
    ///
    /// One wait is not covered: a write that finds the cleaner behind (dead space well past
    /// its threshold) waits for it, up to 200 ms, whatever the timeout, so that writers
    /// cannot outrun the space it reclaims (a write never fails for it, and a thread that
    /// once waited the whole 200 ms stops waiting until the cleaner is free again).
    pub fn with_timeout(&self, timeout: std::time::Duration) -> Map {
        let mut m = self.clone();
        m.m.timeout = timeout;
        m
    }

    /// The lock timeout of this handle (see [`Map::with_timeout`]).
    pub fn timeout(&self) -> std::time::Duration {
        self.m.timeout
    }

    /// The value of `key`, copied out, or `None`. In a store with checksums, a value
    /// whose record fails its checksum is [`Error::Corrupt`] (so is it for every read
    /// that returns a value, by key or by UID, and for iteration).
    pub fn get(&self, key: &[u8]) -> Result<Option<Vec<u8>>> {
        if self.sh.g.trailer != 0 {
            return self.get_verified(key);
        }
        check_sizes(key, None)?;
        self.sh.ensure_registered()?;
        let sh = &*self.sh;
        self.m.read(sh, key, |_, voff, vlen| {
            let mut v = Vec::new();
            sh.r.read_to_vec(voff, vlen as usize, &mut v);
            v
        })
    }

    /// Copies the value of `key` into `buf` (replacing its contents); returns false (and
    /// leaves `buf` empty) if the key is absent. Reuses `buf`'s allocation.
    pub fn get_into(&self, key: &[u8], buf: &mut Vec<u8>) -> Result<bool> {
        // The reads of a store with checksums go apart at once: so placed, the branch
        // costs a get of a store without them two instructions of ~300 (callgrind,
        // `examples/get_phases.rs`); placed inside the inlined lookup, or folded into the
        // key's size check through a bound kept in the handle, it cost 9 to 16, by the
        // registers and layout of the lookup it perturbed. Likewise in `get` and
        // `get_to_slice`.
        if self.sh.g.trailer != 0 {
            return self.get_into_verified(key, buf);
        }
        check_sizes(key, None)?;
        self.sh.ensure_registered()?;
        let sh = &*self.sh;
        let found = self.m.read(sh, key, |_, voff, vlen| {
            sh.r.read_to_vec(voff, vlen as usize, buf)
        })?;
        if found.is_none() {
            buf.clear();
        }
        Ok(found.is_some())
    }

    /// Copies the value of `key` into `buf` if it fits; returns the value's length, or
    /// `None` if the key is absent. A value longer than `buf` is not copied: the returned
    /// length says how large a buffer it needs. No allocation; for callers that bring
    /// their own buffer (the C ABI). The copy is optimistic: when the read races with a
    /// write to the key it is retried, so `buf` may hold bytes of a replaced value unless
    /// the result is `Some(n)` with `n <= buf.len()` (then `buf[..n]` is the value).
    #[inline] // across the crate boundary into the C ABI's `shoal_map_get`: no call, no sret
    pub fn get_to_slice(&self, key: &[u8], buf: &mut [u8]) -> Result<Option<usize>> {
        if self.sh.g.trailer != 0 {
            return self.get_to_slice_verified(key, buf);
        }
        check_sizes(key, None)?;
        self.sh.ensure_registered()?;
        let sh = &*self.sh;
        self.m.read(sh, key, |_, voff, vlen| {
            let n = vlen as usize;
            if let Some(dst) = buf.get_mut(..n) {
                sh.r.read_bytes(voff, dst);
            }
            n
        })
    }

    /// [`Map::get`] in a store with checksums ([`MapRef::read_value`]).
    #[cold]
    #[inline(never)]
    fn get_verified(&self, key: &[u8]) -> Result<Option<Vec<u8>>> {
        check_sizes(key, None)?;
        self.sh.ensure_registered()?;
        let sh = &*self.sh;
        self.m.read_value(sh, key, &self.name, |_, voff, vlen| {
            let mut v = Vec::new();
            sh.r.read_to_vec(voff, vlen as usize, &mut v);
            v
        })
    }

    /// [`Map::get_into`] in a store with checksums.
    #[cold]
    #[inline(never)]
    fn get_into_verified(&self, key: &[u8], buf: &mut Vec<u8>) -> Result<bool> {
        check_sizes(key, None)?;
        self.sh.ensure_registered()?;
        let sh = &*self.sh;
        let found = self.m.read_value(sh, key, &self.name, |_, voff, vlen| {
            sh.r.read_to_vec(voff, vlen as usize, buf)
        })?;
        if found.is_none() {
            buf.clear();
        }
        Ok(found.is_some())
    }

    /// [`Map::get_to_slice`] in a store with checksums.
    #[cold]
    #[inline(never)]
    fn get_to_slice_verified(&self, key: &[u8], buf: &mut [u8]) -> Result<Option<usize>> {
        check_sizes(key, None)?;
        self.sh.ensure_registered()?;
        let sh = &*self.sh;
        self.m.read_value(sh, key, &self.name, |_, voff, vlen| {
            let n = vlen as usize;
            if let Some(dst) = buf.get_mut(..n) {
                sh.r.read_bytes(voff, dst);
            }
            n
        })
    }

    /// Whether `key` is present.
    pub fn contains(&self, key: &[u8]) -> Result<bool> {
        check_sizes(key, None)?;
        self.sh.ensure_registered()?;
        Ok(self.m.read(&self.sh, key, |_, _, _| ())?.is_some())
    }
}

impl Map {
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
        let _call = crate::deadline::call();
        let tx = self.txn()?;
        let dead = crate::kinds::varmap::clear(&tx, &self.m)?;
        crate::alloc::note_dead(&tx, dead);
        Ok(())
    }

    /// Iterates over `(key, value)` pairs, weakly consistently: every key present for the
    /// whole iteration is returned exactly once, no key twice; keys added or removed
    /// meanwhile may or may not appear. Items are copied out a segment at a time. A
    /// damaged segment is reported as an `Err` item ([`Error::Corrupt`], naming the map
    /// and the segment), and the iteration goes on with the next one (see [`Iter`]).
    pub fn iter(&self) -> Iter {
        Iter {
            map: self.clone(),
            cursor: 0,
            done: false,
            buf: VecDeque::new(),
            damage: None,
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
            damage: None,
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
        s.segments = crate::hashmap::segments(sh, &self.m)?.len() as u64;
        s.directory_depth = sh.w(self.m.hdr + M_ROOT).load(Acquire) >> 48;
        s.store_data_bytes = sh.w(H_DATA_BYTES).load(Acquire);
        s.store_dead_bytes = crate::cleaner::reclaimable_dead(sh);
        s.file_size = sh.file_end();
        Ok(s)
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
