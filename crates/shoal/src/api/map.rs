//! `Map`: one named hash map inside a store.

use crate::deadline::Wait;
use crate::error::{Error, Result};
use crate::format::*;
use crate::kinds::varmap::uid::Uid;
use crate::kinds::varmap::{
    checksum_failed, read_record_header, record_crc_ok, Action, Hit, MapRef, WriteResult, STAGE,
};
use crate::shared::Shared;
use crate::txn::thread_txn;
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

/// How many items ahead `put_many` and `remove_many` ask for the lines a write waits on:
/// about a miss's latency in puts, with room (3, 4, 6 and 10 measured alike, 10 M keys).
const WRITE_AHEAD: usize = 6;

/// Runs `each` on the items in order; before each, `prefetch` on the key of the item
/// [`WRITE_AHEAD`] places further on, so that the lines its write will wait on are loaded
/// by the time it comes.
fn each_looking_ahead<I>(
    items: &[I],
    key: impl Fn(&I) -> &[u8],
    mut prefetch: impl FnMut(&[u8]),
    mut each: impl FnMut(usize, &I) -> Result<()>,
) -> Result<()> {
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

/// The loop of `put_many` (variable and fixed maps): each put atomic on its own, the
/// first error stops it (an invalid item's message names it), one flush at the end.
/// `prefetch` starts loading what the put of a key will wait on.
pub(crate) fn put_each(
    sh: &Shared,
    items: &[(&[u8], &[u8])],
    prefetch: impl FnMut(&[u8]),
    mut put: impl FnMut(&[u8], &[u8]) -> Result<()>,
) -> Result<()> {
    crate::api::batch::run(sh, || {
        each_looking_ahead(
            items,
            |(k, _)| k,
            prefetch,
            |i, (k, v)| {
                put(k, v).map_err(|e| match e {
                    Error::InvalidArgument(m) => Error::InvalidArgument(format!("item {i}: {m}")),
                    e => e,
                })
            },
        )
    })
}

/// The loop of `remove_many`: how many of `keys` `remove` found, one flush at the end.
/// `prefetch` as for [`put_each`].
pub(crate) fn remove_each(
    sh: &Shared,
    keys: &[&[u8]],
    prefetch: impl FnMut(&[u8]),
    mut remove: impl FnMut(&[u8]) -> Result<bool>,
) -> Result<u64> {
    crate::api::batch::run(sh, || {
        let mut n = 0;
        each_looking_ahead(
            keys,
            |k| k,
            prefetch,
            |_, k| {
                n += remove(k)? as u64;
                Ok(())
            },
        )?;
        Ok(n)
    })
}

/// The value of the record `hit` names, copied out under the key's lock, once its
/// checksum is verified ([`verify_hit`]).
fn copy_value(sh: &Shared, hit: &Hit, map: &str) -> Result<Vec<u8>> {
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

/// Records a write appended (offset, length): usually one, so kept inline (no allocation
/// on the read-modify-write paths); more only when splits made `produce` run again.
#[derive(Default)]
pub(crate) struct Appended {
    inline: [(u64, u64); 2],
    n: usize,
    more: Vec<(u64, u64)>,
    /// The record appended before the segment lock was taken, if the write guessed it
    /// would need one (see [`APPENDING`]); listed with the others, so that it is noted
    /// dead when nothing publishes it.
    early: Option<(u64, u64)>,
}

impl Appended {
    pub(crate) fn push(&mut self, r: (u64, u64)) {
        if self.n < self.inline.len() {
            self.inline[self.n] = r;
            self.n += 1;
        } else {
            self.more.push(r);
        }
    }

    /// The record appended before the lock if there is one (every run of `produce` may
    /// use it: it holds the same key and value), else the one `append` makes now.
    fn early_or(&mut self, append: impl FnOnce() -> Result<(u64, u64)>) -> Result<(u64, u64)> {
        if let Some(r) = self.early {
            return Ok(r);
        }
        let r = append()?;
        self.push(r);
        Ok(r)
    }

    fn iter(&self) -> impl Iterator<Item = (u64, u64)> + '_ {
        self.inline[..self.n]
            .iter()
            .chain(self.more.iter())
            .chain(self.early.iter())
            .copied()
    }
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

/// Cleaning steps (each at most 64 records) tried when a write finds the store full.
const COMPACT_ON_FULL_STEPS: usize = 4096;

#[derive(Clone, Copy, PartialEq, Eq)]
enum Mode {
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

    /// The map's number in the store's catalog, which its records carry (FORMAT.md,
    /// "Records": maps numbered below 8 get 2-byte headers for small records). Numbers
    /// of dropped maps are reused.
    pub fn id(&self) -> u64 {
        self.m.id
    }

    fn txn(&self) -> Result<Txn<'_>> {
        let t = thread_txn(&self.sh)?;
        let mut tx = Txn::new(&self.sh, t);
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

    /// Inserts or replaces; says which.
    pub fn put(&self, key: &[u8], value: &[u8]) -> Result<PutOutcome> {
        let _call = crate::deadline::call();
        let (_, existed, _) = self.write(key, Some(value), Mode::Upsert, false)?;
        Ok(if existed {
            PutOutcome::Replaced
        } else {
            PutOutcome::Inserted
        })
    }

    /// Inserts or replaces, returning the previous value.
    pub fn swap(&self, key: &[u8], value: &[u8]) -> Result<Option<Vec<u8>>> {
        let _call = crate::deadline::call();
        Ok(self.write(key, Some(value), Mode::Upsert, true)?.2)
    }

    /// Inserts only if `key` is absent; returns whether it did.
    pub fn insert(&self, key: &[u8], value: &[u8]) -> Result<bool> {
        let _call = crate::deadline::call();
        Ok(self.write(key, Some(value), Mode::InsertOnly, false)?.0)
    }

    /// Replaces only if `key` is present; returns whether it did.
    pub fn replace(&self, key: &[u8], value: &[u8]) -> Result<bool> {
        let _call = crate::deadline::call();
        Ok(self.write(key, Some(value), Mode::ReplaceOnly, false)?.0)
    }

    /// Removes `key`; returns whether it was present.
    pub fn remove(&self, key: &[u8]) -> Result<bool> {
        let _call = crate::deadline::call();
        Ok(self.write(key, None, Mode::ReplaceOnly, false)?.0)
    }

    /// Removes `key` and returns its value, if it was present.
    pub fn take(&self, key: &[u8]) -> Result<Option<Vec<u8>>> {
        let _call = crate::deadline::call();
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
        self.retry_full(|| self.write_once(key, value, mode, want_old))
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
        if let (Some(v), true) = (value, mode != Mode::InsertOnly && self.in_place_ok(value)) {
            return self.write_maybe_in_place(&tx, key, v, mode, want_old);
        }
        let h = hash(tx.sh.g.seed, key);
        // The lock's line arrives while the pre-check below reads the bucket and the
        // record, or while the record is appended; else the lock waited for it after them.
        self.m.prefetch_hash(tx.sh, h, tx.sh.file_end());
        // Cheap optimistic pre-checks, so that a conditional write that does not apply
        // (a remove of an absent key too) appends and locks nothing: it writes no byte.
        let present = || Ok::<_, Error>(self.m.read_hashed(tx.sh, key, h, |_, _, _| ())?.is_some());
        match mode {
            Mode::InsertOnly if present()? => return Ok((false, true, None)),
            Mode::ReplaceOnly if !present()? => return Ok((false, false, None)),
            _ => {}
        }
        let new = match value {
            Some(v) => Some(self.append(&tx, key, v)?),
            None => None,
        };
        let mut existed = false;
        let mut old_val = None;
        let r = self.m.write_hashed(&tx, key, h, &mut |tx, hit| {
            existed = hit.is_some();
            if !mode.applies(existed) {
                return Ok(Action::Keep);
            }
            if let (true, Some(hit)) = (want_old, hit) {
                old_val = Some(copy_value(tx.sh, hit, &self.name)?);
            }
            Ok(match new {
                Some((off, len)) => Action::Put(off, len),
                None => Action::Remove,
            })
        });
        let applied = self.settle(&tx, &r, new.into_iter());
        r?;
        self.sync()?;
        Ok((applied, existed, old_val))
    }

    /// Whether a write of `value` may overwrite the key's current value in place, if it
    /// has the same length (see `FLAG_IN_PLACE`, and `FLAG_IN_PLACE_UIDS` for maps with
    /// UIDs).
    #[inline]
    fn in_place_ok(&self, value: Option<&[u8]>) -> bool {
        let g = &self.sh.g;
        let max = match (self.m.vtrail == 0, g.in_place_uids) {
            (true, _) => IN_PLACE_MAX,
            (false, true) => IN_PLACE_MAX_UIDS,
            (false, false) => return false,
        };
        g.in_place && value.is_some_and(|v| v.len() as u64 <= max)
    }

    /// The action that makes `value` the value of the key `hit` names, in a write by UID
    /// (or [`Map::put_with_uid`]) under the key's lock: in place if it can go there,
    /// else a record appended now.
    fn uid_write_action<'v>(
        &self,
        tx: &Txn,
        key: Option<&[u8]>,
        hit: Option<&Hit>,
        value: &'v [u8],
        appended: &mut Appended,
    ) -> Result<Action<'v>> {
        if hit.is_some_and(|h| h.vlen == value.len() as u64) && self.in_place_ok(Some(value)) {
            return Ok(Action::InPlace(value));
        }
        let (off, len) = match (key, hit) {
            (Some(key), _) => appended.early_or(|| self.append(tx, key, value))?,
            (None, Some(hit)) => {
                let r = with_hit_key(tx.sh, hit, |key| self.append(tx, key, value))?;
                appended.push(r);
                r
            }
            (None, None) => return Err(tx.sh.corrupt("a write by UID found no entry")),
        };
        Ok(Action::Put(off, len))
    }

    /// [`Map::write_once`] for a value that may go in place: decided under the segment
    /// lock, where the current value's length is known. The same length: its bytes are
    /// overwritten where they are (nothing appended, nothing dead). Otherwise a record is
    /// appended there and then, under the lock (a small value: the append is a copy into
    /// the thread's chunk, rarely a refill), unless the thread guessed that it would be
    /// needed and appended it before the lock ([`APPENDING`]).
    fn write_maybe_in_place(
        &self,
        tx: &Txn,
        key: &[u8],
        v: &[u8],
        mode: Mode,
        want_old: bool,
    ) -> Result<(bool, bool, Option<Vec<u8>>)> {
        let mut existed = false;
        let mut old_val = None;
        let h = hash(tx.sh.g.seed, key);
        // Taking the segment lock waits for its line and the bucket's, usually misses,
        // and the lock's atomic RMW lets nothing else in this thread proceed meanwhile.
        // When this thread's recent puts appended (inserts, or values that changed
        // length), append first, while those lines are on their way: the record is
        // the same whatever the lock finds, except when the key turns out to have a
        // value of the same length, which goes in place (the record is then dead: space
        // for the cleaner, noted as for any record that was not published).
        let predicted = APPEND_EARLY && mode == Mode::Upsert && APPENDING.get() >= APPEND_FIRST_AT;
        let mut appended = self.append_early(tx, predicted, h, key, v);
        let mut went_in_place = None;
        let r = self.m.write_hashed(tx, key, h, &mut |tx, hit| {
            existed = hit.is_some();
            if !mode.applies(existed) {
                return Ok(Action::Keep);
            }
            if let (true, Some(hit)) = (want_old, hit) {
                old_val = Some(copy_value(tx.sh, hit, &self.name)?);
            }
            match hit {
                Some(hit) if hit.vlen == v.len() as u64 => {
                    went_in_place = Some(true);
                    Ok(Action::InPlace(v))
                }
                _ => {
                    went_in_place = Some(false);
                    // An earlier attempt's record (the segment split in between) is
                    // reused: it holds the same key and value.
                    let (off, len) = match appended {
                        Some(a) => a,
                        None => *appended.insert(self.append(tx, key, v)?),
                    };
                    Ok(Action::Put(off, len))
                }
            }
        });
        if let Some(in_place) = went_in_place {
            note_appending(!in_place);
        }
        let applied = self.settle(tx, &r, appended.into_iter());
        r?;
        self.sync()?;
        Ok((applied, existed, old_val))
    }

    /// If `likely`, appends the record for (key, value) before the write takes the lock
    /// of the key's segment (whose hash is `h`), and starts loading that lock's line and
    /// the key's bucket first, so that they arrive meanwhile. `None` if not `likely`, or
    /// if the append failed: that failure (a full store) is not the write's to report,
    /// because the write may turn out to need no record (a value of the same length goes
    /// in place; a conditional write may not apply). A write that does need one appends
    /// it under the lock, and reports that append's error.
    fn append_early(
        &self,
        tx: &Txn,
        likely: bool,
        h: u64,
        key: &[u8],
        v: &[u8],
    ) -> Option<(u64, u64)> {
        if !likely {
            return None;
        }
        self.m.prefetch_hash(tx.sh, h, tx.sh.file_end());
        self.append(tx, key, v).ok()
    }

    /// Appends a record for (key, value) to the thread's data chunk: (offset, length).
    ///
    /// In a map with UIDs the value is followed by an 8-byte placeholder for the key's UID
    /// index, filled in under the locks (`uid::patch_record`).
    fn append(&self, tx: &Txn, key: &[u8], v: &[u8]) -> Result<(u64, u64)> {
        let vt = self.m.vtrail;
        if v.len() as u64 + vt > MAX_VALUE {
            return Err(Error::InvalidArgument(format!(
                "value of {} bytes; the limit in a map with UIDs is {}",
                v.len(),
                MAX_VALUE - vt
            )));
        }
        let hdr = record_header(
            self.m.id,
            key.len() as u64,
            v.len() as u64 + vt,
            self.sh.g.short_records,
        );
        let tail = [0u8; UID_TRAILER as usize];
        let tail = &tail[..vt as usize];
        let off = if self.sh.g.trailer == 4 {
            let crc = record_crc(&[&hdr, key, v, tail]).to_le_bytes();
            crate::alloc::append(
                tx,
                &[&hdr, key, v, tail, &crc],
                crate::alloc::Purpose::Normal,
            )?
        } else {
            crate::alloc::append(tx, &[&hdr, key, v, tail], crate::alloc::Purpose::Normal)?
        };
        Ok((
            off,
            hdr.len() as u64 + key.len() as u64 + v.len() as u64 + vt + self.sh.g.trailer,
        ))
    }

    /// After a write: accounts the records it made dead (the replaced one, and every
    /// appended one that did not get published), frees large ones, and runs a cleaning
    /// step if due. Returns whether the write changed the map.
    fn settle(
        &self,
        tx: &Txn,
        r: &Result<WriteResult>,
        appended: impl Iterator<Item = (u64, u64)>,
    ) -> bool {
        let (applied, old, old_serial) = match r {
            Ok(w) => (w.applied, w.old, w.old_serial),
            Err(_) => (false, None, 0),
        };
        let published = match r {
            Ok(w) if w.applied => w.published,
            _ => None,
        };
        let mut consumed = 0u64;
        for (off, len) in appended {
            consumed += len;
            if Some(off) != published {
                // Never published. Its run or chunk is touched only while still ours (a
                // run pending in our txn slot, our current data chunk): one we let go of
                // since (an earlier attempt's) may be freed and reused already, and is
                // left to the cleaner.
                crate::alloc::free_if_large(tx, off, crate::alloc::pending_large_serial(tx, off));
                crate::alloc::note_dead_own(tx, off, len);
            }
        }
        if applied {
            if let Some((old_off, _)) = old {
                // Its dead bytes were noted by the write, while a slot still held it.
                crate::alloc::free_if_large(tx, old_off, old_serial);
            }
        }
        if r.is_ok() {
            crate::cleaner::maybe_clean(tx, consumed);
            crate::hashmap::prepare_growth(&tx.housekeeping(), &self.m);
            crate::alloc::allocate_ahead(tx.sh);
        }
        applied
    }

    /// Runs a read-modify-write whose new record `produce` appends under the segment
    /// lock (so it sees the current value and no other write can come in between).
    /// `produce` returns the action and a result to hand back.
    fn rmw<'v, T>(
        &self,
        key: &[u8],
        produce: impl FnMut(&Map, &Txn, Option<&Hit>, &mut Appended) -> Result<(Action<'v>, T)>,
    ) -> Result<(bool, T)> {
        check_sizes(key, None)?;
        self.rmw_with(|tx, p| self.m.write(tx, key, p), produce)
    }

    /// [`Map::rmw`] on the key a UID names (`produce` always sees its entry).
    fn rmw_uid<'v, T>(
        &self,
        uid: Uid,
        mut produce: impl FnMut(&Map, &Txn, &Hit, &mut Appended) -> Result<(Action<'v>, T)>,
    ) -> Result<(bool, T)> {
        self.need_uids()?;
        self.rmw_with(
            |tx, p| self.m.write_uid(tx, uid, p),
            |map, tx, hit, appended| match hit {
                Some(h) => produce(map, tx, h, appended),
                None => Err(crate::kinds::varmap::uid::stale(uid)),
            },
        )
    }

    fn rmw_with<'v, T>(
        &self,
        write: impl Fn(&Txn, &mut crate::kinds::varmap::Produce) -> Result<WriteResult>,
        produce: impl FnMut(&Map, &Txn, Option<&Hit>, &mut Appended) -> Result<(Action<'v>, T)>,
    ) -> Result<(bool, T)> {
        self.rmw_uid_out(|_| None, write, produce)
            .map(|(a, t, _)| (a, t))
    }

    /// [`Map::rmw_with`], also returning the published key's UID (maps with UIDs).
    /// `early` runs before the segment lock is taken, and may append the record the write
    /// will probably need (`Appended::early_or` hands it to `produce`): see
    /// [`Map::append_early`].
    fn rmw_uid_out<'v, T>(
        &self,
        early: impl Fn(&Txn) -> Option<(u64, u64)>,
        write: impl Fn(&Txn, &mut crate::kinds::varmap::Produce) -> Result<WriteResult>,
        mut produce: impl FnMut(&Map, &Txn, Option<&Hit>, &mut Appended) -> Result<(Action<'v>, T)>,
    ) -> Result<(bool, T, Option<Uid>)> {
        let r = self.retry_full(|| {
            let tx = self.txn()?;
            let mut appended = Appended {
                early: early(&tx),
                ..Appended::default()
            };
            let mut out = None;
            let r = write(&tx, &mut |tx, hit| {
                let (a, t) = produce(self, tx, hit, &mut appended)?;
                out = Some(t);
                Ok(a)
            });
            let applied = self.settle(&tx, &r, appended.iter());
            let uid = r?.uid;
            self.sync()?;
            Ok((applied, out, uid))
        })?;
        match r {
            (applied, Some(t), uid) => Ok((applied, t, uid)),
            (_, None, _) => Err(Error::InvalidArgument(
                "read-modify-write produced nothing".into(),
            )),
        }
    }

    /// Runs `f`; if the store is full (at its maximum size, or its filesystem is) but
    /// holds dead records, compacts once and retries.
    fn retry_full<T>(&self, mut f: impl FnMut() -> Result<T>) -> Result<T> {
        match f() {
            Err(full @ (Error::StoreFull(_) | Error::NoSpace { .. })) => {
                let tx = self.txn()?;
                // A compaction that could not start (the cleaner lock's holder is alive
                // but stopped) or found no room to move records to leaves the store
                // full: that is the error to report.
                match crate::cleaner::compact(&tx, COMPACT_ON_FULL_STEPS) {
                    Ok(0) | Err(Error::Timeout(_) | Error::NoSpace { .. }) => Err(full),
                    Ok(_) => f(),
                    Err(e) => Err(e),
                }
            }
            r => r,
        }
    }

    /// Atomically: if the current value of `key` equals `expected` (`None` = absent),
    /// sets it to `new` (`None` = remove) and returns true; else changes nothing and
    /// returns false. Compare-and-remove is `compare_and_swap(k, Some(old), None)`;
    /// insert-if-absent is `compare_and_swap(k, None, Some(v))`.
    pub fn compare_and_swap(
        &self,
        key: &[u8],
        expected: Option<&[u8]>,
        new: Option<&[u8]>,
    ) -> Result<bool> {
        let _call = crate::deadline::call();
        check_sizes(key, new)?;
        // Optimistic pre-check: a mismatch appends nothing.
        let cur = self.get(key)?;
        if cur.as_deref() != expected {
            return Ok(false);
        }
        let (applied, ()) = self.rmw(key, |map, tx, hit, appended| {
            let same = match (hit, expected) {
                (None, None) => true,
                (Some(h), Some(e)) => h.vlen == e.len() as u64 && tx.sh.r.bytes_eq(h.val_off, e),
                _ => false,
            };
            if !same {
                return Ok((Action::Keep, ()));
            }
            Ok((
                match new {
                    Some(v)
                        if hit.is_some_and(|h| h.vlen == v.len() as u64)
                            && map.in_place_ok(Some(v)) =>
                    {
                        Action::InPlace(v)
                    }
                    Some(v) => {
                        let (off, len) = map.append(tx, key, v)?;
                        appended.push((off, len));
                        Action::Put(off, len)
                    }
                    None if hit.is_some() => Action::Remove,
                    None => Action::Keep,
                },
                (),
            ))
        })?;
        Ok(applied || (expected.is_none() && new.is_none()))
    }

    /// Atomic read-modify-write: `f` sees the current value (or `None`) and returns the
    /// new one (or `None` to remove the key); no other write to the key comes in between.
    /// Returns what `f` returned for the value that was installed.
    ///
    /// `f` runs without any lock held (it may be slow; other keys are not blocked): the
    /// result is installed only if the value is still the one `f` saw, otherwise `f` runs
    /// again on the new value. So `f` may run several times and must have no side
    /// effects. A process that dies inside `f` leaves the old value and holds no lock.
    /// Gives up with [`Error::Timeout`] after the store's lock timeout of retries.
    pub fn update(
        &self,
        key: &[u8],
        mut f: impl FnMut(Option<&[u8]>) -> Option<Vec<u8>>,
    ) -> Result<Option<Vec<u8>>> {
        check_sizes(key, None)?;
        let _call = crate::deadline::call();
        let wait = Wait::begin(self.m.timeout, self.m.timeout);
        let mut tries = 0u32;
        loop {
            let cur = self.get(key)?;
            let new = f(cur.as_deref());
            if let Some(v) = &new {
                check_sizes(key, Some(v))?;
            }
            if cur.is_none() && new.is_none() {
                // Absent stays absent: nothing to install, but make sure it is still absent.
                if !self.contains(key)? {
                    return Ok(None);
                }
            } else if self.compare_and_swap(key, cur.as_deref(), new.as_deref())? {
                return Ok(new);
            }
            tries += 1;
            if wait.expired() {
                return Err(wait.timeout());
            }
            if tries > 4 {
                crate::rt::sleep(std::time::Duration::from_micros(10 << tries.min(10)));
            } else {
                crate::rt::yield_now();
            }
        }
    }

    /// Atomically adds `delta` (wrapping) to the 8-byte little-endian signed integer value
    /// of `key` (an absent key counts as 0 and is created), and returns the new value.
    /// `InvalidArgument` if the current value is not 8 bytes long.
    pub fn add(&self, key: &[u8], delta: i64) -> Result<i64> {
        let _call = crate::deadline::call();
        let (_, v) = self.rmw(key, |map, tx, hit, appended| {
            let cur = match hit {
                None => 0i64,
                Some(h) if h.vlen == 8 => {
                    verify_hit(tx.sh, h, &map.name)?;
                    let mut b = [0u8; 8];
                    tx.sh.r.read_bytes(h.val_off, &mut b);
                    i64::from_le_bytes(b)
                }
                Some(h) => {
                    return Err(Error::InvalidArgument(format!(
                        "add needs an 8-byte integer value; this one has {} bytes",
                        h.vlen
                    )))
                }
            };
            let new = cur.wrapping_add(delta);
            if hit.is_some() && map.in_place_ok(Some(&[0; 8])) {
                return Ok((Action::InPlaceWord(new as u64), new));
            }
            let (off, len) = map.append(tx, key, &new.to_le_bytes())?;
            appended.push((off, len));
            Ok((Action::Put(off, len), new))
        })?;
        Ok(v)
    }

    /// Returns the value of `key`, first inserting `default` if the key is absent
    /// (atomically: of several racing callers, exactly one inserts).
    pub fn get_or_insert(&self, key: &[u8], default: &[u8]) -> Result<Vec<u8>> {
        let _call = crate::deadline::call();
        check_sizes(key, Some(default))?;
        if let Some(v) = self.get(key)? {
            return Ok(v);
        }
        let (_, v) = self.rmw(key, |map, tx, hit, appended| match hit {
            Some(h) => Ok((Action::Keep, copy_value(tx.sh, h, &map.name)?)),
            None => {
                let (off, len) = map.append(tx, key, default)?;
                appended.push((off, len));
                Ok((Action::Put(off, len), default.to_vec()))
            }
        })?;
        Ok(v)
    }

    /// Whether the map keeps a stable [`Uid`] per key (chosen at creation with
    /// [`MapOptions::uids`](crate::MapOptions::uids)).
    pub fn has_uids(&self) -> bool {
        self.m.vtrail != 0
    }

    fn need_uids(&self) -> Result<()> {
        if self.has_uids() {
            Ok(())
        } else {
            Err(Error::NoUids {
                name: self.name.to_string(),
            })
        }
    }

    /// The stable handle of `key`, or `None` if the key is absent. It stays valid while
    /// the key exists, however its record moves; see [`Uid`]. This and every other UID
    /// call on a map without UIDs is [`Error::NoUids`].
    pub fn uid(&self, key: &[u8]) -> Result<Option<Uid>> {
        let _call = crate::deadline::call();
        check_sizes(key, None)?;
        self.need_uids()?;
        self.sh.ensure_registered()?;
        let sh = &*self.sh;
        // Read only once a retry happens (see `read_uid`: the clock read is ordered).
        let mut start = None;
        loop {
            let Some((off, index)) =
                self.m.read_value(sh, key, &self.name, |off, voff, vlen| {
                    let mut b = [0u8; 8];
                    sh.r.read_bytes(voff + vlen, &mut b);
                    (off, u64::from_le_bytes(b))
                })?
            else {
                return Ok(None);
            };
            // The entry names this very record unless the key was written meanwhile:
            // then look again.
            if let Some(e) = crate::kinds::varmap::uid::entry_off(sh, &self.m, index)? {
                let loc = sh.w(e + E_LOC).load(Acquire);
                if loc & E_FREE == 0 && loc & (E_FREE - 1) == off {
                    let h = crate::format::hash(sh.g.seed, key);
                    return Ok(Some(Uid::new(index, loc >> 48, h)));
                }
            }
            let t = self.m.timeout;
            let wait = start.get_or_insert_with(|| Wait::begin(t, t));
            if wait.expired() {
                return Err(wait.timeout());
            }
            crate::rt::yield_now();
        }
    }

    /// [`Map::put`], also returning the key's handle (a new one for an inserted key, the
    /// one it had for a replaced key).
    pub fn put_with_uid(&self, key: &[u8], value: &[u8]) -> Result<(PutOutcome, Uid)> {
        let _call = crate::deadline::call();
        check_sizes(key, Some(value))?;
        self.need_uids()?;
        let h = hash(self.sh.g.seed, key);
        // As for `put` (`write_maybe_in_place`): a value that may go in place is appended
        // before the lock only when this thread's recent puts appended.
        let may_go_in_place = self.in_place_ok(Some(value));
        let likely = !may_go_in_place || (APPEND_EARLY && APPENDING.get() >= APPEND_FIRST_AT);
        let mut went_in_place = None;
        let (_, existed, uid) = self.rmw_uid_out(
            |tx| self.append_early(tx, likely, h, key, value),
            |tx, p| self.m.write_hashed(tx, key, h, p),
            |map, tx, hit, appended| {
                let action = map.uid_write_action(tx, Some(key), hit, value, appended)?;
                went_in_place = Some(matches!(action, Action::InPlace(_)));
                Ok((action, hit.is_some()))
            },
        )?;
        if let (true, Some(in_place)) = (may_go_in_place, went_in_place) {
            note_appending(!in_place);
        }
        let uid = uid.ok_or_else(|| self.sh.corrupt("a write to a UID map published no UID"))?;
        let outcome = if existed {
            PutOutcome::Replaced
        } else {
            PutOutcome::Inserted
        };
        Ok((outcome, uid))
    }

    /// Optimistic read of the entry `uid` names: calls `f(key offset, key length, value
    /// offset, value length)` on a consistent view (perhaps more than once).
    fn read_uid<T>(&self, uid: Uid, f: impl FnMut(u64, u64, u64, u64) -> T) -> Result<T> {
        self.read_uid_then(uid, false, f)
    }

    /// [`Map::read_uid`]; with `will_write`, also starts loading the key's segment lock
    /// and bucket while the record is read, for the write that follows (`update_by_uid`:
    /// they were missed one after the other, after the record; with them loaded at once
    /// it went from 0.63-0.65 to 0.96-1.10 M/s at 10 M keys, 1.5-1.6× an update by key
    /// instead of 1.1-1.2×).
    #[inline(always)]
    fn read_uid_then<T>(
        &self,
        uid: Uid,
        will_write: bool,
        mut f: impl FnMut(u64, u64, u64, u64) -> T,
    ) -> Result<T> {
        self.need_uids()?;
        self.sh.ensure_registered()?;
        let sh = &*self.sh;
        // The clock is read only once a retry happens, as for reads by key. Not for its
        // 18 ns: the vDSO's clock read is ordered (`lfence; rdtsc` or `rdtscp`), so no
        // later load starts before every earlier one is done, and consecutive gets
        // cannot overlap their misses. Read on every call, it made a get by UID 0.81-0.85x
        // a get by key; without it, 1.14-1.25x (shoal-features, 1 M keys, same run).
        let mut start = None;
        let mut tries = 0u32;
        loop {
            let ent = crate::kinds::varmap::uid::load(sh, &self.m, uid)?;
            let off = ent.off();
            if will_write {
                self.m.prefetch_hash(sh, ent.hash, sh.file_end());
            }
            if let Some((mid, k, v, hl)) = read_record_header(sh, off, sh.file_end()) {
                // A large length is validated before it is trusted with an allocation.
                if mid == self.m.id && v >= UID_TRAILER && (v <= 4096 || ent.unchanged(sh)) {
                    let r = f(off + hl, k, off + hl + k, v - UID_TRAILER);
                    // Checked inside the optimistic read, trusted only once it validated
                    // (as `MapRef::read_value` does for reads by key).
                    let sum_ok = sh.g.trailer == 0 || record_crc_ok(sh, off, off + hl + k + v);
                    if ent.unchanged(sh) {
                        if !self.m.alive(sh) {
                            return Err(self.m.dropped());
                        }
                        if !sum_ok {
                            return Err(checksum_failed(sh, &self.name, off));
                        }
                        return Ok(r);
                    }
                }
            }
            if ent.unchanged(sh) {
                if !self.m.alive(sh) {
                    return Err(self.m.dropped());
                }
                return Err(sh.corrupt(format!(
                    "map {:?}: UID {uid} names {off:#x}, which is not one of its records",
                    self.name
                )));
            }
            tries += 1;
            if tries >= 64 && ent.busy_without_writer(sh, &self.m)? {
                return Err(sh.corrupt(format!(
                    "map {:?}: UID {uid}'s entry is marked mid-write (busy) with no writer",
                    self.name
                )));
            }
            // Spin, yield, sleep; and recover the key's segment if its writer died (one
            // killed in an in-place write leaves the version busy until then).
            let t = self.m.timeout;
            let wait = start.get_or_insert_with(|| Wait::begin(t, t));
            self.m.backoff(sh, ent.hash, tries, wait)?;
        }
    }

    /// The value of the key `uid` names, copied out: no hashing, no key comparison.
    /// [`Error::StaleUid`] if the key was removed.
    pub fn get_by_uid(&self, uid: Uid) -> Result<Vec<u8>> {
        let sh = &*self.sh;
        self.read_uid(uid, |_, _, voff, vlen| {
            let mut v = Vec::new();
            sh.r.read_to_vec(voff, vlen as usize, &mut v);
            v
        })
    }

    /// Copies the value of the key `uid` names into `buf` (replacing its contents).
    pub fn get_by_uid_into(&self, uid: Uid, buf: &mut Vec<u8>) -> Result<()> {
        let sh = &*self.sh;
        self.read_uid(uid, |_, _, voff, vlen| {
            sh.r.read_to_vec(voff, vlen as usize, buf)
        })
    }

    /// The key `uid` names.
    pub fn key_by_uid(&self, uid: Uid) -> Result<Vec<u8>> {
        let sh = &*self.sh;
        self.read_uid(uid, |koff, klen, _, _| {
            let mut k = Vec::new();
            sh.r.read_to_vec(koff, klen as usize, &mut k);
            k
        })
    }

    /// Replaces the value of the key `uid` names (the handle stays the same).
    pub fn put_by_uid(&self, uid: Uid, value: &[u8]) -> Result<()> {
        let _call = crate::deadline::call();
        check_sizes(&[], Some(value))?;
        self.rmw_uid(uid, |map, tx, hit, appended| {
            Ok((
                map.uid_write_action(tx, None, Some(hit), value, appended)?,
                (),
            ))
        })?;
        Ok(())
    }

    /// Removes the key `uid` names, returning its value; the handle becomes stale.
    pub fn remove_by_uid(&self, uid: Uid) -> Result<Vec<u8>> {
        let _call = crate::deadline::call();
        let (_, v) = self.rmw_uid(uid, |_, tx, hit, _| {
            Ok((Action::Remove, copy_value(tx.sh, hit, &self.name)?))
        })?;
        Ok(v)
    }

    /// [`Map::update`] on the key `uid` names: `f` sees the current value and returns the
    /// new one (or `None` to remove the key), without any lock held; it runs again if
    /// another write came in between.
    pub fn update_by_uid(
        &self,
        uid: Uid,
        mut f: impl FnMut(&[u8]) -> Option<Vec<u8>>,
    ) -> Result<Option<Vec<u8>>> {
        let _call = crate::deadline::call();
        let wait = Wait::begin(self.m.timeout, self.m.timeout);
        loop {
            let sh = &*self.sh;
            let cur = self.read_uid_then(uid, true, |_, _, voff, vlen| {
                let mut v = Vec::new();
                sh.r.read_to_vec(voff, vlen as usize, &mut v);
                v
            })?;
            let new = f(&cur);
            if let Some(v) = &new {
                check_sizes(&[], Some(v))?;
            }
            let (applied, ()) = self.rmw_uid(uid, |map, tx, hit, appended| {
                // Under the lock, the value must still be the one `f` saw. Its bytes are
                // compared, not its record's offset: a large record has a run of its own,
                // freed as soon as it is replaced and handed out again first, so two
                // writes while `f` ran could put the key's record back at the same offset
                // with another value, and the update would have overwritten both (found
                // by the linearizability helper; `update_by_uid_sees_writes_that_reuse_the_offset`).
                // Equal bytes are as good as no write: `f` depends on the value only.
                if hit.vlen != cur.len() as u64 || !tx.sh.r.bytes_eq(hit.val_off, &cur) {
                    return Ok((Action::Keep, ()));
                }
                Ok((
                    match &new {
                        Some(v) => map.uid_write_action(tx, None, Some(hit), v, appended)?,
                        None => Action::Remove,
                    },
                    (),
                ))
            })?;
            if applied {
                return Ok(new);
            }
            if wait.expired() {
                return Err(wait.timeout());
            }
            crate::rt::yield_now();
        }
    }

    /// [`Map::add`] on the key `uid` names.
    pub fn add_by_uid(&self, uid: Uid, delta: i64) -> Result<i64> {
        let _call = crate::deadline::call();
        let (_, v) = self.rmw_uid(uid, |map, tx, hit, appended| {
            if hit.vlen != 8 {
                return Err(Error::InvalidArgument(format!(
                    "add needs an 8-byte integer value; this one has {} bytes",
                    hit.vlen
                )));
            }
            verify_hit(tx.sh, hit, &map.name)?;
            let mut b = [0u8; 8];
            tx.sh.r.read_bytes(hit.val_off, &mut b);
            let new = i64::from_le_bytes(b).wrapping_add(delta);
            if map.in_place_ok(Some(&[0; 8])) {
                return Ok((Action::InPlaceWord(new as u64), new));
            }
            let (off, len) =
                with_hit_key(tx.sh, hit, |key| map.append(tx, key, &new.to_le_bytes()))?;
            appended.push((off, len));
            Ok((Action::Put(off, len), new))
        })?;
        Ok(v)
    }

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
        // behind this shape are in docs/benchmarks/single-get.md (session 13).
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
        let _call = crate::deadline::call();
        let sh = &*self.sh;
        remove_each(
            sh,
            keys,
            |k| self.m.prefetch_hash(sh, hash(sh.g.seed, k), sh.file_end()),
            |k| self.remove(k),
        )
    }

    /// With `sync_writes`, flushes after a write call (once per batch).
    fn sync(&self) -> Result<()> {
        crate::api::batch::flush_unless_batching(&self.sh)
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

/// Iterator over a map's entries; see [`Map::iter`]. Yields `Result`s. A damaged segment
/// (entries whose records cannot be read, or fail their checksums) is reported as one
/// [`Error::Corrupt`] naming the map and the segment, after the segment's readable
/// entries, and the iteration goes on with the next segment; any other error (the map was
/// dropped, its directory is damaged, a timeout) ends it.
pub struct Iter {
    map: Map,
    /// Position in bit-reversed hash order (see `crate::kinds::varmap::snapshot`).
    cursor: u64,
    done: bool,
    buf: VecDeque<(Vec<u8>, Vec<u8>)>,
    /// The damage of the segment whose items are in `buf`, reported after them.
    damage: Option<Error>,
    values: bool,
}

impl Iterator for Iter {
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
            let sh = &*self.map.sh;
            if let Err(e) = sh.ensure_registered() {
                self.done = true;
                return Some(Err(e));
            }
            let m = &self.map;
            match crate::kinds::varmap::snapshot(&m.sh, &m.m, &m.name, self.cursor, self.values) {
                Ok(step) => {
                    self.buf.extend(step.items);
                    self.damage = step.damage.map(|(_, what)| sh.corrupt(what));
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

thread_local! {
    /// How this thread's recent small-value puts went: a saturating counter, up by one
    /// for each that appended a record, down by one for each that overwrote in place.
    /// From [`APPEND_FIRST_AT`] on, the next put appends its record before taking the
    /// segment lock (`Map::write_maybe_in_place`). Per thread, not per map or store: a
    /// counter in shared memory or in a handle shared by threads would be a line every
    /// writer stores to. Only a guess: either way the put is correct, and a wrong guess
    /// costs one dead record or one lock wait without overlap.
    static APPENDING: std::cell::Cell<u8> = const { std::cell::Cell::new(0) };
}

/// [`APPENDING`] at which a put appends before locking: after two appending puts in a
/// row from zero, and back off after two in-place ones.
const APPEND_FIRST_AT: u8 = 2;

/// Whether puts of values that may go in place append before the lock at all (the guess
/// above). Switched off in session 21, when the soak lost live records in three runs with
/// it on and none without; back on in session 22, when the cause turned out to be
/// elsewhere and was fixed: a live process judged dead (docs/RELIABILITY.md, "The soak
/// lost a chunk of live records"). Kept as a switch for the next such hunt.
const APPEND_EARLY: bool = true;
/// Where [`APPENDING`] saturates.
const APPENDING_MAX: u8 = 3;

/// Counts a put of a value that could have gone in place in [`APPENDING`]: whether it
/// `appended` a record.
fn note_appending(appended: bool) {
    let c = APPENDING.get();
    APPENDING.set(if appended {
        (c + 1).min(APPENDING_MAX)
    } else {
        c.saturating_sub(1)
    });
}
