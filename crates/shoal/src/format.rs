//! The file format: every offset, size and constant of a store file, in one place.
//!
//! `docs/FORMAT.md` is the normative description; this module is its executable form and
//! must agree with it byte for byte. All integers are little-endian; every shared word is
//! a naturally aligned u64. Offsets stored in the file are byte offsets from the start of
//! the file (never pointers), because every process maps the file at its own address.

/// First 8 bytes of every store file. The CR LF and NUL catch text-mode mangling.
pub const MAGIC: [u8; 8] = *b"SHOAL\0\r\n";
/// The format version this library writes and the newest it reads. Version 2 added the
/// LARGE run's serial, merged free runs and the RELEASED mark; version 3 the header's
/// `large_slack`; version 4 the short record headers (`FLAG_SHORT_RECORDS`); version 5
/// values overwritten in place (`FLAG_IN_PLACE`, with byte-masked redo entries); version 6
/// the same in maps with UIDs (`FLAG_IN_PLACE_UIDS`, with the busy bit of a UID entry's
/// version, [`E_VER_BUSY`]); version 7 fixed-size maps that grow by moving directory
/// groups between segments (`FLAG_FIXED_GROUPS`, map flag [`MF_GROUPS`]); version 8 a
/// hash tag per cell in fixed-size maps whose buckets have room (`FLAG_FIXED_TAGS`, map
/// flag [`MF_TAGS`]); version 9 cleaning lanes, several threads cleaning at once
/// (`FLAG_CLEAN_LANES`, [`H_LANES`]). A file of
/// version 1 or 2 is upgraded to [`UPGRADED_VERSION`] when a process opens it alone
/// (`alloc::upgrade`); files of versions 3 to 5 are opened as they are, without the
/// features that came later.
pub const FORMAT_VERSION: u32 = 9;
/// The version older files are upgraded to, and the oldest opened as it is. A version-3
/// file is a version-4 file without `FLAG_SHORT_RECORDS`: its records cannot be recoded
/// in place, so it keeps version 3 (and with it, libraries of version 3 can still share
/// it), and this library writes its records with the version-3 header.
pub const UPGRADED_VERSION: u32 = 3;
/// Hash algorithm id 1: XXH3-64 (xxHash v0.8 output, frozen) with the file's 64-bit seed.
pub const HASH_XXH3_64: u32 = 1;

/// Size of the store header.
pub const HEADER_SIZE: u64 = 4096;

// ---- Store header fields (offsets from 0) ----
pub const H_MAGIC: u64 = 0;
pub const H_VERSION: u64 = 8; // u32 format version, u32 header size
pub const H_FLAGS: u64 = 16;
/// Header flag: every record ends with a CRC32C of its header, key and value (4 bytes),
/// so torn records are detected after an OS crash. Set for stores on disk.
pub const FLAG_CHECKSUMS: u64 = 1;
/// Header flag (version 4): records whose map id, key and value lengths are small have a
/// 2-byte header, and the first group of a long header's map id has 6 bits
/// ([`record_header`]). Set on every store created at version 4; never on an older file,
/// whose records keep the version-3 header.
pub const FLAG_SHORT_RECORDS: u64 = 2;
/// Header flag (version 5): a put whose value has the length of the key's current value
/// (and at most [`IN_PLACE_MAX`] bytes, in a map without UIDs unless the store also has
/// [`FLAG_IN_PLACE_UIDS`], in a store without
/// checksums) overwrites the value bytes where they are, through a redo list of
/// byte-masked words ([`REDO_MASK_SHIFT`]), instead of appending a new record. Set on
/// every store created at version 5 without checksums; never on an older file (whose
/// libraries would not replay a masked redo entry, and whose appends merge the edge words
/// they share with a neighbouring record without an atomic read-modify-write).
pub const FLAG_IN_PLACE: u64 = 4;
/// Header flag (version 6, only with [`FLAG_IN_PLACE`]): maps with UIDs overwrite values
/// in place too (at most [`IN_PLACE_MAX_UIDS`] bytes). A reader by UID validates its copy
/// with the UID entry's version word, not the bucket's seq, so the writer also sets the
/// version's busy bit ([`E_VER_BUSY`]) while the bytes change, and readers by UID retry
/// while it is set. Never on an older file: its libraries would not look at that bit,
/// and would keep a value torn by an in-place write.
pub const FLAG_IN_PLACE_UIDS: u64 = 8;
/// Header flag (version 7): fixed-size maps created in this store grow by moving one
/// directory entry's cells at a time into another segment ([`MF_GROUPS`]) instead of
/// splitting segments in halves. Set on every store created at version 7; never on an
/// older file, whose libraries would split such a map by segment depths it does not keep.
pub const FLAG_FIXED_GROUPS: u64 = 16;
/// Header flag (version 8, only with [`FLAG_FIXED_GROUPS`]): fixed-size maps created in
/// this store keep a one-byte hash tag per cell when their buckets have room for it (map
/// flag [`MF_TAGS`]), and their cells then end at the end of their bucket. Set on every
/// store created at version 8; never on an older file, whose libraries would look for
/// cells where a tagged map has none.
pub const FLAG_FIXED_TAGS: u64 = 32;
/// Every flag this version knows; a file with others set is refused.
/// Header flag (version 9): the store has [`CLEAN_LANES`] cleaning lanes ([`H_LANES`]),
/// not one. Set in every new store.
pub const FLAG_CLEAN_LANES: u64 = 64;
pub const KNOWN_FLAGS: u64 = FLAG_CHECKSUMS
    | FLAG_SHORT_RECORDS
    | FLAG_IN_PLACE
    | FLAG_IN_PLACE_UIDS
    | FLAG_FIXED_GROUPS
    | FLAG_FIXED_TAGS
    | FLAG_CLEAN_LANES;
