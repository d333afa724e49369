//! Ordered maps compare keys bytewise in place in the file, eight bytes at a time: keys that
//! share long prefixes (and so the four-byte heads in their slots), differ in any byte, at
//! any length, with bytes 0x00 and 0xFF, sort as a `BTreeMap` sorts them, and gets, bounded
//! scans both ways and `get_into` find exactly them.

use shoal::Store;
use std::collections::BTreeMap;

fn rng(seed: &mut u64) -> u64 {
    *seed ^= *seed << 13;
    *seed ^= *seed >> 7;
    *seed ^= *seed << 17;
    *seed
}

#[test]
fn keys_that_share_prefixes_sort_bytewise_in_gets_and_scans() {
    let d = tempfile::tempdir_in("/dev/shm").unwrap();
    let s = Store::open(d.path().join("k.shoal")).unwrap();
    let m = s.ordered_map("k").unwrap();
    let mut model = BTreeMap::new();
    let mut seed = 0x5eed_u64;
    let mut w = m.write().unwrap();
    for _ in 0..6000 {
        let r = rng(&mut seed);
        // A common prefix of 0..=19 bytes, then 0..=3 bytes from {0x00, 0x01, 0x7f, 0x80,
        // 0xff}: keys differ at every offset of an 8-byte word, and by length alone.
        let plen = (r % 20) as usize;
        let mut k = b"key:0000000000000000"[..plen].to_vec();
        for j in 0..(r >> 8) % 4 {
            k.push([0x00, 0x01, 0x7f, 0x80, 0xff][((r >> (16 + 3 * j)) % 5) as usize]);
        }
        let v = (r >> 40).to_le_bytes()[..(r >> 60) as usize % 9].to_vec();
        w.put(&k, &v).unwrap();
        model.insert(k, v);
    }
    w.commit().unwrap();
    let snap = m.snapshot().unwrap();
    let want: Vec<(Vec<u8>, Vec<u8>)> = model.clone().into_iter().collect();
    assert_eq!(snap.range(None, None).unwrap(), want);
    let mut buf = Vec::new();
    for (k, v) in &model {
        assert_eq!(snap.get(k).unwrap().as_ref(), Some(v), "get {k:x?}");
        assert!(snap.get_into(k, &mut buf).unwrap(), "get_into {k:x?}");
        assert_eq!(&buf, v);
        // Bounded scans from this key, both ways.
        let fwd: Vec<_> = model
            .range(k.clone()..)
            .take(5)
            .map(|(a, _)| a.clone())
            .collect();
        let mut got = Vec::new();
        snap.for_each(Some(k), None, false, |a, _| {
            got.push(a.to_vec());
            got.len() < 5
        })
        .unwrap();
        assert_eq!(got, fwd, "forward from {k:x?}");
        let back: Vec<_> = model
            .range(..k.clone())
            .rev()
            .take(5)
            .map(|(a, _)| a.clone())
            .collect();
        got.clear();
        snap.for_each(None, Some(k), true, |a, _| {
            got.push(a.to_vec());
            got.len() < 5
        })
        .unwrap();
        assert_eq!(got, back, "backward from {k:x?}");
        // A key just past this one (absent unless the model has it).
        let mut k2 = k.clone();
        k2.push(0x42);
        assert_eq!(snap.get(&k2).unwrap(), model.get(&k2).cloned());
    }
}

