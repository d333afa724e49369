//! Reads: the optimistic lookup, its straight-line usual case and its general path.

use super::*;
use crate::error::Result;
use crate::mem::fence;
use crate::shared::Shared;

impl FixedRef {
    /// Optimistic lookup: calls `f(value offset)` on a consistent view; `f` may run more
    /// than once (only the validated call's result is returned).
    #[inline(always)]
    pub fn read<T>(&self, sh: &Shared, key: &[u8], f: impl FnMut(u64) -> T) -> Result<Option<T>> {
        self.read_hashed(sh, key, hash(sh.g.seed, key), f)
    }

    /// [`FixedRef::read`] of a key whose hash `h` the caller computed already.
    #[inline]
    pub(crate) fn read_hashed<T>(
        &self,
        sh: &Shared,
        key: &[u8],
        h: u64,
        mut f: impl FnMut(u64) -> T,
    ) -> Result<Option<T>> {
        // As in the variable map's read: the usual lookup of a tagged map in straight-line
        // code, anything else through the general path (the model checker takes either).
        if self.geo.tags && crate::rt::read_fast_path() {
            if let Some(r) = self.read_fast(sh, key, h, &mut f) {
                return Ok(r);
            }
        }
        self.read_general(sh, h, key, &mut f)
    }

    /// [`FixedRef::read_hashed`] through the general path: a first attempt, then the retry
    /// loop out of line.
    #[inline]
    pub(crate) fn read_general<T>(
        &self,
        sh: &Shared,
        h: u64,
        key: &[u8],
        f: &mut impl FnMut(u64) -> T,
    ) -> Result<Option<T>> {
        match self.read_once(sh, h, key, f)? {
            Attempt::Done(r) => Ok(r),
            Attempt::Retry => self.read_retrying(sh, h, key, f),
        }
    }

    /// The usual lookup in a tagged map, in straight-line code: the home bucket is not
    /// being written, and either the first cell whose tag matches holds the key, or no
    /// tag matches and the home has no overflow (the key is absent). Anything else
    /// (another candidate, a neighbour or stash bucket to search, a write or a move in
    /// progress, a failed bound, a dropped map) returns None, and the caller takes the
    /// general path from the start. Same loads and validation as `read_once`, without
    /// its loops: at 10 M keys a get waits on memory, and how many gets overlap depends
    /// on how few instructions each keeps waiting (DESIGN.md, "Reads").
    #[inline(always)]
    pub(crate) fn read_fast<T>(
        &self,
        sh: &Shared,
        key: &[u8],
        h: u64,
        f: &mut impl FnMut(u64) -> T,
    ) -> Option<Option<T>> {
        let (r, g) = (sh.r.local(), sh.g);
        let end = r.word(H_FILE_END).load(Acquire);
        // The tags of up to 16 cells are two words; buckets of more (100+100: 20 cells)
        // take the general path.
        if self.geo.cells > 16 {
            return None;
        }
        let (root, eoff, e) = self.m.locate_in(&r, &g, h, end)?;
        let bo = self.bucket(entry_seg(e), home_bucket(h, self.m.n_main));
        if self.geo.lined {
            let (l1, l2) = self.preferred_lines(h);
            r.prefetch(bo + 64 * l1);
            r.prefetch(bo + 64 * l2);
        }
        let h1 = r.word(bo).load(Acquire);
        if fh_seq(h1) & 1 == 1 {
            return None;
        }
        let tags = r.word(bo + 8).load(Relaxed);
        let mut hits = byte_matches(tags, cell_tag(h));
        if self.geo.cells > 8 {
            hits |= byte_matches(r.word(bo + 16).load(Relaxed), cell_tag(h)) << 8;
        }
        let cand = hits & fh_bits(h1) & self.all_bits();
        let result = if cand != 0 {
            let co = self.cell_off(bo, cand.trailing_zeros() as u64);
            if !r.bytes_eq(co, key) {
                return None;
            }
            Some(f(co + self.geo.kstride))
        } else if fh_over(h1) == 0 {
            None
        } else {
            self.read_alternatives(sh, entry_seg(e), h, key, f)?
        };
        fence(Acquire);
        if r.word(bo).load(Relaxed) != h1
            || r.word(eoff).load(Relaxed) != e
            || r.word(self.m.hdr + M_ROOT).load(Relaxed) != root
            || !self.m.alive_in(&r, &g)
        {
            return None;
        }
        Some(result)
    }

