//! Ordered maps: a copy-on-write B+tree per map, with snapshot readers and transactions
//! committed for any number of maps by one store (docs/DESIGN.md, "Ordered maps").
//!
//! Layers, bottom up: `page` (a slotted page), `tree` (copy-on-write edits of a tree),
//! `cursor` (reads of a snapshot), `file` (pages read in place), `area` (the root tables,
//! commits and pins), `pool` (a map's pages), `map` (one map's snapshots and write
//! transactions), `kind` (what the checker and the catalog see).

pub(crate) mod area;
pub(crate) mod cursor;
pub(crate) mod file;
pub(crate) mod keys;
mod kind;
pub(crate) mod map;
pub(crate) mod overflow;
pub(crate) mod page;
pub(crate) mod pool;
pub(crate) mod tree;

pub(crate) use map::{is_ordered, ordered_ref, OrderedRef};
