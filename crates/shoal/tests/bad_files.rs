//! Opening bad files: the right, clear error, and never a crash.
//!
//! What this proves:
//! * an empty file, random bytes (several sizes, seeded), a wrong magic, a directory, a
//!   FIFO, a character device, a path whose parent does not exist and an unreadable file
//!   each give their own error (`NotAStore`, `InvalidArgument`, `NotFound`,
//!   `Permission`), and a rejected file is left byte for byte as it was (`Store::open`
//!   never "recreates" over a file it cannot read);
//! * a newer format version gives `VersionMismatch` with both versions;
//! * every header field corrupted on its own (version, header size, flags, hash, chunk and
//!   page shift, table counts, table offsets, max size, file end) gives `Corrupt` whose
//!   message names the field;
//! * a real store truncated anywhere (inside the header, the tables, any chunk) gives
//!   `Corrupt` saying "truncated" with both sizes, and the untruncated length opens with
//!   every entry intact;
//! * a real store whose *interior* (index and data chunks, chunk headers, catalog, txn
//!   and process tables, the header's mutable words) was corrupted at random, seeded,
//!   over hundreds of trials, never panics, crashes (SIGSEGV/SIGBUS) or hangs in `open`,
//!   `check`, `get`, `get_into`, `contains`, `put`, `swap`, `insert`, `replace`, `remove`,
//!   `take`, `iter`, `keys`, `len`, `stats`, `clear`, `compact`, `drop_map` or `map`:
//!   each returns Ok or an error. Each trial runs in a child process (this test binary
//!   re-executed) under a timeout, so a crash or a hang is a reported failure; every
//!   failure prints its seed, keeps the corrupted file, and says how to reproduce it.
//!
//!   Trials use plain and checksummed stores on tmpfs, and checksummed stores copied to a
//!   disk file system with the clean flag cleared (so opening runs the verification of an
//!   unclean store).
//! * each engine bug those trials found is pinned by a test of its own, minimised to the
//!   one or two corrupted words that caused it (the "Regression" tests below).
//!
//! Knobs: `SHOAL_CORRUPT_TRIALS` (default 250; 80 in a debug build),
//! `SHOAL_CORRUPT_FIRST_SEED`, `SHOAL_CORRUPT_SEED` (one trial), `SHOAL_CORRUPT_FILE`
//! (exercise a kept file in this process), `SHOAL_CORRUPT_MINIMIZE=<seed>` (shrink a
//! failing trial to the fewest corrupted words), `SHOAL_CORRUPT_PATCH` (one explicit
//! patch, "offset=value+...").

use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use shoal::{Error, FixedOptions, MapOptions, OpenMode, Options, Store, FORMAT_VERSION};
use std::fs;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Mutex;
use std::time::{Duration, Instant};

// Header fields (docs/FORMAT.md, "Store header").
const MAGIC: &[u8; 8] = b"SHOAL\0\r\n";
const H_VERSION: u64 = 8;
const H_HEADER_SIZE: u64 = 12;
const H_FLAGS: u64 = 16;
const H_CHUNK_SHIFT: u64 = 24;
const H_PAGE_SHIFT: u64 = 28;
const H_HASH: u64 = 32;
const H_SEED: u64 = 40;
const H_MAX_SIZE: u64 = 48;
const H_N_PROC: u64 = 56;
const H_N_TXN: u64 = 60;
const H_N_CAT: u64 = 64;
const H_PROC_OFF: u64 = 72;
const H_TXN_OFF: u64 = 80;
const H_CATALOG_OFF: u64 = 88;
const H_CHUNKS_OFF: u64 = 96;
const H_FILE_END: u64 = 256;
const H_CLEAN: u64 = 576;
/// Start of the header's mutable words and end of the last one we may corrupt.
const H_MUTABLE: (u64, u64) = (264, 640);
const HEADER_SIZE: u64 = 4096;

const CHUNK: u64 = 64 * 1024;
/// Keys the base store holds in each map (`key_of(i)` for i below this).
const N_KEYS: u32 = 1200;

fn tmpdir() -> tempfile::TempDir {
    tempfile::tempdir_in("/dev/shm")
        .or_else(|_| tempfile::tempdir())
        .expect("temp dir")
}

fn key_of(i: u32) -> Vec<u8> {
    format!("key-{i:05}").into_bytes()
}

fn val_of(map: usize, i: u32, round: u32) -> Vec<u8> {
    let len = (i as usize * 37 + round as usize * 11) % 300;
    (0..len)
        .map(|j| (j as u32 ^ i ^ (map as u32) << 4 ^ round << 2) as u8)
        .collect()
}

fn store_options(checksums: bool) -> Options {
    Options {
        chunk_size: CHUNK,
        max_threads: 8,
        max_processes: 8,
        max_maps: 8,
        max_size: 1 << 32,
        checksums: Some(checksums),
        ..Options::default()
    }
}

fn read_u32(b: &[u8], off: u64) -> u32 {
    u32::from_le_bytes(b[off as usize..off as usize + 4].try_into().unwrap())
}
fn read_u64(b: &[u8], off: u64) -> u64 {
    u64::from_le_bytes(b[off as usize..off as usize + 8].try_into().unwrap())
}
fn put_u32(b: &mut [u8], off: u64, v: u32) {
    b[off as usize..off as usize + 4].copy_from_slice(&v.to_le_bytes());
}
fn put_u64(b: &mut [u8], off: u64, v: u64) {
    b[off as usize..off as usize + 8].copy_from_slice(&v.to_le_bytes());
}

const MAP_NAMES: [&str; 3] = ["tiny", "small", "default"];

/// Builds a real store: three maps (tiny segments: many splits), overwrites and removes
/// (dead records, cleaned chunks), large records, a dropped map (free runs), with a fixed
/// hash seed so the layout is the same from run to run. Returns its path.
fn build_store(dir: &Path, name: &str, checksums: bool) -> PathBuf {
    let path = dir.join(name);
    drop(Store::open_with(&path, &store_options(checksums), OpenMode::CreateNew).unwrap());
    let mut bytes = fs::read(&path).unwrap();
    put_u64(&mut bytes, H_SEED, 0x0005_eed0_f5b0_a1ed);
    fs::write(&path, &bytes).unwrap();
    let s = Store::open_with(&path, &store_options(checksums), OpenMode::Open).unwrap();
    let maps = [
        s.map_with(
            "tiny",
            &MapOptions {
                segment_buckets: 1,
                stash_buckets: 1,
                uids: false,
                ..Default::default()
            },
            true,
        )
        .unwrap(),
        s.map_with(
            "small",
            &MapOptions {
                segment_buckets: 3,
                stash_buckets: 2,
                uids: false,
                ..Default::default()
            },
            true,
        )
        .unwrap(),
        s.map("default").unwrap(),
    ];
    let victim = s
        .map_with(
            "victim",
            &MapOptions {
                segment_buckets: 2,
                stash_buckets: 1,
                uids: false,
                ..Default::default()
            },
            true,
        )
        .unwrap();
    for round in 0..3 {
        for i in 0..N_KEYS {
            for (m, map) in maps.iter().enumerate() {
                map.put(&key_of(i), &val_of(m, i, round)).unwrap();
            }
            if round == 0 && i % 4 == 0 {
                victim.put(&key_of(i), &val_of(9, i, 0)).unwrap();
            }
        }
    }
    for i in (0..N_KEYS).step_by(7) {
        maps[0].remove(&key_of(i)).unwrap();
    }
    maps[1].put(b"large-1", &vec![0xa5; 200_000]).unwrap();
    maps[2].put(b"large-2", &vec![0x5a; 140_000]).unwrap();
    maps[2].put(b"", b"the empty key").unwrap();
    assert!(s.drop_map("victim").unwrap());
    s.compact().unwrap();
    for i in 0..N_KEYS / 3 {
        maps[1].put(&key_of(i), &val_of(1, i, 3)).unwrap();
    }
    let r = s.check().unwrap();
    assert!(r.is_ok(), "base store: {r}");
    path
}

/// What the base store holds (as `build_store` wrote it), for the maps that survive.
fn expected(map: usize, i: u32) -> Option<Vec<u8>> {
    match map {
        0 if i % 7 == 0 => None,
        1 if i < N_KEYS / 3 => Some(val_of(1, i, 3)),
        _ => Some(val_of(map, i, 2)),
    }
}

fn verify_contents(path: &Path) {
    let s = Store::open_existing(path).unwrap();
    let mut names = s.maps().unwrap();
    names.sort();
    assert_eq!(names, ["default", "small", "tiny"]);
    for (m, name) in MAP_NAMES.iter().enumerate() {
        let map = s.open_map(name).unwrap();
        for i in 0..N_KEYS {
            assert_eq!(
                map.get(&key_of(i)).unwrap(),
                expected(m, i),
                "{name} key {i}"
            );
        }
    }
    assert_eq!(
        s.open_map("small").unwrap().get(b"large-1").unwrap(),
        Some(vec![0xa5; 200_000])
    );
    let r = s.check().unwrap();
    assert!(r.is_ok(), "{r}");
}

fn describe(r: &Result<Store, Error>) -> String {
    match r {
        Ok(_) => "Ok(store)".into(),
        Err(e) => format!("Err({e:?})"),
    }
}

/// Opens `path` both ways (existing only, and open-or-create), checks that each gives an
/// error `ok` accepts, and that the file was not modified.
fn expect_err(path: &Path, ctx: &str, ok: impl Fn(&Error) -> bool) -> Error {
    let before = fs::read(path).ok();
    let mut first = None;
    for (how, r) in [
        ("open_existing", Store::open_existing(path)),
        ("open", Store::open(path)),
    ] {
        match r {
            Err(e) if ok(&e) => {
                first.get_or_insert(e);
            }
            r => panic!("{ctx}: {how} gave {}, not the expected error", describe(&r)),
        }
    }
    assert_eq!(
        fs::read(path).ok(),
        before,
        "{ctx}: a rejected file was modified"
    );
    first.unwrap()
}

fn expect_not_a_store(path: &Path, ctx: &str) {
    expect_err(path, ctx, |e| matches!(e, Error::NotAStore { .. }));
}

/// `Corrupt` whose message contains one of `words` (and the path, in its Display).
fn expect_corrupt(path: &Path, ctx: &str, words: &[&str]) -> String {
    let e = expect_err(path, ctx, |e| matches!(e, Error::Corrupt { .. }));
    let Error::Corrupt { what, .. } = &e else {
        unreachable!()
    };
    assert!(
        words
            .iter()
            .any(|w| what.to_lowercase().contains(&w.to_lowercase())),
        "{ctx}: Corrupt message {what:?} does not say what ({words:?})"
    );
    assert!(
        e.to_string().contains(&path.display().to_string()),
        "{ctx}: {e} does not name the file"
    );
    what.clone()
}

// ---------------------------------------------------------------------------------------
// Not a store at all
// ---------------------------------------------------------------------------------------

#[test]
fn empty_file_is_not_a_store() {
    let d = tmpdir();
    let p = d.path().join("empty.shoal");
    fs::write(&p, b"").unwrap();
    expect_not_a_store(&p, "empty file");
    assert_eq!(fs::metadata(&p).unwrap().len(), 0);
}

#[test]
fn random_bytes_are_not_a_store() {
    let d = tmpdir();
    for (n, size) in [1usize, 7, 8, 9, 64, 4095, 4096, 4097, 65_536, 1 << 20]
        .into_iter()
        .enumerate()
    {
        let seed = 1000 + n as u64;
        let mut rng = StdRng::seed_from_u64(seed);
        let mut b = vec![0u8; size];
        rng.fill(&mut b[..]);
        let p = d.path().join(format!("random-{size}.bin"));
        fs::write(&p, &b).unwrap();
        expect_not_a_store(&p, &format!("{size} random bytes (seed {seed})"));
        // Random bytes after a good magic: a version above ours or a corrupt header.
        if size >= 16 {
            b[..8].copy_from_slice(MAGIC);
            fs::write(&p, &b).unwrap();
            let v = read_u32(&b, H_VERSION);
            let ctx = format!("magic + {size} random bytes (seed {seed}, version {v})");
            if v > FORMAT_VERSION {
                expect_err(
                    &p,
                    &ctx,
                    |e| matches!(e, Error::VersionMismatch { found, .. } if *found == v),
                );
            } else {
                expect_corrupt(&p, &ctx, &[""]);
            }
            put_u32(&mut b, H_VERSION, FORMAT_VERSION);
            fs::write(&p, &b).unwrap();
            expect_corrupt(
                &p,
                &format!("magic + version + {size} random bytes (seed {seed})"),
                &[""],
            );
        }
    }
}

