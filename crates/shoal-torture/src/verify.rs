//! The final-state check: given every writer's acknowledged log and the time each killed
//! writer was seen dead, is what the map holds now a state the engine may legally have
//! reached?
//!
//! For one key, the final state is the effect of the *last* operation that changed it,
//! and that operation must be one of:
//!
//! * an acknowledged operation `c` that changed the key (or the initial "absent" state):
//!   then every other acknowledged operation that *started after `c` returned* is
//!   ordered after `c`, so it must not have changed the key, and what it observed
//!   (present or absent) must be `c`'s effect. Operations whose intervals overlap `c`'s
//!   may be ordered either way and constrain nothing.
//! * the unacknowledged operation in flight in a writer that was killed: the engine may
//!   apply a committed intent of a dead process late (whoever next takes the lock it
//!   held recovers it), so it may come after operations that merely *read* the key
//!   (a remove that found nothing, an insert that found the key); but any operation that
//!   *changed* the key took the segment lock, which recovers the dead writer's intent
//!   first. So no acknowledged change of the key may have started after the death.
//!
//! Every value is also validated byte for byte (see [`crate::value`]) and must be the
//! value of the operation named in it. Start and end times are CLOCK_MONOTONIC, read
//! before the call and after it returned (so the logged interval contains the real one),
//! and death times are read by the supervisor after `wait()` returned (so they are no
//! earlier than the death): every comparison errs on the side of accepting.

use crate::acklog::{Op, WriterLog};
use crate::value::{check_value, Wid};
use std::collections::{BTreeMap, HashMap, HashSet};

/// Figures about a verified run.
#[derive(Clone, Debug, Default)]
pub struct Summary {
    /// Keys verified (every key any writer touched).
    pub keys: usize,
    /// Of which present at the end.
    pub present: usize,
    /// Acknowledged operations.
    pub acked: usize,
    /// Operations in flight in killed writers.
    pub in_flight: usize,
    /// Keys whose final state is the effect of an in-flight operation of a killed writer.
    pub final_from_in_flight: usize,
}

/// The state of a key as read at the end.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Final {
    /// The key is absent.
    Absent,
    /// The key holds this value.
    Present(Vec<u8>),
}

fn dump(key: &str, ops: &[&Op], fin: &str) -> String {
    let mut s =
        format!("  key {key}: final state {fin}; its operations (last 16 by start time):\n");
    let mut v: Vec<&&Op> = ops.iter().collect();
    v.sort_by_key(|o| o.start);
    for o in v.iter().rev().take(16).rev() {
        s.push_str(&format!("    {o}\n"));
    }
    s
}

/// `c` (None = the initial absent state) as the last change of the key, `present` its effect.
fn acked_last(c: Option<&Op>, present: bool, ops: &[&Op]) -> Result<(), String> {
    let c_end = c.and_then(|c| c.ack).map(|a| a.0).unwrap_or(0);
    for o in ops {
        if c.is_some_and(|c| std::ptr::eq(c, *o)) {
            continue;
        }
        let Some((_, mutated, saw)) = o.ack else {
            continue;
        };
        if o.start <= c_end {
            continue;
        }
        if mutated {
            return Err(format!(
                "acknowledged change [{o}] started after it returned"
            ));
        }
        if saw != present {
            return Err(format!(
                "acknowledged [{o}] started after it returned and found the key {}",
                if saw { "present" } else { "absent" }
            ));
        }
    }
    Ok(())
}

/// In-flight `c` of a writer seen dead at `death` as the last change of the key.
fn in_flight_last(death: u64, ops: &[&Op]) -> Result<(), String> {
    for o in ops {
        if o.acked_mutation() && o.start > death {
            return Err(format!(
                "acknowledged change [{o}] started after the writer was dead"
            ));
        }
    }
    Ok(())
}

