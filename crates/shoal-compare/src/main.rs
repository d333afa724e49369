//! `shoal-compare`: Shoal against hashbrown, LMDB, libmdbx and Redis on the same workloads,
//! in one run, with the ratio "Shoal / peer" measured in that run. See `--help`.

mod backup;
mod ordered;
mod peers;
mod report;
mod txn;

use peers::{Counts, Kv, Op, Phase, PHASES, REMOVE_PUT};
use shoal_bench::{CountingAlloc, SplitMix64};
use std::fs::File;
use std::io::{BufRead, BufReader, Write};
use std::os::fd::{FromRawFd, RawFd};
use std::path::{Path, PathBuf};
use std::time::Instant;

#[global_allocator]
static ALLOC: CountingAlloc = CountingAlloc;

const HELP: &str = "\
shoal-compare: Shoal against hashbrown (in-process), LMDB, libmdbx and Redis on the same
workloads, in one run. Keys 'key:%012d' (16 bytes), values 'val:%012d' (16 bytes).

Phases, for 1 and 2 processes (2 = two forked worker processes over the same store, each
doing half the ops; for Redis, two client processes):
  PUT     N inserts into an empty map (each worker its own keys, in a shuffled order)
  GET     gets in shuffled order (every value checked), passes repeated for --min-secs
  MIX     98% get of a random key, 2% remove + put of one of the worker's keys (that step
          counts 2 ops), passes repeated for --min-secs
  REMOVE  every key removed, in shuffled order
plus bytes per entry after PUT. Shoal alone also runs with --many-procs processes (MIX with 8
processes against 2: the target is >= 0.7x). Each row runs --repeats times on a fresh store
(rows interleaved, so that a change in the machine's load hits every system); the report
gives the median and the spread of the repeats. Each worker formats its keys and values
before a phase, laid out in the order the phase reads them (no key array read at random:
the harness's own cache misses stay out of the figures).

By default every system also gets a separate row with PUT in key order (`key order` in the
report): sorted inserts append at the right edge of a B-tree, LMDB's and libmdbx's best case.

Options:
  --kind K          hash (this suite, the default), ordered (ordered maps against LMDB
                    and libmdbx: see --kind ordered --help) or txn (2-key transfers in
                    transactions against libmdbx, LMDB and Redis: see --kind txn --help)
                    or backup (writers' pauses during a hot backup, against libmdbx's
                    copy: see --kind backup --help)
  --keys N          keys (default 1M; accepts 1_000_000, 10M, 500k)
  --systems LIST    comma list among shoal,hashbrown,lmdb,lmdb-batch,mdbx,mdbx-batch,redis,
                    redis-pipe (default: all)
  --procs LIST      process counts (default 1,2)
  --many-procs P    Shoal-only run with P processes (default 8; 0 = none)
  --batch B         ops per transaction of the batched LMDB/libmdbx variants (default 1000)
  --pipeline B      commands per round trip of pipelined Redis (default 100)
  --redis-cap OPS   at most OPS timed ops per phase for unpipelined Redis (default 1M); the
                    rest of PUT is loaded untimed (pipelined), the rest of the others skipped
  --dir DIR         where stores go (default /dev/shm)
  --json            print one JSON object on stdout (progress on stderr)
  --md PATH         also write the Markdown report to PATH
  --repro CMD       the command to show in the report as the way to reproduce it
  --put-order O     both (default: shuffled rows, plus PUT-only rows in key order),
                    shuffled (no key-order rows) or keys (every row in key order)
  --repeats R       fresh runs per row (default 3; median and spread reported)
  --min-secs S      GET and MIX repeat their passes until they lasted S seconds (default 2;
                    0 = one pass); PUT and REMOVE are one pass each, hence --repeats
  --phases LIST     comma list among PUT,GET,MIX,REMOVE (default: all; PUT always runs)
  --seed S          shuffle seed (default 1)

Exit status: 0 when every result of every system was correct, 1 otherwise.";

/// A system (or variant) under test.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Sys {
    Shoal,
    Hashbrown,
    Lmdb,
    LmdbBatch,
    Mdbx,
    MdbxBatch,
    Redis,
    RedisPipe,
}

const ALL: [Sys; 8] = [
    Sys::Shoal,
    Sys::Hashbrown,
    Sys::Lmdb,
    Sys::LmdbBatch,
    Sys::Mdbx,
    Sys::MdbxBatch,
    Sys::Redis,
    Sys::RedisPipe,
];

impl Sys {
    pub fn key(self) -> &'static str {
        match self {
            Sys::Shoal => "shoal",
            Sys::Hashbrown => "hashbrown",
            Sys::Lmdb => "lmdb",
            Sys::LmdbBatch => "lmdb-batch",
            Sys::Mdbx => "mdbx",
            Sys::MdbxBatch => "mdbx-batch",
            Sys::Redis => "redis",
            Sys::RedisPipe => "redis-pipe",
        }
    }

    pub fn label(self, a: &Args) -> String {
        match self {
            Sys::Shoal => "Shoal".into(),
            Sys::Hashbrown => "hashbrown (in-process)".into(),
            Sys::Lmdb => "LMDB (1 txn/op)".into(),
            Sys::LmdbBatch => format!("LMDB, batched ({} ops/txn)", a.batch),
            Sys::Mdbx => "libmdbx (1 txn/op)".into(),
            Sys::MdbxBatch => format!("libmdbx, batched ({} ops/txn)", a.batch),
            Sys::Redis => "Redis (unpipelined)".into(),
            Sys::RedisPipe => format!("Redis, pipelined ({}/round trip)", a.pipeline),
        }
    }

    fn parse(s: &str) -> Option<Sys> {
        ALL.into_iter().find(|x| x.key() == s)
    }
}

