//! What `shoal stat` and `shoal watch` show of a store's queue sets: each queue's depth
//! and counters, and the elements each process holds.

use crate::fail::Fail;
use crate::human;
use shoal::{Holder, QueueStats, Store};

/// One queue set as the tools show it.
pub struct SetView {
    pub name: String,
    pub element_size: usize,
    pub elements: u64,
    pub queues: Vec<QueueStats>,
    pub held: Vec<Holder>,
}

/// Every queue set of the store (those dropped meanwhile are left out).
pub fn sets(s: &Store) -> Result<Vec<SetView>, Fail> {
    let mut out = Vec::new();
    for name in s.queue_sets()? {
        let set = match s.open_queue_set(&name) {
            Ok(set) => set,
            Err(shoal::Error::NotFound(_)) => continue,
            Err(e) => return Err(e.into()),
        };
        let queues = set
            .queue_names()
            .iter()
            .map(|q| set.stats(set.queue(q)?))
            .collect::<shoal::Result<Vec<_>>>();
        let (queues, held) = match (queues, set.held()) {
            (Ok(q), Ok(h)) => (q, h),
            (Err(shoal::Error::NotFound(_)), _) | (_, Err(shoal::Error::NotFound(_))) => continue,
            (Err(e), _) | (_, Err(e)) => return Err(e.into()),
        };
        out.push(SetView {
            name,
            element_size: set.element_size(),
            elements: set.elements(),
            queues,
            held,
        });
    }
    Ok(out)
}

/// The sets as JSON values for `shoal stat --json`.
pub fn json(sets: &[SetView]) -> Vec<serde_json::Value> {
    sets.iter()
        .map(|v| {
            serde_json::json!({
                "name": v.name,
                "element_size": v.element_size,
                "elements": v.elements,
                "queues": v.queues.iter().map(|q| serde_json::json!({
                    "name": q.name,
                    "len": q.len,
                    "limit": q.limit,
                    "pushes": q.pushes,
                    "pulls": q.pulls,
                    "waits": q.waits,
                })).collect::<Vec<_>>(),
                "held": v.held.iter().map(|h| serde_json::json!({
                    "pid": h.pid,
                    "elements": h.elements,
                })).collect::<Vec<_>>(),
            })
        })
        .collect()
}

/// How `shoal watch` fills the PULLS/s column: from the set's name and the queue's figures.
pub type Rate<'a> = &'a dyn Fn(&str, &QueueStats) -> String;

/// The sets as a table of queues, then a line per set of what processes hold.
/// `rate` fills the PULLS/s column (None: no such column).
pub fn table(sets: &[SetView], rate: Option<Rate<'_>>) -> String {
    let mut rows = Vec::new();
    for v in sets {
        for q in &v.queues {
            let mut row = vec![
                v.name.clone(),
                q.name.clone(),
                human::count(q.len),
                if q.limit == 0 {
                    "-".into()
                } else {
                    human::count(q.limit)
                },
                human::count(q.pushes),
                human::count(q.pulls),
                human::count(q.waits),
            ];
            if let Some(r) = rate {
                row.push(r(&v.name, q));
            }
            rows.push(row);
        }
    }
    let mut head = vec![
        "QUEUE SET",
        "QUEUE",
        "LEN",
        "LIMIT",
        "PUSHES",
        "PULLS",
        "SLEEPS",
    ];
    if rate.is_some() {
        head.push("PULLS/s");
    }
    let mut s = human::table(&head, &rows, &[0, 1]);
    for v in sets {
        let held: Vec<String> = v
            .held
            .iter()
            .map(|h| format!("pid {} holds {}", h.pid, human::count(h.elements)))
            .collect();
        s.push_str(&format!(
            "{}: {} elements of {} bytes; {}\n",
            v.name,
            human::count(v.elements),
            human::count(v.element_size as u64),
            if held.is_empty() {
                "none held".to_string()
            } else {
                held.join(", ")
            }
        ));
    }
    s
}
