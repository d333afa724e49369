//! The input is a store file. It is written to /dev/shm (a fresh file each time, so
//! each open maps it anew), opened, checked, and read: every map listed, iterated,
//! looked up, counted; if the check passed, also written to. With `SHOAL_FUZZ_DISK=1`,
//! one input in four (by length) is also written to a disk directory
//! (`SHOAL_FUZZ_DISK_DIR`, else the temp directory), where opening runs the verification
//! of an unclean file and, if that refuses it, `Store::repair`, after which the check must
//! pass. (Off by default: each such input costs three fsyncs, which a disk busy with other
//! work can stretch past the per-input timeout.) Whatever the bytes, the engine must return errors: never panic, never crash
//! (SIGSEGV, SIGBUS), never hang (libFuzzer's -timeout).
#![no_main]

use libfuzzer_sys::fuzz_target;
use shoal::{OpenMode, Options, Store};
use std::path::{Path, PathBuf};
use std::sync::OnceLock;
use std::time::Duration;

fn paths() -> &'static (PathBuf, PathBuf) {
    static P: OnceLock<(PathBuf, PathBuf)> = OnceLock::new();
    P.get_or_init(|| {
        let pid = std::process::id();
        let disk = std::env::var_os("SHOAL_FUZZ_DISK_DIR")
            .map(PathBuf::from)
            .unwrap_or_else(std::env::temp_dir);
        (
            PathBuf::from(format!("/dev/shm/shoal-fuzz-open-{pid}.shoal")),
            disk.join(format!("shoal-fuzz-open-{pid}.shoal")),
        )
    })
}

fn disk_mode() -> bool {
    static D: OnceLock<bool> = OnceLock::new();
    *D.get_or_init(|| std::env::var("SHOAL_FUZZ_DISK").is_ok_and(|v| v == "1"))
}

fn opts() -> Options {
    Options {
        lock_timeout: Duration::from_millis(100),
        ..Options::default()
    }
}

/// Reads everything there is to read; writes if `write`.
fn exercise(s: &Store, write: bool) {
    let _ = s.stats();
    let Ok(names) = s.maps() else { return };
    for name in names.iter().take(64) {
        let Ok(m) = s.open_map(name) else { continue };
        let _ = m.len();
        let _ = m.stats();
        let mut keys = Vec::new();
        for item in m.iter().take(10_000) {
            match item {
                Ok((k, _)) => keys.push(k),
                Err(_) => break,
            }
        }
        for k in keys.iter().take(64) {
            let _ = m.get(k);
        }
        let _ = m.get(b"absent key");
        let refs: Vec<&[u8]> = keys.iter().take(40).map(|k| &k[..]).collect();
        let _ = m.get_many(&refs);
        if write {
            let _ = m.put(b"fuzz", b"value");
            let _ = m.put(b"fuzz", &[7u8; 300]);
            if let Some(k) = keys.first() {
                let _ = m.put(k, b"overwritten");
                let _ = m.remove(k);
            }
            let _ = m.remove(b"fuzz");
        }
    }
    for name in s.queue_sets().unwrap_or_default().iter().take(8) {
        let Ok(set) = s.open_queue_set(name) else { continue };
        let _ = set.held();
        let queues: Vec<_> = set
            .queue_names()
            .iter()
            .filter_map(|n| set.queue(n).ok())
            .collect();
        for q in queues.iter().take(8) {
            let _ = set.len(*q);
            let _ = set.stats(*q);
            if write {
                // Pulled elements go back where they came from when dropped.
                if let Ok(got) = set.pull_many(*q, 4) {
                    for e in &got {
                        let _ = e.to_vec();
                    }
                }
            }
        }
        if write && queues.len() > 1 {
            let _ = set.move_to(queues[0], queues[1], 3);
            let _ = set.reclaim();
        }
    }
    for name in s.logs().unwrap_or_default().iter().take(8) {
        let Ok(log) = s.open_log(name) else { continue };
        let _ = log.stats();
        if write {
            if let Ok(mut r) = log.reader("fuzz") {
                for _ in 0..16 {
                    if !matches!(r.read(), Ok(Some(_))) {
                        break;
                    }
                }
            }
            let _ = log.append_timeout(1, b"fuzz", &[(b"k", b"v")], std::time::Duration::ZERO);
        }
    }
    for name in s.ordered_maps().unwrap_or_default().iter().take(8) {
        let Ok(m) = s.ordered_map(name) else { continue };
        let _ = m.len();
        let Ok(snap) = m.snapshot() else { continue };
        let mut keys = Vec::new();
        let _ = snap.for_each(None, None, false, |k, _| {
            keys.push(k.to_vec());
            keys.len() < 10_000
        });
        let _ = snap.for_each(None, None, true, |_, _| true);
        for k in keys.iter().take(64) {
            let _ = snap.get(k);
            let _ = snap.get_all(k);
            let _ = snap.count_values(k);
            let _ = snap.count_range(Some(k), None);
        }
        let _ = snap.range(keys.first().map(|k| &k[..]), keys.last().map(|k| &k[..]));
        drop(snap);
        if write {
            let _ = m.put(b"fuzz", &[7u8; 300]);
            if let Some(k) = keys.first() {
                let _ = m.put(k, b"overwritten");
                let _ = m.remove_value(k, b"overwritten");
                let _ = m.remove(k);
            }
            if let Ok(mut w) = m.write() {
                // 8-byte keys, so that maps of integer keys take them too.
                for i in 0..50u64 {
                    let _ = w.put(&(i << 40).to_le_bytes(), &[1u8; 100]);
                }
                let _ = w.commit();
            }
        }
    }
    if write {
        let _ = s.map("fuzz-new").and_then(|m| m.put(b"k", b"v"));
        let _ = s.ordered_map("fuzz-ordered").and_then(|m| m.put(b"k", b"v"));
        let _ = s.compact();
    }
}

fn one(path: &Path, data: &[u8], disk: bool) {
    let _ = std::fs::remove_file(path);
    if std::fs::write(path, data).is_err() {
        return;
    }
    match Store::open_with(path, &opts(), OpenMode::Open) {
        Ok(s) => {
            let ok = matches!(s.check(), Ok(r) if r.is_ok());
            exercise(&s, ok);
            if ok {
                // Sound before, sound after our writes.
                if let Ok(r) = s.check() {
                    assert!(r.is_ok(), "a sound store is unsound after writes:\n{r}");
                }
            }
        }
        Err(shoal::Error::Corrupt { .. } | shoal::Error::NeedsRepair { .. }) if disk => {
            if let Ok((s, _report)) = Store::repair(path) {
                if let Ok(r) = s.check() {
                    assert!(
                        r.is_ok(),
                        "Store::repair returned a store that fails its check:\n{r}"
                    );
                }
                exercise(&s, true);
            }
        }
        Err(_) => {}
    }
    let _ = std::fs::remove_file(path);
}

fuzz_target!(|data: &[u8]| {
    let (shm, disk) = paths();
    one(shm, data, false);
    if disk_mode() && data.len() % 4 == 1 {
        one(disk, data, true);
    }
});
