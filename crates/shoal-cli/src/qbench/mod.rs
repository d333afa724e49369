//! `shoal bench queue`: Shoal's queue sets against iceoryx2, a pipe, an eventfd and a Unix
//! domain socket, every measure between two processes, every ratio from the same run.
//!
//! Each measure starts two processes, A and B: this binary again with the hidden
//! `bench-queue-worker` subcommand ([`worker`]), or for iceoryx2 the `shoal-iceoryx2-peer`
//! binary, which speaks the same protocol and is a crate of its own so that the `shoal`
//! tool does not build iceoryx2 (nor need libclang to be built). The protocol, on each
//! child's stdin and stdout:
//!
//! - the child sets up (opens the store, creates its ports, pins itself) and says `ready`;
//! - the parent answers `go START WARM END`, three CLOCK_MONOTONIC times in ns: both sides
//!   start at START, count from WARM and stop at END;
//! - the child says `done count=N secs=S errors=E` and exits: N things done between WARM
//!   and END, over S seconds as its own clock measured them. A latency receiver writes its
//!   samples (little-endian u64 ns) to the file `--samples` names; N is their number, and
//!   it adds `msgs=M sleeps=S`: the messages it received (warm-up included) and the times
//!   it gave up its cpu to wait meanwhile (its thread's voluntary context switches), which
//!   show whether a blocking receiver really slept before each message.
//!
//! One-way latency is measured with a shared clock, not a round trip halved: A writes its
//! CLOCK_MONOTONIC time in the message, B reads the clock when it has the message, and
//! both processes read the same kernel clock. Halving a round trip would average two
//! directions that are not alike (in the blocking measures only the forward leg wakes a
//! sleeper: A is awake when the answer comes back) and would halve a tail that one leg
//! alone does not have.

pub mod host;
pub mod worker;

pub use host::clock_ns;

use crate::fail::Fail;
use crate::human;
use clap::Args;
use shoal::{OpenMode, Options, QueueSetOptions, Store};
use std::collections::BTreeMap;
use std::io::{BufRead, BufReader, Write};
use std::os::fd::{AsRawFd, OwnedFd, RawFd};
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStdin, Command, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

/// The hidden subcommand that runs one side of a measure (see `QueueWorkerCli` in main.rs).
pub const WORKER_SUBCOMMAND: &str = "bench-queue-worker";

/// The send time that tells a latency receiver to stop (no real CLOCK_MONOTONIC time is
/// this small).
pub const STOP: u64 = 1;

/// `shoal bench queue --help`.
pub const HELP: &str = "\
Queue benchmark: Shoal's queue sets against iceoryx2 (publish-subscribe), a pipe, an \
eventfd and a Unix domain socket. Every measure runs between two processes (A and B), \
each pinned to its own cpu unless --no-pin (the same placement for every system), for \
--secs seconds after --warmup seconds; every ratio is against a peer measured in the \
same run. With --rounds N every measure runs N times for --secs / N, interleaved with the \
others, so that a drift of the machine's speed touches every system alike.

Throughput, for each element (payload) size of --sizes:
  Shoal ping-pong   SharedHashFile's test: A moves free -> a2b, B moves a2b -> b2a, A \
moves b2a -> free, each touching the element's first 8 bytes in place; moves/s of both \
processes together, unbatched (pull/push) and in batches of 16 and 256 \
(pull_many/push_many). --elements elements in the set.
  Shoal one-way     A moves free -> a2b writing a sequence number, B moves a2b -> free \
checking it: elements/s delivered to B, unbatched.
  iceoryx2          publish-subscribe (the crate): A loans a sample, writes its first 8 \
bytes, sends; B receives and reads them; samples/s received. The subscriber buffers \
--elements samples and the publisher retries while it is full (nothing is lost).

One-way latency (p50, p99, p99.9, max), 64-byte messages (an eventfd's are 8), A's \
send time in the message against B's clock when it has it (the same CLOCK_MONOTONIC):
  busy      B polls: Shoal pull, iceoryx2 receive, non-blocking read of a pipe, an \
eventfd, a Unix socket
  blocking  B sleeps: Shoal pull_wait (woken by A's push), iceoryx2 listener \
(blocking_wait on an event A notifies after sending the sample) then receive, blocking \
read of a pipe, an eventfd, a Unix socket; A waits --gap-us after each answer so that B \
is asleep when the next message comes

The iceoryx2 side is the shoal-iceoryx2-peer binary (found beside this one, or \
--iceoryx2-peer); without it those rows say `not run` and their ratios are missing: \
  cargo build --release -p shoal-cli -p shoal-iceoryx2-peer

The default takes about a minute. Exit status: 0 when no measure failed and every check \
(sequence numbers, element parity) passed; a measure that is not run (iceoryx2 without its \
peer, or a run too short to get one sample on a loaded machine) says so in its row.";

/// Options of `shoal bench queue`.
#[derive(Args, Debug, Clone)]
pub struct QueueArgs {
    /// Seconds each measure counts (after --warmup)
    #[arg(long, default_value_t = 2.0, value_parser = positive_secs)]
    secs: f64,
    /// Seconds each measure runs before it counts (in each round)
    #[arg(long, default_value_t = 0.25, value_parser = nonnegative_secs)]
    warmup: f64,
    /// Run every measure this many times, interleaved (each measure once per round, for
    /// --secs / N): rates are the mean of the rounds, latency samples are pooled
    #[arg(long, default_value_t = 1, value_parser = clap::value_parser!(u32).range(1..=1000))]
    rounds: u32,
    /// Element (payload) sizes of the throughput measures, in bytes
    #[arg(long, value_delimiter = ',', default_value = "64,4096")]
    sizes: Vec<usize>,
    /// Elements in the ping-pong's and one-way's queue set; iceoryx2's subscriber buffer
    #[arg(long, default_value_t = 4096, value_parser = clap::value_parser!(u64).range(256..))]
    elements: u64,
    /// Which measures: pingpong, oneway, pubsub, busy, blocking (comma list)
    #[arg(
        long,
        value_delimiter = ',',
        default_value = "pingpong,oneway,pubsub,busy,blocking"
    )]
    only: Vec<String>,
    /// Microseconds A waits after each answer in the blocking latency measures
    #[arg(long, default_value_t = 50)]
    gap_us: u64,
    /// The two cpus A and B are pinned to
    #[arg(long, value_delimiter = ',', default_value = "0,1", num_args = 1)]
    cpus: Vec<i32>,
    /// Leave the processes where the scheduler puts them
    #[arg(long)]
    no_pin: bool,
    /// The shoal-iceoryx2-peer binary (default: beside this one)
    #[arg(long)]
    iceoryx2_peer: Option<PathBuf>,
    /// Where the stores go
    #[arg(long, default_value = "/dev/shm")]
    dir: PathBuf,
    /// Print one JSON object on stdout (the tables go to stderr)
    #[arg(long)]
    json: bool,
}

