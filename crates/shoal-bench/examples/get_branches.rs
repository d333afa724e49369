//! Single gets of Shoal and of hashbrown (foldhash, with the copy), each in its own function,
//! for counting branches and mispredictions per get with callgrind's branch simulator:
//!
//! ```sh
//! cargo build --release -p shoal-bench --example get_branches
//! valgrind --tool=callgrind --branch-sim=yes --callgrind-out-file=/tmp/cg.br \
//!     target/release/examples/get_branches 200000
//! callgrind_annotate --inclusive=yes /tmp/cg.br | grep 'get_branches::phase_'
//! ```
//!
//! Divide each phase's counts (Ir, Bc, Bcm) by KEYS (default 200,000): every key is got
//! once, in a shuffled order. The simulator's predictor is simpler than a real CPU's, so the
//! figures rank branches rather than measure them; `docs/benchmarks/single-get.md` has
//! the latest figures.
use std::hint::black_box;
type HbMap = hashbrown::HashMap<Vec<u8>, Vec<u8>, foldhash::fast::RandomState>;

#[inline(never)]
fn phase_shoal(m: &shoal::Map, keys: &[[u8; 16]], order: &[u32], buf: &mut Vec<u8>) -> u64 {
    let mut s = 0;
    for &i in order {
        if m.get_into(&keys[i as usize], buf).unwrap() {
            s += buf[buf.len() - 1] as u64;
        }
    }
    s
}

#[inline(never)]
fn phase_hb(hb: &HbMap, keys: &[[u8; 16]], order: &[u32], buf: &mut Vec<u8>) -> u64 {
    let mut s = 0;
    for &i in order {
        if let Some(v) = hb.get(&keys[i as usize][..]) {
            buf.clear();
            buf.extend_from_slice(v);
            s += black_box(&*buf)[buf.len() - 1] as u64;
        }
    }
    s
}

fn main() {
    let n: usize = std::env::args()
        .nth(1)
        .and_then(|a| a.parse().ok())
        .unwrap_or(200_000);
    let keys: Vec<[u8; 16]> = (0..n)
        .map(|i| format!("key:{i:012}").as_bytes().try_into().unwrap())
        .collect();
    let path = format!("/dev/shm/gb-{}.shoal", std::process::id());
    let st = shoal::Store::open_with(
        &path,
        &shoal::Options {
            max_size: 4 << 30,
            ..Default::default()
        },
        shoal::OpenMode::CreateNew,
    )
    .unwrap();
    let m = st.map("m").unwrap();
    let mut hb = HbMap::with_hasher(Default::default());
    for (i, k) in keys.iter().enumerate() {
        let v = [(i % 251) as u8; 16];
        m.put(k, &v).unwrap();
        hb.insert(k.to_vec(), v.to_vec());
    }
    let mut order: Vec<u32> = (0..n as u32).collect();
    let mut x = 0x9e3779b97f4a7c15u64;
    for i in (1..n).rev() {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        order.swap(i, (x % (i as u64 + 1)) as usize);
    }
    let mut buf = Vec::new();
    let a = phase_shoal(&m, &keys, &order, &mut buf);
    let b = phase_hb(&hb, &keys, &order, &mut buf);
    println!("{a} {b}");
    drop(m);
    drop(st);
    let _ = std::fs::remove_file(&path);
}
