//! Fixed-size and inline maps: the API against a model, size and kind checks, reopening,
//! concurrent lock-free adds (threads and SIGKILLed processes), and a crash at every
//! fixed-map fail point (with the `failpoints` feature).

#![cfg(not(shuttle))]

use proptest::prelude::*;
use shoal::{
    Error, FixedMap, FixedOptions, MapKind, MapOptions, OpenMode, Options, PutOutcome, Store,
};
use std::collections::HashMap;
use std::time::Duration;

fn tmp() -> tempfile::TempDir {
    tempfile::tempdir_in("/dev/shm")
        .or_else(|_| tempfile::tempdir())
        .unwrap()
}

fn small() -> FixedOptions {
    FixedOptions {
        segment_buckets: 2,
        stash_buckets: 1,
        ..Default::default()
    }
}

fn store(dir: &tempfile::TempDir) -> Store {
    let opts = Options {
        chunk_size: 64 * 1024,
        lock_timeout: Duration::from_secs(30),
        ..Options::default()
    };
    Store::open_with(dir.path().join("f.shoal"), &opts, OpenMode::OpenOrCreate).unwrap()
}

/// A store of format version 6, whose fixed maps split segments in halves (version 7
/// moves directory groups instead): the new store's header with version 6 and without
/// flags FIXED_GROUPS (16), FIXED_TAGS (32), CLEAN_LANES (64), QUEUES (128) and LOGS (256), as a
/// version-6 library would have written it.
#[cfg(feature = "failpoints")]
fn store_v6(dir: &tempfile::TempDir) -> Store {
    use std::os::unix::fs::FileExt;
    drop(store(dir));
    let f = std::fs::OpenOptions::new()
        .read(true)
        .write(true)
        .open(dir.path().join("f.shoal"))
        .unwrap();
    let word = |off: u64| {
        let mut b = [0u8; 8];
        f.read_exact_at(&mut b, off).unwrap();
        u64::from_le_bytes(b)
    };
    let (version, flags) = (word(8), word(16));
    assert_eq!(
        flags & 3568,
        3568,
        "a new store has FIXED_GROUPS, FIXED_TAGS, CLEAN_LANES, QUEUES, LOGS, ORDERED and BACKUP"
    );
    f.write_all_at(&((version & !0xffff_ffff) | 6).to_le_bytes(), 8)
        .unwrap();
    f.write_all_at(&(flags & !3568).to_le_bytes(), 16).unwrap();
    store(dir)
}

fn key(i: u64, n: usize) -> Vec<u8> {
    let b = i.to_le_bytes();
    (0..n).map(|j| b[j % 8] ^ (j / 8) as u8).collect()
}

fn contents(m: &FixedMap) -> HashMap<Vec<u8>, Vec<u8>> {
    let mut out = HashMap::new();
    for r in m.iter() {
        let (k, v) = r.unwrap();
        assert!(out.insert(k, v).is_none(), "iteration returned a key twice");
    }
    out
}

