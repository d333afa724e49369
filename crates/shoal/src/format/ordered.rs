//! Ordered maps (catalog kind 4) and the store's ordered area.
//!
//! The ordered area is one INDEX run, made with the store's first ordered map and named
//! by header word [`H_ORDERED`] (the offset of its first byte past the run header). It
//! holds the commit lock of every ordered map, the last committed sequence number, one
//! snapshot pin per txn slot and a ring of root tables: the table of commit `s` (the
//! root, depth and entry count of every ordered map, with their page pools) is slot
//! `s % RING`, so a commit over several maps is the store of one word, [`OA_SEQ`].

use super::{Geometry, CHUNK_HDR};

/// Catalog kind of an ordered map.
pub const KIND_ORDERED: u64 = 4;
/// Header word: the ordered area's first byte past its run header, 0 = none yet.
pub const H_ORDERED: u64 = 112;

/// Area word: the commit lock (a lock word) of every ordered map of the store.
pub const OA_LOCK: u64 = 0;
/// Area word: the last committed sequence number (its root table is current).
pub const OA_SEQ: u64 = 64;
/// Area words: one pin per txn slot: 0 none, else 1 + the sequence number of the oldest
/// snapshot its thread reads.
pub const OA_PINS: u64 = 128;
/// Root tables in the ring.
pub const RING: u64 = 16;
/// Bytes of one root table.
pub const TABLE: u64 = 8192;
/// Bytes of one map's entry in a root table (entry 0 is the table's own header).
pub const ENTRY: u64 = 128;
/// Ordered maps a store may hold (entries 1..=63 of a table).
pub const MAX_ORDERED: u64 = TABLE / ENTRY - 1;
/// Table header word: the commit whose table this is (0 while being written).
pub const RT_SEQ: u64 = 0;
/// Table header word: which entries are in use (bit `i` for entry `i`, 1..=63).
pub const RT_USED: u64 = 8;
/// Table header words: the store's markers, from here (committed with any commit).
pub const RT_MARKERS: u64 = 16;
/// Markers a store keeps (table header words 16 to 120).
pub const MARKERS: u64 = 14;

/// Entry word: the root page, 0 = an empty map.
pub const E_ROOT: u64 = 0;
/// Entry word: levels of branches above the leaves.
pub const E_DEPTH: u64 = 8;
/// Entry word: entries in the map.
pub const E_COUNT: u64 = 16;
/// Entry word: the next page never used: run index << 32 | page index in the run.
pub const E_POOL: u64 = 24;
/// Entry word: the oldest page of the free-page queue, 0 = empty queue.
pub const E_FQ_HEAD: u64 = 32;
/// Entry word: free-page queue entries of the head page already taken.
pub const E_FQ_POS: u64 = 40;
/// Entry word: the newest page of the free-page queue.
pub const E_FQ_TAIL: u64 = 48;
/// Entry word: entries written in the tail page.
pub const E_FQ_TAIL_N: u64 = 56;
/// Entry word: the map's sequence (a persistent counter).
pub const E_SEQUENCE: u64 = 64;
/// Entry word: the catalog word (`state | incarnation << 8`) and id of the map that owns
/// the entry: id << 32 | incarnation, so a table entry left by a dropped map is known.
pub const E_OWNER: u64 = 72;

/// Bytes of a free-page queue page's header (next page), then (page, seq) pairs.
pub const FQ_HDR: u64 = 16;
/// Entries in a free-page queue page.
pub const FQ_N: u64 = (4096 - FQ_HDR) / 16;

/// Map header word (in its first run, past the run header): magic.
pub const MO_MAGIC: u64 = 0;
/// `"ORDERED\0"`.
pub const ORDERED_MAGIC: u64 = u64::from_le_bytes(*b"ORDERED\0");
/// Map header word: the newest run of the map; each run's `K_NEXT` names the one
/// before, down to the first (which holds this header). The same word as a hash map's
/// `M_CHAIN`, so a drop frees every kind's runs alike.
pub const MO_CHAIN: u64 = 8;
/// Map header word: flags ([`OF_U64_KEYS`], [`OF_DUPS`]).
pub const MO_FLAGS: u64 = 16;
/// Keys are unsigned 64-bit integers (kept big-endian, so bytes sort as numbers).
pub const OF_U64_KEYS: u64 = 1;
/// Several values per key (kept as (key, value) pairs).
pub const OF_DUPS: u64 = 2;
/// Map header word: the map's entry in the root tables (1..=63).
pub const MO_ENTRY: u64 = 24;
/// Map header word: the writer lock.
pub const MO_WLOCK: u64 = 64;
/// Map header word: runs of pages the map owns.
pub const MO_NRUNS: u64 = 128;
/// Map header words: the runs' offsets (run start), from here.
pub const MO_RUNS: u64 = 256;
/// Runs a map may own (their sizes double up to [`MAX_RUN_CHUNKS`]).
pub const MAX_RUNS: u64 = 448;
/// The largest run of pages, in chunks.
pub const MAX_RUN_CHUNKS: u64 = 64;
/// Bytes of a page.
pub const PAGE_BYTES: u64 = 4096;
/// The most levels of branches a tree may have: every branch has at least two children,
/// so 40 levels would take 2^40 pages. A deeper tree in a file is corrupt (and walking it
/// could take forever).
pub const MAX_TREE_DEPTH: u64 = 40;

/// Where the ring of root tables starts, from the area's start (past the pins, on a page
/// boundary), in a store of `n_txn` txn slots.
pub fn ring_start(n_txn: u64) -> u64 {
    (OA_PINS + 8 * n_txn).next_multiple_of(PAGE_BYTES)
}

/// The bytes of an ordered area, its run header excluded.
pub fn area_bytes(n_txn: u64) -> u64 {
    ring_start(n_txn) + RING * TABLE
}

/// Whether `a`, the header's [`H_ORDERED`] word, may name an ordered area of a store of
/// geometry `g` whose file ends at `file_end`: the start of a run past its header, with
/// the whole area inside the file. The word comes from the file: everything that follows
/// it checks this first.
pub fn area_ok(g: &Geometry, a: u64, file_end: u64) -> bool {
    a >= g.chunks_off + CHUNK_HDR
        && (a - g.chunks_off) % g.chunk_size() == CHUNK_HDR
        && a.checked_add(area_bytes(g.n_txn))
            .is_some_and(|e| e <= file_end)
}