#[test]
fn wrong_magic_is_not_a_store() {
    let d = tmpdir();
    let base = build_small_store(d.path());
    let good = fs::read(&base).unwrap();
    for i in 0..8 {
        let mut b = good.clone();
        b[i] ^= 0x20;
        let p = d.path().join(format!("magic-{i}.shoal"));
        fs::write(&p, &b).unwrap();
        expect_not_a_store(&p, &format!("magic byte {i} changed"));
    }
    // Text-mode mangling: CR LF turned into LF shifts everything by one byte.
    let mut b = good.clone();
    b.remove(6);
    let p = d.path().join("crlf.shoal");
    fs::write(&p, &b).unwrap();
    expect_not_a_store(&p, "CR LF mangled to LF");
}

/// A small real store (no data), for header tests.
fn build_small_store(dir: &Path) -> PathBuf {
    let p = dir.join("base.shoal");
    let s = Store::open_with(&p, &store_options(false), OpenMode::CreateNew).unwrap();
    s.map("m").unwrap().put(b"k", b"v").unwrap();
    drop(s);
    p
}

// ---------------------------------------------------------------------------------------
// Header fields
// ---------------------------------------------------------------------------------------

#[test]
fn newer_format_version_is_a_version_mismatch() {
    let d = tmpdir();
    let base = build_small_store(d.path());
    let good = fs::read(&base).unwrap();
    for v in [FORMAT_VERSION + 1, FORMAT_VERSION + 100, u32::MAX] {
        let mut b = good.clone();
        put_u32(&mut b, H_VERSION, v);
        let p = d.path().join(format!("v{v}.shoal"));
        fs::write(&p, &b).unwrap();
        let e = expect_err(
            &p,
            &format!("version {v}"),
            |e| matches!(e, Error::VersionMismatch { found, supported, .. } if *found == v && *supported == FORMAT_VERSION),
        );
        let msg = e.to_string();
        assert!(
            msg.contains(&v.to_string()) && msg.contains(&FORMAT_VERSION.to_string()),
            "{msg}"
        );
    }
}

#[test]
fn each_corrupt_header_field_is_named() {
    let d = tmpdir();
    let base = build_small_store(d.path());
    let good = fs::read(&base).unwrap();
    let chunks_off = read_u64(&good, H_CHUNKS_OFF);
    let end = read_u64(&good, H_FILE_END);
    let max = read_u64(&good, H_MAX_SIZE);
    enum W {
        U32(u64, u32),
        U64(u64, u64),
    }
    use W::*;
    let cases: Vec<(&str, W, &[&str])> = vec![
        ("version 0", U32(H_VERSION, 0), &["version"]),
        ("header size 0", U32(H_HEADER_SIZE, 0), &["header size"]),
        (
            "header size 8192",
            U32(H_HEADER_SIZE, 8192),
            &["header size"],
        ),
        ("unknown flag", U64(H_FLAGS, 1 << 63), &["flags"]),
        ("hash algorithm 0", U32(H_HASH, 0), &["hash"]),
        ("hash algorithm 2", U32(H_HASH, 2), &["hash"]),
        ("chunk shift 0", U32(H_CHUNK_SHIFT, 0), &["chunk shift"]),
        ("chunk shift 15", U32(H_CHUNK_SHIFT, 15), &["chunk shift"]),
        ("chunk shift 27", U32(H_CHUNK_SHIFT, 27), &["chunk shift"]),
        ("chunk shift 64", U32(H_CHUNK_SHIFT, 64), &["chunk shift"]),
        (
            "chunk shift max",
            U32(H_CHUNK_SHIFT, u32::MAX),
            &["chunk shift"],
        ),
        ("page shift 13", U32(H_PAGE_SHIFT, 13), &["shift"]),
        ("page shift 0", U32(H_PAGE_SHIFT, 0), &["shift"]),
        ("0 process slots", U32(H_N_PROC, 0), &["table sizes"]),
        (
            "65536 process slots",
            U32(H_N_PROC, 65_536),
            &["table sizes"],
        ),
        ("0 txn slots", U32(H_N_TXN, 0), &["table sizes"]),
        (
            "2^20+1 txn slots",
            U32(H_N_TXN, (1 << 20) + 1),
            &["table sizes"],
        ),
        ("0 catalog entries", U32(H_N_CAT, 0), &["table sizes"]),
        (
            "65537 catalog entries",
            U32(H_N_CAT, 65_537),
            &["table sizes"],
        ),
        (
            "65535 process slots (layout moves)",
            U32(H_N_PROC, 65_535),
            &["table offsets"],
        ),
        (
            "2^20 txn slots (layout moves)",
            U32(H_N_TXN, 1 << 20),
            &["table offsets"],
        ),
        (
            "65536 catalog entries (layout moves)",
            U32(H_N_CAT, 65_536),
            &["table offsets"],
        ),
        ("proc offset 0", U64(H_PROC_OFF, 0), &["table offsets"]),
        (
            "proc offset +4096",
            U64(H_PROC_OFF, 8192),
            &["table offsets"],
        ),
        (
            "txn offset +4096",
            U64(H_TXN_OFF, read_u64(&good, H_TXN_OFF) + 4096),
            &["table offsets"],
        ),
        (
            "catalog offset -8",
            U64(H_CATALOG_OFF, read_u64(&good, H_CATALOG_OFF) - 8),
            &["table offsets"],
        ),
        (
            "chunks offset + chunk",
            U64(H_CHUNKS_OFF, chunks_off + CHUNK),
            &["table offsets"],
        ),
        (
            "chunks offset max",
            U64(H_CHUNKS_OFF, u64::MAX),
            &["table offsets"],
        ),
        ("max size 0", U64(H_MAX_SIZE, 0), &["max size"]),
        ("max size 2^49", U64(H_MAX_SIZE, 1 << 49), &["max size"]),
        ("max size max", U64(H_MAX_SIZE, u64::MAX), &["max size"]),
        (
            "max size below the tables",
            U64(H_MAX_SIZE, chunks_off - 1),
            &["max size"],
        ),
        (
            "max size below the file end",
            U64(H_MAX_SIZE, end - 1),
            &["file end"],
        ),
        ("file end +1", U64(H_FILE_END, end + 1), &["file end"]),
        ("file end 0", U64(H_FILE_END, 0), &["file end"]),
        (
            "file end inside the tables",
            U64(H_FILE_END, chunks_off - CHUNK),
            &["file end"],
        ),
        (
            "file end past max size",
            U64(H_FILE_END, max + CHUNK),
            &["file end"],
        ),
        ("file end max", U64(H_FILE_END, u64::MAX), &["file end"]),
        (
            "file end past the file",
            U64(H_FILE_END, end + 4 * CHUNK),
            &["truncated"],
        ),
    ];
    for (i, (ctx, w, words)) in cases.into_iter().enumerate() {
        let mut b = good.clone();
        match w {
            U32(off, v) => put_u32(&mut b, off, v),
            U64(off, v) => put_u64(&mut b, off, v),
        }
        let p = d.path().join(format!("field-{i}.shoal"));
        fs::write(&p, &b).unwrap();
        let what = expect_corrupt(&p, ctx, words);
        println!("{ctx}: {what}");
    }
    // Fields readers do not validate (seed, creation time) leave a store that opens.
    let mut b = good.clone();
    put_u64(&mut b, 104, 0);
    let p = d.path().join("created.shoal");
    fs::write(&p, &b).unwrap();
    let s = Store::open_existing(&p).unwrap();
    assert_eq!(
        s.open_map("m").unwrap().get(b"k").unwrap().as_deref(),
        Some(&b"v"[..])
    );
}

// ---------------------------------------------------------------------------------------
// Truncation
// ---------------------------------------------------------------------------------------

#[test]
fn truncated_anywhere_is_corrupt_and_says_truncated() {
    let d = tmpdir();
    let base = build_store(d.path(), "base.shoal", false);
    let good = fs::read(&base).unwrap();
    let end = read_u64(&good, H_FILE_END);
    let chunks_off = read_u64(&good, H_CHUNKS_OFF);
    assert_eq!(
        good.len() as u64,
        end,
        "the base store's file is exactly file_end long"
    );
    let mut lens: Vec<u64> = vec![0, 1, 7, 8, 9, 12, 16, 100, 255, 256, 264, 2048, 4095];
    lens.extend([
        HEADER_SIZE,
        HEADER_SIZE + 1,
        read_u64(&good, H_PROC_OFF) + 100,
        read_u64(&good, H_TXN_OFF),
        read_u64(&good, H_TXN_OFF) + 777,
        read_u64(&good, H_CATALOG_OFF),
        read_u64(&good, H_CATALOG_OFF) + 300,
        chunks_off - 1,
        chunks_off,
        chunks_off + 1,
    ]);
    let mut c = chunks_off;
    while c < end {
        lens.extend([c + 128, c + CHUNK / 2, c + CHUNK - 1, c + CHUNK]);
        c += CHUNK;
    }
    lens.retain(|l| *l < end);
    lens.sort();
    lens.dedup();
    let p = d.path().join("truncated.shoal");
    for len in &lens {
        fs::write(&p, &good[..*len as usize]).unwrap();
        let ctx = format!("truncated to {len} of {end} bytes");
        if *len < 8 {
            expect_not_a_store(&p, &ctx);
        } else {
            let what = expect_corrupt(&p, &ctx, &["truncated"]);
            assert!(
                what.contains(&len.to_string()),
                "{ctx}: {what:?} does not give the size"
            );
        }
    }
    println!("{} truncation points, all Corrupt(truncated)", lens.len());
    // The whole file, and the file with bytes past its end, open with every entry.
    fs::write(&p, &good).unwrap();
    verify_contents(&p);
    let mut longer = good.clone();
    longer.extend(vec![0xee; 5000]);
    fs::write(&p, &longer).unwrap();
    verify_contents(&p);
}

// ---------------------------------------------------------------------------------------
// Paths that are not store files
// ---------------------------------------------------------------------------------------

#[test]
fn a_directory_is_refused() {
    let d = tmpdir();
    let dir = d.path().join("a-directory");
    fs::create_dir(&dir).unwrap();
    // A bad argument (every binding says so: SHOAL_INVALID, shoal.InvalidArgument), not
    // an I/O error: opening a directory for writing fails with EISDIR before the
    // regular-file check could run.
    for (how, r) in [
        ("open_existing", Store::open_existing(&dir)),
        ("open", Store::open(&dir)),
        ("repair", Store::repair(&dir).map(|(s, _)| s)),
    ] {
        match r {
            Err(Error::InvalidArgument(m)) => assert!(m.contains("is a directory"), "{m}"),
            r => panic!("{how} on a directory gave {}", describe(&r)),
        }
    }
    assert!(matches!(Store::create(&dir), Err(Error::AlreadyExists(_))));
    assert!(
        fs::read_dir(&dir).unwrap().next().is_none(),
        "something was created inside the directory"
    );
}

#[test]
fn devices_and_fifos_are_refused() {
    let d = tmpdir();
    let fifo = d.path().join("fifo");
    let c = std::ffi::CString::new(fifo.as_os_str().as_encoded_bytes()).unwrap();
    // SAFETY: a valid NUL-terminated path.
    assert_eq!(unsafe { libc::mkfifo(c.as_ptr(), 0o600) }, 0, "mkfifo");
    for p in [fifo.as_path(), Path::new("/dev/null")] {
        match Store::open_existing(p) {
            Err(Error::InvalidArgument(m)) => assert!(m.contains("not a regular file"), "{m}"),
            // Without write permission on /dev/null (unusual), the open itself fails.
            Err(Error::Permission { .. }) if p == Path::new("/dev/null") => {}
            r => panic!("{} gave {}", p.display(), describe(&r)),
        }
    }
}

#[test]
fn a_missing_parent_directory_is_not_found() {
    let d = tmpdir();
    let p = d.path().join("no/such/dir/x.shoal");
    for (how, r) in [
        ("open_existing", Store::open_existing(&p)),
        ("open", Store::open(&p)),
        ("create", Store::create(&p)),
    ] {
        assert!(
            matches!(r, Err(Error::NotFound(_))),
            "{how}: {}",
            describe(&r)
        );
    }
    assert!(!d.path().join("no").exists());
    // And a missing file in an existing directory.
    assert!(matches!(
        Store::open_existing(d.path().join("nope.shoal")),
        Err(Error::NotFound(_))
    ));
}

// ---------------------------------------------------------------------------------------
// Permissions
// ---------------------------------------------------------------------------------------

const PERM_CHILD: &str = "SHOAL_BADFILES_PERM_CHILD";

/// Whether permission bits bind this process (they do not for root / CAP_DAC_OVERRIDE).
fn permission_bits_bind(p: &Path) -> bool {
    fs::File::open(p).is_err()
}