#[test]
fn basic_operations() {
    let d = tmp();
    let s = store(&d);
    let m = s.fixed_map("counters", 8, 8).unwrap();
    assert_eq!((m.key_size(), m.value_size()), (8, 8));
    let k = 1u64.to_le_bytes();
    assert_eq!(m.get(&k).unwrap(), None);
    assert!(!m.contains(&k).unwrap());
    assert_eq!(
        m.put(&k, &5u64.to_le_bytes()).unwrap(),
        PutOutcome::Inserted
    );
    assert_eq!(
        m.put(&k, &6u64.to_le_bytes()).unwrap(),
        PutOutcome::Replaced
    );
    assert_eq!(m.get(&k).unwrap(), Some(6u64.to_le_bytes().to_vec()));
    let mut buf = [0u8; 8];
    assert!(m.get_into(&k, &mut buf).unwrap());
    assert_eq!(u64::from_le_bytes(buf), 6);
    assert!(!m.put_if_absent(&k, &[0; 8]).unwrap());
    assert!(m.put_if_present(&k, &7u64.to_le_bytes()).unwrap());
    assert!(!m.put_if_present(&2u64.to_le_bytes(), &[0; 8]).unwrap());
    assert_eq!(m.add(&k, 3).unwrap(), 10);
    assert_eq!(m.add(&2u64.to_le_bytes(), -4).unwrap(), -4);
    assert_eq!(m.len().unwrap(), 2);
    assert!(m
        .compare_and_swap(&k, Some(&10u64.to_le_bytes()), Some(&11u64.to_le_bytes()))
        .unwrap());
    assert!(!m
        .compare_and_swap(&k, Some(&10u64.to_le_bytes()), None)
        .unwrap());
    assert!(m
        .compare_and_swap(&k, Some(&11u64.to_le_bytes()), None)
        .unwrap());
    assert!(!m.contains(&k).unwrap());
    assert!(m
        .compare_and_swap(&k, None, Some(&1u64.to_le_bytes()))
        .unwrap());
    let v = m
        .update(&k, |cur| {
            let c = u64::from_le_bytes(cur.unwrap().try_into().unwrap());
            Some((c * 100).to_le_bytes().to_vec())
        })
        .unwrap();
    assert_eq!(v, Some(100u64.to_le_bytes().to_vec()));
    assert_eq!(m.update(&k, |_| None).unwrap(), None);
    assert!(!m.contains(&k).unwrap());
    let keys: Vec<[u8; 8]> = (0..100u64).map(|i| i.to_le_bytes()).collect();
    for (i, k) in keys.iter().enumerate() {
        m.put(k, &(i as u64 * 3).to_le_bytes()).unwrap();
    }
    let refs: Vec<&[u8]> = keys.iter().map(|k| &k[..]).collect();
    let got = m.get_many(&refs).unwrap();
    for (i, g) in got.iter().enumerate() {
        assert_eq!(g.as_deref(), Some(&(i as u64 * 3).to_le_bytes()[..]));
    }
    // The same through the callback form, with absent keys among them (past one batch).
    let mut mixed: Vec<[u8; 8]> = keys.clone();
    mixed.extend((1000..1040u64).map(|i| i.to_le_bytes()));
    let refs: Vec<&[u8]> = mixed.iter().rev().map(|k| &k[..]).collect();
    let mut seen = Vec::new();
    m.get_many_with(&refs, |i, v| seen.push((i, v.map(<[u8]>::to_vec))))
        .unwrap();
    assert_eq!(seen.len(), refs.len());
    for (j, (i, v)) in seen.iter().enumerate() {
        assert_eq!(*i, j, "in order");
        let k = u64::from_le_bytes(refs[j].try_into().unwrap());
        let want = (k < 100).then(|| (k * 3).to_le_bytes().to_vec());
        assert_eq!(*v, want, "key {k}");
    }
    assert_eq!(contents(&m).len(), 100);
    let st = m.stats().unwrap();
    assert_eq!(st.entries, 100);
    assert!(st.capacity >= 100);
    assert!(m.remove(&keys[0]).unwrap());
    assert!(!m.remove(&keys[0]).unwrap());
    assert_eq!(m.len().unwrap(), 99);
    m.clear().unwrap();
    assert_eq!(m.len().unwrap(), 0);
    assert!(m.iter().next().is_none());
    let r = s.check().unwrap();
    assert!(r.is_ok(), "{r}");
    // Zero-size values: a set.
    let set = s.fixed_map("set", 5, 0).unwrap();
    assert_eq!(set.put(b"abcde", b"").unwrap(), PutOutcome::Inserted);
    assert_eq!(set.put(b"abcde", b"").unwrap(), PutOutcome::Replaced);
    assert_eq!(set.get(b"abcde").unwrap(), Some(vec![]));
    assert!(s.drop_map("set").unwrap());
    assert!(s.drop_map("counters").unwrap());
    assert!(matches!(m.get(&keys[1]), Err(Error::NotFound(_))));
    let r = s.check().unwrap();
    assert!(r.is_ok(), "{r}");
}

