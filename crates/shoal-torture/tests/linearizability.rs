//! Kill storms with a linearizability check, one per map kind.
//!
//! `SHOAL_LINEAR_WORKERS` (default 8) `shoal-lin-worker` processes run random operations
//! on a few hot keys (`SHOAL_LINEAR_KEYS`, default 6) with 8-byte integer values:
//!
//! * `kill_storm_is_linearizable` (a variable-size map): get, put, insert, replace,
//!   remove, compare_and_swap, add, swap and take;
//! * `fixed_map_kill_storm_is_linearizable` (a fixed-size map of 8-byte keys and values):
//!   get, contains, put, insert, replace, remove, compare_and_swap, add (lock-free on a
//!   present key) and update;
//! * `uid_map_kill_storm_is_linearizable` (a variable-size map with UIDs): half the
//!   variable mix by key, half uid and put_with_uid (which learn a key's handle) and
//!   get_by_uid, put_by_uid, update_by_uid, add_by_uid, remove_by_uid and key_by_uid on
//!   the same keys, through handles that may have gone stale (a legitimate outcome,
//!   which the checker's model requires exactly when the handle's key was removed since
//!   it was learned: see `State` in `tools/linearizability/model.go`).
//!
//! Each worker logs every operation's invocation (before the call) and response (after
//! it) with CLOCK_MONOTONIC timestamps. For `SHOAL_LINEAR_SECS` seconds (default 30; the
//! fixed and UID storms: `SHOAL_LINEAR_FIXED_SECS`, `SHOAL_LINEAR_UIDS_SECS`, default
//! 15) the supervisor SIGKILLs a random worker every 200–400 ms (sometimes one that has
//! just started, so inside `Store::open` and its recovery) and starts a replacement. Then every worker is told
//! to stop, the supervisor reads each key once more (logged like a worker), runs
//! `Store::check`, and hands the logs to the Porcupine checker (`tools/linearizability`,
//! built here with `go build`; `SHOAL_LINCHECK` may name a prebuilt binary), which
//! fails the run on a non-linearizable history (and writes an HTML visualization of the
//! failing key, whose path it prints) or on an operation that waited more than 10 s.
//! Each storm must also have checked a minimum of operations and kills (and, for UIDs,
//! of by-UID operations and stale outcomes), so that it cannot pass vacuously; on a
//! failure the histories are kept and their directory and the seed are printed.
//!
//! A killed worker's last operation (invoked, never returned) may or may not have taken
//! effect: it gets return time +infinity and an unknown output.
//!
//! `SHOAL_SEED` repeats the run's random choices (not its scheduling). The long form:
//! `scripts/linearizability.sh 600`.

use rand::rngs::StdRng;
use rand::SeedableRng;
use shoal::{FixedOptions, MapOptions, Options, Store};
use shoal_torture::harness::{env_u64, next_kill, seed, tail, Rig, Scratch, Worker};
use shoal_torture::value::Wid;
use shoal_torture::{lin_fixed_key, now_ns};
use std::fmt::Write as _;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

/// The Go checker: `SHOAL_LINCHECK`, or built from `tools/linearizability`.
fn checker(seed: u64) -> PathBuf {
    shoal_torture::harness::lincheck(
        &Path::new(env!("CARGO_MANIFEST_DIR")).join("../../tools/linearizability"),
        &Path::new(env!("CARGO_TARGET_TMPDIR")).join("lincheck"),
        seed,
    )
}

/// The map a storm runs on.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum Kind {
    /// A variable-size map.
    Variable,
    /// A fixed-size map, 8-byte keys and values.
    Fixed,
    /// A variable-size map with UIDs.
    Uids,
}

impl Kind {
    /// The worker's `--kind`.
    fn arg(self) -> &'static str {
        match self {
            Kind::Variable => "variable",
            Kind::Fixed => "fixed",
            Kind::Uids => "uids",
        }
    }
}

/// The map, as the supervisor reads it at the end.
enum Target {
    Variable(shoal::Map),
    Fixed(shoal::FixedMap),
}

/// What a storm leaves: its scratch directory (kept if the caller panics), the
/// checker's exit status and output.
struct Storm {
    seed: u64,
    dir: Scratch,
    status: std::process::ExitStatus,
    stdout: String,
}

