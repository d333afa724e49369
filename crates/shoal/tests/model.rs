//! Model checking of the concurrency protocols with shuttle (randomized and PCT
//! schedulers over every interleaving point of the shared atomics).
//!
//! Runs only when the crate is built with `RUSTFLAGS="--cfg shuttle"` (the test script
//! does this in its own target directory): then the engine's shared memory is a heap array
//! of shuttle atomics, its futex waits are scheduler yields, and the real code of the
//! segment lock, the optimistic (seqlock) read path, the split and the iterator runs
//! under the model checker. Each test states the property it checks. A failure prints
//! shuttle's schedule, which replays it.
#![cfg(shuttle)]

use shoal::{Cond, IntCmp, MapOptions, Options, Store, TxnOp, TxnTarget};
use shuttle::thread;
use std::collections::HashSet;
use std::sync::Arc;

fn store() -> Store {
    let o = Options {
        chunk_size: 64 << 10,
        max_processes: 1,
        max_threads: 8,
        max_maps: 2,
        ..Options::default()
    };
    Store::in_memory(&o, 1 << 20).unwrap()
}

/// A tiny segment: one main bucket (15 slots) and one stash bucket, so a few dozen keys
/// force splits and directory doublings.
fn tiny() -> MapOptions {
    MapOptions {
        segment_buckets: 1,
        stash_buckets: 1,
        uids: false,
        ..Default::default()
    }
}

fn key(i: u32) -> Vec<u8> {
    format!("k{i}").into_bytes()
}

/// Values say which key and which version they are, so a torn or misplaced read shows.
fn val(i: u32, ver: u32) -> Vec<u8> {
    let mut v = i.to_le_bytes().to_vec();
    v.extend_from_slice(&ver.to_le_bytes());
    v.extend(std::iter::repeat_n(ver as u8, (ver % 7) as usize));
    v
}

fn parse(i: u32, v: &[u8]) -> u32 {
    assert!(v.len() >= 8, "short value {v:?}");
    assert_eq!(
        u32::from_le_bytes(v[0..4].try_into().unwrap()),
        i,
        "value of another key"
    );
    let ver = u32::from_le_bytes(v[4..8].try_into().unwrap());
    assert_eq!(v, &val(i, ver)[..], "torn value");
    ver
}

/// Writers update disjoint keys with increasing versions while a reader reads them:
/// every value read is whole and belongs to its key, and per key the versions a reader
/// sees never go back (reads are linearizable against single-writer keys).
#[test]
fn optimistic_reads_see_whole_monotonic_values() {
    shuttle::check_pct(
        || {
            let s = store();
            let m = s.map_with("m", &tiny(), true).unwrap();
            let mut hs = Vec::new();
            for w in 0..2u32 {
                let m = m.clone();
                hs.push(thread::spawn(move || {
                    for ver in 1..=3 {
                        for i in (w * 3)..(w * 3 + 3) {
                            m.put(&key(i), &val(i, ver)).unwrap();
                        }
                    }
                }));
            }
            let r = {
                let m = m.clone();
                thread::spawn(move || {
                    let mut last = [0u32; 6];
                    for _ in 0..3 {
                        for i in 0..6u32 {
                            if let Some(v) = m.get(&key(i)).unwrap() {
                                let ver = parse(i, &v);
                                assert!(
                                    ver >= last[i as usize],
                                    "key {i}: version went back {} -> {ver}",
                                    last[i as usize]
                                );
                                last[i as usize] = ver;
                            }
                        }
                    }
                })
            };
            for h in hs {
                h.join().unwrap();
            }
            r.join().unwrap();
            for i in 0..6 {
                assert_eq!(parse(i, &m.get(&key(i)).unwrap().unwrap()), 3);
            }
            assert!(s.check().unwrap().is_ok());
        },
        300,
        3,
    );
}

