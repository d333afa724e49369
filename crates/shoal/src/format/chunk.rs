//! Chunks: the units of space after the tables, each run of them with a header.

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
/// The longest index arena run of a map, in chunks, unless its first run is longer
/// (`hashmap::arena_alloc`).
pub const ARENA_MAX_CHUNKS: u64 = 8;
