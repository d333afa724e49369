//! A process of the transaction storm (`tests/txn_storm.rs`): `transfer` moves money
//! between the accounts of the accounts' map with multi-key transactions (locked and
//! optimistic), now and then inserting a new key in the same transaction (so the map grows
//! under the storm); `read` reads every account with `Store::snapshot_get` and checks the
//! sum. The map is the fixed-size map `acct`, or with `var` the variable-size map `vacct`.
//!
//! Usage: `shoal-txn-worker ROLE STORE SEED ACCOUNTS TOTAL [fixed|var]`. Runs until killed.
//! A reader that sees a wrong sum prints it on stderr and exits with status 2; any error is
//! status 1.

use shoal::{Cond, IntCmp, OpenMode, Options, Store, TxnMap, TxnOp, TxnTarget};
use std::time::Duration;

fn main() {
    let a: Vec<String> = std::env::args().collect();
    if a.len() != 6 && a.len() != 7 {
        eprintln!("usage: shoal-txn-worker transfer|read STORE SEED ACCOUNTS TOTAL [fixed|var]");
        std::process::exit(1);
    }
    let (role, path) = (&a[1], &a[2]);
    let num = |i: usize| -> u64 {
        a[i].parse().unwrap_or_else(|_| {
            eprintln!("argument {i} ({:?}) is not a number", a[i]);
            std::process::exit(1)
        })
    };
    let (seed, accounts, total) = (num(3), num(4), num(5) as i64);
    let opts = Options {
        lock_timeout: Duration::from_secs(30),
        ..Options::default()
    };
    let s = Store::open_with(path, &opts, OpenMode::Open).unwrap_or_else(|e| fail(e));
    let m = match a.get(6).map(|x| x.as_str()) {
        None | Some("fixed") => s.fixed_map("acct", 8, 8).map(|m| m.txn_map()),
        Some("var") => s.open_map("vacct").map(|m| m.txn_map()),
        Some(k) => {
            eprintln!("unknown map kind {k:?}");
            std::process::exit(1)
        }
    }
    .unwrap_or_else(|e| fail(e));
    match role.as_str() {
        "transfer" => transfer(&s, &m, seed, accounts),
        "read" => read(&s, &m, accounts, total),
        r => {
            eprintln!("unknown role {r:?}");
            std::process::exit(1)
        }
    }
}

fn fail(e: shoal::Error) -> ! {
    eprintln!("error: {e}");
    std::process::exit(1)
}

fn transfer(s: &Store, m: &TxnMap, seed: u64, accounts: u64) {
    let mut x = seed | 1;
    let mut next = move || {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        x
    };
    let k = |i: u64| i.to_le_bytes();
    loop {
        let (a, b) = (next() % accounts, next() % accounts);
        if a == b {
            continue;
        }
        let amt = (next() % 100) as i64;
        let r = match next() % 4 {
            0 => s
                .optimistic(|r| {
                    let (x, y) = (r.get_i64(m, &k(a))?, r.get_i64(m, &k(b))?);
                    if x >= amt {
                        r.write(TxnOp::put(m, &k(a), &(x - amt).to_le_bytes()));
                        r.write(TxnOp::put(m, &k(b), &(y + amt).to_le_bytes()));
                    }
                    Ok(())
                })
                .map(|_| ()),
            1 => {
                // A transfer that also inserts a new key (not an account): the map grows
                // while transfers lock its segments.
                let n = (1 << 40) | (next() % (1 << 20));
                s.transaction()
                    .when(Cond::int(m, &k(a), IntCmp::Ge, amt))
                    .when(Cond::absent(m, &k(n)))
                    .then(TxnOp::add(m, &k(a), -amt))
                    .then(TxnOp::add(m, &k(b), amt))
                    .then(TxnOp::put_if_absent(m, &k(n), &[0; 8]))
                    .commit()
                    .map(|_| ())
            }
            _ => s
                .transaction()
                .when(Cond::int(m, &k(a), IntCmp::Ge, amt))
                .then(TxnOp::add(m, &k(a), -amt))
                .then(TxnOp::add(m, &k(b), amt))
                .commit()
                .map(|_| ()),
        };
        if let Err(e) = r {
            fail(e);
        }
    }
}

fn read(s: &Store, m: &TxnMap, accounts: u64, total: i64) {
    let keys: Vec<[u8; 8]> = (0..accounts).map(|i| i.to_le_bytes()).collect();
    let req: Vec<(&TxnMap, &[u8])> = keys.iter().map(|x| (m, &x[..])).collect();
    loop {
        let vals = s.snapshot_get(&req).unwrap_or_else(|e| fail(e));
        let sum: i64 = vals
            .iter()
            .map(|v| {
                v.as_deref()
                    .map_or(0, |b| i64::from_le_bytes(b.try_into().unwrap_or([0; 8])))
            })
            .sum();
        if sum != total || vals.iter().any(|v| v.is_none()) {
            eprintln!("snapshot sum {sum}, expected {total}: {vals:?}");
            std::process::exit(2);
        }
    }
}
