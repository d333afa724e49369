//! Damage found in a store that was closed cleanly, and what reads, iteration and repair
//! make of it:
//! * a record that fails its checksum is `Corrupt` to every read that would hand out its
//!   value (by key, by UID, in a batch, by iteration, and the writes that return or use
//!   the old value), whatever the clean flag says; removing the key still works; `check`
//!   reports it, and `Store::repair` drops it (and only it), after which `check` passes;
//! * a copy torn by concurrent writes (a record's chunk cleaned and reused under a reader)
//!   fails its checksum too, and is retried, never reported as corrupt;
//! * a damaged segment (of a map of records, or of a fixed map) is reported as corruption
//!   naming its map and segment, and an iteration goes on with the other segments;
//! * a repair needs the store alone, and its dry run writes nothing;
//! * a truncated file is salvaged: every entry whose record and index survived is in the
//!   new store, with its value, and nothing else.

use shoal::{DataType, Error, FixedOptions, MapOptions, OpenMode, Options, Store};
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

#[test]
fn repair_drops_every_record_that_fails_its_checksum_in_a_store_closed_cleanly() {
    let d = disk_dir();
    let (p, _, other_uid) = store_with_bad_checksums(d.path());
    // Opened and closed cleanly, no read of the damaged keys: the repair must find them.
    drop(Store::open_existing(&p).unwrap());
    assert_eq!(std::fs::read(&p).unwrap()[H_CLEAN], 1);
    // The repair drops exactly those (all four: `removable` was not removed here),
    // although the store was closed cleanly.
    let (s, rep) = Store::repair(&p).unwrap();
    let dropped: Vec<&str> = rep.dropped.iter().map(|(m, _)| m.as_str()).collect();
    assert_eq!(dropped, ["m", "m", "m", "u"], "{rep:?}");
    assert!(
        rep.dropped
            .iter()
            .all(|(_, s)| s.contains("fails its checksum")),
        "{rep:?}"
    );
    let r = s.check().unwrap();
    assert!(r.is_ok(), "{r}");
    let m = s.open_map("m").unwrap();
    assert_eq!(m.get(b"victim").unwrap(), None);
    assert_eq!(m.get(b"counter").unwrap(), None);
    assert_eq!(m.get(b"removable").unwrap(), None);
    assert_eq!(m.len().unwrap(), 300);
    for i in 0..300u32 {
        assert_eq!(
            m.get(format!("key{i:04}").as_bytes()).unwrap(),
            Some(value_of(i))
        );
    }
    let u = s.open_map("u").unwrap();
    assert_eq!(u.get(b"uvictim").unwrap(), None);
    assert_eq!(u.get_by_uid(other_uid).unwrap(), b"fine");
    // A second repair finds nothing.
    drop((m, u, s));
    let (_s, rep) = Store::repair(&p).unwrap();
    assert!(rep.found.is_empty() && rep.dropped.is_empty(), "{rep:?}");
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
        ..Default::default()
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
        ..Default::default()
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
    assert_eq!(
        b.iter().collect::<shoal::Result<Vec<_>>>().unwrap().len(),
        500
    );
}

