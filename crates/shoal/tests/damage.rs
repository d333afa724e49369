//! Damage found in a store that was closed cleanly, and what reads make of it:
//! * a record that fails its checksum is `Corrupt` to every read that would hand out its
//!   value (by key, by UID, in a batch, and the writes that return or use the old value),
//!   whatever the clean flag says; removing the key still works; `check` reports it;
//! * a copy torn by concurrent writes (a record's chunk cleaned and reused under a reader)
//!   fails its checksum too, and is retried, never reported as corrupt.

use shoal::{Error, MapOptions, OpenMode, Options, Store};
use std::path::Path;

/// A directory on disk (not tmpfs): stores there have checksums by default.
fn disk_dir() -> tempfile::TempDir {
    let d = tempfile::tempdir_in(std::env::temp_dir()).unwrap();
    let probe = d.path().join("probe.shoal");
    let s = Store::open(&probe).unwrap();
    assert!(
        s.stats().unwrap().on_disk,
        "{} is on tmpfs; these tests need a disk",
        d.path().display()
    );
    drop(s);
    Store::destroy(&probe).unwrap();
    d
}

fn shm_dir() -> tempfile::TempDir {
    tempfile::tempdir_in("/dev/shm")
        .or_else(|_| tempfile::tempdir())
        .unwrap()
}

const H_CLEAN: usize = 576;

/// Flips a byte `at` bytes into the only occurrence of `needle` in the file.
fn flip_in_file(p: &Path, needle: &[u8], at: usize) {
    let mut b = std::fs::read(p).unwrap();
    let pos: Vec<usize> = b
        .windows(needle.len())
        .enumerate()
        .filter(|(_, w)| *w == needle)
        .map(|(i, _)| i)
        .collect();
    assert_eq!(pos.len(), 1, "{:?} occurs {} times", needle, pos.len());
    b[pos[0] + at] ^= 0x20;
    std::fs::write(p, &b).unwrap();
}

#[track_caller]
fn assert_checksum_error<T: std::fmt::Debug>(r: shoal::Result<T>, map: &str, what: &str) {
    match r {
        Err(Error::Corrupt { what: w, .. }) => assert!(
            w.contains("fails its checksum") && w.contains(&format!("{map:?}")),
            "{what}: {w}"
        ),
        other => panic!("{what}: a record that fails its checksum read as {other:?}"),
    }
}

fn value_of(i: u32) -> Vec<u8> {
    format!("value-{i:04}-{}", "x".repeat((i % 40) as usize)).into_bytes()
}

/// A store on disk, closed cleanly, with four records whose values were then damaged
/// (one byte flipped each): `victim`, `removable` and `counter` (an 8-byte integer) in map
/// `m`, and `uvictim` in map `u` (with UIDs), besides 300 sound keys in `m` and `ufine`
/// in `u`. Returns the path and the UIDs of `uvictim` and `ufine`.
fn store_with_bad_checksums(d: &Path) -> (std::path::PathBuf, shoal::Uid, shoal::Uid) {
    let p = d.join("c.shoal");
    let uid;
    let other_uid;
    {
        let s = Store::open(&p).unwrap();
        assert!(s.stats().unwrap().checksums);
        let m = s.map("m").unwrap();
        for i in 0..300u32 {
            m.put(format!("key{i:04}").as_bytes(), &value_of(i))
                .unwrap();
        }
        m.put(b"victim", b"VICTIM-VALUE-0123456789").unwrap();
        m.put(b"removable", b"REMOVABLE-VALUE-0123").unwrap();
        m.put(b"counter", &0x1122_3344_5566_7788u64.to_le_bytes())
            .unwrap();
        let u = s
            .map_with(
                "u",
                &MapOptions {
                    uids: true,
                    ..Default::default()
                },
                true,
            )
            .unwrap();
        uid = u
            .put_with_uid(b"uvictim", b"UID-VICTIM-VALUE-42")
            .unwrap()
            .1;
        other_uid = u.put_with_uid(b"ufine", b"fine").unwrap().1;
    }
    // Closed cleanly: the flag says so, and an open does not verify anything.
    assert_eq!(std::fs::read(&p).unwrap()[H_CLEAN], 1);
    flip_in_file(&p, b"VICTIM-VALUE-0123456789", 3);
    flip_in_file(&p, b"REMOVABLE-VALUE-0123", 5);
    flip_in_file(&p, &0x1122_3344_5566_7788u64.to_le_bytes(), 2);
    flip_in_file(&p, b"UID-VICTIM-VALUE-42", 1);
    (p, uid, other_uid)
}

