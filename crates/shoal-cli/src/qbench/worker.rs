//! The processes of `shoal bench queue` (the hidden `bench-queue-worker` subcommand): one
//! side, A or B, of one measure of Shoal's queues or of a kernel channel (pipe, eventfd,
//! Unix domain socket). The iceoryx2 roles are the same protocol in the
//! `shoal-iceoryx2-peer` binary (see the parent, `qbench/mod.rs`, for the protocol).

use super::{clock_ns, STOP};
use crate::fail::Fail;
use clap::Args;
use shoal::{Element, Queue, QueueSet, Store};
use std::io::{BufRead, Write};
use std::os::fd::RawFd;
use std::path::PathBuf;
use std::sync::atomic::Ordering::Relaxed;
use std::time::Duration;

/// Options of the hidden `bench-queue-worker` subcommand.
#[derive(Args, Debug, Clone)]
pub struct WorkerArgs {
    /// shoal-pingpong, shoal-oneway, shoal-latency or kernel-latency
    #[arg(long)]
    test: String,
    /// a or b
    #[arg(long)]
    role: String,
    /// The CPU to pin this process to (-1: none)
    #[arg(long, allow_hyphen_values = true)]
    cpu: i32,
    /// Elements per pull or push (Shoal throughput)
    #[arg(long, default_value_t = 1)]
    batch: usize,
    /// Wait for a message by polling instead of sleeping (latency)
    #[arg(long)]
    busy: bool,
    /// Nanoseconds A waits after an answer before the next message (blocking latency)
    #[arg(long, default_value_t = 0)]
    gap_ns: u64,
    /// The store holding the queue set `bench`
    #[arg(long)]
    store: Option<PathBuf>,
    /// Bytes per kernel message
    #[arg(long, default_value_t = 64)]
    msg: usize,
    /// The kernel channel's descriptors: forward read, forward write, back read, back
    /// write (inherited from the parent)
    #[arg(long, value_delimiter = ',')]
    fds: Vec<RawFd>,
    /// Where B writes its latency samples (little-endian u64 nanoseconds)
    #[arg(long)]
    samples: Option<PathBuf>,
}

/// The times the parent's `go` line gives (CLOCK_MONOTONIC ns) past its start: measure
/// from, stop at.
#[derive(Clone, Copy, Debug)]
pub struct Go {
    pub warm: u64,
    pub end: u64,
}

/// How long a side waits for the other past the end before it gives up (the other died
/// or hangs; the parent reports it).
const STRAGGLE_NS: u64 = 10_000_000_000;

/// Pins the calling process to `cpu` (a negative one: leaves it where it is).
pub fn pin(cpu: i32) -> Result<(), Fail> {
    if cpu < 0 {
        return Ok(());
    }
    // SAFETY: a zeroed cpu_set_t is an empty set; CPU_SET writes inside it.
    let mut set: libc::cpu_set_t = unsafe { std::mem::zeroed() };
    // SAFETY: `set` is a valid cpu_set_t and `cpu` is checked against its size.
    unsafe {
        if cpu as usize >= libc::CPU_SETSIZE as usize {
            return Err(Fail::err(format!("cpu {cpu} out of range")));
        }
        libc::CPU_SET(cpu as usize, &mut set)
    };
    // SAFETY: pid 0 is this process; the set is a valid cpu_set_t of the size given.
    let rc = unsafe { libc::sched_setaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &set) };
    if rc != 0 {
        return Err(Fail::err(format!(
            "cannot pin to cpu {cpu}: {}",
            std::io::Error::last_os_error()
        )));
    }
    Ok(())
}

