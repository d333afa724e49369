//! Same-length overwrites by key and by UID, each phase its own function, for counting
//! instructions per write with callgrind:
//!
//! ```sh
//! cargo build --release -p shoal --example uid_phases
//! valgrind --tool=callgrind --callgrind-out-file=/tmp/cg.uid target/release/examples/uid_phases 100000
//! callgrind_annotate --inclusive=yes /tmp/cg.uid | grep 'uid_phases::phase_'
//! ```
//!
//! `KEYS` keys (`key:%012d`) with 16-byte values are loaded into a map with UIDs, then
//! each is overwritten with a value of the same length by key (`phase_put_by_key`), by
//! UID (`phase_put_by_uid`), and read by key and by UID. Divide each phase's count by
//! `KEYS`.
//!
//! Timed, `uid_phases KEYS REPS` runs the four phases `REPS` times over the keys in a
//! shuffled order and prints nanoseconds per operation (each put changes the value).
//! By default the keys and handles are laid out in that order, so the loop's own reads
//! are sequential; with `INDIRECT=1` the puts fetch each key or handle from a random
//! place in its array, as `shoal-features` does.

use shoal::{Map, MapOptions, OpenMode, Options, Store, Uid};

#[inline(never)]
fn phase_put_by_key(m: &Map, keys: &[[u8; 16]], order: &[usize]) {
    let v = [3u8; 16];
    for &i in order {
        m.put(&keys[i], &v).unwrap();
    }
}

#[inline(never)]
fn phase_put_by_uid(m: &Map, uids: &[Uid], order: &[usize]) {
    let v = [4u8; 16];
    for &i in order {
        m.put_by_uid(uids[i], &v).unwrap();
    }
}

#[inline(never)]
fn phase_get_by_key(m: &Map, keys: &[[u8; 16]], buf: &mut Vec<u8>) {
    for k in keys {
        m.get_into(k, buf).unwrap();
    }
}

#[inline(never)]
fn phase_get_by_uid(m: &Map, uids: &[Uid], buf: &mut Vec<u8>) {
    for &u in uids {
        m.get_by_uid_into(u, buf).unwrap();
    }
}

fn main() {
    let n: usize = std::env::args()
        .nth(1)
        .map_or(100_000, |s| s.parse().expect("KEYS"));
    let dir = tempfile::tempdir_in("/dev/shm")
        .or_else(|_| tempfile::tempdir())
        .unwrap();
    let o = Options {
        max_size: 4 << 30,
        ..Options::default()
    };
    let s = Store::open_with(dir.path().join("u.shoal"), &o, OpenMode::CreateNew).unwrap();
    let mo = MapOptions {
        uids: true,
        ..Default::default()
    };
    let m = s.map_with("m", &mo, true).unwrap();
    let keys: Vec<[u8; 16]> = (0..n)
        .map(|i| format!("key:{i:012}").into_bytes().try_into().unwrap())
        .collect();
    let uids: Vec<Uid> = keys
        .iter()
        .map(|k| m.put_with_uid(k, &[1u8; 16]).unwrap().1)
        .collect();
    let mut buf = Vec::new();
    // Shuffled, so that consecutive writes touch unrelated lines (a fixed LCG: repeatable).
    let mut order: Vec<usize> = (0..n).collect();
    let mut x = 0x9e37_79b9_7f4a_7c15u64;
    for i in (1..n).rev() {
        x = x
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        order.swap(i, (x >> 33) as usize % (i + 1));
    }
    let indirect = std::env::var_os("INDIRECT").is_some();
    let (keys, uids): (Vec<[u8; 16]>, Vec<Uid>) = if indirect {
        (keys, uids)
    } else {
        (
            order.iter().map(|&i| keys[i]).collect(),
            order.iter().map(|&i| uids[i]).collect(),
        )
    };
    let reps: usize = std::env::args()
        .nth(2)
        .map_or(1, |s| s.parse().expect("REPS"));
    let seq: Vec<usize> = (0..n).collect();
    let idx: &[usize] = if indirect { &order } else { &seq };
    for _ in 0..reps {
        let t = std::time::Instant::now();
        phase_put_by_key(&m, &keys, idx);
        let k = t.elapsed();
        let t = std::time::Instant::now();
        phase_put_by_uid(&m, &uids, idx);
        let u = t.elapsed();
        let t = std::time::Instant::now();
        phase_get_by_key(&m, &keys, &mut buf);
        let gk = t.elapsed();
        let t = std::time::Instant::now();
        phase_get_by_uid(&m, &uids, &mut buf);
        let gu = t.elapsed();
        let ns = |d: std::time::Duration| d.as_nanos() as f64 / n as f64;
        eprintln!(
            "ns per op: put by key {:.0}, by UID {:.0}; get by key {:.0}, by UID {:.0}",
            ns(k),
            ns(u),
            ns(gk),
            ns(gu)
        );
    }
    let r = s.check().unwrap();
    assert!(r.is_ok(), "{r}");
}
