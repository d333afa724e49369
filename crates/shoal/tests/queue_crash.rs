//! The crash driver of queue sets: a child killed at every step of every move.
//!
//! For every fail point in `shoal::failpoints::QUEUE_NAMES`, a census run of the worker
//! (below) counts how often it passes there, H; then a child is killed (abort: no
//! destructor, locks and intents left as they are) at passes 1, 2, H/2 and H. A first
//! child, killed holding three elements, leaves a dead holder for the worker's sweep
//! to hand back (the sweep's points). After each kill this process hands back the dead
//! child's elements, and checks that every element is in exactly one queue (`check`, the
//! lengths, and a drain of every queue that sees each element once), then moves elements
//! again. The test fails if a case fails or a point was never reached.
#![cfg(feature = "failpoints")]

mod common;

use common::crash_child;
use shoal::{QueueSetOptions, Store};
use std::collections::BTreeSet;
use std::os::unix::process::ExitStatusExt;
use std::path::Path;
use std::time::Duration;

const ELEMENTS: u64 = 64;

fn set_opts() -> QueueSetOptions {
    QueueSetOptions::new(32, ELEMENTS)
        .queue("work")
        .queue_with_limit("done", 40)
}

/// A store whose set holds three elements of a dead process (a child that aborted).
fn prepare(path: &Path) {
    {
        let s = Store::open(path).unwrap();
        s.queue_set("s", &set_opts()).unwrap();
    }
    let out = crash_child::run("queue_holder", path, "queue.none", 1);
    assert_eq!(out.status.signal(), Some(6), "the holder aborts");
}

#[test]
#[ignore = "run as a child by the crash driver"]
fn queue_holder() {
    let Some((path, _)) = crash_child::arm() else {
        return;
    };
    let s = Store::open_existing(path).unwrap();
    let set = s.open_queue_set("s").unwrap();
    let held = set.pull_many(set.queue("free").unwrap(), 3).unwrap();
    assert_eq!(held.len(), 3);
    std::process::abort();
}

#[test]
#[ignore = "run as a child by the crash driver"]
fn queue_worker() {
    let Some((path, counter)) = crash_child::arm() else {
        return;
    };
    let s = Store::open_existing(path).unwrap();
    // Opening the set sweeps the dead holder's elements.
    let set = s.open_queue_set("s").unwrap();
    let (free, work, done) = (
        set.queue("free").unwrap(),
        set.queue("work").unwrap(),
        set.queue("done").unwrap(),
    );
    let mut kept = Vec::new();
    for round in 0..40u64 {
        let mut batch = set.pull_many(free, 1 + (round % 5) as usize).unwrap();
        for e in &mut batch {
            e.write(0, &round.to_le_bytes());
        }
        set.push_many(work, batch).unwrap();
        if let Some(e) = set.pull(work).unwrap() {
            if set.try_push(done, e).is_err() {
                // done is at its limit: the element went back to work when dropped.
            }
        }
        if let Some(e) = set.pull_wait(work, Duration::from_millis(1)).unwrap() {
            if round % 7 == 0 {
                kept.push(e); // held until the end
            } else {
                drop(e); // back to work
            }
        }
        set.move_to(done, free, 2).unwrap();
        set.move_to(work, free, 1).unwrap();
    }
    drop(kept);
    crash_child::census_done(counter);
}

/// Everything this process can say about the set after a crash: hands back the dead
/// child's elements, then checks that every element is in exactly one queue.
fn verify(path: &Path) -> Vec<String> {
    let mut problems = Vec::new();
    let s = Store::open_existing(path).unwrap();
    let set = s.open_queue_set("s").unwrap();
    set.reclaim().unwrap();
    if !set.held().unwrap().is_empty() {
        problems.push(format!(
            "still held after reclaim: {:?}",
            set.held().unwrap()
        ));
    }
    let r = s.check().unwrap();
    if !r.is_ok() {
        problems.push(format!("check: {r}"));
    }
    let names = ["free", "work", "done"];
    let total: u64 = names
        .iter()
        .map(|n| set.len(set.queue(n).unwrap()).unwrap())
        .sum();
    if total != ELEMENTS {
        problems.push(format!("the queues hold {total} elements, not {ELEMENTS}"));
    }
    let mut seen = BTreeSet::new();
    let mut all = Vec::new();
    for n in names {
        for e in set
            .pull_many(set.queue(n).unwrap(), ELEMENTS as usize)
            .unwrap()
        {
            if !seen.insert(e.index()) {
                problems.push(format!("element {} in two queues", e.index()));
            }
            all.push(e);
        }
    }
    if seen.len() as u64 != ELEMENTS {
        problems.push(format!("drained {} distinct elements", seen.len()));
    }
    // And the set still works: everything to free, in one batch.
    set.push_many(set.queue("free").unwrap(), all).unwrap();
    if set.len(set.queue("free").unwrap()).unwrap() != ELEMENTS {
        problems.push("free does not hold every element after the drain".into());
    }
    problems
}

#[test]
fn a_crash_at_every_step_of_every_queue_move_loses_and_duplicates_nothing() {
    let points = shoal::failpoints::QUEUE_NAMES;
    let (cases, failures) =
        crash_child::drive("queue_worker", points, prepare, |path, _, _| verify(path));
    assert!(
        failures.is_empty(),
        "{cases} cases; failures:\n{}",
        failures.join("\n")
    );
    assert!(cases >= points.len() * 2, "{cases} cases");
    eprintln!(
        "{cases} crashes at {} fail points, each verified",
        points.len()
    );
}
