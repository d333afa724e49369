//! Ordered maps of integer keys and multimaps (duplicates): each against a model, through
//! transactions, reopens and the checker, and the options a map keeps.

use shoal::{Error, MapKind, OrderedOptions, Store};
use std::collections::{BTreeMap, BTreeSet};

fn shm_dir() -> tempfile::TempDir {
    tempfile::tempdir_in("/dev/shm").unwrap()
}

fn rng(seed: &mut u64) -> u64 {
    *seed ^= *seed << 13;
    *seed ^= *seed >> 7;
    *seed ^= *seed << 17;
    *seed
}

const U64: OrderedOptions = OrderedOptions {
    u64_keys: true,
    duplicates: false,
};
const DUPS: OrderedOptions = OrderedOptions {
    u64_keys: false,
    duplicates: true,
};

fn k64(n: u64) -> [u8; 8] {
    n.to_le_bytes()
}

fn n64(k: &[u8]) -> u64 {
    u64::from_le_bytes(k.try_into().unwrap())
}

#[test]
fn integer_keys_sort_as_numbers_and_follow_a_model() {
    let d = shm_dir();
    let path = d.path().join("o.shoal");
    for seed0 in [3u64, 11] {
        let name = format!("n{seed0}");
        let mut seed = seed0.wrapping_mul(0x9e37_79b9_7f4a_7c15);
        let mut model: BTreeMap<u64, Vec<u8>> = BTreeMap::new();
        for round in 0..2 {
            let s = Store::open(&path).unwrap();
            let m = s.ordered_map_with(&name, &U64).unwrap();
            assert_eq!(m.options(), U64);
            for _ in 0..3000 {
                let r = rng(&mut seed);
                // Keys spread over every byte of a u64, so little-endian order would differ.
                let n = match r % 3 {
                    0 => r >> 50,
                    1 => (r >> 50) << 40,
                    _ => u64::MAX - (r >> 54),
                };
                let val = vec![r as u8; (r >> 20) as usize % 40];
                match (r >> 60) % 6 {
                    0..=2 => {
                        m.put(&k64(n), &val).unwrap();
                        model.insert(n, val);
                    }
                    3 => {
                        let had = model.contains_key(&n);
                        assert_eq!(m.put_if_absent(&k64(n), &val).unwrap(), !had);
                        model.entry(n).or_insert(val);
                    }
                    _ => assert_eq!(m.remove(&k64(n)).unwrap(), model.remove(&n).is_some()),
                }
            }
            let got: Vec<(u64, Vec<u8>)> = m
                .range(None, None)
                .unwrap()
                .into_iter()
                .map(|(k, v)| (n64(&k), v))
                .collect();
            let want: Vec<(u64, Vec<u8>)> = model.clone().into_iter().collect();
            if let Some(i) = (0..got.len().max(want.len())).find(|&i| got.get(i) != want.get(i)) {
                panic!(
                    "seed {seed0} round {round}: {} entries, {} in the model; first difference at {i}: {:?} against {:?}",
                    got.len(),
                    want.len(),
                    got.get(i),
                    want.get(i)
                );
            }
            // Bounds are numbers too.
            let (lo, hi) = (1u64 << 40, u64::MAX - 100);
            let got: Vec<u64> = m
                .range(Some(&k64(lo)), Some(&k64(hi)))
                .unwrap()
                .into_iter()
                .map(|(k, _)| n64(&k))
                .collect();
            let want: Vec<u64> = model.range(lo..hi).map(|(k, _)| *k).collect();
            assert_eq!(got, want, "seed {seed0}");
            assert_eq!(
                m.count_range(Some(&k64(lo)), Some(&k64(hi))).unwrap(),
                want.len() as u64
            );
            let snap = m.snapshot().unwrap();
            assert_eq!(
                snap.first().unwrap().map(|(k, _)| n64(&k)),
                model.keys().next().copied()
            );
            assert_eq!(
                snap.last().unwrap().map(|(k, _)| n64(&k)),
                model.keys().last().copied()
            );
            let rev: Vec<u64> = snap
                .range_rev(None, None)
                .unwrap()
                .into_iter()
                .map(|(k, _)| n64(&k))
                .collect();
            assert!(rev.iter().rev().eq(model.keys()));
            drop(snap);
            assert!(matches!(m.get(b"seven"), Err(Error::InvalidArgument(_))));
            assert!(matches!(m.put(b"", b"x"), Err(Error::InvalidArgument(_))));
        }
    }
    let s = Store::open(&path).unwrap();
    assert!(s.check().unwrap().is_ok());
}

