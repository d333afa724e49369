//! Appending a record that may not fit: what the adapters share.

use shoal::Log;
use std::time::Duration;

/// The key of the field that says how many bytes of a record were cut to fit the log.
pub(crate) const TRUNCATED: &[u8] = b"truncated";

/// What a field costs in a record: its key, its value and 8 bytes of lengths.
fn cost(fields: &[(&[u8], &[u8])]) -> usize {
    fields.iter().map(|(k, v)| 8 + k.len() + v.len()).sum()
}

/// Appends a record, cut to fit the log's largest record if it does not: fields from the
/// last while they alone leave no room, then the end of the message (at a UTF-8
/// boundary), with a field `truncated` giving how many bytes were cut. A log line is
/// worth more cut than refused.
pub(crate) fn append_fitted(
    log: &Log,
    level: u8,
    message: &[u8],
    fields: &[(&[u8], &[u8])],
    timeout: Option<Duration>,
) -> shoal::Result<Option<u64>> {
    let max = log.max_record();
    let total = message.len() + cost(fields);
    let append = |m: &[u8], f: &[(&[u8], &[u8])]| match timeout {
        Some(t) => log.append_timeout(level, m, f, t),
        None => log.append_fields(level, m, f),
    };
    if total <= max {
        return append(message, fields);
    }
    // The note takes 8 bytes, its key and at most 20 digits; a log too small for it gets
    // the cut record without one.
    let note_cost = 8 + TRUNCATED.len() + 20;
    let room = if max >= note_cost {
        max - note_cost
    } else {
        max
    };
    let mut n = fields.len();
    while n > 0 && cost(&fields[..n]) > room {
        n -= 1;
    }
    let mut keep = (room - cost(&fields[..n])).min(message.len());
    while keep > 0 && keep < message.len() && message[keep] & 0xC0 == 0x80 {
        keep -= 1;
    }
    let cut = (total - keep - cost(&fields[..n])).to_string();
    let mut fs = fields[..n].to_vec();
    if max >= note_cost {
        fs.push((TRUNCATED, cut.as_bytes()));
    }
    append(&message[..keep], &fs)
}
