//! Iteration's last resort, the copy of a segment under its lock, while other writers
//! split other segments and double the directory. Its own test binary: it makes every
//! optimistic copy fail through a process-wide fail point.

use shoal::{Error, Store};
use std::collections::HashSet;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

/// The tests share process-wide fail points: one at a time. `failpoints::setup` holds the
/// fail crate's scenario lock for good, so it is called once (a second call waited
/// forever).
static SERIAL: std::sync::Mutex<()> = std::sync::Mutex::new(());
static SETUP: std::sync::Once = std::sync::Once::new();

fn force_locked_copies() -> std::sync::MutexGuard<'static, ()> {
    let g = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    SETUP.call_once(shoal::failpoints::setup);
    shoal::failpoints::force_return("snapshot.optimistic").unwrap();
    g
}

/// Makes each of the first three locked copies wait while `grow(round)` (round 1, 2, 3)
/// runs in a thread of its own: it inserts enough keys elsewhere to split segments and
/// double the directory. (The waiting thread holds a segment lock: `grow`'s inserts that
/// land there must time out and be skipped.) Returns the count of rounds run.
fn grow_during_locked_copies(
    grow: impl Fn(u64) + Send + Sync + Clone + 'static,
) -> Arc<std::sync::atomic::AtomicU64> {
    let rounds = Arc::new(std::sync::atomic::AtomicU64::new(0));
    let busy = Arc::new(AtomicBool::new(false));
    let (r2, b2) = (rounds.clone(), busy.clone());
    shoal::failpoints::callback("snapshot.locked", move || {
        if r2.load(Ordering::SeqCst) >= 3 || b2.swap(true, Ordering::SeqCst) {
            return;
        }
        let round = r2.fetch_add(1, Ordering::SeqCst) + 1;
        let g = grow.clone();
        std::thread::spawn(move || g(round)).join().unwrap();
        b2.store(false, Ordering::SeqCst);
    })
    .unwrap();
    rounds
}

/// Undoes [`force_locked_copies`] and [`grow_during_locked_copies`], and checks that the
/// three rounds ran and grew the map to at least 4x its segments.
fn end_locked_copies(rounds: &std::sync::atomic::AtomicU64, segments: (u64, u64)) {
    shoal::failpoints::clear("snapshot.locked");
    shoal::failpoints::clear("snapshot.optimistic");
    assert_eq!(
        rounds.load(Ordering::SeqCst),
        3,
        "the locked copies were not reached"
    );
    let (before, after) = segments;
    assert!(
        after >= 4 * before,
        "the inserts did not grow the map enough: {before} -> {after} segments"
    );
}

/// Each locked copy of a segment (the first few) waits for another thread to insert
/// enough keys elsewhere to split segments and double the directory, then iteration goes
/// on. Every key present throughout is seen exactly once and nothing is called corrupt.
/// (Before the fix, the locked copy compared the directory as an optimistic copy does,
/// and reported "segment ... changed under its lock".)
#[test]
fn a_locked_iteration_copy_survives_directory_doubling() {
    let d = tempfile::tempdir_in("/dev/shm")
        .or_else(|_| tempfile::tempdir())
        .unwrap();
    let s = Arc::new(Store::open(d.path().join("a.shoal")).unwrap());
    let m = s.map("m").unwrap();
    let keys: Vec<String> = (0..3000).map(|i| format!("old:{i:08}")).collect();
    for k in &keys {
        m.put(k.as_bytes(), b"v").unwrap();
    }
    let segments_before = m.stats().unwrap().segments;
    let _serial = force_locked_copies();
    let s2 = s.clone();
    let rounds = grow_during_locked_copies(move |round| {
        let m = s2.map("m").unwrap().with_timeout(Duration::from_millis(2));
        for i in 0..6000u64 {
            let k = format!("new:{round}:{i:08}");
            match m.put(k.as_bytes(), b"w") {
                Ok(_) | Err(Error::Timeout(_)) => {}
                Err(e) => panic!("insert {k}: {e}"),
            }
        }
    });
    let mut seen = HashSet::new();
    for item in m.keys() {
        let k = item.unwrap_or_else(|e| panic!("iteration failed: {e}"));
        if k.starts_with(b"old:") {
            assert!(
                seen.insert(k.clone()),
                "{} seen twice",
                String::from_utf8_lossy(&k)
            );
        }
    }
    end_locked_copies(&rounds, (segments_before, m.stats().unwrap().segments));
    assert_eq!(seen.len(), keys.len(), "old keys seen");
    let r = s.check().unwrap();
    assert!(r.is_ok(), "{r}");
}

