//! Index arenas longer than one chunk (`index::arena_alloc`, taken once a map's directory
//! is deep): a process killed at every allocation step late in the growth of a deep map,
//! when its arenas are 2 and 4 chunks long, leaves a store that `check()` passes, holding
//! exactly the keys it was told were written (the interrupted one wholly or not at all).

use shoal::{MapOptions, OpenMode, Options, Store};

const KEYS: u32 = 60_000;

fn tiny() -> MapOptions {
    MapOptions {
        segment_buckets: 2,
        stash_buckets: 1,
        uids: false,
        ..Default::default()
    }
}

fn opts() -> Options {
    Options {
        chunk_size: 64 << 10,
        ..Options::default()
    }
}

fn value(i: u32) -> Vec<u8> {
    format!("value-{}", i.wrapping_mul(2_654_435_761)).into_bytes()
}

mod common;
use common::crash_child;

const WORKER: &str = "arena_crash_worker";

/// Child entry point: inserts keys 0.. in order into the deep map until the configured
/// fail point aborts it; without one (the census) prints how often each point was reached.
#[test]
#[ignore = "run as a child process by deep_map_growth_survives_a_crash_at_every_allocation"]
fn arena_crash_worker() {
    let Some((path, counter)) = crash_child::arm() else {
        return;
    };
    let s = Store::open_with(&path, &opts(), OpenMode::Open).unwrap();
    let m = s.map_with("deep", &tiny(), false).unwrap();
    for i in 0..KEYS {
        m.put(format!("key:{i:08}").as_bytes(), &value(i)).unwrap();
    }
    crash_child::census_done(counter);
}

fn fresh(dir: &tempfile::TempDir) -> std::path::PathBuf {
    let path = dir.path().join("deep.shoal");
    let _ = std::fs::remove_file(&path);
    let s = Store::open_with(&path, &opts(), OpenMode::CreateNew).unwrap();
    s.map_with("deep", &tiny(), true).unwrap();
    path
}

#[test]
fn deep_map_growth_survives_a_crash_at_every_allocation() {
    let d = tempfile::tempdir_in("/dev/shm")
        .or_else(|_| tempfile::tempdir())
        .unwrap();
    let mut cases = 0;
    for point in ["alloc.grown", "alloc.committed", "alloc.applied"] {
        let census = crash_child::census(WORKER, &fresh(&d), point);
        // Every hit in the last quarter of the growth: the directory is 2,048 entries or
        // more deep there, so index arenas are taken 2 and 4 chunks at a time (data chunk
        // refills reach the same points; they are crashed too). Each store has its own
        // random hash seed, so a run may reach a point a time or two less than the census:
        // a case counts only if the worker really died there.
        for hit in (census * 3 / 4).max(1)..=census {
            let path = fresh(&d);
            let out = crash_child::run(WORKER, &path, point, hit);
            if out.status.success() {
                assert!(hit + 3 > census, "not killed at {point} #{hit} of {census}");
                continue;
            }
            let s = Store::open_with(&path, &opts(), OpenMode::Open).unwrap();
            let m = s.map_with("deep", &tiny(), false).unwrap();
            let depth = m.stats().unwrap().directory_depth;
            assert!(
                depth >= 11,
                "{point} #{hit}: directory depth {depth}, arenas of one chunk"
            );
            let n = m.len().unwrap() as u32;
            for i in 0..KEYS {
                let got = m.get(format!("key:{i:08}").as_bytes()).unwrap();
                if i < n {
                    assert_eq!(got, Some(value(i)), "{point} #{hit}: key {i} of {n}");
                } else {
                    assert_eq!(got, None, "{point} #{hit}: key {i}, past the {n} written");
                }
            }
            // The store goes on: the dead writer's locks and half-taken space are recovered.
            m.put(b"after", b"crash").unwrap();
            let r = s.check().unwrap();
            assert!(r.is_ok(), "{point} #{hit}: {r}");
            cases += 1;
        }
    }
    assert!(cases >= 6, "only {cases} crash cases");
}
