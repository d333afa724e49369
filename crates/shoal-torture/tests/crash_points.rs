//! The per-fail-point crash driver: a crash at every named step of every mutation.
//!
//! For every fail point in `shoal::failpoints::NAMES` and a schedule of hit counts, a
//! child process (`shoal-crash run`) runs a deterministic workload (see
//! `shoal_torture::crash`: new keys with many splits, overwrites with the cleaner at
//! work, removes, every kind of write, large values, clear, compact) on a fresh store and
//! aborts the HIT-th time it reaches the point: a crash exactly there, locks and intents
//! left as they are. Then this process opens the store (recovering the dead txns),
//! runs `Store::check`, and compares both maps with the model: every acknowledged op is
//! there, and the interrupted op is wholly there or wholly absent per key (the value
//! before or after it, never a torn one). Then it writes once more and checks again.
//!
//! The recover points are reached in a second child: the first one is killed at a write,
//! split, allocation or cleaner step (leaving dead txns, one of them with an intent), then
//! `shoal-crash recover` opens the store, which recovers them, and aborts at the HIT-th
//! recover point; this process recovers after both.
//!
//! Hit counts: a census run (no kill) counts how often the workload reaches each point,
//! H; the schedule is 1, 2, 3 and `SHOAL_CRASH_SPREAD` (default 12) counts spread
//! linearly and as many spread logarithmically up to H (so crashes land in the insert
//! phase, the splits, the cleaner's steps, ...). A (point, hit) counts as exercised only
//! if the child really aborted there. The test fails if any case fails or any name in
//! `NAMES` was never reached.
//!
//! Environment: `SHOAL_SEED` (the workload), `SHOAL_CRASH_SPREAD`, `SHOAL_CRASH_KEYS`
//! (default 400), `SHOAL_CRASH_OPS` (default 3000), `SHOAL_CRASH_ONLY=POINT:HIT` (one
//! case), `SHOAL_CRASH_JOBS` (cases run at once, default 2). Long form (README):
//! `SHOAL_CRASH_SPREAD=60 cargo test --release -p shoal-torture --features failpoints
//! --test crash_points -- --nocapture`.

use shoal::{OpenMode, Store};
use shoal_torture::crash::{self, Op, Params, MAPS, THREADS};
use shoal_torture::harness::{env_u64, seed, tail, Scratch};
use std::collections::{BTreeMap, BTreeSet};
use std::os::unix::process::ExitStatusExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Mutex;
use std::time::{Duration, Instant};

const EXE: &str = env!("CARGO_BIN_EXE_shoal-crash");
const RECOVER: [&str; 2] = ["recover.claimed", "recover.replayed"];
/// Where the first child of a recover case is killed: (point, fraction of its census).
const BASES: [(&str, u64); 4] = [
    ("write.committed", 2),
    ("split.published", 2),
    ("clean.moved", 3),
    ("write.half_applied", 5),
];

#[derive(Clone, Debug)]
struct Case {
    point: &'static str,
    hit: u64,
    /// For recover points: where the first child is killed.
    base: Option<(&'static str, u64)>,
}

#[derive(Default)]
struct Outcome {
    reached: bool,
    /// The first child died in an op (acked ops, whether one was in flight).
    acked: usize,
    problems: Vec<String>,
}

struct Ctx {
    seed: u64,
    p: Params,
    ops: Vec<Op>,
    dir: PathBuf,
    /// Fault injection: the child acknowledges each op before running it.
    lie: bool,
}

impl Ctx {
    fn repro(&self, c: &Case) -> String {
        format!(
            "SHOAL_SEED={} SHOAL_CRASH_KEYS={} SHOAL_CRASH_OPS={} SHOAL_CRASH_ONLY={}:{} cargo test --release -p shoal-torture --features failpoints --test crash_points -- --nocapture",
            self.seed, self.p.keys, self.p.ops, c.point, c.hit
        )
    }

