//! The acknowledged log: one file per writer process, one line per event, each written
//! with a single unbuffered `write(2)`, so that whatever the process wrote before a
//! SIGKILL is in the file.
//!
//! ```text
//! W SLOT.GEN PID                       first line: who writes this log
//! B SEQ OP KEY PAD START_NS             before the operation is called
//! A SEQ END_NS MUTATED PRESENT_BEFORE   after it returned Ok (acknowledged)
//! ```
//!
//! `OP` is one of `P` put, `S` swap, `I` insert, `R` replace, `D` remove, `T` take. A value
//! written by an operation is `value::make_value(KEY, SLOT.GEN, SEQ, PAD)`. Times are
//! CLOCK_MONOTONIC nanoseconds, the same clock in every process: START is read before the
//! call and END after it returned, so they bracket the operation. `MUTATED` says whether
//! it changed the map (1) and `PRESENT_BEFORE` whether it found the key (1).
//!
//! A `B` with no `A` after it is an operation in flight when the process died: it may or
//! may not have taken effect. A last line without its newline was cut by the kill and
//! is ignored (the operation it would announce was not started).

use crate::value::Wid;
use std::fs::{File, OpenOptions};
use std::io::Write;
use std::path::Path;

/// The kinds of write operation.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum OpKind {
    /// `Map::put`
    Put,
    /// `Map::swap`
    Swap,
    /// `Map::put_if_absent`
    Insert,
    /// `Map::put_if_present`
    Replace,
    /// `Map::remove`
    Remove,
    /// `Map::take`
    Take,
}

impl OpKind {
    /// The one-letter code in the log.
    pub fn code(self) -> char {
        match self {
            OpKind::Put => 'P',
            OpKind::Swap => 'S',
            OpKind::Insert => 'I',
            OpKind::Replace => 'R',
            OpKind::Remove => 'D',
            OpKind::Take => 'T',
        }
    }

    /// Parses a one-letter code.
    pub fn from_code(c: &str) -> Option<OpKind> {
        Some(match c {
            "P" => OpKind::Put,
            "S" => OpKind::Swap,
            "I" => OpKind::Insert,
            "R" => OpKind::Replace,
            "D" => OpKind::Remove,
            "T" => OpKind::Take,
            _ => return None,
        })
    }

    /// Whether the operation stores a value when it takes effect (else it removes).
    pub fn stores_value(self) -> bool {
        matches!(
            self,
            OpKind::Put | OpKind::Swap | OpKind::Insert | OpKind::Replace
        )
    }
}

/// A writer's open log.
pub struct AckLog {
    f: File,
}

impl AckLog {
    /// Creates (truncates) the log at `path` and writes its `W` line.
    pub fn create(path: &Path, wid: Wid) -> std::io::Result<AckLog> {
        let f = OpenOptions::new()
            .create(true)
            .write(true)
            .truncate(true)
            .open(path)?;
        let mut l = AckLog { f };
        l.line(&format!("W {wid} {}\n", std::process::id()))?;
        Ok(l)
    }

    fn line(&mut self, s: &str) -> std::io::Result<()> {
        // `File` is unbuffered: this is one write(2) (more only if the kernel takes part).
        self.f.write_all(s.as_bytes())
    }

    /// Announces an operation about to be called.
    pub fn begin(
        &mut self,
        seq: u64,
        op: OpKind,
        key: &str,
        pad: u64,
        start: u64,
    ) -> std::io::Result<()> {
        self.line(&format!("B {seq} {} {key} {pad} {start}\n", op.code()))
    }

    /// Acknowledges the operation announced last.
    pub fn ack(
        &mut self,
        seq: u64,
        end: u64,
        mutated: bool,
        present_before: bool,
    ) -> std::io::Result<()> {
        self.line(&format!(
            "A {seq} {end} {} {}\n",
            mutated as u8, present_before as u8
        ))
    }
}

/// One operation read back from a log.
#[derive(Clone, Debug)]
pub struct Op {
    /// Its writer.
    pub wid: Wid,
    /// The writer's sequence number.
    pub seq: u64,
    /// What it was.
    pub kind: OpKind,
    /// Its key.
    pub key: String,
    /// Padding of the value it stores (if it stores one).
    pub pad: u64,
    /// CLOCK_MONOTONIC ns before the call.
    pub start: u64,
    /// The acknowledgement, if the operation returned before the writer died:
    /// (end time, mutated, present before).
    pub ack: Option<(u64, bool, bool)>,
}

impl Op {
    /// Whether it was acknowledged.
    pub fn acked(&self) -> bool {
        self.ack.is_some()
    }
    /// Acknowledged and changed the map.
    pub fn acked_mutation(&self) -> bool {
        matches!(self.ack, Some((_, true, _)))
    }
}

impl std::fmt::Display for Op {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "{} seq {} {:?} {} pad {} start {}",
            self.wid, self.seq, self.kind, self.key, self.pad, self.start
        )?;
        match self.ack {
            Some((end, m, p)) => write!(f, " end {end} mutated {m} present_before {p}"),
            None => write!(f, " UNACKNOWLEDGED (in flight when killed)"),
        }
    }
}

