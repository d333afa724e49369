//! `shoal-iceoryx2-peer`: the iceoryx2 side of `shoal bench queue`, one process per run,
//! A or B of one measure. It is a binary of its own so that the `shoal` tool does not
//! build iceoryx2 (and need libclang for it); `shoal bench queue` starts it and speaks the
//! protocol described in `crates/shoal-cli/src/qbench/mod.rs`:
//!
//! - after its setup (services, ports, pinning) it says `ready` on stdout;
//! - it waits for `go START WARM END` on stdin (CLOCK_MONOTONIC ns);
//! - it says `done count=N secs=S errors=E` and exits (a latency receiver first writes its
//!   samples, little-endian u64 ns, to the file `--samples` names).
//!
//! Tests (`--test`):
//! - `pubsub`: A publishes `--size`-byte samples, writing a sequence number in the first 8
//!   bytes; B receives them, checks the numbers and counts samples/s. The subscriber
//!   buffers `--elements` samples and the publisher retries while it is full.
//! - `latency`: A sends a 64-byte sample with its send time, B notes its one-way latency
//!   and answers with a sample back; with `--busy` both poll `receive`, without it they
//!   sleep on an event listener that the sender notifies after each sample, and A waits
//!   `--gap-ns` after each answer so that B is asleep when the next sample comes. B also
//!   reports the messages it received and the times it slept (`msgs=`, `sleeps=`).

use host::{clock_ns, pin, ready_go, voluntary_switches, Go};
use iceoryx2::port::listener::Listener;
use iceoryx2::port::notifier::Notifier;
use iceoryx2::port::publisher::Publisher;
use iceoryx2::port::subscriber::Subscriber;
use iceoryx2::port::update_connections::UpdateConnections;
use iceoryx2::prelude::*;
use iceoryx2::service::port_factory::{event, publish_subscribe};
use std::error::Error;
use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;

// The children's side of the protocol, shared with the `shoal` tool's own children.
#[path = "../../shoal-cli/src/qbench/host.rs"]
mod host;

type Res<T> = Result<T, Box<dyn Error>>;

/// The send time that tells a latency receiver to stop.
const STOP: u64 = 1;

/// How long a side waits for the other past the end before it gives up.
const STRAGGLE_NS: u64 = 10_000_000_000;

#[derive(Debug, Default)]
struct Args {
    test: String,
    b: bool,
    cpu: i32,
    busy: bool,
    gap_ns: u64,
    service: String,
    size: usize,
    elements: usize,
    samples: Option<PathBuf>,
}

fn parse_args() -> Res<Args> {
    let mut a = Args {
        cpu: -1,
        size: 64,
        elements: 4096,
        ..Args::default()
    };
    let mut it = std::env::args().skip(1);
    while let Some(arg) = it.next() {
        let (k, v) = match arg.split_once('=') {
            Some((k, v)) => (k.to_string(), Some(v.to_string())),
            None => (arg.clone(), None),
        };
        if k == "--busy" {
            a.busy = true;
            continue;
        }
        let v = match v {
            Some(v) => v,
            None => it.next().ok_or_else(|| format!("{k} needs a value"))?,
        };
        match k.as_str() {
            "--test" => a.test = v,
            "--role" => {
                a.b = match v.as_str() {
                    "a" => false,
                    "b" => true,
                    r => return Err(format!("unknown role {r:?}").into()),
                }
            }
            "--cpu" => a.cpu = v.parse()?,
            "--gap-ns" => a.gap_ns = v.parse()?,
            "--service" => a.service = v,
            "--size" => a.size = v.parse()?,
            "--elements" => a.elements = v.parse()?,
            "--samples" => a.samples = Some(v.into()),
            _ => return Err(format!("unknown option {k}").into()),
        }
    }
    if a.service.is_empty() {
        return Err("--service is needed".into());
    }
    if a.size < 8 {
        return Err("--size is at least 8".into());
    }
    Ok(a)
}

fn main() -> ExitCode {
    set_log_level(LogLevel::Error);
    match parse_args().and_then(|a| run(&a)) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("shoal-iceoryx2-peer: {e}");
            ExitCode::FAILURE
        }
    }
}

fn run(a: &Args) -> Res<()> {
    pin(a.cpu)?;
    let node = NodeBuilder::new().create::<ipc::Service>()?;
    match a.test.as_str() {
        "pubsub" => pubsub(a, &node),
        "latency" => latency(a, &node),
        t => Err(format!("unknown test {t:?}").into()),
    }
}

fn done(count: u64, secs: f64, errors: u64) -> Res<()> {
    Ok(host::done(count, secs, errors, "")?)
}

/// Counts work between `warm` and `end`, looking at the clock once every `every` calls.
struct Meter {
    go: Go,
    every: u32,
    calls: u32,
    from: Option<(u64, u64)>,
}

