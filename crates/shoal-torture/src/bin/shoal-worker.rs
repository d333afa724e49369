//! `shoal-worker`: one process of a multi-process test. Opens an existing store and runs
//! one workload on one map until it has done `--ops` operations or the `--stop` file
//! appears (and it has done at least `--min-ops`).
//!
//! ```text
//! shoal-worker STORE WORKLOAD [options]
//!
//! workloads:
//!   writer    put/swap/insert/replace/remove/take on its own disjoint keys d<ID>:<i>
//!   overlap   the same on the hot keys h:<i> that every writer shares
//!   mixed     both (--hot-pct percent of operations on hot keys)
//!   reader    iterates and reads everything, validating every value
//!   reopen    opens the store, reads a hot key, closes it again, --ops times (each
//!             open reads and validates the file's header afresh)
//!
//! options:
//!   --id N              lineage slot: owns the disjoint keys d<N>:*   (default 0)
//!   --gen N             generation in the lineage, +1 for each replacement (default 0)
//!   --seed N            random seed, mixed with id and gen (default 0)
//!   --map NAME          map to use, which must exist (default "t")
//!   --keys N            size of the window of disjoint keys (default 1000)
//!   --advance N         the window moves up one key every N operations; each
//!                       generation starts --gen-shift higher (0: fixed window) (default 0)
//!   --gen-shift N       how much higher each generation's window starts (default keys/2;
//!                       0 keeps a lineage on the same keys forever, as the soak does)
//!   --hot N             number of hot keys (default 32)
//!   --hot-pct N         mixed: percent of operations on hot keys (default 25)
//!   --read-pct N        percent of extra get()s checked against what is known (default 10)
//!   --ops N             stop after N operations (0: only at the stop file) (default 0)
//!   --min-ops N         at the stop file, go on until N operations were done (default 0)
//!   --stop FILE         stop when this file exists
//!   --log FILE          acknowledged log (see shoal_torture::acklog); writers
//!   --large-every N     one value-storing operation in N stores a large value (default 0)
//!   --large-bytes N     large values are N to 3N bytes (default 70000)
//!   --compact-every N   writers: Store::compact (clean, merge free runs, release their
//!                       pages) every N operations, between two of them (default 0: never)
//!   --lock-timeout-ms N store lock timeout (default 30000)
//!   --fault-lie N       FAULT INJECTION, for testing the tests: one put in N is logged
//!                       as done but not done (the writer's own checks are then off)
//! ```
//!
//! Every writer is an acknowledged-log writer when given `--log`: before each operation
//! it appends a `B` line, after it returns Ok an `A` line, each with one write(2).
//!
//! Self-checks (exit status 2, with a message on stderr): every value read is validated
//! byte for byte; on its own disjoint keys a writer knows the state it left (generation 0
//! knows its keys start absent; a replacement learns a key's state at its first change
//! of it, since a killed predecessor's in-flight operation may still be applied until
//! then) and checks every outcome, old value and read against it; a reader checks that
//! for each (key, writer lineage) the sequence numbers it reads never go backwards.
//! Any error from the engine (a timeout included) is exit status 3.

use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use shoal::{OpenMode, Options, PutOutcome, Store};
use shoal_torture::acklog::{AckLog, OpKind};
use shoal_torture::now_ns;
use shoal_torture::value::{check_value, disjoint_key, first_seq, hot_key, make_value, Wid};
use std::collections::{HashMap, HashSet};
use std::path::PathBuf;
use std::process::exit;
use std::time::Duration;

struct Args {
    store: PathBuf,
    workload: String,
    id: u32,
    gen: u32,
    seed: u64,
    map: String,
    keys: u64,
    advance: u64,
    gen_shift: Option<u64>,
    hot: u64,
    hot_pct: u32,
    read_pct: u32,
    ops: u64,
    min_ops: u64,
    stop: Option<PathBuf>,
    log: Option<PathBuf>,
    large_every: u32,
    large_bytes: u64,
    compact_every: u64,
    lock_timeout_ms: u64,
    fault_lie: u32,
}

