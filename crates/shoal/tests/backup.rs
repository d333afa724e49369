//! `Store::backup_idle` and `shoal backup`: a consistent copy of a store nobody has open,
//! holding every map of every kind, which passes `check`; refused (nothing created)
//! while the store is open here or in another process, or when the target exists.

use shoal::{Error, LogOptions, QueueSetOptions, Store};
use std::path::Path;
use std::process::{Command, Stdio};

fn tmp() -> tempfile::TempDir {
    tempfile::tempdir_in("/dev/shm").unwrap()
}

/// A store with a variable map (some values of two chunks), a fixed map, an ordered map,
/// a log and a queue set with one element moved.
fn build(path: &Path) {
    let s = Store::open(path).unwrap();
    let m = s.map("m").unwrap();
    for i in 0..3000u32 {
        let len = if i % 1000 == 0 {
            600_000
        } else {
            20 + i as usize % 50
        };
        m.put(format!("k{i}").as_bytes(), &vec![i as u8; len])
            .unwrap();
    }
    for i in (0..3000u32).step_by(3) {
        m.remove(format!("k{i}").as_bytes()).unwrap();
    }
    let f = s.fixed_map("f", 8, 8).unwrap();
    for i in 0..500u64 {
        f.put(&i.to_le_bytes(), &(i * 7).to_le_bytes()).unwrap();
    }
    let o = s.ordered_map("o").unwrap();
    for i in 0..400u32 {
        o.put(format!("o{i:05}").as_bytes(), &i.to_le_bytes())
            .unwrap();
    }
    let l = s.log("l", &LogOptions::new(64, 100)).unwrap();
    // A named reader from the start: its position is kept in the store.
    drop(l.reader("r").unwrap());
    for i in 0..10u8 {
        l.append(1, &[i; 5]).unwrap();
    }
    let q = s
        .queue_set("q", &QueueSetOptions::new(16, 4).queue("a"))
        .unwrap();
    let (free, a) = (q.queue("free").unwrap(), q.queue("a").unwrap());
    let mut e = q.pull(free).unwrap().unwrap();
    e.write(0, b"element");
    q.push(a, e).unwrap();
}

/// Everything `build` wrote, read back from the store at `path`.
fn verify(path: &Path) {
    let s = Store::open_existing(path).unwrap();
    let r = s.check().unwrap();
    assert!(r.is_ok(), "{r}");
    let m = s.open_map("m").unwrap();
    for i in 0..3000u32 {
        let got = m.get(format!("k{i}").as_bytes()).unwrap();
        if i % 3 == 0 {
            assert_eq!(got, None, "k{i}");
        } else {
            let len = if i % 1000 == 0 {
                600_000
            } else {
                20 + i as usize % 50
            };
            assert_eq!(got, Some(vec![i as u8; len]), "k{i}");
        }
    }
    let f = s.fixed_map("f", 8, 8).unwrap();
    for i in 0..500u64 {
        assert_eq!(
            f.get(&i.to_le_bytes()).unwrap(),
            Some((i * 7).to_le_bytes().to_vec())
        );
    }
    let o = s.ordered_map("o").unwrap();
    assert_eq!(o.len().unwrap(), 400);
    assert_eq!(
        o.get(b"o00123").unwrap(),
        Some(123u32.to_le_bytes().to_vec())
    );
    let l = s.open_log("l").unwrap();
    let mut rd = l.reader("r").unwrap();
    let mut n = 0u8;
    while let Some(rec) = rd.read().unwrap() {
        assert_eq!(rec.message(), &[n; 5]);
        n += 1;
    }
    assert_eq!(n, 10);
    let q = s.open_queue_set("q").unwrap();
    let a = q.queue("a").unwrap();
    assert_eq!(q.len(a).unwrap(), 1);
    let e = q.pull(a).unwrap().unwrap();
    assert_eq!(&e.to_vec()[..7], b"element");
}

