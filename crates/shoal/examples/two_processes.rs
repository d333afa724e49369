//! Two processes share one map: this program starts a copy of itself as a reader, then
//! writes keys that the reader sees appear, live, through the shared file.
//!
//! `cargo run --release -p shoal --example two_processes [STORE]` (default: a store in
//! /dev/shm, removed at the end).

use std::process::{Command, ExitCode};
use std::time::{Duration, Instant};

const KEYS: u64 = 200_000;

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().collect();
    if args.get(1).map(String::as_str) == Some("--reader") {
        return reader(&args[2]);
    }
    let path = args
        .get(1)
        .cloned()
        .unwrap_or_else(|| format!("/dev/shm/shoal-demo-{}.shoal", std::process::id()));
    match writer(&path) {
        Ok(code) => code,
        Err(e) => {
            eprintln!("writer: {e}");
            ExitCode::FAILURE
        }
    }
}

fn writer(path: &str) -> shoal::Result<ExitCode> {
    let _ = shoal::Store::destroy(path);
    let store = shoal::Store::open(path)?;
    let map = store.map("demo")?;
    println!("writer (pid {}): store {path}", std::process::id());
    let mut child = Command::new(std::env::current_exe().expect("own path"))
        .args(["--reader", path])
        .spawn()
        .expect("start the reader process");
    let written = (|| -> shoal::Result<()> {
        let t = Instant::now();
        for i in 0..KEYS {
            map.put(format!("key:{i:012}").as_bytes(), &i.to_le_bytes())?;
        }
        let dt = t.elapsed();
        println!(
            "writer: put {KEYS} keys in {:.1} ms ({:.2} M puts/s)",
            dt.as_secs_f64() * 1e3,
            KEYS as f64 / dt.as_secs_f64() / 1e6
        );
        map.put(b"done", b"1")?;
        Ok(())
    })();
    if written.is_err() {
        let _ = child.kill();
    }
    let ok = child.wait().map(|s| s.success()).unwrap_or(false);
    written?;
    let report = store.check()?;
    println!("check: {report}");
    drop(map);
    drop(store);
    shoal::Store::destroy(path)?;
    Ok(if ok && report.is_ok() {
        ExitCode::SUCCESS
    } else {
        ExitCode::FAILURE
    })
}

fn reader(path: &str) -> ExitCode {
    let run = || -> shoal::Result<bool> {
        let store = shoal::Store::open_existing(path)?;
        let map = store.map("demo")?;
        let start = Instant::now();
        while map.get(b"done")?.is_none() {
            if start.elapsed() > Duration::from_secs(60) {
                eprintln!("reader: gave up waiting for the writer");
                return Ok(false);
            }
            std::thread::sleep(Duration::from_millis(1));
        }
        let t = Instant::now();
        let mut buf = Vec::new();
        for i in 0..KEYS {
            if !map.get_into(format!("key:{i:012}").as_bytes(), &mut buf)? || buf != i.to_le_bytes()
            {
                eprintln!("reader: key {i} missing or wrong");
                return Ok(false);
            }
        }
        let dt = t.elapsed();
        println!(
            "reader (pid {}): read all {KEYS} keys the writer put, {:.2} M gets/s",
            std::process::id(),
            KEYS as f64 / dt.as_secs_f64() / 1e6
        );
        Ok(true)
    };
    match run() {
        Ok(true) => ExitCode::SUCCESS,
        Ok(false) => ExitCode::FAILURE,
        Err(e) => {
            eprintln!("reader: {e}");
            ExitCode::FAILURE
        }
    }
}