fn usage(msg: &str) -> ! {
    eprintln!("shoal-worker: {msg}\nusage: shoal-worker STORE writer|overlap|mixed|reader|reopen [options] (see the source)");
    exit(4)
}

fn parse_args() -> Args {
    let mut it = std::env::args().skip(1);
    let store = it.next().unwrap_or_else(|| usage("missing STORE")).into();
    let workload = it.next().unwrap_or_else(|| usage("missing WORKLOAD"));
    if !["writer", "overlap", "mixed", "reader", "reopen"].contains(&workload.as_str()) {
        usage(&format!("unknown workload {workload:?}"));
    }
    let mut a = Args {
        store,
        workload,
        id: 0,
        gen: 0,
        seed: 0,
        map: "t".into(),
        keys: 1000,
        advance: 0,
        gen_shift: None,
        hot: 32,
        hot_pct: 25,
        read_pct: 10,
        ops: 0,
        min_ops: 0,
        stop: None,
        log: None,
        large_every: 0,
        large_bytes: 70_000,
        compact_every: 0,
        lock_timeout_ms: 30_000,
        fault_lie: 0,
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
            "--id" => a.id = num() as u32,
            "--gen" => a.gen = num() as u32,
            "--seed" => a.seed = num(),
            "--map" => a.map = val.clone(),
            "--keys" => a.keys = num().max(1),
            "--advance" => a.advance = num(),
            "--gen-shift" => a.gen_shift = Some(num()),
            "--hot" => a.hot = num().max(1),
            "--hot-pct" => a.hot_pct = num().min(100) as u32,
            "--read-pct" => a.read_pct = num().min(100) as u32,
            "--ops" => a.ops = num(),
            "--min-ops" => a.min_ops = num(),
            "--stop" => a.stop = Some(val.clone().into()),
            "--log" => a.log = Some(val.clone().into()),
            "--large-every" => a.large_every = num() as u32,
            "--large-bytes" => a.large_bytes = num(),
            "--compact-every" => a.compact_every = num(),
            "--lock-timeout-ms" => a.lock_timeout_ms = num(),
            "--fault-lie" => a.fault_lie = num() as u32,
            _ => usage(&format!("unknown option {flag}")),
        }
    }
    a
}

/// Ends the process: 2 for a failed self-check, 3 for an engine error.
fn fail(code: i32, who: &str, msg: &str) -> ! {
    eprintln!("shoal-worker {who} (pid {}): {msg}", std::process::id());
    exit(code)
}

/// Whether to stop before the next operation.
struct Stopper {
    ops: u64,
    min_ops: u64,
    stop: Option<PathBuf>,
    stopping: bool,
}

impl Stopper {
    fn done(&mut self, n: u64) -> bool {
        if self.ops > 0 && n >= self.ops {
            return true;
        }
        if !self.stopping && n % 32 == 0 {
            self.stopping = self.stop.as_ref().is_some_and(|p| p.exists());
            // A supervisor that died (killed, or timed out) never creates the stop file,
            // and its scratch directory may be gone: an orphan stops at once rather than
            // running forever (seen when a soak run was killed from outside).
            if std::os::unix::process::parent_id() == 1 {
                std::process::exit(0);
            }
        }
        self.stopping && n >= self.min_ops
    }
}

