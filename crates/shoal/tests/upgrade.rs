//! Older files are upgraded to version 3 when a process opens them alone, and refused
//! with `UpgradeBlocked` while others have them open; files of versions 3 to 5 are
//! opened as they are (version 4 differs only in its records' headers, which cannot be
//! recoded in place, version 5 only in overwriting values in place, which an older
//! library sharing the file would not know how to recover, and version 6 only in doing
//! so in maps with UIDs too, whose readers an older library would not keep off a value
//! being rewritten). The old files are made from current ones by hand: a version-5 file
//! lacks the header flag IN_PLACE_UIDS, a version-4 file also IN_PLACE, a version-3
//! file also the flag SHORT_RECORDS (so the store must hold no short record), a version-2 file
//! also has no `large_slack` word (version 3 added it), and a version-1 file has no
//! serials in its LARGE runs' headers either (version 2 added them, with merged free runs
//! and RELEASED marks, which a file that never merged or released a free run does not
//! have).

use shoal::{Error, MapOptions, OpenMode, Options, Store, FORMAT_VERSION};
use std::os::unix::fs::FileExt;
use std::path::Path;
use std::process::{Command, Stdio};

const H_VERSION: u64 = 8;
const H_FLAGS: u64 = 16;
const FLAG_SHORT_RECORDS: u64 = 2;
const FLAG_IN_PLACE: u64 = 4;
const FLAG_IN_PLACE_UIDS: u64 = 8;
const FLAG_FIXED_GROUPS: u64 = 16;
const FLAG_FIXED_TAGS: u64 = 32;
const FLAG_CLEAN_LANES: u64 = 64;
const FLAG_QUEUES: u64 = 128;
const FLAG_LOGS: u64 = 256;
const FLAG_ORDERED: u64 = 1024;
const FLAG_BACKUP: u64 = 2048;
/// Cleaning lanes 1 to 7 (version 9), 64 bytes each.
const H_LANES: u64 = 1024;
const H_CHUNKS_OFF: u64 = 96;
const H_FILE_END: u64 = 256;
const H_LARGE_SLACK: u64 = 328;
const K_KIND: u64 = 0;
const K_RUN: u64 = 8;
const K_SERIAL: u64 = 48;
const CK_LARGE: u64 = 4;

/// Held by every test here for its whole run. Whether a store is opened alone is decided
/// by file locks, and a child process started by one test (`upgrade_child`) holds, between
/// its fork and its exec, a copy of every descriptor of this process, including another
/// test's lock descriptor: that test then finds its store "open elsewhere" and its upgrade
/// blocked (seen once in CI). The tests take milliseconds, so running them one at a time
/// costs nothing.
fn serial() -> std::sync::MutexGuard<'static, ()> {
    static LOCK: std::sync::Mutex<()> = std::sync::Mutex::new(());
    LOCK.lock().unwrap_or_else(|e| e.into_inner())
}

fn read_u64(f: &std::fs::File, off: u64) -> u64 {
    let mut b = [0u8; 8];
    f.read_exact_at(&mut b, off).unwrap();
    u64::from_le_bytes(b)
}

fn write_u64(f: &std::fs::File, off: u64, v: u64) {
    f.write_all_at(&v.to_le_bytes(), off).unwrap();
}

/// The LARGE runs of the (closed) store at `path`, by walking its runs.
fn large_runs(path: &Path) -> Vec<u64> {
    let f = std::fs::File::open(path).unwrap();
    let (start, end) = (read_u64(&f, H_CHUNKS_OFF), read_u64(&f, H_FILE_END));
    let cs = 64 << 10;
    let mut runs = Vec::new();
    let mut c = start;
    while c < end {
        if read_u64(&f, c + K_KIND) == CK_LARGE {
            runs.push(c);
        }
        c += read_u64(&f, c + K_RUN).max(1) * cs;
    }
    runs
}

fn version(path: &Path) -> u32 {
    let f = std::fs::File::open(path).unwrap();
    read_u64(&f, H_VERSION) as u32
}

/// Writes `v` into the version word of the store at `path` (and nothing else).
fn set_version(path: &Path, v: u64) {
    let f = std::fs::OpenOptions::new()
        .write(true)
        .read(true)
        .open(path)
        .unwrap();
    let w = read_u64(&f, H_VERSION);
    write_u64(&f, H_VERSION, (w & !0xffff_ffff) | v);
}

