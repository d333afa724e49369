//! Smoke test of the comparison suite: runs the binary on 20k keys with 1 and 2 processes
//! over Shoal, hashbrown, LMDB and libmdbx (both variants each), and Redis when
//! `redis-server` is installed, and checks that every phase of every system ran all its
//! ops with every result correct (the binary checks each get's value and exits non-zero
//! on any wrong result), with the default settings that keep it fair: shuffled PUT, a
//! separate PUT-only row in key order for every system, repeats with their spread, and
//! GET and MIX phases that last at least `--min-secs`.

use std::process::Command;

const KEYS: u64 = 20_000;

fn redis_available() -> Result<(), String> {
    match Command::new("redis-server").arg("--version").output() {
        Ok(o) if o.status.success() => Ok(()),
        Ok(o) => Err(format!("redis-server --version failed ({})", o.status)),
        Err(e) => Err(format!("redis-server not installed ({e})")),
    }
}

/// Runs `shoal-compare` with `args` and `--md` to a file of its own; its standard output
/// and the Markdown report, after checking that it succeeded.
fn run_with_report(name: &str, args: &[&str]) -> (Vec<u8>, String) {
    let md = std::env::temp_dir().join(format!("shoal-compare-{name}-{}.md", std::process::id()));
    let out = Command::new(env!("CARGO_BIN_EXE_shoal-compare"))
        .args(args)
        .arg("--md")
        .arg(&md)
        .output()
        .expect("run shoal-compare");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        out.status.success(),
        "shoal-compare {args:?} failed: {stderr}"
    );
    let text = std::fs::read_to_string(&md).expect("Markdown report");
    let _ = std::fs::remove_file(&md);
    (out.stdout, text)
}

#[test]
fn every_system_returns_correct_results() {
    let mut systems = vec![
        "shoal",
        "hashbrown",
        "lmdb",
        "lmdb-batch",
        "mdbx",
        "mdbx-batch",
    ];
    match redis_available() {
        Ok(()) => systems.extend(["redis", "redis-pipe"]),
        Err(why) => println!("Redis part of the smoke test skipped: {why}"),
    }
    let out = Command::new(env!("CARGO_BIN_EXE_shoal-compare"))
        .args([
            "--keys",
            &KEYS.to_string(),
            "--procs",
            "1,2",
            "--many-procs",
            "3",
            "--repeats",
            "2",
            "--min-secs",
            "0",
        ])
        .args(["--systems", &systems.join(","), "--json"])
        .output()
        .expect("run shoal-compare");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "shoal-compare failed: {stderr}");
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).expect("JSON on stdout");
    assert_eq!(v["put_order"], "shuffled", "PUT order by default");
    assert_eq!(v["key_order_rows"], true, "key-order rows by default");
    assert_eq!(v["repeats"], 2);
    let runs = v["runs"].as_array().expect("runs");
    let mut checked = 0;
    let mut key_order_rows = 0;
    for r in runs {
        let (sys, procs) = (r["system"].as_str().unwrap(), r["procs"].as_u64().unwrap());
        if sys == "hashbrown" && procs > 1 {
            assert_eq!(r["skipped"], "in-process only");
            continue;
        }
        assert!(
            r["skipped"].is_null(),
            "{sys} x{procs} skipped: {}",
            r["skipped"]
        );
        assert_eq!(r["repeats"], 2, "{sys} x{procs} repeats");
        assert!(r["bytes_per_entry"].as_f64().unwrap() > 0.0, "{sys} bytes");
        if r["put_only"] == true {
            assert_eq!(
                r["order"], "keys",
                "{sys} x{procs}: the PUT-only row is in key order"
            );
            let phases = r["phases"].as_object().unwrap();
            assert_eq!(phases.len(), 1, "{sys} x{procs} key-order row: PUT only");
            let p = &phases["PUT"];
            assert_eq!(p["errors"], 0, "{sys} key order: {}", p["first_error"]);
            assert_eq!(p["ops"].as_u64().unwrap(), KEYS, "{sys} key-order PUT ops");
            key_order_rows += 1;
            continue;
        }
        assert_eq!(r["order"], "shuffled", "{sys} x{procs} order");
        for phase in ["PUT", "GET", "MIX", "REMOVE"] {
            let p = &r["phases"][phase];
            assert_eq!(
                p["errors"], 0,
                "{sys} x{procs} {phase}: {}",
                p["first_error"]
            );
            let ops = p["ops"].as_u64().unwrap();
            if phase == "MIX" {
                assert!(
                    (KEYS..=KEYS * 11 / 10).contains(&ops),
                    "{sys} MIX ops {ops}"
                );
            } else {
                assert_eq!(ops, KEYS, "{sys} x{procs} {phase} ops");
            }
            assert!(p["ops_per_sec"].as_f64().unwrap() > 0.0);
            assert_eq!(
                p["rates"].as_array().unwrap().len(),
                2,
                "{sys} {phase} rates"
            );
            assert!(p["spread"].as_f64().is_some(), "{sys} {phase} spread");
        }
        checked += 1;
    }
    let expect = 2 * (systems.len() - 1) + 1 + 1; // hashbrown once, Shoal with 3 procs too
    assert_eq!(checked, expect, "full runs checked");
    assert_eq!(
        key_order_rows,
        2 * (systems.len() - 1) + 1,
        "key-order rows"
    );
    assert!(!v["targets"].as_array().unwrap().is_empty());
    let md = String::from_utf8_lossy(&out.stderr);
    assert!(!md.contains("ERRORS"), "{md}");
}