/// A whole log read back.
#[derive(Clone, Debug)]
pub struct WriterLog {
    /// Its writer.
    pub wid: Wid,
    /// The writer's pid.
    pub pid: u32,
    /// Every operation, in order; only the last may be unacknowledged.
    pub ops: Vec<Op>,
}

impl WriterLog {
    /// The operation in flight when the writer died, if any.
    pub fn in_flight(&self) -> Option<&Op> {
        self.ops.last().filter(|o| !o.acked())
    }
}

/// Reads a log back, checking its structure.
pub fn parse_log(path: &Path) -> Result<WriterLog, String> {
    let text = std::fs::read(path).map_err(|e| format!("{}: {e}", path.display()))?;
    let text = String::from_utf8(text).map_err(|_| format!("{}: not UTF-8", path.display()))?;
    parse_log_text(&text).map_err(|e| format!("{}: {e}", path.display()))
}

/// Parses the text of a log (see [`parse_log`]).
pub fn parse_log_text(text: &str) -> Result<WriterLog, String> {
    // A last line without its newline was cut by a kill: drop it.
    let complete = match text.rfind('\n') {
        Some(i) => &text[..=i],
        None => "",
    };
    let mut lines = complete.lines().enumerate();
    let (_, first) = lines
        .next()
        .ok_or("empty log (killed before its first line)")?;
    let f: Vec<&str> = first.split(' ').collect();
    if f.len() != 3 || f[0] != "W" {
        return Err(format!("line 1: {first:?} is not a W line"));
    }
    let wid: Wid = f[1].parse()?;
    let pid: u32 = f[2]
        .parse()
        .map_err(|_| format!("line 1: bad pid in {first:?}"))?;
    let mut ops: Vec<Op> = Vec::new();
    let num = |s: &str, n: usize, line: &str| {
        s.parse::<u64>()
            .map_err(|_| format!("line {n}: bad number {s:?} in {line:?}"))
    };
    for (i, line) in lines {
        let n = i + 1;
        let f: Vec<&str> = line.split(' ').collect();
        match f.first().copied() {
            Some("B") if f.len() == 6 => {
                if ops.last().is_some_and(|o| !o.acked()) {
                    return Err(format!(
                        "line {n}: B while the previous operation is unacknowledged"
                    ));
                }
                let seq = num(f[1], n, line)?;
                if ops.last().is_some_and(|o| o.seq >= seq) {
                    return Err(format!("line {n}: sequence number {seq} does not increase"));
                }
                let kind = OpKind::from_code(f[2])
                    .ok_or_else(|| format!("line {n}: unknown op {:?}", f[2]))?;
                ops.push(Op {
                    wid,
                    seq,
                    kind,
                    key: f[3].to_owned(),
                    pad: num(f[4], n, line)?,
                    start: num(f[5], n, line)?,
                    ack: None,
                });
            }
            Some("A") if f.len() == 5 => {
                let seq = num(f[1], n, line)?;
                let Some(op) = ops.last_mut().filter(|o| !o.acked() && o.seq == seq) else {
                    return Err(format!(
                        "line {n}: A {seq} acknowledges no announced operation"
                    ));
                };
                let end = num(f[2], n, line)?;
                if end < op.start {
                    return Err(format!("line {n}: ends before it started"));
                }
                let bit = |s: &str| match s {
                    "0" => Ok(false),
                    "1" => Ok(true),
                    _ => Err(format!("line {n}: bad flag {s:?}")),
                };
                op.ack = Some((end, bit(f[3])?, bit(f[4])?));
            }
            _ => return Err(format!("line {n}: malformed {line:?}")),
        }
    }
    Ok(WriterLog { wid, pid, ops })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parse_complete_and_cut_logs() {
        let t = "W 2.1 99\nB 5 P d2:1 10 100\nA 5 120 1 0\nB 7 D d2:1 0 130\n";
        let l = parse_log_text(t).unwrap();
        assert_eq!(l.wid, Wid { slot: 2, gen: 1 });
        assert_eq!(l.ops.len(), 2);
        assert!(l.ops[0].acked_mutation());
        assert_eq!(l.in_flight().unwrap().seq, 7);
        // Cut in the middle of an A line: the operation stays in flight.
        let l = parse_log_text("W 2.1 99\nB 5 P d2:1 10 100\nA 5 12").unwrap();
        assert_eq!(l.in_flight().unwrap().seq, 5);
        assert!(parse_log_text("W 2.1 99\nA 5 120 1 0\n").is_err());
        assert!(parse_log_text("W 2.1 99\nB 5 P k 1 100\nB 6 P k 1 100\n").is_err());
        assert!(parse_log_text("W 2.1 99\nB 5 P k 1 100\nA 5 120 1 0\nB 5 P k 1 130\n").is_err());
        assert!(parse_log_text("").is_err());
    }
}
