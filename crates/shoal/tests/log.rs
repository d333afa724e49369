//! Logs: records and their fields, each full policy, readers that resume at their cursor
//! and share it, writer processes whose records are read exactly once and in order per
//! writer, and a model of the whole (proptest).

use proptest::prelude::*;
use shoal::{Error, FullPolicy, LogOptions, MapKind, Store};
use std::collections::HashMap;
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

fn shm_dir() -> tempfile::TempDir {
    tempfile::tempdir_in("/dev/shm").unwrap()
}

#[test]
fn records_come_back_with_their_fields_in_reservation_order() {
    let d = shm_dir();
    let s = Store::open(d.path().join("l.shoal")).unwrap();
    let log = s.log("app", &LogOptions::new(64, 100)).unwrap();
    assert_eq!(
        (log.slots(), log.max_record(), log.policy()),
        (64, 100, FullPolicy::Overwrite)
    );
    let mut r = log.reader("drain").unwrap();
    assert!(r.read().unwrap().is_none(), "an empty log");
    let before = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_nanos() as u64;
    assert_eq!(log.append(3, b"hello").unwrap(), Some(0));
    assert_eq!(
        log.append_fields(7, b"", &[(b"k", b"v"), (b"", b"empty key"), (b"x", b"")])
            .unwrap(),
        Some(1)
    );
    let a = r.read().unwrap().unwrap();
    assert_eq!((a.seq(), a.level(), a.message()), (0, 3, &b"hello"[..]));
    assert!(a.fields().is_empty());
    assert_eq!(a.pid(), std::process::id());
    assert!(a.tid() > 0);
    assert!(
        a.time_ns() >= before,
        "time {} before {before}",
        a.time_ns()
    );
    let b = r.read().unwrap().unwrap();
    assert_eq!((b.seq(), b.level(), b.message()), (1, 7, &b""[..]));
    let f: Vec<(&[u8], &[u8])> = b.fields().iter().map(|(k, v)| (&k[..], &v[..])).collect();
    assert_eq!(
        f,
        [(&b"k"[..], &b"v"[..]), (b"", b"empty key"), (b"x", b"")]
    );
    assert!(r.read().unwrap().is_none());
    assert_eq!(r.position(), 2);
    assert_eq!(s.logs().unwrap(), ["app"]);
    assert_eq!(
        s.map_kind("app").unwrap(),
        Some(MapKind::Log {
            slots: 64,
            max_record: 100
        })
    );
    let c = s.check().unwrap();
    assert!(c.is_ok(), "{c}");
}

#[test]
fn a_record_larger_than_the_slots_fails_cleanly_and_takes_no_number() {
    let d = shm_dir();
    let s = Store::open(d.path().join("l.shoal")).unwrap();
    let log = s.log("app", &LogOptions::new(8, 32)).unwrap();
    let e = log.append(1, &[b'x'; 33]).unwrap_err();
    assert!(
        matches!(&e, Error::InvalidArgument(m) if m.contains("33 bytes")),
        "{e}"
    );
    // A field costs its key, its value and 8 bytes.
    let e = log
        .append_fields(1, &[b'x'; 21], &[(b"ab", b"cd")])
        .unwrap_err();
    assert!(
        matches!(&e, Error::InvalidArgument(m) if m.contains("33 bytes")),
        "{e}"
    );
    assert_eq!(log.append(1, &[b'x'; 32]).unwrap(), Some(0));
    assert_eq!(
        log.append_fields(1, &[b'x'; 20], &[(b"ab", b"cd")])
            .unwrap(),
        Some(1)
    );
    assert_eq!(log.stats().unwrap().appended, 2);
    for bad in [
        LogOptions::new(1, 10),
        LogOptions::new(8, 0),
        LogOptions::new(8, 10).readers(0),
    ] {
        assert!(matches!(s.log("bad", &bad), Err(Error::InvalidArgument(_))));
    }
    assert!(
        s.log("app", &LogOptions::new(2, 1)).is_ok(),
        "an existing log opens as it is"
    );
}

