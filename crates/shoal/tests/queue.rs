//! Queue sets: elements passed by reference between queues, in one process and between
//! processes, against a model, and after the death of a holder.

mod common;

use proptest::prelude::*;
use shoal::{Error, MapKind, QueueSetOptions, Store};
use std::collections::VecDeque;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

fn shm_dir() -> tempfile::TempDir {
    tempfile::tempdir_in("/dev/shm").unwrap()
}

fn opts() -> QueueSetOptions {
    QueueSetOptions::new(100, 8)
        .queue("a2b")
        .queue_with_limit("b2a", 3)
}

#[test]
fn elements_move_by_reference_and_keep_their_bytes() {
    let d = shm_dir();
    let s = Store::open(d.path().join("q.shoal")).unwrap();
    let set = s.queue_set("ping", &opts()).unwrap();
    assert_eq!(set.queue_names(), ["free", "a2b", "b2a"]);
    assert_eq!((set.element_size(), set.elements()), (100, 8));
    let (free, a2b) = (set.queue("free").unwrap(), set.queue("a2b").unwrap());
    assert_eq!(set.len(free).unwrap(), 8);
    let mut e = set.pull(free).unwrap().unwrap();
    assert_eq!(e.index(), 0, "elements start in order");
    assert_eq!(e.to_vec(), vec![0u8; 100], "elements start zeroed");
    e.write(96, b"tail");
    // In place, word by word: 100 bytes are 13 words.
    let w = e.words();
    assert_eq!(w.len(), 13);
    w[1].store(
        u64::from_le_bytes(*b"in place"),
        std::sync::atomic::Ordering::Relaxed,
    );
    let mut b8 = [0u8; 8];
    e.read(8, &mut b8);
    assert_eq!(&b8, b"in place");
    let idx = e.index();
    set.push(a2b, e).unwrap();
    assert_eq!((set.len(free).unwrap(), set.len(a2b).unwrap()), (7, 1));
    // Another handle, as another process would open it, sees the same element.
    let other = Store::open(d.path().join("q.shoal"))
        .unwrap()
        .open_queue_set("ping")
        .unwrap();
    let got = other.pull(other.queue("a2b").unwrap()).unwrap().unwrap();
    assert_eq!(got.index(), idx);
    let mut b = [0u8; 4];
    got.read(96, &mut b);
    assert_eq!(&b, b"tail");
    assert_eq!(got.from(), a2b);
    assert!(!got.redelivered());
    drop(got); // back to a2b
    assert_eq!(set.len(a2b).unwrap(), 1);
    let st = set.stats(a2b).unwrap();
    assert_eq!(
        (st.name.as_str(), st.len, st.pushes, st.pulls),
        ("a2b", 1, 2, 1)
    );
    assert!(s.check().unwrap().is_ok());
    assert_eq!(s.queue_sets().unwrap(), ["ping"]);
    assert!(s.maps().unwrap().is_empty());
}

#[test]
fn fifo_batches_moves_and_where_a_dropped_element_goes() {
    let d = shm_dir();
    let s = Store::open(d.path().join("q.shoal")).unwrap();
    let set = s.queue_set("s", &opts()).unwrap();
    let (free, a2b, b2a) = (
        set.queue("free").unwrap(),
        set.queue("a2b").unwrap(),
        set.queue("b2a").unwrap(),
    );
    let batch = set.pull_many(free, 5).unwrap();
    assert_eq!(
        batch.iter().map(|e| e.index()).collect::<Vec<_>>(),
        [0, 1, 2, 3, 4]
    );
    let mut rev = batch;
    rev.reverse();
    set.push_many(a2b, rev).unwrap();
    let order: Vec<u64> = set
        .pull_many(a2b, 10)
        .unwrap()
        .into_iter()
        .map(|e| {
            let i = e.index();
            e.keep();
            i
        })
        .collect();
    assert_eq!(order, [4, 3, 2, 1, 0], "FIFO");
    // Kept elements stay held by this process.
    assert_eq!(set.held().unwrap()[0].elements, 5);
    assert_eq!(set.move_to(free, a2b, 100).unwrap(), 3);
    assert_eq!(set.move_to(a2b, b2a, 100).unwrap(), 3, "limit 3");
    assert_eq!(set.move_to(free, b2a, 1).unwrap(), 0, "free is empty");
    assert!(matches!(
        set.move_to(a2b, a2b, 1),
        Err(Error::InvalidArgument(_))
    ));
    let mut e = set.pull(b2a).unwrap().unwrap();
    e.return_to(free).unwrap();
    drop(e);
    assert_eq!((set.len(free).unwrap(), set.len(b2a).unwrap()), (1, 2));
    assert!(s.check().unwrap().is_ok());
}