/// Longest value overwritten in place: its bytes span at most 19 words, which with the
/// bucket header fill the 20 entries of a redo list.
pub const IN_PLACE_MAX: u64 = 8 * (T_NREDO - 2);
/// [`IN_PLACE_MAX`] in a map with UIDs: the UID entry's version takes one more entry of
/// the redo list, so the value spans at most 18 words.
pub const IN_PLACE_MAX_UIDS: u64 = 8 * (T_NREDO - 3);
/// A redo entry's offset word carries, in bits 56..63, the mask of the bytes of the word it
/// writes (bit i: byte i); 0 means the whole word (every entry before version 5). Offsets
/// stay below 2^48, so the bits were free. A masked entry is applied by merging only its
/// bytes into the word (an atomic read-modify-write), because the other bytes belong to a
/// neighbouring record that another writer may be changing at the same moment.
pub const REDO_MASK_SHIFT: u32 = 56;
pub const H_CHUNK_SHIFT: u64 = 24; // u32 chunk shift, u32 page shift
pub const H_HASH: u64 = 32; // u32 hash algorithm id, u32 reserved
pub const H_SEED: u64 = 40;
pub const H_MAX_SIZE: u64 = 48;
pub const H_COUNTS: u64 = 56; // u32 process slots, u32 txn slots
pub const H_CATALOG_N: u64 = 64; // u32 catalog entries, u32 reserved
pub const H_PROC_OFF: u64 = 72;
pub const H_TXN_OFF: u64 = 80;
pub const H_CATALOG_OFF: u64 = 88;
pub const H_CHUNKS_OFF: u64 = 96;
pub const H_CREATED: u64 = 104; // unix nanoseconds
                                // Mutable words, each on its own cache line where contended.
