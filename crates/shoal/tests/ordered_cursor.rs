//! Cursors and iterators of ordered maps against a model: seeks, steps, positions, ranges
//! from both ends, prefixes, and a multimap's moves among keys and values.

use shoal::{Error, OrderedOptions, Store};
use std::collections::{BTreeMap, BTreeSet};
use std::ops::Bound::{Excluded, Included, Unbounded};

fn shm_dir() -> tempfile::TempDir {
    tempfile::tempdir_in("/dev/shm").unwrap()
}

fn rng(seed: &mut u64) -> u64 {
    *seed ^= *seed << 13;
    *seed ^= *seed >> 7;
    *seed ^= *seed << 17;
    *seed
}

type Entries = Vec<(Vec<u8>, Vec<u8>)>;

/// Keys over a small alphabet, so prefixes and near misses are common.
fn key(r: u64) -> Vec<u8> {
    let len = (r % 5) as usize;
    (0..len)
        .map(|i| b"ab\0z"[((r >> (8 + 2 * i)) % 4) as usize])
        .collect()
}

#[test]
fn a_cursor_seeks_steps_and_counts_as_a_btreemap_does() {
    let d = shm_dir();
    let s = Store::open(d.path().join("o.shoal")).unwrap();
    let m = s.ordered_map("m").unwrap();
    let mut model = BTreeMap::new();
    let mut seed = 0xc0ffee_u64;
    let mut w = m.write().unwrap();
    for i in 0..3000u64 {
        let k = format!("k{:05}", rng(&mut seed) % 20_000).into_bytes();
        // A few values out of line, so the cursor reads those too.
        let v = vec![i as u8; if i % 50 == 0 { 3000 } else { 8 }];
        w.put(&k, &v).unwrap();
        model.insert(k, v);
    }
    w.commit().unwrap();
    let snap = m.snapshot().unwrap();
    let keys: Vec<&Vec<u8>> = model.keys().collect();
    let mut c = snap.cursor();
    assert_eq!(c.key(), None, "a new cursor stands on nothing");
    for _ in 0..400 {
        let probe = format!("k{:05}", rng(&mut seed) % 20_100).into_bytes();
        // seek_ge, then a few steps each way, with positions.
        let want = model.range(probe.clone()..).next();
        assert_eq!(c.seek_ge(&probe).unwrap(), want.is_some());
        assert_eq!(c.entry(), want.map(|(k, v)| (k.as_slice(), v.as_slice())));
        if let Some((k, _)) = want {
            let at = keys.binary_search(&k).unwrap();
            assert_eq!(c.position().unwrap(), Some(at as u64));
            for step in 1..4 {
                let on = c.move_next().unwrap();
                assert_eq!(on, at + step < keys.len());
                if !on {
                    break;
                }
                assert_eq!(c.key(), Some(keys[at + step].as_slice()));
            }
        }
        let want = model.range(..=probe.clone()).next_back();
        assert_eq!(c.seek_le(&probe).unwrap(), want.is_some());
        assert_eq!(c.key(), want.map(|(k, _)| k.as_slice()));
        if let Some((k, _)) = want {
            let at = keys.binary_search(&k).unwrap();
            for step in 1..4 {
                let on = c.move_prev().unwrap();
                assert_eq!(on, at >= step);
                if !on {
                    break;
                }
                assert_eq!(c.key(), Some(keys[at - step].as_slice()));
            }
        }
        assert_eq!(c.seek(&probe).unwrap(), model.contains_key(&probe));
    }
    assert!(c.first().unwrap());
    assert_eq!(c.key(), Some(keys[0].as_slice()));
    assert!(!c.move_prev().unwrap());
    assert!(c.last().unwrap());
    assert_eq!(c.key(), Some(keys[keys.len() - 1].as_slice()));
    assert!(!c.move_next().unwrap());
    assert_eq!(c.position().unwrap(), None);
    // Moves among values need a multimap.
    assert!(c.first().unwrap());
    assert!(matches!(c.next_value(), Err(Error::InvalidArgument(_))));
}

