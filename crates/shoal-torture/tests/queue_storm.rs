//! Queue sets under a kill storm: producers, consumers and a recycler SIGKILLed at random
//! moments, again and again, each replaced by a new process.
//!
//! The set (`jobs`: 256 elements of 64 bytes; `free`, `work` limited to 64, `done`; dead
//! holders' elements redelivered to the queue they came from) passes messages: producers
//! write one into each free element and push it to work, consumers read it and push it to
//! done (sometimes holding a few elements a while), the recycler moves done elements to
//! free (see `shoal-queue-worker`). Every kill lands where it lands: mid-move, with a
//! committed intent, holding elements, inside `Store::open`. What this proves:
//! * no survivor blocks or fails (every wait is bounded; a lock or an element of a dead
//!   process that is never recovered stops the run);
//! * after the storm, once the dead holders' elements are handed back, every element is
//!   in exactly one queue (`Store::check`, the queues' lengths) and none is held;
//! * no message is lost: every message whose push a producer saw succeed was read by a
//!   consumer or is still in `work`;
//! * none is delivered twice but by redelivery: of a message's reads, at most one is not
//!   marked redelivered;
//! * FIFO per producer: no consumer reads a producer's message after a later one of the
//!   same producer (redelivered reads aside: they went to the tail again);
//! * and a new generation of workers goes on moving elements, with the same checks after.
//!
//! `SHOAL_SEED` repeats the run's random choices (not its scheduling); `SHOAL_QUEUE_KILLS`
//! sets the number of kills (default 40; the long form in docs/RELIABILITY.md uses 1000).

use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use shoal::{QueueSetOptions, Store};
use shoal_torture::harness::{env_u64, seed, tail, Rig, Scratch, Worker};
use shoal_torture::value::Wid;
use std::collections::{HashMap, HashSet};
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

const ELEMENTS: u64 = 256;
const ROLES: [&str; 5] = ["producer", "producer", "consumer", "consumer", "recycler"];
const MAGIC: u64 = 0x5155_4555_4d53_4721;

type Msg = (u64, u64, u64);

/// What the workers' logs say: messages pushed (acknowledged), and every read of a
/// message with its redelivered mark.
#[derive(Default)]
struct Logs {
    pushed: HashSet<Msg>,
    reads: HashMap<Msg, Vec<bool>>,
    /// Reads out of order: a consumer read a producer's message after a later one of the
    /// same producer, neither redelivered.
    out_of_order: Vec<String>,
}

fn read_logs(workers: &[Worker], logs: &mut Logs) {
    for w in workers {
        let Some(path) = &w.log else { continue };
        let text = std::fs::read_to_string(path).unwrap_or_default();
        // Per producer, the last message this consumer read that was not redelivered.
        let mut last: HashMap<(u64, u64), u64> = HashMap::new();
        // A kill mid-write may cut the last line short: only whole lines count.
        for line in text.split_inclusive('\n').filter(|l| l.ends_with('\n')) {
            let line = line.trim_end();
            let f: Vec<u64> = line
                .split_whitespace()
                .skip(1)
                .map(|x| {
                    x.parse()
                        .unwrap_or_else(|_| panic!("{}: bad line {line:?}", w.name))
                })
                .collect();
            match line.as_bytes().first() {
                Some(b'P') => {
                    logs.pushed.insert((f[0], f[1], f[2]));
                }
                Some(b'C') => {
                    let redelivered = f[3] == 1;
                    logs.reads
                        .entry((f[0], f[1], f[2]))
                        .or_default()
                        .push(redelivered);
                    if !redelivered {
                        let l = last.entry((f[0], f[1])).or_insert(f[2]);
                        if f[2] < *l {
                            logs.out_of_order.push(format!(
                                "{} read message {:?} after message {}",
                                w.name,
                                (f[0], f[1], f[2]),
                                *l
                            ));
                        }
                        *l = (*l).max(f[2]);
                    }
                }
                _ => panic!("{}: bad line {line:?}", w.name),
            }
        }
    }
}

