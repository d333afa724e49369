//! `shoal-bench`: Shoal against an in-process
//! `hashbrown::HashMap<Vec<u8>, Vec<u8>, foldhash::fast::RandomState>`, in one run.
//!
//! For N keys `key:%012d` with 16-byte values `val:%012d` it measures
//! * put: N inserts into an empty map (hashbrown without `reserve`), as throughput, and in
//!   a second pass timed one put at a time (longest put, percentiles);
//! * get: N gets of existing keys in one pre-shuffled order (the keys laid out in that
//!   order before timing, so the harness's own key array costs no cache miss), both
//!   returning a copy of the value in a reused buffer (and hashbrown also without the
//!   copy); and the first 1 M of
//!   them in a dependent chain, each key chosen with the previous get's value (a get's
//!   latency, where the plain loop measures how many gets the CPU overlaps);
//! * bytes per entry: Shoal's file size, hashbrown's heap bytes (counting allocator) and
//!   RSS growth;
//! * two processes (forked) doing N gets each over the same store at once, against one
//!   forked process doing the same alone just before them.
//!
//! `cargo run --release -p shoal-bench -- --help`

use shoal_bench::{
    mops, rss_bytes, summarize, thread_cpu_ns, Clock, CountingAlloc, Data, Latency, Phase,
    PhaseTime, SchedStat, ITEM_LEN,
};
use std::fmt::Write as _;
use std::hint::black_box;
use std::process::ExitCode;
use std::time::{Duration, Instant};

#[global_allocator]
static GLOBAL: CountingAlloc = CountingAlloc;

type HbMap = hashbrown::HashMap<Vec<u8>, Vec<u8>, foldhash::fast::RandomState>;

const HELP: &str = "\
shoal-bench: Shoal vs an in-process hashbrown HashMap (foldhash), in one run.

USAGE: shoal-bench [--keys N] [--reps R] [--store PATH] [--keep] [--no-latency] [--no-two-proc]
                   [--no-fixed] [--only shoal|hashbrown] [--json] [--seed S]

  --keys N       number of keys (default 10000000); keys key:%012d, values val:%012d (16 B each)
  --reps R       repetitions of each get pass and of the two-process pass (one forked
                 process alone, then two at once); the best is reported (default 2)
  --store PATH   the store file (default /dev/shm/shoal-bench-PID.shoal; a bare name means
                 /dev/shm/NAME.shoal); a second file PATH-lat is used for the latency pass,
                 and a third, PATH-fixed, for the fixed-size map
  --keep         keep the store file(s) at the end (default: destroyed)
  --no-latency   skip the per-put timing passes
  --json         print the results as one JSON object on stdout instead of the table
  --seed S       seed of the shuffled get order (default 1)
  --only WHICH   run only the phases of `shoal` or of `hashbrown` (for profiling; the
                 ratios are then meaningless)
  --no-two-proc  skip the two-process pass
  --no-fixed     skip the fixed-size map (the same keys and values in a 16+16 fixed map,
                 in a store of its own, destroyed before the two-process pass: its puts,
                 gets and bytes per entry)

Progress goes to stderr. Build with --release.";

struct Args {
    keys: usize,
    reps: usize,
    store: Option<String>,
    keep: bool,
    latency: bool,
    json: bool,
    seed: u64,
    shoal: bool,
    hashbrown: bool,
    two_proc: bool,
    fixed: bool,
}

fn parse_args() -> Result<Option<Args>, String> {
    let mut a = Args {
        keys: 10_000_000,
        reps: 2,
        store: None,
        keep: false,
        latency: true,
        json: false,
        seed: 1,
        shoal: true,
        hashbrown: true,
        two_proc: true,
        fixed: true,
    };
    let mut it = std::env::args().skip(1);
    while let Some(arg) = it.next() {
        let mut val = |name: &str| it.next().ok_or_else(|| format!("{name} needs a value"));
        match arg.as_str() {
            "--keys" => a.keys = parse_num(&val("--keys")?)?,
            "--reps" => a.reps = parse_num(&val("--reps")?)?.max(1),
            "--seed" => a.seed = parse_num(&val("--seed")?)? as u64,
            "--store" => a.store = Some(val("--store")?),
            "--keep" => a.keep = true,
            "--no-latency" => a.latency = false,
            "--no-two-proc" => a.two_proc = false,
            "--no-fixed" => a.fixed = false,
            "--only" => match val("--only")?.as_str() {
                "shoal" => a.hashbrown = false,
                "hashbrown" => a.shoal = false,
                other => return Err(format!("--only takes shoal or hashbrown, not {other:?}")),
            },
            "--json" => a.json = true,
            "-h" | "--help" => return Ok(None),
            other => return Err(format!("unknown argument {other:?} (see --help)")),
        }
    }
    if a.keys < 2 || a.keys > u32::MAX as usize {
        return Err("--keys must be from 2 to 2^32 - 1".into());
    }
    Ok(Some(a))
}

fn parse_num(s: &str) -> Result<usize, String> {
    s.replace(['_', ','], "")
        .parse()
        .map_err(|_| format!("not a number: {s:?}"))
}

/// Progress on stderr, with the time since start.
struct Progress(Instant);

impl Progress {
    fn say(&self, what: impl AsRef<str>) {
        eprintln!(
            "[{:7.1}s] {}",
            self.0.elapsed().as_secs_f64(),
            what.as_ref()
        );
    }
}

/// A put pass: throughput, and latencies when timed one at a time.
#[derive(Default)]
struct Put {
    mops: f64,
    time: PhaseTime,
    /// Per-put latencies as measured.
    lat: Option<Latency>,
    /// The same with the time the thread spent waiting for a CPU subtracted from each slow
    /// put (see [`timed_pass`]).
    lat_own: Option<Latency>,
    /// Per-put thread CPU time (`CLOCK_THREAD_CPUTIME_ID`): what the put itself cost,
    /// without waits for a CPU and, on a KVM guest that accounts steal time (this kind of
    /// machine), without the time the host ran something else.
    lat_cpu: Option<Latency>,
}

#[derive(Default)]
struct HbMem {
    heap_per_entry: f64,
    peak_per_entry: f64,
    rss_per_entry: f64,
}

#[derive(Default)]
struct ShoalMem {
    file_size: u64,
    data_bytes: u64,
    live_bytes: u64,
    free_bytes: u64,
    segments: u64,
    segment_bytes: u64,
    directory_bytes: u64,
    splits: u64,
}

/// One get pass.
#[derive(Clone, Copy, Default)]
struct Get {
    mops: f64,
    time: PhaseTime,
}

#[derive(Default)]
struct Results {
    n: usize,
    reps: usize,
    gen_secs: f64,
    ticks_per_us: f64,
    loadavg_start: String,
    loadavg_end: String,
    hb_put: Put,
    hb_put_lat: Put,
    hb_mem: HbMem,
    sh_put: Put,
    sh_put_lat: Put,
    /// The timed pass again around pure computation as long as Shoal's mean put, touching
    /// as much fresh memory: what the harness and the machine alone make of the longest
    /// "operation" (see [`noise_pass`]).
    noise_lat: Put,
    sh_mem: ShoalMem,
    sh_get: Vec<Get>,
    sh_get_many: Vec<Get>,
    hb_get_copy: Vec<Get>,
    hb_get_ref: Vec<Get>,
    /// Gets in a dependent chain (each key chosen with the previous get's value), over
    /// the first [`CHAIN_GETS`] keys of the get order.
    sh_get_chain: Vec<Get>,
    hb_get_chain: Vec<Get>,
    two_proc: Vec<TwoProc>,
    /// The same keys in a fixed-size map of 16+16 bytes (`--no-fixed` skips it): its
    /// insert pass, its get passes, and its file bytes per entry.
    fx_put: Put,
    fx_get: Vec<Get>,
    fx_bytes_per_entry: f64,
}

