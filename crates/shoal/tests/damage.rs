//! Damage found in a store that was closed cleanly, and what reads and iteration make of
//! it:
//! * a record that fails its checksum is `Corrupt` to every read that would hand out its
//!   value (by key, by UID, in a batch, by iteration, and the writes that return or use
//!   the old value), whatever the clean flag says; removing the key still works; `check`
//!   reports it;
//! * a copy torn by concurrent writes (a record's chunk cleaned and reused under a reader)
//!   fails its checksum too, and is retried, never reported as corrupt;
//! * a damaged segment is reported as corruption naming its map and segment, and an
//!   iteration goes on with the other segments.

use shoal::{Error, MapOptions, OpenMode, Options, Store};
use std::collections::BTreeMap;
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
    // Iteration: every sound entry once, the damaged ones reported as corruption.
    let (mut good, mut bad) = (BTreeMap::new(), Vec::new());
    for item in m.iter() {
        match item {
            Ok((k, v)) => assert!(good.insert(k, v).is_none()),
            Err(Error::Corrupt { what, .. }) => bad.push(what),
            Err(e) => panic!("iteration failed: {e}"),
        }
    }
    assert_eq!(good.len(), 300, "{bad:?}");
    assert!(
        (1..=2).contains(&bad.len())
            && bad
                .iter()
                .all(|w| w.contains("fails its checksum") && w.contains("\"m\"")),
        "{bad:?}"
    );
    assert_eq!(m.keys().filter(|k| k.is_err()).count(), bad.len());
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
                    if r == 0 {
                        for item in m.iter() {
                            let (k, v) = item
                                .unwrap_or_else(|e| panic!("iteration, after {reads} reads: {e}"));
                            check(u32::from_le_bytes(k[..4].try_into().unwrap()), &v, "iter");
                        }
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

/// Overwrites the slot of `key`'s record (in a store file without checksums, whose short
/// record header is 2 bytes) with one that leads into the process table, where no
/// record can be: the key's segment is damaged. Returns the slot's offset.
fn damage_slot_of(p: &Path, key: &[u8]) -> usize {
    let mut b = std::fs::read(p).unwrap();
    let at = b
        .windows(key.len())
        .position(|w| w == key)
        .expect("the key's record");
    let rec = (at - 2) as u64;
    let slot = (0..b.len() / 8)
        .map(|i| i * 8)
        .find(|&i| {
            let w = u64::from_le_bytes(b[i..i + 8].try_into().unwrap());
            w & ((1 << 48) - 1) == rec && w >> 48 != 0
        })
        .expect("the key's slot");
    let tag = u64::from_le_bytes(b[slot..slot + 8].try_into().unwrap()) >> 48;
    b[slot..slot + 8].copy_from_slice(&(tag << 48 | 0x1008).to_le_bytes());
    std::fs::write(p, &b).unwrap();
    slot
}

/// A store in /dev/shm (no checksums) with maps `alpha` (2,000 keys `a:NNNNN`) and
/// `beta` (500), both of small segments, whose slot of `a:01234` was then damaged
/// ([`damage_slot_of`]). Returns the path and the slot's offset.
fn store_with_a_damaged_segment(d: &Path) -> (std::path::PathBuf, usize) {
    let p = d.join("s.shoal");
    let mo = MapOptions {
        segment_buckets: 4,
        stash_buckets: 1,
        uids: false,
    };
    {
        let s = Store::open(&p).unwrap();
        assert!(!s.stats().unwrap().checksums);
        let a = s.map_with("alpha", &mo, true).unwrap();
        let b = s.map_with("beta", &mo, true).unwrap();
        for i in 0..2000u32 {
            a.put(format!("a:{i:05}").as_bytes(), b"va").unwrap();
        }
        for i in 0..500u32 {
            b.put(format!("b:{i:05}").as_bytes(), b"vb").unwrap();
        }
        assert!(a.stats().unwrap().segments > 20);
    }
    let slot = damage_slot_of(&p, b"a:01234");
    (p, slot)
}

#[test]
fn a_damaged_segment_is_corruption_named_and_iteration_goes_on_past_it() {
    let d = shm_dir();
    let (p, slot) = store_with_a_damaged_segment(d.path());
    let s = Store::open_existing(&p).unwrap();
    let a = s.open_map("alpha").unwrap();
    let (mut good, mut bad) = (0u32, Vec::new());
    for item in a.iter() {
        match item {
            Ok((k, _)) => {
                assert_ne!(k, b"a:01234");
                good += 1;
            }
            Err(Error::Corrupt { what, .. }) => bad.push(what),
            Err(e) => panic!("iteration ended: {e}"),
        }
    }
    assert_eq!(good, 1999, "{bad:?}");
    assert_eq!(bad.len(), 1, "{bad:?}");
    // The message names the map and the segment that holds the slot.
    let w = &bad[0];
    assert!(w.contains("map \"alpha\": segment 0x"), "{w}");
    let seg = u64::from_str_radix(
        w.split("segment 0x")
            .nth(1)
            .unwrap()
            .split(|c: char| !c.is_ascii_hexdigit())
            .next()
            .unwrap(),
        16,
    )
    .unwrap();
    let seg_size = 128 * (1 + 4 + 1);
    assert!(
        seg < slot as u64 && (slot as u64) < seg + seg_size,
        "slot {slot:#x} is not in segment {seg:#x}: {w}"
    );
    assert!(w.contains("no record of the map"), "{w}");
    assert_eq!(a.keys().filter(|k| k.is_ok()).count(), 1999);
    let b = s.open_map("beta").unwrap();
    assert_eq!(b.iter().collect::<shoal::Result<Vec<_>>>().unwrap().len(), 500);
}