/// A key in a stash bucket, overwritten in place (same length, so no new record) while
/// another thread reads it: every value read is whole. Such a write bumps only the stash
/// bucket's seq, so a read that validated its home bucket but not the stash bucket it
/// found the key in would return a value torn between two versions.
#[test]
fn reads_of_a_stash_key_overwritten_in_place_are_whole() {
    // 24 bytes whatever the version, so that every overwrite goes in place.
    fn fixed_val(i: u32, ver: u32) -> Vec<u8> {
        let mut v = i.to_le_bytes().to_vec();
        v.extend_from_slice(&ver.to_le_bytes());
        v.extend(std::iter::repeat_n(ver as u8, 16));
        v
    }
    shuttle::check_pct(
        || {
            let s = store();
            let m = s.map_with("m", &tiny(), true).unwrap();
            // One main bucket of 15 slots: key 15 goes to the stash bucket.
            for i in 0..16 {
                m.put(&key(i), &fixed_val(i, 0)).unwrap();
            }
            assert_eq!(m.stats().unwrap().splits, 0);
            let w = {
                let m = m.clone();
                thread::spawn(move || {
                    for ver in 1..=2 {
                        m.put(&key(15), &fixed_val(15, ver)).unwrap();
                    }
                })
            };
            let rd = {
                let m = m.clone();
                thread::spawn(move || {
                    for _ in 0..2 {
                        let v = m.get(&key(15)).unwrap().expect("key 15 vanished");
                        let ver = u32::from_le_bytes(v[4..8].try_into().unwrap());
                        assert_eq!(v, fixed_val(15, ver), "torn value");
                    }
                })
            };
            w.join().unwrap();
            rd.join().unwrap();
            assert_eq!(m.get(&key(15)).unwrap().unwrap(), fixed_val(15, 2));
            let r = s.check().unwrap();
            assert!(r.is_ok(), "{r}");
        },
        1000,
        3,
    );
}

/// The same for a tagged fixed map (format version 8): a 16+16 map of one main bucket and
/// one stash bucket, whose sixteenth key lives in the stash; a writer replaces its value
/// in place (which bumps only the stash bucket's seq) while another thread reads it, by
/// the straight-line path or the general one (the model checker picks). Every value read
/// is whole: both halves of the same version.
#[test]
fn fixed_reads_of_a_stash_key_overwritten_in_place_are_whole() {
    let k = |i: u64| format!("fixed-key:{i:06}").into_bytes();
    let v = |ver: u64| {
        let mut b = ver.to_le_bytes().to_vec();
        b.extend_from_slice(&ver.to_le_bytes());
        b
    };
    shuttle::check_pct(
        move || {
            let s = store();
            let opts = shoal::FixedOptions {
                segment_buckets: 1,
                stash_buckets: 1,
                ..Default::default()
            };
            let m = s.fixed_map_with("f", 16, 16, &opts, true).unwrap();
            // Fifteen cells at home: key 15 goes to the stash bucket.
            for i in 0..16 {
                m.put(&k(i), &v(0)).unwrap();
            }
            assert_eq!(m.stats().unwrap().segments, 1);
            let w = {
                let m = m.clone();
                thread::spawn(move || {
                    for ver in 1..=2 {
                        m.put(&k(15), &v(ver)).unwrap();
                    }
                })
            };
            let rd = {
                let m = m.clone();
                thread::spawn(move || {
                    for _ in 0..2 {
                        let got = m.get(&k(15)).unwrap().expect("key 15 vanished");
                        assert_eq!(got[..8], got[8..], "torn value");
                    }
                })
            };
            w.join().unwrap();
            rd.join().unwrap();
            assert_eq!(m.get(&k(15)).unwrap(), Some(v(2)));
            let r = s.check().unwrap();
            assert!(r.is_ok(), "{r}");
        },
        1000,
        3,
    );
}

