//! `shoal-lin-worker`: one client of the linearizability kill storm
//! (`tests/linearizability.rs`). Runs random operations on a few hot keys whose values
//! are 8-byte integers, and logs each one's invocation and response with CLOCK_MONOTONIC
//! timestamps, for the Porcupine checker in `tools/linearizability`.
//!
//! ```text
//! shoal-lin-worker STORE linear --id N --gen N --seed N --stop FILE --log FILE [options]
//!
//!   --kind KIND         the map's kind, which decides the operations (default variable):
//!                       variable  a variable-size map: get put ins rep del cas add swap take
//!                       fixed     a fixed-size map of 8-byte keys (see lin_fixed_key) and
//!                                 8-byte values: get has put ins rep del cas add upd
//!                       uids      a variable-size map with UIDs: half the variable mix,
//!                                 half uid putu uget uput uupd uadd udel ukey
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
//!   --fault-stale N     FAULT INJECTION (uids): one put_by_uid in N that found its
//!                       handle stale logs that it wrote
//! ```
//!
//! Log (memory-mapped, see `Log`; a SIGKILL leaves whole lines, or at worst a last line
//! without its newline, which the checker ignores, then zero bytes):
//!
//! ```text
//! W <slot> <gen> <pid>                 first line
//! C <ns> <op> <key> [<arg> [<arg>]]    written BEFORE the operation is called
//! R <ns> <out>                         written after it returned Ok (or StaleUid)
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
//! | has | | `1` present / `0` not |
//! | upd | value or `-` | the new value or `-` |
//! | uid | | the key's UID (64-bit form, decimal) or `-` |
//! | putu | value | `ins:<uid>` or `rep:<uid>` |
//! | uget, udel | uid | the value (udel: the removed one), or `stale` |
//! | uput | uid value | `ok` or `stale` |
//! | uupd | uid value-or-`-` | the new value, `-` (removed) or `stale` |
//! | uadd | uid delta | the new value or `stale` |
//! | ukey | uid | `1` names this key / `0` another, or `stale` |
//!
//! `upd` is `update(f)`, `uupd` `update_by_uid(f)`: with a value `a`, `f` makes an absent
//! key `a` and a value `c` `c ^ a`; with `-` it removes the key. The by-UID operations
//! (`u...` with a uid) use a handle this process learned on that key (from `uid` or
//! `putu`), usually the newest, sometimes one of the last few, which may be stale.
//!
//! Values written by put/ins/rep/swap/cas/putu/uput, and the `a` of upd/uupd, are unique
//! to this process: `slot << 48 | gen << 28 | counter`. Any engine error other than a
//! stale UID (by-UID operations) ends the process with status 3.

use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use shoal::{FixedMap, FixedOptions, Map, OpenMode, Options, PutOutcome, Store, Uid};
use shoal_torture::{lin_fixed_key, now_ns};
use std::collections::HashMap;
use std::fmt::Write as _;
use std::path::PathBuf;
use std::process::exit;
use std::time::Duration;

#[derive(Clone, Copy, PartialEq, Eq)]
enum Kind {
    Variable,
    Fixed,
    Uids,
}

struct Args {
    store: PathBuf,
    kind: Kind,
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
    fault_stale: u64,
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
        kind: Kind::Variable,
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
        fault_stale: 0,
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
            "--kind" => {
                a.kind = match val.as_str() {
                    "variable" => Kind::Variable,
                    "fixed" => Kind::Fixed,
                    "uids" => Kind::Uids,
                    _ => usage(&format!("--kind {val:?}: variable, fixed or uids")),
                }
            }
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
            "--fault-stale" => a.fault_stale = num(),
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
    v.map(|b| int1(&b, who))
}

fn int1(b: &[u8], who: &str) -> i64 {
    match <[u8; 8]>::try_from(b) {
        Ok(a) => i64::from_le_bytes(a),
        Err(_) => fail(who, &format!("a value of {} bytes, not 8", b.len())),
    }
}

/// The function of `update` and `update_by_uid` (the checker's model has the same):
/// with an argument `a`, an absent key becomes `a` and a value `c` becomes `c ^ a`;
/// without one, the key is removed.
fn upd_fn(cur: Option<i64>, arg: Option<i64>) -> Option<i64> {
    arg.map(|a| cur.map_or(a, |c| c ^ a))
}

