//! Fixed-size maps: every key has `key_size` bytes and every value `value_size`, so the
//! entries are stored as *cells* inside the index buckets themselves (no records, no
//! per-entry length or offset). With `key_size + value_size <= 16` this is the *inline*
//! map: a lookup reads one bucket (one cache line, or an aligned pair of lines) and nothing
//! else.
//!
//! ```text
//! root, directory   as in `hashmap` (extendible hashing, low hash bits)
//! segment           64-byte header line (lock, depth, prefix) + n_main + n_stash buckets
//! bucket (64·L B)   header word: seq (24 bits) | overflow (8) << 24 | bitmap (32) << 32
//!                   then `cells` cells of `cell` bytes: key, padding, value
//! ```
//!
//! A key lives in its home bucket or, when that is full, in one of the next
//! [`NEIGHBOURS`] buckets or a stash bucket; the home bucket's overflow count says when to
//! look there (F14's counts, as in variable maps; the neighbours raise the load at which
//! a segment is full from ~45 % to ~85 %). A bitmap bit says which cells are occupied; a
//! deleted cell is reused by the next insert.
//!
//! **Growth by moves** (format version 7, map flag `MF_GROUPS`). A directory entry is a
//! *group* (the keys whose low `g` hash bits are its index), and any set of entries may
//! name a segment. An insert that finds its segment full moves its own group (every key
//! of it) into the map's *open* segment, or into a new segment that becomes the open one,
//! and repoints that one entry. So the map grows one segment at a time and its segments
//! stay 82-94 % full at every size, where halving splits swing between ~43 % and ~86 %
//! (every segment fills at the same rate, so they split in waves): the 4- and 8-byte
//! overhead per entry that fixed maps promise needs the former. Maps of older stores keep splitting. See
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
//! What both hash-map layouts share is written once in `hashmap`: the directory, segment
//! locking, spares and doubling, the optimistic read loop and its backoff, a split's
//! publication, clearing and an iteration step's retries. What touches a bucket is this
//! module's own (cells and bitmaps instead of slots, keys in place instead of in records,
//! in-place values that need the segment frozen by its lock), and so are the moves: the
//! variable map's hot paths stay free of a cell/slot abstraction.

use crate::error::{Error, Result};
use crate::format::*;
use crate::hashmap::{self, MapRef};
use crate::shared::Shared;
use crate::txn::Txn;
use std::sync::atomic::Ordering::*;

pub(crate) use crate::hashmap::Attempt;

mod adders;
mod check;
mod clear;
mod kind;
mod moves;
mod probe;
mod read;
mod repair;
mod snapshot;
mod split;
mod txn;
mod write;

pub(crate) use adders::*;
pub(crate) use check::*;
pub(crate) use clear::*;
pub(crate) use moves::*;
pub(crate) use repair::*;
pub(crate) use snapshot::*;
pub(crate) use split::*;
pub(crate) use txn::*;

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
    if sh.w(sh.g.cat_entry(id) + C_KIND).load(Acquire) != KIND_MAP {
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
    hashmap::init_segment(sh, &f.m, seg, 0, 0, 0);
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
