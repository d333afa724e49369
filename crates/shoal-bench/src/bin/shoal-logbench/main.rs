//! `shoal-logbench`: many writer processes, one draining reader, through Shoal's log and
//! through the ways Unix processes usually share a log: `write(2)` with O_APPEND to one
//! file, a pipe to one reader, and a Unix datagram socket to one reader (syslog's way).
//!
//! Every writer is a process (this binary run again as `--writer`); the reader is a
//! thread of the parent, which does nothing else while the writers run. Lines are 100
//! bytes: the writer's number, its sequence number and a CLOCK_MONOTONIC timestamp, then
//! padding. For each writer count and each way it measures, in one run:
//! - records/s in a flood (every writer appends as fast as it can for `--secs`), over
//!   `--reps` repeats: the median, least and greatest; the rate counts from the common
//!   start to the reader's last record, so a reader that falls behind costs;
//! - append latency p50/p99: the time of the append call (every 4th call of the flood);
//! - append-to-read latency p50/p99: the reader's clock when it has the record minus the
//!   writer's timestamp, in the flood (every 8th record, a queue under load) and paced
//!   (each writer sleeps `--pace-us` between records, so the reader sleeps between them
//!   in `read_wait`, `read` on a pipe, `recv`, or `poll` on inotify for the file);
//! - correctness: the reader checks every record of every writer arrives once and in
//!   the writer's order; the run fails on a lost or repeated record (datagram drops are
//!   counted, not failed: blocking sends are used, so on Linux none are expected).
//!
//! Built with the `failpoints` feature, `--hole N` also measures a dead writer's hole N
//! times: a writer stopped by a fail point between reserve and publish is SIGKILLed, and
//! the delay from the kill to the reader having the next (published) record is reported.
//!
//! `cargo run --release -p shoal-bench --bin shoal-logbench`

mod stats;
mod sys;
mod way;

use stats::{pct, spread, us, Check};
use std::process::{Command, ExitCode, Stdio};
use std::sync::atomic::{AtomicBool, Ordering::SeqCst};
use std::sync::Arc;
use std::time::Duration;
use way::{Way, WAYS};

/// Bytes of every line.
pub const LINE: usize = 100;

const HELP: &str = "\
shoal-logbench: W writer processes and one reader, through Shoal's log, O_APPEND writes to
one file, a pipe and a Unix datagram socket.

USAGE: shoal-logbench [--writers 1,2,4,8] [--secs S] [--reps R] [--pace-us P]
                      [--paced-secs S] [--dir DIR] [--ways shoal,append,pipe,dgram]
                      [--hole N]

  --writers    writer process counts (default 1,2,4,8)
  --secs       seconds of each flood (default 2)
  --reps       floods per way and writer count; median and spread reported (default 3)
  --pace-us    sleep between a paced writer's records, microseconds (default 200)
  --paced-secs seconds of the paced phase (default 1)
  --dir        where the store and the appended file live (default /dev/shm)
  --hole N     with the failpoints feature: measure a dead writer's hole N times

Exits non-zero if any record is lost, repeated or out of its writer's order.";

struct Opts {
    writers: Vec<usize>,
    secs: f64,
    reps: usize,
    pace_us: u64,
    paced_secs: f64,
    dir: String,
    ways: Vec<Way>,
    hole: usize,
}

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let r = if args.first().map(String::as_str) == Some("--writer") {
        way::writer_main(&args[1..])
    } else {
        run(&args)
    };
    match r {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("shoal-logbench: {e}");
            ExitCode::FAILURE
        }
    }
}

