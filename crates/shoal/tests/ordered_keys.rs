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
