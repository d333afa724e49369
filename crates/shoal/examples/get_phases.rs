//! Gets in phases, each its own function, for counting instructions per get with
//! callgrind (repeatable whatever else the machine does):
//!
//! ```sh
//! cargo build --release -p shoal --example get_phases
//! valgrind --tool=callgrind --callgrind-out-file=/tmp/cg.gets target/release/examples/get_phases 100000
//! callgrind_annotate --inclusive=yes /tmp/cg.gets | grep 'get_phases::phase_'
//! ```
//!
//! `KEYS` keys (`key:%012d`) with 16-byte values are put into two stores in /dev/shm: one
//! as a store there is by default (no checksums), one created with checksums (as a store
//! on disk is by default). Each is then read once with `get_into` (`phase_plain`,
//! `phase_checksummed`). Divide each phase's count by `KEYS`. The stores are capped at
//! 4 GiB, which valgrind can reserve.

use shoal::{Map, OpenMode, Options, Store};

#[inline(never)]
fn phase_plain(m: &Map, keys: &[[u8; 16]]) -> usize {
    let mut buf = Vec::with_capacity(64);
    let mut n = 0;
    for k in keys {
        n += m.get_into(k, &mut buf).unwrap() as usize;
    }
    n
}

#[inline(never)]
fn phase_checksummed(m: &Map, keys: &[[u8; 16]]) -> usize {
    let mut buf = Vec::with_capacity(64);
    let mut n = 0;
    for k in keys {
        n += m.get_into(k, &mut buf).unwrap() as usize;
    }
    n
}

fn filled(dir: &std::path::Path, name: &str, checksums: bool, keys: &[[u8; 16]]) -> Map {
    let o = Options {
        max_size: 4 << 30,
        checksums: Some(checksums),
        ..Options::default()
    };
    let s = Store::open_with(dir.join(name), &o, OpenMode::CreateNew).unwrap();
    assert_eq!(s.stats().unwrap().checksums, checksums);
    let m = s.map("m").unwrap();
    for k in keys {
        m.put(k, &[1u8; 16]).unwrap();
    }
    m
}

fn main() {
    let n: usize = std::env::args()
        .nth(1)
        .map_or(100_000, |s| s.parse().expect("KEYS"));
    let dir = tempfile::tempdir_in("/dev/shm")
        .or_else(|_| tempfile::tempdir())
        .unwrap();
    let keys: Vec<[u8; 16]> = (0..n)
        .map(|i| format!("key:{i:012}").into_bytes().try_into().unwrap())
        .collect();
    let plain = filled(dir.path(), "plain.shoal", false, &keys);
    let summed = filled(dir.path(), "summed.shoal", true, &keys);
    assert_eq!(phase_plain(&plain, &keys), n);
    assert_eq!(phase_checksummed(&summed, &keys), n);
}
