//! `shoal bench`: the multi-process benchmark. The parent creates a store, starts N worker
//! processes (this binary again, with the hidden `bench-worker` subcommand), and drives
//! them through the phases over pipes: it writes `go PHASE` to each worker's stdin; each
//! worker answers on its stdout with `p DONE` progress lines (every ~100 ms) and one
//! `done OPS ERRORS CPU_NS` line. The pipes carry no data of the benchmark itself, so
//! they do not disturb the store being measured, and a worker's death is seen at once
//! (end of file on its pipe).

use crate::fail::Fail;
use crate::human;
use crate::signal;
use clap::Args;
use shoal::{Map, OpenMode, Options, PutOutcome, Store};
use std::io::{BufRead, BufReader, Write};
use std::path::PathBuf;
use std::process::{Child, ChildStdin, Command, Stdio};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::mpsc;
use std::sync::Arc;
use std::time::{Duration, Instant};

use crate::benchkeys::{parse_value_type, Gen, KeysPattern, Perm, ValueType, ORDER_SEED};

/// `shoal bench --help`.
pub const BENCH_HELP: &str = "\
Multi-process, multi-thread benchmark. Creates a store (in /dev/shm unless --path), starts \
--processes worker processes of --threads worker threads each (workers = processes × \
threads) and runs these phases, all workers starting each phase together:

  PUT       each worker inserts its share of the keys (key i goes to worker i mod N)
  UPD       each worker overwrites its keys with new values of the same size
  MIX       for each of its keys a worker either (--mix percent of the time) removes it and
            puts it back (2 ops), or gets a random key of the whole set (1 op)
  GET       each worker gets the keys of the next worker's share (written by another
            worker), checking each is present with the right value, IN THE ORDER THEY
            WERE INSERTED: their records were written one after another, so they sit next
            to each other in memory and a get often finds its record in a cache line or
            page the previous one brought in
  GET_RAND  the same keys in a random order (a permutation computed on the fly): every get
            a cold record, as MIX's gets; compare the two to see what insertion order buys
  GET_MANY  the same as GET in batches of 32 with Map::get_many_with (software prefetch)
  REMOVE    each worker removes its keys (DEL is another name for it)

--phases picks and orders them (default: all; with --format mdtest PUT,GET,GET_RAND,DEL). \
--rounds R runs the whole list R times (REMOVE empties the map for the next PUT) and the \
report gives each phase's median rate and its spread (slowest-fastest round). A phase \
shorter than about 2 s is noisy on a shared machine: use more keys or more rounds.

Keys (--keys-pattern): padded 'key:%0Nd' (the index zero-padded to --key-size bytes; \
without the 'key:' prefix when it does not fit), seq 'file.mdtest.%d.%d' with (i / 10000, \
i), or rand 'file.mdtest.%d.%d' with two pseudo-random integers below --keys (the first a \
permutation of the indexes, so keys stay distinct): the two patterns of \
mem_meta_kv_benchmark. Keys and values are computed from their index inside the timed \
loops, so no array of keys is read out of order. Values: --value-size bytes, or \
--value-type i32 (4 bytes) or bytes:N.

With --private-maps every worker has a map of its own in the store (and its GETs read its \
own keys), for comparison with maps private to one thread. --pin START pins worker k to \
core START+k (-1, the default: no pinning).

While it runs it prints one line a second (phase, ops/s in total and per worker, file \
size); at the end a table per phase: ops/s (median over the rounds) and its spread, ns/op \
(wall time per operation of one worker = workers / total ops/s), CPU ns/op (CPU time of \
the workers per operation: what an op costs when workers outnumber cores), chunks the \
cleaner reclaimed, file size, resident size (the blocks the store holds in memory) and \
bytes per entry (resident size / entries). --format mdtest prints mem_meta_kv_benchmark's \
layout instead: per phase total and per-worker Mops, and for PUT MB/s and the memory cost \
in MB (resident size growth). With --json the per-second lines and the table go to stderr \
and stdout gets one JSON object.

Each worker checks every result (a PUT inserted, an UPD replaced, a GET found a value of \
the right size, and for i32 values the right value, a REMOVE removed); any failure makes \
the exit status non-zero. The store is removed at the end unless --keep.

The default (2 processes, 1M keys of 16 bytes, 16-byte values) takes a few seconds. \
mem_meta_kv_benchmark's run with 2 threads pinned from core 0, 10 M sequential keys per \
thread: --threads 2 --pin 0 --keys 20M --keys-pattern seq --value-type i32 --format mdtest.

`shoal bench queue` benchmarks queue sets instead (see `shoal bench queue --help`).";

/// The hidden subcommand that runs one worker (see `WorkerCli` in main.rs).
pub const WORKER_SUBCOMMAND: &str = "bench-worker";

/// The phases, in their default order.
const PHASES: [&str; 7] = ["PUT", "UPD", "MIX", "GET", "GET_RAND", "GET_MANY", "REMOVE"];

/// The phases of mem_meta_kv_benchmark (with the random-order GET beside its GET).
const MDTEST_PHASES: [&str; 4] = ["PUT", "GET", "GET_RAND", "REMOVE"];

/// Keys looked up per `get_many_with` call in GET_MANY.
const BATCH: usize = 32;

