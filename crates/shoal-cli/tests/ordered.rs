//! The `shoal` binary on ordered maps: dump in key order and load into a fresh store
//! round-trip (with a hash map beside them), stat and ls show them, get/put/del reach
//! them, and check covers a store holding them.

use serde_json::Value;
use std::io::Write;
use std::process::{Command, Stdio};

const BIN: &str = env!("CARGO_BIN_EXE_shoal");

/// Runs `shoal ARGS` with `stdin`; returns (exit code, stdout, stderr).
fn run(args: &[&str], stdin: &[u8]) -> (i32, Vec<u8>, String) {
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
    (
        o.status.code().unwrap_or(-1),
        o.stdout,
        String::from_utf8_lossy(&o.stderr).into_owned(),
    )
}

fn ok(args: &[&str]) -> String {
    let (code, out, err) = run(args, b"");
    assert_eq!(code, 0, "shoal {args:?} failed: {err}");
    String::from_utf8(out).unwrap()
}

fn tmp() -> tempfile::TempDir {
    tempfile::Builder::new()
        .prefix("shoal-cli-ordered-")
        .tempdir_in("/dev/shm")
        .or_else(|_| tempfile::tempdir())
        .expect("tempdir")
}

/// A map's name and its entries in key order.
type Contents = Vec<(String, Vec<(Vec<u8>, Vec<u8>)>)>;

/// Every entry of every ordered map, in key order, through the library.
fn ordered_contents(path: &str) -> Contents {
    let s = shoal::Store::open_existing(path).unwrap();
    let mut names = s.ordered_maps().unwrap();
    names.sort();
    names
        .into_iter()
        .map(|n| {
            let m = s.ordered_map(&n).unwrap();
            (n, m.range(None, None).unwrap())
        })
        .collect()
}

fn make_store(path: &str) {
    let s = shoal::Store::open(path).unwrap();
    let o = s.ordered_map("idx").unwrap();
    // Inserted out of order: the dump must come out sorted.
    for i in (0..3000u32).rev().step_by(7).chain((0..3000u32).step_by(7)) {
        o.put(
            format!("k{:05}", (i * 7919) % 3000).as_bytes(),
            format!("v{i}").as_bytes(),
        )
        .unwrap();
    }
    o.put(&[0xff, 0x00], &[0x80]).unwrap(); // not UTF-8: base64 in the dump
    o.put(b"", b"").unwrap();
    s.ordered_map("empty").unwrap();
    s.map("hash").unwrap().put(b"h", b"1").unwrap();
}

#[test]
fn dump_is_sorted_and_load_round_trips() {
    let d = tmp();
    let a = d.path().join("a.shoal").to_str().unwrap().to_string();
    let b = d.path().join("b.shoal").to_str().unwrap().to_string();
    make_store(&a);
    let dump = ok(&["dump", &a]);
    let lines: Vec<Value> = dump
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    // The ordered maps' lines: a kind line, then keys strictly increasing.
    let mut keys: Vec<Vec<u8>> = Vec::new();
    let mut saw_kind = false;
    for v in &lines {
        if v["map"] == "idx" {
            if v.get("key").is_none() {
                assert_eq!(v["kind"], "ordered");
                saw_kind = true;
                continue;
            }
            let k = match &v["key"] {
                Value::String(s) => s.as_bytes().to_vec(),
                Value::Object(o) => {
                    use base64::Engine as _;
                    let b = o["b64"].as_str().unwrap();
                    base64::engine::general_purpose::STANDARD.decode(b).unwrap()
                }
                other => panic!("key {other}"),
            };
            keys.push(k);
        }
    }
    assert!(saw_kind);
    assert!(
        keys.windows(2).all(|w| w[0] < w[1]),
        "dump not in key order"
    );
    let want = ordered_contents(&a);
    assert_eq!(
        keys.len(),
        want.iter().find(|(n, _)| n == "idx").unwrap().1.len()
    );
    assert!(lines
        .iter()
        .any(|v| v["map"] == "empty" && v["kind"] == "ordered"));

    let (code, out, err) = run(&["load", &b], dump.as_bytes());
    assert_eq!(code, 0, "{err}");
    assert!(String::from_utf8_lossy(&out).contains("into 3 map(s)"));
    assert_eq!(ordered_contents(&b), want);
    let s = shoal::Store::open_existing(&b).unwrap();
    assert_eq!(
        s.map_kind("idx").unwrap(),
        Some(shoal::MapKind::Ordered {
            u64_keys: false,
            duplicates: false
        })
    );
    assert_eq!(
        s.map("hash").unwrap().get(b"h").unwrap(),
        Some(b"1".to_vec())
    );
    // A dump of one ordered map alone, and the check of both stores.
    let one = ok(&["dump", &b, "idx"]);
    assert_eq!(one.lines().count(), keys.len() + 1);
    assert_eq!(run(&["check", &a], b"").0, 0);
    assert_eq!(run(&["check", &b], b"").0, 0);
}

