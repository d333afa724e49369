//! Opening a store read-only (`OpenMode::ReadOnly`): reads with no write access to the
//! file, while others write it; every write refused with `Error::ReadOnly`; not a byte of
//! the file changed by the reader.

use shoal::{Error, FixedOptions, MapOptions, OpenMode, Options, Store};
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::Command;

fn tmp() -> tempfile::TempDir {
    tempfile::tempdir_in("/dev/shm").unwrap()
}

fn ro(path: &Path) -> Store {
    Store::open_with(path, &Options::default(), OpenMode::ReadOnly).unwrap()
}

/// A store with a variable map of 2,000 keys (some values of two chunks), a fixed map and
/// a map with UIDs.
fn build(path: &Path) {
    let s = Store::open(path).unwrap();
    let m = s.map("m").unwrap();
    for i in 0..2000u32 {
        let len = if i % 500 == 0 { 600_000 } else { 20 };
        m.put(format!("k{i}").as_bytes(), &vec![i as u8; len])
            .unwrap();
    }
    let f = s.fixed_map("f", 8, 8).unwrap();
    f.put(&7u64.to_le_bytes(), &49u64.to_le_bytes()).unwrap();
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
    u.put(b"a", b"b").unwrap();
}

fn is_read_only<T: std::fmt::Debug>(r: shoal::Result<T>, what: &str) {
    match r {
        Err(Error::ReadOnly { what: why, .. }) => assert!(!why.is_empty()),
        other => panic!("{what}: expected ReadOnly, got {other:?}"),
    }
}

/// Everything a reader can do works, everything that writes is refused, and the file is
/// byte for byte what it was.
fn reads_work_and_writes_are_refused(path: &Path) {
    let before = std::fs::read(path).unwrap();
    let s = ro(path);
    let m = s.open_map("m").unwrap();
    for i in 0..2000u32 {
        let len = if i % 500 == 0 { 600_000 } else { 20 };
        assert_eq!(
            m.get(format!("k{i}").as_bytes()).unwrap(),
            Some(vec![i as u8; len]),
            "k{i}"
        );
    }
    assert_eq!(m.len().unwrap(), 2000);
    assert_eq!(m.iter().count(), 2000);
    assert!(m.iter().all(|e| e.is_ok()));
    let keys: Vec<Vec<u8>> = (0..10u32).map(|i| format!("k{i}").into_bytes()).collect();
    let refs: Vec<&[u8]> = keys.iter().map(|k| &k[..]).collect();
    assert!(m.get_many(&refs).unwrap().iter().all(|v| v.is_some()));
    let f = s.fixed_map_with("f", 8, 8, &FixedOptions::default(), false);
    let f = f.unwrap();
    assert_eq!(
        f.get(&7u64.to_le_bytes()).unwrap(),
        Some(49u64.to_le_bytes().to_vec())
    );
    let u = s.open_map("u").unwrap();
    let uid = u.uid(b"a").unwrap().unwrap();
    assert_eq!(u.get_by_uid(uid).unwrap(), b"b");
    let mut names = s.maps().unwrap();
    names.sort();
    assert_eq!(names, ["f", "m", "u"]);
    assert_eq!(s.stats().unwrap().maps, 3);
    let r = s.check().unwrap();
    assert!(r.is_ok(), "{r}");

    is_read_only(m.put(b"k1", b"x"), "put");
    is_read_only(m.put_if_absent(b"new", b"x"), "insert");
    is_read_only(m.remove(b"k1"), "remove");
    is_read_only(m.add(b"n", 1), "add");
    is_read_only(m.put_many(&[(b"a", b"b")]), "put_many");
    is_read_only(m.clear(), "clear");
    is_read_only(f.add(&7u64.to_le_bytes(), 1), "fixed add");
    is_read_only(f.put(&8u64.to_le_bytes(), &1u64.to_le_bytes()), "fixed put");
    is_read_only(u.put_by_uid(uid, b"c"), "put_by_uid");
    is_read_only(s.map("new map"), "creating a map");
    is_read_only(s.drop_map("m"), "drop_map");
    is_read_only(s.compact(), "compact");
    // Opening a map that exists writes nothing; one that does not is NotFound.
    assert!(matches!(s.open_map("nope"), Err(Error::NotFound(_))));
    drop((m, f, u, s));
    assert!(std::fs::read(path).unwrap() == before, "the file changed");
}

