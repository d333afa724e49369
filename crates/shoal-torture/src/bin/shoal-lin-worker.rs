//! `shoal-lin-worker`: one client of the linearizability kill storm
//! (`tests/linearizability.rs`). Runs random operations on a few hot keys whose values
//! are 8-byte integers, and logs each one's invocation and response with CLOCK_MONOTONIC
//! timestamps, for the Porcupine checker in `tools/linearizability`.
//!
//! ```text
//! shoal-lin-worker STORE linear --id N --gen N --seed N --stop FILE --log FILE [options]
//!
//!   --map NAME          map to use, which must exist (default "t")
//!   --keys N            number of hot keys k0..k<N-1> (default 6)
//!   --epoch-ms E        keys change every E ms: e<EPOCH>k<I>, EPOCH = CLOCK_MONOTONIC / E,
//!                       one clock for all workers; each key's history, which the
//!                       checker checks apart, stays short (default 0: keys k<I>)
//!   --pause-us N        sleep a random 0..N microseconds between operations (default 0)
//!   --period-us P       with --active-us A: operate only in the first A microseconds of
//!   --active-us A       every P (CLOCK_MONOTONIC, so all workers burst together and
//!                       the supervisor aims its kills at the bursts) (default 0: always)
//!   --lock-timeout-ms N store lock timeout (default 30000)
//!   --nice N            lower this process's scheduling priority by N (default 0): the
//!                       supervisor, at 0, then preempts the workers to kill on time
//!   --fault-lie N       FAULT INJECTION, for testing the test: one get in N logs a
//!                       value that was never written
//! ```
//!
//! Log (memory-mapped, see `Log`; a SIGKILL leaves whole lines, or at worst a last line
//! without its newline, which the checker ignores, then zero bytes):
//!
//! ```text
//! W <slot> <gen> <pid>                 first line
//! C <ns> <op> <key> [<arg> [<arg>]]    written BEFORE the operation is called
//! R <ns> <out>                         written after it returned Ok
//! ```
//!
//! `<ns>` is read before writing `C` and after the operation returned, so each logged
//! interval contains the operation's real one. Operations and outputs (`-` = absent /
//! none; values are decimal i64):
//!
//! | op | args | out |
//! |---|---|---|
//! | get | | value or `-` |
//! | put | value | `ins` or `rep` |
//! | ins, rep | value | `1` applied / `0` not |
//! | del | | `1` was present / `0` not |
//! | cas | expected new (each a value or `-`) | `1` / `0` |
//! | add | delta | the new value |
//! | swap | value | the old value or `-` |
//! | take | | the old value or `-` |
//!
//! Values written by put/ins/rep/swap/cas are unique to this process:
//! `slot << 48 | gen << 28 | counter`. Any engine error ends the process with status 3.

use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use shoal::{OpenMode, Options, PutOutcome, Store};
use shoal_torture::now_ns;
use std::collections::HashMap;
use std::fmt::Write as _;
use std::path::PathBuf;
use std::process::exit;
use std::time::Duration;

struct Args {
    store: PathBuf,
    id: u64,
    gen: u64,
    seed: u64,
    map: String,
    keys: u64,
    epoch_ms: u64,
    pause_us: u64,
    period_us: u64,
    active_us: u64,
    stop: Option<PathBuf>,
    log: Option<PathBuf>,
    lock_timeout_ms: u64,
    fault_lie: u64,
    nice: u64,
}

fn usage(msg: &str) -> ! {
    eprintln!("shoal-lin-worker: {msg}\nusage: shoal-lin-worker STORE linear --log FILE [options] (see the source)");
    exit(4)
}

fn parse_args() -> Args {
    let mut it = std::env::args().skip(1);
    let store = it.next().unwrap_or_else(|| usage("missing STORE")).into();
    let workload = it.next().unwrap_or_else(|| usage("missing WORKLOAD"));
    if workload != "linear" {
        usage(&format!("unknown workload {workload:?}"));
    }
    let mut a = Args {
        store,
        id: 0,
        gen: 0,
        seed: 0,
        map: "t".into(),
        keys: 6,
        epoch_ms: 0,
        pause_us: 0,
        period_us: 0,
        active_us: 0,
        stop: None,
        log: None,
        lock_timeout_ms: 30_000,
        fault_lie: 0,
        nice: 0,
    };
    while let Some(flag) = it.next() {
        let val = it
            .next()
            .unwrap_or_else(|| usage(&format!("{flag} needs a value")));
        let num = || {
            val.parse::<u64>()
                .unwrap_or_else(|_| usage(&format!("{flag} {val:?}: not a number")))
        };
        match flag.as_str() {
            "--id" => a.id = num(),
            "--gen" => a.gen = num(),
            "--seed" => a.seed = num(),
            "--map" => a.map = val.clone(),
            "--keys" => a.keys = num().max(1),
            "--epoch-ms" => a.epoch_ms = num(),
            "--pause-us" => a.pause_us = num(),
            "--period-us" => a.period_us = num(),
            "--active-us" => a.active_us = num(),
            "--stop" => a.stop = Some(val.clone().into()),
            "--log" => a.log = Some(val.clone().into()),
            "--lock-timeout-ms" => a.lock_timeout_ms = num(),
            "--fault-lie" => a.fault_lie = num(),
            "--nice" => a.nice = num().min(19),
            _ => usage(&format!("unknown option {flag}")),
        }
    }
    a
}

