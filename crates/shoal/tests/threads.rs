//! Threads writing values of every size (from a few bytes to runs of several chunks) on
//! shared keys, readers checking every value they see, and a thread calling `compact`
//! (cleaning, merging free runs, releasing their pages) over and over, in a store small
//! enough that space is reused all the time. Every value carries its key and a version and
//! is checked byte for byte; the store must check clean afterwards. A failure prints the
//! seed (`SHOAL_SEED` repeats it; `SHOAL_THREADS_SECS` makes the run longer).

mod common;

use shoal::{Error, OpenMode, Options, Store};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering::Relaxed};
use std::sync::Arc;

/// The value of `key` at version `ver`, `len` bytes (at least 16): key, version, then
/// bytes derived from both.
fn value(key: u64, ver: u64, len: usize) -> Vec<u8> {
    let mut v = vec![0u8; len.max(16)];
    v[..8].copy_from_slice(&key.to_le_bytes());
    v[8..16].copy_from_slice(&ver.to_le_bytes());
    for (i, b) in v.iter_mut().enumerate().skip(16) {
        *b = (key as usize * 31 + ver as usize * 7 + i) as u8;
    }
    v
}

fn is_value_of(key: u64, v: &[u8]) -> bool {
    v.len() >= 16
        && v[..8] == key.to_le_bytes()
        && v == &value(
            key,
            u64::from_le_bytes(v[8..16].try_into().unwrap()),
            v.len(),
        )[..]
}

#[test]
fn writers_readers_and_compact_never_see_a_wrong_value() {
    let seed = common::seed();
    let secs: u64 = std::env::var("SHOAL_THREADS_SECS")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(3);
    let d = tempfile::tempdir_in("/dev/shm")
        .or_else(|_| tempfile::tempdir())
        .unwrap();
    let o = Options {
        chunk_size: 64 << 10,
        max_size: 256 << 20,
        ..Options::default()
    };
    let s = Arc::new(Store::open_with(d.path().join("t.shoal"), &o, OpenMode::CreateNew).unwrap());
    let m = s.map("m").unwrap();
    let stop = Arc::new(AtomicBool::new(false));
    let bad = Arc::new(AtomicU64::new(0));
    let mut workers = Vec::new();
    for t in 0..4u64 {
        let (m, stop, bad) = (m.clone(), stop.clone(), bad.clone());
        workers.push(std::thread::spawn(move || {
            let mut rnd = common::xorshift(seed ^ (t + 1).wrapping_mul(0xD1B5_4A32_D192_ED03));
            let mut ver = t << 48;
            let mut ops = 0u64;
            while !stop.load(Relaxed) {
                let key = rnd() % 64;
                let k = key.to_le_bytes();
                match rnd() % 10 {
                    0..=3 => {
                        ver += 1;
                        let len = if rnd() % 3 == 0 {
                            (rnd() % (400 << 10)) as usize
                        } else {
                            (rnd() % 2000) as usize
                        };
                        match m.put(&k, &value(key, ver, len)) {
                            Ok(_) | Err(Error::StoreFull(_)) => {}
                            Err(e) => panic!("seed {seed}: put: {e}"),
                        }
                    }
                    4 => {
                        m.remove(&k)
                            .unwrap_or_else(|e| panic!("seed {seed}: remove: {e}"));
                    }
                    _ => {
                        let got = m
                            .get(&k)
                            .unwrap_or_else(|e| panic!("seed {seed}: get: {e}"));
                        if got.is_some_and(|v| !is_value_of(key, &v)) {
                            bad.fetch_add(1, Relaxed);
                        }
                    }
                }
                ops += 1;
            }
            ops
        }));
    }
    let compactor = {
        let (s, stop) = (s.clone(), stop.clone());
        std::thread::spawn(move || {
            let mut n = 0u64;
            while !stop.load(Relaxed) {
                s.compact()
                    .unwrap_or_else(|e| panic!("seed {seed}: compact: {e}"));
                n += 1;
                std::thread::sleep(std::time::Duration::from_millis(5));
            }
            n
        })
    };
    std::thread::sleep(std::time::Duration::from_secs(secs));
    stop.store(true, Relaxed);
    let ops: Vec<u64> = workers.into_iter().map(|w| w.join().unwrap()).collect();
    let compacts = compactor.join().unwrap();
    assert!(
        ops.iter().all(|&n| n > 100),
        "seed {seed}: too few ops: {ops:?}"
    );
    assert!(compacts > 0, "seed {seed}: no compact ran");
    for key in 0..64u64 {
        if let Some(v) = m.get(&key.to_le_bytes()).unwrap() {
            assert!(
                is_value_of(key, &v),
                "seed {seed}: key {key} ends with a wrong value"
            );
        }
    }
    assert_eq!(
        bad.load(Relaxed),
        0,
        "seed {seed}: readers saw wrong values"
    );
    let r = s.check().unwrap();
    assert!(r.is_ok(), "seed {seed}: {r}");
}
