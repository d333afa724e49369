//! The input is a sequence of operations on a small store (64 KiB chunks, a map with tiny
//! segments, so that splits and the cleaner come early), each checked against a HashMap
//! model: put, get, insert, replace, remove, swap, take, compare_and_swap, update, add,
//! get_or_insert, put_many, remove_many, clear, iteration, compact, and reopening the
//! store. At the end the whole map (get, iteration, len) must equal the model and
//! `Store::check` must pass.
//!
//! Every input runs twice: on a map without UIDs, then on one with UIDs, where a get also
//! reads the key by its UID, and some replaces and adds go by UID (values of the same
//! length are overwritten in place in both).
//!
//! Encoding: each op is 3 bytes, `[kind, key, len]`: `key` picks one of 48 keys (or a
//! long key), `len` the value's length (255 with a key byte that is a multiple of 64 means
//! 70 000 bytes: more than a chunk).
#![no_main]

use libfuzzer_sys::fuzz_target;
use shoal::{MapOptions, PutOutcome, Store};
#[path = "common/model.rs"]
mod model;

use model::Model;
use std::path::PathBuf;

fn path() -> PathBuf {
    model::store_path("ops")
}

fn open(create: bool, uids: bool) -> (Store, shoal::Map) {
    let s = model::open_store("ops", create);
    let m = s
        .map_with(
            "m",
            &MapOptions {
                segment_buckets: 1,
                stash_buckets: 1,
                uids,
                ..Default::default()
            },
            true,
        )
        .expect("open the map");
    (s, m)
}

fn key(b: u8) -> Vec<u8> {
    if b >= 250 {
        // A long key (up to the maximum).
        vec![b'L'; shoal::MAX_KEY_LEN - (b as usize - 250)]
    } else {
        format!("k{}", b % 48).into_bytes()
    }
}

fn value(i: usize, len: u8, key: u8) -> Vec<u8> {
    let n = if len == 255 && key % 64 == 0 {
        70_000
    } else {
        len as usize
    };
    (0..n).map(|j| (i * 31 + j * 7) as u8).collect()
}

fn update_fn(cur: Option<&[u8]>) -> Option<Vec<u8>> {
    match cur {
        None => Some(b"u".to_vec()),
        Some(c) if c.len() >= 20 => None,
        Some(c) => {
            let mut v = c.to_vec();
            v.push(b'+');
            Some(v)
        }
    }
}

fn full_compare(m: &shoal::Map, model: &Model, at: usize) {
    model::check_whole(m.iter(), m.len().unwrap(), model, at);
}

fuzz_target!(|data: &[u8]| {
    run(data, false);
    run(data, true);
});