impl Storm {
    /// Panics (keeping the histories) unless the checker passed.
    fn assert_linearizable(&self, name: &str) {
        assert!(
            self.status.success(),
            "{name}: seed {}: the linearizability checker failed ({}); histories kept in {} \
             (repeat with SHOAL_SEED={})",
            self.seed,
            self.status,
            self.dir.path.display(),
            self.seed
        );
    }

    /// The checker's `totals:` figure `name` (ops, completed, pending, kills, byuid,
    /// stale, longest_ns).
    fn total(&self, name: &str) -> u64 {
        let line = self
            .stdout
            .lines()
            .find_map(|l| l.strip_prefix("lincheck: totals: "))
            .unwrap_or_else(|| {
                panic!(
                    "seed {}: no totals in the checker's output; histories kept in {}",
                    self.seed,
                    self.dir.path.display()
                )
            });
        line.split_whitespace()
            .find_map(|f| f.strip_prefix(name)?.strip_prefix('='))
            .and_then(|v| v.parse().ok())
            .unwrap_or_else(|| panic!("seed {}: no {name}= in {line:?}", self.seed))
    }

    /// Panics (keeping the histories) unless the checker saw at least `min` of the
    /// `totals:` figure `what`: a storm that checked (almost) nothing must not pass.
    fn assert_at_least(&self, what: &str, min: u64) {
        let n = self.total(what);
        assert!(
            n >= min,
            "seed {}: the storm checked too little to mean anything: {what}={n}, under \
             {min}; histories kept in {} (repeat with SHOAL_SEED={})",
            self.seed,
            self.dir.path.display(),
            self.seed
        );
    }
}

/// The tests share the machine's cores: one storm at a time.
static ONE_AT_A_TIME: std::sync::Mutex<()> = std::sync::Mutex::new(());

