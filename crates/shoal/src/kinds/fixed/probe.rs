//! Finding a key's cell, and a free cell for a new key: tags, neighbours, preferred lines.

use super::*;
use crate::error::Result;
use crate::shared::Shared;
use crate::txn::Txn;

impl FixedRef {
    /// The cell of `key` (hash `h`) in bucket `bo` whose header word is `hw`, if any
    /// (optimistic: the caller validates `hw` afterwards).
    #[inline(always)]
    pub(crate) fn find_in(&self, sh: &Shared, bo: u64, hw: u64, h: u64, key: &[u8]) -> Option<u64> {
        let mut bits = fh_bits(hw) & self.all_bits();
        // Keys of up to 8 bytes in cells of a multiple of 8 bytes start an aligned word of
        // their cell (buckets are 64-aligned, cells 8 bytes past a bucket's start): one
        // load and one compare per occupied cell, where the general comparison below
        // assembles each word from two (a get compares ~3-6 cells; 8+8 maps spent a
        // quarter of a get there).
        //
        // Longer keys (of whole words) are matched on their last word first, the rest
        // compared only when it matches: the last word, because keys often share a
        // prefix (`key:000012345678`). A bucket of 15 cells of 16+16 bytes holds ~13
        // keys: `get_many` went from 2.85-3.01 to 3.34-3.54 M/s at 5 M keys (single
        // gets, bound by the bucket's eight lines, did not move measurably).
        if self.geo.cell % 8 == 0
            && key.len() as u64 == self.geo.key_size
            && key.len() > 8
            && key.len() % 8 == 0
        {
            let (head, tail) = key.split_at(key.len() - 8);
            let kw = u64::from_le_bytes(tail.try_into().expect("8 bytes"));
            let last = head.len() as u64;
            bits &= self.tag_hits(sh, bo, h);
            while bits != 0 {
                let i = bits.trailing_zeros() as u64;
                bits &= bits - 1;
                let co = self.cell_off(bo, i);
                if sh.w(co + last).load(Relaxed) == kw && sh.r.bytes_eq(co, head) {
                    return Some(i);
                }
            }
            return None;
        }
        if self.geo.key_size <= 8 && self.geo.cell % 8 == 0 && key.len() as u64 == self.geo.key_size
        {
            // Not a copy into a zeroed `[u8; 8]`: its runtime length made it a `memcpy`
            // call, ~18 instructions per bucket searched.
            let (kw, mask) = (crate::mem::le_bits(key), u64::MAX >> (64 - 8 * key.len()));
            // Every cell is compared, occupied or not, and the hits are masked with the
            // occupancy afterwards: the loop runs the map's fixed number of cells, which
            // the branch predictor learns, where stopping at the match mispredicted on
            // every get (the match is anywhere). Free cells are inside the bucket, so
            // reading them is as safe as reading the others. u64 → u64 at 5 M keys:
            // 2.53-2.60 to 3.05-3.18 M gets/s (scratch harness, alternating builds).
            let mut hits = 0u64;
            for i in 0..self.geo.cells {
                let w = sh.w(self.cell_off(bo, i)).load(Relaxed);
                hits |= ((w & mask == kw) as u64) << i;
            }
            let found = hits & bits;
            return (found != 0).then(|| found.trailing_zeros() as u64);
        }
        bits &= self.tag_hits(sh, bo, h);
        while bits != 0 {
            let i = bits.trailing_zeros() as u64;
            bits &= bits - 1;
            if sh.r.bytes_eq(self.cell_off(bo, i), key) {
                return Some(i);
            }
        }
        None
    }
}

impl FixedRef {
    /// The first stage of a staged lookup ([`FixedMap::get_many_with`]): hashes `key`,
    /// starts loading its home bucket (every line) and returns the hash.
    #[inline]
    pub(crate) fn prefetch_bucket(&self, sh: &Shared, key: &[u8], end: u64) -> u64 {
        let h = hash(sh.g.seed, key);
        if let Ok((_, _, e)) = self.m.locate(sh, h, end) {
            let bo = self.bucket(entry_seg(e), home_bucket(h, self.m.n_main));
            let mut o = bo;
            while o < bo + self.geo.bsize {
                sh.r.prefetch(o);
                o += 64;
            }
        }
        h
    }

    /// `put_many`'s look-ahead: starts loading what a write of `key` waits on first, every
    /// line of its home bucket and its segment's lock line.
    pub(crate) fn prefetch_write(&self, sh: &Shared, key: &[u8], end: u64) {
        let h = hash(sh.g.seed, key);
        if let Ok((_, _, e)) = self.m.locate(sh, h, end) {
            self.prefetch_home(sh, entry_seg(e), h);
        }
    }

    /// Starts loading every line of the home bucket of the key of hash `h` in segment
    /// `seg`, and the segment's lock line: what a locked write of it waits on first. A
    /// hint only (reads nothing it relies on).
    #[inline]
    pub(crate) fn prefetch_home(&self, sh: &Shared, seg: u64, h: u64) {
        let bo = self.bucket(seg, home_bucket(h, self.m.n_main));
        let mut o = bo;
        while o < bo + self.geo.bsize {
            sh.r.prefetch(o);
            o += 64;
        }
        sh.r.prefetch(seg + S_LOCK);
    }