#[test]
fn a_record_that_fails_its_checksum_is_corrupt_to_every_read_that_returns_it() {
    let d = disk_dir();
    let (p, uid, other_uid) = store_with_bad_checksums(d.path());
    let s = Store::open_existing(&p).unwrap();
    let m = s.open_map("m").unwrap();
    // Every read that would hand out the value.
    assert_checksum_error(m.get(b"victim"), "m", "get");
    let mut buf = Vec::new();
    assert_checksum_error(m.get_into(b"victim", &mut buf), "m", "get_into");
    let mut small = [0u8; 64];
    assert_checksum_error(m.get_to_slice(b"victim", &mut small), "m", "get_to_slice");
    assert_checksum_error(m.get_many(&[b"key0001", b"victim"]), "m", "get_many");
    assert_checksum_error(m.swap(b"victim", b"new"), "m", "swap");
    assert_checksum_error(m.take(b"victim"), "m", "take");
    assert_checksum_error(m.get_or_insert(b"victim", b"default"), "m", "get_or_insert");
    assert_checksum_error(
        m.update(b"victim", |v| v.map(<[u8]>::to_vec)),
        "m",
        "update",
    );
    assert_checksum_error(
        m.compare_and_swap(
            b"victim",
            Some(&b"VICTIM-VALUE-0123456789"[..]),
            Some(&b"x"[..]),
        ),
        "m",
        "compare_and_swap",
    );
    assert_checksum_error(m.add(b"counter", 1), "m", "add");
    // The failed writes changed nothing; a plain removal (which hands out nothing) works.
    assert!(m.contains(b"victim").unwrap());
    assert!(m.remove(b"removable").unwrap());
    assert_eq!(m.get(b"removable").unwrap(), None);
    // Other keys read as ever.
    for i in (0..300u32).step_by(7) {
        assert_eq!(
            m.get(format!("key{i:04}").as_bytes()).unwrap(),
            Some(value_of(i))
        );
    }
    // By UID, and the UID of a key.
    let u = s.open_map("u").unwrap();
    assert_checksum_error(u.get(b"uvictim"), "u", "get (UID map)");
    assert_checksum_error(u.get_by_uid(uid), "u", "get_by_uid");
    let mut buf = Vec::new();
    assert_checksum_error(u.get_by_uid_into(uid, &mut buf), "u", "get_by_uid_into");
    assert_checksum_error(u.key_by_uid(uid), "u", "key_by_uid");
    assert_checksum_error(u.uid(b"uvictim"), "u", "uid");
    assert_checksum_error(
        u.update_by_uid(uid, |v| Some(v.to_vec())),
        "u",
        "update_by_uid",
    );
    assert_checksum_error(u.remove_by_uid(uid), "u", "remove_by_uid");
    assert_eq!(u.get_by_uid(other_uid).unwrap(), b"fine");
    // The checker sees the same three records.
    let r = s.check().unwrap();
    let sums = r
        .problems
        .iter()
        .filter(|p| p.contains("fails its checksum"))
        .count();
    assert_eq!(sums, 3, "{r}");
}

/// Readers of a checksummed store race writers whose overwrites change the values'
/// lengths (so every overwrite appends, and the cleaner moves records and frees and
/// reuses their chunks under the readers). A reader's copy of a record whose chunk was
/// reused meanwhile fails its checksum; the read then fails its validation too and is
/// retried. It must never come out as `Corrupt`.
#[test]
fn torn_copies_of_checksummed_records_are_retried_never_reported() {
    let d = shm_dir();
    let o = Options {
        checksums: Some(true),
        chunk_size: 64 << 10,
        // Generous: a writer descheduled mid-write on busy cores keeps readers waiting.
        lock_timeout: std::time::Duration::from_secs(30),
        ..Options::default()
    };
    let s = Store::open_with(d.path().join("t.shoal"), &o, OpenMode::CreateNew).unwrap();
    let mo = MapOptions {
        segment_buckets: 4,
        stash_buckets: 1,
        uids: true,
    };
    let m = s.map_with("m", &mo, true).unwrap();
    const KEYS: u32 = 400;
    let val = |k: u32, round: u32| {
        let mut v = format!("{k}:{round}:").into_bytes();
        v.resize(20 + ((k + round) % 90) as usize, b'a' + (round % 26) as u8);
        v
    };
    let mut uids = Vec::new();
    for k in 0..KEYS {
        uids.push(m.put_with_uid(&k.to_le_bytes(), &val(k, 0)).unwrap().1);
    }
    use std::sync::atomic::{AtomicBool, AtomicU32, Ordering::Relaxed};
    // Readers run for a few seconds; the writers stop when both readers have (also when
    // one failed: the guard below).
    let (readers_left, stop) = (AtomicU32::new(2), AtomicBool::new(false));
    struct Done<'a>(&'a AtomicU32, &'a AtomicBool);
    impl Drop for Done<'_> {
        fn drop(&mut self) {
            if self.0.fetch_sub(1, Relaxed) == 1 || std::thread::panicking() {
                self.1.store(true, Relaxed);
            }
        }
    }
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(4);
    let check = |k: u32, v: &[u8], how: &str| {
        let s = String::from_utf8_lossy(v);
        assert!(
            s.starts_with(&format!("{k}:")),
            "{how}: value of another key: {s:?}"
        );
    };
    std::thread::scope(|sc| {
        for w in 0..2u32 {
            let (m, stop) = (m.clone(), &stop);
            sc.spawn(move || {
                let mut round = 1 + w;
                while !stop.load(Relaxed) {
                    for k in (w..KEYS).step_by(2) {
                        m.put(&k.to_le_bytes(), &val(k, round)).unwrap();
                    }
                    round += 2;
                }
            });
        }
        for r in 0..2u32 {
            let (m, uids) = (m.clone(), &uids);
            let done = Done(&readers_left, &stop);
            sc.spawn(move || {
                let _done = done;
                let mut reads = 0u64;
                while std::time::Instant::now() < deadline {
                    for k in 0..KEYS {
                        let got = if r == 0 {
                            m.get(&k.to_le_bytes())
                        } else {
                            m.get_by_uid(uids[k as usize]).map(Some)
                        };
                        match got {
                            Ok(Some(v)) => check(k, &v, "get"),
                            Ok(None) => panic!("key {k} missing"),
                            Err(e) => panic!("reader {r}, after {reads} reads: {e}"),
                        }
                        reads += 1;
                    }
                }
            });
        }
    });
    let st = s.stats().unwrap();
    assert!(st.chunks_cleaned > 0, "the cleaner never ran: {st:?}");
    let r = s.check().unwrap();
    assert!(r.is_ok(), "{r}");
}
