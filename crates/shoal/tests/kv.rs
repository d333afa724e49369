//! `KvMap`: one generic function serves both kinds of map, with one contract; the
//! operations added for it (`FixedMap::timeout`, `FixedMap::get_to_slice`, the indexed
//! batches) and the former names of `put_if_absent` / `put_if_present`.

use shoal::{Error, KvMap, PutOutcome, Store};
use std::collections::BTreeMap;
use std::time::Duration;

fn tmp() -> tempfile::TempDir {
    tempfile::tempdir_in("/dev/shm")
        .or_else(|_| tempfile::tempdir())
        .unwrap()
}

/// A key and a value of the map's sizes (any for a variable-size map), from `n`.
fn kv<M: KvMap>(m: &M, n: u64) -> (Vec<u8>, Vec<u8>) {
    let mut k = n.to_le_bytes().to_vec();
    k.resize(m.key_size().unwrap_or(3 + n as usize % 7), b'k');
    let mut v = (n * 31).to_le_bytes().to_vec();
    v.resize(m.value_size().unwrap_or(n as usize % 13), b'v');
    (k, v)
}

/// Every operation of the trait, checked against a model, written once for both kinds.
fn exercise<M: KvMap>(m: &M, name: &str) {
    let mut model: BTreeMap<Vec<u8>, Vec<u8>> = BTreeMap::new();
    assert_eq!(m.name(), name);
    assert!(m.is_empty().unwrap());

    let (k1, v1) = kv(m, 1);
    let (_, v2) = kv(m, 2);
    assert_eq!(m.put(&k1, &v1).unwrap(), PutOutcome::Inserted);
    assert_eq!(m.put(&k1, &v1).unwrap(), PutOutcome::Replaced);
    model.insert(k1.clone(), v1.clone());
    assert!(!m.put_if_absent(&k1, &v2).unwrap());
    assert!(m.put_if_present(&k1, &v2).unwrap());
    model.insert(k1.clone(), v2.clone());
    let (k3, v3) = kv(m, 3);
    assert!(!m.put_if_present(&k3, &v3).unwrap());
    assert!(m.put_if_absent(&k3, &v3).unwrap());
    model.insert(k3.clone(), v3.clone());
    assert!(m.contains(&k3).unwrap());
    assert_eq!(m.get(&k1).unwrap(), Some(v2.clone()));

    // get_to_slice: the length always; the bytes when they fit.
    let mut big = vec![0u8; 64];
    assert_eq!(m.get_to_slice(&k1, &mut big).unwrap(), Some(v2.len()));
    assert_eq!(&big[..v2.len()], &v2[..]);
    let (k9, _) = kv(m, 9);
    assert_eq!(m.get_to_slice(&k9, &mut big).unwrap(), None);

    assert_eq!(m.swap(&k1, &v1).unwrap(), Some(v2.clone()));
    model.insert(k1.clone(), v1.clone());
    assert_eq!(m.take(&k3).unwrap(), Some(v3.clone()));
    model.remove(&k3);
    assert_eq!(m.take(&k3).unwrap(), None);
    assert_eq!(m.get_or_insert(&k3, &v3).unwrap(), v3);
    assert_eq!(m.get_or_insert(&k3, &v1).unwrap(), v3);
    model.insert(k3.clone(), v3.clone());
    assert!(!m.compare_and_swap(&k3, Some(&v1), Some(&v2)).unwrap());
    assert!(m.compare_and_swap(&k3, Some(&v3), Some(&v2)).unwrap());
    model.insert(k3.clone(), v2.clone());
    let got = m.update(&k3, |cur| {
        assert_eq!(cur, Some(&v2[..]));
        Some(v1.clone())
    });
    assert_eq!(got.unwrap(), Some(v1.clone()));
    model.insert(k3.clone(), v1.clone());
    assert!(m.remove(&k3).unwrap());
    assert!(!m.remove(&k3).unwrap());
    model.remove(&k3);

    // Batches.
    let items: Vec<(Vec<u8>, Vec<u8>)> = (10..40).map(|n| kv(m, n)).collect();
    let refs: Vec<(&[u8], &[u8])> = items.iter().map(|(k, v)| (&k[..], &v[..])).collect();
    m.batch(|| m.put_many(&refs[..10])).unwrap();
    m.put_many_indexed(&refs[10..]).unwrap();
    model.extend(items.iter().cloned());
    let keys: Vec<&[u8]> = items.iter().map(|(k, _)| &k[..]).chain([&k9[..]]).collect();
    let got = m.get_many(&keys).unwrap();
    assert_eq!(got.len(), keys.len());
    for (k, v) in keys.iter().zip(&got) {
        assert_eq!(v.as_ref(), model.get(*k), "{k:?}");
    }
    let mut seen = 0;
    m.get_many_with(&keys, |i, v| {
        assert_eq!(v, model.get(keys[i]).map(|v| &v[..]));
        seen += 1;
    })
    .unwrap();
    assert_eq!(seen, keys.len());
    assert_eq!(m.remove_many(&keys[..5]).unwrap(), 5);
    assert_eq!(m.remove_many_indexed(&keys[..10]).unwrap(), 5);
    for k in &keys[..10] {
        model.remove(*k);
    }

    assert_eq!(m.len().unwrap(), model.len() as u64);
    let mut all: Vec<(Vec<u8>, Vec<u8>)> = m.iter().map(|e| e.unwrap()).collect();
    all.sort();
    assert_eq!(all, model.clone().into_iter().collect::<Vec<_>>());
    assert!(format!("{:?}", m.stats().unwrap()).contains("entries"));

    // Timeouts: a handle of its own, the original keeps its own.
    let t = m.with_timeout(Duration::from_millis(1234));
    assert_eq!(t.timeout(), Duration::from_millis(1234));
    assert_ne!(m.timeout(), t.timeout());
    assert_eq!(t.get(&k1).unwrap(), Some(v1.clone()));

    m.clear().unwrap();
    assert!(m.is_empty().unwrap());
}