/// Command-line options.
#[derive(Clone, Debug)]
pub struct Args {
    pub keys: usize,
    pub systems: Vec<Sys>,
    pub procs: Vec<usize>,
    pub many_procs: usize,
    pub batch: usize,
    pub pipeline: usize,
    pub redis_cap: usize,
    pub dir: PathBuf,
    pub json: bool,
    pub md: Option<PathBuf>,
    pub repro: Option<String>,
    pub seed: u64,
    /// Which PUT orders run (see `--put-order`).
    pub put_order: PutOrders,
    /// Fresh runs per row.
    pub repeats: usize,
    /// Minimum length of a GET or MIX phase, seconds.
    pub min_secs: f64,
    /// The phases to run, in [`PHASES`] order (PUT always).
    pub phases: Vec<Phase>,
}

/// The order of one run's PUT.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Order {
    /// A random permutation of the keys (the default: no system's best case).
    Shuffled,
    /// Key order, ascending: appends at the right edge of a B-tree.
    Keys,
}

impl Order {
    /// As in the JSON report.
    pub fn key(self) -> &'static str {
        match self {
            Order::Shuffled => "shuffled",
            Order::Keys => "keys",
        }
    }
}

/// `--put-order`: which orders run.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum PutOrders {
    /// Full rows with shuffled PUT, plus PUT-only rows in key order.
    Both,
    /// Full rows with shuffled PUT only.
    Shuffled,
    /// Full rows with PUT in key order only.
    Keys,
}

impl PutOrders {
    /// The order of the full rows (GET, MIX, REMOVE and the ratios come from these).
    pub fn main(self) -> Order {
        match self {
            PutOrders::Keys => Order::Keys,
            _ => Order::Shuffled,
        }
    }
}

/// `--min-secs`: the shortest a timed phase runs, in seconds (0 to 3600).
fn parse_min_secs(v: &str) -> Result<f64, String> {
    v.parse::<f64>()
        .ok()
        .filter(|s| s.is_finite() && (0.0..=3600.0).contains(s))
        .ok_or_else(|| format!("--min-secs {v:?}: seconds between 0 and 3600"))
}

fn parse_count(s: &str) -> Result<usize, String> {
    let t = s.trim().replace(['_', ','], "");
    let (num, mult) = match t.chars().last() {
        Some('k' | 'K') => (&t[..t.len() - 1], 1_000),
        Some('m' | 'M') => (&t[..t.len() - 1], 1_000_000),
        _ => (&t[..], 1),
    };
    num.parse::<usize>()
        .ok()
        .and_then(|n| n.checked_mul(mult))
        .ok_or_else(|| format!("{s:?} is not a count"))
}

fn parse_args() -> Result<Args, String> {
    let mut a = Args {
        keys: 1_000_000,
        systems: ALL.to_vec(),
        procs: vec![1, 2],
        many_procs: 8,
        batch: 1000,
        pipeline: 100,
        redis_cap: 1_000_000,
        dir: PathBuf::from("/dev/shm"),
        json: false,
        md: None,
        repro: None,
        seed: 1,
        put_order: PutOrders::Both,
        repeats: 3,
        min_secs: 2.0,
        phases: PHASES.to_vec(),
    };
    let mut it = std::env::args().skip(1);
    while let Some(arg) = it.next() {
        let mut val = || it.next().ok_or_else(|| format!("{arg} needs a value"));
        match arg.as_str() {
            "-h" | "--help" => {
                println!("{HELP}");
                std::process::exit(0);
            }
            "--keys" => a.keys = parse_count(&val()?)?,
            "--systems" => {
                a.systems = val()?
                    .split(',')
                    .map(|s| Sys::parse(s.trim()).ok_or_else(|| format!("unknown system {s:?}")))
                    .collect::<Result<_, _>>()?
            }
            "--procs" => {
                a.procs = val()?
                    .split(',')
                    .map(parse_count)
                    .collect::<Result<_, _>>()?
            }
            "--many-procs" => a.many_procs = parse_count(&val()?)?,
            "--batch" => a.batch = parse_count(&val()?)?.max(1),
            "--pipeline" => a.pipeline = parse_count(&val()?)?.max(1),
            "--redis-cap" => a.redis_cap = parse_count(&val()?)?.max(1),
            "--dir" => a.dir = PathBuf::from(val()?),
            "--kind" => {
                if val()? != "hash" {
                    return Err("--kind: hash, ordered, txn or backup".into());
                }
            }
            "--json" => a.json = true,
            "--md" => a.md = Some(PathBuf::from(val()?)),
            "--repro" => a.repro = Some(val()?),
            "--seed" => a.seed = parse_count(&val()?)? as u64,
            "--put-order" => {
                a.put_order = match val()?.as_str() {
                    "both" => PutOrders::Both,
                    "keys" => PutOrders::Keys,
                    "shuffled" => PutOrders::Shuffled,
                    o => return Err(format!("--put-order {o:?}: both, shuffled or keys")),
                }
            }
            "--repeats" => a.repeats = parse_count(&val()?)?,
            "--phases" => {
                let v = val()?;
                let want: Vec<&str> = v.split(',').map(str::trim).collect();
                if let Some(bad) = want
                    .iter()
                    .find(|w| !PHASES.iter().any(|p| p.name().eq_ignore_ascii_case(w)))
                {
                    return Err(format!("--phases: unknown phase {bad:?}"));
                }
                a.phases = PHASES
                    .into_iter()
                    .filter(|p| {
                        *p == Phase::Put || want.iter().any(|w| p.name().eq_ignore_ascii_case(w))
                    })
                    .collect();
            }
            "--min-secs" => a.min_secs = parse_min_secs(&val()?)?,
            _ => return Err(format!("unknown argument {arg:?} (see --help)")),
        }
    }
    if a.keys < 16 || a.keys >= (REMOVE_PUT as usize) {
        return Err("--keys must be between 16 and 2^31".into());
    }
    if a.procs.iter().any(|&p| p == 0 || p > 64) || a.many_procs > 64 {
        return Err("process counts must be 1..=64".into());
    }
    if a.repeats == 0 || a.repeats > 100 {
        return Err("--repeats must be 1..=100".into());
    }
    Ok(a)
}

