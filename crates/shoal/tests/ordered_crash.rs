//! The crash driver of ordered maps: a child killed at every step of a commit.
//!
//! For every fail point in `shoal::failpoints::ORDERED_NAMES` (and the allocator's, which
//! a commit that grows its pages reaches), a census run of the worker counts how often it
//! passes there, H; then a child is killed (abort: no destructor, locks and intents left
//! as they are) at passes 1, 2, H/2 and H. After each kill this process checks that every
//! transaction the child saw committed is there and none is there in part (the accounts'
//! sum, the transaction markers), that `check` passes, and that the map takes writes again
//! (its locks recovered from the dead child).
#![cfg(feature = "failpoints")]

mod common;

use common::crash_child;
use shoal::Store;
use std::collections::BTreeSet;
use std::io::Write;
use std::path::Path;

const ACCOUNTS: u64 = 20;

fn prepare(path: &Path) {
    let s = Store::open(path).unwrap();
    let (m, m2) = (
        s.ordered_map("bank").unwrap(),
        s.ordered_map("bank2").unwrap(),
    );
    let mut w = m.write_with(&[&m2]).unwrap();
    for a in 0..ACCOUNTS {
        w.put(&m, &account(a), &100u64.to_le_bytes()).unwrap();
        w.put(&m2, &account(a), &100u64.to_le_bytes()).unwrap();
    }
    w.commit().unwrap();
}

fn value(v: Option<Vec<u8>>) -> u64 {
    u64::from_le_bytes(v.unwrap().try_into().unwrap())
}

fn account(a: u64) -> Vec<u8> {
    format!("acct:{a:02}").into_bytes()
}

fn blob_key(i: u64) -> String {
    format!("blob:{i:04}")
}

/// A value kept out of line, of a length and bytes that say which transaction wrote it.
fn blob(i: u64) -> Vec<u8> {
    vec![i as u8; 5000 + 100 * i as usize]
}

/// A key kept out of line (past 984 bytes), sharing its first 1500 bytes with the others:
/// separators between them are out of line too.
fn long_key(i: u64, j: u64) -> Vec<u8> {
    format!("long:{}{i:04}:{j:04}", "x".repeat(1500)).into_bytes()
}

fn long_value(i: u64, j: u64) -> Vec<u8> {
    format!("{i}:{j}").repeat(20).into_bytes()
}

fn acks(path: &Path) -> std::path::PathBuf {
    path.with_extension("acks")
}

#[test]
#[ignore = "run as a child by the crash driver"]
fn ordered_worker() {
    let Some((path, counter)) = crash_child::arm() else {
        return;
    };
    let path = Path::new(&path);
    let s = Store::open_existing(path).unwrap();
    let fresh = s.ordered_map("fresh").unwrap();
    fresh.put(b"made", b"yes").unwrap();
    let m = s.ordered_map("bank").unwrap();
    let m2 = s.ordered_map("bank2").unwrap();
    let mut log = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(acks(path))
        .unwrap();
    for i in 0..60u64 {
        // A reader's snapshot held across the commit: a dead reader pins nothing.
        let snap = m.snapshot().unwrap();
        if i % 3 == 1 {
            // A transfer from one map to the other.
            let mut t = m.write_with(&[&m2]).unwrap();
            let a = account(i % ACCOUNTS);
            let va = value(t.get(&m, &a).unwrap());
            let vb = value(t.get(&m2, &a).unwrap());
            t.put(&m, &a, &(va - 1).to_le_bytes()).unwrap();
            t.put(&m2, &a, &(vb + 1).to_le_bytes()).unwrap();
            t.put(&m2, format!("txn:{i:04}").as_bytes(), &i.to_le_bytes())
                .unwrap();
            t.commit().unwrap();
            drop(snap);
            writeln!(log, "{i}").unwrap();
            continue;
        }
        let mut w = m.write().unwrap();
        let (a, b) = (i % ACCOUNTS, (i * 7 + 3) % ACCOUNTS);
        if a != b {
            let va = u64::from_le_bytes(w.get(&account(a)).unwrap().unwrap().try_into().unwrap());
            let vb = u64::from_le_bytes(w.get(&account(b)).unwrap().unwrap().try_into().unwrap());
            w.put(&account(a), &(va - 1).to_le_bytes()).unwrap();
            w.put(&account(b), &(vb + 1).to_le_bytes()).unwrap();
        }
        w.put(format!("txn:{i:04}").as_bytes(), &i.to_le_bytes())
            .unwrap();
        if i % 10 == 9 {
            // Enough pages for splits and for the pool to take a run.
            for j in 0..120u64 {
                w.put(format!("fill:{i:04}:{j:04}").as_bytes(), &[i as u8; 400])
                    .unwrap();
            }
            // A value of its own pages, and the one before it dropped: overflow pages
            // written and freed by the same commit.
            w.put(blob_key(i).as_bytes(), &blob(i)).unwrap();
            if i >= 10 {
                w.remove(blob_key(i - 10).as_bytes()).unwrap();
            }
            // Long keys, added and dropped: their pages and their separators' written
            // and freed by the same commit.
            for j in 0..40u64 {
                w.put(&long_key(i, j), &long_value(i, j)).unwrap();
                if i >= 20 && j % 2 == 0 {
                    w.remove(&long_key(i - 20, j)).unwrap();
                }
            }
        }
        w.commit().unwrap();
        drop(snap);
        writeln!(log, "{i}").unwrap();
    }
    crash_child::census_done(counter);
}

