//! End-to-end tests of the `shoal` binary: every subcommand, the error exits, the dump
//! format's round trip, check on sound and damaged stores, dump and repair of damaged
//! ones (a record that fails its checksum, an unclean store, a damaged segment, a
//! truncated file), rm against a holder, a tiny bench and a short watch.

use serde_json::Value;
use std::collections::BTreeMap;
use std::io::Write;
use std::path::Path;
use std::process::{Command, Output, Stdio};

const BIN: &str = env!("CARGO_BIN_EXE_shoal");

struct Run {
    code: i32,
    stdout: Vec<u8>,
    stderr: String,
}

impl Run {
    fn out(&self) -> String {
        String::from_utf8_lossy(&self.stdout).into_owned()
    }
}

fn finish(o: Output) -> Run {
    Run {
        code: o.status.code().unwrap_or(-1),
        stdout: o.stdout,
        stderr: String::from_utf8_lossy(&o.stderr).into_owned(),
    }
}

/// Runs `shoal ARGS` with `stdin` as its standard input.
fn shoal_with(args: &[&str], stdin: &[u8]) -> Run {
    let mut c = Command::new(BIN)
        .args(args)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("start shoal");
    let mut i = c.stdin.take().unwrap();
    let data = stdin.to_vec();
    let feeder = std::thread::spawn(move || {
        let _ = i.write_all(&data);
    });
    let o = c.wait_with_output().expect("run shoal");
    feeder.join().unwrap();
    finish(o)
}

fn shoal(args: &[&str]) -> Run {
    finish(
        Command::new(BIN)
            .args(args)
            .stdin(Stdio::null())
            .output()
            .expect("run shoal"),
    )
}

/// Runs `shoal ARGS`, which must succeed; returns its stdout.
fn ok(args: &[&str]) -> String {
    let r = shoal(args);
    assert_eq!(
        r.code,
        0,
        "shoal {args:?} failed\nstdout: {}\nstderr: {}",
        r.out(),
        r.stderr
    );
    r.out()
}

/// Asserts `shoal ARGS` exits with `code` and one `shoal: ...` line on stderr containing
/// `needle`.
fn fails(args: &[&str], code: i32, needle: &str) -> Run {
    let r = shoal(args);
    check_failure(args, &r, code, needle);
    r
}

fn check_failure(args: &[&str], r: &Run, code: i32, needle: &str) {
    assert_eq!(
        r.code,
        code,
        "shoal {args:?}: want exit {code}\nstdout: {}\nstderr: {}",
        r.out(),
        r.stderr
    );
    let lines: Vec<&str> = r.stderr.lines().collect();
    assert_eq!(
        lines.len(),
        1,
        "shoal {args:?}: want one line: {:?}",
        r.stderr
    );
    assert!(
        lines[0].starts_with("shoal: "),
        "shoal {args:?}: {:?}",
        r.stderr
    );
    assert!(
        lines[0].contains(needle),
        "shoal {args:?}: want {needle:?} in {:?}",
        r.stderr
    );
    assert!(!r.stderr.contains("panicked"), "{}", r.stderr);
}

/// A directory for test stores: in /dev/shm, where stores normally live (tmpfs: no
/// write-back to a disk), when there is one.
fn tmp() -> tempfile::TempDir {
    let b = tempfile::Builder::new()
        .prefix("shoal-cli-test-")
        .tempdir_in("/dev/shm");
    b.or_else(|_| tempfile::tempdir()).expect("tempdir")
}

fn store_in(d: &tempfile::TempDir, name: &str) -> String {
    d.path().join(name).to_str().unwrap().to_string()
}

/// Every entry of every map, through the library.
fn contents(path: &str) -> BTreeMap<String, BTreeMap<Vec<u8>, Vec<u8>>> {
    let s = shoal::Store::open_existing(path).unwrap();
    let mut all = BTreeMap::new();
    for name in s.maps().unwrap() {
        let m = s.open_map(&name).unwrap();
        let entries: BTreeMap<Vec<u8>, Vec<u8>> = m.iter().map(|r| r.unwrap()).collect();
        assert_eq!(entries.len() as u64, m.len().unwrap());
        all.insert(name, entries);
    }
    all
}

#[test]
fn put_get_del_as_text() {
    let d = tmp();
    let s = store_in(&d, "t.shoal");
    ok(&["put", &s, "users", "alice", "admin"]);
    ok(&["put", &s, "users", "bob", "hé llo"]);
    assert_eq!(ok(&["get", &s, "users", "alice"]), "admin\n");
    assert_eq!(ok(&["get", &s, "users", "bob"]), "hé llo\n");
    assert_eq!(ok(&["get", "-n", &s, "users", "alice"]), "admin");
    ok(&["put", &s, "users", "alice", "root"]);
    assert_eq!(ok(&["get", &s, "users", "alice"]), "root\n");
    fails(&["get", &s, "users", "carol"], 1, "key \"carol\" not found");
    ok(&["del", &s, "users", "alice"]);
    fails(&["del", &s, "users", "alice"], 1, "not found");
    fails(&["get", &s, "users", "alice"], 1, "not found");
    fails(&["get", &s, "nomap", "x"], 2, "no map named \"nomap\"");
    fails(&["del", &s, "nomap", "x"], 2, "no map named");
    // An empty value, and one read from stdin (its exact bytes).
    ok(&["put", &s, "users", "empty", ""]);
    assert_eq!(ok(&["get", &s, "users", "empty"]), "\n");
    let r = shoal_with(&["put", &s, "users", "file"], b"line 1\nline 2\n");
    assert_eq!(r.code, 0, "{}", r.stderr);
    assert_eq!(ok(&["get", &s, "users", "file"]), "line 1\nline 2\n\n");
}

#[test]
fn hex_and_base64_in_and_out() {
    let d = tmp();
    let s = store_in(&d, "h.shoal");
    ok(&["put", "--hex", &s, "bin", "00ff", "DEADbeef"]);
    assert_eq!(ok(&["get", "--hex", &s, "bin", "00ff"]), "deadbeef\n");
    assert_eq!(ok(&["get", "--base64", &s, "bin", "AP8="]), "3q2+7w==\n");
    assert_eq!(ok(&["get", "--base64", &s, "bin", "AP8"]), "3q2+7w==\n");
    assert_eq!(ok(&["ls", "--hex", &s, "bin"]), "00ff\n");
    assert_eq!(ok(&["ls", "--base64", &s, "bin"]), "AP8=\n");
    assert_eq!(ok(&["ls", &s, "bin"]), "\\x00\\xff\n");
    ok(&["put", "--base64", &s, "bin", "/w==", "AAEC"]);
    let r = shoal(&["get", "--raw", &s, "bin", "\u{ff}"]);
    assert_eq!(r.code, 1); // "\u{ff}" as text is c3 bf, not ff
    let r = shoal(&["get", "--raw", "--hex", &s, "bin", "ff"]);
    assert_eq!(r.code, 2, "--raw conflicts with --hex");
    let r = shoal(&["get", "--raw", &s, "bin", "x"]);
    assert_eq!(r.code, 1);
    ok(&["put", "--hex", &s, "bin", "61", "00ff"]);
    let r = shoal(&["get", "--raw", &s, "bin", "a"]);
    assert_eq!((r.code, r.stdout), (0, vec![0, 0xff]));
    fails(&["get", &s, "bin", "a"], 2, "not UTF-8 text");
    fails(&["get", "--hex", &s, "bin", "zz"], 2, "bad hex in the key");
    fails(
        &["get", "--hex", &s, "bin", "abc"],
        2,
        "odd number of digits",
    );
    fails(
        &["put", "--hex", &s, "bin", "00", "0g"],
        2,
        "bad hex in the value",
    );
    fails(
        &["get", "--base64", &s, "bin", "***"],
        2,
        "bad base64 in the key",
    );
    fails(
        &["put", "--hex", "--base64", &s, "bin", "00", "00"],
        2,
        "cannot be used",
    );
}

#[test]
fn ls_maps_and_keys() {
    let d = tmp();
    let s = store_in(&d, "l.shoal");
    for i in 0..10 {
        ok(&["put", &s, "m", &format!("k{i}"), "v"]);
    }
    ok(&["put", &s, "other", "x", "yy"]);
    let maps = ok(&["ls", &s]);
    assert_eq!(maps.lines().collect::<Vec<_>>(), ["m", "other"]);
    let long = ok(&["ls", "-l", &s]);
    assert!(long.lines().any(|l| l.ends_with(" m") && l.contains("10")));
    let mut keys: Vec<String> = ok(&["ls", &s, "m"]).lines().map(String::from).collect();
    keys.sort();
    assert_eq!(keys.len(), 10);
    assert_eq!(keys[0], "k0");
    assert_eq!(ok(&["ls", &s, "m", "--limit", "3"]).lines().count(), 3);
    assert_eq!(ok(&["ls", "-l", &s, "other"]).trim(), "2  x");
    fails(&["ls", &s, "nope"], 2, "no map named \"nope\"");
    // A fixed-size map is listed long like any other map.
    {
        let st = shoal::Store::open_existing(&s).unwrap();
        let f = st.fixed_map("fx", 8, 8).unwrap();
        for i in 0..25u64 {
            f.put(&i.to_le_bytes(), &i.to_le_bytes()).unwrap();
        }
    }
    let long = ok(&["ls", "-l", &s]);
    assert!(
        long.lines().any(|l| l.ends_with(" fx") && l.contains("25")),
        "{long}"
    );
}