/// End of the usable file: every byte below it is allocated (fallocate'd) and may be read.
pub const H_FILE_END: u64 = 256;
/// First chunk of the free-run list (0 = empty). Guarded by the alloc lock.
pub const H_FREE_HEAD: u64 = 264;
/// Bytes in DATA and LARGE chunks (dead space = this minus the maps' live bytes).
pub const H_DATA_BYTES: u64 = 272;
/// Bytes in free runs.
pub const H_FREE_BYTES: u64 = 280;
/// Cleaner cursor: the victim chunk being cleaned (0 = none).
pub const H_CLEAN_VICTIM: u64 = 288;
/// Cleaner cursor: offset of the next record to examine in the victim.
pub const H_CLEAN_POS: u64 = 296;
/// Cleaner cursor: the next chunk to consider as a victim (round robin over the file).
pub const H_CLEAN_SCAN: u64 = 304;
/// Chunks reclaimed by the cleaner so far (statistics).
pub const H_CLEANED: u64 = 312;
pub const H_ALLOC_LOCK: u64 = 320;
/// Bytes of LARGE runs past the end of their records (version 3). `data_bytes` counts
/// them and no cleaning reclaims them, so the dead-space figure leaves them out. Alloc
/// lock (it shares the lock's line: only the holder writes either).
pub const H_LARGE_SLACK: u64 = 328;
pub const H_CATALOG_LOCK: u64 = 384;
pub const H_CLEANER_LOCK: u64 = 448;
/// Approximate dead bytes, a trigger for the cleaner only (never trusted for accounting).
pub const H_DEAD_HINT: u64 = 512;
/// 1 when the last process to close the store flushed it and detached cleanly; 0 while
/// any process has it open. Found 0 by the first opener of a disk file: an unclean
/// shutdown (OS crash), so the file is verified before use.
pub const H_CLEAN: u64 = 576;
/// Cleaning lanes 1 to [`CLEAN_LANES`] - 1 (version 9, `FLAG_CLEAN_LANES`), one
/// [`LANE_SIZE`]-byte line each from here: a lock word, the lane's victim chunk and its
/// position, like lane 0's `cleaner_lock`, `clean_victim` and `clean_pos`. Each lane is
/// its own cleaner: a thread holding a lane's lock cleans that lane's victim, and no two
/// lanes have the same victim (victims are chosen under the alloc lock, which sees every
/// lane's). A file without the flag has lane 0 only, so that libraries of version 8
/// sharing it, whose cleaner knows no lanes, never clean a chunk another lane is cleaning.
pub const H_LANES: u64 = 1024;
pub const LANE_SIZE: u64 = 64;
pub const L_LOCK: u64 = 0;
pub const L_VICTIM: u64 = 8;
pub const L_POS: u64 = 16;
/// Lanes of a store with `FLAG_CLEAN_LANES`.
pub const CLEAN_LANES: u64 = 8;
const _: () =
    assert!(H_LANES >= H_CLEAN + 8 && H_LANES + (CLEAN_LANES - 1) * LANE_SIZE <= HEADER_SIZE);

/// The words of cleaning lane `i`: (lock, victim, position). Lane 0 is the header's
/// original cleaner cursor.
pub const fn lane(i: u64) -> (u64, u64, u64) {
    if i == 0 {
        (H_CLEANER_LOCK, H_CLEAN_VICTIM, H_CLEAN_POS)
    } else {
        let b = H_LANES + (i - 1) * LANE_SIZE;
        (b + L_LOCK, b + L_VICTIM, b + L_POS)
    }
}

// ---- Process table: one 64-byte slot per attached process ----
pub const PROC_SLOT: u64 = 64;
/// Slot state: 0 = free, 1 = attached.
pub const P_STATE: u64 = 0;
/// Incremented on every attach; part of the identity of the slot's txn slots.
pub const P_GEN: u64 = 8;
pub const P_PID: u64 = 16;

// ---- Txn slots: one 512-byte slot per thread that uses the store ----
pub const TXN_SLOT: u64 = 512;
/// 0 = free; else `1 | proc << 1 | proc_gen << 17` (see [`txn_owner`]).
pub const T_OWNER: u64 = 0;
/// Txn id + 1 of whoever is recovering this slot after its owner died (0 = nobody).
pub const T_RECOVERING: u64 = 8;
/// The thread's current data chunk (0 = none) and its bump offset (absolute).
pub const T_DATA_CHUNK: u64 = 16;
pub const T_BUMP: u64 = 24;
/// Intent state: 0 none, 1 committed (redo list must be applied).
pub const T_INTENT: u64 = 32;
/// Intent kind (see `txn::Intent`), and its arguments.
pub const T_KIND: u64 = 40;
pub const T_ARGS: u64 = 48;
pub const T_NARGS: u64 = 6;
/// Locks the thread holds or is about to take: offsets of lock words (0 = empty).
pub const T_HELD: u64 = 96;
pub const T_NHELD: u64 = 8;
/// Redo list: count, then (offset, value) pairs.
pub const T_REDO_N: u64 = 160;
pub const T_REDO: u64 = 168;
pub const T_NREDO: u64 = 20;
/// A large-record run this txn allocated and has not published yet (0 = none).
pub const T_LARGE: u64 = 488;
/// Dead bytes this txn produced and has not yet added to the store's `H_DEAD_HINT`.
pub const T_DEAD_PEND: u64 = 496;
/// The segment a lock-free add of this txn is counted in (0 = none); see `fixed.rs`.
pub const T_ADDING: u64 = 504;

