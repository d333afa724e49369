//! Space overhead of fixed-size and inline maps: file bytes per entry beyond the key and
//! value bytes, for N entries (default 1,000,000; `cargo run --release -p shoal --example
//! fixed_overhead -- N [KEY+VALUE ...]`, e.g. `-- 1000000 40+24 3+5`). The baseline is the file with the empty map created. Also
//! prints rough single-thread timings of gets and adds on an inline u64 -> u64 map and of
//! gets on a variable-size map with the same entries (noisy on a shared machine).

use shoal::{OpenMode, Options, Store};

fn measure(n: u64, ks: usize, vs: usize) {
    let dir = tempfile::tempdir_in("/dev/shm")
        .or_else(|_| tempfile::tempdir())
        .unwrap();
    let s = Store::open_with(
        dir.path().join("o.shoal"),
        &Options::default(),
        OpenMode::CreateNew,
    )
    .unwrap();
    let m = s.fixed_map("m", ks, vs).unwrap();
    let base = s.stats().unwrap().file_size;
    let mut key = vec![0u8; ks];
    let val = vec![7u8; vs];
    for i in 0..n {
        let b = i.to_le_bytes();
        for (j, k) in key.iter_mut().enumerate() {
            *k = b[j % 8] ^ (j / 8) as u8;
        }
        m.put(&key, &val).unwrap();
    }
    let st = m.stats().unwrap();
    assert_eq!(st.entries, n);
    let file = s.stats().unwrap().file_size;
    let per = (file - base) as f64 / n as f64;
    println!(
        "{ks:>3}+{vs:<3} N={n}: file {file} B, baseline {base} B, {per:.2} B/entry, overhead {:.2} B/entry \
         (cells {} B, {} per {}-B bucket, {} segments, load {:.1}%, segment bytes/entry {:.2})",
        per - (ks + vs) as f64,
        st.cell_bytes,
        st.cells_per_bucket,
        st.bucket_bytes,
        st.segments,
        100.0 * n as f64 / st.capacity as f64,
        st.segment_bytes as f64 / n as f64,
    );
}

fn main() {
    let n: u64 = std::env::args()
        .nth(1)
        .map(|s| s.parse().expect("N"))
        .unwrap_or(1_000_000);
    // Optional geometries after N (`40+24 100+100`): only those, without the timings.
    let geos: Vec<(usize, usize)> = std::env::args()
        .skip(2)
        .map(|g| {
            let (k, v) = g
                .split_once('+')
                .expect("a geometry is KEY+VALUE, e.g. 40+24");
            (k.parse().expect("key size"), v.parse().expect("value size"))
        })
        .collect();
    if !geos.is_empty() {
        for (ks, vs) in geos {
            measure(n, ks, vs);
        }
        return;
    }
    for (ks, vs) in [(16, 16), (4, 4), (8, 8), (4, 8)] {
        measure(n, ks, vs);
    }
    timings(n);
}

fn timings(n: u64) {
    use std::time::Instant;
    let dir = tempfile::tempdir_in("/dev/shm")
        .or_else(|_| tempfile::tempdir())
        .unwrap();
    let s = Store::open_with(
        dir.path().join("t.shoal"),
        &Options::default(),
        OpenMode::CreateNew,
    )
    .unwrap();
    let f = s.fixed_map("inline", 8, 8).unwrap();
    let v = s.map("variable").unwrap();
    // Keys in a scrambled order, so lookups miss the cache like random ones.
    let keys: Vec<[u8; 8]> = (0..n)
        .map(|i| (i.wrapping_mul(0x9e37_79b9_7f4a_7c15)).to_le_bytes())
        .collect();
    let t = Instant::now();
    for k in &keys {
        f.put(k, &1u64.to_le_bytes()).unwrap();
    }
    let put_f = t.elapsed().as_nanos() as f64 / n as f64;
    for k in &keys {
        v.put(k, &1u64.to_le_bytes()).unwrap();
    }
    let order: Vec<usize> = (0..n as usize)
        .map(|i| (i.wrapping_mul(7_919)) % n as usize)
        .collect();
    let mut buf = [0u8; 8];
    let t = Instant::now();
    for &i in &order {
        assert!(f.get_into(&keys[i], &mut buf).unwrap());
    }
    let get_f = t.elapsed().as_nanos() as f64 / n as f64;
    let mut vb = Vec::new();
    let t = Instant::now();
    for &i in &order {
        assert!(v.get_into(&keys[i], &mut vb).unwrap());
    }
    let get_v = t.elapsed().as_nanos() as f64 / n as f64;
    let t = Instant::now();
    for &i in &order {
        f.add(&keys[i], 1).unwrap();
    }
    let add_f = t.elapsed().as_nanos() as f64 / n as f64;
    let t = Instant::now();
    for &i in &order {
        v.add(&keys[i], 1).unwrap();
    }
    let add_v = t.elapsed().as_nanos() as f64 / n as f64;
    println!(
        "timings, N={n}, one thread: inline 8+8 put {put_f:.0} ns, get {get_f:.0} ns, add {add_f:.0} ns; \
         variable map get {get_v:.0} ns, add {add_v:.0} ns"
    );
}