/// Checks the final state of every key the logs mention. `read(key)` gives the final
/// state. Returns the figures and the list of violations (empty when all is well).
pub fn check_final(
    logs: &[WriterLog],
    deaths: &HashMap<Wid, u64>,
    mut read: impl FnMut(&str) -> Result<Final, String>,
) -> (Summary, Vec<String>) {
    let mut problems = Vec::new();
    let mut sum = Summary::default();
    let mut wids = HashSet::new();
    let mut by_key: BTreeMap<&str, Vec<&Op>> = BTreeMap::new();
    let mut by_id: HashMap<(Wid, u64), &Op> = HashMap::new();
    for l in logs {
        if !wids.insert(l.wid) {
            problems.push(format!("two logs for writer {}", l.wid));
        }
        if let Some(o) = l.in_flight() {
            if !deaths.contains_key(&l.wid) {
                problems.push(format!(
                    "writer {} was not killed but left an operation in flight: [{o}]",
                    l.wid
                ));
            }
            sum.in_flight += 1;
        }
        for o in &l.ops {
            sum.acked += o.acked() as usize;
            by_key.entry(&o.key).or_default().push(o);
            by_id.insert((o.wid, o.seq), o);
        }
    }
    for (key, ops) in &by_key {
        sum.keys += 1;
        let fin = match read(key) {
            Ok(f) => f,
            Err(e) => {
                problems.push(format!("key {key}: reading it failed: {e}"));
                continue;
            }
        };
        let verdict: Result<bool, String> = match &fin {
            Final::Present(v) => {
                sum.present += 1;
                (|| {
                    let p = check_value(key, v)?;
                    let Some(op) = by_id.get(&(p.wid, p.seq)) else {
                        return Err(format!(
                            "its value names {} seq {}, which no log holds",
                            p.wid, p.seq
                        ));
                    };
                    if op.key != *key || !op.kind.stores_value() || op.pad != p.pad {
                        return Err(format!(
                            "its value names {} seq {}, which is [{op}]",
                            p.wid, p.seq
                        ));
                    }
                    let why = |e: String| {
                        format!("its value is that of [{op}], which cannot be the last change: {e}")
                    };
                    match op.ack {
                        Some((_, true, _)) => acked_last(Some(op), true, ops).map(|_| false).map_err(why),
                        Some((_, false, _)) => Err(format!("its value is that of [{op}], acknowledged as not applied")),
                        None => match deaths.get(&op.wid) {
                            Some(d) => in_flight_last(*d, ops).map(|_| true).map_err(why),
                            None => Err(format!("its value is that of in-flight [{op}] of a writer that was not killed")),
                        },
                    }
                })()
            }
            Final::Absent => {
                // Any remove (or the initial state) that may be last will do.
                let mut why = Vec::new();
                let mut ok = None;
                match acked_last(None, false, ops) {
                    Ok(()) => ok = Some(false),
                    Err(e) => why.push(format!("not the initial state: {e}")),
                }
                // Latest-ending first: the real last removal is usually found at once.
                let mut cands: Vec<&&Op> = ops.iter().filter(|o| !o.kind.stores_value()).collect();
                cands.sort_by_key(|o| std::cmp::Reverse(o.ack.map_or(u64::MAX, |a| a.0)));
                for c in cands {
                    if ok.is_some() {
                        break;
                    }
                    let r = match c.ack {
                        Some((_, true, _)) => acked_last(Some(c), false, ops).map(|_| false),
                        Some(_) => continue,
                        None => match deaths.get(&c.wid) {
                            Some(d) => in_flight_last(*d, ops).map(|_| true),
                            None => continue,
                        },
                    };
                    match r {
                        Ok(f) => ok = Some(f),
                        Err(e) => why.push(format!("not [{c}]: {e}")),
                    }
                }
                ok.ok_or_else(|| format!("no removal can be the last change: {}", why.join("; ")))
            }
        };
        match verdict {
            Ok(from_in_flight) => sum.final_from_in_flight += from_in_flight as usize,
            Err(e) => {
                let shown = match &fin {
                    Final::Absent => "absent".to_string(),
                    Final::Present(v) => {
                        format!("{:?}", String::from_utf8_lossy(&v[..v.len().min(60)]))
                    }
                };
                problems.push(format!("key {key}: {e}\n{}", dump(key, ops, &shown)));
            }
        }
    }
    (sum, problems)
}

