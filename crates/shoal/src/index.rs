//! The hash index of one map: extendible hashing over small segments of 128-byte buckets.
//!
//! ```text
//! root (one word)  = directory offset | global depth g << 48
//! directory[i]     = segment offset | local depth << 48,  i = hash & (2^g - 1)
//! segment          = header line (lock, depth, prefix) + n_main buckets + n_stash buckets
//! bucket (128 B)   = header word (seq u32 | overflow u16 << 32) + 15 slots
//! slot             = tag (hash >> 48) << 48 | record offset (0 = empty)
//! ```
//!
//! A key lives in its home bucket (`format::home_bucket`) or, when that is full, in one of
//! the stash buckets; the home bucket's *overflow* count says how many of its keys are in
//! the stash, so a lookup reads the stash only then (F14's overflow counts: no tombstones).
//! Keys never move between buckets of a segment; they move only to a new segment in a split.
//!
//! Readers write nothing: they read the bucket header, scan the slots, compare the key in
//! the record, copy the value, and then re-read the header and the directory entry; any
//! change means retry. Writers lock the segment (one word in its header line), and bump the
//! bucket's seq to odd and back to even around every change, through a redo intent.
//!
//! Growth splits one full segment at a time: a new segment receives the keys whose hash
//! bit `depth` is 1 at the *same bucket and slot positions* (so it never overflows), the
//! directory entries are repointed (the directory doubles first, into a fresh region, when
//! the segment's depth equals the global depth), and the moved keys are then removed from
//! the old segment. Only writers of that one segment wait; readers never do.

use crate::deadline::Wait;
use crate::error::{Error, Result};
use crate::format::*;
use crate::mem::{fence, Region};
use crate::shared::Shared;
use crate::txn::{Redo, Txn};
use std::sync::atomic::Ordering::*;
use std::time::Duration;

/// What a handle knows about a map: its id, header and segment geometry.
#[derive(Clone, Copy, Debug)]
pub(crate) struct MapRef {
    pub id: u64,
    pub hdr: u64,
    pub n_main: u64,
    pub n_stash: u64,
    pub seg_size: u64,
    /// The catalog state word when the handle was made; any change means the map was
    /// dropped (and perhaps its id reused).
    pub cat_word: u64,
    /// How long a read may wait for a bucket that a live writer keeps busy.
    pub timeout: Duration,
    /// Bytes at the end of every record's value that are not the user's value:
    /// [`UID_TRAILER`] in a map with UIDs, else 0.
    pub vtrail: u64,
    /// A fixed-size map that grows by moving directory groups ([`MF_GROUPS`]): its
    /// directory entries carry no depths, and a segment may be named by any set of them.
    pub groups: bool,
}

/// Where a key was found: the slot's location and the record's layout.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Hit {
    pub bucket: u64,
    pub slot: u64,
    pub off: u64,
    pub rec_len: u64,
    /// The record header's length (the key starts at `off + hl`).
    pub hl: u64,
    pub val_off: u64,
    /// The user's value length (without a UID trailer).
    pub vlen: u64,
}

/// Outcome of an optimistic read attempt.
enum Attempt<T> {
    Done(T),
    Retry,
}

/// Reads and parses the record header at `off`, checking it lies inside the file.
/// `(map, klen, vlen, header length)`.
///
/// `end` bounds the record. On the read paths it is a `file_end` loaded earlier, which may
/// be stale: the file only grows, so before rejecting an offset past it, look again
/// (`live_end`). A record published after growth is otherwise mistaken for garbage.
#[inline(always)]
pub(crate) fn read_record_header(sh: &Shared, off: u64, end: u64) -> Option<(u64, u64, u64, u64)> {
    // Fast paths, from one window: a short header (bit 7 of the first byte), or a
    // 3-byte one whose map id, key and value lengths take one byte each.
    if off >= sh.g.chunks_off && off + 8 <= end {
        let x = sh.r.window(off, 8);
        if sh.g.short_records && x & 0x80 != 0 {
            let (m, k, v) = ((x >> 4) & 7, (x & 15) << 2 | (x >> 14) & 3, (x >> 8) & 63);
            if off + 2 + k + v + sh.g.trailer <= end {
                return Some((m, k, v, 2));
            }
        } else {
            // A long header's map id has 6 bits in its first byte with short records
            // (bit 6 its continuation), 7 without.
            let (id_bits, more) = if sh.g.short_records {
                (0x3f, 0x80_80c0)
            } else {
                (0x7f, 0x80_8080)
            };
            let (m, k, v) = (x & id_bits, (x >> 8) & 0x7f, (x >> 16) & 0x7f);
            if x & more == 0 && off + 3 + k + v + sh.g.trailer <= end {
                return Some((m, k, v, 3));
            }
        }
    }
    read_record_header_slow(sh, off, end)
}

#[cold]
#[inline(never)]
fn read_record_header_slow(sh: &Shared, off: u64, end: u64) -> Option<(u64, u64, u64, u64)> {
    read_record_header_in(sh, off, end).or_else(|| {
        let fresh = sh.file_end();
        if fresh > end {
            read_record_header_in(sh, off, fresh)
        } else {
            None
        }
    })
}

/// Like [`read_record_header`] with a fixed bound (the checker's used marks).
pub(crate) fn read_record_header_in(
    sh: &Shared,
    off: u64,
    end: u64,
) -> Option<(u64, u64, u64, u64)> {
    if off < sh.g.chunks_off || off >= end {
        return None;
    }
    let avail = (end - off).min(16) as usize;
    let mut buf = [0u8; 16];
    sh.r.read_bytes(off, &mut buf[..avail]);
    let (m, k, v, hl) = parse_record_header(&buf[..avail], sh.g.short_records)?;
    if off + hl + k + v + sh.g.trailer > end {
        return None;
    }
    Some((m, k, v, hl))
}

/// Whether the record at `off`, whose 4-byte checksum is at `crc_at`, matches it (stores
/// with `FLAG_CHECKSUMS`; `[off, crc_at + 4)` must lie inside the file). Reads the bytes
/// from the mapping: on an optimistic read a mismatch means something only once the read
/// validated, since a concurrent write may have torn the copy.
pub(crate) fn record_crc_ok(sh: &Shared, off: u64, crc_at: u64) -> bool {
    sh.r.crc32c(off, crc_at - off) == sh.r.window(crc_at, 4) as u32
}

/// The error of a read that found its record failing its checksum.
pub(crate) fn checksum_failed(sh: &Shared, map: &str, off: u64) -> Error {
    sh.corrupt(format!(
        "map {map:?}: the record at {off:#x} fails its checksum (torn or corrupt; repair drops it)"
    ))
}

/// A key found by [`MapRef::scan`]: slot index, record offset, value length and record
/// header length (the value starts at `off + hl + key length`).
#[derive(Clone, Copy)]
struct Found {
    slot: u64,
    off: u64,
    vlen: u64,
    hl: u64,
}

impl MapRef {
    #[inline]
    pub fn alive(&self, sh: &Shared) -> bool {
        self.alive_in(&sh.r, &sh.g)
    }

    #[inline(always)]
    pub(crate) fn alive_in(&self, r: &Region, g: &Geometry) -> bool {
        r.word(g.cat_entry(self.id) + C_STATE).load(Acquire) == self.cat_word
    }

    pub(crate) fn dropped(&self) -> Error {
        Error::NotFound(format!("map {} was dropped", self.id))
    }

    /// Loads root and the directory entry for `h`: (root, entry offset, entry).
    #[inline(always)]
    pub(crate) fn locate(&self, sh: &Shared, h: u64, end: u64) -> Result<(u64, u64, u64)> {
        match self.locate_in(&sh.r, &sh.g, h, end) {
            Some(found) => Ok(found),
            None => self.locate_slow(sh, h),
        }
    }

    /// [`MapRef::locate`] without its slow path: `None` when a check fails.
    #[inline(always)]
    pub(crate) fn locate_in(
        &self,
        r: &Region,
        g: &Geometry,
        h: u64,
        end: u64,
    ) -> Option<(u64, u64, u64)> {
        let root = r.word(self.hdr + M_ROOT).load(Acquire);
        let depth = root >> 48;
        let dir = root & OFF_MASK;
        // `depth` comes from the file: checked below, but never shift by more than 63 first.
        let eoff = dir + 8 * (h & ((1u64 << depth.min(MAX_DEPTH)) - 1));
        // One branch for all the bounds checks: they pass on every healthy lookup.
        if (depth > MAX_DEPTH) | (eoff + 8 > end) | (dir < g.chunks_off) | (dir % 8 != 0) {
            return None;
        }
        let e = r.word(eoff).load(Acquire);
        let seg = entry_seg(e);
        if (seg < g.chunks_off) | (seg + self.seg_size > end) | (seg % BUCKET != 0) {
            return None;
        }
        Some((root, eoff, e))
    }