#[test]
fn a_backup_of_an_idle_store_holds_every_kind_and_passes_check() {
    let d = tmp();
    let (src, dst) = (d.path().join("s.shoal"), d.path().join("copy.shoal"));
    build(&src);
    let before = std::fs::read(&src).unwrap();
    let n = Store::backup_idle(&src, &dst).unwrap();
    assert_eq!(n, before.len() as u64);
    assert_eq!(
        std::fs::read(&src).unwrap(),
        before,
        "the source is not changed"
    );
    assert_eq!(
        std::fs::read(&dst).unwrap(),
        before,
        "the copy is byte for byte"
    );
    // A restore is a file copy (taken before `verify` moves the log reader's cursor); the
    // source still opens too.
    let restored = d.path().join("restored.shoal");
    std::fs::copy(&dst, &restored).unwrap();
    verify(&dst);
    verify(&restored);
    verify(&src);
}

#[test]
fn a_backup_is_refused_while_the_store_is_open_and_creates_nothing() {
    let d = tmp();
    let (src, dst) = (d.path().join("s.shoal"), d.path().join("copy.shoal"));
    build(&src);
    {
        let _s = Store::open_existing(&src).unwrap();
        let e = Store::backup_idle(&src, &dst).unwrap_err();
        assert!(matches!(e, Error::TooManyUsers(_)), "{e}");
        assert!(!dst.exists());
    }
    // Open in another process: a child that holds the store until its stdin closes.
    let mut child = Command::new(std::env::current_exe().unwrap())
        .args(["--exact", "hold_store_child", "--nocapture", "--ignored"])
        .env("SHOAL_BACKUP_HOLD", &src)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    let mut out = std::io::BufReader::new(child.stdout.take().unwrap());
    let mut line = String::new();
    loop {
        line.clear();
        let n = std::io::BufRead::read_line(&mut out, &mut line).unwrap();
        assert!(n > 0, "the child exited before opening the store");
        if line.starts_with("open") {
            break;
        }
    }
    let e = Store::backup_idle(&src, &dst).unwrap_err();
    assert!(matches!(e, Error::TooManyUsers(_)), "{e}");
    assert!(!dst.exists());
    drop(child.stdin.take());
    assert!(child.wait().unwrap().success());
    // Closed everywhere: the backup goes through.
    Store::backup_idle(&src, &dst).unwrap();
    verify(&dst);
}

#[test]
#[ignore = "run by a_backup_is_refused_while_the_store_is_open_and_creates_nothing"]
fn hold_store_child() {
    let Some(p) = std::env::var_os("SHOAL_BACKUP_HOLD") else {
        return;
    };
    let s = Store::open_existing(p).unwrap();
    println!("open");
    let mut sink = String::new();
    let _ = std::io::stdin().read_line(&mut sink);
    drop(s);
}

#[test]
fn a_backup_never_overwrites_and_rejects_what_is_not_a_store() {
    let d = tmp();
    let (src, dst) = (d.path().join("s.shoal"), d.path().join("copy.shoal"));
    build(&src);
    std::fs::write(&dst, b"keep me").unwrap();
    let e = Store::backup_idle(&src, &dst).unwrap_err();
    assert!(matches!(e, Error::AlreadyExists(_)), "{e}");
    assert_eq!(std::fs::read(&dst).unwrap(), b"keep me");
    let junk = d.path().join("junk");
    std::fs::write(&junk, vec![7u8; 10_000]).unwrap();
    let other = d.path().join("other.shoal");
    assert!(Store::backup_idle(&junk, &other).is_err());
    assert!(!other.exists());
    let e = Store::backup_idle(d.path().join("missing"), &other).unwrap_err();
    assert!(matches!(e, Error::NotFound(_)), "{e}");
}

#[test]
#[ignore = "run by a_backup_killed_midway_leaves_no_file_and_the_store_usable"]
fn backup_child() {
    let (Some(src), Some(dst)) = (
        std::env::var_os("SHOAL_BACKUP_SRC"),
        std::env::var_os("SHOAL_BACKUP_DST"),
    ) else {
        return;
    };
    println!("start");
    Store::backup_idle(src, dst).unwrap();
    println!("done");
}

