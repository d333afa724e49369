//! Writes under the segment lock: inserts, replaces, removes, displacement of keys home, lock-free adds.

use super::*;
use crate::error::Result;
use crate::shared::Shared;
use crate::txn::{Redo, Txn};

impl FixedRef {
    /// Under the segment lock, before an insert whose home bucket `home` is full: moves a
    /// key that overflowed into `home` (from one of the buckets before it, its own home)
    /// to a free cell of its home or of another of its alternatives, so that the new key
    /// gets its home. Returns whether a cell of `home` is now free.
    ///
    /// Why: with first come, first served, keys that overflowed into a bucket take the
    /// cells its own keys need later, and at the ~94 % load maps of groups run at, a third
    /// of a 16+16 map's keys ended up outside their home (callgrind, 100 k keys), where a
    /// lookup reads one bucket after another. A key moved here changes buckets, so the
    /// redo list also bumps its home's seq: a reader looking for it reads its home first
    /// and validates it last, and retries (as it does around any write).
    pub(crate) fn displace(&self, tx: &Txn, seg: u64, home: u64) -> Result<bool> {
        let sh = tx.sh;
        let m = &self.m;
        // Only keys whose home is one of the buckets just before `home` overflow into it.
        let foreign = (1..=self.n_neigh()).any(|d| {
            let b = (home + m.n_main - d) % m.n_main;
            fh_over(sh.w(self.bucket(seg, b)).load(Acquire)) > 0
        });
        if !foreign {
            return Ok(false);
        }
        let bo = self.bucket(seg, home);
        let hw = sh.w(bo).load(Acquire);
        let mut cell = [0u8; (MAX_KEY_SIZE + MAX_VALUE_SIZE) as usize];
        let cell = &mut cell[..self.geo.cell as usize];
        let mut bits = fh_bits(hw) & self.all_bits();
        while bits != 0 {
            let i = bits.trailing_zeros() as u64;
            bits &= bits - 1;
            let co = self.cell_off(bo, i);
            // The key alone to hash it; the rest of the cell only for the one that moves.
            let ks = self.geo.key_size as usize;
            sh.r.read_bytes(co, &mut cell[..ks]);
            let kh = hash(sh.g.seed, &cell[..ks]);
            let its_home = home_bucket(kh, m.n_main);
            if its_home == home {
                continue;
            }
            let Some(c) = self.free_cell_except(sh, seg, kh, home) else {
                continue;
            };
            sh.r.read_bytes(co + ks as u64, &mut cell[ks..]);
            let to = self.bucket(seg, c.b);
            let nco = self.cell_off(to, c.i);
            self.set_tag(sh, to, c.i, kh);
            sh.r.write_bytes(nco, cell);
            sh.persist(to + 8 + c.i, nco + self.geo.cell - (to + 8 + c.i))?;
            crate::rt::failpoint!("fixed.displacing");
            // The key's old bucket loses it, its new one gains it, and its home changes
            // seq (and loses an overflow when the key goes back there).
            let mut redo = Redo::new();
            let mut odd: [(u64, u64); 3] = [(0, 0); 3];
            let mut n = 0;
            let mut touch = |b: u64, set: u64, clr: u64, over_less: u64| {
                let w = self.bucket(seg, b);
                let cur = sh.w(w).load(Relaxed);
                odd[n] = (w, fh(fh_seq(cur) + 1, fh_over(cur), fh_bits(cur)));
                n += 1;
                let ov = fh_over(cur).saturating_sub(over_less);
                redo.push(w, fh(fh_seq(cur) + 2, ov, (fh_bits(cur) | set) & !clr));
            };
            touch(home, 0, 1 << i, 0);
            if c.b == its_home {
                touch(c.b, 1 << c.i, 0, 1);
            } else {
                touch(c.b, 1 << c.i, 0, 0);
                touch(its_home, 0, 0, 0);
            }
            tx.commit(I_REDO, &[], &redo);
            crate::rt::failpoint!("fixed.displaced");
            for (w, o) in &odd[..n] {
                sh.w(*w).store(*o, Relaxed);
            }
            tx.apply_range(&redo, 0, redo.n);
            tx.done();
            return Ok(true);
        }
        Ok(false)
    }

