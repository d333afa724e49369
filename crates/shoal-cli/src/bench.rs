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

/// `shoal bench --help`.
pub const BENCH_HELP: &str = "\
Multi-process benchmark. Creates a store (in /dev/shm unless --path), starts --processes \
worker processes and runs these phases, all workers starting each phase together:

  PUT       each worker inserts its share of the keys (key i goes to worker i mod N)
  UPD       each worker overwrites its keys with new values of the same size
  MIX       for each of its keys a worker either (--mix percent of the time) removes it and
            puts it back (2 ops), or gets a random key of the whole set (1 op)
  GET       each worker gets the keys of the next worker's share (written by another
            process), checking each is present with the right size
  GET_MANY  the same in batches of 32 with Map::get_many_with (software prefetch)
  REMOVE    each worker removes its keys

Keys are 'key:%0Nd' (the decimal index zero-padded to --key-size bytes; without the 'key:' \
prefix when it does not fit), values --value-size bytes. While it runs it prints one line \
a second (phase, ops/s in total and per process, file size); at the end a table per phase: \
ops/s, ns/op (wall time per operation of one process = processes / total ops/s), CPU \
ns/op (CPU time of the workers per operation: what an op costs when processes outnumber \
cores), chunks the cleaner reclaimed, file size and bytes per entry (file size / entries). With --json the per-second \
lines and the table go to stderr and stdout gets one JSON object.

Each worker checks every result (a PUT inserted, an UPD replaced, a GET found a value of \
the right size, a REMOVE removed); any failure makes the exit status non-zero. The store \
is removed at the end unless --keep.

The default (2 processes, 1M keys of 16 bytes, 16-byte values) takes a few seconds.

`shoal bench queue` benchmarks queue sets instead (see `shoal bench queue --help`).";

/// The hidden subcommand that runs one worker (see `WorkerCli` in main.rs).
pub const WORKER_SUBCOMMAND: &str = "bench-worker";

/// The phases, in order.
const PHASES: [&str; 6] = ["PUT", "UPD", "MIX", "GET", "GET_MANY", "REMOVE"];

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

/// Options of `shoal bench`.
#[derive(Args, Debug, Clone)]
pub struct BenchArgs {
    /// Worker processes
    #[arg(long, default_value_t = 2, value_parser = clap::value_parser!(u32).range(1..=1000))]
    processes: u32,
    /// Keys in all (shared out among the workers); accepts 1_000_000, 10M, 500k
    #[arg(long, default_value = "1M", value_parser = parse_count)]
    keys: u64,
    /// Bytes per key
    #[arg(long, default_value_t = 16, value_parser = clap::value_parser!(u32).range(1..=4096))]
    key_size: u32,
    /// Bytes per value
    #[arg(long, default_value_t = 16, value_parser = clap::value_parser!(u32).range(0..=(1 << 30)))]
    value_size: u32,
    /// Percentage of MIX steps that remove a key and put it back (the rest are gets)
    #[arg(long, default_value_t = 2, value_parser = clap::value_parser!(u8).range(0..=100))]
    mix: u8,
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
    keys: u64,
    #[arg(long)]
    key_size: usize,
    #[arg(long)]
    value_size: usize,
    #[arg(long)]
    mix: u64,
}

/// Makes keys and values.
#[derive(Clone, Copy)]
struct Gen {
    ksize: usize,
    prefix: bool,
    vsize: usize,
}

fn digits(n: u64) -> usize {
    n.checked_ilog10().map_or(1, |d| d as usize + 1)
}

/// Writes `n` in decimal, zero-padded (or cut to its low digits) to fill `buf`.
fn fill_dec(buf: &mut [u8], mut n: u64) {
    for b in buf.iter_mut().rev() {
        *b = b'0' + (n % 10) as u8;
        n /= 10;
    }
}

impl Gen {
    fn new(keys: u64, ksize: usize, vsize: usize) -> Result<Gen, String> {
        let need = digits(keys.saturating_sub(1));
        if ksize < need {
            return Err(format!(
                "--key-size {ksize} is too small for {keys} distinct keys (at least {need})"
            ));
        }
        Ok(Gen {
            ksize,
            prefix: ksize >= need + 4,
            vsize,
        })
    }

    fn key(&self, i: u64, buf: &mut [u8]) {
        if self.prefix {
            buf[..4].copy_from_slice(b"key:");
            fill_dec(&mut buf[4..self.ksize], i);
        } else {
            fill_dec(&mut buf[..self.ksize], i);
        }
    }