fn parse(args: &[String]) -> Result<Opts, String> {
    let mut o = Opts {
        writers: vec![1, 2, 4, 8],
        secs: 2.0,
        reps: 3,
        pace_us: 200,
        paced_secs: 1.0,
        dir: "/dev/shm".into(),
        ways: WAYS.to_vec(),
        hole: 0,
    };
    let mut it = args.iter();
    while let Some(a) = it.next() {
        if a == "--help" || a == "-h" {
            println!("{HELP}");
            std::process::exit(0);
        }
        let v = it.next().ok_or_else(|| format!("{a} needs a value"))?;
        let num = |v: &str| {
            v.parse::<f64>()
                .map_err(|_| format!("{a}: not a number: {v}"))
        };
        match a.as_str() {
            "--writers" => {
                o.writers = v
                    .split(',')
                    .map(|w| w.parse().map_err(|_| format!("--writers: {w}")))
                    .collect::<Result<_, _>>()?
            }
            "--secs" => o.secs = num(v)?,
            "--reps" => o.reps = num(v)? as usize,
            "--pace-us" => o.pace_us = num(v)? as u64,
            "--paced-secs" => o.paced_secs = num(v)?,
            "--dir" => o.dir = v.clone(),
            "--ways" => {
                o.ways = v
                    .split(',')
                    .map(|w| Way::parse(w).ok_or_else(|| format!("--ways: unknown {w}")))
                    .collect::<Result<_, _>>()?
            }
            "--hole" => o.hole = num(v)? as usize,
            _ => return Err(format!("unknown argument {a}\n\n{HELP}")),
        }
    }
    if o.writers.iter().any(|w| *w == 0 || *w > 64) || o.reps == 0 || o.secs <= 0.0 {
        return Err("writers 1 to 64, reps >= 1 and secs > 0".into());
    }
    Ok(o)
}

/// What one run of W writers through one way gave.
struct RunResult {
    rate: f64,
    append: Vec<u32>,
    to_read: Vec<u32>,
    check: Check,
}

/// Runs `w` writers through `way` for `secs`, sleeping `pace_us` between records (0:
/// flood), with the parent's reader draining.
fn one_run(o: &Opts, way: Way, w: usize, secs: f64, pace_us: u64) -> Result<RunResult, String> {
    let tag = format!("{}/shoal-logbench-{}", o.dir, std::process::id());
    let mut sink = way.setup(&tag)?;
    let start = sys::mono_ns() + 300_000_000;
    let stop = start + (secs * 1e9) as u64;
    let done = Arc::new(AtomicBool::new(false));
    let sample = if pace_us > 0 { 1 } else { 8 };
    let reader = {
        let done = done.clone();
        let src = sink.take_source();
        std::thread::spawn(move || way::drain(src, w, sample, &done))
    };
    let exe = std::env::current_exe().map_err(|e| e.to_string())?;
    let mut kids = Vec::new();
    for id in 0..w {
        let lat = format!("{tag}-{id}.lat");
        let c = Command::new(&exe)
            .args([
                "--writer".to_string(),
                way.name().into(),
                id.to_string(),
                start.to_string(),
                stop.to_string(),
                pace_us.to_string(),
                sink.target.clone(),
                lat.clone(),
            ])
            .stdout(Stdio::piped())
            .spawn()
            .map_err(|e| format!("spawning a writer: {e}"))?;
        kids.push((c, lat));
    }
    sink.writers_started();
    let mut written = Vec::new();
    let mut append = Vec::new();
    let mut failed = None;
    for (c, lat) in kids {
        let out = c.wait_with_output().map_err(|e| e.to_string())?;
        let n = String::from_utf8_lossy(&out.stdout).trim().parse::<u64>();
        match (out.status.success(), n) {
            (true, Ok(n)) => written.push(n),
            _ => {
                failed.get_or_insert(format!("a {} writer failed: {}", way.name(), out.status));
                written.push(0);
            }
        }
        if let Ok(b) = std::fs::read(&lat) {
            append.extend(
                b.chunks_exact(4)
                    .map(|c| u32::from_le_bytes(c.try_into().unwrap())),
            );
        }
        let _ = std::fs::remove_file(&lat);
    }
    done.store(true, SeqCst);
    let (mut check, to_read, last) = reader
        .join()
        .map_err(|_| "the reader panicked".to_string())??;
    sink.teardown();
    if let Some(f) = failed {
        return Err(f);
    }
    check.finish(&written);
    let rate = check.got as f64 / (last.saturating_sub(start).max(1) as f64 / 1e9);
    Ok(RunResult {
        rate,
        append,
        to_read,
        check,
    })
}

/// One way at one writer count: the flood repeats and the paced run, summed up.
struct Row {
    way: Way,
    rates: Vec<f64>,
    append: Vec<u32>,
    flood_to_read: Vec<u32>,
    paced_to_read: Vec<u32>,
    lost: u64,
    disorder: u64,
    records: u64,
}

