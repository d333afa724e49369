//! The four ways from writers to the reader: Shoal's log and its three peers, each with
//! its writer side (a child process) and its reader side (the parent's draining thread).

use crate::stats::Check;
use crate::{sleep_until, sys, LINE};
use std::sync::atomic::{AtomicBool, Ordering::SeqCst};
use std::time::Duration;

/// A way from writers to one reader.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Way {
    /// Shoal's log (wait policy: a writer waits for room, so no record is lost).
    Shoal,
    /// `write(2)` with O_APPEND to one file, each writer its own descriptor.
    Append,
    /// A pipe to one reader; each line is one write of at most PIPE_BUF bytes (atomic).
    Pipe,
    /// A Unix datagram socket to one reader, one blocking send per line.
    Dgram,
}

/// Every way, in table order.
pub const WAYS: [Way; 4] = [Way::Shoal, Way::Append, Way::Pipe, Way::Dgram];

/// The log's ring, in records: far more than the reader lags by, so that writers rarely
/// wait for room.
const SLOTS: u64 = 16384;

impl Way {
    /// The way named `s` (as in `--ways`).
    pub fn parse(s: &str) -> Option<Way> {
        WAYS.into_iter().find(|w| w.name() == s)
    }
    /// Its name in `--ways`.
    pub fn name(self) -> &'static str {
        match self {
            Way::Shoal => "shoal",
            Way::Append => "append",
            Way::Pipe => "pipe",
            Way::Dgram => "dgram",
        }
    }
    /// Its name in the tables.
    pub fn label(self) -> &'static str {
        match self {
            Way::Shoal => "Shoal log",
            Way::Append => "O_APPEND file",
            Way::Pipe => "pipe",
            Way::Dgram => "Unix datagram socket",
        }
    }

    /// Makes what the writers write to (a fresh store, file, pipe or socket pair).
    pub fn setup(self, tag: &str) -> Result<Sink, String> {
        let e = |e: &dyn std::fmt::Display| format!("{}: {e}", self.name());
        match self {
            Way::Shoal => {
                let path = format!("{tag}.shoal");
                let _ = std::fs::remove_file(&path);
                let store = shoal::Store::open(&path).map_err(|x| e(&x))?;
                let log = store.log("bench", &opts()).map_err(|x| e(&x))?;
                let reader = log.reader("drain").map_err(|x| e(&x))?;
                Ok(Sink {
                    target: path.clone(),
                    source: Some(Source::Shoal(store, reader)),
                    close_after_spawn: None,
                    remove: Some(path),
                })
            }
            Way::Append => {
                let path = format!("{tag}.log");
                std::fs::write(&path, b"").map_err(|x| e(&x))?;
                let f = std::fs::File::open(&path).map_err(|x| e(&x))?;
                let watch = sys::watch_writes(&path).map_err(|x| e(&x))?;
                Ok(Sink {
                    target: path.clone(),
                    source: Some(Source::File(f, watch)),
                    close_after_spawn: None,
                    remove: Some(path),
                })
            }
            Way::Pipe => {
                let (r, w) = sys::pipe().map_err(|x| e(&x))?;
                Ok(Sink {
                    target: w.to_string(),
                    source: Some(Source::Fd(r, false)),
                    close_after_spawn: Some(w),
                    remove: None,
                })
            }
            Way::Dgram => {
                let (r, w) = sys::dgram_pair().map_err(|x| e(&x))?;
                sys::recv_timeout(r, 50).map_err(|x| e(&x))?;
                Ok(Sink {
                    target: w.to_string(),
                    source: Some(Source::Fd(r, true)),
                    close_after_spawn: Some(w),
                    remove: None,
                })
            }
        }
    }
}

fn opts() -> shoal::LogOptions {
    shoal::LogOptions::new(SLOTS, LINE).policy(shoal::FullPolicy::Wait)
}

/// Where the writers write (`target`: a path or an inherited descriptor's number) and
/// what the reader reads.
pub struct Sink {
    /// The writers' argument.
    pub target: String,
    source: Option<Source>,
    close_after_spawn: Option<i32>,
    remove: Option<String>,
}

impl Sink {
    /// The reader's side, for the draining thread.
    pub fn take_source(&mut self) -> Source {
        self.source.take().expect("taken once")
    }
    /// The parent's copy of the writers' descriptor is closed once they have theirs:
    /// a pipe's reader then sees its end when the last writer exits.
    pub fn writers_started(&mut self) {
        if let Some(w) = self.close_after_spawn.take() {
            sys::close(w);
        }
    }
    /// Removes the run's files.
    pub fn teardown(&mut self) {
        self.writers_started();
        if let Some(p) = self.remove.take() {
            let _ = std::fs::remove_file(p);
        }
    }
}

/// The reader's side of a way.
pub enum Source {
    /// The store (kept open) and the log's reader.
    Shoal(shoal::Store, shoal::LogReader),
    /// The file and the inotify descriptor watching it.
    File(std::fs::File, i32),
    /// A pipe's read end, or (true) a datagram socket.
    Fd(i32, bool),
}