#[test]
fn stat_text_and_json() {
    let d = tmp();
    let s = store_in(&d, "s.shoal");
    ok(&["put", &s, "a", "k", "v"]);
    ok(&["put", &s, "b", "k1", "v1"]);
    ok(&["put", &s, "b", "k2", "v2"]);
    let t = ok(&["stat", &s]);
    let version = format!("format      version {}", shoal::FORMAT_VERSION);
    for want in [
        version.as_str(),
        "chunk size  256 KiB",
        "max size    1 TiB",
        "attached    0 other process(es)",
        "live bytes",
        "dead bytes",
        "MAP",
        "SPLITS",
    ] {
        assert!(t.contains(want), "no {want:?} in\n{t}");
    }
    let v: Value = serde_json::from_str(&ok(&["stat", "--json", &s])).unwrap();
    assert_eq!(v["format_version"], shoal::FORMAT_VERSION);
    assert_eq!(v["chunk_size"], 256 * 1024);
    assert_eq!(v["other_processes_attached"], 0);
    let maps = v["maps"].as_array().unwrap();
    assert_eq!(maps.len(), 2);
    let b = maps.iter().find(|m| m["name"] == "b").unwrap();
    assert_eq!(b["entries"], 2);
    assert!(v["file_size"].as_u64().unwrap() > 0);
    // Another process attached shows.
    let holder = shoal::Store::open_existing(&s).unwrap();
    let v: Value = serde_json::from_str(&ok(&["stat", "--json", &s])).unwrap();
    assert_eq!(v["other_processes_attached"], 1);
    drop(holder);
    assert!(t.contains("backup      none running"), "{t}");
    assert!(v["backup"].is_null(), "{v}");
}

/// `shoal stat` shows a hot backup in progress (FORMAT.md, "Hot backup"): backups of a
/// store of 256 MiB, polled with `shoal stat` while they copy. A backup may end before a
/// stat comes (a busy machine can delay a process start past a copy): the next one is
/// started then, up to ten.
#[test]
fn stat_shows_a_hot_backup_in_progress() {
    let d = tmp();
    let s = store_in(&d, "s.shoal");
    let store = shoal::Store::open(&s).unwrap();
    let m = store.map("big").unwrap();
    let value = vec![7u8; 1 << 20];
    for i in 0..256u32 {
        m.put(&i.to_le_bytes(), &value).unwrap();
    }
    let mut seen = None;
    for attempt in 0..10 {
        let copy = d.path().join(format!("copy{attempt}.shoal"));
        let backup = {
            let store = store.clone();
            std::thread::spawn(move || store.backup(&copy))
        };
        while !backup.is_finished() {
            let t = ok(&["stat", &s]);
            if t.contains("backup      copying") {
                let v: Value = serde_json::from_str(&ok(&["stat", "--json", &s])).unwrap();
                seen = Some((t, v));
                break;
            }
        }
        assert!(backup.join().unwrap().unwrap() > 0);
        if seen.is_some() {
            break;
        }
    }
    let (t, v) = seen.expect("no stat during ten backups saw one");
    assert!(t.contains("backup      copying, run by txn slot "), "{t}");
    // The JSON's stat came later: the backup may have ended in between.
    if !v["backup"].is_null() {
        assert_eq!(v["backup"]["phase"], "copying", "{v}");
        assert!(v["backup"]["txn_slot"].is_u64(), "{v}");
    }
    let v: Value = serde_json::from_str(&ok(&["stat", "--json", &s])).unwrap();
    assert!(v["backup"].is_null(), "{v}");
}

/// A store with UTF-8 and binary keys and values, awkward characters, an empty value, a
/// value of several chunks, an empty map, and enough entries to split.
fn awkward_store(path: &str) {
    let s = shoal::Store::open(path).unwrap();
    let text = s.map("text").unwrap();
    text.put(b"alice", b"admin").unwrap();
    text.put(
        "clé \"quoted\"\n\ttab\\".as_bytes(),
        "välue ✓ 🦀".as_bytes(),
    )
    .unwrap();
    text.put(b"empty value", b"").unwrap();
    text.put(b"", b"empty key").unwrap();
    text.put(b"\x01control\x7f", b"\x00nul inside").unwrap();
    let bin = s.map("binary").unwrap();
    bin.put(&[0xff, 0xfe, 0x00], &[0x80, 0x81]).unwrap();
    bin.put(b"utf8 key", &[0xc3, 0x28]).unwrap();
    bin.put(&[0xc0, 0xaf], b"utf8 value").unwrap();
    let big: Vec<u8> = (0..700_000u32).map(|i| (i * 7 % 251) as u8).collect();
    bin.put(b"big", &big).unwrap();
    let many = s.map("many").unwrap();
    for i in 0..5000u32 {
        let mut v = i.to_le_bytes().to_vec();
        v.extend_from_slice(format!("value {i}").as_bytes());
        many.put(format!("key:{i:06}").as_bytes(), &v).unwrap();
    }
    s.map("empty").unwrap();
}

