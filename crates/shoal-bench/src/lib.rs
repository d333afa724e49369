//! Harness pieces of the `shoal-bench` binary: key and value generation, the shuffled
//! lookup order, a cheap per-operation clock, latency summaries, a counting global
//! allocator and an RSS probe.
//!
//! The binary (`src/main.rs`) compares Shoal with an in-process
//! `hashbrown::HashMap<Vec<u8>, Vec<u8>, foldhash::fast::RandomState>`; see its `--help`.

#![warn(missing_docs)]

use std::alloc::{GlobalAlloc, Layout, System};
use std::sync::atomic::{AtomicUsize, Ordering::Relaxed};
use std::time::{Duration, Instant};

/// Length of every generated key and value, in bytes.
pub const ITEM_LEN: usize = 16;

/// Writes `prefix` followed by `i` as 12 zero-padded decimal digits (`key:%012d`).
pub fn format_item(out: &mut [u8; ITEM_LEN], prefix: &[u8; 4], i: u64) {
    out[..4].copy_from_slice(prefix);
    let mut v = i;
    for d in out[4..].iter_mut().rev() {
        *d = b'0' + (v % 10) as u8;
        v /= 10;
    }
}

/// `"00"`, `"01"`, … `"99"`: two digits per lookup, so that [`key_val`] formats 12 digits
/// with six table reads (the table stays in L1) and no loop over single digits.
const PAIRS: [[u8; 2]; 100] = {
    let mut t = [[0u8; 2]; 100];
    let mut i = 0;
    while i < 100 {
        t[i] = [b'0' + (i / 10) as u8, b'0' + (i % 10) as u8];
        i += 1;
    }
    t
};

/// Key `i` and value `i` (`key:%012d`, `val:%012d`), computed from `i` alone.
///
/// Benchmarks that visit keys in a random order use it to lay out each phase's keys in the
/// order the phase reads them, before timing: an array in key order read at random would
/// cost a cache miss per operation that belongs to the harness, and every system measured
/// would pay it. `i` must be below 10^12.
#[inline(always)]
pub fn key_val(i: u64) -> ([u8; ITEM_LEN], [u8; ITEM_LEN]) {
    debug_assert!(i < 1_000_000_000_000);
    let mut d = [0u8; 12];
    let (hi, lo) = ((i / 1_000_000) as u32, (i % 1_000_000) as u32);
    for (half, x) in [(0, hi), (6, lo)] {
        let (a, b) = (x / 10_000, x % 10_000);
        d[half..half + 2].copy_from_slice(&PAIRS[a as usize % 100]);
        d[half + 2..half + 4].copy_from_slice(&PAIRS[(b / 100) as usize]);
        d[half + 4..half + 6].copy_from_slice(&PAIRS[(b % 100) as usize]);
    }
    let mut k = *b"key:000000000000";
    let mut v = *b"val:000000000000";
    k[4..].copy_from_slice(&d);
    v[4..].copy_from_slice(&d);
    (k, v)
}

/// SplitMix64: a small, fast, deterministic generator (good enough to shuffle).
#[derive(Clone, Debug)]
pub struct SplitMix64(pub u64);

impl SplitMix64 {
    /// The next 64 random bits.
    pub fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }

    /// A uniform value in `0..n` (n > 0), by multiply-shift range reduction.
    pub fn below(&mut self, n: u64) -> u64 {
        ((self.next_u64() as u128 * n as u128) >> 64) as u64
    }
}

/// The keys, values and lookup order of one benchmark run, generated before any timing.
pub struct Data {
    /// `n` keys `key:%012d`, back to back.
    pub keys: Vec<u8>,
    /// `n` values `val:%012d`, back to back.
    pub vals: Vec<u8>,
    /// A random permutation of `0..n`: the order of the get passes.
    pub order: Vec<u32>,
    /// The keys again, laid out in `order`: the get passes read them front to back, so
    /// the harness's own key array costs no cache miss per get (read at random, it would
    /// cost one, to every system measured).
    pub get_keys: Vec<u8>,
}

impl Data {
    /// Generates `n` keys and values and a shuffled order (deterministic for `seed`).
    pub fn generate(n: usize, seed: u64) -> Data {
        assert!(n as u64 <= u32::MAX as u64, "at most 2^32 - 1 keys");
        let mut keys = vec![0u8; n * ITEM_LEN];
        let mut vals = vec![0u8; n * ITEM_LEN];
        for (i, (k, v)) in keys
            .chunks_exact_mut(ITEM_LEN)
            .zip(vals.chunks_exact_mut(ITEM_LEN))
            .enumerate()
        {
            format_item(k.try_into().expect("16-byte chunk"), b"key:", i as u64);
            format_item(v.try_into().expect("16-byte chunk"), b"val:", i as u64);
        }
        let order = shuffled(n, seed);
        let mut get_keys = vec![0u8; n * ITEM_LEN];
        for (dst, &i) in get_keys.chunks_exact_mut(ITEM_LEN).zip(&order) {
            dst.copy_from_slice(&keys[i as usize * ITEM_LEN..(i as usize + 1) * ITEM_LEN]);
        }
        Data {
            keys,
            vals,
            order,
            get_keys,
        }
    }

