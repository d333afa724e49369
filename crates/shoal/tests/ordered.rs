//! Ordered maps: a model, snapshots that stay whole while writers run, transactions,
//! space that is reused, and the checker.

use shoal::{Error, MapKind, Store};
use std::collections::BTreeMap;
use std::sync::atomic::{AtomicBool, Ordering};
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

type Model = BTreeMap<Vec<u8>, Vec<u8>>;

fn all(m: &shoal::OrderedMap) -> Vec<(Vec<u8>, Vec<u8>)> {
    m.range(None, None).unwrap()
}

#[test]
fn an_ordered_map_follows_a_btreemap_through_every_operation_and_a_reopen() {
    let d = shm_dir();
    let path = d.path().join("o.shoal");
    for seed0 in [1u64, 7, 99] {
        let name = format!("m{seed0}");
        let mut seed = seed0.wrapping_mul(0x9e37_79b9_7f4a_7c15);
        let mut model = Model::new();
        {
            let s = Store::open(&path).unwrap();
            let m = s.ordered_map(&name).unwrap();
            for i in 0..4000 {
                let r = rng(&mut seed);
                let key = format!("k{:05}", r % 3000).repeat(1 + (r >> 20) as usize % 4);
                let key = key.into_bytes();
                let val = vec![(r >> 30) as u8; ((r >> 40) % 120) as usize];
                match (r >> 60) % 8 {
                    0..=2 => {
                        m.put(&key, &val).unwrap();
                        model.insert(key, val);
                    }
                    3 => {
                        let had = model.contains_key(&key);
                        assert_eq!(m.put_if_absent(&key, &val).unwrap(), !had);
                        model.entry(key).or_insert(val);
                    }
                    4 => {
                        let had = model.contains_key(&key);
                        assert_eq!(m.put_if_present(&key, &val).unwrap(), had);
                        if had {
                            model.insert(key, val);
                        }
                    }
                    5 | 6 => assert_eq!(m.remove(&key).unwrap(), model.remove(&key).is_some()),
                    _ => {
                        // A transaction of several writes, committed or aborted.
                        let mut w = m.write().unwrap();
                        let mut next = model.clone();
                        for j in 0..(r % 20) {
                            let k = format!("t{:04}", (r >> 8) % 500 + j).into_bytes();
                            if j % 3 == 2 {
                                w.remove(&k).unwrap();
                                next.remove(&k);
                            } else {
                                w.put(&k, &val).unwrap();
                                next.insert(k, val.clone());
                            }
                        }
                        if (r >> 50) % 3 == 0 {
                            w.abort();
                        } else {
                            w.commit().unwrap();
                            model = next;
                        }
                    }
                }
                if i % 500 == 0 {
                    assert_eq!(
                        all(&m),
                        model.clone().into_iter().collect::<Vec<_>>(),
                        "seed {seed0}"
                    );
                }
                assert_eq!(
                    m.get(b"k00001").unwrap(),
                    model.get(b"k00001".as_slice()).cloned()
                );
            }
            assert_eq!(m.len().unwrap(), model.len() as u64);
            // Ranges and counts at random bounds, both directions.
            let snap = m.snapshot().unwrap();
            for _ in 0..200 {
                let r = rng(&mut seed);
                let lo = format!("k{:05}", r % 3100).into_bytes();
                let hi = format!("k{:05}", (r >> 20) % 3100).into_bytes();
                let want: Vec<_> = if lo < hi {
                    model
                        .range(lo.clone()..hi.clone())
                        .map(|(k, v)| (k.clone(), v.clone()))
                        .collect()
                } else {
                    Vec::new()
                };
                assert_eq!(snap.range(Some(&lo), Some(&hi)).unwrap(), want);
                let mut rev = snap.range_rev(Some(&lo), Some(&hi)).unwrap();
                rev.reverse();
                assert_eq!(rev, want);
                assert_eq!(
                    snap.count_range(Some(&lo), Some(&hi)).unwrap(),
                    want.len() as u64
                );
            }
            assert_eq!(
                snap.first().unwrap(),
                model.first_key_value().map(|(k, v)| (k.clone(), v.clone()))
            );
            assert_eq!(
                snap.last().unwrap(),
                model.last_key_value().map(|(k, v)| (k.clone(), v.clone()))
            );
            drop(snap);
            let report = s.check().unwrap();
            assert!(report.is_ok(), "seed {seed0}: {report:?}");
        }
        let s = Store::open(&path).unwrap();
        let m = s.ordered_map(&name).unwrap();
        assert_eq!(
            all(&m),
            model.into_iter().collect::<Vec<_>>(),
            "seed {seed0}: after reopen"
        );
    }
    let s = Store::open(&path).unwrap();
    let mut names = s.ordered_maps().unwrap();
    names.sort();
    assert_eq!(names, ["m1", "m7", "m99"]);
}

