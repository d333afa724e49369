//! Reads: the optimistic lookup, its straight-line usual case and its general path.

use super::*;
use crate::error::Result;
use crate::mem::fence;
use crate::shared::Shared;

/// A key found by [`MapRef::scan`]: slot index, record offset, value length and record
/// header length (the value starts at `off + hl + key length`).
#[derive(Clone, Copy)]
pub(crate) struct Found {
    pub slot: u64,
    pub off: u64,
    pub vlen: u64,
    pub hl: u64,
}

impl MapRef {
    /// Scans one bucket for `key`; records are read optimistically (may be garbage).
    ///
    /// The slots whose tag matches are gathered in one mask first (no branch per slot),
    /// so the usual lookup reads one record: a 16-bit tag leaves ~15/65536 false matches.
    #[inline(always)]
    pub(crate) fn scan(
        &self,
        sh: &Shared,
        bo: u64,
        tag: u64,
        key: &[u8],
        end: u64,
    ) -> Option<Found> {
        // An empty slot (0) matches only tag 0; its offset 0 then fails the record bounds
        // check below, so no separate emptiness test is needed here.
        let mut mask = sh.r.bucket_tag_mask(bo, tag);
        const _: () = assert!(B_SLOT0 == 8 && SLOTS == 15 && BUCKET == 128);
        while mask != 0 {
            let i = mask.trailing_zeros() as u64;
            mask &= mask - 1;
            let found = self.try_slot(sh, bo, i, key, end);
            if found.is_some() {
                return found;
            }
        }
        None
    }

    /// Whether slot `i` of bucket `bo` holds `key`: its record, read optimistically.
    #[inline(always)]
    pub(crate) fn try_slot(
        &self,
        sh: &Shared,
        bo: u64,
        i: u64,
        key: &[u8],
        end: u64,
    ) -> Option<Found> {
        let off = slot_off_of(sh.w(bo + B_SLOT0 + 8 * i).load(Relaxed));
        let (m, k, v, hl) = read_record_header(sh, off, end)?;
        if m == self.id && k == key.len() as u64 && sh.r.bytes_eq(off + hl, key) {
            return Some(Found {
                slot: i,
                off,
                vlen: v,
                hl,
            });
        }
        None
    }

    /// Optimistic lookup: calls `f(record offset, value offset, value length)` on a consistent view and
    /// returns its result. `f` may be called more than once (on retries); only the result
    /// of the validated call is returned.
    #[inline(always)]
    pub fn read<T>(
        &self,
        sh: &Shared,
        key: &[u8],
        f: impl FnMut(u64, u64, u64) -> T,
    ) -> Result<Option<T>> {
        self.read_hashed(sh, key, hash(sh.g.seed, key), f)
    }

    /// [`MapRef::read`] of a key whose hash `h` the caller computed already.
    #[inline(always)]
    pub(crate) fn read_hashed<T>(
        &self,
        sh: &Shared,
        key: &[u8],
        h: u64,
        f: impl FnMut(u64, u64, u64) -> T,
    ) -> Result<Option<T>> {
        self.read_probing(sh, h, Probe::Key(key), f)
    }

    /// [`MapRef::read`] for a read that hands out what it found (a value, a UID): in a
    /// store with checksums the record's checksum is verified too, and a record that
    /// fails it is [`Error::Corrupt`] (`map` names the map in the message). Stores
    /// without checksums take the plain read, behind one branch.
    #[inline(always)]
    pub(crate) fn read_value<T>(
        &self,
        sh: &Shared,
        key: &[u8],
        map: &str,
        f: impl FnMut(u64, u64, u64) -> T,
    ) -> Result<Option<T>> {
        if sh.g.trailer == 0 {
            return self.read(sh, key, f);
        }
        self.read_verified(sh, key, hash(sh.g.seed, key), map, f)
    }

    /// [`MapRef::read_value`] of a key whose hash `h` the caller computed already.
    #[inline(always)]
    pub(crate) fn read_value_hashed<T>(
        &self,
        sh: &Shared,
        key: &[u8],
        h: u64,
        map: &str,
        f: impl FnMut(u64, u64, u64) -> T,
    ) -> Result<Option<T>> {
        if sh.g.trailer == 0 {
            return self.read_hashed(sh, key, h, f);
        }
        self.read_verified(sh, key, h, map, f)
    }

