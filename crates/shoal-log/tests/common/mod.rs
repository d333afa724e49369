//! What the adapter tests share: writer processes (this test binary run again, running one
//! ignored test), killed if the test fails before it waited for them, and the drain that
//! checks what they wrote.

use shoal::{FullPolicy, Log, LogOptions, LogReader, Record, RecordRef, Store};
use std::collections::HashMap;
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

/// In a writer process: its number and the log "app" of the test's store; `None` when the
/// ignored test runs on its own, not as a child.
pub fn writer_log() -> Option<(u64, Log)> {
    let path = std::env::var("SHOAL_LOG_PATH").ok()?;
    let p: u64 = std::env::var("SHOAL_LOG_WRITER").unwrap().parse().unwrap();
    let s = Store::open_existing(&path).unwrap();
    Some((p, s.open_log("app").unwrap()))
}

/// Runs two writer processes (the ignored test `child`), each writing `per_process`
/// records with the fields `proc`, `thread` and `i`, into a ring much smaller than that
/// so that they wait for the reader, and drains them: every record once, in sequence, in
/// order per writer thread, each also given to `check` with its fields and its `(proc, thread, i)`.
pub fn drain_two_writers(
    child: &str,
    per_process: u64,
    threads: u64,
    mut check: impl FnMut(&RecordRef<'_>, &HashMap<&[u8], &str>, (u64, u64, u64)),
) {
    let d = tempfile::tempdir_in("/dev/shm").unwrap();
    let path = d.path().join("l.shoal");
    let s = Store::open(&path).unwrap();
    let log = s
        .log("app", &LogOptions::new(128, 256).policy(FullPolicy::Wait))
        .unwrap();
    let mut r = log.reader("drain").unwrap();
    let mut kids = Kids((0..2).map(|p| spawn_writer(child, &path, p)).collect());
    let mut next: HashMap<(u64, u64), u64> = HashMap::new();
    let mut batch = shoal::RecordBatch::new();
    let (mut n, mut seq) = (0, 0);
    let start = Instant::now();
    while n < 2 * per_process {
        assert!(
            start.elapsed() < Duration::from_secs(240),
            "stalled at {n}: {next:?}"
        );
        r.read_batch_wait(&mut batch, 100, Duration::from_millis(200))
            .unwrap();
        for rec in &batch {
            assert_eq!(rec.seq(), seq);
            seq += 1;
            let f: HashMap<&[u8], &str> = rec
                .fields()
                .map(|(k, v)| (k, std::str::from_utf8(v).unwrap()))
                .collect();
            let num = |k: &str| -> u64 { f[k.as_bytes()].parse().unwrap() };
            let (p, t, i) = (num("proc"), num("thread"), num("i"));
            let want = next.entry((p, t)).or_insert(0);
            assert_eq!(i, *want, "process {p} thread {t}: in order, once each");
            *want += 1;
            assert_eq!(rec.fields().next().unwrap().0, b"target", "target first");
            check(&rec, &f, (p, t, i));
            n += 1;
        }
    }
    for k in &mut kids.0 {
        assert!(k.wait().unwrap().success());
    }
    assert!(r.read().unwrap().is_none(), "nothing more");
    assert_eq!(next.len() as u64, 2 * threads);
}

/// Runs the ignored test `child` of this binary as writer process `id` of the store at
/// `path` (given to it as `SHOAL_LOG_PATH` and `SHOAL_LOG_WRITER`).
pub fn spawn_writer(child: &str, path: &Path, id: u64) -> std::process::Child {
    Command::new(std::env::current_exe().unwrap())
        .args([
            "--exact",
            child,
            "--ignored",
            "--nocapture",
            "--test-threads=1",
        ])
        .env("SHOAL_LOG_PATH", path)
        .env("SHOAL_LOG_WRITER", id.to_string())
        .stdout(Stdio::null())
        .spawn()
        .unwrap()
}

/// The writer processes, killed if the test fails before it waited for them: a writer
/// waiting for room in a ring nobody reads any more must not outlive the test.
pub struct Kids(pub Vec<std::process::Child>);

impl Drop for Kids {
    fn drop(&mut self) {
        for k in &mut self.0 {
            let _ = k.kill();
            let _ = k.wait();
        }
    }
}

/// The one record the reader has (the adapter cut it to fit the log's records of 100
/// bytes), after which it has none (`what` was not written), and that record's size as
/// the log counts it (the message, and per field its key, its value and 8 bytes), checked
/// to fit.
pub fn the_cut_record(r: &mut LogReader, what: &str) -> (Record, usize) {
    let rec = r.read().unwrap().expect("the cut record");
    assert!(r.read().unwrap().is_none(), "{what} was not written");
    let size = rec.message().len()
        + rec
            .fields()
            .iter()
            .map(|(k, v)| 8 + k.len() + v.len())
            .sum::<usize>();
    assert!(size <= 100, "{size}");
    (rec, size)
}