/// Turns the closed current store at `path` into the file of format `to` (1 to 9) it
/// would have been. Below 4, its records must all have long headers (values of 64 bytes
/// or more, map ids below 64): those are the same bytes in every version. (Fixed-size
/// maps are not downgraded: a store with one created at version 8 is not a version-7 file.)
fn downgrade(path: &Path, to: u64) {
    let runs = large_runs(path);
    let f = std::fs::OpenOptions::new()
        .read(true)
        .write(true)
        .open(path)
        .unwrap();
    let all = FLAG_SHORT_RECORDS
        | FLAG_IN_PLACE
        | FLAG_IN_PLACE_UIDS
        | FLAG_FIXED_GROUPS
        | FLAG_FIXED_TAGS
        | FLAG_CLEAN_LANES
        | FLAG_QUEUES
        | FLAG_LOGS
        | FLAG_ORDERED
        | FLAG_BACKUP;
    let flags = read_u64(&f, H_FLAGS);
    assert_eq!(
        flags & all,
        all,
        "a version-11 store (without checksums) has short records, in-place values, \
         fixed maps of groups with tags, cleaning lanes, queue sets, logs, ordered maps and \
         write sections for hot backups"
    );
    set_version(path, to);
    let flags = flags & !FLAG_LOGS & !FLAG_ORDERED & !FLAG_BACKUP;
    write_u64(&f, H_FLAGS, flags);
    if to >= 10 {
        return;
    }
    let flags = flags & !FLAG_QUEUES;
    write_u64(&f, H_FLAGS, flags);
    if to >= 9 {
        return;
    }
    let flags = flags & !FLAG_CLEAN_LANES;
    write_u64(&f, H_FLAGS, flags);
    for w in 0..7 * 8 {
        write_u64(&f, H_LANES + 8 * w, 0);
    }
    if to >= 8 {
        return;
    }
    let flags = flags & !FLAG_FIXED_TAGS;
    write_u64(&f, H_FLAGS, flags);
    if to >= 7 {
        return;
    }
    let flags = flags & !FLAG_FIXED_GROUPS;
    write_u64(&f, H_FLAGS, flags);
    if to >= 6 {
        return;
    }
    write_u64(&f, H_FLAGS, flags & !FLAG_IN_PLACE_UIDS);
    if to >= 5 {
        return;
    }
    write_u64(&f, H_FLAGS, flags & !FLAG_IN_PLACE_UIDS & !FLAG_IN_PLACE);
    if to >= 4 {
        return;
    }
    write_u64(&f, H_FLAGS, flags & !all);
    if to >= 3 {
        return;
    }
    write_u64(&f, H_LARGE_SLACK, 0);
    if to >= 2 {
        return;
    }
    for r in &runs {
        assert_ne!(
            read_u64(&f, r + K_SERIAL),
            0,
            "a version-2 LARGE run has no serial"
        );
        write_u64(&f, r + K_SERIAL, 0);
    }
}

fn opts() -> Options {
    Options {
        chunk_size: 64 << 10,
        ..Options::default()
    }
}

fn big(tag: u8) -> Vec<u8> {
    vec![tag; 150_000]
}

#[test]
fn a_version_1_store_opened_alone_is_upgraded_and_its_large_runs_are_freed_again() {
    let _serial = serial();
    assert_eq!(FORMAT_VERSION, 11);
    let d = tempfile::tempdir_in("/dev/shm").unwrap();
    let path = d.path().join("v1.shoal");
    {
        let s = Store::open_with(&path, &opts(), OpenMode::CreateNew).unwrap();
        let m = s.map("m").unwrap();
        for i in 0..5u8 {
            m.put(format!("big{i}").as_bytes(), &big(i)).unwrap();
        }
        m.put(b"small", &[b'v'; 64]).unwrap();
    }
    downgrade(&path, 1);
    assert_eq!(version(&path), 1);
    assert_eq!(large_runs(&path).len(), 5);
    let s = Store::open_with(&path, &opts(), OpenMode::Open).unwrap();
    assert_eq!(version(&path), 3, "not upgraded");
    let m = s.map("m").unwrap();
    for i in 0..5u8 {
        assert!(m.get(format!("big{i}").as_bytes()).unwrap() == Some(big(i)));
    }
    assert_eq!(m.get(b"small").unwrap(), Some(vec![b'v'; 64]));
    // The old runs have serials now: overwriting frees them, so the file grows by one
    // run at most (a new record is written before the old one is freed). Without serials
    // the five old runs were never freed: +1.1 MiB.
    let size = s.stats().unwrap().file_size;
    for round in 0..20u8 {
        for i in 0..5u8 {
            m.put(format!("big{i}").as_bytes(), &big(round.wrapping_add(i)))
                .unwrap();
        }
    }
    assert!(
        s.stats().unwrap().file_size <= size + (256 << 10),
        "the upgraded store's large runs were never freed: {} -> {}",
        size,
        s.stats().unwrap().file_size
    );
    let r = s.check().unwrap();
    assert!(r.is_ok(), "{r}");
}