    /// [`MapRef::locate`] when a check failed: `end` may be stale (the file grew since),
    /// so look again with a fresh one before calling the file corrupt.
    #[cold]
    #[inline(never)]
    fn locate_slow(&self, sh: &Shared, h: u64) -> Result<(u64, u64, u64)> {
        let end = sh.file_end();
        let root = sh.w(self.hdr + M_ROOT).load(Acquire);
        let g = root >> 48;
        let dir = root & OFF_MASK;
        let eoff = dir + 8 * (h & ((1u64 << g.min(MAX_DEPTH)) - 1));
        if g > MAX_DEPTH || eoff + 8 > end || dir < sh.g.chunks_off || dir % 8 != 0 {
            return Err(self.bad(
                sh,
                format!("map {}: directory root {root:#x} out of the file", self.id),
            ));
        }
        let e = sh.w(eoff).load(Acquire);
        let seg = entry_seg(e);
        if seg < sh.g.chunks_off || seg + self.seg_size > end || seg % BUCKET != 0 {
            return Err(self.bad(
                sh,
                format!(
                    "map {}: directory entry {eoff:#x} = {e:#x} out of the file",
                    self.id
                ),
            ));
        }
        Ok((root, eoff, e))
    }

    /// A structural error: "dropped" if the map is gone, else corruption.
    pub(crate) fn bad(&self, sh: &Shared, what: String) -> Error {
        if !self.alive(sh) {
            self.dropped()
        } else {
            sh.corrupt(what)
        }
    }

