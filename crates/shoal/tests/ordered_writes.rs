//! Ordered maps' compare-and-swap, range removal, sequences and markers: against models,
//! through commits, aborts and reopens, and from several threads.

use shoal::{Error, OrderedOptions, Store};
use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;

fn shm_dir() -> tempfile::TempDir {
    tempfile::tempdir_in("/dev/shm").unwrap()
}

fn rng(seed: &mut u64) -> u64 {
    *seed ^= *seed << 13;
    *seed ^= *seed >> 7;
    *seed ^= *seed << 17;
    *seed
}

fn key(n: u64) -> Vec<u8> {
    format!("k{n:04}").into_bytes()
}

#[test]
fn compare_and_swap_and_remove_range_follow_a_model() {
    let d = shm_dir();
    let s = Store::open(d.path().join("o.shoal")).unwrap();
    let m = s.ordered_map("m").unwrap();
    let mut model: BTreeMap<Vec<u8>, Vec<u8>> = BTreeMap::new();
    let mut seed = 0xabc_u64;
    for step in 0..4000 {
        let r = rng(&mut seed);
        let k = key(r % 500);
        match (r >> 40) % 8 {
            0..=3 => {
                let v = (r >> 8).to_le_bytes().to_vec();
                m.put(&k, &v).unwrap();
                model.insert(k, v);
            }
            4 | 5 => {
                // Expect the right value half of the time.
                let cur = model.get(&k).cloned();
                let expected = if r & 1 == 0 {
                    cur.clone()
                } else {
                    Some(b"nope".to_vec())
                };
                let new = (r & 2 == 0).then(|| r.to_le_bytes().to_vec());
                let swapped = m
                    .compare_and_swap(&k, expected.as_deref(), new.as_deref())
                    .unwrap();
                assert_eq!(swapped, expected == cur, "step {step}");
                if swapped {
                    match new {
                        Some(v) => model.insert(k, v),
                        None => model.remove(&k),
                    };
                }
            }
            6 => {
                let (a, b) = (key(r % 500), key((r >> 20) % 500));
                let lo = (r & 4 == 0).then_some(a);
                let hi = (r & 8 == 0).then_some(b);
                let doomed: Vec<Vec<u8>> = model
                    .keys()
                    .filter(|k| lo.as_ref().is_none_or(|l| *k >= l))
                    .filter(|k| hi.as_ref().is_none_or(|h| *k < h))
                    .cloned()
                    .collect();
                // In a transaction that aborts half of the time: then nothing goes.
                let mut w = m.write().unwrap();
                assert_eq!(
                    w.remove_range(lo.as_deref(), hi.as_deref()).unwrap(),
                    doomed.len() as u64,
                    "step {step}"
                );
                if r & 16 == 0 {
                    w.commit().unwrap();
                    for k in doomed {
                        model.remove(&k);
                    }
                }
            }
            _ => {
                let got: Vec<(Vec<u8>, Vec<u8>)> = m.range(None, None).unwrap();
                assert!(got.iter().cloned().eq(model.clone()), "step {step}");
            }
        }
    }
    assert_eq!(m.len().unwrap(), model.len() as u64);
    assert!(s.check().unwrap().is_ok());
}