/// A multimap against a set of pairs: every operation, in transactions that commit and
/// that abort, across a reopen.
#[test]
fn a_multimap_follows_a_set_of_pairs() {
    let d = shm_dir();
    let path = d.path().join("o.shoal");
    let mut seed = 0x5eed_u64;
    let mut model: BTreeSet<(Vec<u8>, Vec<u8>)> = BTreeSet::new();
    // Keys with zero bytes and prefixes of one another, where an escape slip would show.
    let keys: Vec<Vec<u8>> = vec![
        b"".to_vec(),
        b"\0".to_vec(),
        b"\0\0".to_vec(),
        b"a".to_vec(),
        b"a\0".to_vec(),
        b"a\0b".to_vec(),
        b"a\x01".to_vec(),
        b"ab".to_vec(),
        b"b".to_vec(),
    ];
    let values_of = |model: &BTreeSet<(Vec<u8>, Vec<u8>)>, k: &[u8]| -> Vec<Vec<u8>> {
        model
            .iter()
            .filter(|(mk, _)| mk == k)
            .map(|(_, v)| v.clone())
            .collect()
    };
    for round in 0..2 {
        let s = Store::open(&path).unwrap();
        let m = s.ordered_map_with("multi", &DUPS).unwrap();
        for step in 0..3000 {
            let r = rng(&mut seed);
            let k = keys[r as usize % keys.len()].clone();
            let v = vec![(r >> 8) as u8 % 4; (r >> 16) as usize % 3];
            let had_key = model.iter().any(|(mk, _)| *mk == k);
            match (r >> 58) % 8 {
                0..=2 => {
                    let mut t = m.write().unwrap();
                    assert_eq!(
                        t.put(&k, &v).unwrap(),
                        !model.contains(&(k.clone(), v.clone()))
                    );
                    t.commit().unwrap();
                    model.insert((k, v));
                }
                3 => {
                    assert_eq!(m.put_if_absent(&k, &v).unwrap(), !had_key, "step {step}");
                    if !had_key {
                        model.insert((k, v));
                    }
                }
                4 => {
                    assert_eq!(m.put_if_present(&k, &v).unwrap(), had_key, "step {step}");
                    if had_key {
                        model.retain(|(mk, _)| *mk != k);
                        model.insert((k, v));
                    }
                }
                5 => {
                    let there = model.remove(&(k.clone(), v.clone()));
                    assert_eq!(m.remove_value(&k, &v).unwrap(), there, "step {step}");
                }
                6 => {
                    assert_eq!(m.remove(&k).unwrap(), had_key, "step {step}");
                    model.retain(|(mk, _)| *mk != k);
                }
                _ => {
                    // An aborted transaction leaves nothing, whatever it did.
                    let mut t = m.write().unwrap();
                    assert_eq!(t.remove(&k).unwrap(), had_key);
                    assert_eq!(t.get(&k).unwrap(), None);
                    t.put(&k, b"zz").unwrap();
                    assert_eq!(t.get(&k).unwrap(), Some(b"zz".to_vec()));
                    t.abort();
                }
            }
            if step % 97 == 0 {
                let want: Vec<(Vec<u8>, Vec<u8>)> = model.iter().cloned().collect();
                assert_eq!(
                    m.range(None, None).unwrap(),
                    want,
                    "round {round} step {step}"
                );
                assert_eq!(m.len().unwrap(), model.len() as u64);
            }
            let probe = &keys[(r >> 40) as usize % keys.len()];
            let vals = values_of(&model, probe);
            assert_eq!(m.get_all(probe).unwrap(), vals, "step {step}");
            assert_eq!(m.get(probe).unwrap(), vals.first().cloned());
            assert_eq!(m.count_values(probe).unwrap(), vals.len() as u64);
        }
        // Ranges select keys, with every value of each.
        let (lo, hi) = (b"\0".as_slice(), b"a\x01".as_slice());
        let want: Vec<(Vec<u8>, Vec<u8>)> = model
            .iter()
            .filter(|(k, _)| k.as_slice() >= lo && k.as_slice() < hi)
            .cloned()
            .collect();
        assert_eq!(m.range(Some(lo), Some(hi)).unwrap(), want);
        assert_eq!(
            m.count_range(Some(lo), Some(hi)).unwrap(),
            want.len() as u64
        );
        let rev: Vec<_> = want.iter().rev().cloned().collect();
        assert_eq!(
            m.snapshot().unwrap().range_rev(Some(lo), Some(hi)).unwrap(),
            rev
        );
    }
    let s = Store::open(&path).unwrap();
    assert!(s.check().unwrap().is_ok());
}

