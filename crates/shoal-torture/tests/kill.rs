//! Writers SIGKILLed at random moments, again and again, while others go on.
//!
//! What this proves, in two settings (below), each with four writer lineages and two
//! readers on a map with tiny segments (3 buckets) in a store with 64 KiB chunks and
//! some values larger than a chunk, and dozens of SIGKILLs (of writers mostly, of a
//! reader sometimes, sometimes right after the victim started, so inside `Store::open`
//! and its recovery of earlier deaths), each victim replaced by a new process:
//! * no survivor blocks or fails: every operation of every process that was not killed
//!   returns Ok (each wait is bounded by a 30 s lock timeout, so a lock of a dead process
//!   that is never recovered fails the run), and after the last kill every writer still
//!   completes its quota of operations;
//! * the self-checks of the writers (outcomes of their own keys, once known) and of the
//!   readers (whole values, no (key, writer) going back in time) hold throughout;
//! * at the end `Store::check` is clean and no acknowledged write is lost: every key's
//!   final state is that of an acknowledged operation that may legally be last, or of
//!   the operation a killed writer had in flight (see `shoal_torture::verify` for the
//!   exact rule); iteration, `get` and `len` agree; and a new generation of writers
//!   works on, with the same checks after it.
//!
//! Kills land where they land: a bug in a window of a few instructions (between an
//! intent's commit and its application, say) is caught only now and then; such windows
//! need deterministic tests inside the engine (planted dead-txn state, fail points).
//!
//! `SHOAL_SEED` repeats a run's random choices (not its scheduling); `SHOAL_KILLS` sets
//! the number of kills of each test (default 80).

use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use shoal::{MapOptions, OpenMode, Options, Store};
use shoal_torture::harness::{env_u64, read_logs, seed, tail, Rig, Scratch, Worker};
use shoal_torture::value::Wid;
use shoal_torture::verify::verify_map;
use std::collections::HashMap;
use std::time::Duration;

/// Fails the test if a worker that should still be running has exited on its own.
fn still_running(seed: u64, w: &mut Worker) {
    if let Some(st) = w.child.try_wait().unwrap() {
        panic!(
            "seed {seed}: {} exited by itself with {st} before it was killed or stopped:\n{}",
            w.name,
            tail(&w.err)
        );
    }
}

