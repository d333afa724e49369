//! How long a process waits after the death of one that held what it waits for (the
//! engine's promise: no other process waits more than a bounded time, at most 50 ms after
//! the death). A measurement, not a test: it prints figures and asserts no timing.
//!
//!   cargo run --release -p shoal-torture --features failpoints --bin shoal-recovery -- [--deaths N] [--seed S]
//!
//! Each round starts a worker process (this binary, `--worker`) whose put of the key "hot"
//! sleeps at a fail point while it holds what others need:
//! - `write.locked`: the key's segment lock (a writer waits for it);
//! - `write.half_applied`: the key's bucket, its seq odd in the middle of the change (a
//!   reader waits for it; the dead writer's committed intent is rolled forward);
//! - `inplace.half_applied`: the same for a value overwritten in place (a put of the
//!   value's own length).
//!
//! Once the worker holds it, a thread of this process starts the operation that must wait
//! (a put or a get of "hot", with a 30 s deadline), and 5-25 ms later the worker is
//! SIGKILLed. The wait after the death runs from the moment `waitpid` returns (the process
//! is gone, so the kernel has dropped its file locks) to the moment the waiting operation
//! returns. Every waiting operation must succeed, and the store must check clean at the end.

use shoal::{Error, Store};
use std::process::{Child, Command, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

const POINTS: [(&str, Waiter); 3] = [
    ("write.locked", Waiter::Put),
    ("write.half_applied", Waiter::Get),
    ("inplace.half_applied", Waiter::Get),
];

#[derive(Clone, Copy)]
enum Waiter {
    Put,
    Get,
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    if args.get(1).map(String::as_str) == Some("--worker") {
        worker(&args[2], &args[3]);
        return;
    }
    let mut deaths = 100usize;
    let mut seed: u64 = rand::random();
    let mut it = args.iter().skip(1);
    while let Some(a) = it.next() {
        let mut value = || it.next().and_then(|v| v.parse().ok());
        match a.as_str() {
            "--deaths" => deaths = value().expect("--deaths N"),
            "--seed" => seed = value().expect("--seed S") as u64,
            other => {
                eprintln!(
                    "unknown argument {other}; usage: shoal-recovery [--deaths N] [--seed S]"
                );
                std::process::exit(2);
            }
        }
    }
    println!("shoal-recovery: {deaths} deaths per fail point, seed {seed}");
    let dir = tempfile_dir();
    let path = dir.join("recovery.shoal");
    let _ = Store::destroy(&path);
    let s = Store::open(&path).unwrap();
    let m = s.map("m").unwrap();
    m.put(b"hot", b"initial").unwrap();
    let mut x = seed | 1;
    let mut rnd = move |n: u64| {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        x % n
    };
    let mut failed = false;
    for (point, waiter) in POINTS {
        let mut waits = Vec::with_capacity(deaths);
        for round in 0..deaths {
            let mut w = spawn_worker(&path, point);
            wait_until_held(&m, waiter, &mut w, point);
            let (tx, rx) = mpsc::channel();
            let mw = m.with_timeout(Duration::from_secs(30));
            let waiting = std::thread::spawn(move || {
                let r = match waiter {
                    Waiter::Put => mw.put(b"hot", b"after").map(|_| ()),
                    Waiter::Get => mw.get(b"hot").map(|_| ()),
                };
                tx.send((r, Instant::now())).unwrap();
            });
            std::thread::sleep(Duration::from_millis(5 + rnd(21)));
            // SAFETY: a signal to our own child.
            unsafe { libc::kill(w.id() as i32, libc::SIGKILL) };
            w.wait().unwrap();
            let dead = Instant::now();
            let (r, done) = rx.recv().unwrap();
            waiting.join().unwrap();
            if let Err(e) = r {
                println!("{point}: round {round}: the waiting operation failed: {e}");
                failed = true;
                continue;
            }
            waits.push(done.saturating_duration_since(dead));
        }
        waits.sort();
        let ms = |d: Duration| d.as_secs_f64() * 1e3;
        let q = |p: f64| ms(waits[((waits.len() - 1) as f64 * p) as usize]);
        if !waits.is_empty() {
            println!(
                "{point:<20} {} deaths: wait after the death: median {:.2} ms, p90 {:.2} ms, p99 {:.2} ms, max {:.2} ms; over 50 ms: {}",
                waits.len(),
                q(0.5),
                q(0.9),
                q(0.99),
                ms(*waits.last().unwrap()),
                waits.iter().filter(|d| ms(**d) > 50.0).count()
            );
        }
    }
    let r = s.check().unwrap();
    println!(
        "check: {}",
        if r.is_ok() {
            "ok".to_string()
        } else {
            r.to_string()
        }
    );
    drop(m);
    drop(s);
    let _ = Store::destroy(&path);
    let _ = std::fs::remove_dir(&dir);
    if failed || !r.is_ok() {
        std::process::exit(1);
    }
}

/// The worker: one put of "hot", with FAILPOINTS making it sleep at the chosen step. The
/// value's length decides the path the put takes: its current length for an overwrite in
/// place (`inplace.*`), another length for a new record (`write.*`; a put of the same
/// length, as a dead worker's rolled-forward one left, would go in place and never reach
/// the point).
fn worker(path: &str, point: &str) {
    shoal::failpoints::setup();
    let s = Store::open_existing(path).unwrap();
    let m = s.open_map("m").unwrap();
    let now = m.get(b"hot").unwrap().unwrap_or_default();
    let len = if point.starts_with("inplace.") {
        now.len()
    } else if now.len() == 15 {
        16
    } else {
        15
    };
    // Other bytes than the current ones: a put of the bytes already there writes nothing.
    let byte = if now.first() == Some(&b'w') {
        b'x'
    } else {
        b'w'
    };
    m.put(b"hot", &vec![byte; len]).unwrap();
}

fn spawn_worker(path: &std::path::Path, point: &str) -> Child {
    Command::new(std::env::current_exe().unwrap())
        .arg("--worker")
        .arg(path)
        .arg(point)
        .env("FAILPOINTS", format!("{point}=1*sleep(600000)"))
        .stdout(Stdio::null())
        .spawn()
        .unwrap()
}

/// Waits (at most a minute) until an operation with a short deadline times out: the worker
/// holds the lock or the bucket.
fn wait_until_held(m: &shoal::Map, waiter: Waiter, w: &mut Child, point: &str) {
    let start = Instant::now();
    let probe = m.with_timeout(Duration::from_millis(20));
    loop {
        let r = match waiter {
            Waiter::Put => probe.put(b"hot", b"probe").map(|_| ()),
            Waiter::Get => probe.get(b"hot").map(|_| ()),
        };
        match r {
            Err(Error::Timeout(_)) => return,
            Ok(()) => {}
            Err(e) => panic!("{point}: unexpected error while probing: {e}"),
        }
        if let Ok(Some(status)) = w.try_wait() {
            panic!("{point}: the worker exited ({status}) before reaching its fail point");
        }
        assert!(
            start.elapsed() < Duration::from_secs(60),
            "{point}: the worker never reached its fail point"
        );
        std::thread::sleep(Duration::from_millis(2));
    }
}

fn tempfile_dir() -> std::path::PathBuf {
    let base = if std::path::Path::new("/dev/shm").is_dir() {
        std::path::PathBuf::from("/dev/shm")
    } else {
        std::env::temp_dir()
    };
    let d = base.join(format!("shoal-recovery-{}", std::process::id()));
    std::fs::create_dir_all(&d).unwrap();
    d
}
