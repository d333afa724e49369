//! Multi-key transactions over hash maps: conditions and both lists, the size limits and
//! argument errors, inserts and removes composing in one bucket, a property test against
//! a model and a crash at every step of a commit (fixed-size maps, variable-size maps with
//! and without UIDs, and both in one transaction), and threads doing bank transfers
//! (locked and optimistic) while snapshot readers check that the sum never changes. The multi-process storm with
//! SIGKILLs is `crates/shoal-torture/tests/txn_storm.rs`.

#![cfg(not(shuttle))]

use proptest::prelude::*;
use shoal::{
    Cond, Error, FixedMap, FixedOptions, IntCmp, Map, MapOptions, OpResult, OpenMode, Options,
    Store, TxnOp, TxnTarget,
};
use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

fn tmp() -> tempfile::TempDir {
    tempfile::tempdir_in("/dev/shm")
        .or_else(|_| tempfile::tempdir())
        .unwrap()
}

fn store(dir: &tempfile::TempDir) -> Store {
    let opts = Options {
        chunk_size: 64 * 1024,
        lock_timeout: Duration::from_secs(30),
        ..Options::default()
    };
    Store::open_with(dir.path().join("t.shoal"), &opts, OpenMode::OpenOrCreate).unwrap()
}

fn small() -> FixedOptions {
    FixedOptions {
        segment_buckets: 2,
        stash_buckets: 1,
        ..Default::default()
    }
}

fn k(i: u64) -> [u8; 8] {
    i.to_le_bytes()
}
fn v(x: i64) -> [u8; 8] {
    x.to_le_bytes()
}

fn check(s: &Store) {
    let r = s.check().unwrap();
    assert!(r.problems.is_empty(), "check: {:?}", r.problems);
}

/// A transfer of `amt` from `a` to `b` if `a` holds at least `amt`.
fn transfer(s: &Store, m: &FixedMap, a: u64, b: u64, amt: i64) -> shoal::Result<bool> {
    Ok(s.transaction()
        .when(Cond::int(m, &k(a), IntCmp::Ge, amt))
        .then(TxnOp::add(m, &k(a), -amt))
        .then(TxnOp::add(m, &k(b), amt))
        .commit()?
        .succeeded)
}

#[test]
fn conditions_choose_the_list_and_results_report_each_operation() {
    let d = tmp();
    let s = store(&d);
    let m = s.fixed_map("acct", 8, 8).unwrap();
    m.put(&k(1), &v(100)).unwrap();
    m.put(&k(2), &v(5)).unwrap();
    assert!(transfer(&s, &m, 1, 2, 30).unwrap());
    assert_eq!(m.get(&k(1)).unwrap(), Some(v(70).to_vec()));
    assert_eq!(m.get(&k(2)).unwrap(), Some(v(35).to_vec()));
    // Not enough: nothing changes.
    assert!(!transfer(&s, &m, 2, 1, 36).unwrap());
    assert_eq!(m.get(&k(2)).unwrap(), Some(v(35).to_vec()));

    // The else list runs when a condition fails; results are per operation.
    let out = s
        .transaction()
        .when(Cond::absent(&m, &k(1)))
        .then(TxnOp::put(&m, &k(1), &v(0)))
        .otherwise(TxnOp::get(&m, &k(2)))
        .otherwise(TxnOp::put_if_absent(&m, &k(1), &v(9)))
        .otherwise(TxnOp::put_if_absent(&m, &k(3), &v(7)))
        .otherwise(TxnOp::put_if_present(&m, &k(4), &v(7)))
        .otherwise(TxnOp::remove(&m, &k(2)))
        .commit()
        .unwrap();
    assert!(!out.succeeded);
    let r = |applied, value: Option<i64>| OpResult {
        applied,
        value: value.map(|x| v(x).to_vec()),
    };
    assert_eq!(
        out.results,
        vec![
            r(false, Some(35)),
            r(false, Some(70)),
            r(true, None),
            r(false, None),
            r(true, Some(35)),
        ]
    );
    assert_eq!(m.get(&k(1)).unwrap(), Some(v(70).to_vec()));
    assert_eq!(m.get(&k(2)).unwrap(), None);
    assert_eq!(m.get(&k(3)).unwrap(), Some(v(7).to_vec()));
    assert_eq!(m.get(&k(4)).unwrap(), None);
    assert_eq!(m.len().unwrap(), 2);

    // Equality and presence conditions, across two maps of different sizes.
    let names = s.fixed_map("names", 4, 12).unwrap();
    names.put(b"ab\0\0", b"hello world!").unwrap();
    let out = s
        .transaction()
        .when(Cond::equals(&names, b"ab\0\0", b"hello world!"))
        .when(Cond::present(&m, &k(3)))
        .then(TxnOp::put(&names, b"ab\0\0", b"HELLO WORLD!"))
        .then(TxnOp::remove(&m, &k(3)))
        .commit()
        .unwrap();
    assert!(out.succeeded);
    assert_eq!(
        names.get(b"ab\0\0").unwrap(),
        Some(b"HELLO WORLD!".to_vec())
    );
    assert_eq!(m.get(&k(3)).unwrap(), None);
    check(&s);
}

