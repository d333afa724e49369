//! Atomic read-modify-write: compare-and-swap, update, add, get-or-insert, swap. Their
//! semantics one by one, then racing threads that must never lose an update.

use shoal::{Error, Store};
use std::sync::Arc;

fn tmp() -> tempfile::TempDir {
    tempfile::tempdir_in("/dev/shm")
        .or_else(|_| tempfile::tempdir())
        .unwrap()
}

#[test]
fn compare_and_swap_semantics() {
    let d = tmp();
    let s = Store::open(d.path().join("a.shoal")).unwrap();
    let m = s.map("m").unwrap();
    // insert-if-absent
    assert!(m.compare_and_swap(b"k", None, Some(b"1")).unwrap());
    assert!(!m.compare_and_swap(b"k", None, Some(b"2")).unwrap());
    assert_eq!(m.get(b"k").unwrap().as_deref(), Some(&b"1"[..]));
    // swap on match only
    assert!(!m.compare_and_swap(b"k", Some(b"0"), Some(b"2")).unwrap());
    assert!(m.compare_and_swap(b"k", Some(b"1"), Some(b"22")).unwrap());
    assert_eq!(m.get(b"k").unwrap().as_deref(), Some(&b"22"[..]));
    // compare-and-remove
    assert!(!m.compare_and_swap(b"k", Some(b"2"), None).unwrap());
    assert!(m.compare_and_swap(b"k", Some(b"22"), None).unwrap());
    assert_eq!(m.get(b"k").unwrap(), None);
    // absent stays absent
    assert!(m.compare_and_swap(b"k", None, None).unwrap());
    // empty values are values, not absence
    assert!(m.compare_and_swap(b"e", None, Some(b"")).unwrap());
    assert!(!m.compare_and_swap(b"e", None, Some(b"x")).unwrap());
    assert!(m.compare_and_swap(b"e", Some(b""), Some(b"x")).unwrap());
    assert_eq!(m.len().unwrap(), 1);
    assert!(s.check().unwrap().is_ok());
}

#[test]
fn update_add_get_or_insert_swap() {
    let d = tmp();
    let s = Store::open(d.path().join("a.shoal")).unwrap();
    let m = s.map("m").unwrap();
    assert_eq!(
        m.update(b"u", |v| {
            assert!(v.is_none());
            Some(b"a".to_vec())
        })
        .unwrap()
        .as_deref(),
        Some(&b"a"[..])
    );
    assert_eq!(
        m.update(b"u", |v| Some([v.unwrap(), b"b"].concat()))
            .unwrap()
            .as_deref(),
        Some(&b"ab"[..])
    );
    assert_eq!(m.update(b"u", |_| None).unwrap(), None);
    assert!(!m.contains(b"u").unwrap());
    assert_eq!(m.update(b"u", |_| None).unwrap(), None);

    assert_eq!(m.add(b"n", 5).unwrap(), 5);
    assert_eq!(m.add(b"n", -7).unwrap(), -2);
    assert_eq!(m.get(b"n").unwrap().unwrap(), (-2i64).to_le_bytes());
    assert_eq!(m.add(b"n", i64::MAX).unwrap(), i64::MAX.wrapping_add(-2));
    m.put(b"s", b"not eight").unwrap();
    assert!(matches!(m.add(b"s", 1), Err(Error::InvalidArgument(_))));
    assert_eq!(m.get(b"s").unwrap().as_deref(), Some(&b"not eight"[..]));

    assert_eq!(m.get_or_insert(b"g", b"first").unwrap(), b"first");
    assert_eq!(m.get_or_insert(b"g", b"second").unwrap(), b"first");

    assert_eq!(m.swap(b"w", b"1").unwrap(), None);
    assert_eq!(m.swap(b"w", b"2").unwrap().as_deref(), Some(&b"1"[..]));
    assert_eq!(m.get(b"w").unwrap().as_deref(), Some(&b"2"[..]));
    let r = s.check().unwrap();
    assert!(r.is_ok(), "{r}");
}