/// Child: tries to open the store named by `SHOAL_UPGRADE_PATH` and prints the outcome.
#[test]
#[ignore = "run as a child process by a_version_1_store_open_elsewhere_is_refused"]
fn upgrade_child() {
    let Ok(path) = std::env::var("SHOAL_UPGRADE_PATH") else {
        return;
    };
    match Store::open_with(&path, &opts(), OpenMode::Open) {
        Ok(_) => println!("outcome: opened"),
        Err(Error::UpgradeBlocked { found, .. }) => println!("outcome: blocked at {found}"),
        Err(e) => println!("outcome: other error: {e}"),
    }
}

#[test]
fn a_version_1_store_open_elsewhere_is_refused() {
    let _serial = serial();
    let d = tempfile::tempdir_in("/dev/shm").unwrap();
    let path = d.path().join("v1.shoal");
    {
        let s = Store::open_with(&path, &opts(), OpenMode::CreateNew).unwrap();
        s.map("m").unwrap().put(b"k", &big(1)).unwrap();
    }
    downgrade(&path, 1);
    // A process that holds the file open (as an older library would) blocks the upgrade.
    // This one opens it raw: it maps and registers through a store of its own first.
    let holder = Store::open_with(&path, &opts(), OpenMode::Open).unwrap();
    // The holder, alone, upgraded it; make it version 1 again under the holder.
    set_version(&path, 1);
    let run = |_: ()| {
        let out = Command::new(std::env::current_exe().unwrap())
            .args([
                "--exact",
                "upgrade_child",
                "--ignored",
                "--nocapture",
                "--test-threads=1",
            ])
            .env("SHOAL_UPGRADE_PATH", &path)
            .stderr(Stdio::null())
            .output()
            .unwrap();
        String::from_utf8_lossy(&out.stdout).to_string()
    };
    let out = run(());
    assert!(out.contains("outcome: blocked at 1"), "{out}");
    assert_eq!(
        version(&path),
        1,
        "upgraded while another process had it open"
    );
    drop(holder);
    let out = run(());
    assert!(out.contains("outcome: opened"), "{out}");
    assert_eq!(version(&path), 3);
}

/// A version-2 file has no `large_slack`: the upgrade sums it from the LARGE runs, so the
/// checker agrees with the header and the ends of those runs are not counted as dead.
#[test]
fn a_version_2_store_opened_alone_gets_its_large_slack() {
    let _serial = serial();
    let d = tempfile::tempdir_in("/dev/shm").unwrap();
    let path = d.path().join("v2.shoal");
    let slack = {
        let s = Store::open_with(&path, &opts(), OpenMode::CreateNew).unwrap();
        let m = s.map("m").unwrap();
        for i in 0..5u8 {
            m.put(format!("big{i}").as_bytes(), &big(i)).unwrap();
        }
        let st = s.stats().unwrap();
        assert!(st.dead_bytes < 64 << 10, "{st:?}");
        let f = std::fs::File::open(&path).unwrap();
        read_u64(&f, H_LARGE_SLACK)
    };
    // Each record (a 5-byte header, a 4-byte key, 150,000 bytes of value) has a run of
    // three 64 KiB chunks, whose first 128 bytes are the run's header.
    assert_eq!(slack, 5 * (3 * 65536 - 128 - (5 + 4 + 150_000)));
    downgrade(&path, 2);
    assert_eq!(version(&path), 2);
    let s = Store::open_with(&path, &opts(), OpenMode::Open).unwrap();
    assert_eq!(version(&path), 3, "not upgraded");
    let f = std::fs::File::open(&path).unwrap();
    assert_eq!(read_u64(&f, H_LARGE_SLACK), slack);
    let r = s.check().unwrap();
    assert!(r.is_ok(), "{r}");
    let st = s.stats().unwrap();
    assert!(st.dead_bytes < 64 << 10, "{st:?}");
}

