//! Fixed-size maps: every key has `key_size` bytes and every value `value_size`, so the
//! entries are stored as *cells* inside the index buckets themselves (no records, no
//! per-entry length or offset). With `key_size + value_size <= 16` this is the *inline*
//! map: a lookup reads one bucket (one cache line, or an aligned pair of lines) and nothing
//! else.
//!
//! ```text
//! root, directory   as in index.rs (extendible hashing, low hash bits)
//! segment           64-byte header line (lock, depth, prefix) + n_main + n_stash buckets
//! bucket (64·L B)   header word: seq (24 bits) | overflow (8) << 24 | bitmap (32) << 32
//!                   then `cells` cells of `cell` bytes: key, padding, value
//! ```
//!
//! A key lives in its home bucket or, when that is full, in one of the next
//! [`NEIGHBOURS`] buckets or a stash bucket; the home bucket's overflow count says when to
//! look there (F14's counts, as in `index.rs`; the neighbours raise the load at which
//! a segment is full from ~45 % to ~85 %). A bitmap bit says which cells are occupied; a
//! deleted cell is reused by the next insert.
//!
//! **Growth by moves** (format version 7, map flag `MF_GROUPS`). A directory entry is a
//! *group* (the keys whose low `g` hash bits are its index), and any set of entries may
//! name a segment. An insert that finds its segment full moves its own group (every key
//! of it) into the map's *open* segment, or into a new segment that becomes the open one,
//! and repoints that one entry. So the map grows one segment at a time and its segments
//! stay 82-94 % full at every size, where halving splits swing between ~43 % and ~86 %
//! (every segment fills at the same rate, so they split in waves): issue 3's 4- and
//! 8-byte overhead budgets need the former. Maps of older stores keep splitting. See
//! DESIGN.md, "How fixed maps grow".
//!
//! **Writes** lock the segment. An insert writes the key and value into a *free* cell
//! (invisible: its bit is clear), then commits a redo list that sets the bit and bumps the
//! seq (and the home bucket's overflow count for a stash cell, and the entry counter): a
//! writer killed before the commit leaves garbage in a free cell, never a visible entry.
//! A value replaced in place is logged in the redo list word by word (values are at most
//! [`MAX_VALUE_SIZE`] bytes, which always fits), so recovery completes it. Readers validate
//! the bucket's header word (the seq changes with every write) and retry.
//!
//! **Lock-free adds.** When the value is 8 bytes it is 8-aligned (see [`Geo::new`]), and
//! [`FixedMap::add`](crate::FixedMap::add) on a present key is one `fetch_add` on it, with
//! no lock and no redo list (one atomic word: a process killed around it either added or
//! did not). What makes that safe against writers that move or reuse cells (remove, split,
//! clear, insert into a freed cell): an adder first counts itself in the **high half of
//! the segment's lock word** (a CAS that succeeds only while nobody owns the lock), and a
//! locked writer, once it owns the lock (which stops new adders), waits for that count to
//! drain before it changes anything. So no add is ever applied to a cell that changed
//! hands. An adder announces the segment in its txn slot (`T_ADDING`) before counting
//! itself; a count left by a killed adder is recognised (no live txn announces the
//! segment) and cleared by the writer waiting on it, after 10 ms.
//!
//! Duplicated from index.rs, with cells instead of slots: the optimistic read loop, the
//! split (build, finish, recovery), clear and iteration snapshots. The moves are this
//! module's own. They differ in every
//! line that touches a bucket (bitmaps instead of slots, keys in place instead of in
//! records, in-place values that need the old segment frozen by the lock), and keeping
//! `index.rs`'s hot paths free of a cell/slot abstraction was a goal. The directory, the
//! segment locking, the spares and the directory doubling are shared (`index.rs`).

use crate::deadline::Wait;
use crate::error::{Error, Result};
use crate::format::*;
use crate::index::{self, MapRef, STAGE};
use crate::mem::fence;
use crate::shared::Shared;
use crate::txn::{Redo, Txn};
use std::sync::atomic::Ordering::*;
use std::time::Duration;

/// Bit `j` set for each byte `j` of `w` equal to `tag` (a byte value).
///
/// The exact zero-byte test on `w ^ tag…` (no false positive from a borrow, unlike
/// `(x - 0x01…) & !x & 0x80…`), then one multiply gathers the eight 0x80 flags: bit `8j`
/// times `2^(7 + 7(7 - j))` lands on bit `56 + j`, and no two products share a bit, so
/// nothing carries.
#[inline(always)]
fn byte_matches(w: u64, tag: u64) -> u64 {
    const LOW7: u64 = 0x7f7f_7f7f_7f7f_7f7f;
    let x = w ^ tag.wrapping_mul(0x0101_0101_0101_0101);
    let zero = !(((x & LOW7) + LOW7) | x | LOW7);
    (zero >> 7).wrapping_mul(0x0102_0408_1020_4080) >> 56
}

/// What a handle knows about a fixed-size map.
#[derive(Clone, Copy, Debug)]
pub(crate) struct FixedRef {
    /// The shared part: id, header, bucket counts, segment size, catalog word, timeout.
    pub m: MapRef,
    pub geo: Geo,
}

/// Outcome of one optimistic attempt.
enum Attempt<T> {
    Done(T),
    Retry,
}

/// What a write decides, seeing the current value (its offset) under the lock.
pub(crate) enum Act<'a> {
    Keep,
    Put(&'a [u8]),
    /// Put an 8-byte value given as a little-endian word.
    PutWord(u64),
    Remove,
}

/// Whether map `id` (a live catalog entry) is a fixed-size map.
pub(crate) fn is_fixed(sh: &Shared, id: u64) -> bool {
    if id >= sh.g.n_catalog {
        return false;
    }
    let hdr = sh.w(sh.g.cat_entry(id) + C_HDR).load(Acquire);
    // `hdr` comes from the file: no overflow, and word-aligned.
    sh.g.map_header_fits(hdr, sh.file_end()) && sh.w(hdr + M_FLAGS).load(Acquire) & MF_FIXED != 0
}

/// A FixedRef read straight from the catalog (open, recovery, checks, drops).
pub(crate) fn fixed_ref_unchecked(sh: &Shared, id: u64) -> Result<FixedRef> {
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
    let flags = sh.w(hdr + M_FLAGS).load(Acquire);
    if flags & MF_FIXED == 0 {
        return Err(Error::InvalidArgument(format!(
            "map {id} is a variable-size map, not a fixed-size one"
        )));
    }
    let groups = flags & MF_GROUPS != 0;
    let tags = flags & MF_TAGS != 0;
    if flags & !(MF_FIXED | MF_GROUPS | MF_TAGS) != 0 || (tags && !groups) {
        return Err(sh.corrupt(format!("map {id}: unknown map flags {flags:#x}")));
    }
    if groups && !sh.g.fixed_groups {
        return Err(sh.corrupt(format!(
            "map {id}: flag GROUPS in a store without FIXED_GROUPS (it came with version 7)"
        )));
    }
    if tags && !sh.g.fixed_tags {
        return Err(sh.corrupt(format!(
            "map {id}: flag TAGS in a store without FIXED_TAGS (it came with version 8)"
        )));
    }
    let ks = sh.w(hdr + M_KEY_SIZE).load(Acquire);
    let vs = sh.w(hdr + M_VALUE_SIZE).load(Acquire);
    let n_main = sh.w(hdr + M_N_MAIN).load(Acquire);
    let n_stash = sh.w(hdr + M_N_STASH).load(Acquire);
    if !(1..=MAX_KEY_SIZE).contains(&ks)
        || vs > MAX_VALUE_SIZE
        || !(1..=4096).contains(&n_main)
        || !(1..=1024).contains(&n_stash)
    {
        return Err(sh.corrupt(format!(
            "map {id}: bad fixed geometry (key {ks}, value {vs}, {n_main}+{n_stash} buckets)"
        )));
    }
    let geo = Geo::new(ks, vs, groups, tags);
    // The flag and the geometry must agree: a map created with tags has room for them,
    // and one created in a store with tags has them wherever there is room.
    if geo.tags != tags || (groups && sh.g.fixed_tags && Geo::new(ks, vs, true, true).tags != tags)
    {
        return Err(sh.corrupt(format!(
            "map {id}: flag TAGS {} for a {ks}+{vs} map, whose buckets {} room for tags",
            if tags { "set" } else { "clear" },
            if Geo::new(ks, vs, true, true).tags {
                "have"
            } else {
                "have no"
            }
        )));
    }
    Ok(FixedRef {
        m: MapRef {
            id,
            hdr,
            n_main,
            n_stash,
            seg_size: fixed_segment_size(geo.bsize, n_main, n_stash),
            cat_word,
            timeout: sh.lock_timeout,
            vtrail: 0,
            groups,
        },
        geo,
    })
}

/// Space the first chunk of a new fixed map needs.
pub(crate) fn first_chunk_need(sh: &Shared, geo: &Geo, n_main: u64, n_stash: u64) -> u64 {
    CHUNK_HDR
        + map_header_size(sh.g.n_txn)
        + BUCKET
        + fixed_segment_size(geo.bsize, n_main, n_stash)
}

/// Creates a new fixed map's index in its first chunk `c` (taken by the caller).
pub(crate) fn init_map(
    sh: &Shared,
    c: u64,
    id: u64,
    geo: Geo,
    n_main: u64,
    n_stash: u64,
) -> FixedRef {
    let hdr = c + CHUNK_HDR;
    let hsize = map_header_size(sh.g.n_txn);
    let mut o = hdr;
    while o < hdr + hsize {
        sh.w(o).store(0, Relaxed);
        o += 8;
    }
    let dir = hdr + hsize;
    let seg = dir + BUCKET;
    let f = FixedRef {
        m: MapRef {
            id,
            hdr,
            n_main,
            n_stash,
            seg_size: fixed_segment_size(geo.bsize, n_main, n_stash),
            cat_word: 0,
            timeout: sh.lock_timeout,
            vtrail: 0,
            groups: sh.g.fixed_groups,
        },
        geo,
    };
    index::init_segment(sh, &f.m, seg, 0, 0, 0);
    if f.m.groups {
        sh.w(seg + S_MARK).store(group_segment_mark(id), Relaxed);
        // The first segment holds the directory's one group; the map has one segment.
        sh.w(seg + S_GROUPS).store(group_count(1, 0), Relaxed);
        sh.w(hdr + M_N_SEGS).store(1, Relaxed);
    }
    sh.w(dir).store(dir_entry(seg, 0), Relaxed);
    sh.w(hdr + M_N_MAIN).store(n_main, Relaxed);
    sh.w(hdr + M_N_STASH).store(n_stash, Relaxed);
    let flags = match (f.m.groups, geo.tags) {
        (true, true) => MF_FIXED | MF_GROUPS | MF_TAGS,
        (true, false) => MF_FIXED | MF_GROUPS,
        _ => MF_FIXED,
    };
    sh.w(hdr + M_FLAGS).store(flags, Relaxed);
    sh.w(hdr + M_KEY_SIZE).store(geo.key_size, Relaxed);
    sh.w(hdr + M_VALUE_SIZE).store(geo.value_size, Relaxed);
    sh.w(hdr + M_CHAIN).store(c, Relaxed);
    sh.w(hdr + M_ARENA).store(c, Relaxed);
    sh.w(hdr + M_ARENA_BUMP).store(seg + f.m.seg_size, Relaxed);
    sh.w(hdr + M_ROOT).store(make_root(dir, 0), Release);
    f
}

/// A cell found under the lock: bucket index and cell index.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Cell {
    pub b: u64,
    pub i: u64,
}

