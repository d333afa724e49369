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

/// Traces one step of the allocator or of recovery, one line per step, to the file named
/// by the `SHOAL_TRACE` environment variable (the `paranoid` feature, for soaks: a chunk's
/// history can then be read back across processes): nothing without the feature.
macro_rules! trace {
    ($($arg:tt)*) => {
        #[cfg(feature = "paranoid")]
        $crate::rt::trace_line(format_args!($($arg)*));
    };
}
pub(crate) use trace;

#[cfg(feature = "paranoid")]
pub(crate) use trace_on::trace_line;

#[cfg(feature = "paranoid")]
mod trace_on {
    use std::io::Write;
    use std::sync::{Mutex, OnceLock};

    fn trace_file() -> Option<&'static Mutex<std::fs::File>> {
        static F: OnceLock<Option<Mutex<std::fs::File>>> = OnceLock::new();
        F.get_or_init(|| {
            let p = std::env::var_os("SHOAL_TRACE")?;
            std::fs::OpenOptions::new()
                .create(true)
                .append(true)
                .open(p)
                .ok()
                .map(Mutex::new)
        })
        .as_ref()
    }

    /// Appends "µs-since-epoch pid tid message" to the trace file, in one write (the file
    /// is opened for appending, so the lines of many processes do not interleave).
    pub(crate) fn trace_line(msg: std::fmt::Arguments) {
        if let Some(f) = trace_file() {
            let t = std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map_or(0, |d| d.as_micros());
            let line = format!(
                "{t} {} {} {msg}\n",
                std::process::id(),
                rustix::thread::gettid().as_raw_nonzero()
            );
            let _ = f
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .write_all(line.as_bytes());
        }
    }
}
