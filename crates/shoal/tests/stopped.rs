//! A stopped process (SIGSTOP) is alive, so a lock it holds must not be stolen: others
//! get `Error::Timeout` at their deadline instead of hanging, and everything goes on after
//! SIGCONT. A process stopped and then SIGKILLed has its lock recovered. Needs the
//! `failpoints` feature: the worker (this binary re-executed on `stopped_worker`) is made
//! to sleep at a chosen step while holding the lock, and is stopped there.

use shoal::{Error, MapOptions, OpenMode, Options, Store};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

fn tmp() -> tempfile::TempDir {
    tempfile::tempdir_in("/dev/shm")
        .or_else(|_| tempfile::tempdir())
        .unwrap()
}

/// Entry point of the worker process: one put of "hot", with the fail points the parent
/// configured (FAILPOINTS) making it sleep while it holds the segment lock.
#[test]
#[ignore = "run as a child process by the other tests of this file"]
fn stopped_worker() {
    let path = std::env::var("SHOAL_STOPPED_PATH").expect("run by the stopped tests");
    shoal::failpoints::setup();
    let s = Store::open_existing(&path).unwrap();
    let m = s.open_map("m").unwrap();
    if std::env::var_os("SHOAL_STOPPED_BIG").is_some() {
        // Values that need a new data chunk each (64 KiB chunks): the allocator's lock.
        for i in 0..3u8 {
            m.put(&[b'b', i], &[i; 40_000]).unwrap();
        }
    }
    m.put(b"hot", b"from the worker").unwrap();
}

fn command_worker(path: &std::path::Path, failpoints: &str) -> Command {
    let mut c = Command::new(std::env::current_exe().unwrap());
    c.args([
        "--exact",
        "stopped_worker",
        "--ignored",
        "--nocapture",
        "--test-threads=1",
    ])
    .env("SHOAL_STOPPED_PATH", path)
    .env("FAILPOINTS", failpoints)
    .stdout(Stdio::null());
    c
}

fn spawn_worker(path: &std::path::Path, failpoints: &str) -> Child {
    command_worker(path, failpoints).spawn().unwrap()
}

fn signal(child: &Child, sig: i32) {
    // SAFETY: sending a signal to our own child.
    assert_eq!(unsafe { libc::kill(child.id() as i32, sig) }, 0);
}

/// Waits (bounded) until a short-deadline put of "hot" times out: the worker holds the lock.
fn wait_until_held(m: &shoal::Map) {
    let start = Instant::now();
    loop {
        match m
            .with_timeout(Duration::from_millis(50))
            .put(b"hot", b"probe")
        {
            Err(Error::Timeout(_)) => return,
            Ok(_) => {}
            Err(e) => panic!("unexpected error while probing: {e}"),
        }
        assert!(
            start.elapsed() < Duration::from_secs(60),
            "worker never took the lock"
        );
        std::thread::sleep(Duration::from_millis(10));
    }
}

#[test]
fn stopped_holder_gives_timeouts_then_all_goes_on_after_sigcont() {
    let d = tmp();
    let path = d.path().join("s.shoal");
    let s = Store::open(&path).unwrap();
    let m = s.map("m").unwrap();
    m.put(b"hot", b"initial").unwrap();
    m.put(b"cold", b"other key, other segment lock? same map")
        .unwrap();
    let mut w = spawn_worker(&path, "write.locked=1*sleep(3000)");
    wait_until_held(&m);
    signal(&w, libc::SIGSTOP);
    // The holder is alive (stopped): its lock must not be stolen; we time out instead.
    for _ in 0..3 {
        let r = m
            .with_timeout(Duration::from_millis(300))
            .put(b"hot", b"parent");
        assert!(
            matches!(r, Err(Error::Timeout(_))),
            "expected a timeout, got {r:?}"
        );
        std::thread::sleep(Duration::from_millis(200));
    }
    // Reads never wait for a lock.
    assert!(m.get(b"hot").unwrap().is_some());
    signal(&w, libc::SIGCONT);
    m.with_timeout(Duration::from_secs(60))
        .put(b"hot", b"parent")
        .unwrap();
    assert!(w.wait().unwrap().success());
    assert_eq!(m.get(b"hot").unwrap().as_deref(), Some(&b"parent"[..]));
    let r = s.check().unwrap();
    assert!(r.is_ok(), "{r}");
}

