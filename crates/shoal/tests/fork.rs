//! `fork()` with a store open: the child gets an identity of its own in the store.
//!
//! What this proves:
//! * a store (and map) opened before `fork()` works in both processes at once: the child
//!   re-registers on first use (it is counted as a second process), its writes (enough to
//!   split segments) are seen by the parent and the parent's by it, and the store checks
//!   clean after the child exits without closing anything (`_exit`);
//! * a forked child SIGKILLed at a random moment while writing the keys the parent is
//!   writing (and while a parent thread keeps writing through the fork) never blocks the
//!   parent: every parent operation returns Ok, any lock the child died holding is
//!   recovered, and the store checks clean;
//! * a grandchild forked by a child, that never touches the store, does not keep the
//!   child alive in the store's eyes once the child is killed (the child's liveness lock
//!   is not inherited), so the child's process slot is reclaimed.
//! * a child, which `fork()` gives no copy of its parent's pretouch thread, starts its
//!   own when it grows the store, and neither process blocks.
//!
//! Children report through their exit status (0 = every operation and check worked).
//! `SHOAL_SEED` repeats a run's random choices.

#![cfg(not(shuttle))]

use shoal::{Map, MapOptions, OpenMode, Options, Store};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Mutex;
use std::time::{Duration, Instant};

/// One fork test at a time in this binary: a fork while another test thread of ours holds
/// a lock we need in the child would deadlock the child.
static SERIAL: Mutex<()> = Mutex::new(());

fn seed() -> u64 {
    let s = match std::env::var("SHOAL_SEED") {
        Ok(s) => s.trim().parse().expect("SHOAL_SEED must be a u64"),
        Err(_) => rand::random(),
    };
    eprintln!("SHOAL_SEED={s}");
    s
}

fn xorshift(s: &mut u64) -> u64 {
    *s ^= *s << 13;
    *s ^= *s >> 7;
    *s ^= *s << 17;
    *s
}

fn open(dir: &tempfile::TempDir) -> (Store, Map) {
    let opts = Options {
        lock_timeout: Duration::from_secs(30),
        chunk_size: 64 * 1024,
        ..Options::default()
    };
    let s = Store::open_with(dir.path().join("f.shoal"), &opts, OpenMode::CreateNew).unwrap();
    let m = s
        .map_with(
            "m",
            &MapOptions {
                segment_buckets: 2,
                stash_buckets: 1,
                uids: false,
                ..Default::default()
            },
            true,
        )
        .unwrap();
    (s, m)
}

fn tmp() -> tempfile::TempDir {
    tempfile::tempdir_in("/dev/shm")
        .or_else(|_| tempfile::tempdir())
        .unwrap()
}

/// Forks; the child runs `f` and `_exit`s with what it returns (101 if it panicked).
fn fork_child(f: impl FnOnce() -> i32) -> libc::pid_t {
    // SAFETY: fork has no preconditions; the child only runs `f` and then `_exit`s
    // (no unwinding into the test harness, no atexit handlers).
    match unsafe { libc::fork() } {
        -1 => panic!("fork: {}", std::io::Error::last_os_error()),
        0 => {
            let code = std::panic::catch_unwind(std::panic::AssertUnwindSafe(f)).unwrap_or(101);
            // SAFETY: ends the child at once.
            unsafe { libc::_exit(code) }
        }
        pid => pid,
    }
}

/// Waits for a child, at most `limit`; returns its wait status. Kills it and panics on
/// timeout.
fn wait_child(pid: libc::pid_t, limit: Duration, seed: u64) -> i32 {
    let start = Instant::now();
    loop {
        let mut st = 0;
        // SAFETY: waiting for our own child.
        let r = unsafe { libc::waitpid(pid, &mut st, libc::WNOHANG) };
        if r == pid {
            return st;
        }
        assert!(
            r == 0,
            "seed {seed}: waitpid: {}",
            std::io::Error::last_os_error()
        );
        if start.elapsed() > limit {
            // SAFETY: killing and reaping our own child.
            unsafe {
                libc::kill(pid, libc::SIGKILL);
                libc::waitpid(pid, &mut st, 0);
            }
            panic!("seed {seed}: child {pid} still running after {limit:?} (blocked?)");
        }
        std::thread::sleep(Duration::from_millis(2));
    }
}