/// Four writer lineages of `workload` and two readers on one map; `kills` SIGKILLs, each
/// victim replaced; then the checks described at the top of this file.
fn kill_run(name: &str, workload: &str, writer_args: &[&str], reader_args: &[&str], kills: u64) {
    let seed = seed();
    let mut rng = StdRng::seed_from_u64(seed);
    let dir = Scratch::new(name, seed);
    let rig = Rig::new(env!("CARGO_BIN_EXE_shoal-worker"), &dir.path, seed);
    let opts = Options {
        chunk_size: 64 * 1024,
        lock_timeout: Duration::from_secs(30),
        ..Options::default()
    };
    let store = Store::open_with(&rig.store, &opts, OpenMode::CreateNew).unwrap();
    let map = store
        .map_with(
            "t",
            &MapOptions {
                segment_buckets: 2,
                stash_buckets: 1,
                uids: false,
                ..Default::default()
            },
            true,
        )
        .unwrap();

    let mut writers: Vec<Worker> = (0..4)
        .map(|slot| rig.spawn(workload, Wid { slot, gen: 0 }, writer_args))
        .collect();
    let mut readers: Vec<Worker> = (0..2)
        .map(|i| {
            rig.spawn(
                "reader",
                Wid {
                    slot: 100 + i,
                    gen: 0,
                },
                reader_args,
            )
        })
        .collect();
    let mut dead: Vec<Worker> = Vec::new();
    let mut deaths: HashMap<Wid, u64> = HashMap::new();
    let mut newest: Option<(bool, usize)> = None; // (is a writer, index) of the last spawn

    for _ in 0..kills {
        // Mostly a random moment in a running process; sometimes the process just started.
        let (is_writer, i) = match newest {
            Some(n) if rng.random_range(0..8) == 0 => {
                std::thread::sleep(Duration::from_micros(rng.random_range(0..3000)));
                n
            }
            _ => {
                std::thread::sleep(Duration::from_millis(rng.random_range(5..80)));
                if rng.random_range(0..8) == 0 {
                    (false, 0)
                } else {
                    (true, rng.random_range(0..writers.len()))
                }
            }
        };
        for w in writers.iter_mut().chain(readers.iter_mut()) {
            still_running(seed, w);
        }
        let pool = if is_writer {
            &mut writers
        } else {
            &mut readers
        };
        // Kill first: a lineage never has two live writers (their own-key checks and
        // the readers' per-lineage order rely on it).
        let t = rig.kill(&mut pool[i]);
        let old = &pool[i];
        let next = Wid {
            slot: old.wid.slot,
            gen: old.wid.gen + 1,
        };
        let replacement = if is_writer {
            rig.spawn(workload, next, writer_args)
        } else {
            rig.spawn("reader", next, reader_args)
        };
        let victim = std::mem::replace(&mut pool[i], replacement);
        if is_writer {
            deaths.insert(victim.wid, t);
            dead.push(victim);
        }
        newest = Some((is_writer, i));
    }

    // Survivors and replacements finish their quota after the last kill, within bounds.
    rig.stop_all();
    let mut bad = rig.wait_all(&mut writers, Duration::from_secs(120));
    bad.extend(rig.wait_all(&mut readers, Duration::from_secs(120)));
    assert!(
        bad.is_empty(),
        "seed {seed}: survivors failed:\n{}",
        bad.join("\n")
    );

    let logs =
        read_logs(dead.iter().chain(writers.iter())).unwrap_or_else(|e| panic!("seed {seed}: {e}"));
    let report = store.check().unwrap();
    assert!(
        report.is_ok(),
        "seed {seed}: Store::check after {kills} kills:\n{report}"
    );
    let sum = verify_map(&map, &logs, &deaths)
        .unwrap_or_else(|e| panic!("seed {seed}: after {kills} kills, final state:\n{e}"));
    assert!(
        sum.acked > 4 * 300,
        "seed {seed}: too few acknowledged operations: {sum:?}"
    );
    let st = map.stats().unwrap();
    eprintln!(
        "{name}: seed {seed}: {kills} kills ({} writers), {sum:?}; {} entries, {} splits, file {} bytes",
        dead.len(),
        st.entries,
        st.splits,
        st.file_size
    );
    // The store goes on working after all that: one more writer generation per lineage.
    let last_args = [writer_args, &["--ops", "500"]].concat();
    let mut last: Vec<Worker> = writers
        .iter()
        .map(|w| {
            rig.spawn(
                workload,
                Wid {
                    slot: w.wid.slot,
                    gen: w.wid.gen + 1,
                },
                &last_args,
            )
        })
        .collect();
    let bad = rig.wait_all(&mut last, Duration::from_secs(120));
    assert!(
        bad.is_empty(),
        "seed {seed}: writers after the run failed:\n{}",
        bad.join("\n")
    );
    let logs = read_logs(dead.iter().chain(writers.iter()).chain(last.iter()))
        .unwrap_or_else(|e| panic!("seed {seed}: {e}"));
    let report = store.check().unwrap();
    assert!(
        report.is_ok(),
        "seed {seed}: Store::check at the end:\n{report}"
    );
    verify_map(&map, &logs, &deaths)
        .unwrap_or_else(|e| panic!("seed {seed}: final state at the end:\n{e}"));
}

/// Writers on their own growing key spaces and a shared hot set: kills land in splits,
/// directory doublings, allocations, file growth, large-record publication and
/// compaction (each writer compacts every 1,000 ops: cleaning, merging free runs,
/// releasing their pages).
#[test]
fn writers_killed_again_and_again() {
    let args = &[
        "--keys",
        "2000",
        "--advance",
        "4",
        "--hot",
        "32",
        "--hot-pct",
        "25",
        "--large-every",
        "300",
        "--compact-every",
        "1000",
        "--min-ops",
        "300",
    ];
    kill_run(
        "kill",
        "mixed",
        args,
        &["--keys", "2000", "--hot", "32", "--min-ops", "500"],
        env_u64("SHOAL_KILLS", 80),
    );
}

/// Every writer on the same 16 hot keys (one or two segments): a killed writer usually
/// holds the lock all the others are waiting for.
#[test]
fn contending_writers_killed_again_and_again() {
    let args = &["--hot", "16", "--large-every", "100", "--min-ops", "300"];
    kill_run(
        "killhot",
        "overlap",
        args,
        &["--hot", "16", "--min-ops", "500"],
        env_u64("SHOAL_KILLS", 80),
    );
}