/// Runs a storm of `secs` seconds on a map of `kind` (workers get `extra` arguments
/// too), then the checks up to `Store::check` (which must pass), then the checker,
/// whose verdict it returns.
fn storm(name: &str, secs: u64, kind: Kind, extra: &[&str]) -> Storm {
    let _one = ONE_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner());
    let seed = seed();
    let nworkers = env_u64("SHOAL_LINEAR_WORKERS", 8) as u32;
    let keys = env_u64("SHOAL_LINEAR_KEYS", 6);
    // Workers operate in bursts: the first ACTIVE µs of every PERIOD µs, all together
    // (CLOCK_MONOTONIC is one clock for all), and kills are aimed at the bursts: most
    // land inside an operation while the history stays small enough to check.
    let period = env_u64("SHOAL_LINEAR_PERIOD_US", 200_000).max(1);
    let active = env_u64("SHOAL_LINEAR_ACTIVE_US", 6_000).min(period);
    let lincheck = checker(seed);
    let mut rng = StdRng::seed_from_u64(seed);
    let dir = Scratch::new(name, seed);
    let rig = Rig::new(env!("CARGO_BIN_EXE_shoal-lin-worker"), &dir.path, seed);
    let opts = Options {
        lock_timeout: Duration::from_secs(30),
        ..Options::default()
    };
    let store = Store::open_with(&rig.store, &opts, shoal::OpenMode::CreateNew).unwrap();
    // Small segments (one main and one stash bucket: 30 slots), so that the keys piling
    // up epoch after epoch split them during the storm, racing its operations. (With
    // default segments the variable storm never split its map.)
    let map = match kind {
        Kind::Variable => Target::Variable(
            store
                .map_with(
                    "t",
                    &MapOptions {
                        segment_buckets: 1,
                        stash_buckets: 1,
                        uids: false,
                        ..Default::default()
                    },
                    true,
                )
                .unwrap(),
        ),
        Kind::Uids => Target::Variable(
            store
                .map_with(
                    "t",
                    &MapOptions {
                        segment_buckets: 1,
                        stash_buckets: 1,
                        uids: true,
                        ..Default::default()
                    },
                    true,
                )
                .unwrap(),
        ),
        Kind::Fixed => Target::Fixed(
            store
                .fixed_map_with(
                    "t",
                    8,
                    8,
                    &FixedOptions {
                        segment_buckets: 1,
                        stash_buckets: 1,
                        ..Default::default()
                    },
                    true,
                )
                .unwrap(),
        ),
    };

    // Keys change every EPOCH ms (all workers move to fresh, absent keys together),
    // so each key's history stays short enough for Porcupine, whose memory grows with
    // the square of a key's history; every second, so that keys pile up and split the
    // small segments.
    let default_epoch = 1000;
    let epoch_ms = env_u64("SHOAL_LINEAR_EPOCH_MS", default_epoch).max(1);
    let epoch_s = epoch_ms.to_string();
    let keys_s = keys.to_string();
    let (period_s, active_s) = (period.to_string(), active.to_string());
    let args = [
        "--kind",
        kind.arg(),
        "--keys",
        &keys_s,
        "--epoch-ms",
        &epoch_s,
        "--period-us",
        &period_s,
        "--active-us",
        &active_s,
        "--nice",
        "10",
    ];
    let args = [&args[..], extra].concat();
    // Rig names a writer's log NAME.log; the checker reads *.lin, so each worker gets
    // its own --log (the later one wins) and Rig's is never created.
    let spawn = |wid: Wid| -> Worker {
        let log = dir.path.join(format!("w{}.{:05}.lin", wid.slot, wid.gen));
        let log = log.to_str().unwrap().to_owned();
        let mut w = rig.spawn("linear", wid, &[&args[..], &["--log", &log]].concat());
        w.log = Some(log.into());
        w
    };
    let first_epoch = now_ns() / (epoch_ms * 1_000_000);
    let mut workers: Vec<Worker> = (0..nworkers)
        .map(|slot| spawn(Wid { slot, gen: 0 }))
        .collect();
    let mut kills = String::new();
    let mut nkills = 0u64;
    let mut newest: Option<usize> = None;
    let start = Instant::now();
    while start.elapsed() < Duration::from_secs(secs) {
        let i = next_kill(&mut rng, newest, period, active, workers.len());
        for w in workers.iter_mut() {
            if let Some(st) = w.child.try_wait().unwrap() {
                panic!(
                    "seed {seed}: {} exited by itself with {st}:\n{}",
                    w.name,
                    tail(&w.err)
                );
            }
        }
        let sent = now_ns();
        let reaped = rig.kill(&mut workers[i]);
        let _ = writeln!(kills, "{sent} {reaped}");
        nkills += 1;
        let old = workers[i].wid;
        workers[i] = spawn(Wid {
            slot: old.slot,
            gen: old.gen + 1,
        });
        newest = Some(i);
    }
    rig.stop_all();
    let bad = rig.wait_all(&mut workers, Duration::from_secs(120));
    assert!(
        bad.is_empty(),
        "seed {seed}: workers failed:\n{}",
        bad.join("\n")
    );

    // The final state, read once more and logged like a worker's reads (with UIDs:
    // each key's UID too, which must be one no earlier incarnation had).
    let mut fin = format!("W 999 0 {}\n", std::process::id());
    let last_epoch = now_ns() / (epoch_ms * 1_000_000);
    for (e, k) in (first_epoch..=last_epoch).flat_map(|e| (0..keys).map(move |k| (e, k))) {
        let key = format!("e{e}k{k}");
        let t0 = now_ns();
        let v = match &map {
            Target::Variable(m) => m.get(key.as_bytes()).unwrap(),
            Target::Fixed(m) => m.get(&lin_fixed_key(e, k)).unwrap(),
        };
        let v = v.map(|b| {
            i64::from_le_bytes(b.as_slice().try_into().expect("an 8-byte value")).to_string()
        });
        let t1 = now_ns();
        let _ = writeln!(
            fin,
            "C {t0} get {key}\nR {t1} {}",
            v.as_deref().unwrap_or("-")
        );
        if let (Target::Variable(m), Kind::Uids) = (&map, kind) {
            let t0 = now_ns();
            let u = m.uid(key.as_bytes()).unwrap();
            let t1 = now_ns();
            let u = u.map_or_else(|| "-".to_string(), |u| u.to_u64().to_string());
            let _ = writeln!(fin, "C {t0} uid {key}\nR {t1} {u}");
        }
    }
    std::fs::write(dir.path.join("zfinal.lin"), fin).unwrap();
    let kpath = dir.path.join("kills.txt");
    std::fs::write(&kpath, kills).unwrap();

    let report = store.check().unwrap();
    assert!(
        report.is_ok(),
        "seed {seed}: Store::check after {nkills} kills (store kept in {}):\n{report}",
        dir.path.display()
    );
    let shape = match &map {
        Target::Variable(m) => {
            let st = m.stats().unwrap();
            format!(
                "{} entries, {} segments, {} splits",
                st.entries, st.segments, st.splits
            )
        }
        Target::Fixed(m) => {
            let st = m.stats().unwrap();
            format!(
                "{} entries, {} segments, {} splits",
                st.entries, st.segments, st.splits
            )
        }
    };
    let cleaned = store.stats().unwrap().chunks_cleaned;

    let t = Instant::now();
    let out = Command::new(&lincheck)
        .arg("-kills")
        .arg(&kpath)
        .arg("-max-wait")
        .arg("10s")
        .arg(&dir.path)
        .output()
        .unwrap_or_else(|e| panic!("seed {seed}: run {}: {e}", lincheck.display()));
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    eprint!("{stdout}{}", String::from_utf8_lossy(&out.stderr));
    eprintln!(
        "{name}: seed {seed}: {secs} s storm on a {} map ({shape}; {cleaned} chunks cleaned), \
         {nworkers} workers, {keys} keys, {nkills} kills; checked in {:?}; histories in {}",
        kind.arg(),
        t.elapsed(),
        dir.path.display()
    );
    Storm {
        seed,
        dir,
        status: out.status,
        stdout,
    }
}

