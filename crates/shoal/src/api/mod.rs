//! The public handles on a store's maps: `Map`, `FixedMap`, the `KvMap` trait they share,
//! their iterators and batches.

pub(crate) mod batch;
pub(crate) mod fixed;
pub(crate) mod kv;
pub(crate) mod map;