#[test]
fn a_backup_killed_midway_leaves_no_file_and_the_store_usable() {
    let d = tmp();
    let (src, dst) = (d.path().join("s.shoal"), d.path().join("copy.shoal"));
    build(&src);
    {
        // 256 MiB of incompressible-enough values, so that a copy takes a while.
        let s = Store::open_existing(&src).unwrap();
        let big = s.map("big").unwrap();
        for i in 0..256u32 {
            let v: Vec<u8> = (0..1 << 20)
                .map(|j: u32| (j ^ i).wrapping_mul(31) as u8)
                .collect();
            big.put(&i.to_le_bytes(), &v).unwrap();
        }
    }
    for delay_ms in [0u64, 5, 20, 60] {
        let mut child = Command::new(std::env::current_exe().unwrap())
            .args(["--exact", "backup_child", "--nocapture", "--ignored"])
            .env("SHOAL_BACKUP_SRC", &src)
            .env("SHOAL_BACKUP_DST", &dst)
            .stdout(Stdio::piped())
            .spawn()
            .unwrap();
        let mut out = std::io::BufReader::new(child.stdout.take().unwrap());
        let mut line = String::new();
        while !line.starts_with("start") {
            line.clear();
            let n = std::io::BufRead::read_line(&mut out, &mut line).unwrap();
            assert!(n > 0, "the backup child exited before starting");
        }
        std::thread::sleep(std::time::Duration::from_millis(delay_ms));
        child.kill().unwrap();
        child.wait().unwrap();
        // Killed before it linked the copy: no file. Killed after: a whole copy.
        if dst.exists() {
            verify(&dst);
            std::fs::remove_file(&dst).unwrap();
        }
        let leftovers: Vec<_> = std::fs::read_dir(d.path())
            .unwrap()
            .map(|e| e.unwrap().file_name())
            .filter(|n| n.to_string_lossy().ends_with(".tmp"))
            .collect();
        assert!(
            leftovers.is_empty(),
            "{leftovers:?} after a kill at {delay_ms} ms"
        );
        // Nothing is left locked: the store opens (no wait on the seize byte) and is sound.
        let s = Store::open_existing(&src).unwrap();
        let r = s.check().unwrap();
        assert!(r.is_ok(), "{r}");
        assert_eq!(
            s.open_map("m").unwrap().get(b"k1").unwrap(),
            Some(vec![1u8; 21])
        );
        drop(s);
    }
    // And a backup now runs to the end.
    Store::backup_idle(&src, &dst).unwrap();
    verify(&dst);
}

/// `Store::backup` on a store open here: the copy holds every kind, passes `check`, and
/// the store goes on.
#[test]
fn a_hot_backup_of_an_open_store_holds_every_kind_and_passes_check() {
    let d = tmp();
    let (src, dst) = (d.path().join("s.shoal"), d.path().join("copy.shoal"));
    build(&src);
    let s = Store::open_existing(&src).unwrap();
    let n = s.backup(&dst).unwrap();
    assert_eq!(n, std::fs::metadata(&src).unwrap().len());
    s.map("m").unwrap().put(b"after", b"x").unwrap();
    verify(&dst);
    let c = Store::open_existing(&dst).unwrap();
    assert_eq!(c.open_map("m").unwrap().get(b"after").unwrap(), None);
    drop(c);
    let e = s.backup(&dst).unwrap_err();
    assert!(matches!(e, Error::AlreadyExists(_)), "{e}");
    // A thread inside its own ordered write transaction cannot wait for itself.
    let o = s.ordered_map("o").unwrap();
    let w = o.write().unwrap();
    let e = s.backup(d.path().join("c2.shoal")).unwrap_err();
    assert!(matches!(e, Error::InvalidArgument(_)), "{e}");
    drop(w);
    s.backup(d.path().join("c2.shoal")).unwrap();
    let leftovers: Vec<_> = std::fs::read_dir("/dev/shm")
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .filter(|n| n.starts_with(".shoal-backup-"))
        .collect();
    // Other tests may run a backup meanwhile: none of ours may be left.
    let ino = std::os::unix::fs::MetadataExt::ino(&std::fs::metadata(&src).unwrap());
    assert!(
        !leftovers.iter().any(|n| n.contains(&format!("-{ino:x}-"))),
        "{leftovers:?}"
    );
}