#[test]
fn a_snapshot_keeps_its_view_while_writers_commit() {
    let d = shm_dir();
    let s = Store::open(d.path().join("o.shoal")).unwrap();
    let m = s.ordered_map("snap").unwrap();
    for i in 0..2000u32 {
        m.put(&i.to_be_bytes(), b"old").unwrap();
    }
    let snap = m.snapshot().unwrap();
    for i in 0..2000u32 {
        if i % 2 == 0 {
            m.remove(&i.to_be_bytes()).unwrap();
        } else {
            m.put(&i.to_be_bytes(), b"new").unwrap();
        }
    }
    for i in 3000..4000u32 {
        m.put(&i.to_be_bytes(), b"new").unwrap();
    }
    let seen = snap.range(None, None).unwrap();
    assert_eq!(seen.len(), 2000);
    assert!(seen.iter().all(|(_, v)| v == b"old"));
    assert_eq!(snap.len(), 2000);
    drop(snap);
    let now = m.snapshot().unwrap();
    assert_eq!(now.len(), 2000);
    assert_eq!(
        now.count_range(None, Some(&3000u32.to_be_bytes())).unwrap(),
        1000
    );
    assert!(s.check().unwrap().is_ok());
}

#[test]
fn readers_on_other_threads_always_see_whole_transactions() {
    // Every transaction moves one unit between two of 50 accounts: any snapshot sums to
    // the same total, whatever the writers are doing.
    let d = shm_dir();
    let s = Store::open(d.path().join("o.shoal")).unwrap();
    let m = s.ordered_map("bank").unwrap();
    let n = 50u64;
    {
        let mut w = m.write().unwrap();
        for a in 0..n {
            w.put(&a.to_be_bytes(), &100u64.to_le_bytes()).unwrap();
        }
        w.commit().unwrap();
    }
    let stop = Arc::new(AtomicBool::new(false));
    let readers: Vec<_> = (0..2)
        .map(|_| {
            let (m, stop) = (m.clone(), stop.clone());
            std::thread::spawn(move || {
                let mut checks = 0u64;
                while !stop.load(Ordering::Relaxed) || checks < 10 {
                    let snap = m.snapshot().unwrap();
                    let mut sum = 0u64;
                    snap.for_each(None, None, false, |_, v| {
                        sum += u64::from_le_bytes(v.try_into().unwrap());
                        true
                    })
                    .unwrap();
                    assert_eq!(sum, 100 * n, "a snapshot saw half a transfer");
                    checks += 1;
                }
                checks
            })
        })
        .collect();
    let writers: Vec<_> = (0..2u64)
        .map(|wi| {
            let m = m.clone();
            std::thread::spawn(move || {
                let mut seed = 0x1234_5678 + wi;
                for _ in 0..1500 {
                    let r = rng(&mut seed);
                    let (a, b) = (r % n, (r >> 20) % n);
                    if a == b {
                        continue;
                    }
                    let mut w = m.write().unwrap();
                    let va = u64::from_le_bytes(
                        w.get(&a.to_be_bytes())
                            .unwrap()
                            .unwrap()
                            .try_into()
                            .unwrap(),
                    );
                    let vb = u64::from_le_bytes(
                        w.get(&b.to_be_bytes())
                            .unwrap()
                            .unwrap()
                            .try_into()
                            .unwrap(),
                    );
                    if va == 0 {
                        continue;
                    }
                    w.put(&a.to_be_bytes(), &(va - 1).to_le_bytes()).unwrap();
                    w.put(&b.to_be_bytes(), &(vb + 1).to_le_bytes()).unwrap();
                    w.commit().unwrap();
                }
            })
        })
        .collect();
    for w in writers {
        w.join().unwrap();
    }
    stop.store(true, Ordering::Relaxed);
    for r in readers {
        assert!(r.join().unwrap() >= 10);
    }
    assert!(s.check().unwrap().is_ok());
}