impl FixedRef {
    #[inline]
    pub fn bucket(&self, seg: u64, b: u64) -> u64 {
        seg + SEG_HDR + b * self.geo.bsize
    }
    #[inline]
    pub fn cell_off(&self, bo: u64, i: u64) -> u64 {
        bo + self.geo.cells_at + i * self.geo.cell
    }
    /// Writes the tag of a key with hash `h` as cell `i`'s of bucket `bo` (tagged maps;
    /// nothing otherwise). Writers call it before the cell's bit is set: a lookup skips
    /// a cell whose tag differs, so a set bit with a stale tag would hide its key.
    #[inline]
    fn set_tag(&self, sh: &Shared, bo: u64, i: u64, h: u64) {
        if self.geo.tags {
            sh.r.write_bytes(bo + 8 + i, &[cell_tag(h) as u8]);
        }
    }
    /// The cells of bucket `bo` whose tag is the one of hash `h`, as a bitmap (every
    /// cell in a map without tags). A hint, loaded like the cells (relaxed words,
    /// validated by the bucket's seq afterwards).
    #[inline(always)]
    fn tag_hits(&self, sh: &Shared, bo: u64, h: u64) -> u64 {
        if !self.geo.tags {
            return u64::MAX;
        }
        let mut hits = 0;
        let mut k = 0;
        while k < self.geo.cells {
            hits |= byte_matches(sh.w(bo + 8 + k).load(Relaxed), cell_tag(h)) << k;
            k += 8;
        }
        hits
    }
    /// Neighbour buckets a key may take (fewer when the segment has fewer main buckets).
    #[inline]
    fn n_neigh(&self) -> u64 {
        NEIGHBOURS.min(self.m.n_main - 1)
    }
    /// Buckets other than its home a key may live in.
    #[inline]
    fn n_alt(&self) -> u64 {
        self.n_neigh() + self.m.n_stash
    }
    /// The `j`-th alternative to home bucket `home`: its neighbours `home + 1..` (modulo the
    /// main buckets), then the stash buckets, from `first` on.
    #[inline]
    fn alt(&self, home: u64, j: u64, first: u64) -> u64 {
        let nn = self.n_neigh();
        if j < nn {
            (home + 1 + j) % self.m.n_main
        } else {
            self.m.n_main + (first + j - nn) % self.m.n_stash
        }
    }
    /// Whether bucket `b` may hold a key whose home is `home`.
    fn may_hold(&self, home: u64, b: u64) -> bool {
        b == home
            || b >= self.m.n_main
            || (b + self.m.n_main - home) % self.m.n_main <= self.n_neigh()
    }
    #[inline]
    fn all_bits(&self) -> u64 {
        (1u64 << self.geo.cells) - 1
    }
    fn counter(&self, tx: &Txn, field: u64) -> u64 {
        self.m.hdr + M_COUNTERS + MC_SIZE * tx.idx + field
    }