    fn args(&self) -> Vec<String> {
        vec![
            self.seed.to_string(),
            self.p.keys.to_string(),
            self.p.ops.to_string(),
        ]
    }
}

/// Creates a fresh store with the two maps (closed again at once).
fn create(path: &Path) {
    let _ = std::fs::remove_file(path);
    let s = Store::open_with(path, &crash::store_options(), OpenMode::CreateNew)
        .unwrap_or_else(|e| panic!("create {}: {e}", path.display()));
    s.map_with(MAPS[0], &crash::tiny_segments(), true).unwrap();
    s.map_with(MAPS[1], &crash::aux_options(), true).unwrap();
}

enum Exit {
    /// Exited 0: the kill point was not reached.
    Done(String),
    /// Aborted (the kill).
    Killed,
    Failed(String),
}

/// Runs a child to its end (at most 5 minutes: a child that hangs fails the case).
fn child(args: &[String], err: &Path, lie: bool) -> Exit {
    let errf = std::fs::File::create(err).unwrap();
    let out = err.with_extension("out");
    let outf = std::fs::File::create(&out).unwrap();
    let mut cmd = Command::new(EXE);
    if lie {
        cmd.env("SHOAL_CRASH_LIE", "1");
    }
    let mut ch = cmd
        .args(args)
        .stdin(Stdio::null())
        .stdout(outf)
        .stderr(errf)
        .spawn()
        .unwrap_or_else(|e| panic!("spawn {EXE}: {e}"));
    let start = Instant::now();
    let st = loop {
        if let Some(st) = ch.try_wait().unwrap() {
            break st;
        }
        if start.elapsed() > Duration::from_secs(300) {
            let _ = ch.kill();
            let _ = ch.wait();
            return Exit::Failed(format!(
                "child {args:?} still running after 5 minutes (hung); stderr:\n{}",
                tail(err)
            ));
        }
        std::thread::sleep(Duration::from_millis(2));
    };
    if st.signal() == Some(libc::SIGABRT) {
        Exit::Killed
    } else if st.success() {
        Exit::Done(std::fs::read_to_string(&out).unwrap_or_default())
    } else {
        Exit::Failed(format!(
            "child {args:?} ended with {st}; stderr:\n{}",
            tail(err)
        ))
    }
}

/// The ack log: acknowledged ops (0..n in order) and whether the run completed.
fn read_log(p: &Path) -> Result<(usize, bool), String> {
    let t = std::fs::read_to_string(p).unwrap_or_default();
    let complete = &t[..t.rfind('\n').map_or(0, |i| i + 1)];
    let mut n = 0;
    let mut done = false;
    for line in complete.lines() {
        if line == "D" {
            done = true;
        } else if line == format!("A {n}") {
            n += 1;
        } else {
            return Err(format!("ack log: unexpected line {line:?} after {n} acks"));
        }
    }
    Ok((n, done))
}

/// Opens the store in this process, recovers, checks it and compares it with the model;
/// then writes and checks once more.
fn verify(ctx: &Ctx, path: &Path, acked: usize, in_flight: bool) -> Vec<String> {
    let mut problems = Vec::new();
    let s = match Store::open_with(path, &crash::store_options(), OpenMode::Open) {
        Ok(s) => s,
        Err(e) => return vec![format!("reopening after the crash: {e}")],
    };
    match s.check() {
        Ok(r) if r.is_ok() => {}
        Ok(r) => problems.push(format!("Store::check after the crash:\n{r}")),
        Err(e) => problems.push(format!("Store::check after the crash failed: {e}")),
    }
    let maps: Vec<shoal::Map> = match MAPS.iter().map(|n| s.open_map(n)).collect() {
        Ok(m) => m,
        Err(e) => {
            problems.push(format!("opening the maps: {e}"));
            return problems;
        }
    };
    let allowed = crash::allowed(&ctx.ops, acked, in_flight);
    problems.extend(crash::compare(&maps, &allowed));
    // It goes on working: a put, an overwrite with a large value, a remove, a check.
    let r = (|| -> shoal::Result<()> {
        maps[0].put(b"after", b"the crash")?;
        maps[0].put(b"after", &vec![7u8; crash::CHUNK as usize + 10])?;
        maps[1].put(b"after", b"x")?;
        maps[0].remove(b"after")?;
        Ok(())
    })();
    if let Err(e) = r {
        problems.push(format!("writing after recovery: {e}"));
    }
    match s.check() {
        Ok(r) if r.is_ok() => {}
        Ok(r) => problems.push(format!("Store::check after writing on:\n{r}")),
        Err(e) => problems.push(format!("Store::check after writing on failed: {e}")),
    }
    problems
}

fn run_case(ctx: &Ctx, n: usize, c: &Case) -> Outcome {
    let path = ctx.dir.join(format!("case{n}.shoal"));
    let log = ctx.dir.join(format!("case{n}.log"));
    let err = ctx.dir.join(format!("case{n}.err"));
    let (point, mut hit) = c.base.unwrap_or((c.point, c.hit));
    let mut out = Outcome::default();
    let first = loop {
        create(&path);
        let _ = std::fs::remove_file(&log);
        let mut args = vec![
            "run".to_string(),
            path.display().to_string(),
            log.display().to_string(),
        ];
        args.extend(ctx.args());
        args.extend([point.to_string(), hit.to_string()]);
        let first = child(&args, &err, ctx.lie);
        // A recover case needs its first child killed anywhere near the base point. How
        // often a run passes a point varies with the store's random hash seed (the
        // cleaner's moves: 881 to 4,600 per census here, and one run passed fewer than a
        // third of its census's), so a base never reached is tried again lower.
        if c.base.is_some() && matches!(first, Exit::Done(_)) && hit > 1 {
            hit = (hit / 4).max(1);
            continue;
        }
        break first;
    };
    let killed = match first {
        Exit::Killed => true,
        Exit::Done(_) => false,
        Exit::Failed(e) => {
            out.problems.push(e);
            return out;
        }
    };
    let (acked, done) = match read_log(&log) {
        Ok(x) => x,
        Err(e) => {
            out.problems.push(e);
            return out;
        }
    };
    out.acked = acked;
    if killed == done || (done && acked != ctx.ops.len()) {
        out.problems.push(format!(
            "the child was {}killed, but its log has {acked} acks and {}a D line",
            if killed { "" } else { "not " },
            if done { "" } else { "no " }
        ));
        return out;
    }
    if c.base.is_some() {
        if !killed {
            out.problems.push(format!(
                "the first child never reached its kill point {point}:{hit}"
            ));
            return out;
        }
        let args = vec![
            "recover".to_string(),
            path.display().to_string(),
            c.point.to_string(),
            c.hit.to_string(),
        ];
        match child(&args, &ctx.dir.join(format!("case{n}.rec.err")), false) {
            Exit::Killed => out.reached = true,
            Exit::Done(_) => {}
            Exit::Failed(e) => {
                out.problems.push(format!("the recovering child: {e}"));
                return out;
            }
        }
    } else {
        out.reached = killed;
    }
    out.problems.extend(verify(ctx, &path, acked, killed));
    if out.problems.is_empty() {
        for p in [&path, &log, &err] {
            let _ = std::fs::remove_file(p);
        }
        let _ = std::fs::remove_file(err.with_extension("out"));
        let _ = std::fs::remove_file(ctx.dir.join(format!("case{n}.rec.err")));
        let _ = std::fs::remove_file(ctx.dir.join(format!("case{n}.rec.out")));
    }
    out
}

/// 1, 2, 3, and `spread` hits spread linearly and `spread` logarithmically up to `h`.
fn schedule(h: u64, spread: u64) -> Vec<u64> {
    let mut s: BTreeSet<u64> = [1, 2, 3].into_iter().collect();
    for i in 1..=spread {
        s.insert((h * i / spread).max(1));
        s.insert(((h as f64).powf(i as f64 / spread as f64).round() as u64).max(1));
    }
    s.into_iter().collect()
}

fn census(ctx: &Ctx) -> BTreeMap<String, u64> {
    let path = ctx.dir.join("census.shoal");
    let log = ctx.dir.join("census.log");
    create(&path);
    let mut args = vec![
        "census".to_string(),
        path.display().to_string(),
        log.display().to_string(),
    ];
    args.extend(ctx.args());
    let out = match child(&args, &ctx.dir.join("census.err"), false) {
        Exit::Done(out) => out,
        Exit::Killed => panic!("seed {}: the census run aborted", ctx.seed),
        Exit::Failed(e) => panic!("seed {}: the census run failed: {e}", ctx.seed),
    };
    // The uninterrupted run ends in exactly the model's final state.
    let problems = verify(ctx, &path, ctx.ops.len(), false);
    assert!(
        problems.is_empty(),
        "seed {}: after the census run (no crash):\n{}",
        ctx.seed,
        problems.join("\n")
    );
    let _ = std::fs::remove_file(&path);
    out.lines()
        .filter_map(|l| {
            let f: Vec<&str> = l.split(' ').collect();
            (f.len() == 3 && f[0] == "HITS").then(|| (f[1].to_string(), f[2].parse().unwrap()))
        })
        .collect()
}

/// The fail points this driver's workload (a variable-size map without UIDs) reaches: all
/// but the fixed-size maps' own (`fixed.*`), which `crates/shoal/tests/fixed.rs`
/// (`crash_at_every_fail_point`) kills at with its own model, and the UID table's
/// (`uid.*`), which `crates/shoal/tests/uid.rs` (`uid_writes_survive_a_crash_at_every_step`)
/// kills at.
fn points() -> &'static [&'static str] {
    static P: std::sync::OnceLock<Vec<&'static str>> = std::sync::OnceLock::new();
    P.get_or_init(|| {
        shoal::failpoints::NAMES
            .iter()
            .copied()
            .filter(|n| !n.starts_with("fixed.") && !n.starts_with("uid."))
            .collect()
    })
}

