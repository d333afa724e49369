//! File size under the soak's mix of record sizes, without the kills: `THREADS` threads
//! (default 6) each write their own `KEYS` keys (default 3,000), `OPS` operations each
//! (default 400,000): 80% puts, 20% removes; values of 0-48 bytes (70%), 48-400 (27%),
//! 400-3,000 (3%), and one put in 400 a large value of 70-210 kB (2-4 chunks of 64 KiB,
//! a run of its own); every thread compacts every 5,000 of its operations.
//! `cargo run --release -p shoal --example fragmentation -- [OPS] [SEED] [THREADS]`.
//!
//! It prints, every twentieth of the run, the file size beside the data, live, dead and
//! free bytes and the chunks cleaned so far, and at the end the maximum file size per third
//! of the run (the soak's rule: the last third must not pass the middle one by more than
//! 10%). It reproduces in a second what the soak (`scripts/soak.sh`) would take 20-30
//! minutes to show: were writers to skip their cleaning steps while another holds the
//! cleaner lock, dead space would run to 4-8x the live data (docs/RELIABILITY.md lists
//! the regression).

use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use shoal::{OpenMode, Options, Store};
use std::sync::atomic::{AtomicU64, Ordering::Relaxed};

const KEYS: u64 = 3000;
const CHUNK: u64 = 64 * 1024;

fn pad(rng: &mut StdRng) -> usize {
    if rng.random_range(0..400) == 0 {
        return 70_000 + rng.random_range(0..140_001);
    }
    match rng.random_range(0..100) {
        0..70 => rng.random_range(0..48),
        70..97 => rng.random_range(48..400),
        _ => rng.random_range(400..3000),
    }
}

fn main() {
    let mut args = std::env::args().skip(1);
    let ops: u64 = args.next().map_or(400_000, |s| s.parse().expect("OPS"));
    let seed: u64 = args
        .next()
        .map_or_else(rand::random, |s| s.parse().expect("SEED"));
    let threads: u64 = args.next().map_or(6, |s| s.parse().expect("THREADS"));
    println!("seed {seed}");
    let dir = tempfile::tempdir_in("/dev/shm")
        .or_else(|_| tempfile::tempdir())
        .unwrap();
    let opts = Options {
        chunk_size: CHUNK,
        ..Options::default()
    };
    let s = Store::open_with(dir.path().join("f.shoal"), &opts, OpenMode::CreateNew).unwrap();
    let m = s.map("t").unwrap();
    let done = AtomicU64::new(0);
    let mut sizes: Vec<u64> = Vec::new();
    std::thread::scope(|sc| {
        for t in 0..threads {
            let (m, s, done) = (&m, &s, &done);
            sc.spawn(move || {
                let mut rng = StdRng::seed_from_u64(seed ^ t.wrapping_mul(0x9E37_79B9_7F4A_7C15));
                let mut value = Vec::new();
                for i in 0..ops {
                    let key = format!("t{t}:k{:06}", rng.random_range(0..KEYS));
                    if rng.random_range(0..100) < 80 {
                        value.clear();
                        value.resize(16 + pad(&mut rng), (i & 0xff) as u8);
                        m.put(key.as_bytes(), &value).unwrap();
                    } else {
                        m.remove(key.as_bytes()).unwrap();
                    }
                    if i % 5000 == 4999 {
                        s.compact().unwrap();
                    }
                    done.fetch_add(1, Relaxed);
                }
            });
        }
        let total = ops * threads;
        let mut next = 0;
        loop {
            let d = done.load(Relaxed);
            let st = s.stats().unwrap();
            sizes.push(st.file_size);
            if d >= next {
                println!(
                    "{:>9} ops  file {:>6.1} MB  data {:>6.1}  live {:>6.1}  dead {:>5.1}  free {:>6.1}  cleaned {}",
                    d,
                    st.file_size as f64 / 1e6,
                    st.data_bytes as f64 / 1e6,
                    st.live_bytes as f64 / 1e6,
                    st.dead_bytes as f64 / 1e6,
                    st.free_bytes as f64 / 1e6,
                    st.chunks_cleaned,
                );
                next += total / 20;
            }
            if d >= total {
                break;
            }
            std::thread::sleep(std::time::Duration::from_millis(20));
        }
    });
    let n = sizes.len();
    let third =
        |r: std::ops::Range<usize>| sizes[r].iter().max().copied().unwrap_or(0) as f64 / 1e6;
    println!(
        "max file size per third: {:.1} / {:.1} / {:.1} MB",
        third(0..n / 3),
        third(n / 3..2 * n / 3),
        third(2 * n / 3..n)
    );
    let r = s.check().unwrap();
    assert!(r.is_ok(), "check: {r}");
}
