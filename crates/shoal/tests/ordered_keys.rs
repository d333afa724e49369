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