/// Encodes the owner word of a txn slot.
pub fn txn_owner(proc_idx: u64, proc_gen: u64) -> u64 {
    1 | (proc_idx << 1) | ((proc_gen & ((1 << 47) - 1)) << 17)
}
/// Decodes (process slot, process generation) from an owner word.
pub fn txn_owner_parts(owner: u64) -> (u64, u64) {
    ((owner >> 1) & 0xffff, owner >> 17)
}

// ---- Catalog: one 256-byte entry per named object ----
pub const CAT_ENTRY: u64 = 256;
/// `state | incarnation << 8`; state 0 free, 1 live, 2 dropping.
pub const C_STATE: u64 = 0;
pub const C_KIND: u64 = 8;
pub const C_HDR: u64 = 16;
pub const C_NAME_LEN: u64 = 24;
pub const C_NAME: u64 = 32;
pub const MAX_NAME: usize = 224;
pub const CAT_FREE: u64 = 0;
pub const CAT_LIVE: u64 = 1;
pub const CAT_DROPPING: u64 = 2;
/// Object kinds. Queues and logs are reserved for the IPC parts.
pub const KIND_MAP: u64 = 1;

// ---- Chunks ----
pub const CHUNK_HDR: u64 = 128;
pub const K_KIND: u64 = 0;
pub const K_RUN: u64 = 8;
pub const K_NEXT: u64 = 16;
/// DATA: end of written records (absolute offset), set when sealed. FREE: [`RELEASED`]
/// when the run's pages past its first were returned to the filesystem (any other value
/// is left from the run's past and means nothing).
pub const K_USED: u64 = 24;
/// `K_USED` of a FREE run whose pages past the first page were released: whoever takes
/// it must allocate them again before writing (see `alloc::release_free`).
pub const RELEASED: u64 = u64::MAX;
/// The part of a free run never released: its header's page. (On a system with larger
/// pages, releasing from here on zeroes the rest of the first page and releases the pages
/// after it, which is as good.)
pub const HEADER_PAGE: u64 = 4096;
/// DATA: owning txn (while active); LARGE: txn + 1 while unpublished, else 0;
/// INDEX: owning map id.
pub const K_OWNER: u64 = 32;
/// DATA / SEALED: bytes of this chunk's records known to be dead (a hint for choosing
/// cleaning victims; not exact: added to without locks, lost on a crash, reset when the
/// chunk is taken for data).
pub const K_DEAD: u64 = 40;
/// LARGE: a random nonzero word written when the run is taken. A late free names it, so
/// that a free aimed at a run that was freed, merged into a longer run and handed out
/// again meanwhile (its old start now inside another record) changes nothing.
pub const K_SERIAL: u64 = 48;
pub const CK_ZERO: u64 = 0;
pub const CK_FREE: u64 = 1;
pub const CK_DATA: u64 = 2;
pub const CK_SEALED: u64 = 3;
pub const CK_LARGE: u64 = 4;
pub const CK_INDEX: u64 = 5;

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
/// The map keeps a stable UID per key (see `uid.rs`): every record's value ends with its
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
/// Map flag: a fixed-size (cell) map; see `fixed.rs` and FORMAT.md "Fixed-size maps".
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
pub const M_COUNTERS: u64 = 256;
/// Per-txn counters: entries, live record bytes, splits (single writer: that txn).
pub const MC_SIZE: u64 = 32;
pub const MC_COUNT: u64 = 0;
pub const MC_BYTES: u64 = 8;
pub const MC_SPLITS: u64 = 16;

pub fn map_header_size(n_txn: u64) -> u64 {
    (M_COUNTERS + MC_SIZE * n_txn).next_multiple_of(128)
}

// ---- Segments and buckets ----
pub const BUCKET: u64 = 128;
pub const SLOTS: u64 = 15;
/// Segment header line: lock word, local depth.
pub const S_LOCK: u64 = 0;
pub const S_DEPTH: u64 = 8;
/// The low `depth` hash bits every key of the segment shares.
pub const S_PREFIX: u64 = 16;
/// In maps of groups ([`MF_GROUPS`]), the word of `depth`: how many directory entries
/// name the segment, as `n | g << 48` for a directory of depth `g` (each doubling of the
/// directory doubles it without a write: at depth `g' >= g` it is `n << (g' - g)`).
pub const S_GROUPS: u64 = 8;
/// In maps of groups, the word of `prefix` holds [`group_segment_mark`]: the mark of a
/// segment of that map, which a writer checks before it trusts an offset from the file
/// to be one (the open segment, a move's source).
pub const S_MARK: u64 = 16;
/// The [`S_MARK`] word of a segment of map `id` that grows by moves: `"GS" << 48 | id`.
pub fn group_segment_mark(id: u64) -> u64 {
    0x4753 << 48 | id
}
/// Bucket header word: `seq (32) | overflow (16) << 32`. Seq odd = being written.
pub const B_HDR: u64 = 0;
pub const B_SLOT0: u64 = 8;
pub const DEFAULT_MAIN_BUCKETS: u64 = 59;
pub const DEFAULT_STASH_BUCKETS: u64 = 4;
pub const MAX_DEPTH: u64 = 32;

