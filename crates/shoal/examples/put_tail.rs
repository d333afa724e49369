//! The slowest puts of a growing map, and what the file did during each: how many bytes
//! its end moved by (a new arena run, a directory, a data chunk) and how many segments
//! the map gained (a split). It answers "what is the 1 ms put?" without a profiler.
//!
//!     cargo run --release -p shoal --example put_tail -- [KEYS] [SHOWN] [--no-pretouch]
//!
//! KEYS (default 10,000,000) puts of `key:%012d` with 16-byte values into a fresh map, in
//! /dev/shm; each put is timed by thread CPU time (so time the host took from the process
//! is not counted); the SHOWN (default 20) slowest are listed with the file's growth and
//! the map's new segments, and the puts over 250 µs are counted by what they did, and so
//! are the puts that took a page fault (`--no-pretouch` turns `Options::pretouch` off,
//! to compare). Last,
//! the same run's measure of the machine: the first touch of each page of a fresh file
//! as large as the store, with no engine code (see `first_touches`).

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
    let pretouch = args.next().as_deref() != Some("--no-pretouch");
    let path = format!("/dev/shm/shoal-put-tail-{}.shoal", std::process::id());
    let _ = std::fs::remove_file(&path);
    let opts = Options {
        pretouch,
        ..Options::default()
    };
    let s = Store::open_with(&path, &opts, OpenMode::CreateNew).unwrap();
    let m = s.map("m").unwrap();
    // (µs, put index, file growth in bytes, new segments)
    let mut slow: Vec<(f64, u64, u64, u64, i64)> = Vec::new();
    let value = [7u8; 16];
    let mut end = s.stats().unwrap().file_size;
    let mut segs = m.stats().unwrap().segments;
    // Puts that took at least one page fault, and the faults they took.
    let (mut faulted, mut faults) = (0u64, 0i64);
    for i in 0..keys {
        let key = format!("key:{i:012}");
        let f0 = thread_faults();
        let t0 = thread_cpu();
        m.put(key.as_bytes(), &value).unwrap();
        let us = (thread_cpu() - t0).as_secs_f64() * 1e6;
        let f1 = thread_faults();
        let f = f1.0 - f0.0 + f1.1 - f0.1;
        faulted += u64::from(f > 0);
        faults += f;
        if us > 250.0 {
            let (e, g) = (s.stats().unwrap().file_size, m.stats().unwrap().segments);
            slow.push((us, i, e - end, g - segs, f));
        }
        // The file's size and the segment count are read only every 4096 puts (and after
        // a slow one): a growth between two reads is charged to no put, never to a wrong one.
        if i % 4096 == 0 || us > 250.0 {
            end = s.stats().unwrap().file_size;
            segs = m.stats().unwrap().segments;
        }
    }
    slow.sort_by(|a, b| b.0.total_cmp(&a.0));
    println!(
        "{keys} puts (pretouch {}); {} over 250 µs of thread CPU time; {faulted} took a page fault ({faults} faults)",
        if pretouch { "on" } else { "off" },
        slow.len()
    );
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
    if let Some(ns) = pretouch_cpu_ns() {
        println!(
            "the pretouch thread's CPU time: {:.1} ms (the puts' own: {:.1} ms)",
            ns as f64 / 1e6,
            thread_cpu().as_secs_f64() * 1e3
        );
    }
    let file_size = s.stats().unwrap().file_size;
    drop(m);
    drop(s);
    let _ = std::fs::remove_file(&path);
    first_touches(file_size);
}

/// CPU time of this process's pretouch thread (`/proc/self/task/*/schedstat`), if it runs.
fn pretouch_cpu_ns() -> Option<u64> {
    for t in std::fs::read_dir("/proc/self/task").ok()?.flatten() {
        let comm = std::fs::read_to_string(t.path().join("comm")).unwrap_or_default();
        if comm.trim() == "shoal-pretouch" {
            let stat = std::fs::read_to_string(t.path().join("schedstat")).ok()?;
            return stat.split_whitespace().next()?.parse().ok();
        }
    }
    None
}

/// The same run's measure of what the host adds: a fresh `/dev/shm` file as large as the
/// store, `fallocate`d as Shoal allocates, each of its pages touched once through a
/// mapping, each touch timed by thread CPU time. No engine code runs, so a touch over
/// 1 ms is a page fault the machine made slow (on these VMs the host takes back memory
/// the guest freed and faults it in again on first use), and a put slowed by one page
/// fault can take as long.
fn first_touches(len: u64) {
    use std::os::fd::AsRawFd;
    let path = format!("/dev/shm/shoal-put-tail-touch-{}", std::process::id());
    let f = std::fs::OpenOptions::new()
        .read(true)
        .write(true)
        .create_new(true)
        .open(&path)
        .unwrap();
    let _ = std::fs::remove_file(&path);
    let len = len as usize;
    // SAFETY: fallocate on a descriptor we own; it changes only the file.
    let r = unsafe { libc::fallocate(f.as_raw_fd(), 0, 0, len as libc::off_t) };
    assert_eq!(r, 0, "fallocate: {}", std::io::Error::last_os_error());
    // SAFETY: a new shared mapping of a file of `len` bytes that only this function
    // uses; it is unmapped below and no reference into it outlives that.
    let p = unsafe {
        libc::mmap(
            std::ptr::null_mut(),
            len,
            libc::PROT_READ | libc::PROT_WRITE,
            libc::MAP_SHARED,
            f.as_raw_fd(),
            0,
        )
    };
    assert_ne!(
        p,
        libc::MAP_FAILED,
        "mmap: {}",
        std::io::Error::last_os_error()
    );
    let (mut worst, mut over_250, mut over_1ms) = (0f64, 0, 0);
    for off in (0..len).step_by(4096) {
        let t0 = thread_cpu();
        // SAFETY: `off` < `len`: inside the mapping, which nothing else touches.
        unsafe { std::ptr::write_volatile((p as *mut u8).add(off), 1) };
        let us = (thread_cpu() - t0).as_secs_f64() * 1e6;
        worst = worst.max(us);
        over_250 += usize::from(us > 250.0);
        over_1ms += usize::from(us > 1000.0);
    }
    // SAFETY: the mapping made above, of `len` bytes; nothing refers into it any more.
    unsafe { libc::munmap(p, len) };
    println!(
        "first touches of {} pages of a fresh /dev/shm file (no engine code): worst {worst:.1} µs, {over_250} over 250 µs, {over_1ms} over 1 ms",
        len / 4096
    );
}
