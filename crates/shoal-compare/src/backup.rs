//! `--kind backup`: writers' pauses while a hot backup copies the store they write, Shoal
//! (`Store::backup`) against libmdbx (`mdbx_env_copy`, a copy through a read transaction).

use crate::peers::{mrc, mval, MdbxKv};
use crate::{fork_worker, parse_count, reap, setup_done, Worker};
use mdbx_sys as mx;
use shoal_bench::SplitMix64;
use std::fs::File;
use std::io::{BufRead, BufReader, Write};
use std::os::fd::AsRawFd;
use std::path::{Path, PathBuf};
use std::time::Duration;

const HELP: &str = "\
shoal-compare --kind backup: how long writers stall while a hot backup copies the store
they write. A store of --size bytes of values (--value bytes each, keys 'key:%012d') is
loaded; then --writers processes overwrite random keys with values of the same size, one
put at a time, each put timed. After --base-secs the backup starts in a process of its
own (Shoal: Store::backup; libmdbx: mdbx_env_copy, which copies through a read
transaction); the writers stop half a second after it ends. Each writer reports its
puts, its longest put and its 99.9th percentile before the backup and during it. Shoal's
copy is then opened and checked (Store::check) and its entries counted.

Options:
  --systems LIST    comma list among shoal,mdbx (default: both)
  --size N          bytes of values in the store (default 4G; accepts 4G, 512M, 1_000_000)
  --value N         bytes per value (default 4000)
  --writers LIST    writer process counts (default 1,2)
  --base-secs S     writing before the backup starts (default 3)
  --repeats R       fresh runs per row (default 3)
  --trace           each writer says on stderr when its eight longest puts started
  --dir DIR         where stores and copies go (default /dev/shm)
  --md PATH         also write the Markdown report to PATH
  --repro CMD       the command to show in the report as the way to reproduce it

Exit status: 0 when every run finished and every Shoal copy passed its check, 1 otherwise.";

/// A system under test.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum BSys {
    Shoal,
    Mdbx,
}

const ALL: [BSys; 2] = [BSys::Shoal, BSys::Mdbx];

impl BSys {
    fn key(self) -> &'static str {
        match self {
            BSys::Shoal => "shoal",
            BSys::Mdbx => "mdbx",
        }
    }
    fn label(self) -> &'static str {
        match self {
            BSys::Shoal => "Shoal (Store::backup)",
            BSys::Mdbx => "libmdbx (mdbx_env_copy)",
        }
    }
}

/// Options of the backup mode.
#[derive(Clone, Debug)]
struct BArgs {
    systems: Vec<BSys>,
    size: usize,
    value: usize,
    writers: Vec<usize>,
    base_secs: f64,
    repeats: usize,
    trace: bool,
    dir: PathBuf,
    md: Option<PathBuf>,
    repro: Option<String>,
}

/// A size with an optional K, M or G (powers of 1024) after it.
fn parse_size(s: &str) -> Result<usize, String> {
    let (num, mul) = match s.trim().chars().last() {
        Some('K' | 'k') => (&s[..s.len() - 1], 1usize << 10),
        Some('M' | 'm') => (&s[..s.len() - 1], 1 << 20),
        Some('G' | 'g') => (&s[..s.len() - 1], 1 << 30),
        _ => (s, 1),
    };
    parse_count(num)?
        .checked_mul(mul)
        .ok_or_else(|| format!("{s:?}: too large"))
}

