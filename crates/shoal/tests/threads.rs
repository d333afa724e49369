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

/// A new store in /dev/shm (else the temp directory) with 64 KiB chunks, so that a few
/// thousand records fill several and the cleaner has victims.
fn small_chunk_store() -> (tempfile::TempDir, Arc<Store>) {
    let d = tempfile::tempdir_in("/dev/shm")
        .or_else(|_| tempfile::tempdir())
        .unwrap();
    let o = Options {
        chunk_size: 64 << 10,
        ..Options::default()
    };
    let s = Store::open_with(d.path().join("s.shoal"), &o, OpenMode::CreateNew).unwrap();
    (d, Arc::new(s))
}

/// Asserts that the writes since `before` (stats of `s` then) left no dead records: the
/// dead bytes grew by at most what the data chunks filled since cost in headers and
/// unfillable tails (up to 256 bytes each) and 64 KiB of slack, whatever the number of
/// chunks a fast machine fills. Overwrites appended instead of written in place leave a
/// dead record each: megabytes in these tests.
fn assert_no_dead_records(s: &Store, before: &shoal::StoreStats, what: &str) {
    let st = s.stats().unwrap();
    let chunks = st.data_bytes.saturating_sub(before.data_bytes) / (64 << 10);
    assert!(
        st.dead_bytes <= before.dead_bytes + 256 * chunks + (64 << 10),
        "{what} left dead records: {} dead bytes before, {chunks} chunks filled since: {st:?}",
        before.dead_bytes
    );
}

/// Values overwritten in place beside records that other threads write at the same time.
///
/// A record's first and last bytes usually share an aligned word with its neighbours in
/// the chunk, and a neighbour's value may be being overwritten in place (under another
/// key's lock) while this record is appended or overwritten. Each thread here owns some
/// keys and overwrites them with values of the same (odd) length, so every write is in
/// place, while an appender keeps inserting new keys right after the records of the key
/// an overwriter is busy with, and readers check every value they see. A word merged with
/// a plain load and store instead of one atomic operation undoes a neighbour's bytes: the
/// final values would not be the last ones written. `SHOAL_SEED` repeats a run.
#[test]
fn in_place_overwrites_beside_concurrent_writes_lose_no_byte() {
    const KEYS: u64 = 256;
    const LEN: usize = 37; // odd: records straddle words at every alignment
    let seed = common::seed();
    let (_d, s) = small_chunk_store();
    let m = s.map("m").unwrap();
    // Inserted by one thread, one after another: neighbours in one chunk.
    for k in 0..KEYS {
        m.put(&k.to_le_bytes(), &value(k, 0, LEN)).unwrap();
    }
    let before = s.stats().unwrap();
    let stop = Arc::new(AtomicBool::new(false));
    let bad = Arc::new(AtomicU64::new(0));
    // The newest key the appender inserted; the overwriters keep rewriting it.
    let newest = Arc::new(AtomicU64::new(u64::MAX));
    let mut handles = Vec::new();
    const WRITERS: u64 = 3;
    for t in 0..WRITERS {
        let (m, stop, newest) = (m.clone(), stop.clone(), newest.clone());
        handles.push(std::thread::spawn(move || {
            let mut ver = 0u64;
            let mut last = std::collections::HashMap::new();
            while !stop.load(Relaxed) {
                ver += 1;
                for k in (t..KEYS).step_by(WRITERS as usize) {
                    m.put(&k.to_le_bytes(), &value(k, ver, LEN)).unwrap();
                    last.insert(k, ver);
                }
                // The appender's newest key (owned by writer 0 only): a neighbour of
                // what the appender is writing next.
                let n = newest.load(Relaxed);
                if t == 0 && n != u64::MAX {
                    assert!(m
                        .put_if_present(&n.to_le_bytes(), &value(n, ver, LEN))
                        .unwrap());
                    last.insert(n, ver);
                }
            }
            last
        }));
    }
    let appender = {
        let (m, stop, newest) = (m.clone(), stop.clone(), newest.clone());
        std::thread::spawn(move || {
            let mut k: u64 = 1 << 32;
            while !stop.load(Relaxed) {
                assert!(m
                    .put_if_absent(&k.to_le_bytes(), &value(k, 0, LEN))
                    .unwrap());
                newest.store(k, Relaxed);
                k += 1;
            }
            k
        })
    };
    let readers: Vec<_> = (0..2u64)
        .map(|r| {
            let (m, stop, bad) = (m.clone(), stop.clone(), bad.clone());
            std::thread::spawn(move || {
                let mut rnd = common::xorshift(seed ^ (r + 7).wrapping_mul(0x9E37_79B9_7F4A_7C15));
                let mut buf = Vec::new();
                while !stop.load(Relaxed) {
                    let k = rnd() % KEYS;
                    if !m.get_into(&k.to_le_bytes(), &mut buf).unwrap() || !is_value_of(k, &buf) {
                        bad.fetch_add(1, Relaxed);
                    }
                }
            })
        })
        .collect();
    std::thread::sleep(std::time::Duration::from_secs(3));
    stop.store(true, Relaxed);
    let mut last = std::collections::HashMap::new();
    for h in handles {
        last.extend(h.join().unwrap());
    }
    let appended_to = appender.join().unwrap();
    for r in readers {
        r.join().unwrap();
    }
    assert_eq!(
        bad.load(Relaxed),
        0,
        "readers saw torn or foreign values (seed {seed})"
    );
    let mut wrong = Vec::new();
    for k in (0..KEYS).chain(1 << 32..appended_to) {
        let want = value(k, last.get(&k).copied().unwrap_or(0), LEN);
        if m.get(&k.to_le_bytes()).unwrap().as_deref() != Some(&want[..]) {
            wrong.push(k);
        }
    }
    assert!(
        wrong.is_empty(),
        "{} keys lost their last value, e.g. {:?} (seed {seed})",
        wrong.len(),
        &wrong[..wrong.len().min(8)]
    );
    assert_no_dead_records(&s, &before, "same-length overwrites");
    let r = s.check().unwrap();
    assert!(r.is_ok(), "{r}");
}