#[test]
fn wrong_sizes_and_kinds_are_rejected() {
    let d = tmp();
    let s = store(&d);
    let m = s.fixed_map("f", 4, 6).unwrap();
    let inv =
        |r: shoal::Result<bool>| assert!(matches!(r, Err(Error::InvalidArgument(_))), "{r:?}");
    inv(m.put(b"abc", b"123456").map(|_| true));
    inv(m.put(b"abcd", b"12345").map(|_| true));
    inv(m.put(b"abcd", b"1234567").map(|_| true));
    inv(m.get(b"abcde").map(|_| true));
    inv(m.contains(b""));
    inv(m.put_if_absent(b"abcd", b""));
    inv(m.put_if_present(b"abcd", b"1"));
    inv(m.remove(b"ab"));
    inv(m.get_into(b"abcd", &mut [0u8; 5]));
    inv(m.add(b"abcd", 1).map(|_| true));
    inv(m.compare_and_swap(b"abcd", Some(b"1"), None));
    inv(m.update(b"abcd", |_| Some(vec![1])).map(|_| true));
    inv(m.get_many(&[b"abcd", b"abc"]).map(|_| true));
    assert_eq!(m.len().unwrap(), 0);
    // Sizes out of range.
    assert!(matches!(
        s.fixed_map("z", 0, 8),
        Err(Error::InvalidArgument(_))
    ));
    assert!(matches!(
        s.fixed_map("z", 8, 129),
        Err(Error::InvalidArgument(_))
    ));
    assert!(matches!(
        s.fixed_map("z", 513, 8),
        Err(Error::InvalidArgument(_))
    ));
    // Other sizes, other kind.
    assert!(matches!(
        s.fixed_map("f", 4, 8),
        Err(Error::InvalidArgument(_))
    ));
    // The other kind is its own error, whose fields let each binding word its message.
    let fixed_4_6 = MapKind::Fixed {
        key_size: 4,
        value_size: 6,
    };
    for r in [s.map("f"), s.open_map("f")] {
        match r {
            Err(e @ Error::WrongMapKind { .. }) => {
                let msg = e.to_string();
                let Error::WrongMapKind {
                    name,
                    found,
                    wanted,
                } = e
                else {
                    unreachable!()
                };
                assert_eq!(name, "f");
                assert_eq!(found, fixed_4_6);
                assert_eq!(wanted, MapKind::Variable { uids: false });
                assert!(msg.contains("Store::fixed_map"), "{msg}");
                assert!(msg.contains("4-byte keys and 6-byte values"), "{msg}");
            }
            r => panic!("a fixed map opened as variable: {:?}", r.map(|_| ())),
        }
    }
    let uids = MapOptions {
        uids: true,
        ..Default::default()
    };
    assert!(matches!(
        s.map_with("f", &uids, true),
        Err(Error::WrongMapKind {
            wanted: MapKind::Variable { uids: true },
            ..
        })
    ));
    s.map("v").unwrap().put(b"k", b"v").unwrap();
    match s.fixed_map("v", 1, 1) {
        Err(e @ Error::WrongMapKind { .. }) => {
            assert!(e.to_string().contains("Store::map"), "{e}");
            let Error::WrongMapKind { found, wanted, .. } = e else {
                unreachable!()
            };
            assert_eq!(found, MapKind::Variable { uids: false });
            assert_eq!(
                wanted,
                MapKind::Fixed {
                    key_size: 1,
                    value_size: 1
                }
            );
        }
        r => panic!("a variable map opened as fixed: {:?}", r.map(|_| ())),
    }
    assert!(matches!(
        s.fixed_map_with("nope", 4, 4, &FixedOptions::default(), false),
        Err(Error::NotFound(_))
    ));
    // The same sizes open the same map.
    m.put(b"abcd", b"123456").unwrap();
    let m2 = s.fixed_map("f", 4, 6).unwrap();
    assert_eq!(m2.get(b"abcd").unwrap().as_deref(), Some(&b"123456"[..]));
    let r = s.check().unwrap();
    assert!(r.is_ok(), "{r}");
}

#[test]
fn reopen_sees_the_same_data() {
    let d = tmp();
    let n = 5000u64;
    {
        let s = store(&d);
        let m = s.fixed_map_with("m", 12, 20, &small(), true).unwrap();
        for i in 0..n {
            m.put(&key(i, 12), &key(i * 7, 20)).unwrap();
        }
        for i in (0..n).step_by(3) {
            assert!(m.remove(&key(i, 12)).unwrap());
        }
        assert!(m.stats().unwrap().splits > 10);
    }
    // Every handle dropped: a new mapping of the file.
    let s = store(&d);
    let m = s.fixed_map("m", 12, 20).unwrap();
    let want: u64 = (0..n).filter(|i| i % 3 != 0).count() as u64;
    assert_eq!(m.len().unwrap(), want);
    for i in 0..n {
        let got = m.get(&key(i, 12)).unwrap();
        if i % 3 == 0 {
            assert_eq!(got, None);
        } else {
            assert_eq!(got, Some(key(i * 7, 20)));
        }
    }
    assert_eq!(contents(&m).len() as u64, want);
    let r = s.check().unwrap();
    assert!(r.is_ok(), "{r}");
    // Compaction has nothing to do with cells; it must leave them alone.
    s.compact().unwrap();
    assert_eq!(m.len().unwrap(), want);
    let st = s.stats().unwrap();
    assert_eq!(st.maps, 1);
}

#[derive(Clone, Debug)]
enum Op {
    Put(u64, u64),
    Insert(u64, u64),
    Replace(u64, u64),
    Remove(u64),
    Add(u64, i64),
    Cas(u64, Option<u64>, Option<u64>),
    Get(u64),
    Swap(u64, u64),
    Take(u64),
    GetOrInsert(u64, u64),
    PutMany(Vec<(u64, u64)>),
    RemoveMany(Vec<u64>),
    Clear,
}

