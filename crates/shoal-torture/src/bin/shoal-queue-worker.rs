//! `shoal-queue-worker`: one process of the queue kill storm (`tests/queue_storm.rs`).
//! Opens an existing store whose queue set `jobs` has the queues `free`, `work` and
//! `done`, and moves elements until the `--stop` file appears.
//!
//! ```text
//! shoal-queue-worker STORE ROLE --id N --gen N --seed N --stop FILE --log FILE
//!                    [--lin 1] [--pause-us N]
//!
//! roles:
//!   producer   pulls free elements (one, or a batch), writes a message into each, pushes
//!              them to work
//!   consumer   pulls from work (sometimes holding a few elements a while), reads and
//!              checks each message, pushes it to done
//!   recycler   moves done elements back to free (move_to, or pull and push)
//! ```
//!
//! A message is 32 bytes: magic, producer id, generation, sequence number. The log has a
//! line per event, each written with one write(2) after the event:
//! `P id gen seq` a message was pushed to work (acknowledged); `C id gen seq R` a consumer
//! read it (R = 1 if the element came back redelivered). A message read with a bad magic
//! is exit status 2; any engine error other than a full queue, exit status 3.
//!
//! With `--lin 1`, the worker also logs every push into and every pull from `work` and
//! `done`, with its invocation and response times (CLOCK_MONOTONIC), to LOG with the
//! extension `qlin`, for the Porcupine check (`lincheck -queues`, whose `queue.go` gives
//! the format); it then never moves elements with `move_to` (a move's elements are not
//! reported), so those histories are complete. `--pause-us N` sleeps a random 0..N µs
//! before each step, which keeps those histories short enough to check.

use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use shoal::{Element, Error, QueueSet, Store};
use shoal_torture::harness::WorkerArgs;
use std::io::Write;
use std::time::Duration;

const MAGIC: u64 = 0x5155_4555_4d53_4721;

struct Args {
    w: WorkerArgs,
    lin: bool,
    pause_us: u64,
}

fn args() -> Args {
    let all: Vec<String> = std::env::args().skip(1).collect();
    let w = WorkerArgs::parse(&all, &["--lin", "--pause-us"]);
    Args {
        lin: w.num("--lin", 0) == 1,
        pause_us: w.num("--pause-us", 0),
        w,
    }
}

fn fail(code: i32, what: String) -> ! {
    eprintln!("{what}");
    std::process::exit(code);
}

fn ok<T>(r: shoal::Result<T>, what: &str) -> T {
    r.unwrap_or_else(|e| fail(3, format!("{what}: {e}")))
}

/// The log, each line one write(2), so a kill leaves whole lines only.
struct Log(std::fs::File);

impl Log {
    fn line(&mut self, s: String) {
        self.0
            .write_all(s.as_bytes())
            .unwrap_or_else(|e| fail(3, format!("log: {e}")));
    }
}

/// The Porcupine log of `--lin` (nothing without it).
struct Lin(Option<std::fs::File>);

impl Lin {
    fn call(&mut self, what: String) {
        if let Some(f) = &mut self.0 {
            let line = format!("C {} {what}\n", shoal_torture::now_ns());
            f.write_all(line.as_bytes())
                .unwrap_or_else(|e| fail(3, format!("lin log: {e}")));
        }
    }
    fn ret(&mut self, what: &str) {
        if let Some(f) = &mut self.0 {
            let line = format!("R {} {what}\n", shoal_torture::now_ns());
            f.write_all(line.as_bytes())
                .unwrap_or_else(|e| fail(3, format!("lin log: {e}")));
        }
    }
}