/// Hands back what dead holders left, checks that every element is in one queue, and
/// returns the messages still in `work` (elements left where they are).
fn settle(seed: u64, path: &std::path::Path) -> Vec<Msg> {
    let s = Store::open_existing(path).unwrap();
    let set = s.open_queue_set("jobs").unwrap();
    set.reclaim().unwrap();
    assert!(
        set.held().unwrap().is_empty(),
        "seed {seed}: elements still held after the storm: {:?}",
        set.held().unwrap()
    );
    let r = s.check().unwrap();
    assert!(r.is_ok(), "seed {seed}: check after the storm: {r}");
    let total: u64 = ["free", "work", "done"]
        .iter()
        .map(|n| set.len(set.queue(n).unwrap()).unwrap())
        .sum();
    assert_eq!(total, ELEMENTS, "seed {seed}: elements in the queues");
    let work = set.queue("work").unwrap();
    let left = set.pull_many(work, ELEMENTS as usize).unwrap();
    let msgs = left
        .iter()
        .map(|e| {
            let v = e.to_vec();
            let w = |i: usize| u64::from_le_bytes(v[8 * i..8 * i + 8].try_into().unwrap());
            assert_eq!(
                w(0),
                MAGIC,
                "seed {seed}: element {} in work holds no message",
                e.index()
            );
            (w(1), w(2), w(3))
        })
        .collect();
    drop(left); // back to work, in order
    msgs
}

fn still_running(seed: u64, w: &mut Worker) {
    if let Some(st) = w.child.try_wait().unwrap() {
        panic!(
            "seed {seed}: {} exited by itself with {st} before it was killed or stopped:\n{}",
            w.name,
            tail(&w.err)
        );
    }
}

#[test]
fn queue_kill_storm_loses_and_duplicates_nothing() {
    let seed = seed();
    let kills = env_u64("SHOAL_QUEUE_KILLS", 40);
    let scratch = Scratch::new("queue-storm", seed);
    let rig = Rig::new(
        env!("CARGO_BIN_EXE_shoal-queue-worker"),
        &scratch.path,
        seed,
    );
    {
        let s = Store::open(&rig.store).unwrap();
        s.queue_set(
            "jobs",
            &QueueSetOptions::new(64, ELEMENTS)
                .queue_with_limit("work", 64)
                .queue("done")
                .redeliver(true),
        )
        .unwrap();
    }
    let mut all = storm(&rig, seed, kills, &[], true);
    let left = settle(seed, &rig.store);

    // A new generation goes on, with no kills, and the same checks after.
    std::fs::remove_file(&rig.stop).unwrap();
    let mut next: Vec<Worker> = ROLES
        .iter()
        .enumerate()
        .map(|(i, r)| {
            rig.spawn(
                r,
                Wid {
                    slot: i as u32,
                    gen: 1000,
                },
                &[],
            )
        })
        .collect();
    std::thread::sleep(Duration::from_millis(500));
    rig.stop_all();
    let bad = rig.wait_all(&mut next, Duration::from_secs(60));
    assert!(
        bad.is_empty(),
        "seed {seed}: after the storm: {}",
        bad.join("\n")
    );
    all.append(&mut next);
    let left_after = settle(seed, &rig.store);

    let mut logs = Logs::default();
    read_logs(&all, &mut logs);
    // Messages still in work after the storm were read by the new generation, or are
    // still there.
    let still: HashSet<Msg> = left_after.into_iter().collect();
    let lost: Vec<&Msg> = logs
        .pushed
        .iter()
        .filter(|m| !logs.reads.contains_key(*m) && !still.contains(*m))
        .collect();
    assert!(
        lost.is_empty(),
        "seed {seed}: {} acknowledged messages never read and not in work (first: {:?}); \
         {} were in work after the storm",
        lost.len(),
        lost.first(),
        left.len()
    );
    let twice: Vec<(&Msg, &Vec<bool>)> = logs
        .reads
        .iter()
        .filter(|(_, r)| r.iter().filter(|re| !**re).count() > 1)
        .collect();
    assert!(
        twice.is_empty(),
        "seed {seed}: {} messages delivered twice without redelivery (first: {:?})",
        twice.len(),
        twice.first()
    );
    assert!(
        logs.out_of_order.is_empty(),
        "seed {seed}: FIFO per producer broken {} times (first: {})",
        logs.out_of_order.len(),
        logs.out_of_order[0]
    );
    let redelivered = logs.reads.values().flatten().filter(|r| **r).count();
    assert!(
        logs.pushed.len() > 1000,
        "seed {seed}: only {} messages pushed: the storm proved little",
        logs.pushed.len()
    );
    eprintln!(
        "seed {seed}: {kills} kills, {} messages pushed, {} reads ({redelivered} redelivered)",
        logs.pushed.len(),
        logs.reads.values().map(Vec::len).sum::<usize>()
    );
}