#[test]
fn remove_range_takes_a_multimap_s_keys_whole_and_integer_keys_by_number() {
    let d = shm_dir();
    let s = Store::open(d.path().join("o.shoal")).unwrap();
    let dups = OrderedOptions {
        duplicates: true,
        ..Default::default()
    };
    let m = s.ordered_map_with("multi", &dups).unwrap();
    let mut model = BTreeSet::new();
    for k in [&b"a"[..], b"a\0", b"b", b"c"] {
        for v in [&b"1"[..], b"2", b""] {
            m.put(k, v).unwrap();
            model.insert((k.to_vec(), v.to_vec()));
        }
    }
    assert_eq!(m.remove_range(Some(b"a\0"), Some(b"c")).unwrap(), 6);
    model.retain(|(k, _)| !(k.as_slice() >= &b"a\0"[..] && k.as_slice() < &b"c"[..]));
    let got: BTreeSet<(Vec<u8>, Vec<u8>)> = m.range(None, None).unwrap().into_iter().collect();
    assert_eq!(got, model);
    assert!(matches!(
        m.compare_and_swap(b"a", Some(b"1"), None),
        Err(Error::InvalidArgument(_))
    ));

    let ints = OrderedOptions {
        u64_keys: true,
        ..Default::default()
    };
    let n = s.ordered_map_with("ints", &ints).unwrap();
    for i in [1u64, 255, 256, 65_536, 1 << 33] {
        n.put(&i.to_le_bytes(), b"").unwrap();
    }
    assert_eq!(
        n.remove_range(Some(&200u64.to_le_bytes()), Some(&70_000u64.to_le_bytes()))
            .unwrap(),
        3
    );
    let left: Vec<u64> = n
        .range(None, None)
        .unwrap()
        .into_iter()
        .map(|(k, _)| u64::from_le_bytes(k.try_into().unwrap()))
        .collect();
    assert_eq!(left, [1, 1 << 33]);
    assert!(n
        .compare_and_swap(&1u64.to_le_bytes(), Some(b""), Some(b"x"))
        .unwrap());
    assert_eq!(n.get(&1u64.to_le_bytes()).unwrap(), Some(b"x".to_vec()));
    assert!(s.check().unwrap().is_ok());
}

#[test]
fn sequences_hand_out_distinct_numbers_and_commit_with_their_transaction() {
    let d = shm_dir();
    let path = d.path().join("o.shoal");
    {
        let s = Arc::new(Store::open(&path).unwrap());
        let m = s.ordered_map("ids").unwrap();
        let other = s.ordered_map("other").unwrap();
        assert_eq!(m.map_sequence().unwrap(), 0);
        // An aborted transaction's increment is dropped.
        let mut w = m.write().unwrap();
        assert_eq!(w.next_sequence(10).unwrap(), 0);
        assert_eq!(w.next_sequence(1).unwrap(), 10);
        w.abort();
        assert_eq!(m.map_sequence().unwrap(), 0);
        // Threads take ranges of numbers: no number twice.
        let taken: Vec<Vec<u64>> = std::thread::scope(|sc| {
            let hs: Vec<_> = (0..4)
                .map(|_| {
                    let m = m.clone();
                    sc.spawn(move || {
                        (0..200)
                            .map(|_| m.next_sequence(3).unwrap())
                            .collect::<Vec<u64>>()
                    })
                })
                .collect();
            hs.into_iter().map(|h| h.join().unwrap()).collect()
        });
        let all: BTreeSet<u64> = taken.iter().flatten().copied().collect();
        assert_eq!(all.len(), 800);
        assert!(all.iter().all(|v| v % 3 == 0));
        assert_eq!(m.map_sequence().unwrap(), 2400);
        // In a transaction over two maps, each map has its own.
        let mut t = m.write_with(&[&other]).unwrap();
        assert_eq!(t.next_sequence(&other, 5).unwrap(), 0);
        assert_eq!(t.next_sequence(&m, 1).unwrap(), 2400);
        t.commit().unwrap();
        assert_eq!(other.map_sequence().unwrap(), 5);
        let snap = m.snapshot().unwrap();
        m.next_sequence(1).unwrap();
        assert_eq!(snap.map_sequence(), 2401, "a snapshot keeps its sequence");
        assert!(matches!(
            m.next_sequence(u64::MAX),
            Err(Error::InvalidArgument(_))
        ));
    }
    let s = Store::open(&path).unwrap();
    assert_eq!(s.ordered_map("ids").unwrap().map_sequence().unwrap(), 2402);
    assert!(s.check().unwrap().is_ok());
}