fn ids(elems: &[Element<'_>]) -> String {
    let v: Vec<String> = elems.iter().map(|e| e.index().to_string()).collect();
    if v.is_empty() {
        "-".into()
    } else {
        v.join(",")
    }
}

fn write_message(e: &mut Element<'_>, id: u64, gen: u64, seq: u64) {
    let mut b = [0u8; 32];
    for (i, w) in [MAGIC, id, gen, seq].iter().enumerate() {
        b[8 * i..8 * i + 8].copy_from_slice(&w.to_le_bytes());
    }
    e.write(0, &b);
}

fn read_message(e: &Element<'_>) -> [u64; 4] {
    let mut b = [0u8; 32];
    e.read(0, &mut b);
    let w: Vec<u64> = b
        .chunks(8)
        .map(|c| u64::from_le_bytes(c.try_into().unwrap()))
        .collect();
    [w[0], w[1], w[2], w[3]]
}

fn main() {
    let a = args();
    let mut rng = StdRng::seed_from_u64(a.w.seed ^ (a.w.id << 32) ^ (a.w.gen << 48) ^ 0x9e37);
    let mut log = Log(std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(&a.w.log)
        .unwrap_or_else(|e| fail(3, format!("open the log: {e}"))));
    let mut lin = Lin(a.lin.then(|| {
        let mut f = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(a.w.log.with_extension("qlin"))
            .unwrap_or_else(|e| fail(3, format!("open the lin log: {e}")));
        f.write_all(format!("W {} {} {}\n", a.w.id, a.w.gen, std::process::id()).as_bytes())
            .unwrap_or_else(|e| fail(3, format!("lin log: {e}")));
        f
    }));
    let store = ok(Store::open_existing(&a.w.store), "open the store");
    let set: QueueSet = ok(store.open_queue_set("jobs"), "open the set");
    let q = |n: &str| ok(set.queue(n), "queue");
    let (free, work, done) = (q("free"), q("work"), q("done"));
    let wait = Duration::from_millis(50);
    let mut seq = 0u64;
    let mut held: Vec<Element<'_>> = Vec::new();
    while !a.w.stop.exists() {
        if a.pause_us > 0 {
            std::thread::sleep(Duration::from_micros(rng.random_range(0..a.pause_us)));
        }
        match a.w.role.as_str() {
            "producer" => {
                let batch = if rng.random_bool(0.3) {
                    ok(set.pull_many(free, rng.random_range(2..6)), "pull_many")
                } else {
                    ok(set.pull_wait(free, wait), "pull_wait")
                        .into_iter()
                        .collect()
                };
                if batch.is_empty() {
                    continue;
                }
                let first = seq;
                let mut batch = batch;
                for e in &mut batch {
                    write_message(e, a.w.id, a.w.gen, seq);
                    seq += 1;
                }
                let n = batch.len() as u64;
                lin.call(format!("push work 64 {}", ids(&batch)));
                let r = set.push_many(work, batch);
                lin.ret(match &r {
                    Ok(()) => "ok",
                    Err(Error::QueueFull(_)) => "full",
                    Err(_) => "?",
                });
                match r {
                    Ok(()) => {
                        let mut s = String::new();
                        for i in first..first + n {
                            s.push_str(&format!("P {} {} {i}\n", a.w.id, a.w.gen));
                        }
                        log.line(s);
                    }
                    // Work is full: the batch went back to free.
                    Err(Error::QueueFull(_)) => std::thread::sleep(Duration::from_millis(1)),
                    Err(e) => fail(3, format!("push_many: {e}")),
                }
            }
            "consumer" => {
                let got: Vec<Element<'_>> = if rng.random_bool(0.2) {
                    let n = rng.random_range(2..5);
                    lin.call(format!("pull work {n}"));
                    let got = ok(set.pull_many(work, n), "pull_many");
                    lin.ret(&ids(&got));
                    got
                } else {
                    lin.call("pull work 1".into());
                    let got = ok(set.pull_wait(work, wait), "pull_wait");
                    lin.ret(&ids(got.as_slice()));
                    got.into_iter().collect()
                };
                for e in got {
                    let [magic, id, gen, s] = read_message(&e);
                    if magic != MAGIC {
                        fail(
                            2,
                            format!("element {} holds no message: {magic:#x}", e.index()),
                        );
                    }
                    log.line(format!("C {id} {gen} {s} {}\n", e.redelivered() as u8));
                    // Sometimes hold a few a while, so that kills find held elements.
                    if held.len() < 3 && rng.random_bool(0.2) {
                        held.push(e);
                    } else {
                        lin.call(format!("push done 0 {}", e.index()));
                        ok(set.push(done, e), "push");
                        lin.ret("ok");
                    }
                }
                if held.len() == 3 || (!held.is_empty() && rng.random_bool(0.1)) {
                    lin.call(format!("push done 0 {}", ids(&held)));
                    ok(set.push_many(done, std::mem::take(&mut held)), "push_many");
                    lin.ret("ok");
                }
            }
            "recycler" => {
                let moved = if !a.lin && rng.random_bool(0.5) {
                    ok(set.move_to(done, free, rng.random_range(1..20)), "move_to")
                } else {
                    lin.call("pull done 1".into());
                    let got = ok(set.pull_wait(done, wait), "pull_wait");
                    lin.ret(&ids(got.as_slice()));
                    match got {
                        Some(e) => {
                            ok(set.push(free, e), "push");
                            1
                        }
                        None => 0,
                    }
                };
                if moved == 0 {
                    std::thread::sleep(Duration::from_millis(1));
                }
            }
            r => fail(3, format!("unknown role {r}")),
        }
    }
    // Held elements go to done on the way out (their messages were logged as read).
    if !held.is_empty() {
        lin.call(format!("push done 0 {}", ids(&held)));
        ok(set.push_many(done, held), "push_many");
        lin.ret("ok");
    }
}