pub fn segment_size(n_main: u64, n_stash: u64) -> u64 {
    BUCKET * (1 + n_main + n_stash)
}
pub fn bucket_off(seg: u64, b: u64) -> u64 {
    seg + BUCKET * (1 + b)
}
pub fn slot_off(seg: u64, b: u64, i: u64) -> u64 {
    bucket_off(seg, b) + B_SLOT0 + 8 * i
}
pub fn hdr_seq(h: u64) -> u32 {
    h as u32
}
pub fn hdr_overflow(h: u64) -> u64 {
    (h >> 32) & 0xffff
}
pub fn make_hdr(seq: u32, overflow: u64) -> u64 {
    seq as u64 | (overflow << 32)
}

// ---- Slots and directory entries ----
pub const OFF_MASK: u64 = (1 << 48) - 1;
pub fn slot_tag(slot: u64) -> u64 {
    slot >> 48
}
pub fn slot_off_of(slot: u64) -> u64 {
    slot & OFF_MASK
}
pub fn make_slot(tag: u64, off: u64) -> u64 {
    (tag << 48) | off
}
pub fn dir_entry(seg: u64, depth: u64) -> u64 {
    seg | (depth << 48)
}
pub fn entry_seg(e: u64) -> u64 {
    e & OFF_MASK
}
pub fn entry_depth(e: u64) -> u64 {
    e >> 48
}
pub fn make_root(dir: u64, g: u64) -> u64 {
    dir | (g << 48)
}

// ---- Hash ----
/// The format's hash: XXH3-64 of the key with the file's seed.
#[inline(always)]
pub fn hash(seed: u64, key: &[u8]) -> u64 {
    xxhash_rust::xxh3::xxh3_64_with_seed(key, seed)
}
/// Tag stored in a slot: the top 16 bits.
#[inline]
pub fn hash_tag(h: u64) -> u64 {
    h >> 48
}
/// Home bucket: bits 32..48 scaled onto the main buckets (fast range reduction).
#[inline]
pub fn home_bucket(h: u64, n_main: u64) -> u64 {
    (((h >> 32) & 0xffff) * n_main) >> 16
}
/// The tag of a key with hash `h` in a tagged fixed map's bucket ([`MF_TAGS`]): the
/// hash's top byte (the directory takes the low bits, the home bucket bits 32-47 and
/// the first stash bucket bits 16-31).
#[inline]
pub fn cell_tag(h: u64) -> u64 {
    h >> 56
}
/// Stash bucket a key overflowing from its home tries first.
#[inline]
pub fn first_stash(h: u64, n_stash: u64) -> u64 {
    (h >> 16 & 0xffff) % n_stash
}

// ---- Records ----
/// Largest key, in bytes.
pub const MAX_KEY: usize = 64 * 1024;
/// Largest value, in bytes (4 GiB - 1).
pub const MAX_VALUE: u64 = u32::MAX as u64;

/// An encoded record header (no allocation: it is built on every write).
#[derive(Clone, Copy)]
pub struct RecordHeader {
    buf: [u8; 30],
    len: u8,
}

impl std::ops::Deref for RecordHeader {
    type Target = [u8];
    fn deref(&self) -> &[u8] {
        &self.buf[..self.len as usize]
    }
}