#[test]
fn overwrites_reuse_the_pages_they_free() {
    let d = shm_dir();
    let s = Store::open(d.path().join("o.shoal")).unwrap();
    let m = s.ordered_map("reuse").unwrap();
    for i in 0..5000u32 {
        m.put(&i.to_be_bytes(), &[1; 50]).unwrap();
    }
    let pages_after_fill = s.object_stats("reuse").unwrap().unwrap().index_bytes;
    for round in 0..20u8 {
        for i in (0..5000u32).step_by(7) {
            m.put(&i.to_be_bytes(), &[round; 50]).unwrap();
        }
    }
    let pages_after = s.object_stats("reuse").unwrap().unwrap().index_bytes;
    eprintln!("pages: {pages_after_fill} after the fill, {pages_after} after the overwrites");
    // 20 rounds of ~700 single-key commits each copy a path of pages: without reuse that
    // is tens of thousands of pages.
    assert!(
        pages_after <= pages_after_fill * 5 / 4,
        "pages grew from {pages_after_fill} to {pages_after} bytes"
    );
    assert!(s.check().unwrap().is_ok());
}

#[test]
fn bad_input_and_other_kinds_get_clear_errors() {
    let d = shm_dir();
    let s = Store::open(d.path().join("o.shoal")).unwrap();
    s.map("plain").unwrap();
    match s.ordered_map("plain") {
        Err(Error::WrongMapKind { found, .. }) => {
            assert!(matches!(found, MapKind::Variable { .. }))
        }
        other => panic!("expected WrongMapKind, got {other:?}"),
    }
    let m = s.ordered_map("o").unwrap();
    assert!(matches!(
        m.put(&[0; shoal::MAX_ORDERED_KEY + 1], b"v"),
        Err(Error::InvalidArgument(_))
    ));
    assert!(matches!(s.map("o"), Err(Error::WrongMapKind { .. })));
    m.put(b"", b"").unwrap();
    assert_eq!(m.get(b"").unwrap(), Some(Vec::new()));
    assert!(s.drop_map("o").unwrap());
    assert!(s.ordered_maps().unwrap().is_empty());
    let m2 = s.ordered_map("o").unwrap();
    assert_eq!(m2.len().unwrap(), 0);
    assert!(s.check().unwrap().is_ok());
}

#[test]
fn a_snapshot_leaked_by_a_finished_thread_does_not_pin_pages_for_the_next() {
    let d = shm_dir();
    let s = Store::open(d.path().join("o.shoal")).unwrap();
    let m = s.ordered_map("leak").unwrap();
    for i in 0..3000u32 {
        m.put(&i.to_be_bytes(), &[1; 50]).unwrap();
    }
    // A thread leaks its snapshot and ends: its txn slot is free again, pin and all.
    let m2 = m.clone();
    std::thread::spawn(move || std::mem::forget(m2.snapshot().unwrap()))
        .join()
        .unwrap();
    let filled = s.object_stats("leak").unwrap().unwrap().index_bytes;
    // The next thread takes the same slot and overwrites: pages freed by its commits must
    // be reused, which the leaked pin would prevent.
    let m3 = m.clone();
    std::thread::spawn(move || {
        for round in 0..10u8 {
            for i in (0..3000u32).step_by(5) {
                m3.put(&i.to_be_bytes(), &[round; 50]).unwrap();
            }
        }
    })
    .join()
    .unwrap();
    let after = s.object_stats("leak").unwrap().unwrap().index_bytes;
    assert!(
        after <= filled * 5 / 4,
        "pages grew from {filled} to {after} bytes"
    );
}

