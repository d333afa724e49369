//! Puts in three phases, each its own function, for counting instructions per put with
//! callgrind (repeatable whatever else the machine does):
//!
//! ```sh
//! cargo build --release -p shoal --example put_phases
//! valgrind --tool=callgrind --callgrind-out-file=/tmp/cg.puts target/release/examples/put_phases 100000
//! callgrind_annotate --inclusive=yes /tmp/cg.puts | grep 'put_phases::phase_'
//! ```
//!
//! `KEYS` keys (`key:%012d`) are inserted with 16-byte values (`phase_insert`),
//! overwritten twice with values of a new length each time (`phase_new_length`: appended,
//! the cleaner at work), then once with values of the same length (`phase_same_length`:
//! in place, format version 5). Divide each phase's count by `KEYS` (by `2 * KEYS` for
//! the middle one). The store is capped at 4 GiB, which valgrind can reserve.

use shoal::{Map, OpenMode, Options, Store};

#[inline(never)]
fn phase_insert(m: &Map, keys: &[[u8; 16]]) {
    for k in keys {
        m.put(k, &[1u8; 16]).unwrap();
    }
}

#[inline(never)]
fn phase_new_length(m: &Map, keys: &[[u8; 16]], len: usize) {
    let v = vec![2u8; len];
    for k in keys {
        m.put(k, &v).unwrap();
    }
}

#[inline(never)]
fn phase_same_length(m: &Map, keys: &[[u8; 16]], len: usize) {
    let v = vec![3u8; len];
    for k in keys {
        m.put(k, &v).unwrap();
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
    let s = Store::open_with(dir.path().join("p.shoal"), &o, OpenMode::CreateNew).unwrap();
    let m = s.map("m").unwrap();
    let keys: Vec<[u8; 16]> = (0..n)
        .map(|i| format!("key:{i:012}").into_bytes().try_into().unwrap())
        .collect();
    phase_insert(&m, &keys);
    phase_new_length(&m, &keys, 17);
    phase_new_length(&m, &keys, 18);
    phase_same_length(&m, &keys, 18);
    let r = s.check().unwrap();
    assert!(r.is_ok(), "{r}");
}