    /// Scans one bucket for `key`; records are read optimistically (may be garbage).
    ///
    /// The slots whose tag matches are gathered in one mask first (no branch per slot),
    /// so the usual lookup reads one record: a 16-bit tag leaves ~15/65536 false matches.
    #[inline(always)]
    fn scan(&self, sh: &Shared, bo: u64, tag: u64, key: &[u8], end: u64) -> Option<Found> {
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
    fn try_slot(&self, sh: &Shared, bo: u64, i: u64, key: &[u8], end: u64) -> Option<Found> {
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
    fn read_verified<T>(
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
    fn probe(&self, sh: &Shared, bo: u64, tag: u64, probe: Probe<'_>, end: u64) -> Option<Found> {
        match probe {
            Probe::Key(key) => self.scan(sh, bo, tag, key, end),
            Probe::Offset(pos) => self.scan_off(sh, bo, tag, pos),
        }
    }

    /// [`MapRef::scan`] by record offset: the slot of bucket `bo` with tag `tag` that
    /// points at `pos`.
    #[inline(always)]
    fn scan_off(&self, sh: &Shared, bo: u64, tag: u64, pos: u64) -> Option<Found> {
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
    fn read_probing<T>(
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
    fn read_fast<T>(
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
    fn scan_stash(
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
    fn read_general<T>(
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
    fn read_retrying<T>(
        &self,
        sh: &Shared,
        h: u64,
        probe: Probe<'_>,
        f: &mut impl FnMut(u64, u64, u64) -> T,
    ) -> Result<Option<T>> {
        // The clock is read only once a retry happens: the common read never needs it.
        let wait = Wait::begin(self.timeout, self.timeout);
        let mut tries = 0u32;
        loop {
            tries += 1;
            self.backoff(sh, h, tries, &wait)?;
            if let Attempt::Done(r) = self.read_once(sh, h, probe, f)? {
                return Ok(r);
            }
        }
    }

    #[inline(always)]
    fn read_once<T>(
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

    /// Between optimistic retries: spin, then yield, then sleep; after 10 ms check whether
    /// the segment's writer died (and recover it), and give up at the lock timeout.
    #[cold]
    pub(crate) fn backoff(&self, sh: &Shared, h: u64, tries: u32, wait: &Wait) -> Result<()> {
        if tries < 16 {
            std::hint::spin_loop();
            return Ok(());
        }
        if tries < 64 {
            crate::rt::yield_now();
            return Ok(());
        }
        if !self.alive(sh) {
            return Err(self.dropped());
        }
        let expired = wait.expired();
        // The deadline is checked here too, not only with the writer's liveness every
        // 10 ms: a deadline below that (zero: "only if not busy now") gives up after the
        // spins and yields.
        if wait.waited() > Duration::from_millis(10) || expired {
            let (_, _, e) = self.locate(sh, h, sh.file_end())?;
            let lockw = sh.w(entry_seg(e) + S_LOCK).load(Acquire) & (WAITERS - 1);
            if lockw != 0 && !sh.txn_alive(lockw - 1) {
                if !sh.read_only {
                    crate::txn::recover_txn(sh, lockw - 1)?;
                } else if expired {
                    return Err(dead_writer_error(sh));
                }
            }
            if expired {
                return Err(wait.timeout());
            }
        }
        crate::rt::sleep(Duration::from_micros(50));
        Ok(())
    }

    /// Whether some writer holds the lock of the segment that holds `h` right now.
    pub(crate) fn segment_locked(&self, sh: &Shared, h: u64) -> Result<bool> {
        let (_, _, e) = self.locate(sh, h, sh.file_end())?;
        Ok(sh.w(entry_seg(e) + S_LOCK).load(Acquire) & (WAITERS - 1) != 0)
    }

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

    /// [`MapRef::lock_segment`] with `before_lock(segment)` called before each attempt to
    /// take the lock (fixed maps ask for their own buckets' lines there).
    pub(crate) fn lock_segment_with(
        &self,
        tx: &Txn,
        h: u64,
        before_lock: impl Fn(u64),
    ) -> Result<u64> {
        let sh = tx.sh;
        loop {
            // A handle on a dropped map must not lock whatever its stale header (perhaps
            // a reused chunk by now) points at.
            if !self.alive(sh) {
                return Err(self.dropped());
            }
            let end = sh.file_end();
            let (_, _, e) = self.locate(sh, h, end)?;
            let seg = entry_seg(e);
            before_lock(seg);
            tx.lock(seg + S_LOCK)?;
            if !self.alive(sh) {
                tx.unlock(seg + S_LOCK);
                return Err(self.dropped());
            }
            let (_, _, e2) = self.locate(sh, h, sh.file_end())?;
            if entry_seg(e2) == seg {
                return Ok(seg);
            }
            tx.unlock(seg + S_LOCK);
        }
    }

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
    fn hit(&self, sh: &Shared, bk: u64, fd: Found, klen: u64) -> Option<Hit> {
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
    fn free_slot(&self, sh: &Shared, seg: u64, h: u64) -> Option<(u64, u64)> {
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

    fn counter(&self, tx: &Txn, field: u64) -> u64 {
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
            let ent = crate::uid::load(sh, self, uid)?;
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
            let r = match crate::uid::load_at(sh, ent.e, uid) {
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

    fn write_locked(
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
                    crate::uid::patch_record(sh, off, len, index);
                    new_uid = Some(crate::uid::push_move(sh, &mut redo, e, index, off));
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
                    match crate::uid::push_take(tx, self, &mut redo, off, h) {
                        Ok(uid) => {
                            crate::uid::patch_record(sh, off, len, uid.index());
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
                    let index = crate::uid::record_index(sh, hit.off, hit.rec_len);
                    tx.lock(uid_lock)?;
                    uid_locked = true;
                    if let Err(e) = crate::uid::push_free(tx, self, &mut redo, index) {
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
    fn write_in_place(
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
                    Some(crate::uid::handle_at(sh, e, index))
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
            let (u, busy) = crate::uid::push_in_place(sh, &mut redo, e, index);
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
    fn uid_entry_of(&self, sh: &Shared, hit: &Hit) -> Result<(u64, u64)> {
        let index = crate::uid::record_index(sh, hit.off, hit.rec_len);
        let e = crate::uid::entry_off(sh, self, index)?.ok_or_else(|| {
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

/// Makes sure the map has a spare segment (and, when `dir_g` is given, a spare directory
/// of that depth), allocating from its index arena. Called with the directory lock held.
pub(crate) fn ensure_spares(tx: &Txn, m: &MapRef, dir_g: Option<u64>) -> Result<()> {
    let sh = tx.sh;
    let need_seg = sh.w(m.hdr + M_SPARE_SEG).load(Acquire) == 0;
    let need_dir = match dir_g {
        Some(g) => {
            sh.w(m.hdr + M_SPARE_DIR).load(Acquire) == 0
                || sh.w(m.hdr + M_SPARE_DIR_G).load(Acquire) != g
        }
        None => false,
    };
    if need_seg {
        let s = arena_alloc(tx, m, m.seg_size)?;
        let mut redo = Redo::new();
        redo.push(m.hdr + M_SPARE_SEG, s.0);
        commit_apply(tx, &mut redo, &s.1);
    }
    if need_dir {
        let g = dir_g.unwrap_or(0);
        let d = arena_alloc(tx, m, 8 << g)?;
        let mut redo = Redo::new();
        redo.push(m.hdr + M_SPARE_DIR, d.0);
        redo.push(m.hdr + M_SPARE_DIR_G, g);
        commit_apply(tx, &mut redo, &d.1);
    }
    Ok(())
}

thread_local! {
    /// Set by a split, taken by [`prepare_growth`]: the write that split has paid enough.
    static SPLIT_IN_WRITE: std::cell::Cell<bool> = const { std::cell::Cell::new(false) };
}

/// After a write, with no lock held: takes the spare segment the next split will use,
/// and the spare directory the next doubling will use, if the map lacks them, so that a
/// split never also pays for growing the file (a new index chunk is a `fallocate` of a
/// chunk, 0.1-0.3 ms on tmpfs here; with a split and a directory doubling in the same
/// put that made the longest put 1.3 ms). Skipped by the write that itself split, and
/// when another thread holds the directory lock. Errors (a full store) are left for the
/// next split to report.
pub(crate) fn prepare_growth(tx: &Txn, m: &MapRef) {
    let sh = tx.sh;
    if SPLIT_IN_WRITE.with(|c| c.replace(false)) {
        return;
    }
    let g = sh.w(m.hdr + M_ROOT).load(Relaxed) >> 48;
    let has_seg = sh.w(m.hdr + M_SPARE_SEG).load(Relaxed) != 0;
    let has_dir = sh.w(m.hdr + M_SPARE_DIR).load(Relaxed) != 0
        && sh.w(m.hdr + M_SPARE_DIR_G).load(Relaxed) == g + 1;
    // A directory of depth MAX_DEPTH is never doubled; a tiny map's spare directory is a
    // few bytes of its arena.
    let want_dir = !has_dir && g < MAX_DEPTH;
    if has_seg && !want_dir {
        return;
    }
    let lock = m.hdr + M_DIR_LOCK;
    if !tx.try_lock(lock) {
        return;
    }
    // A drop's barrier takes the directory lock after marking the map dropping: seen
    // alive under the lock, the map's chain cannot be freed until we release it.
    if m.alive(sh) {
        let _ = ensure_spares(tx, m, want_dir.then_some(g + 1));
    }
    tx.unlock(lock);
}

pub(crate) fn commit_apply(tx: &Txn, redo: &mut Redo, extra: &[(u64, u64)]) {
    for (o, v) in extra {
        redo.push(*o, *v);
    }
    tx.commit(I_REDO, &[], redo);
    tx.apply(redo);
    tx.done();
}

/// Carves `size` bytes (a multiple of 128) from the map's index arena, taking a new index
/// run (or, for a directory larger than a chunk, a run of its own) when needed.
/// Returns the offset and the redo entries that take the space; the caller commits them
/// together with the entry that records what the space is for, so a crash leaks nothing.
///
/// The arena is one run of 1 to `ARENA_MAX_CHUNKS` chunks, longer as the map grows: a
/// run's 128-byte header leaves room for 31 segments of 8 KiB in a 256 KiB chunk, and the
/// 8,064 bytes left over were 3% of the index of a large map (0.4 B per entry at 10 M
/// keys); a run of 8 chunks loses them once per 255 segments instead.
pub(crate) fn arena_alloc(tx: &Txn, m: &MapRef, size: u64) -> Result<(u64, Vec<(u64, u64)>)> {
    let sh = tx.sh;
    let cs = sh.g.chunk_size();
    // Everything in the arena is bucket-aligned (segments must be; directories may as well).
    let size = size.next_multiple_of(BUCKET);
    let arena = sh.w(m.hdr + M_ARENA).load(Acquire);
    let bump = sh.w(m.hdr + M_ARENA_BUMP).load(Acquire);
    if arena != 0 {
        // Both come from the file, and the space is written next: never carve it outside
        // an index run of this map (a fuzzed header's arena lay past the file).
        let end = sh.file_end();
        if arena < sh.g.chunks_off
            || arena >= end
            || (arena - sh.g.chunks_off) % cs != 0
            || sh.w(arena + K_KIND).load(Acquire) != CK_INDEX
            || sh.w(arena + K_OWNER).load(Acquire) != m.id
        {
            return Err(m.bad(
                sh,
                format!(
                    "map {}: index arena {arena:#x} is not an index run of the map",
                    m.id
                ),
            ));
        }
        // The run length comes from the file: a bad one only ends the arena early.
        let run = sh
            .w(arena + K_RUN)
            .load(Acquire)
            .clamp(1, arena_max_chunks(sh, m));
        let top = (arena + run * cs).min(end);
        if bump < arena + CHUNK_HDR || bump > top || bump % BUCKET != 0 {
            return Err(m.bad(
                sh,
                format!(
                    "map {}: index arena bump {bump:#x} is outside its arena {arena:#x}",
                    m.id
                ),
            ));
        }
        if bump + size <= top {
            return Ok((bump, vec![(m.hdr + M_ARENA_BUMP, bump + size)]));
        }
    }
    let need = (size + CHUNK_HDR).div_ceil(cs);
    // A new arena: longer for a bigger map (its directory depth says how big: about one
    // entry per segment), so that a small map never holds more than a chunk it does not
    // use. A map of groups (whose directory has 8 to 16 entries per segment) counts its
    // segments, and takes a chunk per 2,048 of them: its cells fill ~84 % of its segments,
    // and an arena's unused tail is a visible part of the rest (FORMAT.md's 8-byte
    // budget per entry of a fixed map).
    let arena_k = if m.groups {
        sh.w(m.hdr + M_N_SEGS)
            .load(Acquire)
            .min(1 << 16)
            .div_ceil(2048)
    } else {
        (1u64 << (sh.w(m.hdr + M_ROOT).load(Acquire) >> 48).min(16)).div_ceil(1024)
    }
    .clamp(1, ARENA_MAX_CHUNKS);
    let (k, is_arena) = if need == 1 {
        (arena_k, true)
    } else {
        (need, false)
    };
    // Taking chunks needs the alloc lock; its redo is committed on its own, with the new
    // run linked into the map's chain (so a drop frees it even if we die right after).
    let take = |k: u64| {
        crate::alloc::with_alloc_lock(tx, |redo| {
            let run = crate::alloc::take_run(tx, k, redo, crate::alloc::Purpose::Normal)?;
            redo.push(run + K_KIND, CK_INDEX);
            redo.push(run + K_RUN, k);
            redo.push(run + K_OWNER, m.id);
            redo.push(run + K_NEXT, sh.w(m.hdr + M_CHAIN).load(Acquire));
            redo.push(m.hdr + M_CHAIN, run);
            if is_arena {
                redo.push(m.hdr + M_ARENA, run);
                redo.push(m.hdr + M_ARENA_BUMP, run + CHUNK_HDR);
            }
            Ok(run)
        })
    };
    // A store near its maximum size, or a filesystem nearly full, may have room for one
    // chunk but not for a long arena.
    let run = match take(k) {
        Err(Error::StoreFull(_) | Error::NoSpace { .. }) if is_arena && k > 1 => take(1)?,
        r => r?,
    };
    if is_arena {
        Ok((
            run + CHUNK_HDR,
            vec![(m.hdr + M_ARENA_BUMP, run + CHUNK_HDR + size)],
        ))
    } else {
        Ok((run + CHUNK_HDR, vec![]))
    }
}

/// The map's spare segment, which a split of `seg` is about to build its new segment in.
/// It comes from the file and is written next: it must be a whole segment inside the file
/// and not `seg` itself. Shared by the variable and the fixed-size maps.
pub(crate) fn spare_segment(sh: &Shared, m: &MapRef, seg: u64) -> Result<u64> {
    let s1 = sh.w(m.hdr + M_SPARE_SEG).load(Acquire);
    let fits = s1 >= sh.g.chunks_off
        && s1 % BUCKET == 0
        && s1
            .checked_add(m.seg_size)
            .is_some_and(|e| e <= sh.file_end())
        && (s1 + m.seg_size <= seg || seg + m.seg_size <= s1);
    if !fits {
        return Err(m.bad(
            sh,
            format!("map {}: spare segment {s1:#x} does not fit the file", m.id),
        ));
    }
    Ok(s1)
}

/// An iteration step of a store opened read-only, which may not take the segment lock
/// that ends persistent interference elsewhere: the optimistic copy `once` is tried until
/// it succeeds or the map's timeout passes, and the error then says whether a writer that
/// died (which only a process with write access can recover) is in the way.
pub(crate) fn read_only_retries(
    sh: &Shared,
    m: &MapRef,
    cursor: u64,
    mut once: impl FnMut() -> Result<Option<Step>>,
) -> Result<Step> {
    let wait = Wait::begin(m.timeout, m.timeout);
    loop {
        if let Some(r) = once()? {
            return Ok(r);
        }
        if wait.expired() {
            let (_, _, e) = m.locate(sh, cursor.reverse_bits(), sh.file_end())?;
            let lockw = sh.w(entry_seg(e) + S_LOCK).load(Acquire) & (WAITERS - 1);
            return Err(if lockw != 0 && !sh.txn_alive(lockw - 1) {
                dead_writer_error(sh)
            } else {
                wait.timeout()
            });
        }
        crate::rt::sleep(Duration::from_micros(50));
    }
}

/// The error of a read that timed out behind a writer that died mid-write: in a store
/// opened read-only, which may not recover it. (Elsewhere the reader recovers it.)
pub(crate) fn dead_writer_error(sh: &Shared) -> Error {
    sh.read_only_error(
        "a writer that died left the bucket being read half written; a process with write \
         access to the store recovers it (any write, or opening it for writing)",
    )
}

/// The longest run map `m`'s arena may be: [`ARENA_MAX_CHUNKS`], or its first run if that
/// is longer (a map created with segments of more than a chunk: its header, directory and
/// first segment are one run, whose tail is its first arena).
pub(crate) fn arena_max_chunks(sh: &Shared, m: &MapRef) -> u64 {
    let first = CHUNK_HDR + map_header_size(sh.g.n_txn) + BUCKET + m.seg_size;
    ARENA_MAX_CHUNKS.max(first.div_ceil(sh.g.chunk_size()))
}

/// Zeroes a segment's memory (it may be a reused chunk) and sets its header.
pub(crate) fn init_segment(sh: &Shared, m: &MapRef, seg: u64, lock: u64, depth: u64, prefix: u64) {
    let mut o = seg;
    while o < seg + m.seg_size {
        sh.w(o).store(0, Relaxed);
        o += 8;
    }
    sh.w(seg + S_DEPTH).store(depth, Relaxed);
    sh.w(seg + S_PREFIX).store(prefix, Relaxed);
    sh.w(seg + S_LOCK).store(lock, Release);
}

/// Split arguments, stored in the txn slot's intent.
const A_MAP: usize = 0;
const A_SEG: usize = 1;
const A_NEW: usize = 2;
const A_DEPTH: usize = 3;
const A_PHASE: usize = 4;

/// Splits full segment `seg` (locked by the caller).
fn split(tx: &Txn, m: &MapRef, seg: u64) -> Result<()> {
    let sh = tx.sh;
    let d = sh.w(seg + S_DEPTH).load(Acquire);
    if d >= MAX_DEPTH {
        return Err(Error::StoreFull(format!(
            "map {}: segment at depth {d} is full; keys collide on {MAX_DEPTH} hash bits",
            m.id
        )));
    }
    let dir_lock = m.hdr + M_DIR_LOCK;
    tx.lock(dir_lock)?;
    let r = split_locked(tx, m, seg, d);
    tx.unlock(dir_lock);
    r
}

fn split_locked(tx: &Txn, m: &MapRef, seg: u64, d: u64) -> Result<()> {
    let sh = tx.sh;
    let root = sh.w(m.hdr + M_ROOT).load(Acquire);
    let g = root >> 48;
    // 1. Double the directory if this segment is as deep as it: copy into the spare
    //    directory of depth g+1 and publish it with one store. The old one is abandoned
    //    (readers may still be in it; it is never reused while the map lives).
    SPLIT_IN_WRITE.with(|c| c.set(true));
    if d == g {
        double_directory(tx, m, root)?;
    }
    ensure_spares(tx, m, None)?;
    let s1 = spare_segment(sh, m, seg)?;
    let prefix = sh.w(seg + S_PREFIX).load(Acquire);
    // 2. Build the new segment, locked by us, private until published. Intent first: a
    //    crash before publication leaves it as the map's spare, untouched.
    let me = tx.idx + 1;
    tx.held_note(s1 + S_LOCK)?;
    let r = (|| -> Result<()> {
        let mut args = [0u64; T_NARGS as usize];
        args[A_MAP] = m.id;
        args[A_SEG] = seg;
        args[A_NEW] = s1;
        args[A_DEPTH] = d;
        args[A_PHASE] = 0;
        tx.commit(I_SPLIT, &args, &Redo::new());
        init_segment(sh, m, s1, me, d + 1, prefix | (1 << d));
        let end = sh.file_end();
        let nb = m.n_main + m.n_stash;
        let mut overflow = vec![0u64; m.n_main as usize];
        // Every key's hash, computed once here and reused to finish the split (the old
        // segment cannot change meanwhile: we hold its lock).
        let mut hashes = vec![0u64; (nb * SLOTS) as usize];
        for b in 0..nb {
            if b == nb / 2 {
                crate::rt::failpoint!("split.building");
            }
            // Start the bucket's record misses together rather than one after another.
            for i in 0..SLOTS {
                let s = sh.w(slot_off(seg, b, i)).load(Relaxed);
                if s != 0 && slot_off_of(s) < end {
                    sh.r.prefetch(slot_off_of(s));
                }
            }
            for i in 0..SLOTS {
                let s = sh.w(slot_off(seg, b, i)).load(Acquire);
                if s == 0 {
                    continue;
                }
                let kh = key_hash_of(sh, m, slot_off_of(s), end)?;
                hashes[(b * SLOTS + i) as usize] = kh;
                if (kh >> d) & 1 == 1 {
                    sh.w(slot_off(s1, b, i)).store(s, Relaxed);
                    if b >= m.n_main {
                        overflow[home_bucket(kh, m.n_main) as usize] += 1;
                    }
                }
            }
        }
        for (b, ov) in overflow.iter().enumerate() {
            if *ov > 0 {
                sh.w(bucket_off(s1, b as u64) + B_HDR)
                    .store(make_hdr(0, *ov), Relaxed);
            }
        }
        // 3. Publish: from here on recovery rolls forward.
        // On disk, the new segment must be durable before any key leaves the old one.
        sh.persist(s1, m.seg_size)?;
        crate::rt::failpoint!("split.built");
        tx.set_arg(A_PHASE as u64, 1);
        finish_split(sh, m, seg, s1, d, Some(&hashes))?;
        crate::rt::failpoint!("split.done");
        // Statistics only (not covered by the intent: a crash may lose one count).
        let so = m.hdr + M_COUNTERS + MC_SIZE * tx.idx + MC_SPLITS;
        sh.w(so).store(sh.w(so).load(Relaxed) + 1, Relaxed);
        Ok(())
    })();
    // Also after an error (a slot that is not a record, a failed flush): clear the
    // intent and release the new segment, or its lock and its held-list entry would
    // stay taken, and a few such errors would overflow the held list (a panic).
    tx.done();
    sh.w(s1 + S_LOCK).store(0, Release);
    tx.held_forget(s1 + S_LOCK);
    r
}

/// Doubles the directory of depth g (`root` is the current root; the directory lock is
/// held): copies it twice into the spare directory of depth g+1 and publishes that with
/// one store of the root. The old one is abandoned (readers may still be in it; it is
/// never reused while the map lives). Shared by the variable and the fixed-size maps.
pub(crate) fn double_directory(tx: &Txn, m: &MapRef, root: u64) -> Result<()> {
    let sh = tx.sh;
    let g = root >> 48;
    ensure_spares(tx, m, Some(g + 1))?;
    let nd = sh.w(m.hdr + M_SPARE_DIR).load(Acquire);
    // From the file, and written next: inside it, and not over the directory it copies
    // (which is read whole, so it must be inside the file too).
    let od = root & OFF_MASK;
    let end = sh.file_end();
    let fits = g < MAX_DEPTH
        && nd >= sh.g.chunks_off
        && nd % BUCKET == 0
        && nd.checked_add(16 << g).is_some_and(|e| e <= end)
        && od >= sh.g.chunks_off
        && od % 8 == 0
        && od + (8 << g) <= end
        && (nd + (16 << g) <= od || od + (8 << g) <= nd);
    if !fits {
        return Err(m.bad(
            sh,
            format!(
                "map {}: spare directory {nd:#x} (depth {}) does not fit the file",
                m.id,
                g + 1
            ),
        ));
    }
    let half = 1u64 << g;
    for i in 0..half {
        let e = sh.w(od + 8 * i).load(Acquire);
        sh.w(nd + 8 * i).store(e, Relaxed);
        sh.w(nd + 8 * (i + half)).store(e, Relaxed);
    }
    // On disk, the new directory must be durable before the root points at it.
    sh.persist(nd, 16 << g)?;
    let mut redo = Redo::new();
    redo.push(m.hdr + M_ROOT, make_root(nd, g + 1));
    redo.push(m.hdr + M_SPARE_DIR, 0);
    commit_apply(tx, &mut redo, &[]);
    crate::rt::failpoint!("split.doubled");
    Ok(())
}

/// The hash of the key of the record at `off` (during a split or a check).
fn key_hash_of(sh: &Shared, m: &MapRef, off: u64, end: u64) -> Result<u64> {
    let (mid, k, _, hl) = read_record_header(sh, off, end).ok_or_else(|| {
        sh.corrupt(format!(
            "map {}: slot points at {off:#x}, not a record",
            m.id
        ))
    })?;
    if mid != m.id {
        return Err(sh.corrupt(format!(
            "map {}: record at {off:#x} belongs to map {mid}",
            m.id
        )));
    }
    // Splits hash every key of a segment: no allocation for ordinary key sizes.
    let mut small = [0u8; 256];
    if k as usize <= small.len() {
        let key = &mut small[..k as usize];
        sh.r.read_bytes(off + hl, key);
        return Ok(hash(sh.g.seed, key));
    }
    let mut key = vec![0u8; k as usize];
    sh.r.read_bytes(off + hl, &mut key);
    Ok(hash(sh.g.seed, &key))
}

/// Steps 3-4 of a split, idempotent: repoint the directory, set depths, drop the moved
/// keys from the old segment. Runs with the segment, new segment and directory locked
/// (by the splitter, or by the dead splitter whose recovery this is).
/// `known` holds the hash of every slot's key (0 for empty slots) when the caller has them
/// (a live split); recovery passes None and reads the records again.
fn finish_split(
    sh: &Shared,
    m: &MapRef,
    seg: u64,
    s1: u64,
    d: u64,
    known: Option<&[u64]>,
) -> Result<()> {
    let root = sh.w(m.hdr + M_ROOT).load(Acquire);
    let g = root >> 48;
    let dir = root & OFF_MASK;
    let prefix = sh.w(seg + S_PREFIX).load(Acquire) & ((1 << d) - 1);
    let mut j = prefix;
    while j < (1 << g) {
        let e = if (j >> d) & 1 == 1 {
            dir_entry(s1, d + 1)
        } else {
            dir_entry(seg, d + 1)
        };
        sh.w(dir + 8 * j).store(e, Release);
        j += 1 << d;
    }
    sh.w(s1 + S_DEPTH).store(d + 1, Release);
    sh.w(s1 + S_PREFIX).store(prefix | (1 << d), Release);
    sh.w(seg + S_DEPTH).store(d + 1, Release);
    sh.w(m.hdr + M_SPARE_SEG).store(0, Release);
    // On disk, the repointed directory (and the depths) must be durable before the moved
    // keys are removed from the old segment.
    sh.persist(dir, 8 << g)?;
    sh.persist(m.hdr, 8)?;
    sh.persist(seg, BUCKET)?;
    sh.persist(s1, BUCKET)?;
    crate::rt::failpoint!("split.published");
    let end = sh.file_end();
    let nb = m.n_main + m.n_stash;
    let mut overflow_drop = vec![0u64; m.n_main as usize];
    for b in 0..nb {
        if b == nb / 2 {
            crate::rt::failpoint!("split.removing");
        }
        let bo = bucket_off(seg, b);
        let mut moved = [false; SLOTS as usize];
        let mut any = false;
        for i in 0..SLOTS {
            let s = sh.w(slot_off(seg, b, i)).load(Acquire);
            if s == 0 {
                continue;
            }
            let kh = match known {
                Some(k) => k[(b * SLOTS + i) as usize],
                None => key_hash_of(sh, m, slot_off_of(s), end)?,
            };
            if (kh >> d) & 1 == 1 {
                moved[i as usize] = true;
                any = true;
                if b >= m.n_main {
                    overflow_drop[home_bucket(kh, m.n_main) as usize] += 1;
                }
            }
        }
        if any {
            let h0 = sh.w(bo).load(Acquire);
            let seq = hdr_seq(h0) | 1; // odd (a dead splitter may have left it odd already)
            sh.w(bo).store(make_hdr(seq, hdr_overflow(h0)), Relaxed);
            for i in 0..SLOTS {
                if moved[i as usize] {
                    sh.w(slot_off(seg, b, i)).store(0, Release);
                }
            }
            sh.w(bo)
                .store(make_hdr(seq.wrapping_add(1), hdr_overflow(h0)), Release);
        }
    }
    // Overflow counts of the old segment: recount from its stash, which is exact whatever
    // point a previous attempt reached (with known hashes, without reading records).
    let _ = overflow_drop;
    match known {
        Some(k) => {
            let mut counts = vec![0u64; m.n_main as usize];
            for st in 0..m.n_stash {
                let b = m.n_main + st;
                for i in 0..SLOTS {
                    if sh.w(slot_off(seg, b, i)).load(Acquire) != 0 {
                        counts[home_bucket(k[(b * SLOTS + i) as usize], m.n_main) as usize] += 1;
                    }
                }
            }
            set_overflow_counts(sh, seg, &counts);
        }
        None => recount_overflow(sh, m, seg, end)?,
    }
    Ok(())
}

/// Sets every main bucket's overflow count to the number of its keys in the stash.
pub(crate) fn recount_overflow(sh: &Shared, m: &MapRef, seg: u64, end: u64) -> Result<()> {
    let mut counts = vec![0u64; m.n_main as usize];
    for s in 0..m.n_stash {
        for i in 0..SLOTS {
            let v = sh.w(slot_off(seg, m.n_main + s, i)).load(Acquire);
            if v != 0 {
                let kh = key_hash_of(sh, m, slot_off_of(v), end)?;
                counts[home_bucket(kh, m.n_main) as usize] += 1;
            }
        }
    }
    set_overflow_counts(sh, seg, &counts);
    Ok(())
}

/// Stores the main buckets' overflow counts (bumping the seq of each bucket it changes).
fn set_overflow_counts(sh: &Shared, seg: u64, counts: &[u64]) {
    for (b, c) in counts.iter().enumerate() {
        let bo = bucket_off(seg, b as u64);
        let h0 = sh.w(bo).load(Acquire);
        if hdr_overflow(h0) != *c || hdr_seq(h0) & 1 == 1 {
            let seq = hdr_seq(h0) | 1;
            sh.w(bo).store(make_hdr(seq, hdr_overflow(h0)), Relaxed);
            sh.w(bo).store(make_hdr(seq.wrapping_add(1), *c), Release);
        }
    }
}

/// Recovery of a split whose thread died (called with its locks still naming it).
pub(crate) fn recover_split(sh: &Shared, intent: &crate::shared::Intent) -> Result<()> {
    let args = &intent.args;
    let id = args[A_MAP];
    let m = map_ref_unchecked(sh, id)?;
    if args[A_PHASE] == 0 {
        // The new segment was never published: it is still the map's spare. Nothing in
        // the old segment changed.
        return Ok(());
    }
    check_split_args(sh, &m, args)?;
    finish_split(sh, &m, args[A_SEG], args[A_NEW], args[A_DEPTH], None)
}

/// Checks a dead txn's split intent against the file before recovery acts on it: the
/// two segments inside the file and distinct, the depth below the directory's, the
/// directory itself inside the file. Recovery writes the directory and both segments
/// at these offsets, so a corrupt slot must fail here, not touch memory past the file.
pub(crate) fn check_split_args(sh: &Shared, m: &MapRef, args: &[u64]) -> Result<()> {
    let end = sh.file_end();
    let (seg, s1, d) = (args[A_SEG], args[A_NEW], args[A_DEPTH]);
    let root = sh.w(m.hdr + M_ROOT).load(Acquire);
    let (g, dir) = (root >> 48, root & OFF_MASK);
    let seg_ok = |s: u64| {
        s >= sh.g.chunks_off
            && s % BUCKET == 0
            && s.checked_add(m.seg_size).is_some_and(|e| e <= end)
    };
    let dir_ok = g <= MAX_DEPTH
        && dir >= sh.g.chunks_off
        && dir % 8 == 0
        && dir.checked_add(8 << g).is_some_and(|e| e <= end);
    if !(dir_ok && d < g && seg_ok(seg) && seg_ok(s1) && seg != s1) {
        return Err(sh.corrupt(format!(
            "map {}: a dead txn's split intent (segment {seg:#x}, new {s1:#x}, depth {d}) \
             does not fit its directory (root {root:#x}) or the file",
            m.id
        )));
    }
    Ok(())
}

/// A MapRef read straight from the catalog (recovery and checks).
pub(crate) fn map_ref_unchecked(sh: &Shared, id: u64) -> Result<MapRef> {
    if id >= sh.g.n_catalog {
        return Err(sh.corrupt(format!("map id {id} out of range")));
    }
    let ce = sh.g.cat_entry(id);
    let cat_word = sh.w(ce + C_STATE).load(Acquire);
    let hdr = sh.w(ce + C_HDR).load(Acquire);
    let end = sh.file_end();
    if !sh.g.map_header_fits(hdr, end) {
        return Err(sh.corrupt(format!("map {id}: header offset {hdr:#x} out of the file")));
    }
    if sh.w(hdr + M_FLAGS).load(Acquire) & MF_FIXED != 0 {
        // A fixed-size map's segments hold cells, not slots: never walk them as slots.
        return Err(Error::InvalidArgument(format!(
            "map {id} is a fixed-size map, not a variable-size one"
        )));
    }
    let n_main = sh.w(hdr + M_N_MAIN).load(Acquire);
    let n_stash = sh.w(hdr + M_N_STASH).load(Acquire);
    if !(1..=4096).contains(&n_main) || !(1..=1024).contains(&n_stash) || n_main > u16::MAX as u64 {
        return Err(sh.corrupt(format!("map {id}: bad geometry {n_main}+{n_stash} buckets")));
    }
    let flags = sh.w(hdr + M_FLAGS).load(Acquire);
    if flags & !MF_UIDS != 0 {
        return Err(sh.corrupt(format!("map {id}: unknown map flags {flags:#x}")));
    }
    Ok(MapRef {
        id,
        hdr,
        n_main,
        n_stash,
        seg_size: segment_size(n_main, n_stash),
        cat_word,
        timeout: sh.lock_timeout,
        vtrail: if flags & MF_UIDS != 0 { UID_TRAILER } else { 0 },
        groups: false,
    })
}

/// Creates the index of a new map inside its first chunk `c` (already taken by the caller
/// and zero-initialised as needed): header, a one-entry directory, one segment.
pub(crate) fn init_map(
    sh: &Shared,
    c: u64,
    id: u64,
    n_main: u64,
    n_stash: u64,
    flags: u64,
) -> MapRef {
    let hdr = c + CHUNK_HDR;
    let hsize = map_header_size(sh.g.n_txn);
    let mut o = hdr;
    while o < hdr + hsize {
        sh.w(o).store(0, Relaxed);
        o += 8;
    }
    let dir = hdr + hsize;
    let seg = dir + BUCKET;
    let m = MapRef {
        id,
        hdr,
        n_main,
        n_stash,
        seg_size: segment_size(n_main, n_stash),
        cat_word: 0,
        timeout: sh.lock_timeout,
        vtrail: if flags & MF_UIDS != 0 { UID_TRAILER } else { 0 },
        groups: false,
    };
    init_segment(sh, &m, seg, 0, 0, 0);
    sh.w(dir).store(dir_entry(seg, 0), Relaxed);
    sh.w(hdr + M_N_MAIN).store(n_main, Relaxed);
    sh.w(hdr + M_N_STASH).store(n_stash, Relaxed);
    sh.w(hdr + M_FLAGS).store(flags, Relaxed);
    sh.w(hdr + M_CHAIN).store(c, Relaxed);
    sh.w(hdr + M_ARENA).store(c, Relaxed);
    sh.w(hdr + M_ARENA_BUMP).store(seg + m.seg_size, Relaxed);
    sh.w(hdr + M_ROOT).store(make_root(dir, 0), Release);
    m
}

/// Space the first chunk of a map needs for its header, directory and first segment.
pub(crate) fn first_chunk_need(sh: &Shared, n_main: u64, n_stash: u64) -> u64 {
    CHUNK_HDR + map_header_size(sh.g.n_txn) + BUCKET + segment_size(n_main, n_stash)
}

/// Every distinct segment of the map, in directory order, with its depth and prefix.
pub(crate) fn segments(sh: &Shared, m: &MapRef) -> Result<Vec<(u64, u64)>> {
    let end = sh.file_end();
    let root = sh.w(m.hdr + M_ROOT).load(Acquire);
    let g = root >> 48;
    let dir = root & OFF_MASK;
    if g > MAX_DEPTH || dir < sh.g.chunks_off || dir % 8 != 0 || dir + (8 << g) > end {
        return Err(sh.corrupt(format!("map {}: directory {root:#x} out of the file", m.id)));
    }
    let mut out = Vec::new();
    // In a map of groups (`MF_GROUPS`) any entries may name a segment: every entry is
    // looked at, and each segment listed once.
    let mut seen = std::collections::HashSet::new();
    for j in 0..(1u64 << g) {
        let e = sh.w(dir + 8 * j).load(Acquire);
        let d = entry_depth(e);
        if m.groups && (d != 0 || !seen.insert(entry_seg(e))) {
            if d != 0 {
                return Err(sh.corrupt(format!(
                    "map {}: entry {j} has depth {d} in a map of groups",
                    m.id
                )));
            }
            continue;
        }
        if d > g {
            return Err(sh.corrupt(format!(
                "map {}: entry {j} has depth {d} > global {g}",
                m.id
            )));
        }
        if m.groups || j < (1 << d) {
            // Callers lock and read the segments: never trust an offset from the file
            // (`end` may be stale: the file may have grown since; look again first).
            let seg = entry_seg(e);
            if seg < sh.g.chunks_off
                || seg % BUCKET != 0
                || (seg + m.seg_size > end && seg + m.seg_size > sh.file_end())
            {
                return Err(sh.corrupt(format!(
                    "map {}: directory entry {j} = {e:#x} out of the file",
                    m.id
                )));
            }
            out.push((seg, d));
        }
    }
    Ok(out)
}

impl MapRef {
    /// Moves a live record to `new` (offset, length), a copy the cleaner made without a
    /// lock, if the key still points at `old`. Used by the cleaner; returns whether it
    /// moved.
    ///
    /// With values overwritten in place (`FLAG_IN_PLACE`), "still points at `old`" no
    /// longer means "unchanged since the copy": a value written in place keeps the
    /// record's offset. So under the lock the copy is compared with the record and, if
    /// they differ (or the copy was torn by such a write), made again from the record;
    /// publishing the stale copy lost that acknowledged write (the kill storm found it).
    pub fn relocate(&self, tx: &Txn, key: &[u8], old: u64, new: (u64, u64)) -> Result<bool> {
        let r = self.write(tx, key, &mut |tx, hit| {
            if hit.is_none_or(|h| h.off != old) {
                return Ok(Action::Keep);
            }
            if tx.sh.g.in_place {
                refresh_copy(tx.sh, old, new)?;
            }
            Ok(Action::Put(new.0, new.1))
        })?;
        Ok(r.applied)
    }
}

/// Under the key's lock: makes the unpublished copy `new` (offset, length) of the live
/// record at `old` equal to it again, if a value overwritten in place changed the record
/// after the copy was made (see [`MapRef::relocate`]).
///
/// Compared a piece at a time through buffers on the stack: the cleaner calls this for
/// every record it moves, and two heap buffers per call were most of a move's cost
/// (~540 of its ~730 instructions, callgrind, an overwrite loop whose values change
/// length).
fn refresh_copy(sh: &Shared, old: u64, new: (u64, u64)) -> Result<()> {
    const PIECE: u64 = 64;
    let (off, len) = new;
    let (mut cur, mut copy) = ([0u8; PIECE as usize], [0u8; PIECE as usize]);
    let mut changed = false;
    let mut at = 0;
    while at < len {
        let n = (len - at).min(PIECE) as usize;
        sh.r.read_bytes(old + at, &mut cur[..n]);
        sh.r.read_bytes(off + at, &mut copy[..n]);
        if cur[..n] != copy[..n] {
            sh.r.write_bytes(off + at, &cur[..n]);
            changed = true;
        }
        at += n as u64;
    }
    if changed {
        // On disk the copy must be durable before a slot names it, as the cleaner's
        // first copy was made durable before any repointing.
        sh.persist(off, len)?;
    }
    Ok(())
}

/// Removes every entry of the map, segment by segment. Returns the record bytes freed.
pub(crate) fn clear(tx: &Txn, m: &MapRef) -> Result<u64> {
    let sh = tx.sh;
    let mut done = std::collections::HashSet::new();
    let mut freed = 0u64;
    loop {
        // As in `lock_segment`: never walk the stale header of a dropped map.
        if !m.alive(sh) {
            return Err(m.dropped());
        }
        let todo: Vec<u64> = segments(sh, m)?
            .into_iter()
            .map(|(s, _)| s)
            .filter(|s| !done.contains(s))
            .collect();
        if todo.is_empty() {
            return Ok(freed);
        }
        for seg in todo {
            done.insert(seg);
            tx.lock(seg + S_LOCK)?;
            let r = clear_segment(tx, m, seg);
            tx.unlock(seg + S_LOCK);
            freed += r?;
        }
    }
}

fn clear_segment(tx: &Txn, m: &MapRef, seg: u64) -> Result<u64> {
    let sh = tx.sh;
    if !m.alive(sh) {
        return Err(m.dropped());
    }
    if m.vtrail != 0 {
        let uid_lock = m.hdr + M_UID_LOCK;
        tx.lock(uid_lock)?;
        let r = clear_segment_uids(tx, m, seg);
        tx.unlock(uid_lock);
        return r;
    }
    let end = sh.file_end();
    let cnt_off = m.hdr + M_COUNTERS + MC_SIZE * tx.idx + MC_COUNT;
    let bytes_off = m.hdr + M_COUNTERS + MC_SIZE * tx.idx + MC_BYTES;
    let mut freed = 0;
    for b in 0..m.n_main + m.n_stash {
        let bo = bucket_off(seg, b);
        let h0 = sh.w(bo).load(Acquire);
        let mut redo = Redo::new();
        let (mut n, mut bytes) = (0u64, 0u64);
        for i in 0..SLOTS {
            let s = sh.w(slot_off(seg, b, i)).load(Acquire);
            if s != 0 {
                let (_, k, v, hl) =
                    read_record_header(sh, slot_off_of(s), end).ok_or_else(|| {
                        sh.corrupt(format!(
                            "map {}: slot at {:#x} points at no record",
                            m.id,
                            slot_off(seg, b, i)
                        ))
                    })?;
                redo.push(slot_off(seg, b, i), 0);
                n += 1;
                bytes += hl + k + v + sh.g.trailer;
            }
        }
        if n == 0 && hdr_overflow(h0) == 0 {
            continue;
        }
        redo.push(bo, make_hdr(hdr_seq(h0).wrapping_add(2), 0));
        redo.push(cnt_off, sh.w(cnt_off).load(Relaxed).wrapping_sub(n));
        redo.push(bytes_off, sh.w(bytes_off).load(Relaxed).wrapping_sub(bytes));
        tx.commit(I_REDO, &[], &redo);
        sh.w(bo).store(
            make_hdr(hdr_seq(h0).wrapping_add(1), hdr_overflow(h0)),
            Relaxed,
        );
        tx.apply(&redo);
        tx.done();
        freed += bytes;
    }
    Ok(freed)
}

/// [`clear_segment`] for a map with UIDs (segment and UID locks held): one redo list per
/// entry, since each also frees the entry's UID; the bucket headers' overflow counts are
/// reset once the segment is empty.
fn clear_segment_uids(tx: &Txn, m: &MapRef, seg: u64) -> Result<u64> {
    let sh = tx.sh;
    let end = sh.file_end();
    let cnt_off = m.hdr + M_COUNTERS + MC_SIZE * tx.idx + MC_COUNT;
    let bytes_off = m.hdr + M_COUNTERS + MC_SIZE * tx.idx + MC_BYTES;
    let mut freed = 0;
    for b in 0..m.n_main + m.n_stash {
        let bo = bucket_off(seg, b);
        for i in 0..SLOTS {
            let so = slot_off(seg, b, i);
            let s = sh.w(so).load(Acquire);
            if s == 0 {
                continue;
            }
            let off = slot_off_of(s);
            let (_, k, v, hl) = read_record_header(sh, off, end)
                .filter(|r| r.2 >= UID_TRAILER)
                .ok_or_else(|| {
                    sh.corrupt(format!("map {}: slot at {so:#x} points at no record", m.id))
                })?;
            let len = hl + k + v + sh.g.trailer;
            let h0 = sh.w(bo).load(Acquire);
            let mut redo = Redo::new();
            redo.push(so, 0);
            redo.push(bo, make_hdr(hdr_seq(h0).wrapping_add(2), hdr_overflow(h0)));
            redo.push(cnt_off, sh.w(cnt_off).load(Relaxed).wrapping_sub(1));
            redo.push(bytes_off, sh.w(bytes_off).load(Relaxed).wrapping_sub(len));
            crate::uid::push_free(tx, m, &mut redo, crate::uid::record_index(sh, off, len))?;
            tx.commit(I_REDO, &[], &redo);
            sh.w(bo).store(
                make_hdr(hdr_seq(h0).wrapping_add(1), hdr_overflow(h0)),
                Relaxed,
            );
            tx.apply(&redo);
            tx.done();
            freed += len;
        }
    }
    // Every slot is empty now (the segment lock kept inserts out): no bucket overflows.
    for b in 0..m.n_main {
        let bo = bucket_off(seg, b);
        let h0 = sh.w(bo).load(Acquire);
        if hdr_overflow(h0) != 0 {
            let mut redo = Redo::new();
            redo.push(bo, make_hdr(hdr_seq(h0).wrapping_add(2), 0));
            tx.commit(I_REDO, &[], &redo);
            sh.w(bo).store(
                make_hdr(hdr_seq(h0).wrapping_add(1), hdr_overflow(h0)),
                Relaxed,
            );
            tx.apply(&redo);
            tx.done();
        }
    }
    Ok(freed)
}

/// Whether segment `seg`'s own depth and prefix (its line 0) are those of the directory
/// entry that led to it from hash `h`: depth `d`, prefix `h`'s low `d` bits.
///
/// Iteration relies on it to visit each segment once. In a healthy map they differ only
/// while a split publishes (entries first, then depths), under the segment's lock. In a
/// corrupt one, a directory whose 2^g entries all named one segment at depth g made
/// iteration copy that segment 2^g times, one interval at a time (fuzz, open_check: 17 s
/// for one 500 KB input); checked, each segment is copied at most once.
pub(crate) fn segment_matches(sh: &Shared, seg: u64, d: u64, h: u64) -> bool {
    debug_assert!(d <= MAX_DEPTH);
    sh.w(seg + S_DEPTH).load(Acquire) == d
        && sh.w(seg + S_PREFIX).load(Acquire) == h & ((1u64 << d) - 1)
}

/// The corruption [`segment_matches`] found, found under the segment's lock.
pub(crate) fn segment_mismatch(sh: &Shared, id: u64, seg: u64, d: u64, h: u64) -> String {
    format!(
        "map {id}: segment {seg:#x} has depth {} prefix {:#x}, the directory says {d} / {:#x}",
        sh.w(seg + S_DEPTH).load(Acquire),
        sh.w(seg + S_PREFIX).load(Acquire),
        h & ((1u64 << d) - 1)
    )
}

/// Items of one iteration step.
pub(crate) type Items = Vec<(Vec<u8>, Vec<u8>)>;

/// One step of an iteration: the items of one segment, the position after it (None at
/// the end), and what of the segment was damaged and skipped (then the items are what
/// could be read): the segment and what to say.
pub(crate) struct Step {
    pub items: Items,
    pub next: Option<u64>,
    pub damage: Option<(u64, String)>,
}

/// Copies out the segment that covers iteration position `cursor`, and returns the next
/// position (None at the end).
///
/// Positions are hashes with their bits reversed. A segment of local depth d holds exactly
/// the keys whose low d hash bits equal its prefix: an aligned interval of length 2^(64-d)
/// in reversed order. Splits only cut intervals in two, so walking intervals in order,
/// and keeping only keys at or past the cursor, visits every key that stays put exactly
/// once whatever splits happen meanwhile.
///
/// Damage (a slot that leads to no record of the map, a record that fails its checksum, a
/// bucket left mid-write) looks like interference to an optimistic copy, which retries.
/// Under the segment's lock nothing can change, so what is still wrong there is damage:
/// the slots that can be read are returned, and the step says what it skipped (`map`
/// names the map), so that an iteration reports it as corruption and goes on with the
/// next segment. It used to fail the whole iteration with "segment ... changed under its
/// lock", which read like a race, and hid every other segment and map from `shoal dump`.
pub(crate) fn snapshot(
    sh: &std::sync::Arc<Shared>,
    m: &MapRef,
    map: &str,
    cursor: u64,
    values: bool,
) -> Result<Step> {
    for attempt in 0..16 {
        if let Some(r) = snapshot_once(sh, m, map, cursor, values, None)? {
            return Ok(r);
        }
        if attempt > 4 {
            crate::rt::yield_now();
        }
    }
    if sh.read_only {
        return read_only_retries(sh, m, cursor, || {
            snapshot_once(sh, m, map, cursor, values, None)
        });
    }
    // Persistent interference (or damage): copy under the segment lock.
    let t = crate::txn::thread_txn(sh)?;
    let tx = Txn::new(sh, t);
    let h = cursor.reverse_bits();
    let seg = m.lock_segment(&tx, h)?;
    let r = snapshot_once(sh, m, map, cursor, values, Some(seg));
    tx.unlock(seg + S_LOCK);
    r?.ok_or_else(|| {
        // Under the lock only the directory may change, and only by a doubling, which
        // keeps the entry naming this segment: the entry itself is damaged.
        m.bad(
            sh,
            format!("map {map:?}: the directory no longer names segment {seg:#x}, whose lock the iteration holds"),
        )
    })
}

fn snapshot_once(
    sh: &Shared,
    m: &MapRef,
    map: &str,
    cursor: u64,
    values: bool,
    locked: Option<u64>,
) -> Result<Option<Step>> {
    // Tests make every optimistic copy fail here, to reach the locked one.
    #[cfg(feature = "failpoints")]
    if locked.is_none() {
        fail::fail_point!("snapshot.optimistic", |_| Ok(None));
    }
    let end = sh.file_end();
    let h = cursor.reverse_bits();
    let (root, eoff, e) = m.locate(sh, h, end)?;
    let seg = entry_seg(e);
    if locked.is_some_and(|l| l != seg) {
        return Ok(None);
    }
    if locked.is_some() {
        crate::rt::failpoint!("snapshot.locked");
    }
    let d = entry_depth(e);
    if d > MAX_DEPTH {
        return Err(m.bad(
            sh,
            format!("map {map:?}: directory entry {eoff:#x} has depth {d}"),
        ));
    }
    let next = if d == 0 {
        None
    } else {
        let span = 1u64 << (64 - d);
        (cursor & !(span - 1)).checked_add(span)
    };
    if !segment_matches(sh, seg, d, h) {
        if locked.is_none() {
            return Ok(None); // a split publishing: entries first, then the depths
        }
        if !m.alive(sh) {
            return Err(m.dropped());
        }
        // The directory says which keys the segment covers: the iteration goes on past it.
        return Ok(Some(Step {
            items: Vec::new(),
            next,
            damage: Some((
                seg,
                format!(
                    "map {map:?}: segment {seg:#x} skipped: {}",
                    segment_mismatch(sh, m.id, seg, d, h)
                ),
            )),
        }));
    }
    let nb = m.n_main + m.n_stash;
    let mut hdrs = Vec::with_capacity(nb as usize);
    let mut items = Vec::new();
    // Under the lock: what could not be read (how many, and the first few).
    let (mut bad, mut said) = (0u64, Vec::new());
    let mut damaged = |what: String| {
        bad += 1;
        if said.len() < 3 {
            said.push(what);
        }
    };
    let trailer = sh.g.trailer;
    for b in 0..nb {
        let bo = bucket_off(seg, b);
        let h1 = sh.w(bo).load(Acquire);
        if hdr_seq(h1) & 1 == 1 {
            if locked.is_none() {
                return Ok(None);
            }
            // No writer can be in it (we hold the lock, and taking it recovered a dead
            // holder): a bucket left mid-write by a crash that nobody repaired. Its slots
            // may be half changed: skipped.
            damaged(format!("bucket {bo:#x} left mid-write"));
            hdrs.push(h1);
            continue;
        }
        hdrs.push(h1);
        for i in 0..SLOTS {
            let so = slot_off(seg, b, i);
            let s = sh.w(so).load(Relaxed);
            if s == 0 {
                continue;
            }
            let off = slot_off_of(s);
            let hdr = read_record_header(sh, off, end).filter(|r| r.0 == m.id);
            let Some((_, k, v, hl)) = hdr else {
                if locked.is_none() {
                    return Ok(None);
                }
                damaged(format!(
                    "slot {so:#x} leads to {off:#x}, which is no record of the map"
                ));
                continue;
            };
            if trailer != 0 || values {
                // Validate the bucket before trusting the length with an allocation (or
                // a checksum's read of the whole record).
                fence(Acquire);
                if sh.w(bo).load(Relaxed) != h1 {
                    return Ok(None);
                }
            }
            // The checksum is checked for key-only iterations too: a damaged record's key
            // is no more to be trusted than its value.
            if trailer != 0 && !record_crc_ok(sh, off, off + hl + k + v) {
                if locked.is_none() {
                    return Ok(None);
                }
                damaged(format!(
                    "the record at {off:#x} (slot {so:#x}) fails its checksum"
                ));
                continue;
            }
            let mut key = vec![0u8; k as usize];
            sh.r.read_bytes(off + hl, &mut key);
            // Only keys of this segment's interval: between a split's publication and the
            // removal of the moved keys, the old segment still holds keys that belong to
            // the new one (which returns them).
            let pos = hash(sh.g.seed, &key).reverse_bits();
            if pos < cursor || next.is_some_and(|n| pos >= n) {
                continue;
            }
            let mut val = Vec::new();
            if values {
                sh.r.read_to_vec(off + hl + k, v.saturating_sub(m.vtrail) as usize, &mut val);
            }
            items.push((key, val));
        }
    }
    fence(Acquire);
    for b in 0..nb {
        if sh.w(bucket_off(seg, b)).load(Relaxed) != hdrs[b as usize] {
            return Ok(None);
        }
    }
    // Optimistic copies also check that the directory did not change. Under the segment
    // lock it may (another segment's split doubles it, taking only the directory lock),
    // and that is no interference: the segment, its depth and its keys cannot change
    // while we hold its lock, and it is what covers the cursor. Checked there too, a
    // doubling during a locked copy was reported as a corrupt store (CI, a Python test
    // iterating while three processes inserted).
    if locked.is_none()
        && (sh.w(eoff).load(Relaxed) != e || sh.w(m.hdr + M_ROOT).load(Relaxed) != root)
    {
        return Ok(None);
    }
    if !m.alive(sh) {
        return Err(m.dropped());
    }
    let damage = (bad > 0).then(|| {
        let what = format!(
            "map {map:?}: segment {seg:#x}: {bad} damaged entr{} skipped ({}{})",
            if bad == 1 { "y" } else { "ies" },
            said.join("; "),
            if bad > said.len() as u64 { "; ..." } else { "" }
        );
        (seg, what)
    });
    Ok(Some(Step {
        items,
        next,
        damage,
    }))
}

#[cfg(test)]
impl MapRef {
    /// Where `key`'s record is, by an optimistic read (tests).
    pub(crate) fn record_of(&self, sh: &Shared, key: &[u8]) -> Option<u64> {
        self.read(sh, key, |rec, _, _| rec).ok().flatten()
    }
}

impl MapRef {
    /// Prefetches the lines that a lookup of the key of hash `h`, and then a locked write
    /// to it, touch first: both lines of its home bucket and its segment's lock line. A
    /// hint only (reads nothing it relies on); the cleaner issues it for the records of a
    /// step ahead of their liveness lookups, whose misses otherwise came one by one.
    pub(crate) fn prefetch_hash(&self, sh: &Shared, h: u64, end: u64) {
        if let Ok((_, _, e)) = self.locate(sh, h, end) {
            let seg = entry_seg(e);
            let bo = bucket_off(seg, home_bucket(h, self.n_main));
            sh.r.prefetch(bo);
            sh.r.prefetch(bo + 64);
            sh.r.prefetch(seg + S_LOCK);
        }
    }
}

/// What an optimistic lookup matches slots by: the key (its records' bytes), or the
/// offset of one record (see [`MapRef::references`]).
#[derive(Clone, Copy)]
enum Probe<'a> {
    Key(&'a [u8]),
    Offset(u64),
}

/// Keys per stage of a staged lookup (`Map::get_many_with`, `FixedMap::get_many_with`):
/// while one stage's keys are read, the next stage's buckets are on their way. 8
/// measured best at 10 M keys (5.39-5.54 M/s against 5.19 for 12, 4.66-4.84 for 16 and
/// 24, 5.20 for 6).
pub(crate) const STAGE: usize = 8;

/// Bytes of a record that [`MapRef::prefetch_record`] loads: a 2-byte header, a 16-byte
/// key, a 16-byte value, a UID trailer and a checksum.
const RECORD_PREFETCH: u64 = 48;

impl MapRef {
    /// The first stage of a staged lookup (`Map::get_many_with`): hashes `key` and
    /// starts loading its home bucket (both lines). Returns the hash and the bucket's
    /// offset (0 if the directory could not be read: the lookup itself will say why).
    #[inline]
    pub(crate) fn prefetch_bucket(&self, sh: &Shared, key: &[u8], end: u64) -> (u64, u64) {
        let h = hash(sh.g.seed, key);
        match self.locate(sh, h, end) {
            Ok((_, _, e)) => {
                let bo = bucket_off(entry_seg(e), home_bucket(h, self.n_main));
                sh.r.prefetch(bo);
                sh.r.prefetch(bo + 64);
                (h, bo)
            }
            Err(_) => (h, 0),
        }
    }

    /// The second stage: once the bucket at `bo` is (nearly) in, starts loading the
    /// record of its first slot whose tag matches `h`'s. Reads the bucket without any
    /// validation: a hint only.
    #[inline]
    pub(crate) fn prefetch_record(&self, sh: &Shared, h: u64, bo: u64, end: u64) {
        if bo == 0 {
            return;
        }
        let m = sh.r.bucket_tag_mask(bo, hash_tag(h));
        if m != 0 {
            let s = sh
                .w(bo + B_SLOT0 + 8 * m.trailing_zeros() as u64)
                .load(Relaxed);
            let off = slot_off_of(s);
            // A record's first RECORD_PREFETCH bytes: header, key and a small value, which
            // straddle two lines as often as not (records are packed, not line-aligned).
            // The second line was a second miss in series: 6.5 against 8.4-8.7 M/s at
            // 10 M keys of 16+16 bytes.
            if s != 0 && off + 64 + RECORD_PREFETCH <= end {
                sh.r.prefetch(off);
                if (off & 63) + RECORD_PREFETCH > 64 {
                    sh.r.prefetch(off + 64);
                }
            }
        }
    }
}
