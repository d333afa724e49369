//! Ordered maps under a kill storm, checked for strict serializability: writer processes
//! transfer money between accounts spread over two ordered maps (a `WriteTxn` when both
//! accounts are in one map, a `MultiWriteTxn` when not), abort some transfers after
//! reading, and put other keys one at a time; auditor processes read a few keys, or all
//! of them, from snapshots of both maps at one commit. Random workers are SIGKILLed
//! (mid-transaction, mid-commit, inside `Store::open`, holding a snapshot) and replaced,
//! again and again (see `shoal-ordered-worker`).
//!
//! What this proves:
//! * every history is strictly serializable: the Porcupine checker (`lincheck -ordered`,
//!   tools/linearizability/ordered.go) finds one order of all transactions, each an
//!   atomic step of the whole store at an instant between its call and its return, that
//!   explains every value read, in which every aborted transaction changed nothing and
//!   every transaction cut short by a kill either committed whole or not at all; a last
//!   read of every key, after the storm, is part of the history, so a commit that was
//!   lost (or half-applied) after it was seen shows;
//! * every snapshot that read all the accounts saw them sum to the total (the workers
//!   check it, exit status 2 otherwise);
//! * no worker blocks or fails (a writer's lock left by a dead process is recovered: every
//!   wait is bounded by the store's lock timeout);
//! * after the storm `Store::check` (what `shoal check` runs) finds no problem, the sum is
//!   exact, and transactions still commit.
//!
//! The storm runs in rounds (`SHOAL_ORDERED_STORM_ROUNDS`, default 2) of
//! `SHOAL_ORDERED_STORM_SECS` seconds (default 3), each checked apart from where the last
//! one ended (Porcupine's memory grows with the square of a history's length); between
//! rounds every worker is stopped. Long form (docs/RELIABILITY.md):
//! `SHOAL_ORDERED_STORM_ROUNDS=60 cargo test --release -p shoal-torture --test
//! ordered_storm -- --nocapture` (3 minutes of kills). `SHOAL_SEED` repeats a run's
//! random choices (not its scheduling).

use shoal::{OrderedMap, Store};
use shoal_torture::harness::{env_u64, seed, tail, Rig, Scratch};
use shoal_torture::linlog::{lincheck_round, write_final_read};
use shoal_torture::now_ns;
use shoal_torture::value::Wid;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

const ACCOUNTS: u64 = 6;
const EXTRA: u64 = 2;
const INITIAL: u64 = 100;
const TOTAL: u64 = 2 * ACCOUNTS * INITIAL;
const ROLES: [&str; 6] = ["writer", "writer", "writer", "writer", "auditor", "auditor"];

fn key(s: u64) -> Vec<u8> {
    if s < ACCOUNTS {
        format!("a{s}").into_bytes()
    } else {
        format!("x{}", s - ACCOUNTS).into_bytes()
    }
}

/// Every key's value from one snapshot of both maps, in key-number order.
fn read_all(a: &OrderedMap, b: &OrderedMap) -> Vec<u64> {
    let snaps = a.snapshot_with(&[b]).unwrap();
    snaps
        .iter()
        .flat_map(|s| {
            (0..ACCOUNTS + EXTRA).map(move |k| {
                let v = s.get(&key(k)).unwrap().expect("every key is present");
                u64::from_le_bytes(v.try_into().unwrap())
            })
        })
        .collect()
}

fn sum_accounts(vals: &[u64]) -> u64 {
    let per = (ACCOUNTS + EXTRA) as usize;
    vals.iter()
        .enumerate()
        .filter(|(i, _)| i % per < ACCOUNTS as usize)
        .map(|(_, v)| v)
        .sum()
}

fn checker(seed: u64) -> PathBuf {
    shoal_torture::harness::lincheck(
        &Path::new(env!("CARGO_MANIFEST_DIR")).join("../../tools/linearizability"),
        &Path::new(env!("CARGO_TARGET_TMPDIR")).join("lincheck"),
        seed,
    )
}

/// What one round's check counted.
#[derive(Default)]
struct Totals {
    kills: u64,
    checked: u64,
    moved: u64,
    reads: u64,
    pending: u64,
    /// The longest transaction's call to return, in ns.
    longest_ns: u64,
}

