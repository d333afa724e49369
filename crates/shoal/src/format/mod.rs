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
/// (`FLAG_CLEAN_LANES`, [`H_LANES`]); version 10 queue sets (`FLAG_QUEUES`,
/// [`KIND_QUEUES`], [`I_QMOVE`]); version 11 logs (`FLAG_LOGS`, [`KIND_LOG`]) and ordered
/// maps (`FLAG_ORDERED`, [`KIND_ORDERED`], [`H_ORDERED`]). A file of
/// version 1 or 2 is upgraded to [`UPGRADED_VERSION`] when a process opens it alone
/// (`alloc::upgrade`); files of versions 3 to 5 are opened as they are, without the
/// features that came later.
pub const FORMAT_VERSION: u32 = 11;
/// The version older files are upgraded to, and the oldest opened as it is. A version-3
/// file is a version-4 file without `FLAG_SHORT_RECORDS`: its records cannot be recoded
/// in place, so it keeps version 3 (and with it, libraries of version 3 can still share
/// it), and this library writes its records with the version-3 header.
pub const UPGRADED_VERSION: u32 = 3;
/// Hash algorithm id 1: XXH3-64 (xxHash v0.8 output, frozen) with the file's 64-bit seed.
pub const HASH_XXH3_64: u32 = 1;

/// Size of the store header.
pub const HEADER_SIZE: u64 = 4096;

mod bucket;
mod catalog;
mod cells;
mod chunk;
mod hash;
mod header;
mod log;
mod map;
mod ordered;
mod queue;
mod record;
mod slots;
mod types;

pub use bucket::*;
pub use catalog::*;
pub use cells::*;
pub use chunk::*;
pub use hash::*;
pub use header::*;
pub use log::*;
pub use map::*;
pub use ordered::*;
pub use queue::*;
pub use record::*;
pub use slots::*;
pub use types::*;
