//! A fixed map's part of a multi-key transaction: its writes planned into a shared redo
//! list under the segment locks the transaction holds, and reads recorded for a
//! consistent snapshot (DESIGN.md, "Multi-key transactions").

use super::*;
use crate::error::Result;
use crate::mem::fence;
use crate::shared::Shared;
use crate::txn::{Plan, Txn};

/// A write a transaction plans on one key of a fixed map.
pub(crate) enum TxnWrite<'a> {
    /// Insert the key or replace its value.
    Put(&'a [u8]),
    /// Remove the key (it is present).
    Remove,
}

impl FixedRef {
    /// Under the segment lock (adders drained): a copy of `key`'s value, if present.
    pub(crate) fn locked_value(
        &self,
        sh: &Shared,
        seg: u64,
        h: u64,
        key: &[u8],
    ) -> Option<Vec<u8>> {
        let c = self.find_locked(sh, seg, h, key)?;
        let voff = self.cell_off(self.bucket(seg, c.b), c.i) + self.geo.kstride;
        let mut v = vec![0u8; self.geo.value_size as usize];
        sh.r.read_bytes(voff, &mut v);
        Some(v)
    }

    /// Enters bucket header `bo`'s change in the plan: its seq moves by 2 once per plan,
    /// whatever the number of writes to the bucket; overflow and bits compose.
    fn plan_header(
        &self,
        sh: &Shared,
        plan: &mut Plan,
        bo: u64,
        over_delta: i64,
        set: u64,
        clr: u64,
    ) -> Result<()> {
        let cur = plan.word(sh, bo);
        let (seq, odd) = if plan.has_header(bo) {
            (fh_seq(cur), 0)
        } else {
            (
                fh_seq(cur) + 2,
                fh(fh_seq(cur) + 1, fh_over(cur), fh_bits(cur)),
            )
        };
        let ov = (fh_over(cur) as i64 + over_delta).clamp(0, 0xff) as u64;
        let bits = (fh_bits(cur) | set) & !clr;
        plan.set_header(bo, odd, fh(seq, ov, bits))
    }

    /// A free cell for a key with hash `h`: free in the file *and* in the plan (a cell an
    /// earlier write of the plan takes, or frees, is not free: a freed cell is still read
    /// until the commit). The order of [`FixedRef::free_cell`].
    fn plan_free_cell(&self, sh: &Shared, plan: &Plan, seg: u64, h: u64) -> Option<Cell> {
        let used = |bo: u64| fh_bits(sh.w(bo).load(Acquire)) | fh_bits(plan.word(sh, bo));
        let b = home_bucket(h, self.m.n_main);
        let bo = self.bucket(seg, b);
        let free = !used(bo) & self.all_bits();
        if free != 0 {
            return Some(Cell {
                b,
                i: self.pick_cell(h, free),
            });
        }
        if fh_over(plan.word(sh, bo)) >= 0xff {
            return None;
        }
        let first = first_stash(h, self.m.n_stash);
        for j in 0..self.n_alt() {
            let sb = self.alt(b, j, first);
            let free = !used(self.bucket(seg, sb)) & self.all_bits();
            if free != 0 {
                return Some(Cell {
                    b: sb,
                    i: self.pick_cell(h, free),
                });
            }
        }
        None
    }

