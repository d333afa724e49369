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

use shoal::{
    Cond, FixedOptions, IntCmp, MapOptions, OpenMode, Options, Store, TxnMap, TxnOp, TxnTarget,
};
use shoal_torture::harness::{env_u64, seed, Scratch};
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
        .stdout(Stdio::null())
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
    storm("fixed");
}

/// The storm over a variable-size map with UIDs (1+1-bucket segments): records appended
/// under the locks, UID entries taken for inserted keys and moved by every transfer.
#[test]
fn transfers_over_a_variable_map_killed_at_random_keep_the_sum() {
    storm("var");
}

fn storm(kind: &str) {
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
    let mut readers: Vec<Child> = (0..1)
        .map(|_| {
            n += 1;
            spawn("read", kind, &path, 0, &dir.path, n)
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
            readers[0].kill().unwrap();
            readers[0].wait().unwrap();
            n += 1;
            readers[0] = spawn("read", kind, &path, 0, &dir.path, n);
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
}