#[test]
fn transactions_over_two_maps_are_seen_whole_by_snapshots_of_both() {
    let d = shm_dir();
    let s = Store::open(d.path().join("o.shoal")).unwrap();
    let (a, b) = (s.ordered_map("a").unwrap(), s.ordered_map("b").unwrap());
    let n = 20u64;
    {
        let mut t = a.write_with(&[&b]).unwrap();
        for i in 0..n {
            t.put(&a, &i.to_be_bytes(), &100u64.to_le_bytes()).unwrap();
            t.put(&b, &i.to_be_bytes(), &100u64.to_le_bytes()).unwrap();
        }
        // Nothing is seen before the commit.
        assert_eq!(a.len().unwrap(), 0);
        t.commit().unwrap();
    }
    let sum = |snap: &shoal::Snapshot| {
        let mut sum = 0u64;
        snap.for_each(None, None, false, |_, v| {
            sum += u64::from_le_bytes(v.try_into().unwrap());
            true
        })
        .unwrap();
        sum
    };
    let stop = Arc::new(AtomicBool::new(false));
    let reader = {
        let (a, b, stop) = (a.clone(), b.clone(), stop.clone());
        std::thread::spawn(move || {
            let mut checks = 0;
            while !stop.load(Ordering::Relaxed) || checks < 10 {
                let snaps = a.snapshot_with(&[&b]).unwrap();
                assert_eq!(snaps[0].sequence(), snaps[1].sequence());
                assert_eq!(
                    sum(&snaps[0]) + sum(&snaps[1]),
                    200 * n,
                    "half a transfer seen"
                );
                checks += 1;
            }
            checks
        })
    };
    let writers: Vec<_> = (0..2u64)
        .map(|wi| {
            let (a, b) = (a.clone(), b.clone());
            std::thread::spawn(move || {
                let mut seed = 77 + wi;
                for _ in 0..800 {
                    let r = rng(&mut seed);
                    let (i, j) = ((r % n).to_be_bytes(), ((r >> 20) % n).to_be_bytes());
                    // Alternate which map is named first: the lock order must not depend
                    // on it (else these two writers deadlock).
                    let mut t = if r >> 63 == 0 {
                        a.write_with(&[&b]).unwrap()
                    } else {
                        b.write_with(&[&a]).unwrap()
                    };
                    let va =
                        u64::from_le_bytes(t.get(&a, &i).unwrap().unwrap().try_into().unwrap());
                    let vb =
                        u64::from_le_bytes(t.get(&b, &j).unwrap().unwrap().try_into().unwrap());
                    if va == 0 || (r >> 40) % 5 == 0 {
                        t.abort();
                        continue;
                    }
                    t.put(&a, &i, &(va - 1).to_le_bytes()).unwrap();
                    t.put(&b, &j, &(vb + 1).to_le_bytes()).unwrap();
                    t.commit().unwrap();
                }
            })
        })
        .collect();
    for w in writers {
        w.join().unwrap();
    }
    stop.store(true, Ordering::Relaxed);
    assert!(reader.join().unwrap() >= 10);
    let snaps = a.snapshot_with(&[&b]).unwrap();
    assert_eq!(sum(&snaps[0]) + sum(&snaps[1]), 200 * n);
    drop(snaps);
    let c = s.ordered_map("c").unwrap();
    let mut t = a.write_with(&[]).unwrap();
    assert!(matches!(
        t.put(&c, b"k", b"v"),
        Err(Error::InvalidArgument(_))
    ));
    t.abort();
    assert!(s.check().unwrap().is_ok());
}

