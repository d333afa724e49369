//! One deadline per call: every wait of a public call (for a lock, for a bucket a writer
//! left odd, for lock-free adders to drain) draws on the same lock timeout, which starts
//! running at the call's first wait.
//!
//! Without it each wait had the whole timeout to itself, and a call that met a stopped
//! process twice (a write behind a lock, then the cleaning step it pays for behind
//! another) took twice its timeout, and said it had waited once. A call opens its scope
//! with [`call`]; scopes nest (a call made inside another shares the outer one's
//! deadline). A wait outside any scope starts its own.
//!
//! Per thread, in a thread-local: a call runs on one thread, and a read that never waits
//! pays nothing but the scope's two counter updates.

use crate::error::Error;
use std::cell::Cell;
use std::time::{Duration, Instant};

thread_local! {
    /// Open scopes on this thread.
    static DEPTH: Cell<u32> = const { Cell::new(0) };
    /// When the outermost open scope's first wait began.
    static FIRST_WAIT: Cell<Option<Instant>> = const { Cell::new(None) };
}

/// The scope of one public call; see the module's documentation. Not `Send`: it belongs
/// to the thread that opened it.
pub(crate) struct Call {
    _not_send: std::marker::PhantomData<*const ()>,
}

/// Opens the scope of a call (or joins the one already open on this thread).
#[inline]
pub(crate) fn call() -> Call {
    DEPTH.with(|d| {
        if d.get() == 0 {
            FIRST_WAIT.with(|f| f.set(None));
        }
        d.set(d.get() + 1);
    });
    Call {
        _not_send: std::marker::PhantomData,
    }
}

impl Drop for Call {
    #[inline]
    fn drop(&mut self) {
        DEPTH.with(|d| d.set(d.get().saturating_sub(1)));
    }
}

/// A wait in progress: when it began, when the call's waiting began, and when this wait
/// must give up.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Wait {
    began: Instant,
    first: Instant,
    until: Option<Instant>,
}

impl Wait {
    /// A wait that begins now, limited by the call's `budget` (counted from the call's
    /// first wait) and by `cap` (counted from now; `Duration::MAX`: no cap of its own).
    pub(crate) fn begin(budget: Duration, cap: Duration) -> Wait {
        let now = Instant::now();
        let first = if DEPTH.with(|d| d.get()) > 0 {
            FIRST_WAIT.with(|f| match f.get() {
                Some(t) => t,
                None => {
                    f.set(Some(now));
                    now
                }
            })
        } else {
            now
        };
        let until = match (first.checked_add(budget), now.checked_add(cap)) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        };
        Wait {
            began: now,
            first,
            until,
        }
    }

    /// A wait that begins now, limited by `cap` alone and not counted against the call:
    /// the cleaner's pacing wait (see `cleaner::step_paced`).
    pub(crate) fn outside_call(cap: Duration) -> Wait {
        let now = Instant::now();
        Wait {
            began: now,
            first: now,
            until: now.checked_add(cap),
        }
    }

    /// How long this wait has lasted.
    #[inline]
    pub(crate) fn waited(&self) -> Duration {
        self.began.elapsed()
    }

    /// Whether the wait has reached its limit.
    #[inline]
    pub(crate) fn expired(&self) -> bool {
        self.until.is_some_and(|u| Instant::now() >= u)
    }

    /// The error for a wait that gave up: the call's whole wait so far.
    pub(crate) fn timeout(&self) -> Error {
        Error::Timeout(self.first.elapsed())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn waits_of_one_call_share_its_budget() {
        let budget = Duration::from_millis(50);
        let _c = call();
        let w1 = Wait::begin(budget, Duration::MAX);
        std::thread::sleep(Duration::from_millis(60));
        assert!(w1.expired());
        {
            // A nested call and a later wait: the same deadline, already past.
            let _inner = call();
            let w2 = Wait::begin(budget, Duration::MAX);
            assert!(w2.expired(), "a second wait got a budget of its own");
            match w2.timeout() {
                Error::Timeout(d) => assert!(d >= Duration::from_millis(60), "{d:?}"),
                e => panic!("{e}"),
            }
        }
        // A cap shorter than what is left of the budget limits one wait only.
        drop(_c);
        let _c = call();
        let w = Wait::begin(Duration::from_secs(60), Duration::from_millis(1));
        std::thread::sleep(Duration::from_millis(5));
        assert!(w.expired());
        assert!(!Wait::begin(Duration::from_secs(60), Duration::MAX).expired());
    }

    #[test]
    fn a_new_call_and_a_wait_outside_any_call_start_afresh() {
        let budget = Duration::from_millis(30);
        {
            let _c = call();
            let _ = Wait::begin(budget, Duration::MAX);
            std::thread::sleep(Duration::from_millis(40));
        }
        assert!(
            !Wait::begin(budget, Duration::MAX).expired(),
            "outside a call"
        );
        let _c = call();
        assert!(!Wait::begin(budget, Duration::MAX).expired(), "a new call");
        assert!(!Wait::outside_call(Duration::from_secs(1)).expired());
        assert!(!Wait::begin(Duration::MAX, Duration::MAX).expired());
    }
}