#[test]
fn ranges_and_prefixes_iterate_from_both_ends() {
    let d = shm_dir();
    let s = Store::open(d.path().join("o.shoal")).unwrap();
    let m = s.ordered_map("m").unwrap();
    let mut model = BTreeMap::new();
    let mut seed = 0x1234_u64;
    for _ in 0..1500 {
        let r = rng(&mut seed);
        let k = key(r);
        m.put(&k, &r.to_le_bytes()).unwrap();
        model.insert(k, r.to_le_bytes().to_vec());
    }
    let snap = m.snapshot().unwrap();
    for _ in 0..300 {
        let (a, b) = (key(rng(&mut seed)), key(rng(&mut seed)));
        let lo = (rng(&mut seed) % 4 != 0).then_some(a);
        let hi = (rng(&mut seed) % 4 != 0).then_some(b);
        let lo_b = lo.clone().map_or(Unbounded, Included);
        let hi_b = hi.clone().map_or(Unbounded, Excluded);
        if let (Some(l), Some(h)) = (&lo, &hi) {
            if l > h {
                continue; // BTreeMap::range panics; the snapshot returns nothing
            }
        }
        let want: Entries = model
            .range::<Vec<u8>, _>((lo_b, hi_b))
            .map(|(k, v)| (k.clone(), v.clone()))
            .collect();
        let it = || snap.iter(lo.as_deref(), hi.as_deref()).unwrap();
        let fwd: Entries = it().map(Result::unwrap).collect();
        assert_eq!(fwd, want);
        let back: Entries = it().rev().map(Result::unwrap).collect();
        assert!(back.iter().eq(want.iter().rev()));
        // Both ends at once meet in the middle, each entry once.
        let mut both = it();
        let (mut front, mut rear) = (Vec::new(), Vec::new());
        loop {
            let side = rng(&mut seed) & 1 == 0;
            let got = if side { both.next() } else { both.next_back() };
            match got {
                None => break,
                Some(e) => {
                    if side {
                        front.push(e.unwrap())
                    } else {
                        rear.push(e.unwrap())
                    }
                }
            }
        }
        front.extend(rear.into_iter().rev());
        assert_eq!(front, want);
    }
    for p in [&b""[..], b"a", b"ab", b"\0", b"z\0", b"zz", b"\xff"] {
        let want: Entries = model
            .iter()
            .filter(|(k, _)| k.starts_with(p))
            .map(|(k, v)| (k.clone(), v.clone()))
            .collect();
        let got: Entries = snap.prefix(p).unwrap().map(Result::unwrap).collect();
        assert_eq!(got, want, "prefix {p:?}");
        let got: Entries = snap.prefix(p).unwrap().rev().map(Result::unwrap).collect();
        assert!(got.iter().eq(want.iter().rev()), "prefix {p:?} reversed");
    }
}