#[test]
fn bad_arguments_and_too_large_transactions_are_errors_and_change_nothing() {
    let d = tmp();
    let s = store(&d);
    let m = s.fixed_map("acct", 8, 8).unwrap();
    let w = s.fixed_map("wide", 8, 16).unwrap();
    for i in 0..64 {
        m.put(&k(i), &v(1)).unwrap();
    }
    let bad = |r: shoal::Result<shoal::TxnOutcome>, what: &str| match r {
        Err(Error::InvalidArgument(msg)) => msg,
        other => panic!("{what}: expected InvalidArgument, got {other:?}"),
    };
    bad(
        s.transaction()
            .then(TxnOp::put(&m, b"short", &v(1)))
            .commit(),
        "key size",
    );
    bad(
        s.transaction()
            .then(TxnOp::put(&m, &k(1), b"short"))
            .commit(),
        "value size",
    );
    bad(
        s.transaction().then(TxnOp::add(&w, &k(1), 1)).commit(),
        "add on 16-byte values",
    );
    bad(
        s.transaction()
            .when(Cond::int(&w, &k(1), IntCmp::Eq, 0))
            .commit(),
        "int condition on 16-byte values",
    );
    let msg = bad(
        s.transaction()
            .then(TxnOp::add(&m, &k(1), 1))
            .then(TxnOp::put(&m, &k(1), &v(3)))
            .commit(),
        "a key written twice",
    );
    assert!(msg.contains("twice"), "{msg}");
    let other_dir = tmp();
    let other = store(&other_dir);
    let om = other.fixed_map("acct", 8, 8).unwrap();
    bad(
        s.transaction().then(TxnOp::put(&om, &k(1), &v(1))).commit(),
        "another store",
    );

    // 20 redo words: 64 keys of 8-byte values in a 1-segment-or-more map need more.
    let mut t = s.transaction();
    for i in 0..64 {
        t = t.then(TxnOp::add(&m, &k(i), 1));
    }
    let msg = bad(t.commit(), "too large");
    assert!(msg.contains("too large"), "{msg}");
    for i in 0..64 {
        assert_eq!(
            m.get(&k(i)).unwrap(),
            Some(v(1).to_vec()),
            "key {i} changed by a failed txn"
        );
    }
    // More segments than the held-lock list: a map of tiny segments, many keys.
    let tiny = s.fixed_map_with("tiny", 8, 8, &small(), true).unwrap();
    for i in 0..2000 {
        tiny.put(&k(i), &v(0)).unwrap();
    }
    let mut t = s.transaction();
    for i in 0..2000 {
        t = t.when(Cond::present(&tiny, &k(i)));
    }
    let msg = bad(
        t.then(TxnOp::put(&tiny, &k(0), &v(1))).commit(),
        "too many segments",
    );
    assert!(msg.contains("segments"), "{msg}");
    assert_eq!(tiny.get(&k(0)).unwrap(), Some(v(0).to_vec()));
    check(&s);
}

/// Inserts and removes of several keys of one bucket in one transaction compose: each
/// insert takes its own free cell, the bucket's bitmap and overflow count and the map's
/// counter add up. Tiny segments make the inserts grow the map between attempts.
#[test]
fn many_writes_to_one_bucket_compose() {
    let d = tmp();
    let s = store(&d);
    let m = s.fixed_map_with("m", 8, 8, &small(), true).unwrap();
    let mut model = HashMap::new();
    let mut next = 0u64;
    for round in 0..200u64 {
        let mut t = s.transaction();
        for _ in 0..4 {
            t = t.then(TxnOp::put_if_absent(&m, &k(next), &v(next as i64)));
            model.insert(next, next as i64);
            next += 1;
        }
        if round % 3 == 2 {
            let gone = next - 9;
            t = t.then(TxnOp::remove(&m, &k(gone)));
            model.remove(&gone);
        }
        let out = t.commit().unwrap();
        assert!(
            out.results.iter().all(|r| r.applied),
            "round {round}: {out:?}"
        );
        assert_eq!(m.len().unwrap(), model.len() as u64, "round {round}");
    }
    for (key, val) in &model {
        assert_eq!(
            m.get(&k(*key)).unwrap(),
            Some(v(*val).to_vec()),
            "key {key}"
        );
    }
    check(&s);
}

#[derive(Clone, Debug)]
enum MOp {
    Get(u8),
    Put(u8, i64),
    Insert(u8, i64),
    Replace(u8, i64),
    Remove(u8),
    Add(u8, i64),
}

#[derive(Clone, Debug)]
enum MCond {
    Present(u8),
    Absent(u8),
    Ge(u8, i64),
    Equals(u8, i64),
}

fn mop() -> impl Strategy<Value = MOp> {
    let key = 0u8..24;
    prop_oneof![
        key.clone().prop_map(MOp::Get),
        (key.clone(), -50i64..50).prop_map(|(a, b)| MOp::Put(a, b)),
        (key.clone(), -50i64..50).prop_map(|(a, b)| MOp::Insert(a, b)),
        (key.clone(), -50i64..50).prop_map(|(a, b)| MOp::Replace(a, b)),
        key.clone().prop_map(MOp::Remove),
        (key, -50i64..50).prop_map(|(a, b)| MOp::Add(a, b)),
    ]
}

fn mcond() -> impl Strategy<Value = MCond> {
    let key = 0u8..24;
    prop_oneof![
        key.clone().prop_map(MCond::Present),
        key.clone().prop_map(MCond::Absent),
        (key.clone(), -50i64..50).prop_map(|(a, b)| MCond::Ge(a, b)),
        (key, -50i64..50).prop_map(|(a, b)| MCond::Equals(a, b)),
    ]
}

fn key_of(o: &MOp) -> u8 {
    match o {
        MOp::Get(a) | MOp::Remove(a) => *a,
        MOp::Put(a, _) | MOp::Insert(a, _) | MOp::Replace(a, _) | MOp::Add(a, _) => *a,
    }
}

/// Model step: applies `ops` to `model`, returning the expected results.
fn model_apply(model: &mut HashMap<u8, i64>, ops: &[MOp]) -> Vec<OpResult> {
    let before = model.clone();
    ops.iter()
        .map(|o| {
            let old = before.get(&key_of(o)).copied();
            let applied = match o {
                MOp::Get(_) => false,
                MOp::Put(a, x) => {
                    model.insert(*a, *x);
                    true
                }
                MOp::Insert(a, x) => old.is_none() && model.insert(*a, *x).is_none(),
                MOp::Replace(a, x) => old.is_some() && model.insert(*a, *x).is_some(),
                MOp::Remove(a) => model.remove(a).is_some(),
                MOp::Add(a, x) => {
                    model.insert(*a, old.unwrap_or(0).wrapping_add(*x));
                    true
                }
            };
            OpResult {
                applied,
                value: old.map(|x| x.to_le_bytes().to_vec()),
            }
        })
        .collect()
}

fn dedup_writes(ops: Vec<MOp>) -> Vec<MOp> {
    let mut seen = std::collections::HashSet::new();
    ops.into_iter()
        .filter(|o| matches!(o, MOp::Get(_)) || seen.insert(key_of(o)))
        .collect()
}

/// Which maps hold the accounts of the model tests.
#[derive(Clone, Copy, Debug)]
enum Kind {
    Fixed,
    Var,
    VarUids,
    /// Even accounts in a fixed-size map, odd ones in a variable-size map with UIDs.
    Mixed,
}

const KINDS: [Kind; 4] = [Kind::Fixed, Kind::Var, Kind::VarUids, Kind::Mixed];

/// The accounts' maps: a key lives in the fixed map or the variable one, by `Kind`.
struct Accts {
    kind: Kind,
    f: FixedMap,
    v: Map,
}