/// `1_000_000`, `1,000,000`, `1000k`, `1M`, `1G` (powers of ten).
fn parse_count(s: &str) -> Result<u64, String> {
    let t = s.trim().replace(['_', ','], "");
    let (num, mult) = match t.chars().last() {
        Some('k' | 'K') => (&t[..t.len() - 1], 1_000),
        Some('m' | 'M') => (&t[..t.len() - 1], 1_000_000),
        Some('g' | 'G') => (&t[..t.len() - 1], 1_000_000_000),
        _ => (&t[..], 1),
    };
    num.parse::<u64>()
        .ok()
        .and_then(|n| n.checked_mul(mult))
        .ok_or_else(|| format!("{s:?} is not a count (examples: 20000, 1_000_000, 10M)"))
}

/// A phase name (`DEL` is `REMOVE`).
fn parse_phase(s: &str) -> Result<&'static str, String> {
    let u = s.trim().to_ascii_uppercase();
    let u = if u == "DEL" { "REMOVE".to_string() } else { u };
    PHASES
        .iter()
        .find(|p| **p == u)
        .copied()
        .ok_or_else(|| format!("{s:?} is not a phase (one of {}, DEL)", PHASES.join(", ")))
}

/// The layout of the report.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum Format {
    /// A table per phase
    Table,
    /// mem_meta_kv_benchmark's text layout
    Mdtest,
}

/// Options of `shoal bench`.
#[derive(Args, Debug, Clone)]
pub struct BenchArgs {
    /// Worker processes (default 2, or 1 when --threads is given)
    #[arg(long, value_parser = clap::value_parser!(u32).range(1..=1000))]
    processes: Option<u32>,
    /// Worker threads in each worker process (workers = processes × threads; default 1)
    #[arg(long, value_parser = clap::value_parser!(u32).range(1..=1024))]
    threads: Option<u32>,
    /// Pin worker k to CPU core START+k; -1: no pinning
    #[arg(long, value_name = "START", default_value_t = -1, allow_negative_numbers = true,
          value_parser = clap::value_parser!(i64).range(-1..=1_000_000))]
    pin: i64,
    /// Keys in all (shared out among the workers); accepts 1_000_000, 10M, 500k
    #[arg(long, default_value = "1M", value_parser = parse_count)]
    keys: u64,
    /// How keys are made from their index (see above)
    #[arg(long, value_enum, default_value_t = KeysPattern::Padded)]
    keys_pattern: KeysPattern,
    /// Bytes per key (padded keys)
    #[arg(long, default_value_t = 16, value_parser = clap::value_parser!(u32).range(1..=4096))]
    key_size: u32,
    /// Bytes per value
    #[arg(long, default_value_t = 16, value_parser = clap::value_parser!(u32).range(0..=(1 << 30)))]
    value_size: u32,
    /// Values: i32 (4 bytes, the index) or bytes:N (as --value-size N)
    #[arg(long, value_parser = parse_value_type, conflicts_with = "value_size")]
    value_type: Option<ValueType>,
    /// Phases to run, in order, comma-separated (PUT,UPD,MIX,GET,GET_RAND,GET_MANY,REMOVE|DEL)
    #[arg(long, value_delimiter = ',', value_parser = parse_phase)]
    phases: Option<Vec<&'static str>>,
    /// Runs of the whole phase list; the report gives each phase's median and spread
    #[arg(long, default_value_t = 1, value_parser = clap::value_parser!(u32).range(1..=1000))]
    rounds: u32,
    /// One map per worker instead of one shared by all (a worker's GETs read its own keys)
    #[arg(long)]
    private_maps: bool,
    /// Percentage of MIX steps that remove a key and put it back (the rest are gets)
    #[arg(long, default_value_t = 2, value_parser = clap::value_parser!(u8).range(0..=100))]
    mix: u8,
    /// The layout of the report
    #[arg(long, value_enum, default_value_t = Format::Table)]
    format: Format,
    /// Keep the store file at the end
    #[arg(long)]
    keep: bool,
    /// Print the results as one JSON object on stdout (progress and table on stderr)
    #[arg(long)]
    json: bool,
    /// The store to create (default /dev/shm/shoal-bench-PID.shoal); it must not exist
    #[arg(long)]
    path: Option<PathBuf>,
    /// Run `shoal check` on the store after the last phase (slow on big stores)
    #[arg(long)]
    check: bool,
}

/// Options of the hidden `bench-worker` subcommand.
#[derive(Args, Debug, Clone)]
pub struct WorkerArgs {
    #[arg(long)]
    path: PathBuf,
    #[arg(long)]
    id: u64,
    #[arg(long)]
    processes: u64,
    #[arg(long)]
    threads: u64,
    #[arg(long)]
    keys: u64,
    #[arg(long, value_enum)]
    keys_pattern: KeysPattern,
    #[arg(long)]
    key_size: usize,
    #[arg(long, value_parser = parse_value_type)]
    value_type: ValueType,
    #[arg(long)]
    mix: u64,
    #[arg(long, allow_negative_numbers = true)]
    pin: i64,
    #[arg(long)]
    private_maps: bool,
}

/// CPU time of this process so far, in ns.
fn cpu_ns() -> u64 {
    let t = rustix::time::clock_gettime(rustix::time::ClockId::ProcessCPUTime);
    t.tv_sec as u64 * 1_000_000_000 + t.tv_nsec as u64
}

/// xorshift64*: a fast, good-enough generator for picking keys.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }
}

/// A worker thread's progress, published every 256 operations for the progress lines.
struct Tick<'a> {
    done: &'a AtomicU64,
    calls: u32,
}

impl Tick<'_> {
    #[inline]
    fn tick(&mut self, ops: u64) {
        self.calls += 1;
        if self.calls & 255 == 0 {
            self.done.store(ops, Ordering::Relaxed);
        }
    }
}

