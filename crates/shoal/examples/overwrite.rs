//! Steady overwrite: `KEYS` keys (default 1 M, `key:%012d`, 16-byte values) are put once,
//! then overwritten `PASSES` times (default 8), each pass in a new random order:
//! `cargo run --release -p shoal --example overwrite -- KEYS PASSES [append]`. A value of
//! the same length is overwritten in place (format version 5); with `append`, every pass
//! changes the values' length (16 and 17 bytes in turn), so every overwrite appends a
//! record and the cleaner reclaims the old ones. Prints, per pass,
//! the puts per second of the thread's CPU time (what the cleaner's work costs the
//! writer), the file size, and the highest share of dead bytes in the data bytes and in
//! the live bytes seen at twenty points of the pass (the engine bounds it at 20%).

use shoal::{OpenMode, Options, Store};

fn cpu_seconds() -> f64 {
    let mut t = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: clock_gettime writes into the timespec it is given, nothing else.
    unsafe { libc::clock_gettime(libc::CLOCK_THREAD_CPUTIME_ID, &mut t) };
    t.tv_sec as f64 + t.tv_nsec as f64 / 1e9
}

fn main() {
    let mut args = std::env::args().skip(1);
    let n: usize = args.next().map_or(1_000_000, |s| s.parse().expect("KEYS"));
    let passes: usize = args.next().map_or(8, |s| s.parse().expect("PASSES"));
    let append = match args.next().as_deref() {
        None => false,
        Some("append") => true,
        Some(other) => panic!("unknown argument {other:?} (only `append`)"),
    };
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
    let keys: Vec<[u8; 16]> = (0..n)
        .map(|i| format!("key:{i:012}").into_bytes().try_into().unwrap())
        .collect();
    let mut val = *b"val:000000000000";
    for k in &keys {
        m.put(k, &val).unwrap();
    }
    let mut order: Vec<usize> = (0..n).collect();
    let mut x = 0x9E37_79B9_7F4A_7C15u64;
    let mut worst_all: f64 = 0.0;
    println!(
        "{n} keys, {passes} passes of overwrites in random order ({})",
        if append {
            "lengths change every pass: appended"
        } else {
            "same length: in place"
        }
    );
    let mut long = [0u8; 17];
    for pass in 0..passes {
        for i in (1..n).rev() {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            order.swap(i, (x % (i as u64 + 1)) as usize);
        }
        val[4..].copy_from_slice(format!("{pass:012}").as_bytes());
        long[..16].copy_from_slice(&val);
        let v: &[u8] = if append && pass % 2 == 0 { &long } else { &val };
        let (mut worst_data, mut worst_live): (f64, f64) = (0.0, 0.0);
        let t = cpu_seconds();
        for part in order.chunks(n.div_ceil(20)) {
            for &i in part {
                m.put(&keys[i], v).unwrap();
            }
            let st = s.stats().unwrap();
            worst_data = worst_data.max(st.dead_bytes as f64 / st.data_bytes as f64);
            worst_live = worst_live.max(st.dead_bytes as f64 / st.live_bytes.max(1) as f64);
        }
        let secs = cpu_seconds() - t;
        let st = s.stats().unwrap();
        worst_all = worst_all.max(worst_live);
        println!(
            "pass {pass}: {:.2} M puts per CPU-second; file {} MiB; dead at most {:.1}% of the data, {:.1}% of the live data",
            n as f64 / secs / 1e6,
            st.file_size >> 20,
            100.0 * worst_data,
            100.0 * worst_live
        );
    }
    println!(
        "dead space at most {:.1}% of the live data",
        100.0 * worst_all
    );
    let r = s.check().unwrap();
    assert!(r.is_ok(), "{r}");
}