fn parse(args: &[String]) -> Result<BArgs, String> {
    let mut a = BArgs {
        systems: ALL.to_vec(),
        size: 4 << 30,
        value: 4000,
        writers: vec![1, 2],
        base_secs: 3.0,
        repeats: 3,
        trace: false,
        dir: PathBuf::from("/dev/shm"),
        md: None,
        repro: None,
    };
    crate::each_arg(args, HELP, |arg, val| {
        match arg {
            "--systems" => {
                a.systems = crate::list_of(&val()?, |s| {
                    ALL.into_iter()
                        .find(|x| x.key() == s)
                        .ok_or_else(|| format!("unknown system {s:?}"))
                })?
            }
            "--size" => a.size = parse_size(&val()?)?,
            "--value" => a.value = parse_count(&val()?)?,
            "--writers" => a.writers = crate::list_of(&val()?, parse_count)?,
            "--base-secs" => {
                let v = val()?;
                a.base_secs = v
                    .parse()
                    .ok()
                    .filter(|s: &f64| (0.1..=600.0).contains(s))
                    .ok_or_else(|| format!("--base-secs {v:?}: a number of seconds, 0.1-600"))?
            }
            "--repeats" => a.repeats = parse_count(&val()?)?,
            "--trace" => a.trace = true,
            "--dir" => a.dir = PathBuf::from(val()?),
            "--md" => a.md = Some(PathBuf::from(val()?)),
            "--repro" => a.repro = Some(val()?),
            _ => {
                return Err(format!(
                    "unknown argument {arg:?} (see --kind backup --help)"
                ))
            }
        }
        Ok(())
    })?;
    if !(8..=1 << 20).contains(&a.value) {
        return Err("--value must be between 8 bytes and 1 MiB".into());
    }
    if a.size < a.value * 16 || a.size > 64 << 30 {
        return Err("--size must hold at least 16 values and be at most 64G".into());
    }
    if a.writers.iter().any(|&w| w == 0 || w > 64) {
        return Err("writer counts must be 1..=64".into());
    }
    if a.repeats == 0 || a.repeats > 100 {
        return Err("--repeats must be 1..=100".into());
    }
    Ok(a)
}

impl BArgs {
    fn keys(&self) -> u64 {
        (self.size / self.value) as u64
    }
}

fn key_of(i: u64) -> [u8; 16] {
    let mut k = [0u8; 16];
    k.copy_from_slice(format!("key:{i:012}").as_bytes());
    k
}

/// CLOCK_MONOTONIC in nanoseconds: one clock for every process of a run, so that the
/// backup's start and end place each writer's puts.
fn mono_ns() -> u64 {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: clock_gettime writes the struct it is given.
    unsafe { libc::clock_gettime(libc::CLOCK_MONOTONIC, &mut ts) };
    ts.tv_sec as u64 * 1_000_000_000 + ts.tv_nsec as u64
}

// ---------------------------------------------------------------------------------------
// The stores.

const MAP: &str = "backup";

/// A libmdbx environment large enough for the store and what the writers add while a
/// copy's read transaction keeps the pages they free from being reused.
fn mdbx_open(a: &BArgs, path: &Path) -> Result<MdbxKv, String> {
    MdbxKv::open_sized(
        path,
        4 * a.size + (256 << 20),
        1,
        mx::MDBX_WRITEMAP | mx::MDBX_SAFE_NOSYNC,
    )
}

/// One store being written.
enum Target {
    Shoal(shoal::Store, shoal::Map),
    Mdbx(MdbxKv),
}

impl Target {
    fn open(a: &BArgs, sys: BSys, path: &Path) -> Result<Target, String> {
        Ok(match sys {
            BSys::Shoal => {
                let s = shoal::Store::open_existing(path).map_err(se)?;
                let m = s.map(MAP).map_err(se)?;
                Target::Shoal(s, m)
            }
            BSys::Mdbx => Target::Mdbx(mdbx_open(a, path)?),
        })
    }

    fn put(&mut self, k: &[u8], v: &[u8]) -> Result<(), String> {
        match self {
            Target::Shoal(_, m) => m.put(k, v).map(drop).map_err(se),
            Target::Mdbx(kv) => {
                let t = kv.txn(false)?;
                let (key, mut val) = (mval(k), mval(v));
                // SAFETY: a live write transaction; the buffers outlive the call.
                mrc("put", unsafe {
                    mx::mdbx_put(t.t, kv.dbi, &key, &mut val, mx::MDBX_UPSERT)
                })?;
                t.commit()
            }
        }
    }