#[derive(Clone, Copy, Default)]
struct TwoProc {
    /// 2N / the slower process's time, M ops/s.
    total_mops: f64,
    /// Each process's own rate, M ops/s.
    each: [f64; 2],
    /// Each process's CPU share during its timed pass.
    cpu_share: [f64; 2],
    /// One forked process alone, run just before the pair in the same way (a warm-up
    /// pass, then N timed gets): M ops/s, and its CPU share. The baseline of the
    /// two-process target: the same code under the same conditions, seconds before the
    /// pair rather than minutes (the get passes run long before, on a host whose speed
    /// drifts).
    solo_mops: f64,
    solo_cpu_share: f64,
}

/// The best (highest) rate of a list of passes.
fn best(v: &[Get]) -> Get {
    v.iter()
        .copied()
        .fold(Get::default(), |a, b| if b.mops > a.mops { b } else { a })
}

fn loadavg() -> String {
    std::fs::read_to_string("/proc/loadavg")
        .map(|s| s.split_whitespace().take(3).collect::<Vec<_>>().join(" "))
        .unwrap_or_default()
}

fn main() -> ExitCode {
    let args = match parse_args() {
        Ok(Some(a)) => a,
        Ok(None) => {
            println!("{HELP}");
            return ExitCode::SUCCESS;
        }
        Err(e) => {
            eprintln!("shoal-bench: {e}");
            return ExitCode::from(2);
        }
    };
    if cfg!(debug_assertions) {
        eprintln!("shoal-bench: warning: a debug build; numbers are meaningless (use --release)");
    }
    let path = shoal::resolve_path(
        args.store
            .clone()
            .unwrap_or_else(|| format!("shoal-bench-{}", std::process::id())),
    );
    let lat_path = std::path::PathBuf::from(format!("{}-lat", path.display()));
    let r = run(&args, &path, &lat_path);
    if !args.keep {
        let _ = shoal::Store::destroy(&path);
        let _ = shoal::Store::destroy(&lat_path);
    }
    let _ = shoal::Store::destroy(fixed_path(&path));
    match r {
        Ok(res) => {
            if args.json {
                println!("{}", json(&res));
            } else {
                print!("{}", table(&res));
            }
            ExitCode::SUCCESS
        }
        Err(e) => {
            eprintln!("shoal-bench: {e}");
            ExitCode::FAILURE
        }
    }
}

/// Times each of `n` calls of `op(i)` with the cycle counter, into `lat` (touched
/// beforehand, so the loop never faults on it).
///
/// A machine shared with other work preempts the thread now and then, which makes
/// some operation look milliseconds long. So after every put longer than 50 µs (and
/// outside the timed interval) the thread's scheduler wait is read
/// (`/proc/thread-self/schedstat`): the wait accrued since the previous such read is
/// subtracted from that put in a second summary, which is then the put's own time
/// (within the few µs that fast puts may have waited in between).
fn timed_pass(
    n: usize,
    clock: &Clock,
    sched: &mut Option<SchedStat>,
    lat: &mut [u64],
    mut op: impl FnMut(usize) -> Result<(), String>,
) -> Result<Put, String> {
    let slow = (50.0 * clock.ticks_per_us) as u64;
    let mut waits: Vec<(usize, u64)> = Vec::with_capacity(1 << 16);
    let mut last_wait = sched.as_mut().and_then(|s| s.wait_ns()).unwrap_or(0);
    let mut cpu: Vec<u64> = vec![1; n]; // touched now, not inside the timed loop
    let phase = Phase::start(sched);
    let mut prev = clock.now();
    let mut cpu_prev = thread_cpu_ns();
    for (i, slot) in lat.iter_mut().enumerate().take(n) {
        op(i)?;
        let c = thread_cpu_ns();
        cpu[i] = c - cpu_prev;
        cpu_prev = c;
        let now = clock.now();
        let d = now - prev;
        *slot = d;
        if d > slow {
            if let Some(w) = sched.as_mut().and_then(|s| s.wait_ns()) {
                waits.push((i, w - last_wait));
                last_wait = w;
            }
            prev = clock.now();
        } else {
            prev = now;
        }
    }
    let (d, time) = phase.end(sched);
    let mut own = lat[..n].to_vec();
    for (i, w_ns) in waits {
        let w = (w_ns as f64 * clock.ticks_per_us / 1000.0) as u64;
        own[i] -= w.min(own[i]);
    }
    // Nanoseconds to clock ticks, so one summary function serves both.
    for c in cpu.iter_mut() {
        *c = (*c as f64 * clock.ticks_per_us / 1000.0) as u64;
    }
    Ok(Put {
        mops: mops(n, d),
        time,
        lat: Some(summarize(&mut lat[..n], clock)),
        lat_own: Some(summarize(&mut own, clock)),
        lat_cpu: Some(summarize(&mut cpu, clock)),
    })
}

/// The noise floor of the longest-put figures: [`timed_pass`] over `n` steps, each about
/// `step_ns` of pure computation plus a one-byte write into `fresh_bytes` of memory never
/// touched before, spread evenly over the steps (so the steps fault in as many fresh pages
/// as Shoal's puts did while its file grew to that size).
///
/// Why: on this kind of machine (a KVM guest on a shared host) a thread now and then
/// loses milliseconds that the guest still counts as its CPU time: a profile of such a put
/// shows no sample at all for the whole gap, which is the host stalling the vCPU, mostly
/// while it backs a page the guest touches for the first time. Any store that grows
/// touches fresh pages, and a loop of arithmetic that does the same sees the same stalls,
/// so whatever this pass reports as its longest step no put can be shown to be shorter
/// than; it is printed beside the longest put.
fn noise_pass(
    n: usize,
    step_ns: f64,
    fresh_bytes: usize,
    clock: &Clock,
    sched: &mut Option<SchedStat>,
    lat: &mut [u64],
) -> Result<Put, String> {
    fn spin(k: u64, x: u64) -> u64 {
        (0..k).fold(x, |x, _| {
            x.wrapping_mul(6364136223846793005).wrapping_add(1)
        })
    }
    // Calibrate the steps per op: a dependent multiply-add chain, about 1 ns a step.
    let t = Instant::now();
    let probe = 10_000_000u64;
    std::hint::black_box(spin(probe, std::hint::black_box(1)));
    let per_step = t.elapsed().as_nanos() as f64 / probe as f64;
    let k = ((step_ns / per_step.max(0.01)) as u64).max(1);
    // A large zeroed allocation is a fresh mapping (calloc does not touch it): each page
    // is allocated by the kernel when the loop first writes to it.
    let mut fresh = vec![0u8; fresh_bytes.max(1)];
    let per = fresh.len() as f64 / n.max(1) as f64;
    let mut x = 1u64;
    let r = timed_pass(n, clock, sched, lat, |i| {
        x = spin(k, std::hint::black_box(x));
        fresh[(i as f64 * per) as usize] = x as u8;
        Ok(())
    });
    std::hint::black_box(&fresh);
    std::hint::black_box(x);
    r
}

