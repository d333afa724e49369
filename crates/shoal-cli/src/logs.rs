//! `shoal log tail`: prints the records of a log, and with `--follow` the new ones as
//! they come; `shoal log drain`: writes them to a file rotated by size, until Ctrl-C.
//! Both format records with `shoal_log::Format`.

use crate::fail::Fail;
use crate::{cmds, signal};
use shoal::LogReader;
use std::io::{BufWriter, Write};
use std::path::Path;
use std::time::Duration;

/// How records are printed.
#[derive(clap::ValueEnum, Clone, Copy, Debug, PartialEq, Eq)]
pub enum Format {
    /// One line each: sequence number, UTC time with nanoseconds, pid, tid, level,
    /// message, then key=value fields (bytes that are not printable UTF-8 escaped)
    Text,
    /// One JSON object a line: seq, time_ns, pid, tid, level, message, fields (in the
    /// writer's order; strings, invalid UTF-8 replaced by U+FFFD)
    Json,
}

impl From<Format> for shoal_log::Format {
    fn from(f: Format) -> shoal_log::Format {
        match f {
            Format::Text => shoal_log::Format::Text,
            Format::Json => shoal_log::Format::Json,
        }
    }
}

pub const TAIL_HELP: &str = "Print the records of LOG, oldest first, then with --follow \
    the new ones as they are published, until Ctrl-C.\n\n\
    Without --reader, tail reads through a reader of its own (named tail-PID) that starts at \
    the oldest record the ring holds and is removed when tail exits; under a log's wait \
    policy it holds writers back like any reader while it runs. With --reader NAME it reads \
    as that named reader: from its cursor, moving it (a drainer that resumes where the last \
    one stopped).\n\n\
    Records a reader missed (overwritten before it read them) and holes (records whose \
    writer died before publishing them) are reported on stderr at the end.";

/// `shoal log tail`.
pub fn tail(
    store: &Path,
    log: &str,
    follow: bool,
    format: Format,
    reader: Option<&str>,
) -> Result<(), Fail> {
    let s = cmds::open_existing(store)?;
    let log = open_log(&s, log)?;
    let own = format!("tail-{}", std::process::id());
    let name = reader.unwrap_or(&own);
    let mut r = log.reader(name)?;
    signal::catch_interrupts();
    let res = print_records(&mut r, follow, format);
    let (missed, skipped) = (r.missed(), r.skipped());
    if reader.is_none() {
        let _ = log.remove_reader(name);
    }
    res?;
    if missed > 0 || skipped > 0 {
        eprintln!(
            "{missed} records overwritten before they were read; {skipped} holes (writers \
             that died before publishing)"
        );
    }
    Ok(())
}

fn open_log(s: &shoal::Store, log: &str) -> Result<shoal::Log, Fail> {
    s.open_log(log).map_err(|e| match e {
        shoal::Error::NotFound(_) => Fail::err(format!("no log {log:?} in the store")),
        e => e.into(),
    })
}

fn print_records(r: &mut LogReader, follow: bool, format: Format) -> Result<(), Fail> {
    let format = shoal_log::Format::from(format);
    let stdout = std::io::stdout();
    let mut out = BufWriter::new(stdout.lock());
    loop {
        if signal::interrupted() {
            break;
        }
        let rec = if follow {
            r.read_wait(Duration::from_millis(100))?
        } else {
            r.read()?
        };
        match rec {
            Some(rec) => {
                writeln!(out, "{}", format.line(&rec))?;
            }
            None if follow => out.flush()?,
            None => break,
        }
    }
    out.flush()?;
    Ok(())
}

pub const DRAIN_HELP: &str = "Write the records of LOG to FILE, one line each, oldest \
    first, then the new ones as they are published, until Ctrl-C (or SIGTERM), rotating \
    FILE by size: before a line would take it past --rotate-bytes, FILE is renamed \
    FILE.1 (FILE.1 becoming FILE.2, and so on up to FILE.KEEP; the oldest beyond is \
    deleted) and a new FILE is started. An existing FILE is appended to.\n\n\
    It reads as the named reader --cursor (default: drain), whose cursor is kept in the \
    store: a drain started again resumes where the last one stopped. On Ctrl-C it writes \
    the records published by then and exits. This is the drainer thread of the shoal-log \
    crate (`shoal_log::Drainer`), which a program can start in itself with one call.\n\n\
    Records the reader missed (overwritten before it read them) and holes (records whose \
    writer died before publishing them) are reported on stderr at the end.";

/// `shoal log drain`.
pub fn drain(
    store: &Path,
    log: &str,
    to: &Path,
    rotate_bytes: u64,
    keep: usize,
    cursor: &str,
    format: Format,
) -> Result<(), Fail> {
    let s = cmds::open_existing(store)?;
    let log = open_log(&s, log)?;
    let sink = shoal_log::FileSink::open(to, format.into(), rotate_bytes, keep)
        .map_err(|e| Fail::err(format!("cannot open {}: {e}", to.display())))?;
    signal::catch_interrupts();
    let opts = shoal_log::DrainOptions::new()
        .cursor(cursor)
        .poll(Duration::from_millis(50));
    let drainer = shoal_log::Drainer::start(&log, &opts, sink).map_err(drain_fail)?;
    while !signal::interrupted() && !drainer.is_finished() {
        std::thread::sleep(Duration::from_millis(20));
    }
    let st = drainer.stop().map_err(drain_fail)?;
    if st.missed > 0 || st.skipped > 0 {
        eprintln!(
            "{} records overwritten before they were read; {} holes (writers that died \
             before publishing)",
            st.missed, st.skipped
        );
    }
    Ok(())
}

fn drain_fail(e: shoal_log::DrainError) -> Fail {
    match e {
        shoal_log::DrainError::Log(e) => e.into(),
        e => Fail::err(e.to_string()),
    }
}