#[test]
fn markers_are_set_by_commits_and_kept_across_reopens() {
    let d = shm_dir();
    let path = d.path().join("o.shoal");
    {
        let s = Store::open(&path).unwrap();
        assert_eq!(s.ordered_marker(0).unwrap(), 0, "no ordered map yet");
        let a = s.ordered_map("a").unwrap();
        let b = s.ordered_map("b").unwrap();
        let mut w = a.write().unwrap();
        w.put(b"k", b"v").unwrap();
        w.set_marker(3, 42).unwrap();
        w.set_marker(3, 43).unwrap();
        w.set_marker(13, u64::MAX).unwrap();
        assert!(matches!(
            w.set_marker(14, 1),
            Err(Error::InvalidArgument(_))
        ));
        assert_eq!(s.ordered_marker(3).unwrap(), 0, "not before the commit");
        w.commit().unwrap();
        assert_eq!(s.ordered_marker(3).unwrap(), 43);
        assert_eq!(s.ordered_marker(13).unwrap(), u64::MAX);
        // An abort sets nothing; a commit of another map keeps the markers it did not set.
        let mut w = b.write().unwrap();
        w.set_marker(3, 7).unwrap();
        w.abort();
        let mut t = b.write_with(&[&a]).unwrap();
        t.put(&b, b"x", b"y").unwrap();
        t.set_marker(0, 9).unwrap();
        t.commit().unwrap();
        assert_eq!(s.ordered_marker(3).unwrap(), 43);
        assert_eq!(s.ordered_marker(0).unwrap(), 9);
        assert!(matches!(
            s.ordered_marker(14),
            Err(Error::InvalidArgument(_))
        ));
    }
    let s = Store::open(&path).unwrap();
    assert_eq!(s.ordered_marker(3).unwrap(), 43);
    assert_eq!(s.ordered_marker(0).unwrap(), 9);
    assert_eq!(s.ordered_marker(13).unwrap(), u64::MAX);
    assert!(s.check().unwrap().is_ok());
}

#[test]
fn nested_transactions_keep_or_undo_their_writes() {
    let d = shm_dir();
    let s = Store::open(d.path().join("o.shoal")).unwrap();
    let m = s.ordered_map("m").unwrap();
    let other = s.ordered_map("other").unwrap();
    let big = |b: u8| vec![b; 9000];
    m.put(b"a", &big(1)).unwrap();
    let mut w = m.write().unwrap();
    {
        let mut n = w.nested();
        n.put(b"b", b"2").unwrap();
        n.put(b"a", &big(2)).unwrap();
        n.next_sequence(5).unwrap();
        n.set_marker(1, 11).unwrap();
        assert_eq!(n.get(b"a").unwrap(), Some(big(2)));
        // dropped: aborted
    }
    assert_eq!(
        w.get(b"a").unwrap(),
        Some(big(1)),
        "the value kept out of line is back"
    );
    assert_eq!(w.get(b"b").unwrap(), None);
    assert_eq!(w.next_sequence(0).unwrap(), 0);
    {
        let mut outer = w.nested();
        outer.put(b"c", b"3").unwrap();
        {
            let mut inner = outer.nested();
            inner.put(b"d", b"4").unwrap();
            inner.remove(b"c").unwrap();
            inner.commit();
        }
        assert_eq!(
            outer.get(b"c").unwrap(),
            None,
            "the inner commit is the outer's"
        );
        outer.abort();
    }
    assert_eq!(
        w.get(b"d").unwrap(),
        None,
        "the outer abort undoes the inner commit"
    );
    {
        let mut n = w.nested();
        n.put(b"e", &big(5)).unwrap();
        n.set_marker(2, 22).unwrap();
        n.commit();
    }
    w.commit().unwrap();
    assert_eq!(m.get(b"e").unwrap(), Some(big(5)));
    assert_eq!(s.ordered_marker(1).unwrap(), 0);
    assert_eq!(s.ordered_marker(2).unwrap(), 22);
    assert_eq!(m.map_sequence().unwrap(), 0);
    // Over two maps at once.
    let mut t = m.write_with(&[&other]).unwrap();
    t.put(&other, b"x", b"1").unwrap();
    {
        let mut n = t.nested();
        n.put(&m, b"y", b"2").unwrap();
        n.put(&other, b"x", b"changed").unwrap();
    }
    t.commit().unwrap();
    assert_eq!(other.get(b"x").unwrap(), Some(b"1".to_vec()));
    assert_eq!(m.get(b"y").unwrap(), None);
    let r = s.check().unwrap();
    assert!(r.is_ok(), "{r}");
}