#[test]
fn a_depth_limit_is_honoured_and_a_refused_element_is_not_lost() {
    let d = shm_dir();
    let s = Store::open(d.path().join("q.shoal")).unwrap();
    let set = s.queue_set("s", &opts()).unwrap();
    let (free, b2a) = (set.queue("free").unwrap(), set.queue("b2a").unwrap());
    for _ in 0..3 {
        let e = set.pull(free).unwrap().unwrap();
        set.push(b2a, e).unwrap();
    }
    let e = set.pull(free).unwrap().unwrap();
    let idx = e.index();
    let (err, back) = set.try_push(b2a, e).unwrap_err();
    assert!(matches!(err, Error::QueueFull(_)), "{err}");
    assert!(err.to_string().contains("b2a"), "{err}");
    assert_eq!(back.index(), idx);
    let two = set.pull_many(free, 2).unwrap();
    assert!(matches!(set.push_many(b2a, two), Err(Error::QueueFull(_))));
    // Refused by push: dropped, so back to free.
    assert!(matches!(set.push(b2a, back), Err(Error::QueueFull(_))));
    assert_eq!(set.len(free).unwrap(), 5);
    assert_eq!(set.len(b2a).unwrap(), 3);
    assert!(s.check().unwrap().is_ok());
}

#[test]
fn bad_arguments_and_other_kinds_are_clear_errors() {
    let d = shm_dir();
    let s = Store::open(d.path().join("q.shoal")).unwrap();
    for (o, what) in [
        (QueueSetOptions::new(0, 8), "element size"),
        (QueueSetOptions::new(8, 0), "element count"),
        (
            QueueSetOptions::new(8, 8).queue(&"x".repeat(121)),
            "queue name",
        ),
        (
            (0..300).fold(QueueSetOptions::new(8, 8), |o, i| o.queue(&format!("q{i}"))),
            "queues",
        ),
    ] {
        let e = s.queue_set("bad", &o).unwrap_err();
        assert!(
            matches!(&e, Error::InvalidArgument(m) if m.contains(what)),
            "{e}"
        );
    }
    s.map("m").unwrap().put(b"k", b"v").unwrap();
    assert!(matches!(
        s.queue_set("m", &opts()),
        Err(Error::WrongMapKind { .. })
    ));
    let set = s.queue_set("q", &opts()).unwrap();
    let e = s.map("q").unwrap_err();
    assert!(
        matches!(
            &e,
            Error::WrongMapKind {
                found: MapKind::QueueSet { elements: 8, .. },
                ..
            }
        ),
        "{e}"
    );
    assert!(e.to_string().contains("queue_set"), "{e}");
    assert!(matches!(
        s.fixed_map("q", 8, 8),
        Err(Error::WrongMapKind { .. })
    ));
    assert!(matches!(set.queue("nope"), Err(Error::NotFound(_))));
    assert!(matches!(s.open_queue_set("nope"), Err(Error::NotFound(_))));
    let free = set.queue("free").unwrap();
    // Not while this process holds an element: its bytes would be written after the
    // set's space went to another object.
    let held = set.pull(free).unwrap().unwrap();
    let e = s.drop_map("q").unwrap_err();
    assert!(
        matches!(&e, Error::InvalidArgument(m) if m.contains("in use")),
        "{e}"
    );
    drop(held);
    assert!(set.pull(free).unwrap().is_some(), "the set stays open");
    assert!(s.drop_map("q").unwrap());
    assert!(matches!(set.pull(free), Err(Error::NotFound(_))));
    assert!(matches!(set.len(free), Err(Error::NotFound(_))));
    assert!(s.check().unwrap().is_ok());
    // The name is free again, for any kind.
    s.map("q").unwrap().put(b"k", b"v").unwrap();
}