/// A version-3 file is opened as it is: it keeps its version (libraries of version 3 may
/// share it), and records written to it get version-3 headers, while a new store's small
/// records get 2-byte ones. Either way every record reads back and the store checks clean.
#[test]
fn a_version_3_store_keeps_its_version_and_its_record_headers() {
    let _serial = serial();
    let d = tempfile::tempdir_in("/dev/shm").unwrap();
    let path = d.path().join("v3.shoal");
    {
        let s = Store::open_with(&path, &opts(), OpenMode::CreateNew).unwrap();
        s.map("m").unwrap().put(b"long", &[b'l'; 100]).unwrap();
    }
    assert_eq!(version(&path), FORMAT_VERSION);
    downgrade(&path, 3);
    let live = |s: &Store| s.open_map("m").unwrap().stats().unwrap().live_bytes;
    let small_records = |s: &Store| {
        let m = s.open_map("m").unwrap();
        let before = live(s);
        for i in 0..100u32 {
            m.put(format!("k{i:03}").as_bytes(), &i.to_le_bytes())
                .unwrap();
        }
        for i in 0..100u32 {
            assert_eq!(
                m.get(format!("k{i:03}").as_bytes()).unwrap(),
                Some(i.to_le_bytes().to_vec())
            );
        }
        let r = s.check().unwrap();
        assert!(r.is_ok(), "{r}");
        live(s) - before
    };
    let old = {
        let s = Store::open_with(&path, &opts(), OpenMode::Open).unwrap();
        assert_eq!(version(&path), 3, "a version-3 file was upgraded");
        small_records(&s)
    };
    // 100 records of a 4-byte key and a 4-byte value: 3-byte headers in version 3.
    assert_eq!(old, 100 * (3 + 4 + 4));
    let s = Store::open_with(&path, &opts(), OpenMode::Open).unwrap();
    assert_eq!(version(&path), 3);
    assert_eq!(
        s.open_map("m").unwrap().get(b"long").unwrap(),
        Some(vec![b'l'; 100])
    );
    drop(s);
    let path4 = d.path().join("v4.shoal");
    let s = Store::open_with(&path4, &opts(), OpenMode::CreateNew).unwrap();
    s.map("m").unwrap();
    assert_eq!(small_records(&s), 100 * (2 + 4 + 4));
}

/// The flag SHORT_RECORDS came with version 4: an older file that has it is corrupt (its
/// records would be read with the wrong headers).
#[test]
fn short_records_in_a_version_3_file_are_refused() {
    let _serial = serial();
    let d = tempfile::tempdir_in("/dev/shm").unwrap();
    let path = d.path().join("bad.shoal");
    drop(Store::open_with(&path, &opts(), OpenMode::CreateNew).unwrap());
    set_version(&path, 3);
    match Store::open_with(&path, &opts(), OpenMode::Open) {
        Err(Error::Corrupt { .. }) => {}
        Err(e) => panic!("not a corruption error: {e}"),
        Ok(_) => panic!("a version-3 file with short records was opened"),
    }
}

