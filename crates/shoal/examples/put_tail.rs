//! The slowest puts of a growing map, and what the file did during each: how many bytes
//! its end moved by (a new arena run, a directory, a data chunk) and how many segments
//! the map gained (a split). It answers "what is the 1 ms put?" without a profiler.
//!
//!     cargo run --release -p shoal --example put_tail -- [KEYS] [SHOWN]
//!
//! KEYS (default 10,000,000) puts of `key:%012d` with 16-byte values into a fresh map, in
//! /dev/shm; each put is timed by thread CPU time (so time the host took from the process
//! is not counted); the SHOWN (default 20) slowest are listed with the file's growth and
//! the map's new segments, and the puts over 250 µs are counted by what they did.

use shoal::{OpenMode, Options, Store};
use std::time::Duration;

fn thread_cpu() -> Duration {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: clock_gettime writes one timespec into the pointer it is given.
    unsafe { libc::clock_gettime(libc::CLOCK_THREAD_CPUTIME_ID, &mut ts) };
    Duration::new(ts.tv_sec as u64, ts.tv_nsec as u32)
}

/// Page faults (minor, major) this thread has taken so far.
fn thread_faults() -> (i64, i64) {
    // SAFETY: an all-zero rusage is a valid value for getrusage to overwrite.
    let mut ru: libc::rusage = unsafe { std::mem::zeroed() };
    // SAFETY: getrusage writes one rusage into the pointer it is given.
    unsafe { libc::getrusage(libc::RUSAGE_THREAD, &mut ru) };
    (ru.ru_minflt, ru.ru_majflt)
}

fn main() {
    let mut args = std::env::args().skip(1);
    let keys: u64 = args.next().map_or(10_000_000, |a| a.parse().expect("KEYS"));
    let shown: usize = args.next().map_or(20, |a| a.parse().expect("SHOWN"));
    let path = format!("/dev/shm/shoal-put-tail-{}.shoal", std::process::id());
    let _ = std::fs::remove_file(&path);
    let s = Store::open_with(&path, &Options::default(), OpenMode::CreateNew).unwrap();
    let m = s.map("m").unwrap();
    // (µs, put index, file growth in bytes, new segments)
    let mut slow: Vec<(f64, u64, u64, u64, i64)> = Vec::new();
    let value = [7u8; 16];
    let mut end = s.stats().unwrap().file_size;
    let mut segs = m.stats().unwrap().segments;
    for i in 0..keys {
        let key = format!("key:{i:012}");
        let f0 = thread_faults();
        let t0 = thread_cpu();
        m.put(key.as_bytes(), &value).unwrap();
        let us = (thread_cpu() - t0).as_secs_f64() * 1e6;
        if us > 250.0 {
            let f1 = thread_faults();
            let (e, g) = (s.stats().unwrap().file_size, m.stats().unwrap().segments);
            slow.push((us, i, e - end, g - segs, f1.0 - f0.0 + f1.1 - f0.1));
        }
        // The file's size and the segment count are read only every 4096 puts (and after
        // a slow one): a growth between two reads is charged to no put, never to a wrong one.
        if i % 4096 == 0 || us > 250.0 {
            end = s.stats().unwrap().file_size;
            segs = m.stats().unwrap().segments;
        }
    }
    slow.sort_by(|a, b| b.0.total_cmp(&a.0));
    println!("{keys} puts; {} over 250 µs of thread CPU time", slow.len());
    println!(
        "{:>10} {:>10} {:>14} {:>9} {:>12}",
        "µs", "put #", "file grew, KiB", "new segs", "page faults"
    );
    for (us, i, grew, g, f) in slow.iter().take(shown) {
        println!("{us:>10.1} {i:>10} {:>14} {g:>9} {f:>12}", grew / 1024);
    }
    let grew = slow.iter().filter(|x| x.2 > 0).count();
    let split = slow.iter().filter(|x| x.3 > 0).count();
    println!(
        "of the {} over 250 µs: {grew} grew the file, {split} split a segment",
        slow.len()
    );
    drop(m);
    drop(s);
    let _ = std::fs::remove_file(&path);
}