#[test]
fn a_multimap_with_integer_keys_sorts_pairs_by_number_then_value() {
    let d = shm_dir();
    let s = Store::open(d.path().join("o.shoal")).unwrap();
    let both = OrderedOptions {
        u64_keys: true,
        duplicates: true,
    };
    let m = s.ordered_map_with("idx", &both).unwrap();
    let other = s.ordered_map_with("other", &both).unwrap();
    let mut t = m.write_with(&[&other]).unwrap();
    for n in [256u64, 1, 0, u64::MAX] {
        for v in [b"b".as_slice(), b"a", b""] {
            assert!(t.put(&m, &k64(n), v).unwrap());
            assert!(t.put(&other, &k64(n), v).unwrap());
        }
        assert!(!t.put(&m, &k64(n), b"a").unwrap(), "a pair is kept once");
    }
    assert!(t.remove_value(&other, &k64(1), b"a").unwrap());
    t.commit().unwrap();
    let got: Vec<(u64, Vec<u8>)> = m
        .range(None, None)
        .unwrap()
        .into_iter()
        .map(|(k, v)| (n64(&k), v))
        .collect();
    let mut want = Vec::new();
    for n in [0u64, 1, 256, u64::MAX] {
        for v in [b"".as_slice(), b"a", b"b"] {
            want.push((n, v.to_vec()));
        }
    }
    assert_eq!(got, want);
    assert_eq!(other.count_values(&k64(1)).unwrap(), 2);
    assert_eq!(m.count_range(Some(&k64(1)), Some(&k64(257))).unwrap(), 6);
    assert!(s.check().unwrap().is_ok());
}

#[test]
fn a_map_keeps_its_options_and_refuses_others() {
    let d = shm_dir();
    let path = d.path().join("o.shoal");
    {
        let s = Store::open(&path).unwrap();
        s.ordered_map_with("ints", &U64).unwrap();
        s.ordered_map("plain").unwrap();
    }
    let s = Store::open(&path).unwrap();
    // Opened without options, a map is what it was made.
    assert_eq!(s.ordered_map("ints").unwrap().options(), U64);
    match s.ordered_map_with("ints", &DUPS) {
        Err(Error::WrongMapKind { wanted, found, .. }) => {
            assert_eq!(
                wanted,
                MapKind::Ordered {
                    u64_keys: false,
                    duplicates: true
                }
            );
            assert_eq!(
                found,
                MapKind::Ordered {
                    u64_keys: true,
                    duplicates: false
                }
            );
        }
        other => panic!("expected WrongMapKind, got {other:?}"),
    }
    assert!(matches!(
        s.ordered_map_with("plain", &U64),
        Err(Error::WrongMapKind { .. })
    ));
    assert_eq!(
        s.ordered_map_with("plain", &OrderedOptions::default())
            .unwrap()
            .options(),
        OrderedOptions::default()
    );
}

#[test]
fn a_multimap_takes_keys_and_values_up_to_the_key_limit() {
    let d = shm_dir();
    let s = Store::open(d.path().join("o.shoal")).unwrap();
    let m = s.ordered_map_with("multi", &DUPS).unwrap();
    let limit = shoal::MAX_ORDERED_KEY;
    // The longest key, all zero bytes (each escaped to two), with values as long: the
    // pairs share their first 32 KiB, so every compare reads past a page.
    let z = vec![0u8; limit];
    let mut vals: Vec<Vec<u8>> = (0..5u8).map(|i| vec![i; limit - i as usize]).collect();
    for v in &vals {
        m.put(&z, v).unwrap();
    }
    m.put(&z[..limit - 1], b"shorter key").unwrap();
    vals.sort();
    assert_eq!(m.get_all(&z).unwrap(), vals);
    assert_eq!(m.count_values(&z).unwrap(), 5);
    assert_eq!(
        m.get_all(&z[..limit - 1]).unwrap(),
        vec![b"shorter key".to_vec()]
    );
    assert!(matches!(
        m.put(&z, &vec![1u8; limit + 1]),
        Err(Error::InvalidArgument(_))
    ));
    assert!(matches!(
        m.put(&vec![1u8; limit + 1], b""),
        Err(Error::InvalidArgument(_))
    ));
    assert!(m.remove_value(&z, &vals[2]).unwrap());
    assert_eq!(m.count_values(&z).unwrap(), 4);
    assert_eq!(m.len().unwrap(), 5);
    let r = s.check().unwrap();
    assert!(r.is_ok(), "{r}");
}