impl Accts {
    /// Creates (or opens, with the same options) the maps named `name`.
    fn new(s: &Store, name: &str, kind: Kind) -> Accts {
        let mo = MapOptions {
            segment_buckets: 1,
            stash_buckets: 1,
            uids: matches!(kind, Kind::VarUids | Kind::Mixed),
            ..MapOptions::default()
        };
        Accts {
            kind,
            f: s.fixed_map_with(name, 8, 8, &small(), true).unwrap(),
            v: s.map_with(&format!("{name}.v"), &mo, true).unwrap(),
        }
    }
    fn of(&self, a: u8) -> &dyn TxnTarget {
        match (self.kind, a % 2) {
            (Kind::Fixed, _) | (Kind::Mixed, 0) => &self.f,
            _ => &self.v,
        }
    }
    fn get(&self, a: u8) -> Option<Vec<u8>> {
        match (self.kind, a % 2) {
            (Kind::Fixed, _) | (Kind::Mixed, 0) => self.f.get(&k(a as u64)).unwrap(),
            _ => self.v.get(&k(a as u64)).unwrap(),
        }
    }
    fn len(&self) -> u64 {
        self.f.len().unwrap() + self.v.len().unwrap()
    }
}

fn to_op(m: &Accts, o: &MOp) -> TxnOp {
    let key = |a: &u8| k(*a as u64);
    match o {
        MOp::Get(a) => TxnOp::get(m.of(*a), &key(a)),
        MOp::Put(a, x) => TxnOp::put(m.of(*a), &key(a), &v(*x)),
        MOp::Insert(a, x) => TxnOp::put_if_absent(m.of(*a), &key(a), &v(*x)),
        MOp::Replace(a, x) => TxnOp::put_if_present(m.of(*a), &key(a), &v(*x)),
        MOp::Remove(a) => TxnOp::remove(m.of(*a), &key(a)),
        MOp::Add(a, x) => TxnOp::add(m.of(*a), &key(a), *x),
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 64, ..ProptestConfig::default() })]

    /// Random transactions (conditions, both lists) against a `HashMap` model: the list
    /// chosen, every result, the contents and the entry count agree after each, and
    /// `check` finds nothing wrong at the end. Tiny segments: inserts grow the map. In a
    /// store without checksums, a variable-size map's writes of present keys (8-byte
    /// values) go in place; with checksums they append records.
    #[test]
    fn transactions_match_a_model(
        kind in 0usize..4,
        checksums in any::<bool>(),
        txns in prop::collection::vec(
            (prop::collection::vec(mcond(), 0..3),
             prop::collection::vec(mop(), 0..6),
             prop::collection::vec(mop(), 0..6)),
            1..40)
    ) {
        let d = tmp();
        let opts = Options {
            chunk_size: 64 * 1024,
            lock_timeout: Duration::from_secs(30),
            checksums: Some(checksums),
            ..Options::default()
        };
        let s = Store::open_with(d.path().join("t.shoal"), &opts, OpenMode::OpenOrCreate).unwrap();
        let m = Accts::new(&s, "m", KINDS[kind]);
        let mut model: HashMap<u8, i64> = HashMap::new();
        for (i, (conds, then, els)) in txns.into_iter().enumerate() {
            let (then, els) = (dedup_writes(then), dedup_writes(els));
            let mut t = s.transaction();
            let mut ok = true;
            for c in &conds {
                let (cond, holds) = match c {
                    MCond::Present(a) => (Cond::present(m.of(*a), &k(*a as u64)), model.contains_key(a)),
                    MCond::Absent(a) => (Cond::absent(m.of(*a), &k(*a as u64)), !model.contains_key(a)),
                    MCond::Ge(a, x) => (Cond::int(m.of(*a), &k(*a as u64), IntCmp::Ge, *x),
                        model.get(a).is_some_and(|y| y >= x)),
                    MCond::Equals(a, x) => (Cond::equals(m.of(*a), &k(*a as u64), &v(*x)),
                        model.get(a) == Some(x)),
                };
                ok &= holds;
                t = t.when(cond);
            }
            for o in &then { t = t.then(to_op(&m, o)); }
            for o in &els { t = t.otherwise(to_op(&m, o)); }
            let out = t.commit();
            let out = match out {
                Err(Error::InvalidArgument(msg)) if msg.contains("too large") => continue,
                r => r.unwrap(),
            };
            prop_assert_eq!(out.succeeded, ok, "txn {}", i);
            let want = model_apply(&mut model, if ok { &then } else { &els });
            prop_assert_eq!(&out.results, &want, "txn {}", i);
            prop_assert_eq!(m.len(), model.len() as u64, "txn {}", i);
        }
        for a in 0u8..24 {
            prop_assert_eq!(m.get(a), model.get(&a).map(|x| v(*x).to_vec()), "key {}", a);
        }
        let r = s.check().unwrap();
        prop_assert!(r.problems.is_empty(), "check: {:?}", r.problems);
    }
}