/// The flag IN_PLACE came with version 5: an older file that has it is corrupt (an older
/// library sharing it would not replay a masked redo entry), and so is a file with
/// checksums that has it (those stores never overwrite in place). Likewise IN_PLACE_UIDS
/// before version 6, FIXED_GROUPS before version 7, FIXED_TAGS before version 8,
/// CLEAN_LANES before version 9, QUEUES before version 10 and LOGS before version 11.
#[test]
fn in_place_in_a_version_4_file_or_with_checksums_is_refused() {
    let _serial = serial();
    let d = tempfile::tempdir_in("/dev/shm").unwrap();
    let path = d.path().join("bad.shoal");
    drop(Store::open_with(&path, &opts(), OpenMode::CreateNew).unwrap());
    set_version(&path, 4);
    let refused = |what: &str| match Store::open_with(&path, &opts(), OpenMode::Open) {
        Err(Error::Corrupt { what: why, .. }) => assert!(why.contains("IN_PLACE"), "{why}"),
        Err(e) => panic!("{what}: not a corruption error: {e}"),
        Ok(_) => panic!("{what}: opened"),
    };
    refused("version 4");
    set_version(&path, 6);
    let f = std::fs::OpenOptions::new()
        .read(true)
        .write(true)
        .open(&path)
        .unwrap();
    write_u64(&f, H_FLAGS, read_u64(&f, H_FLAGS) | 1);
    refused("checksums");
    write_u64(&f, H_FLAGS, read_u64(&f, H_FLAGS) & !1 & !FLAG_IN_PLACE);
    refused("IN_PLACE_UIDS without IN_PLACE");
    write_u64(&f, H_FLAGS, read_u64(&f, H_FLAGS) | FLAG_IN_PLACE);
    set_version(&path, 5);
    refused("IN_PLACE_UIDS in version 5");
    // FIXED_GROUPS came with version 7: a version-6 library would split such a map's
    // segments by depths it does not keep.
    set_version(&path, 6);
    match Store::open_with(&path, &opts(), OpenMode::Open) {
        Err(Error::Corrupt { what, .. }) => assert!(what.contains("FIXED_GROUPS"), "{what}"),
        Err(e) => panic!("FIXED_GROUPS in version 6: not a corruption error: {e}"),
        Ok(_) => panic!("FIXED_GROUPS in version 6: opened"),
    }
    // FIXED_TAGS came with version 8: a version-7 library would look for cells where a
    // tagged map keeps its tags.
    let refused_tags = |what: &str| match Store::open_with(&path, &opts(), OpenMode::Open) {
        Err(Error::Corrupt { what: why, .. }) => assert!(why.contains("FIXED_TAGS"), "{why}"),
        Err(e) => panic!("{what}: not a corruption error: {e}"),
        Ok(_) => panic!("{what}: opened"),
    };
    set_version(&path, 7);
    refused_tags("FIXED_TAGS in version 7");
    set_version(&path, 8);
    write_u64(&f, H_FLAGS, read_u64(&f, H_FLAGS) & !FLAG_FIXED_GROUPS);
    refused_tags("FIXED_TAGS without FIXED_GROUPS");
    write_u64(&f, H_FLAGS, read_u64(&f, H_FLAGS) | FLAG_FIXED_GROUPS);
    // CLEAN_LANES came with version 9: a version-8 library's cleaner knows no lanes.
    match Store::open_with(&path, &opts(), OpenMode::Open) {
        Err(Error::Corrupt { what, .. }) => assert!(what.contains("CLEAN_LANES"), "{what}"),
        Err(e) => panic!("CLEAN_LANES in version 8: not a corruption error: {e}"),
        Ok(_) => panic!("CLEAN_LANES in version 8: opened"),
    }
    // QUEUES came with version 10: a version-9 library would take a queue set for a map.
    set_version(&path, 9);
    match Store::open_with(&path, &opts(), OpenMode::Open) {
        Err(Error::Corrupt { what, .. }) => assert!(what.contains("QUEUES"), "{what}"),
        Err(e) => panic!("QUEUES in version 9: not a corruption error: {e}"),
        Ok(_) => panic!("QUEUES in version 9: opened"),
    }
    // LOGS came with version 11: a version-10 library would take a log for a map.
    set_version(&path, 10);
    match Store::open_with(&path, &opts(), OpenMode::Open) {
        Err(Error::Corrupt { what, .. }) => assert!(what.contains("LOGS"), "{what}"),
        Err(e) => panic!("LOGS in version 10: not a corruption error: {e}"),
        Ok(_) => panic!("LOGS in version 10: opened"),
    }
    // ORDERED came with version 11 too: a version-10 library would take an ordered map
    // for a hash map.
    let f2 = std::fs::OpenOptions::new()
        .read(true)
        .write(true)
        .open(&path)
        .unwrap();
    write_u64(&f2, H_FLAGS, read_u64(&f2, H_FLAGS) & !FLAG_LOGS);
    match Store::open_with(&path, &opts(), OpenMode::Open) {
        Err(Error::Corrupt { what, .. }) => assert!(what.contains("ORDERED"), "{what}"),
        Err(e) => panic!("ORDERED in version 10: not a corruption error: {e}"),
        Ok(_) => panic!("ORDERED in version 10: opened"),
    }
    write_u64(&f2, H_FLAGS, read_u64(&f2, H_FLAGS) | FLAG_LOGS);
    set_version(&path, 11);
    drop(Store::open_with(&path, &opts(), OpenMode::Open).unwrap());
}

/// A version-6 file is opened as it is (libraries of version 6 may share it): its
/// fixed-size maps, new ones included, split segments in halves as version 6 does,
/// instead of moving directory groups (which a version-6 library would not understand:
/// it would find entries without depths). The store keeps version 6 and no FIXED_GROUPS.
#[test]
fn a_version_6_store_keeps_splitting_its_fixed_maps() {
    let _serial = serial();
    let d = tempfile::tempdir_in("/dev/shm").unwrap();
    let path = d.path().join("v6.shoal");
    drop(Store::open_with(&path, &opts(), OpenMode::CreateNew).unwrap());
    downgrade(&path, 6);
    for round in 0..2u64 {
        let s = Store::open_with(&path, &opts(), OpenMode::Open).unwrap();
        let small = shoal::FixedOptions {
            segment_buckets: 4,
            stash_buckets: 1,
            ..Default::default()
        };
        let m = s.fixed_map_with("f", 8, 8, &small, true).unwrap();
        for i in round * 2000..(round + 1) * 2000 {
            m.put(&i.to_le_bytes(), &(i * 3).to_le_bytes()).unwrap();
        }
        for i in 0..(round + 1) * 2000 {
            assert_eq!(
                m.get(&i.to_le_bytes()).unwrap(),
                Some((i * 3).to_le_bytes().to_vec())
            );
        }
        let st = m.stats().unwrap();
        assert!(st.segments > 20, "only {} segments", st.segments);
        // The checker holds a map without FIXED_GROUPS to the split rules: every
        // segment's depth and prefix agree with the directory entries naming it.
        let r = s.check().unwrap();
        assert!(r.is_ok(), "{r}");
    }
    assert_eq!(version(&path), 6);
    let f = std::fs::File::open(&path).unwrap();
    assert_eq!(read_u64(&f, H_FLAGS) & FLAG_FIXED_GROUPS, 0);
}