fn pipe() -> (i32, i32) {
    let mut fds = [0; 2];
    // SAFETY: pipe writes two descriptors into the array.
    assert_eq!(unsafe { libc::pipe(fds.as_mut_ptr()) }, 0);
    (fds[0], fds[1])
}

fn write_u64(fd: i32, v: u64) {
    let b = v.to_le_bytes();
    // SAFETY: writing 8 bytes from a live buffer.
    unsafe { libc::write(fd, b.as_ptr() as *const libc::c_void, 8) };
}

/// Reads 8 bytes from a pipe, waiting at most `limit`.
fn read_u64(fd: i32, limit: Duration, seed: u64) -> u64 {
    let mut pfd = libc::pollfd {
        fd,
        events: libc::POLLIN,
        revents: 0,
    };
    // SAFETY: polling one valid descriptor.
    let r = unsafe { libc::poll(&mut pfd, 1, limit.as_millis() as i32) };
    assert!(
        r == 1,
        "seed {seed}: the child said nothing within {limit:?}"
    );
    let mut b = [0u8; 8];
    // SAFETY: reading at most 8 bytes into a live buffer.
    let n = unsafe { libc::read(fd, b.as_mut_ptr() as *mut libc::c_void, 8) };
    assert_eq!(
        n, 8,
        "seed {seed}: the child closed its pipe without reporting (it failed)"
    );
    u64::from_le_bytes(b)
}

fn close(fd: i32) {
    // SAFETY: closing a descriptor we own.
    unsafe { libc::close(fd) };
}

fn exit_code(st: i32) -> Option<i32> {
    libc::WIFEXITED(st).then(|| libc::WEXITSTATUS(st))
}

#[test]
fn child_and_parent_share_a_store_opened_before_fork() {
    let _g = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let seed = seed();
    let d = tmp();
    let (store, map) = open(&d);
    for i in 0..500u32 {
        map.put(
            format!("p:{i}").as_bytes(),
            format!("parent-{i}").as_bytes(),
        )
        .unwrap();
    }
    let child = fork_child(|| {
        // The parent's keys, seen from the child.
        for i in 0..500u32 {
            if map.get(format!("p:{i}").as_bytes()).ok().flatten()
                != Some(format!("parent-{i}").into_bytes())
            {
                return 10;
            }
        }
        for i in 0..3000u32 {
            if map
                .put(format!("c:{i}").as_bytes(), format!("child-{i}").as_bytes())
                .is_err()
            {
                return 11;
            }
        }
        // Registered as a process of its own, next to the parent.
        match store.stats() {
            Ok(s) if s.processes >= 2 => {}
            _ => return 12,
        }
        for i in 0..500u32 {
            let k = format!("p:{i}");
            let ok = if i % 2 == 0 {
                map.put(k.as_bytes(), format!("child-over-{i}").as_bytes())
                    .is_ok()
            } else if i % 3 == 0 {
                matches!(map.remove(k.as_bytes()), Ok(true))
            } else {
                true
            };
            if !ok {
                return 13;
            }
        }
        for i in 0..3000u32 {
            if map.get(format!("c:{i}").as_bytes()).ok().flatten()
                != Some(format!("child-{i}").into_bytes())
            {
                return 14;
            }
        }
        0
    });
    // Meanwhile the parent writes keys of its own.
    for i in 0..3000u32 {
        map.put(
            format!("q:{i}").as_bytes(),
            format!("parent-q-{i}").as_bytes(),
        )
        .unwrap();
    }
    let st = wait_child(child, Duration::from_secs(120), seed);
    assert_eq!(
        exit_code(st),
        Some(0),
        "seed {seed}: child failed (status {st:#x}; 10 parent keys wrong, 11 put failed, 12 not \
         registered as a second process, 13 overwrite/remove failed, 14 own keys wrong, 101 panic)"
    );
    for i in 0..3000u32 {
        assert_eq!(
            map.get(format!("c:{i}").as_bytes()).unwrap(),
            Some(format!("child-{i}").into_bytes()),
            "seed {seed}"
        );
        assert_eq!(
            map.get(format!("q:{i}").as_bytes()).unwrap(),
            Some(format!("parent-q-{i}").into_bytes()),
            "seed {seed}"
        );
    }
    let mut present = 6000;
    for i in 0..500u32 {
        let want = if i % 2 == 0 {
            Some(format!("child-over-{i}"))
        } else if i % 3 == 0 {
            None
        } else {
            Some(format!("parent-{i}"))
        };
        present += want.is_some() as u64;
        assert_eq!(
            map.get(format!("p:{i}").as_bytes()).unwrap(),
            want.map(String::into_bytes),
            "seed {seed}: p:{i}"
        );
    }
    assert_eq!(map.len().unwrap(), present, "seed {seed}");
    let r = store.check().unwrap();
    assert!(r.is_ok(), "seed {seed}: {r}");
    assert_eq!(
        store.stats().unwrap().processes,
        1,
        "seed {seed}: the exited child's process slot was not reclaimed"
    );
    assert!(
        map.stats().unwrap().splits > 10,
        "seed {seed}: expected splits"
    );
}

