//! Waits behind what a writer that died left, for readers that may not recover it.
use super::*;
use crate::deadline::Wait;
use crate::error::{Error, Result};
use crate::format::*;
use crate::shared::Shared;
use std::sync::atomic::Ordering::*;
use std::time::Duration;

/// An iteration step of a store opened read-only, which may not take the segment lock
/// that ends persistent interference elsewhere: the optimistic copy `once` is tried until
/// it succeeds or the map's timeout passes, and the error then says whether a writer that
/// died (which only a process with write access can recover) is in the way.
pub(crate) fn read_only_retries(
    sh: &Shared,
    m: &MapRef,
    cursor: u64,
    mut once: impl FnMut() -> Result<Option<Step>>,
) -> Result<Step> {
    let wait = Wait::begin(m.timeout, m.timeout);
    loop {
        if let Some(r) = once()? {
            return Ok(r);
        }
        if wait.expired() {
            let (_, _, e) = m.locate(sh, cursor.reverse_bits(), sh.file_end())?;
            let lockw = sh.w(entry_seg(e) + S_LOCK).load(Acquire) & (WAITERS - 1);
            return Err(if lockw != 0 && !sh.txn_alive(lockw - 1) {
                dead_writer_error(sh)
            } else {
                wait.timeout()
            });
        }
        crate::rt::sleep(Duration::from_micros(50));
    }
}

/// The error of a read that timed out behind a writer that died mid-write: in a store
/// opened read-only, which may not recover it. (Elsewhere the reader recovers it.)
pub(crate) fn dead_writer_error(sh: &Shared) -> Error {
    sh.read_only_error(
        "a writer that died left the bucket being read half written; a process with write \
         access to the store recovers it (any write, or opening it for writing)",
    )
}