    /// The `j`-th key of the get order.
    #[inline(always)]
    pub fn get_key(&self, j: usize) -> &[u8] {
        &self.get_keys[j * ITEM_LEN..(j + 1) * ITEM_LEN]
    }

    /// Number of keys.
    pub fn len(&self) -> usize {
        self.keys.len() / ITEM_LEN
    }

    /// Whether there are no keys.
    pub fn is_empty(&self) -> bool {
        self.keys.is_empty()
    }

    /// Key number `i`.
    #[inline(always)]
    pub fn key(&self, i: usize) -> &[u8] {
        &self.keys[i * ITEM_LEN..(i + 1) * ITEM_LEN]
    }

    /// Value number `i`.
    #[inline(always)]
    pub fn val(&self, i: usize) -> &[u8] {
        &self.vals[i * ITEM_LEN..(i + 1) * ITEM_LEN]
    }
}

/// A random permutation of `0..n` (Fisher-Yates with [`SplitMix64`]).
pub fn shuffled(n: usize, seed: u64) -> Vec<u32> {
    let mut v: Vec<u32> = (0..n as u32).collect();
    let mut r = SplitMix64(seed);
    for i in (1..n).rev() {
        let j = r.below(i as u64 + 1) as usize;
        v.swap(i, j);
    }
    v
}

/// A cheap monotonic tick counter for timing single operations: the TSC on x86_64
/// (calibrated against [`Instant`]), nanoseconds since creation elsewhere.
#[derive(Clone, Copy, Debug)]
pub struct Clock {
    /// Ticks per microsecond.
    pub ticks_per_us: f64,
    #[cfg_attr(target_arch = "x86_64", allow(dead_code))]
    origin: Instant,
}

impl Clock {
    /// Calibrates the tick rate over about `over` of wall time (busy-waiting).
    pub fn calibrate(over: Duration) -> Clock {
        let origin = Instant::now();
        if cfg!(target_arch = "x86_64") {
            let c = Clock {
                ticks_per_us: 1.0,
                origin,
            };
            let t0 = Instant::now();
            let k0 = c.now();
            while t0.elapsed() < over {
                std::hint::spin_loop();
            }
            let k1 = c.now();
            let us = t0.elapsed().as_secs_f64() * 1e6;
            Clock {
                ticks_per_us: (k1 - k0) as f64 / us,
                origin,
            }
        } else {
            Clock {
                ticks_per_us: 1e-3,
                origin,
            }
        }
    }

    /// The current tick count.
    #[inline(always)]
    pub fn now(&self) -> u64 {
        #[cfg(target_arch = "x86_64")]
        {
            // SAFETY: RDTSC has no preconditions; it only reads the time-stamp counter.
            unsafe { core::arch::x86_64::_rdtsc() }
        }
        #[cfg(not(target_arch = "x86_64"))]
        {
            self.origin.elapsed().as_nanos() as u64
        }
    }

    /// Converts ticks to microseconds.
    pub fn to_us(&self, ticks: u64) -> f64 {
        ticks as f64 / self.ticks_per_us
    }
}

/// Summary of per-operation latencies.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Latency {
    /// The longest single operation, µs.
    pub max_us: f64,
    /// Which operation (0-based, in insertion order) was the longest.
    pub max_at: usize,
    /// 99th percentile, µs.
    pub p99_us: f64,
    /// 99.99th percentile, µs.
    pub p9999_us: f64,
    /// 99.999th percentile, µs.
    pub p99999_us: f64,
    /// Operations longer than 100 µs.
    pub over_100us: usize,
    /// Operations longer than 1 ms.
    pub over_1ms: usize,
    /// The five longest operations: (index, µs), longest first.
    pub top: Vec<(usize, f64)>,
}