/// Says `ready` and waits for the parent's `go START WARM END`.
fn ready_go() -> Result<Go, Fail> {
    let mut out = std::io::stdout().lock();
    writeln!(out, "ready")?;
    out.flush()?;
    let mut line = String::new();
    std::io::stdin().lock().read_line(&mut line)?;
    let f: Vec<u64> = line
        .strip_prefix("go ")
        .ok_or_else(|| Fail::err(format!("expected `go`, got {line:?}")))?
        .split_ascii_whitespace()
        .map(|x| x.parse::<u64>())
        .collect::<Result<_, _>>()
        .map_err(|e| Fail::err(format!("bad `go` line {line:?}: {e}")))?;
    let [start, warm, end] = f[..] else {
        return Err(Fail::err(format!("bad `go` line {line:?}")));
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

/// Says what was measured: `done count=N secs=S errors=E`, and `extra` (`key=value ...`).
fn done_with(count: u64, secs: f64, errors: u64, extra: &str) -> Result<(), Fail> {
    let mut out = std::io::stdout().lock();
    writeln!(
        out,
        "done count={count} secs={secs:.9} errors={errors}{extra}"
    )?;
    out.flush()?;
    Ok(())
}

fn done(count: u64, secs: f64, errors: u64) -> Result<(), Fail> {
    done_with(count, secs, errors, "")
}

/// Times the calling thread gave up its cpu to wait (a sleep in a blocking read or a
/// futex): whether a receiver really slept before each message.
pub fn voluntary_switches() -> u64 {
    // SAFETY: an all-zero rusage is valid.
    let mut ru: libc::rusage = unsafe { std::mem::zeroed() };
    // SAFETY: a valid `who` and a pointer to a live rusage.
    unsafe { libc::getrusage(libc::RUSAGE_THREAD, &mut ru) };
    ru.ru_nvcsw as u64
}

/// Counts work between `warm` and `end`, looking at the clock once every `every` calls.
struct Meter {
    go: Go,
    every: u32,
    calls: u32,
    /// (count, time) when the clock first passed `warm`.
    from: Option<(u64, u64)>,
}

impl Meter {
    fn new(go: Go, every: u32) -> Meter {
        Meter {
            go,
            every,
            calls: 0,
            from: None,
        }
    }

    /// Whether the run is over; then `result` has the figures.
    #[inline]
    fn tick(&mut self, count: u64) -> Option<(u64, f64)> {
        self.calls += 1;
        if self.calls < self.every {
            return None;
        }
        self.calls = 0;
        let now = clock_ns();
        if self.from.is_none() && now >= self.go.warm {
            self.from = Some((count, now));
        }
        if now < self.go.end {
            return None;
        }
        let (c0, t0) = self.from.unwrap_or((count, now));
        Some((count - c0, (now - t0) as f64 / 1e9))
    }
}

/// The hidden `bench-queue-worker` subcommand.
pub fn worker(a: WorkerArgs) -> Result<(), Fail> {
    pin(a.cpu)?;
    let b = match a.role.as_str() {
        "a" => false,
        "b" => true,
        r => return Err(Fail::err(format!("unknown role {r:?}"))),
    };
    match a.test.as_str() {
        "shoal-pingpong" | "shoal-oneway" | "shoal-latency" => {
            let path = a
                .store
                .as_ref()
                .ok_or_else(|| Fail::err("--store is needed"))?;
            let store = Store::open_existing(path)?;
            let set = store.open_queue_set("bench")?;
            let q = Queues {
                free: set.queue("free")?,
                a2b: set.queue("a2b")?,
                b2a: set.queue("b2a")?,
            };
            match (a.test.as_str(), b) {
                ("shoal-pingpong", false) => pingpong_a(&set, q, a.batch),
                ("shoal-pingpong", true) => pingpong_b(&set, q, a.batch),
                ("shoal-oneway", false) => oneway_a(&set, q, a.batch),
                ("shoal-oneway", true) => oneway_b(&set, q, a.batch),
                (_, false) => shoal_latency_a(&set, q, a.busy, a.gap_ns),
                (_, true) => shoal_latency_b(&set, q, a.busy, &a),
            }
        }
        "kernel-latency" => {
            let [fr, fw, br, bw] = a.fds[..] else {
                return Err(Fail::err("--fds needs four descriptors"));
            };
            // Each side keeps the two ends it uses (an eventfd is one descriptor for both).
            let (rd, wr) = if b { (fr, bw) } else { (br, fw) };
            for fd in [fr, fw, br, bw] {
                if fd != rd && fd != wr {
                    // SAFETY: an inherited descriptor this process does not use.
                    unsafe { libc::close(fd) };
                }
            }
            let ch = Chan {
                rd,
                wr,
                len: a.msg.max(8),
            };
            if a.busy {
                set_nonblocking(rd)?;
            }
            if b {
                kernel_latency_b(&ch, &a)
            } else {
                kernel_latency_a(&ch, a.gap_ns)
            }
        }
        t => Err(Fail::err(format!("unknown test {t:?}"))),
    }
}

#[derive(Clone, Copy)]
struct Queues {
    free: Queue,
    a2b: Queue,
    b2a: Queue,
}

/// A's half of the ping-pong: free → a2b (writing a sequence number, even) and b2a → free
/// (checking that B made it odd).
fn pingpong_a(set: &QueueSet, q: Queues, batch: usize) -> Result<(), Fail> {
    let go = ready_go()?;
    let mut m = Meter::new(go, if batch == 1 { 16 } else { 1 });
    let (mut moves, mut seq, mut errors) = (0u64, 0u64, 0u64);
    let put = |e: &Element<'_>, seq: &mut u64| {
        e.words()[0].store(*seq, Relaxed);
        *seq += 2;
    };
    let check = |e: &Element<'_>| (e.words()[0].load(Relaxed) & 1 == 0) as u64;
    loop {
        if batch == 1 {
            if let Some(e) = set.pull(q.free)? {
                put(&e, &mut seq);
                set.push(q.a2b, e)?;
                moves += 1;
            }
            if let Some(e) = set.pull(q.b2a)? {
                errors += check(&e);
                set.push(q.free, e)?;
                moves += 1;
            }
        } else {
            let v = set.pull_many(q.free, batch)?;
            if !v.is_empty() {
                moves += v.len() as u64;
                for e in &v {
                    put(e, &mut seq);
                }
                set.push_many(q.a2b, v)?;
            }
            let v = set.pull_many(q.b2a, batch)?;
            if !v.is_empty() {
                moves += v.len() as u64;
                for e in &v {
                    errors += check(e);
                }
                set.push_many(q.free, v)?;
            }
        }
        if let Some((n, secs)) = m.tick(moves) {
            return done(n, secs, errors);
        }
    }
}

/// B's half of the ping-pong: a2b → b2a, adding one to the element's first word.
fn pingpong_b(set: &QueueSet, q: Queues, batch: usize) -> Result<(), Fail> {
    let go = ready_go()?;
    let mut m = Meter::new(go, if batch == 1 { 16 } else { 1 });
    let mut moves = 0u64;
    let bump = |e: &Element<'_>| {
        let w = &e.words()[0];
        w.store(w.load(Relaxed) + 1, Relaxed);
    };
    loop {
        if batch == 1 {
            if let Some(e) = set.pull(q.a2b)? {
                bump(&e);
                set.push(q.b2a, e)?;
                moves += 1;
            }
        } else {
            let v = set.pull_many(q.a2b, batch)?;
            if !v.is_empty() {
                moves += v.len() as u64;
                for e in &v {
                    bump(e);
                }
                set.push_many(q.b2a, v)?;
            }
        }
        if let Some((n, secs)) = m.tick(moves) {
            return done(n, secs, 0);
        }
    }
}

