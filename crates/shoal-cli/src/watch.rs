//! `shoal watch`: a live view of a store.

use crate::cmds;
use crate::fail::Fail;
use crate::human;
use crate::signal;
use shoal::{ObjectStats, StoreStats};
use std::collections::HashMap;
use std::io::{IsTerminal, Write};
use std::path::Path;
use std::time::{Duration, Instant};

struct Snapshot {
    at: Instant,
    store: StoreStats,
    maps: Vec<(String, ObjectStats)>,
    sets: Vec<crate::queues::SetView>,
}

fn snapshot(s: &shoal::Store) -> Result<Snapshot, Fail> {
    let store = s.stats()?;
    let mut maps = Vec::new();
    for name in s.maps()? {
        // None: dropped meanwhile.
        if let Some(st) = s.object_stats(&name)? {
            maps.push((name, st));
        }
    }
    Ok(Snapshot {
        at: Instant::now(),
        store,
        maps,
        sets: crate::queues::sets(s)?,
    })
}

fn per_sec(now: u64, before: u64, secs: f64) -> String {
    let d = now as i128 - before as i128;
    let r = d as f64 / secs;
    if r < 0.0 {
        format!("-{}", human::rate(-r))
    } else {
        human::rate(r)
    }
}

fn render(path: &Path, n: u64, cur: &Snapshot, prev: Option<&Snapshot>) -> String {
    let st = &cur.store;
    let secs = prev.map(|p| (cur.at - p.at).as_secs_f64()).unwrap_or(0.0);
    let rate = |f: &dyn Fn(&Snapshot) -> u64| match prev {
        Some(p) if secs > 0.0 => format!("{}/s", per_sec(f(cur), f(p), secs)),
        _ => "-".into(),
    };
    let mut s = String::new();
    s.push_str(&format!(
        "shoal watch {}   refresh {}   (Ctrl-C to quit)\n\n",
        path.display(),
        n
    ));
    let growth = match prev {
        Some(p) if secs > 0.0 => format!(
            "{}/s",
            human::size(((st.file_size.saturating_sub(p.store.file_size)) as f64 / secs) as u64)
        ),
        _ => "-".into(),
    };
    s.push_str(&format!(
        "file size  {:>12}   growth {:>12}\n",
        human::size(st.file_size),
        growth
    ));
    s.push_str(&format!(
        "data       {:>12}   live {:>12}   dead {:>12} ({})   free {:>12}\n",
        human::size(st.data_bytes),
        human::size(st.live_bytes),
        human::size(st.dead_bytes),
        human::percent(st.dead_bytes, st.data_bytes),
        human::size(st.free_bytes)
    ));
    s.push_str(&format!(
        "cleaned    {:>12}   ({} chunks/s)   attached: {} other process(es)\n\n",
        human::count(st.chunks_cleaned),
        rate(&|x| x.store.chunks_cleaned).trim_end_matches("/s"),
        st.processes.saturating_sub(1)
    ));
    let before: HashMap<&str, &ObjectStats> = prev
        .map(|p| p.maps.iter().map(|(n, m)| (n.as_str(), m)).collect())
        .unwrap_or_default();
    let rows: Vec<Vec<String>> = cur
        .maps
        .iter()
        .map(|(name, m)| {
            let (de, ds) = match before.get(name.as_str()) {
                Some(b) if secs > 0.0 => (
                    per_sec(m.entries, b.entries, secs),
                    per_sec(m.splits, b.splits, secs),
                ),
                _ => ("-".into(), "-".into()),
            };
            vec![
                name.clone(),
                human::count(m.entries),
                de,
                human::size(m.live_bytes),
                human::count(m.segments),
                human::count(m.splits),
                ds,
            ]
        })
        .collect();
    if rows.is_empty() {
        s.push_str("(no maps)\n");
    } else {
        s.push_str(&human::table(
            &[
                "MAP",
                "ENTRIES",
                "ENTRIES/s",
                "LIVE",
                "SEGMENTS",
                "SPLITS",
                "SPLITS/s",
            ],
            &rows,
            &[0],
        ));
    }
    if !cur.sets.is_empty() {
        let pulls_before: HashMap<(&str, &str), u64> = prev
            .map(|p| {
                p.sets
                    .iter()
                    .flat_map(|v| {
                        v.queues
                            .iter()
                            .map(|q| ((v.name.as_str(), q.name.as_str()), q.pulls))
                    })
                    .collect()
            })
            .unwrap_or_default();
        let rate =
            |set: &str, q: &shoal::QueueStats| match pulls_before.get(&(set, q.name.as_str())) {
                Some(b) if secs > 0.0 => per_sec(q.pulls, *b, secs),
                _ => "-".into(),
            };
        s.push('\n');
        s.push_str(&crate::queues::table(&cur.sets, Some(&rate)));
    }
    s.push_str(
        "\nENTRIES/s is the net change of the entry count between refreshes (inserts minus\n\
         removes): reads and overwrites do not show in it. SPLITS/s is index growth.\n",
    );
    s
}

/// `shoal watch`.
pub fn watch(store: &Path, interval: f64, iterations: Option<u64>) -> Result<(), Fail> {
    if !(interval.is_finite() && (0.01..=3600.0).contains(&interval)) {
        return Err(Fail::err("--interval must be from 0.01 to 3600 seconds"));
    }
    let s = cmds::open_for_reading(store)?;
    let path = s.path().to_owned();
    signal::catch_interrupts();
    let tty = std::io::stdout().is_terminal();
    let mut prev: Option<Snapshot> = None;
    let mut n = 0u64;
    loop {
        let cur = snapshot(&s)?;
        n += 1;
        let frame = render(&path, n, &cur, prev.as_ref());
        let mut out = std::io::stdout().lock();
        if tty {
            // Home, clear screen, frame.
            out.write_all(b"\x1b[H\x1b[2J")?;
            out.write_all(frame.as_bytes())?;
        } else {
            if n > 1 {
                out.write_all(b"\n")?;
            }
            out.write_all(frame.as_bytes())?;
        }
        out.flush()?;
        drop(out);
        prev = Some(cur);
        if iterations.is_some_and(|max| n >= max) {
            break;
        }
        if signal::sleep(Duration::from_secs_f64(interval)) {
            break;
        }
    }
    Ok(())
}
