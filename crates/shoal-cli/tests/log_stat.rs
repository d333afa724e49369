//! `shoal stat` and `shoal ls` on a store with logs: each log's slots, slot size, policy,
//! tail, drops and holes, and each reader's cursor, as text and as JSON.

use std::process::Command;

const BIN: &str = env!("CARGO_BIN_EXE_shoal");

fn ok(args: &[&str]) -> String {
    let o = Command::new(BIN).args(args).output().expect("run shoal");
    assert!(
        o.status.success(),
        "shoal {args:?} failed\nstdout: {}\nstderr: {}",
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    );
    String::from_utf8(o.stdout).expect("UTF-8 output")
}

fn tmp() -> tempfile::TempDir {
    tempfile::Builder::new()
        .prefix("shoal-cli-test-")
        .tempdir_in("/dev/shm")
        .or_else(|_| tempfile::tempdir())
        .expect("tempdir")
}

/// The whitespace-separated cells of the first line of `text` whose first cells are
/// `first`.
fn row(text: &str, first: &[&str]) -> Vec<String> {
    text.lines()
        .map(|l| l.split_whitespace().map(String::from).collect::<Vec<_>>())
        .find(|cells| cells.len() >= first.len() && cells[..first.len()] == *first)
        .unwrap_or_else(|| panic!("no row {first:?} in\n{text}"))
}

#[test]
fn stat_and_ls_show_logs_and_their_readers() {
    let d = tmp();
    let path = d.path().join("l.shoal");
    let s = path.to_str().unwrap();
    let st = shoal::Store::open(&path).unwrap();
    st.map("m").unwrap().put(b"k", b"v").unwrap();
    let app = st.log("app", &shoal::LogOptions::new(64, 200)).unwrap();
    let audit = st
        .log(
            "audit",
            &shoal::LogOptions::new(4, 100).policy(shoal::FullPolicy::Drop),
        )
        .unwrap();
    let mut drain = app.reader("drain").unwrap();
    app.reader("late").unwrap();
    for i in 0..10u8 {
        app.append(6, &[b'a' + i]).unwrap();
    }
    for _ in 0..3 {
        drain.read().unwrap().unwrap();
    }
    audit.reader("r").unwrap();
    for _ in 0..6 {
        audit.append(3, b"x").unwrap();
    }

    let text = ok(&["stat", s]);
    assert_eq!(
        row(&text, &["LOG", "SLOTS"]),
        ["LOG", "SLOTS", "SLOT", "BYTES", "POLICY", "TAIL", "DROPPED", "HOLES", "READERS"]
    );
    assert_eq!(
        row(&text, &["app", "64"]),
        ["app", "64", "200", "overwrite", "10", "0", "0", "2"]
    );
    assert_eq!(
        row(&text, &["audit", "4"]),
        ["audit", "4", "100", "drop", "4", "2", "0", "1"]
    );
    assert_eq!(
        row(&text, &["app", "drain"]),
        ["app", "drain", "3", "7", "0", "0"]
    );
    assert_eq!(
        row(&text, &["app", "late"]),
        ["app", "late", "0", "10", "0", "0"]
    );

    let v: serde_json::Value = serde_json::from_str(&ok(&["stat", "--json", s])).unwrap();
    let logs = v["logs"].as_array().expect("a logs array");
    let app_j = logs.iter().find(|l| l["name"] == "app").expect("app");
    assert_eq!(app_j["slots"], 64);
    assert_eq!(app_j["max_record"], 200);
    assert_eq!(app_j["policy"], "overwrite");
    assert_eq!(app_j["tail"], 10);
    let r0 = app_j["readers"]
        .as_array()
        .unwrap()
        .iter()
        .find(|r| r["name"] == "drain")
        .expect("drain");
    assert_eq!((&r0["position"], &r0["behind"]), (&3.into(), &7.into()));
    let audit_j = logs.iter().find(|l| l["name"] == "audit").expect("audit");
    assert_eq!(
        (&audit_j["policy"], &audit_j["dropped"]),
        (&"drop".into(), &2.into())
    );

    let ls = ok(&["ls", s]);
    let names: Vec<&str> = ls.lines().collect();
    assert_eq!(names[0], "m");
    let mut logs: Vec<&str> = names[1..].to_vec();
    logs.sort();
    assert_eq!(logs, ["app", "audit"]);
    let long = ok(&["ls", "-l", s]);
    let app_l = long
        .lines()
        .find(|l| l.contains(" app "))
        .expect("app line");
    assert!(
        app_l.trim_start().starts_with("10 ")
            && app_l.contains("log: 64 slots of 200 bytes, overwrite, 2 reader(s)"),
        "{long}"
    );
    assert_eq!(ok(&["ls", "--limit", "2", s]).lines().count(), 2);
}
