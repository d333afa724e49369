//! Helpers shared by the integration tests that include this module.
#![allow(dead_code)]

pub mod crash_child;
