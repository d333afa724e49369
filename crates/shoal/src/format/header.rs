//! The store header (offset 0, 4096 bytes): its words, the cleaning lanes, and the
//! geometry every opener derives from it.

use super::*;
use crate::error::{Error, Result};
use std::path::Path;

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
/// Header flag (version 10): the store may hold queue sets (catalog kind
/// [`KIND_QUEUES`], intent kind [`I_QMOVE`]). Set in every new store; never on an older
/// file, whose libraries would take a queue set for a map.
pub const FLAG_QUEUES: u64 = 128;
/// Header flag (version 11): the store may hold logs (catalog kind [`KIND_LOG`]). Set in
/// every new store; never on an older file, whose libraries would take a log for a map.
pub const FLAG_LOGS: u64 = 256;
/// Header flag (version 11): the store may hold ordered maps (catalog kind
/// [`KIND_ORDERED`], the ordered area [`H_ORDERED`]). Set in every new store; never on
/// an older file, whose libraries would take an ordered map for a hash map.
pub const FLAG_ORDERED: u64 = 1024;
/// Header flag (version 11): the store's writers keep write sections (`T_KIND`'s high
/// half) and obey the hot backup's epoch in [`H_BACKUP`]. Set in every new store; a file
/// without it (an older one) has writers that know no backup, so it is never copied hot.
pub const FLAG_BACKUP: u64 = 2048;
pub const KNOWN_FLAGS: u64 = FLAG_CHECKSUMS
    | FLAG_SHORT_RECORDS
    | FLAG_IN_PLACE
    | FLAG_IN_PLACE_UIDS
    | FLAG_FIXED_GROUPS
    | FLAG_FIXED_TAGS
    | FLAG_CLEAN_LANES
    | FLAG_QUEUES
    | FLAG_LOGS
    | FLAG_ORDERED
    | FLAG_BACKUP;
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
    /// The store may hold queue sets (`FLAG_QUEUES`): true for a new store, as the
    /// header's flag says for an existing one.
    pub queues: bool,
    /// The store may hold logs (`FLAG_LOGS`): true for a new store, as the header's flag
    /// says for an existing one.
    pub logs: bool,
    /// The store may hold ordered maps (`FLAG_ORDERED`): true for a new store, as the
    /// header's flag says for an existing one.
    pub ordered: bool,
    /// The store's writers keep write sections for hot backups (`FLAG_BACKUP`): true for
    /// a new store, as the header's flag says for an existing one.
    pub backup: bool,
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
            queues: true,
            logs: true,
            ordered: true,
            backup: true,
        }
    }
}

fn read_u32(h: &[u8], off: u64) -> u32 {
    u32::from_le_bytes(h[off as usize..off as usize + 4].try_into().unwrap())
}
fn read_u64(h: &[u8], off: u64) -> u64 {
    u64::from_le_bytes(h[off as usize..off as usize + 8].try_into().unwrap())
}

