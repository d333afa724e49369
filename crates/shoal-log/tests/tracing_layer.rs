//! The `tracing` layer: events of several threads of two processes come out of the log
//! with their level, message, target and fields, each once and in order per thread; a
//! record too large is cut and says so; a failed append is counted.

mod common;

use common::{drain_two_writers, the_cut_record, writer_log};
use shoal::{LogOptions, Store};
use shoal_log::{level, ShoalLayer};
use std::time::Duration;
use tracing_subscriber::layer::SubscriberExt;

const THREADS: u64 = 3;
const EVENTS: u64 = 500;

#[test]
#[ignore = "run as a child by the tests of this file"]
fn tracing_writer() {
    let Some((p, log)) = writer_log() else {
        return;
    };
    let layer = ShoalLayer::new(log).with_timeout(Duration::from_secs(120));
    tracing::subscriber::set_global_default(tracing_subscriber::registry().with(layer)).unwrap();
    std::thread::scope(|sc| {
        for t in 0..THREADS {
            sc.spawn(move || {
                for i in 0..EVENTS {
                    match i % 3 {
                        0 => tracing::info!(proc = p, thread = t, i, ok = true, "event {i}"),
                        1 => tracing::warn!(proc = p, thread = t, i, name = "w", "event {i}"),
                        _ => tracing::error!(proc = p, thread = t, i, err = ?(p, t), "event {i}"),
                    }
                }
            });
        }
    });
}

#[test]
fn events_of_several_threads_of_two_processes_come_out_with_their_fields() {
    drain_two_writers(
        "tracing_writer",
        THREADS * EVENTS,
        THREADS,
        |rec, f, (p, t, i)| {
            assert_eq!(rec.message(), format!("event {i}").as_bytes());
            assert_eq!(f[&b"target"[..]], "tracing_layer");
            match i % 3 {
                0 => {
                    assert_eq!(rec.level(), level::INFO);
                    assert_eq!(f[&b"ok"[..]], "true");
                }
                1 => {
                    assert_eq!(rec.level(), level::WARNING);
                    assert_eq!(f[&b"name"[..]], "w");
                }
                _ => {
                    assert_eq!(rec.level(), level::ERROR);
                    assert_eq!(f[&b"err"[..]], format!("({p}, {t})"));
                }
            }
        },
    );
}

#[test]
fn a_record_too_large_is_cut_to_fit_and_failures_are_counted() {
    let d = tempfile::tempdir_in("/dev/shm").unwrap();
    let s = Store::open(d.path().join("l.shoal")).unwrap();
    let log = s.log("app", &LogOptions::new(16, 100)).unwrap();
    let mut r = log.reader("drain").unwrap();
    let layer = ShoalLayer::new(log.clone()).with_max_level(tracing::Level::DEBUG);
    let sub = tracing_subscriber::registry().with(layer.clone());
    tracing::subscriber::with_default(sub, || {
        let long = "é".repeat(100);
        // The message's room is odd: the cut must step back to a character's start.
        tracing::debug!(k = "vv", "{long}");
        tracing::trace!("above the layer's level: not written");
    });
    let (rec, _) = the_cut_record(&mut r, "the trace event");
    let msg = std::str::from_utf8(rec.message()).expect("cut at a character boundary");
    assert!(msg.chars().all(|c| c == 'é') && !msg.is_empty(), "{msg}");
    let f = rec.fields();
    assert_eq!(f[0], (b"target".to_vec(), b"tracing_layer".to_vec()));
    assert_eq!(f[1], (b"k".to_vec(), b"vv".to_vec()));
    assert_eq!(f[2].0, b"truncated");
    let cut: usize = std::str::from_utf8(&f[2].1).unwrap().parse().unwrap();
    assert_eq!(cut, 200 - msg.len());
    assert_eq!(layer.failed(), 0);
    // A dropped log: the append fails, and is counted.
    s.drop_map("app").unwrap();
    tracing::subscriber::with_default(tracing_subscriber::registry().with(layer.clone()), || {
        tracing::info!("into a dropped log");
    });
    assert_eq!(layer.failed(), 1);
}