/// One phase of one row: the repeats as measured, and their median.
#[derive(Clone, Debug, Default)]
pub struct PhaseResult {
    /// Ops of the median repeat.
    pub ops: u64,
    /// Wall time of the median repeat.
    pub secs: f64,
    /// Wrong results, over all repeats.
    pub errors: u64,
    /// MIX gets that found nothing, over all repeats.
    pub misses: u64,
    pub first_error: Option<String>,
    /// CPU time of the workers in the timed part of the median repeat (and of the server,
    /// for Redis).
    pub cpu_secs: f64,
    /// Timed ops were capped (unpipelined Redis on big N).
    pub capped: bool,
    /// ops/s of each repeat, in the order they ran.
    pub rates: Vec<f64>,
    /// Wall time of each repeat.
    pub secs_each: Vec<f64>,
}

impl PhaseResult {
    /// Operations per CPU-second (None when not measured).
    pub fn ops_per_cpu_sec(&self) -> Option<f64> {
        (self.cpu_secs > 0.0).then(|| self.ops as f64 / self.cpu_secs)
    }

    /// Operations per second of the median repeat.
    pub fn ops_per_sec(&self) -> f64 {
        if self.secs > 0.0 {
            self.ops as f64 / self.secs
        } else {
            0.0
        }
    }

    /// Half the range of the repeats' ops/s over their median (0.05 = ±5%); None with one
    /// repeat.
    pub fn spread(&self) -> Option<f64> {
        if self.rates.len() < 2 {
            return None;
        }
        let lo = self.rates.iter().copied().fold(f64::INFINITY, f64::min);
        let hi = self.rates.iter().copied().fold(0.0, f64::max);
        let m = self.ops_per_sec();
        (m > 0.0).then(|| (hi - lo) / 2.0 / m)
    }

    /// The repeats of one phase, summed up: the median repeat's figures (the lower
    /// median for an even count), errors over all of them, every repeat's rate and length.
    fn from_reps(reps: &[PhaseResult]) -> PhaseResult {
        let mut idx: Vec<usize> = (0..reps.len()).collect();
        idx.sort_by(|&i, &j| reps[i].ops_per_sec().total_cmp(&reps[j].ops_per_sec()));
        let mut r = reps[idx[(idx.len() - 1) / 2]].clone();
        r.errors = reps.iter().map(|x| x.errors).sum();
        r.misses = reps.iter().map(|x| x.misses).sum();
        r.first_error = reps.iter().find_map(|x| x.first_error.clone());
        r.capped = reps.iter().any(|x| x.capped);
        r.rates = reps.iter().map(PhaseResult::ops_per_sec).collect();
        r.secs_each = reps.iter().map(|x| x.secs).collect();
        r
    }
}

/// One row: a system at one process count with one PUT order, over its repeats.
#[derive(Clone, Debug)]
pub struct RunResult {
    pub sys: Sys,
    pub procs: usize,
    /// The order of its PUT.
    pub order: Order,
    /// Only PUT runs (the key-order rows of `--put-order both`).
    pub put_only: bool,
    pub skipped: Option<String>,
    pub phases: Vec<(Phase, PhaseResult)>,
    /// Bytes after PUT, in the last repeat.
    pub bytes: Option<u64>,
    /// Repeats done.
    pub repeats: usize,
}

impl RunResult {
    pub fn phase(&self, p: Phase) -> Option<&PhaseResult> {
        self.phases.iter().find(|(q, _)| *q == p).map(|(_, r)| r)
    }
}

fn progress(a: &Args, msg: &str) {
    if a.json {
        eprintln!("{msg}");
    } else {
        println!("{msg}");
    }
}

// ---------------------------------------------------------------------------------------
// Worker processes (fork): the parent writes a command line to each worker's pipe; the
// worker answers with one line.

struct Worker {
    pid: libc::pid_t,
    to: File,
    from: BufReader<File>,
}

