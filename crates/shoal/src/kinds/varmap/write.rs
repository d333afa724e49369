//! Writes under the segment lock: puts, removes, values in place, writes by UID.

use super::*;
use crate::error::{Error, Result};
use crate::shared::Shared;
use crate::txn::{Redo, Txn};

impl MapRef {
    /// Locks the segment that holds `h` and returns it, with the directory entry
    /// re-validated under the lock.
    ///
    /// The home bucket's two lines are asked for before the lock is taken: the lock is an
    /// atomic read-modify-write of the segment's header line, usually a cache miss, and
    /// the bucket is the next miss a write waits on, so the two now arrive together
    /// instead of one after the other (10 M inserts: 1.02-1.05× in alternating runs).
    pub(crate) fn lock_segment(&self, tx: &Txn, h: u64) -> Result<u64> {
        let sh = tx.sh;
        let home = home_bucket(h, self.n_main);
        self.lock_segment_with(tx, h, |seg| {
            let bo = bucket_off(seg, home);
            sh.r.prefetch(bo);
            sh.r.prefetch(bo + BUCKET / 2);
        })
    }
}

impl MapRef {
    /// Under the segment lock: finds `key`.
    pub(crate) fn find_locked(&self, sh: &Shared, seg: u64, h: u64, key: &[u8]) -> Option<Hit> {
        let end = sh.file_end();
        let tag = hash_tag(h);
        let b = home_bucket(h, self.n_main);
        let stash = hdr_overflow(sh.w(bucket_off(seg, b) + B_HDR).load(Acquire)) > 0;
        let n = if stash { 1 + self.n_stash } else { 1 };
        for j in 0..n {
            let bk = if j == 0 { b } else { self.n_main + j - 1 };
            if let Some(fd) = self.scan(sh, bucket_off(seg, bk), tag, key, end) {
                return self.hit(sh, bk, fd, key.len() as u64);
            }
        }
        None
    }

    /// A [`Hit`] for a record found in bucket `bk` (None if its value is too short to
    /// hold the UID trailer: not a record of this map).
    pub(crate) fn hit(&self, sh: &Shared, bk: u64, fd: Found, klen: u64) -> Option<Hit> {
        Some(Hit {
            bucket: bk,
            slot: fd.slot,
            off: fd.off,
            rec_len: fd.hl + klen + fd.vlen + sh.g.trailer,
            hl: fd.hl,
            val_off: fd.off + fd.hl + klen,
            vlen: fd.vlen.checked_sub(self.vtrail)?,
        })
    }

    /// Under the segment lock: the entry whose record is at `off` (found by its slot, no
    /// key comparison: the UID paths know the record and the hash already).
    pub(crate) fn find_locked_at(&self, sh: &Shared, seg: u64, h: u64, off: u64) -> Option<Hit> {
        let end = sh.file_end();
        let want = make_slot(hash_tag(h), off);
        let b = home_bucket(h, self.n_main);
        let stash = hdr_overflow(sh.w(bucket_off(seg, b) + B_HDR).load(Acquire)) > 0;
        let n = if stash { 1 + self.n_stash } else { 1 };
        for j in 0..n {
            let bk = if j == 0 { b } else { self.n_main + j - 1 };
            for i in 0..SLOTS {
                if sh.w(slot_off(seg, bk, i)).load(Relaxed) == want {
                    let (m, k, v, hl) = read_record_header(sh, off, end)?;
                    if m != self.id {
                        return None;
                    }
                    let fd = Found {
                        slot: i,
                        off,
                        vlen: v,
                        hl,
                    };
                    return self.hit(sh, bk, fd, k);
                }
            }
        }
        None
    }

