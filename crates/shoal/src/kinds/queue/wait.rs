//! Sleeping pulls and the pushes that wake them.
//!
//! A pull that finds its queues empty spins a little, then sleeps on each queue's wake
//! word (one futex, or `futex_waitv` over several): it reads the words, counts itself
//! among each queue's sleepers, looks at the queues once more, and sleeps only if they
//! are still empty and the words unchanged. A push, after its move, looks at the
//! sleepers count and, if any, bumps the wake word and wakes as many sleepers as it
//! pushed elements. Both sides order "write my part, then read the other's" with a
//! SeqCst fence, so one of them always sees the other: no lost wake-up.

use crate::format::*;
use crate::shared::Shared;
use std::sync::atomic::{fence, Ordering::*};
use std::time::Duration;

/// How long a pull spins on an empty queue before it sleeps.
pub(crate) const SPINS: u32 = 200;

/// Wakes up to `n` of the pulls sleeping on queue entry `qe`, if it has any.
#[inline]
pub(crate) fn wake_sleepers(sh: &Shared, qe: u64, n: u64) {
    fence(SeqCst);
    if sh.w(qe + Q_SLEEPERS).load(Relaxed) != 0 {
        wake_now(sh, qe, n);
    }
}

#[cold]
#[cfg(not(shuttle))]
fn wake_now(sh: &Shared, qe: u64, n: u64) {
    let w = sh.r.futex_word(qe + Q_WAKE);
    w.fetch_add(1, Release);
    crate::sys::futex_wake(w, n.min(i32::MAX as u64) as u32);
}

/// The model checker's sleepers only yield: nothing to wake.
#[cfg(shuttle)]
fn wake_now(_: &Shared, _: u64, _: u64) {}

/// Whether any of the queues (entries `qes`) holds an element now.
pub(crate) fn any_ready(sh: &Shared, qes: &[u64]) -> bool {
    qes.iter().any(|qe| sh.w(qe + Q_LEN).load(SeqCst) != 0)
}

/// Spins up to [`SPINS`] times for an element in one of the queues; whether one came.
pub(crate) fn spin(sh: &Shared, qes: &[u64]) -> bool {
    for _ in 0..SPINS {
        if any_ready(sh, qes) {
            return true;
        }
        std::hint::spin_loop();
    }
    false
}

/// Sleeps until a push to one of the queues (entries `qes`), at most `timeout`, unless
/// one of them holds an element already.
pub(crate) fn sleep(sh: &Shared, qes: &[u64], timeout: Duration) {
    #[cfg(not(shuttle))]
    let seen: Vec<u32> = qes
        .iter()
        .map(|qe| sh.r.futex_word(qe + Q_WAKE).load(Acquire))
        .collect();
    for qe in qes {
        sh.w(qe + Q_SLEEPERS).fetch_add(1, SeqCst);
    }
    if !any_ready(sh, qes) {
        for qe in qes {
            sh.w(qe + Q_WAITS).fetch_add(1, Relaxed);
        }
        #[cfg(not(shuttle))]
        {
            let words: Vec<_> = qes
                .iter()
                .zip(&seen)
                .map(|(qe, v)| (sh.r.futex_word(qe + Q_WAKE), *v))
                .collect();
            crate::sys::futex_wait_any(&words, timeout);
        }
        #[cfg(shuttle)]
        {
            let _ = timeout;
            crate::rt::yield_now();
        }
    }
    for qe in qes {
        // Never below zero, even if a damaged file started it there.
        let _ = sh
            .w(qe + Q_SLEEPERS)
            .fetch_update(SeqCst, Relaxed, |s| s.checked_sub(1));
    }
}