#[test]
fn overwrite_keeps_the_newest_records_and_readers_learn_how_many_they_missed() {
    let d = shm_dir();
    let s = Store::open(d.path().join("l.shoal")).unwrap();
    let log = s.log("app", &LogOptions::new(8, 16)).unwrap();
    let mut r = log.reader("r").unwrap();
    for i in 0..20u64 {
        assert_eq!(
            log.append(0, &i.to_le_bytes()).unwrap(),
            Some(i),
            "never waits"
        );
    }
    let got: Vec<u64> = std::iter::from_fn(|| r.read().unwrap())
        .map(|x| x.seq())
        .collect();
    assert_eq!(got, (12..20).collect::<Vec<_>>());
    assert_eq!((r.missed(), r.skipped()), (12, 0));
    let st = log.stats().unwrap();
    assert_eq!(
        (st.appended, st.readers[0].missed, st.readers[0].position),
        (20, 12, 20)
    );
}

#[test]
fn drop_policy_drops_and_counts_while_a_reader_lags_and_never_fills_without_readers() {
    let d = shm_dir();
    let s = Store::open(d.path().join("l.shoal")).unwrap();
    let log = s
        .log("app", &LogOptions::new(4, 16).policy(FullPolicy::Drop))
        .unwrap();
    for i in 0..10u64 {
        assert_eq!(
            log.append(0, b"x").unwrap(),
            Some(i),
            "no reader: the ring never fills"
        );
    }
    let mut r = log.reader("r").unwrap();
    assert_eq!(
        r.position(),
        6,
        "a new reader starts at the oldest record kept"
    );
    for _ in 0..3 {
        assert_eq!(log.append(0, b"y").unwrap(), None, "full: dropped");
    }
    assert_eq!(log.stats().unwrap().dropped, 3);
    assert_eq!(r.read().unwrap().unwrap().seq(), 6);
    assert_eq!(log.append(0, b"z").unwrap(), Some(10), "one read, one room");
    assert_eq!(log.append(0, b"z").unwrap(), None);
    let got: Vec<u64> = std::iter::from_fn(|| r.read().unwrap())
        .map(|x| x.seq())
        .collect();
    assert_eq!(got, [7, 8, 9, 10]);
    assert_eq!(r.missed(), 0);
}

#[test]
fn wait_policy_waits_for_room_until_its_deadline_and_a_read_makes_room() {
    let d = shm_dir();
    let s = Store::open(d.path().join("l.shoal")).unwrap();
    let log = s
        .log("app", &LogOptions::new(4, 16).policy(FullPolicy::Wait))
        .unwrap();
    let mut r = log.reader("r").unwrap();
    for i in 0..4u64 {
        assert_eq!(log.append(0, b"x").unwrap(), Some(i));
    }
    let e = log
        .append_timeout(0, b"late", &[], Duration::from_millis(30))
        .unwrap_err();
    assert!(matches!(e, Error::Timeout(_)), "{e}");
    let writer = {
        let log = log.clone();
        std::thread::spawn(move || log.append_timeout(0, b"later", &[], Duration::from_secs(60)))
    };
    std::thread::sleep(Duration::from_millis(20));
    assert_eq!(r.read().unwrap().unwrap().seq(), 0);
    assert_eq!(
        writer.join().unwrap().unwrap(),
        Some(4),
        "the read made room"
    );
    let got: Vec<Vec<u8>> = std::iter::from_fn(|| r.read().unwrap())
        .map(|x| x.message().to_vec())
        .collect();
    assert_eq!(
        got,
        [
            b"x".to_vec(),
            b"x".to_vec(),
            b"x".to_vec(),
            b"later".to_vec()
        ]
    );
    // Removing the only reader frees the writers.
    for _ in 0..4 {
        log.append(0, b"x").unwrap();
    }
    assert!(log.remove_reader("r").unwrap());
    assert!(matches!(r.read(), Err(Error::NotFound(_))));
    assert!(log
        .append_timeout(0, b"free", &[], Duration::from_millis(30))
        .unwrap()
        .is_some());
}

#[test]
fn a_reader_opened_again_resumes_at_its_cursor_and_handles_share_it() {
    let d = shm_dir();
    let path = d.path().join("l.shoal");
    {
        let s = Store::open(&path).unwrap();
        let log = s.log("app", &LogOptions::new(64, 16)).unwrap();
        let mut r = log.reader("drain").unwrap();
        for i in 0..10u64 {
            log.append(0, &i.to_le_bytes()).unwrap();
        }
        for i in 0..4 {
            assert_eq!(r.read().unwrap().unwrap().seq(), i);
        }
    }
    let s = Store::open_existing(&path).unwrap();
    let log = s.open_log("app").unwrap();
    let mut a = log.reader("drain").unwrap();
    let mut b = log.reader("drain").unwrap();
    let mut other = log.reader("other").unwrap();
    assert_eq!(a.position(), 4, "resumes where it stopped");
    assert_eq!(a.read().unwrap().unwrap().seq(), 4);
    assert_eq!(
        b.read().unwrap().unwrap().seq(),
        5,
        "handles on one reader share its cursor"
    );
    assert_eq!(
        other.read().unwrap().unwrap().seq(),
        0,
        "another reader has its own"
    );
    let mut names: Vec<String> = log
        .stats()
        .unwrap()
        .readers
        .into_iter()
        .map(|r| r.name)
        .collect();
    names.sort();
    assert_eq!(names, ["drain", "other"]);
}