/// The keys of worker `w`: `w, w + n, w + 2n, …` below `keys`.
fn share(w: u64, n: u64, keys: u64) -> impl Iterator<Item = u64> {
    (w..keys).step_by(n as usize)
}

/// How many keys [`share`] gives.
fn share_len(w: u64, n: u64, keys: u64) -> u64 {
    if w >= keys {
        0
    } else {
        (keys - w - 1) / n + 1
    }
}

/// The 1-minute load average (Linux), for the record: a busy machine slows every phase.
fn loadavg() -> Option<f64> {
    std::fs::read_to_string("/proc/loadavg")
        .ok()?
        .split_whitespace()
        .next()?
        .parse()
        .ok()
}

/// The bytes of memory a file holds (its allocated blocks: on tmpfs, its resident size).
fn resident(path: &std::path::Path) -> u64 {
    use std::os::unix::fs::MetadataExt;
    std::fs::metadata(path).map_or(0, |m| m.blocks() * 512)
}

/// The map worker `w` uses.
fn map_name(private: bool, w: u64) -> String {
    if private {
        format!("bench.{w}")
    } else {
        "bench".into()
    }
}

/// What every worker thread of a run shares.
struct Ctx {
    /// Workers in all.
    n: u64,
    keys: u64,
    g: Gen,
    mix: u64,
    private: bool,
}

/// Runs one phase in worker `w`: (ops, errors).
fn worker_phase(
    c: &Ctx,
    w: u64,
    map: &Map,
    phase: &str,
    rep: &mut Tick,
) -> shoal::Result<(u64, u64)> {
    let (n, g) = (c.n, c.g);
    let mut kb = vec![0u8; g.key_buf_len()];
    let vsize = g.value_size();
    let mut vb = vec![0u8; vsize];
    let (mut ops, mut errors) = (0u64, 0u64);
    // Whose keys this worker reads: another worker's in a shared map, so that reads cross
    // workers; its own in a private map.
    let src = if c.private { w } else { (w + 1) % n };
    // i32 values are the same in every phase, so a read can check the value itself.
    let exact = g.value_type() == ValueType::I32;
    let check = |found: bool, buf: &[u8], i: u64, vb: &mut [u8]| -> bool {
        if !found || buf.len() != vsize {
            return false;
        }
        if exact {
            g.value(b"val:", i, vb);
            return buf == &vb[..];
        }
        true
    };
    match phase {
        "PUT" | "UPD" => {
            let (tag, want) = if phase == "PUT" {
                (b"val:", PutOutcome::Inserted)
            } else {
                (b"upd:", PutOutcome::Replaced)
            };
            for i in share(w, n, c.keys) {
                let kl = g.key(i, &mut kb);
                g.value(tag, i, &mut vb);
                errors += (map.put(&kb[..kl], &vb)? != want) as u64;
                ops += 1;
                rep.tick(ops);
            }
        }
        "MIX" => {
            let mut rng = Rng(0x9e37_79b9_7f4a_7c15 ^ (w + 1).wrapping_mul(0xff51_afd7_ed55_8ccd));
            let mut buf = Vec::new();
            let own = share_len(w, n, c.keys);
            for i in share(w, n, c.keys) {
                if rng.next() % 100 < c.mix {
                    let kl = g.key(i, &mut kb);
                    g.value(b"mix:", i, &mut vb);
                    errors += !map.remove(&kb[..kl])? as u64;
                    errors += (map.put(&kb[..kl], &vb)? != PutOutcome::Inserted) as u64;
                    ops += 2;
                } else {
                    // Another worker may have this key removed for a moment: no check.
                    let j = if c.private {
                        w + n * (rng.next() % own)
                    } else {
                        rng.next() % c.keys
                    };
                    let kl = g.key(j, &mut kb);
                    map.get_into(&kb[..kl], &mut buf)?;
                    ops += 1;
                }
                rep.tick(ops);
            }
        }
        "GET" => {
            let mut buf = Vec::new();
            for i in share(src, n, c.keys) {
                let kl = g.key(i, &mut kb);
                let found = map.get_into(&kb[..kl], &mut buf)?;
                errors += !check(found, &buf, i, &mut vb) as u64;
                ops += 1;
                rep.tick(ops);
            }
        }
        "GET_RAND" => {
            let mut buf = Vec::new();
            let len = share_len(src, n, c.keys);
            let order = Perm::new(len, ORDER_SEED);
            for j in 0..len {
                let i = src + n * order.get(j);
                let kl = g.key(i, &mut kb);
                let found = map.get_into(&kb[..kl], &mut buf)?;
                errors += !check(found, &buf, i, &mut vb) as u64;
                ops += 1;
                rep.tick(ops);
            }
        }
        "GET_MANY" => {
            let kmax = g.key_buf_len();
            let mut flat = vec![0u8; BATCH * kmax];
            let mut lens = [0usize; BATCH];
            let mut it = share(src, n, c.keys).peekable();
            while it.peek().is_some() {
                let mut k = 0;
                for (j, i) in it.by_ref().take(BATCH).enumerate() {
                    lens[j] = g.key(i, &mut flat[j * kmax..(j + 1) * kmax]);
                    k = j + 1;
                }
                let refs: Vec<&[u8]> = (0..k)
                    .map(|j| &flat[j * kmax..j * kmax + lens[j]])
                    .collect();
                map.get_many_with(&refs, |_, v| {
                    errors += (v.map(|v| v.len()) != Some(vsize)) as u64;
                })?;
                ops += k as u64;
                rep.tick(ops);
            }
        }
        "REMOVE" => {
            for i in share(w, n, c.keys) {
                let kl = g.key(i, &mut kb);
                errors += !map.remove(&kb[..kl])? as u64;
                ops += 1;
                rep.tick(ops);
            }
        }
        other => {
            return Err(shoal::Error::InvalidArgument(format!(
                "unknown phase {other}"
            )))
        }
    }
    rep.done.store(ops, Ordering::Relaxed);
    Ok((ops, errors))
}