#[test]
fn dump_then_load_gives_the_same_contents() {
    let d = tmp();
    let a = store_in(&d, "a.shoal");
    awkward_store(&a);
    let before = contents(&a);
    let r = shoal(&["dump", &a]);
    assert_eq!(r.code, 0, "{}", r.stderr);
    assert_eq!(
        r.stderr, "",
        "no progress bar when stderr is not a terminal"
    );
    let dump = r.stdout;
    // Every line is one JSON object of the documented shape.
    let text = String::from_utf8(dump.clone()).unwrap();
    let mut n = 0;
    for line in text.lines() {
        let v: Value = serde_json::from_str(line).unwrap();
        let o = v.as_object().unwrap();
        assert!(o["map"].is_string());
        if o.len() == 1 {
            assert_eq!(o["map"], "empty");
            continue;
        }
        n += 1;
        for f in ["key", "value"] {
            assert!(
                o[f].is_string() || o[f]["b64"].is_string(),
                "bad {f} in {line}"
            );
        }
    }
    assert_eq!(n, 5 + 4 + 5000);
    assert!(text.contains(r#"{"map":"text","key":"alice","value":"admin"}"#));
    assert!(text.contains(r#"{"map":"binary","key":{"b64":"//4A"},"value":{"b64":"gIE="}}"#));
    assert!(text.contains(r#"{"map":"empty"}"#));

    // Load from stdin into a new store, and from a file into another.
    let b = store_in(&d, "b.shoal");
    let r = shoal_with(&["load", &b], &dump);
    assert_eq!(r.code, 0, "{}", r.stderr);
    assert!(r.out().contains("loaded 5,009 entries"), "{}", r.out());
    assert_eq!(contents(&b), before);
    let file = d.path().join("dump.jsonl");
    std::fs::write(&file, &dump).unwrap();
    let c = store_in(&d, "c.shoal");
    ok(&["load", &c, file.to_str().unwrap()]);
    assert_eq!(contents(&c), before);
    // Dump of the copy is the same set of lines.
    let mut l1: Vec<&str> = text.lines().collect();
    let again = ok(&["dump", &c]);
    let mut l2: Vec<&str> = again.lines().collect();
    l1.sort();
    l2.sort();
    assert_eq!(l1, l2);
    ok(&["check", &b]);

    // One map only.
    let one = ok(&["dump", &a, "binary"]);
    assert_eq!(one.lines().count(), 4);
    assert!(one.lines().all(|l| l.starts_with(r#"{"map":"binary","#)));
    fails(&["dump", &a, "nope"], 2, "no map named");
}

#[test]
fn load_rejects_bad_lines_with_their_number() {
    let d = tmp();
    let s = store_in(&d, "x.shoal");
    for (input, needle) in [
        (
            &b"{\"map\":\"m\",\"key\":\"k\",\"value\":\"v\"}\nnot json\n"[..],
            "line 2: not JSON",
        ),
        (
            b"\n{\"key\":\"k\",\"value\":\"v\"}\n",
            "line 2: no \"map\" field",
        ),
        (
            b"{\"map\":\"m\",\"key\":\"k\"}\n",
            "line 1: \"key\" and \"value\" must come together",
        ),
        (
            b"{\"map\":\"m\",\"key\":{\"b64\":\"@@\"},\"value\":\"v\"}\n",
            "line 1: bad base64 in the key",
        ),
        (
            b"{\"map\":\"m\",\"key\":7,\"value\":\"v\"}\n",
            "the key must be a string",
        ),
        (
            b"{\"map\":\"m\",\"key\":\"k\",\"value\":\"v\",\"x\":1}\n",
            "unknown field \"x\"",
        ),
        (
            b"{\"map\":\"\",\"key\":\"k\",\"value\":\"v\"}\n",
            "line 1: map \"\"",
        ),
        (b"\xff\xfe\n", "line 1: not UTF-8"),
    ] {
        let r = shoal_with(&["load", &s], input);
        check_failure(&["load"], &r, 2, needle);
    }
    // The good line before the bad one was loaded.
    assert_eq!(ok(&["get", &s, "m", "k"]), "v\n");
    fails(
        &["load", &s, "/nonexistent/file"],
        2,
        "cannot read /nonexistent/file",
    );
}

#[test]
fn check_passes_a_sound_store_and_fails_a_damaged_copy() {
    let d = tmp();
    let s = store_in(&d, "sound.shoal");
    awkward_store(&s);
    let out = ok(&["check", &s]);
    assert!(out.contains("4 maps, 5009 entries"), "{out}");
    assert!(out.trim_end().ends_with("ok"), "{out}");

    // Header data-bytes total off by one chunk: the checker sees it.
    let bad = store_in(&d, "bad.shoal");
    std::fs::copy(&s, &bad).unwrap();
    let mut f = std::fs::read(&bad).unwrap();
    let data = u64::from_le_bytes(f[272..280].try_into().unwrap());
    f[272..280].copy_from_slice(&(data + 256 * 1024).to_le_bytes());
    std::fs::write(&bad, &f).unwrap();
    let r = shoal(&["check", &bad]);
    assert_eq!(r.code, 1, "{}{}", r.out(), r.stderr);
    assert!(
        r.out().contains("problem: header: data bytes"),
        "{}",
        r.out()
    );

    // Garbage over 4 KiB of records in the first data chunk: keys, lengths and checksums
    // no longer match. Found by the checker, not a crash.
    let bad2 = store_in(&d, "bad2.shoal");
    std::fs::copy(&s, &bad2).unwrap();
    let mut f = std::fs::read(&bad2).unwrap();
    let word = |f: &[u8], at: usize| u64::from_le_bytes(f[at..at + 8].try_into().unwrap());
    let (mut c, end, cs) = (word(&f, 96) as usize, word(&f, 256) as usize, 256 * 1024);
    while c < end && !matches!(word(&f, c), 2 | 3) {
        c += cs * word(&f, c + 8).max(1) as usize;
    }
    assert!(c < end, "no data chunk");
    for b in &mut f[c + 4096..c + 8192] {
        *b ^= 0x5a;
    }
    std::fs::write(&bad2, &f).unwrap();
    let r = shoal(&["check", &bad2]);
    assert_eq!(r.code, 1, "{}{}", r.out(), r.stderr);
    assert!(r.out().contains("problem: "), "{}", r.out());
    assert!(!r.stderr.contains("panicked"), "{}", r.stderr);
    // Reading it fails cleanly or reads what it can; it never panics.
    let r = shoal(&["dump", &bad2]);
    assert!(!r.stderr.contains("panicked"), "{}", r.stderr);

    // A truncated file cannot even be opened: still exit 1 with the reason.
    let short = store_in(&d, "short.shoal");
    std::fs::write(&short, &std::fs::read(&s).unwrap()[..8192]).unwrap();
    let r = shoal(&["check", &short]);
    assert_eq!(r.code, 1, "{}{}", r.out(), r.stderr);
    assert!(r.out().contains("problem: corrupt store"), "{}", r.out());

    // Not a store at all: an error (2), not a verdict.
    let txt = store_in(&d, "text.txt");
    std::fs::write(&txt, "hello").unwrap();
    fails(&["check", &txt], 2, "is not a Shoal store");
}

#[test]
fn backup_copies_an_idle_store_byte_for_byte() {
    let d = tmp();
    let (s, copy) = (store_in(&d, "b.shoal"), store_in(&d, "b-copy.shoal"));
    let st = shoal::Store::open(&s).unwrap();
    st.map("m").unwrap().put(b"k", b"v").unwrap();
    drop(st);
    let out = ok(&["backup", &s, &copy]);
    assert!(
        out.contains("copied") && out.contains("(idle store)"),
        "{out}"
    );
    assert_eq!(std::fs::read(&copy).unwrap(), std::fs::read(&s).unwrap());
    ok(&["check", &copy]);
    let c = shoal::Store::open_existing(&copy).unwrap();
    assert_eq!(
        c.open_map("m").unwrap().get(b"k").unwrap(),
        Some(b"v".to_vec())
    );
    drop(c);
    fails(&["backup", &s, &copy], 2, "exists");
    fails(&["backup", &store_in(&d, "none.shoal"), &copy], 2, "");
}

/// `shoal backup` of a store that this test process holds open and writes to, in
/// two-key transfers between two maps (a chunk apart in the file, so that a plain file
/// copy tears them), while the command runs: the command makes a hot backup, and the
/// copy passes `shoal check` and holds one instant's accounts (their sum exact).
#[test]
fn backup_copies_a_store_in_use_while_a_thread_writes() {
    use shoal::{Cond, IntCmp, TxnOp};
    use std::sync::atomic::{AtomicBool, Ordering::*};
    use std::sync::Arc;
    const ACCOUNTS: u64 = 500;
    const START: i64 = 1_000;
    let d = tmp();
    let s = store_in(&d, "hot.shoal");
    let st = Arc::new(shoal::Store::open(&s).unwrap());
    for name in ["a", "b"] {
        let f = st.fixed_map(name, 8, 8).unwrap();
        for i in 0..ACCOUNTS {
            f.put(&i.to_le_bytes(), &START.to_le_bytes()).unwrap();
        }
    }
    let stop = Arc::new(AtomicBool::new(false));
    let seed = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_nanos() as u64;
    let writer = {
        let (st, stop) = (st.clone(), stop.clone());
        std::thread::spawn(move || {
            let fa = st.fixed_map("a", 8, 8).unwrap();
            let fb = st.fixed_map("b", 8, 8).unwrap();
            let m = st.map("var").unwrap();
            let mut x = seed | 1;
            let mut n = 0u64;
            while !stop.load(Relaxed) {
                x ^= x << 13;
                x ^= x >> 7;
                x ^= x << 17;
                let (a, b) = (x % ACCOUNTS, (x >> 20) % ACCOUNTS);
                let (from, to) = if x >> 63 == 0 { (&fa, &fb) } else { (&fb, &fa) };
                let amt = 1 + (x >> 40) as i64 % 50;
                let (ka, kb) = (a.to_le_bytes(), b.to_le_bytes());
                st.transaction()
                    .when(Cond::int(from, &ka, IntCmp::Ge, amt))
                    .then(TxnOp::add(from, &ka, -amt))
                    .then(TxnOp::add(to, &kb, amt))
                    .commit()
                    .unwrap();
                m.put(&(n % 1_000).to_le_bytes(), &[n as u8; 40]).unwrap();
                n += 1;
            }
            n
        })
    };
    // Let the writer run before and during each copy.
    let copies: Vec<String> = (0..8)
        .map(|i| store_in(&d, &format!("hot{i}.shoal")))
        .collect();
    for copy in &copies {
        std::thread::sleep(std::time::Duration::from_millis(20));
        let r = shoal(&["backup", &s, copy]);
        assert_eq!(r.code, 0, "seed {seed}: {}{}", r.out(), r.stderr);
        assert!(
            r.out().contains("(hot backup of a store in use)"),
            "{}",
            r.out()
        );
    }
    stop.store(true, Relaxed);
    let n = writer.join().unwrap();
    assert!(n > 0, "the writer never ran");
    for copy in &copies {
        ok(&["check", copy]);
        let c = shoal::Store::open_existing(copy).unwrap();
        let mut sum = 0i64;
        for name in ["a", "b"] {
            let cf = c.fixed_map(name, 8, 8).unwrap();
            for i in 0..ACCOUNTS {
                let v = cf.get(&i.to_le_bytes()).unwrap().expect("account");
                sum += i64::from_le_bytes(v.try_into().unwrap());
            }
        }
        assert_eq!(sum, 2 * ACCOUNTS as i64 * START, "seed {seed}: {copy}");
    }
    // The store itself is unchanged by the copies and still in use.
    assert!(st.check().unwrap().is_ok());
}

#[test]
fn compact_reports_what_it_freed() {
    let d = tmp();
    let s = store_in(&d, "c.shoal");
    {
        let st = shoal::Store::open(&s).unwrap();
        let m = st.map("m").unwrap();
        let v = vec![7u8; 1000];
        for round in 0..3 {
            for i in 0..3000u32 {
                m.put(&i.to_le_bytes(), &v[..500 + round]).unwrap();
            }
        }
        m.clear().unwrap();
    }
    let out = ok(&["compact", &s]);
    assert!(out.contains("chunks freed"), "{out}");
    assert!(out.contains("dead bytes"), "{out}");
    let freed: u64 = out
        .lines()
        .find_map(|l| l.strip_prefix("chunks freed"))
        .unwrap()
        .trim()
        .replace(',', "")
        .parse()
        .unwrap();
    assert!(freed > 0, "{out}");
    ok(&["check", &s]);
}

#[test]
fn rm_refuses_while_another_process_has_the_store_open() {
    let d = tmp();
    let s = store_in(&d, "r.shoal");
    ok(&["put", &s, "m", "k", "v"]);
    let holder = shoal::Store::open_existing(&s).unwrap();
    fails(&["rm", &s], 2, "in use by 1 other process");
    assert!(Path::new(&s).exists());
    drop(holder);
    ok(&["rm", &s]);
    assert!(!Path::new(&s).exists());
    fails(&["rm", &s], 2, "no store at");

    // --force removes it anyway; the holder keeps working on its mapping.
    ok(&["put", &s, "m", "k", "v"]);
    let holder = shoal::Store::open_existing(&s).unwrap();
    ok(&["rm", "--force", &s]);
    assert!(!Path::new(&s).exists());
    assert_eq!(
        holder.open_map("m").unwrap().get(b"k").unwrap().as_deref(),
        Some(&b"v"[..])
    );
    drop(holder);

    // Files that are not stores are never removed, even with --force.
    let txt = store_in(&d, "precious.txt");
    std::fs::write(&txt, "not a store").unwrap();
    fails(&["rm", "--force", &txt], 2, "is not a Shoal store");
    assert!(Path::new(&txt).exists());
}

#[test]
fn bad_input_gives_one_line_and_an_error_status() {
    let d = tmp();
    let s = store_in(&d, "e.shoal");
    ok(&["put", &s, "m", "k", "v"]);
    let txt = store_in(&d, "file.txt");
    std::fs::write(&txt, "hello, not a store").unwrap();
    let dir = d.path().to_str().unwrap().to_string();
    let missing = store_in(&d, "missing.shoal");
    let cases: Vec<(Vec<&str>, &str)> = vec![
        (vec!["stat", &missing], "no store at"),
        (vec!["stat", "/nonexistent/dir/x.shoal"], "no store at"),
        (
            vec!["stat", "shoal-cli-test-no-such-store"],
            "/dev/shm/shoal-cli-test-no-such-store.shoal",
        ),
        (vec!["stat", &txt], "is not a Shoal store"),
        (vec!["ls", &txt], "is not a Shoal store"),
        (vec!["dump", &txt], "is not a Shoal store"),
        (vec!["get", &txt, "m", "k"], "is not a Shoal store"),
        (vec!["put", &txt, "m", "k", "v"], "is not a Shoal store"),
        (vec!["stat", &dir], "is a directory"),
        (vec!["put", &dir, "m", "k", "v"], "is a directory"),
        (vec!["compact", &missing], "no store at"),
        (vec!["watch", &missing], "no store at"),
        (
            vec!["put", "/nonexistent/dir/x.shoal", "m", "k", "v"],
            "directory does not exist",
        ),
        (vec!["get", &s, "nomap", "k"], "no map named"),
        (vec!["ls", &s, "nomap"], "no map named"),
        (vec!["get", "--hex", &s, "m", "xyz"], "bad hex"),
        (vec!["get", "--base64", &s, "m", "!"], "bad base64"),
        (vec!["put", &s, "", "k", "v"], "map names are 1 to"),
        (vec!["frobnicate"], "unrecognized subcommand"),
        (vec!["get", &s], "required arguments were not provided"),
        (vec!["bench", "--keys", "lots"], "is not a count"),
        (vec!["bench", "--processes", "0"], "--processes"),
        (
            vec!["bench", "--keys", "100000", "--key-size", "3"],
            "too small for 100000",
        ),
        (vec!["bench", "--path", &s], "exists"),
        (vec!["bench", "--value-type", "u64"], "is not a value type"),
        (
            vec!["bench", "--value-type", "i32", "--value-size", "8"],
            "cannot be used with",
        ),
        (vec!["bench", "--phases", "PUT,SCAN"], "is not a phase"),
        (vec!["bench", "--keys-pattern", "zipf"], "invalid value"),
        (
            vec!["bench", "--rounds", "2", "--phases", "PUT,GET"],
            "needs PUT and REMOVE",
        ),
        (
            vec!["bench", "--threads", "2", "--pin", "1000000"],
            "needs cores 1000000 to 1000001",
        ),
        (vec!["bench", "--pin", "-2"], "--pin"),
        (vec!["watch", &s, "--interval", "0"], "--interval"),
        (vec!["completions", "tcsh"], "invalid value"),
    ];
    for (args, needle) in &cases {
        fails(args, 2, needle);
    }
    // No arguments at all: the help, on stderr, status 2.
    let r = shoal(&[]);
    assert_eq!(r.code, 2);
    assert!(r.stderr.contains("Usage: shoal"), "{}", r.stderr);
    // A closed stdout is not an error worth a message.
    let mut c = Command::new(BIN)
        .args(["dump", &s])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    drop(c.stdout.take());
    let o = c.wait_with_output().unwrap();
    assert!(!String::from_utf8_lossy(&o.stderr).contains("panicked"));
}

#[test]
fn help_for_every_subcommand_and_completions() {
    let top = ok(&["--help"]);
    let subs = [
        "stat",
        "ls",
        "get",
        "put",
        "del",
        "dump",
        "load",
        "check",
        "repair",
        "compact",
        "rm",
        "bench",
        "watch",
        "completions",
    ];
    for sub in subs {
        assert!(
            top.contains(&format!("  {sub} ")),
            "{sub} missing from\n{top}"
        );
        let h = ok(&[sub, "--help"]);
        assert!(h.contains("Usage: shoal"), "{sub}: {h}");
    }
    assert!(!top.contains("bench-worker"), "the worker is hidden");
    let dump = ok(&["dump", "--help"]);
    for want in ["JSON Lines", "\"b64\"", "{\"map\": \"empty\"}"] {
        assert!(dump.contains(want), "dump --help lacks {want:?}");
    }
    assert!(ok(&["--version"]).starts_with("shoal "));
    for (shell, want) in [
        ("bash", "complete -F"),
        ("zsh", "#compdef shoal"),
        ("fish", "complete -c shoal"),
    ] {
        let script = ok(&["completions", shell]);
        assert!(script.contains(want), "{shell}");
        assert!(
            script.contains("bench") && script.contains("dump"),
            "{shell}"
        );
        assert!(!script.contains("bench-worker"), "{shell}");
    }
}

#[test]
fn bench_with_tiny_parameters_runs_every_phase() {
    let d = tmp();
    let path = store_in(&d, "bench.shoal");
    let out = ok(&[
        "bench",
        "--keys",
        "20000",
        "--processes",
        "2",
        "--path",
        &path,
    ]);
    let table: Vec<&str> = out
        .lines()
        .skip_while(|l| !l.starts_with("PHASE"))
        .collect();
    for phase in ["PUT", "UPD", "MIX", "GET", "GET_RAND", "GET_MANY", "REMOVE"] {
        assert!(
            table
                .iter()
                .any(|l| l.starts_with(&format!("{phase} ")) && l.trim_end().ends_with("ok")),
            "no {phase} row in\n{out}"
        );
        assert!(out.contains(&format!("{phase:<8} done: ")), "{out}");
    }
    assert!(!Path::new(&path).exists(), "the store is removed");

    // JSON, three processes, odd sizes, a kept store that checks out.
    let r = shoal(&[
        "bench",
        "--keys",
        "3001",
        "--processes",
        "3",
        "--key-size",
        "4",
        "--value-size",
        "100",
        "--mix",
        "50",
        "--json",
        "--keep",
        "--check",
        "--path",
        &path,
    ]);
    assert_eq!(r.code, 0, "{}", r.stderr);
    let v: Value = serde_json::from_str(r.out().trim()).unwrap();
    assert_eq!(v["processes"], 3);
    assert_eq!(v["check_ok"], true);
    let phases = v["phases"].as_array().unwrap();
    let names: Vec<&str> = phases
        .iter()
        .map(|p| p["phase"].as_str().unwrap())
        .collect();
    assert_eq!(
        names,
        ["PUT", "UPD", "MIX", "GET", "GET_RAND", "GET_MANY", "REMOVE"]
    );
    for p in phases {
        assert_eq!(p["failed_checks"], 0);
        assert!(p["ops_per_sec"].as_f64().unwrap() > 0.0);
    }
    assert_eq!(phases[0]["ops"], 3001);
    assert_eq!(phases[0]["entries"], 3001);
    assert_eq!(phases[6]["entries"], 0);
    assert!(r.stderr.contains("PHASE"), "the table goes to stderr");
    assert!(Path::new(&path).exists(), "--keep keeps the store");
    ok(&["check", &path]);
    ok(&["rm", &path]);
}

/// mem_meta_kv_benchmark's options: threads, pinning, its key patterns, i32 values,
/// rounds, private maps and its report layout.
#[test]
fn bench_in_mdtest_terms() {
    let d = tmp();
    let path = store_in(&d, "mdtest.shoal");
    let out = ok(&[
        "bench",
        "--threads",
        "2",
        "--pin",
        "0",
        "--keys",
        "4000",
        "--keys-pattern",
        "seq",
        "--value-type",
        "i32",
        "--rounds",
        "3",
        "--format",
        "mdtest",
        "--path",
        &path,
    ]);
    for want in [
        "2 thread(s) in 1 process(es), start_core 0",
        "Each thread put, get, delete 2000 elements, total 4000 ops",
        "[PUT] total ",
        " MB/s, cost ",
        "[GET] total ",
        "[GET_RAND] total ",
        "[DEL] total ",
        "      per-thread ",
        "median of 3 rounds, spread ",
        "4000 entries",
        "bytes per entry",
    ] {
        assert!(out.contains(want), "{want:?} missing from\n{out}");
    }
    assert!(!out.contains("FAILED"), "{out}");
    assert!(!Path::new(&path).exists(), "the store is removed");

    // Random keys, a map per worker, 2 processes × 2 threads, JSON.
    let r = shoal(&[
        "bench",
        "--processes",
        "2",
        "--threads",
        "2",
        "--keys",
        "3001",
        "--keys-pattern",
        "rand",
        "--value-type",
        "bytes:7",
        "--private-maps",
        "--phases",
        "PUT,GET_RAND,GET,GET_MANY,MIX,DEL",
        "--json",
        "--path",
        &path,
    ]);
    assert_eq!(r.code, 0, "{}", r.stderr);
    let v: Value = serde_json::from_str(r.out().trim()).unwrap();
    assert_eq!(v["workers"], 4);
    assert_eq!(v["private_maps"], true);
    assert_eq!(v["value_size"], 7);
    let phases = v["phases"].as_array().unwrap();
    let names: Vec<&str> = phases
        .iter()
        .map(|p| p["phase"].as_str().unwrap())
        .collect();
    assert_eq!(
        names,
        ["PUT", "GET_RAND", "GET", "GET_MANY", "MIX", "REMOVE"]
    );
    for p in phases {
        assert_eq!(p["failed_checks"], 0, "{p}");
    }
    assert_eq!(phases[0]["entries"], 3001);
    assert_eq!(phases[1]["ops"], 3001);
    assert!(phases[0]["resident_bytes"].as_u64().unwrap() > 0);
    assert_eq!(v["summary"].as_array().unwrap().len(), 6);
}

#[test]
fn bench_queue_with_tiny_parameters_runs_every_measure() {
    let d = tmp();
    let dir = d.path().to_str().unwrap();
    let args = [
        "bench",
        "queue",
        "--secs",
        "0.1",
        "--warmup",
        "0.005",
        "--sizes",
        "64",
        "--elements",
        "256",
        "--gap-us",
        "20",
        "--no-pin",
        "--dir",
        dir,
    ];
    let out = ok(&args);
    let row = |label: &str, mode: &str| {
        out.lines()
            .find(|l| l.starts_with(label) && l.contains(mode))
            .unwrap_or_else(|| panic!("no {label:?} row in\n{out}"))
    };
    for label in [
        "Shoal ping-pong, unbatched ",
        "Shoal ping-pong, batches of 16 ",
        "Shoal ping-pong, batches of 256 ",
        "Shoal one-way ",
    ] {
        let r = row(label, "64 B");
        assert!(r.trim_end().ends_with("ok"), "{r}");
        assert!(!r.contains("FAILED"), "{r}");
    }
    for mode in ["busy", "blocking"] {
        for label in ["Shoal pull", "pipe ", "eventfd ", "Unix socket"] {
            // A measure may get no samples at all on a loaded machine ("not run"), but
            // never a failed check.
            let r = row(label, mode);
            assert!(r.trim_end().ends_with("ok") && !r.contains("FAILED"), "{r}");
        }
        // iceoryx2 runs when its peer binary was built beside this one.
        let r = row("iceoryx2 ", mode);
        assert!(!r.contains("FAILED"), "{r}");
    }
    assert!(out.contains("Targets\n"), "{out}");
    assert!(out.contains("ping-pong in batches of 256"), "{out}");

    // JSON, two interleaved rounds pooled: one object, the blocking receivers slept.
    let mut args = args.to_vec();
    args.extend(["--json", "--only", "blocking", "--rounds", "2"]);
    let v: Value = serde_json::from_str(&ok(&args)).unwrap();
    let results = v["results"].as_array().unwrap();
    assert_eq!(results.len(), 5);
    for r in results {
        // iceoryx2 without its peer binary, or a measure left without samples by the
        // machine's load.
        if r.get("not_run").is_some() {
            continue;
        }
        let l = &r["latency_ns"];
        assert!(l["samples"].as_u64().unwrap() > 0, "{r}");
        assert!(
            l["p50"].as_u64().unwrap() <= l["p99"].as_u64().unwrap(),
            "{r}"
        );
        assert!(
            l["receiver_sleeps_per_message"].as_f64().unwrap() > 0.0,
            "{r}"
        );
    }
    assert_eq!(v["targets"].as_array().unwrap().len(), 4);
    assert_eq!(v["rounds"], 2);
    assert_eq!(
        std::fs::read_dir(d.path()).unwrap().count(),
        0,
        "every store is removed"
    );

    let r = shoal(&["bench", "queue", "--only", "nothing"]);
    assert_eq!(r.code, 2);
    assert!(r.stderr.contains("pingpong"), "{}", r.stderr);
}

#[test]
fn watch_refreshes_and_stops_after_its_iterations() {
    let d = tmp();
    let s = store_in(&d, "w.shoal");
    ok(&["put", &s, "users", "a", "1"]);
    ok(&["put", &s, "orders", "o", "2"]);
    let out = ok(&["watch", &s, "--iterations", "2", "--interval", "0.2"]);
    assert!(
        out.contains("refresh 1") && out.contains("refresh 2"),
        "{out}"
    );
    assert!(!out.contains("refresh 3"));
    assert!(
        !out.contains('\x1b'),
        "no ANSI codes when stdout is not a terminal"
    );
    for want in ["users", "orders", "ENTRIES/s", "file size", "net change"] {
        assert!(out.contains(want), "no {want:?} in\n{out}");
    }
}

#[test]
fn watch_stops_on_interrupt() {
    let d = tmp();
    let s = store_in(&d, "i.shoal");
    ok(&["put", &s, "m", "k", "v"]);
    let c = Command::new(BIN)
        .args(["watch", &s, "--interval", "0.1"])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    std::thread::sleep(std::time::Duration::from_millis(500));
    // SAFETY: signals our own child.
    unsafe { libc::kill(c.id() as i32, libc::SIGINT) };
    let o = c.wait_with_output().unwrap();
    assert_eq!(o.status.code(), Some(0), "{:?}", o);
    assert!(String::from_utf8_lossy(&o.stdout).contains("refresh 2"));
}

/// Maps created with options (UIDs, fixed sizes) are dumped with them and loaded back the
/// same way, with the same entries.
#[test]
fn dump_and_load_keep_map_kinds() {
    let d = tmp();
    let a = store_in(&d, "kinds.shoal");
    {
        let s = shoal::Store::open(&a).unwrap();
        let u = s
            .map_with(
                "with-uids",
                &shoal::MapOptions {
                    uids: true,
                    ..Default::default()
                },
                true,
            )
            .unwrap();
        u.put(b"k1", b"v1").unwrap();
        let f = s.fixed_map("counters", 8, 8).unwrap();
        for i in 0..300u64 {
            f.put(&i.to_le_bytes(), &(i * 3).to_le_bytes()).unwrap();
        }
        s.fixed_map("empty-fixed", 4, 2).unwrap();
    }
    let dump = ok(&["dump", &a]);
    assert!(
        dump.contains(r#"{"map":"with-uids","uids":true}"#),
        "{dump}"
    );
    assert!(
        dump.contains(r#"{"map":"counters","kind":"fixed","key_size":8,"value_size":8}"#),
        "{dump}"
    );
    assert!(dump.contains(r#"{"map":"empty-fixed","kind":"fixed","key_size":4,"value_size":2}"#));
    let b = store_in(&d, "kinds-copy.shoal");
    let r = shoal_with(&["load", &b], dump.as_bytes());
    assert_eq!(r.code, 0, "{}", r.stderr);
    let s = shoal::Store::open_existing(&b).unwrap();
    assert_eq!(
        s.map_kind("with-uids").unwrap(),
        Some(shoal::MapKind::Variable { uids: true })
    );
    let u = s.open_map("with-uids").unwrap();
    let uid = u.uid(b"k1").unwrap().unwrap();
    assert_eq!(u.get_by_uid(uid).unwrap(), b"v1");
    let f = s.fixed_map("counters", 8, 8).unwrap();
    assert_eq!(f.len().unwrap(), 300);
    assert_eq!(
        f.get(&7u64.to_le_bytes()).unwrap().unwrap(),
        21u64.to_le_bytes()
    );
    assert_eq!(
        s.map_kind("empty-fixed").unwrap(),
        Some(shoal::MapKind::Fixed {
            key_size: 4,
            value_size: 2
        })
    );
    // A wrong-sized entry for a fixed map is a clear error naming the line.
    let bad = "{\"map\":\"counters\",\"key\":\"short\",\"value\":\"x\"}\n";
    let r = shoal_with(&["load", &b], bad.as_bytes());
    assert_ne!(r.code, 0);
    assert!(r.stderr.contains("line 1"), "{}", r.stderr);
}

/// Arguments are checked before anything is created: a refused `put` leaves no store.
#[test]
fn a_refused_put_creates_no_store() {
    let d = tmp();
    let s = store_in(&d, "never.shoal");
    let long_name = "n".repeat(shoal::MAX_NAME_LEN + 1);
    let long_key = "k".repeat(shoal::MAX_KEY_LEN + 1);
    for (args, needle) in [
        (vec!["put", &s, "", "k", "v"], "map names are 1 to"),
        (vec!["put", &s, &long_name, "k", "v"], "map names are 1 to"),
        (vec!["put", &s, "m", &long_key, "v"], "key of 65537 bytes"),
        (vec!["put", "--hex", &s, "m", "zz", "00"], "bad hex"),
    ] {
        fails(&args, 2, needle);
        assert!(
            !Path::new(&s).exists(),
            "shoal {args:?} created the store before refusing"
        );
    }
    // And the other commands that take a map name refuse a bad one the same way.
    ok(&["put", &s, "m", "k", "v"]);
    for args in [
        vec!["get", &s, "", "k"],
        vec!["del", &s, "", "k"],
        vec!["ls", &s, ""],
        vec!["dump", &s, ""],
    ] {
        fails(&args, 2, "map names are 1 to");
    }
}

/// Error messages speak of this tool's commands, never of the Rust API
/// (`Store::fixed_map`, `Store::repair`, ...).
fn assert_no_rust_api(args: &[&str], text: &str) {
    for rust in ["Store::", "MapOptions::", "Map::"] {
        assert!(
            !text.contains(rust),
            "shoal {args:?} names the Rust API: {text}"
        );
    }
}

#[test]
fn a_map_of_the_other_kind_is_named_in_the_tools_terms() {
    let d = tmp();
    let s = store_in(&d, "kinds.shoal");
    {
        let st = shoal::Store::open(&s).unwrap();
        st.fixed_map("f", 8, 4).unwrap();
        st.map("v").unwrap().put(b"k", b"v").unwrap();
    }
    for args in [
        vec!["get", &s, "f", "k"],
        vec!["put", &s, "f", "k", "v"],
        vec!["del", &s, "f", "k"],
        vec!["ls", &s, "f"],
    ] {
        let r = fails(
            &args,
            2,
            "is a fixed-size map of 8-byte keys and 4-byte values",
        );
        assert!(r.stderr.contains("dump shows every kind"), "{}", r.stderr);
        assert_no_rust_api(&args, &r.stderr);
    }
    // A dump line that says "fixed" for an existing variable-size map.
    let line = "{\"map\":\"v\",\"kind\":\"fixed\",\"key_size\":8,\"value_size\":8}\n";
    let r = shoal_with(&["load", &s], line.as_bytes());
    check_failure(
        &["load"],
        &r,
        2,
        "is a variable-size map, not a fixed-size map",
    );
    assert_no_rust_api(&["load"], &r.stderr);
}

/// A store on disk not closed cleanly whose record fails its checksum (as an OS crash can
/// leave it): every command refuses it naming `shoal repair STORE`, and that command
/// drops the torn entry and keeps the rest.
#[test]
fn an_unclean_torn_store_points_at_shoal_repair() {
    // On disk (not /dev/shm): only there is an unclean store verified when it is opened.
    let d = tempfile::tempdir_in(env!("CARGO_TARGET_TMPDIR")).unwrap();
    let s = store_in(&d, "torn.shoal");
    {
        let st = shoal::Store::create(&s).unwrap();
        if !st.stats().unwrap().on_disk {
            eprintln!("{} is on tmpfs: skipped", d.path().display());
            return;
        }
        let m = st.map("m").unwrap();
        m.put(b"good", &[b'g'; 100]).unwrap();
        m.put(b"torn", &[b't'; 100]).unwrap();
    }
    let mut b = std::fs::read(&s).unwrap();
    let at = b
        .windows(8)
        .position(|w| w == b"torntttt")
        .expect("the record of \"torn\"");
    b[at + 4 + 50] ^= 1; // a byte of its value: the record fails its checksum
    b[576..584].copy_from_slice(&0u64.to_le_bytes()); // the clean flag: not closed cleanly
    std::fs::write(&s, &b).unwrap();

    let hint = format!("run: shoal repair {s} ");
    for args in [vec!["get", &s, "m", "good"], vec!["stat", &s]] {
        let r = fails(&args, 2, &hint);
        assert!(r.stderr.contains("not closed cleanly"), "{}", r.stderr);
        assert_no_rust_api(&args, &r.stderr);
    }
    // check: a negative answer, the problem on stdout.
    let r = shoal(&["check", &s]);
    assert_eq!(r.code, 1, "{}", r.stderr);
    assert!(r.out().contains(&hint), "{}", r.out());
    assert_no_rust_api(&["check"], &r.out());

    let out = ok(&["repair", &s]);
    assert_eq!(
        out.lines()
            .filter(|l| l.starts_with("dropped: m: "))
            .count(),
        1,
        "{out}"
    );
    assert!(out.contains("repaired: "), "{out}");
    assert_eq!(
        ok(&["get", &s, "m", "good"]),
        format!("{}\n", "g".repeat(100))
    );
    fails(&["get", &s, "m", "torn"], 1, "");
    ok(&["check", &s]);
    assert!(ok(&["repair", &s]).contains("sound: nothing to repair"));
}

/// A directory on disk (not tmpfs), where stores have checksums and a clean flag.
fn disk_tmp() -> tempfile::TempDir {
    let d = tempfile::Builder::new()
        .prefix("shoal-cli-test-")
        .tempdir_in(std::env::temp_dir())
        .expect("tempdir");
    let probe = d.path().join("probe.shoal");
    let on_disk = shoal::Store::open(&probe).unwrap().stats().unwrap().on_disk;
    assert!(
        on_disk,
        "{} is on tmpfs; this test needs a disk",
        d.path().display()
    );
    shoal::Store::destroy(&probe).unwrap();
    d
}

/// Flips a byte `at` bytes into the only occurrence of `needle` in the file at `p`; with
/// `unclean`, also clears the clean flag (header offset 576), as an OS crash leaves it.
fn damage_file(p: &str, needle: &[u8], at: usize, unclean: bool) {
    let mut b = std::fs::read(p).unwrap();
    let pos: Vec<usize> = b
        .windows(needle.len())
        .enumerate()
        .filter(|(_, w)| *w == needle)
        .map(|(i, _)| i)
        .collect();
    assert_eq!(pos.len(), 1, "{:?}", String::from_utf8_lossy(needle));
    b[pos[0] + at] ^= 0x20;
    if unclean {
        b[576..584].copy_from_slice(&0u64.to_le_bytes());
    }
    std::fs::write(p, &b).unwrap();
}

/// A disk store with map `m`: keys `k0`..`k99` (value `value of kI`) and `torn` (value
/// `TORN-VALUE-0123456789`), closed cleanly.
fn disk_store_with_a_torn_candidate(path: &str) {
    let s = shoal::Store::open(path).unwrap();
    assert!(s.stats().unwrap().checksums);
    let m = s.map("m").unwrap();
    for i in 0..100 {
        m.put(
            format!("k{i}").as_bytes(),
            format!("value of k{i}").as_bytes(),
        )
        .unwrap();
    }
    m.put(b"torn", b"TORN-VALUE-0123456789").unwrap();
}

#[test]
fn repair_recovers_an_unclean_disk_store_that_other_commands_refuse() {
    let d = disk_tmp();
    let s = store_in(&d, "crashed.shoal");
    disk_store_with_a_torn_candidate(&s);
    // As after an OS crash: one record torn, the store not closed cleanly.
    damage_file(&s, b"TORN-VALUE-0123456789", 4, true);
    for args in [
        vec!["get", &s, "m", "k1"],
        vec!["stat", &s],
        vec!["dump", &s],
    ] {
        fails(&args, 2, "not closed cleanly");
    }
    // The dry run lists what the repair would drop, exits 1, and changes no byte.
    let before = std::fs::read(&s).unwrap();
    let r = shoal(&["repair", "--dry-run", &s]);
    assert_eq!(r.code, 1, "{}{}", r.out(), r.stderr);
    let out = r.out();
    assert!(out.contains("found: map 0: record"), "{out}");
    assert!(
        out.lines()
            .any(|l| l.starts_with("dropped: m: slot ") && l.contains("fails its checksum")),
        "{out}"
    );
    assert!(out.trim_end().ends_with("nothing was changed"), "{out}");
    assert!(
        std::fs::read(&s).unwrap() == before,
        "the dry run changed the file"
    );
    fails(&["get", &s, "m", "k1"], 2, "not closed cleanly");
    // The repair.
    let out = ok(&["repair", &s]);
    assert!(out.contains("dropped: m: slot "), "{out}");
    assert!(
        out.contains("\nrepaired: dropped 1 item, rebuilt "),
        "{out}"
    );
    assert_eq!(ok(&["get", &s, "m", "k1"]), "value of k1\n");
    fails(&["get", &s, "m", "torn"], 1, "not found");
    assert!(ok(&["check", &s]).trim_end().ends_with("ok"));
    assert!(ok(&["repair", &s]).contains("sound: nothing to repair"));
}

#[test]
fn repair_drops_a_record_that_fails_its_checksum_in_a_store_closed_cleanly() {
    let d = disk_tmp();
    let s = store_in(&d, "rot.shoal");
    disk_store_with_a_torn_candidate(&s);
    damage_file(&s, b"TORN-VALUE-0123456789", 4, false);
    // Opens (it was closed cleanly), but the damaged value is never handed out.
    assert_eq!(ok(&["get", &s, "m", "k1"]), "value of k1\n");
    fails(&["get", &s, "m", "torn"], 2, "fails its checksum");
    let r = shoal(&["check", &s]);
    assert_eq!(r.code, 1, "{}", r.out());
    assert!(r.out().contains("fails its checksum"), "{}", r.out());
    let before = std::fs::read(&s).unwrap();
    let r = shoal(&["repair", "--dry-run", &s]);
    assert_eq!(r.code, 1, "{}{}", r.out(), r.stderr);
    assert!(r.out().contains("dropped: m: slot "), "{}", r.out());
    assert!(
        std::fs::read(&s).unwrap() == before,
        "the dry run changed the file"
    );
    let out = ok(&["repair", &s]);
    assert!(out.contains("fails its checksum"), "{out}");
    assert!(ok(&["check", &s]).trim_end().ends_with("ok"));
    fails(&["get", &s, "m", "torn"], 1, "not found");
    assert_eq!(ok(&["get", &s, "m", "k99"]), "value of k99\n");
    let r = shoal(&["repair", "--dry-run", &s]);
    assert_eq!(r.code, 0, "{}{}", r.out(), r.stderr);
    assert!(r.out().contains("sound: nothing to repair"), "{}", r.out());
}

#[test]
fn repair_is_refused_while_another_process_has_the_store_open() {
    let d = tmp();
    let s = store_in(&d, "busy.shoal");
    ok(&["put", &s, "m", "k", "v"]);
    let holder = shoal::Store::open_existing(&s).unwrap();
    // (Attaching to learn that another process is attached writes this process's slot in
    // the process table, as any open does; nothing else.)
    fails(&["repair", &s], 2, "open in another process");
    let before = std::fs::read(&s).unwrap();
    fails(&["repair", "--dry-run", &s], 2, "open in another process");
    assert!(std::fs::read(&s).unwrap() == before);
    drop(holder);
    assert!(ok(&["repair", &s]).contains("sound: nothing to repair"));
    fails(&["repair", &store_in(&d, "none.shoal")], 2, "no store at");
}

/// Where each key `PREFIX` + digits (`len` bytes) starts in `file` (each is written once).
fn key_positions(file: &[u8], prefix: &[u8], len: usize) -> BTreeMap<Vec<u8>, usize> {
    let mut at = BTreeMap::new();
    for (i, w) in file.windows(len).enumerate() {
        if w.starts_with(prefix) && w[prefix.len()..].iter().all(u8::is_ascii_digit) {
            assert!(at.insert(w.to_vec(), i).is_none());
        }
    }
    at
}

#[test]
fn repair_salvages_the_intact_keys_of_a_truncated_file() {
    let d = tmp();
    let s = store_in(&d, "short.shoal");
    let val = |i: u32| format!("{i:06}-{}", "v".repeat(93));
    {
        let st = shoal::Store::open(&s).unwrap();
        let small = st.map("small").unwrap();
        let big = st.map("big").unwrap();
        for i in 0..20u32 {
            small
                .put(format!("s{i:07}").as_bytes(), val(i).as_bytes())
                .unwrap();
        }
        for i in 0..6000u32 {
            big.put(format!("b{i:07}").as_bytes(), val(i).as_bytes())
                .unwrap();
        }
    }
    let good = std::fs::read(&s).unwrap();
    // Half a chunk and a bit more than a chunk short.
    let cut = good.len() - 256 * 1024 - 128 * 1024 - 77;
    std::fs::write(&s, &good[..cut]).unwrap();
    fails(&["get", &s, "small", "s0000001"], 2, "truncated");
    let r = shoal(&["check", &s]);
    assert_eq!(r.code, 1, "{}", r.out());
    // Dry run: a report, no file changed or created.
    let r = shoal(&["repair", "--dry-run", &s]);
    assert_eq!(r.code, 1, "{}{}", r.out(), r.stderr);
    assert!(r.out().contains("found: truncated"), "{}", r.out());
    assert!(r.out().contains("would salvage"), "{}", r.out());
    assert!(std::fs::read(&s).unwrap() == good[..cut]);
    assert_eq!(std::fs::read_dir(d.path()).unwrap().count(), 1);
    // The salvage.
    let out = ok(&["repair", &s]);
    assert!(out.contains("found: truncated"), "{out}");
    assert!(out.contains("rebuilt: salvaged"), "{out}");
    assert!(out.contains("dropped: big: "), "{out}");
    let kept = format!("{s}.truncated");
    assert!(
        std::fs::read(&kept).unwrap() == good[..cut],
        "the original is kept"
    );
    assert!(ok(&["check", &s]).trim_end().ends_with("ok"));
    // Every key whose record (a 3-byte header, the key, the 100-byte value) lies wholly
    // before the cut is back with its value; every other is gone.
    let pos = key_positions(&good, b"b", 8);
    assert_eq!(pos.len(), 6000);
    let st = shoal::Store::open_existing(&s).unwrap();
    let big = st.open_map("big").unwrap();
    let mut back = 0;
    for (k, at) in &pos {
        let got = big.get(k).unwrap();
        if at + k.len() + 100 <= cut {
            let i: u32 = std::str::from_utf8(&k[1..]).unwrap().parse().unwrap();
            assert_eq!(got.as_deref(), Some(val(i).as_bytes()), "{k:?}");
            back += 1;
        } else {
            assert_eq!(got, None, "{k:?} was cut off");
        }
    }
    assert!(back > 1000 && back < 6000, "{back} keys back");
    assert_eq!(big.len().unwrap(), back);
    let small = st.open_map("small").unwrap();
    assert_eq!(small.len().unwrap(), 20);
    assert_eq!(
        small.get(b"s0000007").unwrap().as_deref(),
        Some(val(7).as_bytes())
    );
}

/// Points the slot of `key`'s record (a 2-byte header before the key: no checksum, short
/// key and value) into the process table, where no record can be. Returns the slot.
fn damage_slot(p: &str, key: &[u8]) -> u64 {
    let mut b = std::fs::read(p).unwrap();
    let rec = (b.windows(key.len()).position(|w| w == key).unwrap() - 2) as u64;
    let slot = (0..b.len() / 8)
        .map(|i| i * 8)
        .find(|&i| {
            let w = u64::from_le_bytes(b[i..i + 8].try_into().unwrap());
            w & ((1 << 48) - 1) == rec && w >> 48 != 0
        })
        .expect("the key's slot");
    let tag = u64::from_le_bytes(b[slot..slot + 8].try_into().unwrap()) >> 48;
    b[slot..slot + 8].copy_from_slice(&(tag << 48 | 0x1008).to_le_bytes());
    std::fs::write(p, &b).unwrap();
    slot as u64
}

#[test]
fn dump_reports_a_damaged_segment_and_dumps_everything_else() {
    let d = tmp();
    let s = store_in(&d, "seg.shoal");
    {
        let st = shoal::Store::open(&s).unwrap();
        let o = shoal::MapOptions {
            segment_buckets: 4,
            stash_buckets: 1,
            uids: false,
            ..Default::default()
        };
        let a = st.map_with("alpha", &o, true).unwrap();
        let b = st.map_with("beta", &o, true).unwrap();
        for i in 0..2000u32 {
            a.put(format!("a:{i:05}").as_bytes(), b"va").unwrap();
        }
        for i in 0..500u32 {
            b.put(format!("b:{i:05}").as_bytes(), b"vb").unwrap();
        }
    }
    let slot = damage_slot(&s, b"a:01234");
    let r = shoal(&["dump", &s]);
    assert_eq!(r.code, 1, "stderr: {}", r.stderr);
    let mut n = BTreeMap::<String, u32>::new();
    for line in r.out().lines() {
        let v: Value = serde_json::from_str(line).unwrap();
        *n.entry(v["map"].as_str().unwrap().to_string()).or_default() += 1;
        assert_ne!(v["key"], "a:01234");
    }
    assert_eq!(n.get("beta"), Some(&500), "beta whole");
    assert_eq!(n.get("alpha"), Some(&1999), "alpha but the damaged entry");
    // On stderr: the damaged segment, by map and offset, then the verdict.
    let lines: Vec<&str> = r.stderr.lines().collect();
    assert_eq!(lines.len(), 2, "{}", r.stderr);
    assert!(
        lines[0].starts_with("shoal: corrupt store "),
        "{}",
        lines[0]
    );
    assert!(
        lines[0].contains("map \"alpha\": segment 0x"),
        "{}",
        lines[0]
    );
    let seg = u64::from_str_radix(
        lines[0]
            .split("segment 0x")
            .nth(1)
            .unwrap()
            .split(|c: char| !c.is_ascii_hexdigit())
            .next()
            .unwrap(),
        16,
    )
    .unwrap();
    assert!(
        seg < slot && slot < seg + 128 * 6,
        "slot {slot:#x} not in {seg:#x}"
    );
    assert!(lines[1].contains("the dump is incomplete"), "{}", lines[1]);
    // One map alone: the same.
    let r = shoal(&["dump", &s, "alpha"]);
    assert_eq!(r.code, 1);
    assert_eq!(r.out().lines().count(), 1999);
    assert_eq!(ok(&["dump", &s, "beta"]).lines().count(), 500);
    // After a repair, the dump is whole and clean.
    assert!(ok(&["repair", &s]).contains("dropped: alpha: slot "));
    assert_eq!(ok(&["dump", &s]).lines().count(), 2499);
}

/// Runs `shoal ARGS` as user `nobody` (uid 65534), from a copy of the tool in `dir` (the
/// build's own copy may lie in a folder that user cannot enter); `None` if this process
/// cannot (not root).
fn shoal_as_nobody(dir: &Path, args: &[&str]) -> Option<Run> {
    use std::os::unix::fs::PermissionsExt;
    use std::os::unix::process::CommandExt;
    // SAFETY: getuid has no preconditions.
    if unsafe { libc::getuid() } != 0 {
        return None;
    }
    let bin = dir.join("shoal-as-nobody");
    if !bin.exists() {
        std::fs::copy(BIN, &bin).expect("copy the tool");
        std::fs::set_permissions(&bin, std::fs::Permissions::from_mode(0o755)).unwrap();
    }
    Some(finish(
        Command::new(&bin)
            .args(args)
            .uid(65534)
            .gid(65534)
            .stdin(Stdio::null())
            .output()
            .expect("run shoal"),
    ))
}

/// A user who may only read a store (mode 644, owned by another user) reads it: `stat`,
/// `get`, `ls`, `dump` and `check` open it read-only (they were refused with "permission
/// denied"), and a write says why it cannot.
#[test]
fn a_user_who_may_only_read_a_store_reads_it() {
    use std::os::unix::fs::PermissionsExt;
    let d = tmp();
    std::fs::set_permissions(d.path(), std::fs::Permissions::from_mode(0o755)).unwrap();
    let s = store_in(&d, "shared.shoal");
    ok(&["put", &s, "m", "k", "hello"]);
    std::fs::set_permissions(&s, std::fs::Permissions::from_mode(0o644)).unwrap();
    let Some(r) = shoal_as_nobody(d.path(), &["get", &s, "m", "k"]) else {
        eprintln!("SKIPPED: not root: cannot run the tool as another user");
        return;
    };
    assert_eq!((r.code, r.out().as_str()), (0, "hello\n"), "{}", r.stderr);
    for args in [
        vec!["stat", &s],
        vec!["ls", &s],
        vec!["ls", &s, "m"],
        vec!["dump", &s],
        vec!["check", &s],
    ] {
        let r = shoal_as_nobody(d.path(), &args).unwrap();
        assert_eq!(r.code, 0, "shoal {args:?}: {}{}", r.out(), r.stderr);
    }
    let r = shoal_as_nobody(d.path(), &["put", &s, "m", "k", "v"]).unwrap();
    assert_eq!(r.code, 2, "{}", r.stderr);
    assert!(r.stderr.contains("permission denied"), "{}", r.stderr);
    assert_eq!(ok(&["get", &s, "m", "k"]), "hello\n");
}

#[test]
fn stat_and_watch_show_queue_depths_and_what_each_process_holds() {
    let d = tmp();
    let s = store_in(&d, "q.shoal");
    let st = shoal::Store::open(&s).unwrap();
    let set = st
        .queue_set(
            "jobs",
            &shoal::QueueSetOptions::new(64, 10).queue_with_limit("todo", 5),
        )
        .unwrap();
    let (free, todo) = (set.queue("free").unwrap(), set.queue("todo").unwrap());
    set.move_to(free, todo, 4).unwrap();
    set.pull(free).unwrap().unwrap().keep(); // held by this process
    let text = ok(&["stat", &s]);
    let line = |q: &str| {
        text.lines()
            .find(|l| l.starts_with("jobs") && l.split_whitespace().nth(1) == Some(q))
            .unwrap_or_else(|| panic!("no row for {q} in {text}"))
            .split_whitespace()
            .map(String::from)
            .collect::<Vec<_>>()
    };
    assert_eq!(line("free")[2], "5", "{text}");
    assert_eq!(&line("todo")[2..4], ["4", "5"], "{text}");
    let pid = std::process::id();
    assert!(text.contains(&format!("pid {pid} holds 1")), "{text}");
    let v: serde_json::Value = serde_json::from_str(&ok(&["stat", "--json", &s])).unwrap();
    let sets = v["queue_sets"].as_array().unwrap();
    assert_eq!(sets[0]["name"], "jobs");
    assert_eq!(sets[0]["queues"][1]["len"], 4);
    assert_eq!(sets[0]["held"][0]["pid"], pid);
    let watch = ok(&["watch", &s, "--iterations", "1"]);
    assert!(
        watch.contains("QUEUE SET") && watch.contains("todo"),
        "{watch}"
    );
    fails(&["get", &s, "jobs", "k"], 2, "is a queue set");
}

#[test]
fn typed_maps_are_written_and_printed_as_their_types() {
    let d = tmp();
    let path = store_in(&d, "t.shoal");
    {
        let s = shoal::Store::open(&path).unwrap();
        let opts = |k, v| shoal::MapOptions {
            key_type: Some(k),
            value_type: Some(v),
            ..Default::default()
        };
        s.map_with(
            "scores",
            &opts(shoal::DataType::Utf8, shoal::DataType::F64),
            true,
        )
        .unwrap();
        s.map_with(
            "docs",
            &opts(shoal::DataType::I64, shoal::DataType::Json),
            true,
        )
        .unwrap();
    }
    ok(&["put", &path, "scores", "ann", "2.5"]);
    // A negative number after `--`, which ends the options.
    ok(&[
        "put",
        &path,
        "docs",
        "--",
        "-7",
        r#"{ "b": [1], "a": "é" }"#,
    ]);
    assert_eq!(ok(&["get", &path, "scores", "ann"]), "2.5\n");
    assert_eq!(
        ok(&["get", &path, "docs", "--", "-7"]),
        "{\"a\":\"é\",\"b\":[1]}\n"
    );
    assert_eq!(ok(&["ls", &path, "docs"]), "-7\n");
    // The bytes themselves with --hex.
    assert_eq!(
        ok(&["get", "--hex", &path, "scores", "616e6e"]),
        format!("{}\n", hex(&2.5f64.to_le_bytes()))
    );
    let r = shoal(&["put", &path, "scores", "bob", "fast"]);
    assert_eq!(r.code, 2, "{}", r.stderr);
    assert!(r.stderr.contains("the map records f64"), "{}", r.stderr);
    let st = ok(&["stat", &path]);
    assert!(
        st.contains("utf8 → f64") && st.contains("i64 → json"),
        "{st}"
    );

    // dump writes the types and the numbers as numbers; load recreates both.
    let dump = ok(&["dump", &path]);
    assert!(
        dump.contains(r#""key_type":"utf8","value_type":"f64""#),
        "{dump}"
    );
    assert!(dump.contains(r#""key":{"i64":-7}"#), "{dump}");
    assert!(dump.contains(r#""value":{"f64":2.5}"#), "{dump}");
    let copy = store_in(&d, "copy.shoal");
    let r = shoal_with(&["load", &copy], dump.as_bytes());
    assert_eq!(r.code, 0, "{}", r.stderr);
    assert_eq!(contents(&copy), contents(&path));
    let s = shoal::Store::open_existing(&copy).unwrap();
    let m = s.open_map("docs").unwrap();
    assert_eq!(
        (m.key_type(), m.value_type()),
        (Some(shoal::DataType::I64), Some(shoal::DataType::Json))
    );
}

fn hex(b: &[u8]) -> String {
    b.iter().map(|x| format!("{x:02x}")).collect()
}

#[test]
fn log_tail_prints_records_as_text_or_json_and_follows_new_ones() {
    let d = tmp();
    let s = store_in(&d, "l.shoal");
    let st = shoal::Store::open(&s).unwrap();
    let log = st.log("app", &shoal::LogOptions::new(16, 64)).unwrap();
    log.append(3, b"started").unwrap();
    log.append_fields(4, b"req\ttab", &[(b"path", b"/a"), (b"ms", b"12")])
        .unwrap();
    let text = ok(&["log", "tail", &s, "app"]);
    let lines: Vec<&str> = text.lines().collect();
    assert_eq!(lines.len(), 2, "{text}");
    let pid = std::process::id().to_string();
    let f: Vec<&str> = lines[0].split(' ').collect();
    assert_eq!(
        (f[0], f[3], f[5], f[6]),
        ("0", pid.as_str(), "3", "started"),
        "{text}"
    );
    assert!(lines[1].ends_with(" 4 req\\ttab path=/a ms=12"), "{text}");
    let json = ok(&["log", "tail", &s, "app", "--format", "json"]);
    let v: Vec<Value> = json
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert_eq!(v[1]["seq"], 1);
    assert_eq!(v[1]["message"], "req\ttab");
    assert_eq!(v[1]["fields"]["path"], "/a");
    assert_eq!(v[0]["pid"], std::process::id());
    // Its own reader is gone when it exits; a named one keeps its cursor.
    assert!(log.stats().unwrap().readers.is_empty());
    assert_eq!(
        ok(&["log", "tail", &s, "app", "--reader", "d"])
            .lines()
            .count(),
        2
    );
    log.append(1, b"third").unwrap();
    let again = ok(&["log", "tail", &s, "app", "--reader", "d"]);
    assert!(
        again.starts_with("2 ") && again.lines().count() == 1,
        "{again}"
    );
    // --follow prints what comes later, until interrupted.
    let mut child = Command::new(BIN)
        .args(["log", "tail", &s, "app", "--follow", "--format", "json"])
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    let mut lines = std::io::BufRead::lines(std::io::BufReader::new(child.stdout.take().unwrap()));
    let mut seen = Vec::new();
    for _ in 0..3 {
        seen.push(lines.next().unwrap().unwrap());
    }
    log.append(2, b"later").unwrap();
    seen.push(lines.next().unwrap().unwrap());
    assert!(seen[3].contains("\"later\""), "{seen:?}");
    // SAFETY: signalling our own child, which catches SIGINT (it printed already).
    unsafe { libc::kill(child.id() as i32, libc::SIGINT) };
    assert!(child.wait().unwrap().success());
    assert!(lines.next().is_none());
    fails(&["log", "tail", &s, "nolog"], 2, "no log \"nolog\"");
    fails(&["get", &s, "app", "k"], 2, "log");
}

/// Waits (at most 60 s) until `f` holds.
fn wait_until(what: &str, mut f: impl FnMut() -> bool) {
    let start = std::time::Instant::now();
    while !f() {
        assert!(
            start.elapsed() < std::time::Duration::from_secs(60),
            "waited 60 s for {what}"
        );
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
}

#[test]
fn log_drain_writes_a_rotated_file_and_resumes_at_its_cursor() {
    let d = tmp();
    let s = store_in(&d, "l.shoal");
    let out = d.path().join("app.log");
    let st = shoal::Store::open(&s).unwrap();
    let log = st.log("app", &shoal::LogOptions::new(256, 64)).unwrap();
    // Each line is 60 to 70 bytes: 300 bytes hold four of them.
    for i in 0..20 {
        log.append_fields(6, format!("before {i:03}").as_bytes(), &[(b"i", b"x")])
            .unwrap();
    }
    let drain = |extra: &[&str]| {
        let mut args = vec![
            "log",
            "drain",
            &s,
            "app",
            "--to",
            out.to_str().unwrap(),
            "--rotate-bytes",
            "300",
            "--keep",
            "3",
        ];
        args.extend_from_slice(extra);
        Command::new(BIN)
            .args(&args)
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap()
    };
    let files = || -> Vec<String> {
        // Oldest first: app.log.3, .2, .1, then app.log.
        let mut v = Vec::new();
        for p in ["app.log.3", "app.log.2", "app.log.1", "app.log"] {
            if let Ok(t) = std::fs::read_to_string(d.path().join(p)) {
                assert!(t.len() <= 300, "{p} is {} bytes", t.len());
                v.extend(t.lines().map(String::from));
            }
        }
        v
    };
    let child = drain(&[]);
    // Records published while it runs are written too, within a wake.
    wait_until("the first records", || files().len() >= 2);
    for i in 0..3 {
        log.append(6, format!("during {i:03}").as_bytes()).unwrap();
    }
    wait_until("the records written while draining", || {
        files().last().is_some_and(|l| l.contains("during 002"))
    });
    // SAFETY: signalling our own child, which catches SIGINT.
    unsafe { libc::kill(child.id() as i32, libc::SIGINT) };
    let o = child.wait_with_output().unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    // 23 lines in files of four: the oldest files rotated out, the rest in order.
    assert!(!d.path().join("app.log.4").exists());
    let lines = files();
    assert!((10..=20).contains(&lines.len()), "{lines:?}");
    let seqs: Vec<u64> = lines
        .iter()
        .map(|l| l.split(' ').next().unwrap().parse().unwrap())
        .collect();
    let first = seqs[0];
    assert_eq!(seqs, (first..23).collect::<Vec<_>>(), "{lines:?}");
    assert!(
        lines[lines.len() - 4].ends_with(" 6 before 019 i=x"),
        "{lines:?}"
    );
    // Stopped, the cursor stays in the store: records appended meanwhile come out of the
    // next drain, and none before them again.
    assert_eq!(log.stats().unwrap().readers[0].position, 23);
    log.append(3, b"while stopped").unwrap();
    let mut child = drain(&["--format", "json"]);
    wait_until("the record appended while stopped", || {
        files().last().is_some_and(|l| l.contains("while stopped"))
    });
    // SAFETY: as above.
    unsafe { libc::kill(child.id() as i32, libc::SIGINT) };
    assert!(child.wait().unwrap().success());
    let last: Value = serde_json::from_str(files().last().unwrap()).unwrap();
    assert_eq!(
        (last["seq"].as_u64(), last["level"].as_u64()),
        (Some(23), Some(3))
    );
    assert_eq!(
        files().iter().filter(|l| l.contains("during 002")).count(),
        1
    );
    // A file it cannot open, a log that is not there: clear errors.
    fails(
        &["log", "drain", &s, "app", "--to", "/nonexistent/dir/x.log"],
        2,
        "cannot open /nonexistent/dir/x.log",
    );
    fails(
        &["log", "drain", &s, "nolog", "--to", out.to_str().unwrap()],
        2,
        "no log \"nolog\"",
    );
}