/// A line's writer number, sequence number and timestamp.
fn fields(line: &[u8]) -> (u32, u64, u64) {
    let id = u32::from_le_bytes(line[0..4].try_into().expect("4 bytes"));
    let seq = u64::from_le_bytes(line[4..12].try_into().expect("8 bytes"));
    let ts = u64::from_le_bytes(line[12..20].try_into().expect("8 bytes"));
    (id, seq, ts)
}

/// The reader: drains `src` until the writers are `done` and nothing is left; checks
/// every record, and keeps the append-to-read latency of every `sample`-th record of each
/// writer. Returns the check, the latencies (ns) and the clock at the last record read.
pub fn drain(
    src: Source,
    writers: usize,
    sample: u64,
    done: &AtomicBool,
) -> Result<(Check, Vec<u32>, u64), String> {
    let mut check = Check::new(writers);
    let mut lat = Vec::new();
    let mut last = 0u64;
    let mut bad = None;
    let mut take = |line: &[u8], check: &mut Check, last: &mut u64| {
        let now = sys::mono_ns();
        *last = now;
        if line.len() != LINE {
            bad.get_or_insert(format!("a record of {} bytes", line.len()));
            return;
        }
        let (id, seq, ts) = fields(line);
        if !check.see(id, seq) {
            bad.get_or_insert(format!("a record of writer {id}"));
        }
        if seq % sample == 0 {
            lat.push(now.saturating_sub(ts).min(u32::MAX as u64) as u32);
        }
    };
    match src {
        Source::Shoal(_store, mut r) => {
            // Batches of up to 1,024 records, as a pipe's reader takes 64 KiB per `read`.
            let mut batch = shoal::RecordBatch::new();
            loop {
                let fin = done.load(SeqCst);
                match r.read_batch_wait(&mut batch, 1024, Duration::from_millis(50)) {
                    Ok(0) if fin => break,
                    Ok(_) => {
                        for rec in &batch {
                            take(rec.message(), &mut check, &mut last);
                        }
                    }
                    Err(e) => return Err(format!("reading the log: {e}")),
                }
            }
        }
        Source::File(mut f, watch) => {
            use std::io::Read;
            let mut buf = vec![0u8; 1 << 16];
            let mut have = 0usize;
            let mut ev = [0u8; 4096];
            loop {
                let fin = done.load(SeqCst);
                let n = f.read(&mut buf[have..]).map_err(|e| e.to_string())?;
                if n == 0 {
                    if fin {
                        break;
                    }
                    // A tailing reader sleeps until the file changes, as `tail -f` does.
                    if sys::wait_readable(watch, 50).map_err(|e| e.to_string())? {
                        let _ = sys::read_some(watch, &mut ev);
                    }
                    continue;
                }
                have += n;
                let whole = have / LINE * LINE;
                for line in buf[..whole].chunks_exact(LINE) {
                    take(line, &mut check, &mut last);
                }
                buf.copy_within(whole..have, 0);
                have -= whole;
            }
            sys::close(watch);
        }
        Source::Fd(fd, dgram) => {
            let mut buf = vec![0u8; 1 << 16];
            let mut have = 0usize;
            loop {
                let fin = done.load(SeqCst);
                if dgram {
                    match sys::read_some(fd, &mut buf).map_err(|e| e.to_string())? {
                        Some(n) => take(&buf[..n], &mut check, &mut last),
                        None if fin => break,
                        None => {}
                    }
                    continue;
                }
                match sys::read_some(fd, &mut buf[have..]).map_err(|e| e.to_string())? {
                    Some(0) => break,
                    Some(n) => {
                        have += n;
                        let whole = have / LINE * LINE;
                        for line in buf[..whole].chunks_exact(LINE) {
                            take(line, &mut check, &mut last);
                        }
                        buf.copy_within(whole..have, 0);
                        have -= whole;
                    }
                    None => {}
                }
            }
            sys::close(fd);
        }
    }
    match bad {
        Some(b) => Err(format!("the reader got {b}")),
        None => Ok((check, lat, last)),
    }
}

