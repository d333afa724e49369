//! `shoal-soak`: a long run that must not grow without bound (`scripts/soak.sh`).
//!
//! ```text
//! shoal-soak [--minutes M] [--seed S] [--dir DIR]
//! ```
//!
//! Runs, on one store (64 KiB chunks), for M minutes (default 5):
//! * three survivors that are never killed: two `mixed` writers and a reader;
//! * a kill storm: four more writer lineages and a reader, one of them SIGKILLed every
//!   20-300 ms and replaced (every lineage stays on the same keys: `--gen-shift 0`);
//! * a process that opens and closes the store again and again (`reopen`).
//!
//! Every second it samples the resident set size (VmRSS) of each survivor and of itself
//! (it holds the store open and checks it), and the store's file size and live/dead
//! bytes. The key space is fixed, so after warming up nothing should grow.
//!
//! **The rule.** The run is cut into thirds by time. For the file size and for each
//! process's RSS, the maximum over the last third must not exceed the maximum over the
//! middle third by more than 10% plus a slack (file: 8 chunks; RSS: 16 MiB, which covers
//! page-cache noise of the mapping). Growth without bound shows as a last third above
//! the middle one; a bounded warm-up is over by the middle third. At the end, the
//! survivors must have exited 0 (their own checks of every outcome and value held
//! throughout), `Store::check` must be clean (it needs a quiet store: at the end), and every
//! value must be whole. (No acknowledged logs: minutes of them would fill /dev/shm; the
//! kill tests verify those.) Exit status 0 on success, 1 with the reason otherwise.
//! Samples go to DIR/samples.tsv (DIR is kept on failure).

use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use shoal::{MapOptions, OpenMode, Options, Store};
use shoal_torture::harness::{tail, Rig, Scratch, Worker};
use shoal_torture::value::{check_value, Wid};
use std::io::Write;
use std::time::{Duration, Instant};

const CHUNK: u64 = 64 * 1024;

fn rss_kib(pid: u32) -> Option<u64> {
    let s = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    s.lines()
        .find(|l| l.starts_with("VmRSS:"))?
        .split_whitespace()
        .nth(1)?
        .parse()
        .ok()
}

fn fail(msg: &str) -> ! {
    eprintln!("shoal-soak: FAILED: {msg}");
    std::process::exit(1)
}

/// max(last third) <= max(middle third) * 1.1 + slack. Returns a description.
fn bounded(name: &str, series: &[u64], slack: u64) -> Result<String, String> {
    let n = series.len();
    let mid = series[n / 3..2 * n / 3].iter().max().copied().unwrap_or(0);
    let last = series[2 * n / 3..].iter().max().copied().unwrap_or(0);
    let first = series[..n / 3].iter().max().copied().unwrap_or(0);
    let limit = mid + mid / 10 + slack;
    let d = format!("{name}: max per third {first} / {mid} / {last} (limit for the last {limit})");
    if last > limit {
        Err(format!("{d}: GROWS"))
    } else {
        Ok(d)
    }
}