/// `--min-secs` stretches GET and MIX (not PUT), `--put-order shuffled` leaves the key-order
/// rows out, and the Markdown report states the key order, the repeats and the phase lengths.
#[test]
fn read_phases_last_min_secs_and_the_report_says_so() {
    let (stdout, text) = run_with_report(
        "smoke",
        &[
            "--keys",
            "2000",
            "--systems",
            "shoal,lmdb-batch",
            "--procs",
            "1",
            "--many-procs",
            "0",
            "--repeats",
            "1",
            "--min-secs",
            "0.3",
            "--put-order",
            "shuffled",
            "--json",
        ],
    );
    let v: serde_json::Value = serde_json::from_slice(&stdout).expect("JSON on stdout");
    assert_eq!(v["key_order_rows"], false);
    let runs = v["runs"].as_array().unwrap();
    assert_eq!(runs.len(), 2, "no key-order rows with --put-order shuffled");
    for r in runs {
        let sys = r["system"].as_str().unwrap();
        for phase in ["GET", "MIX"] {
            let p = &r["phases"][phase];
            assert_eq!(p["errors"], 0, "{sys} {phase}: {}", p["first_error"]);
            assert!(
                p["secs"].as_f64().unwrap() >= 0.3,
                "{sys} {phase} lasted {}",
                p["secs"]
            );
            assert!(
                p["ops"].as_u64().unwrap() > 2000,
                "{sys} {phase}: passes repeated"
            );
        }
        assert_eq!(r["phases"]["PUT"]["ops"], 2000, "{sys}: PUT is one pass");
        assert!(
            r["phases"]["PUT"]["spread"].is_null(),
            "one repeat: no spread"
        );
    }
    for want in [
        "- key order: PUT in a shuffled order",
        "- repeats: 1",
        "- phase lengths:",
        "## Phase lengths",
        "- commit:",
    ] {
        assert!(text.contains(want), "report lacks {want:?}:\n{text}");
    }
}

/// `--kind txn`: every system moves money between accounts from 1 and 2 processes, and the
/// accounts' sum after each row is the initial sum (the binary exits non-zero otherwise);
/// the report has a table per process count and the targets.
#[test]
fn transfers_keep_every_systems_sum() {
    let mut systems = vec!["shoal-fixed", "shoal-var", "mdbx", "lmdb"];
    match redis_available() {
        Ok(()) => systems.extend(["redis-multi", "redis-lua"]),
        Err(why) => println!("Redis part of the transfer smoke test skipped: {why}"),
    }
    let systems_arg = systems.join(",");
    let (_, text) = run_with_report(
        "txn",
        &[
            "--kind",
            "txn",
            "--accounts",
            "500",
            "--xfers",
            "6000",
            "--balance",
            "100",
            "--procs",
            "1,2",
            "--repeats",
            "1",
            "--min-secs",
            "0",
            "--pipeline",
            "7",
            "--systems",
            &systems_arg,
        ],
    );
    // 500 accounts of 100: the sum is 50000 in every row.
    let rows = text
        .lines()
        .filter(|l| l.contains("| 50000 in each repeat |"));
    assert_eq!(rows.count(), 2 * systems.len(), "{text}");
    for want in [
        "## 1 process",
        "## 2 processes",
        "## The targets",
        "load average before:",
        "- commit:",
    ] {
        assert!(text.contains(want), "report lacks {want:?}:\n{text}");
    }
    // Small balances and amounts up to 100: the systems that check decline some.
    let declined = text
        .lines()
        .filter(|l| l.starts_with("| Shoal, fixed-size map |"))
        .any(|l| !l.contains("| 0.000% |"));
    assert!(
        declined,
        "no declined transfer with balances of 100:\n{text}"
    );
}

/// `--kind backup`: writers overwrite a store while Shoal's hot backup and libmdbx's copy
/// run; the binary exits non-zero unless every run finished and Shoal's copy passed its
/// check with every entry. The report has a row per system and writer count.
#[test]
fn hot_backups_finish_under_writers_and_their_copies_check() {
    let (_, text) = run_with_report(
        "backup",
        &[
            "--kind",
            "backup",
            "--size",
            "8M",
            "--value",
            "1000",
            "--writers",
            "1,2",
            "--base-secs",
            "0.2",
            "--repeats",
            "1",
        ],
    );
    for (sys, writers) in [
        ("Shoal (Store::backup)", 1),
        ("libmdbx (mdbx_env_copy)", 1),
        ("Shoal (Store::backup)", 2),
        ("libmdbx (mdbx_env_copy)", 2),
    ] {
        let row = format!("| {sys} | {writers} |");
        assert!(text.contains(&row), "report lacks {row:?}:\n{text}");
    }
    for want in ["- commit:", "8,388 values of 1000 bytes"] {
        assert!(text.contains(want), "report lacks {want:?}:\n{text}");
    }
}