    /// The cell of `key` (hash `h`) in bucket `bo` whose header word is `hw`, if any
    /// (optimistic: the caller validates `hw` afterwards).
    #[inline(always)]
    fn find_in(&self, sh: &Shared, bo: u64, hw: u64, h: u64, key: &[u8]) -> Option<u64> {
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
    fn read_general<T>(
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
    fn read_fast<T>(
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
    fn read_alternatives<T>(
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
    fn read_retrying<T>(
        &self,
        sh: &Shared,
        h: u64,
        key: &[u8],
        f: &mut impl FnMut(u64) -> T,
    ) -> Result<Option<T>> {
        let wait = Wait::begin(self.m.timeout, self.m.timeout);
        let mut tries = 0u32;
        loop {
            tries += 1;
            self.backoff(sh, h, tries, &wait)?;
            if let Attempt::Done(r) = self.read_once(sh, h, key, f)? {
                return Ok(r);
            }
        }
    }

    #[inline(always)]
    fn read_once<T>(
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

    /// Between optimistic retries (as `MapRef::backoff`): spin, yield, sleep; after 10 ms
    /// recover a dead writer of the segment; give up at the timeout.
    #[cold]
    fn backoff(&self, sh: &Shared, h: u64, tries: u32, wait: &Wait) -> Result<()> {
        if tries < 16 {
            std::hint::spin_loop();
            return Ok(());
        }
        if tries < 64 {
            crate::rt::yield_now();
            return Ok(());
        }
        if !self.m.alive(sh) {
            return Err(self.m.dropped());
        }
        let expired = wait.expired();
        // The deadline is checked here too, not only with the writer's liveness every
        // 10 ms: a deadline below that (zero: "only if not busy now") gives up after the
        // spins and yields.
        if wait.waited() > Duration::from_millis(10) || expired {
            let (_, _, e) = self.m.locate(sh, h, sh.file_end())?;
            let lockw = sh.w(entry_seg(e) + S_LOCK).load(Acquire) & (WAITERS - 1);
            if lockw != 0 && !sh.txn_alive(lockw - 1) {
                if !sh.read_only {
                    crate::txn::recover_txn(sh, lockw - 1)?;
                } else if expired {
                    return Err(index::dead_writer_error(sh));
                }
            }
            if expired {
                return Err(wait.timeout());
            }
        }
        crate::rt::sleep(Duration::from_micros(50));
        Ok(())
    }

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
            let seg = entry_seg(e);
            let bo = self.bucket(seg, home_bucket(h, self.m.n_main));
            let mut o = bo;
            while o < bo + self.geo.bsize {
                sh.r.prefetch(o);
                o += 64;
            }
            sh.r.prefetch(seg + S_LOCK);
        }
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
    fn preferred_lines(&self, h: u64) -> (u64, u64) {
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
    fn pick_cell(&self, h: u64, free: u64) -> u64 {
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
    fn prefetch_alternatives(&self, sh: &Shared, seg: u64, home: u64) {
        for j in 0..self.n_alt() {
            sh.r.prefetch(self.bucket(seg, self.alt(home, j, 0)));
        }
    }

    /// Under the segment lock: the cell holding `key`.
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
    fn free_cell(&self, sh: &Shared, seg: u64, h: u64) -> Option<Cell> {
        self.free_cell_except(sh, seg, h, u64::MAX)
    }

    /// [`FixedRef::free_cell`] outside bucket `except`.
    fn free_cell_except(&self, sh: &Shared, seg: u64, h: u64, except: u64) -> Option<Cell> {
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
    fn displace(&self, tx: &Txn, seg: u64, home: u64) -> Result<bool> {
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

    fn write_locked<'v>(
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
fn value_redo(sh: &Shared, voff: u64, v: &[u8], redo: &mut Redo) {
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

/// Called by a writer that owns segment lock `seg + S_LOCK`: waits until no lock-free
/// adder is counted in it. A count nobody live announces (left by killed adders) is
/// cleared after 10 ms.
fn wait_adders(tx: &Txn, seg: u64, timeout: Duration) -> Result<()> {
    let sh = tx.sh;
    let lw = sh.w(seg + S_LOCK);
    if lw.load(Acquire) & LOCK_HIGH == 0 {
        return Ok(());
    }
    let wait = Wait::begin(timeout, timeout);
    let mut spins = 0u32;
    let mut next_check = Duration::from_millis(10);
    loop {
        let cur = lw.load(Acquire);
        if cur & LOCK_HIGH == 0 {
            return Ok(());
        }
        spins += 1;
        if spins < 64 {
            std::hint::spin_loop();
            continue;
        }
        // As for locks (txn.rs, `lock_slow`): the live adders every 10 ms, and the
        // deadline before every sleep, with the adders looked at first, since a count only
        // dead adders left must be cleared whatever the deadline (a zero one, the Python
        // binding's first try, used to sleep out the first 10 ms).
        let waited = wait.waited();
        let expired = wait.expired();
        if waited >= next_check || expired {
            next_check = waited + Duration::from_millis(10);
            let live = (0..sh.g.n_txn).any(|t| {
                t != tx.idx
                    && sh.w(sh.g.txn_slot(t) + T_ADDING).load(SeqCst) == seg
                    && sh.txn_alive(t)
            });
            if !live {
                // We own the lock, so no adder can count itself in meanwhile: the count
                // left is all stale.
                let _ = lw.compare_exchange(cur, cur & !LOCK_HIGH, AcqRel, Relaxed);
                continue;
            }
            if expired {
                return Err(wait.timeout());
            }
        }
        crate::rt::sleep(Duration::from_micros(20));
    }
}

/// The barrier of a drop (catalog lock held, map marked dropping): once every segment
/// lock has been taken and its adders drained, no writer or adder is left in the map.
pub(crate) fn drop_barrier(tx: &Txn, f: &FixedRef) -> Result<()> {
    for (seg, _) in index::segments(tx.sh, &f.m)? {
        tx.lock(seg + S_LOCK)?;
        let r = wait_adders(tx, seg, f.m.timeout);
        tx.unlock(seg + S_LOCK);
        r?;
    }
    Ok(())
}

/// Split arguments (as in index.rs).
const A_MAP: usize = 0;
const A_SEG: usize = 1;
const A_NEW: usize = 2;
const A_DEPTH: usize = 3;
const A_PHASE: usize = 4;

/// Splits full segment `seg` (locked by the caller, adders drained).
fn split(tx: &Txn, f: &FixedRef, seg: u64) -> Result<()> {
    let sh = tx.sh;
    let d = sh.w(seg + S_DEPTH).load(Acquire);
    if d >= MAX_DEPTH {
        return Err(Error::StoreFull(format!(
            "map {}: segment at depth {d} is full; keys collide on {MAX_DEPTH} hash bits",
            f.m.id
        )));
    }
    let dir_lock = f.m.hdr + M_DIR_LOCK;
    tx.lock(dir_lock)?;
    let r = split_locked(tx, f, seg, d);
    tx.unlock(dir_lock);
    r
}

fn split_locked(tx: &Txn, f: &FixedRef, seg: u64, d: u64) -> Result<()> {
    let sh = tx.sh;
    let m = &f.m;
    let root = sh.w(m.hdr + M_ROOT).load(Acquire);
    if d == root >> 48 {
        index::double_directory(tx, m, root)?;
    }
    index::ensure_spares(tx, m, None)?;
    let s1 = index::spare_segment(sh, m, seg)?;
    let prefix = sh.w(seg + S_PREFIX).load(Acquire);
    let me = tx.idx + 1;
    tx.held_note(s1 + S_LOCK)?;
    let r = (|| -> Result<()> {
        let mut args = [0u64; T_NARGS as usize];
        args[A_MAP] = m.id;
        args[A_SEG] = seg;
        args[A_NEW] = s1;
        args[A_DEPTH] = d;
        args[A_PHASE] = 0;
        tx.commit(I_FSPLIT, &args, &Redo::new());
        index::init_segment(sh, m, s1, me, d + 1, prefix | (1 << d));
        // The new segment takes the cells whose hash bit d is 1, at the same positions
        // (so it cannot overflow). The old segment cannot change meanwhile: we hold its
        // lock and no adder is counted in it.
        copy_cells_where(
            sh,
            f,
            seg,
            s1,
            || {
                crate::rt::failpoint!("fixed.split.building");
            },
            |kh| (kh >> d) & 1 == 1,
            true,
        );
        sh.persist(s1, m.seg_size)?;
        crate::rt::failpoint!("fixed.split.built");
        tx.set_arg(A_PHASE as u64, 1);
        finish_split(sh, f, seg, s1, d)?;
        crate::rt::failpoint!("fixed.split.done");
        let so = m.hdr + M_COUNTERS + MC_SIZE * tx.idx + MC_SPLITS;
        sh.w(so).store(sh.w(so).load(Relaxed) + 1, Relaxed);
        Ok(())
    })();
    tx.done();
    sh.w(s1 + S_LOCK).fetch_and(LOCK_HIGH, Release);
    tx.held_forget(s1 + S_LOCK);
    r
}

/// The split's second half, idempotent (a recoverer runs it again): repoint the
/// directory, set depths, clear the moved cells' bits in the old segment, recount its
/// overflow counts.
fn finish_split(sh: &Shared, f: &FixedRef, seg: u64, s1: u64, d: u64) -> Result<()> {
    let m = &f.m;
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
    sh.persist(dir, 8 << g)?;
    sh.persist(m.hdr, 8)?;
    sh.persist(seg, BUCKET)?;
    sh.persist(s1, BUCKET)?;
    crate::rt::failpoint!("fixed.split.published");
    clear_cells_where(
        sh,
        f,
        seg,
        || {
            crate::rt::failpoint!("fixed.split.removing");
        },
        |kh| (kh >> d) & 1 == 1,
    );
    Ok(())
}

/// Sets the main buckets' overflow counts (bumping the seq of each bucket it changes).
fn set_overflow_counts(sh: &Shared, f: &FixedRef, seg: u64, counts: &[u64]) {
    for (b, c) in counts.iter().enumerate() {
        let bo = f.bucket(seg, b as u64);
        let h0 = sh.w(bo).load(Acquire);
        let c = (*c).min(0xff);
        if fh_over(h0) != c || fh_seq(h0) & 1 == 1 {
            let seq = fh_seq(h0) | 1;
            sh.w(bo).store(fh(seq, fh_over(h0), fh_bits(h0)), Relaxed);
            sh.w(bo).store(fh(seq + 1, c, fh_bits(h0)), Release);
        }
    }
}

/// The overflow counts a segment's cells imply (keys outside their home bucket).
fn overflow_counts(sh: &Shared, f: &FixedRef, seg: u64) -> Vec<u64> {
    let mut counts = vec![0u64; f.m.n_main as usize];
    let mut key = vec![0u8; f.geo.key_size as usize];
    for b in 0..f.m.n_main + f.m.n_stash {
        let bo = f.bucket(seg, b);
        let mut bits = fh_bits(sh.w(bo).load(Acquire)) & f.all_bits();
        while bits != 0 {
            let i = bits.trailing_zeros() as u64;
            bits &= bits - 1;
            sh.r.read_bytes(f.cell_off(bo, i), &mut key);
            let home = home_bucket(hash(sh.g.seed, &key), f.m.n_main);
            if home != b {
                counts[home as usize] += 1;
            }
        }
    }
    counts
}

/// Recovery of a fixed map's split whose thread died (its locks still name it).
pub(crate) fn recover_split(sh: &Shared, intent: &crate::shared::Intent) -> Result<()> {
    let args = &intent.args;
    let f = fixed_ref_unchecked(sh, args[A_MAP])?;
    if f.m.groups {
        return Err(sh.corrupt(format!(
            "map {}: a dead txn's split intent in a map that grows by moves",
            f.m.id
        )));
    }
    if args[A_PHASE] == 0 {
        return Ok(()); // the new segment is still the map's spare; nothing else changed
    }
    index::check_split_args(sh, &f.m, args)?;
    finish_split(sh, &f, args[A_SEG], args[A_NEW], args[A_DEPTH])
}

// ---------------------------------------------------------------------------------------
// Growth by moving groups (maps with MF_GROUPS; see DESIGN.md, "How fixed maps grow").

/// The directory is doubled when it has fewer entries than this per segment, so that a
/// full segment always has groups to give and each holds a small share of it (~1/8 to
/// 1/16: a move copies that share, and leaves the segment that much room).
const MIN_GROUPS_PER_SEGMENT: u64 = 8;

/// A segment's [`S_GROUPS`] word: `n` entries of a directory of depth `g`.
pub(crate) fn group_count(n: u64, g: u64) -> u64 {
    n | g << 48
}

/// How many entries of a directory of depth `g` name `seg`, from its [`S_GROUPS`] word;
/// None if the word cannot be one (it comes from the file).
fn groups_of(sh: &Shared, seg: u64, g: u64) -> Option<u64> {
    let w = sh.w(seg + S_GROUPS).load(Acquire);
    let (n, tg) = (w & OFF_MASK, w >> 48);
    if n == 0 || tg > g || g > MAX_DEPTH || n > (1u64 << tg) {
        return None;
    }
    Some(n << (g - tg))
}

/// Move arguments, stored in the txn slot's intent (kind `I_FMOVE`).
const V_MAP: usize = 0;
const V_SRC: usize = 1;
const V_DST: usize = 2;
const V_GROUP: usize = 3;
/// Bit 0: the phase (1 once the destination holds the group's cells); bit 1: the
/// destination is the map's spare segment, new to the map.
const V_PHASE: usize = 4;
const V_DEPTH: usize = 5;

/// Makes room in full segment `seg` (locked by the caller, adders drained) for the key
/// of hash `h`: moves the key's group (its directory entry, with every key of it) to the
/// map's open segment, or to a new segment that becomes the open one. The directory is
/// doubled first when `seg` is named by one entry only, or the map has fewer than
/// [`MIN_GROUPS_PER_SEGMENT`] entries per segment.
fn move_group(tx: &Txn, f: &FixedRef, seg: u64, h: u64) -> Result<()> {
    let dir_lock = f.m.hdr + M_DIR_LOCK;
    tx.lock(dir_lock)?;
    let r = move_locked(tx, f, seg, h);
    tx.unlock(dir_lock);
    r
}

fn move_locked(tx: &Txn, f: &FixedRef, seg: u64, h: u64) -> Result<()> {
    let sh = tx.sh;
    let m = &f.m;
    let root = sh.w(m.hdr + M_ROOT).load(Acquire);
    let g = root >> 48;
    let nsegs = sh.w(m.hdr + M_N_SEGS).load(Acquire);
    if sh.w(seg + S_MARK).load(Acquire) != group_segment_mark(m.id) {
        return Err(m.bad(
            sh,
            format!(
                "map {}: segment {seg:#x} has not the map's segment mark",
                m.id
            ),
        ));
    }
    let owned = groups_of(sh, seg, g);
    let (Some(owned), true) = (owned, nsegs >= 1 && g <= MAX_DEPTH && nsegs <= 1 << g) else {
        return Err(m.bad(
            sh,
            format!(
                "map {}: segment {seg:#x} group count {:#x} or segment count {nsegs} \
                 does not fit a directory of depth {g}",
                m.id,
                sh.w(seg + S_GROUPS).load(Acquire)
            ),
        ));
    };
    let root = if (owned < 2 || 1u64 << g < MIN_GROUPS_PER_SEGMENT * nsegs) && g < MAX_DEPTH {
        index::double_directory(tx, m, root)?;
        sh.w(m.hdr + M_ROOT).load(Acquire)
    } else {
        root
    };
    let g = root >> 48;
    if groups_of(sh, seg, g).unwrap_or(0) < 2 {
        return Err(Error::StoreFull(format!(
            "map {}: segment {seg:#x} is full with the keys of one group of {MAX_DEPTH} hash bits",
            m.id
        )));
    }
    let j = h & ((1u64 << g) - 1);
    let dir = root & OFF_MASK;
    if entry_seg(sh.w(dir + 8 * j).load(Acquire)) != seg {
        return Err(m.bad(
            sh,
            format!(
                "map {}: directory entry {j} does not name locked segment {seg:#x}",
                m.id
            ),
        ));
    }
    // The open segment, if nobody holds it right now (waiting could deadlock: its
    // holder may be waiting for the directory lock, to move a group of its own).
    let open = sh.w(m.hdr + M_OPEN_SEG).load(Acquire);
    if open != 0 && open != seg {
        let fits = open >= sh.g.chunks_off
            && open % BUCKET == 0
            && open
                .checked_add(m.seg_size)
                .is_some_and(|e| e <= sh.file_end())
            && (open + m.seg_size <= seg || seg + m.seg_size <= open)
            && sh.w(open + S_MARK).load(Acquire) == group_segment_mark(m.id);
        if !fits {
            return Err(m.bad(
                sh,
                format!(
                    "map {}: open segment {open:#x} is not a segment of the map in the file",
                    m.id
                ),
            ));
        }
        if tx.try_lock(open + S_LOCK) {
            let r =
                wait_adders(tx, open, m.timeout).and_then(|_| move_to(tx, f, seg, open, j, false));
            tx.unlock(open + S_LOCK);
            if r? {
                return Ok(());
            }
        }
    }
    index::ensure_spares(tx, m, None)?;
    let s1 = index::spare_segment(sh, m, seg)?;
    tx.held_note(s1 + S_LOCK)?;
    index::init_segment(sh, m, s1, tx.idx + 1, 0, group_segment_mark(m.id));
    let r = move_to(tx, f, seg, s1, j, true);
    tx.unlock(s1 + S_LOCK);
    if !r? {
        return Err(sh.corrupt(format!(
            "map {}: group {j} of segment {seg:#x} does not fit an empty segment",
            m.id
        )));
    }
    Ok(())
}

/// Moves group `j` of `src` into `dst` (both locked, adders drained; the directory lock
/// held). Returns false, having changed nothing, if `dst` has no room for it. `fresh`:
/// `dst` is the map's spare segment, just initialised, which becomes the open segment.
fn move_to(tx: &Txn, f: &FixedRef, src: u64, dst: u64, j: u64, fresh: bool) -> Result<bool> {
    let sh = tx.sh;
    let m = &f.m;
    let root = sh.w(m.hdr + M_ROOT).load(Acquire);
    let (g, dir) = (root >> 48, root & OFF_MASK);
    let nsegs = sh.w(m.hdr + M_N_SEGS).load(Acquire);
    let src_n = groups_of(sh, src, g).unwrap_or(0);
    let dst_n = if fresh {
        0
    } else {
        groups_of(sh, dst, g).ok_or_else(|| {
            m.bad(
                sh,
                format!("map {}: open segment {dst:#x} has no group count", m.id),
            )
        })?
    };
    // What the move changes besides cells, applied at once when the copies are in place.
    let mut redo = Redo::new();
    redo.push(dir + 8 * j, dir_entry(dst, 0));
    redo.push(src + S_GROUPS, group_count(src_n - 1, g));
    redo.push(dst + S_GROUPS, group_count(dst_n + 1, g));
    if fresh {
        redo.push(m.hdr + M_OPEN_SEG, dst);
        redo.push(m.hdr + M_SPARE_SEG, 0);
        redo.push(m.hdr + M_N_SEGS, nsegs + 1);
    }
    let mut args = [0u64; T_NARGS as usize];
    args[V_MAP] = m.id;
    args[V_SRC] = src;
    args[V_DST] = dst;
    args[V_GROUP] = j;
    args[V_PHASE] = (fresh as u64) << 1;
    args[V_DEPTH] = g;
    tx.commit(I_FMOVE, &args, &redo);
    let r = (|| -> Result<bool> {
        let mask = (1u64 << g) - 1;
        let Some(moved) = copy_group(sh, f, src, dst, j, mask, fresh) else {
            remove_group(sh, f, dst, j, mask);
            return Ok(false);
        };
        sh.persist(dst, m.seg_size)?;
        crate::rt::failpoint!("fixed.move.copied");
        tx.set_arg(V_PHASE as u64, 1 | (fresh as u64) << 1);
        tx.apply(&redo);
        sh.persist(dir + 8 * j, 8)?;
        sh.persist(src, BUCKET)?;
        sh.persist(dst, BUCKET)?;
        sh.persist(m.hdr, BUCKET)?;
        crate::rt::failpoint!("fixed.move.published");
        remove_cells(sh, f, src, &moved);
        crate::rt::failpoint!("fixed.move.done");
        let so = m.hdr + M_COUNTERS + MC_SIZE * tx.idx + MC_SPLITS;
        sh.w(so).store(sh.w(so).load(Relaxed) + 1, Relaxed);
        Ok(true)
    })();
    tx.done();
    r
}

/// A cell of a group being moved, in its source segment: bucket, cell, home bucket.
type Moved = (u64, u64, u64);

/// Copies the cells of group `j` (hash & `mask` == `j`) of `src` into free cells of
/// `dst`, and sets their bits there (readers find them only once the directory names
/// `dst`); returns where they were in `src`. See [`copy_cells_where`].
fn copy_group(
    sh: &Shared,
    f: &FixedRef,
    src: u64,
    dst: u64,
    j: u64,
    mask: u64,
    fresh: bool,
) -> Option<Vec<Moved>> {
    copy_cells_where(
        sh,
        f,
        src,
        dst,
        || {
            crate::rt::failpoint!("fixed.move.copying");
        },
        |kh| kh & mask == j,
        fresh,
    )
}

/// Copies the cells of `src` whose key's hash `take` selects into `dst` and sets their
/// bits and overflow counts there; returns where they were in `src`. Into a `fresh`
/// (empty) segment they go to the positions they had, which always fits (a split's new
/// half, a move's new segment); otherwise each is placed as an insert would be, each
/// bucket word changed through an odd seq, and None is returned (with some of them
/// copied: the caller removes them) when one finds no room. `halfway` runs at the middle
/// bucket (a fail point).
fn copy_cells_where(
    sh: &Shared,
    f: &FixedRef,
    src: u64,
    dst: u64,
    halfway: impl Fn(),
    take: impl Fn(u64) -> bool,
    fresh: bool,
) -> Option<Vec<Moved>> {
    let mut moved = Vec::new();
    let m = &f.m;
    let nb = m.n_main + m.n_stash;
    let mut over = vec![0u64; m.n_main as usize];
    let mut bits_new = vec![0u64; nb as usize];
    let mut key = vec![0u8; f.geo.key_size as usize];
    let mut cell = vec![0u8; f.geo.cell as usize];
    for b in 0..nb {
        if b == nb / 2 {
            halfway();
        }
        let bo = f.bucket(src, b);
        let mut bits = fh_bits(sh.w(bo).load(Acquire)) & f.all_bits();
        while bits != 0 {
            let i = bits.trailing_zeros() as u64;
            bits &= bits - 1;
            let co = f.cell_off(bo, i);
            sh.r.read_bytes(co, &mut key);
            let kh = hash(sh.g.seed, &key);
            if !take(kh) {
                continue;
            }
            sh.r.read_bytes(co, &mut cell);
            let home = home_bucket(kh, m.n_main);
            moved.push((b, i, home));
            if fresh {
                f.set_tag(sh, f.bucket(dst, b), i, kh);
                sh.r.write_bytes(f.cell_off(f.bucket(dst, b), i), &cell);
                bits_new[b as usize] |= 1 << i;
                if b != home {
                    over[home as usize] += 1;
                }
                continue;
            }
            let c = f.free_cell(sh, dst, kh)?;
            let to = f.bucket(dst, c.b);
            f.set_tag(sh, to, c.i, kh);
            sh.r.write_bytes(f.cell_off(to, c.i), &cell);
            bump(sh, to, 0, 1 << c.i);
            if c.b != home {
                bump(sh, f.bucket(dst, home), 1, 0);
            }
        }
    }
    if fresh {
        for b in 0..nb {
            let ov = if b < m.n_main { over[b as usize] } else { 0 };
            let bn = bits_new[b as usize];
            if ov > 0 || bn != 0 {
                sh.w(f.bucket(dst, b)).store(fh(0, ov, bn), Relaxed);
            }
        }
    }
    Some(moved)
}

/// Clears the cells `moved` of `seg` and takes them out of their home buckets' overflow
/// counts: [`remove_group`] without hashing every key again, for the live move, which
/// knows them (recovery does not, and runs `remove_group`).
fn remove_cells(sh: &Shared, f: &FixedRef, seg: u64, moved: &[Moved]) {
    let nb = (f.m.n_main + f.m.n_stash) as usize;
    let mut clear = vec![0u64; nb];
    let mut less = vec![0u64; nb];
    for &(b, i, home) in moved {
        clear[b as usize] |= 1 << i;
        if b != home {
            less[home as usize] += 1;
        }
    }
    for b in 0..nb {
        if b == nb / 2 {
            crate::rt::failpoint!("fixed.move.removing");
        }
        if clear[b] == 0 && less[b] == 0 {
            continue;
        }
        let bo = f.bucket(seg, b as u64);
        let h0 = sh.w(bo).load(Acquire);
        let seq = fh_seq(h0) | 1;
        sh.w(bo).store(fh(seq, fh_over(h0), fh_bits(h0)), Relaxed);
        fence(Release);
        sh.w(bo).store(
            fh(
                seq + 1,
                fh_over(h0).saturating_sub(less[b]),
                fh_bits(h0) & !clear[b],
            ),
            Release,
        );
    }
}

/// Changes bucket word `bo` (adds `over_delta` to its overflow count, sets `bits`),
/// through an odd seq, as every change readers may see.
fn bump(sh: &Shared, bo: u64, over_delta: u64, bits: u64) {
    let h0 = sh.w(bo).load(Acquire);
    let seq = fh_seq(h0) | 1;
    sh.w(bo).store(fh(seq, fh_over(h0), fh_bits(h0)), Relaxed);
    fence(Release);
    sh.w(bo).store(
        fh(
            seq + 1,
            (fh_over(h0) + over_delta).min(0xff),
            fh_bits(h0) | bits,
        ),
        Release,
    );
}

/// Clears the bits of every cell of group `j` in `seg` and recounts its overflow counts
/// from the cells left; makes odd seqs even. Idempotent (recovery runs it again).
fn remove_group(sh: &Shared, f: &FixedRef, seg: u64, j: u64, mask: u64) {
    clear_cells_where(
        sh,
        f,
        seg,
        || {
            crate::rt::failpoint!("fixed.move.removing");
        },
        |kh| kh & mask == j,
    );
}

/// Clears the bits of the cells of `seg` whose key's hash `gone` selects and recounts the
/// overflow counts from the cells left, each changed bucket word through an odd seq;
/// makes odd seqs even. Idempotent. `halfway` runs at the middle bucket (a fail point).
/// The second half of a split, and of a move when its cells are not known (recovery).
fn clear_cells_where(
    sh: &Shared,
    f: &FixedRef,
    seg: u64,
    halfway: impl Fn(),
    gone: impl Fn(u64) -> bool,
) {
    let m = &f.m;
    let nb = m.n_main + m.n_stash;
    let mut key = vec![0u8; f.geo.key_size as usize];
    let mut counts = vec![0u64; m.n_main as usize];
    for b in 0..nb {
        if b == nb / 2 {
            halfway();
        }
        let bo = f.bucket(seg, b);
        let h0 = sh.w(bo).load(Acquire);
        let mut bits = fh_bits(h0) & f.all_bits();
        let mut moved = 0u64;
        while bits != 0 {
            let i = bits.trailing_zeros() as u64;
            bits &= bits - 1;
            sh.r.read_bytes(f.cell_off(bo, i), &mut key);
            let kh = hash(sh.g.seed, &key);
            let home = home_bucket(kh, m.n_main);
            if gone(kh) {
                moved |= 1 << i;
            } else if b != home {
                counts[home as usize] += 1;
            }
        }
        if moved != 0 || fh_seq(h0) & 1 == 1 || fh_bits(h0) & !f.all_bits() != 0 {
            let seq = fh_seq(h0) | 1;
            sh.w(bo).store(fh(seq, fh_over(h0), fh_bits(h0)), Relaxed);
            sh.w(bo).store(
                fh(seq + 1, fh_over(h0), fh_bits(h0) & !moved & f.all_bits()),
                Release,
            );
        }
    }
    set_overflow_counts(sh, f, seg, &counts);
}

/// Repair of a map of groups: clears the cells of `seg` whose directory entry names
/// another segment. A move cut short by an OS crash may have left copies on either side
/// (pages reach the disk in any order between two flushes); the directory says which
/// copy is the key's.
fn drop_strays(sh: &Shared, f: &FixedRef, seg: u64, root: u64) {
    let (g, dir) = (root >> 48, root & OFF_MASK);
    let mut key = vec![0u8; f.geo.key_size as usize];
    for b in 0..f.m.n_main + f.m.n_stash {
        let bo = f.bucket(seg, b);
        let h0 = sh.w(bo).load(Acquire);
        let mut bits = fh_bits(h0) & f.all_bits();
        let mut stray = 0u64;
        while bits != 0 {
            let i = bits.trailing_zeros() as u64;
            bits &= bits - 1;
            sh.r.read_bytes(f.cell_off(bo, i), &mut key);
            let j = hash(sh.g.seed, &key) & ((1u64 << g) - 1);
            if entry_seg(sh.w(dir + 8 * j).load(Acquire)) != seg {
                stray |= 1 << i;
            }
        }
        if stray != 0 {
            sh.w(bo)
                .store(fh(fh_seq(h0), fh_over(h0), fh_bits(h0) & !stray), Release);
        }
    }
}

/// Recovery of a move whose thread died (its locks, the directory's included, still name
/// it, so nothing has changed since). Before phase 1 the move is undone: cells of the
/// group copied into an existing segment are removed again (a new segment is still the
/// spare). From phase 1 on it is finished: its redo list (`redo`, the txn slot's) is
/// applied again and the group removed from the source.
pub(crate) fn recover_move(sh: &Shared, intent: &crate::shared::Intent) -> Result<()> {
    let (args, redo) = (&intent.args, &intent.redo[..]);
    let f = fixed_ref_unchecked(sh, args[V_MAP])?;
    let m = &f.m;
    let (src, dst, j, ph, g) = (
        args[V_SRC],
        args[V_DST],
        args[V_GROUP],
        args[V_PHASE],
        args[V_DEPTH],
    );
    let end = sh.file_end();
    let root = sh.w(m.hdr + M_ROOT).load(Acquire);
    let dir = root & OFF_MASK;
    let seg_ok = |s: u64| {
        s >= sh.g.chunks_off
            && s % BUCKET == 0
            && s.checked_add(m.seg_size).is_some_and(|e| e <= end)
    };
    let dir_ok = g <= MAX_DEPTH
        && root >> 48 == g
        && dir >= sh.g.chunks_off
        && dir % 8 == 0
        && dir.checked_add(8 << g).is_some_and(|e| e <= end);
    if !(m.groups && dir_ok && j < 1 << g && seg_ok(src) && seg_ok(dst) && src != dst && ph < 4) {
        return Err(sh.corrupt(format!(
            "map {}: a dead txn's move intent (segment {src:#x} to {dst:#x}, group {j} of \
             depth {g}) does not fit its directory (root {root:#x}) or the file",
            m.id
        )));
    }
    let mask = (1u64 << g) - 1;
    if ph & 1 == 0 {
        if ph & 2 == 0 {
            remove_group(sh, &f, dst, j, mask);
        }
        return Ok(());
    }
    let targets = [
        dir + 8 * j,
        src + S_GROUPS,
        dst + S_GROUPS,
        m.hdr + M_OPEN_SEG,
        m.hdr + M_SPARE_SEG,
        m.hdr + M_N_SEGS,
    ];
    for &(at, val) in redo {
        if !targets.contains(&at) {
            return Err(sh.corrupt(format!(
                "map {}: a dead txn's move intent writes {at:#x}, not one of its words",
                m.id
            )));
        }
        sh.w(at).store(val, Release);
    }
    remove_group(sh, &f, src, j, mask);
    Ok(())
}

/// Removes every entry, one segment at a time.
pub(crate) fn clear(tx: &Txn, f: &FixedRef) -> Result<()> {
    let sh = tx.sh;
    let mut done = std::collections::HashSet::new();
    loop {
        if !f.m.alive(sh) {
            return Err(f.m.dropped());
        }
        let todo: Vec<u64> = index::segments(sh, &f.m)?
            .into_iter()
            .map(|(s, _)| s)
            .filter(|s| !done.contains(s))
            .collect();
        if todo.is_empty() {
            return Ok(());
        }
        for seg in todo {
            done.insert(seg);
            tx.lock(seg + S_LOCK)?;
            let r = wait_adders(tx, seg, f.m.timeout).and_then(|_| clear_segment(tx, f, seg));
            tx.unlock(seg + S_LOCK);
            r?;
        }
    }
}

fn clear_segment(tx: &Txn, f: &FixedRef, seg: u64) -> Result<()> {
    let sh = tx.sh;
    if !f.m.alive(sh) {
        return Err(f.m.dropped());
    }
    let cnt_off = f.counter(tx, MC_COUNT);
    for b in 0..f.m.n_main + f.m.n_stash {
        let bo = f.bucket(seg, b);
        let h0 = sh.w(bo).load(Acquire);
        let n = (fh_bits(h0) & f.all_bits()).count_ones() as u64;
        if n == 0 && fh_over(h0) == 0 {
            continue;
        }
        let mut redo = Redo::new();
        redo.push(bo, fh(fh_seq(h0) + 2, 0, 0));
        redo.push(cnt_off, sh.w(cnt_off).load(Relaxed).wrapping_sub(n));
        tx.commit(I_REDO, &[], &redo);
        sh.w(bo)
            .store(fh(fh_seq(h0) + 1, fh_over(h0), fh_bits(h0)), Relaxed);
        tx.apply(&redo);
        tx.done();
    }
    Ok(())
}

/// Copies out the segment covering iteration position `cursor` (bit-reversed hash
/// order, as `index::snapshot`) and returns the next position. As there, what is still
/// wrong under the segment's lock (a bucket left mid-write) is damage: skipped, and said
/// in the step (`map` names the map), so that the iteration reports it and goes on.
pub(crate) fn snapshot(
    sh: &std::sync::Arc<Shared>,
    f: &FixedRef,
    map: &str,
    cursor: u64,
) -> Result<index::Step> {
    for attempt in 0..16 {
        if let Some(r) = snapshot_once(sh, f, map, cursor, None)? {
            return Ok(r);
        }
        if attempt > 4 {
            crate::rt::yield_now();
        }
    }
    if sh.read_only {
        return index::read_only_retries(sh, &f.m, cursor, || {
            snapshot_once(sh, f, map, cursor, None)
        });
    }
    let t = crate::txn::thread_txn(sh)?;
    let tx = Txn::new(sh, t);
    let seg = f.lock_segment(&tx, cursor.reverse_bits())?;
    let r = snapshot_once(sh, f, map, cursor, Some(seg));
    tx.unlock(seg + S_LOCK);
    r?.ok_or_else(|| {
        f.m.bad(
            sh,
            format!("map {map:?}: the directory no longer names segment {seg:#x}, whose lock the iteration holds"),
        )
    })
}

fn snapshot_once(
    sh: &Shared,
    f: &FixedRef,
    map: &str,
    cursor: u64,
    locked: Option<u64>,
) -> Result<Option<index::Step>> {
    // Tests make every optimistic copy fail here, to reach the locked one.
    #[cfg(feature = "failpoints")]
    if locked.is_none() {
        fail::fail_point!("snapshot.optimistic", |_| Ok(None));
    }
    let m = &f.m;
    let end = sh.file_end();
    let (root, eoff, e) = m.locate(sh, cursor.reverse_bits(), end)?;
    let seg = entry_seg(e);
    if locked.is_some_and(|l| l != seg) {
        return Ok(None);
    }
    if locked.is_some() {
        crate::rt::failpoint!("snapshot.locked");
    }
    // A segment of a map of groups holds the keys of any set of directory entries: the
    // step is the cursor's entry alone (its keys are in `seg`, whatever else is).
    let d = if m.groups { root >> 48 } else { entry_depth(e) };
    if d > MAX_DEPTH {
        return Err(sh.corrupt(format!(
            "map {}: directory entry {eoff:#x} has depth {d}",
            m.id
        )));
    }
    let h = cursor.reverse_bits();
    let mut next = if d == 0 {
        None
    } else {
        let span = 1u64 << (64 - d);
        (cursor & !(span - 1)).checked_add(span)
    };
    if !m.groups && !index::segment_matches(sh, seg, d, h) {
        if locked.is_none() {
            return Ok(None); // a split publishing: entries first, then the depths
        }
        if !m.alive(sh) {
            return Err(m.dropped());
        }
        return Ok(Some(index::Step {
            items: Vec::new(),
            next,
            damage: Some((
                seg,
                format!(
                    "map {map:?}: segment {seg:#x} skipped: {}",
                    index::segment_mismatch(sh, m.id, seg, d, h)
                ),
            )),
        }));
    }
    // A map of groups: the step takes the following entries too while they name the same
    // segment (siblings of a doubling mostly do), so that a segment is copied about once
    // per run of its entries, not once per entry. They are validated with the first.
    let mut merged: Vec<u64> = Vec::new();
    if m.groups {
        if entry_depth(e) != 0 {
            return Err(sh.corrupt(format!(
                "map {}: directory entry {eoff:#x} has depth {} in a map of groups",
                m.id,
                entry_depth(e)
            )));
        }
        let dir = root & OFF_MASK;
        if d > 0 && dir.checked_add(8 << d).is_some_and(|x| x <= end) {
            let span = 1u64 << (64 - d);
            while let Some(n) = next {
                let o = dir + 8 * (n.reverse_bits() & ((1 << d) - 1));
                if sh.w(o).load(Acquire) != e {
                    break;
                }
                merged.push(o);
                next = n.checked_add(span);
            }
        }
    }
    let nb = m.n_main + m.n_stash;
    let mut hdrs = Vec::with_capacity(nb as usize);
    let mut items = Vec::new();
    let mut damaged: Vec<u64> = Vec::new();
    for b in 0..nb {
        let bo = f.bucket(seg, b);
        let h1 = sh.w(bo).load(Acquire);
        hdrs.push(h1);
        if fh_seq(h1) & 1 == 1 {
            if locked.is_none() {
                return Ok(None);
            }
            // Under the lock no writer can be in it (taking the lock recovered a dead
            // holder): a crash left it mid-write and nobody repaired it. Its cells may
            // be half written: skipped.
            damaged.push(bo);
            continue;
        }
        let mut bits = fh_bits(h1) & f.all_bits();
        while bits != 0 {
            let i = bits.trailing_zeros() as u64;
            bits &= bits - 1;
            let co = f.cell_off(bo, i);
            let mut key = vec![0u8; f.geo.key_size as usize];
            sh.r.read_bytes(co, &mut key);
            // Only keys of this step's interval (a split in flight may leave moved keys
            // in the old segment for a moment, the new one returns them; a segment of a
            // map of groups holds other entries' keys too).
            let pos = hash(sh.g.seed, &key).reverse_bits();
            if pos < cursor || next.is_some_and(|n| pos >= n) {
                continue;
            }
            let mut val = vec![0u8; f.geo.value_size as usize];
            sh.r.read_bytes(co + f.geo.kstride, &mut val);
            items.push((key, val));
        }
    }
    fence(Acquire);
    for b in 0..nb {
        if sh.w(f.bucket(seg, b)).load(Relaxed) != hdrs[b as usize] {
            return Ok(None);
        }
    }
    // Only optimistic copies check the directory: under the segment lock another
    // segment's split may double it, which is no interference (as in
    // `index::snapshot_once`; test `locked_iteration`).
    if locked.is_none()
        && (sh.w(eoff).load(Relaxed) != e
            || sh.w(m.hdr + M_ROOT).load(Relaxed) != root
            || merged.iter().any(|&o| sh.w(o).load(Relaxed) != e))
    {
        return Ok(None);
    }
    if !m.alive(sh) {
        return Err(m.dropped());
    }
    let damage = (!damaged.is_empty()).then(|| {
        let what = format!(
            "map {map:?}: segment {seg:#x}: {} bucket(s) left mid-write skipped (first {:#x})",
            damaged.len(),
            damaged[0]
        );
        (seg, what)
    });
    Ok(Some(index::Step {
        items,
        next,
        damage,
    }))
}

/// The salvage of a truncated file's fixed map (`salvage.rs`): calls `each(key, value)`
/// on every cell that lies wholly below `bound` (the file's real size), in a bucket whose
/// header survived, and that the directory leads its key to (cells elsewhere are
/// leftovers no read would find), each key once; `lost(what)` on what could not be read
/// (a directory entry or segment lost or damaged, cells cut by the bound). The directory
/// must lie below `bound` (checked by the caller). Reads nothing at or past `bound`.
pub(crate) fn salvage_cells(
    sh: &Shared,
    f: &FixedRef,
    bound: u64,
    mut each: impl FnMut(&[u8], &[u8]) -> Result<()>,
    mut lost: impl FnMut(String),
) -> Result<()> {
    let m = &f.m;
    let root = sh.w(m.hdr + M_ROOT).load(Acquire);
    let (gd, dir) = (root >> 48, root & OFF_MASK);
    let mut keys = std::collections::HashSet::new();
    let mut visited = std::collections::HashSet::new();
    let (mut key, mut value) = (
        vec![0u8; f.geo.key_size as usize],
        vec![0u8; f.geo.value_size as usize],
    );
    for j in 0..(1u64 << gd) {
        let e = sh.w(dir + 8 * j).load(Acquire);
        let (seg, d) = (entry_seg(e), entry_depth(e));
        if (m.groups && d != 0) || d > gd {
            lost(format!(
                "directory entry {j} is damaged (depth {d}): its keys are lost"
            ));
            continue;
        }
        if (m.groups && !visited.insert(seg)) || (!m.groups && j >= 1 << d) {
            continue;
        }
        if seg < sh.g.chunks_off || seg % BUCKET != 0 {
            lost(format!(
                "directory entry {j} names {seg:#x}, which is no segment: its keys are lost"
            ));
            continue;
        }
        if seg >= bound {
            lost(format!(
                "segment {seg:#x} lies in the missing part of the file: its entries are lost"
            ));
            continue;
        }
        if seg + m.seg_size > bound {
            lost(format!("segment {seg:#x} runs into the missing part of the file: the entries there are lost"));
        }
        let prefix = j & ((1 << d) - 1);
        for b in 0..m.n_main + m.n_stash {
            let bo = f.bucket(seg, b);
            if bo + 8 > bound {
                break;
            }
            let mut bits = fh_bits(sh.w(bo).load(Acquire)) & f.all_bits();
            while bits != 0 {
                let i = bits.trailing_zeros() as u64;
                bits &= bits - 1;
                let co = f.cell_off(bo, i);
                if co + f.geo.cell > bound {
                    lost(format!(
                        "cell {i} of bucket {bo:#x} runs into the missing part of the file"
                    ));
                    continue;
                }
                sh.r.read_bytes(co, &mut key);
                let h = hash(sh.g.seed, &key);
                let here = if m.groups {
                    entry_seg(sh.w(dir + 8 * (h & ((1 << gd) - 1))).load(Acquire)) == seg
                } else {
                    h & ((1 << d) - 1) == prefix
                };
                if here && keys.insert(key.clone()) {
                    sh.r.read_bytes(co + f.geo.kstride, &mut value);
                    each(&key, &value)?;
                }
            }
        }
    }
    Ok(())
}

/// The checker's part for one fixed map: returns (entries, segments) and pushes problems.
pub(crate) fn check_map(
    sh: &Shared,
    id: u64,
    in_index: &dyn Fn(u64, u64) -> bool,
    problems: &mut Vec<String>,
) -> (u64, u64) {
    let f = match fixed_ref_unchecked(sh, id) {
        Ok(f) => f,
        Err(e) => {
            problems.push(format!("map {id}: {e}"));
            return (0, 0);
        }
    };
    let m = &f.m;
    let end = sh.file_end();
    let lock_ok = |off: u64, what: &str, problems: &mut Vec<String>| {
        let v = sh.w(off).load(Acquire) & (WAITERS - 1);
        if v != 0 && !sh.txn_alive(v - 1) {
            problems.push(format!(
                "map {id}: {what} lock at {off:#x} held by dead txn {}",
                v - 1
            ));
        }
    };
    lock_ok(m.hdr + M_DIR_LOCK, "directory", problems);
    let root = sh.w(m.hdr + M_ROOT).load(Acquire);
    let (gd, dir) = (root >> 48, root & OFF_MASK);
    if gd > MAX_DEPTH || dir < sh.g.chunks_off || dir % 8 != 0 || dir + (8 << gd) > end {
        problems.push(format!("map {id}: directory {root:#x} out of the file"));
        return (0, 0);
    }
    if !in_index(dir, 8 << gd) {
        problems.push(format!(
            "map {id}: directory {dir:#x} is not inside an index chunk"
        ));
    }
    let (mut count, mut segs) = (0u64, 0u64);
    let mut keys: std::collections::HashSet<Vec<u8>> = std::collections::HashSet::new();
    let mut key = vec![0u8; f.geo.key_size as usize];
    // A map of groups: how many entries name each segment (each is checked once, at
    // its first entry).
    let mut named: std::collections::HashMap<u64, u64> = std::collections::HashMap::new();
    if m.groups {
        for j in 0..(1u64 << gd) {
            *named
                .entry(entry_seg(sh.w(dir + 8 * j).load(Acquire)))
                .or_default() += 1;
        }
    }
    let mut visited = std::collections::HashSet::new();
    for j in 0..(1u64 << gd) {
        let e = sh.w(dir + 8 * j).load(Acquire);
        let (seg, d) = (entry_seg(e), entry_depth(e));
        if d > gd || (m.groups && d != 0) {
            problems.push(format!("map {id}: directory entry {j} depth {d} > {gd}"));
            continue;
        }
        let first = j & ((1 << d) - 1);
        if m.groups && !visited.insert(seg) {
            continue;
        }
        if !m.groups && j != first {
            if sh.w(dir + 8 * first).load(Acquire) != e {
                problems.push(format!(
                    "map {id}: directory entries {first} and {j} disagree"
                ));
            }
            continue;
        }
        segs += 1;
        if seg % BUCKET != 0 || !in_index(seg, m.seg_size) {
            problems.push(format!(
                "map {id}: segment {seg:#x} is not inside an index chunk"
            ));
            continue;
        }
        // An adder count in the lock word's high half may be left by killed adders: it
        // is harmless (the next writer of the segment recognises and clears it).
        lock_ok(seg + S_LOCK, "segment", problems);
        if m.groups {
            if sh.w(seg + S_MARK).load(Acquire) != group_segment_mark(id) {
                problems.push(format!(
                    "map {id}: segment {seg:#x} has mark {:#x}, not the map's segment mark",
                    sh.w(seg + S_MARK).load(Acquire)
                ));
            }
            let n = named.get(&seg).copied().unwrap_or(0);
            if groups_of(sh, seg, gd) != Some(n) {
                problems.push(format!(
                    "map {id}: segment {seg:#x} group count {:#x}, the directory names it {n} times",
                    sh.w(seg + S_GROUPS).load(Acquire)
                ));
            }
        } else if sh.w(seg + S_DEPTH).load(Acquire) != d
            || sh.w(seg + S_PREFIX).load(Acquire) != first
        {
            problems.push(format!(
                "map {id}: segment {seg:#x} depth/prefix disagree with the directory"
            ));
        }
        let mut over = vec![0u64; m.n_main as usize];
        for b in 0..m.n_main + m.n_stash {
            let bo = f.bucket(seg, b);
            let hw = sh.w(bo).load(Acquire);
            if fh_seq(hw) & 1 == 1 {
                problems.push(format!("map {id}: bucket {bo:#x} left mid-write (odd seq)"));
            }
            if fh_bits(hw) & !f.all_bits() != 0 {
                problems.push(format!(
                    "map {id}: bucket {bo:#x} bitmap {:#x} names cells past its {}",
                    fh_bits(hw),
                    f.geo.cells
                ));
            }
            if b >= m.n_main && fh_over(hw) != 0 {
                problems.push(format!(
                    "map {id}: stash bucket {bo:#x} has an overflow count"
                ));
            }
            let mut bits = fh_bits(hw) & f.all_bits();
            while bits != 0 {
                let i = bits.trailing_zeros() as u64;
                bits &= bits - 1;
                sh.r.read_bytes(f.cell_off(bo, i), &mut key);
                let h = hash(sh.g.seed, &key);
                let elsewhere = if m.groups {
                    entry_seg(sh.w(dir + 8 * (h & ((1 << gd) - 1))).load(Acquire)) != seg
                } else {
                    h & ((1 << d) - 1) != first
                };
                if elsewhere {
                    problems.push(format!(
                        "map {id}: cell {i} of bucket {bo:#x} hashes outside its segment"
                    ));
                }
                let home = home_bucket(h, m.n_main);
                if !f.may_hold(home, b) {
                    problems.push(format!(
                        "map {id}: cell {i} of bucket {b} of {seg:#x}: its home {home} may not overflow there"
                    ));
                }
                if f.geo.tags {
                    let mut tag = [0u8; 1];
                    sh.r.read_bytes(bo + 8 + i, &mut tag);
                    if tag[0] as u64 != cell_tag(h) {
                        problems.push(format!(
                            "map {id}: cell {i} of bucket {bo:#x} has tag {:#04x}, its key's is {:#04x} (lookups would miss it)",
                            tag[0],
                            cell_tag(h)
                        ));
                    }
                }
                if b != home {
                    over[home as usize] += 1;
                }
                if !keys.insert(key.clone()) {
                    problems.push(format!(
                        "map {id}: a key is present twice (cell {i} of {bo:#x})"
                    ));
                }
                count += 1;
            }
        }
        for b in 0..m.n_main {
            let ov = fh_over(sh.w(f.bucket(seg, b)).load(Acquire));
            if ov != over[b as usize].min(0xff) {
                problems.push(format!(
                    "map {id}: bucket {b} of {seg:#x} has overflow {ov}, stash holds {}",
                    over[b as usize]
                ));
            }
        }
    }
    if m.groups {
        let n = sh.w(m.hdr + M_N_SEGS).load(Acquire);
        if n != segs {
            problems.push(format!(
                "map {id}: segment count {n}, the directory names {segs}"
            ));
        }
        let open = sh.w(m.hdr + M_OPEN_SEG).load(Acquire);
        if open != 0 && !named.contains_key(&open) {
            problems.push(format!(
                "map {id}: open segment {open:#x} is not one of the map's"
            ));
        }
    }
    let (mut c_count, mut c_bytes) = (0u64, 0u64);
    for t in 0..sh.g.n_txn {
        let c = m.hdr + M_COUNTERS + MC_SIZE * t;
        c_count = c_count.wrapping_add(sh.w(c + MC_COUNT).load(Acquire));
        c_bytes = c_bytes.wrapping_add(sh.w(c + MC_BYTES).load(Acquire));
    }
    if c_count != count {
        problems.push(format!(
            "map {id}: counters say {} entries, the cells hold {count}",
            c_count as i64
        ));
    }
    if c_bytes != 0 {
        problems.push(format!(
            "map {id}: a fixed map's live byte counters sum to {c_bytes}, not 0"
        ));
    }
    (count, segs)
}

/// The lossless repairs of a fixed map (alone, after an unclean shutdown): locks and
/// adder counts cleared, odd seqs made even, overflow counts and the entry counter
/// rebuilt from the cells. (Cells have no checksums: a value torn by an OS crash between
/// two flushes is not detected.)
pub(crate) fn rebuild(sh: &Shared, id: u64) -> Result<()> {
    let f = fixed_ref_unchecked(sh, id)?;
    sh.w(f.m.hdr + M_DIR_LOCK).store(0, Release);
    let mut count = 0u64;
    let root = sh.w(f.m.hdr + M_ROOT).load(Acquire);
    for (seg, _) in index::segments(sh, &f.m)? {
        sh.w(seg + S_LOCK).store(0, Release);
        if f.m.groups {
            drop_strays(sh, &f, seg, root);
        }
        for b in 0..f.m.n_main + f.m.n_stash {
            let bo = f.bucket(seg, b);
            let h = sh.w(bo).load(Acquire);
            let bits = fh_bits(h) & f.all_bits();
            let over = if b < f.m.n_main { fh_over(h) } else { 0 };
            sh.w(bo)
                .store(fh((fh_seq(h) + 1) & !1, over, bits), Release);
            count += bits.count_ones() as u64;
            if f.geo.tags {
                // A tag is written before its cell's bit is set, but an OS crash may keep
                // the bit and lose the tag's page: tags are rebuilt from the keys.
                let mut key = vec![0u8; f.geo.key_size as usize];
                let mut rest = bits;
                while rest != 0 {
                    let i = rest.trailing_zeros() as u64;
                    rest &= rest - 1;
                    sh.r.read_bytes(f.cell_off(bo, i), &mut key);
                    f.set_tag(sh, bo, i, hash(sh.g.seed, &key));
                }
            }
        }
        let counts = overflow_counts(sh, &f, seg);
        set_overflow_counts(sh, &f, seg, &counts);
    }
    if f.m.groups {
        // The group and segment counts, from the directory (a move interrupted by an OS
        // crash may have reached the file only in part).
        let root = sh.w(f.m.hdr + M_ROOT).load(Acquire);
        let (g, dir) = (root >> 48, root & OFF_MASK);
        let mut named: std::collections::HashMap<u64, u64> = std::collections::HashMap::new();
        for j in 0..(1u64 << g) {
            *named
                .entry(entry_seg(sh.w(dir + 8 * j).load(Acquire)))
                .or_default() += 1;
        }
        for (&seg, &n) in &named {
            sh.w(seg + S_GROUPS).store(group_count(n, g), Release);
            sh.w(seg + S_MARK).store(group_segment_mark(id), Release);
        }
        sh.w(f.m.hdr + M_N_SEGS).store(named.len() as u64, Release);
        let open = sh.w(f.m.hdr + M_OPEN_SEG).load(Acquire);
        if !named.contains_key(&open) {
            sh.w(f.m.hdr + M_OPEN_SEG).store(0, Release);
        }
    }
    for t in 0..sh.g.n_txn {
        let c = f.m.hdr + M_COUNTERS + MC_SIZE * t;
        sh.w(c + MC_COUNT)
            .store(if t == 0 { count } else { 0 }, Release);
        sh.w(c + MC_BYTES).store(0, Release);
    }
    Ok(())
}

// ---------------------------------------------------------------------------------------
// The public type.

use crate::map::PutOutcome;
use std::sync::Arc;

/// Options for creating a fixed-size map ([`Store::fixed_map_with`](crate::Store::fixed_map_with)).
#[derive(Clone, Debug, Default)]
pub struct FixedOptions {
    /// Main buckets per segment; 0 (the default) chooses segments of about 8 KiB. Small
    /// segments fill and grow (move groups, or split in stores of format version 6) more
    /// often (useful in tests).
    pub segment_buckets: u32,
    /// Stash buckets per segment; 0 (the default) chooses a twelfth of the buckets (a
    /// sixteenth in stores of format version 6).
    pub stash_buckets: u32,
}

/// A named map whose keys all have one size and whose values all have one size, stored
/// as fixed-size cells in the index buckets themselves: no records, no per-entry lengths
/// or offsets, values updated in place. With `key_size + value_size <= 16` (u64 → u64
/// counters, u32 → u32 ids) it is an *inline* map: a lookup reads one bucket (one cache
/// line for cells of up to 8 bytes, an aligned pair of lines up to 16) and nothing else.
///
/// Created with [`Store::fixed_map`](crate::Store::fixed_map). All methods take `&self`;
/// a `FixedMap` is `Send + Sync` and cheap to clone. A key or value of the wrong size is
/// [`Error::InvalidArgument`]. Reads never lock and never write; writes lock one segment;
/// [`FixedMap::add`] on a present key with 8-byte values takes no lock at all.
#[derive(Clone)]
pub struct FixedMap {
    pub(crate) sh: Arc<Shared>,
    pub(crate) f: FixedRef,
    pub(crate) name: Arc<str>,
}

/// Figures about one fixed-size map (see [`FixedMap::stats`]).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct FixedStats {
    /// Entries in the map.
    pub entries: u64,
    /// Key size in bytes.
    pub key_size: u64,
    /// Value size in bytes.
    pub value_size: u64,
    /// Bytes per cell (key, padding, value).
    pub cell_bytes: u64,
    /// Bytes per bucket.
    pub bucket_bytes: u64,
    /// Cells per bucket.
    pub cells_per_bucket: u64,
    /// Index segments.
    pub segments: u64,
    /// Bytes of the segments (cells, bucket headers, segment headers).
    pub segment_bytes: u64,
    /// Cells in all segments (the map's capacity before it next grows).
    pub capacity: u64,
    /// Growth steps so far: moves of a directory group to another segment (stores of
    /// format version 7), or segment splits (fixed maps of older stores).
    pub splits: u64,
    /// Global depth of the directory.
    pub directory_depth: u64,
    /// Size of the store file.
    pub file_size: u64,
}

impl FixedMap {
    /// The map's name.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// The size of every key, in bytes.
    pub fn key_size(&self) -> usize {
        self.f.geo.key_size as usize
    }

    /// The size of every value, in bytes.
    pub fn value_size(&self) -> usize {
        self.f.geo.value_size as usize
    }

    /// A handle on the same map whose operations wait at most `timeout` for a lock held by
    /// a live process (see [`Map::with_timeout`](crate::Map::with_timeout)).
    pub fn with_timeout(&self, timeout: Duration) -> FixedMap {
        let mut m = self.clone();
        m.f.m.timeout = timeout;
        m
    }

    fn txn(&self) -> Result<Txn<'_>> {
        let t = crate::txn::thread_txn(&self.sh)?;
        let mut tx = Txn::new(&self.sh, t);
        tx.timeout = self.f.m.timeout;
        Ok(tx)
    }

    fn check_key(&self, key: &[u8]) -> Result<()> {
        if key.len() as u64 != self.f.geo.key_size {
            return Err(Error::InvalidArgument(format!(
                "map {:?} has {}-byte keys; this key has {} bytes",
                self.name,
                self.f.geo.key_size,
                key.len()
            )));
        }
        Ok(())
    }

    fn check_value(&self, v: &[u8]) -> Result<()> {
        if v.len() as u64 != self.f.geo.value_size {
            return Err(Error::InvalidArgument(format!(
                "map {:?} has {}-byte values; this value has {} bytes",
                self.name,
                self.f.geo.value_size,
                v.len()
            )));
        }
        Ok(())
    }

    /// The value of `key`, copied out, or `None`.
    pub fn get(&self, key: &[u8]) -> Result<Option<Vec<u8>>> {
        self.check_key(key)?;
        self.sh.ensure_registered()?;
        let sh = &*self.sh;
        let n = self.f.geo.value_size as usize;
        self.f.read(sh, key, |voff| {
            let mut v = vec![0u8; n];
            sh.r.read_bytes(voff, &mut v);
            v
        })
    }

    /// Copies the value of `key` into `buf`, which must be exactly `value_size` bytes;
    /// returns whether the key was present (`buf` is left alone when it is not).
    pub fn get_into(&self, key: &[u8], buf: &mut [u8]) -> Result<bool> {
        self.check_key(key)?;
        self.check_value(buf)?;
        self.sh.ensure_registered()?;
        let sh = &*self.sh;
        let n = buf.len();
        if n <= 16 {
            // A small value goes through a small buffer: zeroing the large one below took
            // eight stores on every get.
            let mut tmp = [0u8; 16];
            let found = self
                .f
                .read(sh, key, |voff| sh.r.read_bytes(voff, &mut tmp[..n]))?;
            if found.is_some() {
                if n >= 8 {
                    // Two overlapping words: a `copy_from_slice` of a runtime length is a
                    // `memcpy` call.
                    buf[..8].copy_from_slice(&tmp[..8]);
                    buf[n - 8..].copy_from_slice(&tmp[n - 8..n]);
                } else {
                    buf.copy_from_slice(&tmp[..n]);
                }
            }
            return Ok(found.is_some());
        }
        let mut tmp = [0u8; MAX_VALUE_SIZE as usize];
        let found = self
            .f
            .read(sh, key, |voff| sh.r.read_bytes(voff, &mut tmp[..n]))?;
        if found.is_some() {
            if (8..=16).contains(&n) {
                // Two overlapping words: a `copy_from_slice` of a runtime length is a
                // `memcpy` call.
                buf[..8].copy_from_slice(&tmp[..8]);
                buf[n - 8..].copy_from_slice(&tmp[n - 8..n]);
            } else {
                buf.copy_from_slice(&tmp[..n]);
            }
        }
        Ok(found.is_some())
    }

    /// Whether `key` is present.
    pub fn contains(&self, key: &[u8]) -> Result<bool> {
        self.check_key(key)?;
        self.sh.ensure_registered()?;
        Ok(self.f.read(&self.sh, key, |_| ())?.is_some())
    }

    /// The locked write path with a decision made under the lock.
    fn write<'v>(
        &self,
        key: &[u8],
        produce: &mut dyn FnMut(Option<u64>) -> Result<Act<'v>>,
    ) -> Result<(bool, bool)> {
        self.check_key(key)?;
        let tx = self.txn()?;
        let r = self.f.write(&tx, key, produce);
        if r.is_ok() {
            crate::batch::flush_unless_batching(&self.sh)?;
        }
        r
    }

    /// Inserts or replaces; says which.
    pub fn put(&self, key: &[u8], value: &[u8]) -> Result<PutOutcome> {
        let _call = crate::deadline::call();
        self.check_value(value)?;
        let (existed, _) = self.write(key, &mut |_| Ok(Act::Put(value)))?;
        Ok(if existed {
            PutOutcome::Replaced
        } else {
            PutOutcome::Inserted
        })
    }

    /// Inserts only if `key` is absent; returns whether it did.
    pub fn insert(&self, key: &[u8], value: &[u8]) -> Result<bool> {
        let _call = crate::deadline::call();
        self.check_value(value)?;
        let (_, applied) = self.write(key, &mut |cur| {
            Ok(if cur.is_none() {
                Act::Put(value)
            } else {
                Act::Keep
            })
        })?;
        Ok(applied)
    }

    /// Replaces only if `key` is present; returns whether it did.
    pub fn replace(&self, key: &[u8], value: &[u8]) -> Result<bool> {
        let _call = crate::deadline::call();
        self.check_value(value)?;
        let (_, applied) = self.write(key, &mut |cur| {
            Ok(if cur.is_some() {
                Act::Put(value)
            } else {
                Act::Keep
            })
        })?;
        Ok(applied)
    }

    /// Removes `key`; returns whether it was present.
    pub fn remove(&self, key: &[u8]) -> Result<bool> {
        let _call = crate::deadline::call();
        let (_, applied) = self.write(key, &mut |_| Ok(Act::Remove))?;
        Ok(applied)
    }

    /// Inserts or replaces, returning the previous value (read under the segment lock,
    /// so no other write comes between the two).
    pub fn swap(&self, key: &[u8], value: &[u8]) -> Result<Option<Vec<u8>>> {
        let _call = crate::deadline::call();
        self.check_value(value)?;
        let mut old = None;
        self.write(key, &mut |cur| {
            old = cur.map(|off| self.value_at(off));
            Ok(Act::Put(value))
        })?;
        Ok(old)
    }

    /// Removes `key` and returns its value, if it was present.
    pub fn take(&self, key: &[u8]) -> Result<Option<Vec<u8>>> {
        let _call = crate::deadline::call();
        let mut old = None;
        self.write(key, &mut |cur| {
            old = cur.map(|off| self.value_at(off));
            Ok(if cur.is_some() {
                Act::Remove
            } else {
                Act::Keep
            })
        })?;
        Ok(old)
    }

    /// Returns the value of `key`, first inserting `default` if the key is absent
    /// (atomically: of several racing callers, exactly one inserts).
    pub fn get_or_insert(&self, key: &[u8], default: &[u8]) -> Result<Vec<u8>> {
        let _call = crate::deadline::call();
        self.check_value(default)?;
        if let Some(v) = self.get(key)? {
            return Ok(v);
        }
        let mut out = Vec::new();
        self.write(key, &mut |cur| {
            Ok(match cur {
                Some(off) => {
                    out = self.value_at(off);
                    Act::Keep
                }
                None => {
                    out = default.to_vec();
                    Act::Put(default)
                }
            })
        })?;
        Ok(out)
    }

    /// Under the segment lock: a copy of the value at `off`.
    fn value_at(&self, off: u64) -> Vec<u8> {
        let mut v = vec![0u8; self.f.geo.value_size as usize];
        self.sh.r.read_bytes(off, &mut v);
        v
    }

    /// Runs `f` in a batch of this map's store, exactly as
    /// [`Store::batch`](crate::Store::batch) does: under `sync_writes`, the writes this
    /// thread makes to the store are flushed once, when `f` returns, not each.
    pub fn batch<T, E: From<Error>>(
        &self,
        f: impl FnOnce() -> std::result::Result<T, E>,
    ) -> std::result::Result<T, E> {
        crate::batch::run(&self.sh, f)
    }

    /// Puts many entries; each put is atomic on its own (the batch is not). Stops at the
    /// first error, which names the item. With
    /// [`Options::sync_writes`](crate::Options::sync_writes), flushes once for the batch.
    /// Faster than the same puts one by one on a large map: the buckets and segment locks
    /// of the puts a few entries ahead are loaded while one is written.
    pub fn put_many(&self, items: &[(&[u8], &[u8])]) -> Result<()> {
        let _call = crate::deadline::call();
        let sh = &*self.sh;
        crate::map::put_each(
            sh,
            items,
            |k| self.f.prefetch_write(sh, k, sh.file_end()),
            |k, v| self.put(k, v).map(|_| ()),
        )
    }

    /// Removes many keys (each removal atomic on its own); returns how many were present.
    /// Looks ahead as [`FixedMap::put_many`] does.
    pub fn remove_many(&self, keys: &[&[u8]]) -> Result<u64> {
        let _call = crate::deadline::call();
        let sh = &*self.sh;
        crate::map::remove_each(
            sh,
            keys,
            |k| self.f.prefetch_write(sh, k, sh.file_end()),
            |k| self.remove(k),
        )
    }

    /// Atomically: if the current value of `key` equals `expected` (`None` = absent), sets
    /// it to `new` (`None` = remove) and returns true; else changes nothing and returns
    /// false. Decided under the segment lock.
    pub fn compare_and_swap(
        &self,
        key: &[u8],
        expected: Option<&[u8]>,
        new: Option<&[u8]>,
    ) -> Result<bool> {
        let _call = crate::deadline::call();
        if let Some(e) = expected {
            self.check_value(e)?;
        }
        if let Some(n) = new {
            self.check_value(n)?;
        }
        let sh = &*self.sh;
        let mut same = false;
        let (_, applied) = self.write(key, &mut |cur| {
            same = match (cur, expected) {
                (None, None) => true,
                (Some(off), Some(e)) => sh.r.bytes_eq(off, e),
                _ => false,
            };
            Ok(match (same, new) {
                (false, _) => Act::Keep,
                (true, Some(v)) => Act::Put(v),
                (true, None) => Act::Remove,
            })
        })?;
        Ok(applied || same)
    }

    /// Atomic read-modify-write: `f` sees the current value (or `None`) and returns the
    /// new one (or `None` to remove the key); no other write to the key comes in between.
    /// Returns what `f` returned for the value that was installed.
    ///
    /// `f` runs without any lock held; the result is installed only if the value is still
    /// the one `f` saw, otherwise `f` runs again (so it must have no side effects). A new
    /// value of the wrong size is `InvalidArgument`. Gives up with [`Error::Timeout`]
    /// after the lock timeout of retries.
    pub fn update(
        &self,
        key: &[u8],
        mut f: impl FnMut(Option<&[u8]>) -> Option<Vec<u8>>,
    ) -> Result<Option<Vec<u8>>> {
        self.check_key(key)?;
        let _call = crate::deadline::call();
        let wait = Wait::begin(self.f.m.timeout, self.f.m.timeout);
        let mut tries = 0u32;
        loop {
            let cur = self.get(key)?;
            let new = f(cur.as_deref());
            if let Some(v) = &new {
                self.check_value(v)?;
            }
            if self.compare_and_swap(key, cur.as_deref(), new.as_deref())? {
                return Ok(new);
            }
            tries += 1;
            if wait.expired() {
                return Err(wait.timeout());
            }
            if tries > 4 {
                crate::rt::sleep(Duration::from_micros(10 << tries.min(10)));
            } else {
                crate::rt::yield_now();
            }
        }
    }

    /// Atomically adds `delta` (wrapping) to the 8-byte little-endian integer value of
    /// `key` and returns the new value; an absent key counts as 0 and is created. For
    /// unsigned counters, cast: `add(k, d as i64)? as u64` is the wrapping u64 sum.
    ///
    /// On a present key this is **lock-free**: one `fetch_add` on the value word, which
    /// is 8-aligned (values whose size is a multiple of 8 always are; see FORMAT.md), with
    /// no lock and no redo list. Only while a writer restructures the same segment (an
    /// insert, remove, split or clear there) does it take the locked path instead.
    /// `InvalidArgument` unless the map's values are 8 bytes.
    pub fn add(&self, key: &[u8], delta: i64) -> Result<i64> {
        let _call = crate::deadline::call();
        self.check_key(key)?;
        if self.f.geo.value_size != 8 {
            return Err(Error::InvalidArgument(format!(
                "add needs 8-byte values; map {:?} has {}-byte values",
                self.name, self.f.geo.value_size
            )));
        }
        let tx = self.txn()?;
        if let Some(v) = self.f.add_in_place(&tx, key, delta)? {
            crate::batch::flush_unless_batching(&self.sh)?;
            return Ok(v);
        }
        let sh = &*self.sh;
        let mut out = 0i64;
        self.write(key, &mut |cur| {
            let old = match cur {
                Some(off) => sh.w(off).load(Acquire) as i64,
                None => 0,
            };
            out = old.wrapping_add(delta);
            Ok(Act::PutWord(out as u64))
        })?;
        Ok(out)
    }

    /// Looks up many keys at once, prefetching their buckets in batches so that their
    /// cache misses overlap. Each lookup is individually consistent.
    pub fn get_many(&self, keys: &[&[u8]]) -> Result<Vec<Option<Vec<u8>>>> {
        let _call = crate::deadline::call();
        let mut out = Vec::with_capacity(keys.len());
        self.get_many_with(keys, |_, v| out.push(v.map(<[u8]>::to_vec)))?;
        Ok(out)
    }

    /// [`FixedMap::get_many`] without allocating: calls `f(i, value)` for the `i`-th key
    /// in order, the value (`None` if absent) borrowed for the call only.
    pub fn get_many_with(
        &self,
        keys: &[&[u8]],
        mut f: impl FnMut(usize, Option<&[u8]>),
    ) -> Result<()> {
        let _call = crate::deadline::call();
        for k in keys {
            self.check_key(k)?;
        }
        self.sh.ensure_registered()?;
        let sh = &*self.sh;
        let n = self.f.geo.value_size as usize;
        // Values are at most MAX_VALUE_SIZE bytes: one buffer on the stack serves them all.
        let mut buf = [0u8; MAX_VALUE_SIZE as usize];
        // The stages of `Map::get_many_with`: while a stage's keys are read, the next
        // stage's buckets and the keys of the stage after it are on their way, and each
        // key is hashed once. (At 5 M keys of 16+16 bytes this was no faster than the
        // batches of 16 keys it replaced, prefetched, then read: ~3.0 M/s both, with
        // the keys prefetched; without that 2.65 M/s. Stages of 4 were no faster.)
        let end = sh.file_end();
        let mut ring = [0u64; 2 * STAGE];
        let len = keys.len();
        crate::mem::prefetch_keys(&keys[..len.min(2 * STAGE)]);
        for (i, k) in keys.iter().enumerate().take(STAGE) {
            ring[i] = self.f.prefetch_bucket(sh, k, end);
        }
        let mut start = 0;
        while start < len {
            let stop = (start + STAGE).min(len);
            for i in stop..(stop + STAGE).min(len) {
                ring[i % (2 * STAGE)] = self.f.prefetch_bucket(sh, keys[i], end);
                if let Some(k) = keys.get(i + STAGE) {
                    crate::mem::prefetch_ptr(k.as_ptr());
                }
            }
            for (j, k) in keys.iter().enumerate().take(stop).skip(start) {
                let got = self.f.read_hashed(sh, k, ring[j % (2 * STAGE)], |voff| {
                    sh.r.read_bytes(voff, &mut buf[..n])
                })?;
                f(j, got.map(|_| &buf[..n]));
            }
            start = stop;
        }
        Ok(())
    }

    /// Number of entries.
    pub fn len(&self) -> Result<u64> {
        let sh = &*self.sh;
        let mut n: u64 = 0;
        for t in 0..sh.g.n_txn {
            n = n.wrapping_add(
                sh.w(self.f.m.hdr + M_COUNTERS + MC_SIZE * t + MC_COUNT)
                    .load(Relaxed),
            );
        }
        if !self.f.m.alive(sh) {
            return Err(Error::NotFound(format!("map {} was dropped", self.name)));
        }
        Ok(if (n as i64) < 0 { 0 } else { n })
    }

    /// Whether the map has no entries.
    pub fn is_empty(&self) -> Result<bool> {
        Ok(self.len()? == 0)
    }

    /// Removes every entry, one segment at a time (other operations go on meanwhile).
    pub fn clear(&self) -> Result<()> {
        let _call = crate::deadline::call();
        let tx = self.txn()?;
        clear(&tx, &self.f)
    }

    /// Iterates over `(key, value)` pairs, weakly consistently (as [`Map::iter`](crate::Map::iter)):
    /// every key present for the whole iteration is returned exactly once.
    pub fn iter(&self) -> FixedIter {
        FixedIter {
            map: self.clone(),
            cursor: 0,
            done: false,
            buf: std::collections::VecDeque::new(),
            damage: None,
            reported: std::collections::HashSet::new(),
        }
    }

    /// Figures about this map.
    pub fn stats(&self) -> Result<FixedStats> {
        let sh = &*self.sh;
        let entries = self.len()?;
        let mut splits: u64 = 0;
        for t in 0..sh.g.n_txn {
            let c = self.f.m.hdr + M_COUNTERS + MC_SIZE * t;
            splits = splits.wrapping_add(sh.w(c + MC_SPLITS).load(Relaxed));
        }
        let segments = index::segments(sh, &self.f.m)?.len() as u64;
        let g = self.f.geo;
        Ok(FixedStats {
            entries,
            key_size: g.key_size,
            value_size: g.value_size,
            cell_bytes: g.cell,
            bucket_bytes: g.bsize,
            cells_per_bucket: g.cells,
            segments,
            segment_bytes: segments * self.f.m.seg_size,
            capacity: segments * (self.f.m.n_main + self.f.m.n_stash) * g.cells,
            splits,
            directory_depth: sh.w(self.f.m.hdr + M_ROOT).load(Acquire) >> 48,
            file_size: sh.file_end(),
        })
    }
}

/// Iterator over a fixed map's entries; see [`FixedMap::iter`]. A damaged segment is
/// reported as one `Err` item ([`Error::Corrupt`](crate::Error::Corrupt), naming the map
/// and the segment) and the iteration goes on past it, as [`Iter`](crate::Iter) does;
/// any other error ends it.
pub struct FixedIter {
    map: FixedMap,
    cursor: u64,
    done: bool,
    buf: std::collections::VecDeque<(Vec<u8>, Vec<u8>)>,
    /// The damage of the segment whose items are in `buf`, reported after them.
    damage: Option<crate::Error>,
    /// The damaged segments reported so far: a segment of a map of groups holds several
    /// directory entries' keys, and is visited once for each of them.
    reported: std::collections::HashSet<u64>,
}

impl Iterator for FixedIter {
    type Item = Result<(Vec<u8>, Vec<u8>)>;

    fn next(&mut self) -> Option<Self::Item> {
        loop {
            if let Some(item) = self.buf.pop_front() {
                return Some(Ok(item));
            }
            if let Some(e) = self.damage.take() {
                return Some(Err(e));
            }
            if self.done {
                return None;
            }
            if let Err(e) = self.map.sh.ensure_registered() {
                self.done = true;
                return Some(Err(e));
            }
            match snapshot(&self.map.sh, &self.map.f, &self.map.name, self.cursor) {
                Ok(step) => {
                    self.buf.extend(step.items);
                    self.damage = step
                        .damage
                        .filter(|(seg, _)| self.reported.insert(*seg))
                        .map(|(_, what)| self.map.sh.corrupt(what));
                    match step.next {
                        Some(c) => self.cursor = c,
                        None => self.done = true,
                    }
                }
                Err(e) => {
                    self.done = true;
                    return Some(Err(e));
                }
            }
        }
    }
}

impl std::fmt::Debug for FixedMap {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("FixedMap")
            .field("name", &self.name)
            .field("key_size", &self.f.geo.key_size)
            .field("value_size", &self.f.geo.value_size)
            .finish()
    }
}

#[allow(dead_code)]
fn _assert_send_sync() {
    fn is<T: Send + Sync>() {}
    is::<FixedMap>();
}

#[cfg(all(test, not(shuttle)))]
mod tests {
    use super::*;

    /// `byte_matches` against a byte-by-byte comparison: every tag against words made
    /// of that tag, its neighbours (±1, bit flips: where a borrow would fool the usual
    /// test) and random bytes.
    #[test]
    fn byte_matches_is_exact() {
        let mut x = 0x9e37_79b9_7f4a_7c15u64;
        let mut next = move || {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            x
        };
        for tag in 0..256u64 {
            for _ in 0..2000 {
                let r = next();
                let mut w = 0u64;
                for j in 0..8 {
                    let pick = (r >> (8 * j)) & 0xff;
                    let b = match pick % 6 {
                        0 | 1 => tag,
                        2 => tag.wrapping_add(1) & 0xff,
                        3 => tag.wrapping_sub(1) & 0xff,
                        4 => tag ^ 0x80,
                        _ => next() & 0xff,
                    };
                    w |= b << (8 * j);
                }
                let want = (0..8).fold(0, |m, j| m | (((w >> (8 * j)) & 0xff == tag) as u64) << j);
                assert_eq!(byte_matches(w, tag), want, "{w:#018x} tag {tag:#04x}");
            }
        }
    }

    /// The geometry rule of FORMAT.md: values whose size is a multiple of 8 are 8-aligned
    /// (so `add` can be one atomic word), buckets hold at least 7 cells (15 for cells over
    /// 16 bytes in maps of groups) when they fit in 4096 bytes, and inline maps fit one
    /// line (cells ≤ 8 bytes) or an aligned pair.
    #[test]
    fn geometry() {
        for (groups, tags) in [(false, false), (true, false), (true, true)] {
            for ks in 1..=64u64 {
                for vs in [0u64, 1, 3, 8, 16, 24, 100, 128] {
                    let g = Geo::new(ks, vs, groups, tags);
                    assert!(g.cells >= 1 && g.cells <= MAX_CELLS, "{ks}+{vs}");
                    assert!(8 + g.cells * g.cell <= g.bsize, "{ks}+{vs}");
                    // Tags, where there is room: between the header word and the cells,
                    // which end at the bucket's end and keep their words aligned.
                    assert_eq!(g.tags, tags && g.bsize - 8 - g.cells * g.cell >= g.cells);
                    if g.tags {
                        assert!(8 + g.cells <= g.cells_at, "{ks}+{vs}: {g:?}");
                        assert_eq!(g.cells_at + g.cells * g.cell, g.bsize);
                        if g.cell % 8 == 0 {
                            assert_eq!(g.cells_at % 8, 0);
                        }
                    } else {
                        assert_eq!(g.cells_at, 8);
                    }
                    assert!(g.bsize % 64 == 0 && g.bsize <= 4096);
                    let min = if groups && g.cell > 16 { 15 } else { 7 };
                    assert!(g.cells >= min || g.bsize == 4096, "{ks}+{vs}: {g:?}");
                    if g.bsize > 64 {
                        // The smallest bucket that holds them.
                        assert!((g.bsize / 2 - 8) / g.cell < min, "{ks}+{vs}: {g:?}");
                    }
                    if vs > 0 && vs % 8 == 0 {
                        assert_eq!(g.kstride % 8, 0);
                        assert_eq!(g.cell % 8, 0);
                    }
                    let (nm, ns) = g.default_buckets();
                    assert!(nm >= 1 && ns >= 2);
                }
            }
        }
        for groups in [false, true] {
            let g = |k, v| Geo::new(k, v, groups, groups);
            assert_eq!((g(4, 4).bsize, g(4, 4).cells), (64, 7));
            assert_eq!((g(8, 8).bsize, g(8, 8).cells), (128, 7));
            assert_eq!((g(4, 8).kstride, g(4, 8).cell), (8, 16));
            assert_eq!(g(3, 5).cell, 8);
        }
        assert_eq!(
            (
                Geo::new(16, 16, false, false).bsize,
                Geo::new(16, 16, false, false).cells
            ),
            (256, 7)
        );
        let t = Geo::new(16, 16, true, true);
        assert_eq!((t.bsize, t.cells, t.tags, t.cells_at), (512, 15, true, 32));
        // Every cell of 16+16 in one line: 32 + 32i never straddles a multiple of 64.
        let t = Geo::new(8, 8, true, true);
        assert_eq!((t.bsize, t.cells, t.tags, t.cells_at), (128, 7, true, 16));
        assert!(
            !Geo::new(4, 4, true, true).tags,
            "4+4 fills its line: no room"
        );
        // Lined geometries: `line_cells` is the set of cells starting in the line.
        let mut lined = 0;
        for ks in 1..=64u64 {
            for vs in [0u64, 1, 8, 16, 24, 32, 100, 128] {
                let g = Geo::new(ks, vs, true, true);
                if !g.lined {
                    continue;
                }
                lined += 1;
                for line in 1..g.bsize / 64 {
                    let want = (0..g.cells)
                        .filter(|i| (g.cells_at + i * g.cell) / 64 == line)
                        .fold(0u64, |m, i| m | 1 << i);
                    assert_eq!(g.line_cells(line), want, "{ks}+{vs} line {line}: {g:?}");
                }
            }
        }
        assert!(lined > 10, "only {lined} lined geometries");
    }
}