fn run(args: &Args, path: &std::path::Path, lat_path: &std::path::Path) -> Result<Results, String> {
    let p = Progress(Instant::now());
    let n = args.keys;
    let mut res = Results {
        n,
        reps: args.reps,
        loadavg_start: loadavg(),
        ..Default::default()
    };
    let mut sched = SchedStat::open();
    let t = Instant::now();
    let data = Data::generate(n, args.seed);
    res.gen_secs = t.elapsed().as_secs_f64();
    let clock = Clock::calibrate(Duration::from_millis(100));
    res.ticks_per_us = clock.ticks_per_us;
    p.say(format!(
        "generated {n} keys and values in {:.2} s; clock {:.1} ticks/µs; load average {}",
        res.gen_secs, clock.ticks_per_us, res.loadavg_start
    ));
    let mut lat = if args.latency {
        vec![1u64; n]
    } else {
        Vec::new()
    };
    let hb = if args.hashbrown {
        Some(hashbrown_puts(
            args, &data, &clock, &mut sched, &mut lat, &mut res, &p,
        )?)
    } else {
        None
    };
    let shoal = if args.shoal {
        Some(shoal_puts(
            args, path, lat_path, &data, &clock, &mut sched, &mut lat, &mut res, &p,
        )?)
    } else {
        None
    };
    drop(lat);
    let fixed = if args.shoal && args.fixed {
        Some(fixed_puts(
            &fixed_path(path),
            &data,
            &mut sched,
            &mut res,
            &p,
        )?)
    } else {
        None
    };

    // ---- gets, interleaved so that noise hits both alike; the best rep counts.
    let want = expected_sum(&data);
    let mut buf: Vec<u8> = Vec::with_capacity(64);
    for rep in 0..args.reps {
        if let Some((_, map)) = &shoal {
            let phase = Phase::start(&mut sched);
            let (sum, miss) = shoal_gets(map, &data.get_keys, &mut buf)?;
            let (d, time) = phase.end(&mut sched);
            check(sum, miss, want, "Shoal get")?;
            res.sh_get.push(Get {
                mops: mops(n, d),
                time,
            });
            let phase = Phase::start(&mut sched);
            let (sum, miss) = shoal_get_many(map, &data, &mut buf)?;
            let (d, time) = phase.end(&mut sched);
            check(sum, miss, want, "Shoal get_many")?;
            res.sh_get_many.push(Get {
                mops: mops(n, d),
                time,
            });
        }
        if let Some((_, fm)) = &fixed {
            let phase = Phase::start(&mut sched);
            let (sum, miss) = fixed_gets(fm, &data)?;
            let (d, time) = phase.end(&mut sched);
            check(sum, miss, want, "Shoal fixed-map get")?;
            res.fx_get.push(Get {
                mops: mops(n, d),
                time,
            });
        }
        let chain = &data.order[..CHAIN_GETS.min(n)];
        let want_chain = chain.iter().map(|&i| data.val(i as usize)[15] as u64).sum();
        if let Some((_, map)) = &shoal {
            let phase = Phase::start(&mut sched);
            let (sum, miss) = shoal_gets_chained(map, &data, chain.len(), &mut buf, black_box(0))?;
            let (d, time) = phase.end(&mut sched);
            check(sum, miss, want_chain, "Shoal chained get")?;
            res.sh_get_chain.push(Get {
                mops: mops(chain.len(), d),
                time,
            });
        }
        if let Some(hb) = &hb {
            let phase = Phase::start(&mut sched);
            let (sum, miss) = hb_gets_chained(hb, &data, chain.len(), &mut buf, black_box(0));
            let (d, time) = phase.end(&mut sched);
            check(sum, miss, want_chain, "hashbrown chained get")?;
            res.hb_get_chain.push(Get {
                mops: mops(chain.len(), d),
                time,
            });
        }
        if let Some(hb) = &hb {
            let phase = Phase::start(&mut sched);
            let (sum, miss) = hb_gets_copy(hb, &data, &mut buf);
            let (d, time) = phase.end(&mut sched);
            check(sum, miss, want, "hashbrown get")?;
            res.hb_get_copy.push(Get {
                mops: mops(n, d),
                time,
            });
            let phase = Phase::start(&mut sched);
            let miss = hb_gets_ref(hb, &data);
            let (d, time) = phase.end(&mut sched);
            check(want, miss, want, "hashbrown get (no copy)")?;
            res.hb_get_ref.push(Get {
                mops: mops(n, d),
                time,
            });
        }
        let g = |v: &[Get]| {
            v.last().map_or("-".to_string(), |g| {
                format!("{:.2} ({:.0}% CPU)", g.mops, 100.0 * g.time.cpu_share)
            })
        };
        p.say(format!(
            "gets rep {}, M ops/s: Shoal {} (get_many {}, fixed map {}, chained {}), hashbrown {}, no copy {}, chained {}",
            rep + 1,
            g(&res.sh_get),
            g(&res.sh_get_many),
            g(&res.fx_get),
            g(&res.sh_get_chain),
            g(&res.hb_get_copy),
            g(&res.hb_get_ref),
            g(&res.hb_get_chain)
        ));
    }
    if let (Some((_, map)), Some(hb)) = (&shoal, &hb) {
        spot_check(map, hb, &data)?;
    }
    drop(hb);
    // The fixed map's store goes before the two processes fork: they share one store.
    if let Some((store, map)) = fixed {
        drop(map);
        drop(store);
        let _ = shoal::Store::destroy(fixed_path(path));
    }
    // SAFETY: malloc_trim only returns free heap memory to the system.
    unsafe { libc::malloc_trim(0) };

    // ---- two processes at once.
    if let Some((store, map)) = &shoal {
        for rep in 0..if args.two_proc { args.reps } else { 0 } {
            let solo = forked_gets(map, &data, want, 1)?;
            let pair = forked_gets(map, &data, want, 2)?;
            let tp = TwoProc {
                total_mops: 2.0 * n as f64 / pair[0].secs.max(pair[1].secs) / 1e6,
                each: [0, 1].map(|k| n as f64 / pair[k].secs / 1e6),
                cpu_share: [0, 1].map(|k| pair[k].cpu_share),
                solo_mops: n as f64 / solo[0].secs / 1e6,
                solo_cpu_share: solo[0].cpu_share,
            };
            p.say(format!(
                "two processes rep {}: {:.2} M ops/s in all ({:.2} + {:.2}); CPU share {:.0}% {:.0}%; one forked process alone just before: {:.2} ({:.0}% CPU)",
                rep + 1,
                tp.total_mops,
                tp.each[0],
                tp.each[1],
                100.0 * tp.cpu_share[0],
                100.0 * tp.cpu_share[1],
                tp.solo_mops,
                100.0 * tp.solo_cpu_share
            ));
            res.two_proc.push(tp);
        }
        let report = store.check().map_err(|e| e.to_string())?;
        if !report.is_ok() {
            return Err(format!("store check failed: {report}"));
        }
    }
    res.loadavg_end = loadavg();
    Ok(res)
}

/// hashbrown: put throughput and memory, then the timed pass. Returns the first map.
fn hashbrown_puts(
    args: &Args,
    data: &Data,
    clock: &Clock,
    sched: &mut Option<SchedStat>,
    lat: &mut [u64],
    res: &mut Results,
    p: &Progress,
) -> Result<HbMap, String> {
    let n = data.len();
    let (heap0, rss0) = (shoal_bench::allocated_bytes(), rss_bytes().unwrap_or(0));
    shoal_bench::reset_peak();
    let phase = Phase::start(sched);
    let mut hb = HbMap::with_hasher(foldhash::fast::RandomState::default());
    for i in 0..n {
        hb.insert(data.key(i).to_vec(), data.val(i).to_vec());
    }
    let (d, time) = phase.end(sched);
    res.hb_put = Put {
        mops: mops(n, d),
        time,
        ..Default::default()
    };
    let heap1 = shoal_bench::allocated_bytes();
    res.hb_mem = HbMem {
        heap_per_entry: (heap1 - heap0) as f64 / n as f64,
        peak_per_entry: (shoal_bench::peak_bytes() - heap0) as f64 / n as f64,
        rss_per_entry: (rss_bytes().unwrap_or(0).saturating_sub(rss0)) as f64 / n as f64,
    };
    if hb.len() != n {
        return Err(format!(
            "hashbrown holds {} entries, expected {n}",
            hb.len()
        ));
    }
    p.say(format!(
        "hashbrown put: {:.2} M ops/s (CPU share {:.0}%)",
        res.hb_put.mops,
        100.0 * time.cpu_share
    ));
    if args.latency {
        let mut hb2 = HbMap::with_hasher(foldhash::fast::RandomState::default());
        res.hb_put_lat = timed_pass(n, clock, sched, lat, |i| {
            hb2.insert(data.key(i).to_vec(), data.val(i).to_vec());
            Ok(())
        })?;
        drop(hb2);
        // SAFETY: malloc_trim only returns free heap memory to the system.
        unsafe { libc::malloc_trim(0) };
        p.say(format!(
            "hashbrown timed put pass: longest {:.0} µs",
            res.hb_put_lat.lat.as_ref().map_or(0.0, |l| l.max_us)
        ));
    }
    Ok(hb)
}