/// The bytes a new store starts with (everything else is zero): the header, and the
/// initial free run when `size` leaves room for chunks.
pub fn initial_image(g: &Geometry, size: u64) -> Vec<(u64, Vec<u8>)> {
    let mut h = vec![0u8; HEADER_SIZE as usize];
    let put = |h: &mut Vec<u8>, off: u64, v: &[u8]| {
        h[off as usize..off as usize + v.len()].copy_from_slice(v)
    };
    put(&mut h, H_MAGIC, &MAGIC);
    put(&mut h, H_VERSION, &FORMAT_VERSION.to_le_bytes());
    put(&mut h, H_VERSION + 4, &(HEADER_SIZE as u32).to_le_bytes());
    put(&mut h, H_CHUNK_SHIFT, &g.chunk_shift.to_le_bytes());
    put(&mut h, H_CHUNK_SHIFT + 4, &12u32.to_le_bytes());
    put(&mut h, H_HASH, &HASH_XXH3_64.to_le_bytes());
    put(&mut h, H_SEED, &g.seed.to_le_bytes());
    put(&mut h, H_MAX_SIZE, &g.max_size.to_le_bytes());
    put(&mut h, H_COUNTS, &(g.n_proc as u32).to_le_bytes());
    put(&mut h, H_COUNTS + 4, &(g.n_txn as u32).to_le_bytes());
    put(&mut h, H_CATALOG_N, &(g.n_catalog as u32).to_le_bytes());
    put(&mut h, H_PROC_OFF, &g.proc_off.to_le_bytes());
    put(&mut h, H_TXN_OFF, &g.txn_off.to_le_bytes());
    put(&mut h, H_CATALOG_OFF, &g.catalog_off.to_le_bytes());
    put(&mut h, H_CHUNKS_OFF, &g.chunks_off.to_le_bytes());
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_nanos() as u64)
        .unwrap_or(0);
    put(&mut h, H_CREATED, &now.to_le_bytes());
    put(&mut h, H_FILE_END, &size.to_le_bytes());
    put(&mut h, H_CLEAN, &1u64.to_le_bytes());
    let mut flags = if g.trailer == 4 { FLAG_CHECKSUMS } else { 0 };
    if g.short_records {
        flags |= FLAG_SHORT_RECORDS;
    }
    if g.in_place {
        flags |= FLAG_IN_PLACE;
    }
    if g.in_place_uids {
        flags |= FLAG_IN_PLACE_UIDS;
    }
    if g.fixed_groups {
        flags |= FLAG_FIXED_GROUPS;
    }
    if g.fixed_tags {
        flags |= FLAG_FIXED_TAGS;
    }
    if g.clean_lanes > 1 {
        flags |= FLAG_CLEAN_LANES;
    }
    if g.queues {
        flags |= FLAG_QUEUES;
    }
    if g.logs {
        flags |= FLAG_LOGS;
    }
    if g.ordered {
        flags |= FLAG_ORDERED;
    }
    if g.backup {
        flags |= FLAG_BACKUP;
    }
    put(&mut h, H_FLAGS, &flags.to_le_bytes());
    let mut out = Vec::new();
    if size > g.chunks_off {
        let run = g.chunks_off;
        let k = (size - run) / g.chunk_size();
        put(&mut h, H_FREE_HEAD, &run.to_le_bytes());
        put(&mut h, H_FREE_BYTES, &(size - run).to_le_bytes());
        let mut ch = vec![0u8; 24];
        ch[0..8].copy_from_slice(&CK_FREE.to_le_bytes());
        ch[8..16].copy_from_slice(&k.to_le_bytes());
        out.push((run, ch));
    }
    out.insert(0, (0, h));
    out
}