/// Threads transfer between accounts (half with `transaction`, half with `optimistic`),
/// others read all accounts with `snapshot_get` and check the sum, and a thread does
/// single-key reads that must never see a key's value go back. The sum is exact at the end.
#[test]
fn threads_transferring_keep_the_sum_for_snapshot_readers() {
    const ACCOUNTS: u64 = 32;
    const START: i64 = 1000;
    let d = tmp();
    let s = Arc::new(store(&d));
    let m = s.fixed_map_with("acct", 8, 8, &small(), true).unwrap();
    for a in 0..ACCOUNTS {
        m.put(&k(a), &v(START)).unwrap();
    }
    let stop = Arc::new(AtomicBool::new(false));
    let seed: u64 = std::env::var("SHOAL_SEED")
        .ok()
        .and_then(|x| x.parse().ok())
        .unwrap_or_else(|| {
            std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .unwrap()
                .as_nanos() as u64
        });
    eprintln!("SHOAL_SEED={seed}");
    let mut hs = Vec::new();
    for t in 0..2u64 {
        let (s, m) = (s.clone(), m.clone());
        hs.push(std::thread::spawn(move || {
            let mut x = seed ^ (t + 1).wrapping_mul(0x9e37_79b9_7f4a_7c15);
            let mut next = || {
                x ^= x << 13;
                x ^= x >> 7;
                x ^= x << 17;
                x
            };
            let mut done = 0;
            for _ in 0..30000 {
                let (a, b) = (next() % ACCOUNTS, next() % ACCOUNTS);
                if a == b {
                    continue;
                }
                let amt = (next() % 50) as i64;
                if t == 0 {
                    done += transfer(&s, &m, a, b, amt).unwrap() as u64;
                } else {
                    s.optimistic(|r| {
                        let (x, y) = (r.get_i64(&m, &k(a))?, r.get_i64(&m, &k(b))?);
                        if x >= amt {
                            r.write(TxnOp::put(&m, &k(a), &v(x - amt)));
                            r.write(TxnOp::put(&m, &k(b), &v(y + amt)));
                        }
                        Ok(())
                    })
                    .unwrap();
                    done += 1;
                }
            }
            done
        }));
    }
    let mut readers = Vec::new();
    for _ in 0..2 {
        let (s, m, stop) = (s.clone(), m.clone(), stop.clone());
        readers.push(std::thread::spawn(move || {
            let keys: Vec<[u8; 8]> = (0..ACCOUNTS).map(k).collect();
            let mut n = 0u64;
            while !stop.load(Ordering::Relaxed) || n == 0 {
                let req: Vec<(&FixedMap, &[u8])> = keys.iter().map(|x| (&m, &x[..])).collect();
                let vals = s.snapshot_get(&req).unwrap();
                let sum: i64 = vals
                    .iter()
                    .map(|x| i64::from_le_bytes(x.as_deref().unwrap().try_into().unwrap()))
                    .sum();
                assert_eq!(
                    sum,
                    START * ACCOUNTS as i64,
                    "a snapshot saw part of a transfer (seed {seed})"
                );
                n += 1;
            }
            n
        }));
    }
    for h in hs {
        h.join().unwrap();
    }
    stop.store(true, Ordering::Relaxed);
    for r in readers {
        assert!(r.join().unwrap() > 0);
    }
    let sum: i64 = (0..ACCOUNTS)
        .map(|a| i64::from_le_bytes(m.get(&k(a)).unwrap().unwrap().try_into().unwrap()))
        .sum();
    assert_eq!(sum, START * ACCOUNTS as i64);
    check(&s);
}

// ---- A crash at every step of a commit ----

/// The crash driver's workload: deterministic transactions on 16 accounts of a map of
/// tiny segments (transfers that succeed or fail their condition, inserts of new keys
/// that make the map grow, removes), each with its conditions and both lists.
#[cfg(feature = "failpoints")]
fn crash_script() -> Vec<(Vec<MCond>, Vec<MOp>, Vec<MOp>)> {
    let mut x = 0x2545_f491_4f6c_dd1du64;
    let mut next = move || {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        x
    };
    let mut out = Vec::new();
    for i in 0..150u64 {
        let (a, b) = ((next() % 16) as u8, (next() % 16) as u8);
        let b = if a == b { (b + 1) % 16 } else { b };
        let amt = (next() % 300) as i64;
        match i % 5 {
            0..=2 => out.push((
                vec![MCond::Ge(a, amt)],
                vec![MOp::Add(a, -amt), MOp::Add(b, amt)],
                vec![MOp::Get(a)],
            )),
            3 => {
                let n = 16 + (next() % 8) as u8;
                out.push((
                    vec![MCond::Absent(n)],
                    vec![MOp::Insert(n, 0), MOp::Put(n + 8, 1), MOp::Add(a, 0)],
                    vec![MOp::Remove(n), MOp::Remove(n + 8)],
                ));
            }
            _ => out.push((
                vec![MCond::Present(a), MCond::Equals(b, -1)],
                vec![MOp::Remove(a)],
                vec![MOp::Replace(a, 100), MOp::Replace(b, 100)],
            )),
        }
    }
    out
}

#[cfg(feature = "failpoints")]
fn run_script_step(
    s: &Store,
    m: &Accts,
    (conds, then, els): &(Vec<MCond>, Vec<MOp>, Vec<MOp>),
) -> shoal::Result<shoal::TxnOutcome> {
    let mut t = s.transaction();
    for c in conds {
        t = t.when(match c {
            MCond::Present(a) => Cond::present(m.of(*a), &k(*a as u64)),
            MCond::Absent(a) => Cond::absent(m.of(*a), &k(*a as u64)),
            MCond::Ge(a, x) => Cond::int(m.of(*a), &k(*a as u64), IntCmp::Ge, *x),
            MCond::Equals(a, x) => Cond::equals(m.of(*a), &k(*a as u64), &v(*x)),
        });
    }
    for o in then {
        t = t.then(to_op(m, o));
    }
    for o in els {
        t = t.otherwise(to_op(m, o));
    }
    t.commit()
}

#[cfg(feature = "failpoints")]
fn model_step(model: &mut HashMap<u8, i64>, (conds, then, els): &(Vec<MCond>, Vec<MOp>, Vec<MOp>)) {
    let ok = conds.iter().all(|c| match c {
        MCond::Present(a) => model.contains_key(a),
        MCond::Absent(a) => !model.contains_key(a),
        MCond::Ge(a, x) => model.get(a).is_some_and(|y| y >= x),
        MCond::Equals(a, x) => model.get(a) == Some(x),
    });
    model_apply(model, if ok { then } else { els });
}

#[cfg(feature = "failpoints")]
fn crash_initial() -> HashMap<u8, i64> {
    (0..16u8).map(|a| (a, 1000)).collect()
}

/// Child role: runs the script with `SHOAL_FP` = "name:hit" armed (abort there), printing
/// the index of each committed transaction.
#[cfg(feature = "failpoints")]
#[test]
#[ignore = "run as a child process by crash_at_every_transaction_fail_point"]
fn txn_failpoint_child() {
    use std::io::Write;
    let Ok(path) = std::env::var("SHOAL_TXN_PATH") else {
        return;
    };
    let fp = std::env::var("SHOAL_FP").unwrap();
    let (name, hit) = fp.split_once(':').unwrap();
    shoal::failpoints::setup();
    shoal::failpoints::kill_at(name, hit.parse().unwrap()).unwrap();
    let s = Store::open_existing(&path).unwrap();
    let kind = KINDS[std::env::var("SHOAL_TXN_KIND")
        .unwrap()
        .parse::<usize>()
        .unwrap()];
    let m = Accts::new(&s, "acct", kind);
    let mut out = std::io::stdout().lock();
    for (i, step) in crash_script().iter().enumerate() {
        run_script_step(&s, &m, step).unwrap();
        writeln!(out, "done {i}").unwrap();
        out.flush().unwrap();
    }
}