#[test]
fn killed_child_does_not_block_parent() {
    let _g = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let seed = seed();
    let mut rng = seed | 1;
    let d = tmp();
    let (store, map) = open(&d);
    const KEYS: u64 = 2000;
    // A parent thread writes the children's keys all along, through every fork and kill.
    let stop = AtomicBool::new(false);
    let bg_ops = AtomicU64::new(0);
    std::thread::scope(|sc| {
        let bg = sc.spawn(|| -> Result<u64, String> {
            let mut r = (seed ^ 0x9e37_79b9_7f4a_7c15) | 1;
            let mut n = 0;
            while !stop.load(Ordering::Relaxed) {
                let k = format!("k:{}", xorshift(&mut r) % KEYS);
                let res = if xorshift(&mut r) % 5 == 0 {
                    map.remove(k.as_bytes()).map(|_| ())
                } else {
                    map.put(k.as_bytes(), format!("bg-{n}").as_bytes())
                        .map(|_| ())
                };
                res.map_err(|e| format!("parent thread, op {n} on {k}: {e}"))?;
                n += 1;
                bg_ops.store(n, Ordering::Relaxed);
            }
            Ok(n)
        });
        for round in 0..8u64 {
            let (rd, wr) = pipe();
            let child = fork_child(|| {
                close(rd);
                let mut r = (seed ^ (round + 1).wrapping_mul(0x2545_f491_4f6c_dd1d)) | 1;
                let mut big = vec![0u8; 70_000];
                for n in 0u64.. {
                    let k = format!("k:{}", xorshift(&mut r) % KEYS);
                    let res = match xorshift(&mut r) % 50 {
                        0 => {
                            // Larger than a chunk: kills land in large-record allocation too.
                            big[..8].copy_from_slice(&n.to_le_bytes());
                            map.put(k.as_bytes(), &big).map(|_| ())
                        }
                        1..=9 => map.remove(k.as_bytes()).map(|_| ()),
                        _ => map
                            .put(k.as_bytes(), format!("child-{round}-{n}").as_bytes())
                            .map(|_| ()),
                    };
                    if res.is_err() {
                        return 20;
                    }
                    if n == 300 {
                        write_u64(wr, n);
                    }
                }
                0
            });
            close(wr);
            let _ = read_u64(rd, Duration::from_secs(60), seed);
            close(rd);
            std::thread::sleep(Duration::from_micros(xorshift(&mut rng) % 15_000));
            // SAFETY: killing our own child.
            unsafe { libc::kill(child, libc::SIGKILL) };
            let st = wait_child(child, Duration::from_secs(60), seed);
            assert!(
                libc::WIFSIGNALED(st) && libc::WTERMSIG(st) == libc::SIGKILL,
                "seed {seed}: round {round}: child ended with status {st:#x} before the kill (20 = an operation failed)"
            );
            // The parent goes on: one write to every key, so every segment lock is taken.
            for i in 0..KEYS {
                map.put(
                    format!("k:{i}").as_bytes(),
                    format!("round-{round}").as_bytes(),
                )
                .unwrap_or_else(|e| panic!("seed {seed}: round {round}: parent put k:{i}: {e}"));
            }
        }
        // Let the parent thread do some work however the two cores were shared.
        let start = Instant::now();
        while bg_ops.load(Ordering::Relaxed) == 0 && start.elapsed() < Duration::from_secs(30) {
            std::thread::sleep(Duration::from_millis(1));
        }
        stop.store(true, Ordering::Relaxed);
        let n = bg
            .join()
            .unwrap()
            .unwrap_or_else(|e| panic!("seed {seed}: {e}"));
        assert!(n > 0, "seed {seed}: the parent thread did nothing");
    });
    for i in 0..KEYS {
        map.put(format!("k:{i}").as_bytes(), format!("final-{i}").as_bytes())
            .unwrap();
    }
    for i in 0..KEYS {
        assert_eq!(
            map.get(format!("k:{i}").as_bytes()).unwrap(),
            Some(format!("final-{i}").into_bytes()),
            "seed {seed}"
        );
    }
    let len = map.len().unwrap();
    let r = store.check().unwrap();
    assert!(
        r.is_ok(),
        "seed {seed}: after 8 killed children (len {len}): {r}"
    );
    assert_eq!(len, KEYS, "seed {seed}: len() after 8 killed children");
    assert_eq!(
        store.stats().unwrap().processes,
        1,
        "seed {seed}: killed children's slots not reclaimed"
    );
}