/// Validates a store header before anything is mapped: a bad file must fail here,
/// cleanly. `h` is [`HEADER_SIZE`] bytes, of which the first `n` were read from the
/// file (the rest zeros), `size` the file's size and `path` names it in errors. Returns
/// its geometry, the file's size and its file end. With `short_ok`, a file shorter than
/// its file end (truncated) is accepted, for a salvage.
pub fn parse_header(
    path: &Path,
    h: &[u8; HEADER_SIZE as usize],
    n: usize,
    size: u64,
    short_ok: bool,
) -> Result<(Geometry, u64, u64)> {
    if n < MAGIC.len() || h[..8] != MAGIC {
        return Err(Error::NotAStore {
            path: path.to_owned(),
        });
    }
    let version = read_u32(h, H_VERSION);
    if version > FORMAT_VERSION {
        return Err(Error::VersionMismatch {
            path: path.to_owned(),
            found: version,
            supported: FORMAT_VERSION,
        });
    }
    let bad = |what: String| Err(Error::corrupt(path, what));
    if (n as u64) < HEADER_SIZE || size < HEADER_SIZE {
        return bad(format!(
            "truncated: {size} bytes, shorter than the {HEADER_SIZE}-byte header"
        ));
    }
    if version == 0 || read_u32(h, H_VERSION + 4) as u64 != HEADER_SIZE {
        return bad(format!(
            "header: version {version} or header size at offset 12 invalid"
        ));
    }
    if read_u64(h, H_FLAGS) & !KNOWN_FLAGS != 0 {
        return bad(format!(
            "header: unknown flags {:#x} at offset {H_FLAGS}",
            read_u64(h, H_FLAGS)
        ));
    }
    if read_u32(h, H_HASH) != HASH_XXH3_64 {
        return bad(format!(
            "header: unknown hash algorithm {} at offset {H_HASH}",
            read_u32(h, H_HASH)
        ));
    }
    let shift = read_u32(h, H_CHUNK_SHIFT);
    if !(16..=26).contains(&shift) || read_u32(h, H_CHUNK_SHIFT + 4) != 12 {
        return bad(format!(
            "header: chunk shift {shift} at offset {H_CHUNK_SHIFT} out of range"
        ));
    }
    let (np, nt, nc) = (
        read_u32(h, H_COUNTS) as u64,
        read_u32(h, H_COUNTS + 4) as u64,
        read_u32(h, H_CATALOG_N) as u64,
    );
    if !(1..=65535).contains(&np) || !(1..=(1 << 20)).contains(&nt) || !(1..=65536).contains(&nc) {
        return bad(format!("header: table sizes {np}/{nt}/{nc} out of range"));
    }
    let max_size = read_u64(h, H_MAX_SIZE);
    let mut g = Geometry::layout(shift, read_u64(h, H_SEED), max_size, np, nt, nc);
    if read_u64(h, H_FLAGS) & FLAG_CHECKSUMS != 0 {
        g.trailer = 4;
    }
    g.short_records = read_u64(h, H_FLAGS) & FLAG_SHORT_RECORDS != 0;
    if g.short_records && version < 4 {
        return bad(format!(
            "header: flag SHORT_RECORDS in a version-{version} file (it came with version 4)"
        ));
    }
    g.in_place = read_u64(h, H_FLAGS) & FLAG_IN_PLACE != 0;
    if g.in_place && (version < 5 || g.trailer != 0) {
        return bad(format!(
            "header: flag IN_PLACE in a version-{version} file{} (it came with version 5, \
             for stores without checksums)",
            if g.trailer != 0 {
                " with checksums"
            } else {
                ""
            }
        ));
    }
    g.in_place_uids = read_u64(h, H_FLAGS) & FLAG_IN_PLACE_UIDS != 0;
    if g.in_place_uids && (version < 6 || !g.in_place) {
        return bad(format!(
            "header: flag IN_PLACE_UIDS in a version-{version} file{} (it came with version 6, \
             beside IN_PLACE)",
            if g.in_place { "" } else { " without IN_PLACE" }
        ));
    }
    g.fixed_groups = read_u64(h, H_FLAGS) & FLAG_FIXED_GROUPS != 0;
    if g.fixed_groups && version < 7 {
        return bad(format!(
            "header: flag FIXED_GROUPS in a version-{version} file (it came with version 7)"
        ));
    }
    g.fixed_tags = read_u64(h, H_FLAGS) & FLAG_FIXED_TAGS != 0;
    if g.fixed_tags && (version < 8 || !g.fixed_groups) {
        return bad(format!(
            "header: flag FIXED_TAGS in a version-{version} file{} (it came with version 8, \
             beside FIXED_GROUPS)",
            if g.fixed_groups {
                ""
            } else {
                " without FIXED_GROUPS"
            }
        ));
    }
    let lanes = read_u64(h, H_FLAGS) & FLAG_CLEAN_LANES != 0;
    if lanes && version < 9 {
        return bad(format!(
            "header: flag CLEAN_LANES in a version-{version} file (it came with version 9)"
        ));
    }
    g.clean_lanes = if lanes { CLEAN_LANES } else { 1 };
    g.queues = read_u64(h, H_FLAGS) & FLAG_QUEUES != 0;
    if g.queues && version < 10 {
        return bad(format!(
            "header: flag QUEUES in a version-{version} file (it came with version 10)"
        ));
    }
    g.logs = read_u64(h, H_FLAGS) & FLAG_LOGS != 0;
    if g.logs && version < 11 {
        return bad(format!(
            "header: flag LOGS in a version-{version} file (it came with version 11)"
        ));
    }
    g.ordered = read_u64(h, H_FLAGS) & FLAG_ORDERED != 0;
    if g.ordered && version < 11 {
        return bad(format!(
            "header: flag ORDERED in a version-{version} file (it came with version 11)"
        ));
    }
    g.backup = read_u64(h, H_FLAGS) & FLAG_BACKUP != 0;
    if g.backup && version < 11 {
        return bad(format!(
            "header: flag BACKUP in a version-{version} file (it came with version 11)"
        ));
    }
    if (g.proc_off, g.txn_off, g.catalog_off, g.chunks_off)
        != (
            read_u64(h, H_PROC_OFF),
            read_u64(h, H_TXN_OFF),
            read_u64(h, H_CATALOG_OFF),
            read_u64(h, H_CHUNKS_OFF),
        )
    {
        return bad("header: table offsets do not match the table sizes".into());
    }
    if max_size > 1 << 48 || max_size < g.chunks_off {
        return bad(format!("header: max size {max_size} out of range"));
    }
    let end = read_u64(h, H_FILE_END);
    if end < g.chunks_off || end > max_size || (end - g.chunks_off) % g.chunk_size() != 0 {
        return bad(format!(
            "header: file end {end} at offset {H_FILE_END} is not a chunk boundary"
        ));
    }
    if size < end && !(short_ok && size >= g.chunks_off) {
        return bad(format!(
            "truncated: the file has {size} bytes, its header says {end}"
        ));
    }
    Ok((g, size, end))
}