    /// Copies the store into `out`; its bytes.
    fn backup(&self, out: &Path) -> Result<u64, String> {
        match self {
            Target::Shoal(s, _) => s.backup(out).map_err(se),
            Target::Mdbx(kv) => {
                let c = std::ffi::CString::new(out.as_os_str().as_encoded_bytes())
                    .map_err(|e| e.to_string())?;
                // SAFETY: an open environment and a NUL-terminated path.
                mrc("env_copy", unsafe {
                    mx::mdbx_env_copy(kv.env, c.as_ptr(), mx::MDBX_CP_DEFAULTS)
                })?;
                std::fs::metadata(out)
                    .map(|m| m.len())
                    .map_err(|e| format!("{}: {e}", out.display()))
            }
        }
    }
}

fn se(e: shoal::Error) -> String {
    e.to_string()
}

/// Value `n` of a run: `len` bytes, its first eight the number.
fn fill(v: &mut [u8], n: u64) {
    v[..8].copy_from_slice(&n.to_le_bytes());
}

fn load(a: &BArgs, sys: BSys, path: &Path) -> Result<(), String> {
    let mut v = vec![0x5au8; a.value];
    match sys {
        BSys::Shoal => {
            let _ = std::fs::remove_file(path);
            let s = shoal::Store::create(path).map_err(se)?;
            let m = s.map(MAP).map_err(se)?;
            for i in 0..a.keys() {
                fill(&mut v, i);
                m.put(&key_of(i), &v).map_err(se)?;
            }
        }
        BSys::Mdbx => {
            let kv = mdbx_open(a, path)?;
            let mut i = 0;
            while i < a.keys() {
                let t = kv.txn(false)?;
                for j in i..(i + 10_000).min(a.keys()) {
                    fill(&mut v, j);
                    let (key, mut val) = (key_of(j), mval(&v));
                    let key = mval(&key);
                    // SAFETY: a live write transaction; the buffers outlive the call.
                    mrc("put", unsafe {
                        mx::mdbx_put(t.t, kv.dbi, &key, &mut val, mx::MDBX_UPSERT)
                    })?;
                }
                t.commit()?;
                i += 10_000;
            }
        }
    }
    Ok(())
}

// ---------------------------------------------------------------------------------------
// Processes.

/// Whether a command waits on `cmds` (polled between puts: a writer never blocks on it).
fn command_waits(cmds: &BufReader<File>) -> bool {
    if !cmds.buffer().is_empty() {
        return true;
    }
    let mut p = libc::pollfd {
        fd: cmds.get_ref().as_raw_fd(),
        events: libc::POLLIN,
        revents: 0,
    };
    // SAFETY: one valid pollfd, no wait.
    unsafe { libc::poll(&mut p, 1, 0) > 0 }
}

/// One writer's puts: when each started and how long it took.
#[derive(Default)]
struct Puts {
    start: Vec<u64>,
    took: Vec<u32>,
}

/// Puts that ran in a window: their count, the window's length, the longest and the
/// 99.9th percentile (nanoseconds).
#[derive(Clone, Copy, Debug, Default)]
struct Window {
    puts: u64,
    secs: f64,
    max_ns: u64,
    p999_ns: u64,
}

impl Puts {
    /// Says on stderr when the writer's eight longest puts started, from the backup's
    /// start `b0`: whether the long ones gather at its start, its end or nowhere.
    fn say_longest(&self, w: usize, b0: u64) {
        let mut v: Vec<(u32, u64)> = self
            .took
            .iter()
            .copied()
            .zip(self.start.iter().copied())
            .collect();
        v.sort_unstable_by_key(|x| std::cmp::Reverse(x.0));
        for (d, s) in v.iter().take(8) {
            eprintln!(
                "  writer {w}: a put of {:.2} ms at {:+.1} ms from the backup's start",
                *d as f64 / 1e6,
                (*s as f64 - b0 as f64) / 1e6
            );
        }
    }

    /// The puts that started in `[from, to)` or were under way at `from`.
    fn window(&self, from: u64, to: u64) -> Window {
        let mut t: Vec<u32> = self
            .start
            .iter()
            .zip(&self.took)
            .filter(|&(&s, &d)| s < to && s + d as u64 >= from)
            .map(|(_, &d)| d)
            .collect();
        t.sort_unstable();
        Window {
            puts: t.len() as u64,
            secs: to.saturating_sub(from) as f64 / 1e9,
            max_ns: t.last().copied().unwrap_or(0) as u64,
            p999_ns: t.get(t.len() * 999 / 1000).copied().unwrap_or(0) as u64,
        }
    }
}

