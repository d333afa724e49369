//! The input is a sequence of operations on fixed-size maps, each checked against a
//! HashMap model: put, swap, get, get_into, contains, insert, get_or_insert, replace,
//! remove, take, compare_and_swap, update, add, get_many, put_many, remove_many, a put of
//! the wrong size, clear, iteration and reopening the store. At the end the whole map (get, iteration, len) must equal the
//! model and `Store::check` must pass.
//!
//! Every input runs on three geometries: 8+8 (the inline u64 -> u64 map, whose adds are
//! lock-free), 4+4 (64-byte buckets) and 16+16 (adds refused: values are not 8 bytes).
//! Segments of 2+1 buckets, so that 64 keys split them several times and fill the
//! neighbours and the stash.
//!
//! Encoding: each op is 3 bytes, `[kind, key, arg]`: `key` picks one of 64 keys, `arg`
//! the value written (or the delta of an add).
#![no_main]

use libfuzzer_sys::fuzz_target;
use shoal::{FixedMap, FixedOptions, PutOutcome, Store};
#[path = "common/model.rs"]
mod model;

use model::Model;
use std::path::PathBuf;

fn path() -> PathBuf {
    model::store_path("fixed")
}

fn open(create: bool, k: usize, v: usize) -> (Store, FixedMap) {
    let s = model::open_store("fixed", create);
    let geo = FixedOptions {
        segment_buckets: 2,
        stash_buckets: 1,
        ..Default::default()
    };
    let m = s
        .fixed_map_with("f", k, v, &geo, true)
        .expect("open the map");
    (s, m)
}

/// Key `b % 64`, `size` bytes: its number in the first byte, the rest a pattern of it (a
/// 4-byte key is still unique).
fn key(b: u8, size: usize) -> Vec<u8> {
    let n = b % 64;
    (0..size)
        .map(|j| {
            if j == 0 {
                n
            } else {
                n.wrapping_mul(37) ^ j as u8
            }
        })
        .collect()
}

fn value(i: usize, arg: u8, size: usize) -> Vec<u8> {
    (0..size).map(|j| (i * 31 + j * 7) as u8 ^ arg).collect()
}

fn full_compare(m: &FixedMap, model: &Model, at: usize) {
    model::check_whole(m.iter(), m.len().unwrap(), model, at);
}

fuzz_target!(|data: &[u8]| {
    for (k, v) in [(8, 8), (4, 4), (16, 16)] {
        run(data, k, v);
    }
});