fn pipe() -> Result<(RawFd, RawFd), String> {
    let mut fds = [0 as RawFd; 2];
    // SAFETY: pipe2 writes two descriptors into the array.
    if unsafe { libc::pipe2(fds.as_mut_ptr(), libc::O_CLOEXEC) } != 0 {
        return Err(format!("pipe: {}", std::io::Error::last_os_error()));
    }
    Ok((fds[0], fds[1]))
}

/// Forks a worker running `body(commands, replies)`. `inherited` are descriptors of other
/// workers, closed in the child (so that a worker's death is seen as end of file).
fn fork_worker(
    inherited: &[RawFd],
    body: impl FnOnce(&mut BufReader<File>, &mut File) -> Result<(), String>,
) -> Result<Worker, String> {
    let (cmd_r, cmd_w) = pipe()?;
    let (rep_r, rep_w) = pipe()?;
    let _ = std::io::stdout().flush();
    let _ = std::io::stderr().flush();
    // SAFETY: the parent is single-threaded (it never opens a store itself and starts no
    // thread), so the child may run any code.
    let pid = unsafe { libc::fork() };
    if pid < 0 {
        return Err(format!("fork: {}", std::io::Error::last_os_error()));
    }
    if pid == 0 {
        // SAFETY: closing descriptors this process owns and will not use.
        unsafe {
            for &fd in inherited {
                libc::close(fd);
            }
            libc::close(cmd_w);
            libc::close(rep_r);
        }
        // SAFETY: the descriptors are ours, open, and owned by nothing else here.
        let mut cmds = BufReader::new(unsafe { File::from_raw_fd(cmd_r) });
        // SAFETY: as above.
        let mut reps = unsafe { File::from_raw_fd(rep_w) };
        let r =
            std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| body(&mut cmds, &mut reps)));
        let code = match r {
            Ok(Ok(())) => 0,
            Ok(Err(e)) => {
                let _ = writeln!(reps, "err {}", e.replace('\n', " "));
                1
            }
            Err(_) => {
                let _ = writeln!(reps, "err worker panicked");
                1
            }
        };
        drop(reps);
        // SAFETY: ends the child without running the parent's atexit handlers.
        unsafe { libc::_exit(code) };
    }
    // SAFETY: closing the child's ends in the parent.
    unsafe {
        libc::close(cmd_r);
        libc::close(rep_w);
    }
    Ok(Worker {
        pid,
        // SAFETY: the descriptors are the parent's own.
        to: unsafe { File::from_raw_fd(cmd_w) },
        // SAFETY: as above.
        from: BufReader::new(unsafe { File::from_raw_fd(rep_r) }),
    })
}

impl Worker {
    fn send(&mut self, line: &str) -> Result<(), String> {
        writeln!(self.to, "{line}").map_err(|e| format!("worker {}: {e}", self.pid))
    }

    fn recv(&mut self) -> Result<String, String> {
        let mut s = String::new();
        match self.from.read_line(&mut s) {
            Ok(0) => Err(format!("worker {} died", self.pid)),
            Ok(_) => {
                let s = s.trim_end().to_string();
                match s.strip_prefix("err ") {
                    Some(e) => Err(e.to_string()),
                    None => Ok(s),
                }
            }
            Err(e) => Err(format!("worker {}: {e}", self.pid)),
        }
    }

    fn fds(&self) -> [RawFd; 2] {
        use std::os::fd::AsRawFd;
        [self.to.as_raw_fd(), self.from.get_ref().as_raw_fd()]
    }
}

/// The start of a comparison mode: its arguments parsed by `parse` (a usage error is
/// said), the peers' output quieted, and its scratch directory
/// `DIR/shoal-compare-TAG-PID` created (`dir` picks DIR from the arguments). `None`
/// (exit status 2) if either fails.
fn start<A>(
    args: &[String],
    parse: fn(&[String]) -> Result<A, String>,
    dir: impl Fn(&A) -> &Path,
    tag: &str,
) -> Option<(A, PathBuf)> {
    let a = parse(args)
        .map_err(|e| eprintln!("shoal-compare: {e}"))
        .ok()?;
    crate::peers::quiet();
    let base = dir(&a).join(format!("shoal-compare-{tag}-{}", std::process::id()));
    if let Err(e) = std::fs::create_dir_all(&base) {
        eprintln!("shoal-compare: {}: {e}", base.display());
        return None;
    }
    Some((a, base))
}

/// The arguments of a comparison mode, one at a time: `f` gets each with a way to take
/// its value. `-h` or `--help` prints `help` and exits.
fn each_arg(
    args: &[String],
    help: &str,
    mut f: impl FnMut(&str, &mut dyn FnMut() -> Result<String, String>) -> Result<(), String>,
) -> Result<(), String> {
    let mut it = args.iter();
    while let Some(arg) = it.next() {
        if arg == "-h" || arg == "--help" {
            println!("{help}");
            std::process::exit(0);
        }
        let mut val = || {
            it.next()
                .cloned()
                .ok_or_else(|| format!("{arg} needs a value"))
        };
        f(arg, &mut val)?;
    }
    Ok(())
}

/// A comma-separated list, each item (trimmed) read by `f`.
fn list_of<T>(v: &str, f: impl Fn(&str) -> Result<T, String>) -> Result<Vec<T>, String> {
    v.split(',').map(|x| f(x.trim())).collect()
}