    /// The one locked write path: `produce` sees the current value's offset (None when
    /// absent) and decides. Returns (whether the key existed, whether something changed).
    /// Splits the segment and asks again when an insert finds no free cell.
    pub(crate) fn write<'v>(
        &self,
        tx: &Txn,
        key: &[u8],
        produce: &mut dyn FnMut(Option<u64>) -> Result<Act<'v>>,
    ) -> Result<(bool, bool)> {
        let h = hash(tx.sh.g.seed, key);
        loop {
            let seg = self.lock_segment(tx, h)?;
            let r = self.write_locked(tx, seg, h, key, produce);
            match r {
                Ok(Some(res)) => {
                    tx.unlock(seg + S_LOCK);
                    crate::alloc::allocate_ahead(tx.sh);
                    return Ok(res);
                }
                Ok(None) => {
                    let r = if self.m.groups {
                        move_group(tx, self, seg, h)
                    } else {
                        split(tx, self, seg)
                    };
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

    pub(crate) fn write_locked<'v>(
        &self,
        tx: &Txn,
        seg: u64,
        h: u64,
        key: &[u8],
        produce: &mut dyn FnMut(Option<u64>) -> Result<Act<'v>>,
    ) -> Result<Option<(bool, bool)>> {
        let sh = tx.sh;
        crate::rt::failpoint!("fixed.locked");
        let found = self.find_locked(sh, seg, h, key);
        let voff = found.map(|c| self.cell_off(self.bucket(seg, c.b), c.i) + self.geo.kstride);
        let existed = found.is_some();
        let wbuf: [u8; 8];
        let act = match produce(voff)? {
            Act::PutWord(w) => {
                wbuf = w.to_le_bytes();
                Act::Put(&wbuf[..self.geo.value_size.min(8) as usize])
            }
            a => a,
        };
        let cnt_off = self.counter(tx, MC_COUNT);
        let cnt = sh.w(cnt_off).load(Relaxed);
        let mut redo = Redo::new();
        // At most two bucket headers change: the cell's and, for a stash cell, its home's.
        let mut touched: [(u64, u64); 2] = [(0, 0); 2];
        let mut nt = 0;
        let mut touch =
            |redo: &mut Redo, bo: u64, over_delta: i64, bits_set: u64, bits_clr: u64| {
                let cur = sh.w(bo).load(Relaxed);
                touched[nt] = (bo, fh(fh_seq(cur) + 1, fh_over(cur), fh_bits(cur)));
                nt += 1;
                let ov = (fh_over(cur) as i64 + over_delta).clamp(0, 0xff) as u64;
                let bits = (fh_bits(cur) | bits_set) & !bits_clr;
                redo.push(bo, fh(fh_seq(cur) + 2, ov, bits));
            };
        let home = home_bucket(h, self.m.n_main);
        match (found, act) {
            (_, Act::Keep) | (None, Act::Remove) | (_, Act::PutWord(_)) => {
                return Ok(Some((existed, false)))
            }
            (Some(c), Act::Put(v)) => {
                // In place: the value's words, each with its final content, then the seq.
                let voff = voff.unwrap_or(0);
                value_redo(sh, voff, v, &mut redo);
                touch(&mut redo, self.bucket(seg, c.b), 0, 0, 0);
            }
            (None, Act::Put(v)) => {
                let full = fh_bits(sh.w(self.bucket(seg, home)).load(Acquire)) & self.all_bits()
                    == self.all_bits();
                if full && self.m.groups {
                    self.displace(tx, seg, home)?;
                }
                let Some(c) = self.free_cell(sh, seg, h) else {
                    return Ok(None);
                };
                // The cell is free (its bit clear): nobody reads it, so write it directly.
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
                // From the tag (which precedes the cells) to the cell's end.
                sh.persist(bo + 8 + c.i, co + self.geo.cell - (bo + 8 + c.i))?;
                crate::rt::failpoint!("fixed.cell_written");
                touch(&mut redo, self.bucket(seg, c.b), 0, 1 << c.i, 0);
                if c.b != home {
                    touch(&mut redo, self.bucket(seg, home), 1, 0, 0);
                }
                redo.push(cnt_off, cnt.wrapping_add(1));
            }
            (Some(c), Act::Remove) => {
                touch(&mut redo, self.bucket(seg, c.b), 0, 0, 1 << c.i);
                if c.b != home {
                    touch(&mut redo, self.bucket(seg, home), -1, 0, 0);
                }
                redo.push(cnt_off, cnt.wrapping_sub(1));
            }
        }
        tx.commit(I_REDO, &[], &redo);
        crate::rt::failpoint!("fixed.committed");
        for (bo, odd) in &touched[..nt] {
            sh.w(*bo).store(*odd, Relaxed);
        }
        tx.apply_range(&redo, 0, redo.n / 2);
        crate::rt::failpoint!("fixed.half_applied");
        tx.apply_range(&redo, redo.n / 2, redo.n);
        crate::rt::failpoint!("fixed.applied");
        tx.done();
        Ok(Some((existed, true)))
    }

    /// Lock-free add on a present key (8-byte values): `Some(new value)`, or None when the
    /// key is absent or a writer owns the segment (the caller takes the locked path).
    pub(crate) fn add_in_place(&self, tx: &Txn, key: &[u8], delta: i64) -> Result<Option<i64>> {
        let sh = tx.sh;
        let h = hash(sh.g.seed, key);
        let announce = sh.w(tx.base + T_ADDING);
        for _ in 0..4 {
            let end = sh.file_end();
            let (_, _, e) = self.m.locate(sh, h, end)?;
            let seg = entry_seg(e);
            let lw = sh.w(seg + S_LOCK);
            let cur = lw.load(Acquire);
            if cur & !LOCK_HIGH != 0 || cur >> 32 == u32::MAX as u64 {
                return Ok(None); // a writer is at work here: take the locked path
            }
            announce.store(seg, SeqCst);
            if lw
                .compare_exchange(cur, cur + ONE_ADDER, SeqCst, Relaxed)
                .is_err()
            {
                announce.store(0, Release);
                continue;
            }
            // Counted in: no writer changes this segment until we leave. It must still be
            // the key's segment (a split may have finished before our CAS).
            let r = (|| -> Result<Option<i64>> {
                let (_, _, e2) = self.m.locate(sh, h, sh.file_end())?;
                if entry_seg(e2) != seg || !self.m.alive(sh) {
                    return Ok(None);
                }
                let Some(c) = self.find_locked(sh, seg, h, key) else {
                    return Ok(None);
                };
                let bo = self.bucket(seg, c.b);
                if fh_seq(sh.w(bo).load(Acquire)) & 1 == 1 {
                    return Ok(None);
                }
                let voff = self.cell_off(bo, c.i) + self.geo.kstride;
                debug_assert!(voff % 8 == 0);
                crate::rt::failpoint!("fixed.add_counted");
                let old = sh.w(voff).fetch_add(delta as u64, AcqRel);
                crate::rt::failpoint!("fixed.add_applied");
                Ok(Some((old as i64).wrapping_add(delta)))
            })();
            lw.fetch_sub(ONE_ADDER, Release);
            announce.store(0, Release);
            return r;
        }
        Ok(None)
    }
}

/// Redo entries writing `v` at `voff`: every word the value covers, with its final
/// content (bytes of the word outside the value are kept: they are the cell's key or a
/// neighbour's bytes, which cannot change while we hold the segment lock).
pub(crate) fn value_redo(sh: &Shared, voff: u64, v: &[u8], redo: &mut Redo) {
    if v.is_empty() {
        return;
    }
    let end = voff + v.len() as u64;
    let mut a = voff & !7;
    while a < end {
        let mut w = sh.w(a).load(Relaxed).to_le_bytes();
        for (j, byte) in w.iter_mut().enumerate() {
            let o = a + j as u64;
            if o >= voff && o < end {
                *byte = v[(o - voff) as usize];
            }
        }
        redo.push(a, u64::from_le_bytes(w));
        a += 8;
    }
}
