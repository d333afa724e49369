//! A variable-size map's part of a multi-key transaction: its writes planned into the
//! transaction's shared redo list under the segment locks it holds, and reads recorded for
//! a consistent snapshot (DESIGN.md, "Multi-key transactions").
//!
//! The single-key write path (`write.rs`) builds its redo list from the file; a plan
//! reads every word through the list being built instead (`Plan::word`), so that two
//! writes to one bucket, one map's counters or one map's UID free list compose.

use super::*;
use crate::mem::fence;
use crate::txn::{Plan, Txn};

/// A write a transaction plans on one key of a variable-size map.
pub(crate) enum VarWrite<'v> {
    /// Publish the record at (offset, length), appended by this thread and not yet
    /// published: insert the key or replace its value.
    Put(u64, u64),
    /// Overwrite the present value's bytes where they are with these (the same length,
    /// and a store and map that write in place: `Map::in_place_ok`).
    InPlace(&'v [u8]),
    /// Remove the key (it is present).
    Remove,
}

impl MapRef {
    /// Enters bucket header `bo`'s change in the plan: its seq moves by 2 once per plan;
    /// overflow counts compose.
    fn plan_hdr(&self, sh: &Shared, plan: &mut Plan, bo: u64, over_delta: i64) -> Result<()> {
        let cur = plan.word(sh, bo);
        let (seq, odd) = if plan.has_header(bo) {
            (hdr_seq(cur), 0)
        } else {
            (
                hdr_seq(cur).wrapping_add(2),
                make_hdr(hdr_seq(cur).wrapping_add(1), hdr_overflow(cur)),
            )
        };
        let ov = (hdr_overflow(cur) as i64 + over_delta).max(0) as u64;
        plan.set_header(bo, odd, make_hdr(seq, ov))
    }

    /// A free slot for a key with hash `h`: empty in the file *and* in the plan (a slot
    /// an earlier write of the plan fills, or empties, is not free: an emptied slot is
    /// still read until the commit). The order of [`MapRef::free_slot`].
    fn plan_free_slot(&self, sh: &Shared, plan: &Plan, seg: u64, h: u64) -> Option<(u64, u64)> {
        let free = |b: u64, i: u64| {
            let o = slot_off(seg, b, i);
            sh.w(o).load(Relaxed) == 0 && plan.word(sh, o) == 0
        };
        let b = home_bucket(h, self.n_main);
        if let Some(i) = (0..SLOTS).find(|&i| free(b, i)) {
            return Some((b, i));
        }
        let first = first_stash(h, self.n_stash);
        for s in 0..self.n_stash {
            let sb = self.n_main + (first + s) % self.n_stash;
            if let Some(i) = (0..SLOTS).find(|&i| free(sb, i)) {
                return Some((sb, i));
            }
        }
        None
    }

    /// Under the segment lock (and, for an insert or remove in a map with UIDs, the map's
    /// UID lock), plans `w` on the key whose current entry is `hit` (hash `h`, in `seg`).
    /// `Ok(false)`: an insert found no free slot; the caller releases its locks and
    /// splits the segment. Nothing shared is written but an unpublished record's UID
    /// trailer (and a UID table block, by its own committed steps).
    pub(crate) fn plan_write(
        &self,
        tx: &Txn,
        plan: &mut Plan,
        seg: u64,
        h: u64,
        hit: Option<&Hit>,
        w: VarWrite<'_>,
    ) -> Result<bool> {
        let sh = tx.sh;
        let cnt_off = self.counter(tx, MC_COUNT);
        let bytes_off = self.counter(tx, MC_BYTES);
        let uids = self.vtrail != 0;
        match (hit, w) {
            (Some(hit), VarWrite::Put(off, len)) => {
                plan.set(
                    slot_off(seg, hit.bucket, hit.slot),
                    make_slot(hash_tag(h), off),
                )?;
                self.plan_hdr(sh, plan, bucket_off(seg, hit.bucket), 0)?;
                let bytes = plan.word(sh, bytes_off);
                plan.set(bytes_off, bytes.wrapping_add(len).wrapping_sub(hit.rec_len))?;
                if uids {
                    let (e, index) = self.uid_entry_of(sh, hit)?;
                    uid::patch_record(sh, off, len, index);
                    uid::plan_move(sh, plan, e, off)?;
                }
            }
            (None, VarWrite::Put(off, len)) => {
                let Some((b, i)) = self.plan_free_slot(sh, plan, seg, h) else {
                    return Ok(false);
                };
                plan.set(slot_off(seg, b, i), make_slot(hash_tag(h), off))?;
                self.plan_hdr(sh, plan, bucket_off(seg, b), 0)?;
                if b >= self.n_main {
                    self.plan_hdr(sh, plan, bucket_off(seg, home_bucket(h, self.n_main)), 1)?;
                }
                let cnt = plan.word(sh, cnt_off);
                plan.set(cnt_off, cnt.wrapping_add(1))?;
                let bytes = plan.word(sh, bytes_off);
                plan.set(bytes_off, bytes.wrapping_add(len))?;
                if uids {
                    let index = uid::plan_take(tx, self, plan, off, h)?;
                    uid::patch_record(sh, off, len, index);
                }
            }
            (Some(hit), VarWrite::InPlace(v)) => {
                if hit.vlen != v.len() as u64 {
                    return Err(sh.corrupt(format!(
                        "map {}: a transaction's in-place value has {} bytes, the key's {}",
                        self.id,
                        v.len(),
                        hit.vlen
                    )));
                }
                // The bytes already there: nothing a reader could tell apart changes (as
                // in the single-key `write_in_place`), so nothing is planned.
                if sh.r.bytes_eq(hit.val_off, v) {
                    return Ok(true);
                }
                // The value's words (masked at its edges: a neighbouring record's bytes
                // in a shared word are never written), then, after every value of the
                // plan, its bucket's header: odd from the commit until the apply is
                // done, as for a single-key in-place write. Readers by UID validate with
                // the version instead, busy over the same span.
                plan.set_bytes(hit.val_off, v)?;
                self.plan_hdr(sh, plan, bucket_off(seg, hit.bucket), 0)?;
                if uids {
                    let (e, _) = self.uid_entry_of(sh, hit)?;
                    uid::plan_version(sh, plan, e)?;
                }
            }
            (None, VarWrite::InPlace(_)) => {
                return Err(sh.corrupt(format!(
                    "map {}: a transaction's in-place write found no key",
                    self.id
                )))
            }
            (Some(hit), VarWrite::Remove) => {
                plan.set(slot_off(seg, hit.bucket, hit.slot), 0)?;
                self.plan_hdr(sh, plan, bucket_off(seg, hit.bucket), 0)?;
                if hit.bucket >= self.n_main {
                    self.plan_hdr(sh, plan, bucket_off(seg, home_bucket(h, self.n_main)), -1)?;
                }
                let cnt = plan.word(sh, cnt_off);
                plan.set(cnt_off, cnt.wrapping_sub(1))?;
                let bytes = plan.word(sh, bytes_off);
                plan.set(bytes_off, bytes.wrapping_sub(hit.rec_len))?;
                if uids {
                    let index = uid::record_index(sh, hit.off, hit.rec_len);
                    uid::plan_free(sh, self, plan, index)?;
                }
            }
            (None, VarWrite::Remove) => {}
        }
        Ok(true)
    }