// ---- Hot backup (FORMAT.md, "Hot backup") ----
/// The hot backup's epoch (`FLAG_BACKUP` only): 0 while no backup runs; else the
/// backup's phase ([`EPOCH_PREPARING`] or [`EPOCH_ACTIVE`]) in bits 0..1, its txn slot
/// in bits 2..21, the low 16 bits of its process's attach generation in bits 22..37 and
/// the backup's number in its process in bits 38..63 (see [`backup_epoch`]), so that two
/// backups from one thread have two epochs.
pub const H_BACKUP: u64 = 120;
/// Epoch phase: writers wait at the entry of their write sections; the backup waits for
/// the sections in flight to end.
pub const EPOCH_PREPARING: u64 = 1;
/// Epoch phase: the copy's instant is past; every write copies its block first.
pub const EPOCH_ACTIVE: u64 = 2;
/// Bits of `T_KIND` that hold the intent kind; the high half counts the owning thread's
/// open write sections.
pub const KIND_MASK: u64 = 0xffff_ffff;
/// One open write section in `T_KIND`.
pub const SECTION_ONE: u64 = 1 << 32;

/// Encodes a backup epoch: its phase, the backup's txn slot, its process's attach
/// generation (which tells the slot's owner at the epoch's start from a later one) and
/// the backup's number (which tells two backups of one thread apart).
pub fn backup_epoch(phase: u64, slot: u64, proc_gen: u64, number: u64) -> u64 {
    phase | (slot & 0xf_ffff) << 2 | (proc_gen & EPOCH_GEN_MASK) << 22 | number << 38
}
/// Bits of a process generation an epoch keeps: enough to tell the backup's attachment
/// from the next few of its txn slot (a false "alive" holds writers at most until they
/// cancel the epoch after 10 s).
pub const EPOCH_GEN_MASK: u64 = (1 << 16) - 1;
/// Decodes (phase, txn slot, low bits of the process generation) from an epoch word.
pub fn backup_epoch_parts(e: u64) -> (u64, u64, u64) {
    (e & 3, (e >> 2) & 0xf_ffff, (e >> 22) & EPOCH_GEN_MASK)
}