#[test]
fn a_multimap_cursor_moves_among_keys_and_values() {
    let d = shm_dir();
    let s = Store::open(d.path().join("o.shoal")).unwrap();
    let opts = OrderedOptions {
        duplicates: true,
        ..Default::default()
    };
    let m = s.ordered_map_with("multi", &opts).unwrap();
    let mut model: BTreeSet<(Vec<u8>, Vec<u8>)> = BTreeSet::new();
    let mut seed = 0x77_u64;
    for _ in 0..1200 {
        let r = rng(&mut seed);
        let (k, v) = (key(r), key(r >> 20));
        m.put(&k, &v).unwrap();
        model.insert((k, v));
    }
    let pairs: Vec<(Vec<u8>, Vec<u8>)> = model.iter().cloned().collect();
    let distinct: Vec<Vec<u8>> = {
        let mut ks: Vec<Vec<u8>> = pairs.iter().map(|(k, _)| k.clone()).collect();
        ks.dedup();
        ks
    };
    let snap = m.snapshot().unwrap();
    let mut c = snap.cursor();
    // Forward over keys: each key's first value, then its values in order.
    assert!(c.first().unwrap());
    for (i, k) in distinct.iter().enumerate() {
        assert_eq!(c.key(), Some(k.as_slice()));
        let vals: Vec<&Vec<u8>> = pairs
            .iter()
            .filter(|(pk, _)| pk == k)
            .map(|(_, v)| v)
            .collect();
        assert_eq!(c.value(), Some(vals[0].as_slice()));
        assert_eq!(c.count_values().unwrap(), vals.len() as u64);
        for v in &vals[1..] {
            assert!(c.next_value().unwrap());
            assert_eq!(c.value(), Some(v.as_slice()));
        }
        assert!(!c.next_value().unwrap(), "past a key's last value");
        assert_eq!(
            c.value(),
            Some(vals[vals.len() - 1].as_slice()),
            "stays on it"
        );
        for v in vals[..vals.len() - 1].iter().rev() {
            assert!(c.prev_value().unwrap());
            assert_eq!(c.value(), Some(v.as_slice()));
        }
        assert!(!c.prev_value().unwrap());
        let on = c.next_key().unwrap();
        assert_eq!(on, i + 1 < distinct.len());
    }
    // Backward over keys: each lands on the previous key's last value.
    assert!(c.last().unwrap());
    for k in distinct.iter().rev().skip(1) {
        assert!(c.prev_key().unwrap());
        let last = pairs.iter().rfind(|(pk, _)| pk == k).unwrap();
        assert_eq!(c.entry(), Some((last.0.as_slice(), last.1.as_slice())));
    }
    assert!(!c.prev_key().unwrap());
    // Seeks of keys and of pairs.
    for _ in 0..300 {
        let r = rng(&mut seed);
        let (k, v) = (key(r), key(r >> 20));
        let first = pairs.iter().find(|(pk, _)| *pk >= k);
        assert_eq!(c.seek_ge(&k).unwrap(), first.is_some());
        assert_eq!(c.entry(), first.map(|(a, b)| (a.as_slice(), b.as_slice())));
        let last = pairs.iter().rfind(|(pk, _)| *pk <= k);
        assert_eq!(c.seek_le(&k).unwrap(), last.is_some());
        assert_eq!(c.entry(), last.map(|(a, b)| (a.as_slice(), b.as_slice())));
        assert_eq!(c.seek(&k).unwrap(), distinct.contains(&k));
        assert_eq!(
            c.seek_value(&k, &v).unwrap(),
            model.contains(&(k.clone(), v.clone()))
        );
        let ge = pairs.iter().find(|(pk, pv)| *pk == k && *pv >= v);
        assert_eq!(c.seek_value_ge(&k, &v).unwrap(), ge.is_some());
        assert_eq!(c.value(), ge.map(|(_, b)| b.as_slice()));
        if let Some(pos) = pairs.iter().position(|(pk, pv)| *pk == k && *pv >= v) {
            assert_eq!(c.position().unwrap(), Some(pos as u64));
        }
    }
    // A prefix of keys, with every value of each.
    let want: Vec<(Vec<u8>, Vec<u8>)> = pairs
        .iter()
        .filter(|(k, _)| k.starts_with(b"a\0"))
        .cloned()
        .collect();
    let got: Vec<(Vec<u8>, Vec<u8>)> = snap.prefix(b"a\0").unwrap().map(Result::unwrap).collect();
    assert_eq!(got, want);
}

#[test]
fn integer_keys_seek_by_number_and_have_no_prefixes() {
    let d = shm_dir();
    let s = Store::open(d.path().join("o.shoal")).unwrap();
    let opts = OrderedOptions {
        u64_keys: true,
        ..Default::default()
    };
    let m = s.ordered_map_with("ints", &opts).unwrap();
    for n in [5u64, 300, 70_000, 1 << 40] {
        m.put(&n.to_le_bytes(), b"").unwrap();
    }
    let snap = m.snapshot().unwrap();
    let mut c = snap.cursor();
    assert!(c.seek_ge(&301u64.to_le_bytes()).unwrap());
    assert_eq!(c.key(), Some(&70_000u64.to_le_bytes()[..]));
    assert!(c.seek_le(&(1u64 << 39).to_le_bytes()).unwrap());
    assert_eq!(c.key(), Some(&70_000u64.to_le_bytes()[..]));
    assert_eq!(c.position().unwrap(), Some(2));
    let all: Vec<u64> = snap
        .iter(None, None)
        .unwrap()
        .map(|e| u64::from_le_bytes(e.unwrap().0.try_into().unwrap()))
        .collect();
    assert_eq!(all, [5, 300, 70_000, 1 << 40]);
    assert!(matches!(
        snap.prefix(b"\x05"),
        Err(Error::InvalidArgument(_))
    ));
    assert_eq!(
        m.first().unwrap().map(|e| e.0),
        Some(5u64.to_le_bytes().to_vec())
    );
    assert_eq!(
        m.last().unwrap().map(|e| e.0),
        Some((1u64 << 40).to_le_bytes().to_vec())
    );
}
