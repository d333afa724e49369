//! What `shoal stat` and `shoal ls -l` show of a store's logs: each log's geometry, policy
//! and tail, and each of its readers' cursor.

use crate::fail::Fail;
use crate::human;
use shoal::{FullPolicy, LogStats, Store};

/// One log as the tools show it.
pub struct LogView {
    pub name: String,
    pub slots: u64,
    pub max_record: usize,
    pub policy: FullPolicy,
    pub stats: LogStats,
}

fn policy_name(p: FullPolicy) -> &'static str {
    match p {
        FullPolicy::Overwrite => "overwrite",
        FullPolicy::Wait => "wait",
        FullPolicy::Drop => "drop",
    }
}

/// Every log of the store (those dropped meanwhile are left out).
pub fn logs(s: &Store) -> Result<Vec<LogView>, Fail> {
    let mut out = Vec::new();
    for name in s.logs()? {
        let log = match s.open_log(&name) {
            Ok(l) => l,
            Err(shoal::Error::NotFound(_)) => continue,
            Err(e) => return Err(e.into()),
        };
        let stats = match log.stats() {
            Ok(st) => st,
            Err(shoal::Error::NotFound(_)) => continue,
            Err(e) => return Err(e.into()),
        };
        out.push(LogView {
            name,
            slots: log.slots(),
            max_record: log.max_record(),
            policy: log.policy(),
            stats,
        });
    }
    Ok(out)
}

/// The logs as JSON values for `shoal stat --json`.
pub fn json(logs: &[LogView]) -> Vec<serde_json::Value> {
    logs.iter()
        .map(|v| {
            serde_json::json!({
                "name": v.name,
                "slots": v.slots,
                "max_record": v.max_record,
                "policy": policy_name(v.policy),
                "tail": v.stats.appended,
                "dropped": v.stats.dropped,
                "holes": v.stats.holes,
                "readers": v.stats.readers.iter().map(|r| serde_json::json!({
                    "name": r.name,
                    "position": r.position,
                    "behind": v.stats.appended.saturating_sub(r.position),
                    "missed": r.missed,
                    "skipped": r.skipped,
                })).collect::<Vec<_>>(),
            })
        })
        .collect()
}

/// The logs as a table, then a table of their readers (if any).
pub fn table(logs: &[LogView]) -> String {
    let rows: Vec<Vec<String>> = logs
        .iter()
        .map(|v| {
            vec![
                v.name.clone(),
                human::count(v.slots),
                human::count(v.max_record as u64),
                policy_name(v.policy).into(),
                human::count(v.stats.appended),
                human::count(v.stats.dropped),
                human::count(v.stats.holes),
                v.stats.readers.len().to_string(),
            ]
        })
        .collect();
    let mut s = human::table(
        &[
            "LOG",
            "SLOTS",
            "SLOT BYTES",
            "POLICY",
            "TAIL",
            "DROPPED",
            "HOLES",
            "READERS",
        ],
        &rows,
        &[0, 3],
    );
    let readers: Vec<Vec<String>> = logs
        .iter()
        .flat_map(|v| {
            v.stats.readers.iter().map(|r| {
                vec![
                    v.name.clone(),
                    r.name.clone(),
                    human::count(r.position),
                    human::count(v.stats.appended.saturating_sub(r.position)),
                    human::count(r.missed),
                    human::count(r.skipped),
                ]
            })
        })
        .collect();
    if !readers.is_empty() {
        s.push('\n');
        s.push_str(&human::table(
            &["LOG", "READER", "CURSOR", "BEHIND", "MISSED", "SKIPPED"],
            &readers,
            &[0, 1],
        ));
    }
    s
}

/// One line of `shoal ls -l` for a log, in the columns of a map's line: its tail (the
/// records appended so far) and the bytes its records may take, then what it is.
pub fn long_line(v: &LogView) -> String {
    format!(
        "{:>12}  {:>10}  {}  (log: {} slots of {} bytes, {}, {} reader(s))",
        human::count(v.stats.appended),
        human::size(v.slots.saturating_mul(v.max_record as u64)),
        v.name,
        human::count(v.slots),
        human::count(v.max_record as u64),
        policy_name(v.policy),
        v.stats.readers.len()
    )
}
