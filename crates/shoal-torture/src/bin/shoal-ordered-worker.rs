//! `shoal-ordered-worker`: one process of the ordered-map kill storm
//! (`tests/ordered_storm.rs`). Opens an existing store with the ordered maps `acct-a` and
//! `acct-b`, each of `--accounts` accounts (keys `a<slot>`) and `--extra` other keys
//! (`x<slot>`), every value a u64 (little-endian), and runs transactions on them until
//! the `--stop` file appears.
//!
//! ```text
//! shoal-ordered-worker STORE ROLE --id N --gen N --seed N --stop FILE --log FILE
//!                      --accounts N --extra N --total N
//!                      [--period-us P --active-us A] [--pause-us N]
//!
//! roles:
//!   writer    transfers between two accounts (of one map: a WriteTxn; of both: a
//!             MultiWriteTxn), transfers it aborts after reading, single puts of the
//!             other keys, and snapshot reads of a few keys
//!   auditor   snapshot reads only: a few keys, or all of them
//!   holder    takes one snapshot of both maps, creates LOG with the extension `ready`,
//!             and keeps the snapshot (reading it now and then) until killed or stopped
//! ```
//!
//! Every snapshot (of both maps at one commit) that reads all the accounts checks that
//! they sum to `--total`: a snapshot that saw half a transfer is exit status 2 (any
//! engine error: 3).
//!
//! The keys are numbered for the log: map `m` (0 = `acct-a`, 1 = `acct-b`), slot `s`
//! (accounts first, then the other keys) is `m * (accounts + extra) + s`. The log (LOG
//! with the extension `olin`, for `lincheck -ordered`, whose `ordered.go` gives the
//! format) has a line before each operation (`C`, with CLOCK_MONOTONIC ns) and one after
//! it returned (`R`), in a mapped file (see `shoal_torture::linlog::Lin`), so a kill
//! leaves whole lines.
//! `--period-us P --active-us A` runs transactions only in the first A µs of every P
//! (CLOCK_MONOTONIC, so all workers burst together, and the harness kills inside
//! bursts): the history stays short enough to check while kills land mid-transaction.
//! `--pause-us N` sleeps a random 0..N µs before each step.

use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use shoal::{OrderedMap, Store};
use shoal_torture::harness::WorkerArgs;
use shoal_torture::linlog::Lin;
use std::time::Duration;

struct Args {
    w: WorkerArgs,
    accounts: u64,
    extra: u64,
    total: u64,
    period_us: u64,
    active_us: u64,
    pause_us: u64,
}

fn args() -> Args {
    let all: Vec<String> = std::env::args().skip(1).collect();
    let w = WorkerArgs::parse(
        &all,
        &[
            "--accounts",
            "--extra",
            "--total",
            "--pause-us",
            "--period-us",
            "--active-us",
        ],
    );
    let a = Args {
        accounts: w.num("--accounts", 0),
        extra: w.num("--extra", 0),
        total: w.num("--total", 0),
        period_us: w.num("--period-us", 0),
        active_us: w.num("--active-us", 0),
        pause_us: w.num("--pause-us", 0),
        w,
    };
    assert!(a.accounts >= 2, "--accounts: at least 2");
    a
}

fn fail(code: i32, what: String) -> ! {
    eprintln!("{what}");
    std::process::exit(code);
}

fn ok<T>(r: shoal::Result<T>, what: &str) -> T {
    r.unwrap_or_else(|e| fail(3, format!("{what}: {e}")))
}

/// The maps and the key numbering.
struct Bank {
    maps: [OrderedMap; 2],
    accounts: u64,
    extra: u64,
    total: u64,
}

impl Bank {
    fn per_map(&self) -> u64 {
        self.accounts + self.extra
    }

    /// Map number and key of key number `i`.
    fn key(&self, i: u64) -> (usize, Vec<u8>) {
        let (m, s) = (i / self.per_map(), i % self.per_map());
        let key = if s < self.accounts {
            format!("a{s}")
        } else {
            format!("x{}", s - self.accounts)
        };
        (m as usize, key.into_bytes())
    }

    fn account(&self, m: u64, s: u64) -> u64 {
        m * self.per_map() + s
    }

    /// Reads keys `keys` from one snapshot of both maps; with every account among them,
    /// checks their sum.
    fn read(&self, keys: &[u64]) -> Vec<u64> {
        let snaps = ok(
            self.maps[0].snapshot_with(&[&self.maps[1]]),
            "snapshot_with",
        );
        let vals: Vec<u64> = keys
            .iter()
            .map(|&i| {
                let (m, k) = self.key(i);
                let v = ok(snaps[m].get(&k), "get")
                    .unwrap_or_else(|| fail(2, format!("key {i} missing")));
                u64::from_le_bytes(
                    v.try_into()
                        .unwrap_or_else(|_| fail(2, format!("key {i}: not 8 bytes"))),
                )
            })
            .collect();
        let accounts = (0..2).flat_map(|m| (0..self.accounts).map(move |s| (m, s)));
        let mut sum = 0;
        let mut all = true;
        for (m, s) in accounts {
            match keys.iter().position(|&k| k == self.account(m, s)) {
                Some(j) => sum += vals[j],
                None => all = false,
            }
        }
        if all && sum != self.total {
            fail(
                2,
                format!(
                    "a snapshot (commit {}) saw the accounts sum to {sum}, not {}",
                    snaps[0].sequence(),
                    self.total
                ),
            );
        }
        vals
    }
}

fn u64_of(v: Option<Vec<u8>>, i: u64) -> u64 {
    let v = v.unwrap_or_else(|| fail(2, format!("key {i} missing in a transaction")));
    u64::from_le_bytes(
        v.try_into()
            .unwrap_or_else(|_| fail(2, format!("key {i}: not 8 bytes"))),
    )
}