/// Random writes in random nests of nested transactions, against a stack of models; the
/// pages every rollback gives back are reused, and `check` accounts for every page.
#[test]
fn nests_of_nested_transactions_follow_a_stack_of_models() {
    let d = shm_dir();
    let path = d.path().join("o.shoal");
    let mut seed = 0xfeed_u64;
    let mut model: BTreeMap<Vec<u8>, Vec<u8>> = BTreeMap::new();
    for round in 0..40 {
        let s = Store::open(&path).unwrap();
        let m = s.ordered_map("m").unwrap();
        let mut w = m.write().unwrap();
        let mut now = model.clone();
        fn nest(
            w: &mut shoal::WriteTxn<'_>,
            now: &mut BTreeMap<Vec<u8>, Vec<u8>>,
            seed: &mut u64,
            depth: u32,
        ) {
            for _ in 0..40 {
                let r = rng(seed);
                match r % 12 {
                    0 if depth < 4 => {
                        let mut inner = w.nested();
                        let mut mine = now.clone();
                        nest(&mut inner, &mut mine, seed, depth + 1);
                        if rng(seed) % 2 == 0 {
                            inner.commit();
                            *now = mine;
                        }
                    }
                    1 | 2 => {
                        let k = key(r % 300);
                        assert_eq!(w.remove(&k).unwrap(), now.remove(&k).is_some());
                    }
                    _ => {
                        let k = key(r % 300);
                        let len = if r % 7 == 0 {
                            2000 + (r >> 30) as usize % 8000
                        } else {
                            16
                        };
                        let v = vec![(r >> 20) as u8; len];
                        w.put(&k, &v).unwrap();
                        now.insert(k, v);
                    }
                }
            }
        }
        nest(&mut w, &mut now, &mut seed, 0);
        if round % 5 == 4 {
            w.abort();
        } else {
            w.commit().unwrap();
            model = now;
        }
        let got: Vec<(Vec<u8>, Vec<u8>)> = m.range(None, None).unwrap();
        assert!(got.into_iter().eq(model.clone()), "round {round}");
        let r = s.check().unwrap();
        assert!(r.is_ok(), "round {round}: {r}");
    }
}