/// The map the worker runs on.
enum Target {
    /// A variable-size map, with or without UIDs.
    Variable(Map),
    /// A fixed-size map of 8-byte keys and values.
    Fixed(FixedMap),
}

/// One worker's state: its log, its random choices, what it last saw of each key, the
/// handles it learned (UID maps), and its unique values.
struct Client<'a> {
    a: &'a Args,
    who: String,
    log: Log,
    rng: StdRng,
    /// The last value this process saw for each key (for compare_and_swap's expectation).
    seen: HashMap<String, Option<i64>>,
    /// UID maps: the last few distinct handles learned for each key, newest first, each
    /// with whether it was found stale (kept: using it again must find it stale again).
    handles: HashMap<String, Vec<(u64, bool)>>,
    counter: i64,
    base: i64,
    /// The current operation's invocation time.
    t0: u64,
}

/// Handles kept per key.
const HANDLES: usize = 4;

impl Client<'_> {
    /// A value unique to this process: `slot << 48 | gen << 28 | counter`.
    fn fresh(&mut self) -> i64 {
        self.counter += 1;
        self.base | (self.counter & 0xFFF_FFFF)
    }

    /// Logs the invocation line.
    fn call(&mut self, args: std::fmt::Arguments) {
        let _ = write!(self.log.line, "C {} ", self.t0);
        let _ = self.log.line.write_fmt(args);
        self.log.emit();
    }

    fn err(&self, e: shoal::Error) -> ! {
        fail(&self.who, &format!("engine error: {e}"))
    }

    /// True once in `n` (never for 0): fault injection.
    fn one_in(&mut self, n: u64) -> bool {
        n > 0 && self.rng.random_range(0..n) == 0
    }

    fn learn(&mut self, key: &str, uid: Uid) {
        let u = uid.to_u64();
        let hs = self.handles.entry(key.to_owned()).or_default();
        hs.retain(|&(h, _)| h != u);
        hs.insert(0, (u, false));
        hs.truncate(HANDLES);
    }

    /// Notes that `u` was found stale.
    fn found_stale(&mut self, key: &str, u: u64) {
        if let Some(h) = self
            .handles
            .get_mut(key)
            .and_then(|hs| hs.iter_mut().find(|h| h.0 == u))
        {
            h.1 = true;
        }
    }

    /// A handle to use on `key`: usually the newest not yet found stale, one time in
    /// four any of the last few (perhaps stale); None if there is none (learn one).
    fn pick(&mut self, key: &str) -> Option<u64> {
        let hs = self.handles.get(key)?;
        if self.rng.random_range(0..4) == 0 {
            let i = self.rng.random_range(0..hs.len());
            return Some(hs[i].0);
        }
        hs.iter().find(|h| !h.1).map(|h| h.0)
    }

    /// A by-key operation on a variable-size map (the `variable` mix).
    fn variable_op(&mut self, map: &Map, key: &str, r: u32) -> String {
        let kb = key.as_bytes();
        match r {
            0..25 => {
                self.call(format_args!("get {key}"));
                let mut v = int(map.get(kb).unwrap_or_else(|e| self.err(e)), &self.who);
                if self.one_in(self.a.fault_lie) {
                    v = Some(-7); // never written: values are >= 0 and adds are positive
                }
                self.seen.insert(key.to_owned(), v);
                opt(v)
            }
            25..37 => {
                let v = self.fresh();
                self.call(format_args!("put {key} {v}"));
                let o = map
                    .put(kb, &v.to_le_bytes())
                    .unwrap_or_else(|e| self.err(e));
                self.seen.insert(key.to_owned(), Some(v));
                match o {
                    PutOutcome::Inserted => "ins",
                    PutOutcome::Replaced => "rep",
                }
                .into()
            }
            37..47 => {
                let v = self.fresh();
                self.call(format_args!("ins {key} {v}"));
                bit(map
                    .put_if_absent(kb, &v.to_le_bytes())
                    .unwrap_or_else(|e| self.err(e)))
                .into()
            }
            47..57 => {
                let v = self.fresh();
                self.call(format_args!("rep {key} {v}"));
                bit(map
                    .put_if_present(kb, &v.to_le_bytes())
                    .unwrap_or_else(|e| self.err(e)))
                .into()
            }
            57..65 => {
                self.call(format_args!("del {key}"));
                let out = bit(map.remove(kb).unwrap_or_else(|e| self.err(e))).into();
                self.seen.insert(key.to_owned(), None);
                out
            }
            65..82 => {
                let (exp, new) = self.cas_args(key);
                self.call(format_args!("cas {key} {} {}", opt(exp), opt(new)));
                let eb = exp.map(i64::to_le_bytes);
                let nb = new.map(i64::to_le_bytes);
                let ok = map
                    .compare_and_swap(kb, eb.as_ref().map(|b| &b[..]), nb.as_ref().map(|b| &b[..]))
                    .unwrap_or_else(|e| self.err(e));
                if ok {
                    self.seen.insert(key.to_owned(), new);
                }
                bit(ok).into()
            }
            82..92 => {
                let d: i64 = self.rng.random_range(1..=1000);
                self.call(format_args!("add {key} {d}"));
                let v = map.add(kb, d).unwrap_or_else(|e| self.err(e));
                self.seen.insert(key.to_owned(), Some(v));
                v.to_string()
            }
            92..96 => {
                let v = self.fresh();
                self.call(format_args!("swap {key} {v}"));
                let old = map
                    .swap(kb, &v.to_le_bytes())
                    .unwrap_or_else(|e| self.err(e));
                self.seen.insert(key.to_owned(), Some(v));
                opt(int(old, &self.who))
            }
            _ => {
                self.call(format_args!("take {key}"));
                let old = map.take(kb).unwrap_or_else(|e| self.err(e));
                self.seen.insert(key.to_owned(), None);
                opt(int(old, &self.who))
            }
        }
    }

    /// compare_and_swap's arguments: expect what we last saw (often still current),
    /// sometimes absence; set a fresh value, sometimes remove.
    fn cas_args(&mut self, key: &str) -> (Option<i64>, Option<i64>) {
        let exp = if self.rng.random_range(0..5) == 0 {
            None
        } else {
            self.seen.get(key).copied().flatten()
        };
        let new = if self.rng.random_range(0..6) == 0 {
            None
        } else {
            Some(self.fresh())
        };
        (exp, new)
    }

    /// update's argument: a fresh value, sometimes none (remove).
    fn upd_arg(&mut self) -> Option<i64> {
        if self.rng.random_range(0..6) == 0 {
            None
        } else {
            Some(self.fresh())
        }
    }

    /// An operation on a fixed-size map (the `fixed` mix).
    fn fixed_op(&mut self, map: &FixedMap, key: &str, kb: &[u8; 8], r: u32) -> String {
        let kb = &kb[..];
        match r {
            0..22 => {
                self.call(format_args!("get {key}"));
                let mut v = int(map.get(kb).unwrap_or_else(|e| self.err(e)), &self.who);
                if self.one_in(self.a.fault_lie) {
                    v = Some(-7); // never written: values are >= 0 and adds are positive
                }
                self.seen.insert(key.to_owned(), v);
                opt(v)
            }
            22..27 => {
                self.call(format_args!("has {key}"));
                bit(map.contains(kb).unwrap_or_else(|e| self.err(e))).into()
            }
            27..39 => {
                let v = self.fresh();
                self.call(format_args!("put {key} {v}"));
                let o = map
                    .put(kb, &v.to_le_bytes())
                    .unwrap_or_else(|e| self.err(e));
                self.seen.insert(key.to_owned(), Some(v));
                match o {
                    PutOutcome::Inserted => "ins",
                    PutOutcome::Replaced => "rep",
                }
                .into()
            }
            39..47 => {
                let v = self.fresh();
                self.call(format_args!("ins {key} {v}"));
                bit(map
                    .put_if_absent(kb, &v.to_le_bytes())
                    .unwrap_or_else(|e| self.err(e)))
                .into()
            }
            47..55 => {
                let v = self.fresh();
                self.call(format_args!("rep {key} {v}"));
                bit(map
                    .put_if_present(kb, &v.to_le_bytes())
                    .unwrap_or_else(|e| self.err(e)))
                .into()
            }
            55..63 => {
                self.call(format_args!("del {key}"));
                let out = bit(map.remove(kb).unwrap_or_else(|e| self.err(e))).into();
                self.seen.insert(key.to_owned(), None);
                out
            }
            63..78 => {
                let (exp, new) = self.cas_args(key);
                self.call(format_args!("cas {key} {} {}", opt(exp), opt(new)));
                let eb = exp.map(i64::to_le_bytes);
                let nb = new.map(i64::to_le_bytes);
                let ok = map
                    .compare_and_swap(kb, eb.as_ref().map(|b| &b[..]), nb.as_ref().map(|b| &b[..]))
                    .unwrap_or_else(|e| self.err(e));
                if ok {
                    self.seen.insert(key.to_owned(), new);
                }
                bit(ok).into()
            }
            78..92 => {
                // Lock-free on a present key (one fetch_add), locked on an absent one.
                let d: i64 = self.rng.random_range(1..=1000);
                self.call(format_args!("add {key} {d}"));
                let v = map.add(kb, d).unwrap_or_else(|e| self.err(e));
                self.seen.insert(key.to_owned(), Some(v));
                v.to_string()
            }
            _ => {
                let arg = self.upd_arg();
                self.call(format_args!("upd {key} {}", opt(arg)));
                let who = self.who.clone();
                let v = map
                    .update(kb, |cur| {
                        upd_fn(cur.map(|c| int1(c, &who)), arg).map(|v| v.to_le_bytes().to_vec())
                    })
                    .unwrap_or_else(|e| self.err(e));
                let v = int(v, &self.who);
                self.seen.insert(key.to_owned(), v);
                opt(v)
            }
        }
    }

    /// An operation on a map with UIDs (the `uids` mix): half by key (the `variable`
    /// mix), half learning handles (uid, put_with_uid) or using them.
    fn uids_op(&mut self, map: &Map, key: &str) -> String {
        if self.rng.random_range(0..2) == 0 {
            let r = self.rng.random_range(0..100);
            return self.variable_op(map, key, r);
        }
        let kb = key.as_bytes();
        let r = self.rng.random_range(0..100);
        // 0..12 uid, 12..24 putu, the rest by UID (or uid while there is no handle).
        let handle = if r < 24 { None } else { self.pick(key) };
        let Some(u) = handle else {
            if !(12..24).contains(&r) {
                // Learn the key's handle (also when there is none to use yet).
                self.call(format_args!("uid {key}"));
                let uid = map.uid(kb).unwrap_or_else(|e| self.err(e));
                if let Some(uid) = uid {
                    self.learn(key, uid);
                }
                return uid.map_or_else(|| "-".into(), |u| u.to_u64().to_string());
            }
            let v = self.fresh();
            self.call(format_args!("putu {key} {v}"));
            let (o, uid) = map
                .put_with_uid(kb, &v.to_le_bytes())
                .unwrap_or_else(|e| self.err(e));
            self.seen.insert(key.to_owned(), Some(v));
            self.learn(key, uid);
            let o = match o {
                PutOutcome::Inserted => "ins",
                PutOutcome::Replaced => "rep",
            };
            return format!("{o}:{}", uid.to_u64());
        };
        let uid = Uid::from_u64(u);
        // A stale handle is a legitimate outcome (the key was removed since); any other
        // error ends the worker.
        macro_rules! by_uid {
            ($e:expr, |$v:pat_param| $ok:expr) => {
                match $e {
                    Ok($v) => $ok,
                    Err(shoal::Error::StaleUid(_)) => {
                        self.found_stale(key, u);
                        "stale".to_string()
                    }
                    Err(e) => self.err(e),
                }
            };
        }
        match r {
            24..42 => {
                self.call(format_args!("uget {key} {u}"));
                by_uid!(map.get_by_uid(uid), |v| {
                    let v = int1(&v, &self.who);
                    self.seen.insert(key.to_owned(), Some(v));
                    v.to_string()
                })
            }
            42..56 => {
                let v = self.fresh();
                self.call(format_args!("uput {key} {u} {v}"));
                match map.put_by_uid(uid, &v.to_le_bytes()) {
                    Ok(()) => {
                        self.seen.insert(key.to_owned(), Some(v));
                        "ok".into()
                    }
                    // FAULT INJECTION: a stale handle's write logged as done.
                    Err(shoal::Error::StaleUid(_)) if self.one_in(self.a.fault_stale) => {
                        "ok".into()
                    }
                    Err(shoal::Error::StaleUid(_)) => {
                        self.found_stale(key, u);
                        "stale".into()
                    }
                    Err(e) => self.err(e),
                }
            }
            56..68 => {
                let arg = self.upd_arg();
                self.call(format_args!("uupd {key} {u} {}", opt(arg)));
                let who = self.who.clone();
                by_uid!(
                    map.update_by_uid(uid, |cur| {
                        upd_fn(Some(int1(cur, &who)), arg).map(|v| v.to_le_bytes().to_vec())
                    }),
                    |v| {
                        let v = int(v, &self.who);
                        self.seen.insert(key.to_owned(), v);
                        opt(v)
                    }
                )
            }
            68..82 => {
                let d: i64 = self.rng.random_range(1..=1000);
                self.call(format_args!("uadd {key} {u} {d}"));
                by_uid!(map.add_by_uid(uid, d), |v| {
                    self.seen.insert(key.to_owned(), Some(v));
                    v.to_string()
                })
            }
            82..92 => {
                self.call(format_args!("udel {key} {u}"));
                by_uid!(map.remove_by_uid(uid), |v| {
                    self.seen.insert(key.to_owned(), None);
                    int1(&v, &self.who).to_string()
                })
            }
            _ => {
                self.call(format_args!("ukey {key} {u}"));
                by_uid!(map.key_by_uid(uid), |k| bit(k == kb).to_string())
            }
        }
    }
}