/// Short record headers (`FLAG_SHORT_RECORDS`): a record of map id below 8, key and
/// value lengths below 64 (the value length counting a UID trailer) has the 2-byte header
/// `0x80 | map << 4 | klen >> 2`, `(klen & 3) << 6 | vlen`.
///
/// Why: a small record's header was 3 of its ~35 bytes, and small records (counters, ids,
/// short strings) are where a byte per entry shows: at 10 M entries of 16-byte keys and
/// values it is 1 of the 16.8 bytes of overhead per entry. The bounds keep the common case
/// (a store's first maps; keys and values up to 63 bytes) in 15 bits, with bit 7 of the
/// first byte telling the forms apart.
pub const SHORT_MAX_MAP: u64 = 8;
/// Key and value lengths of a short header are below this (see [`SHORT_MAX_MAP`]).
pub const SHORT_MAX_LEN: u64 = 64;

/// Record header. With `short` (the store's `FLAG_SHORT_RECORDS`): the 2-byte form of
/// [`SHORT_MAX_MAP`] when it fits, else `map id, key length, value length` as LEB128
/// varints whose map id's first group has 6 bits (bit 6 the continuation, bit 7 clear).
/// Without `short` (version 3 files): three plain LEB128 varints.
pub fn record_header(map: u64, klen: u64, vlen: u64, short: bool) -> RecordHeader {
    let mut h = RecordHeader {
        buf: [0; 30],
        len: 0,
    };
    if short {
        if map < SHORT_MAX_MAP && klen < SHORT_MAX_LEN && vlen < SHORT_MAX_LEN {
            h.buf[0] = 0x80 | (map << 4 | klen >> 2) as u8;
            h.buf[1] = ((klen & 3) << 6 | vlen) as u8;
            h.len = 2;
            return h;
        }
        h.buf[0] = (map & 0x3f) as u8;
        h.len = 1;
        if map >= 0x40 {
            h.buf[0] |= 0x40;
            h.push_varint(map >> 6);
        }
    } else {
        h.push_varint(map);
    }
    h.push_varint(klen);
    h.push_varint(vlen);
    h
}

impl RecordHeader {
    fn push_varint(&mut self, mut v: u64) {
        while v >= 0x80 {
            self.buf[self.len as usize] = (v as u8) | 0x80;
            self.len += 1;
            v >>= 7;
        }
        self.buf[self.len as usize] = v as u8;
        self.len += 1;
    }
}

/// The CRC32C a checksummed record ends with: over its header, key and value.
pub fn record_crc(parts: &[&[u8]]) -> u32 {
    parts.iter().fold(0, |c, p| crc32c::crc32c_append(c, p))
}

/// Decodes a record header from the first bytes of `buf` (at most 16), written with
/// `short` as [`record_header`] says: (map, klen, vlen, header length), or None if
/// malformed.
pub fn parse_record_header(buf: &[u8], short: bool) -> Option<(u64, u64, u64, u64)> {
    let mut pos = 0usize;
    let mut vals = [0u64; 3];
    let mut first = 0;
    if short {
        let b0 = *buf.first()? as u64;
        if b0 & 0x80 != 0 {
            let b1 = *buf.get(1)? as u64;
            return Some(((b0 >> 4) & 7, (b0 & 15) << 2 | b1 >> 6, b1 & 63, 2));
        }
        vals[0] = b0 & 0x3f;
        pos = 1;
        first = 1;
        if b0 & 0x40 != 0 {
            vals[0] |= read_varint(buf, &mut pos)? << 6;
        }
    }
    for v in vals[first..].iter_mut() {
        *v = read_varint(buf, &mut pos)?;
    }
    if vals[1] > MAX_KEY as u64 || vals[2] > MAX_VALUE {
        return None;
    }
    Some((vals[0], vals[1], vals[2], pos as u64))
}

/// One LEB128 varint of at most 6 groups (42 bits) at `buf[*pos..]`.
fn read_varint(buf: &[u8], pos: &mut usize) -> Option<u64> {
    let mut v = 0u64;
    let mut shift = 0;
    loop {
        let b = *buf.get(*pos)?;
        *pos += 1;
        v |= ((b & 0x7f) as u64) << shift;
        if b & 0x80 == 0 {
            return Some(v);
        }
        shift += 7;
        if shift > 35 {
            return None;
        }
    }
}