#[test]
fn append_loads_sorted_keys_into_full_pages_and_refuses_keys_out_of_order() {
    let d = shm_dir();
    let s = Store::open(d.path().join("o.shoal")).unwrap();
    let loaded = s.ordered_map("appended").unwrap();
    let put = s.ordered_map("put").unwrap();
    let n = 60_000u64;
    let k = |i: u64| format!("key{i:08}").into_bytes();
    let v = |i: u64| vec![i as u8; if i % 1000 == 0 { 5000 } else { 20 }];
    let mut w = loaded.write().unwrap();
    for i in 0..n {
        w.append(&k(i), &v(i)).unwrap();
    }
    // Out of order, and equal to the last: refused, and the transaction goes on.
    assert!(matches!(
        w.append(&k(5), b"x"),
        Err(Error::InvalidArgument(_))
    ));
    assert!(matches!(
        w.append(&k(n - 1), b"x"),
        Err(Error::InvalidArgument(_))
    ));
    w.append(&k(n), &v(n)).unwrap();
    w.commit().unwrap();
    let mut w = put.write().unwrap();
    for i in 0..=n {
        w.put(&k(i), &v(i)).unwrap();
    }
    w.commit().unwrap();
    let a: Vec<(Vec<u8>, Vec<u8>)> = loaded.range(None, None).unwrap();
    assert_eq!(a.len() as u64, n + 1);
    assert!(
        a == put.range(None, None).unwrap(),
        "the same entries either way"
    );
    // Full pages, where puts in key order leave every split page half empty.
    let bytes = |m: &str| s.object_stats(m).unwrap().unwrap().index_bytes;
    let (appended, sorted_puts) = (bytes("appended"), bytes("put"));
    eprintln!("pages: {appended} bytes appended, {sorted_puts} put in key order");
    assert!(
        appended * 4 < sorted_puts * 3,
        "appended {appended} bytes against {sorted_puts}"
    );
    // Appends after other writes, and into a multimap by pairs.
    loaded.put(b"a-first", b"1").unwrap();
    let mut w = loaded.write().unwrap();
    w.append(b"zzz", b"last").unwrap();
    w.commit().unwrap();
    assert_eq!(
        loaded.last().unwrap(),
        Some((b"zzz".to_vec(), b"last".to_vec()))
    );
    let dups = OrderedOptions {
        duplicates: true,
        ..Default::default()
    };
    let mm = s.ordered_map_with("multi", &dups).unwrap();
    let mut w = mm.write().unwrap();
    w.append(b"a", b"1").unwrap();
    w.append(b"a", b"2").unwrap();
    w.append(b"b", b"0").unwrap();
    assert!(matches!(
        w.append(b"a", b"3"),
        Err(Error::InvalidArgument(_))
    ));
    w.commit().unwrap();
    assert_eq!(mm.get_all(b"a").unwrap(), [b"1".to_vec(), b"2".to_vec()]);
    let r = s.check().unwrap();
    assert!(r.is_ok(), "{r}");
}

/// A writer's thread remembers the oldest snapshot read between its transactions, to scan
/// the pins less: a snapshot that thread takes afterwards must still keep every page it
/// reads while the thread's next one-put commits free and reuse pages.
#[test]
fn a_snapshot_between_one_put_commits_of_its_thread_keeps_its_pages() {
    let d = shm_dir();
    let s = Store::open(d.path().join("o.shoal")).unwrap();
    let m = s.ordered_map("m").unwrap();
    let val = |k: u64, round: u64| format!("v{k:04}-{round:06}-{}", "x".repeat(40)).into_bytes();
    let n = 3000u64;
    let mut w = m.write().unwrap();
    for k in 0..n {
        w.put(&key(k), &val(k, 0)).unwrap();
    }
    w.commit().unwrap();
    // One-put commits: the free-page queue fills and the thread's oldest read moves up.
    let mut seed = 0x5eed_u64;
    let mut round = 1;
    for _ in 0..600 {
        let k = rng(&mut seed) % n;
        m.put(&key(k), &val(k, round)).unwrap();
        round += 1;
    }
    let mut model: BTreeMap<Vec<u8>, Vec<u8>> = BTreeMap::new();
    m.snapshot()
        .unwrap()
        .for_each(None, None, false, |k, v| {
            model.insert(k.to_vec(), v.to_vec());
            true
        })
        .unwrap();
    let snap = m.snapshot().unwrap();
    for _ in 0..3000 {
        let k = rng(&mut seed) % n;
        m.put(&key(k), &val(k, round)).unwrap();
        round += 1;
    }
    let mut seen = 0;
    snap.for_each(None, None, false, |k, v| {
        assert_eq!(model.get(k).map(Vec::as_slice), Some(v), "key {k:?}");
        seen += 1;
        true
    })
    .unwrap();
    assert_eq!(seen, n);
    for k in 0..n {
        assert_eq!(snap.get(&key(k)).unwrap().as_ref(), model.get(&key(k)));
    }
}