    /// [`MapRef::read_value`] in a store with checksums. The checksum is computed inside
    /// the optimistic read, and a mismatch is reported only if that read validated: a
    /// copy torn by a concurrent write (the record's chunk cleaned and reused under the
    /// reader) fails its checksum too, and is retried like any torn copy. Cold: the
    /// branch to it stays off the straight path of a store without checksums.
    #[cold]
    #[inline(never)]
    pub(crate) fn read_verified<T>(
        &self,
        sh: &Shared,
        key: &[u8],
        h: u64,
        map: &str,
        mut f: impl FnMut(u64, u64, u64) -> T,
    ) -> Result<Option<T>> {
        let vt = self.vtrail;
        let got = self.read_hashed(sh, key, h, |off, voff, vlen| {
            let t = f(off, voff, vlen);
            (t, record_crc_ok(sh, off, voff + vlen + vt), off)
        })?;
        match got {
            None => Ok(None),
            Some((t, true, _)) => Ok(Some(t)),
            Some((_, false, off)) => Err(checksum_failed(sh, map, off)),
        }
    }

    /// Whether the index holds the record at `pos`, whose key is `key`: an optimistic
    /// lookup like [`MapRef::read`] that matches slots by offset alone. The cleaner's
    /// liveness test: for a record whose key was written again since, a lookup by key
    /// reads the key's current record (elsewhere, usually a cache miss) only to find it is
    /// another one; matching offsets, it reads no record at all. A slot pointing at `pos`
    /// is the one reference a live record has, so the two tests agree.
    pub(crate) fn references(&self, sh: &Shared, key: &[u8], pos: u64) -> Result<bool> {
        let h = hash(sh.g.seed, key);
        Ok(self
            .read_probing(sh, h, Probe::Offset(pos), |_, _, _| ())?
            .is_some())
    }

    /// [`MapRef::scan`] or [`MapRef::scan_off`], as `probe` says. (A method, not a
    /// closure: a closure called from two places was not inlined, which cost a get 12%
    /// more instructions.)
    #[inline(always)]
    pub(crate) fn probe(
        &self,
        sh: &Shared,
        bo: u64,
        tag: u64,
        probe: Probe<'_>,
        end: u64,
    ) -> Option<Found> {
        match probe {
            Probe::Key(key) => self.scan(sh, bo, tag, key, end),
            Probe::Offset(pos) => self.scan_off(sh, bo, tag, pos),
        }
    }

    /// [`MapRef::scan`] by record offset: the slot of bucket `bo` with tag `tag` that
    /// points at `pos`.
    #[inline(always)]
    pub(crate) fn scan_off(&self, sh: &Shared, bo: u64, tag: u64, pos: u64) -> Option<Found> {
        let mut mask = sh.r.bucket_tag_mask(bo, tag);
        while mask != 0 {
            let i = mask.trailing_zeros() as u64;
            mask &= mask - 1;
            let off = slot_off_of(sh.w(bo + B_SLOT0 + 8 * i).load(Relaxed));
            if off == pos {
                return Some(Found {
                    slot: i,
                    off,
                    vlen: 0,
                    hl: 0,
                });
            }
        }
        None
    }

    /// The optimistic lookup behind [`MapRef::read`] and [`MapRef::references`]: looks
    /// for the key of hash `h` as `probe` says, and runs `f(record, value offset, value
    /// length)` on what it found.
    #[inline(always)]
    pub(crate) fn read_probing<T>(
        &self,
        sh: &Shared,
        h: u64,
        probe: Probe<'_>,
        mut f: impl FnMut(u64, u64, u64) -> T,
    ) -> Result<Option<T>> {
        if let (Probe::Key(key), true) = (probe, crate::rt::read_fast_path()) {
            if let Some(r) = self.read_fast(sh, key, h, &mut f) {
                return Ok(r);
            }
        }
        self.read_general(sh, h, probe, &mut f)
    }

