//! Smoke test of the benchmark binary on a tiny key count: it runs every phase (both put
//! passes, gets, the two forked processes), checks its own results, and cleans up.
//! It asserts nothing about speed.

use std::process::Command;

#[test]
fn runs_on_a_few_keys() {
    let store = format!("/dev/shm/shoal-bench-smoke-{}.shoal", std::process::id());
    let out = Command::new(env!("CARGO_BIN_EXE_shoal-bench"))
        .args([
            "--keys", "20000", "--reps", "1", "--json", "--store", &store,
        ])
        .output()
        .expect("run shoal-bench");
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        out.status.success(),
        "shoal-bench failed\nstdout:\n{stdout}\nstderr:\n{stderr}"
    );
    let json = stdout.trim();
    assert!(
        json.starts_with('{') && json.ends_with('}'),
        "not a JSON object: {json}"
    );
    for field in [
        "\"keys\":20000",
        "\"shoal\":{",
        "\"hashbrown\":{",
        "\"two_process\":[{",
        "\"solo_mops\":",
        "\"get_chained\":[{\"mops\":",
        "\"two_process_ratio_vs_get\":",
        "\"max_us\":",
        "\"fixed\":{\"put\":{\"mops\":",
        "\"overhead_per_entry\":",
    ] {
        assert!(json.contains(field), "missing {field} in {json}");
    }
    assert!(
        !std::path::Path::new(&store).exists(),
        "the store was not destroyed"
    );
    assert!(
        !std::path::Path::new(&format!("{store}-lat")).exists(),
        "the latency store was not destroyed"
    );
    assert!(
        !std::path::Path::new(&format!("{store}-fixed")).exists(),
        "the fixed map's store was not destroyed"
    );
}

/// The feature benchmark on a few keys: every phase runs (reads and writes by key and by
/// UID, the removes and refills, the u64 maps in their own store, the two add processes),
/// each row is printed, and the store is gone afterwards. Nothing about speed.
#[test]
fn features_run_on_a_few_keys() {
    let store = format!("/dev/shm/shoal-features-smoke-{}.shoal", std::process::id());
    let out = Command::new(env!("CARGO_BIN_EXE_shoal-features"))
        .args([
            "--keys", "5000", "--reps", "2", "--adds", "2000", "--store", &store,
        ])
        .output()
        .expect("run shoal-features");
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        out.status.success(),
        "shoal-features failed\nstdout:\n{stdout}\nstderr:\n{stderr}"
    );
    for row in [
        "| get by UID (get_by_uid_into) |",
        "| put (replace) by UID |",
        "| update by UID |",
        "| remove by UID |",
        "| u64→u64 get, inline map (fixed 8+8) |",
        "| add, one hot key, variable map, 2 processes (total) |",
        "| add, one hot key, inline map, 2 processes (total) |",
    ] {
        assert!(stdout.contains(row), "missing row {row:?} in\n{stdout}");
    }
    assert!(
        !std::path::Path::new(&store).exists(),
        "the store was not destroyed"
    );
}
