//! The catalog: one entry per named object of the store.

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
/// Object kinds: a hash map (variable or fixed-size, as its header says), a queue set
/// (stores with `FLAG_QUEUES`), a log (stores with `FLAG_LOGS`).
pub const KIND_MAP: u64 = 1;
pub const KIND_QUEUES: u64 = 2;
pub const KIND_LOG: u64 = 3;

/// The kind of a named object (a map or a queue set), as
/// [`Store::map_kind`](crate::Store::map_kind) reports it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum MapKind {
    /// A map of variable-size keys and values ([`Store::map`](crate::Store::map)), with or without UIDs.
    Variable {
        /// Whether it keeps a stable UID per key ([`MapOptions::uids`](crate::MapOptions::uids)).
        uids: bool,
    },
    /// A fixed-size map ([`Store::fixed_map`](crate::Store::fixed_map)).
    Fixed {
        /// Bytes per key.
        key_size: usize,
        /// Bytes per value.
        value_size: usize,
    },
    /// A queue set ([`Store::queue_set`](crate::Store::queue_set)).
    QueueSet {
        /// Bytes per element.
        element_size: usize,
        /// Elements in the set.
        elements: u64,
        /// Queues in the set.
        queues: usize,
    },
    /// A log ([`Store::log`](crate::Store::log)).
    Log {
        /// Record slots in its ring.
        slots: u64,
        /// The largest record payload, in bytes.
        max_record: usize,
    },
    /// An ordered map ([`Store::ordered_map`](crate::Store::ordered_map)).
    Ordered {
        /// Keys are unsigned 64-bit integers.
        u64_keys: bool,
        /// Several values per key.
        duplicates: bool,
    },
}

/// "variable-size map", "variable-size map with UIDs", or "fixed-size map of 8-byte keys
/// and 4-byte values": the words error messages use.
impl std::fmt::Display for MapKind {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match *self {
            MapKind::Variable { uids: false } => f.write_str("variable-size map"),
            MapKind::Variable { uids: true } => f.write_str("variable-size map with UIDs"),
            MapKind::Fixed {
                key_size,
                value_size,
            } => write!(
                f,
                "fixed-size map of {key_size}-byte keys and {value_size}-byte values"
            ),
            MapKind::QueueSet {
                element_size,
                elements,
                queues,
            } => write!(
                f,
                "queue set of {elements} {element_size}-byte elements in {queues} queues"
            ),
            MapKind::Log { slots, max_record } => {
                write!(f, "log of {slots} records of up to {max_record} bytes")
            }
            MapKind::Ordered {
                u64_keys,
                duplicates,
            } => write!(
                f,
                "ordered map{}{}",
                if u64_keys { " of integer keys" } else { "" },
                if duplicates { " with duplicates" } else { "" }
            ),
        }
    }
}
