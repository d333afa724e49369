//! Smoke test of the comparison suite: runs the binary on 20k keys with 1 and 2 processes
//! over Shoal, hashbrown, LMDB and libmdbx (both variants each), and Redis when
//! `redis-server` is installed, and checks that every phase of every system ran all its
//! ops with every result correct (the binary checks each get's value and exits non-zero
//! on any wrong result).

use std::process::Command;

const KEYS: u64 = 20_000;

fn redis_available() -> Result<(), String> {
    match Command::new("redis-server").arg("--version").output() {
        Ok(o) if o.status.success() => Ok(()),
        Ok(o) => Err(format!("redis-server --version failed ({})", o.status)),
        Err(e) => Err(format!("redis-server not installed ({e})")),
    }
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
        ])
        .args(["--systems", &systems.join(","), "--json"])
        .output()
        .expect("run shoal-compare");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "shoal-compare failed: {stderr}");
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).expect("JSON on stdout");
    let runs = v["runs"].as_array().expect("runs");
    let mut checked = 0;
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
        assert!(r["bytes_per_entry"].as_f64().unwrap() > 0.0, "{sys} bytes");
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
        }
        checked += 1;
    }
    let expect = 2 * (systems.len() - 1) + 1 + 1; // hashbrown once, Shoal with 3 procs too
    assert_eq!(checked, expect, "runs checked");
    assert!(!v["targets"].as_array().unwrap().is_empty());
}
