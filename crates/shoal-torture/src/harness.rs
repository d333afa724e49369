//! The supervisor's side: seeds, spawning `shoal-worker` processes, killing them, and
//! waiting for them with a bound.

use crate::acklog::{parse_log, WriterLog};
use crate::now_ns;
use crate::value::Wid;
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus, Stdio};
use std::time::{Duration, Instant};

/// The run's seed: `SHOAL_SEED` if set, else a random one. Printed either way, so a
/// failing run can be repeated.
pub fn seed() -> u64 {
    let s = match std::env::var("SHOAL_SEED") {
        Ok(s) => s
            .trim()
            .parse()
            .unwrap_or_else(|_| panic!("SHOAL_SEED={s:?} is not a u64")),
        Err(_) => rand::random(),
    };
    eprintln!("SHOAL_SEED={s}");
    s
}

/// A number from the environment, or a default.
pub fn env_u64(name: &str, default: u64) -> u64 {
    std::env::var(name)
        .ok()
        .and_then(|s| s.trim().parse().ok())
        .unwrap_or(default)
}

/// A scratch directory (in /dev/shm when it exists), removed on drop unless the thread
/// is panicking (a failed test), so that the logs of a failure stay for inspection.
pub struct Scratch {
    /// Its path.
    pub path: PathBuf,
}

impl Scratch {
    /// Creates `shoal-torture-NAME-PID-SEED` in /dev/shm (or the temp directory).
    pub fn new(name: &str, seed: u64) -> Scratch {
        let base = if Path::new("/dev/shm").is_dir() {
            PathBuf::from("/dev/shm")
        } else {
            std::env::temp_dir()
        };
        let path = base.join(format!(
            "shoal-torture-{name}-{}-{seed}",
            std::process::id()
        ));
        let _ = std::fs::remove_dir_all(&path);
        std::fs::create_dir_all(&path).unwrap_or_else(|e| panic!("create {}: {e}", path.display()));
        Scratch { path }
    }
}

impl Drop for Scratch {
    fn drop(&mut self) {
        if std::thread::panicking() {
            eprintln!("logs and store kept in {}", self.path.display());
        } else {
            let _ = std::fs::remove_dir_all(&self.path);
        }
    }
}

/// A running (or finished) worker process.
pub struct Worker {
    /// `workload-SLOT.GEN`.
    pub name: String,
    /// Its writer identity (readers have one too, unused).
    pub wid: Wid,
    /// The process.
    pub child: Child,
    /// Its acknowledged log (writers).
    pub log: Option<PathBuf>,
    /// Where its stderr goes.
    pub err: PathBuf,
}

impl Drop for Worker {
    /// A worker still running when its handle goes (a test failing early) is killed, so
    /// that no worker outlives its test.
    fn drop(&mut self) {
        if let Ok(None) = self.child.try_wait() {
            let _ = self.child.kill();
            let _ = self.child.wait();
        }
    }
}

/// One test run: the worker binary, a scratch directory, the store, the stop file.
pub struct Rig {
    /// Path of the `shoal-worker` binary.
    pub exe: PathBuf,
    /// Scratch directory (logs, stderr files, the store).
    pub dir: PathBuf,
    /// The store file.
    pub store: PathBuf,
    /// Created to tell workers to finish.
    pub stop: PathBuf,
    /// The run's seed (passed on to workers, mixed with their identity).
    pub seed: u64,
    /// Whether writers keep an acknowledged log (default true; a long soak turns it off).
    pub logs: bool,
}

impl Rig {
    /// A rig in `dir` (which must exist).
    pub fn new(exe: &str, dir: &Path, seed: u64) -> Rig {
        Rig {
            exe: exe.into(),
            dir: dir.to_owned(),
            store: dir.join("store.shoal"),
            stop: dir.join("STOP"),
            seed,
            logs: true,
        }
    }

    /// Starts `shoal-worker STORE WORKLOAD --id SLOT --gen GEN --seed S --stop F [--log L] ARGS`.
    /// Writers (every workload but `reader`) get a log.
    pub fn spawn(&self, workload: &str, wid: Wid, args: &[&str]) -> Worker {
        let name = format!("{workload}-{wid}");
        let err = self.dir.join(format!("{name}.err"));
        let log = (self.logs && workload != "reader").then(|| self.dir.join(format!("{name}.log")));
        let mut cmd = Command::new(&self.exe);
        cmd.arg(&self.store).arg(workload);
        cmd.args([
            "--id",
            &wid.slot.to_string(),
            "--gen",
            &wid.gen.to_string(),
            "--seed",
            &self.seed.to_string(),
        ]);
        cmd.arg("--stop").arg(&self.stop);
        if let Some(l) = &log {
            cmd.arg("--log").arg(l);
        }
        cmd.args(args);
        let errf = std::fs::File::create(&err).expect("create a worker's stderr file");
        cmd.stdin(Stdio::null()).stdout(Stdio::null()).stderr(errf);
        let child = cmd
            .spawn()
            .unwrap_or_else(|e| panic!("spawn {}: {e} (seed {})", self.exe.display(), self.seed));
        Worker {
            name,
            wid,
            child,
            log,
            err,
        }
    }