#[test]
fn emptied_pages_are_free_again_and_check_accounts_for_every_page() {
    let d = shm_dir();
    let s = Store::open(d.path().join("o.shoal")).unwrap();
    let m = s.ordered_map("empty").unwrap();
    let mut one_fill = 0;
    for round in 0..3u8 {
        let mut w = m.write().unwrap();
        for i in 0..4000u32 {
            w.put(&i.to_be_bytes(), &[round; 40]).unwrap();
        }
        w.commit().unwrap();
        let report = s.check().unwrap();
        assert!(report.is_ok(), "round {round} filled: {report}");
        if round == 0 {
            one_fill = s.object_stats("empty").unwrap().unwrap().index_bytes / 4096;
        }
        // Removed in one transaction: the pages it emptied are dropped within it.
        let mut w = m.write().unwrap();
        for i in 0..4000u32 {
            assert!(w.remove(&i.to_be_bytes()).unwrap());
        }
        w.commit().unwrap();
        assert!(m.is_empty().unwrap());
        let report = s.check().unwrap();
        assert!(report.is_ok(), "round {round} emptied: {report}");
    }
    // Three fills took hardly more pages than one (the freed ones came back).
    let pages = s.object_stats("empty").unwrap().unwrap().index_bytes / 4096;
    assert!(
        pages <= one_fill * 5 / 4,
        "{pages} pages for fills of {one_fill}"
    );
}

/// A tree's depth comes from the file: one deeper than any tree can be is `Corrupt` at
/// once (walking it could take forever), for readers, writers and `check` alike. (A
/// fuzzed file with such a depth made a scan run past the fuzzer's time limit.)
#[test]
fn a_tree_deeper_than_possible_is_corrupt_not_a_long_walk() {
    use std::os::unix::fs::FileExt;
    let d = shm_dir();
    let path = d.path().join("o.shoal");
    {
        let s = Store::open(&path).unwrap();
        let m = s.ordered_map("deep").unwrap();
        for i in 0..500u32 {
            m.put(&i.to_be_bytes(), &[0; 40]).unwrap();
        }
    }
    let f = std::fs::OpenOptions::new()
        .read(true)
        .write(true)
        .open(&path)
        .unwrap();
    let word = |off: u64| {
        let mut b = [0u8; 8];
        f.read_exact_at(&mut b, off).unwrap();
        u64::from_le_bytes(b)
    };
    let n_txn = word(56) >> 32;
    let area = word(112);
    let seq = word(area + 64);
    let ring = (128 + 8 * n_txn).next_multiple_of(4096);
    let table = area + ring + (seq % 16) * 8192;
    // The only ordered map holds entry 1.
    assert_ne!(word(table + 128), 0, "the map's root");
    f.write_all_at(&u64::MAX.to_le_bytes(), table + 128 + 8)
        .unwrap();
    drop(f);
    let s = Store::open(&path).unwrap();
    let m = s.ordered_map("deep").unwrap();
    assert!(matches!(m.range(None, None), Err(Error::Corrupt { .. })));
    assert!(matches!(m.put(b"k", b"v"), Err(Error::Corrupt { .. })));
    let r = s.check().unwrap();
    assert!(r.problems.iter().any(|p| p.contains("levels")), "{r}");
}

/// Keys 0..50 as big-endian u32s.
fn u32_keys() -> Vec<Vec<u8>> {
    (0..50u32).map(|i| i.to_be_bytes().to_vec()).collect()
}

/// A store at `path` whose ordered map "heads" holds `keys` in one leaf, the file open
/// for writing, and that leaf's offset.
fn one_leaf_store(path: &std::path::Path, keys: &[Vec<u8>]) -> (std::fs::File, u64) {
    use std::os::unix::fs::FileExt;
    {
        let s = Store::open(path).unwrap();
        let m = s.ordered_map("heads").unwrap();
        let mut w = m.write().unwrap();
        for k in keys {
            w.put(k, &[0; 8]).unwrap();
        }
        w.commit().unwrap();
    }
    let f = std::fs::OpenOptions::new()
        .read(true)
        .write(true)
        .open(path)
        .unwrap();
    let word = |off: u64| {
        let mut b = [0u8; 8];
        f.read_exact_at(&mut b, off).unwrap();
        u64::from_le_bytes(b)
    };
    let n_txn = word(56) >> 32;
    let area = word(112);
    let seq = word(area + 64);
    let ring = (128 + 8 * n_txn).next_multiple_of(4096);
    let table = area + ring + (seq % 16) * 8192;
    let (root, depth) = (word(table + 128), word(table + 128 + 8));
    assert_eq!(depth, 0, "a few small entries fit in one leaf");
    (f, root)
}