    /// Under the segment lock: a free slot for a key with hash `h` (home, then stash).
    pub(crate) fn free_slot(&self, sh: &Shared, seg: u64, h: u64) -> Option<(u64, u64)> {
        let b = home_bucket(h, self.n_main);
        for i in 0..SLOTS {
            if sh.w(slot_off(seg, b, i)).load(Relaxed) == 0 {
                return Some((b, i));
            }
        }
        let first = first_stash(h, self.n_stash);
        for s in 0..self.n_stash {
            let sb = self.n_main + (first + s) % self.n_stash;
            for i in 0..SLOTS {
                if sh.w(slot_off(seg, sb, i)).load(Relaxed) == 0 {
                    return Some((sb, i));
                }
            }
        }
        None
    }

    pub(crate) fn counter(&self, tx: &Txn, field: u64) -> u64 {
        self.hdr + M_COUNTERS + MC_SIZE * tx.idx + field
    }

    /// The one write path. Locks the key's segment and calls `produce` with the current
    /// entry (if any); `produce` says what to do: keep it, publish a record (appended
    /// before the call or by `produce` itself, under the lock), or remove the key. Splits
    /// a full segment and calls `produce` again when an insert finds no room.
    pub fn write(&self, tx: &Txn, key: &[u8], produce: &mut Produce) -> Result<WriteResult> {
        self.write_hashed(tx, key, hash(tx.sh.g.seed, key), produce)
    }

    /// [`MapRef::write`] of a key whose hash `h` the caller computed already.
    pub(crate) fn write_hashed(
        &self,
        tx: &Txn,
        key: &[u8],
        h: u64,
        produce: &mut Produce,
    ) -> Result<WriteResult> {
        let sh = tx.sh;
        loop {
            let seg = self.lock_segment(tx, h)?;
            crate::rt::failpoint!("write.locked");
            let hit = self.find_locked(sh, seg, h, key);
            let r = self.write_locked(tx, seg, h, hit, produce);
            match r {
                Ok(Some(res)) => {
                    tx.unlock(seg + S_LOCK);
                    return Ok(res);
                }
                Ok(None) => {
                    // Segment full: split it (we hold its lock), then retry.
                    let r = split(tx, self, seg);
                    tx.unlock(seg + S_LOCK);
                    r?;
                }
                Err(e) => {
                    tx.unlock(seg + S_LOCK);
                    return Err(e);
                }
            }
        }
    }

    /// The write path by UID: the entry gives the hash (no hashing) and the record (no
    /// key comparison). A stale handle is `Error::StaleUid`; `produce` always sees the
    /// entry.
    pub(crate) fn write_uid(
        &self,
        tx: &Txn,
        uid: crate::Uid,
        produce: &mut Produce,
    ) -> Result<WriteResult> {
        let sh = tx.sh;
        loop {
            let ent = crate::kinds::varmap::uid::load(sh, self, uid)?;
            let h = ent.hash;
            // The entry names both the key's segment (by its hash) and its record: start
            // loading the lock line, the bucket and the record at once. A write by key
            // learns the record only from the bucket, one miss after the other.
            let end = sh.file_end();
            self.prefetch_hash(sh, h, end);
            let off = ent.off();
            if off + 64 <= end {
                sh.r.prefetch(off);
                sh.r.prefetch(off + 63);
            }
            let seg = self.lock_segment(tx, h)?;
            crate::rt::failpoint!("write.locked");
            // Under the lock the entry holds still unless it was freed and reused by a
            // key of another segment: look again.
            let r = match crate::kinds::varmap::uid::load_at(sh, ent.e, uid) {
                Err(e) => Err(e),
                Ok(ent) if ent.hash != h => {
                    tx.unlock(seg + S_LOCK);
                    continue;
                }
                Ok(ent) => match self.find_locked_at(sh, seg, h, ent.off()) {
                    None => Err(sh.corrupt(format!(
                        "map {}: UID {uid} names record {:#x}, which no slot holds",
                        self.id,
                        ent.off()
                    ))),
                    Some(hit) => self.write_locked(tx, seg, h, Some(hit), produce),
                },
            };
            tx.unlock(seg + S_LOCK);
            return match r {
                Ok(Some(res)) => Ok(res),
                // Only an insert needs a free slot, and a write by UID never inserts.
                Ok(None) => Err(sh.corrupt("a write by UID asked for a new slot")),
                Err(e) => Err(e),
            };
        }
    }