#[test]
fn read_wait_sleeps_until_a_writer_publishes() {
    let d = shm_dir();
    let s = Store::open(d.path().join("l.shoal")).unwrap();
    let log = s.log("app", &LogOptions::new(64, 16)).unwrap();
    let mut r = log.reader("r").unwrap();
    assert!(r.read_wait(Duration::from_millis(20)).unwrap().is_none());
    let w = {
        let log = log.clone();
        std::thread::spawn(move || {
            std::thread::sleep(Duration::from_millis(30));
            log.append(1, b"wake").unwrap()
        })
    };
    let got = r
        .read_wait(Duration::from_secs(60))
        .unwrap()
        .expect("woken by the append");
    assert_eq!(got.message(), b"wake");
    w.join().unwrap();
}

#[test]
fn a_dropped_log_fails_its_handles_and_names_are_kind_checked() {
    let d = shm_dir();
    let s = Store::open(d.path().join("l.shoal")).unwrap();
    let log = s.log("app", &LogOptions::new(64, 16)).unwrap();
    let mut r = log.reader("r").unwrap();
    log.append(0, b"x").unwrap();
    s.map("m").unwrap();
    let e = s.log("m", &LogOptions::new(8, 8)).unwrap_err();
    assert!(matches!(e, Error::WrongMapKind { .. }), "{e}");
    let e = s.map("app").unwrap_err();
    assert!(matches!(e, Error::WrongMapKind { .. }), "{e}");
    assert!(s.drop_map("app").unwrap());
    assert!(matches!(log.append(0, b"x"), Err(Error::NotFound(_))));
    assert!(matches!(r.read(), Err(Error::NotFound(_))));
    assert!(matches!(s.open_log("app"), Err(Error::NotFound(_))));
    let c = s.check().unwrap();
    assert!(c.is_ok(), "{c}");
}

// ---- writer processes ----

fn spawn_writer(path: &Path, id: u64, records: u64) -> std::process::Child {
    Command::new(std::env::current_exe().unwrap())
        .args([
            "--exact",
            "log_writer",
            "--ignored",
            "--nocapture",
            "--test-threads=1",
        ])
        .env("SHOAL_LOG_PATH", path)
        .env("SHOAL_LOG_WRITER", id.to_string())
        .env("SHOAL_LOG_RECORDS", records.to_string())
        .env_remove("FAILPOINTS")
        .stdout(Stdio::null())
        .spawn()
        .unwrap()
}

/// A record's message: writer, index, and a checksum-like filler.
fn message(w: u64, i: u64) -> Vec<u8> {
    let mut m = format!("w{w} i{i} ").into_bytes();
    m.extend((0..(i % 50)).map(|j| (w * 31 + i * 7 + j) as u8));
    m
}

fn parse(msg: &[u8]) -> (u64, u64) {
    let s = String::from_utf8_lossy(msg);
    let mut it = s.split(' ');
    let w = it.next().unwrap()[1..].parse().unwrap();
    let i = it.next().unwrap()[1..].parse().unwrap();
    assert_eq!(msg, &message(w, i)[..], "a record's bytes are its writer's");
    (w, i)
}

#[test]
#[ignore = "run as a child by the tests of this file"]
fn log_writer() {
    let Ok(path) = std::env::var("SHOAL_LOG_PATH") else {
        return;
    };
    let w: u64 = std::env::var("SHOAL_LOG_WRITER").unwrap().parse().unwrap();
    let n: u64 = std::env::var("SHOAL_LOG_RECORDS").unwrap().parse().unwrap();
    let s = Store::open_existing(&path).unwrap();
    let log = s.open_log("app").unwrap();
    for i in 0..n {
        let f = i.to_le_bytes();
        log.append_timeout(2, &message(w, i), &[(b"i", &f)], Duration::from_secs(120))
            .unwrap()
            .expect("the wait policy never drops");
    }
}

