//! Writes: the puts and removes, a value in place or a record appended, and what a write settles after.

use super::*;
use crate::error::{Error, Result};
use crate::kinds::varmap::uid::Uid;
use crate::kinds::varmap::{Action, Hit, WriteResult};
use crate::txn::Txn;

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
    pub(crate) fn early_or(
        &mut self,
        append: impl FnOnce() -> Result<(u64, u64)>,
    ) -> Result<(u64, u64)> {
        if let Some(r) = self.early {
            return Ok(r);
        }
        let r = append()?;
        self.push(r);
        Ok(r)
    }

    pub(crate) fn iter(&self) -> impl Iterator<Item = (u64, u64)> + '_ {
        self.inline[..self.n]
            .iter()
            .chain(self.more.iter())
            .chain(self.early.iter())
            .copied()
    }
}

/// Cleaning steps (each at most 64 records) tried when a write finds the store full.
pub(crate) const COMPACT_ON_FULL_STEPS: usize = 4096;

impl Map {
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
    pub fn put_if_absent(&self, key: &[u8], value: &[u8]) -> Result<bool> {
        let _call = crate::deadline::call();
        Ok(self.write(key, Some(value), Mode::InsertOnly, false)?.0)
    }

    /// Replaces only if `key` is present; returns whether it did.
    pub fn put_if_present(&self, key: &[u8], value: &[u8]) -> Result<bool> {
        let _call = crate::deadline::call();
        Ok(self.write(key, Some(value), Mode::ReplaceOnly, false)?.0)
    }

    /// The former name of [`Map::put_if_absent`].
    #[deprecated(since = "0.2.0", note = "renamed put_if_absent")]
    #[inline]
    pub fn insert(&self, key: &[u8], value: &[u8]) -> Result<bool> {
        self.put_if_absent(key, value)
    }

    /// The former name of [`Map::put_if_present`].
    #[deprecated(since = "0.2.0", note = "renamed put_if_present")]
    #[inline]
    pub fn replace(&self, key: &[u8], value: &[u8]) -> Result<bool> {
        self.put_if_present(key, value)
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
    pub(crate) fn write(
        &self,
        key: &[u8],
        value: Option<&[u8]>,
        mode: Mode,
        want_old: bool,
    ) -> Result<(bool, bool, Option<Vec<u8>>)> {
        self.retry_full(|| self.write_once(key, value, mode, want_old))
    }

    pub(crate) fn write_once(
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
    pub(crate) fn in_place_ok(&self, value: Option<&[u8]>) -> bool {
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
    pub(crate) fn uid_write_action<'v>(
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
    pub(crate) fn write_maybe_in_place(
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
    pub(crate) fn append_early(
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
    pub(crate) fn append(&self, tx: &Txn, key: &[u8], v: &[u8]) -> Result<(u64, u64)> {
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
    pub(crate) fn settle(
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
    pub(crate) fn rmw<'v, T>(
        &self,
        key: &[u8],
        produce: impl FnMut(&Map, &Txn, Option<&Hit>, &mut Appended) -> Result<(Action<'v>, T)>,
    ) -> Result<(bool, T)> {
        check_sizes(key, None)?;
        self.rmw_with(|tx, p| self.m.write(tx, key, p), produce)
    }

    /// [`Map::rmw`] on the key a UID names (`produce` always sees its entry).
    pub(crate) fn rmw_uid<'v, T>(
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

    pub(crate) fn rmw_with<'v, T>(
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
    pub(crate) fn rmw_uid_out<'v, T>(
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
    pub(crate) fn retry_full<T>(&self, mut f: impl FnMut() -> Result<T>) -> Result<T> {
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
}

impl Map {
    /// With `sync_writes`, flushes after a write call (once per batch).
    pub(crate) fn sync(&self) -> Result<()> {
        crate::api::batch::flush_unless_batching(&self.sh)
    }
}

thread_local! {
    /// How this thread's recent small-value puts went: a saturating counter, up by one
    /// for each that appended a record, down by one for each that overwrote in place.
    /// From [`APPEND_FIRST_AT`] on, the next put appends its record before taking the
    /// segment lock (`Map::write_maybe_in_place`). Per thread, not per map or store: a
    /// counter in shared memory or in a handle shared by threads would be a line every
    /// writer stores to. Only a guess: either way the put is correct, and a wrong guess
    /// costs one dead record or one lock wait without overlap.
    pub(crate) static APPENDING: std::cell::Cell<u8> = const { std::cell::Cell::new(0) };
}

/// [`APPENDING`] at which a put appends before locking: after two appending puts in a
/// row from zero, and back off after two in-place ones.
pub(crate) const APPEND_FIRST_AT: u8 = 2;

/// Whether puts of values that may go in place append before the lock at all (the guess
/// above). A switch for hunts of lost records: with it off, a put appends only under the
/// lock, which rules the early append out (docs/RELIABILITY.md, "The soak lost a chunk of
/// live records").
pub(crate) const APPEND_EARLY: bool = true;
/// Where [`APPENDING`] saturates.
pub(crate) const APPENDING_MAX: u8 = 3;

/// Counts a put of a value that could have gone in place in [`APPENDING`]: whether it
/// `appended` a record.
pub(crate) fn note_appending(appended: bool) {
    let c = APPENDING.get();
    APPENDING.set(if appended {
        (c + 1).min(APPENDING_MAX)
    } else {
        c.saturating_sub(1)
    });
}