fn fail(who: &str, msg: &str) -> ! {
    eprintln!("shoal-lin-worker {who} (pid {}): {msg}", std::process::id());
    exit(3)
}

/// The log: a file of `LOG_CAP` bytes (sparse: tmpfs stores only what is written)
/// mapped shared, so a line is logged by copying it into memory, with no system call
/// (a kill then lands inside an operation far more often than inside the logging).
/// Each line's text is stored before its newline, in program order: a SIGKILL
/// (delivered at an instruction boundary; every store before it reaches the file) can
/// leave only a last line without its newline, which the checker ignores. The rest of
/// the file is zero bytes (truncated away at a normal exit).
struct Log {
    base: *mut u8,
    pos: usize,
    f: std::fs::File,
    line: String,
    who: String,
}

const LOG_CAP: usize = 1 << 28;

impl Log {
    fn create(path: &std::path::Path, who: &str) -> Log {
        let f = std::fs::OpenOptions::new()
            .create(true)
            .truncate(true)
            .read(true)
            .write(true)
            .open(path)
            .and_then(|f| f.set_len(LOG_CAP as u64).map(|()| f))
            .unwrap_or_else(|e| fail(who, &format!("log {}: {e}", path.display())));
        use std::os::fd::AsRawFd;
        // SAFETY: a fresh shared mapping of the whole file, which we keep open; nothing
        // else in this process touches it.
        let base = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                LOG_CAP,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_SHARED,
                f.as_raw_fd(),
                0,
            )
        };
        if base == libc::MAP_FAILED {
            fail(
                who,
                &format!("mmap the log: {}", std::io::Error::last_os_error()),
            );
        }
        Log {
            base: base.cast(),
            pos: 0,
            f,
            line: String::new(),
            who: who.to_owned(),
        }
    }

    fn emit(&mut self) {
        let b = self.line.as_bytes();
        if self.pos + b.len() + 1 > LOG_CAP {
            fail(&self.who, "the log is full");
        }
        // SAFETY: in bounds (checked above) of our private use of the mapping.
        unsafe {
            std::ptr::copy_nonoverlapping(b.as_ptr(), self.base.add(self.pos), b.len());
            std::sync::atomic::compiler_fence(std::sync::atomic::Ordering::SeqCst);
            std::ptr::write_volatile(self.base.add(self.pos + b.len()), b'\n');
        }
        self.pos += b.len() + 1;
        self.line.clear();
    }

    /// At a normal exit: cuts the file to what was written.
    fn finish(&self) {
        if let Err(e) = self.f.set_len(self.pos as u64) {
            fail(&self.who, &format!("truncate the log: {e}"));
        }
    }
}

fn opt(v: Option<i64>) -> String {
    v.map_or_else(|| "-".to_string(), |v| v.to_string())
}

fn bit(b: bool) -> &'static str {
    if b {
        "1"
    } else {
        "0"
    }
}

fn int(v: Option<Vec<u8>>, who: &str) -> Option<i64> {
    v.map(|b| match <[u8; 8]>::try_from(b.as_slice()) {
        Ok(a) => i64::from_le_bytes(a),
        Err(_) => fail(who, &format!("a value of {} bytes, not 8", b.len())),
    })
}

