//! Stable UIDs: reads and writes by handle, skipping hashing and key comparison.

use super::*;
use crate::deadline::Wait;
use crate::error::{Error, Result};
use crate::kinds::varmap::uid::Uid;
use crate::kinds::varmap::{checksum_failed, read_record_header, record_crc_ok, Action};

impl Map {
    /// Whether the map keeps a stable [`Uid`] per key (chosen at creation with
    /// [`MapOptions::uids`](crate::MapOptions::uids)).
    pub fn has_uids(&self) -> bool {
        self.m.vtrail != 0
    }

    pub(crate) fn need_uids(&self) -> Result<()> {
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

    /// The version of `key`'s UID entry, or `None` if the key is absent: every change to
    /// the key (a put, in place or not, a remove and re-insert) moves it, so a
    /// transaction's [`Cond::version`](crate::Cond::version) can require that nothing
    /// changed the key since it was read.
    pub fn version(&self, key: &[u8]) -> Result<Option<u64>> {
        let _call = crate::deadline::call();
        check_sizes(key, None)?;
        self.need_uids()?;
        self.sh.ensure_registered()?;
        let sh = &*self.sh;
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
            // The version belongs to this very record only if the entry still names it,
            // not busy, with the same version on both sides of the look.
            if let Some(e) = crate::kinds::varmap::uid::entry_off(sh, &self.m, index)? {
                let ver = sh.w(e + E_VER).load(Acquire);
                let loc = sh.w(e + E_LOC).load(Acquire);
                std::sync::atomic::fence(Acquire);
                if ver & E_VER_BUSY == 0
                    && loc & E_FREE == 0
                    && loc & (E_FREE - 1) == off
                    && sh.w(e + E_VER).load(Relaxed) == ver
                {
                    return Ok(Some(ver));
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
    pub(crate) fn read_uid<T>(
        &self,
        uid: Uid,
        f: impl FnMut(u64, u64, u64, u64) -> T,
    ) -> Result<T> {
        self.read_uid_then(uid, false, f)
    }

    /// [`Map::read_uid`]; with `will_write`, also starts loading the key's segment lock
    /// and bucket while the record is read, for the write that follows (`update_by_uid`:
    /// they were missed one after the other, after the record; with them loaded at once
    /// it went from 0.63-0.65 to 0.96-1.10 M/s at 10 M keys, 1.5-1.6× an update by key
    /// instead of 1.1-1.2×).
    #[inline(always)]
    pub(crate) fn read_uid_then<T>(
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
}