#[cfg(feature = "failpoints")]
fn contents(m: &Accts) -> HashMap<u8, i64> {
    (0u8..40)
        .filter_map(|a| {
            m.get(a)
                .map(|x| (a, i64::from_le_bytes(x[..].try_into().unwrap())))
        })
        .collect()
}

/// A process killed at every step of a commit (each point of `TXN_NAMES`, at several
/// hit counts, and the recovery points while recovering one): the next user recovers
/// it, `check` finds nothing wrong, and the map holds the interrupted transaction wholly
/// or not at all (the model before or after it), with every earlier one in place.
#[cfg(feature = "failpoints")]
#[test]
fn crash_at_every_transaction_fail_point() {
    crash_at_every_fail_point(0);
}

/// [`crash_at_every_transaction_fail_point`] with every account in a variable-size map
/// with UIDs: records appended under the locks, slots, counters and UID entries in the
/// plan, and values of the same length in place with their versions busy.
#[cfg(feature = "failpoints")]
#[test]
fn crash_at_every_transaction_fail_point_variable_uids() {
    crash_at_every_fail_point(2);
}

/// [`crash_at_every_transaction_fail_point`] with every account in a variable-size map
/// without UIDs: 8-byte values written in place through the redo list, inserts appended.
#[cfg(feature = "failpoints")]
#[test]
fn crash_at_every_transaction_fail_point_variable() {
    crash_at_every_fail_point(1);
}

/// [`crash_at_every_transaction_fail_point`] with half the accounts in a fixed-size map
/// and half in a variable-size map with UIDs, so that most transactions span both.
#[cfg(feature = "failpoints")]
#[test]
fn crash_at_every_transaction_fail_point_mixed() {
    crash_at_every_fail_point(3);
}

/// One user of this process's fail points at a time: the recovery point's counter is the
/// process's, armed and cleared by each crash driver, and `failpoints::setup` (which
/// [`uid_readers_never_see_half_a_transaction`] calls) removes every fail point configured
/// so far, a driver's counter included.
#[cfg(feature = "failpoints")]
static CRASH_DRIVER: std::sync::Mutex<()> = std::sync::Mutex::new(());

#[cfg(feature = "failpoints")]
fn crash_at_every_fail_point(kind: usize) {
    let _one = CRASH_DRIVER.lock().unwrap_or_else(|e| e.into_inner());
    let script = crash_script();
    let mut crashed = 0;
    let points = shoal::failpoints::TXN_NAMES
        .iter()
        .map(|n| (*n, [1u64, 2, 7, 40, 120]))
        .chain([("recover.replayed", [1u64, 1, 1, 1, 1])]);
    for (name, hits) in points {
        let mut reached = false;
        for hit in hits {
            let d = tmp();
            let s = store(&d);
            let m = Accts::new(&s, "acct", KINDS[kind]);
            for (a, x) in crash_initial() {
                s.transaction()
                    .then(TxnOp::put(m.of(a), &k(a as u64), &v(x)))
                    .commit()
                    .unwrap();
            }
            // The recovery point is reached by this process recovering a child killed
            // after its commit: arm it here, before the child runs, so that a recovery
            // whenever it comes is counted, then kill the child at `txn.half_applied`.
            let (child_fp, recovered) = if name.starts_with("recover.") {
                (
                    "txn.half_applied:5".to_string(),
                    Some(shoal::failpoints::counter(name).unwrap()),
                )
            } else {
                (format!("{name}:{hit}"), None)
            };
            let out = std::process::Command::new(std::env::current_exe().unwrap())
                .args([
                    "--exact",
                    "txn_failpoint_child",
                    "--ignored",
                    "--nocapture",
                    "--test-threads=1",
                ])
                .env("SHOAL_TXN_PATH", s.path())
                .env("SHOAL_TXN_KIND", kind.to_string())
                .env("SHOAL_FP", &child_fp)
                .output()
                .unwrap();
            let text = String::from_utf8_lossy(&out.stdout);
            let done = text
                .lines()
                .filter_map(|l| l.split("done ").nth(1))
                .filter_map(|n| n.trim().parse::<usize>().ok())
                .max()
                .map(|n| n + 1)
                .unwrap_or(0);
            let aborted = !out.status.success();
            if aborted {
                crashed += 1;
                reached = true;
            }
            if let Some(n) = recovered {
                // A recovery that runs (the first read of a key of the dead transaction
                // waits 10 ms, then recovers) reaches the point; count it.
                let _ = contents(&m);
                assert!(
                    n.load(Ordering::SeqCst) > 0,
                    "{name}: no recovery ran (child {}, stderr: {})",
                    out.status,
                    String::from_utf8_lossy(&out.stderr)
                );
                shoal::failpoints::clear(name);
            }
            let r = s.check().unwrap();
            assert!(r.problems.is_empty(), "{name}:{hit}: {:?}", r.problems);
            let mut before = crash_initial();
            for step in &script[..done] {
                model_step(&mut before, step);
            }
            let got = contents(&m);
            if aborted {
                let mut after = before.clone();
                model_step(&mut after, &script[done]);
                assert!(
                    got == before || got == after,
                    "{name}:{hit}: after transaction {done} ({:?}) the map is neither before nor after it\n\
                     got {got:?}\nbefore {before:?}\nafter {after:?}\nchild stderr: {}",
                    script[done],
                    String::from_utf8_lossy(&out.stderr)
                );
            } else {
                assert_eq!(got, before, "{name}:{hit}");
            }
            assert_eq!(m.len(), got.len() as u64, "{name}:{hit}");
            // The store keeps working: every transaction of the script again.
            for step in &script {
                run_script_step(&s, &m, step).unwrap();
            }
            let r = s.check().unwrap();
            assert!(
                r.problems.is_empty(),
                "{name}:{hit} after more transactions: {:?}",
                r.problems
            );
        }
        assert!(
            reached,
            "fail point {name} never reached ({:?})",
            KINDS[kind]
        );
    }
    assert!(crashed >= 20, "only {crashed} runs crashed");
}

// ---- Variable-size maps ----

fn var_map(s: &Store, name: &str, uids: bool) -> Map {
    let mo = MapOptions {
        segment_buckets: 1,
        stash_buckets: 1,
        uids,
        ..MapOptions::default()
    };
    s.map_with(name, &mo, true).unwrap()
}

