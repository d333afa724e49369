//! Fixed-size maps: the layout of their cells and buckets, derived from the key and value
//! sizes alone, and the bucket header word.

use super::*;

/// Largest key of a fixed-size map, in bytes.
pub const MAX_KEY_SIZE: u64 = 512;
/// Largest value of a fixed-size map, in bytes (a replaced value must fit a redo list).
pub const MAX_VALUE_SIZE: u64 = 128;
/// Bytes of a segment's header line (lock, depth, prefix).
pub(crate) const SEG_HDR: u64 = 64;
/// At most this many cells per bucket (the bitmap's width).
pub(crate) const MAX_CELLS: u64 = 32;
/// Main buckets after its home (wrapping) a key may overflow into before the stash.
pub(crate) const NEIGHBOURS: u64 = 3;
/// One adder in flight, in a segment lock word.
pub(crate) const ONE_ADDER: u64 = 1 << 32;

// Bucket header word: seq (24 bits), overflow count (8), cell bitmap (32).
pub(crate) const SEQ_MASK: u64 = (1 << 24) - 1;
#[inline]
pub(crate) fn fh_seq(h: u64) -> u64 {
    h & SEQ_MASK
}
#[inline]
pub(crate) fn fh_over(h: u64) -> u64 {
    (h >> 24) & 0xff
}
#[inline]
pub(crate) fn fh_bits(h: u64) -> u64 {
    h >> 32
}
#[inline]
pub(crate) fn fh(seq: u64, over: u64, bits: u64) -> u64 {
    (seq & SEQ_MASK) | (over << 24) | (bits << 32)
}

/// The cell geometry, derived from the key and value sizes alone (FORMAT.md).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Geo {
    pub key_size: u64,
    pub value_size: u64,
    /// Key bytes plus padding: where the value starts in a cell.
    pub kstride: u64,
    /// Bytes per cell.
    pub cell: u64,
    /// Bytes per bucket (a multiple of 64).
    pub bsize: u64,
    /// Cells per bucket.
    pub cells: u64,
    /// The map grows by moves (format version 7).
    pub groups: bool,
    /// Byte `8 + i` of a bucket is cell `i`'s tag (map flag `MF_TAGS`, format version 8).
    pub tags: bool,
    /// Where cell 0 starts in a bucket: 8 (after the header word), or, with tags, the
    /// bucket's size less its cells', so that the cells end at its end.
    pub cells_at: u64,
    /// Tagged buckets of more than two lines whose cells tile the lines (cells of 32 or
    /// 64 bytes: 16+16, 40+24): an insert prefers a cell in one of two lines its hash
    /// picks, and a lookup asks for those lines with the first (see
    /// [`FixedRef::preferred_lines`]).
    pub lined: bool,
}

impl Geo {
    /// The geometry of a map with these sizes (validated by the caller).
    ///
    /// Alignment rule: when the value size is a multiple of 8, the key is padded to a
    /// multiple of 8, so every value starts 8-aligned (buckets are 64-aligned and the
    /// header is one word). A bucket is 64 × L bytes, L the smallest power of two that
    /// holds at least 7 cells (capped at 32 cells by the bitmap, 4096 bytes): one line for
    /// cells of up to 8 bytes, an aligned pair of lines up to 17, four lines up to 36.
    ///
    /// In a map of groups (`groups`, format version 7), cells over 16 bytes get buckets of
    /// at least 15 (16+16: 512 bytes, 15 cells, where 7 cells left 24 of 256 bytes
    /// unused): bigger buckets fill further before a key finds no room, and a cell of
    /// 32 bytes or more costs its whole size in every unused cell (DESIGN.md, "How fixed
    /// maps grow"). Inline maps (cells up to 16 bytes) keep one line or an aligned pair.
    ///
    /// Tags (`tags_allowed`: the store has `FLAG_FIXED_TAGS`, format version 8) go to
    /// maps of groups whose buckets have a spare byte per cell after the header word and
    /// the cells (16+16: 24 spare bytes for 15 cells; 8+8: 8 for 7; 4+4: none). The tags
    /// follow the header word and the cells move to the bucket's end, which for cells of
    /// 16 and 32 bytes also puts every cell inside one cache line.
    pub fn new(key_size: u64, value_size: u64, groups: bool, tags_allowed: bool) -> Geo {
        let kstride = if value_size > 0 && value_size % 8 == 0 {
            key_size.next_multiple_of(8)
        } else {
            key_size
        };
        let cell = (kstride + value_size).max(1);
        let min_cells = if groups && cell > 16 { 15 } else { 7 };
        let mut bsize = 64;
        while bsize < 4096 && (bsize - 8) / cell < min_cells {
            bsize *= 2;
        }
        let cells = ((bsize - 8) / cell).min(MAX_CELLS);
        let tags = tags_allowed && groups && bsize - 8 - cells * cell >= cells;
        Geo {
            key_size,
            value_size,
            kstride,
            cell,
            bsize,
            cells,
            groups,
            tags,
            cells_at: if tags { bsize - cells * cell } else { 8 },
            lined: tags && bsize > 128 && 64 % cell == 0,
        }
    }

    /// The cells of line `line` (at least 1) of a bucket of a lined geometry, as a
    /// bitmap: `64 / cell` of them, from cell `line × 64 / cell − cells_at / cell` (the
    /// cells tile the lines from `cells_at`, a multiple of the cell size). Arithmetic, not a
    /// loop over the cells: every insert asks, for every bucket it may take a cell in (a
    /// loop made it 7,200 instructions, 1,100 of them here).
    #[inline]
    pub fn line_cells(&self, line: u64) -> u64 {
        debug_assert!(self.lined && line >= 1);
        let per = 64 / self.cell;
        let skip = self.cells_at / self.cell;
        if line * per < skip {
            return 0;
        }
        (((1u64 << per) - 1) << (line * per - skip)) & ((1u64 << self.cells) - 1)
    }

    /// Default bucket counts: segments of about 8 KiB, a sixteenth of them stash (a
    /// twelfth in maps of groups, which are always near full: DESIGN.md, "More stash";
    /// at least 2), and at least 8 buckets.
    pub fn default_buckets(&self) -> (u64, u64) {
        let nb = ((8192 - SEG_HDR) / self.bsize).max(8);
        let stash = (nb / if self.groups { 12 } else { 16 }).max(2);
        (nb - stash, stash)
    }
}

/// Bytes of a segment.
pub(crate) fn fixed_segment_size(bsize: u64, n_main: u64, n_stash: u64) -> u64 {
    (SEG_HDR + bsize * (n_main + n_stash)).next_multiple_of(BUCKET)
}