/// A fixed map's bucket left mid-write (its seq odd, as a crash that nobody repaired
/// leaves it): iteration skips that bucket's cells, reports the segment as corruption
/// naming the map, and goes on; a repair rebuilds the bucket (its cells were whole).
#[test]
fn a_fixed_map_bucket_left_mid_write_is_corruption_and_iteration_goes_on_past_it() {
    let d = shm_dir();
    let p = d.path().join("f.shoal");
    let key = |i: u64| (0x5a5a_0000_0000_0000 | i).to_le_bytes();
    {
        let s = Store::open(&p).unwrap();
        let f = s.fixed_map("f", 8, 8).unwrap();
        for i in 0..3000u64 {
            f.put(&key(i), &(i * 3).to_le_bytes()).unwrap();
        }
    }
    // 8+8 cells: 128-byte buckets at 64 past a 128-aligned segment start, so the bucket
    // of a cell is the one that starts at 64 mod 128 before it, and cell `i` is at
    // bucket + 8 + 16 i, or bucket + 16 + 16 i in a map with tags. A key moved to another bucket or by a split leaves its bytes
    // behind in a free cell (free cells hold garbage), so the live copy is the one whose
    // bitmap bit is set.
    let mut b = std::fs::read(&p).unwrap();
    let word_at = |b: &[u8], at: usize| u64::from_le_bytes(b[at..at + 8].try_into().unwrap());
    let live = |b: &[u8], cell: usize| {
        let bucket = cell.checked_sub(64)? / 128 * 128 + 64;
        let first = if (cell - bucket) % 16 == 0 { 16 } else { 8 };
        let slot = cell.checked_sub(bucket + first)?;
        (slot % 16 == 0 && slot / 16 < 7 && word_at(b, bucket) >> (32 + slot / 16) & 1 == 1)
            .then_some(bucket)
    };
    let copies: Vec<usize> = b
        .windows(8)
        .enumerate()
        .filter(|(_, w)| *w == key(777))
        .map(|(at, _)| at)
        .collect();
    let live_copies: Vec<usize> = copies.iter().filter_map(|&c| live(&b, c)).collect();
    assert_eq!(live_copies.len(), 1, "copies of key 777 at {copies:x?}");
    let bucket = live_copies[0];
    let word = word_at(&b, bucket);
    assert_eq!(word & 1, 0, "bucket {bucket:#x}: {word:#x}");
    b[bucket..bucket + 8].copy_from_slice(&(word | 1).to_le_bytes());
    std::fs::write(&p, &b).unwrap();
    let in_bucket = (word >> 32).count_ones() as usize;
    assert!(in_bucket > 0);
    let s = Store::open_existing(&p).unwrap();
    let f = s.fixed_map("f", 8, 8).unwrap();
    let (mut good, mut bad) = (0usize, Vec::new());
    for item in f.iter() {
        match item {
            Ok((k, _)) => {
                assert_ne!(k, key(777));
                good += 1;
            }
            Err(Error::Corrupt { what, .. }) => bad.push(what),
            Err(e) => panic!("iteration ended: {e}"),
        }
    }
    assert_eq!(good, 3000 - in_bucket, "{bad:?}");
    assert_eq!(bad.len(), 1, "{bad:?}");
    assert!(
        bad[0].contains("map \"f\": segment 0x") && bad[0].contains("mid-write"),
        "{}",
        bad[0]
    );
    drop((f, s));
    let (s, _) = Store::repair(&p).unwrap();
    assert!(s.check().unwrap().is_ok());
    let f = s.fixed_map("f", 8, 8).unwrap();
    assert_eq!(
        f.iter().collect::<shoal::Result<Vec<_>>>().unwrap().len(),
        3000
    );
}

#[test]
fn a_repair_needs_the_store_alone_and_its_dry_run_writes_nothing() {
    let d = shm_dir();
    let (p, slot) = store_with_a_damaged_segment(d.path());
    let s = Store::open_existing(&p).unwrap();
    // A repair needs the store alone.
    match Store::repair(&p) {
        Err(Error::TooManyUsers(w)) => assert!(w.contains("open in this process"), "{w}"),
        other => panic!("a repair of a store open here: {other:?}"),
    }
    drop(s);
    // Its dry run says what it would drop, and changes no byte of the file.
    let before = std::fs::read(&p).unwrap();
    let rep = Store::repair_dry_run(&p).unwrap();
    assert_eq!(rep.dropped.len(), 1, "{rep:?}");
    assert_eq!(rep.dropped[0].0, "alpha");
    assert!(
        rep.dropped[0].1.contains(&format!("slot {slot:#x}")),
        "{rep:?}"
    );
    assert!(
        std::fs::read(&p).unwrap() == before,
        "the dry run changed the file"
    );
    // The repair drops the slot; then the map iterates whole.
    let (s, rep) = Store::repair(&p).unwrap();
    assert_eq!(rep.dropped.len(), 1, "{rep:?}");
    assert!(s.check().unwrap().is_ok());
    let a = s.open_map("alpha").unwrap();
    assert_eq!(
        a.iter().collect::<shoal::Result<Vec<_>>>().unwrap().len(),
        1999
    );
}

/// Where each key of the form `PREFIX` + digits (`len` bytes in all) starts in `file`;
/// each such key of these tests is written once.
fn positions_of(
    file: &[u8],
    prefix: &[u8],
    len: usize,
) -> std::collections::HashMap<Vec<u8>, usize> {
    let mut at = std::collections::HashMap::new();
    for (i, w) in file.windows(len).enumerate() {
        if w.starts_with(prefix) && w[prefix.len()..].iter().all(u8::is_ascii_digit) {
            assert!(
                at.insert(w.to_vec(), i).is_none(),
                "{:?} twice",
                String::from_utf8_lossy(w)
            );
        }
    }
    at
}