/// Pins the calling thread to `core`.
fn pin_to(core: u64) -> Result<(), String> {
    let mut set = rustix::thread::CpuSet::new();
    set.set(core as usize);
    rustix::thread::sched_setaffinity(None, &set)
        .map_err(|e| format!("cannot pin a worker to core {core}: {e}"))
}

/// The hidden `bench-worker` subcommand: one worker process, of `--threads` threads.
pub fn worker(a: WorkerArgs) -> Result<(), Fail> {
    let g = Gen::new(a.keys_pattern, a.keys, a.key_size, a.value_type).map_err(Fail::Error)?;
    if a.processes == 0 || a.threads == 0 || a.id >= a.processes {
        return Err(Fail::err("bad worker id"));
    }
    let ctx = Ctx {
        n: a.processes * a.threads,
        keys: a.keys,
        g,
        mix: a.mix,
        private: a.private_maps,
    };
    let store = Store::open_existing(&a.path)?;
    let first = a.id * a.threads;
    let maps = (first..first + a.threads)
        .map(|w| store.open_map(&map_name(a.private_maps, w)))
        .collect::<shoal::Result<Vec<Map>>>()?;
    let mut out = std::io::stdout();
    writeln!(out, "ready")?;
    out.flush()?;
    for line in std::io::stdin().lock().lines() {
        let line = line?;
        let Some(phase) = line.strip_prefix("go ") else {
            break; // "exit", or anything else
        };
        let c0 = cpu_ns();
        let done: Vec<AtomicU64> = maps.iter().map(|_| AtomicU64::new(0)).collect();
        let results: Vec<Result<(u64, u64), String>> = std::thread::scope(|s| {
            let (tx, rx) = mpsc::channel::<()>();
            let handles: Vec<_> = maps
                .iter()
                .zip(&done)
                .enumerate()
                .map(|(t, (map, done))| {
                    let (ctx, tx) = (&ctx, tx.clone());
                    let w = first + t as u64;
                    s.spawn(move || {
                        let r = (|| {
                            if a.pin >= 0 {
                                pin_to(a.pin as u64 + w)?;
                            }
                            let mut rep = Tick { done, calls: 0 };
                            worker_phase(ctx, w, map, phase, &mut rep).map_err(|e| e.to_string())
                        })();
                        let _ = tx.send(());
                        r
                    })
                })
                .collect();
            drop(tx);
            // Progress every 100 ms; the end of the last thread is seen at once.
            let mut finished = 0;
            while finished < handles.len() {
                match rx.recv_timeout(Duration::from_millis(100)) {
                    Ok(()) => finished += 1,
                    Err(mpsc::RecvTimeoutError::Timeout) => {
                        let sum: u64 = done.iter().map(|d| d.load(Ordering::Relaxed)).sum();
                        let _ = writeln!(out, "p {sum}").and_then(|_| out.flush());
                    }
                    Err(mpsc::RecvTimeoutError::Disconnected) => break,
                }
            }
            handles
                .into_iter()
                .map(|h| {
                    h.join()
                        .unwrap_or_else(|_| Err("a worker thread panicked".into()))
                })
                .collect()
        });
        let (mut ops, mut errors) = (0, 0);
        for r in results {
            match r {
                Ok((o, e)) => {
                    ops += o;
                    errors += e;
                }
                Err(e) => {
                    writeln!(out, "fail {e}")?;
                    out.flush()?;
                    return Err(Fail::err(e));
                }
            }
        }
        writeln!(out, "done {ops} {errors} {}", cpu_ns() - c0)?;
        out.flush()?;
    }
    Ok(())
}

enum Msg {
    Ready,
    Done { ops: u64, errors: u64, cpu: u64 },
    Fail(String),
    Eof,
}

/// Results of one phase.
struct PhaseResult {
    name: &'static str,
    /// The round it belongs to, from 0.
    round: u32,
    ops: u64,
    secs: f64,
    cpu_ns: u64,
    errors: u64,
    file_size: u64,
    /// Bytes the store held in memory at the end of the phase.
    resident: u64,
    entries: u64,
    live_bytes: u64,
    /// Chunks the cleaner reclaimed during the phase.
    cleaned: u64,
}

impl PhaseResult {
    fn ops_per_sec(&self) -> f64 {
        self.ops as f64 / self.secs.max(1e-9)
    }
}

/// One phase over all its rounds: the median round (by rate) and the spread.
struct Summary<'a> {
    name: &'static str,
    /// The round with the median rate (the lower middle one of an even count).
    median: &'a PhaseResult,
    min: f64,
    max: f64,
    rounds: usize,
    errors: u64,
    cleaned: u64,
}