fn writer(
    a: &BArgs,
    sys: BSys,
    path: &Path,
    w: usize,
    cmds: &mut BufReader<File>,
    reps: &mut File,
) -> Result<(), String> {
    let io = |e: std::io::Error| e.to_string();
    let mut t = Target::open(a, sys, path)?;
    let mut rng = SplitMix64(0x5eed ^ ((w as u64 + 1) << 32));
    let mut v = vec![0xa5u8; a.value];
    let mut puts = Puts::default();
    let mut started = 0;
    writeln!(reps, "ready").map_err(io)?;
    let mut line = String::new();
    loop {
        line.clear();
        if cmds.read_line(&mut line).map_err(io)? == 0 {
            return Ok(());
        }
        let f: Vec<&str> = line.split_whitespace().collect();
        match f.as_slice() {
            ["exit"] => return Ok(()),
            ["RUN"] => {
                started = mono_ns();
                let mut n = 0u64;
                loop {
                    // A poll every 64 puts: well under a microsecond per put.
                    if n % 64 == 0 && command_waits(cmds) {
                        break;
                    }
                    let k = key_of(rng.below(a.keys()));
                    fill(&mut v, n);
                    let t0 = mono_ns();
                    t.put(&k, &v)?;
                    let d = mono_ns() - t0;
                    puts.start.push(t0);
                    puts.took.push(d.min(u32::MAX as u64) as u32);
                    n += 1;
                }
                writeln!(reps, "ran {n}").map_err(io)?;
            }
            ["stop"] => {}
            ["STATS", b0, b1] => {
                let num = |s: &str| s.parse::<u64>().map_err(|_| format!("bad time {s:?}"));
                let (b0, b1) = (num(b0)?, num(b1)?);
                if a.trace {
                    puts.say_longest(w, b0);
                }
                let before = puts.window(started, b0);
                let during = puts.window(b0, b1);
                writeln!(
                    reps,
                    "stats {} {} {} {} {} {} {} {}",
                    before.puts,
                    before.secs,
                    before.max_ns,
                    before.p999_ns,
                    during.puts,
                    during.secs,
                    during.max_ns,
                    during.p999_ns
                )
                .map_err(io)?;
            }
            _ => return Err(format!("bad command {line:?}")),
        }
    }
}

fn backer(
    a: &BArgs,
    sys: BSys,
    path: &Path,
    out: &Path,
    cmds: &mut BufReader<File>,
    reps: &mut File,
) -> Result<(), String> {
    let io = |e: std::io::Error| e.to_string();
    let t = Target::open(a, sys, path)?;
    writeln!(reps, "ready").map_err(io)?;
    let mut line = String::new();
    loop {
        line.clear();
        if cmds.read_line(&mut line).map_err(io)? == 0 {
            return Ok(());
        }
        match line.trim() {
            "exit" => return Ok(()),
            "BACKUP" => {
                let t0 = mono_ns();
                let bytes = t.backup(out)?;
                let t1 = mono_ns();
                writeln!(reps, "backup {t0} {t1} {bytes}").map_err(io)?;
            }
            "CHECK" => {
                // Only Shoal's copy is checked: the peer's copy is the peer's business.
                let entries = match sys {
                    BSys::Shoal => {
                        let s = shoal::Store::open_existing(out).map_err(se)?;
                        let r = s.check().map_err(se)?;
                        if !r.is_ok() {
                            return Err(format!("the copy fails its check: {r}"));
                        }
                        s.map(MAP).map_err(se)?.len().map_err(se)?
                    }
                    BSys::Mdbx => a.keys(),
                };
                writeln!(reps, "checked {entries}").map_err(io)?;
            }
            cmd => return Err(format!("bad command {cmd:?}")),
        }
    }
}

/// One run: the writers' windows and the backup's length.
#[derive(Clone, Debug, Default)]
struct Rep {
    backup_secs: f64,
    copy_bytes: u64,
    before: Vec<Window>,
    during: Vec<Window>,
}