#[test]
fn unreadable_file_is_a_permission_error() {
    if std::env::var_os(PERM_CHILD).is_some() {
        return; // this is the child of `..._as_another_user`: nothing to do here
    }
    let d = tmpdir();
    let p = build_small_store(d.path());
    fs::set_permissions(&p, fs::Permissions::from_mode(0o000)).unwrap();
    if permission_bits_bind(&p) {
        let e = expect_err(&p, "mode 000", |e| matches!(e, Error::Permission { .. }));
        assert!(e.to_string().contains(&p.display().to_string()), "{e}");
        fs::set_permissions(&p, fs::Permissions::from_mode(0o400)).unwrap();
        expect_err(&p, "mode 400 (read only)", |e| {
            matches!(e, Error::Permission { .. })
        });
    } else {
        // Root: mode bits are bypassed, so there is no permission error to see here; the
        // check that one is given runs as another user in
        // `unreadable_file_is_a_permission_error_as_another_user`. What must still hold:
        // the engine does not refuse a file for its mode bits itself, nor alter them.
        println!(
            "running with permission checks bypassed (uid {}): a mode-000 file is readable; \
             checking that it opens intact instead",
            // SAFETY: getuid has no preconditions.
            unsafe { libc::getuid() }
        );
        let s = Store::open_existing(&p).unwrap();
        assert_eq!(
            s.open_map("m").unwrap().get(b"k").unwrap().as_deref(),
            Some(&b"v"[..])
        );
        drop(s);
        assert_eq!(fs::metadata(&p).unwrap().permissions().mode() & 0o777, 0);
    }
}

/// As root, drops to user `nobody` in a child process and checks that a store file it may
/// not write (mode 000 and mode 644 owned by root) gives `Permission`.
#[test]
fn unreadable_file_is_a_permission_error_as_another_user() {
    if let Some(path) = std::env::var_os(PERM_CHILD) {
        // The child: become nobody, then try.
        // SAFETY: plain syscalls; this process is single-purpose (the test harness runs
        // only this test, on one thread).
        let (g, u) = unsafe { (libc::setgid(65534), libc::setuid(65534)) };
        if g != 0 || u != 0 {
            println!(
                "SKIP: cannot switch to uid 65534: {}",
                std::io::Error::last_os_error()
            );
            return;
        }
        let p = PathBuf::from(path);
        assert!(fs::OpenOptions::new()
            .read(true)
            .write(true)
            .open(&p)
            .is_err());
        match Store::open_existing(&p) {
            Err(Error::Permission { path }) => assert_eq!(path, p),
            r => panic!("as uid 65534, {} gave {}", p.display(), describe(&r)),
        }
        println!("PERMISSION-OK");
        return;
    }
    // SAFETY: getuid has no preconditions.
    if unsafe { libc::getuid() } != 0 {
        println!(
            "SKIP: not root, so the plain test `unreadable_file_is_a_permission_error` covers this"
        );
        return;
    }
    let d = tmpdir();
    fs::set_permissions(d.path(), fs::Permissions::from_mode(0o755)).unwrap();
    let p = build_small_store(d.path());
    for mode in [0o000, 0o644] {
        fs::set_permissions(&p, fs::Permissions::from_mode(mode)).unwrap();
        let out = Command::new(std::env::current_exe().unwrap())
            .args([
                "--exact",
                "unreadable_file_is_a_permission_error_as_another_user",
                "--nocapture",
                "--test-threads=1",
            ])
            .env(PERM_CHILD, &p)
            .output()
            .unwrap();
        let text = format!(
            "{}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
        assert!(out.status.success(), "mode {mode:o}: child failed: {text}");
        if text.contains("SKIP:") {
            println!(
                "mode {mode:o}: skipped in the child: {}",
                text.lines().find(|l| l.contains("SKIP:")).unwrap()
            );
            continue;
        }
        assert!(
            text.contains("PERMISSION-OK"),
            "mode {mode:o}: child did not run the check: {text}"
        );
        println!("mode {mode:o}: Permission as uid 65534");
    }
}

// ---------------------------------------------------------------------------------------
// Interior corruption, in child processes
// ---------------------------------------------------------------------------------------

const TRIAL_CHILD: &str = "SHOAL_BADFILES_TRIAL";
const TRIAL_TIMEOUT: Duration = Duration::from_secs(60);

/// One chunk of the base file: (offset, kind, run) as its header says.
fn walk_chunks(b: &[u8]) -> Vec<(u64, u64, u64)> {
    let chunks_off = read_u64(b, H_CHUNKS_OFF);
    let end = read_u64(b, H_FILE_END);
    let mut out = Vec::new();
    let mut c = chunks_off;
    while c < end {
        let (kind, run) = (read_u64(b, c), read_u64(b, c + 8).max(1));
        out.push((c, kind, run));
        c += run * CHUNK;
    }
    out
}

/// Applies the seeded corruption of trial `seed` to `b` (a copy of a base store);
/// returns a description of every change.
fn corrupt(b: &mut [u8], seed: u64) -> Vec<String> {
    let mut rng = StdRng::seed_from_u64(seed);
    let end = read_u64(b, H_FILE_END);
    let chunks = walk_chunks(b);
    let of_kind = |k: &[u64]| -> Vec<(u64, u64)> {
        chunks
            .iter()
            .filter(|c| k.contains(&c.1))
            .map(|c| (c.0, c.0 + c.2 * CHUNK))
            .collect()
    };
    let index = of_kind(&[5]);
    let data = of_kind(&[2, 3, 4]);
    let all: Vec<(u64, u64)> = vec![(read_u64(b, H_CHUNKS_OFF), end)];
    let headers: Vec<(u64, u64)> = chunks.iter().map(|c| (c.0, c.0 + 128)).collect();
    let tables = |off: u64, next: u64| vec![(read_u64(b, off), read_u64(b, next))];
    let catalog = tables(H_CATALOG_OFF, H_CHUNKS_OFF);
    let txns = tables(H_TXN_OFF, H_CATALOG_OFF);
    let procs = tables(H_PROC_OFF, H_TXN_OFF);
    let header = vec![H_MUTABLE];
    type Region<'a> = (&'static str, &'a Vec<(u64, u64)>, u32);
    let regions: [Region; 8] = [
        ("index", &index, 30),
        ("data", &data, 20),
        ("chunk header", &headers, 15),
        ("anywhere in the chunks", &all, 10),
        ("catalog", &catalog, 8),
        ("txn table", &txns, 8),
        ("header words", &header, 6),
        ("process table", &procs, 3),
    ];
    let total: u32 = regions.iter().map(|r| r.2).sum();
    let n = match rng.random_range(0..10) {
        0..=5 => 1,
        6..=8 => rng.random_range(2..=8),
        _ => rng.random_range(9..=64),
    };
    let mut log = Vec::new();
    for _ in 0..n {
        let mut pick = rng.random_range(0..total);
        let (name, ranges) = regions
            .iter()
            .find(|r| {
                if pick < r.2 {
                    true
                } else {
                    pick -= r.2;
                    false
                }
            })
            .map(|r| (r.0, r.1))
            .unwrap();
        if ranges.is_empty() {
            continue;
        }
        let (lo, hi) = ranges[rng.random_range(0..ranges.len())];
        let hi = hi.min(b.len() as u64);
        if hi <= lo + 8 {
            continue;
        }
        let at = rng.random_range(lo..hi - 8) & !7;
        let old = read_u64(b, at);
        let (new, how) = match rng.random_range(0..8) {
            0 => (old ^ (1 << rng.random_range(0..64)), "bit flip"),
            1 => (
                old ^ ((rng.random_range(1..256u64)) << (8 * rng.random_range(0..8))),
                "byte xor",
            ),
            2 => (0, "zero"),
            3 => (u64::MAX, "all ones"),
            4 => (rng.random(), "random"),
            5 => (rng.random_range(0..end + 4 * CHUNK) & !7, "an offset"),
            6 => (old.wrapping_add(rng.random_range(1..=4) * 8), "offset + 8k"),
            _ => (rng.random_range(0..64), "small number"),
        };
        put_u64(b, at, new);
        log.push(format!("{name} word {at:#x}: {old:#x} -> {new:#x} ({how})"));
    }
    log
}

/// Calls everything on a (corrupt) store; every call must return, Ok or Err.
///
/// On a disk store (`SHOAL_TRIAL_UNCLEAN`) fewer writes and no compaction: there every
/// cleaning step flushes, and the point of those trials is the verification on open.
fn exercise(path: &Path) {
    let light = std::env::var_os("SHOAL_TRIAL_UNCLEAN").is_some();
    let writes = if light { 8 } else { 200 };
    let step = |what: &str, r: Result<String, Error>| match r {
        Ok(s) => eprintln!("  {what}: ok {s}"),
        Err(e) => eprintln!("  {what}: error {e}"),
    };
    let opts = Options {
        lock_timeout: Duration::from_millis(300),
        ..Options::default()
    };
    let s = match Store::open_with(path, &opts, OpenMode::Open) {
        Ok(s) => s,
        Err(e) => {
            eprintln!("  open: error {e}");
            return;
        }
    };
    eprintln!("  open: ok");
    step(
        "check",
        s.check().map(|r| format!("{} problems", r.problems.len())),
    );
    step("stats", s.stats().map(|st| format!("{st:?}")));
    let names = s.maps();
    step(
        "maps",
        names.as_ref().map(|n| format!("{n:?}")).map_err(clone_err),
    );
    let mut names = names.unwrap_or_default();
    for n in MAP_NAMES {
        if !names.iter().any(|x| x == n) {
            names.push(n.to_string());
        }
    }
    for (m, name) in names.iter().enumerate() {
        let map = match s.open_map(name) {
            Ok(map) => map,
            Err(e) => {
                eprintln!("  open_map({name:?}): error {e}");
                continue;
            }
        };
        step("len", map.len().map(|n| n.to_string()));
        step(
            "stats",
            map.stats()
                .map(|st| format!("{} entries {} segments", st.entries, st.segments)),
        );
        let mut found = 0;
        let mut buf = Vec::new();
        let mut timeouts = 0;
        for i in (0..N_KEYS).step_by(3) {
            match map.get(&key_of(i)) {
                Ok(Some(_)) => found += 1,
                Err(Error::Timeout(_)) => timeouts += 1,
                _ => {}
            }
            let _ = map.contains(&key_of(i + 1));
            let _ = map.get_into(&key_of(i + 2), &mut buf);
            if timeouts >= 3 {
                // Each call returned (an error after the lock timeout): not a hang, but
                // doing 400 of them would take minutes.
                eprintln!("  {name}: reads time out; skipping the rest");
                break;
            }
        }
        eprintln!("  {name}: {found} of {} sampled keys found", N_KEYS / 3);
        let _ = map.get(b"large-1");
        let _ = map.get(b"");
        let (mut n, mut errs) = (0u64, 0u64);
        for item in map.iter() {
            match item {
                Ok(_) => n += 1,
                Err(_) => errs += 1,
            }
        }
        eprintln!("  iter: {n} items, {errs} errors");
        step("keys", Ok(map.keys().count().to_string()));
        let mut ok = 0;
        for i in 0..writes {
            let k = key_of(i * 5);
            let r = match i % 8 {
                0 => map.put(&k, b"new value").map(|_| ()),
                1 => map.swap(&k, &[7u8; 100]).map(|_| ()),
                2 => map
                    .put_if_absent(format!("fresh-{m}-{i}").as_bytes(), b"x")
                    .map(|_| ()),
                3 => map.put_if_present(&k, b"replaced").map(|_| ()),
                4 => map.remove(&k).map(|_| ()),
                5 => map.take(&k).map(|_| ()),
                6 => map
                    .put(format!("big-{i}").as_bytes(), &vec![1u8; 70_000])
                    .map(|_| ()),
                _ => map
                    .put(format!("fresh-{m}-{i}").as_bytes(), &[i as u8; 33])
                    .map(|_| ()),
            };
            ok += r.is_ok() as u32;
            if matches!(r, Err(Error::Timeout(_))) {
                eprintln!("  {name}: write {i} timed out; skipping the rest");
                break;
            }
        }
        eprintln!("  {name}: {ok} of {writes} writes ok");
        if m == 1 {
            step("clear", map.clear().map(|_| String::new()));
        }
    }
    if !light {
        step("compact", s.compact().map(|n| n.to_string()));
    }
    step(
        "drop_map(default)",
        s.drop_map("default").map(|b| b.to_string()),
    );
    match s.map_with(
        "new",
        &MapOptions {
            segment_buckets: 1,
            stash_buckets: 1,
            uids: false,
            ..Default::default()
        },
        true,
    ) {
        Ok(m) => {
            let mut ok = 0;
            for i in 0..100u32 {
                match m.put(&key_of(i), b"v") {
                    Ok(_) => ok += 1,
                    Err(Error::Timeout(_)) => break,
                    Err(_) => {}
                }
            }
            eprintln!("  new map: {ok} of 100 puts ok");
        }
        Err(e) => eprintln!("  map(new): error {e}"),
    }
    step(
        "check",
        s.check().map(|r| format!("{} problems", r.problems.len())),
    );
}

fn clone_err(e: &Error) -> Error {
    Error::InvalidArgument(e.to_string())
}

/// How a trial corrupts its copy of a base store.
#[derive(Clone, Debug)]
enum Damage {
    /// `corrupt(bytes, seed)`.
    Seed(u64),
    /// Explicit (offset, u64 value) stores.
    Patch(Vec<(u64, u64)>),
}

impl Damage {
    fn apply(&self, b: &mut [u8]) -> Vec<String> {
        match self {
            Damage::Seed(seed) => corrupt(b, *seed),
            Damage::Patch(p) => p
                .iter()
                .map(|(at, v)| {
                    let old = read_u64(b, *at);
                    put_u64(b, *at, *v);
                    format!("word {at:#x}: {old:#x} -> {v:#x}")
                })
                .collect(),
        }
    }

    fn encode(&self) -> String {
        match self {
            Damage::Seed(seed) => format!("seed:{seed}"),
            Damage::Patch(p) => format!(
                "patch:{}",
                p.iter()
                    .map(|(a, v)| format!("{a}={v}"))
                    .collect::<Vec<_>>()
                    .join("+")
            ),
        }
    }

    /// A short name for files of this trial.
    fn file_name(&self) -> String {
        match self {
            Damage::Seed(seed) => format!("seed-{seed}"),
            Damage::Patch(_) => format!(
                "patch-{:016x}",
                shoal::format_hash(0, self.encode().as_bytes())
            ),
        }
    }

    fn decode(s: &str) -> Damage {
        if let Some(seed) = s.strip_prefix("seed:") {
            return Damage::Seed(seed.parse().unwrap());
        }
        let p = s.strip_prefix("patch:").unwrap();
        Damage::Patch(
            p.split('+')
                .map(|kv| {
                    let (a, v) = kv.split_once('=').unwrap();
                    (a.parse().unwrap(), v.parse().unwrap())
                })
                .collect(),
        )
    }
}

/// The child side of a trial: builds its corrupt copy and exercises it.
#[test]
fn interior_corruption_trial_child() {
    let Ok(spec) = std::env::var(TRIAL_CHILD) else {
        return; // only meaningful as a child of the interior corruption tests
    };
    let mut it = spec.splitn(3, ',');
    let (damage, base, out) = (it.next().unwrap(), it.next().unwrap(), it.next().unwrap());
    let mut b = fs::read(base).unwrap();
    for l in Damage::decode(damage).apply(&mut b) {
        eprintln!("corrupt: {l}");
    }
    if let Some(h) = std::env::var_os("SHOAL_TRIAL_UNCLEAN") {
        // A store on disk not closed cleanly: opening it verifies the whole file.
        let _ = h;
        put_u64(&mut b, H_CLEAN, 0);
        eprintln!("corrupt: clean flag cleared (verified on open)");
    }
    fs::write(out, &b).unwrap();
    exercise(Path::new(out));
    eprintln!("TRIAL-DONE");
}

/// Runs one trial in a child process; Err describes a crash, a panic or a hang, with the
/// child's account of what it corrupted and did.
fn run_trial(
    damage: &Damage,
    base: &Path,
    out: &Path,
    unclean: bool,
    timeout: Duration,
) -> Result<(), String> {
    let log = out.with_extension("log");
    let spec = format!("{},{},{}", damage.encode(), base.display(), out.display());
    let logf = fs::File::create(&log).unwrap();
    let mut cmd = Command::new(std::env::current_exe().unwrap());
    cmd.args([
        "--exact",
        "interior_corruption_trial_child",
        "--nocapture",
        "--test-threads=1",
    ])
    .env(TRIAL_CHILD, spec)
    .env("RUST_BACKTRACE", "1")
    .stdin(Stdio::null())
    .stdout(logf.try_clone().unwrap())
    .stderr(logf);
    if unclean {
        cmd.env("SHOAL_TRIAL_UNCLEAN", "1");
    }
    let mut child = cmd.spawn().unwrap();
    let start = Instant::now();
    let status = loop {
        if let Some(st) = child.try_wait().unwrap() {
            break Some(st);
        }
        if start.elapsed() > timeout {
            let _ = child.kill();
            let _ = child.wait();
            break None;
        }
        std::thread::sleep(Duration::from_millis(5));
    };
    let text = fs::read_to_string(&log).unwrap_or_default();
    let _ = fs::remove_file(&log);
    let done = text.contains("TRIAL-DONE");
    let what = match status {
        None => format!("HUNG (no exit within {timeout:?})"),
        Some(st) if st.success() && done => return Ok(()),
        Some(st) => {
            use std::os::unix::process::ExitStatusExt;
            match st.signal() {
                Some(sig) => format!("KILLED BY SIGNAL {sig} ({})", signal_name(sig)),
                None => format!("exited with {st} (a panic?)"),
            }
        }
    };
    // The corruption, the steps, the panic message and the engine's frames.
    let mut lines = Vec::new();
    let mut in_panic = 0u32;
    for l in text.lines() {
        // The harness's "test ... " has no newline before the child's first line.
        let l = l.find("corrupt:").map_or(l, |i| &l[i..]);
        if l.contains("panicked at") {
            in_panic = 2;
        }
        let frame = l.contains("shoal::") && !l.contains("bad_files::");
        if l.starts_with("corrupt:")
            || l.starts_with("  ") && !l.trim_start().starts_with("at ")
            || in_panic > 0
            || frame
        {
            lines.push(l);
        }
        in_panic = in_panic.saturating_sub(1);
    }
    let n = lines.len();
    Err(format!(
        "{what}\n--- child output ---\n{}",
        lines[n.saturating_sub(60)..].join("\n")
    ))
}

fn signal_name(sig: i32) -> &'static str {
    match sig {
        libc::SIGSEGV => "SIGSEGV",
        libc::SIGBUS => "SIGBUS",
        libc::SIGABRT => "SIGABRT",
        libc::SIGKILL => "SIGKILL",
        libc::SIGILL => "SIGILL",
        libc::SIGFPE => "SIGFPE",
        _ => "?",
    }
}