/// Shoal: put throughput and bytes, then the timed pass on a second store. Returns the
/// first store and its map.
#[allow(clippy::too_many_arguments)]
fn shoal_puts(
    args: &Args,
    path: &std::path::Path,
    lat_path: &std::path::Path,
    data: &Data,
    clock: &Clock,
    sched: &mut Option<SchedStat>,
    lat: &mut [u64],
    res: &mut Results,
    p: &Progress,
) -> Result<(shoal::Store, shoal::Map), String> {
    let n = data.len();
    let _ = shoal::Store::destroy(path);
    let store =
        shoal::Store::create(path).map_err(|e| format!("create {}: {e}", path.display()))?;
    let map = store.map("bench").map_err(|e| e.to_string())?;
    let phase = Phase::start(sched);
    for i in 0..n {
        map.put(data.key(i), data.val(i))
            .map_err(|e| format!("put {i}: {e}"))?;
    }
    let (d, time) = phase.end(sched);
    res.sh_put = Put {
        mops: mops(n, d),
        time,
        ..Default::default()
    };
    let ss = store.stats().map_err(|e| e.to_string())?;
    let ms = map.stats().map_err(|e| e.to_string())?;
    if ms.entries != n as u64 {
        return Err(format!("Shoal holds {} entries, expected {n}", ms.entries));
    }
    let defaults = shoal::MapOptions::default();
    // One 128-byte header line plus the main and stash buckets (docs/FORMAT.md).
    let seg_size = 128 * (1 + defaults.segment_buckets as u64 + defaults.stash_buckets as u64);
    res.sh_mem = ShoalMem {
        file_size: ss.file_size,
        data_bytes: ss.data_bytes,
        live_bytes: ss.live_bytes,
        free_bytes: ss.free_bytes,
        segments: ms.segments,
        segment_bytes: ms.segments * seg_size,
        directory_bytes: 8 << ms.directory_depth,
        splits: ms.splits,
    };
    p.say(format!(
        "Shoal put: {:.2} M ops/s (CPU share {:.0}%); file {} MiB",
        res.sh_put.mops,
        100.0 * time.cpu_share,
        ss.file_size >> 20
    ));
    if args.latency {
        let _ = shoal::Store::destroy(lat_path);
        let st2 = shoal::Store::create(lat_path)
            .map_err(|e| format!("create {}: {e}", lat_path.display()))?;
        let m2 = st2.map("bench").map_err(|e| e.to_string())?;
        res.sh_put_lat = timed_pass(n, clock, sched, lat, |i| {
            m2.put(data.key(i), data.val(i))
                .map(|_| ())
                .map_err(|e| format!("put {i}: {e}"))
        })?;
        drop(m2);
        drop(st2);
        let _ = shoal::Store::destroy(lat_path);
        p.say(format!(
            "Shoal timed put pass: longest {:.0} µs",
            res.sh_put_lat.lat.as_ref().map_or(0.0, |l| l.max_us)
        ));
        let mean_ns = 1000.0 / res.sh_put_lat.mops.max(1e-9);
        let grown = ss.file_size as usize;
        res.noise_lat = noise_pass(n, mean_ns, grown, clock, sched, lat)?;
        p.say(format!(
            "noise pass ({:.2} µs of computation per step, {} MiB of fresh memory): longest {:.0} µs by thread CPU time",
            mean_ns / 1000.0,
            grown >> 20,
            res.noise_lat.lat_cpu.as_ref().map_or(0.0, |l| l.max_us)
        ));
    }
    Ok((store, map))
}

/// The store of the fixed-size map, beside the main one.
fn fixed_path(path: &std::path::Path) -> std::path::PathBuf {
    std::path::PathBuf::from(format!("{}-fixed", path.display()))
}

/// The same keys and values into a fixed-size map of 16+16 bytes in a new store at
/// `path`: the insert pass's rate, and the file bytes the map added per entry.
fn fixed_puts(
    path: &std::path::Path,
    data: &Data,
    sched: &mut Option<SchedStat>,
    res: &mut Results,
    p: &Progress,
) -> Result<(shoal::Store, shoal::FixedMap), String> {
    let n = data.len();
    let _ = shoal::Store::destroy(path);
    let store =
        shoal::Store::create(path).map_err(|e| format!("create {}: {e}", path.display()))?;
    let before = store.stats().map_err(|e| e.to_string())?.file_size;
    let map = store
        .fixed_map("bench-fixed", ITEM_LEN, ITEM_LEN)
        .map_err(|e| e.to_string())?;
    let phase = Phase::start(sched);
    for i in 0..n {
        map.put(data.key(i), data.val(i))
            .map_err(|e| format!("fixed put {i}: {e}"))?;
    }
    let (d, time) = phase.end(sched);
    res.fx_put = Put {
        mops: mops(n, d),
        time,
        ..Default::default()
    };
    let after = store.stats().map_err(|e| e.to_string())?.file_size;
    res.fx_bytes_per_entry = (after - before) as f64 / n as f64;
    if map.len().map_err(|e| e.to_string())? != n as u64 {
        return Err("the fixed map does not hold every key".into());
    }
    p.say(format!(
        "Shoal fixed-map put: {:.2} M ops/s (CPU share {:.0}%); {:.1} file bytes per entry",
        res.fx_put.mops,
        100.0 * time.cpu_share,
        res.fx_bytes_per_entry
    ));
    Ok((store, map))
}

/// One get per index of `order` from the fixed map, into a 16-byte array.
/// Returns (checksum of the values' last bytes, keys not found).
#[inline(never)]
fn fixed_gets(map: &shoal::FixedMap, data: &Data) -> Result<(u64, u64), String> {
    let (mut sum, mut miss) = (0u64, 0u64);
    let mut out = [0u8; ITEM_LEN];
    for key in data.get_keys.chunks_exact(ITEM_LEN) {
        if map
            .get_into(key, &mut out)
            .map_err(|e| format!("fixed get: {e}"))?
        {
            sum += out[ITEM_LEN - 1] as u64;
        } else {
            miss += 1;
        }
    }
    Ok((sum, miss))
}

/// The checksum every full get pass must produce: the sum of the values' last bytes.
fn expected_sum(data: &Data) -> u64 {
    (0..data.len()).map(|i| data.val(i)[15] as u64).sum()
}

fn check(sum: u64, miss: u64, want: u64, what: &str) -> Result<(), String> {
    if miss != 0 || sum != want {
        return Err(format!(
            "{what}: {miss} keys missing, checksum {sum} (expected {want})"
        ));
    }
    Ok(())
}

/// One get per key of `keys` (back to back, a stretch of [`Data::get_keys`]), through
/// `get_into` with a reused buffer.
/// Returns (checksum of the values' last bytes, keys not found).
#[inline(never)]
fn shoal_gets(map: &shoal::Map, keys: &[u8], buf: &mut Vec<u8>) -> Result<(u64, u64), String> {
    let (mut sum, mut miss) = (0u64, 0u64);
    for key in keys.chunks_exact(ITEM_LEN) {
        if map.get_into(key, buf).map_err(|e| format!("get: {e}"))? {
            sum += buf[buf.len() - 1] as u64;
        } else {
            miss += 1;
        }
    }
    Ok((sum, miss))
}

/// Keys handed to one `get_many_with` call.
const GET_MANY_BATCH: usize = 256;

/// The same gets through `Map::get_many_with` (batched, with software prefetch), in
/// calls of [`GET_MANY_BATCH`] keys; each value is copied into a reused buffer.
#[inline(never)]
fn shoal_get_many(map: &shoal::Map, data: &Data, buf: &mut Vec<u8>) -> Result<(u64, u64), String> {
    let (mut sum, mut miss) = (0u64, 0u64);
    let mut keys: Vec<&[u8]> = Vec::with_capacity(GET_MANY_BATCH);
    for chunk in data.get_keys.chunks(GET_MANY_BATCH * ITEM_LEN) {
        keys.clear();
        keys.extend(chunk.chunks_exact(ITEM_LEN));
        map.get_many_with(&keys, |_, v| match v {
            Some(v) => {
                buf.clear();
                buf.extend_from_slice(v);
                sum += buf[buf.len() - 1] as u64;
            }
            None => miss += 1,
        })
        .map_err(|e| format!("get_many: {e}"))?;
    }
    Ok((sum, miss))
}