#[test]
fn writer_processes_records_are_read_exactly_once_in_order_per_writer() {
    const WRITERS: u64 = 4;
    const RECORDS: u64 = 3000;
    let d = shm_dir();
    let path = d.path().join("l.shoal");
    let s = Store::open(&path).unwrap();
    // A ring much smaller than what is written: writers wait on the reader again and again.
    let log = s
        .log("app", &LogOptions::new(128, 128).policy(FullPolicy::Wait))
        .unwrap();
    let mut r = log.reader("drain").unwrap();
    let mut kids: Vec<_> = (0..WRITERS)
        .map(|w| spawn_writer(&path, w, RECORDS))
        .collect();
    let mut next = vec![0u64; WRITERS as usize];
    let mut seq = 0;
    let start = Instant::now();
    let mut batch = shoal::RecordBatch::new();
    let mut rounds = 0u64;
    while seq < WRITERS * RECORDS {
        assert!(
            start.elapsed() < Duration::from_secs(240),
            "stalled at {seq}: {next:?}"
        );
        // Single reads and batches of several sizes take turns on the one cursor.
        rounds += 1;
        let got: Vec<(u64, Vec<u8>, Vec<u8>)> = if rounds % 3 == 0 {
            match r.read_wait(Duration::from_millis(200)).unwrap() {
                Some(rec) => vec![(rec.seq(), rec.message().to_vec(), rec.fields()[0].1.clone())],
                None => vec![],
            }
        } else {
            let max = [1, 7, 64, 1000][(rounds % 4) as usize];
            r.read_batch_wait(&mut batch, max, Duration::from_millis(200))
                .unwrap();
            assert!(batch.len() <= max);
            batch
                .iter()
                .map(|x| {
                    let f = x.fields().next().unwrap().1.to_vec();
                    (x.seq(), x.message().to_vec(), f)
                })
                .collect()
        };
        for (rs, msg, f) in got {
            assert_eq!(rs, seq, "in sequence order, none skipped");
            let (w, i) = parse(&msg);
            assert_eq!(i, next[w as usize], "writer {w}: in order, once each");
            assert_eq!(f, i.to_le_bytes());
            next[w as usize] += 1;
            seq += 1;
        }
    }
    for k in &mut kids {
        assert!(k.wait().unwrap().success());
    }
    assert!(r.read().unwrap().is_none(), "nothing more");
    assert_eq!((r.missed(), r.skipped()), (0, 0));
    let c = s.check().unwrap();
    assert!(c.is_ok(), "{c}");
}

// ---- a model ----

#[derive(Clone, Debug)]
enum Op {
    Append(u8, u8),
    Read(u8),
    ReadBatch(u8, u8),
    Remove(u8),
    Reopen,
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        6 => (any::<u8>(), 0..40u8).prop_map(|(l, n)| Op::Append(l, n)),
        5 => (0..3u8).prop_map(Op::Read),
        3 => (0..3u8, 1..8u8).prop_map(|(r, n)| Op::ReadBatch(r, n)),
        1 => (0..3u8).prop_map(Op::Remove),
        1 => Just(Op::Reopen),
    ]
}

const SLOTS: u64 = 5;
const MAX: usize = 32;

/// The log as the format describes it, in one thread: the records by sequence number,
/// the tail, the floor, and the readers' cursors.
#[derive(Default)]
struct Model {
    records: HashMap<u64, (u8, Vec<u8>)>,
    tail: u64,
    floor: u64,
    readers: HashMap<u8, (u64, u64)>,
    dropped: u64,
}

impl Model {
    fn append(&mut self, policy: FullPolicy, level: u8, msg: Vec<u8>) -> Option<u64> {
        let t = self.tail;
        if policy != FullPolicy::Overwrite && t - self.floor.min(t) >= SLOTS {
            let f = match self.readers.values().map(|r| r.0).min() {
                Some(c) => c,
                None => (t + 1).saturating_sub(SLOTS),
            };
            self.floor = self.floor.max(f);
            if t - f.min(t) >= SLOTS {
                if policy == FullPolicy::Drop {
                    self.dropped += 1;
                }
                return None; // the drop policy (the wait policy is called with 0 timeout)
            }
        }
        self.records.insert(t, (level, msg));
        self.tail += 1;
        Some(t)
    }