fn main() {
    let a = parse_args();
    let wid = Wid {
        slot: a.id,
        gen: a.gen,
    };
    let who = format!("{}-{wid}", a.workload);
    let opts = Options {
        lock_timeout: Duration::from_millis(a.lock_timeout_ms),
        ..Options::default()
    };
    let rng = StdRng::seed_from_u64(a.seed ^ shoal::format_hash(7, who.as_bytes()));
    if a.workload == "reopen" {
        let n = reopen(&a, &who, &opts, rng);
        println!("{who}: {n} opens");
        return;
    }
    let store = Store::open_with(&a.store, &opts, OpenMode::Open)
        .unwrap_or_else(|e| fail(3, &who, &format!("open {}: {e}", a.store.display())));
    let map = store
        .open_map(&a.map)
        .unwrap_or_else(|e| fail(3, &who, &format!("open map {}: {e}", a.map)));
    let n = if a.workload == "reader" {
        reader(&a, &who, &map, rng)
    } else {
        writer(&a, wid, &who, &store, &map, rng)
    };
    println!("{who}: {n} operations");
}

/// What a writer knows about one of its own disjoint keys.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum Known {
    /// Unknown: a killed predecessor's operation on it may still be pending.
    Unknown,
    Absent,
    /// Present with our value of this (seq, pad).
    Present(u64, u64),
}

fn pick_kind(rng: &mut StdRng, hot: bool) -> OpKind {
    let r = rng.random_range(0..100);
    let table: [(u32, OpKind); 6] = if hot {
        [
            (45, OpKind::Put),
            (10, OpKind::Swap),
            (10, OpKind::Insert),
            (5, OpKind::Replace),
            (20, OpKind::Remove),
            (10, OpKind::Take),
        ]
    } else {
        [
            (40, OpKind::Put),
            (10, OpKind::Swap),
            (10, OpKind::Insert),
            (10, OpKind::Replace),
            (20, OpKind::Remove),
            (10, OpKind::Take),
        ]
    };
    let mut acc = 0;
    for (w, k) in table {
        acc += w;
        if r < acc {
            return k;
        }
    }
    OpKind::Put
}

fn pick_pad(rng: &mut StdRng, a: &Args) -> u64 {
    if a.large_every > 0 && rng.random_range(0..a.large_every) == 0 {
        // From one to three times the size: runs of different lengths, so that freed runs
        // are split for shorter records and merged for longer ones (alloc::coalesce).
        return a.large_bytes + rng.random_range(0..2 * a.large_bytes + 1);
    }
    match rng.random_range(0..100) {
        0..70 => rng.random_range(0..48),
        70..97 => rng.random_range(48..400),
        _ => rng.random_range(400..3000),
    }
}