/// Floors on what a storm must have checked: far below what a run produces (a 15 s
/// storm checks 500,000 to 850,000 operations and makes 50 to 65 kills, of which 10 to 20
/// land inside an operation), so only a storm that barely ran fails them.
const MIN_OPS_PER_SEC: u64 = 500;

/// Kills: one every 200-400 ms, so at least 2 a second.
fn min_kills(secs: u64) -> u64 {
    secs * 2
}

#[test]
fn kill_storm_is_linearizable() {
    let secs = env_u64("SHOAL_LINEAR_SECS", 30);
    let s = storm("linear", secs, Kind::Variable, &[]);
    s.assert_linearizable("variable map");
    s.assert_at_least("ops", secs * MIN_OPS_PER_SEC);
    s.assert_at_least("kills", min_kills(secs));
}

#[test]
fn fixed_map_kill_storm_is_linearizable() {
    let secs = env_u64("SHOAL_LINEAR_FIXED_SECS", 15);
    let s = storm("linear-fixed", secs, Kind::Fixed, &[]);
    s.assert_linearizable("fixed-size map");
    s.assert_at_least("ops", secs * MIN_OPS_PER_SEC);
    s.assert_at_least("kills", min_kills(secs));
    s.assert_at_least("pending", 1);
}

#[test]
fn uid_map_kill_storm_is_linearizable() {
    let secs = env_u64("SHOAL_LINEAR_UIDS_SECS", 15);
    let s = storm("linear-uids", secs, Kind::Uids, &[]);
    s.assert_linearizable("map with UIDs");
    s.assert_at_least("ops", secs * MIN_OPS_PER_SEC);
    s.assert_at_least("kills", min_kills(secs));
    s.assert_at_least("pending", 1);
    // A third of the operations act through a handle, and handles outlive their keys.
    s.assert_at_least("byuid", secs * MIN_OPS_PER_SEC / 4);
    s.assert_at_least("stale", 10);
}

/// A storm of 3 s whose workers lie: it must be reported non-linearizable.
fn assert_caught(name: &str, kind: Kind, extra: &[&str]) {
    let s = storm(name, 3, kind, extra);
    assert!(
        s.status.code() == Some(1) && s.stdout.contains("NOT LINEARIZABLE"),
        "seed {}: a {} map's workers' logged lies ({extra:?}) went unnoticed ({}); \
         histories kept in {}",
        s.seed,
        kind.arg(),
        s.status,
        s.dir.path.display()
    );
}

/// The whole chain (worker logs, parsing, model, checker) can fail: a worker that
/// logs, once in a while, a get of a value never written is caught.
#[test]
fn a_lying_worker_is_caught() {
    assert_caught("linear-lie", Kind::Variable, &["--fault-lie", "300"]);
}

/// The same for a fixed-size map.
#[test]
fn a_lying_worker_is_caught_on_a_fixed_map() {
    assert_caught("linear-fixed-lie", Kind::Fixed, &["--fault-lie", "300"]);
}

/// The UID checking can fail: a worker that logs, once in a while, a put_by_uid that
/// found its handle stale as done (an old handle writing to the key's next incarnation,
/// or to a removed key) is caught.
#[test]
fn a_worker_lying_about_stale_handles_is_caught() {
    assert_caught("linear-uids-lie", Kind::Uids, &["--fault-stale", "20"]);
}