#[test]
fn one_generic_function_serves_both_kinds() {
    let d = tmp();
    let s = Store::open(d.path().join("a.shoal")).unwrap();
    let m = s.map("var").unwrap();
    assert_eq!((m.key_size(), KvMap::value_size(&m)), (None, None));
    exercise(&m, "var");
    let f = s.fixed_map("fixed", 8, 8).unwrap();
    assert_eq!(
        (KvMap::key_size(&f), KvMap::value_size(&f)),
        (Some(8), Some(8))
    );
    exercise(&f, "fixed");
    let r = s.check().unwrap();
    assert!(r.is_ok(), "{r}");
}

#[test]
fn fixed_get_to_slice_has_the_contract_of_map_get_to_slice() {
    let d = tmp();
    let s = Store::open(d.path().join("a.shoal")).unwrap();
    let f = s.fixed_map("f", 4, 6).unwrap();
    f.put(b"abcd", b"123456").unwrap();
    // Too short: the length, and the buffer left alone.
    let mut short = [9u8; 5];
    assert_eq!(f.get_to_slice(b"abcd", &mut short).unwrap(), Some(6));
    assert_eq!(short, [9; 5]);
    // Exact and longer: copied to the front.
    let mut exact = [0u8; 6];
    assert_eq!(f.get_to_slice(b"abcd", &mut exact).unwrap(), Some(6));
    assert_eq!(&exact, b"123456");
    let mut long = [0u8; 10];
    assert_eq!(f.get_to_slice(b"abcd", &mut long).unwrap(), Some(6));
    assert_eq!(&long, b"123456\0\0\0\0");
    assert_eq!(f.get_to_slice(b"zzzz", &mut long).unwrap(), None);
    assert_eq!(f.get_to_slice(b"zzzz", &mut []).unwrap(), None);
    assert_eq!(f.get_to_slice(b"abcd", &mut []).unwrap(), Some(6));
    // A key of the wrong size is refused whatever the buffer.
    for buf in [&mut [0u8; 0][..], &mut [0u8; 6][..]] {
        assert!(matches!(
            f.get_to_slice(b"abc", buf),
            Err(Error::InvalidArgument(_))
        ));
    }
}