/// Every condition and operation on variable-size maps (with and without UIDs, values of
/// several lengths) and a fixed map in one transaction: the list chosen, each result, the
/// values and counts after, handles that stay valid across a transaction's replace, and
/// the version condition.
#[test]
fn variable_maps_conditions_operations_and_versions() {
    let d = tmp();
    let s = store(&d);
    let f = s.fixed_map("f", 8, 8).unwrap();
    let a = var_map(&s, "a", false);
    let u = var_map(&s, "u", true);
    a.put(b"x", b"a longer value than eight bytes").unwrap();
    a.put(b"n", &v(10)).unwrap();
    let (_, ux) = u.put_with_uid(b"x", b"ux").unwrap();
    u.put(b"gone", b"soon").unwrap();
    f.put(&k(1), &v(5)).unwrap();
    let ver = u.version(b"x").unwrap().unwrap();
    let out = s
        .transaction()
        .when(Cond::equals(&a, b"x", b"a longer value than eight bytes"))
        .when(Cond::int(&a, b"n", IntCmp::Ge, 10))
        .when(Cond::version(&u, b"x", ver))
        .when(Cond::absent(&u, b"new"))
        .when(Cond::present(&f, &k(1)))
        .then(TxnOp::put(&a, b"x", b"short"))
        .then(TxnOp::add(&a, b"n", -3))
        .then(TxnOp::put_if_present(&u, b"x", b"ux changed"))
        .then(TxnOp::add(&f, &k(1), 2))
        .then(TxnOp::get(&a, b"missing"))
        .otherwise(TxnOp::put(&a, b"else", b"ran"))
        .commit()
        .unwrap();
    assert!(out.succeeded);
    let applied: Vec<bool> = out.results.iter().map(|r| r.applied).collect();
    assert_eq!(applied, [true, true, true, true, false]);
    assert_eq!(
        out.results[0].value.as_deref(),
        Some(&b"a longer value than eight bytes"[..])
    );
    assert_eq!(out.results[2].value.as_deref(), Some(&b"ux"[..]));
    assert_eq!(out.results[3].value.as_deref(), Some(&v(5)[..]));
    let out = s
        .transaction()
        .when(Cond::absent(&u, b"new"))
        .then(TxnOp::put_if_absent(&u, b"new", b"fresh"))
        .then(TxnOp::remove(&u, b"gone"))
        .then(TxnOp::put_if_absent(&u, b"x", b"not applied"))
        .commit()
        .unwrap();
    let applied: Vec<bool> = out.results.iter().map(|r| r.applied).collect();
    assert_eq!(applied, [true, true, false]);
    assert_eq!(a.get(b"x").unwrap().unwrap(), b"short");
    assert_eq!(a.get(b"n").unwrap().unwrap(), v(7));
    assert_eq!(u.get(b"x").unwrap().unwrap(), b"ux changed");
    assert_eq!(
        u.get_by_uid(ux).unwrap(),
        b"ux changed",
        "the handle follows its key"
    );
    assert_eq!(u.get(b"new").unwrap().unwrap(), b"fresh");
    let nu = u.uid(b"new").unwrap().unwrap();
    assert_eq!(u.get_by_uid(nu).unwrap(), b"fresh");
    assert_eq!(u.get(b"gone").unwrap(), None);
    assert_eq!(f.get(&k(1)).unwrap().unwrap(), v(7));
    assert_eq!((a.len().unwrap(), u.len().unwrap()), (2, 2));
    assert_eq!(a.get(b"else").unwrap(), None);
    // The version moved: the same condition fails now, and the else list runs.
    let ver2 = u.version(b"x").unwrap().unwrap();
    assert_ne!(ver2, ver);
    let out = s
        .transaction()
        .when(Cond::version(&u, b"x", ver))
        .then(TxnOp::remove(&u, b"x"))
        .otherwise(TxnOp::put(&a, b"else", b"ran"))
        .commit()
        .unwrap();
    assert!(!out.succeeded);
    assert_eq!(a.get(b"else").unwrap().unwrap(), b"ran");
    assert_eq!(u.get(b"x").unwrap().unwrap(), b"ux changed");
    // An integer condition on a value that is not 8 bytes fails; an add to one is an error.
    let out = s
        .transaction()
        .when(Cond::int(&a, b"x", IntCmp::Ne, 0))
        .then(TxnOp::remove(&a, b"x"))
        .commit()
        .unwrap();
    assert!(!out.succeeded);
    assert!(matches!(
        s.transaction()
            .then(TxnOp::add(&a, b"x", 1))
            .then(TxnOp::put(&a, b"y", b"1"))
            .commit(),
        Err(Error::InvalidArgument(_))
    ));
    assert_eq!(
        a.get(b"y").unwrap(),
        None,
        "a failed transaction writes nothing"
    );
    // A version condition needs UIDs.
    assert!(matches!(
        s.transaction().when(Cond::version(&a, b"x", 1)).commit(),
        Err(Error::InvalidArgument(_))
    ));
    // Removing and re-inserting keys of a UID map in one transaction reuses entries.
    for round in 0..50u64 {
        let out = s
            .transaction()
            .then(TxnOp::remove(
                &u,
                format!("r{}", round.wrapping_sub(1)).as_bytes(),
            ))
            .then(TxnOp::put(&u, format!("r{round}").as_bytes(), b"v"))
            .then(TxnOp::remove(
                &u,
                format!("q{}", round.wrapping_sub(1)).as_bytes(),
            ))
            .commit()
            .unwrap();
        assert!(out.succeeded);
        u.put(format!("q{round}").as_bytes(), b"w").unwrap();
    }
    assert_eq!(u.len().unwrap(), 4);
    assert_eq!(u.get(b"r49").unwrap().unwrap(), b"v");
    check(&s);
}

/// Past the documented limits (redo words, segments), or with a record too big for a
/// data chunk, a transaction on variable-size maps is a clean error and changes nothing.
#[test]
fn variable_map_transactions_too_large_are_errors_and_change_nothing() {
    let d = tmp();
    let s = store(&d);
    let u = var_map(&s, "u", true);
    for i in 0..400u64 {
        u.put(&k(i), &v(0)).unwrap();
    }
    let before = u.len().unwrap();
    // An insert with UIDs costs 5 redo words, and the four share 3 more: 23 > 20.
    let mut t = s.transaction();
    for i in 1000..1004u64 {
        t = t.then(TxnOp::put(&u, &k(i), &v(1)));
    }
    match t.commit() {
        Err(Error::InvalidArgument(msg)) => assert!(msg.contains("too large"), "{msg}"),
        r => panic!("expected too large, got {r:?}"),
    }
    // Keys in many segments (tiny segments, 400 keys: dozens of them).
    let mut t = s.transaction();
    for i in 0..40u64 {
        t = t.when(Cond::present(&u, &k(i)));
    }
    match t.then(TxnOp::put(&u, &k(0), &v(9))).commit() {
        Err(Error::InvalidArgument(msg)) => assert!(msg.contains("too large"), "{msg}"),
        r => panic!("expected too large, got {r:?}"),
    }
    // A value too big for one chunk.
    let big = vec![7u8; 70 * 1024];
    assert!(matches!(
        s.transaction().then(TxnOp::put(&u, b"big", &big)).commit(),
        Err(Error::InvalidArgument(_))
    ));
    assert_eq!(u.len().unwrap(), before);
    assert_eq!(u.get(&k(0)).unwrap().unwrap(), v(0));
    assert_eq!(u.get(&k(1000)).unwrap(), None);
    check(&s);
}