/// Splits race readers and writers: keys present before the race are found by a
/// concurrent reader at every moment, with a value of theirs, while another thread's
/// inserts split the segment (and double the directory) under it, and a third updates
/// some of the old keys. Afterwards the map holds exactly what was written.
#[test]
fn split_racing_readers_and_writers() {
    shuttle::check_pct(
        || {
            let s = store();
            let m = s.map_with("m", &tiny(), true).unwrap();
            for i in 0..12 {
                m.put(&key(i), &val(i, 1)).unwrap();
            }
            let ins = {
                let m = m.clone();
                thread::spawn(move || {
                    for i in 100..130 {
                        assert!(m.put_if_absent(&key(i), &val(i, 1)).unwrap());
                    }
                })
            };
            let upd = {
                let m = m.clone();
                thread::spawn(move || {
                    for i in 0..4 {
                        m.put(&key(i), &val(i, 2)).unwrap();
                    }
                })
            };
            let rd = {
                let m = m.clone();
                thread::spawn(move || {
                    for round in 0..2 {
                        for i in 0..12 {
                            let v = m.get(&key(i)).unwrap();
                            let v = v.unwrap_or_else(|| {
                                panic!("round {round}: key {i} vanished during a split")
                            });
                            parse(i, &v);
                        }
                    }
                })
            };
            ins.join().unwrap();
            upd.join().unwrap();
            rd.join().unwrap();
            assert_eq!(m.len().unwrap(), 42);
            assert!(m.stats().unwrap().splits > 0);
            for i in 0..12 {
                let want = if i < 4 { 2 } else { 1 };
                assert_eq!(parse(i, &m.get(&key(i)).unwrap().unwrap()), want);
            }
            let r = s.check().unwrap();
            assert!(r.is_ok(), "{r}");
        },
        1000,
        3,
    );
}

/// Iteration during splits: every key present for the whole iteration is returned
/// exactly once, and nothing is returned twice, while inserts split segments.
#[test]
fn iteration_during_splits_sees_each_stable_key_once() {
    shuttle::check_pct(
        || {
            let s = store();
            let m = s.map_with("m", &tiny(), true).unwrap();
            for i in 0..20 {
                m.put(&key(i), &val(i, 1)).unwrap();
            }
            let ins = {
                let m = m.clone();
                thread::spawn(move || {
                    for i in 200..240 {
                        m.put(&key(i), &val(i, 1)).unwrap();
                    }
                })
            };
            let it = {
                let m = m.clone();
                thread::spawn(move || {
                    let mut seen = HashSet::new();
                    for item in m.iter() {
                        let (k, _) = item.unwrap();
                        assert!(
                            seen.insert(k.clone()),
                            "key {:?} returned twice",
                            String::from_utf8_lossy(&k)
                        );
                    }
                    for i in 0..20 {
                        assert!(seen.contains(&key(i)), "stable key {i} missed");
                    }
                })
            };
            ins.join().unwrap();
            it.join().unwrap();
            let r = s.check().unwrap();
            assert!(r.is_ok(), "{r}");
        },
        1000,
        3,
    );
}

/// Writers contending on one segment lock (and the allocator's lock) never lose an
/// update: concurrent read-modify-write through `insert`/`replace`/`remove` keeps exactly
/// one live entry per key, and counters stay exact.
#[test]
fn contended_segment_lock_keeps_counts_exact() {
    shuttle::check_pct(
        || {
            let s = store();
            let m = s.map_with("m", &tiny(), true).unwrap();
            let hs: Vec<_> = (0..3u32)
                .map(|t| {
                    let m = m.clone();
                    thread::spawn(move || {
                        for i in 0..4u32 {
                            m.put(&key(i), &val(i, t + 1)).unwrap();
                            if i % 2 == t % 2 {
                                m.remove(&key(i)).unwrap();
                            }
                        }
                    })
                })
                .collect();
            for h in hs {
                h.join().unwrap();
            }
            let n = (0..4)
                .filter(|i| m.get(&key(*i)).unwrap().is_some())
                .count() as u64;
            assert_eq!(m.len().unwrap(), n);
            let r = s.check().unwrap();
            assert!(r.is_ok(), "{r}");
        },
        300,
        3,
    );
}