/// Verifies a quiet map against the logs: the final state of every key (see
/// [`check_final`]), then that iteration returns exactly the present keys, each once,
/// with the values `get` returned, no key no writer wrote, and `len()` agrees.
pub fn verify_map(
    map: &shoal::Map,
    logs: &[WriterLog],
    deaths: &HashMap<Wid, u64>,
) -> Result<Summary, String> {
    let mut seen: HashMap<String, Vec<u8>> = HashMap::new();
    let (sum, mut problems) = check_final(logs, deaths, |k| match map.get(k.as_bytes()) {
        Ok(Some(v)) => {
            seen.insert(k.to_owned(), v.clone());
            Ok(Final::Present(v))
        }
        Ok(None) => Ok(Final::Absent),
        Err(e) => Err(e.to_string()),
    });
    let mut iterated = HashSet::new();
    for item in map.iter() {
        let (k, v) = match item {
            Ok(kv) => kv,
            Err(e) => {
                problems.push(format!("iteration failed: {e}"));
                break;
            }
        };
        let ks = String::from_utf8_lossy(&k).into_owned();
        if !iterated.insert(ks.clone()) {
            problems.push(format!("iteration returned key {ks} twice"));
        }
        match seen.get(&ks) {
            Some(g) if *g == v => {}
            Some(_) => problems.push(format!(
                "iteration returned another value for {ks} than get"
            )),
            None => problems.push(format!(
                "iteration returned key {ks}, which get did not find or no writer wrote"
            )),
        }
    }
    if iterated.len() != seen.len() {
        problems.push(format!(
            "iteration returned {} keys, get found {}",
            iterated.len(),
            seen.len()
        ));
    }
    match map.len() {
        Ok(n) if n == seen.len() as u64 => {}
        Ok(n) => problems.push(format!("len() is {n}, but {} keys are present", seen.len())),
        Err(e) => problems.push(format!("len() failed: {e}")),
    }
    if problems.is_empty() {
        Ok(sum)
    } else {
        let n = problems.len();
        problems.truncate(20);
        Err(format!(
            "{n} problems (first {}):\n{}",
            problems.len(),
            problems.join("\n")
        ))
    }
}

#[cfg(test)]
mod tests {
    //! The checker must catch what it claims to: each case here is a history with a
    //! final state the engine must never produce (and a few legal ones).
    use super::*;
    use crate::acklog::{OpKind, WriterLog};
    use crate::value::make_value;

    fn w(slot: u32, gen: u32) -> Wid {
        Wid { slot, gen }
    }

    /// (writer, seq, kind, key, start, ack)
    type Spec = (
        Wid,
        u64,
        OpKind,
        &'static str,
        u64,
        Option<(u64, bool, bool)>,
    );

    fn logs(specs: &[Spec]) -> Vec<WriterLog> {
        let mut by: BTreeMap<Wid, Vec<Op>> = BTreeMap::new();
        for &(wid, seq, kind, key, start, ack) in specs {
            by.entry(wid).or_default().push(Op {
                wid,
                seq,
                kind,
                key: key.into(),
                pad: 3,
                start,
                ack,
            });
        }
        by.into_iter()
            .map(|(wid, ops)| WriterLog { wid, pid: 1, ops })
            .collect()
    }

    fn run(
        specs: &[Spec],
        deaths: &[(Wid, u64)],
        fin: &[(&str, Option<(Wid, u64)>)],
    ) -> Vec<String> {
        let l = logs(specs);
        let d: HashMap<Wid, u64> = deaths.iter().copied().collect();
        let m: HashMap<&str, Option<(Wid, u64)>> = fin.iter().copied().collect();
        check_final(&l, &d, |k| {
            Ok(match m.get(k).copied().flatten() {
                Some((wid, seq)) => Final::Present(make_value(k, wid, seq, 3)),
                None => Final::Absent,
            })
        })
        .1
    }

    const P: OpKind = OpKind::Put;
    const D: OpKind = OpKind::Remove;
    const I: OpKind = OpKind::Insert;

    #[test]
    fn last_acknowledged_write_wins() {
        let h = [
            (w(0, 0), 1, P, "d0:1", 10, Some((20, true, false))),
            (w(0, 0), 2, P, "d0:1", 30, Some((40, true, true))),
        ];
        assert!(run(&h, &[], &[("d0:1", Some((w(0, 0), 2)))]).is_empty());
        assert!(
            !run(&h, &[], &[("d0:1", Some((w(0, 0), 1)))]).is_empty(),
            "lost write not caught"
        );
        assert!(
            !run(&h, &[], &[("d0:1", None)]).is_empty(),
            "lost key not caught"
        );
        assert!(
            !run(&h, &[], &[("d0:1", Some((w(0, 0), 7)))]).is_empty(),
            "fabricated value not caught"
        );
        let h2 = [
            (w(0, 0), 1, P, "d0:1", 10, Some((20, true, false))),
            (w(0, 0), 2, D, "d0:1", 30, Some((40, true, true))),
        ];
        assert!(run(&h2, &[], &[("d0:1", None)]).is_empty());
        assert!(
            !run(&h2, &[], &[("d0:1", Some((w(0, 0), 1)))]).is_empty(),
            "resurrected key not caught"
        );
    }