#[test]
fn fixed_timeout_is_the_handles() {
    let d = tmp();
    let s = Store::open(d.path().join("a.shoal")).unwrap();
    let f = s.fixed_map("f", 4, 4).unwrap();
    let m = s.map("m").unwrap();
    // The store's default, as for a Map.
    assert_eq!(f.timeout(), m.timeout());
    let t = f.with_timeout(Duration::from_millis(7));
    assert_eq!(t.timeout(), Duration::from_millis(7));
    assert_eq!(f.timeout(), m.timeout());
}

/// The indexed batches say which item stopped them, with the item's own error; the plain
/// ones keep their messages (an invalid item named in it).
fn indexed_batches<M: KvMap>(m: &M, s: &Store, bad: &[u8]) {
    let (k0, v0) = kv(m, 0);
    let (k1, v1) = kv(m, 1);
    let items: [(&[u8], &[u8]); 3] = [(&k0, &v0), (&k1, &v1), (bad, &v0)];
    match m.put_many_indexed(&items) {
        Err((2, Error::InvalidArgument(msg))) => assert!(!msg.contains("item"), "{msg}"),
        r => panic!("{r:?}"),
    }
    // The items before it were written.
    assert_eq!(m.get(&k1).unwrap(), Some(v1.clone()));
    match m.put_many(&items) {
        Err(Error::InvalidArgument(msg)) => assert!(msg.starts_with("item 2: "), "{msg}"),
        r => panic!("{r:?}"),
    }
    match m.remove_many_indexed(&[&k0, bad]) {
        Err((1, Error::InvalidArgument(_))) => {}
        r => panic!("{r:?}"),
    }
    assert!(!m.contains(&k0).unwrap());
    assert!(matches!(
        m.remove_many(&[&k1, bad]),
        Err(Error::InvalidArgument(_))
    ));
    // An error that is not the item's fault is still the item's: the map was dropped.
    s.drop_map(m.name()).unwrap();
    match m.put_many_indexed(&items[..2]) {
        Err((0, Error::NotFound(_))) => {}
        r => panic!("{r:?}"),
    }
    match m.remove_many_indexed(&[&k0]) {
        Err((0, Error::NotFound(_))) => {}
        r => panic!("{r:?}"),
    }
    assert!(m.put_many_indexed(&[]).is_ok());
}

#[test]
fn indexed_batches_name_the_item_that_stopped_them() {
    let d = tmp();
    let s = Store::open(d.path().join("a.shoal")).unwrap();
    let too_long = vec![0u8; shoal::MAX_KEY_LEN + 1];
    indexed_batches(&s.map("var").unwrap(), &s, &too_long);
    indexed_batches(&s.fixed_map("fixed", 8, 8).unwrap(), &s, b"short");
}

/// The names `insert` and `replace` stay for one release, doing what the new names do.
#[test]
#[allow(deprecated)]
fn the_former_names_still_work() {
    let d = tmp();
    let s = Store::open(d.path().join("a.shoal")).unwrap();
    let m = s.map("m").unwrap();
    assert!(m.insert(b"k", b"1").unwrap());
    assert!(!m.insert(b"k", b"2").unwrap());
    assert!(m.replace(b"k", b"3").unwrap());
    assert!(!m.replace(b"absent", b"3").unwrap());
    assert_eq!(m.get(b"k").unwrap().as_deref(), Some(&b"3"[..]));
    assert!(!m.contains(b"absent").unwrap());
    let f = s.fixed_map("f", 2, 2).unwrap();
    assert!(f.insert(b"ab", b"12").unwrap());
    assert!(!f.insert(b"ab", b"34").unwrap());
    assert!(f.replace(b"ab", b"56").unwrap());
    assert!(!f.replace(b"cd", b"78").unwrap());
    assert_eq!(f.get(b"ab").unwrap().as_deref(), Some(&b"56"[..]));
    assert!(!f.contains(b"cd").unwrap());
}
