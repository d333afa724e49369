//! The drainer: a file rotated by size with every record once and in order, a drainer
//! that resumes at its cursor, a stop that writes what was published, a callback fed by
//! several writer threads, and the errors (a full disk, a panicking callback, a log with
//! no room for another reader).

use shoal::{LogOptions, Store};
use shoal_log::{DrainError, DrainOptions, Drainer, FileSink, Format};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

fn shm_dir() -> tempfile::TempDir {
    tempfile::tempdir_in("/dev/shm").unwrap()
}

/// Waits (at most 60 s) until `f` holds.
fn wait_until(what: &str, mut f: impl FnMut() -> bool) {
    let start = Instant::now();
    while !f() {
        assert!(
            start.elapsed() < Duration::from_secs(60),
            "waited 60 s for {what}"
        );
        std::thread::sleep(Duration::from_millis(10));
    }
}

#[test]
fn a_file_is_rotated_by_size_and_a_restarted_drainer_resumes_at_its_cursor() {
    let d = shm_dir();
    let s = Store::open(d.path().join("l.shoal")).unwrap();
    let log = s.log("app", &LogOptions::new(1024, 128)).unwrap();
    let path = d.path().join("app.log");
    let all_lines = || -> Vec<String> {
        let mut v = Vec::new();
        for i in (1..=10).rev() {
            let p = d.path().join(format!("app.log.{i}"));
            if let Ok(t) = std::fs::read_to_string(&p) {
                assert!(t.len() <= 1000, "{p:?} is {} bytes", t.len());
                assert!(i <= 4, "{p:?}: only 4 rotated files are kept");
                v.extend(t.lines().map(String::from));
            }
        }
        if let Ok(t) = std::fs::read_to_string(&path) {
            assert!(t.len() <= 1000);
            v.extend(t.lines().map(String::from));
        }
        v
    };
    let sink = FileSink::open(&path, Format::Json, 1000, 4).unwrap();
    let drainer = Drainer::start(&log, &DrainOptions::new().cursor("arch").batch(7), sink).unwrap();
    for i in 0..40u32 {
        log.append_fields(
            6,
            format!("rec {i}").as_bytes(),
            &[(b"i", &i.to_le_bytes())],
        )
        .unwrap();
    }
    wait_until("40 records drained", || drainer.records() == 40);
    let st = drainer.stop().unwrap();
    assert_eq!((st.records, st.missed, st.skipped), (40, 0, 0));
    // Records appended while no drainer runs wait in the log for the next one.
    for i in 40..60u32 {
        log.append(6, format!("rec {i}").as_bytes()).unwrap();
    }
    let sink = FileSink::open(&path, Format::Json, 1000, 4).unwrap();
    let drainer = Drainer::start(&log, &DrainOptions::new().cursor("arch"), sink).unwrap();
    wait_until("the rest drained", || drainer.records() == 20);
    drainer.stop().unwrap();
    // Lines of about 120 bytes in files of at most 1000: the oldest rotated out, the
    // newest 4 files and the current one hold the rest, each record once and in order.
    let lines = all_lines();
    let recs: Vec<serde_json::Value> = lines
        .iter()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    let seqs: Vec<u64> = recs.iter().map(|r| r["seq"].as_u64().unwrap()).collect();
    assert!(seqs.len() < 60 && seqs.len() >= 30, "{seqs:?}");
    let first = seqs[0];
    assert_eq!(seqs, (first..60).collect::<Vec<_>>());
    for r in &recs {
        let n = r["seq"].as_u64().unwrap();
        assert_eq!(r["message"], format!("rec {n}"));
        assert_eq!(r["level"], 6);
        assert_eq!(r["pid"], std::process::id());
    }
    assert!(d.path().join("app.log.4").exists());
    assert!(!d.path().join("app.log.5").exists());
}

#[test]
fn stop_writes_what_was_published_and_keep_zero_starts_the_file_again() {
    let d = shm_dir();
    let s = Store::open(d.path().join("l.shoal")).unwrap();
    let log = s.log("app", &LogOptions::new(4096, 64)).unwrap();
    let path = d.path().join("app.log");
    // A long poll: the records must come from the stop, not from the drainer waking.
    let opts = DrainOptions::new().poll(Duration::from_secs(30));
    let sink = FileSink::open(&path, Format::Text, 0, 0).unwrap();
    let drainer = Drainer::start(&log, &opts, sink).unwrap();
    for i in 0..1000 {
        log.append(7, format!("line {i}").as_bytes()).unwrap();
    }
    let st = drainer.stop().unwrap();
    assert_eq!(st.records, 1000);
    let t = std::fs::read_to_string(&path).unwrap();
    assert_eq!(t.lines().count(), 1000);
    assert!(t.lines().last().unwrap().ends_with(" 7 line 999"));
    // keep 0: the file is truncated when full, nothing rotated.
    let sink = FileSink::open(&path, Format::Text, 200, 0).unwrap();
    let drainer = Drainer::start(&log, &DrainOptions::new(), sink).unwrap();
    for i in 0..10 {
        log.append(7, format!("again {i}").as_bytes()).unwrap();
    }
    drainer.stop().unwrap();
    let t = std::fs::read_to_string(&path).unwrap();
    assert!(t.len() <= 200 && t.ends_with(" 7 again 9\n"), "{t}");
    assert!(!d.path().join("app.log.1").exists());
}