/// hashbrown gets that copy the value into a reused buffer, like `get_into`.
#[inline(never)]
fn hb_gets_copy(hb: &HbMap, data: &Data, buf: &mut Vec<u8>) -> (u64, u64) {
    let (mut sum, mut miss) = (0u64, 0u64);
    for key in data.get_keys.chunks_exact(ITEM_LEN) {
        match hb.get(key) {
            Some(v) => {
                buf.clear();
                buf.extend_from_slice(v);
                sum += black_box(&*buf)[buf.len() - 1] as u64;
            }
            None => miss += 1,
        }
    }
    (sum, miss)
}

/// Gets of the first keys of the get order, one after another: each get must finish
/// before the next key is known.
const CHAIN_GETS: usize = 1_000_000;

/// [`shoal_gets`] of the first `n` keys of the get order in a dependent chain: the next
/// key's position is xored with the last value byte masked by `zero` (0, hidden from the
/// compiler by `black_box`), so each get waits for the one before it, as a lookup whose
/// key comes from the previous lookup does. This measures a get's latency (its chain of
/// cache misses), where [`shoal_gets`] measures how many gets the CPU overlaps.
#[inline(never)]
fn shoal_gets_chained(
    map: &shoal::Map,
    data: &Data,
    n: usize,
    buf: &mut Vec<u8>,
    zero: u32,
) -> Result<(u64, u64), String> {
    let (mut sum, mut miss, mut last) = (0u64, 0u64, 0u32);
    for j in 0..n {
        let j = j ^ (last & zero) as usize;
        if map
            .get_into(data.get_key(j), buf)
            .map_err(|e| format!("get: {e}"))?
        {
            last = buf[buf.len() - 1] as u32;
            sum += last as u64;
        } else {
            miss += 1;
        }
    }
    Ok((sum, miss))
}

/// [`hb_gets_copy`] in a dependent chain, as [`shoal_gets_chained`].
#[inline(never)]
fn hb_gets_chained(hb: &HbMap, data: &Data, n: usize, buf: &mut Vec<u8>, zero: u32) -> (u64, u64) {
    let (mut sum, mut miss, mut last) = (0u64, 0u64, 0u32);
    for j in 0..n {
        let j = j ^ (last & zero) as usize;
        match hb.get(data.get_key(j)) {
            Some(v) => {
                buf.clear();
                buf.extend_from_slice(v);
                last = black_box(&*buf)[buf.len() - 1] as u32;
                sum += last as u64;
            }
            None => miss += 1,
        }
    }
    (sum, miss)
}

/// hashbrown gets that only take a reference to the value (its bytes are not read).
/// Returns the keys not found.
#[inline(never)]
fn hb_gets_ref(hb: &HbMap, data: &Data) -> u64 {
    let mut miss = 0u64;
    for key in data.get_keys.chunks_exact(ITEM_LEN) {
        match hb.get(key) {
            Some(v) => {
                black_box(v);
            }
            None => miss += 1,
        }
    }
    miss
}

/// Untimed: a sample of keys must give the same value from both maps, and absent keys none.
fn spot_check(map: &shoal::Map, hb: &HbMap, data: &Data) -> Result<(), String> {
    let n = data.len();
    let step = (n / 1000).max(1);
    for i in (0..n).step_by(step) {
        let got = map.get(data.key(i)).map_err(|e| e.to_string())?;
        if got.as_deref() != Some(data.val(i))
            || hb.get(data.key(i)).map(|v| &v[..]) != Some(data.val(i))
        {
            return Err(format!("key {i}: wrong value"));
        }
    }
    if map
        .get(b"key:absent-key!!")
        .map_err(|e| e.to_string())?
        .is_some()
    {
        return Err("an absent key was found".into());
    }
    Ok(())
}

fn pipe() -> Result<[libc::c_int; 2], String> {
    let mut fds = [0; 2];
    // SAFETY: pipe writes two descriptors into the array.
    if unsafe { libc::pipe(fds.as_mut_ptr()) } != 0 {
        return Err(format!("pipe: {}", std::io::Error::last_os_error()));
    }
    Ok(fds)
}

fn close(fd: libc::c_int) {
    // SAFETY: closes a descriptor this code created and no longer uses.
    unsafe { libc::close(fd) };
}

fn write_all(fd: libc::c_int, b: &[u8]) -> bool {
    let mut done = 0;
    while done < b.len() {
        // SAFETY: writes from a live buffer of the given length.
        let r = unsafe { libc::write(fd, b[done..].as_ptr().cast(), b.len() - done) };
        if r <= 0 {
            if r < 0 && std::io::Error::last_os_error().kind() == std::io::ErrorKind::Interrupted {
                continue;
            }
            return false;
        }
        done += r as usize;
    }
    true
}

/// Reads up to `b.len()` bytes until EOF; returns how many were read.
fn read_full(fd: libc::c_int, b: &mut [u8]) -> usize {
    let mut done = 0;
    while done < b.len() {
        // SAFETY: reads into a live buffer of the given length.
        let r = unsafe { libc::read(fd, b[done..].as_mut_ptr().cast(), b.len() - done) };
        if r < 0 && std::io::Error::last_os_error().kind() == std::io::ErrorKind::Interrupted {
            continue;
        }
        if r <= 0 {
            break;
        }
        done += r as usize;
    }
    done
}

/// One forked process's timed pass: seconds, and its CPU share.
#[derive(Clone, Copy, Default)]
struct ChildPass {
    secs: f64,
    cpu_share: f64,
}

/// Forks `procs` processes that each do one warm-up pass (untimed: a forked child starts
/// with no page-table entries for the shared mapping) and then, started together, N gets
/// over the same store; process k walks the order from `k * N / procs`.
fn forked_gets(
    map: &shoal::Map,
    data: &Data,
    want: u64,
    procs: usize,
) -> Result<Vec<ChildPass>, String> {
    let n = data.len();
    let ready = pipe()?;
    let go = pipe()?;
    let mut kids = Vec::new();
    for k in 0..procs {
        let result = pipe()?;
        // SAFETY: this process is single-threaded here; the child only reads memory it
        // inherited, uses the store (which re-registers after fork) and exits with _exit.
        let pid = unsafe { libc::fork() };
        if pid < 0 {
            return Err(format!("fork: {}", std::io::Error::last_os_error()));
        }
        if pid == 0 {
            close(ready[0]);
            close(go[1]);
            close(result[0]);
            let code = child(map, data, k * n / procs, ready[1], go[0], result[1], want);
            // SAFETY: ends the child without running the parent's destructors or atexit.
            unsafe { libc::_exit(code) };
        }
        close(result[1]);
        kids.push((pid, result[0]));
    }
    close(ready[1]);
    close(go[0]);
    let mut b = vec![0u8; procs];
    let got = read_full(ready[0], &mut b);
    close(ready[0]);
    // Closing the write end wakes every child at once (they read EOF).
    close(go[1]);
    let mut passes = vec![ChildPass::default(); procs];
    let mut err = None;
    if got != procs {
        err = Some("a child failed before the start".to_string());
    }
    for (k, (pid, fd)) in kids.into_iter().enumerate() {
        let mut r = [0u8; 32];
        let m = read_full(fd, &mut r);
        close(fd);
        let mut status = 0;
        // SAFETY: waits for our own child.
        unsafe { libc::waitpid(pid, &mut status, 0) };
        if m != 32 || !libc::WIFEXITED(status) || libc::WEXITSTATUS(status) != 0 {
            err.get_or_insert(format!("child {k} failed (status {status:#x})"));
            continue;
        }
        let nanos = u64::from_le_bytes(r[0..8].try_into().expect("8 bytes"));
        let sum = u64::from_le_bytes(r[8..16].try_into().expect("8 bytes"));
        let miss = u64::from_le_bytes(r[16..24].try_into().expect("8 bytes"));
        let cpu = u64::from_le_bytes(r[24..32].try_into().expect("8 bytes"));
        if let Err(e) = check(sum, miss, want, &format!("child {k} get")) {
            err.get_or_insert(e);
        }
        passes[k] = ChildPass {
            secs: nanos as f64 / 1e9,
            cpu_share: cpu as f64 / nanos.max(1) as f64,
        };
    }
    if let Some(e) = err {
        return Err(e);
    }
    Ok(passes)
}