    /// The usual lookup, in straight-line code: the key's home bucket is not being
    /// written, the first slot whose tag matches is the key's (or no slot matches, and
    /// the key is in a stash bucket or nowhere), and nothing changed meanwhile. `None`
    /// when any of that fails; the caller then takes the general path, which handles
    /// every case.
    ///
    /// Kept apart, and short, because at 10 M keys a get waits on two cache misses, and
    /// how many gets overlap depends on how many fit in the CPU's reorder window: a
    /// shorter get is a faster one (DESIGN.md, "Reads").
    #[inline(always)]
    pub(crate) fn read_fast<T>(
        &self,
        sh: &Shared,
        key: &[u8],
        h: u64,
        f: &mut impl FnMut(u64, u64, u64) -> T,
    ) -> Option<Option<T>> {
        // Locals, not `sh.r` and `sh.g`: see `Region::local`.
        let (r, g) = (sh.r.local(), sh.g);
        let end = r.word(H_FILE_END).load(Acquire);
        let (root, eoff, e) = self.locate_in(&r, &g, h, end)?;
        let bo = bucket_off(entry_seg(e), home_bucket(h, self.n_main));
        let h1 = r.word(bo + B_HDR).load(Acquire);
        if hdr_seq(h1) & 1 == 1 {
            return None;
        }
        let klen = key.len() as u64;
        let short_ok = g.short_records & (self.id < SHORT_MAX_MAP) & (klen < SHORT_MAX_LEN);
        let short_pat = 0x80 | self.id << 4 | klen >> 2 | (klen & 3) << 14;
        let short_len = 2 + klen + g.trailer;
        let mask = r.bucket_tag_mask(bo, hash_tag(h));
        // The stash bucket the key was found in, with its header as first read (see
        // `read_once`).
        let mut stash: Option<(u64, u64)> = None;
        let found = if mask != 0 {
            let i = mask.trailing_zeros() as u64;
            let off = slot_off_of(r.word(bo + B_SLOT0 + 8 * i).load(Relaxed));
            if (off < g.chunks_off) | (off + 8 > end) {
                return None;
            }
            let x = r.window(off, 8);
            // The usual record has the short header this key's would have: one compare of
            // its first two bytes (all but the value length) with that pattern, built
            // before the record arrives, does the work of parsing the header and comparing
            // map id and key length (`SHORT_MAX_MAP`: `0x80 | map << 4 | klen >> 2`,
            // `(klen & 3) << 6 | vlen`).
            if short_ok & (x & 0xc0ff == short_pat) {
                let vlen = (x >> 8) & 63;
                if off + short_len + vlen > end || !r.bytes_eq(off + 2, key) {
                    return None;
                }
                Some(Found {
                    slot: i,
                    off,
                    vlen,
                    hl: 2,
                })
            } else {
                Some(self.try_slot(sh, bo, i, key, end)?)
            }
        } else if hdr_overflow(h1) == 0 {
            None
        } else {
            match self.scan_stash(sh, entry_seg(e), h, Probe::Key(key), end) {
                Attempt::Retry => return None,
                Attempt::Done(None) => None,
                Attempt::Done(Some((fd, so, sh1))) => {
                    stash = Some((so, sh1));
                    Some(fd)
                }
            }
        };
        let result = match found {
            None => None,
            Some(fd) => {
                // Validate before trusting the length with an allocation.
                fence(Acquire);
                if r.word(bo + B_HDR).load(Relaxed) != h1 {
                    return None;
                }
                let vlen = fd.vlen.saturating_sub(self.vtrail);
                Some(f(fd.off, fd.off + fd.hl + key.len() as u64, vlen))
            }
        };
        fence(Acquire);
        if r.word(bo + B_HDR).load(Relaxed) != h1
            || stash.is_some_and(|(so, sh1)| r.word(so + B_HDR).load(Relaxed) != sh1)
            || r.word(eoff).load(Relaxed) != e
            || r.word(self.hdr + M_ROOT).load(Relaxed) != root
            || !self.alive_in(&r, &g)
        {
            return None;
        }
        Some(result)
    }

    /// The stash buckets of segment `seg`, searched for what `probe` (of hash `h`) names
    /// when its home bucket overflowed: the slot found, with its stash bucket and that
    /// bucket's header as read (to be validated again after the copy), or `Retry` when a
    /// stash bucket was being written. The search starts where an insert looks first
    /// ([`first_stash`]), where the key usually is; the order is free, because every
    /// bucket is validated on its own and the home bucket's header (whose overflow count
    /// moves with every stash insert and removal) after the whole read.
    #[inline(never)]
    pub(crate) fn scan_stash(
        &self,
        sh: &Shared,
        seg: u64,
        h: u64,
        probe: Probe<'_>,
        end: u64,
    ) -> Attempt<Option<(Found, u64, u64)>> {
        let tag = hash_tag(h);
        let mut s = first_stash(h, self.n_stash);
        for _ in 0..self.n_stash {
            let so = bucket_off(seg, self.n_main + s);
            s = if s + 1 == self.n_stash { 0 } else { s + 1 };
            let sh1 = sh.w(so + B_HDR).load(Acquire);
            if hdr_seq(sh1) & 1 == 1 {
                return Attempt::Retry;
            }
            let found = self.probe(sh, so, tag, probe, end);
            fence(Acquire);
            if sh.w(so + B_HDR).load(Relaxed) != sh1 {
                return Attempt::Retry;
            }
            if let Some(fd) = found {
                return Attempt::Done(Some((fd, so, sh1)));
            }
        }
        Attempt::Done(None)
    }