impl Meter {
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

/// `open_or_create`, again while the other side is half way through creating the same
/// service (both sides start at once).
fn retry<T, E: std::fmt::Display>(mut f: impl FnMut() -> Result<T, E>) -> Res<T> {
    let t0 = clock_ns();
    loop {
        match f() {
            Ok(x) => return Ok(x),
            Err(e) if clock_ns() - t0 > 5_000_000_000 => return Err(e.to_string().into()),
            Err(_) => std::thread::sleep(Duration::from_millis(1)),
        }
    }
}

/// Waits (at most 5 s) until `both()`: the other side's port exists.
fn wait_for(what: &str, both: impl Fn() -> bool) -> Res<()> {
    let t0 = clock_ns();
    while !both() {
        if clock_ns() - t0 > 5_000_000_000 {
            return Err(format!("the other side's {what} did not appear within 5 s").into());
        }
        std::thread::sleep(Duration::from_millis(1));
    }
    Ok(())
}

type Data = publish_subscribe::PortFactory<ipc::Service, [u8], ()>;

/// Connects `port` to the other side's once that exists. A publisher whose subscriber has
/// not connected yet drops what does not fit its buffer (iceoryx2's
/// `NoConnectedReceiverAndBufferIsFull`), so both sides connect before they say ready.
fn connect_data(svc: &Data, port: &impl UpdateConnections) -> Res<()> {
    let dc = svc.dynamic_config();
    wait_for("port", || {
        dc.number_of_publishers() >= 1 && dc.number_of_subscribers() >= 1
    })?;
    port.update_connections()?;
    Ok(())
}

/// The same for an event service: a notification sent before the listener is known
/// wakes nobody.
fn connect_event(svc: &event::PortFactory<ipc::Service>, port: &impl UpdateConnections) -> Res<()> {
    let dc = svc.dynamic_config();
    wait_for("event port", || {
        dc.number_of_notifiers() >= 1 && dc.number_of_listeners() >= 1
    })?;
    port.update_connections()?;
    Ok(())
}

fn name(a: &Args, what: &str) -> Res<ServiceName> {
    Ok(ServiceName::new(&format!("{}/{what}", a.service))?)
}

/// Loans a sample, writes `v` in its first 8 bytes and sends it.
fn send(p: &Publisher<ipc::Service, [u8], ()>, size: usize, v: u64) -> Res<()> {
    let mut s = p.loan_slice_uninit(size)?;
    for (d, b) in s.payload_mut().iter_mut().zip(v.to_le_bytes()) {
        d.write(b);
    }
    // SAFETY: the payload lies in shared memory that the kernel zeroed when it was mapped
    // and earlier samples wrote: none of its bytes is uninitialized memory. Only the first
    // 8 are this sample's, as the benchmark's other systems touch only those.
    let s = unsafe { s.assume_init() };
    s.send()?;
    Ok(())
}

/// The first 8 bytes of the next sample, if one is there.
fn recv(s: &Subscriber<ipc::Service, [u8], ()>) -> Res<Option<u64>> {
    Ok(s.receive()?.map(|x| {
        let mut b = [0u8; 8];
        b.copy_from_slice(&x.payload()[..8]);
        u64::from_le_bytes(b)
    }))
}

fn pubsub(a: &Args, node: &Node<ipc::Service>) -> Res<()> {
    let svc = retry(|| {
        node.service_builder(&name(a, "data")?)
            .publish_subscribe::<[u8]>()
            .max_publishers(1)
            .max_subscribers(1)
            .history_size(0)
            .subscriber_max_buffer_size(a.elements)
            .enable_safe_overflow(false)
            .open_or_create()
            .map_err(|e| -> Box<dyn Error> { format!("{e:?}").into() })
    })?;
    if !a.b {
        let p = svc
            .publisher_builder()
            .initial_max_slice_len(a.size)
            .backpressure_strategy(BackpressureStrategy::RetryUntilDelivered)
            .create()?;
        connect_data(&svc, &p)?;
        let mut m = Meter {
            go: ready_go()?,
            every: 16,
            calls: 0,
            from: None,
        };
        let mut sent = 0u64;
        loop {
            send(&p, a.size, sent + 2)?;
            sent += 1;
            if let Some((n, secs)) = m.tick(sent) {
                send(&p, a.size, STOP)?;
                return done(n, secs, 0);
            }
        }
    }
    let s = svc.subscriber_builder().create()?;
    connect_data(&svc, &s)?;
    let go = ready_go()?;
    let end = go.end;
    let mut m = Meter {
        go,
        every: 16,
        calls: 0,
        from: None,
    };
    let (mut got, mut next, mut errors) = (0u64, 2u64, 0u64);
    let mut result = None;
    loop {
        if let Some(v) = recv(&s)? {
            if v == STOP {
                let (n, secs) = result.unwrap_or((got, 0.0));
                return done(n, secs, errors);
            }
            errors += (v != next) as u64;
            next = v + 1;
            got += 1;
        }
        if result.is_none() {
            result = m.tick(got);
        } else if clock_ns() > end + STRAGGLE_NS {
            return Err("A stopped sending".into());
        }
    }
}

/// One direction of the latency measure: a publisher and, when the receiver sleeps, the
/// notifier that wakes it.
struct Out {
    p: Publisher<ipc::Service, [u8], ()>,
    n: Option<Notifier<ipc::Service>>,
}

struct In {
    s: Subscriber<ipc::Service, [u8], ()>,
    l: Option<Listener<ipc::Service>>,
}

impl Out {
    fn send(&self, v: u64) -> Res<()> {
        send(&self.p, 64, v)?;
        if let Some(n) = &self.n {
            n.notify()?;
        }
        Ok(())
    }
}

impl In {
    /// The next sample's first word, polling or sleeping on the listener.
    fn recv(&self, go: &Go) -> Res<u64> {
        let mut polls = 0u32;
        loop {
            if let Some(v) = recv(&self.s)? {
                return Ok(v);
            }
            if let Some(l) = &self.l {
                l.timed_wait(|_| {}, Duration::from_millis(100))?;
            }
            polls = polls.wrapping_add(1);
            if (self.l.is_some() || polls.is_multiple_of(1024)) && clock_ns() > go.end + STRAGGLE_NS
            {
                return Err("the other side stopped answering".into());
            }
        }
    }
}

fn latency(a: &Args, node: &Node<ipc::Service>) -> Res<()> {
    let data = |what: &str| {
        let n = name(a, what)?;
        retry(|| {
            node.service_builder(&n)
                .publish_subscribe::<[u8]>()
                .max_publishers(1)
                .max_subscribers(1)
                .history_size(0)
                .subscriber_max_buffer_size(1)
                .enable_safe_overflow(true)
                .open_or_create()
                .map_err(|e| -> Box<dyn Error> { format!("{e:?}").into() })
        })
    };
    let event = |what: &str| {
        let n = name(a, what)?;
        retry(|| {
            node.service_builder(&n)
                .event()
                .max_notifiers(1)
                .max_listeners(1)
                .open_or_create()
                .map_err(|e| -> Box<dyn Error> { format!("{e:?}").into() })
        })
    };
    let (fwd, back) = (data("fwd")?, data("back")?);
    let (to, from) = if a.b { (&back, &fwd) } else { (&fwd, &back) };
    let out = Out {
        p: to.publisher_builder().initial_max_slice_len(64).create()?,
        n: None,
    };
    let inp = In {
        s: from.subscriber_builder().create()?,
        l: None,
    };
    connect_data(to, &out.p)?;
    connect_data(from, &inp.s)?;
    let (out, inp) = if a.busy {
        (out, inp)
    } else {
        let (fe, be) = (event("fwd-ev")?, event("back-ev")?);
        let (te, fe) = if a.b { (be, fe) } else { (fe, be) };
        let n = te.notifier_builder().create()?;
        let l = fe.listener_builder().create()?;
        connect_event(&te, &n)?;
        (Out { n: Some(n), ..out }, In { l: Some(l), ..inp })
    };
    let go = ready_go()?;
    if !a.b {
        let mut sent = 0u64;
        loop {
            let now = clock_ns();
            if now >= go.end {
                out.send(STOP)?;
                return done(sent, (go.end - go.warm) as f64 / 1e9, 0);
            }
            out.send(now)?;
            sent += 1;
            inp.recv(&go)?;
            if a.gap_ns > 0 {
                let until = clock_ns() + a.gap_ns;
                while clock_ns() < until {
                    std::hint::spin_loop();
                }
            }
        }
    }
    let mut v = Vec::with_capacity(1 << 20);
    let (mut errors, mut msgs, switches) = (0u64, 0u64, voluntary_switches());
    loop {
        let t0 = inp.recv(&go)?;
        let t1 = clock_ns();
        if t0 == STOP {
            break;
        }
        msgs += 1;
        if t0 >= go.warm {
            match t1.checked_sub(t0) {
                Some(d) => v.push(d),
                None => errors += 1,
            }
        }
        out.send(t0)?;
    }
    let path = a.samples.as_ref().ok_or("--samples is needed")?;
    let bytes: Vec<u8> = v.iter().flat_map(|x: &u64| x.to_le_bytes()).collect();
    std::fs::write(path, bytes)?;
    let sleeps = voluntary_switches() - switches;
    let extra = format!(" msgs={msgs} sleeps={sleeps}");
    Ok(host::done(v.len() as u64, 0.0, errors, &extra)?)
}