#[test]
fn stopped_then_killed_holder_has_its_lock_recovered() {
    let d = tmp();
    let path = d.path().join("s.shoal");
    let s = Store::open(&path).unwrap();
    let m = s.map("m").unwrap();
    m.put(b"hot", b"initial").unwrap();
    let mut w = spawn_worker(&path, "write.locked=1*sleep(600000)");
    wait_until_held(&m);
    signal(&w, libc::SIGSTOP);
    assert!(matches!(
        m.with_timeout(Duration::from_millis(200)).put(b"hot", b"x"),
        Err(Error::Timeout(_))
    ));
    signal(&w, libc::SIGKILL);
    w.wait().unwrap();
    // Dead now: the next writer recovers the lock within milliseconds (bounded generously).
    m.with_timeout(Duration::from_secs(30))
        .put(b"hot", b"after")
        .unwrap();
    assert_eq!(m.get(b"hot").unwrap().as_deref(), Some(&b"after"[..]));
    let r = s.check().unwrap();
    assert!(r.is_ok(), "{r}");
}

#[test]
fn reader_of_a_bucket_left_mid_write_times_out_then_recovers_after_kill() {
    let d = tmp();
    let path = d.path().join("s.shoal");
    let s = Store::open(&path).unwrap();
    let m = s.map("m").unwrap();
    m.put(b"hot", b"initial").unwrap();
    // Stop inside the apply step: the bucket's seq is odd, readers must wait for it.
    let mut w = spawn_worker(&path, "write.half_applied=1*sleep(600000)");
    let start = Instant::now();
    loop {
        match m.with_timeout(Duration::from_millis(50)).get(b"hot") {
            Err(Error::Timeout(_)) => break,
            Ok(_) => {}
            Err(e) => panic!("unexpected error: {e}"),
        }
        assert!(
            start.elapsed() < Duration::from_secs(60),
            "worker never reached the apply step"
        );
        std::thread::sleep(Duration::from_millis(10));
    }
    signal(&w, libc::SIGSTOP);
    assert!(matches!(
        m.with_timeout(Duration::from_millis(200)).get(b"hot"),
        Err(Error::Timeout(_))
    ));
    signal(&w, libc::SIGKILL);
    w.wait().unwrap();
    // The reader itself finds the writer dead and rolls its committed intent forward.
    let v = m.with_timeout(Duration::from_secs(30)).get(b"hot").unwrap();
    assert_eq!(v.as_deref(), Some(&b"from the worker"[..]));
    let r = s.check().unwrap();
    assert!(r.is_ok(), "{r}");
}

/// Regression: the cleaner asks the index whether each record of its victim chunk is
/// live. A lookup that timed out (behind a writer stopped mid-apply in that record's
/// bucket) used to read as "dead", so a chunk holding a live record was freed and reused,
/// and the key's slot then pointed at other bytes. Now the cleaner gives up on that
/// victim after a short wait (not the lock timeout: writers run the cleaner) and goes on.
#[test]
fn cleaning_behind_a_stopped_writer_frees_no_live_record() {
    let d = tmp();
    let path = d.path().join("s.shoal");
    let opts = Options {
        chunk_size: 64 << 10,
        lock_timeout: Duration::from_millis(300),
        ..Options::default()
    };
    let s = Store::open_with(&path, &opts, OpenMode::CreateNew).unwrap();
    // One main bucket per segment, and a single segment: every key of "m" shares the
    // bucket the worker will leave mid-write.
    let one_bucket = MapOptions {
        segment_buckets: 1,
        stash_buckets: 1,
        uids: false,
        ..Default::default()
    };
    let m = s.map_with("m", &one_bucket, true).unwrap();
    let other = s.map("other").unwrap();
    m.put(b"hot", b"initial").unwrap();
    let keep = b"a live record in the chunk the cleaner picks";
    m.put(b"keep", keep).unwrap();
    // The rest of this thread's data chunk (and a few more) fills with records that die
    // at once: chunks with one or two live records and much dead space, the victims.
    for i in 0..300u32 {
        other.put(b"filler", &[i as u8; 1000]).unwrap();
    }
    let mut w = spawn_worker(&path, "write.half_applied=1*sleep(600000)");
    let start = Instant::now();
    while !matches!(
        m.with_timeout(Duration::from_millis(50)).get(b"hot"),
        Err(Error::Timeout(_))
    ) {
        assert!(
            start.elapsed() < Duration::from_secs(60),
            "worker never reached the apply step"
        );
        std::thread::sleep(Duration::from_millis(10));
    }
    signal(&w, libc::SIGSTOP);
    // Lookups in the worker's bucket time out: the victims holding its records are left
    // alone, the others are cleaned.
    s.compact().unwrap();
    // Whatever was freed is reused now.
    for i in 0..300u32 {
        other
            .put(format!("new{i}").as_bytes(), &[0xEE; 1000])
            .unwrap();
    }
    signal(&w, libc::SIGKILL);
    w.wait().unwrap();
    let got = m
        .with_timeout(Duration::from_secs(30))
        .get(b"keep")
        .unwrap();
    assert_eq!(got.as_deref(), Some(&keep[..]));
    let r = s.check().unwrap();
    assert!(r.is_ok(), "{r}");
}