    /// [`MapRef::read_probing`] in general: any bucket, any slot, retried until
    /// consistent. The first attempt is straight-line code and the retry loop is out of
    /// line, so that the first does not set up (and spill) the loop's state.
    #[cold]
    #[inline(never)]
    pub(crate) fn read_general<T>(
        &self,
        sh: &Shared,
        h: u64,
        probe: Probe<'_>,
        f: &mut impl FnMut(u64, u64, u64) -> T,
    ) -> Result<Option<T>> {
        match self.read_once(sh, h, probe, f)? {
            Attempt::Done(r) => Ok(r),
            Attempt::Retry => self.read_retrying(sh, h, probe, f),
        }
    }

    /// [`MapRef::read_probing`] after a first attempt that must be retried.
    #[cold]
    #[inline(never)]
    pub(crate) fn read_retrying<T>(
        &self,
        sh: &Shared,
        h: u64,
        probe: Probe<'_>,
        f: &mut impl FnMut(u64, u64, u64) -> T,
    ) -> Result<Option<T>> {
        self.retry_reads(sh, h, || self.read_once(sh, h, probe, &mut *f))
    }

    #[inline(always)]
    pub(crate) fn read_once<T>(
        &self,
        sh: &Shared,
        h: u64,
        probe: Probe<'_>,
        f: &mut impl FnMut(u64, u64, u64) -> T,
    ) -> Result<Attempt<Option<T>>> {
        let end = sh.file_end();
        let tag = hash_tag(h);
        // `end` is this attempt's: a record past an older end would fail the bounds check
        // though the file has grown to hold it.
        let klen = match probe {
            Probe::Key(key) => key.len() as u64,
            Probe::Offset(_) => 0,
        };
        let (root, eoff, e) = self.locate(sh, h, end)?;
        let seg = entry_seg(e);
        let b = home_bucket(h, self.n_main);
        let bo = bucket_off(seg, b);
        let h1 = sh.w(bo + B_HDR).load(Acquire);
        if hdr_seq(h1) & 1 == 1 {
            return Ok(Attempt::Retry);
        }
        let mut found = self.probe(sh, bo, tag, probe, end);
        // The stash bucket the key was found in, with its header as first read: a write to
        // a key in a stash slot changes only that bucket's header (the home bucket's too
        // only when the overflow count moves), so it must be validated again after the
        // copy, like the home bucket's. (It was checked only before the copy: a replace
        // during the copy went unseen, and once the old record's chunk was cleaned and
        // reused a reader returned garbage; found by the multi-process test in CI.)
        let mut stash: Option<(u64, u64)> = None;
        if found.is_none() && hdr_overflow(h1) > 0 {
            match self.scan_stash(sh, seg, h, probe, end) {
                Attempt::Retry => return Ok(Attempt::Retry),
                Attempt::Done(None) => {}
                Attempt::Done(Some((fd, so, sh1))) => {
                    found = Some(fd);
                    stash = Some((so, sh1));
                }
            }
        }
        let result = match found {
            None => None,
            Some(fd) => {
                // Validate before trusting the length with an allocation.
                fence(Acquire);
                if sh.w(bo + B_HDR).load(Relaxed) != h1 {
                    return Ok(Attempt::Retry);
                }
                let vlen = fd.vlen.saturating_sub(self.vtrail);
                Some(f(fd.off, fd.off + fd.hl + klen, vlen))
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
        Ok(Attempt::Done(result))
    }
}

/// What an optimistic lookup matches slots by: the key (its records' bytes), or the
/// offset of one record (see [`MapRef::references`]).
#[derive(Clone, Copy)]
pub(crate) enum Probe<'a> {
    Key(&'a [u8]),
    Offset(u64),
}