    pub(crate) fn write_locked(
        &self,
        tx: &Txn,
        seg: u64,
        h: u64,
        hit: Option<Hit>,
        produce: &mut Produce,
    ) -> Result<Option<WriteResult>> {
        let sh = tx.sh;
        let new = match produce(tx, hit.as_ref())? {
            Action::Keep => {
                return Ok(Some(WriteResult {
                    old: hit.map(|h| (h.off, h.rec_len)),
                    old_serial: 0,
                    applied: false,
                    published: None,
                    uid: None,
                }))
            }
            Action::Put(off, len) => Some((off, len)),
            Action::Remove => None,
            Action::InPlace(bytes) => return self.write_in_place(tx, seg, hit, bytes).map(Some),
            Action::InPlaceWord(w) => {
                return self
                    .write_in_place(tx, seg, hit, &w.to_le_bytes())
                    .map(Some)
            }
        };
        let cnt_off = self.counter(tx, MC_COUNT);
        let bytes_off = self.counter(tx, MC_BYTES);
        let cnt = sh.w(cnt_off).load(Relaxed);
        let bytes = sh.w(bytes_off).load(Relaxed);
        let mut redo = Redo::new();
        // At most two bucket headers change: the slot's bucket and, for a stash slot, the
        // home bucket's overflow count (always a different bucket).
        let mut touched: [(u64, u64); 2] = [(0, 0); 2]; // (header offset, odd value)
        let mut nt = 0;
        let mut touch = |redo: &mut Redo, bo: u64, overflow_delta: i64| {
            let cur = sh.w(bo).load(Relaxed);
            let seq = hdr_seq(cur);
            touched[nt] = (bo, make_hdr(seq.wrapping_add(1), hdr_overflow(cur)));
            nt += 1;
            let ov = (hdr_overflow(cur) as i64 + overflow_delta).max(0) as u64;
            redo.push(bo, make_hdr(seq.wrapping_add(2), ov));
        };
        let uids = self.vtrail != 0;
        let uid_lock = self.hdr + M_UID_LOCK;
        let mut uid_locked = false;
        let mut new_uid = None;
        match (hit, new) {
            (Some(hit), Some((off, len))) => {
                redo.push(
                    slot_off(seg, hit.bucket, hit.slot),
                    make_slot(hash_tag(h), off),
                );
                touch(&mut redo, bucket_off(seg, hit.bucket), 0);
                redo.push(bytes_off, bytes.wrapping_add(len).wrapping_sub(hit.rec_len));
                crate::alloc::publish_large_redo(tx, off, &mut redo);
                if uids {
                    // Same key, new record: the entry follows it (no UID lock: the
                    // entry belongs to this key, whose segment lock we hold).
                    let (e, index) = self.uid_entry_of(sh, &hit)?;
                    crate::kinds::varmap::uid::patch_record(sh, off, len, index);
                    new_uid = Some(crate::kinds::varmap::uid::push_move(
                        sh, &mut redo, e, index, off,
                    ));
                }
            }
            (None, Some((off, len))) => {
                let Some((b, i)) = self.free_slot(sh, seg, h) else {
                    return Ok(None);
                };
                redo.push(slot_off(seg, b, i), make_slot(hash_tag(h), off));
                touch(&mut redo, bucket_off(seg, b), 0);
                if b >= self.n_main {
                    touch(&mut redo, bucket_off(seg, home_bucket(h, self.n_main)), 1);
                }
                redo.push(cnt_off, cnt.wrapping_add(1));
                redo.push(bytes_off, bytes.wrapping_add(len));
                crate::alloc::publish_large_redo(tx, off, &mut redo);
                if uids {
                    tx.lock(uid_lock)?;
                    uid_locked = true;
                    match crate::kinds::varmap::uid::push_take(tx, self, &mut redo, off, h) {
                        Ok(uid) => {
                            crate::kinds::varmap::uid::patch_record(sh, off, len, uid.index());
                            crate::rt::failpoint!("uid.taken");
                            new_uid = Some(uid);
                        }
                        Err(e) => {
                            tx.unlock(uid_lock);
                            return Err(e);
                        }
                    }
                }
            }
            (Some(hit), None) => {
                redo.push(slot_off(seg, hit.bucket, hit.slot), 0);
                touch(&mut redo, bucket_off(seg, hit.bucket), 0);
                if hit.bucket >= self.n_main {
                    touch(&mut redo, bucket_off(seg, home_bucket(h, self.n_main)), -1);
                }
                redo.push(cnt_off, cnt.wrapping_sub(1));
                redo.push(bytes_off, bytes.wrapping_sub(hit.rec_len));
                if uids {
                    let index = crate::kinds::varmap::uid::record_index(sh, hit.off, hit.rec_len);
                    tx.lock(uid_lock)?;
                    uid_locked = true;
                    if let Err(e) = crate::kinds::varmap::uid::push_free(tx, self, &mut redo, index)
                    {
                        tx.unlock(uid_lock);
                        return Err(e);
                    }
                }
            }
            (None, None) => {
                return Ok(Some(WriteResult {
                    old: None,
                    old_serial: 0,
                    applied: false,
                    published: None,
                    uid: None,
                }))
            }
        }
        // The old record dies with this write. Its chunk's dead-bytes hint is added to now,
        // while a slot still points at it: its chunk cannot be freed (let alone merged
        // into a longer run and rewritten) before the slot changes, so the add lands on a
        // chunk header, never in another record's bytes. Likewise a large old record's
        // serial, which names its run to the free that follows.
        let old_serial = match hit {
            Some(hit) => {
                crate::alloc::note_dead_at(tx, hit.off, hit.rec_len);
                crate::alloc::large_serial(sh, hit.off)
            }
            None => 0,
        };
        tx.commit(I_REDO, &[], &redo);
        crate::rt::failpoint!("write.committed");
        for (bo, odd) in &touched[..nt] {
            sh.w(*bo).store(*odd, Relaxed);
        }
        tx.apply_range(&redo, 0, redo.n / 2);
        crate::rt::failpoint!("write.half_applied");
        tx.apply_range(&redo, redo.n / 2, redo.n);
        crate::rt::failpoint!("write.applied");
        tx.done();
        if uid_locked {
            tx.unlock(uid_lock);
        }
        Ok(Some(WriteResult {
            old: hit.map(|h| (h.off, h.rec_len)),
            old_serial,
            applied: true,
            published: new.map(|n| n.0),
            uid: new_uid,
        }))
    }
}