/// The same for a fixed-size map, whose iteration has its own copy of the code.
#[test]
fn a_locked_fixed_map_iteration_copy_survives_directory_doubling() {
    let d = tempfile::tempdir_in("/dev/shm")
        .or_else(|_| tempfile::tempdir())
        .unwrap();
    let s = Arc::new(Store::open(d.path().join("a.shoal")).unwrap());
    let m = s.fixed_map("f", 8, 8).unwrap();
    for i in 0..3000u64 {
        m.put(&i.to_le_bytes(), &i.to_le_bytes()).unwrap();
    }
    let segments_before = m.stats().unwrap().segments;
    let _serial = force_locked_copies();
    let s2 = s.clone();
    let rounds = grow_during_locked_copies(move |round| {
        let m = s2
            .fixed_map("f", 8, 8)
            .unwrap()
            .with_timeout(Duration::from_millis(2));
        for i in 0..6000u64 {
            let k = (round << 32 | i).to_le_bytes();
            match m.put(&k, &k) {
                Ok(_) | Err(Error::Timeout(_)) => {}
                Err(e) => panic!("insert {i} of round {round}: {e}"),
            }
        }
    });
    let mut seen = HashSet::new();
    for item in m.iter() {
        let (k, _) = item.unwrap_or_else(|e| panic!("iteration failed: {e}"));
        let k = u64::from_le_bytes(k[..].try_into().unwrap());
        if k < 3000 {
            assert!(seen.insert(k), "{k} seen twice");
        }
    }
    end_locked_copies(&rounds, (segments_before, m.stats().unwrap().segments));
    assert_eq!(seen.len(), 3000, "old keys seen");
    let r = s.check().unwrap();
    assert!(r.is_ok(), "{r}");
}

/// A store opened read-only may not take the segment lock that ends persistent
/// interference: its iteration retries the optimistic copy until the map's timeout and
/// then says it timed out (it used to ask for a txn slot, and fail as a write would).
/// Once the interference stops, it iterates.
#[test]
fn read_only_iteration_retries_instead_of_locking() {
    let d = tempfile::tempdir_in("/dev/shm").unwrap();
    let p = d.path().join("ro.shoal");
    {
        let s = Store::open(&p).unwrap();
        let m = s.map("m").unwrap();
        let f = s.fixed_map("f", 8, 8).unwrap();
        for i in 0..100u64 {
            m.put(&i.to_le_bytes(), b"v").unwrap();
            f.put(&i.to_le_bytes(), &i.to_le_bytes()).unwrap();
        }
    }
    let r = Store::open_with(&p, &shoal::Options::default(), shoal::OpenMode::ReadOnly).unwrap();
    let m = r
        .open_map("m")
        .unwrap()
        .with_timeout(Duration::from_millis(100));
    let f = r
        .fixed_map_with("f", 8, 8, &Default::default(), false)
        .unwrap()
        .with_timeout(Duration::from_millis(100));
    {
        let _g = force_locked_copies();
        match m.iter().next() {
            Some(Err(Error::Timeout(_))) => {}
            other => panic!("expected a timeout, got {other:?}"),
        }
        match f.iter().next() {
            Some(Err(Error::Timeout(_))) => {}
            other => panic!("expected a timeout, got {other:?}"),
        }
        shoal::failpoints::clear("snapshot.optimistic");
    }
    assert_eq!(m.iter().filter(|e| e.is_ok()).count(), 100);
    assert_eq!(f.iter().filter(|e| e.is_ok()).count(), 100);
}