    /// [`FixedRef::read_fast`] of a key not in its home bucket, whose home overflowed:
    /// the neighbours and stash buckets in turn (their first lines asked for at once),
    /// each validated on its own; the home bucket is validated after it all. None when
    /// anything is unusual (a bucket being written, a second candidate), for the general
    /// path; `Some(None)` when the key is in none of them. Out of line: a fifth of the
    /// gets of a full 16+16 map come here, and the usual one stays short.
    #[inline(never)]
    pub(crate) fn read_alternatives<T>(
        &self,
        sh: &Shared,
        seg: u64,
        h: u64,
        key: &[u8],
        f: &mut impl FnMut(u64) -> T,
    ) -> Option<Option<T>> {
        let home = home_bucket(h, self.m.n_main);
        self.prefetch_alternatives(sh, seg, home);
        for j in 0..self.n_alt() {
            let so = self.bucket(seg, self.alt(home, j, 0));
            let sh1 = sh.w(so).load(Acquire);
            if fh_seq(sh1) & 1 == 1 {
                return None;
            }
            let cand = self.tag_hits(sh, so, h) & fh_bits(sh1) & self.all_bits();
            if cand == 0 {
                continue;
            }
            let co = self.cell_off(so, cand.trailing_zeros() as u64);
            if !sh.r.bytes_eq(co, key) {
                return None;
            }
            let v = f(co + self.geo.kstride);
            fence(Acquire);
            if sh.w(so).load(Relaxed) != sh1 {
                return None;
            }
            return Some(Some(v));
        }
        Some(None)
    }

    /// [`FixedRef::read_hashed`] after a first attempt that must be retried.
    #[cold]
    #[inline(never)]
    pub(crate) fn read_retrying<T>(
        &self,
        sh: &Shared,
        h: u64,
        key: &[u8],
        f: &mut impl FnMut(u64) -> T,
    ) -> Result<Option<T>> {
        self.m
            .retry_reads(sh, h, || self.read_once(sh, h, key, &mut *f))
    }

    #[inline(always)]
    pub(crate) fn read_once<T>(
        &self,
        sh: &Shared,
        h: u64,
        key: &[u8],
        f: &mut impl FnMut(u64) -> T,
    ) -> Result<Attempt<Option<T>>> {
        let end = sh.file_end();
        let (root, eoff, e) = self.m.locate(sh, h, end)?;
        let seg = entry_seg(e);
        let home = home_bucket(h, self.m.n_main);
        let bo = self.bucket(seg, home);
        // A bucket of more than two lines (cells over 16 bytes) without tags: its cells are
        // compared one line after another, so all its lines are asked for at once (16+16
        // at 5 M keys: 1.20-1.34 to 1.37-1.59 M gets/s, alternating runs). With tags a
        // lookup reads the first line and one cell's, and asking for all eight lines made
        // 16+16 gets at 10 M keys slower (0.94x, alternating rounds in one process).
        if self.geo.bsize > 128 && !self.geo.tags {
            let mut o = bo + 64;
            while o < bo + self.geo.bsize {
                sh.r.prefetch(o);
                o += 64;
            }
        } else if self.geo.lined {
            let (l1, l2) = self.preferred_lines(h);
            sh.r.prefetch(bo + 64 * l1);
            sh.r.prefetch(bo + 64 * l2);
        }
        let h1 = sh.w(bo).load(Acquire);
        if fh_seq(h1) & 1 == 1 {
            return Ok(Attempt::Retry);
        }
        let mut result = None;
        if let Some(i) = self.find_in(sh, bo, h1, h, key) {
            result = Some(f(self.cell_off(bo, i) + self.geo.kstride));
        } else if fh_over(h1) > 0 {
            self.prefetch_alternatives(sh, seg, home);
            for j in 0..self.n_alt() {
                let so = self.bucket(seg, self.alt(home, j, 0));
                let sh1 = sh.w(so).load(Acquire);
                if fh_seq(sh1) & 1 == 1 {
                    return Ok(Attempt::Retry);
                }
                let found = self.find_in(sh, so, sh1, h, key);
                if let Some(i) = found {
                    result = Some(f(self.cell_off(so, i) + self.geo.kstride));
                }
                fence(Acquire);
                if sh.w(so).load(Relaxed) != sh1 {
                    return Ok(Attempt::Retry);
                }
                if found.is_some() {
                    break;
                }
            }
        }
        fence(Acquire);
        if sh.w(bo).load(Relaxed) != h1
            || sh.w(eoff).load(Relaxed) != e
            || sh.w(self.m.hdr + M_ROOT).load(Relaxed) != root
        {
            return Ok(Attempt::Retry);
        }
        if !self.m.alive(sh) {
            return Err(self.m.dropped());
        }
        Ok(Attempt::Done(result))
    }
}