fn run(data: &[u8], uids: bool) {
    let _ = std::fs::remove_file(path());
    let (mut s, mut m) = open(true, uids);
    let mut model = Model::new();
    for (i, op) in data.chunks_exact(3).take(2000).enumerate() {
        let (kind, k, len) = (op[0], key(op[1]), op[2]);
        let v = value(i, len, op[1]);
        match kind % 18 {
            0 | 1 => {
                let o = m.put(&k, &v).unwrap();
                let had = model.insert(k, v).is_some();
                assert_eq!(o == PutOutcome::Replaced, had, "op {i}: put outcome");
            }
            2 => {
                assert_eq!(m.get(&k).unwrap(), model.get(&k).cloned(), "op {i}: get");
                if let (true, Some(want)) = (uids, model.get(&k)) {
                    let u = m.uid(&k).unwrap().expect("a present key has a UID");
                    assert_eq!(&m.get_by_uid(u).unwrap(), want, "op {i}: get by UID");
                }
            }
            4 if uids && len % 2 == 1 && model.contains_key(&k) => {
                let u = m.uid(&k).unwrap().expect("a present key has a UID");
                m.put_by_uid(u, &v).unwrap();
                model.insert(k, v);
            }
            3 => {
                let r = m.put_if_absent(&k, &v).unwrap();
                assert_eq!(r, !model.contains_key(&k), "op {i}: insert");
                model.entry(k).or_insert(v);
            }
            4 => {
                let r = m.put_if_present(&k, &v).unwrap();
                assert_eq!(r, model.contains_key(&k), "op {i}: replace");
                if let Some(x) = model.get_mut(&k) {
                    *x = v;
                }
            }
            5 => assert_eq!(
                m.remove(&k).unwrap(),
                model.remove(&k).is_some(),
                "op {i}: remove"
            ),
            6 => assert_eq!(m.swap(&k, &v).unwrap(), model.insert(k, v), "op {i}: swap"),
            7 => assert_eq!(m.take(&k).unwrap(), model.remove(&k), "op {i}: take"),
            8 => model::check_cas(&mut model, k.clone(), &v, len, i, |e, n| {
                m.compare_and_swap(&k, e, n).unwrap()
            }),
            9 => {
                let r = m.update(&k, update_fn).unwrap();
                let new = update_fn(model.get(&k).map(|v| &v[..]));
                assert_eq!(r, new, "op {i}: update");
                match new {
                    Some(n) => model.insert(k, n),
                    None => model.remove(&k),
                };
            }
            10 => {
                let delta = len as i64 - 100;
                let r = match (uids && len % 2 == 1, model.get(&k)) {
                    (true, Some(_)) => m.add_by_uid(m.uid(&k).unwrap().unwrap(), delta),
                    _ => m.add(&k, delta),
                };
                match model.get(&k) {
                    Some(c) if c.len() != 8 => {
                        assert!(
                            matches!(r, Err(shoal::Error::InvalidArgument(_))),
                            "op {i}: add on a {}-byte value: {r:?}",
                            c.len()
                        );
                    }
                    c => {
                        let cur = c.map_or(0, |c| i64::from_le_bytes(c[..].try_into().unwrap()));
                        let n = cur.wrapping_add(delta);
                        assert_eq!(r.unwrap(), n, "op {i}: add");
                        model.insert(k, n.to_le_bytes().to_vec());
                    }
                }
            }
            11 => {
                let r = m.get_or_insert(&k, &v).unwrap();
                assert_eq!(&r, model.entry(k).or_insert(v), "op {i}: get_or_insert");
            }
            12 => {
                let keys: Vec<Vec<u8>> = (0..(len % 5) as usize + 1)
                    .map(|j| key(op[1].wrapping_add(j as u8 * 3)))
                    .collect();
                let items: Vec<(&[u8], &[u8])> = keys
                    .iter()
                    .map(|k| (&k[..], &v[..v.len().min(100)]))
                    .collect();
                m.put_many(&items).unwrap();
                for (k, v) in items {
                    model.insert(k.to_vec(), v.to_vec());
                }
            }
            13 => {
                let keys: Vec<Vec<u8>> = (0..(len % 5) as usize + 1)
                    .map(|j| key(op[1].wrapping_add(j as u8 * 5)))
                    .collect();
                let refs: Vec<&[u8]> = keys.iter().map(|k| &k[..]).collect();
                let mut keys = keys.clone();
                keys.sort();
                keys.dedup();
                let want = keys.iter().filter(|k| model.remove(*k).is_some()).count();
                assert_eq!(
                    m.remove_many(&refs).unwrap(),
                    want as u64,
                    "op {i}: remove_many"
                );
            }
            14 if len % 8 == 0 => {
                m.clear().unwrap();
                model.clear();
            }
            14 | 15 => full_compare(&m, &model, i),
            16 => {
                s.compact().unwrap();
            }
            _ => {
                // Close and reopen (the mapping is dropped and made again).
                drop(m);
                drop(s);
                (s, m) = open(false, uids);
            }
        }
    }
    full_compare(&m, &model, usize::MAX);
    for (k, v) in &model {
        assert_eq!(m.get(k).unwrap().as_ref(), Some(v), "final get");
    }
    let r = s.check().unwrap();
    assert!(r.is_ok(), "Store::check at the end:\n{r}");
    drop(m);
    drop(s);
    let _ = std::fs::remove_file(path());
}
