//! A process of the transaction storm (`tests/txn_storm.rs`), in one of two modes.
//!
//! **Sum mode**: `transfer` moves money between the accounts of the accounts' map with
//! multi-key transactions (locked and optimistic), now and then inserting a new key in
//! the same transaction (so the map grows under the storm); `read` reads every account
//! with `Store::snapshot_get` and checks the sum. The map is the fixed-size map `acct`,
//! or with `var` the variable-size map `vacct`.
//!
//! ```text
//! shoal-txn-worker ROLE STORE SEED ACCOUNTS TOTAL [fixed|var]      (runs until killed)
//! roles: transfer, read, backup
//! ```
//!
//! `backup` takes hot backups of the store (`Store::backup`) one after another, and checks
//! each copy: it passes `check` and its accounts sum to the total (one instant's state).
//!
//! A reader or backup that sees a wrong sum prints it on stderr and exits with status 2;
//! any error is status 1.
//!
//! **History mode** (the strict-serializability storm): every operation is logged with
//! its call and return times and its result, for `lincheck -txn`
//! (tools/linearizability/txn.go gives the log format).
//!
//! ```text
//! shoal-txn-worker STORE ROLE --id N --gen N --seed N --stop FILE --log FILE
//!                  --accounts N --total N [--period-us P --active-us A --burst-ops B]
//!
//! roles:
//!   lin-writer  transfers between two accounts, of one map or of two: a conditional
//!               transaction (if the source holds the amount, move it; else read both
//!               balances), or an optimistic one (read both, compute, commit if
//!               unchanged), or a watch on a version (read a `vacct` account's value
//!               and UID version, commit if the version is unchanged: `Cond::version`);
//!               some conditional ones also insert a key that is not an account (the
//!               maps grow under the storm); consistent reads
//!   lin-reader  consistent reads (`Store::snapshot_get`) of a few accounts or all
//! ```
//!
//! The accounts are `--accounts` keys (the u64 0, 1, ... little-endian) in each of three
//! maps: the fixed-size map `acct` (8-byte keys and values), the variable-size map with
//! UIDs `vacct`, the variable-size map without UIDs `pacct`; account number `m *
//! accounts + i` is key `i` of map `m` in that order. Values are 8-byte little-endian
//! balances. The log is LOG with the extension `tlin`, written through
//! `shoal_torture::linlog::Lin` (a kill leaves whole lines). Runs until the `--stop` file
//! appears. A read of every account that does not sum to `--total` is exit status 2; an
//! engine error, 3. `--period-us P --active-us A` runs operations only in the first A µs
//! of every P µs of CLOCK_MONOTONIC (all workers burst together; the harness kills inside
//! bursts), at most B per burst (`--burst-ops`, default unbounded): the history stays
//! small enough for Porcupine while kills land mid-transaction.

use shoal::{Cond, IntCmp, OpenMode, Options, Store, TxnMap, TxnOp, TxnTarget};
use std::time::Duration;