/// Waits for the setup child to say it is ready (or why it failed), then ends it.
fn setup_done(setup: Worker) -> Result<(), String> {
    let mut setup = vec![setup];
    let r = setup[0].recv();
    reap(setup);
    r.map(drop)
}

fn reap(workers: Vec<Worker>) {
    for mut w in workers {
        let _ = w.send("exit");
        drop(w.to);
        let mut st = 0;
        // SAFETY: waits for our own child.
        unsafe { libc::waitpid(w.pid, &mut st, 0) };
    }
}

/// Where a system keeps its data in one run.
struct Place {
    path: PathBuf,
    redis_sock: Option<PathBuf>,
    /// The Redis server's pid (its CPU time counts in the per-CPU-second figures).
    server_pid: Option<u32>,
}

/// CPU time (user + system) of process `pid` so far, from /proc/PID/stat.
fn proc_cpu_ns(pid: u32) -> Option<u64> {
    let s = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    let rest = &s[s.rfind(')')? + 2..];
    let f: Vec<&str> = rest.split_whitespace().collect();
    let ticks: u64 = f.get(11)?.parse::<u64>().ok()? + f.get(12)?.parse::<u64>().ok()?;
    // SAFETY: sysconf has no preconditions.
    let hz = unsafe { libc::sysconf(libc::_SC_CLK_TCK) }.max(1) as u64;
    Some(ticks * 1_000_000_000 / hz)
}

fn open_kv(sys: Sys, a: &Args, place: &Place) -> Result<Box<dyn Kv>, String> {
    let n = a.keys;
    Ok(match sys {
        Sys::Shoal => Box::new(peers::ShoalKv::open(&place.path)?),
        Sys::Hashbrown => Box::new(peers::HashbrownKv::new()),
        Sys::Lmdb => Box::new(peers::LmdbKv::open(&place.path, n, 1)?),
        Sys::LmdbBatch => Box::new(peers::LmdbKv::open(&place.path, n, a.batch)?),
        Sys::Mdbx => Box::new(peers::MdbxKv::open(&place.path, n, 1)?),
        Sys::MdbxBatch => Box::new(peers::MdbxKv::open(&place.path, n, a.batch)?),
        Sys::Redis | Sys::RedisPipe => {
            let sock = place.redis_sock.as_deref().ok_or("no Redis server")?;
            let per = if sys == Sys::Redis { 1 } else { a.pipeline };
            Box::new(peers::RedisKv::open(sock, per)?)
        }
    })
}

/// What every run shares: the key count and the shuffled order of GET and REMOVE. Keys
/// and values are not stored: each op formats its own from the key's index.
pub struct Data {
    /// Keys.
    pub n: usize,
    /// A random permutation of `0..n`.
    pub order: Vec<u32>,
}

/// The op lists of one run: PUT (in the run's order), MIX (depends on the process count).
struct Ops {
    put: Vec<u32>,
    mix: Vec<u32>,
}

/// Worker `w` of `p`'s share of `len` ops.
fn share(len: usize, p: usize, w: usize) -> std::ops::Range<usize> {
    len * w / p..len * (w + 1) / p
}

fn mix_ops(n: usize, p: usize, seed: u64) -> Vec<u32> {
    let mut r = SplitMix64(seed ^ 0x006d_6978);
    let mut v = Vec::with_capacity(n);
    for w in 0..p {
        let mine = (n - w).div_ceil(p) as u64; // keys k < n with k % p == w
        for _ in share(n, p, w) {
            if r.below(100) < 2 {
                let k = r.below(mine) as usize * p + w;
                v.push(k as u32 | REMOVE_PUT);
            } else {
                v.push(r.below(n as u64) as u32);
            }
        }
    }
    v
}

fn phase_ops<'a>(phase: Phase, d: &'a Data, ops: &'a Ops) -> &'a [u32] {
    match phase {
        Phase::Put => &ops.put,
        Phase::Get | Phase::Remove => &d.order,
        Phase::Mix => &ops.mix,
    }
}

/// What one worker process runs.
struct Job<'a> {
    sys: Sys,
    a: &'a Args,
    place: &'a Place,
    d: &'a Data,
    ops: &'a Ops,
    /// Processes in the run.
    p: usize,
    /// This worker's number.
    w: usize,
}

/// Runs `timed` once, then (GET and MIX only, which leave the map as they found it) again
/// from its start until the phase has lasted `min_secs`, looking at the clock every `step`
/// ops.
fn timed_passes(
    kv: &mut dyn Kv,
    phase: Phase,
    timed: &[Op],
    min_secs: f64,
    step: usize,
    c: &mut Counts,
) -> Result<(), String> {
    let t = Instant::now();
    kv.run(phase, timed, c)?;
    if !matches!(phase, Phase::Get | Phase::Mix) || timed.is_empty() {
        return Ok(());
    }
    while t.elapsed().as_secs_f64() < min_secs {
        for chunk in timed.chunks(step) {
            kv.run(phase, chunk, c)?;
            if t.elapsed().as_secs_f64() >= min_secs {
                break;
            }
        }
    }
    Ok(())
}