#[test]
fn stat_ls_get_put_del() {
    let d = tmp();
    let a = d.path().join("a.shoal").to_str().unwrap().to_string();
    make_store(&a);
    let t = ok(&["stat", &a]);
    for want in ["ORDERED MAP", "BYTES/ENTRY", "idx", "empty"] {
        assert!(t.contains(want), "no {want:?} in\n{t}");
    }
    let v: Value = serde_json::from_str(&ok(&["stat", "--json", &a])).unwrap();
    let om = v["ordered_maps"].as_array().unwrap();
    let idx = om.iter().find(|m| m["name"] == "idx").unwrap();
    let n = ordered_contents(&a)[1].1.len() as u64;
    assert_eq!(idx["entries"], n);
    let pages = idx["pages"].as_u64().unwrap();
    assert!(pages >= 2, "{idx}");
    assert_eq!(idx["bytes"].as_u64().unwrap(), pages * 4096);
    let bpe = idx["bytes_per_entry"].as_f64().unwrap();
    assert!((bpe - (pages * 4096) as f64 / n as f64).abs() < 1e-6);
    assert!(om
        .iter()
        .any(|m| m["name"] == "empty" && m["bytes_per_entry"].is_null()));

    let names = ok(&["ls", &a]);

    assert!(names.lines().any(|l| l == "idx") && names.lines().any(|l| l == "hash"));
    let keys = ok(&["ls", &a, "idx", "--limit", "5"]);
    assert_eq!(keys.lines().count(), 5);
    let ks: Vec<&str> = keys.lines().collect();
    assert!(ks.windows(2).all(|w| w[0] < w[1]), "{keys}");

    ok(&["put", &a, "idx", "new-key", "new-value"]);
    assert_eq!(ok(&["get", &a, "idx", "new-key"]), "new-value\n");
    ok(&["del", &a, "idx", "new-key"]);
    let (code, _, err) = run(&["get", &a, "idx", "new-key"], b"");
    assert_eq!(code, 1, "{err}");
    let (code, _, err) = run(&["del", &a, "idx", "new-key"], b"");
    assert_eq!(code, 1, "{err}");
    // Too large a key for an ordered map: an error, nothing written.
    let big = "x".repeat(shoal::MAX_ORDERED_KEY + 1);
    let (code, _, err) = run(&["put", &a, "idx", &big, "v"], b"");
    assert_eq!(code, 2, "{err}");
    assert_eq!(run(&["get", &a, "idx", &big], b"").0, 1);
    // The hash map beside it is untouched by all this.
    assert_eq!(ok(&["get", &a, "hash", "h"]), "1\n");
}

#[test]
fn integer_keys_and_multimaps_round_trip() {
    let d = tmp();
    let a = d.path().join("a.shoal").to_str().unwrap().to_string();
    let b = d.path().join("b.shoal").to_str().unwrap().to_string();
    {
        let s = shoal::Store::open(&a).unwrap();
        let ints = s
            .ordered_map_with(
                "ints",
                &shoal::OrderedOptions {
                    u64_keys: true,
                    duplicates: false,
                },
            )
            .unwrap();
        // Out of order, and with keys whose little-endian bytes sort otherwise.
        for n in [256u64, 1, 65536, u64::MAX, 0, 255, 2] {
            ints.put(&n.to_le_bytes(), format!("n{n}").as_bytes())
                .unwrap();
        }
        let multi = s
            .ordered_map_with(
                "multi",
                &shoal::OrderedOptions {
                    u64_keys: false,
                    duplicates: true,
                },
            )
            .unwrap();
        for (k, v) in [
            (&b"k"[..], &b"b"[..]),
            (b"k", b"a"),
            (b"j", b"\xff\x00"),
            (b"k", b""),
            (b"", b"z"),
        ] {
            multi.put(k, v).unwrap();
        }
        let both = s
            .ordered_map_with(
                "both",
                &shoal::OrderedOptions {
                    u64_keys: true,
                    duplicates: true,
                },
            )
            .unwrap();
        for (n, v) in [(7u64, "x"), (7, "w"), (3, "y")] {
            both.put(&n.to_le_bytes(), v.as_bytes()).unwrap();
        }
    }
    let dump = ok(&["dump", &a]);
    assert!(dump.contains(r#"{"map":"ints","kind":"ordered","u64_keys":true}"#));
    assert!(dump.contains(r#"{"map":"multi","kind":"ordered","duplicates":true}"#));
    let (code, _, err) = run(&["load", &b], dump.as_bytes());
    assert_eq!(code, 0, "{err}");
    // The loaded store dumps to the same text: same maps, options, entries and order.
    assert_eq!(ok(&["dump", &b]), dump);
    let s = shoal::Store::open_existing(&b).unwrap();
    assert_eq!(
        s.map_kind("both").unwrap(),
        Some(shoal::MapKind::Ordered {
            u64_keys: true,
            duplicates: true
        })
    );
    let ints = s
        .ordered_map_with(
            "ints",
            &shoal::OrderedOptions {
                u64_keys: true,
                duplicates: false,
            },
        )
        .unwrap();
    let keys: Vec<u64> = ints
        .range(None, None)
        .unwrap()
        .into_iter()
        .map(|(k, _)| u64::from_le_bytes(k.try_into().unwrap()))
        .collect();
    assert_eq!(keys, vec![0, 1, 2, 255, 256, 65536, u64::MAX]);
    assert_eq!(
        s.ordered_map("multi").unwrap().get_all(b"k").unwrap(),
        vec![b"".to_vec(), b"a".to_vec(), b"b".to_vec()]
    );
    // Loading again into the same store keeps each map's options; a line asking other
    // options for an existing map is refused.
    let (code, _, err) = run(&["load", &b], dump.as_bytes());
    assert_eq!(code, 0, "{err}");
    assert_eq!(ok(&["dump", &b]), dump);
    let bad = "{\"map\":\"ints\",\"kind\":\"ordered\"}\n";
    assert_ne!(run(&["load", &b], bad.as_bytes()).0, 0);
    let bad = "{\"map\":\"x\",\"u64_keys\":true}\n";
    let (code, _, err) = run(&["load", &b], bad.as_bytes());
    assert_ne!(code, 0);
    assert!(err.contains("u64_keys"), "{err}");
    assert_eq!(run(&["check", &b], b"").0, 0);
}