/// Fixed-size maps: lock-free in-place adds (a `fetch_add` on the value word, no lock)
/// racing a writer that removes an added-to key and inserts another into the freed cell,
/// then splits the tiny segment, and a reader. No add is lost (key 1, which only moves,
/// counts every add), none lands on another key's cell (key 100 keeps exactly its value),
/// the reader sees key 1 only grow, and the store checks clean.
#[test]
fn fixed_lock_free_adds_race_cell_reuse_and_splits() {
    let k = |i: u64| i.to_le_bytes();
    let body = move || {
        let s = store();
        let opts = shoal::FixedOptions {
            segment_buckets: 1,
            stash_buckets: 1,
            ..Default::default()
        };
        let m = s.fixed_map_with("f", 8, 8, &opts, true).unwrap();
        for i in 0..4 {
            m.put(&k(i), &0u64.to_le_bytes()).unwrap();
        }
        let adder = {
            let m = m.clone();
            thread::spawn(move || {
                for i in 0..6u64 {
                    m.add(&k(i % 2), 1).unwrap();
                }
            })
        };
        let writer = {
            let m = m.clone();
            thread::spawn(move || {
                m.remove(&k(0)).unwrap();
                m.put(&k(100), &100u64.to_le_bytes()).unwrap();
                for i in 200..216u64 {
                    m.put(&k(i), &i.to_le_bytes()).unwrap();
                }
            })
        };
        let reader = {
            let m = m.clone();
            thread::spawn(move || {
                let mut last = 0u64;
                for _ in 0..4 {
                    let v = m.get(&k(1)).unwrap().unwrap();
                    let v = u64::from_le_bytes(v.try_into().unwrap());
                    assert!(v >= last, "counter went back from {last} to {v}");
                    last = v;
                }
            })
        };
        for h in [adder, writer, reader] {
            h.join().unwrap();
        }
        let get = |i: u64| {
            m.get(&k(i))
                .unwrap()
                .map(|v| u64::from_le_bytes(v.try_into().unwrap()))
        };
        assert_eq!(get(1), Some(3), "an add to a moving key was lost");
        assert_eq!(get(100), Some(100), "an add landed on a reused cell");
        for i in 200..216u64 {
            assert_eq!(get(i), Some(i));
        }
        assert!(get(0).is_none_or(|v| (1..=3).contains(&v)));
        let r = s.check().unwrap();
        assert!(r.is_ok(), "{r}");
    };
    shuttle::check_random(body, 300);
    shuttle::check_pct(body, 300, 3);
}

/// Fixed-size maps grow by moving a directory group's cells to another segment (format
/// version 7): two writers insert into 1+1-bucket segments at once, so that moves run
/// into the open segment, find it held by the other writer (and take a new one), and
/// double the directory; a reader looks up keys that are present throughout, and an
/// iterator walks the map meanwhile. Every stable key is always found with its value,
/// the iterator sees each of them exactly once (and no key twice), and the store checks
/// clean. With 8-byte keys (compared with every cell of a bucket) and 16-byte keys in a
/// map with tags (format version 8: only the cells whose tag matches are compared; moves
/// and inserts write a cell's tag before its bit is set).
fn group_moves_race_readers_writers_and_iteration(ks: usize, vs: usize, per_writer: u64) {
    // Keys and values of `ks` and `vs` bytes, their first 8 the number.
    let k = move |i: u64| {
        let mut b = vec![0xa5u8; ks];
        b[..8].copy_from_slice(&i.to_le_bytes());
        b
    };
    let v = move |i: u64| {
        let mut b = vec![0x3cu8; vs];
        b[..8].copy_from_slice(&i.to_le_bytes());
        b
    };
    let body = move || {
        let s = store();
        let opts = shoal::FixedOptions {
            segment_buckets: 1,
            stash_buckets: 1,
            ..Default::default()
        };
        let m = s.fixed_map_with("f", ks, vs, &opts, true).unwrap();
        let stable = 0..6u64;
        for i in stable.clone() {
            m.put(&k(i), &v(i * 10)).unwrap();
        }
        let writers: Vec<_> = (0..2u64)
            .map(|w| {
                let m = m.clone();
                thread::spawn(move || {
                    for i in 0..per_writer {
                        let key = 100 + w * 100 + i;
                        m.put(&k(key), &v(key)).unwrap();
                    }
                })
            })
            .collect();
        let reader = {
            let m = m.clone();
            thread::spawn(move || {
                for i in [0u64, 3, 5, 1] {
                    assert_eq!(m.get(&k(i)).unwrap(), Some(v(i * 10)), "key {i} lost");
                }
            })
        };
        let walker = {
            let m = m.clone();
            thread::spawn(move || {
                let mut seen = HashSet::new();
                for item in m.iter() {
                    let (key, _) = item.unwrap();
                    assert!(seen.insert(key.clone()), "key {key:?} seen twice");
                }
                for i in 0..6u64 {
                    assert!(seen.contains(&k(i)), "stable key {i} not seen");
                }
            })
        };
        for h in writers.into_iter().chain([reader, walker]) {
            h.join().unwrap();
        }
        assert_eq!(m.len().unwrap(), 6 + 2 * per_writer);
        for w in 0..2u64 {
            for i in 0..per_writer {
                let key = 100 + w * 100 + i;
                assert_eq!(m.get(&k(key)).unwrap(), Some(v(key)));
            }
        }
        let r = s.check().unwrap();
        assert!(r.is_ok(), "{r}");
    };
    shuttle::check_random(body, 300);
    shuttle::check_pct(body, 300, 3);
}

