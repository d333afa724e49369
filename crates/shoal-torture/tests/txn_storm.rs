//! The transaction storm: processes transferring money between accounts with multi-key
//! transactions (locked and optimistic, some inserting new keys so the map grows), are
//! SIGKILLed at random instants and restarted, while reader processes and this process
//! read every account with `Store::snapshot_get`. Once over a fixed-size map, once over a
//! variable-size map with UIDs.
//!
//! What this proves: the sum of all accounts, seen by every consistent reader at every
//! moment, never changes, whatever the kills interrupt (a commit's every step, a recovery
//! of a dead transaction); no reader stays stuck behind a dead writer (each snapshot
//! returns within the lock timeout); at the end the sum is exact, `Store::check` is clean,
//! and transactions still commit.
//!
//! Short form (the test command): `SHOAL_TXN_STORM_SECS` seconds, default 8. Long form
//! (docs/RELIABILITY.md): `SHOAL_TXN_STORM_SECS=600 cargo test --release -p shoal-torture
//! --test txn_storm -- --nocapture`. `SHOAL_SEED` repeats a run's random choices.
//!
//! The history storm (`transfers_under_kills_are_strictly_serializable`) logs every
//! operation, with its call and return times and its result, and has the Porcupine
//! checker (`lincheck -txn`, tools/linearizability/txn.go) check each round's history for
//! strict serializability: one order of all committed transactions and consistent reads,
//! each an atomic step of the whole store at an instant between its call and its return,
//! that explains every balance read and every transfer's outcome, in which every
//! transaction cut short by a kill committed whole or not at all. It runs in rounds
//! (`SHOAL_TXN_LIN_ROUNDS`, default 2) of `SHOAL_TXN_LIN_SECS` seconds (default 3), each
//! checked apart from where the last one ended; workers run in bursts, the first
//! `SHOAL_TXN_LIN_ACTIVE_US` (default 3000) of every `SHOAL_TXN_LIN_PERIOD_US` (100000),
//! at most `SHOAL_TXN_LIN_BURST_OPS` (300) operations each. Long form
//! (docs/RELIABILITY.md): `SHOAL_TXN_LIN_ROUNDS=60 cargo test --release -p shoal-torture
//! --test txn_storm -- strictly_serializable --nocapture`.

use shoal::{
    Cond, FixedOptions, IntCmp, MapOptions, OpenMode, Options, Store, TxnMap, TxnOp, TxnTarget,
};
use shoal_torture::harness::{env_u64, seed, Rig, Scratch};
use shoal_torture::linlog::{lincheck_round, run_lincheck, write_final_read};
use shoal_torture::now_ns;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

const EXE: &str = env!("CARGO_BIN_EXE_shoal-txn-worker");
const ACCOUNTS: u64 = 48;
const START: i64 = 1_000;

fn spawn(
    role: &str,
    kind: &str,
    store: &std::path::Path,
    seed: u64,
    dir: &std::path::Path,
    n: u64,
) -> Child {
    let err = std::fs::File::create(dir.join(format!("{role}-{n}.err"))).unwrap();
    Command::new(EXE)
        .args([
            role,
            store.to_str().unwrap(),
            &seed.to_string(),
            &ACCOUNTS.to_string(),
            &(START * ACCOUNTS as i64).to_string(),
            kind,
        ])
        .stdin(Stdio::null())
        .stdout(std::fs::File::create(dir.join(format!("{role}-{n}.out"))).unwrap())
        .stderr(err)
        .spawn()
        .unwrap_or_else(|e| panic!("spawn {EXE}: {e}"))
}

fn sum(s: &Store, m: &TxnMap) -> i64 {
    let keys: Vec<[u8; 8]> = (0..ACCOUNTS).map(|i| i.to_le_bytes()).collect();
    let req: Vec<(&TxnMap, &[u8])> = keys.iter().map(|x| (m, &x[..])).collect();
    s.snapshot_get(&req)
        .unwrap()
        .iter()
        .map(|v| i64::from_le_bytes(v.as_deref().unwrap().try_into().unwrap()))
        .sum()
}

#[test]
fn transfers_killed_at_random_keep_the_sum() {
    storm("fixed", false);
}

/// The storm with a process taking hot backups all along (`Store::backup`), SIGKILLed now
/// and then too (at any step of a backup: its epoch preparing, the walk, its end): each
/// copy it finishes passes `check` and sums exactly; the writers never stay stopped by a
/// backup, dead or alive.
#[test]
fn transfers_killed_at_random_while_backups_run_keep_the_sum() {
    storm("fixed", true);
}