fn positive_secs(s: &str) -> Result<f64, String> {
    match s.parse::<f64>() {
        Ok(x) if x > 0.0 && x <= 3600.0 => Ok(x),
        _ => Err(format!("{s:?} is not a number of seconds in (0, 3600]")),
    }
}

fn nonnegative_secs(s: &str) -> Result<f64, String> {
    match s.parse::<f64>() {
        Ok(x) if (0.0..=60.0).contains(&x) => Ok(x),
        _ => Err(format!("{s:?} is not a number of seconds in [0, 60]")),
    }
}

/// The systems measured.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Sys {
    Shoal,
    Iceoryx2,
    Pipe,
    Eventfd,
    Uds,
}

impl Sys {
    fn key(self) -> &'static str {
        match self {
            Sys::Shoal => "shoal",
            Sys::Iceoryx2 => "iceoryx2",
            Sys::Pipe => "pipe",
            Sys::Eventfd => "eventfd",
            Sys::Uds => "uds",
        }
    }
}

/// What a measure does.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum What {
    /// Shoal's three-queue ping-pong, in batches of this many.
    PingPong(usize),
    /// Shoal's free → a2b → free stream, unbatched.
    OneWay,
    /// iceoryx2 publish-subscribe.
    PubSub,
    /// One-way latency; busy (polling) or blocking.
    Latency(bool),
}

#[derive(Clone, Copy, Debug)]
struct Spec {
    sys: Sys,
    what: What,
    /// Element, payload or message size.
    size: usize,
}

impl Spec {
    fn label(&self) -> String {
        match (self.sys, self.what) {
            (_, What::PingPong(1)) => "Shoal ping-pong, unbatched".into(),
            (_, What::PingPong(b)) => format!("Shoal ping-pong, batches of {b}"),
            (_, What::OneWay) => "Shoal one-way (free -> a2b -> free)".into(),
            (_, What::PubSub) => "iceoryx2 publish-subscribe".into(),
            (s, What::Latency(busy)) => match (s, busy) {
                (Sys::Shoal, true) => "Shoal pull (polling)".into(),
                (Sys::Shoal, false) => "Shoal pull_wait".into(),
                (Sys::Iceoryx2, true) => "iceoryx2 receive (polling)".into(),
                (Sys::Iceoryx2, false) => "iceoryx2 listener + receive".into(),
                (Sys::Pipe, _) => "pipe".into(),
                (Sys::Eventfd, _) => "eventfd".into(),
                (Sys::Uds, _) => "Unix socket (stream)".into(),
            },
        }
    }

    fn key(&self) -> String {
        match self.what {
            What::PingPong(b) => format!("shoal-pingpong-{}-b{b}", self.size),
            What::OneWay => format!("shoal-oneway-{}", self.size),
            What::PubSub => format!("iceoryx2-pubsub-{}", self.size),
            What::Latency(busy) => format!(
                "{}-{}",
                self.sys.key(),
                if busy { "busy" } else { "blocking" }
            ),
        }
    }
}

/// Latency percentiles, ns.
#[derive(Clone, Debug)]
struct Lat {
    /// Sleeps of the receiver per message received.
    slept: Option<f64>,
    n: u64,
    p50: u64,
    p99: u64,
    p999: u64,
    max: u64,
    mean: f64,
}

/// Nearest-rank percentile of sorted samples.
fn pct(sorted: &[u64], p: f64) -> u64 {
    let n = sorted.len();
    let rank = ((p * n as f64).ceil() as usize).clamp(1, n);
    sorted[rank - 1]
}

fn summarize(mut v: Vec<u64>) -> Option<Lat> {
    if v.is_empty() {
        return None;
    }
    v.sort_unstable();
    Some(Lat {
        slept: None,
        n: v.len() as u64,
        p50: pct(&v, 0.50),
        p99: pct(&v, 0.99),
        p999: pct(&v, 0.999),
        max: v[v.len() - 1],
        mean: v.iter().sum::<u64>() as f64 / v.len() as f64,
    })
}