    #[test]
    fn overlapping_writers_either_may_win_but_not_an_earlier_one() {
        let h = [
            (w(0, 0), 1, P, "h:1", 10, Some((20, true, false))),
            (w(1, 0), 1, P, "h:1", 30, Some((50, true, true))),
            (w(2, 0), 1, P, "h:1", 35, Some((60, true, true))),
        ];
        assert!(run(&h, &[], &[("h:1", Some((w(1, 0), 1)))]).is_empty());
        assert!(run(&h, &[], &[("h:1", Some((w(2, 0), 1)))]).is_empty());
        assert!(
            !run(&h, &[], &[("h:1", Some((w(0, 0), 1)))]).is_empty(),
            "overwritten value not caught"
        );
    }

    #[test]
    fn observations_after_the_last_change_must_agree() {
        // A remove that found nothing, after the put returned: the put cannot be last.
        let h = [
            (w(0, 0), 1, P, "h:1", 10, Some((20, true, false))),
            (w(1, 0), 1, D, "h:1", 30, Some((40, false, false))),
        ];
        assert!(
            !run(&h, &[], &[("h:1", Some((w(0, 0), 1)))]).is_empty(),
            "inconsistent observation not caught"
        );
        // An insert that failed must not be the final value.
        let h = [(w(0, 0), 1, I, "h:1", 10, Some((20, false, true)))];
        assert!(
            !run(&h, &[], &[("h:1", Some((w(0, 0), 1)))]).is_empty(),
            "unapplied insert's value not caught"
        );
        // An insert that found the key present, with nothing ever stored: impossible.
        assert!(
            !run(&h, &[], &[("h:1", None)]).is_empty(),
            "present observation of a never-written key not caught"
        );
    }

    #[test]
    fn in_flight_operations_of_killed_writers() {
        let h = [
            (w(0, 0), 1, P, "d0:1", 10, Some((20, true, false))),
            (w(0, 0), 2, P, "d0:1", 30, None),
        ];
        // Either outcome of the in-flight put is fine once the writer is dead.
        assert!(run(&h, &[(w(0, 0), 100)], &[("d0:1", Some((w(0, 0), 1)))]).is_empty());
        assert!(run(&h, &[(w(0, 0), 100)], &[("d0:1", Some((w(0, 0), 2)))]).is_empty());
        // ... but not from a writer that was never killed.
        assert!(
            !run(&h, &[], &[("d0:1", Some((w(0, 0), 2)))]).is_empty(),
            "in flight without a kill not caught"
        );
        // A change acknowledged after the death must win over the dead writer's intent.
        let mut h2 = h.to_vec();
        h2.push((
            w(0, 1),
            (1 << 40) + 1,
            D,
            "d0:1",
            150,
            Some((160, true, true)),
        ));
        assert!(run(&h2, &[(w(0, 0), 100)], &[("d0:1", None)]).is_empty());
        assert!(
            !run(&h2, &[(w(0, 0), 100)], &[("d0:1", Some((w(0, 0), 2)))]).is_empty(),
            "late-applied intent not caught"
        );
        // A remove that found nothing after the death does not exclude the dead put.
        let mut h3 = h.to_vec();
        h3.push((
            w(0, 1),
            (1 << 40) + 1,
            D,
            "d0:1",
            150,
            Some((160, false, false)),
        ));
        assert!(run(&h3, &[(w(0, 0), 100)], &[("d0:1", Some((w(0, 0), 2)))]).is_empty());
        // A torn value is never fine.
        let l = logs(&h);
        let d: HashMap<Wid, u64> = [(w(0, 0), 100)].into_iter().collect();
        let (_, p) = check_final(&l, &d, |k| {
            let mut v = make_value(k, w(0, 0), 2, 3);
            let n = v.len();
            v[n - 2] ^= 0x40;
            Ok(Final::Present(v))
        });
        assert!(!p.is_empty(), "torn value not caught");
    }
}