/// Kills a process (not our child, so not reaped by us) when dropped.
struct KillOnDrop(libc::pid_t);
impl Drop for KillOnDrop {
    fn drop(&mut self) {
        if self.0 > 0 {
            // SAFETY: sending a signal to a pid we were told about.
            unsafe { libc::kill(self.0, libc::SIGKILL) };
        }
    }
}

#[test]
fn grandchild_does_not_keep_a_dead_child_alive() {
    let _g = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let seed = seed();
    let d = tmp();
    let (store, map) = open(&d);
    let (rd, wr) = pipe();
    let child = fork_child(|| {
        close(rd);
        if map.put(b"a:first", b"1").is_err() {
            return 30;
        }
        // A grandchild that inherits every descriptor and never touches the store.
        // SAFETY: fork in the (single-threaded) child; the grandchild only pauses.
        let g = unsafe { libc::fork() };
        if g == 0 {
            loop {
                // SAFETY: waits for a signal; the parent test SIGKILLs us.
                unsafe { libc::pause() };
            }
        }
        if g < 0 {
            return 31;
        }
        write_u64(wr, g as u64);
        for n in 0u64.. {
            if map
                .put(
                    format!("a:{}", n % 500).as_bytes(),
                    format!("child-{n}").as_bytes(),
                )
                .is_err()
            {
                return 32;
            }
        }
        0
    });
    close(wr);
    let grandchild = KillOnDrop(read_u64(rd, Duration::from_secs(60), seed) as libc::pid_t);
    close(rd);
    std::thread::sleep(Duration::from_millis(5));
    // SAFETY: killing our own child.
    unsafe { libc::kill(child, libc::SIGKILL) };
    let st = wait_child(child, Duration::from_secs(60), seed);
    assert!(
        libc::WIFSIGNALED(st),
        "seed {seed}: child ended with status {st:#x} before the kill (30-32: failures)"
    );
    // SAFETY: probing that the grandchild still exists (signal 0 sends nothing).
    let alive = unsafe { libc::kill(grandchild.0, 0) };
    assert_eq!(alive, 0, "seed {seed}: the grandchild is gone");
    // The child is dead though its grandchild holds copies of its descriptors: its locks
    // are recovered, its slot reclaimed.
    for i in 0..500 {
        map.put(format!("a:{i}").as_bytes(), b"parent")
            .unwrap_or_else(|e| panic!("seed {seed}: put a:{i} after the child died: {e}"));
    }
    let r = store.check().unwrap();
    assert!(r.is_ok(), "seed {seed}: {r}");
    assert_eq!(
        store.stats().unwrap().processes,
        1,
        "seed {seed}: the killed child still counts as attached: its grandchild kept its liveness lock"
    );
    drop(grandchild);
}