fn writer(a: &Args, wid: Wid, who: &str, store: &Store, map: &shoal::Map, mut rng: StdRng) -> u64 {
    let mut log = a.log.as_ref().map(|p| {
        AckLog::create(p, wid)
            .unwrap_or_else(|e| fail(3, who, &format!("log {}: {e}", p.display())))
    });
    let logged = |r: std::io::Result<()>| {
        if let Err(e) = r {
            fail(3, who, &format!("writing the log: {e}"));
        }
    };
    let mut known: HashMap<String, Known> = HashMap::new();
    // Generation 0 is the lineage's first writer: its keys were never written.
    let default_known = if a.gen == 0 {
        Known::Absent
    } else {
        Known::Unknown
    };
    let mut stopper = Stopper {
        ops: a.ops,
        min_ops: a.min_ops,
        stop: a.stop.clone(),
        stopping: false,
    };
    let mut seq = first_seq(a.gen);
    let mut done = 0u64;
    let engine =
        |e: shoal::Error, what: &str| -> ! { fail(3, who, &format!("{what}: engine error: {e}")) };
    while !stopper.done(done) {
        done += 1;
        let hot = match a.workload.as_str() {
            "writer" => false,
            "overlap" => true,
            _ => rng.random_range(0..100) < a.hot_pct,
        };
        let key = if hot {
            hot_key(rng.random_range(0..a.hot))
        } else {
            let shift = a.gen_shift.unwrap_or(a.keys / 2);
            let lo = a.gen as u64 * shift + done.checked_div(a.advance).unwrap_or(0);
            disjoint_key(a.id, lo + rng.random_range(0..a.keys))
        };
        let state = if hot {
            Known::Unknown
        } else {
            *known.get(&key).unwrap_or(&default_known)
        };
        // A checked read first, sometimes.
        if rng.random_range(0..100) < a.read_pct {
            let got = map
                .get(key.as_bytes())
                .unwrap_or_else(|e| engine(e, &format!("get {key}")));
            if let Some(v) = &got {
                if let Err(e) = check_value(&key, v) {
                    fail(2, who, &format!("get {key}: {e}"));
                }
            }
            match (
                if a.fault_lie > 0 {
                    Known::Unknown
                } else {
                    state
                },
                &got,
            ) {
                (Known::Absent, Some(_)) => fail(
                    2,
                    who,
                    &format!("get {key}: present, but this writer left it absent"),
                ),
                (Known::Present(..), None) => fail(
                    2,
                    who,
                    &format!("get {key}: absent, but this writer left it present"),
                ),
                (Known::Present(s, p), Some(v)) if *v != make_value(&key, wid, s, p) => fail(
                    2,
                    who,
                    &format!("get {key}: not the value of seq {s} this writer left (lost update)"),
                ),
                _ => {}
            }
        }
        if a.compact_every > 0 && seq % a.compact_every == a.compact_every - 1 {
            store
                .compact()
                .unwrap_or_else(|e| fail(3, who, &format!("compact: {e}")));
        }
        let kind = pick_kind(&mut rng, hot);
        let pad = if kind.stores_value() {
            pick_pad(&mut rng, a)
        } else {
            0
        };
        seq += 1;
        let value = if kind.stores_value() {
            make_value(&key, wid, seq, pad)
        } else {
            Vec::new()
        };
        let start = now_ns();
        if let Some(l) = &mut log {
            logged(l.begin(seq, kind, &key, pad, start));
        }
        let what = format!("seq {seq} {kind:?} {key}");
        let k = key.as_bytes();
        let (mutated, present, old) = match kind {
            OpKind::Put if a.fault_lie > 0 && rng.random_range(0..a.fault_lie) == 0 => {
                (true, false, None)
            }
            OpKind::Put => {
                let o = map.put(k, &value).unwrap_or_else(|e| engine(e, &what));
                (true, o == PutOutcome::Replaced, None)
            }
            OpKind::Swap => {
                let o = map.swap(k, &value).unwrap_or_else(|e| engine(e, &what));
                (true, o.is_some(), o)
            }
            OpKind::Insert => {
                let r = map
                    .put_if_absent(k, &value)
                    .unwrap_or_else(|e| engine(e, &what));
                (r, !r, None)
            }
            OpKind::Replace => {
                let r = map
                    .put_if_present(k, &value)
                    .unwrap_or_else(|e| engine(e, &what));
                (r, r, None)
            }
            OpKind::Remove => {
                let r = map.remove(k).unwrap_or_else(|e| engine(e, &what));
                (r, r, None)
            }
            OpKind::Take => {
                let o = map.take(k).unwrap_or_else(|e| engine(e, &what));
                (o.is_some(), o.is_some(), o)
            }
        };
        let end = now_ns();
        if let Some(l) = &mut log {
            logged(l.ack(seq, end, mutated, present));
        }
        if let Some(v) = &old {
            if let Err(e) = check_value(&key, v) {
                fail(2, who, &format!("{what}: old value: {e}"));
            }
        }
        match state {
            _ if a.fault_lie > 0 => {}
            Known::Unknown => {}
            Known::Absent if present => fail(
                2,
                who,
                &format!("{what}: found the key, but this writer left it absent"),
            ),
            Known::Present(..) if !present => fail(
                2,
                who,
                &format!("{what}: key absent, but this writer left it present (lost update)"),
            ),
            Known::Present(s, p) => {
                if old
                    .as_ref()
                    .is_some_and(|v| *v != make_value(&key, wid, s, p))
                {
                    fail(2, who, &format!("{what}: old value is not that of seq {s} this writer left (lost update)"));
                }
            }
            Known::Absent => {}
        }
        if !hot && mutated {
            known.insert(
                key,
                if kind.stores_value() {
                    Known::Present(seq, pad)
                } else {
                    Known::Absent
                },
            );
        }
    }
    done
}