fn summarize<'a>(results: &'a [PhaseResult], phases: &[&'static str]) -> Vec<Summary<'a>> {
    let mut out: Vec<Summary> = Vec::new();
    for (k, &name) in phases.iter().enumerate() {
        // The same phase may be listed twice: the k-th entry of every round.
        let mut rs: Vec<&PhaseResult> = results
            .iter()
            .enumerate()
            .filter(|(j, _)| j % phases.len() == k)
            .map(|(_, r)| r)
            .collect();
        if rs.is_empty() {
            continue;
        }
        rs.sort_by(|a, b| a.ops_per_sec().total_cmp(&b.ops_per_sec()));
        out.push(Summary {
            name,
            median: rs[(rs.len() - 1) / 2],
            min: rs[0].ops_per_sec(),
            max: rs[rs.len() - 1].ops_per_sec(),
            rounds: rs.len(),
            errors: rs.iter().map(|r| r.errors).sum(),
            cleaned: rs.iter().map(|r| r.cleaned).sum(),
        });
    }
    out
}

/// Kills the workers still running and removes the store (unless kept) on the way out,
/// whether the run succeeded or not.
struct Run {
    path: PathBuf,
    keep: bool,
    store: Option<Store>,
    children: Vec<Child>,
    stdins: Vec<ChildStdin>,
}

impl Drop for Run {
    fn drop(&mut self) {
        self.stdins.clear(); // EOF: idle workers exit by themselves
        for c in &mut self.children {
            if matches!(c.try_wait(), Ok(None)) {
                let _ = c.kill();
            }
            let _ = c.wait();
        }
        self.store = None;
        if !self.keep {
            let _ = Store::destroy(&self.path);
        }
    }
}

/// `shoal bench`.
pub fn run(a: BenchArgs) -> Result<(), Fail> {
    let procs = a
        .processes
        .unwrap_or(if a.threads.is_some() { 1 } else { 2 }) as u64;
    let threads = a.threads.unwrap_or(1) as u64;
    let n = procs * threads;
    if a.keys < n {
        return Err(Fail::err(format!(
            "--keys {} is fewer than the {n} workers",
            a.keys
        )));
    }
    if a.key_size as usize > shoal::MAX_KEY_LEN {
        return Err(Fail::err(format!(
            "--key-size is at most {}",
            shoal::MAX_KEY_LEN
        )));
    }
    let vtype = a
        .value_type
        .unwrap_or(ValueType::Bytes(a.value_size as usize));
    Gen::new(a.keys_pattern, a.keys, a.key_size as usize, vtype).map_err(Fail::Error)?;
    let phases: Vec<&'static str> = match &a.phases {
        Some(p) => p.clone(),
        None if a.format == Format::Mdtest => MDTEST_PHASES.to_vec(),
        None => PHASES.to_vec(),
    };
    if phases.is_empty() {
        return Err(Fail::err("--phases lists no phase"));
    }
    if a.rounds > 1 && !(phases.contains(&"PUT") && phases.contains(&"REMOVE")) {
        return Err(Fail::err(
            "--rounds above 1 needs PUT and REMOVE (or DEL) among the phases: each round \
             starts from an empty map",
        ));
    }
    let cpus = std::thread::available_parallelism()
        .map(|c| c.get())
        .unwrap_or(0);
    if a.pin >= 0 && a.pin as u64 + n > cpus as u64 {
        return Err(Fail::err(format!(
            "--pin {} with {n} workers needs cores {} to {}; this machine has {cpus} (0 to {})",
            a.pin,
            a.pin,
            a.pin as u64 + n - 1,
            cpus.saturating_sub(1)
        )));
    }
    let path = match &a.path {
        Some(p) => shoal::resolve_path(p),
        None => PathBuf::from(format!("/dev/shm/shoal-bench-{}.shoal", std::process::id())),
    };
    signal::catch_interrupts();
    let store =
        Store::open_with(&path, &Options::default(), OpenMode::CreateNew).map_err(|e| match e {
            shoal::Error::AlreadyExists(_) => Fail::err(format!(
                "{} exists; remove it (shoal rm) or choose another --path",
                path.display()
            )),
            e => Fail::err(format!("cannot create {}: {e}", path.display())),
        })?;
    let maps = (0..if a.private_maps { n } else { 1 })
        .map(|w| store.map(&map_name(a.private_maps, w)))
        .collect::<shoal::Result<Vec<Map>>>()?;
    let mut run = Run {
        path: path.clone(),
        keep: a.keep,
        store: Some(store.clone()),
        children: Vec::new(),
        stdins: Vec::new(),
    };
    let json = a.json;
    let say = |s: &str| {
        if json {
            eprintln!("{s}");
        } else {
            println!("{s}");
        }
    };
    let load_start = loadavg();
    let keys_desc = match a.keys_pattern {
        KeysPattern::Padded => format!("padded keys of {} B", a.key_size),
        KeysPattern::Seq => "sequential keys file.mdtest.%d.%d".into(),
        KeysPattern::Rand => "random keys file.mdtest.%d.%d".into(),
    };
    let value_desc = match vtype {
        ValueType::I32 => "i32 values".to_string(),
        ValueType::Bytes(b) => format!("values of {b} B"),
    };
    say(&format!(
        "shoal bench: {procs} processes × {threads} threads = {n} workers, {} {keys_desc}, \
         {value_desc}, {}, pin {}, {} round(s) of {}, store {}",
        human::count(a.keys),
        if a.private_maps {
            "one map per worker"
        } else {
            "one shared map"
        },
        a.pin,
        a.rounds,
        phases.join(","),
        path.display()
    ));
    say(&format!(
        "machine: {cpus} cpus, load average {} before the run",
        load_start.map_or("unknown".into(), |l| format!("{l:.2}"))
    ));

    // Start the workers.
    let exe = std::env::current_exe().map_err(|e| {
        Fail::err(format!(
            "cannot find the shoal binary to start workers: {e}"
        ))
    })?;
    let (tx, rx) = mpsc::channel::<(usize, Msg)>();
    let progress: Arc<Vec<AtomicU64>> = Arc::new((0..procs).map(|_| AtomicU64::new(0)).collect());
    for w in 0..procs as usize {
        let mut cmd = Command::new(&exe);
        cmd.arg(WORKER_SUBCOMMAND)
            .arg("--path")
            .arg(&path)
            .args(["--id", &w.to_string()])
            .args(["--processes", &procs.to_string()])
            .args(["--threads", &threads.to_string()])
            .args(["--keys", &a.keys.to_string()])
            .args([
                "--keys-pattern",
                &format!("{:?}", a.keys_pattern).to_lowercase(),
            ])
            .args(["--key-size", &a.key_size.to_string()])
            .args([
                "--value-type",
                &match vtype {
                    ValueType::I32 => "i32".to_string(),
                    ValueType::Bytes(b) => format!("bytes:{b}"),
                },
            ])
            .args(["--mix", &a.mix.to_string()])
            .args(["--pin", &a.pin.to_string()]);
        if a.private_maps {
            cmd.arg("--private-maps");
        }
        let mut child = cmd
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()
            .map_err(|e| Fail::err(format!("cannot start worker {w}: {e}")))?;
        let (Some(stdin), Some(stdout)) = (child.stdin.take(), child.stdout.take()) else {
            return Err(Fail::err("worker pipes missing"));
        };
        run.children.push(child);
        run.stdins.push(stdin);
        let tx = tx.clone();
        let progress = progress.clone();
        std::thread::spawn(move || {
            for line in BufReader::new(stdout).lines() {
                let Ok(line) = line else { break };
                let mut f = line.split_ascii_whitespace();
                let msg = match (f.next(), f.next(), f.next(), f.next()) {
                    (Some("p"), Some(d), None, None) => {
                        progress[w].store(d.parse().unwrap_or(0), Ordering::Relaxed);
                        continue;
                    }
                    (Some("ready"), None, None, None) => Msg::Ready,
                    (Some("done"), Some(o), Some(e), Some(c)) => {
                        match (o.parse(), e.parse(), c.parse()) {
                            (Ok(ops), Ok(errors), Ok(cpu)) => {
                                progress[w].store(ops, Ordering::Relaxed);
                                Msg::Done { ops, errors, cpu }
                            }
                            _ => Msg::Fail(format!("garbled report {line:?}")),
                        }
                    }
                    _ if line.starts_with("fail ") => Msg::Fail(line[5..].to_string()),
                    _ => Msg::Fail(format!("garbled report {line:?}")),
                };
                if tx.send((w, msg)).is_err() {
                    return;
                }
            }
            let _ = tx.send((w, Msg::Eof));
        });
    }
    drop(tx);
    let died = |w: usize, why: &str| Fail::err(format!("worker process {w} {why}"));
    let recv = |timeout: Duration| -> Result<Option<(usize, Msg)>, Fail> {
        match rx.recv_timeout(timeout) {
            Ok(m) => Ok(Some(m)),
            Err(mpsc::RecvTimeoutError::Timeout) => Ok(None),
            Err(mpsc::RecvTimeoutError::Disconnected) => Err(Fail::err("all workers are gone")),
        }
    };
    let mut ready = 0;
    let start = Instant::now();
    while ready < procs {
        if signal::interrupted() {
            return Err(Fail::err("interrupted"));
        }
        match recv(Duration::from_millis(100))? {
            Some((_, Msg::Ready)) => ready += 1,
            Some((w, Msg::Fail(m))) => return Err(died(w, &format!("failed: {m}"))),
            Some((w, Msg::Eof)) => return Err(died(w, "exited before it was ready")),
            Some((w, _)) => return Err(died(w, "said something unexpected")),
            None if start.elapsed() > Duration::from_secs(120) => {
                return Err(Fail::err("the workers did not start within 120 s"))
            }
            None => {}
        }
    }

    // The phases.
    let t_run = Instant::now();
    let mut results: Vec<PhaseResult> = Vec::new();
    let mut cleaned_before = store.stats()?.chunks_cleaned;
    let resident_before = resident(&path);
    for round in 0..a.rounds {
        for &phase in &phases {
            for p in progress.iter() {
                p.store(0, Ordering::Relaxed);
            }
            let t0 = Instant::now();
            for (w, s) in run.stdins.iter_mut().enumerate() {
                writeln!(s, "go {phase}")
                    .and_then(|_| s.flush())
                    .map_err(|e| died(w, &format!("cannot be reached: {e}")))?;
            }
            let (mut done, mut ops, mut errors, mut cpu) = (0u64, 0u64, 0u64, 0u64);
            let mut next_tick = t0 + Duration::from_secs(1);
            let (mut last_t, mut last_ops) = (t0, 0u64);
            while done < procs {
                if signal::interrupted() {
                    return Err(Fail::err("interrupted"));
                }
                let now = Instant::now();
                if now >= next_tick {
                    let total: u64 = progress.iter().map(|p| p.load(Ordering::Relaxed)).sum();
                    let rate = (total - last_ops.min(total)) as f64 / (now - last_t).as_secs_f64();
                    let file = std::fs::metadata(&path).map(|m| m.len()).unwrap_or(0);
                    say(&format!(
                        "[{:6.1}s] {:<8} {:>12} ops/s  {:>11} per worker  file {}",
                        t_run.elapsed().as_secs_f64(),
                        phase,
                        human::rate(rate),
                        human::rate(rate / n as f64),
                        human::size(file)
                    ));
                    (last_t, last_ops) = (now, total);
                    next_tick += Duration::from_secs(1);
                    continue;
                }
                match recv((next_tick - now).min(Duration::from_millis(100)))? {
                    Some((
                        _,
                        Msg::Done {
                            ops: o,
                            errors: e,
                            cpu: c,
                        },
                    )) => {
                        done += 1;
                        ops += o;
                        errors += e;
                        cpu += c;
                    }
                    Some((w, Msg::Fail(m))) => {
                        return Err(died(w, &format!("failed in {phase}: {m}")))
                    }
                    Some((w, Msg::Eof)) => return Err(died(w, &format!("died in {phase}"))),
                    Some((w, Msg::Ready)) => return Err(died(w, "said something unexpected")),
                    None => {}
                }
            }
            let secs = t0.elapsed().as_secs_f64();
            let st = store.stats()?;
            let mut entries = 0;
            for m in &maps {
                entries += m.len()?;
            }
            let r = PhaseResult {
                name: phase,
                round,
                ops,
                secs,
                cpu_ns: cpu,
                errors,
                file_size: st.file_size,
                resident: resident(&path),
                entries,
                live_bytes: st.live_bytes,
                cleaned: st.chunks_cleaned - cleaned_before,
            };
            cleaned_before = st.chunks_cleaned;
            say(&format!(
                "[{:6.1}s] {:<8} done: {} ops in {:.2} s = {} ops/s{}{}",
                t_run.elapsed().as_secs_f64(),
                phase,
                human::count(ops),
                secs,
                human::rate(r.ops_per_sec()),
                if a.rounds > 1 {
                    format!("  (round {}/{})", round + 1, a.rounds)
                } else {
                    String::new()
                },
                if errors > 0 {
                    format!("  ({errors} FAILED CHECKS)")
                } else {
                    String::new()
                }
            ));
            results.push(r);
        }
    }

    // Stop the workers.
    for s in run.stdins.iter_mut() {
        let _ = writeln!(s, "exit").and_then(|_| s.flush());
    }
    run.stdins.clear();
    for (w, c) in run.children.iter_mut().enumerate() {
        let st = c
            .wait()
            .map_err(|e| Fail::err(format!("waiting for worker {w}: {e}")))?;
        if !st.success() {
            return Err(died(w, &format!("exited with {st}")));
        }
    }
    let check = if a.check {
        let rep = store.check()?;
        say(&format!("check: {}", rep.to_string().replace('\n', "; ")));
        Some(rep)
    } else {
        None
    };

    // Report.
    let load_end = loadavg();
    let sums = summarize(&results, &phases);
    let mut report = match a.format {
        Format::Table => summary_table(&sums, n),
        Format::Mdtest => mdtest_report(&sums, &a, procs, threads, resident_before),
    };
    let short: Vec<&str> = sums
        .iter()
        .filter(|s| s.median.secs < 2.0)
        .map(|s| s.name)
        .collect();
    if !short.is_empty() {
        report.push_str(&format!(
            "short phases (under 2 s, noisy): {}; use more --keys or --rounds\n",
            short.join(", ")
        ));
    }
    if let (Some(l0), Some(l1)) = (load_start, load_end) {
        report.push_str(&format!(
            "load average {l0:.2} before, {l1:.2} after, on {cpus} cpus{}\n",
            if l0.max(l1) > cpus as f64 {
                " (busy machine: wall-time figures are inflated; CPU NS/OP is not)"
            } else {
                ""
            }
        ));
    }
    if json {
        eprint!("\n{report}");
        let per_phase = |r: &PhaseResult| {
            serde_json::json!({
                "phase": r.name,
                "round": r.round,
                "ops": r.ops,
                "seconds": r.secs,
                "ops_per_sec": r.ops_per_sec(),
                "ops_per_sec_per_worker": r.ops_per_sec() / n as f64,
                "ns_per_op": 1e9 * n as f64 / r.ops_per_sec(),
                "cpu_ns_per_op": r.cpu_ns as f64 / r.ops.max(1) as f64,
                "file_size": r.file_size,
                "resident_bytes": r.resident,
                "entries": r.entries,
                "live_bytes": r.live_bytes,
                "bytes_per_entry": if r.entries > 0 {
                    serde_json::json!(r.resident as f64 / r.entries as f64)
                } else {
                    serde_json::Value::Null
                },
                "chunks_cleaned": r.cleaned,
                "failed_checks": r.errors,
            })
        };
        let summary: Vec<serde_json::Value> = sums
            .iter()
            .map(|s| {
                serde_json::json!({
                    "phase": s.name,
                    "rounds": s.rounds,
                    "median_ops_per_sec": s.median.ops_per_sec(),
                    "min_ops_per_sec": s.min,
                    "max_ops_per_sec": s.max,
                    "median_seconds": s.median.secs,
                })
            })
            .collect();
        let v = serde_json::json!({
            "processes": procs,
            "threads": threads,
            "workers": n,
            "pin": a.pin,
            "keys": a.keys,
            "keys_pattern": format!("{:?}", a.keys_pattern).to_lowercase(),
            "key_size": a.key_size,
            "value_size": vtype.size(),
            "value_type": match vtype { ValueType::I32 => "i32", ValueType::Bytes(_) => "bytes" },
            "private_maps": a.private_maps,
            "mix_percent": a.mix,
            "rounds": a.rounds,
            "cpus": cpus,
            "loadavg_before": load_start,
            "loadavg_after": load_end,
            "resident_before": resident_before,
            "path": path.display().to_string(),
            "kept": a.keep,
            "check_ok": check.as_ref().map(|r| r.is_ok()),
            "phases": results.iter().map(per_phase).collect::<Vec<_>>(),
            "summary": summary,
        });
        println!("{v}");
    } else {
        print!("\n{report}");
    }
    if a.keep {
        say(&format!("store kept at {}", path.display()));
    }
    let failed: u64 = results.iter().map(|r| r.errors).sum();
    if failed > 0 {
        return Err(Fail::err(format!(
            "{failed} operations returned a wrong result (see the table)"
        )));
    }
    if check.is_some_and(|r| !r.is_ok()) {
        return Err(Fail::err("the store is not sound after the run"));
    }
    drop(maps);
    drop(store);
    drop(run);
    Ok(())
}