/// A slot's key head (the four bytes past the page's prefix that searches compare) that
/// is not its key's is `Corrupt` for `check` and for a writer, which would otherwise
/// insert next to it in the wrong place and leave the page out of order. (A fuzzed file
/// with one head byte changed checked clean, then failed `check` after a put.)
#[test]
fn a_key_head_that_is_not_its_keys_is_corrupt_not_a_misplaced_insert() {
    use std::os::unix::fs::FileExt;
    let d = shm_dir();
    let path = d.path().join("o.shoal");
    let (f, root) = one_leaf_store(&path, &u32_keys());
    // The keys share their first three bytes (the page's prefix): a head is the key's
    // fourth byte and three zeros, big-endian, so it is that byte in the slot's last.
    let mut plen = [0u8; 2];
    f.read_exact_at(&mut plen, root + 8).unwrap();
    assert_eq!(u16::from_le_bytes(plen), 3, "the page's prefix");
    // Slot 16 (key 16): its head's key byte, 16, made 8, as the fuzzer did.
    let at = root + 32 + 8 * 16 + 4 + 3;
    let mut b = [0u8; 1];
    f.read_exact_at(&mut b, at).unwrap();
    assert_eq!(b[0], 16);
    f.write_all_at(&[8], at).unwrap();
    drop(f);
    let s = Store::open(&path).unwrap();
    let r = s.check().unwrap();
    assert!(r.problems.iter().any(|p| p.contains("head")), "{r}");
    let m = s.ordered_map("heads").unwrap();
    assert!(matches!(
        m.put(&17u32.to_be_bytes(), b"v"),
        Err(Error::Corrupt { .. })
    ));
    let r = s.check().unwrap();
    assert!(
        !r.problems.iter().any(|p| p.contains("out of order")),
        "a put went to the wrong place: {r}"
    );
}

/// A page prefix longer than its keys, or one its keys do not share, is reported by
/// `check` and refused by a writer, never a panic (`check` compares every key's first
/// `plen` bytes with the first key's, which may be shorter).
#[test]
fn a_page_prefix_its_keys_do_not_have_is_corrupt() {
    use std::os::unix::fs::FileExt;
    let d = shm_dir();
    let path = d.path().join("o.shoal");
    // The first key shorter than the prefix, the others longer.
    let ragged: Vec<Vec<u8>> = [&b"k"[..], b"k0123456789", b"k0123456789x"]
        .iter()
        .map(|k| k.to_vec())
        .collect();
    for (keys, plen) in [
        (u32_keys(), 4u16),
        (u32_keys(), 10),
        (u32_keys(), 60),
        (u32_keys(), 61),
        (u32_keys(), u16::MAX),
        (ragged.clone(), 5),
        (ragged, 2),
    ] {
        let _ = std::fs::remove_file(&path);
        let (f, root) = one_leaf_store(&path, &keys);
        f.write_all_at(&plen.to_le_bytes(), root + 8).unwrap();
        drop(f);
        let s = Store::open(&path).unwrap();
        let r = s.check().unwrap();
        assert!(
            r.problems.iter().any(|p| p.contains("prefix")),
            "plen {plen}: {r}"
        );
        let m = s.ordered_map("heads").unwrap();
        assert!(
            matches!(
                m.put(&17u32.to_be_bytes(), b"v"),
                Err(Error::Corrupt { .. })
            ),
            "plen {plen}"
        );
    }
}