/// What a write's `produce` step decides, seeing the current entry under the lock.
pub(crate) enum Action<'v> {
    /// Change nothing.
    Keep,
    /// Publish the record at (offset, length), inserting or replacing.
    Put(u64, u64),
    /// Remove the key (nothing happens if it is absent).
    Remove,
    /// Overwrite the current value's bytes where they are with these (a value of the same
    /// length, at most [`IN_PLACE_MAX`] bytes, in a store with `FLAG_IN_PLACE`).
    InPlace(&'v [u8]),
    /// [`Action::InPlace`] with an 8-byte value made under the lock (`add`).
    InPlaceWord(u64),
}

impl MapRef {
    /// [`MapRef::write`]'s in-place overwrite: the value's bytes change where they are, so
    /// nothing is appended and nothing dies (no dead bytes, nothing for the cleaner).
    ///
    /// Readers are kept off the changing bytes by the bucket's seq, as for every write:
    /// odd before the first byte changes, even (the list's last entries) after the last.
    /// A UID reader validates with its entry's version instead, so in a map with UIDs the
    /// version is marked busy alongside (`FLAG_IN_PLACE_UIDS`). Crash safety is the redo
    /// list's: the new bytes are logged first, so a writer killed while applying them is
    /// finished by recovery (the masked edge entries replay only this value's bytes).
    pub(crate) fn write_in_place(
        &self,
        tx: &Txn,
        seg: u64,
        hit: Option<Hit>,
        value: &[u8],
    ) -> Result<WriteResult> {
        let sh = tx.sh;
        let uids = self.vtrail != 0;
        let max = if uids {
            IN_PLACE_MAX_UIDS
        } else {
            IN_PLACE_MAX
        };
        let hit = match hit {
            Some(hit) if hit.vlen == value.len() as u64 && value.len() as u64 <= max => hit,
            _ => {
                return Err(Error::InvalidArgument(
                    "an in-place overwrite needs a current value of the same length".into(),
                ))
            }
        };
        debug_assert!(sh.g.in_place && (!uids || sh.g.in_place_uids));
        // The bytes already there: nothing a reader could tell apart changes, so nothing
        // is written (no redo list, no odd sequence, no busy version). A put that repeats
        // the current value costs a compare, and leaves the cache lines it read clean.
        if sh.r.bytes_eq(hit.val_off, value) {
            let uid = match uids {
                true => {
                    let (e, index) = self.uid_entry_of(sh, &hit)?;
                    Some(crate::kinds::varmap::uid::handle_at(sh, e, index))
                }
                false => None,
            };
            return Ok(WriteResult {
                old: None,
                old_serial: 0,
                applied: true,
                published: None,
                uid,
            });
        }
        let mut redo = Redo::new();
        redo.push_bytes(hit.val_off, value);
        let bo = bucket_off(seg, hit.bucket);
        let cur = sh.w(bo).load(Relaxed);
        let seq = hdr_seq(cur);
        redo.push(bo, make_hdr(seq.wrapping_add(2), hdr_overflow(cur)));
        let mut uid = None;
        if uids {
            let (e, index) = self.uid_entry_of(sh, &hit)?;
            let (u, busy) = crate::kinds::varmap::uid::push_in_place(sh, &mut redo, e, index);
            uid = Some((u, e, busy));
        }
        tx.commit(I_REDO, &[], &redo);
        crate::rt::failpoint!("inplace.committed");
        sh.w(bo)
            .store(make_hdr(seq.wrapping_add(1), hdr_overflow(cur)), Relaxed);
        if let Some((_, e, busy)) = uid {
            sh.w(e + E_VER).store(busy, Relaxed);
        }
        tx.apply_range(&redo, 0, redo.n / 2);
        crate::rt::failpoint!("inplace.half_applied");
        tx.apply_range(&redo, redo.n / 2, redo.n);
        tx.done();
        Ok(WriteResult {
            old: None,
            old_serial: 0,
            applied: true,
            published: None,
            uid: uid.map(|(u, _, _)| u),
        })
    }

