//! Multi-process, kill and crash testing for the shoal engine.
//!
//! The `shoal-worker` binary runs one workload (writer, reader, ...) against a store;
//! the integration tests in `tests/` start many of them, SIGKILL them at random moments,
//! and then check the store against what each writer was told succeeded:
//!
//! * [`value`]: self-describing values, so torn or misplaced values are detected;
//! * [`acklog`]: the per-writer log of announced and acknowledged operations;
//! * [`verify`]: the check of a map's final state against those logs;
//! * [`harness`]: spawning, killing and reaping workers;
//! * [`crash`]: the per-fail-point crash driver's workload and model;
//! * [`linlog`]: the history log of the transaction storms, for the Porcupine checker.

#![warn(missing_docs)]

pub mod acklog;
pub mod crash;
pub mod harness;
pub mod linlog;
pub mod value;
pub mod verify;

/// CLOCK_MONOTONIC in nanoseconds: one clock for every process on the machine.
pub fn now_ns() -> u64 {
    // SAFETY: clock_gettime writes one timespec into the buffer we pass.
    let mut ts: libc::timespec = unsafe { std::mem::zeroed() };
    // SAFETY: a valid clock id and a valid pointer.
    let r = unsafe { libc::clock_gettime(libc::CLOCK_MONOTONIC, &mut ts) };
    assert_eq!(r, 0, "clock_gettime(CLOCK_MONOTONIC) failed");
    ts.tv_sec as u64 * 1_000_000_000 + ts.tv_nsec as u64
}

/// The key `e<EPOCH>k<I>` of the linearizability storm (`shoal-lin-worker`,
/// `tests/linearizability.rs`) as the 8-byte key of a fixed-size map:
/// `EPOCH << 16 | I`, little-endian (`k<I>`, without epochs, is epoch 0).
pub fn lin_fixed_key(epoch: u64, k: u64) -> [u8; 8] {
    assert!(k < 1 << 16, "at most 65536 hot keys");
    ((epoch << 16) | k).to_le_bytes()
}
