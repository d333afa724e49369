//! The peer's protocol end to end, as `shoal bench queue` drives it, in runs of a few
//! tens of milliseconds: publish-subscribe, and latency polling and sleeping. Nothing is
//! asserted about speed.

use std::io::{BufRead, BufReader, Write};
use std::process::{Child, ChildStdin, ChildStdout, Command, Stdio};
use std::time::{SystemTime, UNIX_EPOCH};

const BIN: &str = env!("CARGO_BIN_EXE_shoal-iceoryx2-peer");

fn clock_ns() -> u64 {
    let t = rustix::time::clock_gettime(rustix::time::ClockId::Monotonic);
    t.tv_sec as u64 * 1_000_000_000 + t.tv_nsec as u64
}

struct Side {
    child: Child,
    stdin: ChildStdin,
    out: BufReader<ChildStdout>,
}

impl Side {
    fn start(args: &[String]) -> Side {
        let mut child = Command::new(BIN)
            .args(args)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .spawn()
            .expect("start the peer");
        let stdin = child.stdin.take().unwrap();
        let out = BufReader::new(child.stdout.take().unwrap());
        Side { child, stdin, out }
    }

    /// The next protocol line (`ready`, `done ...`), skipping anything else.
    fn line(&mut self) -> String {
        loop {
            let mut l = String::new();
            assert!(self.out.read_line(&mut l).unwrap() > 0, "the peer exited");
            let l = l.trim_end().to_string();
            if l == "ready" || l.starts_with("done ") {
                return l;
            }
        }
    }
}

impl Drop for Side {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn field(done: &str, key: &str) -> u64 {
    done.split_ascii_whitespace()
        .find_map(|f| f.strip_prefix(&format!("{key}=")))
        .unwrap_or_else(|| panic!("no {key} in {done:?}"))
        .parse::<f64>()
        .unwrap() as u64
}

/// Runs A and B of `test` for 50 ms after 10 ms of warm-up; B's and A's `done` lines.
fn run(test: &str, extra: &[&str]) -> (String, String) {
    let tag = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap()
        .as_nanos();
    let service = format!("--service=shoal-peer-test-{}-{tag}", std::process::id());
    let args = |role: &str| {
        let mut v = vec![
            "--test".to_string(),
            test.to_string(),
            format!("--role={role}"),
            "--cpu=-1".into(),
            service.clone(),
        ];
        v.extend(extra.iter().map(|s| s.to_string()));
        v
    };
    let mut b = Side::start(&args("b"));
    let mut a = Side::start(&args("a"));
    assert_eq!(b.line(), "ready");
    assert_eq!(a.line(), "ready");
    let start = clock_ns() + 20_000_000;
    let (warm, end) = (start + 10_000_000, start + 60_000_000);
    for s in [&mut b, &mut a] {
        writeln!(s.stdin, "go {start} {warm} {end}").unwrap();
        s.stdin.flush().unwrap();
    }
    let (db, da) = (b.line(), a.line());
    for s in [&mut b, &mut a] {
        let st = s.child.wait().unwrap();
        assert!(st.success(), "{test}: {st}");
    }
    (db, da)
}

#[test]
fn publish_subscribe_delivers_every_sample_in_order() {
    for size in ["--size=64", "--size=4096"] {
        let (b, a) = run("pubsub", &[size, "--elements=64"]);
        assert!(field(&b, "count") > 0, "{b}");
        assert_eq!(field(&b, "errors"), 0, "{b}");
        assert!(field(&a, "count") >= field(&b, "count") / 2, "{a} {b}");
    }
}

#[test]
fn latency_polling_and_sleeping_writes_its_samples() {
    let dir = std::env::temp_dir();
    for (mode, sleeps) in [("--busy", false), ("--gap-ns=200000", true)] {
        let path = dir.join(format!("shoal-peer-test-{}.lat", std::process::id()));
        let samples = format!("--samples={}", path.display());
        let (b, _) = run("latency", &[mode, &samples]);
        let n = field(&b, "count");
        let bytes = std::fs::read(&path).unwrap();
        std::fs::remove_file(&path).unwrap();
        assert!(n > 0, "{b}");
        assert_eq!(bytes.len() as u64, 8 * n, "{b}");
        assert_eq!(field(&b, "errors"), 0, "{b}");
        if sleeps {
            assert!(field(&b, "sleeps") > 0, "a sleeping receiver slept: {b}");
        }
    }
}