/// `OrderedMap::get` reads without a pin and checks afterwards that no commit came
/// between: while a writer rewrites every value over and over (each commit frees the pages
/// it replaced, and with no pin they are reused at once), every get must return a whole
/// value of one commit, never bytes of a page being rewritten.
#[test]
fn gets_without_a_pin_never_see_a_page_being_rewritten() {
    use std::sync::atomic::{AtomicBool, Ordering};
    let d = tempfile::tempdir_in("/dev/shm").unwrap();
    let path = d.path().join("g.shoal");
    let s = Store::open(&path).unwrap();
    let m = s.ordered_map("g").unwrap();
    let keys: Vec<Vec<u8>> = (0..3000u32)
        .map(|i| format!("key:{i:08}").into_bytes())
        .collect();
    let value = |gen: u8, len: usize| vec![gen; len];
    let mut w = m.write().unwrap();
    for k in &keys {
        w.put(k, &value(0, 40)).unwrap();
    }
    w.commit().unwrap();
    let stop = AtomicBool::new(false);
    std::thread::scope(|sc| {
        let writer = sc.spawn(|| {
            // Generations of different lengths, so that a rewritten page holds entries at
            // other offsets than the page a reader may be in.
            for gen in 1..=60u8 {
                let mut w = m.write().unwrap();
                for k in &keys {
                    w.put(k, &value(gen, 8 + (gen as usize * 7) % 90)).unwrap();
                }
                w.commit().unwrap();
            }
            stop.store(true, Ordering::Release);
        });
        let mut readers = Vec::new();
        for r in 0..2u64 {
            let (m, keys, stop) = (&m, &keys, &stop);
            readers.push(sc.spawn(move || {
                let mut seed = 0x9e37_79b9 ^ r;
                let mut buf = Vec::new();
                let mut n = 0u64;
                while !stop.load(Ordering::Acquire) {
                    seed ^= seed << 13;
                    seed ^= seed >> 7;
                    seed ^= seed << 17;
                    let k = &keys[(seed % keys.len() as u64) as usize];
                    assert!(
                        m.get_into(k, &mut buf).unwrap(),
                        "{k:?} missing (seed {seed})"
                    );
                    let gen = buf[0];
                    assert_eq!(
                        buf.len(),
                        if gen == 0 {
                            40
                        } else {
                            8 + (gen as usize * 7) % 90
                        }
                    );
                    assert!(
                        buf.iter().all(|&b| b == gen),
                        "a torn value {buf:?} (seed {seed})"
                    );
                    n += 1;
                }
                n
            }));
        }
        writer.join().unwrap();
        for r in readers {
            assert!(r.join().unwrap() > 0);
        }
    });
}

