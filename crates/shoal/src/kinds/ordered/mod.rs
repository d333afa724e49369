//! Ordered maps: a copy-on-write B+tree per map (work in progress, not yet reachable).

#![allow(dead_code)]

pub(crate) mod cursor;
pub(crate) mod page;
pub(crate) mod tree;
