//! File size under overwrites of large values of varying sizes: `KEYS` keys, each put
//! again and again with a value of a random length below `MAX` bytes (default 20,000 puts
//! of 0 to 3 MiB over 50 keys: `cargo run --release -p shoal --example large_overwrite --
//! PUTS MAX`). Prints, every tenth of the run, the file size beside the live values, the
//! free bytes and the dead bytes. A bounded file stays flat once every key has been put a
//! few times. At the end every key is removed and `compact` returns the free chunks'
//! memory: it prints the storage the file holds before and after.

use shoal::{OpenMode, Options, Store};

const KEYS: usize = 50;

fn main() {
    let mut args = std::env::args().skip(1);
    let puts: usize = args.next().map_or(20_000, |s| s.parse().expect("PUTS"));
    let max: usize = args.next().map_or(3 << 20, |s| s.parse().expect("MAX"));
    let dir = tempfile::tempdir_in("/dev/shm")
        .or_else(|_| tempfile::tempdir())
        .unwrap();
    let s = Store::open_with(
        dir.path().join("o.shoal"),
        &Options::default(),
        OpenMode::CreateNew,
    )
    .unwrap();
    let m = s.map("m").unwrap();
    let mut x = 0x9E37_79B9_7F4A_7C15u64;
    let mut rnd = move || {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        x
    };
    let big = vec![7u8; max];
    let mut live = [0usize; KEYS];
    for p in 0..puts {
        let k = (rnd() % KEYS as u64) as usize;
        let len = (rnd() % max as u64) as usize;
        m.put(format!("k{k}").as_bytes(), &big[..len]).unwrap();
        live[k] = len;
        if (p + 1) % (puts / 10).max(1) == 0 {
            let st = s.stats().unwrap();
            println!(
                "{:>7} puts: file {:>5} MiB, live values {:>4} MiB, free {:>5} MiB, dead {:>4} MiB",
                p + 1,
                st.file_size >> 20,
                live.iter().sum::<usize>() >> 20,
                st.free_bytes >> 20,
                st.dead_bytes >> 20
            );
        }
    }
    // Then everything is removed, and `compact` returns the free chunks' memory.
    use std::os::unix::fs::MetadataExt;
    let held = || {
        std::fs::metadata(dir.path().join("o.shoal"))
            .unwrap()
            .blocks()
            * 512
    };
    for k in 0..KEYS {
        m.remove(format!("k{k}").as_bytes()).unwrap();
    }
    let before = held();
    let t = std::time::Instant::now();
    s.compact().unwrap();
    println!(
        "all removed, compact: storage held {} MiB -> {} MiB in {:.1} ms (file size {} MiB)",
        before >> 20,
        held() >> 20,
        t.elapsed().as_secs_f64() * 1e3,
        s.stats().unwrap().file_size >> 20
    );
    let r = s.check().unwrap();
    assert!(r.is_ok(), "{r}");
}