#[test]
fn ordered_map_transactions_under_kills_are_strictly_serializable() {
    let seed = seed();
    let secs = env_u64("SHOAL_ORDERED_STORM_SECS", 3);
    let rounds = env_u64("SHOAL_ORDERED_STORM_ROUNDS", 2).max(1);
    let scratch = Scratch::new("ordered-storm", seed);
    let store = scratch.path.join("store.shoal");
    {
        let s = Store::open(&store).unwrap();
        let (a, b) = (
            s.ordered_map("acct-a").unwrap(),
            s.ordered_map("acct-b").unwrap(),
        );
        let mut t = a.write_with(&[&b]).unwrap();
        for m in [&a, &b] {
            for k in 0..ACCOUNTS + EXTRA {
                let v = if k < ACCOUNTS { INITIAL } else { 0 };
                t.put(m, &key(k), &v.to_le_bytes()).unwrap();
            }
        }
        t.commit().unwrap();
    }
    let lincheck = checker(seed);
    let mut start_vals: Vec<u64> = (0..2)
        .flat_map(|_| (0..ACCOUNTS + EXTRA).map(|k| if k < ACCOUNTS { INITIAL } else { 0 }))
        .collect();
    let mut sum = Totals::default();
    for round in 0..rounds {
        let dir = scratch.path.join(format!("round-{round}"));
        std::fs::create_dir_all(&dir).unwrap();
        let rig = Rig {
            exe: env!("CARGO_BIN_EXE_shoal-ordered-worker").into(),
            stop: dir.join("STOP"),
            dir,
            store: store.clone(),
            seed: seed.wrapping_add(round),
            logs: true,
        };
        let (t, end_vals) = storm_round(&rig, &lincheck, secs, &start_vals);
        eprintln!(
            "seed {seed}: round {round}: {} kills, {} transactions checked ({} moved money, \
             {} snapshot reads, {} killed in flight; longest {:.1} ms): strictly serializable",
            t.kills,
            t.checked,
            t.moved,
            t.reads,
            t.pending,
            t.longest_ns as f64 / 1e6
        );
        sum.kills += t.kills;
        sum.checked += t.checked;
        sum.moved += t.moved;
        sum.reads += t.reads;
        sum.pending += t.pending;
        sum.longest_ns = sum.longest_ns.max(t.longest_ns);
        start_vals = end_vals;
    }
    // Transactions still commit, over both maps.
    let s = Store::open_existing(&store).unwrap();
    let (a, b) = (
        s.ordered_map("acct-a").unwrap(),
        s.ordered_map("acct-b").unwrap(),
    );
    let mut t = a.write_with(&[&b]).unwrap();
    t.put(&a, &key(ACCOUNTS), b"after").unwrap();
    t.put(&b, &key(ACCOUNTS), b"after").unwrap();
    t.commit().unwrap();
    assert_eq!(
        b.get(&key(ACCOUNTS)).unwrap().as_deref(),
        Some(&b"after"[..])
    );
    eprintln!(
        "seed {seed}: {rounds} rounds of {secs} s: {} kills, {} transactions checked ({} moved \
         money, {} snapshot reads, {} killed in flight); longest transaction {:.1} ms",
        sum.kills,
        sum.checked,
        sum.moved,
        sum.reads,
        sum.pending,
        sum.longest_ns as f64 / 1e6
    );
    assert!(
        sum.moved > 200 * rounds && sum.reads > 200 * rounds && sum.kills > 5 * rounds,
        "seed {seed}: too little checked to prove anything"
    );
}

/// One round of the storm: the workers started, SIGKILLed at random moments of their
/// bursts and replaced for `secs` seconds, stopped; then the last read of every key, the
/// sum, `Store::check`, and the Porcupine check of the round's history from `start`
/// (every key's value when the round began). Returns what the check counted and every
/// key's value at the end.
fn storm_round(rig: &Rig, lincheck: &Path, secs: u64, start: &[u64]) -> (Totals, Vec<u64>) {
    let seed = rig.seed;
    // Workers run in bursts of `active` µs every `period` (see shoal-ordered-worker).
    let period = env_u64("SHOAL_ORDERED_STORM_PERIOD_US", 100_000).max(1);
    let active = env_u64("SHOAL_ORDERED_STORM_ACTIVE_US", 5_000).min(period);
    let extra = [
        "--accounts".to_string(),
        ACCOUNTS.to_string(),
        "--extra".into(),
        EXTRA.to_string(),
        "--total".into(),
        TOTAL.to_string(),
        "--period-us".into(),
        period.to_string(),
        "--active-us".into(),
        active.to_string(),
    ];
    let args: Vec<&str> = extra.iter().map(String::as_str).collect();
    let who = format!("seed {seed}");
    let kills = rig.kill_storm(&ROLES, &args, secs, period, active, &who);

    // The last read of every key, after every worker is gone, joins the history.
    let s = Store::open_existing(&rig.store).unwrap();
    let (a, b) = (
        s.ordered_map("acct-a").unwrap(),
        s.ordered_map("acct-b").unwrap(),
    );
    let call = now_ns();
    let vals = read_all(&a, &b);
    let ret = now_ns();
    assert_eq!(
        vals.len() as u64,
        2 * (ACCOUNTS + EXTRA),
        "{who}: every key"
    );
    write_final_read(&rig.dir.join("final.olin"), call, ret, &vals);
    assert_eq!(sum_accounts(&vals), TOTAL, "{who}: the accounts' sum");
    let r = s.check().unwrap();
    assert!(r.is_ok(), "{who}: check after the storm: {r}");
    drop((a, b, s));

    let total = lincheck_round(
        lincheck,
        "ordered",
        start,
        &rig.dir,
        &who,
        "the ordered maps'",
    );
    let t = Totals {
        kills,
        checked: total.get("ops"),
        moved: total.get("moved"),
        reads: total.get("read"),
        pending: total.get("pending"),
        longest_ns: total.get("longest_ns"),
    };
    (t, vals)
}