#[test]
fn a_deadline_is_honoured_and_pull_any_takes_from_any_queue() {
    let d = shm_dir();
    let s = Store::open(d.path().join("q.shoal")).unwrap();
    let set = s.queue_set("s", &opts()).unwrap();
    let (free, a2b, b2a) = (
        set.queue("free").unwrap(),
        set.queue("a2b").unwrap(),
        set.queue("b2a").unwrap(),
    );
    let t = Instant::now();
    assert!(set
        .pull_wait(a2b, Duration::from_millis(150))
        .unwrap()
        .is_none());
    assert!(t.elapsed() >= Duration::from_millis(150));
    let e = set.pull(free).unwrap().unwrap();
    set.push(b2a, e).unwrap();
    let got = set
        .pull_any(&[a2b, b2a], Duration::from_secs(60))
        .unwrap()
        .unwrap();
    assert_eq!(got.from(), b2a);
    // A push from another thread wakes a sleeping pull_any.
    std::thread::scope(|sc| {
        sc.spawn(|| {
            std::thread::sleep(Duration::from_millis(50));
            set.push(a2b, got).unwrap();
        });
        let e = set
            .pull_any(&[b2a, a2b], Duration::from_secs(60))
            .unwrap()
            .expect("woken by the push");
        assert_eq!(e.from(), a2b);
    });
    assert!(set.stats(a2b).unwrap().waits + set.stats(b2a).unwrap().waits >= 1);
}

// ---- other processes: a child of this test binary, by role ----

fn spawn(path: &Path, role: &str) -> std::process::Child {
    Command::new(std::env::current_exe().unwrap())
        .args([
            "--exact",
            "queue_worker",
            "--ignored",
            "--nocapture",
            "--test-threads=1",
        ])
        .env("SHOAL_QUEUE_ROLE", role)
        .env("SHOAL_QUEUE_PATH", path)
        .env_remove("FAILPOINTS")
        .stdout(Stdio::null())
        .spawn()
        .unwrap()
}

/// Waits (bounded, generously) for `child`; returns its exit status.
fn wait(child: &mut std::process::Child) -> std::process::ExitStatus {
    let start = Instant::now();
    loop {
        if let Some(st) = child.try_wait().unwrap() {
            return st;
        }
        if start.elapsed() > Duration::from_secs(120) {
            let _ = child.kill();
            panic!("worker did not finish in 120 s");
        }
        std::thread::sleep(Duration::from_millis(5));
    }
}

#[test]
#[ignore = "run as a child by the tests of this file"]
fn queue_worker() {
    let role = std::env::var("SHOAL_QUEUE_ROLE").expect("run by a queue test");
    let path = PathBuf::from(std::env::var("SHOAL_QUEUE_PATH").unwrap());
    let s = Store::open_existing(&path).unwrap();
    let set = s.open_queue_set("s").unwrap();
    let (free, a2b) = (set.queue("free").unwrap(), set.queue("a2b").unwrap());
    match role.as_str() {
        // Waits for the parent's signal element, then pushes one element to a2b.
        "pusher" => {
            let mut e = set.pull(free).unwrap().unwrap();
            e.write(0, b"from the child");
            set.push(a2b, e).unwrap();
        }
        // Takes three elements from a2b and dies holding them (no destructor runs).
        "holder" => {
            let mut held = Vec::new();
            while held.len() < 3 {
                if let Some(e) = set.pull_wait(a2b, Duration::from_secs(60)).unwrap() {
                    held.push(e);
                }
            }
            std::process::abort();
        }
        r => panic!("unknown role {r}"),
    }
}