fn child(
    map: &shoal::Map,
    data: &Data,
    start: usize,
    ready: i32,
    go: i32,
    result: i32,
    want: u64,
) -> i32 {
    let mut buf = Vec::with_capacity(64);
    let (a, b) = data.get_keys.split_at(start * ITEM_LEN);
    let pass = |buf: &mut Vec<u8>| -> Result<(u64, u64), String> {
        let (s1, m1) = shoal_gets(map, b, buf)?;
        let (s2, m2) = shoal_gets(map, a, buf)?;
        Ok((s1 + s2, m1 + m2))
    };
    match pass(&mut buf) {
        Ok((s, m)) if s == want && m == 0 => {}
        _ => return 3,
    }
    if !write_all(ready, b"r") {
        return 4;
    }
    let mut x = [0u8; 1];
    read_full(go, &mut x); // returns at EOF: the start signal
    let (t, cpu) = (Instant::now(), thread_cpu_ns());
    let Ok((sum, miss)) = pass(&mut buf) else {
        return 5;
    };
    let (d, cpu) = (t.elapsed(), thread_cpu_ns() - cpu);
    let mut out = [0u8; 32];
    out[0..8].copy_from_slice(&(d.as_nanos() as u64).to_le_bytes());
    out[8..16].copy_from_slice(&sum.to_le_bytes());
    out[16..24].copy_from_slice(&miss.to_le_bytes());
    out[24..32].copy_from_slice(&cpu.to_le_bytes());
    if write_all(result, &out) {
        0
    } else {
        6
    }
}

fn ratio(a: f64, b: f64) -> String {
    if b > 0.0 {
        format!("{:.2}x", a / b)
    } else {
        "-".into()
    }
}

fn verdict(ok: bool) -> &'static str {
    if ok {
        "MET"
    } else {
        "MISSED"
    }
}