    /// Locks the segment of `h` for a writer and waits out the lock-free adders in it.
    pub(crate) fn lock_segment(&self, tx: &Txn, h: u64) -> Result<u64> {
        let sh = tx.sh;
        let home = home_bucket(h, self.m.n_main);
        // As `MapRef::lock_segment` does for its buckets: the home bucket's first line
        // (header and tags, read by the absence check) and, in a lined geometry, the
        // two lines the insert prefers, on their way while the lock is taken (10 M 16+16
        // inserts: 1.04-1.06× in alternating runs).
        let seg = self.m.lock_segment_with(tx, h, |seg| {
            let bo = self.bucket(seg, home);
            sh.r.prefetch(bo);
            if self.geo.lined {
                let (l1, l2) = self.preferred_lines(h);
                sh.r.prefetch(bo + 64 * l1);
                sh.r.prefetch(bo + 64 * l2);
            }
        })?;
        if let Err(e) = wait_adders(tx, seg, self.m.timeout) {
            tx.unlock(seg + S_LOCK);
            return Err(e);
        }
        Ok(seg)
    }

    /// The two lines (1 to lines − 1) of a bucket in which a key with hash `h` is placed
    /// first, in lined geometries ([`Geo::lined`]): hash bits 48-55, which nothing else
    /// uses. Line 0 (the header word, the tags and a cell or two) is read by every
    /// lookup; asking for these two lines with it makes a key in any of them cost one
    /// memory latency instead of two (tags, then the cell).
    #[inline]
    pub(crate) fn preferred_lines(&self, h: u64) -> (u64, u64) {
        let n = self.geo.bsize / 64 - 1;
        (
            1 + ((((h >> 48) & 0xf) * n) >> 4),
            1 + ((((h >> 52) & 0xf) * n) >> 4),
        )
    }

    /// The free cell a key with hash `h` takes among `free` (a bitmap of a bucket's free
    /// cells, not empty): in a lined geometry, one in the preferred line with more free
    /// cells, else the first free one.
    #[inline]
    pub(crate) fn pick_cell(&self, h: u64, free: u64) -> u64 {
        if self.geo.lined {
            let (l1, l2) = self.preferred_lines(h);
            let (f1, f2) = (
                free & self.geo.line_cells(l1),
                free & self.geo.line_cells(l2),
            );
            let pick = if f2.count_ones() > f1.count_ones() {
                f2
            } else {
                f1
            };
            if pick != 0 {
                return pick.trailing_zeros() as u64;
            }
        }
        free.trailing_zeros() as u64
    }

    /// Asks for the first line (header word and tags) of every bucket other than `home`
    /// that may hold a key whose home it is, before a lookup reads them one after
    /// another.
    #[inline]
    pub(crate) fn prefetch_alternatives(&self, sh: &Shared, seg: u64, home: u64) {
        for j in 0..self.n_alt() {
            sh.r.prefetch(self.bucket(seg, self.alt(home, j, 0)));
        }
    }

    /// Under the segment lock: the cell holding `key`.
    // Always inlined: it is most of an in-place add, and its callers sit in other modules.
    #[inline(always)]
    pub(crate) fn find_locked(&self, sh: &Shared, seg: u64, h: u64, key: &[u8]) -> Option<Cell> {
        let b = home_bucket(h, self.m.n_main);
        let hw = sh.w(self.bucket(seg, b)).load(Acquire);
        if let Some(i) = self.find_in(sh, self.bucket(seg, b), hw, h, key) {
            return Some(Cell { b, i });
        }
        if fh_over(hw) > 0 {
            self.prefetch_alternatives(sh, seg, b);
            for j in 0..self.n_alt() {
                let sb = self.alt(b, j, 0);
                let so = self.bucket(seg, sb);
                let sw = sh.w(so).load(Acquire);
                if let Some(i) = self.find_in(sh, so, sw, h, key) {
                    return Some(Cell { b: sb, i });
                }
            }
        }
        None
    }

    /// Under the segment lock: a free cell for a key with hash `h` (home, then its
    /// neighbours and the stash).
    pub(crate) fn free_cell(&self, sh: &Shared, seg: u64, h: u64) -> Option<Cell> {
        self.free_cell_except(sh, seg, h, u64::MAX)
    }

    /// [`FixedRef::free_cell`] outside bucket `except`.
    pub(crate) fn free_cell_except(
        &self,
        sh: &Shared,
        seg: u64,
        h: u64,
        except: u64,
    ) -> Option<Cell> {
        let b = home_bucket(h, self.m.n_main);
        let hw = sh.w(self.bucket(seg, b)).load(Acquire);
        let free = !fh_bits(hw) & self.all_bits();
        if free != 0 && b != except {
            return Some(Cell {
                b,
                i: self.pick_cell(h, free),
            });
        }
        if fh_over(hw) >= 0xff {
            return None;
        }
        let first = first_stash(h, self.m.n_stash);
        for j in 0..self.n_alt() {
            let sb = self.alt(b, j, first);
            if sb == except {
                continue;
            }
            let sw = sh.w(self.bucket(seg, sb)).load(Acquire);
            let free = !fh_bits(sw) & self.all_bits();
            if free != 0 {
                return Some(Cell {
                    b: sb,
                    i: self.pick_cell(h, free),
                });
            }
        }
        None
    }
}