    /// Under the segment lock: the version of the UID entry of the key `hit` names (maps
    /// with UIDs; `None` otherwise).
    pub(crate) fn locked_version(&self, sh: &Shared, hit: &Hit) -> Result<Option<u64>> {
        if self.vtrail == 0 {
            return Ok(None);
        }
        let (e, _) = self.uid_entry_of(sh, hit)?;
        Ok(Some(sh.w(e + E_VER).load(Acquire) & !E_VER_BUSY))
    }

    /// One optimistic read of `key` for a snapshot: its value (a copy) and, in `seen`,
    /// every word the read validated (root, directory entry, the home bucket's header and
    /// the header of the stash bucket it was found in), with the value it had, for the
    /// snapshot's re-check. Every change to a key's value, in place ones included, moves
    /// one of those headers. `Retry` when the read itself did not validate.
    pub(crate) fn read_recorded(
        &self,
        sh: &Shared,
        h: u64,
        key: &[u8],
        seen: &mut Vec<(u64, u64)>,
    ) -> Result<Attempt<Option<Vec<u8>>>> {
        let end = sh.file_end();
        let (root, eoff, e) = self.locate(sh, h, end)?;
        let seg = entry_seg(e);
        let bo = bucket_off(seg, home_bucket(h, self.n_main));
        let h1 = sh.w(bo + B_HDR).load(Acquire);
        if hdr_seq(h1) & 1 == 1 {
            return Ok(Attempt::Retry);
        }
        let mut found = self.scan(sh, bo, hash_tag(h), key, end);
        let mut stash = None;
        if found.is_none() && hdr_overflow(h1) > 0 {
            match self.scan_stash(sh, seg, h, Probe::Key(key), end) {
                Attempt::Retry => return Ok(Attempt::Retry),
                Attempt::Done(None) => {}
                Attempt::Done(Some((fd, so, sh1))) => {
                    found = Some(fd);
                    stash = Some((so, sh1));
                }
            }
        }
        let mut sum_ok = true;
        let value = match found {
            None => None,
            Some(fd) => {
                // Validate before trusting the length with an allocation.
                fence(Acquire);
                if sh.w(bo + B_HDR).load(Relaxed) != h1 {
                    return Ok(Attempt::Retry);
                }
                let vlen = fd.vlen.saturating_sub(self.vtrail);
                let voff = fd.off + fd.hl + key.len() as u64;
                let mut v = Vec::new();
                sh.r.read_to_vec(voff, vlen as usize, &mut v);
                sum_ok = sh.g.trailer == 0 || record_crc_ok(sh, fd.off, voff + fd.vlen);
                Some(v)
            }
        };
        fence(Acquire);
        if sh.w(bo + B_HDR).load(Relaxed) != h1
            || stash.is_some_and(|(so, sh1)| sh.w(so + B_HDR).load(Relaxed) != sh1)
            || sh.w(eoff).load(Relaxed) != e
            || sh.w(self.hdr + M_ROOT).load(Relaxed) != root
        {
            return Ok(Attempt::Retry);
        }
        if !self.alive(sh) {
            return Err(self.dropped());
        }
        if !sum_ok {
            return Err(checksum_failed(
                sh,
                &format!("{}", self.id),
                found.map_or(0, |f| f.off),
            ));
        }
        seen.push((self.hdr + M_ROOT, root));
        seen.push((eoff, e));
        seen.push((bo + B_HDR, h1));
        if let Some(s) = stash {
            seen.push((s.0 + B_HDR, s.1));
        }
        Ok(Attempt::Done(value))
    }
}