/// The base stores trials start from: plain and checksummed records, on tmpfs; and
/// checksummed on a disk file system, copied there with the clean flag cleared (as after
/// an OS crash), so that opening runs the engine's verification of the whole file.
struct Bases {
    shm: tempfile::TempDir,
    disk: tempfile::TempDir,
    plain: PathBuf,
    crc: PathBuf,
}

impl Bases {
    fn new() -> Bases {
        let shm = tmpdir();
        let disk = tempfile::tempdir().expect("temp dir");
        let plain = build_store(shm.path(), "plain.shoal", false);
        let crc = build_store(shm.path(), "crc.shoal", true);
        Bases {
            shm,
            disk,
            plain,
            crc,
        }
    }

    /// (base, directory for the copy, unclean) of trial `seed`.
    fn for_trial(&self, seed: u64) -> (&Path, &Path, bool) {
        match seed % 8 {
            0 | 2 | 4 | 6 => (&self.plain, self.shm.path(), false),
            1 | 3 | 5 => (&self.crc, self.shm.path(), false),
            _ => (&self.crc, self.disk.path(), true),
        }
    }

    fn run(&self, damage: &Damage, seed: u64, timeout: Duration) -> Result<(), String> {
        let (base, dir, unclean) = self.for_trial(seed);
        let out = dir.join(format!("trial-{}.shoal", damage.file_name()));
        let r = run_trial(damage, base, &out, unclean, timeout);
        let _ = fs::remove_file(&out);
        r.map_err(|why| {
            // Keep the corrupt file as it was before the child touched it.
            let keep = std::env::temp_dir().join("shoal-bad-files");
            let _ = fs::create_dir_all(&keep);
            let mut b = fs::read(base).unwrap();
            damage.apply(&mut b);
            if unclean {
                put_u64(&mut b, H_CLEAN, 0);
            }
            let kept = keep.join(format!("{}.shoal", damage.file_name()));
            let _ = fs::write(&kept, &b);
            format!(
                "trial {damage:?} (base {}{}): {why}\nkept the corrupt file at {} (open it from a {} directory)",
                base.file_name().unwrap().to_string_lossy(),
                if unclean { ", on disk, unclean" } else { "" },
                kept.display(),
                if unclean { "disk" } else { "tmpfs" },
            )
        })
    }
}