#[test]
fn a_truncated_file_is_salvaged_with_every_intact_entry() {
    for checksums in [true, false] {
        let d = shm_dir();
        let p = d.path().join("t.shoal");
        let o = Options {
            checksums: Some(checksums),
            ..Options::default()
        };
        let val = |i: u32| format!("{i:06}-{}", "v".repeat(93)).into_bytes();
        {
            let s = Store::open_with(&p, &o, OpenMode::CreateNew).unwrap();
            // The maps' index chunks come first; their records after, in several data
            // chunks.
            // Recorded types go with the salvaged entries.
            let keep = s
                .map_with(
                    "keep",
                    &MapOptions {
                        key_type: Some(DataType::Utf8),
                        value_type: Some(DataType::User(7)),
                        ..Default::default()
                    },
                    true,
                )
                .unwrap();
            let cut = s.map("cut").unwrap();
            let fixed = s
                .fixed_map_with(
                    "fixed",
                    8,
                    8,
                    &FixedOptions {
                        key_type: Some(DataType::U64),
                        value_type: Some(DataType::I64),
                        ..Default::default()
                    },
                    true,
                )
                .unwrap();
            let uids = s
                .map_with(
                    "uids",
                    &MapOptions {
                        uids: true,
                        ..Default::default()
                    },
                    true,
                )
                .unwrap();
            for i in 0..50u32 {
                keep.put(format!("keep{i:04}").as_bytes(), &val(i)).unwrap();
                fixed
                    .put(&(i as u64).to_le_bytes(), &(i as u64 * 3).to_le_bytes())
                    .unwrap();
                uids.put(format!("uids{i:04}").as_bytes(), &val(i)).unwrap();
            }
            for i in 0..6000u32 {
                cut.put(format!("cut{i:05}").as_bytes(), &val(i)).unwrap();
            }
        }
        let good = std::fs::read(&p).unwrap();
        let len = good.len();
        // Cut the file in the middle of its last data chunk but one.
        let chunk = 256 * 1024;
        let at = len - chunk - chunk / 2 - 77;
        std::fs::write(&p, &good[..at]).unwrap();
        match Store::open_existing(&p) {
            Err(Error::Corrupt { what, .. }) => assert!(what.contains("truncated"), "{what}"),
            other => panic!("a truncated file opened: {other:?}"),
        }
        let trailer = if checksums { 4 } else { 0 };
        // A record of an 8-byte key and a 100-byte value: its key starts 3 bytes in.
        let pos = positions_of(&good, b"cut", 8);
        let intact = |key: &[u8]| pos[key] + key.len() + 100 + trailer <= at;
        // The dry run reports, and changes nothing.
        let rep = Store::repair_dry_run(&p).unwrap();
        assert!(rep.found[0].contains("truncated"), "{rep:?}");
        assert!(
            std::fs::read(&p).unwrap() == good[..at],
            "the dry run changed the file"
        );
        assert!(!d.path().join("t.shoal.truncated").exists());
        let (s, rep) = Store::repair(&p).unwrap();
        assert!(rep.found[0].contains("truncated"), "{rep:?}");
        assert!(rep.dropped.iter().all(|(m, _)| m == "cut"), "{rep:?}");
        assert!(
            rep.rebuilt.iter().any(|r| r.contains("t.shoal.truncated")),
            "{rep:?}"
        );
        assert!(std::fs::read(d.path().join("t.shoal.truncated")).unwrap() == good[..at]);
        assert!(s.check().unwrap().is_ok());
        let cut = s.open_map("cut").unwrap();
        let (mut kept, mut lost) = (0, 0);
        for i in 0..6000u32 {
            let k = format!("cut{i:05}");
            let got = cut.get(k.as_bytes()).unwrap();
            if intact(k.as_bytes()) {
                assert_eq!(got, Some(val(i)), "checksums {checksums}: {k}");
                kept += 1;
            } else {
                assert_eq!(got, None, "checksums {checksums}: {k} was cut");
                lost += 1;
            }
        }
        assert!(kept > 1000 && lost > 500, "kept {kept}, lost {lost}");
        assert_eq!(cut.len().unwrap(), kept);
        let keep = s.open_map("keep").unwrap();
        let uids = s.open_map("uids").unwrap();
        assert!(uids.has_uids());
        let fixed = s.fixed_map("fixed", 8, 8).unwrap();
        assert_eq!(
            (keep.key_type(), keep.value_type()),
            (Some(DataType::Utf8), Some(DataType::User(7)))
        );
        assert_eq!(
            (fixed.key_type(), fixed.value_type()),
            (Some(DataType::U64), Some(DataType::I64))
        );
        assert_eq!((uids.key_type(), cut.value_type()), (None, None));
        for i in 0..50u32 {
            assert_eq!(
                keep.get(format!("keep{i:04}").as_bytes()).unwrap(),
                Some(val(i))
            );
            assert_eq!(
                uids.get(format!("uids{i:04}").as_bytes()).unwrap(),
                Some(val(i))
            );
            assert_eq!(
                fixed.get(&(i as u64).to_le_bytes()).unwrap(),
                Some((i as u64 * 3).to_le_bytes().to_vec())
            );
        }
        println!("checksums {checksums}: kept {kept}, lost {lost}; {rep:?}");
    }
}
