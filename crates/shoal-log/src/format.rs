//! Records as lines of text: the formats of `shoal log tail --format` and of the
//! drainer's sinks.
//!
//! ```
//! # let d = tempfile::tempdir().unwrap();
//! let store = shoal::Store::open(d.path().join("l.shoal"))?;
//! let log = store.log("app", &shoal::LogOptions::new(64, 200))?;
//! log.append_fields(6, b"ready", &[(b"port", b"8080")])?;
//! let r = log.reader("doc")?.read()?.expect("a record");
//! let text = shoal_log::Format::Text.line(&r);
//! assert!(text.starts_with("0 ") && text.ends_with(" 6 ready port=8080"));
//! let json = shoal_log::Format::Json.line(&r);
//! assert!(json.starts_with(r#"{"seq":0,"#) && json.ends_with(r#""message":"ready","fields":{"port":"8080"}}"#));
//! # Ok::<(), shoal::Error>(())
//! ```

use shoal::{Record, RecordRef};
use std::fmt::Write as _;

/// How a record is written as one line.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Format {
    /// Sequence number, UTC time with nanoseconds, pid, tid, level, message, then
    /// ` key=value` per field, separated by spaces; bytes that are not printable UTF-8
    /// escaped ([`escape`]), so a record is always one line.
    #[default]
    Text,
    /// One JSON object: `seq`, `time_ns`, `pid`, `tid`, `level`, `message` and `fields`
    /// (an object, in the writer's order; keys and values as strings, invalid UTF-8
    /// replaced by U+FFFD), in that order.
    Json,
}

/// The parts of a record that a line shows, from a [`Record`] or a [`RecordRef`].
struct View<'a, F> {
    seq: u64,
    time_ns: u64,
    pid: u32,
    tid: u32,
    level: u8,
    message: &'a [u8],
    fields: F,
}

impl Format {
    /// `r` as a line of this format, without its newline.
    pub fn line(self, r: &Record) -> String {
        let mut s = String::new();
        self.push(r, &mut s);
        s
    }

    /// Appends `r` as a line of this format to `out`, without a newline.
    pub fn push(self, r: &Record, out: &mut String) {
        let v = View {
            seq: r.seq(),
            time_ns: r.time_ns(),
            pid: r.pid(),
            tid: r.tid(),
            level: r.level(),
            message: r.message(),
            fields: r.fields().iter().map(|(k, v)| (&k[..], &v[..])),
        };
        self.write(v, out);
    }

    /// Appends `r`, a record of a batch, as a line of this format to `out`, without a
    /// newline.
    pub fn push_ref(self, r: &RecordRef<'_>, out: &mut String) {
        let v = View {
            seq: r.seq(),
            time_ns: r.time_ns(),
            pid: r.pid(),
            tid: r.tid(),
            level: r.level(),
            message: r.message(),
            fields: r.fields(),
        };
        self.write(v, out);
    }

    fn write<'a, F: Iterator<Item = (&'a [u8], &'a [u8])>>(self, v: View<'a, F>, out: &mut String) {
        match self {
            Format::Text => {
                let utc = utc(v.time_ns);
                // `utc` ends in " UTC": the nanoseconds go between the seconds and it.
                let _ = write!(
                    out,
                    "{} {}.{:09} {} {} {} ",
                    v.seq,
                    &utc[..utc.len() - 4],
                    v.time_ns % 1_000_000_000,
                    v.pid,
                    v.tid,
                    v.level,
                );
                push_escaped(v.message, out);
                for (k, val) in v.fields {
                    out.push(' ');
                    push_escaped(k, out);
                    out.push('=');
                    push_escaped(val, out);
                }
            }
            Format::Json => {
                let _ = write!(
                    out,
                    "{{\"seq\":{},\"time_ns\":{},\"pid\":{},\"tid\":{},\"level\":{},\"message\":",
                    v.seq, v.time_ns, v.pid, v.tid, v.level
                );
                push_json_str(v.message, out);
                out.push_str(",\"fields\":{");
                for (i, (k, val)) in v.fields.enumerate() {
                    if i > 0 {
                        out.push(',');
                    }
                    push_json_str(k, out);
                    out.push(':');
                    push_json_str(val, out);
                }
                out.push_str("}}");
            }
        }
    }
}

/// A JSON string of `b` (invalid UTF-8 replaced by U+FFFD), escaped as serde_json does.
fn push_json_str(b: &[u8], out: &mut String) {
    let s = String::from_utf8_lossy(b);
    // Writing a &str as JSON cannot fail: serde_json's error is only the writer's.
    out.push_str(&serde_json::to_string(&*s).expect("a string serialises"));
}

/// Bytes as one line of text for humans: printable UTF-8 as it is; control characters,
/// backslashes and bytes that are not UTF-8 escaped (`\n`, `\t`, `\r`, `\\`, `\xNN`).
///
/// ```
/// assert_eq!(shoal_log::format::escape(b"a\tb\\\xff"), "a\\tb\\\\\\xff");
/// ```
pub fn escape(b: &[u8]) -> String {
    let mut s = String::with_capacity(b.len());
    push_escaped(b, &mut s);
    s
}

fn push_escaped(b: &[u8], s: &mut String) {
    for chunk in b.utf8_chunks() {
        for c in chunk.valid().chars() {
            match c {
                '\\' => s.push_str("\\\\"),
                '\n' => s.push_str("\\n"),
                '\t' => s.push_str("\\t"),
                '\r' => s.push_str("\\r"),
                c if c.is_control() => {
                    let mut buf = [0u8; 4];
                    for x in c.encode_utf8(&mut buf).bytes() {
                        let _ = write!(s, "\\x{x:02x}");
                    }
                }
                c => s.push(c),
            }
        }
        for x in chunk.invalid() {
            let _ = write!(s, "\\x{x:02x}");
        }
    }
}

/// Unix nanoseconds as `YYYY-MM-DD hh:mm:ss UTC`.
///
/// ```
/// assert_eq!(shoal_log::format::utc(951_782_400_000_000_000), "2000-02-29 00:00:00 UTC");
/// ```
pub fn utc(unix_ns: u64) -> String {
    let secs = unix_ns / 1_000_000_000;
    let (days, rem) = (secs / 86_400, secs % 86_400);
    // Howard Hinnant's civil_from_days.
    let z = days as i64 + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = doy - (153 * mp + 2) / 5 + 1;
    let m = if mp < 10 { mp + 3 } else { mp - 9 };
    let y = yoe + era * 400 + (m <= 2) as i64;
    format!(
        "{y:04}-{m:02}-{d:02} {:02}:{:02}:{:02} UTC",
        rem / 3600,
        rem / 60 % 60,
        rem % 60
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn escapes() {
        assert_eq!(escape("héllo".as_bytes()), "héllo");
        assert_eq!(escape(b"a\nb\\c\x00\xff"), "a\\nb\\\\c\\x00\\xff");
    }

    #[test]
    fn dates() {
        assert_eq!(utc(0), "1970-01-01 00:00:00 UTC");
        assert_eq!(utc(951_782_400_000_000_000), "2000-02-29 00:00:00 UTC");
        assert_eq!(utc(1_700_000_000_000_000_000), "2023-11-14 22:13:20 UTC");
    }

    #[test]
    fn json_strings_are_escaped_and_lossy() {
        let mut s = String::new();
        push_json_str(b"a\"b\\c\n\x01\xff", &mut s);
        assert_eq!(s, "\"a\\\"b\\\\c\\n\\u0001\u{fffd}\"");
    }
}