fn reader(a: &Args, who: &str, map: &shoal::Map, mut rng: StdRng) -> u64 {
    let mut stopper = Stopper {
        ops: a.ops,
        min_ops: a.min_ops,
        stop: a.stop.clone(),
        stopping: false,
    };
    // Highest sequence number read per (key, writer lineage): never goes back.
    let mut last: HashMap<(String, u32), u64> = HashMap::new();
    let mut keys: Vec<String> = Vec::new();
    let mut done = 0u64;
    let engine =
        |e: shoal::Error, what: &str| -> ! { fail(3, who, &format!("{what}: engine error: {e}")) };
    let seen = |key: &str, v: &[u8], last: &mut HashMap<(String, u32), u64>| {
        let p = check_value(key, v).unwrap_or_else(|e| fail(2, who, &format!("read {key}: {e}")));
        let e = last.entry((key.to_owned(), p.wid.slot)).or_insert(0);
        if p.seq < *e {
            fail(
                2,
                who,
                &format!("read {key}: seq {} of lineage {} after having read seq {} (a newer value went back)", p.seq, p.wid.slot, *e),
            );
        }
        *e = p.seq;
    };
    while !stopper.done(done) {
        if done % 2000 == 0 {
            // A full pass: every key once, every value valid.
            let mut once = HashSet::new();
            keys.clear();
            for item in map.iter() {
                let (k, v) = item.unwrap_or_else(|e| engine(e, "iterate"));
                let ks = String::from_utf8(k)
                    .unwrap_or_else(|_| fail(2, who, "iteration returned a non-UTF-8 key"));
                if !once.insert(ks.clone()) {
                    fail(2, who, &format!("iteration returned {ks} twice"));
                }
                seen(&ks, &v, &mut last);
                keys.push(ks);
            }
            map.len().unwrap_or_else(|e| engine(e, "len"));
        } else {
            let key = if keys.is_empty() || rng.random_range(0..4) == 0 {
                match rng.random_range(0..2) {
                    0 => hot_key(rng.random_range(0..a.hot)),
                    _ => disjoint_key(rng.random_range(0..8), rng.random_range(0..a.keys)),
                }
            } else {
                keys[rng.random_range(0..keys.len())].clone()
            };
            if let Some(v) = map
                .get(key.as_bytes())
                .unwrap_or_else(|e| engine(e, &format!("get {key}")))
            {
                seen(&key, &v, &mut last);
            }
        }
        done += 1;
    }
    done
}

/// Opens and closes the store again and again (the last handle dropped each time, so each
/// open maps the file and validates its header anew).
fn reopen(a: &Args, who: &str, opts: &Options, mut rng: StdRng) -> u64 {
    let mut stopper = Stopper {
        ops: a.ops,
        min_ops: a.min_ops,
        stop: a.stop.clone(),
        stopping: false,
    };
    let mut done = 0;
    while !stopper.done(done) {
        let store = Store::open_with(&a.store, opts, OpenMode::Open).unwrap_or_else(|e| {
            fail(
                3,
                who,
                &format!("open #{done} of {}: {e}", a.store.display()),
            )
        });
        let map = store
            .open_map(&a.map)
            .unwrap_or_else(|e| fail(3, who, &format!("open map {}: {e}", a.map)));
        let key = hot_key(rng.random_range(0..a.hot));
        if let Some(v) = map
            .get(key.as_bytes())
            .unwrap_or_else(|e| fail(3, who, &format!("get {key}: {e}")))
        {
            check_value(&key, &v).unwrap_or_else(|e| fail(2, who, &format!("get {key}: {e}")));
        }
        done += 1;
    }
    done
}
