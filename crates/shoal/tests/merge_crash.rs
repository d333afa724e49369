//! Merging free runs (`alloc::coalesce`, run when a record needs more chunks than any free
//! run has): a process killed after every merge step's commit and after every step leaves
//! a store that `check()` passes, holding every value it held, and whose next long record
//! takes the merged space instead of growing the file.

use shoal::{OpenMode, Options, Store};

const CHUNK: usize = 64 << 10;
/// Free runs of two chunks, side by side in groups (a live record between groups): more
/// in a group than one merge step absorbs (8), so a merge takes several steps.
const GROUPS: usize = 3;
const PER_GROUP: usize = 11;

fn opts() -> Options {
    Options {
        chunk_size: CHUNK as u64,
        ..Options::default()
    }
}

fn two_chunks(tag: u8) -> Vec<u8> {
    vec![tag; CHUNK + CHUNK / 2]
}

/// The record that needs the merge: longer than two chunks, shorter than a group.
fn long_value() -> Vec<u8> {
    vec![0xa5; 5 * CHUNK]
}

mod common;
use common::crash_child;

const WORKER: &str = "merge_crash_worker";

/// Child entry point: puts the long record, with the configured fail point armed (or
/// counting, for the census).
#[test]
#[ignore = "run as a child process by merging_free_runs_survives_a_crash_at_every_step"]
fn merge_crash_worker() {
    let Some((path, counter)) = crash_child::arm() else {
        return;
    };
    let s = Store::open_with(&path, &opts(), OpenMode::Open).unwrap();
    let m = s.map("m").unwrap();
    m.put(b"long", &long_value()).unwrap();
    crash_child::census_done(counter);
}

/// A store whose free list holds GROUPS groups of PER_GROUP adjacent two-chunk runs.
fn fresh(dir: &tempfile::TempDir) -> std::path::PathBuf {
    let path = dir.path().join("merge.shoal");
    let _ = std::fs::remove_file(&path);
    let s = Store::open_with(&path, &opts(), OpenMode::CreateNew).unwrap();
    let m = s.map("m").unwrap();
    for g in 0..GROUPS {
        for i in 0..PER_GROUP {
            m.put(format!("tmp{g}.{i}").as_bytes(), &two_chunks(1))
                .unwrap();
        }
        m.put(format!("keep{g}").as_bytes(), &two_chunks(g as u8 + 10))
            .unwrap();
    }
    for g in 0..GROUPS {
        for i in 0..PER_GROUP {
            assert!(m.remove(format!("tmp{g}.{i}").as_bytes()).unwrap());
        }
    }
    let st = s.stats().unwrap();
    assert_eq!(
        st.free_bytes as usize,
        GROUPS * PER_GROUP * 2 * CHUNK,
        "precondition: the removed records' runs are free"
    );
    path
}

#[test]
fn merging_free_runs_survives_a_crash_at_every_step() {
    let d = tempfile::tempdir_in("/dev/shm")
        .or_else(|_| tempfile::tempdir())
        .unwrap();
    let mut cases = 0;
    for point in ["alloc.merge_committed", "alloc.merged"] {
        let census = crash_child::census(WORKER, &fresh(&d), point);
        // Every group is merged (8 runs, then 2, absorbed per step).
        assert!(
            census >= 2 * GROUPS as u64,
            "{point}: only {census} merge steps"
        );
        for hit in 1..=census {
            let path = fresh(&d);
            let before = {
                let s = Store::open_with(&path, &opts(), OpenMode::Open).unwrap();
                s.stats().unwrap().file_size
            };
            let out = crash_child::run(WORKER, &path, point, hit);
            assert!(
                !out.status.success(),
                "not killed at {point} #{hit} of {census}"
            );
            let s = Store::open_with(&path, &opts(), OpenMode::Open).unwrap();
            let r = s.check().unwrap();
            assert!(r.is_ok(), "{point} #{hit}: {r}");
            let m = s.map("m").unwrap();
            for g in 0..GROUPS {
                let got = m.get(format!("keep{g}").as_bytes()).unwrap();
                assert!(
                    got == Some(two_chunks(g as u8 + 10)),
                    "{point} #{hit}: keep{g}"
                );
            }
            assert_eq!(
                m.get(b"long").unwrap(),
                None,
                "{point} #{hit}: long was put"
            );
            // The store goes on, and the long record fits in the merged runs.
            m.put(b"long", &long_value()).unwrap();
            assert!(m.get(b"long").unwrap() == Some(long_value()));
            assert_eq!(
                s.stats().unwrap().file_size,
                before,
                "{point} #{hit}: the long record grew the file"
            );
            let r = s.check().unwrap();
            assert!(r.is_ok(), "{point} #{hit}: {r}");
            cases += 1;
        }
    }
    assert!(cases >= 4 * GROUPS, "only {cases} crash cases");
}