#[test]
fn a_pull_sleeping_in_one_process_is_woken_by_a_push_from_another() {
    let d = shm_dir();
    let path = d.path().join("q.shoal");
    let s = Store::open(&path).unwrap();
    let set = s.queue_set("s", &opts()).unwrap();
    let a2b = set.queue("a2b").unwrap();
    std::thread::scope(|sc| {
        let waiter = sc.spawn(|| set.pull_wait(a2b, Duration::from_secs(120)).unwrap());
        // Wait until the pull sleeps (bounded), so that the push must wake it.
        let start = Instant::now();
        while set.stats(a2b).unwrap().waits == 0 && start.elapsed() < Duration::from_secs(60) {
            std::thread::sleep(Duration::from_millis(1));
        }
        let mut child = spawn(&path, "pusher");
        assert!(wait(&mut child).success());
        let e = waiter.join().unwrap().expect("woken by the child's push");
        let mut b = [0u8; 14];
        e.read(0, &mut b);
        assert_eq!(&b, b"from the child");
    });
}

#[test]
fn the_elements_of_a_holder_killed_go_back_once_and_only_once() {
    for redeliver in [false, true] {
        let d = shm_dir();
        let path = d.path().join("q.shoal");
        let s = Store::open(&path).unwrap();
        let set = s.queue_set("s", &opts().redeliver(redeliver)).unwrap();
        let (free, a2b) = (set.queue("free").unwrap(), set.queue("a2b").unwrap());
        let moved = set.move_to(free, a2b, 3).unwrap();
        assert_eq!(moved, 3);
        let mut child = spawn(&path, "holder");
        let st = wait(&mut child);
        assert!(!st.success(), "the holder aborts");
        assert_eq!(set.len(a2b).unwrap() + set.len(free).unwrap(), 5);
        assert_eq!(set.held().unwrap().len(), 1, "held by the dead child");
        let back = set.reclaim().unwrap();
        assert_eq!(back, 3, "redeliver {redeliver}");
        assert_eq!(set.reclaim().unwrap(), 0, "only once");
        assert!(set.held().unwrap().is_empty());
        let r = s.check().unwrap();
        assert!(r.is_ok(), "{r}");
        if redeliver {
            assert_eq!(set.len(a2b).unwrap(), 3);
            let e = set.pull(a2b).unwrap().unwrap();
            assert!(e.redelivered(), "a redelivered element says so");
        } else {
            assert_eq!(set.len(free).unwrap(), 8);
        }
    }
}

#[test]
fn a_pull_waiting_on_an_empty_queue_gets_a_dead_holders_element_back() {
    let d = shm_dir();
    let path = d.path().join("q.shoal");
    let s = Store::open(&path).unwrap();
    let set = s
        .queue_set("s", &QueueSetOptions::new(8, 3).queue("a2b"))
        .unwrap();
    let (free, a2b) = (set.queue("free").unwrap(), set.queue("a2b").unwrap());
    set.move_to(free, a2b, 3).unwrap();
    let mut child = spawn(&path, "holder");
    assert!(!wait(&mut child).success());
    // Nothing is pushed: the waiting pull itself notices the dead holder.
    let e = set
        .pull_wait(free, Duration::from_secs(60))
        .unwrap()
        .expect("the dead holder's element");
    assert_eq!(e.from(), free);
}

// ---- a model ----