/// Values overwritten in place while the cleaner moves their records.
///
/// The cleaner copies a live record out of its victim chunk without a lock, then, under
/// the key's lock, repoints the slot if it still names the old record. A value written in
/// place meanwhile keeps the record's offset, so that test passes and the copy, made
/// before the write, would be published over it: the acknowledged write lost (found by
/// the kill storm, `shoal-torture/tests/kill.rs`). Here one thread rewrites "hot" keys in
/// place, another churns other keys with changing lengths (dead space, so the cleaner
/// runs), a third calls `compact` in a loop; every hot key must end with its last value.
/// Three in four hot values are long enough (130 bytes) that the move compares and refreshes
/// their records a piece at a time.
#[test]
fn in_place_overwrites_survive_the_cleaner_moving_their_records() {
    const HOT: u64 = 2000;
    const LEN: usize = 40;
    let hot_len = |k: u64| if k % 4 == 0 { LEN } else { 130 };
    let seed = common::seed();
    let (_d, s) = small_chunk_store();
    let m = s.map("m").unwrap();
    // Hot keys interleaved with churned ones: every chunk the cleaner picks holds both.
    for k in 0..HOT {
        m.put(&k.to_le_bytes(), &value(k, 0, hot_len(k))).unwrap();
        m.put(&(k | 1 << 40).to_le_bytes(), &value(k | 1 << 40, 0, LEN))
            .unwrap();
    }
    let stop = Arc::new(AtomicBool::new(false));
    let hot = {
        let (m, stop) = (m.clone(), stop.clone());
        std::thread::spawn(move || {
            let mut rnd = common::xorshift(seed | 1);
            let mut last = vec![0u64; HOT as usize];
            let mut ver = 0;
            while !stop.load(Relaxed) {
                ver += 1;
                let k = rnd() % HOT;
                m.put(&k.to_le_bytes(), &value(k, ver, hot_len(k))).unwrap();
                last[k as usize] = ver;
            }
            last
        })
    };
    let churn = {
        let (m, stop) = (m.clone(), stop.clone());
        std::thread::spawn(move || {
            let mut rnd = common::xorshift(seed | 2);
            let mut ver = 0;
            while !stop.load(Relaxed) {
                ver += 1;
                let k = (rnd() % HOT) | (1 << 40);
                // A new length every time: appended, the old record dead.
                m.put(
                    &k.to_le_bytes(),
                    &value(k, ver, LEN + 1 + (ver % 7) as usize),
                )
                .unwrap();
            }
        })
    };
    let compactor = {
        let (s, stop) = (s.clone(), stop.clone());
        std::thread::spawn(move || {
            let mut n = 0u64;
            while !stop.load(Relaxed) {
                s.compact().unwrap();
                n += 1;
            }
            n
        })
    };
    std::thread::sleep(std::time::Duration::from_secs(3));
    stop.store(true, Relaxed);
    let last = hot.join().unwrap();
    churn.join().unwrap();
    let compactions = compactor.join().unwrap();
    let mut wrong = Vec::new();
    for k in 0..HOT {
        let want = value(k, last[k as usize], hot_len(k));
        if m.get(&k.to_le_bytes()).unwrap().as_deref() != Some(&want[..]) {
            wrong.push(k);
        }
    }
    assert!(
        s.stats().unwrap().chunks_cleaned > 0,
        "the cleaner never ran ({compactions} compactions; seed {seed})"
    );
    assert!(
        wrong.is_empty(),
        "{} hot keys lost their last value, e.g. {:?} (seed {seed})",
        wrong.len(),
        &wrong[..wrong.len().min(8)]
    );
    let r = s.check().unwrap();
    assert!(r.is_ok(), "{r}");
}