fn main() {
    let a = parse_args();
    let who = format!("linear-{}.{}", a.id, a.gen);
    let mut rng = StdRng::seed_from_u64(a.seed ^ shoal::format_hash(11, who.as_bytes()));
    let logp = a.log.clone().unwrap_or_else(|| usage("--log is required"));
    if a.nice > 0 {
        // SAFETY: plain system call; lowering one's own priority needs no privilege.
        unsafe { libc::setpriority(libc::PRIO_PROCESS, 0, a.nice as libc::c_int) };
    }
    let mut log = Log::create(&logp, &who);
    let _ = write!(log.line, "W {} {} {}", a.id, a.gen, std::process::id());
    log.emit();
    let opts = Options {
        lock_timeout: Duration::from_millis(a.lock_timeout_ms),
        ..Options::default()
    };
    let store = Store::open_with(&a.store, &opts, OpenMode::Open)
        .unwrap_or_else(|e| fail(&who, &format!("open {}: {e}", a.store.display())));
    let map = store
        .open_map(&a.map)
        .unwrap_or_else(|e| fail(&who, &format!("open map {}: {e}", a.map)));
    let err = |e: shoal::Error| -> ! { fail(&who, &format!("engine error: {e}")) };

    // The last value this process saw for each key (for compare_and_swap's expectation).
    let mut seen: HashMap<String, Option<i64>> = HashMap::new();
    let mut counter: i64 = 0;
    let base = ((a.id as i64) << 48) | ((a.gen as i64 & 0xF_FFFF) << 28);
    let mut fresh = || {
        counter += 1;
        base | (counter & 0xFFF_FFFF)
    };
    let mut n: u64 = 0;
    loop {
        if n % 32 == 0 && a.stop.as_ref().is_some_and(|p| p.exists()) {
            break;
        }
        n += 1;
        if a.period_us > 0 {
            let phase = now_ns() / 1000 % a.period_us;
            if phase >= a.active_us {
                std::thread::sleep(Duration::from_micros(a.period_us - phase));
            }
        }
        if a.pause_us > 0 {
            std::thread::sleep(Duration::from_micros(rng.random_range(0..=a.pause_us)));
        }
        let k = rng.random_range(0..a.keys);
        let key = if a.epoch_ms > 0 {
            format!("e{}k{k}", now_ns() / (a.epoch_ms * 1_000_000))
        } else {
            format!("k{k}")
        };
        let kb = key.as_bytes();
        let r = rng.random_range(0..100);
        // The invocation line, then the call, then the response line.
        let t0 = now_ns();
        macro_rules! call {
            ($($arg:tt)*) => {{
                let _ = write!(log.line, "C {t0} ");
                let _ = write!(log.line, $($arg)*);
                log.emit();
            }};
        }
        let out: String;
        match r {
            0..25 => {
                call!("get {key}");
                let mut v = int(map.get(kb).unwrap_or_else(|e| err(e)), &who);
                if a.fault_lie > 0 && rng.random_range(0..a.fault_lie) == 0 {
                    v = Some(-7); // never written: values are >= 0 and adds are positive
                }
                seen.insert(key.clone(), v);
                out = opt(v);
            }
            25..37 => {
                let v = fresh();
                call!("put {key} {v}");
                let o = map.put(kb, &v.to_le_bytes()).unwrap_or_else(|e| err(e));
                seen.insert(key.clone(), Some(v));
                out = match o {
                    PutOutcome::Inserted => "ins",
                    PutOutcome::Replaced => "rep",
                }
                .into();
            }
            37..47 => {
                let v = fresh();
                call!("ins {key} {v}");
                out = bit(map.insert(kb, &v.to_le_bytes()).unwrap_or_else(|e| err(e))).into();
            }
            47..57 => {
                let v = fresh();
                call!("rep {key} {v}");
                out = bit(map.replace(kb, &v.to_le_bytes()).unwrap_or_else(|e| err(e))).into();
            }
            57..65 => {
                call!("del {key}");
                out = bit(map.remove(kb).unwrap_or_else(|e| err(e))).into();
                seen.insert(key.clone(), None);
            }
            65..82 => {
                // Expect what we last saw (often still current), sometimes absence.
                let exp = if rng.random_range(0..5) == 0 {
                    None
                } else {
                    seen.get(&key).copied().flatten()
                };
                let new = if rng.random_range(0..6) == 0 {
                    None
                } else {
                    Some(fresh())
                };
                call!("cas {key} {} {}", opt(exp), opt(new));
                let eb = exp.map(i64::to_le_bytes);
                let nb = new.map(i64::to_le_bytes);
                let ok = map
                    .compare_and_swap(kb, eb.as_ref().map(|b| &b[..]), nb.as_ref().map(|b| &b[..]))
                    .unwrap_or_else(|e| err(e));
                if ok {
                    seen.insert(key.clone(), new);
                }
                out = bit(ok).into();
            }
            82..92 => {
                let d: i64 = rng.random_range(1..=1000);
                call!("add {key} {d}");
                let v = map.add(kb, d).unwrap_or_else(|e| err(e));
                seen.insert(key.clone(), Some(v));
                out = v.to_string();
            }
            92..96 => {
                let v = fresh();
                call!("swap {key} {v}");
                out = opt(int(
                    map.swap(kb, &v.to_le_bytes()).unwrap_or_else(|e| err(e)),
                    &who,
                ));
                seen.insert(key.clone(), Some(v));
            }
            _ => {
                call!("take {key}");
                out = opt(int(map.take(kb).unwrap_or_else(|e| err(e)), &who));
                seen.insert(key.clone(), None);
            }
        }
        let t1 = now_ns();
        let _ = write!(log.line, "R {t1} {out}");
        log.emit();
    }
    log.finish();
    println!("{who}: {n} operations");
}