/// A's half of the one-way stream: free → a2b, writing a sequence number.
fn oneway_a(set: &QueueSet, q: Queues, batch: usize) -> Result<(), Fail> {
    let go = ready_go()?;
    let mut m = Meter::new(go, if batch == 1 { 16 } else { 1 });
    let (mut sent, mut seq) = (0u64, 1u64);
    loop {
        if batch == 1 {
            if let Some(e) = set.pull(q.free)? {
                e.words()[0].store(seq, Relaxed);
                seq += 1;
                set.push(q.a2b, e)?;
                sent += 1;
            }
        } else {
            let v = set.pull_many(q.free, batch)?;
            if !v.is_empty() {
                sent += v.len() as u64;
                for e in &v {
                    e.words()[0].store(seq, Relaxed);
                    seq += 1;
                }
                set.push_many(q.a2b, v)?;
            }
        }
        if let Some((n, secs)) = m.tick(sent) {
            return done(n, secs, 0);
        }
    }
}

/// B's half of the one-way stream: a2b → free, checking that the sequence numbers come
/// in order.
fn oneway_b(set: &QueueSet, q: Queues, batch: usize) -> Result<(), Fail> {
    let go = ready_go()?;
    let mut m = Meter::new(go, if batch == 1 { 16 } else { 1 });
    let (mut got, mut next, mut errors) = (0u64, 1u64, 0u64);
    let check = |e: &Element<'_>, next: &mut u64| {
        let bad = (e.words()[0].load(Relaxed) != *next) as u64;
        *next += 1;
        bad
    };
    loop {
        if batch == 1 {
            if let Some(e) = set.pull(q.a2b)? {
                errors += check(&e, &mut next);
                set.push(q.free, e)?;
                got += 1;
            }
        } else {
            let v = set.pull_many(q.a2b, batch)?;
            if !v.is_empty() {
                got += v.len() as u64;
                for e in &v {
                    errors += check(e, &mut next);
                }
                set.push_many(q.free, v)?;
            }
        }
        if let Some((n, secs)) = m.tick(got) {
            return done(n, secs, errors);
        }
    }
}