fn verify(path: &Path) -> Vec<String> {
    let mut problems = Vec::new();
    let acked: BTreeSet<u64> = std::fs::read_to_string(acks(path))
        .unwrap_or_default()
        .lines()
        .map(|l| l.parse().unwrap())
        .collect();
    let s = Store::open_existing(path).unwrap();
    let r = s.check().unwrap();
    if !r.is_ok() {
        problems.push(format!("check: {r}"));
    }
    let m = s.ordered_map("bank").unwrap();
    let m2 = s.ordered_map("bank2").unwrap();
    let snaps = m.snapshot_with(&[&m2]).unwrap();
    let mut sum = 0u64;
    let mut txns = BTreeSet::new();
    let mut bad_blobs = Vec::new();
    let mut bad_long = Vec::new();
    let mut long = 0;
    for snap in &snaps {
        snap.for_each(None, None, false, |k, v| {
            if k.starts_with(b"acct:") {
                sum += u64::from_le_bytes(v.try_into().unwrap());
            } else if let Some(i) = k.strip_prefix(b"txn:") {
                txns.insert(std::str::from_utf8(i).unwrap().parse::<u64>().unwrap());
            } else if let Some(ij) = k.strip_prefix(b"long:") {
                let ij = std::str::from_utf8(&ij[1500..]).unwrap();
                let (i, j) = ij.split_once(':').unwrap();
                let (i, j) = (i.parse().unwrap(), j.parse().unwrap());
                long += 1;
                if k != long_key(i, j).as_slice() || v != long_value(i, j).as_slice() {
                    bad_long.push((i, j));
                }
            } else if let Some(i) = k.strip_prefix(b"blob:") {
                let i: u64 = std::str::from_utf8(i).unwrap().parse().unwrap();
                if v != blob(i).as_slice() {
                    bad_blobs.push(i);
                }
            }
            true
        })
        .unwrap();
    }
    drop(snaps);
    if acked.contains(&9) && long < 40 {
        problems.push(format!("{long} long keys after the commit that put 40"));
    }
    if !bad_long.is_empty() {
        problems.push(format!("keys kept out of line read wrong: {bad_long:?}"));
    }
    if !bad_blobs.is_empty() {
        problems.push(format!("values kept out of line read wrong: {bad_blobs:?}"));
    }
    if sum != 200 * ACCOUNTS {
        problems.push(format!("the accounts sum to {sum}: half a transaction"));
    }
    if !acked.is_subset(&txns) {
        problems.push(format!(
            "committed transactions lost: {:?}",
            acked.difference(&txns)
        ));
    }
    let extra: Vec<_> = txns.difference(&acked).collect();
    if extra.len() > 1 {
        problems.push(format!("transactions never committed are there: {extra:?}"));
    }
    // Locks the child held are recovered: both maps take writes again.
    if let Err(e) = m.put(b"after", b"crash") {
        problems.push(format!("the map takes no write after the crash: {e}"));
    }
    match s.ordered_map("fresh") {
        Ok(f) => {
            if let Err(e) = f.put(b"after", b"crash") {
                problems.push(format!("the fresh map takes no write: {e}"));
            }
        }
        Err(e) => problems.push(format!("the fresh map does not open: {e}")),
    }
    let r = s.check().unwrap();
    if !r.is_ok() {
        problems.push(format!("check after writes: {r}"));
    }
    problems
}

#[test]
fn a_crash_at_every_step_of_a_commit_leaves_whole_transactions() {
    let points: Vec<&str> = shoal::failpoints::ORDERED_NAMES
        .iter()
        .chain(&["alloc.committed", "alloc.applied"])
        .copied()
        .collect();
    let (cases, failures) = crash_child::drive("ordered_worker", &points, prepare, |path, _, _| {
        verify(path)
    });
    assert!(
        failures.is_empty(),
        "{cases} cases; failures:\n{}",
        failures.join("\n")
    );
    assert!(cases >= points.len() * 2, "{cases} cases");
    eprintln!(
        "{cases} crashes at {} fail points, each verified",
        points.len()
    );
}
