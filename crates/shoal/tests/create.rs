//! Creating a store where the name is taken by something else, or where a creator dies:
//! symbolic links, leftover temporary files, creators killed halfway.

use shoal::{Error, OpenMode, Options, Store};
use std::path::Path;
use std::sync::mpsc;
use std::time::Duration;

fn tmp() -> tempfile::TempDir {
    tempfile::Builder::new()
        .prefix("shoal-create-")
        .tempdir_in("/dev/shm")
        .unwrap()
}

/// The names in `dir`, sorted.
fn names(dir: &Path) -> Vec<String> {
    let mut v: Vec<String> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    v.sort();
    v
}

/// Runs `f` on another thread and fails the test, instead of hanging it, if it does not
/// return within 30 s (the defect this guards against was an endless loop).
fn bounded<T: Send + 'static>(what: &str, f: impl FnOnce() -> T + Send + 'static) -> T {
    let (tx, rx) = mpsc::channel();
    std::thread::spawn(move || {
        let _ = tx.send(f());
    });
    rx.recv_timeout(Duration::from_secs(30))
        .unwrap_or_else(|_| panic!("{what} did not return within 30 s"))
}

/// A dangling symbolic link at a store's path made open-or-create loop for ever (create:
/// the name exists; open: nothing there), leaving a temporary file behind each pass.
#[test]
fn a_dangling_symlink_is_a_clear_error_in_every_mode() {
    let d = tmp();
    let path = d.path().join("x.shoal");
    std::os::unix::fs::symlink(d.path().join("nowhere"), &path).unwrap();
    for mode in [OpenMode::OpenOrCreate, OpenMode::CreateNew] {
        let p = path.clone();
        let r = bounded("open of a dangling symlink", move || {
            Store::open_with(&p, &Options::default(), mode).map(|_| ())
        });
        match r {
            Err(Error::InvalidArgument(m)) => {
                assert!(m.contains("symbolic link") && m.contains("nowhere"), "{m}")
            }
            other => panic!("{mode:?}: expected InvalidArgument, got {other:?}"),
        }
    }
    let p = path.clone();
    let r = bounded("open of a dangling symlink", move || {
        Store::open_existing(&p).map(|_| ())
    });
    assert!(matches!(r, Err(Error::NotFound(_))), "{r:?}");
    // Nothing was created through the link, and nothing was left beside it.
    assert!(!d.path().join("nowhere").exists());
    assert_eq!(names(d.path()), ["x.shoal"]);
}

/// A symbolic link to an existing store is followed: both names open the same store.
#[test]
fn a_symlink_to_a_store_opens_the_store() {
    let d = tmp();
    let real = d.path().join("real.shoal");
    Store::open(&real)
        .unwrap()
        .map("m")
        .unwrap()
        .put(b"k", b"v")
        .unwrap();
    let link = d.path().join("link.shoal");
    std::os::unix::fs::symlink(&real, &link).unwrap();
    let s = Store::open(&link).unwrap();
    assert_eq!(s.open_map("m").unwrap().get(b"k").unwrap().unwrap(), b"v");
}

/// Temporary files of creators that died (a name with a PID that no longer exists, not
/// changed for a minute) are removed by the next creator in the directory; those of a
/// live process, recent ones and other names are left alone.
#[test]
fn stale_temporary_files_are_removed_by_the_next_creator() {
    let d = tmp();
    let mut child = std::process::Command::new("true").spawn().unwrap();
    let dead = child.id();
    child.wait().unwrap();
    let live = std::process::id();
    let hour_ago = std::time::SystemTime::now() - Duration::from_secs(3600);
    let make = |name: &str, old: bool| {
        let f = std::fs::File::create(d.path().join(name)).unwrap();
        if old {
            f.set_modified(hour_ago).unwrap();
        }
    };
    let stale = format!(".s.shoal.{dead}.5ee101b4b82521ac.tmp");
    let recent = format!(".s.shoal.{dead}.1234abcd.tmp");
    let alive = format!(".s.shoal.{live}.99.tmp");
    let other_store = format!(".t.shoal.{dead}.99.tmp");
    let not_ours = format!(".s.shoal.{dead}.notahex.tmp");
    make(&stale, true);
    make(&recent, false);
    make(&alive, true);
    make(&other_store, true);
    make(&not_ours, true);
    Store::create(d.path().join("s.shoal")).unwrap();
    let left = names(d.path());
    assert!(!left.contains(&stale), "{left:?}");
    for kept in [&recent, &alive, &other_store, &not_ours] {
        assert!(left.contains(kept), "{kept} removed: {left:?}");
    }
    assert!(left.contains(&"s.shoal".to_string()));
}

/// A creator killed after writing the new file and before linking it into place leaves
/// no file behind (it was built unnamed), and the next open creates the store.
#[cfg(feature = "failpoints")]
#[test]
fn a_creator_killed_before_linking_leaves_nothing() {
    let d = tmp();
    let path = d.path().join("k.shoal");
    for _ in 0..3 {
        let out = std::process::Command::new(std::env::current_exe().unwrap())
            .args([
                "--exact",
                "killed_creator_child",
                "--ignored",
                "--nocapture",
            ])
            .env("SHOAL_CREATE_PATH", &path)
            .output()
            .unwrap();
        assert!(
            !out.status.success(),
            "the child was to abort at create.written:\n{}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
        assert_eq!(names(d.path()), Vec::<String>::new());
    }
    Store::open(&path).unwrap().map("m").unwrap();
    assert_eq!(names(d.path()), ["k.shoal"]);
}

/// The child of `a_creator_killed_before_linking_leaves_nothing`.
#[cfg(feature = "failpoints")]
#[test]
#[ignore = "run by a_creator_killed_before_linking_leaves_nothing"]
fn killed_creator_child() {
    let path = std::env::var("SHOAL_CREATE_PATH").expect("run by its parent test");
    shoal::failpoints::setup();
    shoal::failpoints::kill_at("create.written", 1).unwrap();
    let _ = Store::open(&path);
    // Reached only if the fail point did not abort: the parent reports it.
}
