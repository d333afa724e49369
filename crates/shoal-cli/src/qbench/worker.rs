//! The processes of `shoal bench queue` (the hidden `bench-queue-worker` subcommand): one
//! side, A or B, of one measure of Shoal's queues or of a kernel channel (pipe, eventfd,
//! Unix domain socket). The iceoryx2 roles are the same protocol in the
//! `shoal-iceoryx2-peer` binary (see the parent, `qbench/mod.rs`, for the protocol).

use super::host::{clock_ns, pin, voluntary_switches, Go};
use super::STOP;
use crate::fail::Fail;
use clap::Args;
use shoal::{Element, Queue, QueueSet, Store};
use std::os::fd::{FromRawFd, OwnedFd, RawFd};
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

/// How long a side waits for the other past the end before it gives up (the other died
/// or hangs; the parent reports it).
const STRAGGLE_NS: u64 = 10_000_000_000;

/// Says `ready` and waits for the parent's `go` (see [`super::host::ready_go`]).
fn ready_go() -> Result<Go, Fail> {
    Ok(super::host::ready_go()?)
}

/// Says what was measured, with `extra` (` key=value ...`).
fn done_with(count: u64, secs: f64, errors: u64, extra: &str) -> Result<(), Fail> {
    Ok(super::host::done(count, secs, errors, extra)?)
}

fn done(count: u64, secs: f64, errors: u64) -> Result<(), Fail> {
    done_with(count, secs, errors, "")
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
            // Each side keeps the two ends it uses (an eventfd is one descriptor for both);
            // the others close as `fds` drops.
            let (rd, wr) = if b { (fr, bw) } else { (br, fw) };
            let mut fds = adopt(&[fr, fw, br, bw])?;
            let mut take = |n| fds.remove(&n);
            let rd = take(rd).expect("adopted");
            let wr = take(wr);
            let ch = Chan {
                rd,
                wr,
                len: a.msg.max(8),
            };
            if a.busy {
                rustix::io::ioctl_fionbio(&ch.rd, true)
                    .map_err(|e| Fail::err(format!("non-blocking reads: {e}")))?;
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

/// Takes ownership of the descriptors the parent passed down (`--fds`), each once.
fn adopt(fds: &[RawFd]) -> Result<std::collections::HashMap<RawFd, OwnedFd>, Fail> {
    let mut owned = std::collections::HashMap::new();
    for &fd in fds {
        if owned.contains_key(&fd) {
            continue;
        }
        if fd < 3 || !std::path::Path::new(&format!("/proc/self/fd/{fd}")).exists() {
            return Err(Fail::err(format!(
                "--fds: {fd} is not an inherited descriptor"
            )));
        }
        // SAFETY: `fd` is open in this process (its /proc entry exists) and is not one of
        // the standard streams; it is one the parent created without close-on-exec for
        // this process to use, so nothing else here owns it, and it is adopted once.
        owned.insert(fd, unsafe { OwnedFd::from_raw_fd(fd) });
    }
    Ok(owned)
}

/// One direction each way of a kernel channel: messages of `len` bytes (an eventfd's are
/// its 8-byte counter), the send time in the first 8.
struct Chan {
    rd: OwnedFd,
    /// `None`: writes go to `rd` too (an eventfd).
    wr: Option<OwnedFd>,
    len: usize,
}

impl Chan {
    fn send(&self, t: u64) -> Result<(), Fail> {
        let mut buf = [0u8; 4096];
        let len = self.len.min(buf.len());
        buf[..8].copy_from_slice(&t.to_le_bytes());
        let wr = self.wr.as_ref().unwrap_or(&self.rd);
        let mut off = 0;
        while off < len {
            match rustix::io::write(wr, &buf[off..len]) {
                Ok(n) => off += n,
                Err(rustix::io::Errno::INTR) => {}
                Err(e) => return Err(Fail::err(format!("write: {e}"))),
            }
        }
        Ok(())
    }

    /// The next message's send time; polls a non-blocking descriptor when `busy`.
    fn recv(&self, go: &Go) -> Result<u64, Fail> {
        let mut buf = [0u8; 4096];
        let len = self.len.min(buf.len());
        let (mut off, mut polls) = (0, 0u32);
        while off < len {
            match rustix::io::read(&self.rd, &mut buf[off..len]) {
                Ok(0) => return Err(Fail::err("the other side closed its end")),
                Ok(n) => off += n,
                Err(rustix::io::Errno::INTR) => {}
                Err(rustix::io::Errno::AGAIN) => {
                    polls = polls.wrapping_add(1);
                    if polls % 1024 == 0 && clock_ns() > go.end + STRAGGLE_NS {
                        return Err(Fail::err("the other side stopped answering"));
                    }
                    std::hint::spin_loop();
                }
                Err(e) => return Err(Fail::err(format!("read: {e}"))),
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