#[derive(Clone, Debug)]
enum Op {
    Pull(u8),
    PullMany(u8, u8),
    Push(u8, u8),
    PushMany(u8, u8),
    Move(u8, u8, u8),
    Drop(u8),
    Keep(u8),
    Reopen,
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        (0..3u8).prop_map(Op::Pull),
        (0..3u8, 0..6u8).prop_map(|(q, n)| Op::PullMany(q, n)),
        (any::<u8>(), 0..3u8).prop_map(|(i, q)| Op::Push(i, q)),
        (0..3u8, 0..6u8).prop_map(|(q, n)| Op::PushMany(q, n)),
        (0..3u8, 0..3u8, 0..6u8).prop_map(|(a, b, n)| Op::Move(a, b, n)),
        any::<u8>().prop_map(Op::Drop),
        any::<u8>().prop_map(Op::Keep),
        Just(Op::Reopen),
    ]
}

const LIMITS: [u64; 3] = [0, 0, 3];

proptest! {
    #![proptest_config(ProptestConfig { cases: 64, ..ProptestConfig::default() })]
    #[test]
    fn queue_sets_behave_as_their_model(ops in proptest::collection::vec(op(), 1..120)) {
        let d = shm_dir();
        let path = d.path().join("q.shoal");
        let s = Store::open(&path).unwrap();
        s.queue_set("s", &opts()).unwrap();
        // Handles of this process on the set, as separate opens make them: elements
        // pulled through one stay held while another is used.
        let handles: Vec<shoal::QueueSet> = (0..3)
            .map(|_| Store::open(&path).unwrap().open_queue_set("s").unwrap())
            .collect();
        let mut set = &handles[0];
        let mut cur = 0;
        let qs: Vec<_> = ["free", "a2b", "b2a"].iter().map(|n| set.queue(n).unwrap()).collect();
        let mut model: Vec<VecDeque<u64>> = vec![(0..8).collect(), VecDeque::new(), VecDeque::new()];
        // Held elements, and the queue each goes to when dropped.
        let mut held: Vec<(shoal::Element<'_>, usize)> = Vec::new();
        let mut kept = 0u64;
        for op in ops {
            match op {
                Op::Pull(q) => {
                    let got = set.pull(qs[q as usize]).unwrap();
                    let want = model[q as usize].pop_front();
                    prop_assert_eq!(got.as_ref().map(|e| e.index()), want);
                    if let Some(e) = got { held.push((e, q as usize)); }
                }
                Op::PullMany(q, n) => {
                    let got = set.pull_many(qs[q as usize], n as usize).unwrap();
                    for e in got {
                        prop_assert_eq!(Some(e.index()), model[q as usize].pop_front());
                        held.push((e, q as usize));
                    }
                }
                Op::Push(i, q) if !held.is_empty() => {
                    let (e, back) = held.swap_remove(i as usize % held.len());
                    let idx = e.index();
                    let full = LIMITS[q as usize] != 0 && model[q as usize].len() as u64 >= LIMITS[q as usize];
                    let r = set.push(qs[q as usize], e);
                    prop_assert_eq!(r.is_err(), full);
                    model[if full { back } else { q as usize }].push_back(idx);
                }
                Op::PushMany(q, n) => {
                    let n = (n as usize).min(held.len());
                    let batch: Vec<_> = held.drain(..n).collect();
                    let full = LIMITS[q as usize] != 0
                        && model[q as usize].len() as u64 + n as u64 > LIMITS[q as usize];
                    let idx: Vec<u64> = batch.iter().map(|(e, _)| e.index()).collect();
                    let backs: Vec<usize> = batch.iter().map(|(_, b)| *b).collect();
                    let r = set.push_many(qs[q as usize], batch.into_iter().map(|(e, _)| e).collect());
                    prop_assert_eq!(r.is_err(), full && n > 0);
                    for (i, b) in idx.into_iter().zip(backs) {
                        model[if full { b } else { q as usize }].push_back(i);
                    }
                }
                Op::Move(a, b, n) if a != b => {
                    let room = if LIMITS[b as usize] == 0 { usize::MAX } else {
                        (LIMITS[b as usize] as usize).saturating_sub(model[b as usize].len())
                    };
                    let k = (n as usize).min(model[a as usize].len()).min(room);
                    prop_assert_eq!(set.move_to(qs[a as usize], qs[b as usize], n as usize).unwrap(), k);
                    for _ in 0..k {
                        let x = model[a as usize].pop_front().unwrap();
                        model[b as usize].push_back(x);
                    }
                }
                Op::Drop(i) if !held.is_empty() => {
                    let (e, back) = held.swap_remove(i as usize % held.len());
                    model[back].push_back(e.index());
                }
                Op::Keep(i) if !held.is_empty() => {
                    let (e, _) = held.swap_remove(i as usize % held.len());
                    e.keep();
                    kept += 1;
                }
                Op::Reopen => {
                    // Held elements stay held across another handle of this process.
                    cur = (cur + 1) % handles.len();
                    set = &handles[cur];
                }
                _ => {}
            }
            for (q, m) in qs.iter().zip(&model) {
                prop_assert_eq!(set.len(*q).unwrap(), m.len() as u64);
            }
        }
        let held_n: u64 = set.held().unwrap().iter().map(|h| h.elements).sum();
        prop_assert_eq!(held_n, held.len() as u64 + kept);
        let r = s.check().unwrap();
        prop_assert!(r.is_ok(), "{}", r);
        for (e, back) in held {
            model[back].push_back(e.index());
        }
        for (q, m) in qs.iter().zip(&model) {
            let got: Vec<u64> = set.pull_many(*q, 100).unwrap().into_iter().map(|e| { let i = e.index(); e.keep(); i }).collect();
            prop_assert_eq!(got, m.iter().copied().collect::<Vec<_>>());
        }
    }
}

// ---- damage: check, repair, salvage ----

/// The offset of queue `name`'s entry in the store file at `path` (its name is stored at
/// entry + 136).
fn queue_entry(path: &Path, name: &[u8]) -> usize {
    let b = std::fs::read(path).unwrap();
    let mut pat = (name.len() as u64).to_le_bytes().to_vec();
    pat.extend_from_slice(name);
    b.windows(pat.len())
        .position(|w| w == pat)
        .expect("the queue's name")
        - 128
}

#[test]
fn check_finds_a_broken_queue_and_repair_relinks_it_losing_nothing() {
    let d = shm_dir();
    let path = d.path().join("q.shoal");
    {
        let s = Store::open(&path).unwrap();
        let set = s.queue_set("s", &opts()).unwrap();
        let (free, a2b) = (set.queue("free").unwrap(), set.queue("a2b").unwrap());
        set.move_to(free, a2b, 5).unwrap();
        set.pull(a2b).unwrap().unwrap().keep(); // held, by a process that will be gone
    }
    // a2b's length says 2 where it holds 4: the walk stops early.
    let qe = queue_entry(&path, b"a2b");
    let mut b = std::fs::read(&path).unwrap();
    assert_eq!(
        u64::from_le_bytes(b[qe + 24..qe + 32].try_into().unwrap()),
        4
    );
    b[qe + 24..qe + 32].copy_from_slice(&2u64.to_le_bytes());
    std::fs::write(&path, &b).unwrap();
    let s = Store::open_existing(&path).unwrap();
    let r = s.check().unwrap();
    assert!(!r.is_ok());
    assert!(r.to_string().contains("a2b"), "{r}");
    drop(s);
    let (s, rep) = Store::repair(&path).unwrap();
    assert!(
        rep.rebuilt.iter().any(|r| r.contains("queue set \"s\"")),
        "{rep:?}"
    );
    let r = s.check().unwrap();
    assert!(r.is_ok(), "{r}");
    let set = s.open_queue_set("s").unwrap();
    let total: u64 = ["free", "a2b", "b2a"]
        .iter()
        .map(|n| set.len(set.queue(n).unwrap()).unwrap())
        .sum();
    assert_eq!(total, 8, "every element in a queue after repair");
    assert_eq!(
        set.len(set.queue("a2b").unwrap()).unwrap(),
        2,
        "the sound prefix"
    );
}

#[test]
fn a_truncated_store_is_salvaged_with_its_queue_set_whole() {
    let d = shm_dir();
    let path = d.path().join("q.shoal");
    {
        let s = Store::open(&path).unwrap();
        let set = s.queue_set("s", &opts()).unwrap();
        let (free, a2b) = (set.queue("free").unwrap(), set.queue("a2b").unwrap());
        for i in 0..3u8 {
            let mut e = set.pull(free).unwrap().unwrap();
            e.write(0, &[i + 1; 100]);
            set.push(a2b, e).unwrap();
        }
        // Data after the set, to be cut off.
        let m = s.map("m").unwrap();
        for i in 0..2000u32 {
            m.put(&i.to_le_bytes(), &[7u8; 1000]).unwrap();
        }
    }
    let len = std::fs::metadata(&path).unwrap().len();
    let f = std::fs::OpenOptions::new().write(true).open(&path).unwrap();
    f.set_len(len - len / 4).unwrap();
    drop(f);
    let (s, _) = Store::repair(&path).unwrap();
    assert!(s.check().unwrap().is_ok());
    let set = s.open_queue_set("s").unwrap();
    let a2b = set.queue("a2b").unwrap();
    assert_eq!(set.len(a2b).unwrap(), 3);
    assert_eq!(set.len(set.queue("free").unwrap()).unwrap(), 5);
    assert_eq!(set.stats(set.queue("b2a").unwrap()).unwrap().limit, 3);
    for i in 0..3u8 {
        let e = set.pull(a2b).unwrap().unwrap();
        assert_eq!(e.index(), i as u64);
        assert_eq!(e.to_vec(), vec![i + 1; 100]);
        e.keep();
    }
}

#[test]
fn held_elements_known_by_index_are_adopted_only_by_their_holder() {
    let d = shm_dir();
    let s = Store::open(d.path().join("q.shoal")).unwrap();
    let set = s.queue_set("s", &opts()).unwrap();
    let (free, a2b, b2a) = (
        set.queue("free").unwrap(),
        set.queue("a2b").unwrap(),
        set.queue("b2a").unwrap(),
    );
    assert_eq!(set.queue_at(1).unwrap(), a2b);
    assert!(matches!(set.queue_at(3), Err(Error::InvalidArgument(_))));
    let h = set.pull(free).unwrap().unwrap().into_held();
    assert_eq!((h.index, h.from, h.redelivered), (0, free, false));
    assert_eq!(set.held().unwrap()[0].elements, 1, "still held");
    let e = set.adopt(h).unwrap();
    set.push(a2b, e).unwrap();
    // Pushed: no longer this process's, so it cannot be adopted again.
    let e = set.adopt(h).unwrap_err();
    assert!(e.to_string().contains("not held"), "{e}");
    // A batch refused at a limit comes back whole, still held.
    let four = set.pull_many(free, 4).unwrap();
    let (err, back) = set.try_push_many(b2a, four).unwrap_err();
    assert!(matches!(err, Error::QueueFull(_)));
    assert_eq!(back.len(), 4);
    let mut it = back.into_iter();
    let first = it.next().unwrap();
    set.release(first).unwrap();
    assert_eq!(set.len(free).unwrap(), 4, "released back to free");
    set.try_push_many(a2b, it.collect())
        .map_err(|(e, _)| e)
        .unwrap();
    assert_eq!(set.len(a2b).unwrap(), 4);
    assert!(s.check().unwrap().is_ok());
}