fn table(r: &Results) -> String {
    let mut o = String::new();
    let n = r.n as f64;
    let (sg, hg, hr) = (best(&r.sh_get), best(&r.hb_get_copy), best(&r.hb_get_ref));
    let tp = r.two_proc.iter().copied().fold(TwoProc::default(), |a, b| {
        if b.total_mops > a.total_mops {
            b
        } else {
            a
        }
    });
    let sm = &r.sh_mem;
    let sh_total = sm.file_size as f64 / n;
    let hb_total = r.hb_mem.heap_per_entry;
    let pct = |x: f64| format!("{:.0}%", 100.0 * x);
    let _ = writeln!(
        o,
        "\nShoal vs hashbrown 0.17 (foldhash 0.2 fast::RandomState), in-process"
    );
    let _ = writeln!(
        o,
        "N = {} keys (16-byte keys key:%012d, 16-byte values); gets: best of {} reps; TSC {:.0} ticks/µs",
        r.n, r.reps, r.ticks_per_us
    );
    let _ = writeln!(
        o,
        "load average at start {}, at end {}",
        r.loadavg_start, r.loadavg_end
    );
    let _ = writeln!(o);
    let _ = writeln!(
        o,
        "{:<46} {:>11} {:>11} {:>9}",
        "metric", "Shoal", "hashbrown", "Shoal/hb"
    );
    let _ = writeln!(o, "{}", "-".repeat(80));
    let row = |o: &mut String, name: &str, a: String, b: String, q: String| {
        let _ = writeln!(o, "{name:<46} {a:>11} {b:>11} {q:>9}");
    };
    row(
        &mut o,
        "put, M ops/s (N inserts, no reserve)",
        f(r.sh_put.mops),
        f(r.hb_put.mops),
        ratio(r.sh_put.mops, r.hb_put.mops),
    );
    row(
        &mut o,
        "  CPU share of that pass",
        pct(r.sh_put.time.cpu_share),
        pct(r.hb_put.time.cpu_share),
        String::new(),
    );
    let (a, b) = (
        per_cpu(r.sh_put.mops, &r.sh_put.time),
        per_cpu(r.hb_put.mops, &r.hb_put.time),
    );
    row(&mut o, "  M puts per CPU-second", f(a), f(b), ratio(a, b));
    if let (Some(a), Some(b), Some(ao), Some(bo)) = (
        &r.sh_put_lat.lat,
        &r.hb_put_lat.lat,
        &r.sh_put_lat.lat_own,
        &r.hb_put_lat.lat_own,
    ) {
        row(
            &mut o,
            "put, timed pass, M ops/s",
            f(r.sh_put_lat.mops),
            f(r.hb_put_lat.mops),
            ratio(r.sh_put_lat.mops, r.hb_put_lat.mops),
        );
        row(
            &mut o,
            "  CPU share of that pass",
            pct(r.sh_put_lat.time.cpu_share),
            pct(r.hb_put_lat.time.cpu_share),
            String::new(),
        );
        row(
            &mut o,
            "put, longest single, µs",
            f1(a.max_us),
            f1(b.max_us),
            ratio(a.max_us, b.max_us),
        );
        row(
            &mut o,
            "  ... at put #",
            a.max_at.to_string(),
            b.max_at.to_string(),
            String::new(),
        );
        row(
            &mut o,
            "put, longest minus CPU wait (own time), µs",
            f1(ao.max_us),
            f1(bo.max_us),
            ratio(ao.max_us, bo.max_us),
        );
        row(
            &mut o,
            "  ... at put #",
            ao.max_at.to_string(),
            bo.max_at.to_string(),
            String::new(),
        );
        if let (Some(ac), Some(bc)) = (&r.sh_put_lat.lat_cpu, &r.hb_put_lat.lat_cpu) {
            row(
                &mut o,
                "put, longest by thread CPU time, µs",
                f1(ac.max_us),
                f1(bc.max_us),
                ratio(ac.max_us, bc.max_us),
            );
            row(
                &mut o,
                "  ... at put #",
                ac.max_at.to_string(),
                bc.max_at.to_string(),
                String::new(),
            );
            row(
                &mut o,
                "puts > 1 ms of thread CPU time",
                ac.over_1ms.to_string(),
                bc.over_1ms.to_string(),
                String::new(),
            );
            if let Some(nc) = &r.noise_lat.lat_cpu {
                row(
                    &mut o,
                    "noise floor: longest step of pure computation, µs",
                    f1(nc.max_us),
                    String::new(),
                    String::new(),
                );
                row(
                    &mut o,
                    "  (steps as long as Shoal's mean put, as much fresh memory; > 1 ms)",
                    nc.over_1ms.to_string(),
                    String::new(),
                    String::new(),
                );
            }
        }
        row(
            &mut o,
            "put, p99, µs",
            f(a.p99_us),
            f(b.p99_us),
            ratio(a.p99_us, b.p99_us),
        );
        row(
            &mut o,
            "put, p99.99, µs",
            f(a.p9999_us),
            f(b.p9999_us),
            ratio(a.p9999_us, b.p9999_us),
        );
        row(
            &mut o,
            "put, p99.99 own time, µs",
            f(ao.p9999_us),
            f(bo.p9999_us),
            ratio(ao.p9999_us, bo.p9999_us),
        );
        row(
            &mut o,
            "put, p99.999, µs",
            f1(a.p99999_us),
            f1(b.p99999_us),
            ratio(a.p99999_us, b.p99999_us),
        );
        row(
            &mut o,
            "puts > 100 µs (own time)",
            format!("{} ({})", a.over_100us, ao.over_100us),
            format!("{} ({})", b.over_100us, bo.over_100us),
            String::new(),
        );
        row(
            &mut o,
            "puts > 1 ms (own time)",
            format!("{} ({})", a.over_1ms, ao.over_1ms),
            format!("{} ({})", b.over_1ms, bo.over_1ms),
            String::new(),
        );
    }
    row(
        &mut o,
        "get, M ops/s (copy into reused buffer)",
        f(sg.mops),
        f(hg.mops),
        ratio(sg.mops, hg.mops),
    );
    row(
        &mut o,
        "  CPU share of that pass",
        pct(sg.time.cpu_share),
        pct(hg.time.cpu_share),
        String::new(),
    );
    let (a, b) = (per_cpu(sg.mops, &sg.time), per_cpu(hg.mops, &hg.time));
    row(&mut o, "  M gets per CPU-second", f(a), f(b), ratio(a, b));
    row(
        &mut o,
        "get, M ops/s (hashbrown: reference only)",
        "-".into(),
        f(hr.mops),
        ratio(sg.mops, hr.mops),
    );
    let gm = best(&r.sh_get_many);
    row(
        &mut o,
        "get, M ops/s (Shoal get_many_with, 256/call)",
        f(gm.mops),
        f(hg.mops),
        ratio(gm.mops, hg.mops),
    );
    let (sc, hc) = (best(&r.sh_get_chain), best(&r.hb_get_chain));
    row(
        &mut o,
        "get, M ops/s, chained (next key from the value)",
        f(sc.mops),
        f(hc.mops),
        ratio(sc.mops, hc.mops),
    );
    let ns = |g: Get| {
        if g.mops > 0.0 {
            format!("{:.0}", 1e3 / g.mops)
        } else {
            "-".into()
        }
    };
    row(
        &mut o,
        "  ns per chained get (a get's latency)",
        ns(sc),
        ns(hc),
        String::new(),
    );
    if !r.fx_get.is_empty() {
        let fg = best(&r.fx_get);
        row(
            &mut o,
            "fixed 16+16 map: get, M ops/s",
            f(fg.mops),
            f(hg.mops),
            ratio(fg.mops, hg.mops),
        );
        row(
            &mut o,
            "fixed 16+16 map: put, M ops/s (N inserts)",
            f(r.fx_put.mops),
            f(r.hb_put.mops),
            ratio(r.fx_put.mops, r.hb_put.mops),
        );
        row(
            &mut o,
            "fixed 16+16 map: bytes/entry beyond key+value",
            f1(r.fx_bytes_per_entry - 32.0),
            f1(hb_total - 32.0),
            ratio(r.fx_bytes_per_entry - 32.0, hb_total - 32.0),
        );
    }
    row(
        &mut o,
        "bytes/entry, total",
        f1(sh_total),
        f1(hb_total),
        ratio(sh_total, hb_total),
    );
    row(
        &mut o,
        "bytes/entry, overhead beyond key+value (-32)",
        f1(sh_total - 32.0),
        f1(hb_total - 32.0),
        ratio(sh_total - 32.0, hb_total - 32.0),
    );
    row(
        &mut o,
        "bytes/entry, hashbrown peak heap during puts",
        "-".into(),
        f1(r.hb_mem.peak_per_entry),
        String::new(),
    );
    row(
        &mut o,
        "bytes/entry, hashbrown RSS growth (glibc)",
        "-".into(),
        f1(r.hb_mem.rss_per_entry),
        String::new(),
    );
    row(
        &mut o,
        "2 processes getting at once, M ops/s total",
        f(tp.total_mops),
        "-".into(),
        String::new(),
    );
    let solo = best_solo(r);
    let _ = writeln!(
        o,
        "{:<46} {:>11}   (per process {:.2} + {:.2}, CPU share {} {}; 1 process {:.2}, {})",
        "  vs 1 forked process, run just before",
        ratio(tp.total_mops, solo.solo_mops),
        tp.each[0],
        tp.each[1],
        pct(tp.cpu_share[0]),
        pct(tp.cpu_share[1]),
        solo.solo_mops,
        pct(solo.solo_cpu_share)
    );
    let _ = writeln!(
        o,
        "{:<46} {:>11}   (1 process {:.2})",
        "  vs the get passes above",
        ratio(tp.total_mops, sg.mops),
        sg.mops
    );
    let per_proc = |k: usize| {
        if tp.cpu_share[k] > 0.0 {
            tp.each[k] / tp.cpu_share[k]
        } else {
            0.0
        }
    };
    let single_cpu = if solo.solo_cpu_share > 0.0 {
        solo.solo_mops / solo.solo_cpu_share
    } else {
        0.0
    };
    let _ = writeln!(
        o,
        "{:<46} {:>11}   (each process {:.2} and {:.2} M gets per CPU-second; 1 process {:.2})",
        "  per CPU-second, each process vs 1 process",
        ratio((per_proc(0) + per_proc(1)) / 2.0, single_cpu),
        per_proc(0),
        per_proc(1),
        single_cpu
    );
    let _ = writeln!(o);
    let _ = writeln!(
        o,
        "Shoal file, bytes/entry: records {:.2}; data chunks {:.2} (records + chunk headers + tails);",
        sm.live_bytes as f64 / n,
        sm.data_bytes as f64 / n
    );
    let other = sm.file_size as i64
        - sm.data_bytes as i64
        - sm.free_bytes as i64
        - sm.segment_bytes as i64
        - sm.directory_bytes as i64;
    let _ = writeln!(
        o,
        "  index segments {:.2} ({} x 8 KiB, {:.1}% of slots used, {} splits); directory {:.2}; free {:.2};",
        sm.segment_bytes as f64 / n,
        sm.segments,
        100.0 * n / (sm.segments as f64 * slots_per_segment()),
        sm.splits,
        sm.directory_bytes as f64 / n,
        sm.free_bytes as f64 / n,
    );
    let _ = writeln!(
        o,
        "  other {:.2} (tables, map header, index arena slack, old directories); file {:.1} MiB",
        other as f64 / n,
        sm.file_size as f64 / (1 << 20) as f64
    );
    if let (Some(a), Some(b)) = (&r.sh_put_lat.lat, &r.hb_put_lat.lat) {
        let tops = |l: &Latency| {
            l.top
                .iter()
                .map(|(i, us)| format!("#{i} {us:.0}"))
                .collect::<Vec<_>>()
                .join(", ")
        };
        let _ = writeln!(
            o,
            "Longest puts, µs: Shoal {}; hashbrown {}",
            tops(a),
            tops(b)
        );
    }
    if let (Some(a), Some(b)) = (&r.sh_put_lat.lat_own, &r.hb_put_lat.lat_own) {
        let tops = |l: &Latency| {
            l.top
                .iter()
                .map(|(i, us)| format!("#{i} {us:.0}"))
                .collect::<Vec<_>>()
                .join(", ")
        };
        let _ = writeln!(
            o,
            "Longest puts, own time, µs: Shoal {}; hashbrown {}",
            tops(a),
            tops(b)
        );
    }
    let list = |v: &[Get]| {
        v.iter()
            .map(|x| format!("{:.2} ({})", x.mops, pct(x.time.cpu_share)))
            .collect::<Vec<_>>()
            .join(", ")
    };
    let _ = writeln!(
        o,
        "All reps, M ops/s (CPU share): Shoal get {}; get_many {}; hashbrown get {}; no copy {}; 2 processes {}",
        list(&r.sh_get),
        list(&r.sh_get_many),
        list(&r.hb_get_copy),
        list(&r.hb_get_ref),
        r.two_proc
            .iter()
            .map(|t| format!(
                "{:.2} ({} {}; alone before it {:.2})",
                t.total_mops,
                pct(t.cpu_share[0]),
                pct(t.cpu_share[1]),
                t.solo_mops
            ))
            .collect::<Vec<_>>()
            .join(", ")
    );
    let _ = writeln!(o);
    let _ = writeln!(o, "Targets:");
    let line = |o: &mut String, what: &str, val: String, ok: bool| {
        let _ = writeln!(o, "  {what:<40} {val:>9}  {}", verdict(ok));
    };
    line(
        &mut o,
        "get >= 1.0x hashbrown (with copy)",
        ratio(sg.mops, hg.mops),
        sg.mops >= hg.mops,
    );
    line(
        &mut o,
        "put >= 1.0x hashbrown",
        ratio(r.sh_put.mops, r.hb_put.mops),
        r.sh_put.mops >= r.hb_put.mops,
    );
    if let (Some(a), Some(ao)) = (&r.sh_put_lat.lat, &r.sh_put_lat.lat_own) {
        line(
            &mut o,
            "longest put <= 1 ms (as measured)",
            format!("{:.0}µs", a.max_us),
            a.max_us <= 1000.0,
        );
        line(
            &mut o,
            "longest put <= 1 ms (own time)",
            format!("{:.0}µs", ao.max_us),
            ao.max_us <= 1000.0,
        );
    }
    if let Some(ac) = &r.sh_put_lat.lat_cpu {
        line(
            &mut o,
            "longest put <= 1 ms (thread CPU time)",
            format!("{:.0}µs", ac.max_us),
            ac.max_us <= 1000.0,
        );
        if let Some(nc) = &r.noise_lat.lat_cpu {
            let _ = writeln!(
                o,
                "    (noise floor: the longest of as many steps of computation touching as much fresh memory, same harness: {:.0}µs of thread CPU time)",
                nc.max_us
            );
        }
    }
    line(
        &mut o,
        "overhead <= 16 B/entry",
        format!("{:.1}B", sh_total - 32.0),
        sh_total - 32.0 <= 16.0,
    );
    line(
        &mut o,
        "2 processes >= 1.8x one process",
        ratio(tp.total_mops, solo.solo_mops),
        tp.total_mops >= 1.8 * solo.solo_mops,
    );
    o
}