/// Summarises per-operation tick counts (reorders `ticks`).
pub fn summarize(ticks: &mut [u64], clock: &Clock) -> Latency {
    if ticks.is_empty() {
        return Latency::default();
    }
    let us = |t: u64| clock.to_us(t);
    let lim100 = (100.0 * clock.ticks_per_us) as u64;
    let lim1ms = (1000.0 * clock.ticks_per_us) as u64;
    let mut top: Vec<(usize, u64)> = Vec::with_capacity(6);
    let (mut over_100us, mut over_1ms) = (0, 0);
    for (i, &t) in ticks.iter().enumerate() {
        over_100us += (t > lim100) as usize;
        over_1ms += (t > lim1ms) as usize;
        if top.len() < 5 || t > top[top.len() - 1].1 {
            let pos = top.iter().position(|e| t > e.1).unwrap_or(top.len());
            top.insert(pos, (i, t));
            top.truncate(5);
        }
    }
    let n = ticks.len();
    let mut pct = |p: f64| {
        let k = (((n as f64) * p).ceil() as usize).clamp(1, n) - 1;
        let (_, v, _) = ticks.select_nth_unstable(k);
        us(*v)
    };
    // Highest first: each selection leaves the array partitioned for the next.
    let p99999_us = pct(0.99999);
    let p9999_us = pct(0.9999);
    let p99_us = pct(0.99);
    Latency {
        max_us: us(top[0].1),
        max_at: top[0].0,
        p99_us,
        p9999_us,
        p99999_us,
        over_100us,
        over_1ms,
        top: top.iter().map(|&(i, t)| (i, us(t))).collect(),
    }
}

static ALLOCATED: AtomicUsize = AtomicUsize::new(0);
static PEAK: AtomicUsize = AtomicUsize::new(0);

/// A global allocator that forwards to [`System`] and counts bytes currently allocated
/// (as requested, not as rounded up by malloc).
///
/// The counters are updated with a plain load and store, not an atomic read-modify-write,
/// so the cost per allocation is a few cycles; updates from threads running at the same
/// time could be lost, which is fine here because the measured phases are single-threaded.
pub struct CountingAlloc;

// SAFETY: every call is forwarded unchanged to the system allocator; the bookkeeping
// touches only two counters.
unsafe impl GlobalAlloc for CountingAlloc {
    #[inline]
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        // SAFETY: forwarded with the caller's guarantees.
        let p = unsafe { System.alloc(layout) };
        if !p.is_null() {
            add(layout.size());
        }
        p
    }

    #[inline]
    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        // SAFETY: forwarded with the caller's guarantees.
        let p = unsafe { System.alloc_zeroed(layout) };
        if !p.is_null() {
            add(layout.size());
        }
        p
    }

    #[inline]
    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        // SAFETY: forwarded with the caller's guarantees.
        unsafe { System.dealloc(ptr, layout) };
        ALLOCATED.store(ALLOCATED.load(Relaxed).wrapping_sub(layout.size()), Relaxed);
    }

    #[inline]
    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        // SAFETY: forwarded with the caller's guarantees.
        let p = unsafe { System.realloc(ptr, layout, new_size) };
        if !p.is_null() {
            ALLOCATED.store(ALLOCATED.load(Relaxed).wrapping_sub(layout.size()), Relaxed);
            add(new_size);
        }
        p
    }
}

#[inline(always)]
fn add(n: usize) {
    let cur = ALLOCATED.load(Relaxed).wrapping_add(n);
    ALLOCATED.store(cur, Relaxed);
    if cur > PEAK.load(Relaxed) {
        PEAK.store(cur, Relaxed);
    }
}

/// Bytes currently allocated through [`CountingAlloc`] (0 if it is not the global allocator).
pub fn allocated_bytes() -> usize {
    ALLOCATED.load(Relaxed)
}

/// The highest [`allocated_bytes`] seen since the last [`reset_peak`].
pub fn peak_bytes() -> usize {
    PEAK.load(Relaxed)
}

/// Restarts peak tracking from the current allocation level.
pub fn reset_peak() {
    PEAK.store(ALLOCATED.load(Relaxed), Relaxed);
}

/// Resident set size of this process, in bytes (Linux `/proc/self/statm`).
pub fn rss_bytes() -> Option<u64> {
    let s = std::fs::read_to_string("/proc/self/statm").ok()?;
    let pages: u64 = s.split_whitespace().nth(1)?.parse().ok()?;
    // SAFETY: sysconf has no preconditions.
    let page = unsafe { libc::sysconf(libc::_SC_PAGESIZE) };
    Some(pages * if page > 0 { page as u64 } else { 4096 })
}

/// CPU time consumed by the calling thread, in nanoseconds.
pub fn thread_cpu_ns() -> u64 {
    clock_ns(libc::CLOCK_THREAD_CPUTIME_ID)
}

/// CLOCK_MONOTONIC in nanoseconds: one clock for every process of the machine, so a
/// timestamp taken in one process and a clock read in another can be subtracted.
pub fn mono_ns() -> u64 {
    clock_ns(libc::CLOCK_MONOTONIC)
}

fn clock_ns(clock: libc::clockid_t) -> u64 {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: clock_gettime writes one timespec.
    unsafe { libc::clock_gettime(clock, &mut ts) };
    ts.tv_sec as u64 * 1_000_000_000 + ts.tv_nsec as u64
}

/// The calling thread's scheduler statistics (`/proc/thread-self/schedstat`), kept open
/// so that one read is a single `pread`.
pub struct SchedStat(std::fs::File);