    /// SIGKILLs a worker and reaps it. Returns the CLOCK_MONOTONIC time read after it was
    /// reaped (no earlier than its death).
    pub fn kill(&self, w: &mut Worker) -> u64 {
        // Child::kill sends SIGKILL (it errs only if the process was already reaped).
        let _ = w.child.kill();
        let _ = w.child.wait();
        now_ns()
    }

    /// A kill storm: a worker of each of `roles` (slot = its index, started with `args`),
    /// SIGKILLed at the moments [`next_kill`] picks (from the rig's seed) and replaced for
    /// `secs` seconds, then all told to stop and waited for (each must exit 0). Returns
    /// the number of kills. `who` names the run in a failure.
    pub fn kill_storm(
        &self,
        roles: &[&str],
        args: &[&str],
        secs: u64,
        period_us: u64,
        active_us: u64,
        who: &str,
    ) -> u64 {
        let mut rng = StdRng::seed_from_u64(self.seed);
        let mut live: Vec<Worker> = roles
            .iter()
            .enumerate()
            .map(|(i, r)| {
                let wid = Wid {
                    slot: i as u32,
                    gen: 0,
                };
                self.spawn(r, wid, args)
            })
            .collect();
        let began = Instant::now();
        let mut kills = 0;
        let mut newest: Option<usize> = None;
        while began.elapsed() < Duration::from_secs(secs) {
            let i = next_kill(&mut rng, newest, period_us, active_us, live.len());
            if let Some(st) = live[i].child.try_wait().unwrap() {
                panic!(
                    "{who}: {} exited by itself with {st}:\n{}",
                    live[i].name,
                    tail(&live[i].err)
                );
            }
            self.kill(&mut live[i]);
            kills += 1;
            let wid = Wid {
                slot: live[i].wid.slot,
                gen: live[i].wid.gen + 1,
            };
            live[i] = self.spawn(roles[i], wid, args);
            newest = Some(i);
        }
        std::thread::sleep(Duration::from_millis(300));
        self.stop_all();
        let bad = self.wait_all(&mut live, Duration::from_secs(60));
        assert!(bad.is_empty(), "{who}: {}", bad.join("\n"));
        kills
    }

    /// Tells every worker to finish (after its `--min-ops`).
    pub fn stop_all(&self) {
        std::fs::write(&self.stop, b"stop").expect("create the stop file");
    }

    /// Waits for every worker to exit, at most `limit` in all; those still running then are
    /// killed and reported. Returns a description of every worker that did not exit 0.
    pub fn wait_all(&self, workers: &mut [Worker], limit: Duration) -> Vec<String> {
        let start = Instant::now();
        let mut status: Vec<Option<ExitStatus>> = vec![None; workers.len()];
        loop {
            for (w, s) in workers.iter_mut().zip(status.iter_mut()) {
                if s.is_none() {
                    *s = w
                        .child
                        .try_wait()
                        .unwrap_or_else(|e| panic!("wait for {}: {e}", w.name));
                }
            }
            if status.iter().all(Option::is_some) || start.elapsed() > limit {
                break;
            }
            std::thread::sleep(Duration::from_millis(10));
        }
        let mut bad = Vec::new();
        for (w, s) in workers.iter_mut().zip(status) {
            match s {
                Some(s) if s.success() => {}
                Some(s) => bad.push(format!(
                    "{} exited with {s}; its stderr:\n{}",
                    w.name,
                    tail(&w.err)
                )),
                None => {
                    let _ = w.child.kill();
                    let _ = w.child.wait();
                    bad.push(format!(
                        "{} had not finished {:?} after it was told to stop (blocked?); its stderr:\n{}",
                        w.name,
                        limit,
                        tail(&w.err)
                    ));
                }
            }
        }
        bad
    }
}

/// The worker of `n` to SIGKILL next in a kill storm whose workers run in bursts of
/// `active_us` every `period_us` (in step, by the clock): returned at a random moment of
/// the burst of the next period or the one after (sleeping to shortly before that period,
/// when the workers sleep too, so that the supervisor wakes on time, then spinning to the
/// moment); now and then, right after the last kill (`newest`) instead, so that a worker
/// dies inside `Store::open` too.
pub fn next_kill(
    rng: &mut impl Rng,
    newest: Option<usize>,
    period_us: u64,
    active_us: u64,
    n: usize,
) -> usize {
    match newest {
        Some(i) if rng.random_range(0..8) == 0 => {
            std::thread::sleep(Duration::from_micros(rng.random_range(0..3000)));
            i
        }
        _ => {
            let p = period_us * 1000;
            let next = (now_ns() / p + 1 + rng.random_range(0..2)) * p;
            let at = next + rng.random_range(0..active_us.max(1) * 1000);
            let early = next.saturating_sub(2_000_000.min(p / 4));
            std::thread::sleep(Duration::from_nanos(early.saturating_sub(now_ns())));
            while now_ns() < at {
                std::hint::spin_loop();
            }
            rng.random_range(0..n)
        }
    }
}