/// What one run of a measure gave, before the rounds are pooled.
enum Raw {
    /// Things per second.
    Rate(f64),
    /// B's one-way latencies, and its messages and sleeps when it reported them.
    Samples {
        v: Vec<u64>,
        sleeps: Option<(u64, u64)>,
    },
}

/// A measure's runs so far (one per round).
struct Acc {
    spec: Spec,
    rates: Vec<f64>,
    samples: Vec<u64>,
    /// Messages and sleeps of B over every round that reported them.
    sleeps: Option<(u64, u64)>,
    errors: u64,
    /// Why the measure stopped running: not run, or failed.
    stop: Option<Outcome>,
}

impl Acc {
    fn add(&mut self, r: Result<(Raw, u64), Outcome>) {
        match r {
            Err(o) => self.stop = Some(o),
            Ok((raw, errors)) => {
                self.errors += errors;
                match raw {
                    Raw::Rate(x) => self.rates.push(x),
                    Raw::Samples { v, sleeps } => {
                        self.samples.extend(v);
                        self.sleeps = match (self.sleeps, sleeps) {
                            (None, s) => s,
                            (Some((m0, s0)), Some((m1, s1))) => Some((m0 + m1, s0 + s1)),
                            (Some(_), None) => None,
                        };
                    }
                }
            }
        }
    }

    /// The measure's figures: the mean rate over the rounds, or the pooled samples'
    /// percentiles.
    fn finish(self) -> Row {
        let outcome = match self.stop {
            Some(o) => o,
            None if !self.rates.is_empty() => {
                Outcome::Rate(self.rates.iter().sum::<f64>() / self.rates.len() as f64)
            }
            None => match summarize(self.samples) {
                Some(mut l) => {
                    l.slept = self
                        .sleeps
                        .filter(|(m, _)| *m > 0)
                        .map(|(m, s)| s as f64 / m as f64);
                    Outcome::Latency(l)
                }
                // Not a failure of the system measured: on a loaded machine a short run
                // may end before both sides were ever on a cpu together.
                None => Outcome::NotRun(
                    "no samples: the run was too short for the machine's load (more --secs)".into(),
                ),
            },
        };
        Row {
            spec: self.spec,
            outcome,
            errors: self.errors,
        }
    }
}

#[derive(Clone, Debug)]
enum Outcome {
    /// Things per second (moves, elements, samples).
    Rate(f64),
    Latency(Lat),
    NotRun(String),
    Failed(String),
}

struct Row {
    spec: Spec,
    outcome: Outcome,
    /// Failed checks (sequence numbers, parity) and clock anomalies.
    errors: u64,
}

/// What a child said at the end.
#[derive(Debug, Default)]
struct Done {
    count: u64,
    secs: f64,
    errors: u64,
    /// A latency receiver's messages and sleeps.
    msgs: Option<u64>,
    sleeps: Option<u64>,
}

/// How to start one side of a measure.
struct Side {
    cmd: Command,
}

/// The two children of a measure, killed if still running when it ends.
struct Pair {
    children: Vec<Child>,
    stdins: Vec<ChildStdin>,
}

impl Drop for Pair {
    fn drop(&mut self) {
        self.stdins.clear();
        for c in &mut self.children {
            if matches!(c.try_wait(), Ok(None)) {
                let _ = c.kill();
            }
            let _ = c.wait();
        }
    }
}

enum Msg {
    Ready,
    Done(Done),
    Garbled(String),
    Eof,
}

/// Runs one measure: starts B then A, starts them together, collects what they said.
fn run_pair(b: Side, a: Side, warmup: f64, secs: f64) -> Result<[Done; 2], String> {
    let mut pair = Pair {
        children: Vec::new(),
        stdins: Vec::new(),
    };
    let (tx, rx) = mpsc::channel::<(usize, Msg)>();
    for (i, mut side) in [b, a].into_iter().enumerate() {
        let mut child = side
            .cmd
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()
            .map_err(|e| format!("cannot start {:?}: {e}", side.cmd.get_program()))?;
        let (Some(stdin), Some(stdout)) = (child.stdin.take(), child.stdout.take()) else {
            return Err("child pipes missing".into());
        };
        pair.children.push(child);
        pair.stdins.push(stdin);
        let tx = tx.clone();
        std::thread::spawn(move || {
            for line in BufReader::new(stdout).lines() {
                let Ok(line) = line else { break };
                let msg = if line == "ready" {
                    Msg::Ready
                } else if let Some(rest) = line.strip_prefix("done ") {
                    match parse_done(rest) {
                        Some(d) => Msg::Done(d),
                        None => Msg::Garbled(line),
                    }
                } else {
                    continue; // a library's chatter
                };
                if tx.send((i, msg)).is_err() {
                    return;
                }
            }
            let _ = tx.send((i, Msg::Eof));
        });
    }
    drop(tx);
    let name = |i: usize| if i == 0 { "B" } else { "A" };
    let mut ready = 0;
    while ready < 2 {
        match rx.recv_timeout(Duration::from_secs(60)) {
            Ok((_, Msg::Ready)) => ready += 1,
            Ok((i, Msg::Eof)) => return Err(format!("{} exited before it was ready", name(i))),
            Ok((i, _)) => return Err(format!("{} said something unexpected", name(i))),
            Err(_) => return Err("the processes did not get ready within 60 s".into()),
        }
    }
    let start = clock_ns() + 20_000_000;
    let warm = start + (warmup * 1e9) as u64;
    let end = warm + (secs * 1e9) as u64;
    for (i, s) in pair.stdins.iter_mut().enumerate() {
        writeln!(s, "go {start} {warm} {end}")
            .and_then(|_| s.flush())
            .map_err(|e| format!("{} cannot be reached: {e}", name(i)))?;
    }
    let mut done: [Option<Done>; 2] = [None, None];
    let deadline = Instant::now() + Duration::from_secs_f64(warmup + secs + 30.0);
    while done.iter().any(|d| d.is_none()) {
        let left = deadline.saturating_duration_since(Instant::now());
        match rx.recv_timeout(left) {
            Ok((i, Msg::Done(d))) => done[i] = Some(d),
            Ok((i, Msg::Eof)) if done[i].is_none() => {
                return Err(format!("{} exited without its figures", name(i)))
            }
            Ok((_, Msg::Eof)) => {}
            Ok((i, Msg::Garbled(l))) => return Err(format!("{} said {l:?}", name(i))),
            Ok((i, Msg::Ready)) => return Err(format!("{} said ready twice", name(i))),
            Err(_) => return Err("the processes did not finish in time".into()),
        }
    }
    pair.stdins.clear();
    for (i, c) in pair.children.iter_mut().enumerate() {
        let st = c
            .wait()
            .map_err(|e| format!("waiting for {}: {e}", name(i)))?;
        if !st.success() {
            return Err(format!("{} exited with {st}", name(i)));
        }
    }
    let [b, a] = done;
    Ok([b.unwrap_or_default(), a.unwrap_or_default()])
}

