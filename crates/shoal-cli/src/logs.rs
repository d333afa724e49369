//! `shoal log tail`: prints the records of a log, and with `--follow` the new ones as
//! they come.

use crate::codec::escape;
use crate::fail::Fail;
use crate::{cmds, human, signal};
use shoal::{LogReader, Record};
use std::io::{BufWriter, Write};
use std::path::Path;
use std::time::Duration;

/// How records are printed.
#[derive(clap::ValueEnum, Clone, Copy, Debug, PartialEq, Eq)]
pub enum Format {
    /// One line each: sequence number, UTC time with nanoseconds, pid, tid, level,
    /// message, then key=value fields (bytes that are not printable UTF-8 escaped)
    Text,
    /// One JSON object a line: seq, time_ns, pid, tid, level, message, fields (strings,
    /// invalid UTF-8 replaced by U+FFFD)
    Json,
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
    let log = s.open_log(log).map_err(|e| match e {
        shoal::Error::NotFound(_) => Fail::err(format!("no log {log:?} in the store")),
        e => e.into(),
    })?;
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

fn print_records(r: &mut LogReader, follow: bool, format: Format) -> Result<(), Fail> {
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
                writeln!(out, "{}", line(&rec, format))?;
            }
            None if follow => out.flush()?,
            None => break,
        }
    }
    out.flush()?;
    Ok(())
}

/// One record as a line of `format`.
pub fn line(r: &Record, format: Format) -> String {
    match format {
        Format::Text => {
            let utc = human::utc(r.time_ns());
            let mut l = format!(
                "{} {}.{:09} {} {} {} {}",
                r.seq(),
                &utc[..utc.len() - 4],
                r.time_ns() % 1_000_000_000,
                r.pid(),
                r.tid(),
                r.level(),
                escape(r.message())
            );
            for (k, v) in r.fields() {
                l.push_str(&format!(" {}={}", escape(k), escape(v)));
            }
            l
        }
        Format::Json => {
            let fields: serde_json::Map<String, serde_json::Value> = r
                .fields()
                .iter()
                .map(|(k, v)| {
                    (
                        String::from_utf8_lossy(k).into_owned(),
                        String::from_utf8_lossy(v).into_owned().into(),
                    )
                })
                .collect();
            serde_json::json!({
                "seq": r.seq(),
                "time_ns": r.time_ns(),
                "pid": r.pid(),
                "tid": r.tid(),
                "level": r.level(),
                "message": String::from_utf8_lossy(r.message()),
                "fields": fields,
            })
            .to_string()
        }
    }
}