/// mem_meta_kv_benchmark's layout: Mops in total and per worker, MB/s and memory cost
/// (growth of the resident size, in 10^6 bytes) for PUT.
fn mdtest_report(
    sums: &[Summary],
    a: &BenchArgs,
    procs: u64,
    threads: u64,
    resident_before: u64,
) -> String {
    let n = procs * threads;
    let per = if procs == 1 {
        "per-thread"
    } else {
        "per-worker"
    };
    let mut out = format!(
        "shoal bench ({}), pid {}\n{} thread(s) in {} process(es), start_core {}\n\
         Each thread put, get, delete {} elements, total {} ops\n",
        if a.private_maps {
            "one Shoal map per thread"
        } else {
            "one shared Shoal map"
        },
        std::process::id(),
        n,
        procs,
        a.pin,
        share_len(0, n, a.keys),
        a.keys
    );
    for s in sums {
        let r = s.median;
        let mops = r.ops_per_sec() / 1e6;
        let label = if s.name == "REMOVE" { "DEL" } else { s.name };
        if s.name == "PUT" {
            let cost = r.resident.saturating_sub(resident_before) as f64;
            let mbs = cost / r.secs.max(1e-9) / 1e6;
            out.push_str(&format!(
                "[{label}] total {mops:.4} Mops, in {:.4} s, {mbs:.4} MB/s, cost {:.4} MB\n      \
                 {per} {:.4} Mops, {:.4} MB/s\n",
                r.secs,
                cost / 1e6,
                mops / n as f64,
                mbs / n as f64
            ));
        } else {
            out.push_str(&format!(
                "[{label}] total {mops:.4} Mops, in {:.4} s\n      {per} {:.4} Mops\n",
                r.secs,
                mops / n as f64
            ));
        }
        if s.rounds > 1 {
            out.push_str(&format!(
                "      median of {} rounds, spread {:.4}-{:.4} Mops\n",
                s.rounds,
                s.min / 1e6,
                s.max / 1e6
            ));
        }
        if s.errors > 0 {
            out.push_str(&format!("      {} FAILED CHECKS\n", s.errors));
        }
    }
    if let Some(p) = sums.iter().find(|s| s.name == "PUT") {
        let r = p.median;
        out.push_str(&format!(
            "memory: {:.4} MB resident with {} entries, {:.1} bytes per entry\n",
            r.resident as f64 / 1e6,
            r.entries,
            r.resident as f64 / r.entries.max(1) as f64
        ));
    }
    out
}