/// A reader process SIGKILLed while it holds a snapshot pins nothing once it is dead: the
/// pages that commits free while it lived are reused by the next commits, with no call
/// to anything like libmdbx's `reader_check` (a dead process's txn slot fails the
/// liveness check at once, so its pin is ignored from the moment it is reaped). While it
/// lives, its pin does hold those pages (the map grows), which shows the test would see a
/// dead pin that still held.
#[test]
fn a_reader_killed_holding_a_snapshot_pins_no_pages() {
    let seed = seed();
    let scratch = Scratch::new("ordered-holder", seed);
    let rig = Rig::new(
        env!("CARGO_BIN_EXE_shoal-ordered-worker"),
        &scratch.path,
        seed,
    );
    let s = Store::open(&rig.store).unwrap();
    let a = s.ordered_map("acct-a").unwrap();
    s.ordered_map("acct-b").unwrap();
    const KEYS: u32 = 4000;
    {
        let mut w = a.write().unwrap();
        for i in 0..KEYS {
            w.put(&i.to_be_bytes(), &[0; 50]).unwrap();
        }
        w.commit().unwrap();
    }
    let bytes = || s.object_stats("acct-a").unwrap().unwrap().index_bytes;
    // A round: one commit per 7th key (about 570 commits, each copying a path of pages).
    let mut round = 0u8;
    let mut overwrite = |rounds: u32| {
        for _ in 0..rounds {
            round = round.wrapping_add(1);
            for i in (0..KEYS).step_by(7) {
                a.put(&i.to_be_bytes(), &[round; 50]).unwrap();
            }
        }
    };
    overwrite(2);
    let base = bytes();

    let args = ["--accounts", "2", "--extra", "0", "--total", "0"];
    let mut holder = rig.spawn("holder", Wid { slot: 0, gen: 0 }, &args);
    let ready = holder.log.as_ref().unwrap().with_extension("ready");
    let start = Instant::now();
    while !ready.exists() {
        if let Some(st) = holder.child.try_wait().unwrap() {
            panic!(
                "seed {seed}: the holder exited with {st}:\n{}",
                tail(&holder.err)
            );
        }
        assert!(
            start.elapsed() < Duration::from_secs(60),
            "seed {seed}: the holder took no snapshot within 60 s:\n{}",
            tail(&holder.err)
        );
        std::thread::sleep(Duration::from_millis(10));
    }
    overwrite(4);
    let held = bytes();
    assert!(
        held > base * 3 / 2,
        "seed {seed}: with a live reader pinning an old snapshot, ~2300 commits grew the \
         map's pages only from {base} to {held} bytes: the pin held nothing"
    );
    if let Some(st) = holder.child.try_wait().unwrap() {
        panic!(
            "seed {seed}: the holder exited with {st}:\n{}",
            tail(&holder.err)
        );
    }
    rig.kill(&mut holder);
    overwrite(8);
    let after = bytes();
    eprintln!(
        "seed {seed}: index bytes {base} with no reader, {held} after 4 rounds with a live \
         reader, {after} after 8 more rounds once it was killed"
    );
    assert!(
        after <= held + held / 10,
        "seed {seed}: after the reader was killed, the map still grew from {held} to \
         {after} bytes: its dead pin still held pages"
    );
    let r = s.check().unwrap();
    assert!(r.is_ok(), "seed {seed}: {r}");
}