fn parse_done(rest: &str) -> Option<Done> {
    let kv: BTreeMap<&str, &str> = rest
        .split_ascii_whitespace()
        .filter_map(|f| f.split_once('='))
        .collect();
    Some(Done {
        count: kv.get("count")?.parse().ok()?,
        secs: kv.get("secs")?.parse().ok()?,
        errors: kv.get("errors")?.parse().ok()?,
        msgs: kv.get("msgs").and_then(|x| x.parse().ok()),
        sleeps: kv.get("sleeps").and_then(|x| x.parse().ok()),
    })
}

/// Everything one run needs to start measures.
struct Ctx {
    a: QueueArgs,
    exe: PathBuf,
    peer: Result<PathBuf, String>,
    /// A prefix unique to this run (stores, services, sample files).
    tag: String,
    seq: usize,
}

impl Ctx {
    fn cpu(&self, side: usize) -> i32 {
        if self.a.no_pin {
            -1
        } else {
            self.a.cpus[side]
        }
    }

    fn next_tag(&mut self) -> String {
        self.seq += 1;
        format!("{}-{}", self.tag, self.seq)
    }

    /// This binary as one side of a measure.
    fn shoal_side(&self, test: &str, role: usize, extra: &[String]) -> Side {
        let mut cmd = Command::new(&self.exe);
        cmd.arg(WORKER_SUBCOMMAND)
            .args(["--test", test])
            .args(["--role", if role == 0 { "a" } else { "b" }])
            .arg(format!("--cpu={}", self.cpu(role)))
            .args(extra);
        Side { cmd }
    }

    fn peer_side(&self, peer: &Path, test: &str, role: usize, extra: &[String]) -> Side {
        let mut cmd = Command::new(peer);
        cmd.args(["--test", test])
            .args(["--role", if role == 0 { "a" } else { "b" }])
            .arg(format!("--cpu={}", self.cpu(role)))
            .args(extra);
        Side { cmd }
    }

    fn samples_path(&self, tag: &str) -> PathBuf {
        std::env::temp_dir().join(format!("{tag}.lat"))
    }

    /// Runs one measure once, whatever its system.
    fn measure(&mut self, spec: Spec) -> Result<(Raw, u64), Outcome> {
        let tag = self.next_tag();
        let r = match spec.sys {
            Sys::Shoal => self.shoal(spec, &tag),
            Sys::Iceoryx2 => match self.peer.clone() {
                Ok(p) => self.iceoryx2(spec, &tag, &p),
                Err(why) => return Err(Outcome::NotRun(why)),
            },
            Sys::Pipe | Sys::Eventfd | Sys::Uds => self.kernel(spec, &tag),
        };
        r.map_err(Outcome::Failed)
    }

    /// A latency measure's samples from B's file.
    fn latency_outcome(&self, tag: &str, b: &Done) -> Result<(Raw, u64), String> {
        let path = self.samples_path(tag);
        let bytes = std::fs::read(&path).map_err(|e| format!("{}: {e}", path.display()));
        let _ = std::fs::remove_file(&path);
        let v: Vec<u64> = bytes?
            .chunks_exact(8)
            .map(|c| u64::from_le_bytes(c.try_into().expect("8 bytes")))
            .collect();
        if v.len() as u64 != b.count {
            return Err(format!(
                "B counted {} samples and wrote {}",
                b.count,
                v.len()
            ));
        }
        let sleeps = b.msgs.zip(b.sleeps);
        Ok((Raw::Samples { v, sleeps }, b.errors))
    }