/// Bank transfers between accounts (two-key transactions on a fixed map, threads of this
/// process) while backups are taken: every copy is one instant's state, so its sum is
/// exact, and it passes `check`; so do variable-map, ordered-map and log writers
/// running at the same time.
#[test]
fn copies_taken_during_transfers_keep_the_sum() {
    use shoal::{Cond, IntCmp, TxnOp};
    use std::sync::atomic::{AtomicBool, Ordering::*};
    use std::sync::Arc;
    const ACCOUNTS: u64 = 2_000;
    const START: i64 = 1_000;
    let d = tmp();
    let src = d.path().join("s.shoal");
    let s = Arc::new(Store::open(&src).unwrap());
    let f = s.fixed_map("acct", 8, 8).unwrap();
    for i in 0..ACCOUNTS {
        f.put(&i.to_le_bytes(), &START.to_le_bytes()).unwrap();
    }
    let stop = Arc::new(AtomicBool::new(false));
    let seed = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_nanos() as u64;
    println!("seed {seed}");
    let mut threads = Vec::new();
    for w in 0..3u64 {
        let (s, stop) = (s.clone(), stop.clone());
        threads.push(std::thread::spawn(move || {
            let f = s.fixed_map("acct", 8, 8).unwrap();
            let mut x = seed ^ (w + 1).wrapping_mul(0x9e37_79b9_7f4a_7c15);
            let mut n = 0u64;
            while !stop.load(Relaxed) || n < 200 {
                x ^= x << 13;
                x ^= x >> 7;
                x ^= x << 17;
                let (a, b) = (x % ACCOUNTS, (x >> 20) % ACCOUNTS);
                if a == b {
                    continue;
                }
                let amt = 1 + (x >> 40) as i64 % 50;
                let (ka, kb) = (a.to_le_bytes(), b.to_le_bytes());
                s.transaction()
                    .when(Cond::int(&f, &ka, IntCmp::Ge, amt))
                    .then(TxnOp::add(&f, &ka, -amt))
                    .then(TxnOp::add(&f, &kb, amt))
                    .commit()
                    .unwrap();
                n += 1;
            }
            n
        }));
    }
    {
        // Writers of the other kinds: their structures must come whole too.
        let (s, stop) = (s.clone(), stop.clone());
        threads.push(std::thread::spawn(move || {
            let m = s.map("var").unwrap();
            let o = s.ordered_map("ord").unwrap();
            let l = s.log("log", &LogOptions::new(64, 256)).unwrap();
            let mut i = 0u64;
            while !stop.load(Relaxed) || i < 200 {
                let k = (i % 3_000).to_le_bytes();
                m.put(&k, &vec![i as u8; 10 + (i % 300) as usize]).unwrap();
                o.put(&k, &i.to_le_bytes()).unwrap();
                l.append(1, &k).unwrap();
                i += 1;
            }
            i
        }));
    }
    for round in 0..6 {
        let dst = d.path().join(format!("copy{round}.shoal"));
        s.backup(&dst).unwrap();
        let c = Store::open_existing(&dst).unwrap();
        let r = c.check().unwrap();
        assert!(r.is_ok(), "seed {seed}, copy {round}: {r}");
        let cf = c.fixed_map("acct", 8, 8).unwrap();
        let mut sum = 0i64;
        for i in 0..ACCOUNTS {
            let v = cf.get(&i.to_le_bytes()).unwrap().expect("account");
            sum += i64::from_le_bytes(v.try_into().unwrap());
        }
        assert_eq!(
            sum,
            ACCOUNTS as i64 * START,
            "seed {seed}: copy {round} is not one instant's state"
        );
        drop(c);
        std::fs::remove_file(&dst).unwrap();
    }
    stop.store(true, Relaxed);
    for t in threads {
        assert!(t.join().unwrap() >= 200);
    }
}

#[cfg(feature = "failpoints")]
#[test]
#[ignore = "run as a child process by a_backup_killed_at_each_fail_point_stops_nobody"]
fn hot_backup_child() {
    let (Ok(src), Ok(dst), Ok(fp)) = (
        std::env::var("SHOAL_BACKUP_SRC"),
        std::env::var("SHOAL_BACKUP_DST"),
        std::env::var("SHOAL_FP"),
    ) else {
        return;
    };
    let (name, hit) = fp.split_once(':').unwrap();
    shoal::failpoints::setup();
    shoal::failpoints::kill_at(name, hit.parse().unwrap()).unwrap();
    let s = Store::open_existing(&src).unwrap();
    s.backup(&dst).unwrap();
    println!("done");
}