fn main() {
    let mut minutes = 5.0f64;
    let mut seed: u64 = rand::random();
    let mut dir = None;
    let mut it = std::env::args().skip(1);
    while let Some(f) = it.next() {
        let v = it
            .next()
            .unwrap_or_else(|| fail(&format!("{f} needs a value")));
        match f.as_str() {
            "--minutes" => minutes = v.parse().unwrap_or_else(|_| fail("--minutes M")),
            "--seed" => seed = v.parse().unwrap_or_else(|_| fail("--seed S")),
            "--dir" => dir = Some(v),
            _ => fail(&format!("unknown option {f}")),
        }
    }
    eprintln!("shoal-soak: {minutes} minutes, --seed {seed}");
    let scratch = Scratch::new("soak", seed);
    let dir = dir
        .map(std::path::PathBuf::from)
        .unwrap_or(scratch.path.clone());
    std::fs::create_dir_all(&dir).unwrap();
    let exe = std::env::current_exe()
        .unwrap()
        .with_file_name("shoal-worker");
    if !exe.exists() {
        fail(&format!(
            "{} not found (build the shoal-torture bins)",
            exe.display()
        ));
    }
    let mut rig = Rig::new(exe.to_str().unwrap(), &dir, seed);
    // Minutes of acknowledged logs would fill /dev/shm: the workers' own checks, the
    // readers' and Store::check stand in for the log verification here.
    rig.logs = false;
    let opts = Options {
        chunk_size: CHUNK,
        lock_timeout: Duration::from_secs(30),
        ..Options::default()
    };
    let store = Store::open_with(&rig.store, &opts, OpenMode::CreateNew)
        .unwrap_or_else(|e| fail(&format!("create the store: {e}")));
    let map = store
        .map_with(
            "t",
            &MapOptions {
                segment_buckets: 8,
                stash_buckets: 2,
                uids: false,
                ..Default::default()
            },
            true,
        )
        .unwrap();
    let wargs = &[
        "--keys",
        "3000",
        "--gen-shift",
        "0",
        "--hot",
        "64",
        "--hot-pct",
        "20",
        "--large-every",
        "400",
        "--compact-every",
        "5000",
        "--min-ops",
        "100",
    ];
    let rargs = &["--keys", "3000", "--hot", "64", "--min-ops", "100"];
    let mut survivors: Vec<Worker> = vec![
        rig.spawn("mixed", Wid { slot: 0, gen: 0 }, wargs),
        rig.spawn("mixed", Wid { slot: 1, gen: 0 }, wargs),
        rig.spawn("reader", Wid { slot: 100, gen: 0 }, rargs),
    ];
    let mut storm: Vec<Worker> = (2..6)
        .map(|slot| rig.spawn("mixed", Wid { slot, gen: 0 }, wargs))
        .collect();
    storm.push(rig.spawn("reader", Wid { slot: 101, gen: 0 }, rargs));
    let mut reopen = rig.spawn("reopen", Wid { slot: 200, gen: 0 }, &["--hot", "64"]);

    let mut rng = StdRng::seed_from_u64(seed);
    let mut samples = std::fs::File::create(dir.join("samples.tsv")).unwrap();
    writeln!(
        samples,
        "t_s\tfile_bytes\tdata_bytes\tlive_bytes\tdead_bytes\tunfilled_bytes\tfree_bytes\tself_rss_kib\tsurvivor_rss_kib..."
    )
    .unwrap();
    let mut file_series = Vec::new();
    let mut rss_series: Vec<Vec<u64>> = vec![Vec::new(); survivors.len() + 1];
    let start = Instant::now();
    let total = Duration::from_secs_f64(minutes * 60.0);
    let mut next_sample = Duration::ZERO;
    let mut kills = 0u64;
    while start.elapsed() < total {
        for w in survivors.iter_mut().chain([&mut reopen]) {
            if let Some(st) = w.child.try_wait().unwrap() {
                fail(&format!(
                    "seed {seed}: {} exited with {st} (never killed):\n{}",
                    w.name,
                    tail(&w.err)
                ));
            }
        }
        if start.elapsed() >= next_sample {
            next_sample += Duration::from_secs(1);
            let st = store
                .stats()
                .unwrap_or_else(|e| fail(&format!("stats: {e}")));
            let file = std::fs::metadata(&rig.store).map(|m| m.len()).unwrap_or(0);
            file_series.push(file.max(st.file_size));
            let mut rss = vec![rss_kib(std::process::id()).unwrap_or(0)];
            rss.extend(survivors.iter().map(|w| rss_kib(w.child.id()).unwrap_or(0)));
            let mut line = format!(
                "{}\t{}\t{}\t{}\t{}\t{}\t{}",
                start.elapsed().as_secs(),
                file,
                st.data_bytes,
                st.live_bytes,
                st.dead_bytes,
                st.unfilled_bytes,
                st.free_bytes
            );
            for (s, r) in rss_series.iter_mut().zip(&rss) {
                s.push(*r);
                line.push_str(&format!("\t{r}"));
            }
            writeln!(samples, "{line}").unwrap();
        }
        std::thread::sleep(Duration::from_millis(rng.random_range(20..300)));
        let i = rng.random_range(0..storm.len());
        if let Some(st) = storm[i].child.try_wait().unwrap() {
            fail(&format!(
                "seed {seed}: {} exited with {st} before it was killed:\n{}",
                storm[i].name,
                tail(&storm[i].err)
            ));
        }
        rig.kill(&mut storm[i]);
        kills += 1;
        let old = storm[i].wid;
        let next = Wid {
            slot: old.slot,
            gen: old.gen + 1,
        };
        let reader = old.slot >= 100;
        let repl = if reader {
            rig.spawn("reader", next, rargs)
        } else {
            rig.spawn("mixed", next, wargs)
        };
        let victim = std::mem::replace(&mut storm[i], repl);
        let _ = std::fs::remove_file(&victim.err);
    }
    rig.stop_all();
    let mut bad = rig.wait_all(&mut survivors, Duration::from_secs(120));
    bad.extend(rig.wait_all(&mut storm, Duration::from_secs(120)));
    bad.extend(rig.wait_all(std::slice::from_mut(&mut reopen), Duration::from_secs(120)));
    if !bad.is_empty() {
        fail(&format!("seed {seed}: at the end:\n{}", bad.join("\n")));
    }
    let report = store
        .check()
        .unwrap_or_else(|e| fail(&format!("check: {e}")));
    if !report.is_ok() {
        fail(&format!("seed {seed}: Store::check at the end:\n{report}"));
    }
    // Every value is whole and under its own key; len agrees with iteration.
    let mut n = 0u64;
    for item in map.iter() {
        let (k, v) = item.unwrap_or_else(|e| fail(&format!("iterate: {e}")));
        let ks = String::from_utf8_lossy(&k).into_owned();
        if let Err(e) = check_value(&ks, &v) {
            fail(&format!("seed {seed}: key {ks}: {e}"));
        }
        n += 1;
    }
    if map.len().ok() != Some(n) {
        fail(&format!(
            "seed {seed}: len() {:?}, iteration {n}",
            map.len()
        ));
    }
    let st = store.stats().unwrap();
    println!(
        "shoal-soak: seed {seed}: {:.1} min, {kills} kills; {n} entries, all valid; file {} bytes, data {}, live {}, dead {}, unfilled {}, free {}",
        start.elapsed().as_secs_f64() / 60.0,
        st.file_size,
        st.data_bytes,
        st.live_bytes,
        st.dead_bytes,
        st.unfilled_bytes,
        st.free_bytes
    );
    if file_series.len() < 9 {
        fail("too short to judge growth: run at least 9 seconds");
    }
    let mut verdicts = vec![bounded("file size (bytes)", &file_series, 8 * CHUNK)];
    let names = [
        "soak process",
        "survivor writer 0",
        "survivor writer 1",
        "survivor reader",
    ];
    for (n, s) in names.iter().zip(&rss_series) {
        verdicts.push(bounded(&format!("{n} RSS (KiB)"), s, 16 * 1024));
    }
    let mut ok = true;
    for v in &verdicts {
        match v {
            Ok(d) => println!("  ok    {d}"),
            Err(d) => {
                ok = false;
                println!("  FAIL  {d}");
            }
        }
    }
    if !ok {
        fail(&format!(
            "seed {seed}: something grows without bound (samples in {})",
            dir.join("samples.tsv").display()
        ));
    }
    println!("shoal-soak: OK");
}