#[test]
fn a_callback_gets_every_record_of_several_writer_threads_in_order_per_thread() {
    const THREADS: u64 = 4;
    const N: u64 = 2000;
    let d = shm_dir();
    let s = Store::open(d.path().join("l.shoal")).unwrap();
    // A small ring that waits for its reader: the drainer must keep up, nothing is lost.
    let log = s
        .log(
            "app",
            &LogOptions::new(64, 64).policy(shoal::FullPolicy::Wait),
        )
        .unwrap();
    let got = Arc::new(Mutex::new(Vec::new()));
    let g = got.clone();
    let drainer = Drainer::to_callback(&log, move |r| {
        let f = r.fields().next().unwrap();
        let w = u64::from_le_bytes(f.1.try_into().unwrap());
        g.lock().unwrap().push((r.seq(), w, r.message().to_vec()));
    })
    .unwrap();
    std::thread::scope(|sc| {
        for w in 0..THREADS {
            let log = log.clone();
            sc.spawn(move || {
                for i in 0..N {
                    log.append_timeout(
                        6,
                        format!("{i}").as_bytes(),
                        &[(b"w", &w.to_le_bytes())],
                        Duration::from_secs(120),
                    )
                    .unwrap()
                    .unwrap();
                }
            });
        }
    });
    let st = drainer.stop().unwrap();
    assert_eq!(st.records, THREADS * N);
    let got = got.lock().unwrap();
    let mut next = [0u64; THREADS as usize];
    for (k, (seq, w, msg)) in got.iter().enumerate() {
        assert_eq!(*seq, k as u64, "in sequence order, once each");
        assert_eq!(msg, format!("{}", next[*w as usize]).as_bytes());
        next[*w as usize] += 1;
    }
    assert_eq!(next, [N; THREADS as usize]);
}

#[test]
fn errors_stop_the_drainer_and_are_returned() {
    let d = shm_dir();
    let s = Store::open(d.path().join("l.shoal")).unwrap();
    let log = s.log("app", &LogOptions::new(64, 64).readers(2)).unwrap();
    // A full disk: the write fails, the drainer ends and says why.
    let sink = FileSink::open("/dev/full", Format::Text, 0, 0).unwrap();
    let drainer = Drainer::start(&log, &DrainOptions::new().cursor("full"), sink).unwrap();
    log.append(3, b"lost").unwrap();
    wait_until("the drainer to end", || drainer.is_finished());
    match drainer.stop() {
        Err(DrainError::Io(e)) => assert_eq!(e.raw_os_error(), Some(libc_enospc())),
        r => panic!("want the write's error, got {r:?}"),
    }
    // A callback that panics: its message comes back.
    let drainer = Drainer::start(
        &log,
        &DrainOptions::new().cursor("panics"),
        shoal_log::Callback(|_r: shoal::RecordRef<'_>| panic!("bad record")),
    )
    .unwrap();
    log.append(3, b"boom").unwrap();
    wait_until("the drainer to end", || drainer.is_finished());
    match drainer.stop() {
        Err(DrainError::Panicked(m)) => assert!(m.contains("bad record"), "{m}"),
        r => panic!("want the panic, got {r:?}"),
    }
    // Two readers already: a third drainer cannot start.
    match Drainer::to_stderr(&log) {
        Err(DrainError::Log(shoal::Error::StoreFull(m))) => assert!(m.contains("readers"), "{m}"),
        r => panic!("want StoreFull, got {r:?}"),
    }
    // A file that cannot be opened.
    match Drainer::to_file(&log, d.path().join("no/such/dir.log"), 0, 0) {
        Err(DrainError::Io(e)) => assert_eq!(e.kind(), std::io::ErrorKind::NotFound),
        r => panic!("want NotFound, got {r:?}"),
    }
}

fn libc_enospc() -> i32 {
    28
}