/// Readers by UID while the values they read are overwritten in place.
///
/// A read by UID validates its copy with the UID entry's version, not the bucket's seq,
/// and an in-place write moves neither the entry's location nor (until it is done) its
/// version: without the busy bit a writer sets on the version for the length of the
/// write, a reader copying meanwhile keeps a value half old and half new. Writers here
/// rewrite values of the same length by UID, by key and with `add_by_uid`; readers by UID
/// check every value they see. `SHOAL_SEED` repeats a run.
#[test]
fn readers_by_uid_never_see_a_value_being_overwritten_in_place() {
    const KEYS: u64 = 64;
    const LEN: usize = shoal::IN_PLACE_MAX_UIDS_LEN - 3; // long, and at every alignment
    let seed = common::seed();
    let (_d, s) = small_chunk_store();
    let m = s
        .map_with(
            "u",
            &shoal::MapOptions {
                uids: true,
                ..shoal::MapOptions::default()
            },
            true,
        )
        .unwrap();
    let uids: Arc<Vec<_>> = Arc::new(
        (0..KEYS)
            .map(|k| {
                m.put_with_uid(&k.to_le_bytes(), &value(k, 0, LEN))
                    .unwrap()
                    .1
            })
            .collect(),
    );
    let counter = m.put_with_uid(b"counter", &0i64.to_le_bytes()).unwrap().1;
    let before = s.stats().unwrap();
    let stop = Arc::new(AtomicBool::new(false));
    let bad = Arc::new(AtomicU64::new(0));
    let writers: Vec<_> = (0..2u64)
        .map(|t| {
            let (m, stop, uids) = (m.clone(), stop.clone(), uids.clone());
            std::thread::spawn(move || {
                let (mut ver, mut adds) = (0u64, 0i64);
                while !stop.load(Relaxed) {
                    ver += 1;
                    for k in (t..KEYS).step_by(2) {
                        let v = value(k, ver, LEN);
                        if ver % 2 == 0 {
                            m.put_by_uid(uids[k as usize], &v).unwrap();
                        } else {
                            m.put(&k.to_le_bytes(), &v).unwrap();
                        }
                    }
                    m.add_by_uid(counter, 1).unwrap();
                    adds += 1;
                }
                adds
            })
        })
        .collect();
    let readers: Vec<_> = (0..2u64)
        .map(|r| {
            let (m, stop, bad, uids) = (m.clone(), stop.clone(), bad.clone(), uids.clone());
            std::thread::spawn(move || {
                let mut rnd = common::xorshift(seed ^ (r + 3).wrapping_mul(0x9E37_79B9_7F4A_7C15));
                let mut buf = Vec::new();
                let mut reads = 0u64;
                while !stop.load(Relaxed) {
                    let k = rnd() % KEYS;
                    m.get_by_uid_into(uids[k as usize], &mut buf).unwrap();
                    if !is_value_of(k, &buf) {
                        bad.fetch_add(1, Relaxed);
                    }
                    reads += 1;
                }
                reads
            })
        })
        .collect();
    std::thread::sleep(std::time::Duration::from_secs(3));
    stop.store(true, Relaxed);
    let adds: i64 = writers.into_iter().map(|w| w.join().unwrap()).sum();
    let reads: u64 = readers.into_iter().map(|r| r.join().unwrap()).sum();
    assert!(reads > 0 && adds > 0, "nothing ran (seed {seed})");
    assert_eq!(
        bad.load(Relaxed),
        0,
        "readers by UID saw torn values in {reads} reads (seed {seed})"
    );
    assert_eq!(
        m.get_by_uid(counter).unwrap(),
        adds.to_le_bytes(),
        "seed {seed}"
    );
    assert_no_dead_records(&s, &before, "same-length overwrites in a UID map");
    let r = s.check().unwrap();
    assert!(r.is_ok(), "{r}");
}