fn main() {
    let a: Vec<String> = std::env::args().collect();
    if a.get(3).map(String::as_str) == Some("--id") {
        return history::main(&a);
    }
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
        "backup" => backup(&s, path, accounts, total, a.get(6).map(|x| x.as_str())),
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

/// Reads every account of `m` in `s` as of one instant; exits with status 2, saying
/// `what` and the balances, unless they are all there and sum to `total`.
fn check_sum(s: &Store, m: &TxnMap, accounts: u64, total: i64, what: &str) {
    let keys: Vec<[u8; 8]> = (0..accounts).map(|i| i.to_le_bytes()).collect();
    let req: Vec<(&TxnMap, &[u8])> = keys.iter().map(|x| (m, &x[..])).collect();
    let vals = s.snapshot_get(&req).unwrap_or_else(|e| fail(e));
    let sum: i64 = vals
        .iter()
        .map(|v| {
            v.as_deref()
                .map_or(0, |b| i64::from_le_bytes(b.try_into().unwrap_or([0; 8])))
        })
        .sum();
    if sum != total || vals.iter().any(|v| v.is_none()) {
        eprintln!("{what} sum {sum}, expected {total}: {vals:?}");
        std::process::exit(2);
    }
}

fn read(s: &Store, m: &TxnMap, accounts: u64, total: i64) {
    loop {
        check_sum(s, m, accounts, total, "snapshot");
    }
}

fn backup(s: &Store, path: &str, accounts: u64, total: i64, kind: Option<&str>) {
    let dst = format!("{path}.copy-{}", std::process::id());
    loop {
        let _ = std::fs::remove_file(&dst);
        if let Err(e) = s.backup(&dst) {
            fail(e);
        }
        let c =
            Store::open_with(&dst, &Options::default(), OpenMode::Open).unwrap_or_else(|e| fail(e));
        let r = c.check().unwrap_or_else(|e| fail(e));
        if !r.problems.is_empty() {
            eprintln!("a copy fails check: {:?}", r.problems);
            std::process::exit(2);
        }
        let m = match kind {
            Some("var") => c.open_map("vacct").map(|m| m.txn_map()),
            _ => c.fixed_map("acct", 8, 8).map(|m| m.txn_map()),
        }
        .unwrap_or_else(|e| fail(e));
        check_sum(&c, &m, accounts, total, "a copy's");
        println!("copy");
    }
}

/// History mode (see the crate comment).
mod history {
    use rand::rngs::StdRng;
    use rand::{Rng, SeedableRng};
    use shoal::{Cond, IntCmp, Map, OpenMode, Options, Store, TxnMap, TxnOp, TxnTarget};
    use shoal_torture::harness::WorkerArgs;
    use shoal_torture::linlog::Lin;
    use shoal_torture::now_ns;
    use std::time::Duration;

    struct Args {
        w: WorkerArgs,
        accounts: u64,
        total: u64,
        period_us: u64,
        active_us: u64,
        burst_ops: u64,
    }

    fn parse(a: &[String]) -> Args {
        let w = WorkerArgs::parse(
            &a[1..],
            &[
                "--accounts",
                "--total",
                "--period-us",
                "--active-us",
                "--burst-ops",
            ],
        );
        let out = Args {
            accounts: w.num("--accounts", 0),
            total: w.num("--total", 0),
            period_us: w.num("--period-us", 0),
            active_us: w.num("--active-us", 0),
            burst_ops: w.num("--burst-ops", u64::MAX),
            w,
        };
        if out.accounts == 0 || out.w.log.as_os_str().is_empty() {
            fail(1, "--accounts (at least 1) and --log are needed".into());
        }
        out
    }

    fn fail(code: i32, what: String) -> ! {
        eprintln!("{what}");
        std::process::exit(code);
    }

    fn ok<T>(r: shoal::Result<T>, what: &str) -> T {
        r.unwrap_or_else(|e| fail(3, format!("{what}: {e}")))
    }

    fn balance(v: Option<&[u8]>, i: u64) -> u64 {
        let v = v.unwrap_or_else(|| fail(2, format!("account {i} is missing")));
        let b: [u8; 8] = v
            .try_into()
            .unwrap_or_else(|_| fail(2, format!("account {i}: {} bytes, not 8", v.len())));
        let x = i64::from_le_bytes(b);
        u64::try_from(x).unwrap_or_else(|_| fail(2, format!("account {i}: balance {x} < 0")))
    }

    fn join(v: &[u64]) -> String {
        v.iter().map(u64::to_string).collect::<Vec<_>>().join(",")
    }

    struct Bank {
        s: Store,
        maps: Vec<TxnMap>,
        /// `vacct`, for its keys' versions.
        uids: Map,
        accounts: u64,
        total: u64,
    }

    impl Bank {
        /// Account `i`'s map and key.
        fn at(&self, i: u64) -> (&TxnMap, [u8; 8]) {
            (
                &self.maps[(i / self.accounts) as usize],
                (i % self.accounts).to_le_bytes(),
            )
        }

        /// A conditional transfer; with `grow`, it also inserts key `grow` (not an
        /// account) into the source's map. Returns both balances before it and whether
        /// it moved the money.
        fn xfer(&self, from: u64, to: u64, amt: u64, grow: Option<u64>) -> (u64, u64, bool) {
            let ((mf, kf), (mt, kt)) = (self.at(from), self.at(to));
            let mut t = self
                .s
                .transaction()
                .when(Cond::int(mf, &kf, IntCmp::Ge, amt as i64))
                .then(TxnOp::add(mf, &kf, -(amt as i64)))
                .then(TxnOp::add(mt, &kt, amt as i64))
                .otherwise(TxnOp::get(mf, &kf))
                .otherwise(TxnOp::get(mt, &kt));
            if let Some(g) = grow {
                t = t.then(TxnOp::put_if_absent(mf, &g.to_le_bytes(), &[0; 8]));
            }
            let out = ok(t.commit(), "commit a transfer");
            let (va, vb) = (
                balance(out.results[0].value.as_deref(), from),
                balance(out.results[1].value.as_deref(), to),
            );
            (va, vb, out.succeeded)
        }

        /// An optimistic transfer: the balances its committed run read, and whether it
        /// moved the money.
        fn opt(&self, from: u64, to: u64, amt: u64) -> (u64, u64, bool) {
            let ((mf, kf), (mt, kt)) = (self.at(from), self.at(to));
            let (va, vb) = ok(
                self.s.optimistic(|r| {
                    let (x, y) = (r.get(mf, &kf)?, r.get(mt, &kt)?);
                    let (x, y) = (balance(x.as_deref(), from), balance(y.as_deref(), to));
                    if x >= amt {
                        r.write(TxnOp::put(mf, &kf, &((x - amt) as i64).to_le_bytes()));
                        r.write(TxnOp::put(mt, &kt, &((y + amt) as i64).to_le_bytes()));
                    }
                    Ok((x, y))
                }),
                "optimistic transfer",
            );
            (va, vb, va >= amt)
        }

        /// A watch on a version: reads the source account's value and its UID entry's
        /// version (a key of `vacct`), computes, and commits only if the version is
        /// still the same (`Cond::version`), else reads again. Returns both balances
        /// before the commit (from its operations' results) and whether it moved money.
        fn ver(&self, from: u64, to: u64, amt: u64) -> (u64, u64, bool) {
            let ((mf, kf), (mt, kt)) = (self.at(from), self.at(to));
            for _ in 0..1_000_000 {
                let v1 = ok(self.uids.version(&kf), "version");
                let x = ok(self.uids.get(&kf), "get");
                // The value is the version's only if no change came between.
                let Some(v) = v1.filter(|&v| ok(self.uids.version(&kf), "version") == Some(v))
                else {
                    continue;
                };
                let x = balance(x.as_deref(), from);
                let t = self.s.transaction().when(Cond::version(mf, &kf, v));
                let t = if x >= amt {
                    t.then(TxnOp::put(mf, &kf, &((x - amt) as i64).to_le_bytes()))
                        .then(TxnOp::add(mt, &kt, amt as i64))
                } else {
                    t.then(TxnOp::get(mf, &kf)).then(TxnOp::get(mt, &kt))
                };
                let out = ok(t.commit(), "commit a versioned transfer");
                if out.succeeded {
                    let (va, vb) = (
                        balance(out.results[0].value.as_deref(), from),
                        balance(out.results[1].value.as_deref(), to),
                    );
                    return (va, vb, x >= amt);
                }
            }
            fail(
                3,
                format!("a versioned transfer from {from} never committed"),
            )
        }

        /// A consistent read of accounts `keys`; with every account among them, checks
        /// their sum.
        fn read(&self, keys: &[u64]) -> Vec<u64> {
            let ks: Vec<(&TxnMap, [u8; 8])> = keys.iter().map(|&i| self.at(i)).collect();
            let req: Vec<(&TxnMap, &[u8])> = ks.iter().map(|(m, k)| (*m, &k[..])).collect();
            let vals: Vec<u64> = ok(self.s.snapshot_get(&req), "snapshot_get")
                .iter()
                .zip(keys)
                .map(|(v, &i)| balance(v.as_deref(), i))
                .collect();
            if keys.len() as u64 == 3 * self.accounts && vals.iter().sum::<u64>() != self.total {
                fail(
                    2,
                    format!(
                        "a consistent read saw the accounts {vals:?} sum to {}, not {}",
                        vals.iter().sum::<u64>(),
                        self.total
                    ),
                );
            }
            vals
        }
    }

    pub fn main(a: &[String]) {
        let a = parse(a);
        let mut rng = StdRng::seed_from_u64(a.w.seed ^ (a.w.id << 32) ^ (a.w.gen << 48) ^ 0x7a1);
        let mut lin = Lin::create(&a.w.log.with_extension("tlin"));
        lin.line(
            'W',
            &format!("{} {} {}", a.w.id, a.w.gen, std::process::id()),
        );
        let opts = Options {
            lock_timeout: Duration::from_secs(30),
            ..Options::default()
        };
        let s = ok(Store::open_with(&a.w.store, &opts, OpenMode::Open), "open");
        let uids = ok(s.open_map("vacct"), "vacct");
        let maps = vec![
            ok(s.fixed_map("acct", 8, 8), "acct").txn_map(),
            uids.txn_map(),
            ok(s.open_map("pacct"), "pacct").txn_map(),
        ];
        let bank = Bank {
            s,
            maps,
            uids,
            accounts: a.accounts,
            total: a.total,
        };
        let n = 3 * a.accounts;
        let writer = match a.w.role.as_str() {
            "lin-writer" => true,
            "lin-reader" => false,
            r => fail(1, format!("unknown role {r:?}")),
        };
        let (mut burst, mut done) = (u64::MAX, 0u64);
        while !a.w.stop.exists() {
            let us = now_ns() / 1000;
            if let Some(this) = us.checked_div(a.period_us) {
                let phase = us - this * a.period_us;
                if this != burst {
                    (burst, done) = (this, 0);
                }
                if phase >= a.active_us || done >= a.burst_ops {
                    std::thread::sleep(Duration::from_micros(a.period_us - phase));
                    continue;
                }
                done += 1;
            }
            let pick = rng.random_range(0..100);
            if writer && pick < 65 {
                let from = rng.random_range(0..n);
                let to = (from + rng.random_range(1..n)) % n;
                let amt = rng.random_range(1..60);
                if pick < 45 {
                    let grow = rng
                        .random_bool(0.25)
                        .then(|| (1 << 40) | rng.random_range(0..4096));
                    lin.line('C', &format!("xfer {from} {to} {amt}"));
                    let (va, vb, moved) = bank.xfer(from, to, amt, grow);
                    let r = if moved { "ok" } else { "no" };
                    lin.line('R', &format!("{va} {vb} {r}"));
                } else if pick < 57 {
                    lin.line('C', &format!("opt {from} {to} {amt}"));
                    let (va, vb, moved) = bank.opt(from, to, amt);
                    let r = if moved { "ok" } else { "no" };
                    lin.line('R', &format!("{va} {vb} {r}"));
                } else {
                    // From an account of `vacct` (the map with UIDs).
                    let from = a.accounts + from % a.accounts;
                    let to = if to == from { (to + 1) % n } else { to };
                    lin.line('C', &format!("ver {from} {to} {amt}"));
                    let (va, vb, moved) = bank.ver(from, to, amt);
                    let r = if moved { "ok" } else { "no" };
                    lin.line('R', &format!("{va} {vb} {r}"));
                }
            } else {
                let keys: Vec<u64> = if rng.random_bool(0.3) {
                    (0..n).collect()
                } else {
                    let mut ks: Vec<u64> = (0..rng.random_range(1..5))
                        .map(|_| rng.random_range(0..n))
                        .collect();
                    ks.sort_unstable();
                    ks.dedup();
                    ks
                };
                lin.line('C', &format!("read {}", join(&keys)));
                let vals = bank.read(&keys);
                lin.line('R', &join(&vals));
            }
        }
        lin.finish();
    }
}