fn join(v: &[u64]) -> String {
    v.iter().map(u64::to_string).collect::<Vec<_>>().join(",")
}

/// A transfer of `amt` from account `from` to `to` (key numbers), aborted after its
/// reads when `abort`: returns the balances it read and whether it moved the money.
fn transfer(bank: &Bank, from: u64, to: u64, amt: u64, abort: bool) -> (u64, u64, bool) {
    let (mf, kf) = bank.key(from);
    let (mt, kt) = bank.key(to);
    if mf == mt {
        let mut w = ok(bank.maps[mf].write(), "write");
        let va = u64_of(w.get(&kf).expect("a read in the transaction"), from);
        let vb = u64_of(w.get(&kt).expect("a read in the transaction"), to);
        if abort || va < amt {
            w.abort();
            return (va, vb, false);
        }
        ok(w.put(&kf, &(va - amt).to_le_bytes()), "put");
        ok(w.put(&kt, &(vb + amt).to_le_bytes()), "put");
        ok(w.commit(), "commit");
        (va, vb, true)
    } else {
        // Either map may be named first: the lock order must not depend on it.
        let mut t = ok(bank.maps[mf].write_with(&[&bank.maps[mt]]), "write_with");
        let va = u64_of(ok(t.get(&bank.maps[mf], &kf), "get"), from);
        let vb = u64_of(ok(t.get(&bank.maps[mt], &kt), "get"), to);
        if abort || va < amt {
            t.abort();
            return (va, vb, false);
        }
        ok(t.put(&bank.maps[mf], &kf, &(va - amt).to_le_bytes()), "put");
        ok(t.put(&bank.maps[mt], &kt, &(vb + amt).to_le_bytes()), "put");
        ok(t.commit(), "commit");
        (va, vb, true)
    }
}

/// The `holder` role: a long reader, whose pin keeps every page of its snapshot.
fn hold(a: &Args, bank: &Bank) {
    let snaps = ok(
        bank.maps[0].snapshot_with(&[&bank.maps[1]]),
        "snapshot_with",
    );
    let len = snaps[0].len();
    std::fs::write(
        a.w.log.with_extension("ready"),
        snaps[0].sequence().to_string(),
    )
    .unwrap_or_else(|e| fail(3, format!("ready file: {e}")));
    while !a.w.stop.exists() {
        std::thread::sleep(Duration::from_millis(20));
        // Its view never changes, whatever writers do meanwhile.
        let now = ok(snaps[0].count_range(None, None), "count_range");
        if now != len {
            fail(
                2,
                format!("a held snapshot's count went from {len} to {now}"),
            );
        }
    }
}

fn main() {
    let a = args();
    let mut rng = StdRng::seed_from_u64(a.w.seed ^ (a.w.id << 32) ^ (a.w.gen << 48) ^ 0x0d0e);
    let mut lin = Lin::create(&a.w.log.with_extension("olin"));
    lin.line(
        'W',
        &format!("{} {} {}", a.w.id, a.w.gen, std::process::id()),
    );
    let store = ok(Store::open_existing(&a.w.store), "open the store");
    let bank = Bank {
        maps: [
            ok(store.ordered_map("acct-a"), "acct-a"),
            ok(store.ordered_map("acct-b"), "acct-b"),
        ],
        accounts: a.accounts,
        extra: a.extra,
        total: a.total,
    };
    if a.w.role == "holder" {
        hold(&a, &bank);
        lin.finish();
        return;
    }
    let n_keys = 2 * bank.per_map();
    let mut seq = 0u64;
    while !a.w.stop.exists() {
        if a.period_us > 0 {
            let phase = shoal_torture::now_ns() / 1000 % a.period_us;
            if phase >= a.active_us {
                std::thread::sleep(Duration::from_micros(a.period_us - phase));
            }
        }
        if a.pause_us > 0 {
            std::thread::sleep(Duration::from_micros(rng.random_range(0..a.pause_us)));
        }
        let pick = rng.random_range(0..100);
        let writer = a.w.role == "writer";
        if writer && pick < 55 {
            let acct =
                |r: &mut StdRng| bank.account(r.random_range(0..2), r.random_range(0..a.accounts));
            let from = acct(&mut rng);
            let mut to = acct(&mut rng);
            while to == from {
                to = acct(&mut rng);
            }
            let amt = rng.random_range(1..60);
            let abort = rng.random_bool(0.15);
            if abort {
                lin.line('C', &format!("abort {from} {to}"));
            } else {
                lin.line('C', &format!("xfer {from} {to} {amt}"));
            }
            let (va, vb, moved) = transfer(&bank, from, to, amt, abort);
            if abort {
                lin.line('R', &format!("{va} {vb}"));
            } else {
                lin.line(
                    'R',
                    &format!("{va} {vb} {}", if moved { "ok" } else { "no" }),
                );
            }
        } else if writer && pick < 70 && a.extra > 0 {
            let s = a.accounts + rng.random_range(0..a.extra);
            let i = bank.account(rng.random_range(0..2), s);
            // Unique values: a put is told apart from every other.
            seq += 1;
            let v = (a.w.id << 48) | (a.w.gen << 32) | seq;
            let (m, k) = bank.key(i);
            lin.line('C', &format!("put {i} {v}"));
            ok(bank.maps[m].put(&k, &v.to_le_bytes()), "put");
            lin.line('R', "ok");
        } else {
            let keys: Vec<u64> = if rng.random_bool(0.3) {
                (0..n_keys).collect()
            } else {
                let n = rng.random_range(1..5);
                let mut ks: Vec<u64> = (0..n).map(|_| rng.random_range(0..n_keys)).collect();
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