    fn shoal(&mut self, spec: Spec, tag: &str) -> Result<(Raw, u64), String> {
        let path = self.a.dir.join(format!("{tag}.shoal"));
        let elements = match spec.what {
            What::Latency(_) => 4,
            _ => self.a.elements,
        };
        {
            let store = Store::open_with(&path, &Options::default(), OpenMode::CreateNew)
                .map_err(|e| format!("cannot create {}: {e}", path.display()))?;
            store
                .queue_set(
                    "bench",
                    &QueueSetOptions::new(spec.size, elements)
                        .queue("a2b")
                        .queue("b2a"),
                )
                .map_err(|e| format!("cannot create the queue set: {e}"))?;
        }
        struct Rm<'a>(&'a Path);
        impl Drop for Rm<'_> {
            fn drop(&mut self) {
                let _ = Store::destroy(self.0);
            }
        }
        let _rm = Rm(&path);
        let mut extra = vec![format!("--store={}", path.display())];
        let (test, lat) = match spec.what {
            What::PingPong(b) => {
                extra.push(format!("--batch={b}"));
                ("shoal-pingpong", None)
            }
            What::OneWay => ("shoal-oneway", None),
            What::Latency(busy) => {
                self.latency_args(busy, tag, &mut extra);
                ("shoal-latency", Some(()))
            }
            What::PubSub => unreachable!("iceoryx2 only"),
        };
        let [b, a] = run_pair(
            self.shoal_side(test, 1, &extra),
            self.shoal_side(test, 0, &extra),
            self.a.warmup,
            self.a.secs / self.a.rounds as f64,
        )?;
        if lat.is_some() {
            return self.latency_outcome(tag, &b);
        }
        let rate = |d: &Done| d.count as f64 / d.secs.max(1e-9);
        let errors = a.errors + b.errors;
        Ok(match spec.what {
            What::PingPong(_) => (Raw::Rate(rate(&a) + rate(&b)), errors),
            _ => (Raw::Rate(rate(&b)), errors),
        })
    }

    fn latency_args(&self, busy: bool, tag: &str, extra: &mut Vec<String>) {
        if busy {
            extra.push("--busy".into());
        } else {
            extra.push(format!("--gap-ns={}", self.a.gap_us * 1000));
        }
        extra.push(format!("--samples={}", self.samples_path(tag).display()));
    }

    fn iceoryx2(&mut self, spec: Spec, tag: &str, peer: &Path) -> Result<(Raw, u64), String> {
        let mut extra = vec![
            format!("--service={tag}"),
            format!("--size={}", spec.size),
            format!("--elements={}", self.a.elements),
        ];
        let test = match spec.what {
            What::PubSub => "pubsub",
            What::Latency(busy) => {
                self.latency_args(busy, tag, &mut extra);
                "latency"
            }
            _ => unreachable!("Shoal only"),
        };
        let [b, a] = run_pair(
            self.peer_side(peer, test, 1, &extra),
            self.peer_side(peer, test, 0, &extra),
            self.a.warmup,
            self.a.secs / self.a.rounds as f64,
        )?;
        match spec.what {
            What::PubSub => Ok((
                Raw::Rate(b.count as f64 / b.secs.max(1e-9)),
                a.errors + b.errors,
            )),
            _ => self.latency_outcome(tag, &b),
        }
    }

    fn kernel(&mut self, spec: Spec, tag: &str) -> Result<(Raw, u64), String> {
        let What::Latency(busy) = spec.what else {
            unreachable!("kernel channels are latency peers only")
        };
        let fds = Fds::new(spec.sys)?;
        let mut extra = vec![
            format!(
                "--fds={},{},{},{}",
                fds.nums[0], fds.nums[1], fds.nums[2], fds.nums[3]
            ),
            format!("--msg={}", spec.size),
        ];
        self.latency_args(busy, tag, &mut extra);
        let b = self.shoal_side("kernel-latency", 1, &extra);
        let a = self.shoal_side("kernel-latency", 0, &extra);
        // The children inherit the descriptors when they start; the parent's copies go
        // when `fds` does, once both run (a closed write end would end B's reads).
        let r = run_pair(b, a, self.a.warmup, self.a.secs / self.a.rounds as f64);
        drop(fds);
        let [b, _] = r?;
        self.latency_outcome(tag, &b)
    }
}

/// A kernel channel's descriptors, inherited by the children (made without close-on-exec):
/// forward read, forward write, back read, back write (an eventfd and a socket are one
/// descriptor per side). The parent's copies close when this drops.
struct Fds {
    /// Held so that they close on drop.
    _owned: Vec<OwnedFd>,
    nums: [RawFd; 4],
}

impl Fds {
    fn new(sys: Sys) -> Result<Fds, String> {
        let os = |what: &'static str| move |e: rustix::io::Errno| format!("{what}: {e}");
        match sys {
            Sys::Pipe => {
                let (fr, fw) = rustix::pipe::pipe().map_err(os("pipe"))?;
                let (br, bw) = rustix::pipe::pipe().map_err(os("pipe"))?;
                let n = [&fr, &fw, &br, &bw].map(|f| f.as_raw_fd());
                Ok(Fds {
                    _owned: vec![fr, fw, br, bw],
                    nums: n,
                })
            }
            Sys::Eventfd => {
                let flags = rustix::event::EventfdFlags::empty();
                let f = rustix::event::eventfd(0, flags).map_err(os("eventfd"))?;
                let b = rustix::event::eventfd(0, flags).map_err(os("eventfd"))?;
                let (nf, nb) = (f.as_raw_fd(), b.as_raw_fd());
                Ok(Fds {
                    _owned: vec![f, b],
                    nums: [nf, nf, nb, nb],
                })
            }
            Sys::Uds => {
                use rustix::net::{AddressFamily, SocketFlags, SocketType};
                let (s0, s1) = rustix::net::socketpair(
                    AddressFamily::UNIX,
                    SocketType::STREAM,
                    SocketFlags::empty(),
                    None,
                )
                .map_err(os("socketpair"))?;
                // A writes s0 and reads it for the answers; B the other end.
                let (n0, n1) = (s0.as_raw_fd(), s1.as_raw_fd());
                Ok(Fds {
                    _owned: vec![s0, s1],
                    nums: [n1, n0, n0, n1],
                })
            }
            _ => unreachable!("not a kernel channel"),
        }
    }
}