    fn value(&self, tag: &[u8; 4], i: u64, buf: &mut [u8]) {
        let t = self.vsize.min(4);
        buf[..t].copy_from_slice(&tag[..t]);
        fill_dec(&mut buf[t..self.vsize], i);
    }
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

/// Progress lines from a worker, at most one every 100 ms.
struct Reporter {
    out: std::io::Stdout,
    last: Instant,
    calls: u32,
}

impl Reporter {
    #[inline]
    fn tick(&mut self, done: u64) {
        self.calls += 1;
        if self.calls & 255 == 0 && self.last.elapsed() >= Duration::from_millis(100) {
            let _ = writeln!(self.out, "p {done}");
            let _ = self.out.flush();
            self.last = Instant::now();
        }
    }
}

/// The keys of worker `w`: `w, w + n, w + 2n, …` below `keys`.
fn share(w: u64, n: u64, keys: u64) -> impl Iterator<Item = u64> {
    (w..keys).step_by(n as usize)
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

/// Runs one phase in a worker: (ops, errors).
fn worker_phase(
    a: &WorkerArgs,
    g: Gen,
    map: &Map,
    phase: &str,
    rep: &mut Reporter,
) -> shoal::Result<(u64, u64)> {
    let (n, w) = (a.processes, a.id);
    let mut kb = vec![0u8; g.ksize];
    let mut vb = vec![0u8; g.vsize];
    let (mut ops, mut errors) = (0u64, 0u64);
    match phase {
        "PUT" | "UPD" => {
            let (tag, want) = if phase == "PUT" {
                (b"val:", PutOutcome::Inserted)
            } else {
                (b"upd:", PutOutcome::Replaced)
            };
            for i in share(w, n, a.keys) {
                g.key(i, &mut kb);
                g.value(tag, i, &mut vb);
                errors += (map.put(&kb, &vb)? != want) as u64;
                ops += 1;
                rep.tick(ops);
            }
        }
        "MIX" => {
            let mut rng = Rng(0x9e37_79b9_7f4a_7c15 ^ (w + 1).wrapping_mul(0xff51_afd7_ed55_8ccd));
            let mut buf = Vec::new();
            for i in share(w, n, a.keys) {
                if rng.next() % 100 < a.mix {
                    g.key(i, &mut kb);
                    g.value(b"mix:", i, &mut vb);
                    errors += !map.remove(&kb)? as u64;
                    errors += (map.put(&kb, &vb)? != PutOutcome::Inserted) as u64;
                    ops += 2;
                } else {
                    // Another worker may have this key removed for a moment: no check.
                    g.key(rng.next() % a.keys, &mut kb);
                    map.get_into(&kb, &mut buf)?;
                    ops += 1;
                }
                rep.tick(ops);
            }
        }
        "GET" => {
            let mut buf = Vec::new();
            for i in share((w + 1) % n, n, a.keys) {
                g.key(i, &mut kb);
                let found = map.get_into(&kb, &mut buf)?;
                errors += (!found || buf.len() != g.vsize) as u64;
                ops += 1;
                rep.tick(ops);
            }
        }
        "GET_MANY" => {
            let mut flat = vec![0u8; BATCH * g.ksize];
            let mut it = share((w + 1) % n, n, a.keys).peekable();
            while it.peek().is_some() {
                let mut k = 0;
                for (j, i) in it.by_ref().take(BATCH).enumerate() {
                    g.key(i, &mut flat[j * g.ksize..(j + 1) * g.ksize]);
                    k = j + 1;
                }
                let refs: Vec<&[u8]> = flat[..k * g.ksize].chunks(g.ksize).collect();
                map.get_many_with(&refs, |_, v| {
                    errors += (v.map(|v| v.len()) != Some(g.vsize)) as u64;
                })?;
                ops += k as u64;
                rep.tick(ops);
            }
        }
        "REMOVE" => {
            for i in share(w, n, a.keys) {
                g.key(i, &mut kb);
                errors += !map.remove(&kb)? as u64;
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
    Ok((ops, errors))
}

/// The hidden `bench-worker` subcommand: one worker process.
pub fn worker(a: WorkerArgs) -> Result<(), Fail> {
    let g = Gen::new(a.keys, a.key_size, a.value_size).map_err(Fail::Error)?;
    if a.processes == 0 || a.id >= a.processes {
        return Err(Fail::err("bad worker id"));
    }
    let store = Store::open_existing(&a.path)?;
    let map = store.open_map("bench")?;
    let mut rep = Reporter {
        out: std::io::stdout(),
        last: Instant::now(),
        calls: 0,
    };
    writeln!(rep.out, "ready")?;
    rep.out.flush()?;
    for line in std::io::stdin().lock().lines() {
        let line = line?;
        let Some(phase) = line.strip_prefix("go ") else {
            break; // "exit", or anything else
        };
        let c0 = cpu_ns();
        rep.last = Instant::now();
        match worker_phase(&a, g, &map, phase, &mut rep) {
            Ok((ops, errors)) => writeln!(rep.out, "done {ops} {errors} {}", cpu_ns() - c0)?,
            Err(e) => {
                writeln!(rep.out, "fail {e}")?;
                rep.out.flush()?;
                return Err(e.into());
            }
        }
        rep.out.flush()?;
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
    ops: u64,
    secs: f64,
    cpu_ns: u64,
    errors: u64,
    file_size: u64,
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
    let n = a.processes as u64;
    if a.keys < n {
        return Err(Fail::err(format!(
            "--keys {} is fewer than --processes {n}",
            a.keys
        )));
    }
    if a.key_size as usize > shoal::MAX_KEY_LEN {
        return Err(Fail::err(format!(
            "--key-size is at most {}",
            shoal::MAX_KEY_LEN
        )));
    }
    Gen::new(a.keys, a.key_size as usize, a.value_size as usize).map_err(Fail::Error)?;
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
    let map = store.map("bench")?;
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
    let cpus = std::thread::available_parallelism()
        .map(|c| c.get())
        .unwrap_or(0);
    let load_start = loadavg();
    say(&format!(
        "shoal bench: {} processes, {} keys of {} B, values of {} B, MIX {}% remove+put, store {}",
        n,
        human::count(a.keys),
        a.key_size,
        a.value_size,
        a.mix,
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
    let progress: Arc<Vec<AtomicU64>> = Arc::new((0..n).map(|_| AtomicU64::new(0)).collect());
    for w in 0..n as usize {
        let mut child = Command::new(&exe)
            .arg(WORKER_SUBCOMMAND)
            .arg("--path")
            .arg(&path)
            .args(["--id", &w.to_string()])
            .args(["--processes", &n.to_string()])
            .args(["--keys", &a.keys.to_string()])
            .args(["--key-size", &a.key_size.to_string()])
            .args(["--value-size", &a.value_size.to_string()])
            .args(["--mix", &a.mix.to_string()])
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
    let died = |w: usize, why: &str| Fail::err(format!("worker {w} {why}"));
    let recv = |timeout: Duration| -> Result<Option<(usize, Msg)>, Fail> {
        match rx.recv_timeout(timeout) {
            Ok(m) => Ok(Some(m)),
            Err(mpsc::RecvTimeoutError::Timeout) => Ok(None),
            Err(mpsc::RecvTimeoutError::Disconnected) => Err(Fail::err("all workers are gone")),
        }
    };
    let mut ready = 0;
    let start = Instant::now();
    while ready < n {
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
    for phase in PHASES {
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
        while done < n {
            if signal::interrupted() {
                return Err(Fail::err("interrupted"));
            }
            let now = Instant::now();
            if now >= next_tick {
                let total: u64 = progress.iter().map(|p| p.load(Ordering::Relaxed)).sum();
                let rate = (total - last_ops.min(total)) as f64 / (now - last_t).as_secs_f64();
                let file = std::fs::metadata(&path).map(|m| m.len()).unwrap_or(0);
                say(&format!(
                    "[{:6.1}s] {:<8} {:>12} ops/s  {:>11} per process  file {}",
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
                Some((w, Msg::Fail(m))) => return Err(died(w, &format!("failed in {phase}: {m}"))),
                Some((w, Msg::Eof)) => return Err(died(w, &format!("died in {phase}"))),
                Some((w, Msg::Ready)) => return Err(died(w, "said something unexpected")),
                None => {}
            }
        }
        let secs = t0.elapsed().as_secs_f64();
        let st = store.stats()?;
        let r = PhaseResult {
            name: phase,
            ops,
            secs,
            cpu_ns: cpu,
            errors,
            file_size: st.file_size,
            entries: map.len()?,
            live_bytes: st.live_bytes,
            cleaned: st.chunks_cleaned - cleaned_before,
        };
        cleaned_before = st.chunks_cleaned;
        say(&format!(
            "[{:6.1}s] {:<8} done: {} ops in {:.2} s = {} ops/s{}",
            t_run.elapsed().as_secs_f64(),
            phase,
            human::count(ops),
            secs,
            human::rate(r.ops_per_sec()),
            if errors > 0 {
                format!("  ({errors} FAILED CHECKS)")
            } else {
                String::new()
            }
        ));
        results.push(r);
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
    let mut table = summary_table(&results, n);
    if let (Some(l0), Some(l1)) = (load_start, load_end) {
        table.push_str(&format!(
            "load average {l0:.2} before, {l1:.2} after, on {cpus} cpus{}\n",
            if l0.max(l1) > cpus as f64 {
                " (busy machine: wall-time figures are inflated; CPU NS/OP is not)"
            } else {
                ""
            }
        ));
    }
    if json {
        eprint!("\n{table}");
        let phases: Vec<serde_json::Value> = results
            .iter()
            .map(|r| {
                serde_json::json!({
                    "phase": r.name,
                    "ops": r.ops,
                    "seconds": r.secs,
                    "ops_per_sec": r.ops_per_sec(),
                    "ops_per_sec_per_process": r.ops_per_sec() / n as f64,
                    "ns_per_op": 1e9 * n as f64 / r.ops_per_sec(),
                    "cpu_ns_per_op": r.cpu_ns as f64 / r.ops.max(1) as f64,
                    "file_size": r.file_size,
                    "entries": r.entries,
                    "live_bytes": r.live_bytes,
                    "bytes_per_entry": if r.entries > 0 {
                        serde_json::json!(r.file_size as f64 / r.entries as f64)
                    } else {
                        serde_json::Value::Null
                    },
                    "chunks_cleaned": r.cleaned,
                    "failed_checks": r.errors,
                })
            })
            .collect();
        let v = serde_json::json!({
            "processes": n,
            "keys": a.keys,
            "key_size": a.key_size,
            "value_size": a.value_size,
            "mix_percent": a.mix,
            "cpus": cpus,
            "loadavg_before": load_start,
            "loadavg_after": load_end,
            "path": path.display().to_string(),
            "kept": a.keep,
            "check_ok": check.as_ref().map(|r| r.is_ok()),
            "phases": phases,
        });
        println!("{v}");
    } else {
        print!("\n{table}");
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
    drop(map);
    drop(store);
    drop(run);
    Ok(())
}

fn summary_table(results: &[PhaseResult], n: u64) -> String {
    let rows: Vec<Vec<String>> = results
        .iter()
        .map(|r| {
            let ops_s = r.ops_per_sec();
            vec![
                r.name.to_string(),
                human::count(r.ops),
                format!("{:.2}", r.secs),
                human::rate(ops_s),
                human::rate(ops_s / n as f64),
                format!("{:.0}", 1e9 * n as f64 / ops_s),
                format!("{:.0}", r.cpu_ns as f64 / r.ops.max(1) as f64),
                human::count(r.cleaned),
                human::size(r.file_size),
                if r.entries > 0 {
                    format!("{:.1}", r.file_size as f64 / r.entries as f64)
                } else {
                    "-".into()
                },
                if r.errors > 0 {
                    r.errors.to_string()
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
            "OPS/S/PROC",
            "NS/OP",
            "CPU NS/OP",
            "CLEANED",
            "FILE",
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
    fn keys_and_values() {
        let g = Gen::new(1_000_000, 16, 16).unwrap();
        let mut k = [0u8; 16];
        g.key(42, &mut k);
        assert_eq!(&k, b"key:000000000042");
        let mut v = [0u8; 16];
        g.value(b"val:", 7, &mut v);
        assert_eq!(&v, b"val:000000000007");
        let g = Gen::new(1000, 3, 2).unwrap();
        let mut k = [0u8; 3];
        g.key(999, &mut k);
        assert_eq!(&k, b"999");
        let mut v = [0u8; 2];
        g.value(b"val:", 7, &mut v);
        assert_eq!(&v, b"va");
        assert!(Gen::new(10_000, 3, 0).is_err());
        assert_eq!(share(1, 3, 10).collect::<Vec<_>>(), vec![1, 4, 7]);
    }
}