fn summary_table(sums: &[Summary], n: u64) -> String {
    let rows: Vec<Vec<String>> = sums
        .iter()
        .map(|s| {
            let r = s.median;
            let ops_s = r.ops_per_sec();
            vec![
                s.name.to_string(),
                human::count(r.ops),
                format!("{:.2}", r.secs),
                human::rate(ops_s),
                if s.rounds > 1 {
                    format!("{}-{}", human::rate(s.min), human::rate(s.max))
                } else {
                    "-".into()
                },
                human::rate(ops_s / n as f64),
                format!("{:.0}", 1e9 * n as f64 / ops_s),
                format!("{:.0}", r.cpu_ns as f64 / r.ops.max(1) as f64),
                human::count(s.cleaned),
                human::size(r.file_size),
                human::size(r.resident),
                if r.entries > 0 {
                    format!("{:.1}", r.resident as f64 / r.entries as f64)
                } else {
                    "-".into()
                },
                if s.errors > 0 {
                    s.errors.to_string()
                } else {
                    "ok".into()
                },
            ]
        })
        .collect();
    human::table(
        &[
            "PHASE",
            "OPS",
            "SECONDS",
            "OPS/S",
            "SPREAD",
            "OPS/S/WORKER",
            "NS/OP",
            "CPU NS/OP",
            "CLEANED",
            "FILE",
            "RESIDENT",
            "BYTES/ENTRY",
            "CHECKS",
        ],
        &rows,
        &[0],
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn counts() {
        assert_eq!(parse_count("1M").unwrap(), 1_000_000);
        assert_eq!(parse_count("20_000").unwrap(), 20_000);
        assert_eq!(parse_count("500k").unwrap(), 500_000);
        assert!(parse_count("x").is_err());
    }

    #[test]
    fn shares_and_phases() {
        assert_eq!(share(1, 3, 10).collect::<Vec<_>>(), vec![1, 4, 7]);
        for (w, n, keys) in [(0, 1, 5), (1, 3, 10), (2, 3, 10), (0, 3, 10), (4, 5, 3)] {
            assert_eq!(share_len(w, n, keys), share(w, n, keys).count() as u64);
        }
        assert_eq!(parse_phase("del"), Ok("REMOVE"));
        assert_eq!(parse_phase("GET_RAND"), Ok("GET_RAND"));
        assert!(parse_phase("SCAN").is_err());
    }
}