/// The last 4 KiB of a file, as text.
pub fn tail(p: &Path) -> String {
    let b = std::fs::read(p).unwrap_or_default();
    String::from_utf8_lossy(&b[b.len().saturating_sub(4096)..]).into_owned()
}

/// Reads the logs of the given writers.
pub fn read_logs<'a>(
    workers: impl IntoIterator<Item = &'a Worker>,
) -> Result<Vec<WriterLog>, String> {
    let mut out = Vec::new();
    for w in workers {
        if let Some(l) = w.log.as_ref().filter(|l| l.exists()) {
            match parse_log(l) {
                Ok(log) => {
                    if log.wid != w.wid {
                        return Err(format!(
                            "{}: log says it is writer {}",
                            l.display(),
                            log.wid
                        ));
                    }
                    out.push(log);
                }
                // Killed before it wrote its first line (or created the file): it did nothing.
                Err(e) if e.contains("empty log") => {}
                Err(e) => return Err(e),
            }
        }
    }
    Ok(out)
}

/// The Porcupine checker (`tools/linearizability`): `SHOAL_LINCHECK` if set, else built
/// with `go build` from `src` (the tools folder) into `out`. `seed` names the run in a
/// failure.
pub fn lincheck(src: &Path, out: &Path, seed: u64) -> PathBuf {
    if let Ok(p) = std::env::var("SHOAL_LINCHECK") {
        return p.into();
    }
    // `go` on PATH, else where the official tarball puts it.
    let go = if Command::new("go").arg("version").output().is_ok() {
        PathBuf::from("go")
    } else {
        PathBuf::from("/usr/local/go/bin/go")
    };
    let st = Command::new(go)
        .arg("build")
        .arg("-o")
        .arg(out)
        .arg(".")
        .current_dir(src)
        .env("GOFLAGS", "-mod=readonly -buildvcs=false")
        .status()
        .unwrap_or_else(|e| {
            panic!("seed {seed}: cannot run `go build` (is Go installed and on PATH?): {e}")
        });
    assert!(
        st.success(),
        "seed {seed}: `go build` of {} failed: {st}",
        src.display()
    );
    out.to_owned()
}

/// A kill-storm worker's command line: `STORE ROLE --id N --gen N --seed N --stop FILE
/// --log FILE` and the worker's own options, each `--NAME N` (a number).
pub struct WorkerArgs {
    /// The store.
    pub store: PathBuf,
    /// The worker's role.
    pub role: String,
    /// Its slot.
    pub id: u64,
    /// Its generation (1 more at each restart of the slot).
    pub gen: u64,
    /// The run's seed.
    pub seed: u64,
    /// The file whose appearance tells it to finish.
    pub stop: PathBuf,
    /// Its log (the worker sets the extension).
    pub log: PathBuf,
    nums: Vec<(String, u64)>,
}

impl WorkerArgs {
    /// Parses `args` (the arguments after the program's name); `numbers`: the names of the
    /// worker's own options. A missing value, a number that is not one, an unknown option,
    /// or a missing STORE or ROLE end the process with status 1 and say so.
    pub fn parse(args: &[String], numbers: &[&str]) -> WorkerArgs {
        let fail = |what: String| -> ! {
            eprintln!("{what}");
            std::process::exit(1);
        };
        let [store, role, opts @ ..] = args else {
            fail("usage: STORE ROLE [--NAME VALUE]...".into())
        };
        let mut out = WorkerArgs {
            store: store.into(),
            role: role.clone(),
            id: 0,
            gen: 0,
            seed: 0,
            stop: PathBuf::new(),
            log: PathBuf::new(),
            nums: Vec::new(),
        };
        let mut it = opts.iter();
        while let Some(k) = it.next() {
            let v = it
                .next()
                .unwrap_or_else(|| fail(format!("{k} needs a value")));
            let n = || {
                v.parse::<u64>()
                    .unwrap_or_else(|_| fail(format!("{k}: {v:?} is not a number")))
            };
            match k.as_str() {
                "--id" => out.id = n(),
                "--gen" => out.gen = n(),
                "--seed" => out.seed = n(),
                "--stop" => out.stop = v.into(),
                "--log" => out.log = v.into(),
                k if numbers.contains(&k) => out.nums.push((k.to_string(), n())),
                _ => fail(format!("unknown option {k}")),
            }
        }
        out
    }

    /// The value of the worker's own option `name` (the last one given), or `default`.
    pub fn num(&self, name: &str, default: u64) -> u64 {
        self.nums
            .iter()
            .rev()
            .find(|(k, _)| k == name)
            .map_or(default, |&(_, v)| v)
    }
}