#[test]
fn fixed_group_moves_race_readers_writers_and_iteration() {
    group_moves_race_readers_writers_and_iteration(8, 8, 12);
}

#[test]
fn fixed_group_moves_with_tags_race_readers_writers_and_iteration() {
    // 15 cells per bucket: 2 x 40 keys fill several 1+1-bucket segments.
    group_moves_race_readers_writers_and_iteration(16, 16, 40);
}

/// The transfers of the transaction models, in two threads over accounts `0..n` of `m`
/// (keys: little-endian u64, values: i64): one moves 4 from account `i` to `i + 3` (when
/// it holds at least 4) three times with `transaction`, the other 3 the other way with
/// `optimistic`.
fn transfer_threads<M>(s: &Arc<Store>, m: &M, n: u64) -> [thread::JoinHandle<()>; 2]
where
    M: TxnTarget + Clone + Send + 'static,
{
    let k = |i: u64| i.to_le_bytes();
    let locked = {
        let (s, m) = (s.clone(), m.clone());
        thread::spawn(move || {
            for i in 0..3u64 {
                let (a, b) = (i % n, (i + 3) % n);
                s.transaction()
                    .when(Cond::int(&m, &k(a), IntCmp::Ge, 4))
                    .then(TxnOp::add(&m, &k(a), -4))
                    .then(TxnOp::add(&m, &k(b), 4))
                    .commit()
                    .unwrap();
            }
        })
    };
    let optimistic = {
        let (s, m) = (s.clone(), m.clone());
        thread::spawn(move || {
            for i in 0..3u64 {
                let (a, b) = ((i + 3) % n, i % n);
                s.optimistic(|r| {
                    let (x, y) = (r.get_i64(&m, &k(a))?, r.get_i64(&m, &k(b))?);
                    if x >= 3 {
                        r.write(TxnOp::put(&m, &k(a), &(x - 3).to_le_bytes()));
                        r.write(TxnOp::put(&m, &k(b), &(y + 3).to_le_bytes()));
                    }
                    Ok(())
                })
                .unwrap();
            }
        })
    };
    [locked, optimistic]
}

/// Multi-key transactions (DESIGN.md, "Multi-key transactions"): two threads transfer
/// between accounts spread over several 1+1-bucket segments, in opposite directions (so
/// their lock sets overlap in both orders: a wrong lock order deadlocks here), one with
/// `transaction`, one with `optimistic`; a third inserts keys, moving groups out of the
/// accounts' segments while the transfers lock them; a fourth reads all accounts with
/// `snapshot_get`. Every snapshot sums to the total, the final sum is exact, and the
/// store checks clean.
#[test]
fn transactions_race_growth_and_snapshot_readers() {
    use shoal::FixedMap;
    let k = |i: u64| i.to_le_bytes();
    const N: u64 = 6;
    let body = move || {
        let s = std::sync::Arc::new(store());
        let opts = shoal::FixedOptions {
            segment_buckets: 1,
            stash_buckets: 1,
            ..Default::default()
        };
        let m = s.fixed_map_with("f", 8, 8, &opts, true).unwrap();
        for i in 0..N {
            m.put(&k(i), &10i64.to_le_bytes()).unwrap();
        }
        let [locked, optimistic] = transfer_threads(&s, &m, N);
        let grower = {
            let m = m.clone();
            thread::spawn(move || {
                for i in 100..112u64 {
                    m.put(&k(i), &0i64.to_le_bytes()).unwrap();
                }
            })
        };
        let reader = {
            let (s, m) = (s.clone(), m.clone());
            thread::spawn(move || {
                let keys: Vec<[u8; 8]> = (0..N).map(k).collect();
                for _ in 0..3 {
                    let req: Vec<(&FixedMap, &[u8])> = keys.iter().map(|x| (&m, &x[..])).collect();
                    let sum: i64 = s
                        .snapshot_get(&req)
                        .unwrap()
                        .iter()
                        .map(|v| i64::from_le_bytes(v.as_deref().unwrap().try_into().unwrap()))
                        .sum();
                    assert_eq!(sum, 10 * N as i64, "a snapshot saw part of a transfer");
                }
            })
        };
        for h in [locked, optimistic, grower, reader] {
            h.join().unwrap();
        }
        let sum: i64 = (0..N)
            .map(|i| i64::from_le_bytes(m.get(&k(i)).unwrap().unwrap().try_into().unwrap()))
            .sum();
        assert_eq!(sum, 10 * N as i64);
        let r = s.check().unwrap();
        assert!(r.is_ok(), "{r}");
    };
    shuttle::check_random(body, 200);
    shuttle::check_pct(body, 200, 3);
}

