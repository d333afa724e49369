//! # Shoal
//!
//! A shared-memory key-value store: named hash maps in one memory-mapped file that any
//! number of processes (and their threads) read and write directly, with no server.
//!
//! ```no_run
//! let store = shoal::Store::open("demo")?;          // /dev/shm/demo.shoal
//! let users = store.map("users")?;
//! users.put(b"alice", b"admin")?;
//! assert_eq!(users.get(b"alice")?.as_deref(), Some(&b"admin"[..]));
//! # Ok::<(), shoal::Error>(())
//! ```
//!
//! * Reads never lock and never write shared memory; writes lock one small index segment.
//! * Any process may be killed at any instant: the file stays consistent, and its locks
//!   are recovered by the next process that needs them (liveness comes from file locks
//!   the kernel drops when a process dies, not from PIDs).
//! * The file grows without remapping and without rehashing the table; a full disk or a
//!   full store is an error, never a crash.
//!
//! The file format is specified in `docs/FORMAT.md`; the design in `docs/DESIGN.md`.

#![warn(missing_docs)]
// Unsafe code only in `mem` and `sys`, each block with the invariant that makes it sound.
#![deny(unsafe_code)]
// The model-checking build stubs out files, fds and fork handling.
#![cfg_attr(
    shuttle,
    allow(dead_code, unused_variables, unused_mut, unused_imports)
)]

mod alloc;
mod api;
mod backup;
pub mod check;
mod cleaner;
mod deadline;
mod error;
#[cfg(feature = "failpoints")]
pub mod failpoints;
mod format;
mod hashmap;
mod kinds;
#[allow(unsafe_code)]
mod mem;
mod object;
mod paranoid;
pub mod repair;
mod rt;
mod shared;
mod store;
#[allow(unsafe_code)]
mod sys;
mod txn;

pub use api::batch::Batch;
pub use api::fixed::{FixedIter, FixedMap, FixedOptions, FixedStats};
pub use api::kv::KvMap;
pub use api::log::{
    FullPolicy, Log, LogOptions, LogReader, LogStats, ReaderStats, Record, RecordBatch,
    RecordBatchIter, RecordFields, RecordRef,
};
pub use api::map::{Iter, Keys, Map, MapStats, PutOutcome};
pub use api::ordered::{
    CursorMoves, CursorPlace, MultiWriteTxn, Nestable, Nested, OrderedCursor, OrderedIter,
    OrderedMap, OrderedOptions, Snapshot, WriteCursor, WriteIter, WriteTxn, MAX_ORDERED_ENTRY,
    MAX_ORDERED_KEY,
};
pub use api::queue::{Element, Held, Holder, Queue, QueueSet, QueueSetOptions, QueueStats};
pub use api::txn::{
    Cond, IntCmp, OpResult, Transaction, TxnMap, TxnOp, TxnOutcome, TxnReads, TxnTarget,
};
pub use error::{Error, Result};
pub use format::{DataType, MapKind, USER_TAG_PYTHON_PICKLE};
pub use kinds::varmap::uid::Uid;
pub use object::ObjectStats;
pub use store::{resolve_path, MapOptions, OpenMode, Options, Store, StoreStats};

/// The format version this library writes (see `docs/FORMAT.md`).
pub const FORMAT_VERSION: u32 = format::FORMAT_VERSION;
/// The largest key, in bytes.
pub const MAX_KEY_LEN: usize = format::MAX_KEY;
/// The largest value, in bytes.
pub const MAX_VALUE_LEN: u64 = format::MAX_VALUE;
/// The longest map name, in bytes (UTF-8; a name has at least 1 byte).
pub const MAX_NAME_LEN: usize = format::MAX_NAME;
/// The longest value a put overwrites in place when the key's current value has the same
/// length (in a store without checksums; in a map with UIDs, at most
/// [`IN_PLACE_MAX_UIDS_LEN`]): its bytes change where
/// they are, so nothing is appended and no dead space is left for the cleaner.
pub const IN_PLACE_MAX_LEN: usize = format::IN_PLACE_MAX as usize;
/// [`IN_PLACE_MAX_LEN`] in a map with UIDs (a store of format version 6 or later).
pub const IN_PLACE_MAX_UIDS_LEN: usize = format::IN_PLACE_MAX_UIDS as usize;

/// XXH3-64 of `key` with `seed`: the format's hash, for tools and other implementations.
pub fn format_hash(seed: u64, key: &[u8]) -> u64 {
    format::hash(seed, key)
}