/// The 1-minute load average.
fn loadavg() -> Option<f64> {
    std::fs::read_to_string("/proc/loadavg")
        .ok()?
        .split_whitespace()
        .next()?
        .parse()
        .ok()
}

/// What one CLOCK_MONOTONIC read costs here (the median of back-to-back reads), ns: each
/// one-way figure includes about one.
fn clock_cost() -> u64 {
    let mut d: Vec<u64> = (0..10_001)
        .map(|_| {
            let t = clock_ns();
            clock_ns() - t
        })
        .collect();
    d.sort_unstable();
    d[d.len() / 2]
}

/// The measures to run, in order.
fn plan(a: &QueueArgs) -> Result<Vec<Spec>, Fail> {
    const KNOWN: [&str; 5] = ["pingpong", "oneway", "pubsub", "busy", "blocking"];
    for o in &a.only {
        if !KNOWN.contains(&o.as_str()) {
            return Err(Fail::err(format!(
                "--only {o:?}: the measures are {}",
                KNOWN.join(", ")
            )));
        }
    }
    let on = |m: &str| a.only.iter().any(|o| o == m);
    let mut v = Vec::new();
    for &size in &a.sizes {
        if on("pingpong") {
            for b in [1, 16, 256] {
                v.push(Spec {
                    sys: Sys::Shoal,
                    what: What::PingPong(b),
                    size,
                });
            }
        }
        if on("oneway") {
            v.push(Spec {
                sys: Sys::Shoal,
                what: What::OneWay,
                size,
            });
        }
        if on("pubsub") {
            v.push(Spec {
                sys: Sys::Iceoryx2,
                what: What::PubSub,
                size,
            });
        }
    }
    for (m, busy) in [("busy", true), ("blocking", false)] {
        if on(m) {
            for sys in [Sys::Shoal, Sys::Iceoryx2, Sys::Pipe, Sys::Eventfd, Sys::Uds] {
                v.push(Spec {
                    sys,
                    what: What::Latency(busy),
                    size: if sys == Sys::Eventfd { 8 } else { 64 },
                });
            }
        }
    }
    Ok(v)
}