/// Takes the head of `from`, polling or sleeping; fails once the other side is overdue.
fn wait_pull<'a>(set: &'a QueueSet, from: Queue, busy: bool, go: &Go) -> Result<Element<'a>, Fail> {
    let mut polls = 0u32;
    loop {
        let got = if busy {
            set.pull(from)?
        } else {
            set.pull_wait(from, Duration::from_millis(100))?
        };
        if let Some(e) = got {
            return Ok(e);
        }
        polls = polls.wrapping_add(1);
        if (!busy || polls % 1024 == 0) && clock_ns() > go.end + STRAGGLE_NS {
            return Err(Fail::err("the other side stopped answering"));
        }
    }
}

/// Busy-waits `ns` nanoseconds: the sender stays on its cpu, so the time measured is the
/// receiver's wake-up, not the sender's.
fn pause_ns(ns: u64) {
    if ns == 0 {
        return;
    }
    let until = clock_ns() + ns;
    while clock_ns() < until {
        std::hint::spin_loop();
    }
}

/// A's side of one-way latency through Shoal: one element goes a2b with the send time in
/// its first word, B takes it and sends it back through b2a; A waits for it, then (when
/// B sleeps to wait) lets B fall asleep before the next one.
fn shoal_latency_a(set: &QueueSet, q: Queues, busy: bool, gap_ns: u64) -> Result<(), Fail> {
    let mut e = set
        .pull(q.free)?
        .ok_or_else(|| Fail::err("no free element"))?;
    let go = ready_go()?;
    let mut sent = 0u64;
    loop {
        let now = clock_ns();
        if now >= go.end {
            e.words()[0].store(STOP, Relaxed);
            set.push(q.a2b, e)?;
            return done(sent, (go.end - go.warm) as f64 / 1e9, 0);
        }
        e.words()[0].store(now, Relaxed);
        set.push(q.a2b, e)?;
        sent += 1;
        e = wait_pull(set, q.b2a, busy, &go)?;
        pause_ns(gap_ns);
    }
}

/// B's side: takes each element from a2b, notes now − its send time, sends it back.
fn shoal_latency_b(set: &QueueSet, q: Queues, busy: bool, a: &WorkerArgs) -> Result<(), Fail> {
    let go = ready_go()?;
    let mut lat = Samples::new(&go);
    loop {
        let e = wait_pull(set, q.a2b, busy, &go)?;
        let t1 = clock_ns();
        let t0 = e.words()[0].load(Relaxed);
        if t0 == STOP {
            set.push(q.free, e)?;
            return lat.finish(a);
        }
        lat.add(t0, t1);
        set.push(q.b2a, e)?;
    }
}

/// One-way latencies, kept from `warm` on, and how many of the messages (warm-up
/// included) found the receiver asleep.
struct Samples {
    warm: u64,
    v: Vec<u64>,
    errors: u64,
    msgs: u64,
    switches: u64,
}

impl Samples {
    fn new(go: &Go) -> Samples {
        Samples {
            warm: go.warm,
            v: Vec::with_capacity(1 << 20),
            errors: 0,
            msgs: 0,
            switches: voluntary_switches(),
        }
    }

    #[inline]
    fn add(&mut self, sent: u64, got: u64) {
        self.msgs += 1;
        if sent >= self.warm {
            match got.checked_sub(sent) {
                Some(d) => self.v.push(d),
                None => self.errors += 1,
            }
        }
    }