/// Keys up to 16 KiB, most longer than a page keeps whole and sharing prefixes of up to
/// 3000 bytes (so compares, separators and seeks reach the overflow pages), through every
/// read and write path: puts, removes, appends, compare-and-swap, range removal, nested
/// transactions kept and undone, an aborted one; gets, cursors both ways with seeks,
/// ranges both ways, prefixes, counts and estimates; then `check`. A key one byte past
/// the limit is refused.
#[test]
fn long_keys_follow_a_btreemap_through_every_path() {
    use shoal::{Error, MAX_ORDERED_KEY};
    let d = tempfile::tempdir_in("/dev/shm").unwrap();
    let s = Store::open(d.path().join("long.shoal")).unwrap();
    let m = s.ordered_map("long").unwrap();
    let mut model: BTreeMap<Vec<u8>, Vec<u8>> = BTreeMap::new();
    let mut seed = 0x10_4e_u64;
    // A shared prefix of one of a few lengths (within the 64 bytes kept in the page,
    // past it, past a page's whole key), then a distinguishing tail.
    let key = |r: u64| {
        let plen = [0usize, 10, 64, 70, 984, 1200, 3000][(r % 7) as usize];
        let mut k = vec![b'p'; plen];
        k.extend_from_slice(format!("{:x}", (r >> 8) % 500).as_bytes());
        k.resize(k.len() + ((r >> 20) % 4) as usize * 700, b'~');
        k
    };
    for round in 0..6 {
        let mut w = m.write().unwrap();
        for _ in 0..300 {
            let r = rng(&mut seed);
            let k = key(r);
            let v = vec![(r >> 40) as u8; (r >> 48) as usize % 1500];
            match (r >> 56) % 6 {
                0 => {
                    assert_eq!(w.remove(&k).unwrap(), model.remove(&k).is_some());
                }
                1 => {
                    let cur = model.get(&k).cloned();
                    assert!(w.compare_and_swap(&k, cur.as_deref(), Some(&v)).unwrap());
                    model.insert(k, v);
                }
                _ => {
                    w.put(&k, &v).unwrap();
                    model.insert(k, v);
                }
            }
        }
        // A nested transaction kept, and one undone.
        {
            let mut n = w.nested();
            let k = key(rng(&mut seed));
            n.put(&k, b"kept").unwrap();
            n.commit();
            model.insert(k, b"kept".to_vec());
        }
        {
            let mut n = w.nested();
            let first = model.keys().next().unwrap().clone();
            n.remove(&first).unwrap();
            n.put(&key(rng(&mut seed)), b"undone").unwrap();
        }
        if round == 2 {
            let lo = model.keys().nth(model.len() / 4).unwrap().clone();
            let hi = model.keys().nth(model.len() / 2).unwrap().clone();
            let gone = model.range(lo.clone()..hi.clone()).count() as u64;
            assert_eq!(w.remove_range(Some(&lo), Some(&hi)).unwrap(), gone);
            model.retain(|k, _| *k < lo || *k >= hi);
        }
        // Appends past the largest key.
        let mut last = model.keys().next_back().unwrap().clone();
        for j in 0..40 {
            last.extend_from_slice(format!("{j:02}").as_bytes());
            last.truncate(MAX_ORDERED_KEY);
            w.append(&last, b"appended").unwrap();
            model.insert(last.clone(), b"appended".to_vec());
            *last.last_mut().unwrap() = b'~';
        }
        w.commit().unwrap();
        // An aborted transaction leaves nothing.
        let mut w = m.write().unwrap();
        w.put(&key(rng(&mut seed)), b"aborted").unwrap();
        let any = model.keys().next().unwrap().clone();
        w.remove(&any).unwrap();
        w.abort();
    }
    let longest = vec![b'z'; MAX_ORDERED_KEY];
    m.put(&longest, b"longest").unwrap();
    model.insert(longest.clone(), b"longest".to_vec());
    assert!(matches!(
        m.put(&vec![b'z'; MAX_ORDERED_KEY + 1], b""),
        Err(Error::InvalidArgument(_))
    ));
    assert!(model.keys().filter(|k| k.len() > 984).count() > 300);

    let snap = m.snapshot().unwrap();
    let want: Vec<(Vec<u8>, Vec<u8>)> = model.clone().into_iter().collect();
    assert_eq!(snap.range(None, None).unwrap(), want);
    let mut rev = want.clone();
    rev.reverse();
    assert_eq!(snap.range_rev(None, None).unwrap(), rev);
    for (k, v) in &model {
        assert_eq!(m.get(k).unwrap().as_ref(), Some(v));
    }
    let mut c = snap.cursor();
    let mut fwd = Vec::new();
    let mut on = c.first().unwrap();
    while on {
        fwd.push(c.key().unwrap().to_vec());
        on = c.move_next().unwrap();
    }
    assert_eq!(fwd, model.keys().cloned().collect::<Vec<_>>());
    let mut back = Vec::new();
    on = c.last().unwrap();
    while on {
        back.push(c.key().unwrap().to_vec());
        on = c.move_prev().unwrap();
    }
    back.reverse();
    assert_eq!(back, fwd);
    for _ in 0..400 {
        let r = rng(&mut seed);
        let mut probe = key(r);
        if r % 3 == 0 {
            probe.pop();
        }
        let ge = model.range(probe.clone()..).next().map(|(k, _)| k.clone());
        let le = model
            .range(..=probe.clone())
            .next_back()
            .map(|(k, _)| k.clone());
        assert_eq!(
            c.seek_ge(&probe)
                .unwrap()
                .then(|| c.key().unwrap().to_vec()),
            ge
        );
        assert_eq!(
            c.seek_le(&probe)
                .unwrap()
                .then(|| c.key().unwrap().to_vec()),
            le
        );
        assert_eq!(c.seek(&probe).unwrap(), model.contains_key(&probe));
        assert_eq!(m.get(&probe).unwrap(), model.get(&probe).cloned());
        let hi = key(rng(&mut seed));
        let want = if probe < hi {
            model.range(probe.clone()..hi.clone()).count() as u64
        } else {
            0
        };
        assert_eq!(snap.count_range(Some(&probe), Some(&hi)).unwrap(), want);
        assert_eq!(m.estimate_range(Some(&probe), Some(&hi)).unwrap(), want);
        let pre = &probe[..probe.len().min(1100)];
        let got: Vec<Vec<u8>> = snap.prefix(pre).unwrap().map(|e| e.unwrap().0).collect();
        let want: Vec<Vec<u8>> = model
            .keys()
            .filter(|k| k.starts_with(pre))
            .cloned()
            .collect();
        assert_eq!(got, want);
    }
    drop(c);
    drop(snap);
    let r = s.check().unwrap();
    assert!(r.is_ok(), "{r}");
}