/// Geometry of a store, read once from its header.
#[derive(Clone, Copy, Debug)]
pub struct Geometry {
    pub chunk_shift: u32,
    pub seed: u64,
    pub max_size: u64,
    pub n_proc: u64,
    pub n_txn: u64,
    pub n_catalog: u64,
    pub proc_off: u64,
    pub txn_off: u64,
    pub catalog_off: u64,
    pub chunks_off: u64,
    /// Bytes after a record's value: 4 (its CRC32C) in checksummed stores, else 0.
    pub trailer: u64,
    /// Records have the version-4 headers (`FLAG_SHORT_RECORDS`): true for a new store,
    /// as the header's flag says for an existing one.
    pub short_records: bool,
    /// Values of the same length are overwritten in place (`FLAG_IN_PLACE`): true for a
    /// new store without checksums, as the header's flag says for an existing one.
    pub in_place: bool,
    /// Maps with UIDs overwrite in place too (`FLAG_IN_PLACE_UIDS`): true for a new store
    /// without checksums, as the header's flag says for an existing one.
    pub in_place_uids: bool,
    /// New fixed-size maps grow by moving directory groups (`FLAG_FIXED_GROUPS`): true for
    /// a new store, as the header's flag says for an existing one.
    pub fixed_groups: bool,
    /// New fixed-size maps keep a tag per cell where their buckets have room
    /// (`FLAG_FIXED_TAGS`): true for a new store, as the header's flag says for an
    /// existing one.
    pub fixed_tags: bool,
    /// Cleaning lanes: [`CLEAN_LANES`] with `FLAG_CLEAN_LANES` (a new store), else 1.
    pub clean_lanes: u64,
}

impl Geometry {
    pub fn chunk_size(&self) -> u64 {
        1 << self.chunk_shift
    }
    pub fn proc_slot(&self, p: u64) -> u64 {
        self.proc_off + p * PROC_SLOT
    }
    pub fn txn_slot(&self, t: u64) -> u64 {
        self.txn_off + t * TXN_SLOT
    }
    pub fn cat_entry(&self, id: u64) -> u64 {
        self.catalog_off + id * CAT_ENTRY
    }
    /// Whether `hdr`, a map header offset read from the catalog, names a whole map header
    /// (its per-txn counters included) inside the chunks below `end`. Every use of a
    /// catalog's header offset goes through this first: the counters reach
    /// `map_header_size(n_txn)` bytes past it, and a header near the end of the file put
    /// them past the file's last page (SIGBUS) while the fixed words still passed.
    pub fn map_header_fits(&self, hdr: u64, end: u64) -> bool {
        hdr >= self.chunks_off
            && hdr % 8 == 0
            && hdr
                .checked_add(map_header_size(self.n_txn))
                .is_some_and(|e| e <= end)
    }
    /// Start of the chunk containing `off`.
    pub fn chunk_of(&self, off: u64) -> u64 {
        self.chunks_off + ((off - self.chunks_off) >> self.chunk_shift << self.chunk_shift)
    }

