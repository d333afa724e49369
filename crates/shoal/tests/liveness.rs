//! A process that attaches to the slot of a dead process while another process is
//! marking that slot free must stay alive in everyone's eyes. Needs the `failpoints`
//! feature: the processes are this binary re-executed on `liveness_worker`, and the one
//! that marks dead slots free is held at the fail point `reclaim.proc_unlocked` (it found
//! the slot unlocked and is about to mark it free) until the other has attached to that
//! slot and holds a segment lock.
//!
//! The bug this guards against (found by the soak): the slot was marked free
//! on the strength of the earlier look, which wiped the new process's registration. Every
//! other process then judged it dead: a writer waiting for a lock it held took the lock
//! away mid-write, and its txn slots went to other threads while it used them.

use shoal::{Error, OpenMode, Options, Store};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// How long any wait for another process may take before the test fails (generous: the
/// machine may be busy).
const WAIT: Duration = Duration::from_secs(60);

fn tmp() -> tempfile::TempDir {
    tempfile::tempdir_in("/dev/shm")
        .or_else(|_| tempfile::tempdir())
        .unwrap()
}

/// Waits (bounded by [`WAIT`]) until `path` exists.
fn wait_for(path: &Path) {
    let start = Instant::now();
    while !path.exists() {
        assert!(
            start.elapsed() < WAIT,
            "{} did not appear within {WAIT:?}",
            path.display()
        );
        std::thread::sleep(Duration::from_millis(5));
    }
}

fn touch(path: &Path) {
    std::fs::write(path, b"").unwrap();
}

/// Entry point of the worker processes; `SHOAL_LIVENESS_ROLE` says which:
/// - `zombie`: attaches, says so, and waits to be killed;
/// - `reclaimer`: attaches (which marks dead process slots free), held at the first slot
///   it is about to mark free until the file `go` exists;
/// - `holder`: puts "hot", held with the segment lock taken until the file `release`
///   exists.
#[test]
#[ignore = "run as a child process by the other tests of this file"]
fn liveness_worker() {
    let role = std::env::var("SHOAL_LIVENESS_ROLE").expect("run by the liveness test");
    let dir = PathBuf::from(std::env::var("SHOAL_LIVENESS_DIR").unwrap());
    let path = dir.join("s.shoal");
    shoal::failpoints::setup();
    match role.as_str() {
        "zombie" => {
            let _s = Store::open_existing(&path).unwrap();
            touch(&dir.join(format!(
                "zombie-{}",
                std::env::var("SHOAL_LIVENESS_N").unwrap()
            )));
            std::thread::sleep(WAIT * 2);
        }
        "reclaimer" => {
            let once = std::sync::atomic::AtomicBool::new(false);
            let d = dir.clone();
            shoal::failpoints::callback("reclaim.proc_unlocked", move || {
                if !once.swap(true, std::sync::atomic::Ordering::SeqCst) {
                    touch(&d.join("reclaimer-paused"));
                    wait_for(&d.join("go"));
                }
            })
            .unwrap();
            let _s = Store::open_existing(&path).unwrap();
        }
        "holder" => {
            let d = dir.clone();
            shoal::failpoints::callback("write.locked", move || {
                touch(&d.join("holder-locked"));
                wait_for(&d.join("release"));
            })
            .unwrap();
            let s = Store::open_existing(&path).unwrap();
            s.open_map("m")
                .unwrap()
                .put(b"hot", b"from the holder")
                .unwrap();
        }
        r => panic!("unknown role {r}"),
    }
}

fn spawn(dir: &Path, role: &str, n: u32) -> Child {
    Command::new(std::env::current_exe().unwrap())
        .args([
            "--exact",
            "liveness_worker",
            "--ignored",
            "--nocapture",
            "--test-threads=1",
        ])
        .env("SHOAL_LIVENESS_ROLE", role)
        .env("SHOAL_LIVENESS_DIR", dir)
        .env("SHOAL_LIVENESS_N", n.to_string())
        .env_remove("FAILPOINTS")
        .stdout(Stdio::null())
        .spawn()
        .unwrap()
}

/// Waits (bounded) for `child` to exit; returns whether it succeeded.
fn wait_exit(child: &mut Child) -> bool {
    let start = Instant::now();
    loop {
        if let Some(st) = child.try_wait().unwrap() {
            return st.success();
        }
        if start.elapsed() > WAIT {
            let _ = child.kill();
            panic!("a worker did not exit within {WAIT:?}");
        }
        std::thread::sleep(Duration::from_millis(5));
    }
}

#[test]
fn a_process_attaching_while_dead_slots_are_freed_stays_alive() {
    let d = tmp();
    let dir = d.path();
    let s = Store::open_with(
        dir.join("s.shoal"),
        &Options::default(),
        OpenMode::CreateNew,
    )
    .unwrap();
    let m = s.map("m").unwrap();
    m.put(b"hot", b"from the test").unwrap();

    // Two dead processes, both still marked attached: slots 1 and 2 (this one has 0).
    let mut zombies: Vec<Child> = (1..=2)
        .map(|n| {
            let c = spawn(dir, "zombie", n);
            wait_for(&dir.join(format!("zombie-{n}")));
            c
        })
        .collect();
    for z in &mut zombies {
        z.kill().unwrap();
        z.wait().unwrap();
    }

    // The reclaimer attaches to slot 1 and stops before marking slot 2 free; the holder
    // attaches to slot 2 meanwhile and takes the segment lock of "hot".
    let mut reclaimer = spawn(dir, "reclaimer", 0);
    wait_for(&dir.join("reclaimer-paused"));
    let mut holder = spawn(dir, "holder", 0);
    wait_for(&dir.join("holder-locked"));
    touch(&dir.join("go"));
    assert!(wait_exit(&mut reclaimer), "the reclaimer failed");

    // The holder is alive: its lock must not be taken from it.
    let probe = m
        .with_timeout(Duration::from_millis(300))
        .put(b"hot", b"probe");
    let processes = s.stats().unwrap().processes;
    touch(&dir.join("release"));
    assert!(wait_exit(&mut holder), "the holder failed");
    assert!(
        matches!(probe, Err(Error::Timeout(_))),
        "a put took the lock a live process held: {probe:?}"
    );
    assert_eq!(processes, 2, "this process and the holder are attached");
    assert_eq!(
        m.get(b"hot").unwrap().as_deref(),
        Some(&b"from the holder"[..])
    );
    let r = s.check().unwrap();
    assert!(r.is_ok(), "{r}");
}