    /// The UID entry (offset, index) of the live record `hit` in a map with UIDs: its
    /// index is the record's trailer.
    pub(crate) fn uid_entry_of(&self, sh: &Shared, hit: &Hit) -> Result<(u64, u64)> {
        let index = crate::kinds::varmap::uid::record_index(sh, hit.off, hit.rec_len);
        let e = crate::kinds::varmap::uid::entry_off(sh, self, index)?.ok_or_else(|| {
            sh.corrupt(format!(
                "map {}: record {:#x} names UID {index}, never handed out",
                self.id, hit.off
            ))
        })?;
        Ok((e, index))
    }
}

/// The decision step of [`MapRef::write`].
pub(crate) type Produce<'a> = dyn FnMut(&Txn, Option<&Hit>) -> Result<Action<'a>> + 'a;

/// What a write did: the old record (offset, length) if there was one, and whether the
/// change was made (false when `produce` kept the entry).
pub(crate) struct WriteResult {
    pub old: Option<(u64, u64)>,
    /// The old record's large-run serial (0 if it is not a large record), read while a
    /// slot still pointed at it; the free that follows names it.
    pub old_serial: u64,
    pub applied: bool,
    /// The record offset now published (for `Action::Put`).
    pub published: Option<u64>,
    /// In a map with UIDs, the published key's handle.
    pub uid: Option<crate::Uid>,
}