/// Bank transfers between accounts split over a variable-size map with UIDs and a fixed
/// map (locked and optimistic transactions), snapshot readers checking the sum, and a
/// reader by UID checking that two accounts' values, read with one snapshot, never show
/// half a transfer between them.
#[test]
fn transfers_across_variable_and_fixed_maps_keep_the_sum() {
    const ACCOUNTS: u64 = 16;
    const START: i64 = 1000;
    let d = tmp();
    let s = Arc::new(store(&d));
    let m = Arc::new(Accts::new(&s, "acct", Kind::Mixed));
    for a in 0..ACCOUNTS as u8 {
        s.transaction()
            .then(TxnOp::put(m.of(a), &k(a as u64), &v(START)))
            .commit()
            .unwrap();
    }
    let stop = Arc::new(AtomicBool::new(false));
    let seed: u64 = std::env::var("SHOAL_SEED")
        .ok()
        .and_then(|x| x.parse().ok())
        .unwrap_or_else(|| {
            std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .unwrap()
                .as_nanos() as u64
        });
    eprintln!("SHOAL_SEED={seed}");
    let mut hs = Vec::new();
    for t in 0..2u64 {
        let (s, m) = (s.clone(), m.clone());
        hs.push(std::thread::spawn(move || {
            let mut x = seed ^ (t + 1).wrapping_mul(0x9e37_79b9_7f4a_7c15);
            let mut next = || {
                x ^= x << 13;
                x ^= x >> 7;
                x ^= x << 17;
                x
            };
            for _ in 0..8000 {
                let (a, b) = ((next() % ACCOUNTS) as u8, (next() % ACCOUNTS) as u8);
                if a == b {
                    continue;
                }
                let amt = (next() % 50) as i64;
                let (ka, kb) = (k(a as u64), k(b as u64));
                if t == 0 {
                    s.transaction()
                        .when(Cond::int(m.of(a), &ka, IntCmp::Ge, amt))
                        .then(TxnOp::add(m.of(a), &ka, -amt))
                        .then(TxnOp::add(m.of(b), &kb, amt))
                        .commit()
                        .unwrap();
                } else {
                    s.optimistic(|r| {
                        let (x, y) = (r.get_i64(m.of(a), &ka)?, r.get_i64(m.of(b), &kb)?);
                        if x >= amt {
                            r.write(TxnOp::put(m.of(a), &ka, &v(x - amt)));
                            r.write(TxnOp::put(m.of(b), &kb, &v(y + amt)));
                        }
                        Ok(())
                    })
                    .unwrap();
                }
            }
        }));
    }
    let mut readers = Vec::new();
    {
        let (s, m, stop) = (s.clone(), m.clone(), stop.clone());
        readers.push(std::thread::spawn(move || {
            let keys: Vec<[u8; 8]> = (0..ACCOUNTS).map(k).collect();
            let mut n = 0u64;
            while !stop.load(Ordering::Relaxed) || n == 0 {
                let req: Vec<(&dyn TxnTarget, &[u8])> = keys
                    .iter()
                    .enumerate()
                    .map(|(a, x)| (m.of(a as u8), &x[..]))
                    .collect();
                let vals = s.snapshot_get(&req).unwrap();
                let sum: i64 = vals
                    .iter()
                    .map(|x| i64::from_le_bytes(x.as_deref().unwrap().try_into().unwrap()))
                    .sum();
                assert_eq!(
                    sum,
                    START * ACCOUNTS as i64,
                    "a snapshot saw part of a transfer (seed {seed})"
                );
                n += 1;
            }
            n
        }));
    }
    for h in hs {
        h.join().unwrap();
    }
    stop.store(true, Ordering::Relaxed);
    for r in readers {
        assert!(r.join().unwrap() > 0);
    }
    let sum: i64 = (0..ACCOUNTS as u8)
        .map(|a| i64::from_le_bytes(m.get(a).unwrap().try_into().unwrap()))
        .sum();
    assert_eq!(sum, START * ACCOUNTS as i64, "seed {seed}");
    check(&s);
}

/// A reader by UID validates with the entry's version, never with a bucket header, and a
/// transaction applies every entry before any header. Stopped halfway through its apply
/// (B's entry already moved, A's not yet), a transaction that sets B then A to 1 must not
/// let a reader by UID see B's new value and then A's old one: the versions it changes
/// read busy until its apply ends, so that reader waits (here: times out) instead.
#[cfg(feature = "failpoints")]
#[test]
fn uid_readers_never_see_half_a_transaction() {
    const ME: &str = "uid_readers_never_see_half_a_transaction";
    let _one = CRASH_DRIVER.lock().unwrap_or_else(|e| e.into_inner());
    let d = tmp();
    let s = store(&d);
    let u = var_map(&s, "u", true);
    let (_, a) = u.put_with_uid(b"A", &v(0)).unwrap();
    let (_, b) = u.put_with_uid(b"B", &v(0)).unwrap();
    let reader = u.with_timeout(Duration::from_millis(50));
    let (tx, rx) = std::sync::mpsc::channel();
    let seen = Arc::new(std::sync::Mutex::new(None));
    let seen2 = seen.clone();
    let tx = std::sync::Mutex::new(tx);
    shoal::failpoints::setup();
    shoal::failpoints::callback("txn.half_applied", move || {
        // Only this test's commit (other tests of this binary commit transactions too).
        if std::thread::current().name() != Some(ME) {
            return;
        }
        let r = reader.clone();
        let h = std::thread::spawn(move || (r.get_by_uid(b), r.get_by_uid(a)));
        // The reader finishes (a value or a timeout) while the commit is stopped here.
        let got = h.join().unwrap();
        *seen2.lock().unwrap() = Some(got);
        let _ = tx.lock().unwrap().send(());
    })
    .unwrap();
    let out = s
        .transaction()
        .then(TxnOp::put(&u, b"B", &v(1)))
        .then(TxnOp::put(&u, b"A", &v(1)))
        .commit();
    shoal::failpoints::clear("txn.half_applied");
    out.unwrap();
    rx.recv_timeout(Duration::from_secs(30))
        .expect("the fail point was not reached");
    let (rb, ra) = seen.lock().unwrap().take().unwrap();
    if let (Ok(vb), Ok(va)) = (&rb, &ra) {
        assert!(
            !(vb[..] == v(1) && va[..] == v(0)),
            "a reader by UID saw B's new value, then A's old one"
        );
    }
    assert_eq!(u.get_by_uid(a).unwrap(), v(1));
    assert_eq!(u.get_by_uid(b).unwrap(), v(1));
    check(&s);
}