/// The storm over a variable-size map with UIDs (1+1-bucket segments): records appended
/// under the locks, UID entries taken for inserted keys and moved by every transfer.
#[test]
fn transfers_over_a_variable_map_killed_at_random_keep_the_sum() {
    storm("var", false);
}

fn storm(kind: &str, backups: bool) {
    let seed = seed();
    let dir = Scratch::new(&format!("txn-storm-{kind}"), seed);
    let path = dir.path.join("bank.shoal");
    let opts = Options {
        chunk_size: 64 * 1024,
        lock_timeout: Duration::from_secs(30),
        ..Options::default()
    };
    let s = Store::open_with(&path, &opts, OpenMode::CreateNew).unwrap();
    let small = FixedOptions {
        segment_buckets: 2,
        stash_buckets: 1,
        ..Default::default()
    };
    let (m, len): (TxnMap, Box<dyn Fn() -> u64>) = if kind == "var" {
        let mo = MapOptions {
            segment_buckets: 1,
            stash_buckets: 1,
            uids: true,
            ..MapOptions::default()
        };
        let m = s.map_with("vacct", &mo, true).unwrap();
        (m.txn_map(), Box::new(move || m.len().unwrap()))
    } else {
        let m = s.fixed_map_with("acct", 8, 8, &small, true).unwrap();
        (m.txn_map(), Box::new(move || m.len().unwrap()))
    };
    for a in 0..ACCOUNTS {
        s.transaction()
            .then(TxnOp::put(&m, &a.to_le_bytes(), &START.to_le_bytes()))
            .commit()
            .unwrap();
    }
    let total = START * ACCOUNTS as i64;
    let secs = env_u64("SHOAL_TXN_STORM_SECS", 8);
    let mut rng = seed | 1;
    let mut next = move || {
        rng ^= rng << 13;
        rng ^= rng >> 7;
        rng ^= rng << 17;
        rng
    };
    let mut n = 0u64;
    let mut writers: Vec<Child> = (0..3)
        .map(|_| {
            n += 1;
            spawn("transfer", kind, &path, next(), &dir.path, n)
        })
        .collect();
    let reader_role = |i: usize| if backups && i == 1 { "backup" } else { "read" };
    let mut readers: Vec<Child> = (0..1 + backups as usize)
        .map(|i| {
            n += 1;
            spawn(reader_role(i), kind, &path, 0, &dir.path, n)
        })
        .collect();
    let start = Instant::now();
    let (mut kills, mut checks) = (0u64, 0u64);
    let mut slowest = Duration::ZERO;
    while start.elapsed() < Duration::from_secs(secs) {
        std::thread::sleep(Duration::from_millis(20 + next() % 150));
        // A worker that ended by itself found a wrong sum or an error.
        for c in writers.iter_mut().chain(readers.iter_mut()) {
            if let Some(st) = c.try_wait().unwrap() {
                panic!(
                    "a worker exited by itself ({st}); seed {seed}; see the .err files in {}",
                    dir.path.display()
                );
            }
        }
        let i = (next() % writers.len() as u64) as usize;
        writers[i].kill().unwrap();
        writers[i].wait().unwrap();
        kills += 1;
        n += 1;
        writers[i] = spawn("transfer", kind, &path, next(), &dir.path, n);
        if next() % 8 == 0 {
            let i = (next() % readers.len() as u64) as usize;
            readers[i].kill().unwrap();
            readers[i].wait().unwrap();
            n += 1;
            readers[i] = spawn(reader_role(i), kind, &path, 0, &dir.path, n);
        }
        let t = Instant::now();
        assert_eq!(
            sum(&s, &m),
            total,
            "seed {seed}: a snapshot after kill {kills}"
        );
        slowest = slowest.max(t.elapsed());
        checks += 1;
    }
    for c in writers.iter_mut().chain(readers.iter_mut()) {
        if let Some(st) = c.try_wait().unwrap() {
            panic!(
                "a worker exited by itself ({st}); seed {seed}; see {}",
                dir.path.display()
            );
        }
        c.kill().unwrap();
        c.wait().unwrap();
    }
    assert_eq!(sum(&s, &m), total, "seed {seed}: at the end");
    let r = s.check().unwrap();
    assert!(r.problems.is_empty(), "seed {seed}: {:?}", r.problems);
    let grown = len() - ACCOUNTS;
    // Transactions still commit, and the store keeps working.
    let k = |i: u64| i.to_le_bytes();
    for a in 0..ACCOUNTS {
        let out = s
            .transaction()
            .when(Cond::int(&m, &k(a), IntCmp::Ge, 0))
            .then(TxnOp::add(&m, &k(a), -1))
            .then(TxnOp::add(&m, &k((a + 1) % ACCOUNTS), 1))
            .commit()
            .unwrap();
        assert!(out.succeeded);
    }
    assert_eq!(sum(&s, &m), total);
    eprintln!(
        "{kind}: {kills} kills, {checks} snapshots checked here (slowest {slowest:?}), {grown} keys inserted by transfers"
    );
    assert!(kills > 10, "only {kills} kills");
    assert!(grown > 0, "no transfer inserted a key");
    if backups {
        let copies: usize = std::fs::read_dir(&dir.path)
            .unwrap()
            .map(|e| e.unwrap().path())
            .filter(|p| p.to_string_lossy().ends_with(".out"))
            .map(|p| std::fs::read_to_string(p).unwrap().matches("copy").count())
            .sum();
        eprintln!("{copies} copies checked by the backup process");
        assert!(copies > 0, "seed {seed}: no backup finished");
    }
}

