//! The header of a hash map (variable or fixed-size) and of its UID table.

// ---- Map header: at CHUNK_HDR inside the map's first index chunk ----
/// `dir offset | g << 48`: the directory and its global depth, published together.
pub const M_ROOT: u64 = 0;
pub const M_CHAIN: u64 = 8;
pub const M_ARENA: u64 = 16;
pub const M_ARENA_BUMP: u64 = 24;
pub const M_SPARE_SEG: u64 = 32;
pub const M_SPARE_DIR: u64 = 40;
pub const M_SPARE_DIR_G: u64 = 48;
pub const M_N_MAIN: u64 = 56;
pub const M_N_STASH: u64 = 64;
/// Map flags: [`MF_UIDS`], [`MF_FIXED`], [`MF_GROUPS`], [`MF_TAGS`]; other bits must be 0.
pub const M_FLAGS: u64 = 72;
/// The map keeps a stable UID per key (see `kinds::varmap::uid`): every record's value ends with its
/// 8-byte UID index, and the UID table below is in use.
pub const MF_UIDS: u64 = 1;
/// UID table directory: offset of `UID_DIR_N` block offsets (0 until the first UID).
pub const M_UID_DIR: u64 = 96;
/// Next never-used UID index (indexes start at 1; 0 until the first UID).
pub const M_UID_NEXT: u64 = 104;
/// Head of the free UID list: an index, 0 = empty.
pub const M_UID_FREE: u64 = 112;
/// Lock word taken (after the segment lock) to take or free a UID index.
pub const M_UID_LOCK: u64 = 120;
/// Entries per UID table block, and blocks in the directory: at most
/// `UID_BLOCK * UID_DIR_N - 1` (134 M) keys with UIDs per map.
pub const UID_BLOCK: u64 = 8192;
pub const UID_DIR_N: u64 = 16384;
/// One UID table entry: location word, version, key hash.
pub const UID_ENTRY: u64 = 24;
pub const E_LOC: u64 = 0;
pub const E_VER: u64 = 8;
pub const E_HASH: u64 = 16;
/// In a version word (version 6, `FLAG_IN_PLACE_UIDS`): the entry's value is being
/// overwritten in place. Set by the writer, under the key's segment lock, after its redo
/// list commits and before the first byte changes; the list's last entry stores the
/// version plus one without it. Versions count up by one per change, so they never reach
/// this bit otherwise.
pub const E_VER_BUSY: u64 = 1 << 63;
/// In a location word: the entry is free (the low bits then hold the next free index).
pub const E_FREE: u64 = 1 << 47;
/// Bytes a UID map appends to each record's value: the UID index, little-endian.
pub const UID_TRAILER: u64 = 8;
/// Map flag: a fixed-size (cell) map; see `kinds::fixed` and FORMAT.md "Fixed-size maps".
pub const MF_FIXED: u64 = 2;
/// Map flag (with [`MF_FIXED`], in stores with [`FLAG_FIXED_GROUPS`]): the map grows by
/// *moves*. Each directory entry is a group of keys (those whose low `g` hash bits are
/// its index) that may live in any segment; a segment that is full gives the group of
/// the key being inserted to the map's open segment ([`M_OPEN_SEG`]), or to a new one
/// that becomes the open segment. Directory entries carry depth 0; segment depths and
/// prefixes are not kept. See FORMAT.md, "Fixed-size maps".
pub const MF_GROUPS: u64 = 4;
/// Map flag (with [`MF_FIXED`] and [`MF_GROUPS`], in stores with [`FLAG_FIXED_TAGS`], on
/// every fixed map created there whose buckets have a spare byte per cell): byte `8 + i`
/// of a bucket is the [`cell_tag`] of the key in its cell `i` (meaningful only while the
/// cell's bit is set), and the cells end at the bucket's end. A lookup compares the key
/// only of the cells whose tag matches: one cell, not all of them.
pub const MF_TAGS: u64 = 8;
/// Maps with [`MF_GROUPS`]: the segment that receives the next group moved out of a full
/// segment (0 before the first move). The word is the UID directory's in maps with UIDs,
/// which are never fixed-size maps.
pub const M_OPEN_SEG: u64 = 96;
/// Maps with [`MF_GROUPS`]: how many distinct segments the directory names (the word is
/// the UID table's next index in maps with UIDs).
pub const M_N_SEGS: u64 = 104;
/// Fixed-size maps: the key and value sizes in bytes (0 in variable maps).
pub const M_KEY_SIZE: u64 = 80;
pub const M_VALUE_SIZE: u64 = 88;
pub const M_DIR_LOCK: u64 = 128;
/// The key and value types recorded at creation (`DataType` codes): key in bits 0..8,
/// value in bits 8..16, 0 = none recorded. The words from here to the counters were 0 in
/// every map header of every version, which reads as "none recorded".
pub const M_TYPES: u64 = 136;
/// The tags of the key and value types that are `User` (0 otherwise).
pub const M_KEY_TAG: u64 = 144;
pub const M_VALUE_TAG: u64 = 152;
pub const M_COUNTERS: u64 = 256;
/// Per-txn counters: entries, live record bytes, splits (single writer: that txn).
pub const MC_SIZE: u64 = 32;
pub const MC_COUNT: u64 = 0;
pub const MC_BYTES: u64 = 8;
pub const MC_SPLITS: u64 = 16;

pub fn map_header_size(n_txn: u64) -> u64 {
    (M_COUNTERS + MC_SIZE * n_txn).next_multiple_of(128)
}