    /// Writes the samples where the parent said and reports their count.
    fn finish(self, a: &WorkerArgs) -> Result<(), Fail> {
        let path = a
            .samples
            .as_ref()
            .ok_or_else(|| Fail::err("--samples is needed"))?;
        let bytes: Vec<u8> = self.v.iter().flat_map(|x| x.to_le_bytes()).collect();
        std::fs::write(path, bytes)?;
        let sleeps = voluntary_switches() - self.switches;
        let extra = format!(" msgs={} sleeps={sleeps}", self.msgs);
        done_with(self.v.len() as u64, 0.0, self.errors, &extra)
    }
}

/// One direction each way of a kernel channel: messages of `len` bytes (an eventfd's are
/// its 8-byte counter), the send time in the first 8.
struct Chan {
    rd: RawFd,
    wr: RawFd,
    len: usize,
}

fn set_nonblocking(fd: RawFd) -> Result<(), Fail> {
    // SAFETY: fcntl on a descriptor this process owns; no pointers.
    let fl = unsafe { libc::fcntl(fd, libc::F_GETFL) };
    // SAFETY: as above.
    if fl < 0 || unsafe { libc::fcntl(fd, libc::F_SETFL, fl | libc::O_NONBLOCK) } < 0 {
        return Err(Fail::err(format!(
            "fcntl on descriptor {fd}: {}",
            std::io::Error::last_os_error()
        )));
    }
    Ok(())
}

impl Chan {
    fn send(&self, t: u64) -> Result<(), Fail> {
        let mut buf = [0u8; 4096];
        let len = self.len.min(buf.len());
        buf[..8].copy_from_slice(&t.to_le_bytes());
        let mut off = 0;
        while off < len {
            // SAFETY: writes from a live buffer of at least `len` bytes.
            let n = unsafe { libc::write(self.wr, buf[off..].as_ptr().cast(), len - off) };
            if n < 0 {
                let e = std::io::Error::last_os_error();
                if e.kind() == std::io::ErrorKind::Interrupted {
                    continue;
                }
                return Err(Fail::err(format!("write: {e}")));
            }
            off += n as usize;
        }
        Ok(())
    }

    /// The next message's send time; polls a non-blocking descriptor when `busy`.
    fn recv(&self, go: &Go) -> Result<u64, Fail> {
        let mut buf = [0u8; 4096];
        let len = self.len.min(buf.len());
        let (mut off, mut polls) = (0, 0u32);
        while off < len {
            // SAFETY: reads into a live buffer of at least `len` bytes.
            let n = unsafe { libc::read(self.rd, buf[off..].as_mut_ptr().cast(), len - off) };
            if n > 0 {
                off += n as usize;
                continue;
            }
            if n == 0 {
                return Err(Fail::err("the other side closed its end"));
            }
            let e = std::io::Error::last_os_error();
            match e.kind() {
                std::io::ErrorKind::Interrupted => {}
                std::io::ErrorKind::WouldBlock => {
                    polls = polls.wrapping_add(1);
                    if polls % 1024 == 0 && clock_ns() > go.end + STRAGGLE_NS {
                        return Err(Fail::err("the other side stopped answering"));
                    }
                    std::hint::spin_loop();
                }
                _ => return Err(Fail::err(format!("read: {e}"))),
            }
        }
        Ok(u64::from_le_bytes(buf[..8].try_into().expect("8 bytes")))
    }
}

fn kernel_latency_a(ch: &Chan, gap_ns: u64) -> Result<(), Fail> {
    let go = ready_go()?;
    let mut sent = 0u64;
    loop {
        let now = clock_ns();
        if now >= go.end {
            ch.send(STOP)?;
            return done(sent, (go.end - go.warm) as f64 / 1e9, 0);
        }
        ch.send(now)?;
        sent += 1;
        ch.recv(&go)?;
        pause_ns(gap_ns);
    }
}

fn kernel_latency_b(ch: &Chan, a: &WorkerArgs) -> Result<(), Fail> {
    let go = ready_go()?;
    let mut lat = Samples::new(&go);
    loop {
        let t0 = ch.recv(&go)?;
        let t1 = clock_ns();
        if t0 == STOP {
            return lat.finish(a);
        }
        lat.add(t0, t1);
        ch.send(t0)?;
    }
}