fn op() -> impl Strategy<Value = Op> {
    let k = 0u64..300;
    prop_oneof![
        8 => (k.clone(), any::<u64>()).prop_map(|(k, v)| Op::Put(k, v % 4)),
        2 => (k.clone(), any::<u64>()).prop_map(|(k, v)| Op::Insert(k, v % 4)),
        2 => (k.clone(), any::<u64>()).prop_map(|(k, v)| Op::Replace(k, v % 4)),
        4 => k.clone().prop_map(Op::Remove),
        4 => (k.clone(), -3i64..4).prop_map(|(k, d)| Op::Add(k, d)),
        2 => (k.clone(), proptest::option::of(0u64..4), proptest::option::of(0u64..4))
            .prop_map(|(k, e, n)| Op::Cas(k, e, n)),
        3 => k.clone().prop_map(Op::Get),
        2 => (k.clone(), any::<u64>()).prop_map(|(k, v)| Op::Swap(k, v % 4)),
        2 => k.clone().prop_map(Op::Take),
        2 => (k.clone(), any::<u64>()).prop_map(|(k, v)| Op::GetOrInsert(k, v % 4)),
        1 => proptest::collection::vec((k.clone(), 0u64..4), 0..8).prop_map(Op::PutMany),
        1 => proptest::collection::vec(k, 0..8).prop_map(Op::RemoveMany),
        1 => Just(Op::Clear),
    ]
}

/// A value of `vs` bytes encoding `v` (8-byte maps hold it as a u64, for `add`).
fn val(v: u64, vs: usize) -> Vec<u8> {
    let b = v.to_le_bytes();
    (0..vs)
        .map(|j| if j < 8 { b[j] } else { j as u8 })
        .collect()
}

fn run_model(ks: usize, vs: usize, ops: &[Op]) {
    let d = tmp();
    let s = store(&d);
    let m = s.fixed_map_with("m", ks, vs, &small(), true).unwrap();
    let mut model: HashMap<Vec<u8>, Vec<u8>> = HashMap::new();
    for op in ops {
        match *op {
            Op::Put(k, v) => {
                let (k, v) = (key(k, ks), val(v, vs));
                let want = if model.insert(k.clone(), v.clone()).is_some() {
                    PutOutcome::Replaced
                } else {
                    PutOutcome::Inserted
                };
                assert_eq!(m.put(&k, &v).unwrap(), want);
            }
            Op::Insert(k, v) => {
                let (k, v) = (key(k, ks), val(v, vs));
                let want = !model.contains_key(&k);
                if want {
                    model.insert(k.clone(), v.clone());
                }
                assert_eq!(m.put_if_absent(&k, &v).unwrap(), want);
            }
            Op::Replace(k, v) => {
                let (k, v) = (key(k, ks), val(v, vs));
                let want = model.contains_key(&k);
                if want {
                    model.insert(k.clone(), v.clone());
                }
                assert_eq!(m.put_if_present(&k, &v).unwrap(), want);
            }
            Op::Remove(k) => {
                let k = key(k, ks);
                assert_eq!(m.remove(&k).unwrap(), model.remove(&k).is_some());
            }
            Op::Add(k, dlt) => {
                let k = key(k, ks);
                if vs == 8 {
                    let cur = model
                        .get(&k)
                        .map(|v| i64::from_le_bytes(v[..8].try_into().unwrap()))
                        .unwrap_or(0);
                    let new = cur.wrapping_add(dlt);
                    model.insert(k.clone(), new.to_le_bytes().to_vec());
                    assert_eq!(m.add(&k, dlt).unwrap(), new);
                } else {
                    assert!(matches!(m.add(&k, dlt), Err(Error::InvalidArgument(_))));
                }
            }
            Op::Cas(k, e, n) => {
                let k = key(k, ks);
                let (e, n) = (e.map(|v| val(v, vs)), n.map(|v| val(v, vs)));
                let ok = model.get(&k) == e.as_ref();
                if ok {
                    match &n {
                        Some(v) => {
                            model.insert(k.clone(), v.clone());
                        }
                        None => {
                            model.remove(&k);
                        }
                    }
                }
                assert_eq!(
                    m.compare_and_swap(&k, e.as_deref(), n.as_deref()).unwrap(),
                    ok
                );
            }
            Op::Get(k) => {
                let k = key(k, ks);
                assert_eq!(m.get(&k).unwrap().as_ref(), model.get(&k));
                assert_eq!(m.contains(&k).unwrap(), model.contains_key(&k));
            }
            Op::Swap(k, v) => {
                let (k, v) = (key(k, ks), val(v, vs));
                assert_eq!(m.swap(&k, &v).unwrap(), model.insert(k.clone(), v));
            }
            Op::Take(k) => {
                let k = key(k, ks);
                assert_eq!(m.take(&k).unwrap(), model.remove(&k));
            }
            Op::GetOrInsert(k, v) => {
                let (k, v) = (key(k, ks), val(v, vs));
                let want = model.entry(k.clone()).or_insert(v.clone()).clone();
                assert_eq!(m.get_or_insert(&k, &v).unwrap(), want);
            }
            Op::PutMany(ref items) => {
                let items: Vec<(Vec<u8>, Vec<u8>)> = items
                    .iter()
                    .map(|&(k, v)| (key(k, ks), val(v, vs)))
                    .collect();
                let refs: Vec<(&[u8], &[u8])> =
                    items.iter().map(|(k, v)| (&k[..], &v[..])).collect();
                m.put_many(&refs).unwrap();
                model.extend(items);
            }
            Op::RemoveMany(ref keys) => {
                let keys: Vec<Vec<u8>> = keys.iter().map(|&k| key(k, ks)).collect();
                let refs: Vec<&[u8]> = keys.iter().map(|k| &k[..]).collect();
                let want = keys.iter().filter(|k| model.remove(*k).is_some()).count();
                assert_eq!(m.remove_many(&refs).unwrap(), want as u64);
            }
            Op::Clear => {
                m.clear().unwrap();
                model.clear();
            }
        }
    }
    assert_eq!(m.len().unwrap(), model.len() as u64);
    assert_eq!(contents(&m), model);
    let r = s.check().unwrap();
    assert!(r.is_ok(), "{r}");
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 24, ..ProptestConfig::default() })]

    /// Every operation against a HashMap model, across many splits (2+1-bucket segments),
    /// for inline (4+4, 8+8), unaligned (3+5, 5+11), large (16+16, 40+24) and set (7+0)
    /// geometries.
    #[test]
    fn model(ops in proptest::collection::vec(op(), 1..600), geo in 0usize..7) {
        let (ks, vs) = [(4, 4), (8, 8), (3, 5), (5, 11), (16, 16), (40, 24), (7, 0)][geo];
        run_model(ks, vs, &ops);
    }
}