fn run(data: &[u8], ks: usize, vs: usize) {
    let _ = std::fs::remove_file(path());
    let (mut s, mut m) = open(true, ks, vs);
    let mut model = Model::new();
    for (i, op) in data.chunks_exact(3).take(2000).enumerate() {
        let (kind, k, arg) = (op[0], key(op[1], ks), op[2]);
        let v = value(i, arg, vs);
        match kind % 16 {
            0 | 1 => {
                let o = m.put(&k, &v).unwrap();
                let had = model.insert(k, v).is_some();
                assert_eq!(o == PutOutcome::Replaced, had, "op {i}: put outcome");
            }
            2 => {
                let old = m.swap(&k, &v).unwrap();
                assert_eq!(old, model.insert(k, v), "op {i}: swap");
            }
            3 => {
                assert_eq!(m.get(&k).unwrap(), model.get(&k).cloned(), "op {i}: get");
                let mut buf = vec![0u8; vs];
                assert_eq!(
                    m.get_into(&k, &mut buf).unwrap(),
                    model.contains_key(&k),
                    "op {i}: get_into"
                );
                if let Some(want) = model.get(&k) {
                    assert_eq!(&buf, want, "op {i}: get_into's bytes");
                }
                assert_eq!(
                    m.contains(&k).unwrap(),
                    model.contains_key(&k),
                    "op {i}: contains"
                );
            }
            4 if arg % 2 == 0 => {
                let r = m.put_if_absent(&k, &v).unwrap();
                assert_eq!(r, !model.contains_key(&k), "op {i}: insert");
                model.entry(k).or_insert(v);
            }
            4 => {
                let r = m.get_or_insert(&k, &v).unwrap();
                assert_eq!(&r, model.entry(k).or_insert(v), "op {i}: get_or_insert");
            }
            5 => {
                let r = m.put_if_present(&k, &v).unwrap();
                assert_eq!(r, model.contains_key(&k), "op {i}: replace");
                if let Some(x) = model.get_mut(&k) {
                    *x = v;
                }
            }
            6 => assert_eq!(
                m.remove(&k).unwrap(),
                model.remove(&k).is_some(),
                "op {i}: remove"
            ),
            7 => assert_eq!(m.take(&k).unwrap(), model.remove(&k), "op {i}: take"),
            8 => model::check_cas(&mut model, k.clone(), &v, arg, i, |e, n| {
                m.compare_and_swap(&k, e, n).unwrap()
            }),
            9 => {
                // Absent: insert v; present: bump the first byte, or remove when it is odd.
                let f = |cur: Option<&[u8]>| match cur {
                    None => Some(v.clone()),
                    Some(c) if c[0] % 2 == 1 => None,
                    Some(c) => {
                        let mut n = c.to_vec();
                        n[0] = n[0].wrapping_add(1);
                        Some(n)
                    }
                };
                let r = m.update(&k, f).unwrap();
                let new = f(model.get(&k).map(|v| &v[..]));
                assert_eq!(r, new, "op {i}: update");
                match new {
                    Some(n) => model.insert(k, n),
                    None => model.remove(&k),
                };
            }
            10 => {
                let delta = arg as i64 - 100;
                let r = m.add(&k, delta);
                if vs != 8 {
                    assert!(
                        matches!(r, Err(shoal::Error::InvalidArgument(_))),
                        "op {i}: add on {vs}-byte values: {r:?}"
                    );
                } else {
                    let cur = model
                        .get(&k)
                        .map_or(0, |c| i64::from_le_bytes(c[..].try_into().unwrap()));
                    let n = cur.wrapping_add(delta);
                    assert_eq!(r.unwrap(), n, "op {i}: add");
                    model.insert(k, n.to_le_bytes().to_vec());
                }
            }
            11 => {
                let keys: Vec<Vec<u8>> = (0..(arg % 20) as usize + 1)
                    .map(|j| key(op[1].wrapping_add(j as u8 * 3), ks))
                    .collect();
                let refs: Vec<&[u8]> = keys.iter().map(|k| &k[..]).collect();
                match arg % 3 {
                    0 => {
                        let got = m.get_many(&refs).unwrap();
                        for (j, k) in keys.iter().enumerate() {
                            assert_eq!(got[j], model.get(k).cloned(), "op {i}: get_many [{j}]");
                        }
                    }
                    1 => {
                        let items: Vec<(&[u8], &[u8])> =
                            refs.iter().map(|k| (*k, &v[..])).collect();
                        m.put_many(&items).unwrap();
                        for k in keys {
                            model.insert(k, v.clone());
                        }
                    }
                    _ => {
                        let want = keys.iter().filter(|k| model.remove(*k).is_some()).count();
                        assert_eq!(
                            m.remove_many(&refs).unwrap(),
                            want as u64,
                            "op {i}: remove_many"
                        );
                    }
                }
            }
            12 => {
                // Wrong sizes are refused and change nothing.
                let long = value(i, arg, vs + 1 + arg as usize % 3);
                assert!(
                    matches!(m.put(&k, &long), Err(shoal::Error::InvalidArgument(_))),
                    "op {i}: a value of the wrong size"
                );
                assert!(
                    matches!(m.put(&k[1..], &v), Err(shoal::Error::InvalidArgument(_))),
                    "op {i}: a key of the wrong size"
                );
            }
            13 if arg % 16 == 0 => {
                m.clear().unwrap();
                model.clear();
            }
            13 | 14 => full_compare(&m, &model, i),
            _ => {
                // Close and reopen (the mapping is dropped and made again).
                drop(m);
                drop(s);
                (s, m) = open(false, ks, vs);
            }
        }
    }
    full_compare(&m, &model, usize::MAX);
    for (k, v) in &model {
        assert_eq!(m.get(k).unwrap().as_ref(), Some(v), "final get");
    }
    let r = s.check().unwrap();
    assert!(r.is_ok(), "Store::check at the end ({ks}+{vs}):\n{r}");
    drop(m);
    drop(s);
    let _ = std::fs::remove_file(path());
}