/// A version-5 file is opened as it is (libraries of version 5 may share it, and their
/// readers by UID do not look at the busy bit): a map with UIDs overwrites by appending
/// there, and in place in a version-6 store, through every write that can (`put`,
/// `put_with_uid`, `put_by_uid`, `update_by_uid`, `add_by_uid`), keeping its handles.
#[test]
fn a_version_5_store_keeps_appending_in_maps_with_uids() {
    let _serial = serial();
    let d = tempfile::tempdir_in("/dev/shm").unwrap();
    // Dead bytes (and chunks cleaned) the overwrites of rounds 2-5 added.
    let overwrite = |s: &Store| {
        let m = s
            .map_with(
                "u",
                &MapOptions {
                    uids: true,
                    ..MapOptions::default()
                },
                true,
            )
            .unwrap();
        let dead = || s.stats().unwrap().dead_bytes + s.stats().unwrap().chunks_cleaned;
        let key = |i: u32| format!("k{i:03}").into_bytes();
        let uids: Vec<_> = (0..100u32)
            .map(|i| m.put_with_uid(&key(i), &[0; 8]).unwrap().1)
            .collect();
        let mut inserted = 0;
        for round in 1..6u8 {
            // From the end of round 1: its first puts, right after the inserts, may
            // append before they find the key (`APPENDING` in map.rs), in any version.
            if round == 2 {
                inserted = dead();
            }
            for (i, &u) in uids.iter().enumerate() {
                match (round, i % 2) {
                    (1, _) => {
                        m.put(&key(i as u32), &[1; 8]).unwrap();
                    }
                    (2, _) => assert_eq!(m.put_with_uid(&key(i as u32), &[2; 8]).unwrap().1, u),
                    (3, _) => m.put_by_uid(u, &[3; 8]).unwrap(),
                    (4, _) => {
                        m.update_by_uid(u, |v| Some(v.iter().map(|b| b + 1).collect()))
                            .unwrap();
                    }
                    _ => assert_eq!(m.add_by_uid(u, 1).unwrap(), 0x0404_0404_0404_0405),
                }
            }
        }
        for (i, &u) in uids.iter().enumerate() {
            let want = 0x0404_0404_0404_0405i64.to_le_bytes().to_vec();
            assert_eq!(m.get_by_uid(u).unwrap(), want);
            assert_eq!(m.get(&key(i as u32)).unwrap(), Some(want));
        }
        let r = s.check().unwrap();
        assert!(r.is_ok(), "{r}");
        dead().saturating_sub(inserted)
    };
    appends_in_old_overwrites_in_place_in_new(d.path(), 5, "a UID map", overwrite);
}

/// A version-4 file is opened as it is (libraries of version 4 may share it): it keeps its
/// version and its flags, and a value overwritten with one of the same length is appended
/// as a new record, as version 4 does, while a new store overwrites it in place (no dead
/// bytes).
#[test]
fn a_version_4_store_keeps_its_version_and_appends_overwrites() {
    let _serial = serial();
    let d = tempfile::tempdir_in("/dev/shm").unwrap();
    // Dead bytes (and chunks cleaned) the overwrites of rounds 2-19 added.
    let overwrite = |s: &Store| {
        let m = s.map("m").unwrap();
        let dead = || s.stats().unwrap().dead_bytes + s.stats().unwrap().chunks_cleaned;
        let mut inserted = 0;
        for round in 0..20u8 {
            for i in 0..100u32 {
                m.put(format!("k{i:03}").as_bytes(), &[round; 24]).unwrap();
            }
            // From the end of round 1: its first puts, right after the inserts, may
            // append before they find the key (`APPENDING` in map.rs), in any version.
            if round == 1 {
                inserted = dead();
            }
        }
        for i in 0..100u32 {
            assert_eq!(
                m.get(format!("k{i:03}").as_bytes()).unwrap(),
                Some(vec![19; 24])
            );
        }
        let r = s.check().unwrap();
        assert!(r.is_ok(), "{r}");
        dead().saturating_sub(inserted)
    };
    appends_in_old_overwrites_in_place_in_new(d.path(), 4, "a map", overwrite);
}

