//! Index segments and buckets of variable-size maps: slots and directory entries.

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