fn worker_body(job: Job<'_>, cmds: &mut BufReader<File>, reps: &mut File) -> Result<(), String> {
    let Job {
        sys,
        a,
        place,
        d,
        ops,
        p,
        w,
    } = job;
    let mut kv = open_kv(sys, a, place)?;
    let io = |e: std::io::Error| e.to_string();
    writeln!(reps, "ready").map_err(io)?;
    // A multiple of the batch and pipeline sizes in the default setting, so that the clock
    // checks of a repeated pass do not cut transactions or round trips short.
    let step = a.batch.max(a.pipeline).max(1000);
    let mut line = String::new();
    loop {
        line.clear();
        if cmds.read_line(&mut line).map_err(io)? == 0 {
            return Ok(());
        }
        let cmd = line.trim();
        if cmd == "exit" {
            return Ok(());
        }
        if cmd == "bytes" {
            let b = kv.bytes()?;
            writeln!(reps, "bytes {b}").map_err(io)?;
            continue;
        }
        let phase = PHASES
            .into_iter()
            .find(|ph| ph.name() == cmd)
            .ok_or_else(|| format!("bad command {cmd:?}"))?;
        let all = phase_ops(phase, d, ops);
        let mine = &all[share(all.len(), p, w)];
        let cap = if sys == Sys::Redis {
            (a.redis_cap / p).max(1)
        } else {
            usize::MAX
        };
        // Keys and values formatted here, untimed, in the order the loop reads them.
        let mine: Vec<Op> = mine.iter().map(|&code| Op::new(code)).collect();
        let timed = &mine[..mine.len().min(cap)];
        let mut c = Counts::default();
        let cpu0 = shoal_bench::thread_cpu_ns();
        let t = Instant::now();
        timed_passes(kv.as_mut(), phase, timed, a.min_secs, step, &mut c)?;
        let nanos = t.elapsed().as_nanos();
        let cpu = shoal_bench::thread_cpu_ns() - cpu0;
        let timed_ops = c.ops;
        if timed.len() < mine.len() && phase == Phase::Put {
            kv.fill(phase, &mine[timed.len()..], &mut c)?;
        }
        let fe = c.first_error.unwrap_or_default().replace('\n', " ");
        writeln!(
            reps,
            "done {timed_ops} {} {} {nanos} {} {cpu} {fe}",
            c.errors,
            c.misses,
            (timed.len() < mine.len()) as u8
        )
        .map_err(io)?;
    }
}

/// One row to measure.
#[derive(Clone, Copy)]
struct Plan {
    sys: Sys,
    p: usize,
    order: Order,
    put_only: bool,
}

/// Why a row is not run at all (None: run it).
fn skip_reason(plan: Plan, redis: &Result<peers::RedisServer, String>) -> Option<String> {
    if plan.sys == Sys::Hashbrown && plan.p > 1 {
        return Some("in-process only".into());
    }
    match (plan.sys, redis) {
        (Sys::Redis | Sys::RedisPipe, Err(e)) => Some(e.clone()),
        _ => None,
    }
}

/// One repeat of one row on a fresh store: each phase's result, and the bytes after PUT.
type Repeat = (Vec<(Phase, PhaseResult)>, Option<u64>);

fn run_once(
    plan: Plan,
    a: &Args,
    d: &Data,
    redis: &Result<peers::RedisServer, String>,
    base: &Path,
) -> Result<Repeat, String> {
    let (sys, p) = (plan.sys, plan.p);
    let (redis_sock, server_pid) = match (sys, redis) {
        (Sys::Redis | Sys::RedisPipe, Ok(s)) => {
            s.flush_all()?;
            (Some(s.sock.clone()), Some(s.pid()))
        }
        _ => (None, None),
    };
    let place = Place {
        path: match sys {
            Sys::Shoal => base.join(format!("shoal-{p}.shoal")),
            _ => base.join(format!("{}-{p}", sys.key())),
        },
        redis_sock,
        server_pid,
    };
    let ops = Ops {
        put: match plan.order {
            Order::Shuffled => shoal_bench::shuffled(a.keys, a.seed ^ 0x7075_7473),
            Order::Keys => (0..a.keys as u32).collect(),
        },
        mix: mix_ops(a.keys, p, a.seed),
    };
    let phases: &[Phase] = if plan.put_only {
        &[Phase::Put]
    } else {
        &a.phases
    };
    let r = drive(plan, a, d, &ops, &place, phases);
    let _ = std::fs::remove_file(&place.path);
    let _ = std::fs::remove_dir_all(&place.path);
    r
}