/// Threads of this process named `shoal-pretouch` (the engine's pretouch thread).
fn pretouch_threads() -> usize {
    std::fs::read_dir("/proc/self/task")
        .map(|d| {
            d.flatten()
                .filter(|t| {
                    std::fs::read_to_string(t.path().join("comm"))
                        .is_ok_and(|c| c.trim() == "shoal-pretouch")
                })
                .count()
        })
        .unwrap_or(0)
}

/// Waits until this process has `n` pretouch threads, at most `limit`; returns the last
/// count. (A new thread names itself once it runs, so it is counted only then.)
fn wait_pretouch_threads(n: usize, limit: Duration) -> usize {
    let start = Instant::now();
    loop {
        let c = pretouch_threads();
        if c == n || start.elapsed() > limit {
            return c;
        }
        std::thread::sleep(Duration::from_millis(5));
    }
}

/// `fork()` copies only the calling thread, so a child has no pretouch thread even when
/// its parent has one. A child that grows the store must start its own (one, not none:
/// requests sent to the parent's thread would go nowhere), and neither process may block.
#[test]
fn a_forked_child_starts_its_own_pretouch_thread() {
    let _g = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let seed = seed();
    let d = tmp();
    if !d.path().starts_with("/dev/shm") {
        eprintln!("skipped: no /dev/shm here (pretouching is for tmpfs only)");
        return;
    }
    let (store, map) = open(&d);
    const MB: usize = 1 << 20;
    // A record larger than a chunk takes a run of its own: the file grows, and the
    // parent's pretouch thread starts (if no earlier test of this process started it).
    map.put(b"parent", &vec![7u8; MB]).unwrap();
    assert_eq!(
        wait_pretouch_threads(1, Duration::from_secs(30)),
        1,
        "seed {seed}: the parent's pretouch thread"
    );
    let child = fork_child(|| {
        if pretouch_threads() != 0 {
            return 20;
        }
        for i in 0..8u8 {
            if map.put(format!("c:{i}").as_bytes(), &vec![i; MB]).is_err() {
                return 21;
            }
        }
        if wait_pretouch_threads(1, Duration::from_secs(30)) != 1 {
            return 22;
        }
        for i in 0..8u8 {
            if map.get(format!("c:{i}").as_bytes()).ok().flatten() != Some(vec![i; MB]) {
                return 23;
            }
        }
        0
    });
    let st = wait_child(child, Duration::from_secs(120), seed);
    assert_eq!(
        exit_code(st),
        Some(0),
        "seed {seed}: child failed (status {st:#x}; 20 a pretouch thread copied by fork, 21 \
         put failed, 22 no pretouch thread of its own after growing the store, 23 values \
         wrong, 101 panic)"
    );
    for i in 0..8u8 {
        assert_eq!(
            map.get(format!("c:{i}").as_bytes()).unwrap(),
            Some(vec![i; MB]),
            "seed {seed}"
        );
    }
    assert_eq!(map.get(b"parent").unwrap(), Some(vec![7u8; MB]));
    assert_eq!(pretouch_threads(), 1, "seed {seed}: the parent's thread");
    let r = store.check().unwrap();
    assert!(r.is_ok(), "seed {seed}: {r}");
}