/// The history storm's accounts per map (three maps: fixed, variable with UIDs,
/// variable without), each starting at `LIN_INITIAL`: few, so that Porcupine checks a
/// round of the whole store in seconds.
const LIN_ACCOUNTS: u64 = 3;
const LIN_INITIAL: u64 = 100;
const LIN_TOTAL: u64 = 3 * LIN_ACCOUNTS * LIN_INITIAL;
const LIN_ROLES: [&str; 5] = [
    "lin-writer",
    "lin-writer",
    "lin-writer",
    "lin-writer",
    "lin-reader",
];

/// Opens the history storm's store and its three maps, in account-number order.
fn lin_maps(s: &Store, create: bool) -> Vec<TxnMap> {
    let small = FixedOptions {
        segment_buckets: 2,
        stash_buckets: 1,
        ..Default::default()
    };
    let var = |uids| MapOptions {
        segment_buckets: 1,
        stash_buckets: 1,
        uids,
        ..MapOptions::default()
    };
    vec![
        s.fixed_map_with("acct", 8, 8, &small, create)
            .unwrap()
            .txn_map(),
        s.map_with("vacct", &var(true), create).unwrap().txn_map(),
        s.map_with("pacct", &var(false), create).unwrap().txn_map(),
    ]
}

/// Every account's balance, from one consistent read.
fn lin_read_all(s: &Store, maps: &[TxnMap]) -> Vec<u64> {
    let keys: Vec<(usize, [u8; 8])> = (0..3 * LIN_ACCOUNTS)
        .map(|i| {
            (
                (i / LIN_ACCOUNTS) as usize,
                (i % LIN_ACCOUNTS).to_le_bytes(),
            )
        })
        .collect();
    let req: Vec<(&TxnMap, &[u8])> = keys.iter().map(|(m, k)| (&maps[*m], &k[..])).collect();
    s.snapshot_get(&req)
        .unwrap()
        .iter()
        .map(|v| u64::from_le_bytes(v.as_deref().unwrap().try_into().unwrap()))
        .collect()
}

/// What one round's check counted.
#[derive(Default)]
struct Totals {
    kills: u64,
    checked: u64,
    moved: u64,
    opt: u64,
    ver: u64,
    reads: u64,
    pending: u64,
    /// The longest transaction's call to return, in ns.
    longest_ns: u64,
    /// How long the check took, in ms.
    check_ms: u64,
}