/// Threads adding to shared counters (lock-free in place) while others insert and remove
/// keys in the same segments (splits, cell reuse): every add counts, exactly.
#[test]
fn concurrent_adds_are_exact() {
    let d = tmp();
    let s = store(&d);
    let m = s.fixed_map_with("c", 8, 8, &small(), true).unwrap();
    let counters = 64u64;
    let threads = 4u64;
    let per = 20_000u64;
    std::thread::scope(|sc| {
        for t in 0..threads {
            let m = m.clone();
            sc.spawn(move || {
                for i in 0..per {
                    let c = (i * 7 + t) % counters;
                    m.add(&c.to_le_bytes(), (t + 1) as i64).unwrap();
                }
            });
        }
        let m = m.clone();
        sc.spawn(move || {
            for i in 0..per / 2 {
                let k = (1000 + i % 3000).to_le_bytes();
                if i % 3 == 2 {
                    m.remove(&k).unwrap();
                } else {
                    m.put(&k, &[1; 8]).unwrap();
                }
            }
        });
    });
    let mut total = 0i64;
    for c in 0..counters {
        total += i64::from_le_bytes(
            m.get(&c.to_le_bytes())
                .unwrap()
                .unwrap()
                .try_into()
                .unwrap(),
        );
    }
    let want: i64 = (0..threads).map(|t| (t + 1) as i64 * per as i64).sum();
    assert_eq!(total, want);
    let r = s.check().unwrap();
    assert!(r.is_ok(), "{r}");
}

// ---- Several processes, SIGKILLed at random ----

/// Child role: adds 1 to counter `i % C` and then records the acknowledgement (one add to
/// its own ack counter), forever, while also inserting and removing churn keys.
#[test]
#[ignore = "run as a child process by killed_adders_lose_nothing"]
fn adder_child() {
    let Ok(path) = std::env::var("SHOAL_FIXED_PATH") else {
        return;
    };
    let me: u64 = std::env::var("SHOAL_FIXED_CHILD").unwrap().parse().unwrap();
    let s = Store::open_existing(&path).unwrap();
    let m = s.fixed_map("c", 8, 8).unwrap();
    let acks = s.fixed_map("acks", 8, 8).unwrap();
    let mut i = me * 7919;
    loop {
        let c = i % 16;
        m.add(&c.to_le_bytes(), 1).unwrap();
        acks.add(&me.to_le_bytes(), 1).unwrap();
        let k = (100 + (i * 31 + me) % 2000).to_le_bytes();
        if i % 2 == 0 {
            m.put(&k, &[0; 8]).unwrap();
        } else {
            m.remove(&k).unwrap();
        }
        i += 1;
    }
}