impl SchedStat {
    /// Opens the calling thread's schedstat file (None where the kernel has none).
    pub fn open() -> Option<SchedStat> {
        let f = std::fs::File::open("/proc/thread-self/schedstat").ok()?;
        let mut s = SchedStat(f);
        s.wait_ns()?;
        Some(s)
    }

    /// Total time the thread has spent runnable but waiting for a CPU, in nanoseconds.
    pub fn wait_ns(&mut self) -> Option<u64> {
        use std::os::unix::fs::FileExt;
        let mut b = [0u8; 96];
        let n = self.0.read_at(&mut b, 0).ok()?;
        std::str::from_utf8(&b[..n])
            .ok()?
            .split_whitespace()
            .nth(1)?
            .parse()
            .ok()
    }
}

/// Wall time, thread CPU time and scheduler wait of one timed phase.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct PhaseTime {
    /// Wall-clock seconds.
    pub secs: f64,
    /// Thread CPU time over wall time: below 1.0 the thread was not running all along
    /// (another process had the CPU, or it slept).
    pub cpu_share: f64,
    /// Milliseconds spent runnable but waiting for a CPU (another process had it).
    pub wait_ms: f64,
}

/// Measures a phase: call [`Phase::end`] when it is over.
pub struct Phase {
    t: Instant,
    cpu: u64,
    wait: Option<u64>,
}

impl Phase {
    /// Starts measuring (reads the clocks; `sched` gives the wait time, if available).
    pub fn start(sched: &mut Option<SchedStat>) -> Phase {
        let wait = sched.as_mut().and_then(|s| s.wait_ns());
        let cpu = thread_cpu_ns();
        Phase {
            t: Instant::now(),
            cpu,
            wait,
        }
    }

    /// Ends the phase; returns its wall duration and its [`PhaseTime`].
    pub fn end(self, sched: &mut Option<SchedStat>) -> (Duration, PhaseTime) {
        let d = self.t.elapsed();
        let cpu = thread_cpu_ns() - self.cpu;
        let wait = match (self.wait, sched.as_mut().and_then(|s| s.wait_ns())) {
            (Some(a), Some(b)) => (b - a) as f64 / 1e6,
            _ => f64::NAN,
        };
        (
            d,
            PhaseTime {
                secs: d.as_secs_f64(),
                cpu_share: cpu as f64 / d.as_nanos().max(1) as f64,
                wait_ms: wait,
            },
        )
    }
}

/// Millions of operations per second.
pub fn mops(ops: usize, d: Duration) -> f64 {
    ops as f64 / d.as_secs_f64() / 1e6
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keys_are_formatted_like_printf() {
        let mut k = [0u8; ITEM_LEN];
        format_item(&mut k, b"key:", 42);
        assert_eq!(&k, b"key:000000000042");
        format_item(&mut k, b"val:", 999_999_999_999);
        assert_eq!(&k, b"val:999999999999");
        let d = Data::generate(1000, 7);
        assert_eq!(d.len(), 1000);
        assert_eq!(d.key(17), format!("key:{:012}", 17).as_bytes());
        assert_eq!(d.val(999), format!("val:{:012}", 999).as_bytes());
    }

    #[test]
    fn generated_items_match_the_stored_ones() {
        let d = Data::generate(1000, 7);
        for i in (0..1000).chain([999_999, 1_000_000, 123_456_789_012, 999_999_999_999]) {
            let (k, v) = key_val(i as u64);
            assert_eq!(k[..], *format!("key:{i:012}").as_bytes(), "key {i}");
            assert_eq!(v[..], *format!("val:{i:012}").as_bytes(), "value {i}");
            if i < 1000 {
                assert_eq!((&k[..], &v[..]), (d.key(i), d.val(i)));
            }
        }
    }

    #[test]
    fn shuffle_is_a_permutation() {
        let mut v = shuffled(10_000, 1);
        assert_ne!(v, (0..10_000).collect::<Vec<u32>>());
        v.sort_unstable();
        assert_eq!(v, (0..10_000).collect::<Vec<u32>>());
    }

    #[test]
    fn summary_percentiles() {
        let clock = Clock {
            ticks_per_us: 1.0,
            origin: Instant::now(),
        };
        let mut t: Vec<u64> = (1..=100_000).collect();
        t.swap(0, 99_999); // the longest is now operation 0
        let s = summarize(&mut t, &clock);
        assert_eq!(s.max_us, 100_000.0);
        assert_eq!(s.max_at, 0);
        assert_eq!(s.p99_us, 99_000.0);
        assert_eq!(s.p9999_us, 99_990.0);
        assert_eq!(s.over_1ms, 100_000 - 1000);
        assert_eq!(s.top.len(), 5);
        assert_eq!(s.top[1].1, 99_999.0);
    }
}