/// Runs `overwrite` (which returns the dead bytes its same-length overwrites left) on a
/// new store downgraded to version `old`, which must keep its version and flags and
/// overwrite by appending, and on a new store, which must overwrite in place.
fn appends_in_old_overwrites_in_place_in_new(
    dir: &Path,
    old: u64,
    what: &str,
    overwrite: impl Fn(&Store) -> u64,
) {
    let path = dir.join(format!("v{old}.shoal"));
    drop(Store::open_with(&path, &opts(), OpenMode::CreateNew).unwrap());
    downgrade(&path, old);
    let flags = |p: &Path| read_u64(&std::fs::File::open(p).unwrap(), H_FLAGS);
    let before = flags(&path);
    let appended = overwrite(&Store::open_with(&path, &opts(), OpenMode::Open).unwrap());
    assert_eq!(
        version(&path),
        old as u32,
        "a version-{old} file was upgraded"
    );
    assert_eq!(flags(&path), before, "a version-{old} file's flags changed");
    assert!(
        appended > 0,
        "no dead bytes: {what} overwrote in place in a version-{old} file"
    );
    let new = dir.join("new.shoal");
    let in_place = overwrite(&Store::open_with(&new, &opts(), OpenMode::CreateNew).unwrap());
    assert_eq!(
        in_place, 0,
        "same-length overwrites in {what} left dead bytes (v{old}: {appended})"
    );
}

/// A version-7 file is opened as it is (libraries of version 7 may share it): its
/// fixed-size maps, new ones included, have no tags and keep their cells right after each
/// bucket's header word, where a version-7 library looks for them (16+16: cell `i` at
/// byte 8 + 32 i of a 64-aligned bucket). The store keeps version 7 and no FIXED_TAGS; a
/// new store's 16+16 map has tags and its cells at byte 32 + 32 i.
#[test]
fn a_version_7_store_keeps_its_fixed_maps_untagged() {
    let _serial = serial();
    let d = tempfile::tempdir_in("/dev/shm").unwrap();
    // Where the only key of a 16+16 map sits, modulo a cell.
    let key_cell_offset = |path: &Path| {
        let b = std::fs::read(path).unwrap();
        let at = b
            .windows(16)
            .position(|w| w == b"key:000000000000")
            .expect("the key's cell");
        at % 32
    };
    let path = d.path().join("v7.shoal");
    drop(Store::open_with(&path, &opts(), OpenMode::CreateNew).unwrap());
    downgrade(&path, 7);
    for round in 0..2u64 {
        let s = Store::open_with(&path, &opts(), OpenMode::Open).unwrap();
        let m = s.fixed_map("f", 16, 16).unwrap();
        let k = |i: u64| format!("key:{i:012}").into_bytes();
        if round == 0 {
            m.put(&k(0), b"val:000000000000").unwrap();
            drop(s);
            assert_eq!(
                key_cell_offset(&path),
                8,
                "cells right after the header word"
            );
            continue;
        }
        for i in 1..3000 {
            m.put(&k(i), format!("val:{i:012}").as_bytes()).unwrap();
        }
        for i in 0..3000 {
            assert_eq!(
                m.get(&k(i)).unwrap(),
                Some(format!("val:{i:012}").into_bytes())
            );
        }
        let r = s.check().unwrap();
        assert!(r.is_ok(), "{r}");
    }
    assert_eq!(version(&path), 7);
    let f = std::fs::File::open(&path).unwrap();
    assert_eq!(read_u64(&f, H_FLAGS) & FLAG_FIXED_TAGS, 0);
    // The same map in a new store: tags from byte 8, cells from byte 32.
    let path = d.path().join("v8.shoal");
    let s = Store::open_with(&path, &opts(), OpenMode::CreateNew).unwrap();
    s.fixed_map("f", 16, 16)
        .unwrap()
        .put(b"key:000000000000", b"val:000000000000")
        .unwrap();
    drop(s);
    assert_eq!(key_cell_offset(&path), 0);
}