/// The commit protocol over a variable-size map with UIDs (kinds/varmap/txn.rs): the
/// transfers of `transactions_race_growth_and_snapshot_readers` over accounts of such a
/// map of 1+1-bucket segments (8-byte balances overwritten in place through the redo
/// list, each UID entry's version busy meanwhile and moved by every transfer), racing an
/// inserter that splits the
/// accounts' segments and a reader of every account through its UID and then with
/// `snapshot_get`. Every snapshot sums to the total, every UID read is whole (a
/// transfer's record, never a torn one), the end sum is exact, each account's UID still
/// names it, and the store checks clean.
#[test]
fn variable_map_transactions_race_growth_and_snapshot_readers() {
    use shoal::Map;
    let k = |i: u64| i.to_le_bytes();
    let int = |v: &[u8]| i64::from_le_bytes(v.try_into().unwrap());
    const N: u64 = 6;
    let body = move || {
        let s = std::sync::Arc::new(store());
        let opts = MapOptions {
            uids: true,
            ..tiny()
        };
        let m = s.map_with("v", &opts, true).unwrap();
        for i in 0..N {
            m.put(&k(i), &10i64.to_le_bytes()).unwrap();
        }
        let uids: Vec<_> = (0..N).map(|i| m.uid(&k(i)).unwrap().unwrap()).collect();
        let [locked, optimistic] = transfer_threads(&s, &m, N);
        let grower = {
            let m = m.clone();
            thread::spawn(move || {
                for i in 100..116u64 {
                    m.put(&k(i), &0i64.to_le_bytes()).unwrap();
                }
            })
        };
        let reader = {
            let (s, m, uids) = (s.clone(), m.clone(), uids.clone());
            thread::spawn(move || {
                let keys: Vec<[u8; 8]> = (0..N).map(k).collect();
                for _ in 0..2 {
                    for (i, u) in uids.iter().enumerate() {
                        let v = m.get_by_uid(*u).unwrap();
                        assert_eq!(v.len(), 8, "account {i} read by UID: {v:?}");
                    }
                    let req: Vec<(&Map, &[u8])> = keys.iter().map(|x| (&m, &x[..])).collect();
                    let sum: i64 = s
                        .snapshot_get(&req)
                        .unwrap()
                        .iter()
                        .map(|v| int(v.as_deref().unwrap()))
                        .sum();
                    assert_eq!(sum, 10 * N as i64, "a snapshot saw part of a transfer");
                }
            })
        };
        for h in [locked, optimistic, grower, reader] {
            h.join().unwrap();
        }
        let sum: i64 = (0..N).map(|i| int(&m.get(&k(i)).unwrap().unwrap())).sum();
        assert_eq!(sum, 10 * N as i64);
        for (i, u) in uids.iter().enumerate() {
            assert_eq!(
                m.uid(&k(i as u64)).unwrap(),
                Some(*u),
                "account {i}'s UID moved"
            );
        }
        let r = s.check().unwrap();
        assert!(r.is_ok(), "{r}");
    };
    shuttle::check_random(body, 200);
    shuttle::check_pct(body, 200, 3);
}