#[test]
fn killed_adders_lose_nothing() {
    let d = tmp();
    let s = store(&d);
    let m = s.fixed_map_with("c", 8, 8, &small(), true).unwrap();
    let acks = s.fixed_map("acks", 8, 8).unwrap();
    let path = s.path().to_owned();
    let mut rng = 0x9e37_79b9_7f4a_7c15u64;
    let mut next = || {
        rng ^= rng << 13;
        rng ^= rng >> 7;
        rng ^= rng << 17;
        rng
    };
    let mut id = 0u64;
    let mut killed = 0u64;
    for _round in 0..6 {
        let children: Vec<_> = (0..3)
            .map(|_| {
                id += 1;
                std::process::Command::new(std::env::current_exe().unwrap())
                    .args(["--exact", "adder_child", "--ignored", "--test-threads=1"])
                    .env("SHOAL_FIXED_PATH", &path)
                    .env("SHOAL_FIXED_CHILD", id.to_string())
                    .stdout(std::process::Stdio::null())
                    .stderr(std::process::Stdio::null())
                    .spawn()
                    .unwrap()
            })
            .collect();
        // Meanwhile the parent works on the same map.
        let until = std::time::Instant::now() + Duration::from_millis(100 + next() % 300);
        let mut j = 0u64;
        while std::time::Instant::now() < until {
            m.get(&(j % 16).to_le_bytes()).unwrap();
            j += 1;
        }
        for mut c in children {
            // SAFETY: signalling our own child.
            unsafe { libc::kill(c.id() as i32, libc::SIGKILL) };
            let st = c.wait().unwrap();
            assert!(st.code().is_none(), "a child exited by itself: {st:?}");
            killed += 1;
        }
    }
    let r = s.check().unwrap();
    assert!(r.is_ok(), "{r}");
    let mut sum = 0u64;
    for c in 0..16u64 {
        sum += m
            .get(&c.to_le_bytes())
            .unwrap()
            .map(|v| u64::from_le_bytes(v.try_into().unwrap()))
            .unwrap_or(0);
    }
    let mut acked = 0u64;
    for c in 1..=id {
        acked += acks
            .get(&c.to_le_bytes())
            .unwrap()
            .map(|v| u64::from_le_bytes(v.try_into().unwrap()))
            .unwrap_or(0);
    }
    assert!(acked > 0, "the children did nothing");
    // Each killed child may have added once without acknowledging it.
    assert!(
        sum >= acked && sum <= acked + killed,
        "counters sum to {sum}, {acked} adds acknowledged, {killed} children killed"
    );
    // Everything still works on the recovered map.
    for c in 0..16u64 {
        m.add(&c.to_le_bytes(), 1).unwrap();
        m.put(&(5000 + c).to_le_bytes(), &[2; 8]).unwrap();
    }
    let r = s.check().unwrap();
    assert!(r.is_ok(), "{r}");
}

// ---- A crash at every fail point ----

/// The scripted workload of the fail-point test: deterministic, long enough to split
/// (2+1-bucket segments) and to reach every fixed-map fail point.
#[cfg(feature = "failpoints")]
fn script() -> Vec<Op> {
    let mut ops = Vec::new();
    for i in 0..120u64 {
        ops.push(Op::Put(i, i));
        if i % 4 == 0 {
            ops.push(Op::Add(i / 2, 5));
        }
        if i % 5 == 0 {
            ops.push(Op::Remove(i / 3));
        }
        if i % 7 == 0 {
            ops.push(Op::Replace(i / 2, 1000 + i));
        }
        if i == 60 {
            ops.push(Op::Clear);
        }
    }
    ops
}

#[cfg(feature = "failpoints")]
fn apply(m: &FixedMap, model: &mut HashMap<Vec<u8>, Vec<u8>>, op: &Op, live: bool) {
    match *op {
        Op::Put(k, v) => {
            let (k, v) = (key(k, 8), v.to_le_bytes().to_vec());
            if live {
                m.put(&k, &v).unwrap();
            }
            model.insert(k, v);
        }
        Op::Replace(k, v) => {
            let (k, v) = (key(k, 8), v.to_le_bytes().to_vec());
            if live {
                m.put_if_present(&k, &v).unwrap();
            }
            if model.contains_key(&k) {
                model.insert(k, v);
            }
        }
        Op::Remove(k) => {
            let k = key(k, 8);
            if live {
                m.remove(&k).unwrap();
            }
            model.remove(&k);
        }
        Op::Add(k, d) => {
            let k = key(k, 8);
            if live {
                m.add(&k, d).unwrap();
            }
            let cur = model
                .get(&k)
                .map(|v| i64::from_le_bytes(v[..].try_into().unwrap()))
                .unwrap_or(0);
            model.insert(k, cur.wrapping_add(d).to_le_bytes().to_vec());
        }
        Op::Clear => {
            if live {
                m.clear().unwrap();
            }
            model.clear();
        }
        _ => unreachable!(),
    }
}