#[test]
fn a_crash_at_every_fail_point_is_recovered() {
    let seed = seed();
    let p = Params {
        seed,
        keys: env_u64("SHOAL_CRASH_KEYS", 400) as usize,
        ops: env_u64("SHOAL_CRASH_OPS", 3000) as usize,
    };
    let spread = env_u64("SHOAL_CRASH_SPREAD", 12);
    let jobs = env_u64("SHOAL_CRASH_JOBS", 2).max(1) as usize;
    let scratch = Scratch::new("crash", seed);
    let ctx = Ctx {
        seed,
        p,
        ops: crash::generate(&p),
        dir: scratch.path.clone(),
        lie: false,
    };
    let start = Instant::now();
    let hits = census(&ctx);
    eprintln!("census (seed {seed}, {} ops): {hits:?}", ctx.ops.len());

    let mut cases = Vec::new();
    for &point in points() {
        if RECOVER.contains(&point) {
            for hit in 1..=THREADS as u64 + 1 {
                for (b, frac) in BASES {
                    let h = hits.get(b).copied().unwrap_or(0);
                    cases.push(Case {
                        point,
                        hit,
                        base: Some((b, (h / frac).max(1))),
                    });
                }
            }
        } else {
            for hit in schedule(hits.get(point).copied().unwrap_or(0), spread) {
                cases.push(Case {
                    point,
                    hit,
                    base: None,
                });
            }
        }
    }
    if let Ok(only) = std::env::var("SHOAL_CRASH_ONLY") {
        let (pt, h) = only.split_once(':').expect("SHOAL_CRASH_ONLY=POINT:HIT");
        let h: u64 = h.parse().expect("SHOAL_CRASH_ONLY=POINT:HIT");
        cases.retain(|c| c.point == pt && c.hit == h);
        if cases.is_empty() {
            cases.push(Case {
                point: shoal::failpoints::NAMES
                    .iter()
                    .find(|n| **n == pt)
                    .expect("unknown point"),
                hit: h,
                base: RECOVER.contains(&pt).then_some(("write.committed", 10)),
            });
        }
    }

    let next = AtomicUsize::new(0);
    let results: Mutex<Vec<(usize, Outcome)>> = Mutex::new(Vec::new());
    std::thread::scope(|s| {
        for _ in 0..jobs {
            s.spawn(|| loop {
                let n = next.fetch_add(1, Ordering::SeqCst);
                let Some(c) = cases.get(n) else { return };
                let o = run_case(&ctx, n, c);
                results.lock().unwrap().push((n, o));
            });
        }
    });
    let mut results = results.into_inner().unwrap();
    results.sort_by_key(|r| r.0);

    let mut failures = Vec::new();
    let mut reached: BTreeMap<&str, Vec<u64>> = BTreeMap::new();
    let mut tried: BTreeMap<&str, usize> = BTreeMap::new();
    let mut exercised = BTreeSet::new();
    for (n, o) in &results {
        let c = &cases[*n];
        *tried.entry(c.point).or_default() += 1;
        if o.reached {
            reached.entry(c.point).or_default().push(c.hit);
            exercised.insert((c.point, c.hit, c.base));
        }
        if !o.problems.is_empty() {
            failures.push(format!(
                "crash at {}:{}{} (after {} acknowledged ops) FAILED:\n{}\nrepeat with: {}",
                c.point,
                c.hit,
                c.base
                    .map(|(b, h)| format!(" after a first crash at {b}:{h}"))
                    .unwrap_or_default(),
                o.acked,
                o.problems.join("\n"),
                ctx.repro(c)
            ));
        }
    }
    for &point in points() {
        let r = reached.get(point).cloned().unwrap_or_default();
        eprintln!(
            "  {point:20} census {:>6}  cases {:>3}  crashed at hits {:?}",
            hits.get(point).map_or("-".into(), |h| h.to_string()),
            tried.get(point).copied().unwrap_or(0),
            r.iter().collect::<BTreeSet<_>>()
        );
    }
    let never: Vec<&str> = points()
        .iter()
        .copied()
        .filter(|n| !reached.contains_key(n))
        .collect();
    eprintln!(
        "crash points: {} distinct (point, hit[, first crash]) crashes exercised of {} cases, {} fail points of {}; never reached: {:?}; seed {seed}, {} keys, {} ops, spread {spread}; {:.1} s",
        exercised.len(),
        cases.len(),
        reached.len(),
        points().len(),
        never,
        p.keys,
        p.ops,
        start.elapsed().as_secs_f64()
    );
    assert!(
        failures.is_empty(),
        "seed {seed}: {} of {} crash cases failed:\n{}",
        failures.len(),
        cases.len(),
        failures.join("\n\n")
    );
    if std::env::var("SHOAL_CRASH_ONLY").is_err() {
        assert!(
            never.is_empty(),
            "seed {seed}: fail points never reached by the workload: {never:?}"
        );
    }
}

/// The driver catches what it claims to: a child that acknowledges each op before running
/// it (`SHOAL_CRASH_LIE`), killed in the middle of a put, leaves an acknowledged put
/// undone, and the comparison with the model must say so.
#[test]
fn a_lost_acknowledged_write_is_caught() {
    let seed = 11;
    let p = Params {
        seed,
        keys: 400,
        ops: 1000,
    };
    let scratch = Scratch::new("crash-lie", seed);
    let ctx = Ctx {
        seed,
        p,
        ops: crash::generate(&p),
        dir: scratch.path.clone(),
        lie: true,
    };
    // The first 400 ops are puts of new keys: hit 100 of write.locked is in one of them,
    // before anything is written.
    let c = Case {
        point: "write.locked",
        hit: 100,
        base: None,
    };
    let o = run_case(&ctx, 0, &c);
    assert!(o.reached, "the kill point was not reached");
    assert!(
        o.problems.iter().any(|p| p.contains("is absent; allowed")),
        "the lost acknowledged put was not reported: {:?}",
        o.problems
    );
}
