//! `shoal-compare`: Shoal against hashbrown, LMDB, libmdbx and Redis on the same workloads,
//! in one run, with the ratio "Shoal / peer" measured in that run. See `--help`.

mod peers;
mod report;

use peers::{Counts, Kv, Phase, PHASES, REMOVE_PUT};
use shoal_bench::{CountingAlloc, Data, SplitMix64};
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
  PUT     N inserts into an empty map (each worker its own keys, in key order)
  GET     N gets in shuffled order (every value checked)
  MIX     N steps: 98% get of a random key, 2% remove + put of one of the worker's keys
          (that step counts 2 ops)
  REMOVE  every key removed, in shuffled order
plus bytes per entry after PUT. Shoal alone also runs with --many-procs processes (MIX with 8
processes against 2: the target is >= 0.7x).

Options:
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
  --put-order O     keys (default: PUT in key order, the B-trees' best case) or shuffled
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
    /// PUT in a shuffled order instead of key order.
    pub put_shuffled: bool,
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
        put_shuffled: false,
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
            "--json" => a.json = true,
            "--md" => a.md = Some(PathBuf::from(val()?)),
            "--repro" => a.repro = Some(val()?),
            "--seed" => a.seed = parse_count(&val()?)? as u64,
            "--put-order" => {
                a.put_shuffled = match val()?.as_str() {
                    "keys" => false,
                    "shuffled" => true,
                    o => return Err(format!("--put-order {o:?}: keys or shuffled")),
                }
            }
            _ => return Err(format!("unknown argument {arg:?} (see --help)")),
        }
    }
    if a.keys < 16 || a.keys >= (REMOVE_PUT as usize) {
        return Err("--keys must be between 16 and 2^31".into());
    }
    if a.procs.iter().any(|&p| p == 0 || p > 64) || a.many_procs > 64 {
        return Err("process counts must be 1..=64".into());
    }
    Ok(a)
}

/// One phase of one run, as measured.
#[derive(Clone, Debug, Default)]
pub struct PhaseResult {
    pub ops: u64,
    pub secs: f64,
    pub errors: u64,
    pub misses: u64,
    pub first_error: Option<String>,
    /// CPU time of the workers in the timed part (and of the server, for Redis).
    pub cpu_secs: f64,
    /// Timed ops were capped (unpipelined Redis on big N).
    pub capped: bool,
}

impl PhaseResult {
    /// Operations per CPU-second (None when not measured).
    pub fn ops_per_cpu_sec(&self) -> Option<f64> {
        (self.cpu_secs > 0.0).then(|| self.ops as f64 / self.cpu_secs)
    }

    pub fn ops_per_sec(&self) -> f64 {
        if self.secs > 0.0 {
            self.ops as f64 / self.secs
        } else {
            0.0
        }
    }
}

/// One system at one process count.
#[derive(Clone, Debug)]
pub struct RunResult {
    pub sys: Sys,
    pub procs: usize,
    pub skipped: Option<String>,
    pub phases: Vec<(Phase, PhaseResult)>,
    pub bytes: Option<u64>,
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

/// The op lists of one run: PUT (key order), GET, MIX (depends on the process count),
/// REMOVE (shuffled order).
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
        let timed = &mine[..mine.len().min(cap)];
        let mut c = Counts::default();
        let cpu0 = shoal_bench::thread_cpu_ns();
        let t = Instant::now();
        kv.run(phase, timed, d, &mut c)?;
        let nanos = t.elapsed().as_nanos();
        let cpu = shoal_bench::thread_cpu_ns() - cpu0;
        let timed_ops = c.ops;
        if timed.len() < mine.len() && phase == Phase::Put {
            kv.fill(phase, &mine[timed.len()..], d, &mut c)?;
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

fn run_one(
    sys: Sys,
    p: usize,
    a: &Args,
    d: &Data,
    redis: &Result<peers::RedisServer, String>,
    base: &Path,
) -> RunResult {
    let mut res = RunResult {
        sys,
        procs: p,
        skipped: None,
        phases: Vec::new(),
        bytes: None,
    };
    if sys == Sys::Hashbrown && p > 1 {
        res.skipped = Some("in-process only".into());
        return res;
    }
    let server_pid = match (sys, redis) {
        (Sys::Redis | Sys::RedisPipe, Ok(s)) => Some(s.pid()),
        _ => None,
    };
    let redis_sock = match (sys, redis) {
        (Sys::Redis | Sys::RedisPipe, Err(e)) => {
            res.skipped = Some(e.clone());
            return res;
        }
        (Sys::Redis | Sys::RedisPipe, Ok(s)) => {
            if let Err(e) = s.flush_all() {
                res.skipped = Some(e);
                return res;
            }
            Some(s.sock.clone())
        }
        _ => None,
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
        put: if a.put_shuffled {
            shoal_bench::shuffled(a.keys, a.seed ^ 0x7075_7473)
        } else {
            (0..a.keys as u32).collect()
        },
        mix: mix_ops(a.keys, p, a.seed),
    };
    match drive(sys, p, a, d, &ops, &place, &mut res) {
        Ok(()) => {}
        Err(e) => {
            res.skipped = Some(format!("failed: {e}"));
        }
    }
    let _ = std::fs::remove_file(&place.path);
    let _ = std::fs::remove_dir_all(&place.path);
    res
}

fn drive(
    sys: Sys,
    p: usize,
    a: &Args,
    d: &Data,
    ops: &Ops,
    place: &Place,
    res: &mut RunResult,
) -> Result<(), String> {
    // Setup in a child of its own: the parent never opens a store (it forks the workers).
    let setup = fork_worker(&[], |_, reps| {
        match sys {
            Sys::Shoal => peers::ShoalKv::create(&place.path)?,
            Sys::Hashbrown | Sys::Redis | Sys::RedisPipe => {}
            _ => drop(open_kv(sys, a, place)?),
        }
        writeln!(reps, "ready").map_err(|e| e.to_string())
    })?;
    let mut setup = vec![setup];
    let r = setup[0].recv();
    reap(std::mem::take(&mut setup));
    r?;
    let mut workers: Vec<Worker> = Vec::new();
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
        for phase in PHASES {
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
                    sys.label(a),
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
            res.phases.push((phase, pr));
            if phase == Phase::Put {
                workers[0].send("bytes")?;
                let r = workers[0].recv()?;
                res.bytes = r.strip_prefix("bytes ").and_then(|b| b.parse().ok());
            }
        }
        Ok(())
    })();
    reap(workers);
    result
}

fn main() {
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
    progress(&a, &format!("generating {} keys…", a.keys));
    let d = Data::generate(a.keys, a.seed);
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
    let mut runs = Vec::new();
    for &p in &a.procs {
        for &sys in &a.systems {
            progress(&a, &format!("{} with {p} process(es)", sys.label(&a)));
            runs.push(run_one(sys, p, &a, &d, &redis, &base));
        }
    }
    if a.many_procs > 0 && a.systems.contains(&Sys::Shoal) && !a.procs.contains(&a.many_procs) {
        progress(&a, &format!("Shoal with {} processes", a.many_procs));
        runs.push(run_one(Sys::Shoal, a.many_procs, &a, &d, &redis, &base));
    }
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
