//! Many processes on one store at once, nobody killed.
//!
//! What this proves: six writer processes (four on both their own disjoint keys and a
//! shared hot set, one on disjoint keys only, one on the hot set only) and two reader
//! processes, all running at once on one map with tiny segments (so splits and
//! directory doublings happen throughout) and 64 KiB chunks (so the file grows all the
//! time), give
//! * in every writer, outcomes, old values and reads of its own keys that match what it
//!   did (checked live by the worker: no lost or phantom update);
//! * in every reader, only whole, well-formed values under the right key, never an older
//!   value of a (key, writer) after a newer one, and iterations with no key twice;
//! * at the end, for every key, a final state that some acknowledged operation may
//!   legally have left given the start and end times of all operations on it (see
//!   `shoal_torture::verify`); iteration, `get` and `len` agreeing; `Store::check` clean.
//!
//! And that this verification is not vacuous: a writer that acknowledges puts it did not
//! do (fault injection) is caught.
//!
//! `SHOAL_SEED` repeats a run's random choices (not its scheduling); `SHOAL_MP_OPS` sets
//! the operations per writer.

use shoal::{MapOptions, OpenMode, Options, Store};
use shoal_torture::harness::{env_u64, read_logs, seed, Rig, Scratch};
use shoal_torture::value::Wid;
use shoal_torture::verify::verify_map;
use std::collections::HashMap;
use std::time::Duration;

#[test]
fn writers_and_readers_in_many_processes() {
    let seed = seed();
    let dir = Scratch::new("mp", seed);
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

    let ops = env_u64("SHOAL_MP_OPS", 30_000).to_string();
    let common = [
        "--ops",
        &ops,
        "--keys",
        "1500",
        "--advance",
        "8",
        "--hot",
        "48",
        "--large-every",
        "500",
    ];
    let mut writers = Vec::new();
    for slot in 0..4 {
        writers.push(rig.spawn(
            "mixed",
            Wid { slot, gen: 0 },
            &[&common[..], &["--hot-pct", "30"]].concat(),
        ));
    }
    writers.push(rig.spawn("writer", Wid { slot: 4, gen: 0 }, &common));
    writers.push(rig.spawn("overlap", Wid { slot: 5, gen: 0 }, &common));
    let mut readers: Vec<_> = (0..2)
        .map(|i| {
            rig.spawn(
                "reader",
                Wid {
                    slot: 100 + i,
                    gen: 0,
                },
                &["--min-ops", "3000", "--keys", "1500", "--hot", "48"],
            )
        })
        .collect();

    // Generous bounds: a blocked worker fails the test, a slow machine does not.
    let bad = rig.wait_all(&mut writers, Duration::from_secs(240));
    rig.stop_all();
    let bad_readers = rig.wait_all(&mut readers, Duration::from_secs(120));
    assert!(
        bad.is_empty() && bad_readers.is_empty(),
        "seed {seed}: workers failed:\n{}\n{}",
        bad.join("\n"),
        bad_readers.join("\n")
    );

    let logs = read_logs(&writers).unwrap_or_else(|e| panic!("seed {seed}: {e}"));
    assert_eq!(
        logs.len(),
        writers.len(),
        "seed {seed}: a writer left no log"
    );
    let report = store.check().unwrap();
    assert!(
        report.is_ok(),
        "seed {seed}: Store::check after the run:\n{report}"
    );
    let sum = verify_map(&map, &logs, &HashMap::new())
        .unwrap_or_else(|e| panic!("seed {seed}: final state:\n{e}"));
    let expected: usize = writers.len() * ops.parse::<usize>().unwrap();
    assert_eq!(sum.acked, expected, "seed {seed}: acknowledged operations");
    assert_eq!(
        sum.in_flight, 0,
        "seed {seed}: operations in flight without a kill"
    );
    assert!(
        sum.keys > 1500 && sum.present > 0,
        "seed {seed}: too few keys verified: {sum:?}"
    );
    let st = map.stats().unwrap();
    assert!(
        st.splits > 50,
        "seed {seed}: expected many splits with tiny segments: {st:?}"
    );
    eprintln!(
        "seed {seed}: {sum:?}; {} entries, {} splits, file {} bytes",
        st.entries, st.splits, st.file_size
    );
    drop(map);
    drop(store);
}

/// The checks above can fail: a writer that acknowledges puts it did not do (fault
/// injection in the worker, its own checks off) is caught by the final-state check.
#[test]
fn verification_catches_a_writer_that_lies() {
    let seed = seed();
    let dir = Scratch::new("liar", seed);
    let rig = Rig::new(env!("CARGO_BIN_EXE_shoal-worker"), &dir.path, seed);
    let store = Store::open_with(&rig.store, &Options::default(), OpenMode::CreateNew).unwrap();
    let map = store.map("t").unwrap();
    let mut w = vec![rig.spawn(
        "writer",
        Wid { slot: 0, gen: 0 },
        &["--ops", "3000", "--keys", "100", "--fault-lie", "5"],
    )];
    let bad = rig.wait_all(&mut w, Duration::from_secs(120));
    assert!(bad.is_empty(), "seed {seed}: {}", bad.join("\n"));
    let logs = read_logs(&w).unwrap();
    assert!(store.check().unwrap().is_ok(), "seed {seed}");
    match verify_map(&map, &logs, &HashMap::new()) {
        Err(e) => assert!(e.contains("problems"), "seed {seed}: {e}"),
        Ok(sum) => panic!(
            "seed {seed}: lies about {} operations went unnoticed: {sum:?}",
            sum.acked
        ),
    }
}