fn recv_words(w: &mut Worker, first: &str, n: usize) -> Result<Vec<String>, String> {
    let r = w.recv()?;
    let f: Vec<String> = r.split(' ').map(str::to_string).collect();
    if f.first().map(String::as_str) != Some(first) || f.len() != n + 1 {
        return Err(format!("bad reply {r:?}"));
    }
    Ok(f[1..].to_vec())
}

fn run_once(a: &BArgs, sys: BSys, writers: usize, base: &Path) -> Result<Rep, String> {
    let path = base.join(format!("{}.store", sys.key()));
    let out = base.join(format!("{}.copy", sys.key()));
    let r = drive(a, sys, writers, &path, &out);
    for p in [&path, &out] {
        let _ = std::fs::remove_file(p);
        let _ = std::fs::remove_dir_all(p);
    }
    r
}

fn drive(a: &BArgs, sys: BSys, writers: usize, path: &Path, out: &Path) -> Result<Rep, String> {
    // Setup in a child of its own: the parent never opens a store (it forks the workers).
    let setup = fork_worker(&[], |_, reps| {
        load(a, sys, path)?;
        writeln!(reps, "ready").map_err(|e| e.to_string())
    })?;
    setup_done(setup)?;
    let mut procs: Vec<Worker> = Vec::new();
    let result = (|| {
        procs.push(fork_worker(&[], |cmds, reps| {
            backer(a, sys, path, out, cmds, reps)
        })?);
        for w in 0..writers {
            let fds: Vec<_> = procs.iter().flat_map(|w| w.fds()).collect();
            procs.push(fork_worker(&fds, |cmds, reps| {
                writer(a, sys, path, w, cmds, reps)
            })?);
        }
        for p in procs.iter_mut() {
            let r = p.recv()?;
            if r != "ready" {
                return Err(format!("worker said {r:?}"));
            }
        }
        let (backer, ws) = procs.split_first_mut().expect("the backup process");
        for w in ws.iter_mut() {
            w.send("RUN")?;
        }
        std::thread::sleep(Duration::from_secs_f64(a.base_secs));
        backer.send("BACKUP")?;
        let b = recv_words(backer, "backup", 3)?;
        let num = |s: &str| s.parse::<u64>().map_err(|_| format!("bad number {s:?}"));
        let (t0, t1, bytes) = (num(&b[0])?, num(&b[1])?, num(&b[2])?);
        std::thread::sleep(Duration::from_millis(500));
        for w in ws.iter_mut() {
            w.send("stop")?;
        }
        let mut rep = Rep {
            backup_secs: (t1 - t0) as f64 / 1e9,
            copy_bytes: bytes,
            ..Rep::default()
        };
        for w in ws.iter_mut() {
            recv_words(w, "ran", 1)?;
            w.send(&format!("STATS {t0} {t1}"))?;
            let f = recv_words(w, "stats", 8)?;
            let win = |i: usize| -> Result<Window, String> {
                Ok(Window {
                    puts: num(&f[i])?,
                    secs: f[i + 1]
                        .parse()
                        .map_err(|_| format!("bad {:?}", f[i + 1]))?,
                    max_ns: num(&f[i + 2])?,
                    p999_ns: num(&f[i + 3])?,
                })
            };
            rep.before.push(win(0)?);
            rep.during.push(win(4)?);
        }
        backer.send("CHECK")?;
        let c = recv_words(backer, "checked", 1)?;
        if num(&c[0])? != a.keys() {
            return Err(format!("the copy holds {} entries, not {}", c[0], a.keys()));
        }
        Ok(rep)
    })();
    reap(procs);
    result
}