/// A call's lock timeout bounds the whole call. Behind a process stopped while it holds a
/// segment lock, writes used to wait once for their own lock and again inside the
/// cleaning step they pay for (moving a live record of that segment), each time for the
/// full timeout, and to report one timeout: twice the timeout in all. Writes to other
/// maps waited a full timeout in that step for a lock they did not need. Now the
/// cleaning step gives up within milliseconds, and a call's waits share one deadline.
#[test]
fn writes_behind_a_stopped_holder_wait_their_timeout_once_and_housekeeping_not_at_all() {
    let d = tmp();
    let path = d.path().join("s.shoal");
    let opts = Options {
        chunk_size: 64 << 10,
        ..Options::default()
    };
    let s = Store::open_with(&path, &opts, OpenMode::CreateNew).unwrap();
    // One segment: the worker's lock covers every key of "m".
    let one_segment = MapOptions {
        segment_buckets: 4096,
        stash_buckets: 1,
        uids: false,
        ..Default::default()
    };
    let m = s.map_with("m", &one_segment, true).unwrap();
    let other = s.map("other").unwrap();
    m.put(b"hot", b"initial").unwrap();
    // Chunks that hold a few live records of "m" among many dead ones of "other": the
    // cleaner's victims, whose live records it must move under m's segment lock.
    for i in 0..2000u32 {
        if i % 10 == 0 {
            m.put(format!("m{i}").as_bytes(), &[1; 600]).unwrap();
        }
        other.put(b"filler", &[i as u8; 600]).unwrap();
    }
    let w = KillOnDrop(spawn_worker(&path, "write.locked=1*sleep(600000)"));
    wait_until_held(&m);
    signal(&w.0, libc::SIGSTOP);

    // Writes to another map: nothing of theirs is locked. Their cleaning steps meet m's
    // records; they must not wait out their timeout there.
    let timeout = Duration::from_secs(3);
    let other_t = other.with_timeout(timeout);
    for i in 0..200u32 {
        let t0 = Instant::now();
        other_t
            .put(format!("new{i}").as_bytes(), &[2; 1000])
            .unwrap();
        let took = t0.elapsed();
        assert!(
            took < timeout,
            "put {i} to an unrelated map took {took:?}: it waited out its timeout in housekeeping"
        );
    }

    // Writes to the locked map: one timeout, reported as waited.
    let timeout = Duration::from_secs(1);
    let m_t = m.with_timeout(timeout);
    for i in 0..5u32 {
        let t0 = Instant::now();
        let r = m_t.put(format!("late{i}").as_bytes(), &[3; 4000]);
        let took = t0.elapsed();
        match r {
            Err(Error::Timeout(said)) => assert!(
                said >= timeout && said <= took,
                "put {i} took {took:?} and said it waited {said:?}"
            ),
            other => panic!("put {i}: expected a timeout, got {other:?}"),
        }
        // The pacing allowance (200 ms) and room for two busy cores; the defect was a
        // second whole timeout.
        assert!(
            took < 2 * timeout,
            "put {i} took {took:?} with a timeout of {timeout:?}"
        );
    }
    drop(w);
    m.with_timeout(Duration::from_secs(30))
        .put(b"hot", b"after")
        .unwrap();
    let r = s.check().unwrap();
    assert!(r.is_ok(), "{r}");
}

/// A worker killed (and reaped) when the test is done with it, or fails: a stopped worker
/// left behind would keep the test harness's output pipe open.
struct KillOnDrop(Child);