/// Transfers between accounts of a fixed-size map, a variable-size map with UIDs and
/// one without (within one map and across two), locked and optimistic, with consistent
/// readers, under SIGKILLs: every round's history is strictly serializable (see the
/// crate comment). A deliberately broken copy of the last round's history (a read of
/// every account summing to more than the total) is rejected, which shows the check
/// can fail.
#[test]
fn transfers_under_kills_are_strictly_serializable() {
    let seed = seed();
    let secs = env_u64("SHOAL_TXN_LIN_SECS", 3);
    let rounds = env_u64("SHOAL_TXN_LIN_ROUNDS", 2).max(1);
    let scratch = Scratch::new("txn-lin", seed);
    let store = scratch.path.join("bank.shoal");
    let opts = Options {
        chunk_size: 64 * 1024,
        lock_timeout: Duration::from_secs(30),
        ..Options::default()
    };
    let s = Store::open_with(&store, &opts, OpenMode::CreateNew).unwrap();
    let maps = lin_maps(&s, true);
    for i in 0..3 * LIN_ACCOUNTS {
        let m = &maps[(i / LIN_ACCOUNTS) as usize];
        s.transaction()
            .then(TxnOp::put(
                m,
                &(i % LIN_ACCOUNTS).to_le_bytes(),
                &(LIN_INITIAL as i64).to_le_bytes(),
            ))
            .commit()
            .unwrap();
    }
    let lincheck = shoal_torture::harness::lincheck(
        &Path::new(env!("CARGO_MANIFEST_DIR")).join("../../tools/linearizability"),
        &Path::new(env!("CARGO_TARGET_TMPDIR")).join("lincheck"),
        seed,
    );
    let mut start_vals = vec![LIN_INITIAL; 3 * LIN_ACCOUNTS as usize];
    let mut sum = Totals::default();
    let (mut last, mut last_start) = (PathBuf::new(), Vec::new());
    for round in 0..rounds {
        let dir = scratch.path.join(format!("round-{round}"));
        std::fs::create_dir_all(&dir).unwrap();
        let rig = Rig {
            exe: EXE.into(),
            stop: dir.join("STOP"),
            dir,
            store: store.clone(),
            seed: seed.wrapping_add(round),
            logs: true,
        };
        let who = format!("seed {seed} (SHOAL_SEED), round {round}");
        let (t, end_vals) = lin_round(&rig, &who, &s, &maps, &lincheck, secs, &start_vals);
        eprintln!(
            "seed {seed}: round {round}: {} kills, {} transactions and reads checked ({} moved \
             money, {} optimistic, {} on a version, {} consistent reads, {} killed in flight; \
             longest {:.1} ms): strictly serializable (checked in {} ms)",
            t.kills,
            t.checked,
            t.moved,
            t.opt,
            t.ver,
            t.reads,
            t.pending,
            t.longest_ns as f64 / 1e6,
            t.check_ms
        );
        sum.kills += t.kills;
        sum.checked += t.checked;
        sum.moved += t.moved;
        sum.opt += t.opt;
        sum.ver += t.ver;
        sum.reads += t.reads;
        sum.pending += t.pending;
        sum.longest_ns = sum.longest_ns.max(t.longest_ns);
        last = rig.dir.clone();
        last_start = std::mem::replace(&mut start_vals, end_vals);
    }
    broken_history_is_rejected(seed, &lincheck, &last, &last_start);
    // Transactions still commit, across all three maps.
    let k = |i: u64| (i % LIN_ACCOUNTS).to_le_bytes();
    let m = |i: u64| &maps[(i / LIN_ACCOUNTS) as usize];
    for i in 0..3 * LIN_ACCOUNTS {
        let j = (i + 1) % (3 * LIN_ACCOUNTS);
        let out = s
            .transaction()
            .when(Cond::int(m(i), &k(i), IntCmp::Ge, 0))
            .then(TxnOp::add(m(i), &k(i), 0))
            .then(TxnOp::add(m(j), &k(j), 0))
            .commit()
            .unwrap();
        assert!(out.succeeded, "seed {seed}");
    }
    eprintln!(
        "seed {seed}: {rounds} rounds of {secs} s: {} kills, {} checked ({} moved money, {} \
         optimistic, {} on a version, {} consistent reads, {} killed in flight); longest \
         transaction {:.1} ms",
        sum.kills,
        sum.checked,
        sum.moved,
        sum.opt,
        sum.ver,
        sum.reads,
        sum.pending,
        sum.longest_ns as f64 / 1e6
    );
    assert!(
        sum.moved > 100 * rounds
            && sum.opt > 50 * rounds
            && sum.ver > 50 * rounds
            && sum.reads > 100 * rounds
            && sum.kills > 5 * rounds,
        "seed {seed}: too little checked to prove anything"
    );
}

