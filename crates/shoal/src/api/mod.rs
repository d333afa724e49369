//! The public handles on a store's objects: `Map`, `FixedMap`, the `KvMap` trait they
//! share, their iterators and batches; `QueueSet` and its elements; `Log` and its readers.

pub(crate) mod batch;
pub(crate) mod fixed;
pub(crate) mod kv;
pub(crate) mod log;
pub(crate) mod map;
pub(crate) mod ordered;
pub(crate) mod queue;
pub(crate) mod txn;