    /// Under the segment lock (adders drained), plans `w` on `key` (hash `h`, in `seg`).
    /// `Ok(false)`: an insert found no free cell; the caller releases its locks and grows
    /// the segment. A new key's cell is written here, directly: it is free, so nobody
    /// reads it until the plan's commit sets its bit.
    pub(crate) fn plan_write(
        &self,
        tx: &Txn,
        plan: &mut Plan,
        seg: u64,
        h: u64,
        key: &[u8],
        w: TxnWrite,
    ) -> Result<bool> {
        let sh = tx.sh;
        let home = home_bucket(h, self.m.n_main);
        let found = self.find_locked(sh, seg, h, key);
        let cnt_off = self.counter(tx, MC_COUNT);
        match (found, w) {
            (Some(c), TxnWrite::Put(v)) => {
                let bo = self.bucket(seg, c.b);
                plan.set_bytes(self.cell_off(bo, c.i) + self.geo.kstride, v)?;
                self.plan_header(sh, plan, bo, 0, 0, 0)?;
            }
            (None, TxnWrite::Put(v)) => {
                let Some(c) = self.plan_free_cell(sh, plan, seg, h) else {
                    return Ok(false);
                };
                let bo = self.bucket(seg, c.b);
                let co = self.cell_off(bo, c.i);
                self.set_tag(sh, bo, c.i, h);
                sh.r.write_bytes(co, key);
                if self.geo.kstride > self.geo.key_size {
                    let pad = [0u8; 8];
                    sh.r.write_bytes(
                        co + self.geo.key_size,
                        &pad[..(self.geo.kstride - self.geo.key_size) as usize],
                    );
                }
                sh.r.write_bytes(co + self.geo.kstride, v);
                sh.persist(bo + 8 + c.i, co + self.geo.cell - (bo + 8 + c.i))?;
                self.plan_header(sh, plan, bo, 0, 1 << c.i, 0)?;
                if c.b != home {
                    self.plan_header(sh, plan, self.bucket(seg, home), 1, 0, 0)?;
                }
                let cnt = plan.word(sh, cnt_off);
                plan.set(cnt_off, cnt.wrapping_add(1))?;
            }
            (Some(c), TxnWrite::Remove) => {
                self.plan_header(sh, plan, self.bucket(seg, c.b), 0, 0, 1 << c.i)?;
                if c.b != home {
                    self.plan_header(sh, plan, self.bucket(seg, home), -1, 0, 0)?;
                }
                let cnt = plan.word(sh, cnt_off);
                plan.set(cnt_off, cnt.wrapping_sub(1))?;
            }
            (None, TxnWrite::Remove) => {}
        }
        Ok(true)
    }

    /// One optimistic read of `key` for a snapshot: its value (a copy) and, in `seen`,
    /// every word the read validated (root, directory entry, each bucket header read),
    /// with the value it had, for the snapshot's re-check. `Retry` when the read itself
    /// did not validate.
    pub(crate) fn read_recorded(
        &self,
        sh: &Shared,
        h: u64,
        key: &[u8],
        seen: &mut Vec<(u64, u64)>,
    ) -> Result<Attempt<Option<Vec<u8>>>> {
        let mark = seen.len();
        let end = sh.file_end();
        let (root, eoff, e) = self.m.locate(sh, h, end)?;
        let seg = entry_seg(e);
        let home = home_bucket(h, self.m.n_main);
        let bo = self.bucket(seg, home);
        let h1 = sh.w(bo).load(Acquire);
        if fh_seq(h1) & 1 == 1 {
            return Ok(Attempt::Retry);
        }
        seen.push((self.m.hdr + M_ROOT, root));
        seen.push((eoff, e));
        seen.push((bo, h1));
        let mut voff = None;
        if let Some(i) = self.find_in(sh, bo, h1, h, key) {
            voff = Some(self.cell_off(bo, i) + self.geo.kstride);
        } else if fh_over(h1) > 0 {
            for j in 0..self.n_alt() {
                let so = self.bucket(seg, self.alt(home, j, 0));
                let sh1 = sh.w(so).load(Acquire);
                if fh_seq(sh1) & 1 == 1 {
                    seen.truncate(mark);
                    return Ok(Attempt::Retry);
                }
                seen.push((so, sh1));
                if let Some(i) = self.find_in(sh, so, sh1, h, key) {
                    voff = Some(self.cell_off(so, i) + self.geo.kstride);
                    break;
                }
            }
        }
        let result = voff.map(|o| {
            let mut v = vec![0u8; self.geo.value_size as usize];
            sh.r.read_bytes(o, &mut v);
            // A lock-free add changes an 8-byte value and no header: the re-check
            // compares the value word as well (DESIGN.md, "Consistent multi-key reads").
            if v.len() == 8 && o % 8 == 0 {
                seen.push((o, u64::from_le_bytes(v[..].try_into().expect("8 bytes"))));
            }
            v
        });
        fence(Acquire);
        if seen[mark..]
            .iter()
            .any(|(o, v)| sh.w(*o).load(Relaxed) != *v)
        {
            seen.truncate(mark);
            return Ok(Attempt::Retry);
        }
        if !self.m.alive(sh) {
            return Err(self.m.dropped());
        }
        Ok(Attempt::Done(result))
    }
}