    /// Lays out a new store's tables (of the current version: short record headers).
    pub fn layout(
        chunk_shift: u32,
        seed: u64,
        max_size: u64,
        n_proc: u64,
        n_txn: u64,
        n_catalog: u64,
    ) -> Geometry {
        let proc_off = HEADER_SIZE;
        let txn_off = (proc_off + n_proc * PROC_SLOT).next_multiple_of(4096);
        let catalog_off = (txn_off + n_txn * TXN_SLOT).next_multiple_of(4096);
        let chunks_off = (catalog_off + n_catalog * CAT_ENTRY).next_multiple_of(1 << chunk_shift);
        Geometry {
            chunk_shift,
            seed,
            max_size,
            n_proc,
            n_txn,
            n_catalog,
            proc_off,
            txn_off,
            catalog_off,
            chunks_off,
            trailer: 0,
            short_records: true,
            in_place: true,
            in_place_uids: true,
            fixed_groups: true,
            fixed_tags: true,
            clean_lanes: CLEAN_LANES,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn varint_roundtrip() {
        for short in [false, true] {
            for (m, k, v) in [
                (0, 0, 0),
                (1, 16, 16),
                (7, 63, 63),
                (8, 63, 63),
                (7, 64, 0),
                (7, 0, 64),
                (63, 127, 127),
                (64, 1, 1),
                (1023, 65536, u32::MAX as u64),
                (65535, 128, 300),
                (127, 128, 300),
            ] {
                let h = record_header(m, k, v, short);
                assert_eq!(
                    parse_record_header(&h, short),
                    Some((m, k, v, h.len() as u64)),
                    "short {short}: {m} {k} {v} as {:x?}",
                    &h[..]
                );
            }
        }
        assert_eq!(parse_record_header(&[0x80, 0x80], false), None);
        assert_eq!(parse_record_header(&[0x80], true), None);
        assert_eq!(parse_record_header(&[0x40, 0x80], true), None);
    }

    proptest::proptest! {
        /// Every header decodes to what was encoded, in both codings, and the short form
        /// is used exactly when it fits.
        #[test]
        fn record_headers_round_trip(
            m in proptest::prop_oneof![0..16u64, 0..65536u64],
            k in proptest::prop_oneof![0..80u64, 0..=MAX_KEY as u64],
            v in proptest::prop_oneof![0..80u64, 0..=MAX_VALUE],
            short: bool,
        ) {
            let h = record_header(m, k, v, short);
            proptest::prop_assert_eq!(parse_record_header(&h, short), Some((m, k, v, h.len() as u64)));
            let fits = short && m < SHORT_MAX_MAP && k < SHORT_MAX_LEN && v < SHORT_MAX_LEN;
            proptest::prop_assert_eq!(h.len() == 2, fits);
        }

        /// Any bytes (a torn or reused record) decode to a header within the limits and
        /// the buffer, or to None; never a panic.
        #[test]
        fn record_headers_from_any_bytes(buf in proptest::collection::vec(proptest::num::u8::ANY, 0..16), short: bool) {
            if let Some((_, k, v, hl)) = parse_record_header(&buf, short) {
                proptest::prop_assert!(hl as usize <= buf.len());
                proptest::prop_assert!(k <= MAX_KEY as u64 && v <= MAX_VALUE);
            }
        }
    }

    /// The header bytes FORMAT.md gives as examples ("Records").
    #[test]
    fn record_header_bytes() {
        let cases: [(u64, u64, u64, bool, &[u8]); 6] = [
            (0, 16, 16, true, &[0x84, 0x10]),
            (3, 5, 40, true, &[0xb1, 0x68]),
            (0, 16, 100, true, &[0x00, 0x10, 0x64]),
            (200, 16, 16, true, &[0x48, 0x03, 0x10, 0x10]),
            (0, 16, 16, false, &[0x00, 0x10, 0x10]),
            (200, 16, 16, false, &[0xc8, 0x01, 0x10, 0x10]),
        ];
        for (m, k, v, short, want) in cases {
            assert_eq!(
                &record_header(m, k, v, short)[..],
                want,
                "{m} {k} {v} {short}"
            );
        }
    }
    /// Golden vectors, computed independently with Python's `xxhash` package
    /// (`xxh3_64_intdigest(key, seed=...)`); docs/FORMAT.md quotes them. Each row: seed,
    /// key, hash, tag, home bucket of 59, first stash of 4, directory index at depth 4.
    #[test]
    fn golden_vectors() {
        for (seed, key, want, tag, home, stash, dir4) in GOLDEN {
            let h = hash(seed, key);
            let k = String::from_utf8_lossy(key);
            assert_eq!(h, want, "hash of {k:?} with seed {seed:#x}: {h:#018x}");
            assert_eq!(hash_tag(h), tag, "tag of {k:?}");
            // A fixed map's cell tag is the top byte: the slot tag's high half.
            assert_eq!(cell_tag(h), tag >> 8, "cell tag of {k:?}");
            assert_eq!(home_bucket(h, 59), home, "home bucket of {k:?}");
            assert_eq!(first_stash(h, 4), stash, "stash of {k:?}");
            assert_eq!(h & 15, dir4, "directory index of {k:?}");
        }
    }

    #[allow(clippy::type_complexity)]
    pub(crate) const GOLDEN: [(u64, &[u8], u64, u64, u64, u64, u64); 5] = [
        (
            0x0123_4567_89ab_cdef,
            b"key:000000000042",
            0xf564_e0bd_50e2_ded8,
            0xf564,
            51,
            2,
            8,
        ),
        (0, b"", 0x2d06_8005_38d3_94c2, 0x2d06, 29, 3, 2),
        (0, b"a", 0xe6c6_32b6_1e96_4e1f, 0xe6c6, 11, 2, 15),
        (
            0x0123_4567_89ab_cdef,
            b"file.mdtest.1.2",
            0x6fc2_48ad_7ba3_279d,
            0x6fc2,
            16,
            3,
            13,
        ),
        (
            0x0123_4567_89ab_cdef,
            &[b'x'; 100],
            0xa365_3f03_0569_6928,
            0xa365,
            14,
            1,
            8,
        ),
    ];
}
