//! The public handles on a store's maps: `Map`, `FixedMap`, their iterators and batches.

pub(crate) mod batch;
pub(crate) mod fixed;
pub(crate) mod map;