/// Child role: runs the script with `SHOAL_FP` = "name:hit" armed, printing the index of
/// each completed op.
#[cfg(feature = "failpoints")]
#[test]
#[ignore = "run as a child process by crash_at_every_fail_point"]
fn failpoint_child() {
    use std::io::Write;
    let Ok(path) = std::env::var("SHOAL_FIXED_PATH") else {
        return;
    };
    let fp = std::env::var("SHOAL_FP").unwrap();
    let (name, hit) = fp.split_once(':').unwrap();
    shoal::failpoints::setup();
    shoal::failpoints::kill_at(name, hit.parse().unwrap()).unwrap();
    let s = Store::open_existing(&path).unwrap();
    let m = s.fixed_map("m", 8, 8).unwrap();
    let mut model = HashMap::new();
    let mut out = std::io::stdout().lock();
    for (i, op) in script().iter().enumerate() {
        apply(&m, &mut model, op, true);
        writeln!(out, "done {i}").unwrap();
        out.flush().unwrap();
    }
}

#[cfg(feature = "failpoints")]
#[test]
fn crash_at_every_fail_point() {
    let ops = script();
    let mut crashed = 0;
    for name in shoal::failpoints::NAMES
        .iter()
        .filter(|n| n.starts_with("fixed."))
    {
        for hit in [1u64, 3, 17] {
            let d = tmp();
            // Splits happen in version-6 stores only.
            let s = if name.starts_with("fixed.split.") {
                store_v6(&d)
            } else {
                store(&d)
            };
            let m = s.fixed_map_with("m", 8, 8, &small(), true).unwrap();
            let out = std::process::Command::new(std::env::current_exe().unwrap())
                .args([
                    "--exact",
                    "failpoint_child",
                    "--ignored",
                    "--nocapture",
                    "--test-threads=1",
                ])
                .env("SHOAL_FIXED_PATH", s.path())
                .env("SHOAL_FP", format!("{name}:{hit}"))
                .output()
                .unwrap();
            let text = String::from_utf8_lossy(&out.stdout);
            let done = text
                .lines()
                .filter_map(|l| l.split("done ").nth(1))
                .filter_map(|n| n.trim().parse::<usize>().ok())
                .max()
                .map(|n| n + 1)
                .unwrap_or(0);
            let aborted = !out.status.success();
            if aborted {
                crashed += 1;
            } else {
                assert!(hit > 1, "fail point {name} never reached");
            }
            // Recovery happens as the next user needs the locks; check recovers first.
            let r = s.check().unwrap();
            assert!(r.is_ok(), "{name}:{hit}: {r}");
            let mut before = HashMap::new();
            for op in &ops[..done] {
                apply(&m, &mut before, op, false);
            }
            let got = contents(&m);
            if aborted && done < ops.len() {
                let mut after = before.clone();
                apply(&m, &mut after, &ops[done], false);
                assert!(
                    got == before || got == after,
                    "{name}:{hit}: after op {done} ({:?}) the map is neither before nor after it\n\
                     child stdout: {text}\nchild stderr: {}",
                    ops[done],
                    String::from_utf8_lossy(&out.stderr)
                );
            } else {
                assert_eq!(got, before, "{name}:{hit}");
            }
            assert_eq!(m.len().unwrap(), got.len() as u64);
            // And the map keeps working.
            for i in 0..50u64 {
                m.put(&key(10_000 + i, 8), &[1; 8]).unwrap();
                m.add(&key(i, 8), 1).unwrap();
            }
            let r = s.check().unwrap();
            assert!(r.is_ok(), "{name}:{hit} after more writes: {r}");
        }
    }
    assert!(
        crashed >= 10,
        "only {crashed} runs crashed: fail points not reached"
    );
}

