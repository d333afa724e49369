//! Crash tests that kill a child process at a fail point: the child is this test binary,
//! run again on one ignored test, which learns its store, fail point and hit count from
//! `SHOAL_CHILD_*` variables (see [`arm`] and [`run`]).

use std::process::{Command, Output, Stdio};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

/// In the child: the store path, with the fail point armed as asked: killing the process
/// at its `hit`-th pass, or (hit 0, the census) counting passes, which [`census_done`]
/// prints. `None` when not run as a child (the ignored test run directly).
pub fn arm() -> Option<(String, Option<Arc<AtomicU64>>)> {
    let path = std::env::var("SHOAL_CHILD_PATH").ok()?;
    let point = std::env::var("SHOAL_CHILD_POINT").unwrap();
    let hit: u64 = std::env::var("SHOAL_CHILD_HIT").unwrap().parse().unwrap();
    let counter = if hit == 0 {
        Some(shoal::failpoints::counter(&point).unwrap())
    } else {
        shoal::failpoints::kill_at(&point, hit).unwrap();
        None
    };
    Some((path, counter))
}

/// In the child, at the end of a census run: prints the count [`census`] reads.
pub fn census_done(counter: Option<Arc<AtomicU64>>) {
    if let Some(c) = counter {
        println!("census {}", c.load(Ordering::SeqCst));
    }
}

/// Runs test `worker` of this binary as a child on the store at `path`, killed at the
/// `hit`-th pass through `point` (0: not killed, counting).
pub fn run(worker: &str, path: &std::path::Path, point: &str, hit: u64) -> Output {
    Command::new(std::env::current_exe().unwrap())
        .args([
            "--exact",
            worker,
            "--ignored",
            "--test-threads=1",
            "--nocapture",
        ])
        .env("SHOAL_CHILD_PATH", path)
        .env("SHOAL_CHILD_POINT", point)
        .env("SHOAL_CHILD_HIT", hit.to_string())
        .stderr(Stdio::null())
        .output()
        .unwrap()
}

/// How often a census run of `worker` passed `point`.
pub fn census(worker: &str, path: &std::path::Path, point: &str) -> u64 {
    let out = run(worker, path, point, 0);
    assert!(out.status.success(), "census run for {point} failed");
    let stdout = String::from_utf8_lossy(&out.stdout);
    stdout
        .lines()
        .find_map(|l| l.split("census ").nth(1).map(|n| n.trim().parse().unwrap()))
        .unwrap_or_else(|| panic!("no census for {point} in {stdout:?}"))
}

/// The crash drivers' loop. For every fail point of `points`, a census run of test
/// `worker` on a store that `prepare` makes counts its passes there, H; then a child is
/// killed (aborted) at passes 1, 2, H/2 and H, each on a fresh store from `prepare`, and
/// `verify(path, point, hit)` lists what is wrong with the store it left. Returns the
/// kills verified and every failure: a point the worker never reached, a child that was
/// not killed there, and what `verify` found, each prefixed with its point and pass.
pub fn drive(
    worker: &str,
    points: &[&str],
    prepare: impl Fn(&std::path::Path),
    verify: impl Fn(&std::path::Path, &str, u64) -> Vec<String>,
) -> (usize, Vec<String>) {
    use std::os::unix::process::ExitStatusExt;
    let mut failures = Vec::new();
    let mut cases = 0;
    for &point in points {
        let d = tempfile::tempdir_in("/dev/shm").unwrap();
        let census_path = d.path().join("census.shoal");
        prepare(&census_path);
        let h = census(worker, &census_path, point);
        if h == 0 {
            failures.push(format!("{point}: never reached by the worker"));
            continue;
        }
        let hits: std::collections::BTreeSet<u64> = [1, 2, h.div_ceil(2), h]
            .into_iter()
            .filter(|x| *x <= h)
            .collect();
        for hit in hits {
            let d = tempfile::tempdir_in("/dev/shm").unwrap();
            let path = d.path().join("crash.shoal");
            prepare(&path);
            let out = run(worker, &path, point, hit);
            if out.status.signal() != Some(6) {
                failures.push(format!(
                    "{point}:{hit}: the worker was not killed there ({:?})",
                    out.status
                ));
                continue;
            }
            cases += 1;
            for p in verify(&path, point, hit) {
                failures.push(format!("{point}:{hit}: {p}"));
            }
        }
    }
    (cases, failures)
}
