//! `shoal-crash`: the child process of the per-fail-point crash driver
//! (`tests/crash_points.rs`; the workload is `shoal_torture::crash`). Needs the
//! `failpoints` feature.
//!
//! ```text
//! shoal-crash run STORE LOG SEED KEYS OPS [POINT HIT]
//!     opens STORE (which has the maps "m" and "aux"), makes fail point POINT abort the
//!     process the HIT-th time it is reached, and runs the workload of (SEED, KEYS, OPS)
//!     on shoal_torture::crash::THREADS threads in turn, checking every result against
//!     the model; appends "A i" to LOG after op i returned, and "D" at the end.
//! shoal-crash census STORE LOG SEED KEYS OPS
//!     the same without a kill; prints "HITS POINT N" for every fail point at the end.
//! shoal-crash recover STORE POINT HIT
//!     makes POINT abort at its HIT-th hit, then opens STORE (which recovers the txns of
//!     dead processes) and reads every map; prints "HITS POINT N" for the recover points.
//! ```
//!
//! `SHOAL_CRASH_LIE=1` (fault injection, for testing the driver): each op is
//! acknowledged before it is run, so a crash in it leaves an acknowledged op undone,
//! which the driver must report.
//!
//! Exit status: 0 done (the kill point was not reached), 2 a result differed from the
//! model, 3 an engine error, 4 bad usage; SIGABRT is the kill.

use shoal::{OpenMode, Store};
use shoal_torture::crash::{self, Op, Out, Params, MAPS, THREADS};
use std::io::Write;
use std::process::exit;
use std::sync::mpsc;
use std::sync::Arc;

fn usage(msg: &str) -> ! {
    eprintln!("shoal-crash: {msg} (see the source for usage)");
    exit(4)
}

fn num(s: Option<&String>, what: &str) -> u64 {
    s.and_then(|s| s.parse().ok())
        .unwrap_or_else(|| usage(&format!("{what}: a number is needed")))
}

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    shoal::failpoints::setup();
    match args.first().map(|s| s.as_str()) {
        Some("run") | Some("census") => {
            let census = args[0] == "census";
            let store = args.get(1).unwrap_or_else(|| usage("STORE"));
            let log = args.get(2).unwrap_or_else(|| usage("LOG"));
            let p = Params {
                seed: num(args.get(3), "SEED"),
                keys: num(args.get(4), "KEYS") as usize,
                ops: num(args.get(5), "OPS") as usize,
            };
            let counters = if census {
                counters(shoal::failpoints::NAMES)
            } else {
                if let Some(point) = args.get(6) {
                    kill(point, num(args.get(7), "HIT"));
                }
                Vec::new()
            };
            run(store, log, &p);
            report(&counters);
        }
        Some("recover") => {
            let store = args.get(1).unwrap_or_else(|| usage("STORE"));
            let points = ["recover.claimed", "recover.replayed"];
            let c = counters(&points);
            // Configured after the counters: the kill replaces its point's counter.
            kill(
                args.get(2).unwrap_or_else(|| usage("POINT")),
                num(args.get(3), "HIT"),
            );
            let s = Store::open_with(store, &crash::store_options(), OpenMode::Open)
                .unwrap_or_else(|e| fail(3, &format!("open: {e}")));
            for name in MAPS {
                let m = s
                    .open_map(name)
                    .unwrap_or_else(|e| fail(3, &format!("open map {name}: {e}")));
                for item in m.iter() {
                    item.unwrap_or_else(|e| fail(3, &format!("iterate {name}: {e}")));
                }
            }
            report(&c);
        }
        _ => usage("run, census or recover"),
    }
}

fn fail(code: i32, msg: &str) -> ! {
    eprintln!("shoal-crash (pid {}): {msg}", std::process::id());
    exit(code)
}

fn kill(point: &str, hit: u64) {
    if !shoal::failpoints::NAMES.contains(&point) {
        usage(&format!("unknown fail point {point:?}"));
    }
    shoal::failpoints::kill_at(point, hit).unwrap_or_else(|e| usage(&e));
}

type Counters = Vec<(&'static str, Arc<std::sync::atomic::AtomicU64>)>;

fn counters(names: &[&'static str]) -> Counters {
    names
        .iter()
        .map(|n| {
            (
                *n,
                shoal::failpoints::counter(n).unwrap_or_else(|e| usage(&e)),
            )
        })
        .collect()
}

fn report(c: &Counters) {
    for (n, c) in c {
        println!("HITS {n} {}", c.load(std::sync::atomic::Ordering::SeqCst));
    }
}

/// Runs the workload: op i on thread i % THREADS, one op at a time.
fn run(store: &str, log: &str, p: &Params) {
    let ops = Arc::new(crash::generate(p));
    let mut log = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(log)
        .unwrap_or_else(|e| fail(3, &format!("log {log}: {e}")));
    let s = Store::open_with(store, &crash::store_options(), OpenMode::Open)
        .unwrap_or_else(|e| fail(3, &format!("open {store}: {e}")));
    let maps: Arc<Vec<shoal::Map>> = Arc::new(
        MAPS.iter()
            .map(|n| {
                s.open_map(n)
                    .unwrap_or_else(|e| fail(3, &format!("open map {n}: {e}")))
            })
            .collect(),
    );
    let (done_tx, done_rx) = mpsc::channel::<(usize, shoal::Result<Out>)>();
    let mut senders = Vec::new();
    let mut handles = Vec::new();
    for _ in 0..THREADS {
        let (tx, rx) = mpsc::channel::<usize>();
        senders.push(tx);
        let (ops, maps, s, done) = (ops.clone(), maps.clone(), s.clone(), done_tx.clone());
        handles.push(std::thread::spawn(move || {
            for i in rx {
                let r = crash::run(&s, &maps, &ops[i]);
                if done.send((i, r)).is_err() {
                    return;
                }
            }
        }));
    }
    let mut model = crash::Model::default();
    let lie = std::env::var_os("SHOAL_CRASH_LIE").is_some();
    let ack = |log: &mut std::fs::File, i: usize| {
        log.write_all(format!("A {i}\n").as_bytes())
            .unwrap_or_else(|e| fail(3, &format!("log: {e}")))
    };
    for i in 0..ops.len() {
        if lie {
            ack(&mut log, i);
        }
        senders[i % THREADS].send(i).expect("worker thread gone");
        let (j, r) = done_rx.recv().expect("worker thread gone");
        assert_eq!(i, j);
        let want = model.apply(&ops[i]);
        match r {
            Ok(got) if got == want => {}
            Ok(got) => fail(
                2,
                &format!(
                    "op {i} {}: returned {got:?}, the model says {want:?}",
                    brief(&ops[i])
                ),
            ),
            Err(e) => fail(3, &format!("op {i} {}: {e}", brief(&ops[i]))),
        }
        if !lie {
            ack(&mut log, i);
        }
    }
    drop(senders);
    for h in handles {
        h.join().expect("worker thread panicked");
    }
    log.write_all(b"D\n")
        .unwrap_or_else(|e| fail(3, &format!("log: {e}")));
}

fn brief(op: &Op) -> String {
    let s = format!("{op:?}");
    s.chars().take(120).collect()
}