fn main() {
    let a = parse_args();
    let who = format!("linear-{}.{}", a.id, a.gen);
    let rng = StdRng::seed_from_u64(a.seed ^ shoal::format_hash(11, who.as_bytes()));
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
    let target = match a.kind {
        Kind::Variable | Kind::Uids => {
            let map = store
                .open_map(&a.map)
                .unwrap_or_else(|e| fail(&who, &format!("open map {}: {e}", a.map)));
            if map.has_uids() != (a.kind == Kind::Uids) {
                fail(
                    &who,
                    &format!("map {}: has_uids() is {}", a.map, map.has_uids()),
                );
            }
            Target::Variable(map)
        }
        Kind::Fixed => Target::Fixed(
            store
                .fixed_map_with(&a.map, 8, 8, &FixedOptions::default(), false)
                .unwrap_or_else(|e| fail(&who, &format!("open fixed map {}: {e}", a.map))),
        ),
    };

    let mut c = Client {
        a: &a,
        base: ((a.id as i64) << 48) | ((a.gen as i64 & 0xF_FFFF) << 28),
        who,
        log,
        rng,
        seen: HashMap::new(),
        handles: HashMap::new(),
        counter: 0,
        t0: 0,
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
            std::thread::sleep(Duration::from_micros(c.rng.random_range(0..=a.pause_us)));
        }
        let k = c.rng.random_range(0..a.keys);
        let (key, epoch) = if a.epoch_ms > 0 {
            let e = now_ns() / (a.epoch_ms * 1_000_000);
            (format!("e{e}k{k}"), e)
        } else {
            (format!("k{k}"), 0)
        };
        // The invocation line (each op logs it), then the call, then the response line.
        c.t0 = now_ns();
        let out = match (&target, a.kind) {
            (Target::Fixed(map), _) => {
                let r = c.rng.random_range(0..100);
                c.fixed_op(map, &key, &lin_fixed_key(epoch, k), r)
            }
            (Target::Variable(map), Kind::Uids) => c.uids_op(map, &key),
            (Target::Variable(map), _) => {
                let r = c.rng.random_range(0..100);
                c.variable_op(map, &key, r)
            }
        };
        let t1 = now_ns();
        let _ = write!(c.log.line, "R {t1} {out}");
        c.log.emit();
    }
    c.log.finish();
    println!("{}: {n} operations", c.who);
}