/// A backup killed at each of its steps (its epoch preparing, a block's claim by the
/// walk, the walk done): writers of this process, transferring all along, never stop
/// for more than moments; no output appears; the dead epoch is ended; the next backup
/// copies one instant's state (its sum exact) and passes `check`.
#[cfg(feature = "failpoints")]
#[test]
fn a_backup_killed_at_each_fail_point_stops_nobody() {
    use shoal::{Cond, IntCmp, TxnOp};
    use std::sync::atomic::{AtomicBool, AtomicU64, Ordering::*};
    use std::sync::Arc;
    const ACCOUNTS: u64 = 500;
    for name in shoal::failpoints::BACKUP_NAMES {
        let hits: &[u64] = if *name == "backup.claim" {
            &[1, 9, 60]
        } else {
            &[1]
        };
        for &hit in hits {
            let d = tmp();
            let (src, dst) = (d.path().join("s.shoal"), d.path().join("copy.shoal"));
            build(&src);
            let s = Arc::new(Store::open_existing(&src).unwrap());
            let f = s.fixed_map("acct", 8, 8).unwrap();
            for i in 0..ACCOUNTS {
                f.put(&i.to_le_bytes(), &100i64.to_le_bytes()).unwrap();
            }
            let stop = Arc::new(AtomicBool::new(false));
            let done = Arc::new(AtomicU64::new(0));
            let writer = {
                let (s, stop, done) = (s.clone(), stop.clone(), done.clone());
                std::thread::spawn(move || {
                    let f = s.fixed_map("acct", 8, 8).unwrap();
                    let mut i = 0u64;
                    while !stop.load(Relaxed) {
                        let (a, b) = ((i * 7) % ACCOUNTS, (i * 13 + 1) % ACCOUNTS);
                        i += 1;
                        if a == b {
                            continue;
                        }
                        let (ka, kb) = (a.to_le_bytes(), b.to_le_bytes());
                        s.transaction()
                            .when(Cond::int(&f, &ka, IntCmp::Ge, 3))
                            .then(TxnOp::add(&f, &ka, -3))
                            .then(TxnOp::add(&f, &kb, 3))
                            .commit()
                            .unwrap();
                        done.fetch_add(1, Relaxed);
                    }
                })
            };
            let out = Command::new(std::env::current_exe().unwrap())
                .args(["--exact", "hot_backup_child", "--nocapture", "--ignored"])
                .env("SHOAL_BACKUP_SRC", &src)
                .env("SHOAL_BACKUP_DST", &dst)
                .env("SHOAL_FP", format!("{name}:{hit}"))
                .output()
                .unwrap();
            let said = String::from_utf8_lossy(&out.stdout);
            assert!(
                !out.status.success() && !said.contains("done"),
                "{name}:{hit}: the backup was not killed ({})",
                out.status
            );
            assert!(
                !dst.exists(),
                "{name}:{hit}: a killed backup left its output"
            );
            // Writers go on: transfers keep committing after the death.
            let before = done.load(Relaxed);
            let t = std::time::Instant::now();
            while done.load(Relaxed) < before + 1_000 {
                assert!(
                    t.elapsed() < std::time::Duration::from_secs(60),
                    "{name}:{hit}: writers stopped after a backup died"
                );
                std::thread::sleep(std::time::Duration::from_millis(1));
            }
            // The writers end the dead backup's epoch (header word 120) themselves.
            let word120 = || {
                let mut b = [0u8; 8];
                std::os::unix::fs::FileExt::read_exact_at(
                    &std::fs::File::open(&src).unwrap(),
                    &mut b,
                    120,
                )
                .unwrap();
                u64::from_le_bytes(b)
            };
            while word120() != 0 {
                assert!(
                    t.elapsed() < std::time::Duration::from_secs(60),
                    "{name}:{hit}: the dead backup's epoch stayed"
                );
                std::thread::sleep(std::time::Duration::from_millis(1));
            }
            // The next backup makes a whole copy.
            s.backup(&dst).unwrap();
            stop.store(true, Relaxed);
            writer.join().unwrap();
            let c = Store::open_existing(&dst).unwrap();
            let r = c.check().unwrap();
            assert!(r.is_ok(), "{name}:{hit}: {r}");
            let cf = c.fixed_map("acct", 8, 8).unwrap();
            let sum: i64 = (0..ACCOUNTS)
                .map(|i| {
                    let v = cf.get(&i.to_le_bytes()).unwrap().unwrap();
                    i64::from_le_bytes(v.try_into().unwrap())
                })
                .sum();
            assert_eq!(sum, 100 * ACCOUNTS as i64, "{name}:{hit}: a torn copy");
        }
    }
}