/// Keys of whole words are matched on their last word first: keys that share it (and
/// keys that share everything else) must still find only themselves, in gets, batched
/// gets and writes.
#[test]
fn keys_that_share_a_word_find_only_themselves() {
    let d = tmp();
    let s = store(&d);
    for ks in [16usize, 24] {
        let m = s.fixed_map(&format!("m{ks}"), ks, 8).unwrap();
        // Key i: word 0 (the head) holds i / 8, the last word i % 8, so every key shares
        // its last word with 1/8 of the others and its head with 7 others.
        let key = |i: u64| {
            let mut k = vec![0u8; ks];
            k[..8].copy_from_slice(&(i / 8).to_le_bytes());
            k[ks - 8..].copy_from_slice(&(i % 8).to_le_bytes());
            k
        };
        for i in (0..400).step_by(2) {
            m.put(&key(i), &i.to_le_bytes()).unwrap();
        }
        let keys: Vec<Vec<u8>> = (0..400).map(key).collect();
        let refs: Vec<&[u8]> = keys.iter().map(|k| &k[..]).collect();
        let many = m.get_many(&refs).unwrap();
        for i in 0..400u64 {
            let want = (i % 2 == 0).then(|| i.to_le_bytes().to_vec());
            assert_eq!(m.get(&key(i)).unwrap(), want, "key {i}, {ks} bytes");
            assert_eq!(many[i as usize], want, "get_many, key {i}, {ks} bytes");
        }
        for i in (1..400).step_by(2) {
            assert!(
                !m.put_if_present(&key(i), &[0; 8]).unwrap(),
                "key {i}, {ks} bytes"
            );
            assert!(!m.remove(&key(i)).unwrap(), "key {i}, {ks} bytes");
        }
        assert_eq!(m.len().unwrap(), 200);
    }
    let r = s.check().unwrap();
    assert!(r.is_ok(), "{r}");
}

/// Tags (format version 8): a lookup compares the key only of cells whose tag matches,
/// so a wrong tag hides its key. `check` recomputes every occupied cell's tag from its
/// key and reports one that differs. A 16+16 bucket is 512 bytes: the header word, the
/// tags from byte 8, and cell `i` at byte 32 + 32 i; the bucket of the map's only key is
/// the one whose bitmap (the header's high half) names that key's cell alone.
#[test]
fn a_wrong_tag_hides_its_key_and_check_reports_it() {
    let d = tmp();
    let path = d.path().join("f.shoal");
    let k = b"tagged-key:00042";
    {
        let s = store(&d);
        let m = s.fixed_map("m", 16, 16).unwrap();
        m.put(k, b"tagged-value:042").unwrap();
        assert!(s.check().unwrap().is_ok());
    }
    let mut b = std::fs::read(&path).unwrap();
    let at = b
        .windows(k.len())
        .position(|w| w == k)
        .expect("the key's cell");
    let word = |b: &[u8], o: usize| u64::from_le_bytes(b[o..o + 8].try_into().unwrap());
    let (bo, i) = (0..15usize)
        .filter(|i| at >= 32 * (i + 1))
        .map(|i| (at - 32 * (i + 1), i))
        .find(|&(bo, i)| bo % 64 == 0 && word(&b, bo) >> 32 == 1 << i)
        .expect("the key's bucket: a header naming its cell alone");
    b[bo + 8 + i] ^= 0x5a;
    std::fs::write(&path, &b).unwrap();
    let s = store(&d);
    let m = s.fixed_map("m", 16, 16).unwrap();
    assert_eq!(
        m.get(k).unwrap(),
        None,
        "a lookup trusted the tag: the key is hidden"
    );
    let r = s.check().unwrap();
    assert!(
        r.problems.iter().any(|p| p.contains("tag")),
        "check did not report the wrong tag: {r}"
    );
}

/// A tagged 16+16 map (format version 8) growing through thousands of group moves into
/// open and new segments, with removes that free cells for reuse: every key is found
/// with its value, absent keys are not, and the store checks clean (which recomputes
/// every tag). Regression guard for a move that copies a cell without its tag.
#[test]
fn tagged_cells_keep_their_tags_through_moves_and_reuse() {
    let d = tmp();
    let s = store(&d);
    let m = s.fixed_map_with("m", 16, 16, &small(), true).unwrap();
    let k = |i: u64| format!("key:{i:012}").into_bytes();
    let v = |i: u64| format!("val:{i:012}").into_bytes();
    for i in 0..3000 {
        assert_eq!(m.put(&k(i), &v(i)).unwrap(), PutOutcome::Inserted);
    }
    for i in (0..3000).step_by(3) {
        assert!(m.remove(&k(i)).unwrap());
    }
    for i in 3000..4000 {
        m.put(&k(i), &v(i)).unwrap();
    }
    for i in 0..4000 {
        let want = (i >= 3000 || i % 3 != 0).then(|| v(i));
        assert_eq!(m.get(&k(i)).unwrap(), want, "key {i}");
    }
    assert_eq!(m.get(b"key:999999999999").unwrap(), None);
    let r = s.check().unwrap();
    assert!(r.is_ok(), "{r}");
}
