//! What every side of a queue benchmark measure does alike, whatever system it drives: the
//! shared clock, pinning, the count of its sleeps, and its half of the protocol with the
//! parent (`ready`, `go START WARM END`, `done ...`; see the parent module).
//!
//! The `shoal-iceoryx2-peer` binary includes this file as a module of its own (by path), so
//! that both kinds of child keep one protocol and one clock while the `shoal` tool does not
//! build iceoryx2. It uses only std and rustix for that reason.

use std::io::{self, BufRead, Write};
use std::time::Duration;

/// CLOCK_MONOTONIC in ns: the clock both sides of a latency measure read, in two processes.
/// (`Instant` reads the same clock but does not show its value.)
#[inline]
pub fn clock_ns() -> u64 {
    let t = rustix::time::clock_gettime(rustix::time::ClockId::Monotonic);
    t.tv_sec as u64 * 1_000_000_000 + t.tv_nsec as u64
}

/// Pins the calling process to `cpu` (a negative one: leaves it where it is).
pub fn pin(cpu: i32) -> io::Result<()> {
    if cpu < 0 {
        return Ok(());
    }
    let bad = |why: String| io::Error::new(io::ErrorKind::InvalidInput, why);
    if cpu as usize >= rustix::thread::CpuSet::MAX_CPU {
        return Err(bad(format!("cpu {cpu} out of range")));
    }
    let mut set = rustix::thread::CpuSet::new();
    set.set(cpu as usize);
    rustix::thread::sched_setaffinity(None, &set)
        .map_err(|e| bad(format!("cannot pin to cpu {cpu}: {e}")))
}

/// Times the calling thread gave up its cpu to wait (a sleep in a blocking read, a futex):
/// whether a receiver really slept before each message. From the kernel's count in
/// `/proc/thread-self/status`; 0 where that file is missing (the figure then says nothing,
/// and nothing else depends on it).
pub fn voluntary_switches() -> u64 {
    std::fs::read_to_string("/proc/thread-self/status")
        .ok()
        .and_then(|s| {
            s.lines()
                .find_map(|l| l.strip_prefix("voluntary_ctxt_switches:"))
                .and_then(|v| v.trim().parse().ok())
        })
        .unwrap_or(0)
}

/// The parent's times: count from `warm`, stop at `end` (CLOCK_MONOTONIC ns).
pub struct Go {
    /// When counting starts.
    pub warm: u64,
    /// When the measure ends.
    pub end: u64,
}

/// Says `ready` and waits for the parent's `go START WARM END`, then until START.
pub fn ready_go() -> io::Result<Go> {
    let mut out = io::stdout().lock();
    writeln!(out, "ready")?;
    out.flush()?;
    let mut line = String::new();
    io::stdin().lock().read_line(&mut line)?;
    let bad = || {
        io::Error::new(
            io::ErrorKind::InvalidData,
            format!("bad `go` line {line:?}"),
        )
    };
    let f: Vec<u64> = line
        .strip_prefix("go ")
        .ok_or_else(bad)?
        .split_ascii_whitespace()
        .map(|x| x.parse::<u64>())
        .collect::<Result<_, _>>()
        .map_err(|_| bad())?;
    let [start, warm, end] = f[..] else {
        return Err(bad());
    };
    // Sleep through most of the wait: a spinning process would take the cpu from the
    // other side's setup.
    let now = clock_ns();
    if start > now + 2_000_000 {
        std::thread::sleep(Duration::from_nanos(start - now - 2_000_000));
    }
    while clock_ns() < start {
        std::hint::spin_loop();
    }
    Ok(Go { warm, end })
}

/// Says what was measured: `done count=N secs=S errors=E`, then `extra` (` key=value ...`).
pub fn done(count: u64, secs: f64, errors: u64, extra: &str) -> io::Result<()> {
    let mut out = io::stdout().lock();
    writeln!(
        out,
        "done count={count} secs={secs:.9} errors={errors}{extra}"
    )?;
    out.flush()
}