/// `shoal bench queue`.
pub fn run(a: QueueArgs) -> Result<(), Fail> {
    if a.sizes.is_empty() || a.sizes.iter().any(|&s| s == 0 || s > 1 << 20) {
        return Err(Fail::err("--sizes are 1 to 1,048,576 bytes"));
    }
    if a.cpus.len() != 2 || a.cpus.iter().any(|&c| c < 0) {
        return Err(Fail::err("--cpus takes two cpu numbers, A's and B's"));
    }
    let specs = plan(&a)?;
    let exe = std::env::current_exe()
        .map_err(|e| Fail::err(format!("cannot find the shoal binary: {e}")))?;
    let peer = match &a.iceoryx2_peer {
        Some(p) if p.is_file() => Ok(p.clone()),
        Some(p) => {
            return Err(Fail::err(format!(
                "--iceoryx2-peer {}: no such file",
                p.display()
            )))
        }
        None => {
            let p = exe.with_file_name("shoal-iceoryx2-peer");
            if p.is_file() {
                Ok(p)
            } else {
                Err(format!(
                    "not run: no {} (cargo build --release -p shoal-iceoryx2-peer)",
                    p.display()
                ))
            }
        }
    };
    let json = a.json;
    let say = |s: &str| {
        if json {
            eprintln!("{s}");
        } else {
            println!("{s}");
        }
    };
    crate::signal::catch_interrupts();
    let cpus = std::thread::available_parallelism().map_or(0, |c| c.get());
    let load0 = loadavg();
    let clock = clock_cost();
    let pinning = if a.no_pin {
        "not pinned".to_string()
    } else {
        format!("A pinned to cpu {}, B to cpu {}", a.cpus[0], a.cpus[1])
    };
    let rounds = if a.rounds > 1 {
        format!(" in {} interleaved rounds", a.rounds)
    } else {
        String::new()
    };
    say(&format!(
        "shoal bench queue: {cpus} cpus, load average {} before; each measure counts {} s{rounds}, each time after {} s of warm-up; {pinning}",
        load0.map_or("unknown".into(), |l| format!("{l:.2}")),
        a.secs,
        a.warmup
    ));
    say(&format!(
        "clock: CLOCK_MONOTONIC, {clock} ns a read (each one-way figure includes about one)"
    ));
    let mut ctx = Ctx {
        tag: format!("shoal-qbench-{}", std::process::id()),
        a: a.clone(),
        exe,
        peer,
        seq: 0,
    };
    let mut accs: Vec<Acc> = specs
        .into_iter()
        .map(|spec| Acc {
            spec,
            rates: Vec::new(),
            samples: Vec::new(),
            sleeps: None,
            errors: 0,
            stop: None,
        })
        .collect();
    for round in 1..=a.rounds {
        for acc in accs.iter_mut().filter(|x| x.stop.is_none()) {
            if crate::signal::interrupted() {
                return Err(Fail::err("interrupted"));
            }
            let r = ctx.measure(acc.spec);
            let what = match &r {
                Ok((Raw::Rate(x), _)) => format!("{}/s", human::rate(*x)),
                Ok((Raw::Samples { v, .. }, _)) => {
                    let mut v = v.clone();
                    v.sort_unstable();
                    match v.is_empty() {
                        true => "no samples".into(),
                        false => format!("p50 {} ns, p99 {} ns", pct(&v, 0.5), pct(&v, 0.99)),
                    }
                }
                Err(Outcome::NotRun(m)) => m.clone(),
                Err(o) => format!("FAILED: {o:?}"),
            };
            let round = if a.rounds > 1 {
                format!("[{round}/{}] ", a.rounds)
            } else {
                String::new()
            };
            say(&format!("  {round}{:<44} {what}", row_name(&acc.spec)));
            acc.add(r);
        }
    }
    let rows: Vec<Row> = accs.into_iter().map(Acc::finish).collect();
    let load1 = loadavg();
    let report = report(&rows, &a);
    let load_line = format!(
        "load average {} before, {} after, on {cpus} cpus",
        load0.map_or("?".into(), |l| format!("{l:.2}")),
        load1.map_or("?".into(), |l| format!("{l:.2}"))
    );
    if json {
        eprint!("\n{}{load_line}\n", report.text);
        let v = serde_json::json!({
            "cpus": cpus,
            "loadavg_before": load0,
            "loadavg_after": load1,
            "secs": a.secs,
            "warmup": a.warmup,
            "rounds": a.rounds,
            "elements": a.elements,
            "gap_us": a.gap_us,
            "pinned": !a.no_pin,
            "cpus_ab": a.cpus,
            "clock_read_ns": clock,
            "results": rows.iter().map(row_json).collect::<Vec<_>>(),
            "targets": report.targets,
        });
        println!("{v}");
    } else {
        print!("\n{}{load_line}\n", report.text);
    }
    let failed: Vec<String> = rows
        .iter()
        .filter_map(|r| match &r.outcome {
            Outcome::Failed(m) => Some(format!("{}: {m}", row_name(&r.spec))),
            _ => None,
        })
        .collect();
    if !failed.is_empty() {
        return Err(Fail::err(format!("failed: {}", failed.join("; "))));
    }
    let errors: u64 = rows.iter().map(|r| r.errors).sum();
    if errors > 0 {
        return Err(Fail::err(format!(
            "{errors} failed checks (see the ERRORS column)"
        )));
    }
    Ok(())
}

fn row_name(s: &Spec) -> String {
    match s.what {
        What::Latency(busy) => format!(
            "{} ({}, {} B)",
            s.label(),
            if busy { "busy" } else { "blocking" },
            s.size
        ),
        _ => format!("{} ({} B)", s.label(), s.size),
    }
}

fn row_json(r: &Row) -> serde_json::Value {
    let mut v = serde_json::json!({
        "measure": r.spec.key(),
        "label": r.spec.label(),
        "system": r.spec.sys.key(),
        "size": r.spec.size,
        "errors": r.errors,
    });
    match &r.outcome {
        Outcome::Rate(x) => v["per_sec"] = serde_json::json!(x),
        Outcome::Latency(l) => {
            v["latency_ns"] = serde_json::json!({
                "samples": l.n, "p50": l.p50, "p99": l.p99, "p99_9": l.p999,
                "max": l.max, "mean": l.mean, "receiver_sleeps_per_message": l.slept,
            })
        }
        Outcome::NotRun(m) => v["not_run"] = serde_json::json!(m),
        Outcome::Failed(m) => v["failed"] = serde_json::json!(m),
    }
    v
}

struct Report {
    text: String,
    targets: Vec<serde_json::Value>,
}

fn ratio(x: Option<f64>, y: Option<f64>) -> Option<f64> {
    match (x, y) {
        (Some(x), Some(y)) if y > 0.0 => Some(x / y),
        _ => None,
    }
}

fn fmt_ratio(r: Option<f64>) -> String {
    r.map_or("-".into(), |r| format!("{r:.2}x"))
}