#[test]
fn interior_corruption_never_crashes() {
    if std::env::var_os(TRIAL_CHILD).is_some() {
        return;
    }
    if let Ok(f) = std::env::var("SHOAL_CORRUPT_FILE") {
        // Exercise a kept file directly, in this process (for a debugger).
        exercise(Path::new(&f));
        return;
    }
    let bases = Bases::new();
    if let Ok(p) = std::env::var("SHOAL_CORRUPT_PATCH") {
        // "offset=value+offset=value" (decimal) applied to the base of seed 0 (plain).
        let r = bases.run(&Damage::decode(&format!("patch:{p}")), 0, TRIAL_TIMEOUT);
        assert!(r.is_ok(), "{}", r.unwrap_err());
        return;
    }
    if let Some(seed) = std::env::var("SHOAL_CORRUPT_MINIMIZE")
        .ok()
        .and_then(|v| v.parse().ok())
    {
        let p = minimize(&bases, seed);
        println!("minimal damage for seed {seed}: {p:?} (as hex: {:x?})", p);
        return;
    }
    let trials: u64 = std::env::var("SHOAL_CORRUPT_TRIALS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(if cfg!(debug_assertions) { 80 } else { 250 });
    let first: u64 = std::env::var("SHOAL_CORRUPT_FIRST_SEED")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(0xC0FF_EE00);
    let seeds: Vec<u64> = match std::env::var("SHOAL_CORRUPT_SEED")
        .ok()
        .and_then(|v| v.parse().ok())
    {
        Some(s) => vec![s],
        None => (first..first + trials).collect(),
    };
    let workers = std::thread::available_parallelism()
        .map(|n| n.get())
        .unwrap_or(2)
        .clamp(2, 4);
    let next = AtomicU64::new(0);
    let failures = Mutex::new(Vec::new());
    let start = Instant::now();
    std::thread::scope(|sc| {
        for _ in 0..workers {
            sc.spawn(|| loop {
                let i = next.fetch_add(1, Ordering::Relaxed) as usize;
                let Some(&seed) = seeds.get(i) else { break };
                let t0 = Instant::now();
                let r = bases.run(&Damage::Seed(seed), seed, TRIAL_TIMEOUT);
                if std::env::var_os("SHOAL_CORRUPT_TIMES").is_some() {
                    println!("seed {seed} (kind {}): {:?}", seed % 8, t0.elapsed());
                }
                if let Err(why) = r {
                    let msg = format!(
                        "SEED {seed}: {why}\nreproduce: SHOAL_CORRUPT_SEED={seed} cargo test --release -p shoal \
                         --test bad_files interior_corruption_never_crashes -- --nocapture"
                    );
                    eprintln!("{msg}\n");
                    failures.lock().unwrap().push(msg);
                }
            });
        }
    });
    let failures = failures.into_inner().unwrap();
    println!(
        "{} interior corruption trials in {:?}, {} failures",
        seeds.len(),
        start.elapsed(),
        failures.len()
    );
    assert!(
        failures.is_empty(),
        "{} of {} trials failed:\n\n{}",
        failures.len(),
        seeds.len(),
        failures.join("\n\n")
    );
}

/// Delta-debugging: the smallest set of the word changes of trial `seed` that still
/// fails the same way (for turning a failing seed into a regression test).
#[allow(clippy::mut_range_bound)] // `n` changes only right before a `break`
fn minimize(bases: &Bases, seed: u64) -> Vec<(u64, u64)> {
    let (base, ..) = bases.for_trial(seed);
    let orig = fs::read(base).unwrap();
    let mut b = orig.clone();
    Damage::Seed(seed).apply(&mut b);
    let mut patches: Vec<(u64, u64)> = (0..orig.len() as u64 / 8)
        .map(|i| i * 8)
        .filter(|at| read_u64(&orig, *at) != read_u64(&b, *at))
        .map(|at| (at, read_u64(&b, at)))
        .collect();
    // "trial ... (base ...): KILLED BY SIGNAL 7 (SIGBUS)" -> "KILLED BY SIGNAL 7"
    let kind = |e: &str| {
        let l = e.lines().next().unwrap_or("");
        let what = l.rsplit("): ").next().unwrap_or(l);
        what.split(" (").next().unwrap_or(what).to_string()
    };
    let first = bases
        .run(&Damage::Patch(patches.clone()), seed, TRIAL_TIMEOUT)
        .expect_err("the seed's damage does not fail");
    let want = kind(&first);
    println!(
        "seed {seed}: {} words changed; failure: {want}",
        patches.len()
    );
    let fails = |p: &[(u64, u64)]| match bases.run(
        &Damage::Patch(p.to_vec()),
        seed,
        Duration::from_secs(20),
    ) {
        Err(e) => kind(&e) == want,
        Ok(()) => false,
    };
    let mut n = 2;
    while patches.len() >= 2 {
        let size = patches.len().div_ceil(n);
        let mut reduced = false;
        for i in 0..n {
            let rest: Vec<_> = patches
                .iter()
                .enumerate()
                .filter(|(j, _)| j / size != i)
                .map(|(_, p)| *p)
                .collect();
            if rest.len() < patches.len() && fails(&rest) {
                patches = rest;
                n = (n - 1).max(2); // the loop is left right after (break below)
                reduced = true;
                println!("  down to {} words", patches.len());
                break;
            }
        }
        if !reduced {
            if n >= patches.len() {
                break;
            }
            n = (n * 2).min(patches.len());
        }
    }
    patches
}

/// Runs one explicit corruption of the plain base store in a child (regression tests).
fn patched_trial_survives(what: &str, patch: impl FnOnce(&[u8]) -> Vec<(u64, u64)>) {
    thread_local! {
        // Built once per test (each test runs on its own thread; dropped when it ends).
        static BASES: std::cell::OnceCell<Bases> = const { std::cell::OnceCell::new() };
    }
    BASES.with(|bases| {
        let bases = bases.get_or_init(Bases::new);
        let b = fs::read(&bases.plain).unwrap();
        let damage = Damage::Patch(patch(&b));
        if let Err(why) = bases.run(&damage, 0, Duration::from_secs(30)) {
            panic!("{what}: {why}");
        }
    })
}

// ---------------------------------------------------------------------------------------
// Minimised from interior corruption trials
// ---------------------------------------------------------------------------------------

/// Regression (minimised from trial seeds 3237998084 and others): a split that meets a
/// slot pointing at no record of the map fails with Corrupt, and used to leave the new
/// segment's lock and its entry in the thread's held-lock list taken; the ninth such
/// write then panicked with "held list overflow". Every attempt must fail cleanly.
#[test]
fn failed_splits_over_a_corrupt_slot_never_panic() {
    let d = tmpdir();
    let p = d.path().join("split.shoal");
    let s = Store::open_with(&p, &store_options(false), OpenMode::CreateNew).unwrap();
    let m = s
        .map_with(
            "m",
            &MapOptions {
                segment_buckets: 1,
                stash_buckets: 1,
                uids: false,
                ..Default::default()
            },
            true,
        )
        .unwrap();
    // 1 main + 1 stash bucket of 15 slots: 30 keys fill the map's only segment.
    for i in 0..30 {
        m.put(&key_of(i), b"v").unwrap();
    }
    assert_eq!(m.stats().unwrap().segments, 1);
    drop((m, s));
    // Point the segment's first slot at the first chunk's header (not a record of map 0).
    let mut b = fs::read(&p).unwrap();
    let cat = read_u64(&b, H_CATALOG_OFF);
    let hdr = read_u64(&b, cat + 16); // catalog entry 0: map header offset
    let dir = read_u64(&b, hdr) & ((1 << 48) - 1); // root: directory | depth << 48
    let seg = read_u64(&b, dir) & ((1 << 48) - 1); // directory entry 0: segment
    let slot = seg + 128 + 8; // bucket 0 (after the segment's header line), slot 0
    let old = read_u64(&b, slot);
    assert_ne!(old, 0);
    let chunks_off = read_u64(&b, H_CHUNKS_OFF);
    put_u64(&mut b, slot, (old & !((1 << 48) - 1)) | chunks_off);
    fs::write(&p, &b).unwrap();

    let s = Store::open_existing(&p).unwrap();
    let m = s.open_map("m").unwrap();
    for i in 100..120 {
        match m.put(&key_of(i), b"v") {
            Err(Error::Corrupt { what, .. }) => assert!(what.contains("map 0"), "{what}"),
            r => panic!("put #{i} into the full segment gave {r:?}, not Corrupt"),
        }
    }
    // Nothing stayed locked: other keys of the segment can still be replaced and read.
    assert!(m.put_if_present(&key_of(5), b"w").unwrap());
    assert_eq!(m.get(&key_of(5)).unwrap().as_deref(), Some(&b"w"[..]));
    let r = s.check().unwrap();
    assert!(
        r.problems.iter().any(|p| p.contains(&format!("{slot:#x}"))),
        "check does not report the slot: {r}"
    );
}

/// Regression (minimised from trial seed 3237998093): a chunk header whose run length is
/// huge made `check` (and the cleaner's scan) wrap `c + run * chunk` around and walk the
/// file forever (in a debug build: an overflow panic).
#[test]
fn a_huge_chunk_run_does_not_hang_check_or_compact() {
    for run in [u64::MAX, u64::MAX / CHUNK + 1, 1 << 60] {
        patched_trial_survives(&format!("first chunk's run = {run:#x}"), |b| {
            vec![(read_u64(b, H_CHUNKS_OFF) + 8, run)]
        });
    }
}

/// Regression: the cleaner's cursor words in the header (victim chunk, position, next
/// chunk to scan) were used as offsets unchecked; garbage there made `compact` (and any
/// write, which cleans a little) read and write far outside the file.
#[test]
fn garbage_cleaner_cursor_does_not_crash() {
    let (victim, pos, scan) = (288, 296, 304);
    for v in [!7u64, 1 << 47, 0x10_0000_0000, 4096, 8] {
        patched_trial_survives(&format!("clean victim = {v:#x}"), |_| {
            vec![(victim, v), (pos, v.wrapping_add(128))]
        });
    }
    patched_trial_survives("clean position past its victim", |b| {
        let c = read_u64(b, H_CHUNKS_OFF);
        vec![(victim, c), (pos, u64::MAX - 7)]
    });
    patched_trial_survives("clean scan = garbage", |_| vec![(scan, 0xdead_beef_0000)]);
}

/// Regression (minimised from trial seed 3237998165: SIGBUS): a free run whose length
/// reaches past the end of the file was split by the allocator, which then wrote the
/// rest's header beyond the file end.
#[test]
fn a_free_run_past_the_file_end_is_corrupt_not_sigbus() {
    patched_trial_survives(
        "last chunk made a free run of 5 chunks, at the head of the free list",
        |b| {
            let last = read_u64(b, H_FILE_END) - CHUNK;
            vec![(264, last), (last, 1), (last + 8, 5), (last + 16, 0)]
        },
    );
}

/// Regression (minimised from trial seed 3237998246): a txn slot's data chunk and bump
/// pointer live in the file, and a put wrote its record wherever they pointed: a bump of
/// 0 over the file header (which later panicked), a chunk pointer at an index chunk over
/// a map header, one past the file end there (SIGBUS). Corrupted while the store is open
/// (a slot is validated when a thread claims it), the next put must fail with Corrupt and
/// write nothing there, and the store stays readable. In process, not in a child: the
/// check is on the bytes (a crash fails it too).
/// A txn slot whose data chunk's bump lies outside the chunk is reported by `check`. The
/// next thread to claim the slot forgets such a chunk, orphaning it, so a store that
/// `check` called sound was unsound after one put (found by fuzzing: `fuzz/`, open_check).
#[test]
fn a_data_chunk_bump_outside_the_chunk_is_reported() {
    let d = tmpdir();
    let base = build_store(d.path(), "base.shoal", false);
    {
        let s = Store::open_existing(&base).unwrap();
        s.open_map("tiny").unwrap().put(b"first", b"x").unwrap();
        assert!(s.check().unwrap().is_ok());
    }
    let mut bytes = fs::read(&base).unwrap();
    let t = read_u64(&bytes, H_TXN_OFF); // txn slot 0
    let chunk = read_u64(&bytes, t + 16);
    assert_ne!(chunk, 0, "txn slot 0 has no data chunk after a put");
    for bump in [0, chunk + 3 * CHUNK] {
        bytes[(t + 24) as usize..(t + 32) as usize].copy_from_slice(&bump.to_le_bytes());
        let p = d.path().join("bad-bump.shoal");
        fs::write(&p, &bytes).unwrap();
        let s = Store::open_existing(&p).unwrap();
        let r = s.check().unwrap();
        assert!(
            r.problems.iter().any(|p| p.contains("bump")),
            "bump {bump:#x}: not reported: {r}"
        );
    }
}

/// Regression (fuzz, open_check: SIGBUS in `check`): the checker read a slot's record
/// below its chunk's used mark as the file holds it (here the active data chunk's bump,
/// far past the file end), not below the chunk's or the file's end. With checksums it
/// reads the whole record to verify it, so a record header whose value runs past the end
/// of the file sent that read past the file's last page.
#[test]
fn a_used_mark_past_the_file_end_bounds_every_read() {
    let d = tmpdir();
    let base = build_store(d.path(), "base.shoal", true);
    let mut b = fs::read(&base).unwrap();
    let t = read_u64(&b, H_TXN_OFF); // txn slot 0: data chunk at +16, bump at +24
    let chunk = read_u64(&b, t + 16);
    assert_ne!(chunk, 0, "txn slot 0 has no data chunk");
    // The chunk's first record (after its 128-byte header) gets a long header: map 1, a
    // 5-byte key, and a value that ends two pages past the end of the file.
    let first = chunk + 128;
    let mut v = b.len() as u64 + 2 * 4096 - first;
    let mut header = vec![0x01u8, 0x05];
    while v >= 0x80 {
        header.push(0x80 | (v & 0x7f) as u8);
        v >>= 7;
    }
    header.push(v as u8);
    b[first as usize..first as usize + header.len()].copy_from_slice(&header);
    put_u64(&mut b, t + 24, 1 << 40);
    let p = d.path().join("bad-used.shoal");
    fs::write(&p, &b).unwrap();
    let s = Store::open_existing(&p).unwrap();
    let r = s.check().unwrap();
    assert!(
        r.problems.iter().any(|p| p.contains("bump")),
        "the bump past the file end is not reported: {r}"
    );
}

/// Regression (fuzz, open_check: a debug assertion "word ... out of region",
/// a SIGSEGV in release builds): a map header's index arena, spare segment and spare
/// directory come from the file, and writes carve and write segments there. A store whose
/// arena lay past the file checked clean, and the put that took a spare segment crashed.
/// Now `check` reports each of them, and writes fail with Corrupt instead of writing.
#[test]
fn a_map_index_space_outside_its_arena_is_corrupt() {
    const M_ARENA: u64 = 16;
    const M_ARENA_BUMP: u64 = 24;
    const M_SPARE_SEG: u64 = 32;
    let d = tmpdir();
    let base = build_store(d.path(), "base.shoal", false);
    let good = fs::read(&base).unwrap();
    // Map 1 ("small"): catalog entry 1, word 2 is its header.
    let hdr = read_u64(&good, read_u64(&good, H_CATALOG_OFF) + 256 + 16);
    let arena = read_u64(&good, hdr + M_ARENA);
    let far = 0x4000_0000_0001_0000u64;
    // (what, the header words patched, what check must say)
    type Case<'a> = (&'a str, Vec<(u64, u64)>, &'a str);
    let cases: [Case; 4] = [
        (
            "an arena past the file",
            vec![(hdr + M_ARENA, far), (hdr + M_SPARE_SEG, 0)],
            "index arena",
        ),
        (
            "a bump outside the arena",
            vec![(hdr + M_ARENA_BUMP, far), (hdr + M_SPARE_SEG, 0)],
            "bump",
        ),
        (
            "a spare segment past the file",
            vec![(hdr + M_SPARE_SEG, far)],
            "spare segment",
        ),
        (
            "a bump below what the arena holds",
            vec![(hdr + M_ARENA_BUMP, arena + 128)],
            "past its arena's bump",
        ),
    ];
    for (what, patch, says) in cases {
        let mut b = good.clone();
        for (off, v) in patch {
            put_u64(&mut b, off, v);
        }
        let p = d.path().join("bad-arena.shoal");
        fs::write(&p, &b).unwrap();
        let s = Store::open_existing(&p).unwrap();
        let r = s.check().unwrap();
        assert!(
            r.problems.iter().any(|p| p.contains(says)),
            "{what}: check does not say \"{says}\": {r}"
        );
        if says == "past its arena's bump" {
            continue; // in the file: writes would go through, into the map's own space
        }
        // Enough new keys to split the map's segments: the first write that needs the
        // arena or the spare fails, as corrupt, and none crashes.
        let m = s.open_map("small").unwrap();
        let failed = (0..20_000u32).find_map(|i| m.put(format!("new{i}").as_bytes(), b"v").err());
        match failed {
            Some(Error::Corrupt { .. }) => {}
            other => panic!("{what}: 20,000 puts ended with {other:?}, not Corrupt"),
        }
    }
}

/// A txn slot's data chunk pointer near 2^64 (from a damaged file) must not overflow when
/// the dead bytes are computed: `stats` panicked with overflow checks on (found by
/// fuzzing: `fuzz/`, open_check, which builds with debug assertions).
#[test]
fn a_huge_data_chunk_pointer_does_not_overflow_stats() {
    let d = tmpdir();
    let base = build_store(d.path(), "base.shoal", false);
    let mut bytes = fs::read(&base).unwrap();
    let t = read_u64(&bytes, H_TXN_OFF); // txn slot 0
    bytes[(t + 16) as usize..(t + 24) as usize].copy_from_slice(&(u64::MAX - 8).to_le_bytes());
    let p = d.path().join("huge-chunk.shoal");
    fs::write(&p, &bytes).unwrap();
    let s = Store::open_existing(&p).unwrap();
    let st = s.stats().unwrap();
    assert!(st.dead_bytes <= st.data_bytes, "{st:?}");
}

#[test]
fn a_corrupt_data_chunk_pointer_is_never_written_through() {
    use std::os::unix::fs::FileExt;
    let d = tmpdir();
    let base = build_store(d.path(), "base.shoal", false);
    let good = fs::read(&base).unwrap();
    let t = read_u64(&good, H_TXN_OFF); // txn slot 0: the one this thread claims
    let index = walk_chunks(&good).into_iter().find(|c| c.1 == 5).unwrap().0;
    let end = read_u64(&good, H_FILE_END);
    type Case = (
        &'static str,
        fn(u64, u64, u64, u64) -> Vec<(u64, u64)>,
        fn(u64) -> (u64, u64),
    );
    // (what, patches from (slot, its chunk, an index chunk, file end), bytes that must stay)
    let cases: [Case; 4] = [
        ("bump = 0", |t, _, _, _| vec![(t + 24, 0)], |_| (0, 4096)),
        (
            "bump past the chunk",
            |t, c, _, _| vec![(t + 24, c + 3 * CHUNK)],
            |_| (0, 0),
        ),
        (
            "data chunk = an index chunk",
            |t, _, i, _| vec![(t + 16, i), (t + 24, i + 128)],
            |i| (i, i + CHUNK),
        ),
        (
            "data chunk past the file end",
            |t, _, _, e| vec![(t + 16, e + 4 * CHUNK), (t + 24, e + 4 * CHUNK + 128)],
            |_| (0, 0),
        ),
    ];
    for (i, (what, patches, keep)) in cases.into_iter().enumerate() {
        let p = d.path().join(format!("slot-{i}.shoal"));
        fs::write(&p, &good).unwrap();
        let s = Store::open_existing(&p).unwrap();
        let m = s.open_map("tiny").unwrap();
        m.put(b"first", b"claims txn slot 0").unwrap();
        let f = fs::OpenOptions::new()
            .read(true)
            .write(true)
            .open(&p)
            .unwrap();
        let mut w = [0u8; 8];
        f.read_at(&mut w, t + 16).unwrap();
        let chunk = u64::from_le_bytes(w);
        assert_ne!(chunk, 0, "{what}: txn slot 0 has no data chunk after a put");
        for (at, v) in patches(t, chunk, index, end) {
            f.write_at(&v.to_le_bytes(), at).unwrap(); // the shared mapping sees it at once
        }
        let (lo, hi) = keep(index);
        let before = fs::read(&p).unwrap();
        match m.put(b"a new key", b"a new value") {
            Err(Error::Corrupt { what: w, .. }) => assert!(w.contains("txn slot 0"), "{what}: {w}"),
            r => panic!("{what}: put gave {r:?}, not Corrupt"),
        }
        assert_eq!(m.get(&key_of(1)).unwrap(), expected(0, 1), "{what}");
        assert_eq!(
            m.get(b"first").unwrap().as_deref(),
            Some(&b"claims txn slot 0"[..]),
            "{what}"
        );
        let after = fs::read(&p).unwrap();
        assert_eq!(after.len(), before.len(), "{what}: the file grew");
        assert!(
            after[lo as usize..hi as usize] == before[lo as usize..hi as usize],
            "{what}: bytes {lo:#x}..{hi:#x} were written"
        );
    }
}

/// Regression (minimised from trial seeds 3237998366, 3237998376, 3237998329: SIGSEGV,
/// SIGBUS): a lock word naming a txn slot past the table made its waiter "recover" that
/// slot, reading and writing far outside the txn table.
#[test]
fn a_lock_held_by_a_nonexistent_txn_slot_is_corrupt() {
    // The alloc, catalog and cleaner locks (docs/FORMAT.md, "Store header"); the owner
    // field is txn slot + 1.
    for (lock, owner) in [
        (320u64, 4096u64),
        (384, 0x81_0000),
        (448, 0x7fff_ffff),
        (320, 9),
    ] {
        patched_trial_survives(&format!("lock at {lock} owned by {owner:#x}"), |_| {
            vec![(lock, owner)]
        });
    }
}

/// Regression (minimised from trial seed 1000391: a hang): the verification that opening
/// an unclean disk store runs rebuilds the free list from the chunk headers, and a huge
/// run length wrapped `c + run * chunk` around there too.
#[test]
fn a_huge_chunk_run_does_not_hang_the_unclean_open() {
    let bases = Bases::new();
    let b = fs::read(&bases.crc).unwrap();
    let c = read_u64(&b, H_CHUNKS_OFF) + CHUNK;
    for run in [u64::MAX, 1 << 48] {
        // Seed 7 selects the checksummed base, copied to disk, unclean.
        let r = bases.run(
            &Damage::Patch(vec![(c + 8, run)]),
            7,
            Duration::from_secs(30),
        );
        assert!(r.is_ok(), "run {run:#x}: {}", r.unwrap_err());
    }
}

/// Regression (found by the trials in a debug build: overflow panics): a directory depth
/// from the file was used as a shift amount before it was range-checked (the root's
/// global depth in `locate`, an entry's local depth in `iter`).
#[test]
fn garbage_directory_depths_are_corrupt() {
    // Map 0's header: catalog entry 0, word 2. Its root: directory | depth << 48.
    let root_of = |b: &[u8]| read_u64(b, read_u64(b, read_u64(b, H_CATALOG_OFF) + 16));
    for g in [33u64, 64, 0xffff] {
        patched_trial_survives(&format!("root depth {g}"), |b| {
            let hdr = read_u64(b, read_u64(b, H_CATALOG_OFF) + 16);
            vec![(hdr, (root_of(b) & ((1 << 48) - 1)) | g << 48)]
        });
    }
    for d in [33u64, 65, 0xffff] {
        patched_trial_survives(&format!("directory entry 0 depth {d}"), |b| {
            let dir = root_of(b) & ((1 << 48) - 1);
            vec![(dir, (read_u64(b, dir) & ((1 << 48) - 1)) | d << 48)]
        });
    }
}

/// Regression (fuzz, open_check: one 500 KB input took 17 s): a directory whose 2^g
/// entries all name one segment at depth g. Iteration copied that segment once per entry,
/// keeping the keys of one interval each time, and reported nothing. A segment's own depth
/// and prefix must now match the entry that led to it: iteration reports the corruption,
/// having copied the segment at most once. Variable and fixed maps (a fixed map of groups,
/// format version 7, has entries of depth 0: one with a depth is corrupt; see
/// `a_map_of_groups_is_checked_group_by_group` for its own rules).
#[test]
fn a_directory_whose_entries_all_name_one_segment_is_corrupt() {
    let d = tmpdir();
    let p = d.path().join("one-segment.shoal");
    {
        let s = Store::open_with(&p, &store_options(false), OpenMode::CreateNew).unwrap();
        let tiny = MapOptions {
            segment_buckets: 1,
            stash_buckets: 1,
            uids: false,
            ..Default::default()
        };
        let m = s.map_with("v", &tiny, true).unwrap();
        let fixed = FixedOptions {
            segment_buckets: 2,
            stash_buckets: 1,
            ..Default::default()
        };
        let f = s.fixed_map_with("f", 8, 8, &fixed, true).unwrap();
        for i in 0..2000u64 {
            m.put(&i.to_le_bytes(), b"v").unwrap();
            f.put(&i.to_le_bytes(), &i.to_le_bytes()).unwrap();
        }
        assert!(s.check().unwrap().is_ok());
    }
    let mut b = fs::read(&p).unwrap();
    for id in 0..2 {
        // Catalog entry `id`, word 2: the map's header, whose word 0 is its root
        // (directory | global depth << 48).
        let hdr = read_u64(&b, read_u64(&b, H_CATALOG_OFF) + 256 * id + 16);
        let root = read_u64(&b, hdr);
        let (dir, g) = (root & ((1 << 48) - 1), root >> 48);
        assert!(
            g >= 4,
            "map {id}: global depth {g}, too few splits for the test"
        );
        let seg = read_u64(&b, dir) & ((1 << 48) - 1);
        for j in 0..1u64 << g {
            put_u64(&mut b, dir + 8 * j, seg | g << 48);
        }
    }
    fs::write(&p, &b).unwrap();
    let s = Store::open_with(&p, &store_options(false), OpenMode::Open).unwrap();
    let r = s.check().unwrap();
    assert!(
        !r.is_ok(),
        "check passed a directory that names one segment 2^g times"
    );
    let v: Result<Vec<_>, Error> = s.open_map("v").unwrap().iter().collect();
    match v {
        Err(Error::Corrupt { .. }) => {}
        Err(e) => panic!("variable map: iteration failed with {e}, not Corrupt"),
        Ok(items) => panic!(
            "variable map: iteration returned {} items and no error",
            items.len()
        ),
    }
    let f: Result<Vec<_>, Error> = s.fixed_map("f", 8, 8).unwrap().iter().collect();
    match f {
        Err(Error::Corrupt { .. }) => {}
        Err(e) => panic!("fixed map: iteration failed with {e}, not Corrupt"),
        Ok(items) => panic!(
            "fixed map: iteration returned {} items and no error",
            items.len()
        ),
    }
}

/// Regression (found by the trials in a debug build: an overflow panic): freeing a dead
/// large-record run trusted its run length.
#[test]
fn a_huge_large_run_is_not_freed() {
    for run in [u64::MAX, 1 << 50, 1000] {
        patched_trial_survives(&format!("every large run's length = {run:#x}"), |b| {
            walk_chunks(b)
                .into_iter()
                .filter(|c| c.1 == 4)
                .map(|c| (c.0 + 8, run))
                .collect()
        });
    }
}

/// Regression (minimised from trial seed 2000364: SIGSEGV): `clear` (and drops, and
/// `stats`) walk the directory's segments without `locate`'s bounds checks, and locked a
/// segment at whatever offset a corrupt directory entry held.
#[test]
fn a_directory_entry_out_of_the_file_is_corrupt() {
    for seg in [0x7800_0002_3c00u64, 1 << 40, 64, 0x10_0008] {
        patched_trial_survives(
            &format!("every entry of map 1's directory -> {seg:#x}"),
            |b| {
                // Map 1 ("small"): catalog entry 1, word 2 is its header; the root is
                // directory | depth << 48. Entries keep their depth, get the bad segment.
                let hdr = read_u64(b, read_u64(b, H_CATALOG_OFF) + 256 + 16);
                let root = read_u64(b, hdr);
                let (dir, g) = (root & ((1 << 48) - 1), root >> 48);
                (0..1u64 << g)
                    .map(|j| {
                        let e = read_u64(b, dir + 8 * j);
                        (dir + 8 * j, (e & !((1 << 48) - 1)) | seg)
                    })
                    .collect()
            },
        );
    }
}

/// Found by trial seed 2000462 (not an engine change; behaviour pinned): a lock word
/// naming a txn slot that exists but is free is never released, since recovery releases
/// only the locks in a dead slot's held list. Every write that needs the lock fails with
/// Timeout after the lock timeout (it never hangs), and `check` reports the lock.
#[test]
fn a_lock_held_by_a_free_txn_slot_times_out_and_is_reported() {
    let d = tmpdir();
    let p = build_store(d.path(), "stale.shoal", false);
    let mut b = fs::read(&p).unwrap();
    put_u64(&mut b, 320, 8); // the alloc lock, "held" by txn slot 7 (free)
    fs::write(&p, &b).unwrap();
    let opts = Options {
        lock_timeout: Duration::from_millis(200),
        ..Options::default()
    };
    let s = Store::open_with(&p, &opts, OpenMode::Open).unwrap();
    let m = s.open_map("small").unwrap();
    let t0 = Instant::now();
    // A value larger than a chunk needs a run of its own, hence the alloc lock.
    match m.put(b"big", &vec![1u8; 100_000]) {
        Err(Error::Timeout(_)) => {}
        r => panic!("put under a stale alloc lock gave {r:?}"),
    }
    assert!(
        t0.elapsed() < Duration::from_secs(10),
        "took {:?}",
        t0.elapsed()
    );
    assert_eq!(m.get(&key_of(1)).unwrap(), expected(1, 1));
    let r = s.check().unwrap();
    assert!(r.problems.iter().any(|p| p.contains("alloc lock")), "{r}");
}

/// Regression (found by fuzzing, `fuzz/regressions/open_check/`): a map's directory
/// offset that lies in the file but is not 8-aligned made `check` read a misaligned word,
/// and a map header offset near 2^64 overflowed `hdr + M_COUNTERS` (in a release build it
/// wrapped, passed the bounds check and was read: SIGSEGV). Both must be reported as
/// corruption: every call returns, and `check` names the map.
#[test]
fn misaligned_or_overflowing_offsets_are_corrupt() {
    // Map 0 ("tiny"): catalog entry 0, word 2 holds its header offset; the header's first
    // word is its root, directory | depth << 48.
    fn entry(b: &[u8]) -> u64 {
        read_u64(b, H_CATALOG_OFF) + 16
    }
    type Case = (&'static str, fn(&[u8]) -> Vec<(u64, u64)>);
    let cases: [Case; 4] = [
        ("map 0's directory offset + 4", |b| {
            let hdr = read_u64(b, entry(b));
            vec![(hdr, read_u64(b, hdr) + 4)]
        }),
        ("map 0's header offset = 2^64 - 8", |b| {
            vec![(entry(b), u64::MAX - 7)]
        }),
        ("map 0's header offset = 2^64 - 64", |b| {
            vec![(entry(b), u64::MAX - 63)]
        }),
        ("map 0's header offset + 4", |b| {
            vec![(entry(b), read_u64(b, entry(b)) + 4)]
        }),
    ];
    for (what, patch) in cases {
        patched_trial_survives(what, patch);
    }
    // In process too: `check` must say what is wrong (in a release build a misaligned read
    // does not crash, so the trial alone would not catch the first case coming back).
    let d = tmpdir();
    let base = build_store(d.path(), "base.shoal", false);
    let good = fs::read(&base).unwrap();
    for (i, (what, patch)) in cases.iter().enumerate() {
        let mut b = good.clone();
        for (at, v) in patch(&good) {
            put_u64(&mut b, at, v);
        }
        let p = d.path().join(format!("case-{i}.shoal"));
        fs::write(&p, &b).unwrap();
        let s = Store::open_existing(&p).unwrap();
        let r = s.check().unwrap();
        assert!(!r.is_ok(), "{what}: check passed");
        assert!(
            r.problems.iter().any(|p| p.contains("map")),
            "{what}: no problem names a map: {r}"
        );
        // The other maps still read.
        assert_eq!(
            s.open_map("small").unwrap().get(&key_of(1)).unwrap(),
            expected(1, 1)
        );
    }
}

// ---------------------------------------------------------------------------------------
// Dead txns whose intents point outside the file
// ---------------------------------------------------------------------------------------

/// A store with a variable map "v" (tiny segments: several, a doubled directory) and a
/// fixed-size map "f", closed; returns its path.
fn build_intent_store(dir: &Path) -> PathBuf {
    let p = dir.join("intents.shoal");
    let s = Store::open_with(&p, &store_options(false), OpenMode::CreateNew).unwrap();
    let tiny = MapOptions {
        segment_buckets: 1,
        stash_buckets: 1,
        uids: false,
        ..Default::default()
    };
    let v = s.map_with("v", &tiny, true).unwrap();
    let fopts = shoal::FixedOptions {
        segment_buckets: 2,
        stash_buckets: 1,
        ..Default::default()
    };
    let f = s.fixed_map_with("f", 8, 8, &fopts, true).unwrap();
    for i in 0..200u64 {
        v.put(&key_of(i as u32), b"value").unwrap();
        f.put(&i.to_le_bytes(), &i.to_le_bytes()).unwrap();
    }
    drop((v, f, s));
    p
}

/// Writes into txn slot 1 a committed intent of `kind` with `args` (split kinds) or
/// `redo` pairs (kind 1), owned by process slot 1, which no process holds: the slot of a
/// process that died mid-write, whose intent the next opener recovers.
fn plant_dead_intent(b: &mut [u8], kind: u64, args: &[u64], redo: &[(u64, u64)]) {
    let t = read_u64(b, H_TXN_OFF) + 512;
    put_u64(b, t, 1 | 1 << 1 | 7 << 17); // owner: process slot 1, generation 7
    put_u64(b, t + 32, 1); // intent committed
    put_u64(b, t + 40, kind);
    for (i, a) in args.iter().enumerate() {
        put_u64(b, t + 48 + 8 * i as u64, *a);
    }
    put_u64(b, t + 160, redo.len() as u64);
    for (i, (off, val)) in redo.iter().enumerate() {
        put_u64(b, t + 168 + 16 * i as u64, *off);
        put_u64(b, t + 176 + 16 * i as u64, *val);
    }
}

/// Regression (the fuzzer's `open_check` died of a signal in CI, and reading recovery for
/// its cause found these): recovering a dead txn trusted what its slot said. A redo list
/// could move the file end past the file's last page (every later read: SIGBUS), and a
/// split intent's segment offsets and depth were used unchecked (reads and writes far
/// outside the file). Each must make opening fail with `Corrupt` naming the txn slot,
/// and leave the file's data as it was.
#[test]
fn a_dead_txns_intent_outside_the_file_is_corrupt() {
    let d = tmpdir();
    let base = build_intent_store(d.path());
    let good = fs::read(&base).unwrap();
    let size = good.len() as u64;
    let chunks = read_u64(&good, H_CHUNKS_OFF);
    type Case = (&'static str, u64, [u64; 5], Vec<(u64, u64)>);
    let cases: Vec<Case> = vec![
        (
            "redo: file end 16 MiB past the file",
            1,
            [0; 5],
            vec![(H_FILE_END, size + (16 << 20))],
        ),
        (
            "redo: file end not a chunk boundary",
            1,
            [0; 5],
            vec![(H_FILE_END, size + 8)],
        ),
        // args: map id, segment, new segment, depth, phase (1: published).
        (
            "split: segment past the reserved space",
            2,
            [0, 1 << 40, chunks, 0, 1],
            vec![],
        ),
        (
            "split: new segment past the file",
            2,
            [0, chunks, size + CHUNK, 0, 1],
            vec![],
        ),
        (
            "split: depth 70",
            2,
            [0, chunks, chunks + 8192, 70, 1],
            vec![],
        ),
        (
            "fixed split: segment past the file",
            3,
            [1, size + (1 << 20), chunks, 0, 1],
            vec![],
        ),
        (
            "fixed split: depth 64",
            3,
            [1, chunks, chunks + 4096, 64, 1],
            vec![],
        ),
    ];
    for (i, (what, kind, args, redo)) in cases.into_iter().enumerate() {
        let mut b = good.clone();
        plant_dead_intent(&mut b, kind, &args, &redo);
        let p = d.path().join(format!("case-{i}.shoal"));
        fs::write(&p, &b).unwrap();
        match Store::open_existing(&p) {
            Err(Error::Corrupt { what: why, .. }) => assert!(
                why.contains("txn") || why.contains("intent"),
                "{what}: the error does not name the dead txn: {why}"
            ),
            Err(e) => panic!("{what}: {e}, not Corrupt"),
            Ok(s) => panic!("{what}: opened ({:?})", s.check().map(|r| r.to_string())),
        }
        let after = fs::read(&p).unwrap();
        assert_eq!(after.len(), b.len(), "{what}: the file changed size");
        assert!(
            after[chunks as usize..] == b[chunks as usize..],
            "{what}: recovery wrote into the chunks"
        );
    }
}

/// Regression: a catalog entry's map header offset was checked for the header's fixed
/// words only; one a few words before the file end passed, and reading the map's per-txn
/// counters behind it (`len`, `stats`, `check`) went past the file's last page: SIGBUS.
#[test]
fn a_map_header_whose_counters_pass_the_file_end_is_corrupt() {
    let d = tmpdir();
    let base = build_intent_store(d.path());
    let good = fs::read(&base).unwrap();
    let end = read_u64(&good, H_FILE_END);
    assert_eq!(end, good.len() as u64, "the base file ends at its file end");
    // Map 0 ("v"): catalog entry 0, word 2 is its header offset. A copy of its header's
    // fixed words (256 bytes) goes just below the file end, where they look sound.
    let entry = read_u64(&good, H_CATALOG_OFF) + 16;
    let hdr = read_u64(&good, entry);
    let moved = end - 256;
    let mut b = good.clone();
    b.copy_within(hdr as usize..hdr as usize + 256, moved as usize);
    put_u64(&mut b, entry, moved);
    let p = d.path().join("moved-header.shoal");
    fs::write(&p, &b).unwrap();
    let s = Store::open_existing(&p).unwrap();
    match s.open_map("v") {
        Err(Error::Corrupt { what, .. }) => {
            assert!(what.contains("header offset"), "{what}")
        }
        Err(e) => panic!("open_map: {e}, not Corrupt"),
        Ok(m) => panic!("open_map succeeded (len {:?})", m.len()),
    }
    let r = s.check().unwrap();
    assert!(!r.is_ok(), "check passed");
    assert!(s.stats().is_ok(), "stats of the other maps");
    let f = s
        .fixed_map_with("f", 8, 8, &Default::default(), false)
        .unwrap();
    assert_eq!(
        f.get(&5u64.to_le_bytes()).unwrap(),
        Some(5u64.to_le_bytes().to_vec())
    );
}

/// Regression (fuzzing, open_check: "a sound store is unsound after writes"):
/// the cleaner finds a sealed chunk's live records by walking its records from the first,
/// and `check` looked only at the records slots point to. A corrupt header of a *dead*
/// record derailed the walk past live ones, so a store that checked clean lost them to
/// the next compaction. `check` now walks each data chunk as the cleaner does and reports
/// a live record the walk does not reach.
#[test]
fn a_dead_record_that_derails_the_chunk_walk_is_reported() {
    let d = tmpdir();
    let p = d.path().join("walk.shoal");
    {
        let s = Store::open_with(&p, &store_options(false), OpenMode::CreateNew).unwrap();
        let m = s.map("m").unwrap();
        for i in 0..40u32 {
            m.put(format!("walk{i:03}").as_bytes(), &[b'v'; 1000])
                .unwrap();
        }
        // Even keys get a record elsewhere: their first records are dead, between live ones.
        for i in (0..40u32).step_by(2) {
            m.put(format!("walk{i:03}").as_bytes(), &[b'w'; 1001])
                .unwrap();
        }
        // Fill the first data chunk up, so that it is sealed (a cleaning victim).
        for i in 0..80u32 {
            m.put(format!("fill{i:03}").as_bytes(), &[b'f'; 1000])
                .unwrap();
        }
        // And a dead record in the chunk still being filled (the thread's data chunk).
        m.put(b"last000", &[b'l'; 1000]).unwrap();
        m.put(b"last001", &[b'l'; 1000]).unwrap();
        m.put(b"last000", &[b'm'; 1001]).unwrap();
        assert!(s.check().unwrap().is_ok());
    }
    let mut b = fs::read(&p).unwrap();
    // walk000's first record: a 3-byte long header (map 0, key 7, value 1000 as the varint
    // e8 07) before its key. Claim 2024 bytes instead: the walk lands inside walk001's value.
    let at = b
        .windows(7)
        .position(|w| w == b"walk000")
        .expect("walk000's first record");
    assert_eq!(&b[at - 4..at], &[0x00, 7, 0xe8, 0x07], "walk000's header");
    b[at - 1] = 0x0f;
    let sealed_only = b.clone();
    // last000's first record, in the active chunk: claimed longer than the bytes written.
    let at = b
        .windows(7)
        .position(|w| w == b"last000")
        .expect("last000's first record");
    assert_eq!(&b[at - 4..at], &[0x00, 7, 0xe8, 0x07], "last000's header");
    b[at - 1] = 0x0f;
    fs::write(&p, &b).unwrap();
    let s = Store::open_existing(&p).unwrap();
    let r = s.check().unwrap();
    assert!(
        r.problems.iter().any(|q| q.contains("does not reach")),
        "check did not report the unreachable live records: {r}"
    );
    // The active chunk's walk is broken: reported whether or not a live record lies
    // behind the break (no slot would notice a chunk whose records are all dead), before
    // the next put appends one there (the fuzzer's second input).
    assert!(
        r.problems.iter().any(|q| q.contains("do not tile")),
        "check did not report the active chunk's broken walk: {r}"
    );
    // Reads do not walk chunks: the live records still read.
    let m = s.open_map("m").unwrap();
    assert_eq!(m.get(b"walk001").unwrap(), Some(vec![b'v'; 1000]));
    // A sealed chunk may end in bytes the walk stops at (repair seals a chunk torn across
    // a refill so): only its unreachable live records are a problem.
    drop((m, s));
    fs::write(&p, &sealed_only).unwrap();
    let r = Store::open_existing(&p).unwrap().check().unwrap();
    assert!(
        r.problems.iter().any(|q| q.contains("does not reach"))
            && !r.problems.iter().any(|q| q.contains("do not tile")),
        "a sealed chunk's broken walk: {r}"
    );
}

/// A UID entry whose version is marked busy (an in-place write in progress, format
/// version 6) with no writer holding its key's segment: readers by UID report the
/// corruption instead of retrying until the lock timeout, `check` reports it, and repair
/// clears the bit (the key reads again, by UID and by key). On disk, where repair runs,
/// without checksums, so that the store overwrites values in place.
#[test]
fn a_uid_entry_left_busy_is_corrupt_and_repair_clears_it() {
    let d = tempfile::tempdir_in(env!("CARGO_TARGET_TMPDIR")).unwrap();
    let path = d.path().join("busy.shoal");
    let opts = Options {
        checksums: Some(false),
        ..Options::default()
    };
    let uid_opts = MapOptions {
        uids: true,
        ..MapOptions::default()
    };
    let uid = {
        let s = Store::open_with(&path, &opts, OpenMode::CreateNew).unwrap();
        let m = s.map_with("u", &uid_opts, true).unwrap();
        m.put_with_uid(b"other", b"x").unwrap();
        m.put_with_uid(b"busy-key", b"value").unwrap().1
    };
    // The entry's hash word (E_HASH, entry + 16) is the key's XXH3: past the tables
    // (a txn slot may still hold it), that 8-byte value is nowhere else in the file
    // (slots keep 16 bits of it). Its version is the word before.
    let mut b = fs::read(&path).unwrap();
    let word = |at: u64| u64::from_le_bytes(b[at as usize..][..8].try_into().unwrap());
    let (seed, chunks) = (word(H_SEED), word(H_CHUNKS_OFF) as usize);
    let h = shoal::format_hash(seed, b"busy-key").to_le_bytes();
    let at: Vec<usize> = (chunks..b.len() - 8)
        .step_by(8)
        .filter(|&i| b[i..i + 8] == h)
        .collect();
    assert_eq!(at.len(), 1, "the key's hash word at {at:?}");
    let ver = at[0] - 8;
    b[ver + 7] |= 0x80;
    fs::write(&path, &b).unwrap();

    let s = Store::open_with(&path, &opts, OpenMode::Open).unwrap();
    let m = s.map_with("u", &uid_opts, false).unwrap();
    let t = Instant::now();
    match m.get_by_uid(uid) {
        Err(Error::Corrupt { what, .. }) => assert!(what.contains("busy"), "{what}"),
        other => panic!("a busy entry with no writer read as {other:?}"),
    }
    assert!(
        t.elapsed() < Duration::from_secs(4),
        "the reader waited out the lock timeout ({:?})",
        t.elapsed()
    );
    assert_eq!(m.get(b"other").unwrap().as_deref(), Some(&b"x"[..]));
    let r = s.check().unwrap();
    assert!(
        r.problems.iter().any(|v| v.contains("busy")),
        "check missed the busy entry: {r}"
    );
    drop((m, s));

    // Repair works on a store not closed cleanly (as after an OS crash).
    let mut b = fs::read(&path).unwrap();
    put_u64(&mut b, H_CLEAN, 0);
    fs::write(&path, &b).unwrap();
    let (s, rep) = Store::repair(&path).unwrap();
    assert!(!rep.found.is_empty(), "repair found nothing");
    let m = s.map_with("u", &uid_opts, false).unwrap();
    assert_eq!(m.get_by_uid(uid).unwrap(), b"value");
    assert_eq!(m.get(b"busy-key").unwrap().as_deref(), Some(&b"value"[..]));
    let r = s.check().unwrap();
    assert!(r.is_ok(), "{r}");
}

/// A fixed map of groups (format version 7): any set of directory entries may name a
/// segment, so the checker holds it to the rules of moves instead of depths and prefixes:
/// every cell's entry names its segment, each segment's group count is the number of
/// entries naming it, `n_segs` counts the segments, `open_seg` is one of them. Each
/// corruption below is reported by `check`; none makes a read, an iteration or a write
/// panic, and a write that would use a bad open segment fails as Corrupt.
#[test]
fn a_map_of_groups_is_checked_group_by_group() {
    let d = tmpdir();
    let p = d.path().join("groups.shoal");
    {
        let s = Store::open_with(&p, &store_options(false), OpenMode::CreateNew).unwrap();
        let small = FixedOptions {
            segment_buckets: 2,
            stash_buckets: 1,
            ..Default::default()
        };
        let f = s.fixed_map_with("f", 8, 8, &small, true).unwrap();
        for i in 0..2000u64 {
            f.put(&i.to_le_bytes(), &i.to_le_bytes()).unwrap();
        }
        let r = s.check().unwrap();
        assert!(r.is_ok(), "{r}");
    }
    let clean = fs::read(&p).unwrap();
    let hdr = read_u64(&clean, read_u64(&clean, H_CATALOG_OFF) + 16);
    let root = read_u64(&clean, hdr);
    let (dir, g) = (root & ((1 << 48) - 1), root >> 48);
    assert!(g >= 6, "global depth {g}: too few moves for the test");
    let entry = |j: u64| read_u64(&clean, dir + 8 * j);
    let other = (1..1u64 << g)
        .find(|&j| entry(j) != entry(0))
        .expect("two segments");
    type Patch = Box<dyn Fn(&mut Vec<u8>)>;
    let cases: Vec<(&str, Patch, &str)> = vec![
        (
            // (Every entry: with 2-3 keys per group some groups are empty, and two empty
            // groups swapped are no inconsistency.)
            "the entries rotated by one",
            Box::new(move |b: &mut Vec<u8>| {
                let n = 1u64 << g;
                let old: Vec<u64> = (0..n).map(|j| read_u64(b, dir + 8 * j)).collect();
                for j in 0..n {
                    put_u64(b, dir + 8 * j, old[((j + 1) % n) as usize]);
                }
            }),
            "hashes outside its segment",
        ),
        (
            "every entry names the first segment",
            Box::new(move |b: &mut Vec<u8>| {
                let e0 = read_u64(b, dir);
                for j in 0..1u64 << g {
                    put_u64(b, dir + 8 * j, e0);
                }
            }),
            "group count",
        ),
        (
            "a segment count off by one",
            Box::new(move |b: &mut Vec<u8>| {
                let n = read_u64(b, hdr + 104);
                put_u64(b, hdr + 104, n + 1);
            }),
            "segment count",
        ),
        (
            "the open segment outside the map",
            Box::new(move |b: &mut Vec<u8>| put_u64(b, hdr + 96, hdr)),
            "open segment",
        ),
        (
            "a segment without its mark",
            Box::new(move |b: &mut Vec<u8>| {
                let seg = read_u64(b, dir + 8 * other) & ((1 << 48) - 1);
                put_u64(b, seg + 16, 0);
            }),
            "segment mark",
        ),
    ];
    for (what, patch, expect) in cases {
        let mut b = clean.clone();
        patch(&mut b);
        fs::write(&p, &b).unwrap();
        let s = Store::open_with(&p, &store_options(false), OpenMode::Open).unwrap();
        let r = s.check().unwrap();
        assert!(!r.is_ok(), "{what}: check passed");
        let text = r.to_string();
        assert!(
            text.contains(expect),
            "{what}: no problem naming {expect:?}:\n{text}"
        );
        let f = s.fixed_map("f", 8, 8).unwrap();
        for i in 0..2000u64 {
            let _ = f.get(&i.to_le_bytes());
        }
        let _ = f.iter().count();
        let mut failed = None;
        for i in 2000..6000u64 {
            if let Err(e) = f.put(&i.to_le_bytes(), &i.to_le_bytes()) {
                failed = Some(e);
                break;
            }
        }
        if what == "the open segment outside the map" {
            // The map's header lies inside the file, 128-aligned, like a segment (the
            // first version of moves took it and wrote cells over the root): without the
            // map's segment mark it must fail as Corrupt before a cell is written there.
            assert!(
                matches!(failed, Some(Error::Corrupt { .. })),
                "{what}: puts gave {failed:?}"
            );
        }
    }
}

/// Regression: the usual get matched a record's short header and then compared the key
/// whatever the bounds check said (`|`, not `||`), so a slot pointing at the last bytes
/// of the file, where a header of the right form lay, had the key compared past the
/// file's end: SIGBUS in a release build. The get must fail cleanly or miss.
#[test]
fn a_short_record_at_the_file_end_is_not_read_past_it() {
    let d = tmpdir();
    let p = d.path().join("end.shoal");
    let key = vec![b'k'; 40];
    {
        let s = Store::open_with(&p, &store_options(false), OpenMode::CreateNew).unwrap();
        let one = MapOptions {
            segment_buckets: 1,
            stash_buckets: 1,
            uids: false,
            ..Default::default()
        };
        s.map_with("m", &one, true)
            .unwrap()
            .put(&key, b"v")
            .unwrap();
    }
    let mut b = fs::read(&p).unwrap();
    let end = read_u64(&b, H_FILE_END);
    assert_eq!(b.len() as u64, end, "the file is longer than its end");
    let cat = read_u64(&b, H_CATALOG_OFF);
    let hdr = read_u64(&b, cat + 16);
    let dir = read_u64(&b, hdr) & ((1 << 48) - 1);
    let seg = read_u64(&b, dir) & ((1 << 48) - 1);
    let slot = (0..15)
        .map(|i| seg + 128 + 8 + 8 * i)
        .find(|&s| read_u64(&b, s) != 0)
        .expect("the key's slot");
    // A short header for map 0 and a 40-byte key (FORMAT.md, "Records"), 8 bytes before
    // the end: the key it announces would run 34 bytes past it.
    let off = end - 8;
    let klen = key.len() as u8;
    b[off as usize] = 0x80 | klen >> 2;
    b[off as usize + 1] = (klen & 3) << 6 | 1;
    let old = read_u64(&b, slot);
    put_u64(&mut b, slot, (old & !((1 << 48) - 1)) | off);
    fs::write(&p, &b).unwrap();
    let out = Command::new(std::env::current_exe().unwrap())
        .args([
            "--exact",
            "short_record_at_the_end_child",
            "--ignored",
            "--nocapture",
        ])
        .env("SHOAL_END_PATH", &p)
        .output()
        .unwrap();
    let text =
        String::from_utf8_lossy(&out.stdout).to_string() + &String::from_utf8_lossy(&out.stderr);
    assert!(
        out.status.success() && text.contains("1 passed"),
        "the get crashed or failed ({:?}):\n{text}",
        out.status
    );
}

/// The child of `a_short_record_at_the_file_end_is_not_read_past_it`: a crash here is the
/// failure its parent reports.
#[test]
#[ignore = "run by a_short_record_at_the_file_end_is_not_read_past_it"]
fn short_record_at_the_end_child() {
    let p = std::env::var("SHOAL_END_PATH").expect("run by its parent test");
    let s = Store::open_existing(&p).unwrap();
    let m = s.open_map("m").unwrap();
    let r = m.with_timeout(Duration::from_secs(5)).get(&[b'k'; 40]);
    assert!(
        matches!(r, Ok(None) | Err(Error::Corrupt { .. })),
        "get gave {r:?}"
    );
}

/// The header's ordered-area word comes from the file like any other: a value that is no
/// run's must not be followed, not even by the claim of a txn slot (which clears the
/// slot's snapshot pin there), and is reported. (A fuzzed file with it at 0x31 made every
/// write panic on an unaligned word.)
#[test]
fn a_bad_ordered_area_word_is_corrupt_and_never_followed() {
    const H_ORDERED: u64 = 112;
    let d = tmpdir();
    for bad in [0x31u64, 4096, u64::MAX - 7, 1 << 40] {
        let path = d.path().join(format!("o{bad:x}.shoal"));
        {
            let s = Store::open_with(&path, &store_options(false), OpenMode::CreateNew).unwrap();
            s.map("m").unwrap().put(b"k", b"v").unwrap();
        }
        let mut b = std::fs::read(&path).unwrap();
        put_u64(&mut b, H_ORDERED, bad);
        std::fs::write(&path, &b).unwrap();
        let s = Store::open_with(&path, &store_options(false), OpenMode::Open).unwrap();
        // A new thread claims a txn slot: no panic, the hash map works.
        let s2 = s.map("m").unwrap();
        std::thread::spawn(move || s2.put(b"k2", b"v2").unwrap())
            .join()
            .unwrap();
        assert!(
            matches!(s.ordered_map("o"), Err(Error::Corrupt { .. })),
            "{bad:#x}: an ordered map made on a bad area"
        );
        let r = s.check().unwrap();
        assert!(
            r.problems.iter().any(|p| p.contains("ordered area")),
            "{bad:#x}: check says nothing: {r}"
        );
    }
}
