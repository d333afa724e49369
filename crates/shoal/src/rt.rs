//! Waiting primitives that the model checker can see.
//!
//! Under `cfg(shuttle)` every wait must hand control to shuttle's scheduler (a real sleep
//! or yield would stall the single OS thread that runs all model threads), so the engine
//! waits only through these.

use std::time::Duration;

/// Lets other threads run.
#[inline]
pub fn yield_now() {
    #[cfg(not(shuttle))]
    std::thread::yield_now();
    #[cfg(shuttle)]
    shuttle::thread::yield_now();
}

/// Sleeps a little (a yield under the model checker).
#[inline]
pub fn sleep(d: Duration) {
    #[cfg(not(shuttle))]
    std::thread::sleep(d);
    #[cfg(shuttle)]
    {
        let _ = d;
        shuttle::thread::yield_now();
    }
}

/// Whether an optimistic read may take its fast path (`MapRef::read_fast`): always,
/// except under the model checker, which decides at random, so that it explores the
/// general path's validation too. The fast path handles nearly every read, and the
/// general one would otherwise run only after a retry (a model test found that a check
/// removed from the general path alone went unseen).
#[inline(always)]
pub fn read_fast_path() -> bool {
    #[cfg(not(shuttle))]
    return true;
    #[cfg(shuttle)]
    {
        use shuttle::rand::Rng;
        shuttle::rand::thread_rng().gen::<bool>()
    }
}

/// A named fail point (see the `failpoints` feature): nothing at all in normal builds.
macro_rules! failpoint {
    ($name:expr) => {
        #[cfg(feature = "failpoints")]
        fail::fail_point!($name);
    };
}
pub(crate) use failpoint;