impl Drop for KillOnDrop {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// Waits (bounded) until a put that needs a new data chunk times out: the worker holds
/// the allocator's lock. Each probe runs on a thread of its own, whose data chunk a
/// 40,000-byte value (in 64 KiB chunks) never fits twice.
fn wait_until_alloc_held(m: &shoal::Map) {
    let start = Instant::now();
    loop {
        let r = std::thread::scope(|sc| {
            sc.spawn(|| {
                m.with_timeout(Duration::from_millis(50))
                    .put(b"probe", &[7; 40_000])
            })
            .join()
            .unwrap()
        });
        match r {
            Err(Error::Timeout(_)) => return,
            Ok(_) => {}
            Err(e) => panic!("unexpected error while probing: {e}"),
        }
        assert!(
            start.elapsed() < Duration::from_secs(60),
            "worker never took the allocator's lock"
        );
        std::thread::sleep(Duration::from_millis(10));
    }
}

/// A put whose record needs a new data chunk, behind a process stopped holding the
/// allocator's lock, waited its whole timeout for it twice: once appending before taking
/// the segment lock (a guess whose error is not the put's to report: the value may go in
/// place), once again under the lock. It took twice its timeout and said it had waited
/// once.
#[test]
fn a_put_behind_a_stopped_allocator_waits_its_timeout_once() {
    let d = tmp();
    let path = d.path().join("s.shoal");
    let opts = Options {
        chunk_size: 64 << 10,
        ..Options::default()
    };
    let s = Store::open_with(&path, &opts, OpenMode::CreateNew).unwrap();
    let m = s.map("m").unwrap();
    // Inserts: this thread appends before it locks from now on.
    for i in 0..100u32 {
        m.put(format!("warm{i}").as_bytes(), b"small").unwrap();
    }
    let mut worker = command_worker(&path, "alloc.committed=1*sleep(600000)");
    let w = KillOnDrop(worker.env("SHOAL_STOPPED_BIG", "1").spawn().unwrap());
    wait_until_alloc_held(&m);
    signal(&w.0, libc::SIGSTOP);
    // Values short enough to go in place (so appended early), under new keys, until the
    // thread's data chunk is full and a put needs the allocator.
    let timeout = Duration::from_secs(2);
    let m_t = m.with_timeout(timeout);
    let mut timeouts = 0;
    for i in 0..10_000u32 {
        if timeouts == 2 {
            break;
        }
        let t0 = Instant::now();
        let r = m_t.put(format!("new{i}").as_bytes(), &[1; 40]);
        let took = t0.elapsed();
        match r {
            Ok(_) => {}
            Err(Error::Timeout(said)) => {
                timeouts += 1;
                assert!(
                    said >= timeout && said <= took,
                    "put {i} took {took:?} and said it waited {said:?}"
                );
            }
            Err(e) => panic!("put {i}: {e}"),
        }
        // Room for two busy cores; the defect was a second whole timeout.
        assert!(
            took < timeout + timeout / 2,
            "put {i} took {took:?} with a timeout of {timeout:?} ({r:?})"
        );
    }
    assert!(
        timeouts >= 2,
        "only {timeouts} puts met the stopped allocator"
    );
    drop(w);
    m.with_timeout(Duration::from_secs(30))
        .put(b"after", b"x")
        .unwrap();
    let r = s.check().unwrap();
    assert!(r.is_ok(), "{r}");
}

/// A store opened read-only cannot recover what a writer that died left half done: a read
/// of that bucket waits for a process with write access, and fails with `ReadOnly` (not a
/// plain timeout) at its deadline, leaving the file alone. Once a read-write handle reads
/// the bucket (and recovers it), the read-only read succeeds.
#[test]
fn a_read_only_reader_behind_a_dead_writer_waits_then_says_why() {
    let d = tmp();
    let path = d.path().join("s.shoal");
    let s = Store::open(&path).unwrap();
    let m = s.map("m").unwrap();
    m.put(b"hot", b"initial").unwrap();
    let mut w = spawn_worker(&path, "write.half_applied=1*sleep(600000)");
    let start = Instant::now();
    while !matches!(
        m.with_timeout(Duration::from_millis(50)).get(b"hot"),
        Err(Error::Timeout(_))
    ) {
        assert!(
            start.elapsed() < Duration::from_secs(60),
            "worker never reached the apply step"
        );
        std::thread::sleep(Duration::from_millis(10));
    }
    signal(&w, libc::SIGKILL);
    w.wait().unwrap();
    let r = Store::open_with(&path, &Options::default(), OpenMode::ReadOnly).unwrap();
    let rm = r
        .open_map("m")
        .unwrap()
        .with_timeout(Duration::from_millis(300));
    match rm.get(b"hot") {
        Err(Error::ReadOnly { what, .. }) => assert!(what.contains("died"), "{what}"),
        other => panic!("expected ReadOnly behind a dead writer, got {other:?}"),
    }
    let report = r.check().unwrap();
    assert!(
        report.problems.iter().any(|p| p.contains("died mid-write")),
        "a read-only check does not say a writer died mid-write: {report}"
    );
    // The read-write handle recovers the bucket; then the read-only one reads it.
    assert_eq!(
        m.with_timeout(Duration::from_secs(30))
            .get(b"hot")
            .unwrap()
            .as_deref(),
        Some(&b"from the worker"[..])
    );
    assert_eq!(
        rm.with_timeout(Duration::from_secs(30))
            .get(b"hot")
            .unwrap()
            .as_deref(),
        Some(&b"from the worker"[..])
    );
    assert!(r.check().unwrap().is_ok());
}