/// Runs the backup mode with the arguments after `--kind backup`; returns the exit code.
pub fn main(args: &[String]) -> i32 {
    let Some((a, base)) = crate::start(args, parse, |a| &a.dir, "b") else {
        return 2;
    };
    let load_before = crate::report::loadavg();
    let mut rows: Vec<(BSys, usize, Vec<Rep>)> = Vec::new();
    let mut failed = false;
    for &w in &a.writers {
        let mut reps: Vec<(BSys, Vec<Rep>)> = a.systems.iter().map(|&s| (s, vec![])).collect();
        // Rows interleaved, so that a change in the machine's load hits every system.
        for r in 0..a.repeats {
            for (sys, out) in reps.iter_mut() {
                eprintln!("backup: {} writers={w} run {}", sys.key(), r + 1);
                match run_once(&a, *sys, w, &base) {
                    Ok(rep) => {
                        eprintln!(
                            "  backup {:.2} s; longest put during it {:.2} ms (before {:.2} ms)",
                            rep.backup_secs,
                            longest(&rep.during) as f64 / 1e6,
                            longest(&rep.before) as f64 / 1e6
                        );
                        out.push(rep);
                    }
                    Err(e) => {
                        eprintln!("shoal-compare: {} writers={w}: {e}", sys.key());
                        failed = true;
                    }
                }
            }
        }
        rows.extend(reps.into_iter().map(|(s, r)| (s, w, r)));
    }
    let _ = std::fs::remove_dir_all(&base);
    let md = markdown(&a, &rows, &load_before, &crate::report::loadavg());
    print!("{md}");
    if let Some(p) = &a.md {
        if let Err(e) = std::fs::write(p, &md) {
            eprintln!("shoal-compare: {}: {e}", p.display());
            failed = true;
        }
    }
    i32::from(failed)
}

fn longest(ws: &[Window]) -> u64 {
    ws.iter().map(|w| w.max_ns).max().unwrap_or(0)
}

fn rate(ws: &[Window]) -> f64 {
    ws.iter()
        .map(|w| {
            if w.secs > 0.0 {
                w.puts as f64 / w.secs
            } else {
                0.0
            }
        })
        .sum()
}

fn ms(ns: u64) -> String {
    format!("{:.2}", ns as f64 / 1e6)
}

fn markdown(a: &BArgs, rows: &[(BSys, usize, Vec<Rep>)], load0: &str, load1: &str) -> String {
    let mut s = String::new();
    let gib = |b: f64| b / (1u64 << 30) as f64;
    s.push_str(&format!(
        "- date: {}\n- commit: {}\n\n",
        crate::report::date_utc(),
        crate::report::commit()
    ));
    s.push_str(&format!(
        "Store: {} values of {} bytes ({:.2} GiB of values) in {}. libmdbx {}. \
         Load average {load0} before, {load1} after.\n\n",
        crate::report::group(a.keys() as usize),
        a.value,
        gib(a.size as f64),
        a.dir.display(),
        MdbxKv::version(),
    ));
    s.push_str(
        "Each cell lists the runs. *Longest put*: the longest single put of any writer \
         (milliseconds), before the backup and while it ran; *p99.9*: the worst writer's \
         99.9th percentile; *puts/s*: all writers together.\n\n",
    );
    s.push_str(
        "| system | writers | backup (s) | copy (GiB) | longest put during (ms) | longest put before (ms) \
         | p99.9 during (ms) | p99.9 before (ms) | puts/s during | puts/s before |\n\
         |---|---|---|---|---|---|---|---|---|---|\n",
    );
    for (sys, w, reps) in rows {
        let list = |f: &dyn Fn(&Rep) -> String| -> String {
            reps.iter().map(f).collect::<Vec<_>>().join(", ")
        };
        s.push_str(&format!(
            "| {} | {w} | {} | {} | {} | {} | {} | {} | {} | {} |\n",
            sys.label(),
            list(&|r| format!("{:.2}", r.backup_secs)),
            list(&|r| format!("{:.2}", gib(r.copy_bytes as f64))),
            list(&|r| ms(longest(&r.during))),
            list(&|r| ms(longest(&r.before))),
            list(&|r| ms(r.during.iter().map(|w| w.p999_ns).max().unwrap_or(0))),
            list(&|r| ms(r.before.iter().map(|w| w.p999_ns).max().unwrap_or(0))),
            list(&|r| crate::report::fmt_ops(rate(&r.during))),
            list(&|r| crate::report::fmt_ops(rate(&r.before))),
        ));
    }
    if let Some(r) = &a.repro {
        s.push_str(&format!("\nCommand:\n\n```sh\n{r}\n```\n"));
    }
    s
}