// ---- Values in place ----

/// A transaction's write of a value of the key's current length to a variable-size map
/// (with and without UIDs) overwrites it in place, as a single-key put does: transfers
/// append nothing and kill nothing (the store's dead bytes stay put), a key keeps its
/// UID and its version moves by one per write, and a store too full for one more record
/// still commits them. A value of another length still appends.
#[test]
fn variable_map_transactions_write_same_length_values_in_place() {
    let d = tmp();
    let opts = Options {
        chunk_size: 64 * 1024,
        max_size: 4 << 20,
        lock_timeout: Duration::from_secs(30),
        // Values go in place only without checksums (the default on tmpfs only).
        checksums: Some(false),
        ..Options::default()
    };
    let s = Store::open_with(d.path().join("t.shoal"), &opts, OpenMode::OpenOrCreate).unwrap();
    let p = var_map(&s, "p", false);
    let u = var_map(&s, "u", true);
    for i in 0..8u64 {
        p.put(&k(i), &v(100)).unwrap();
        u.put(&k(i), &v(100)).unwrap();
    }
    let uid0 = u.uid(&k(0)).unwrap().unwrap();
    let ver0 = u.version(&k(0)).unwrap().unwrap();
    let dead0 = p.stats().unwrap().store_dead_bytes;
    let transfer = |m: &Map, a: u64, b: u64| {
        s.transaction()
            .when(Cond::int(m, &k(a), IntCmp::Ge, 1))
            .then(TxnOp::add(m, &k(a), -1))
            .then(TxnOp::add(m, &k(b), 1))
            .commit()
            .unwrap()
            .succeeded
    };
    for i in 0..50u64 {
        assert!(transfer(&p, i % 8, (i + 3) % 8));
        assert!(transfer(&u, 0, 1 + i % 7));
    }
    assert_eq!(
        p.stats().unwrap().store_dead_bytes,
        dead0,
        "transfers of 8-byte values killed records: they appended instead of going in place"
    );
    assert_eq!(u.uid(&k(0)).unwrap(), Some(uid0));
    assert_eq!(u.version(&k(0)).unwrap(), Some(ver0 + 50));
    assert_eq!(u.get(&k(0)).unwrap().unwrap(), v(50));
    // A value of another length appends a record; the old one dies.
    p.put(b"other", &v(1)).unwrap();
    let dead1 = p.stats().unwrap().store_dead_bytes;
    s.transaction()
        .then(TxnOp::put(&p, b"other", b"nine byte"))
        .commit()
        .unwrap();
    assert!(p.stats().unwrap().store_dead_bytes > dead1);
    assert_eq!(p.get(b"other").unwrap().as_deref(), Some(&b"nine byte"[..]));
    // Fill the store: no record fits any more, yet in-place transfers still commit.
    let mut n = 0u64;
    loop {
        match p.put(format!("fill{n}").as_bytes(), &[1u8; 200]) {
            Ok(_) => n += 1,
            Err(Error::StoreFull(_)) => break,
            Err(e) => panic!("{e}"),
        }
    }
    for i in 0..20u64 {
        assert!(transfer(&p, i % 8, (i + 5) % 8));
        assert!(transfer(&u, 1 + i % 7, 0));
    }
    let sum = |m: &Map| -> i64 {
        (0..8u64)
            .map(|i| i64::from_le_bytes(m.get(&k(i)).unwrap().unwrap()[..].try_into().unwrap()))
            .sum()
    };
    assert_eq!((sum(&p), sum(&u)), (800, 800));
    // A value of another length needs a record: no room for one.
    let r = s
        .transaction()
        .then(TxnOp::put(&p, &k(0), b"nine byte"))
        .commit();
    assert!(matches!(r, Err(Error::StoreFull(_))), "{r:?}");
    assert_eq!(p.get(&k(0)).unwrap().unwrap().len(), 8);
    check(&s);
}

/// Values in place may cost a transaction more redo words than appends (an unaligned
/// 40-byte value spans 6 words; its append costs a slot and a byte counter the writes
/// share): a transaction that fits as appends and not in place still commits, with every
/// value written, and one that fits neither way is "too large" with nothing changed.
#[test]
fn in_place_values_that_overflow_the_redo_list_fall_back_to_appends() {
    let d = tmp();
    let s = store(&d);
    let p = var_map(&s, "p", false);
    let old = [1u8; 40];
    for i in 0..64u64 {
        p.put(&k(i), &old).unwrap();
    }
    let new = [2u8; 40];
    let mut t = s.transaction();
    for i in 0..4u64 {
        t = t.then(TxnOp::put(&p, &k(i * 9), &new));
    }
    let out = t.commit().unwrap();
    assert!(out
        .results
        .iter()
        .all(|r| r.applied && r.value.as_deref() == Some(&old[..])));
    for i in 0..4u64 {
        assert_eq!(p.get(&k(i * 9)).unwrap().as_deref(), Some(&new[..]));
    }
    // Twenty keys' appends cost at least 21 words: too large either way.
    let mut t = s.transaction();
    for i in 0..20u64 {
        t = t.then(TxnOp::put(&p, &k(i * 3 + 1), &new));
    }
    match t.commit() {
        Err(Error::InvalidArgument(msg)) => assert!(msg.contains("too large"), "{msg}"),
        r => panic!("expected too large, got {r:?}"),
    }
    for i in 0..20u64 {
        assert_eq!(p.get(&k(i * 3 + 1)).unwrap().as_deref(), Some(&old[..]));
    }
    check(&s);
}