fn drive(
    plan: Plan,
    a: &Args,
    d: &Data,
    ops: &Ops,
    place: &Place,
    phases: &[Phase],
) -> Result<Repeat, String> {
    let (sys, p) = (plan.sys, plan.p);
    // Setup in a child of its own: the parent never opens a store (it forks the workers).
    let setup = fork_worker(&[], |_, reps| {
        match sys {
            Sys::Shoal => peers::ShoalKv::create(&place.path)?,
            Sys::Hashbrown | Sys::Redis | Sys::RedisPipe => {}
            _ => drop(open_kv(sys, a, place)?),
        }
        writeln!(reps, "ready").map_err(|e| e.to_string())
    })?;
    setup_done(setup)?;
    let mut workers: Vec<Worker> = Vec::new();
    let mut out: Repeat = (Vec::new(), None);
    let result = (|| {
        for w in 0..p {
            let fds: Vec<RawFd> = workers.iter().flat_map(|w| w.fds()).collect();
            let wk = fork_worker(&fds, |cmds, reps| {
                worker_body(
                    Job {
                        sys,
                        a,
                        place,
                        d,
                        ops,
                        p,
                        w,
                    },
                    cmds,
                    reps,
                )
            })?;
            workers.push(wk);
        }
        for w in workers.iter_mut() {
            let r = w.recv()?;
            if r != "ready" {
                return Err(format!("worker said {r:?}"));
            }
        }
        for &phase in phases {
            for w in workers.iter_mut() {
                w.send(phase.name())?;
            }
            let server0 = place.server_pid.and_then(proc_cpu_ns);
            let mut pr = PhaseResult::default();
            for w in workers.iter_mut() {
                let r = w.recv()?;
                let mut f = r.splitn(8, ' ');
                let tag = f.next();
                let mut num = || -> Result<u128, String> {
                    f.next()
                        .and_then(|x| x.parse().ok())
                        .ok_or_else(|| format!("bad reply {r:?}"))
                };
                if tag != Some("done") {
                    return Err(format!("bad reply {r:?}"));
                }
                let (o, e, m, ns, capped, cpu) = (num()?, num()?, num()?, num()?, num()?, num()?);
                pr.cpu_secs += cpu as f64 / 1e9;
                pr.ops += o as u64;
                pr.errors += e as u64;
                pr.misses += m as u64;
                pr.secs = pr.secs.max(ns as f64 / 1e9);
                pr.capped |= capped != 0;
                let fe = r.splitn(8, ' ').nth(7).unwrap_or("").trim();
                if !fe.is_empty() && pr.first_error.is_none() {
                    pr.first_error = Some(fe.to_string());
                }
            }
            if let Some(pid) = place.server_pid {
                // The server's CPU time counts too (not measurable for a capped phase:
                // its untimed remainder ran on the server as well).
                match (server0, proc_cpu_ns(pid)) {
                    (Some(a), Some(b)) if !pr.capped => pr.cpu_secs += (b - a) as f64 / 1e9,
                    _ => pr.cpu_secs = f64::NAN,
                }
            }
            if p == 1 && phase == Phase::Mix && pr.misses > 0 {
                pr.errors += pr.misses;
                pr.first_error
                    .get_or_insert_with(|| format!("{} MIX gets missed", pr.misses));
            }
            progress(
                a,
                &format!(
                    "  {:<34} {} proc  {:<6} {:>12.0} ops/s  ({} ops in {:.3} s{}{})",
                    row_label(plan, a),
                    p,
                    phase.name(),
                    pr.ops_per_sec(),
                    pr.ops,
                    pr.secs,
                    if pr.errors > 0 {
                        format!(
                            ", {} ERRORS: {}",
                            pr.errors,
                            pr.first_error.as_deref().unwrap_or("")
                        )
                    } else {
                        String::new()
                    },
                    if pr.capped { ", capped" } else { "" },
                ),
            );
            out.0.push((phase, pr));
            if phase == Phase::Put {
                workers[0].send("bytes")?;
                let r = workers[0].recv()?;
                out.1 = r.strip_prefix("bytes ").and_then(|b| b.parse().ok());
            }
        }
        Ok(())
    })();
    reap(workers);
    result.map(|()| out)
}

/// A row's name in the progress lines.
fn row_label(plan: Plan, a: &Args) -> String {
    match plan.order {
        Order::Keys if a.put_order == PutOrders::Both => {
            format!("{}, key order", plan.sys.label(a))
        }
        _ => plan.sys.label(a),
    }
}

/// The rows of this invocation, in the order they run within each repeat.
fn plans(a: &Args) -> Vec<Plan> {
    let main = a.put_order.main();
    let mut v = Vec::new();
    for &p in &a.procs {
        for &sys in &a.systems {
            v.push(Plan {
                sys,
                p,
                order: main,
                put_only: false,
            });
        }
    }
    if a.many_procs > 0 && a.systems.contains(&Sys::Shoal) && !a.procs.contains(&a.many_procs) {
        v.push(Plan {
            sys: Sys::Shoal,
            p: a.many_procs,
            order: main,
            put_only: false,
        });
    }
    if a.put_order == PutOrders::Both {
        for &p in &a.procs {
            for &sys in &a.systems {
                v.push(Plan {
                    sys,
                    p,
                    order: Order::Keys,
                    put_only: true,
                });
            }
        }
    }
    v
}

