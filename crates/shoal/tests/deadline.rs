//! A call's lock timeout bounds the whole call: behind a process stopped (SIGSTOP) while
//! it holds any lock (a segment, the allocator, a cleaning lane), a write waits at most
//! its timeout in all, plus the documented pacing allowance, however many locks and
//! housekeeping steps it meets, and a `Timeout` error reports the time really waited.

mod common;

use shoal::{Error, OpenMode, Options, Store};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// Entry point of the worker process: puts, overwrites and removes on a small store, with
/// a `compact` every 50 operations, until killed.
#[test]
#[ignore = "run as a child process by the other tests of this file"]
fn busy_worker() {
    let path = std::env::var("SHOAL_DEADLINE_PATH").expect("run by the deadline tests");
    let seed: u64 = std::env::var("SHOAL_SEED").unwrap().parse().unwrap();
    let mut rnd = common::xorshift(seed);
    let s = Store::open_existing(&path).unwrap();
    let m = s.open_map("m").unwrap();
    for i in 0u64.. {
        let k = format!("w{}", rnd() % 2000);
        let v = vec![i as u8; 100 + (rnd() % 3000) as usize];
        match rnd() % 8 {
            0 => {
                m.remove(k.as_bytes()).unwrap();
            }
            _ => {
                m.put(k.as_bytes(), &v).unwrap();
            }
        }
        if i % 50 == 0 {
            s.compact().unwrap();
        }
    }
}

fn spawn_worker(path: &std::path::Path, seed: u64) -> Child {
    Command::new(std::env::current_exe().unwrap())
        .args([
            "--exact",
            "busy_worker",
            "--ignored",
            "--nocapture",
            "--test-threads=1",
        ])
        .env("SHOAL_DEADLINE_PATH", path)
        .env("SHOAL_SEED", seed.to_string())
        .stdout(Stdio::null())
        .spawn()
        .unwrap()
}

fn signal(child: &Child, sig: i32) {
    // SAFETY: sending a signal to our own child.
    assert_eq!(unsafe { libc::kill(child.id() as i32, sig) }, 0);
}

/// What a call may take beyond its timeout: the pacing wait for a cleaning lane (200 ms,
/// documented on `Map::with_timeout`) and generous room for two busy cores.
const ALLOWANCE: Duration = Duration::from_millis(1200);

#[test]
fn writes_behind_a_stopped_process_wait_at_most_their_timeout() {
    let seed = common::seed();
    let d = tempfile::tempdir_in("/dev/shm").unwrap();
    let path = d.path().join("a.shoal");
    let o = Options {
        chunk_size: 64 * 1024,
        ..Options::default()
    };
    let s = Store::open_with(&path, &o, OpenMode::CreateNew).unwrap();
    let timeout = Duration::from_secs(2);
    let m = s.map("m").unwrap().with_timeout(timeout);
    let mut worker = spawn_worker(&path, seed);
    let mut rnd = common::xorshift(seed ^ 0x5eed);
    let (mut worst, mut timeouts, mut calls) = (Duration::ZERO, 0, 0);
    let rounds = 8;
    for round in 0..rounds {
        std::thread::sleep(Duration::from_millis(20 + rnd() % 60));
        signal(&worker, libc::SIGSTOP);
        for j in 0..6 {
            let k = format!("p{}", rnd() % 500);
            let v = vec![j as u8; 100 + (rnd() % 3000) as usize];
            let t0 = Instant::now();
            let r = m.put(k.as_bytes(), &v);
            let took = t0.elapsed();
            calls += 1;
            worst = worst.max(took);
            match r {
                Ok(_) => {}
                Err(Error::Timeout(said)) => {
                    timeouts += 1;
                    assert!(
                        said <= took && took - said < ALLOWANCE,
                        "seed {seed}, round {round}: a put that took {took:?} said it waited {said:?}"
                    );
                }
                Err(e) => panic!("seed {seed}, round {round}: put failed: {e}"),
            }
            assert!(
                took <= timeout + ALLOWANCE,
                "seed {seed}, round {round}: a put took {took:?} with a timeout of {timeout:?} ({r:?})"
            );
        }
        signal(&worker, libc::SIGCONT);
    }
    worker.kill().unwrap();
    worker.wait().unwrap();
    eprintln!(
        "seed {seed}: {calls} puts behind a stopped process, {timeouts} timed out, the longest took {worst:?}"
    );
    let r = s.check().unwrap();
    assert!(r.is_ok(), "seed {seed}: {r}");
}
