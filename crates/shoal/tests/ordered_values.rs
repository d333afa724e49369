//! Ordered maps' values kept out of line (in pages of their own): against a model, under
//! snapshots that outlive the value they read, with their pages reused, and at sizes far
//! past a page.

use shoal::{Error, Options, Store, MAX_ORDERED_KEY};
use std::collections::BTreeMap;

type Model = BTreeMap<Vec<u8>, Vec<u8>>;

fn shm_dir() -> tempfile::TempDir {
    tempfile::tempdir_in("/dev/shm").unwrap()
}

fn rng(seed: &mut u64) -> u64 {
    *seed ^= *seed << 13;
    *seed ^= *seed >> 7;
    *seed ^= *seed << 17;
    *seed
}

/// A value whose bytes say where they are, so a page out of place shows.
fn value(tag: u64, len: usize) -> Vec<u8> {
    (0..len)
        .map(|i| (tag.wrapping_mul(31).wrapping_add(i as u64 / 7)) as u8)
        .collect()
}

#[test]
fn values_of_every_size_follow_a_model_and_snapshots_keep_theirs() {
    let d = shm_dir();
    let path = d.path().join("o.shoal");
    let mut seed = 0xbeef_u64;
    let mut model: BTreeMap<Vec<u8>, Vec<u8>> = BTreeMap::new();
    for round in 0..2 {
        let s = Store::open(&path).unwrap();
        let m = s.ordered_map("big").unwrap();
        let mut held: Vec<(shoal::Snapshot<'_>, Model)> = Vec::new();
        for step in 0..1500u64 {
            let r = rng(&mut seed);
            let key = format!("key{:04}", r % 300).repeat(1 + (r >> 12) as usize % 3);
            let key = key.into_bytes();
            let len = match (r >> 20) % 8 {
                0 => 0,
                1..=3 => (r >> 24) as usize % 200,
                4 | 5 => 900 + (r >> 24) as usize % 4000,
                6 => (r >> 24) as usize % 70_000,
                _ => 1000 - key.len() + (r >> 24) as usize % 3,
            };
            let val = value(step, len);
            match (r >> 60) % 8 {
                0..=3 => {
                    m.put(&key, &val).unwrap();
                    model.insert(key, val);
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
                    let mut t = m.write().unwrap();
                    t.put(&key, &val).unwrap();
                    t.put(&key, &value(step + 1, len / 2 + 3000)).unwrap();
                    t.remove(&key).unwrap();
                    t.put(&key, &val).unwrap();
                    if r & 1 == 0 {
                        t.commit().unwrap();
                        model.insert(key, val);
                    }
                }
            }
            let probe = format!("key{:04}", (r >> 32) % 300).into_bytes();
            assert_eq!(
                m.get(&probe).unwrap(),
                model.get(&probe).cloned(),
                "step {step}"
            );
            if step % 250 == 0 {
                held.push((m.snapshot().unwrap(), model.clone()));
            }
        }
        // Snapshots taken along the way still read their values, though later commits
        // replaced and removed them.
        for (snap, then) in &held {
            let got: BTreeMap<Vec<u8>, Vec<u8>> =
                snap.range(None, None).unwrap().into_iter().collect();
            assert!(got == *then, "round {round}: a held snapshot changed");
        }
        drop(held);
        let got: BTreeMap<Vec<u8>, Vec<u8>> = m.range(None, None).unwrap().into_iter().collect();
        assert!(got == model, "round {round}");
        let r = s.check().unwrap();
        assert!(r.is_ok(), "{r}");
    }
}

#[test]
fn overwriting_a_large_value_reuses_its_pages() {
    let d = shm_dir();
    let s = Store::open(d.path().join("o.shoal")).unwrap();
    let m = s.ordered_map("big").unwrap();
    m.put(b"k", &value(0, 200_000)).unwrap();
    let after_one = s.object_stats("big").unwrap().unwrap().index_bytes;
    for i in 1..200 {
        m.put(b"k", &value(i, 200_000)).unwrap();
    }
    let after = s.object_stats("big").unwrap().unwrap().index_bytes;
    assert_eq!(m.get(b"k").unwrap(), Some(value(199, 200_000)));
    // Without reuse, 200 values of 49 pages each: about 40 MB.
    assert!(
        after <= after_one * 4,
        "pages grew from {after_one} to {after} bytes"
    );
    assert!(s.check().unwrap().is_ok());
}

#[test]
fn a_value_of_many_megabytes_round_trips_and_keys_have_a_limit() {
    let d = shm_dir();
    let opts = Options {
        max_size: 8 << 30,
        ..Options::default()
    };
    let s = Store::open_with(
        d.path().join("o.shoal"),
        &opts,
        shoal::OpenMode::OpenOrCreate,
    )
    .unwrap();
    let m = s.ordered_map("big").unwrap();
    // 64 MiB in the suite; SHOAL_ORDERED_VALUE_MB=1024 runs the 1 GiB.
    let mb: usize = std::env::var("SHOAL_ORDERED_VALUE_MB")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(64);
    let big = value(7, mb << 20);
    let key = vec![b'k'; MAX_ORDERED_KEY];
    m.put(&key, &big).unwrap();
    m.put(b"a", b"small").unwrap();
    assert!(m.get(&key).unwrap().unwrap() == big);
    let r = m.range(None, None).unwrap();
    assert_eq!(r.len(), 2);
    assert!(r[1].1 == big);
    assert!(matches!(
        m.put(&[b'k'; MAX_ORDERED_KEY + 1], b""),
        Err(Error::InvalidArgument(_))
    ));
    assert!(m.remove(&key).unwrap());
    assert_eq!(m.len().unwrap(), 1);
    let r = s.check().unwrap();
    assert!(r.is_ok(), "{r}");
}

/// A commit frees pages a snapshot still reads and, in the same commit, takes free pages
/// from the head of its map's free-page queue (for the queue's own pages): the head must
/// stop at the entries that commit appended, whatever bytes their pages held before.
#[test]
fn a_commit_never_hands_itself_the_pages_it_frees_while_a_snapshot_reads_them() {
    let d = shm_dir();
    let s = Store::open(d.path().join("o.shoal")).unwrap();
    let m = s.ordered_map("big").unwrap();
    let n = 300u64;
    let key = |i: u64| format!("k{i:04}").into_bytes();
    for round in 0..6u64 {
        let mut w = m.write().unwrap();
        for i in 0..n {
            w.put(
                &key(i),
                &value(round * 1000 + i, 1500 + (i as usize % 7) * 600),
            )
            .unwrap();
        }
        w.commit().unwrap();
    }
    let snap = m.snapshot().unwrap();
    let then: Vec<(Vec<u8>, Vec<u8>)> = snap.range(None, None).unwrap();
    for round in 6..12u64 {
        let mut w = m.write().unwrap();
        for i in 0..n {
            w.put(
                &key(i),
                &value(round * 1000 + i, 1500 + (i as usize % 5) * 900),
            )
            .unwrap();
        }
        w.commit().unwrap();
        assert!(
            snap.range(None, None).unwrap() == then,
            "round {round}: the snapshot's values changed under it"
        );
    }
    drop(snap);
    let r = s.check().unwrap();
    assert!(r.is_ok(), "{r}");
}
