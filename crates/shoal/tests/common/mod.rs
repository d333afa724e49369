//! Helpers shared by the integration tests that include this module.
#![allow(dead_code)]

/// Needs the fail points (the crash tests that use it require the feature).
#[cfg(feature = "failpoints")]
pub mod crash_child;

/// The seed of a randomized test: `SHOAL_SEED` if set (to repeat a failure), else the
/// clock. Never 0 (xorshift's fixed point). Tests print it in every failure message.
pub fn seed() -> u64 {
    std::env::var("SHOAL_SEED")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or_else(|| {
            std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .unwrap()
                .as_nanos() as u64
        })
        .max(1)
}

/// A small deterministic generator (xorshift64) for workloads that print their seed.
pub fn xorshift(mut x: u64) -> impl FnMut() -> u64 {
    move || {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        x
    }
}