fn run(args: &[String]) -> Result<(), String> {
    let o = parse(args)?;
    println!(
        "# shoal-logbench: {LINE}-byte lines, floods of {} s x {} reps, paced {} s at one \
         record per {} us per writer, files in {}",
        o.secs, o.reps, o.paced_secs, o.pace_us, o.dir
    );
    let mut bad = Vec::new();
    for &w in &o.writers {
        let mut rows = Vec::new();
        for &way in &o.ways {
            let mut row = Row {
                way,
                rates: Vec::new(),
                append: Vec::new(),
                flood_to_read: Vec::new(),
                paced_to_read: Vec::new(),
                lost: 0,
                disorder: 0,
                records: 0,
            };
            let tally = |r: &RunResult, row: &mut Row| {
                row.lost += r.check.gaps;
                row.disorder += r.check.disorder;
                row.records += r.check.got;
            };
            for _ in 0..o.reps {
                let r = one_run(&o, way, w, o.secs, 0)?;
                tally(&r, &mut row);
                row.rates.push(r.rate);
                row.append.extend(r.append);
                row.flood_to_read.extend(r.to_read);
            }
            let r = one_run(&o, way, w, o.paced_secs, o.pace_us)?;
            tally(&r, &mut row);
            row.paced_to_read.extend(r.to_read);
            if row.disorder > 0 || (row.lost > 0 && way != Way::Dgram) {
                bad.push(format!(
                    "{} writers, {}: {} lost, {} repeated or out of order",
                    w,
                    way.name(),
                    row.lost,
                    row.disorder
                ));
            }
            eprintln!("  {} writers, {}: done", w, way.name());
            rows.push(row);
        }
        print_table(w, &mut rows);
    }
    if o.hole > 0 {
        hole(&o)?;
    }
    if bad.is_empty() {
        println!("\nno record lost, repeated or out of order");
        Ok(())
    } else {
        Err(bad.join("; "))
    }
}

fn print_table(w: usize, rows: &mut [Row]) {
    let shoal = rows
        .iter()
        .find(|r| r.way == Way::Shoal)
        .map(|r| spread(&r.rates).0);
    println!(
        "\n## {w} writer process{}\n",
        if w == 1 { "" } else { "es" }
    );
    println!(
        "| way | records/s median [min-max] | Shoal's log x | append p50 / p99 us | \
         append-to-read, flood, p50 / p99 us | append-to-read, paced, p50 / p99 us | \
         records read | lost | repeated or out of order |"
    );
    println!("|---|---|---|---|---|---|---|---|---|");
    for r in rows.iter_mut() {
        let (m, lo, hi) = spread(&r.rates);
        let ratio = match shoal {
            Some(s) if r.way != Way::Shoal && m > 0.0 => format!("{:.1}", s / m),
            _ => "-".into(),
        };
        println!(
            "| {} | {:.0} [{:.0}-{:.0}] | {} | {} / {} | {} / {} | {} / {} | {} | {} | {} |",
            r.way.label(),
            m,
            lo,
            hi,
            ratio,
            us(pct(&mut r.append, 50.0)),
            us(pct(&mut r.append, 99.0)),
            us(pct(&mut r.flood_to_read, 50.0)),
            us(pct(&mut r.flood_to_read, 99.0)),
            us(pct(&mut r.paced_to_read, 50.0)),
            us(pct(&mut r.paced_to_read, 99.0)),
            r.records,
            r.lost,
            r.disorder
        );
    }
}

#[cfg(feature = "failpoints")]
fn hole(o: &Opts) -> Result<(), String> {
    way::hole(&o.dir, o.hole)
}

#[cfg(not(feature = "failpoints"))]
fn hole(_: &Opts) -> Result<(), String> {
    Err("--hole needs a build with the failpoints feature \
         (cargo run --release -p shoal-bench --features failpoints --bin shoal-logbench)"
        .into())
}

/// Sleeps until CLOCK_MONOTONIC reaches `t` (nanoseconds).
pub fn sleep_until(t: u64) {
    loop {
        let now = sys::mono_ns();
        if now >= t {
            return;
        }
        std::thread::sleep(Duration::from_nanos((t - now).min(10_000_000)));
    }
}