/// One round of the history storm: the workers started, SIGKILLed at random moments of
/// their bursts and replaced for `secs` seconds, stopped; then a last consistent read of
/// every account joins the history (`final.tlin`), the sum and `Store::check` are
/// checked, and Porcupine checks the round's history from `start` (every account's
/// balance when the round began). Returns what the check counted and the balances at the
/// end. `who` names the run and round in a failure.
fn lin_round(
    rig: &Rig,
    who: &str,
    s: &Store,
    maps: &[TxnMap],
    lincheck: &Path,
    secs: u64,
    start: &[u64],
) -> (Totals, Vec<u64>) {
    let period = env_u64("SHOAL_TXN_LIN_PERIOD_US", 100_000).max(1);
    let active = env_u64("SHOAL_TXN_LIN_ACTIVE_US", 3_000).min(period);
    let burst = env_u64("SHOAL_TXN_LIN_BURST_OPS", 300);
    let extra = [
        "--accounts".to_string(),
        LIN_ACCOUNTS.to_string(),
        "--total".into(),
        LIN_TOTAL.to_string(),
        "--period-us".into(),
        period.to_string(),
        "--active-us".into(),
        active.to_string(),
        "--burst-ops".into(),
        burst.to_string(),
    ];
    let args: Vec<&str> = extra.iter().map(String::as_str).collect();
    let kills = rig.kill_storm(&LIN_ROLES, &args, secs, period, active, who);

    // The last read of every account, after every worker is gone, joins the history.
    let call = now_ns();
    let vals = lin_read_all(s, maps);
    let ret = now_ns();
    write_final_read(&rig.dir.join("final.tlin"), call, ret, &vals);
    assert_eq!(
        vals.iter().sum::<u64>(),
        LIN_TOTAL,
        "{who}: the accounts' sum"
    );
    let r = s.check().unwrap();
    assert!(r.is_ok(), "{who}: check after the storm: {r}");

    let t0 = Instant::now();
    let total = lincheck_round(lincheck, "txn", start, &rig.dir, who, "the transactions'");
    let check_ms = t0.elapsed().as_millis() as u64;
    let t = Totals {
        kills,
        checked: total.get("ops"),
        moved: total.get("moved"),
        opt: total.get("opt"),
        ver: total.get("ver"),
        reads: total.get("read"),
        pending: total.get("pending"),
        longest_ns: total.get("longest_ns"),
        check_ms,
    };
    (t, vals)
}

/// A copy of round `dir`'s history with one more consistent read of every account, just
/// after the first transfer that moved money returned, whose balances sum to one more
/// than the total (no state of the store does): the checker must reject it. `start`:
/// the balances when the round began (with them, the round's own history passed).
fn broken_history_is_rejected(seed: u64, lincheck: &Path, dir: &Path, start: &[u64]) {
    let broken = dir.join("broken");
    std::fs::create_dir_all(&broken).unwrap();
    let mut first_move: Option<u64> = None;
    for e in std::fs::read_dir(dir).unwrap() {
        let p = e.unwrap().path();
        if p.extension().is_some_and(|x| x == "tlin") {
            let text = std::fs::read(&p).unwrap();
            // A killed worker's mapped log: what was written, then zero bytes.
            let text = &text[..text.iter().position(|&b| b == 0).unwrap_or(text.len())];
            let text = String::from_utf8_lossy(text);
            let mut moving = false;
            for l in text.lines() {
                let f: Vec<&str> = l.split_whitespace().collect();
                match f.as_slice() {
                    ["C", _, "xfer" | "opt", ..] => moving = true,
                    ["R", t, _, _, "ok"] if moving => {
                        let t: u64 = t.parse().unwrap();
                        first_move = Some(first_move.map_or(t, |m| m.min(t)));
                        moving = false;
                    }
                    _ => moving = false,
                }
            }
            std::fs::copy(&p, broken.join(p.file_name().unwrap())).unwrap();
        }
    }
    let t = first_move.expect("a transfer that moved money");
    let mut vals = vec![LIN_INITIAL; 3 * LIN_ACCOUNTS as usize];
    vals[0] += 1;
    let shown: Vec<String> = vals.iter().map(u64::to_string).collect();
    let keys: Vec<String> = (0..3 * LIN_ACCOUNTS).map(|k| k.to_string()).collect();
    std::fs::write(
        broken.join("broken.tlin"),
        format!(
            "W {t} 98 0 0\nC {} read {}\nR {} {}\n",
            t + 1,
            keys.join(","),
            t + 2,
            shown.join(",")
        ),
    )
    .unwrap();
    let out = run_lincheck(lincheck, "txn", start, &broken);
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.code() == Some(1) && text.contains("NOT LINEARIZABLE"),
        "seed {seed}: a history with a read of more money than the total was not rejected \
         ({}); history in {}:\n{text}{}",
        out.status,
        broken.display(),
        String::from_utf8_lossy(&out.stderr)
    );
}