/// The Go checker: `SHOAL_LINCHECK`, or built from `tools/linearizability`.
fn checker(seed: u64) -> PathBuf {
    shoal_torture::harness::lincheck(
        &Path::new(env!("CARGO_MANIFEST_DIR")).join("../../tools/linearizability"),
        &Path::new(env!("CARGO_TARGET_TMPDIR")).join("lincheck"),
        seed,
    )
}

/// The storm itself: the five roles started, `kills` of them SIGKILLed at random moments
/// (with `at_once`, one in seven victims' successors too, right away: inside
/// `Store::open`), each replaced; then all told to stop. Returns every worker that ran.
fn storm(rig: &Rig, seed: u64, kills: u64, args: &[&str], at_once: bool) -> Vec<Worker> {
    let mut rng = StdRng::seed_from_u64(seed);
    let mut all: Vec<Worker> = Vec::new();
    let mut live: Vec<Worker> = ROLES
        .iter()
        .enumerate()
        .map(|(i, r)| {
            rig.spawn(
                r,
                Wid {
                    slot: i as u32,
                    gen: 0,
                },
                args,
            )
        })
        .collect();
    let replace = |live: &mut Vec<Worker>, all: &mut Vec<Worker>, i: usize| {
        rig.kill(&mut live[i]);
        let wid = Wid {
            slot: live[i].wid.slot,
            gen: live[i].wid.gen + 1,
        };
        let fresh = rig.spawn(ROLES[i], wid, args);
        all.push(std::mem::replace(&mut live[i], fresh));
    };
    for k in 0..kills {
        std::thread::sleep(Duration::from_millis(rng.random_range(50..250)));
        let i = rng.random_range(0..live.len());
        still_running(seed, &mut live[i]);
        replace(&mut live, &mut all, i);
        if at_once && k % 7 == 3 {
            std::thread::sleep(Duration::from_millis(rng.random_range(0..5)));
            replace(&mut live, &mut all, i);
        }
    }
    std::thread::sleep(Duration::from_millis(300));
    rig.stop_all();
    let bad = rig.wait_all(&mut live, Duration::from_secs(60));
    assert!(bad.is_empty(), "seed {seed}: {}", bad.join("\n"));
    all.append(&mut live);
    all
}

/// The same storm, slower (a pause before each step) and without redelivery, with every
/// push into and pull from `work` and `done` logged with its invocation and response
/// times: the Porcupine checker (`lincheck -queues`) then checks each queue's history
/// against a FIFO queue. A dead holder's elements go to `free`, which is not checked, so
/// those histories are complete but for the operations kills cut short (pending: they may
/// or may not have taken effect). `SHOAL_QUEUE_LIN_KILLS` (default 20) kills.
#[test]
fn queue_kill_storm_is_linearizable() {
    let seed = seed();
    let kills = env_u64("SHOAL_QUEUE_LIN_KILLS", 20);
    let scratch = Scratch::new("queue-lin", seed);
    let rig = Rig::new(
        env!("CARGO_BIN_EXE_shoal-queue-worker"),
        &scratch.path,
        seed,
    );
    {
        let s = Store::open(&rig.store).unwrap();
        s.queue_set(
            "jobs",
            &QueueSetOptions::new(64, ELEMENTS)
                .queue_with_limit("work", 64)
                .queue("done"),
        )
        .unwrap();
    }
    let lincheck = checker(seed);
    let args = ["--lin", "1", "--pause-us", "400"];
    storm(&rig, seed, kills, &args, false);
    settle(seed, &rig.store);
    let out = Command::new(&lincheck)
        .args(["-queues", "-timeout", "5m"])
        .arg(&scratch.path)
        .output()
        .unwrap_or_else(|e| panic!("seed {seed}: run {}: {e}", lincheck.display()));
    let text = String::from_utf8_lossy(&out.stdout);
    eprintln!(
        "seed {seed}:\n{text}{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(
        out.status.success(),
        "seed {seed}: the queues' histories are not linearizable (or the check failed); \
         logs kept in {}",
        scratch.path.display()
    );
    let total = |what: &str| -> u64 {
        text.lines()
            .find_map(|l| l.strip_prefix("lincheck: queues: totals: "))
            .and_then(|t| t.split_whitespace().find_map(|kv| kv.strip_prefix(what)))
            .and_then(|v| v.parse().ok())
            .unwrap_or(0)
    };
    assert!(
        total("pushes=") > 1000 && total("pulls=") > 1000,
        "seed {seed}: too few operations checked to prove anything:\n{text}"
    );
}