#[test]
fn racing_adds_and_updates_lose_nothing() {
    let d = tmp();
    let s = Store::open(d.path().join("a.shoal")).unwrap();
    let m = Arc::new(s.map("m").unwrap());
    let threads = 8u64;
    let per = 5_000u64;
    let hs: Vec<_> = (0..threads)
        .map(|t| {
            let m = m.clone();
            std::thread::spawn(move || {
                for i in 0..per {
                    m.add(format!("c{}", i % 4).as_bytes(), 1).unwrap();
                    if i % 5 == t % 5 {
                        m.update(b"u", |v| {
                            let n = v
                                .map(|b| u64::from_le_bytes(b.try_into().unwrap()))
                                .unwrap_or(0);
                            Some((n + 1).to_le_bytes().to_vec())
                        })
                        .unwrap();
                    }
                }
            })
        })
        .collect();
    for h in hs {
        h.join().unwrap();
    }
    let total: i64 = (0..4)
        .map(|k| {
            i64::from_le_bytes(
                m.get(format!("c{k}").as_bytes())
                    .unwrap()
                    .unwrap()
                    .try_into()
                    .unwrap(),
            )
        })
        .sum();
    assert_eq!(total as u64, threads * per);
    let updates = u64::from_le_bytes(m.get(b"u").unwrap().unwrap().try_into().unwrap());
    let want: u64 = (0..threads)
        .map(|t| (0..per).filter(|i| i % 5 == t % 5).count() as u64)
        .sum();
    assert_eq!(updates, want);
    let r = s.check().unwrap();
    assert!(r.is_ok(), "{r}");
}

/// Counters kept as decimal text, so that an increment sometimes changes the value's
/// length: such a swap appends a record where the others overwrite in place, and both
/// kinds race. Racing updates still lose nothing, every value is whole, and the store
/// checks clean.
#[test]
fn racing_swaps_to_values_of_other_lengths_lose_nothing() {
    let d = tmp();
    let s = Store::open(d.path().join("a.shoal")).unwrap();
    let m = Arc::new(s.map("m").unwrap());
    let (threads, per, keys) = (4u64, 3_000u64, 3u64);
    let hs: Vec<_> = (0..threads)
        .map(|t| {
            let m = m.clone();
            std::thread::spawn(move || {
                for i in 0..per {
                    m.update(format!("d{}", (i + t) % keys).as_bytes(), |v| {
                        let n: u64 = v.map_or(0, |b| {
                            std::str::from_utf8(b)
                                .ok()
                                .and_then(|s| s.parse().ok())
                                .unwrap_or_else(|| panic!("torn counter {b:?}"))
                        });
                        Some((n + 1).to_string().into_bytes())
                    })
                    .unwrap();
                }
            })
        })
        .collect();
    for h in hs {
        h.join().unwrap();
    }
    let total: u64 = (0..keys)
        .map(|k| {
            let v = m.get(format!("d{k}").as_bytes()).unwrap().unwrap();
            String::from_utf8(v).unwrap().parse::<u64>().unwrap()
        })
        .sum();
    assert_eq!(total, threads * per);
    let r = s.check().unwrap();
    assert!(r.is_ok(), "{r}");
}

#[test]
fn racing_get_or_insert_has_one_winner() {
    let d = tmp();
    let s = Store::open(d.path().join("a.shoal")).unwrap();
    let m = Arc::new(s.map("m").unwrap());
    for round in 0..50u32 {
        let key = format!("r{round}");
        let hs: Vec<_> = (0..4u32)
            .map(|t| {
                let m = m.clone();
                let key = key.clone();
                std::thread::spawn(move || {
                    m.get_or_insert(key.as_bytes(), &t.to_le_bytes()).unwrap()
                })
            })
            .collect();
        let got: Vec<_> = hs.into_iter().map(|h| h.join().unwrap()).collect();
        assert!(
            got.windows(2).all(|w| w[0] == w[1]),
            "round {round}: {got:?}"
        );
        assert_eq!(m.get(key.as_bytes()).unwrap().unwrap(), got[0]);
    }
    assert!(s.check().unwrap().is_ok());
}