/// A writer process: `WAY ID START STOP PACE_US TARGET LATFILE`. Appends lines from
/// START to STOP (CLOCK_MONOTONIC ns), writes its append latencies to LATFILE and prints
/// how many lines it wrote.
pub fn writer_main(args: &[String]) -> Result<(), String> {
    let [way, id, start, stop, pace, target, latfile] = args else {
        return Err("--writer WAY ID START STOP PACE_US TARGET LATFILE".into());
    };
    let way = Way::parse(way).ok_or("unknown way")?;
    let n = |s: &String| s.parse::<u64>().map_err(|_| format!("not a number: {s}"));
    let (id, start, stop, pace) = (n(id)? as u32, n(start)?, n(stop)?, n(pace)?);
    enum Out {
        // The store is held so that it stays open while the log is written.
        Log(#[allow(dead_code)] shoal::Store, shoal::Log),
        Fd(i32, bool),
    }
    let out = match way {
        Way::Shoal => {
            let s = shoal::Store::open(target).map_err(|e| e.to_string())?;
            let l = s.log("bench", &opts()).map_err(|e| e.to_string())?;
            Out::Log(s, l)
        }
        Way::Append => Out::Fd(sys::open_append(target).map_err(|e| e.to_string())?, true),
        Way::Pipe | Way::Dgram => Out::Fd(n(target)? as i32, false),
    };
    #[cfg(feature = "failpoints")]
    if std::env::var_os("FAILPOINTS").is_some() {
        shoal::failpoints::setup();
    }
    let mut line = [b'x'; LINE];
    line[LINE - 1] = b'\n';
    line[0..4].copy_from_slice(&id.to_le_bytes());
    let mut lat = Vec::new();
    sleep_until(start);
    let mut seq = 0u64;
    loop {
        if (pace > 0 || seq % 64 == 0) && sys::mono_ns() >= stop {
            break;
        }
        line[4..12].copy_from_slice(&seq.to_le_bytes());
        let t0 = sys::mono_ns();
        line[12..20].copy_from_slice(&t0.to_le_bytes());
        match &out {
            Out::Log(_, l) => match l.append(0, &line) {
                Ok(Some(_)) => {}
                Ok(None) => return Err("the log dropped a record".into()),
                Err(e) => return Err(format!("append: {e}")),
            },
            Out::Fd(fd, _) => sys::write_all_once(*fd, &line).map_err(|e| e.to_string())?,
        }
        if pace > 0 || seq % 4 == 0 {
            lat.push((sys::mono_ns() - t0).min(u32::MAX as u64) as u32);
        }
        seq += 1;
        if pace > 0 {
            std::thread::sleep(Duration::from_micros(pace));
        }
    }
    if let Out::Fd(fd, true) = out {
        sys::close(fd);
    }
    let bytes: Vec<u8> = lat.iter().flat_map(|v| v.to_le_bytes()).collect();
    std::fs::write(latfile, bytes).map_err(|e| e.to_string())?;
    println!("{seq}");
    Ok(())
}

/// A dead writer's hole, `trials` times: a writer process stopped by the `log.reserved`
/// fail point (it holds a sequence number it has not published) is SIGKILLed while a
/// later record is already published; the reader, waiting in `read_wait`, must pass the
/// hole. Reports the delay from the kill to the reader having the later record.
#[cfg(feature = "failpoints")]
pub fn hole(dir: &str, trials: usize) -> Result<(), String> {
    use std::process::{Command, Stdio};
    let path = format!("{dir}/shoal-logbench-{}-hole.shoal", std::process::id());
    let _ = std::fs::remove_file(&path);
    let store = shoal::Store::open(&path).map_err(|e| e.to_string())?;
    let log = store.log("bench", &opts()).map_err(|e| e.to_string())?;
    let mut r = log.reader("drain").map_err(|e| e.to_string())?;
    let exe = std::env::current_exe().map_err(|e| e.to_string())?;
    let mut delays = Vec::new();
    for t in 0..trials {
        let before = log.stats().map_err(|e| e.to_string())?.appended;
        let mut kid = Command::new(&exe)
            .args(["--writer", "shoal", "0", "0", &u64::MAX.to_string(), "0"])
            .args([&path, "/dev/null"])
            .env("FAILPOINTS", "log.reserved=pause")
            .stdout(Stdio::null())
            .spawn()
            .map_err(|e| e.to_string())?;
        // Wait (bounded) for the writer to hold its number.
        let until = std::time::Instant::now() + Duration::from_secs(30);
        while log.stats().map_err(|e| e.to_string())?.appended == before {
            if std::time::Instant::now() > until {
                let _ = kid.kill();
                return Err("the hole writer never reserved".into());
            }
            std::thread::sleep(Duration::from_millis(1));
        }
        let later = log
            .append(0, b"after the hole")
            .map_err(|e| e.to_string())?
            .ok_or("dropped")?;
        // The reader waits for the live writer: nothing comes.
        if r.read_wait(Duration::from_millis(20))
            .map_err(|e| e.to_string())?
            .is_some()
        {
            return Err("the reader passed a live writer's record".into());
        }
        let t0 = std::time::Instant::now();
        sys::kill9(kid.id());
        let got = r
            .read_wait(Duration::from_secs(30))
            .map_err(|e| e.to_string())?;
        let d = t0.elapsed();
        let _ = kid.wait();
        match got {
            Some(rec) if rec.seq() == later => delays.push(d.as_secs_f64() * 1e3),
            _ => return Err(format!("trial {t}: the reader did not pass the hole")),
        }
    }
    let skipped = r.skipped();
    drop(r);
    drop(store);
    let _ = std::fs::remove_file(&path);
    let (m, lo, hi) = crate::stats::spread(&delays);
    println!(
        "\n## A dead writer's hole\n\n{trials} writers SIGKILLed between reserve and publish \
         (fail point log.reserved): the reader, in read_wait, had the next record \
         {m:.1} ms (median) after the kill, {lo:.1} to {hi:.1} ms; holes counted: {skipped}"
    );
    if skipped != trials as u64 {
        return Err(format!("{skipped} holes counted for {trials} kills"));
    }
    Ok(())
}
