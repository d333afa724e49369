//! A store on a filesystem that is full: removing keys must make room again, with or
//! without an explicit `compact`, although the file cannot grow by a single byte.
//!
//! Each test mounts a small tmpfs of its own, which needs root (CAP_SYS_ADMIN); elsewhere
//! it prints why it is skipped and passes.

use shoal::{Error, Store};
use std::path::{Path, PathBuf};

/// A tmpfs of `mib` MiB mounted on a fresh directory, unmounted when dropped.
struct SmallFs {
    dir: tempfile::TempDir,
}

impl SmallFs {
    fn mount(mib: u64) -> Option<SmallFs> {
        let dir = tempfile::Builder::new()
            .prefix("shoal-fullfs-")
            .tempdir()
            .unwrap();
        let out = std::process::Command::new("mount")
            .args(["-t", "tmpfs", "-o", &format!("size={mib}m"), "tmpfs"])
            .arg(dir.path())
            .output();
        match out {
            Ok(o) if o.status.success() => Some(SmallFs { dir }),
            Ok(o) => {
                eprintln!(
                    "SKIPPED: cannot mount a {mib} MiB tmpfs (needs root): {}",
                    String::from_utf8_lossy(&o.stderr).trim()
                );
                None
            }
            Err(e) => {
                eprintln!("SKIPPED: cannot run mount: {e}");
                None
            }
        }
    }

    fn path(&self, name: &str) -> PathBuf {
        self.dir.path().join(name)
    }
}

impl Drop for SmallFs {
    fn drop(&mut self) {
        let _ = std::process::Command::new("umount")
            .arg(self.dir.path())
            .status();
    }
}

fn key(i: u32) -> Vec<u8> {
    format!("key:{i:08}").into_bytes()
}

fn value(i: u32, gen: u8) -> Vec<u8> {
    let mut v = vec![gen; 3000];
    v[..4].copy_from_slice(&i.to_le_bytes());
    v
}

/// Puts 3,000-byte values under new keys from `from` until the filesystem is full;
/// returns the first key that did not fit.
fn fill(m: &shoal::Map, from: u32, gen: u8) -> u32 {
    let mut i = from;
    loop {
        match m.put(&key(i), &value(i, gen)) {
            Ok(_) => i += 1,
            Err(Error::NoSpace { .. }) => return i,
            Err(e) => panic!("put {i}: expected success or NoSpace, got {e}"),
        }
        assert!(i < from + 1_000_000, "the filesystem never filled");
    }
}

/// Fills the store, removes all but one key in `keep_every`, optionally compacts, then
/// puts new keys until full again: at least `min_share` of the removed count must fit,
/// and every key kept must read back whole.
fn removals_make_room(path: &Path, keep_every: u32, compact: bool) {
    let s = Store::open(path).unwrap();
    let m = s.map("m").unwrap();
    let n = fill(&m, 0, 1);
    assert!(n > 1000, "only {n} values before the filesystem filled");
    let mut removed = 0;
    for i in 0..n {
        if i % keep_every != 0 {
            assert!(m.remove(&key(i)).unwrap(), "key {i}");
            removed += 1;
        }
    }
    if compact {
        let freed = s
            .compact()
            .unwrap_or_else(|e| panic!("compact after removing {removed} of {n}: {e}"));
        assert!(
            freed > 0,
            "compact freed no chunk after removing {removed} of {n}"
        );
    }
    let end = fill(&m, n, 2);
    let added = end - n;
    eprintln!("{n} values filled the filesystem; removed {removed}; then {added} new ones fit");
    // Records carry headers and chunks have unfilled tails: most, not all, of the space
    // removed comes back.
    assert!(
        added * 10 >= removed * 7,
        "after removing {removed} of {n} values (compact: {compact}), only {added} new ones fit"
    );
    for i in (0..n).filter(|i| i % keep_every == 0) {
        assert_eq!(m.get(&key(i)).unwrap(), Some(value(i, 1)), "kept key {i}");
    }
    for i in n..end {
        assert_eq!(m.get(&key(i)).unwrap(), Some(value(i, 2)), "new key {i}");
    }
    let r = s.check().unwrap();
    assert!(r.is_ok(), "{r}");
}

#[test]
fn removing_half_then_compacting_makes_room_on_a_full_filesystem() {
    let Some(fs) = SmallFs::mount(8) else { return };
    removals_make_room(&fs.path("a.shoal"), 2, true);
}

#[test]
fn removing_nine_in_ten_then_compacting_makes_room_on_a_full_filesystem() {
    let Some(fs) = SmallFs::mount(8) else { return };
    removals_make_room(&fs.path("a.shoal"), 10, true);
}

/// Without an explicit compact: a put that finds the filesystem full reclaims dead space
/// itself, as it does when the store is at its maximum size.
#[test]
fn puts_after_removals_succeed_on_a_full_filesystem_without_compact() {
    let Some(fs) = SmallFs::mount(8) else { return };
    removals_make_room(&fs.path("a.shoal"), 2, false);
}