#[test]
fn a_read_only_store_reads_and_refuses_writes() {
    let d = tmp();
    let p = d.path().join("a.shoal");
    build(&p);
    reads_work_and_writes_are_refused(&p);
}

/// A reader sees what writers (here, a read-write handle of the same process) write
/// after it opened, and both handles work side by side.
#[test]
fn a_read_only_store_sees_writes_made_meanwhile() {
    let d = tmp();
    let p = d.path().join("a.shoal");
    build(&p);
    let r = ro(&p);
    let rm = r.open_map("m").unwrap();
    let w = Store::open(&p).unwrap();
    let wm = w.open_map("m").unwrap();
    for i in 0..20_000u32 {
        wm.put(format!("late{i}").as_bytes(), &i.to_le_bytes())
            .unwrap();
    }
    for i in (0..20_000u32).step_by(97) {
        assert_eq!(
            rm.get(format!("late{i}").as_bytes()).unwrap(),
            Some(i.to_le_bytes().to_vec())
        );
    }
    assert_eq!(rm.len().unwrap(), 22_000);
    assert!(r.check().unwrap().is_ok());
}

/// A store on disk that was not closed cleanly, and that nobody has open, must be
/// verified before it is read, which writes: the read-only open refuses it.
#[test]
fn an_unclean_disk_store_is_refused_read_only() {
    let d = tempfile::tempdir().unwrap();
    let p = d.path().join("disk.shoal");
    build(&p);
    let mut b = std::fs::read(&p).unwrap();
    if b[576..584] != 1u64.to_le_bytes() {
        println!("SKIP: {} is not on a disk file system", d.path().display());
        return;
    }
    b[576..584].copy_from_slice(&0u64.to_le_bytes()); // the header's `clean` word
    std::fs::write(&p, &b).unwrap();
    match Store::open_with(&p, &Options::default(), OpenMode::ReadOnly) {
        Err(Error::NeedsRepair { .. }) => {}
        r => panic!("expected NeedsRepair, got {r:?}"),
    }
    assert!(std::fs::read(&p).unwrap() == b, "the file changed");
}

const CHILD: &str = "SHOAL_READ_ONLY_CHILD";

/// As root, drops to user `nobody` in a child process: a store file it may only read
/// (mode 644, owned by root) cannot be opened for writing (Permission), and opens
/// read-only with everything a reader needs.
#[test]
fn a_store_this_user_may_only_read_opens_read_only() {
    if let Some(path) = std::env::var_os(CHILD) {
        // SAFETY: plain syscalls; this child runs only this test, on one thread.
        let (g, u) = unsafe { (libc::setgid(65534), libc::setuid(65534)) };
        if g != 0 || u != 0 {
            println!("SKIP: cannot switch to uid 65534");
            return;
        }
        let p = PathBuf::from(path);
        assert!(matches!(
            Store::open_existing(&p),
            Err(Error::Permission { .. })
        ));
        reads_work_and_writes_are_refused(&p);
        println!("READ-ONLY-OK");
        return;
    }
    // SAFETY: getuid has no preconditions.
    if unsafe { libc::getuid() } != 0 {
        println!("SKIP: not root: cannot run a child as another user");
        return;
    }
    let d = tmp();
    std::fs::set_permissions(d.path(), std::fs::Permissions::from_mode(0o755)).unwrap();
    let p = d.path().join("a.shoal");
    build(&p);
    std::fs::set_permissions(&p, std::fs::Permissions::from_mode(0o644)).unwrap();
    let out = Command::new(std::env::current_exe().unwrap())
        .args([
            "--exact",
            "a_store_this_user_may_only_read_opens_read_only",
            "--nocapture",
            "--test-threads=1",
        ])
        .env(CHILD, &p)
        .output()
        .unwrap();
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(out.status.success(), "child failed: {text}");
    if !text.contains("SKIP:") {
        assert!(text.contains("READ-ONLY-OK"), "child did not run: {text}");
    }
}