    fn reader(&mut self, r: u8) -> &mut (u64, u64) {
        let start = self
            .floor
            .max(self.tail.saturating_sub(SLOTS))
            .min(self.tail);
        self.readers.entry(r).or_insert((start, 0))
    }

    fn read(&mut self, r: u8) -> Option<(u64, u8, Vec<u8>)> {
        let tail = self.tail;
        let rd = self.reader(r);
        if rd.0 >= tail {
            return None;
        }
        if tail - rd.0 > SLOTS {
            rd.1 += tail - SLOTS - rd.0;
            rd.0 = tail - SLOTS;
        }
        let c = rd.0;
        rd.0 += 1;
        let (l, m) = self.records[&c].clone();
        Some((c, l, m))
    }
}

/// Reader `r`'s position and missed count in the log's stats are the model's.
fn reader_matches(log: &shoal::Log, m: &Model, r: u8) -> Result<(), TestCaseError> {
    let st = log.stats().unwrap();
    let rs = st
        .readers
        .iter()
        .find(|x| x.name == format!("r{r}"))
        .unwrap();
    prop_assert_eq!((rs.position, rs.missed), m.readers[&r]);
    Ok(())
}

fn model_case(policy: FullPolicy, ops: &[Op]) -> Result<(), TestCaseError> {
    let d = shm_dir();
    let path = d.path().join("l.shoal");
    let mut s = Store::open(&path).unwrap();
    let mut log = s
        .log("l", &LogOptions::new(SLOTS, MAX).policy(policy).readers(3))
        .unwrap();
    let mut m = Model::default();
    for (i, op) in ops.iter().enumerate() {
        match op {
            Op::Append(level, n) => {
                let msg: Vec<u8> = (0..*n).map(|j| (i as u8).wrapping_add(j)).collect();
                let got = log.append_timeout(*level, &msg, &[], Duration::ZERO);
                if msg.len() > MAX {
                    prop_assert!(matches!(got, Err(Error::InvalidArgument(_))));
                    continue;
                }
                let want = m.append(policy, *level, msg);
                match (policy, got) {
                    (FullPolicy::Wait, Err(Error::Timeout(_))) => {
                        prop_assert!(want.is_none(), "op {}: timed out, the model had room", i);
                    }
                    (_, got) => prop_assert_eq!(got.unwrap(), want, "op {}", i),
                }
            }
            Op::Read(r) => {
                let got = log.reader(&format!("r{r}")).unwrap().read().unwrap();
                let want = m.read(*r);
                prop_assert_eq!(
                    got.map(|x| (x.seq(), x.level(), x.message().to_vec())),
                    want,
                    "op {}: reader {}",
                    i,
                    r
                );
                reader_matches(&log, &m, *r)?;
            }
            Op::ReadBatch(r, max) => {
                let mut batch = shoal::RecordBatch::new();
                let n = log
                    .reader(&format!("r{r}"))
                    .unwrap()
                    .read_batch(&mut batch, *max as usize)
                    .unwrap();
                prop_assert_eq!(n, batch.len());
                let got: Vec<_> = batch
                    .iter()
                    .map(|x| (x.seq(), x.level(), x.message().to_vec()))
                    .collect();
                // A batch is the reads it replaces, in one call.
                let want: Vec<_> = (0..*max).map_while(|_| m.read(*r)).collect();
                prop_assert_eq!(got, want, "op {}: reader {}", i, r);
                reader_matches(&log, &m, *r)?;
            }
            Op::Remove(r) => {
                let had = m.readers.remove(r).is_some();
                prop_assert_eq!(log.remove_reader(&format!("r{r}")).unwrap(), had);
            }
            Op::Reopen => {
                drop(log);
                drop(s);
                s = Store::open_existing(&path).unwrap();
                log = s.open_log("l").unwrap();
            }
        }
    }
    prop_assert_eq!(log.stats().unwrap().appended, m.tail);
    prop_assert_eq!(log.stats().unwrap().dropped, m.dropped);
    let c = s.check().unwrap();
    prop_assert!(c.is_ok(), "{}", c);
    Ok(())
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 48, ..ProptestConfig::default() })]
    #[test]
    fn logs_behave_as_their_model(
        policy in prop_oneof![Just(FullPolicy::Overwrite), Just(FullPolicy::Wait), Just(FullPolicy::Drop)],
        ops in proptest::collection::vec(op(), 1..150),
    ) {
        model_case(policy, &ops)?;
    }
}