fn report(rows: &[Row], a: &QueueArgs) -> Report {
    let rate = |f: &dyn Fn(&Spec) -> bool| {
        rows.iter().find_map(|r| match r.outcome {
            Outcome::Rate(x) if f(&r.spec) => Some(x),
            _ => None,
        })
    };
    let lat = |sys: Sys, busy: bool| {
        rows.iter().find_map(|r| match &r.outcome {
            Outcome::Latency(l) if r.spec.sys == sys && r.spec.what == What::Latency(busy) => {
                Some(l.clone())
            }
            _ => None,
        })
    };
    let errors = |r: &Row| {
        if r.errors > 0 {
            r.errors.to_string()
        } else {
            "ok".into()
        }
    };
    let mut text = String::new();

    let thr: Vec<&Row> = rows
        .iter()
        .filter(|r| !matches!(r.spec.what, What::Latency(_)))
        .collect();
    if !thr.is_empty() {
        let table: Vec<Vec<String>> = thr
            .iter()
            .map(|r| {
                let unit = match r.spec.what {
                    What::PingPong(_) => "moves/s",
                    What::OneWay => "elements/s",
                    _ => "samples/s",
                };
                let (fig, vs) = match &r.outcome {
                    Outcome::Rate(x) => {
                        let peer =
                            rate(&|s: &Spec| s.what == What::PubSub && s.size == r.spec.size);
                        let vs = if r.spec.sys == Sys::Shoal {
                            fmt_ratio(ratio(Some(*x), peer))
                        } else {
                            "1.00x".into()
                        };
                        (human::rate(*x), vs)
                    }
                    Outcome::NotRun(_) => ("not run".into(), "-".into()),
                    _ => ("FAILED".into(), "-".into()),
                };
                vec![
                    r.spec.label(),
                    human::size(r.spec.size as u64),
                    fig,
                    unit.into(),
                    vs,
                    errors(r),
                ]
            })
            .collect();
        text.push_str("Throughput between two processes\n");
        text.push_str(&human::table(
            &["MEASURE", "SIZE", "RATE", "UNIT", "VS ICEORYX2", "CHECKS"],
            &table,
            &[0, 3],
        ));
        text.push('\n');
    }

    let lats: Vec<&Row> = rows
        .iter()
        .filter(|r| matches!(r.spec.what, What::Latency(_)))
        .collect();
    if !lats.is_empty() {
        let table: Vec<Vec<String>> = lats
            .iter()
            .map(|r| {
                let What::Latency(busy) = r.spec.what else {
                    unreachable!()
                };
                let mode = if busy { "busy" } else { "blocking" }.to_string();
                match &r.outcome {
                    Outcome::Latency(l) => {
                        let ice = lat(Sys::Iceoryx2, busy).map(|x| x.p50 as f64);
                        let pipe = lat(Sys::Pipe, busy).map(|x| x.p99 as f64);
                        vec![
                            r.spec.label(),
                            mode,
                            human::count(l.n),
                            human::count(l.p50),
                            human::count(l.p99),
                            human::count(l.p999),
                            human::count(l.max),
                            l.slept.map_or("-".into(), |s| format!("{:.0}%", 100.0 * s)),
                            fmt_ratio(ratio(Some(l.p50 as f64), ice)),
                            fmt_ratio(ratio(Some(l.p99 as f64), pipe)),
                            errors(r),
                        ]
                    }
                    o => {
                        let what = if matches!(o, Outcome::NotRun(_)) {
                            "not run"
                        } else {
                            "FAILED"
                        };
                        let mut v = vec![r.spec.label(), mode, what.into()];
                        v.extend(std::iter::repeat_n("-".to_string(), 7));
                        v.push(errors(r));
                        v
                    }
                }
            })
            .collect();
        text.push_str("One-way latency between two processes, ns\n");
        text.push_str(&human::table(
            &[
                "MEASURE",
                "WAIT",
                "SAMPLES",
                "P50",
                "P99",
                "P99.9",
                "MAX",
                "B SLEPT",
                "P50/ICEORYX2",
                "P99/PIPE",
                "CHECKS",
            ],
            &table,
            &[0, 1],
        ));
        text.push('\n');
    }

    // The targets, each read off this run.
    let small = a.sizes.first().copied().unwrap_or(64);
    let ice64 = rate(&|s: &Spec| s.what == What::PubSub && s.size == small);
    let pp1 = rate(&|s: &Spec| s.what == What::PingPong(1) && s.size == small);
    let pp256 = rate(&|s: &Spec| s.what == What::PingPong(256) && s.size == small);
    let sb = lat(Sys::Shoal, false);
    let pb = lat(Sys::Pipe, false);
    let sp = lat(Sys::Shoal, true);
    let ip = lat(Sys::Iceoryx2, true);
    let targets: Vec<(String, Option<f64>, f64, bool)> = vec![
        (
            format!("unbatched ping-pong moves/s / iceoryx2 samples/s ({small} B) >= 1.0"),
            ratio(pp1, ice64),
            1.0,
            true,
        ),
        (
            format!("ping-pong in batches of 256 ({small} B), M moves/s >= 50"),
            pp256.map(|x| x / 1e6),
            50.0,
            true,
        ),
        (
            "blocking wake-up p99 / pipe's p99 <= 1.0".into(),
            ratio(sb.map(|l| l.p99 as f64), pb.map(|l| l.p99 as f64)),
            1.0,
            false,
        ),
        (
            "busy-polling p50 / iceoryx2's p50 <= 1.5".into(),
            ratio(sp.map(|l| l.p50 as f64), ip.map(|l| l.p50 as f64)),
            1.5,
            false,
        ),
    ];
    text.push_str("Targets\n");
    let mut tj = Vec::new();
    for (name, got, bound, at_least) in targets {
        let met = got.map(|g| if at_least { g >= bound } else { g <= bound });
        text.push_str(&format!(
            "  {name}: {}  {}\n",
            got.map_or("-".into(), |g| format!("{g:.3}")),
            match met {
                Some(true) => "met",
                Some(false) => "MISSED",
                None => "not measured",
            }
        ));
        tj.push(serde_json::json!({"target": name, "value": got, "met": met}));
    }
    Report { text, targets: tj }
}