/// Keys longer than a page keeps whole are kept out of line, their chains of overflow
/// pages named by a reference in the entry. A chain that is not one (a page of another
/// kind, a length past any key's) is reported by `check`, and a read that needs the key
/// gets `Corrupt`, never a panic or a long walk; every byte of the entries and chain
/// headers changed in turn gives a clear answer too.
#[test]
fn a_broken_chain_of_a_long_key_is_reported_not_followed() {
    use std::os::unix::fs::FileExt;
    let d = shm_dir();
    let path = d.path().join("o.shoal");
    let key = |i: u8| {
        let mut k = vec![b'p'; 1500];
        k.push(i);
        k
    };
    {
        let s = Store::open(&path).unwrap();
        let m = s.ordered_map("long").unwrap();
        for i in 0..3u8 {
            m.put(&key(i), &[i; 10]).unwrap();
        }
    }
    let pristine = std::fs::read(&path).unwrap();
    let word = |b: &[u8], off: u64| {
        u64::from_le_bytes(b[off as usize..off as usize + 8].try_into().unwrap())
    };
    let n_txn = word(&pristine, 56) >> 32;
    let area = word(&pristine, 112);
    let seq = word(&pristine, area + 64);
    let ring = (128 + 8 * n_txn).next_multiple_of(4096);
    let table = area + ring + (seq % 16) * 8192;
    let (root, depth) = (word(&pristine, table + 128), word(&pristine, table + 136));
    assert_eq!(depth, 0, "three entries fit in one leaf");
    let u16_at =
        |off: u64| u16::from_le_bytes([pristine[off as usize], pristine[off as usize + 1]]);
    // Slot 1: its key is out of line (bit 15 of klen); the entry is u32 vlen, 64 bytes of
    // prefix, u64 first page, u64 length.
    let entry = root + u16_at(root + 32 + 8) as u64;
    assert_eq!(
        u16_at(root + 32 + 8 + 2),
        0x8000 | 80,
        "key 1 kept out of line"
    );
    let first = word(&pristine, entry + 4 + 64);
    assert_eq!(word(&pristine, entry + 4 + 72), 1501);
    let write = |edits: &[(u64, &[u8])]| {
        std::fs::write(&path, &pristine).unwrap();
        let f = std::fs::OpenOptions::new().write(true).open(&path).unwrap();
        for (at, b) in edits {
            f.write_all_at(b, *at).unwrap();
        }
    };
    // The chain's first page made another kind, then the reference's length made huge.
    type Edits<'a> = &'a [(u64, &'a [u8])];
    let cases: [(Edits, &str); 2] = [
        (&[(first, &[9, 0])], "kind"),
        (
            &[(entry + 4 + 72, &(1u64 << 40).to_le_bytes())],
            "out of line",
        ),
    ];
    for (edits, what) in cases {
        write(edits);
        let s = Store::open(&path).unwrap();
        let r = s.check().unwrap();
        assert!(r.problems.iter().any(|p| p.contains(what)), "{what}: {r}");
        let m = s.ordered_map("long").unwrap();
        assert!(
            matches!(m.range(None, None), Err(Error::Corrupt { .. })),
            "{what}"
        );
        // Gets compare with the broken key: any answer but a panic.
        for i in 0..3u8 {
            let _ = m.get(&key(i));
        }
    }
    // Every byte of the leaf's header and slots, of each entry's value length and key
    // reference, and of the chain's header, changed.
    let n = u16_at(root + 2) as u64;
    let mut spots: Vec<u64> = (root..root + 32 + 8 * n).chain(first..first + 16).collect();
    for i in 0..n {
        let e = root + u16_at(root + 32 + 8 * i) as u64;
        spots.extend((e..e + 4).chain(e + 4 + 64..e + 4 + 80));
    }
    for at in spots {
        let b = pristine[at as usize];
        write(&[(at, &[b ^ 0x5a])]);
        let Ok(s) = Store::open(&path) else { continue };
        let _ = s.check();
        if let Ok(m) = s.ordered_map("long") {
            let _ = m.range(None, None);
            let _ = m.get(&key(1));
            let _ = m.put(&key(7), b"v");
            let _ = m.remove(&key(2));
        }
    }
}