/// A version-8 file is opened as it is, with one cleaning lane: libraries of version 8
/// may share it, and their cleaner knows no lanes, so a lane of ours could clean the
/// chunk theirs is cleaning and both would free it. Writers on several threads clean
/// through lane 0 only, the lanes' words stay untouched, and the file stays version 8.
#[test]
fn a_version_8_store_is_cleaned_through_one_lane() {
    let _serial = serial();
    let d = tempfile::tempdir_in("/dev/shm").unwrap();
    let path = d.path().join("v8.shoal");
    drop(Store::open_with(&path, &opts(), OpenMode::CreateNew).unwrap());
    downgrade(&path, 8);
    {
        let s = Store::open_with(&path, &opts(), OpenMode::Open).unwrap();
        let m = s.map("m").unwrap();
        std::thread::scope(|sc| {
            for t in 0..4u32 {
                let m = &m;
                sc.spawn(move || {
                    let v = [3u8; 300];
                    for i in 0..60_000u32 {
                        let key = format!("t{t}k{}", i % 2_000);
                        m.put(key.as_bytes(), &v[..50 + (i as usize % 200)])
                            .unwrap();
                    }
                });
            }
        });
        let st = s.stats().unwrap();
        assert!(st.chunks_cleaned > 0, "the cleaner never ran: {st:?}");
        let r = s.check().unwrap();
        assert!(r.is_ok(), "{r}");
    }
    assert_eq!(version(&path), 8);
    let f = std::fs::File::open(&path).unwrap();
    assert_eq!(read_u64(&f, H_FLAGS) & FLAG_CLEAN_LANES, 0);
    for w in 0..7 * 8 {
        assert_eq!(
            read_u64(&f, H_LANES + 8 * w),
            0,
            "lane word {w} written in a version-8 file"
        );
    }
}

#[test]
fn a_version_10_store_keeps_its_version_and_holds_no_ordered_maps() {
    let _serial = serial();
    let d = tempfile::tempdir_in("/dev/shm").unwrap();
    let path = d.path().join("v10.shoal");
    {
        let s = Store::open_with(&path, &opts(), OpenMode::CreateNew).unwrap();
        s.map("m").unwrap().put(b"k", b"v").unwrap();
    }
    downgrade(&path, 10);
    {
        let s = Store::open_with(&path, &opts(), OpenMode::Open).unwrap();
        let e = s.ordered_map("o").unwrap_err();
        assert!(
            matches!(&e, Error::InvalidArgument(m) if m.contains("predates ordered maps")),
            "{e}"
        );
        s.queue_set("q", &shoal::QueueSetOptions::new(8, 8))
            .unwrap();
        assert!(s.check().unwrap().is_ok());
    }
    assert_eq!(version(&path), 10);
    let f = std::fs::File::open(&path).unwrap();
    assert_eq!(read_u64(&f, H_FLAGS) & FLAG_ORDERED, 0);
}

#[test]
fn a_version_9_store_keeps_its_version_and_holds_no_queue_sets() {
    let _serial = serial();
    let d = tempfile::tempdir_in("/dev/shm").unwrap();
    let path = d.path().join("v9.shoal");
    drop(Store::open_with(&path, &opts(), OpenMode::CreateNew).unwrap());
    downgrade(&path, 9);
    {
        let s = Store::open_with(&path, &opts(), OpenMode::Open).unwrap();
        s.map("m").unwrap().put(b"k", b"v").unwrap();
        let e = s
            .queue_set("q", &shoal::QueueSetOptions::new(8, 8))
            .unwrap_err();
        assert!(
            matches!(&e, Error::InvalidArgument(m) if m.contains("predates queue sets")),
            "{e}"
        );
        assert!(s.check().unwrap().is_ok());
    }
    assert_eq!(version(&path), 9);
    let f = std::fs::File::open(&path).unwrap();
    assert_eq!(read_u64(&f, H_FLAGS) & FLAG_QUEUES, 0);
}

#[test]
fn a_version_10_store_keeps_its_version_and_holds_no_logs() {
    let _serial = serial();
    let d = tempfile::tempdir_in("/dev/shm").unwrap();
    let path = d.path().join("v10.shoal");
    drop(Store::open_with(&path, &opts(), OpenMode::CreateNew).unwrap());
    downgrade(&path, 10);
    {
        let s = Store::open_with(&path, &opts(), OpenMode::Open).unwrap();
        s.map("m").unwrap().put(b"k", b"v").unwrap();
        s.queue_set("q", &shoal::QueueSetOptions::new(8, 8))
            .unwrap();
        let e = s.log("l", &shoal::LogOptions::new(8, 8)).unwrap_err();
        assert!(
            matches!(&e, Error::InvalidArgument(m) if m.contains("predates logs")),
            "{e}"
        );
        assert!(s.check().unwrap().is_ok());
    }
    assert_eq!(version(&path), 10);
    let f = std::fs::File::open(&path).unwrap();
    assert_eq!(read_u64(&f, H_FLAGS) & FLAG_LOGS, 0);
}