/// The two-process rep whose lone process was fastest: the baseline of the two-process
/// target (best of reps, like every other figure).
fn best_solo(r: &Results) -> TwoProc {
    r.two_proc.iter().copied().fold(TwoProc::default(), |a, b| {
        if b.solo_mops > a.solo_mops {
            b
        } else {
            a
        }
    })
}

/// Slots in a default segment: 15 per main and stash bucket.
fn slots_per_segment() -> f64 {
    let d = shoal::MapOptions::default();
    15.0 * (d.segment_buckets + d.stash_buckets) as f64
}

/// A rate per second of the thread's CPU time rather than of wall time: on a machine
/// shared with other work, closer to what the code would do alone.
/// `a / b`, or 0 when `b` is 0 (a pass that did not run): JSON has no NaN.
fn div_or_zero(a: f64, b: f64) -> f64 {
    if b > 0.0 {
        a / b
    } else {
        0.0
    }
}

fn per_cpu(mops: f64, t: &PhaseTime) -> f64 {
    if t.cpu_share > 0.0 {
        mops / t.cpu_share
    } else {
        0.0
    }
}

fn f(x: f64) -> String {
    format!("{x:.2}")
}

fn f1(x: f64) -> String {
    format!("{x:.1}")
}

fn json(r: &Results) -> String {
    let lat = |l: &Option<Latency>| {
        match l {
        None => "null".to_string(),
        Some(l) => format!(
            "{{\"max_us\":{:.3},\"max_at\":{},\"p99_us\":{:.3},\"p9999_us\":{:.3},\"p99999_us\":{:.3},\"over_100us\":{},\"over_1ms\":{}}}",
            l.max_us, l.max_at, l.p99_us, l.p9999_us, l.p99999_us, l.over_100us, l.over_1ms
        ),
    }
    };
    let gets = |v: &[Get]| {
        let items: Vec<String> = v
            .iter()
            .map(|g| {
                format!(
                    "{{\"mops\":{:.4},\"secs\":{:.4},\"cpu_share\":{:.4},\"cpu_wait_ms\":{:.1}}}",
                    g.mops, g.time.secs, g.time.cpu_share, g.time.wait_ms
                )
            })
            .collect();
        format!("[{}]", items.join(","))
    };
    let put = |p: &Put| {
        format!(
            "{{\"mops\":{:.4},\"secs\":{:.4},\"cpu_share\":{:.4},\"cpu_wait_ms\":{:.1},\"latency\":{},\"latency_own\":{},\"latency_cpu\":{}}}",
            p.mops,
            p.time.secs,
            p.time.cpu_share,
            p.time.wait_ms,
            lat(&p.lat),
            lat(&p.lat_own),
            lat(&p.lat_cpu)
        )
    };
    let n = r.n as f64;
    let sm = &r.sh_mem;
    let tp: Vec<String> = r
        .two_proc
        .iter()
        .map(|t| {
            format!(
                "{{\"total_mops\":{:.4},\"each_mops\":[{:.4},{:.4}],\"cpu_share\":[{:.4},{:.4}],\"solo_mops\":{:.4},\"solo_cpu_share\":{:.4}}}",
                t.total_mops, t.each[0], t.each[1], t.cpu_share[0], t.cpu_share[1], t.solo_mops, t.solo_cpu_share
            )
        })
        .collect();
    let best_tp = r.two_proc.iter().map(|t| t.total_mops).fold(0.0, f64::max);
    let mut o = String::from("{");
    let _ = write!(
        o,
        "\"keys\":{},\"reps\":{},\"ticks_per_us\":{:.3},\"loadavg_start\":\"{}\",\"loadavg_end\":\"{}\",",
        r.n, r.reps, r.ticks_per_us, r.loadavg_start, r.loadavg_end
    );
    let _ = write!(
        o,
        "\"shoal\":{{\"put\":{},\"put_timed\":{},\"get\":{},\"get_many\":{},\"get_chained\":{},\"bytes_per_entry\":{:.3},\"overhead_per_entry\":{:.3},\
\"file_size\":{},\"data_bytes\":{},\"live_bytes\":{},\"free_bytes\":{},\"segments\":{},\"segment_bytes\":{},\"directory_bytes\":{},\"splits\":{},\
\"two_process\":[{}],\"two_process_ratio\":{:.4},\"two_process_ratio_vs_get\":{:.4},\
\"fixed\":{{\"put\":{},\"get\":{},\"overhead_per_entry\":{:.3}}}}},",
        put(&r.sh_put),
        put(&r.sh_put_lat),
        gets(&r.sh_get),
        gets(&r.sh_get_many),
        gets(&r.sh_get_chain),
        sm.file_size as f64 / n,
        sm.file_size as f64 / n - 32.0,
        sm.file_size,
        sm.data_bytes,
        sm.live_bytes,
        sm.free_bytes,
        sm.segments,
        sm.segment_bytes,
        sm.directory_bytes,
        sm.splits,
        tp.join(","),
        div_or_zero(best_tp, best_solo(r).solo_mops),
        div_or_zero(best_tp, best(&r.sh_get).mops),
        put(&r.fx_put),
        gets(&r.fx_get),
        r.fx_bytes_per_entry - 32.0
    );
    let _ = write!(
        o,
        "\"hashbrown\":{{\"put\":{},\"put_timed\":{},\"get_copy\":{},\"get_ref\":{},\"get_chained\":{},\
\"bytes_per_entry\":{:.3},\"overhead_per_entry\":{:.3},\"peak_bytes_per_entry\":{:.3},\"rss_bytes_per_entry\":{:.3}}}",
        put(&r.hb_put),
        put(&r.hb_put_lat),
        gets(&r.hb_get_copy),
        gets(&r.hb_get_ref),
        gets(&r.hb_get_chain),
        r.hb_mem.heap_per_entry,
        r.hb_mem.heap_per_entry - 32.0,
        r.hb_mem.peak_per_entry,
        r.hb_mem.rss_per_entry
    );
    o.push('}');
    o
}
