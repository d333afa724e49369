//! The `log` backend: records of several threads of two processes come out of the log
//! with their level, message, target and key/values, each once and in order per thread;
//! the level filter holds; a record too large is cut and says so; a failed append is
//! counted.

mod common;

use common::{drain_two_writers, the_cut_record, writer_log};
use shoal::{LogOptions, Store};
use shoal_log::{level, ShoalLogger};
use std::time::Duration;

const THREADS: u64 = 3;
const RECORDS: u64 = 500;

#[test]
#[ignore = "run as a child by the tests of this file"]
fn log_writer() {
    let Some((p, log)) = writer_log() else {
        return;
    };
    ShoalLogger::new(log, log::LevelFilter::Debug)
        .with_timeout(Duration::from_secs(120))
        .install()
        .unwrap();
    std::thread::scope(|sc| {
        for t in 0..THREADS {
            sc.spawn(move || {
                for i in 0..RECORDS {
                    match i % 3 {
                        0 => log::info!(target: "app::a", proc = p, thread = t, i; "record {i}"),
                        1 => log::debug!(proc = p, thread = t, i, flag = true; "record {i}"),
                        _ => log::error!(target: "app::c", proc = p, thread = t, i; "record {i}"),
                    }
                    log::trace!("below the logger's level: not written");
                }
            });
        }
    });
}

#[test]
fn records_of_several_threads_of_two_processes_come_out_with_their_key_values() {
    drain_two_writers(
        "log_writer",
        THREADS * RECORDS,
        THREADS,
        |rec, f, (_, _, i)| {
            assert_eq!(rec.message(), format!("record {i}").as_bytes());
            let (lvl, target) = match i % 3 {
                0 => (level::INFO, "app::a"),
                1 => (level::DEBUG, "log_backend"),
                _ => (level::ERROR, "app::c"),
            };
            assert_eq!((rec.level(), f[&b"target"[..]]), (lvl, target));
            if i % 3 == 1 {
                assert_eq!(f[&b"flag"[..]], "true");
            }
        },
    );
    // The trace records were below the logger's level: none was written.
}

#[test]
fn a_record_too_large_is_cut_to_fit_and_failures_are_counted() {
    let d = tempfile::tempdir_in("/dev/shm").unwrap();
    let s = Store::open(d.path().join("l.shoal")).unwrap();
    let log = s.log("app", &LogOptions::new(16, 100)).unwrap();
    let mut r = log.reader("drain").unwrap();
    let logger = ShoalLogger::new(log.clone(), log::LevelFilter::Info);
    let long = "x".repeat(300);
    let emit = |level: log::Level, msg: &str| {
        let kvs = [("big", "y".repeat(200)), ("k", "v".to_string())];
        let kvs: Vec<(&str, &str)> = kvs.iter().map(|(k, v)| (*k, v.as_str())).collect();
        log::Log::log(
            &logger,
            &log::Record::builder()
                .level(level)
                .target("t")
                .args(format_args!("{msg}"))
                .key_values(&kvs.as_slice())
                .build(),
        );
    };
    emit(log::Level::Debug, "below the level");
    emit(log::Level::Warn, &long);
    let (rec, size) = the_cut_record(&mut r, "the debug record");
    // Fields go from the last while they leave no room (both after the target), then
    // the message is cut.
    let f = rec.fields();
    assert_eq!(f[0], (b"target".to_vec(), b"t".to_vec()));
    assert_eq!(f[1].0, b"truncated", "{f:?}");
    let cut: usize = std::str::from_utf8(&f[1].1).unwrap().parse().unwrap();
    let whole = 300 + (8 + 6 + 1) + (8 + 3 + 200) + (8 + 1 + 1);
    assert_eq!(cut, whole - size + (8 + 9 + f[1].1.len()));
    assert!(!rec.message().is_empty() && rec.message().iter().all(|&b| b == b'x'));
    assert_eq!(rec.level(), level::WARNING);
    assert_eq!(logger.failed(), 0);
    s.drop_map("app").unwrap();
    emit(log::Level::Error, "into a dropped log");
    assert_eq!(logger.failed(), 1);
}