fn main() {
    let argv: Vec<String> = std::env::args().skip(1).collect();
    if let Some(i) = argv.iter().position(|x| x == "--kind") {
        match argv.get(i + 1).map(String::as_str) {
            Some("ordered") => {
                let rest: Vec<String> = argv[..i].iter().chain(&argv[i + 2..]).cloned().collect();
                std::process::exit(ordered::main(&rest));
            }
            Some("txn") => {
                let rest: Vec<String> = argv[..i].iter().chain(&argv[i + 2..]).cloned().collect();
                std::process::exit(txn::main(&rest));
            }
            Some("backup") => {
                let rest: Vec<String> = argv[..i].iter().chain(&argv[i + 2..]).cloned().collect();
                std::process::exit(backup::main(&rest));
            }
            Some("hash") => {}
            k => {
                eprintln!(
                    "shoal-compare: --kind {k:?}: hash (the default), ordered, txn or backup"
                );
                std::process::exit(2);
            }
        }
    }
    let a = match parse_args() {
        Ok(a) => a,
        Err(e) => {
            eprintln!("shoal-compare: {e}");
            std::process::exit(2);
        }
    };
    peers::quiet();
    let load_before = report::loadavg();
    let t0 = Instant::now();
    let d = Data {
        n: a.keys,
        order: shoal_bench::shuffled(a.keys, a.seed),
    };
    let base = a.dir.join(format!("shoal-compare-{}", std::process::id()));
    if let Err(e) = std::fs::create_dir_all(&base) {
        eprintln!("shoal-compare: {}: {e}", base.display());
        std::process::exit(2);
    }
    let want_redis = a
        .systems
        .iter()
        .any(|s| matches!(s, Sys::Redis | Sys::RedisPipe));
    let redis = if want_redis {
        peers::RedisServer::start(&base)
    } else {
        Err("not requested".into())
    };
    if let Err(e) = &redis {
        if want_redis {
            progress(&a, &format!("Redis skipped: {e}"));
        }
    }
    let plans = plans(&a);
    let mut skipped: Vec<Option<String>> =
        plans.iter().map(|&pl| skip_reason(pl, &redis)).collect();
    let mut reps: Vec<Vec<Repeat>> = vec![Vec::new(); plans.len()];
    // Repeats outermost: a change in the machine's load during the run then hits every
    // row, not the few that happened to run at that moment.
    for rep in 0..a.repeats {
        for (i, &plan) in plans.iter().enumerate() {
            if skipped[i].is_some() {
                continue;
            }
            progress(
                &a,
                &format!(
                    "{} with {} process(es), repeat {} of {}",
                    row_label(plan, &a),
                    plan.p,
                    rep + 1,
                    a.repeats
                ),
            );
            match run_once(plan, &a, &d, &redis, &base) {
                Ok(r) => reps[i].push(r),
                Err(e) => skipped[i] = Some(format!("failed: {e}")),
            }
        }
    }
    let runs: Vec<RunResult> = plans
        .iter()
        .zip(skipped)
        .zip(&reps)
        .map(|((plan, skipped), reps)| {
            let phases = match reps.first() {
                Some(first) if skipped.is_none() => first
                    .0
                    .iter()
                    .map(|(ph, _)| {
                        let all: Vec<PhaseResult> = reps
                            .iter()
                            .filter_map(|r| r.0.iter().find(|(q, _)| q == ph))
                            .map(|(_, x)| x.clone())
                            .collect();
                        (*ph, PhaseResult::from_reps(&all))
                    })
                    .collect(),
                _ => Vec::new(),
            };
            RunResult {
                sys: plan.sys,
                procs: plan.p,
                order: plan.order,
                put_only: plan.put_only,
                skipped,
                phases,
                bytes: reps.last().and_then(|r| r.1),
                repeats: reps.len(),
            }
        })
        .collect();
    let redis_version = redis.as_ref().ok().map(|r| r.version.clone());
    drop(redis);
    let _ = std::fs::remove_dir_all(&base);
    let load_after = report::loadavg();
    let rep = report::Report {
        args: &a,
        runs: &runs,
        load_before,
        load_after,
        secs: t0.elapsed().as_secs_f64(),
        redis_version,
    };
    let md = rep.markdown();
    if let Some(path) = &a.md {
        if let Err(e) = std::fs::write(path, &md) {
            eprintln!("shoal-compare: {}: {e}", path.display());
            std::process::exit(2);
        }
    }
    if a.json {
        println!("{}", rep.json());
    } else {
        println!("\n{md}");
    }
    let bad: u64 = runs
        .iter()
        .flat_map(|r| r.phases.iter().map(|(_, p)| p.errors))
        .sum();
    let failed = runs.iter().any(|r| {
        r.skipped
            .as_deref()
            .is_some_and(|s| s.starts_with("failed"))
    });
    if bad > 0 || failed {
        eprintln!(
            "shoal-compare: {bad} wrong results{}",
            if failed { ", a run failed" } else { "" }
        );
        std::process::exit(1);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn shares_cover_every_op_once() {
        for (len, p) in [(10, 3), (1000, 8), (7, 7), (5, 1)] {
            let mut next = 0;
            for w in 0..p {
                let r = share(len, p, w);
                assert_eq!(r.start, next);
                next = r.end;
            }
            assert_eq!(next, len);
        }
    }

    #[test]
    fn mix_removes_only_the_workers_own_keys() {
        let (n, p) = (10_001, 3);
        let ops = mix_ops(n, p, 7);
        assert_eq!(ops.len(), n);
        let mut removes = 0;
        for w in 0..p {
            for &op in &ops[share(n, p, w)] {
                let k = (op & !REMOVE_PUT) as usize;
                assert!(k < n);
                if op & REMOVE_PUT != 0 {
                    assert_eq!(k % p, w, "worker {w} removes key {k}");
                    removes += 1;
                }
            }
        }
        assert!(
            (100..=300).contains(&removes),
            "about 2% remove + put: {removes}"
        );
    }

    #[test]
    fn counts_parse() {
        assert_eq!(parse_count("1M"), Ok(1_000_000));
        assert_eq!(parse_count("10_000"), Ok(10_000));
        assert_eq!(parse_count("500k"), Ok(500_000));
        assert!(parse_count("x").is_err());
    }
}
