//! The engine's hot paths, each phase its own function, for counting instructions per
//! operation with callgrind (repeatable whatever else the machine does). A change to the
//! engine's structure must leave these counts where they were:
//!
//! ```sh
//! bash scripts/hotpath-counts.sh          # builds this, runs callgrind, prints a table
//! ```
//!
//! `KEYS` 16-byte keys (`key:%012d`, shuffled for the gets) into a variable map (16-byte
//! values) and three fixed maps (4+4, 8+8 and 16+16). Each phase does `KEYS` operations,
//! except `var_put_new_length` (two passes).

use shoal::{FixedMap, Map, OpenMode, Options, Store};

#[inline(never)]
fn var_put_insert(m: &Map, keys: &[[u8; 16]]) {
    for k in keys {
        m.put(k, &[1u8; 16]).unwrap();
    }
}

#[inline(never)]
fn var_put_new_length(m: &Map, keys: &[[u8; 16]]) {
    for len in [17, 18] {
        let v = vec![2u8; len];
        for k in keys {
            m.put(k, &v).unwrap();
        }
    }
}

#[inline(never)]
fn var_put_same_length(m: &Map, keys: &[[u8; 16]]) {
    let v = [3u8; 18];
    for k in keys {
        m.put(k, &v).unwrap();
    }
}

#[inline(never)]
fn var_get_present(m: &Map, keys: &[[u8; 16]], buf: &mut Vec<u8>) -> usize {
    let mut n = 0;
    for k in keys {
        n += m.get_into(k, buf).unwrap() as usize;
    }
    n
}

#[inline(never)]
fn var_get_absent(m: &Map, keys: &[[u8; 16]], buf: &mut Vec<u8>) -> usize {
    let mut n = 0;
    for k in keys {
        n += m.get_into(k, buf).unwrap() as usize;
    }
    n
}

/// Put, get (and, for 8-byte values, add) phases of a fixed map of `$ks`-byte keys and
/// `$vs`-byte values, one function each.
macro_rules! fixed_phases {
    ($put:ident, $get:ident, $ks:expr, $vs:expr) => {
        #[inline(never)]
        fn $put(f: &FixedMap, keys: &[[u8; 16]]) {
            let v = [5u8; $vs];
            for k in keys {
                f.put(&k[16 - $ks..], &v).unwrap();
            }
        }

        #[inline(never)]
        fn $get(f: &FixedMap, keys: &[[u8; 16]]) -> usize {
            let mut buf = [0u8; $vs];
            let mut n = 0;
            for k in keys {
                n += f.get_into(&k[16 - $ks..], &mut buf).unwrap() as usize;
            }
            n
        }
    };
}

fixed_phases!(fixed4_put, fixed4_get, 4, 4);
fixed_phases!(fixed8_put, fixed8_get, 8, 8);
fixed_phases!(fixed16_put, fixed16_get, 16, 16);

#[inline(never)]
fn fixed8_add(f: &FixedMap, keys: &[[u8; 16]]) {
    for k in keys {
        f.add(&k[8..], 1).unwrap();
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
        pretouch: false,
        ..Options::default()
    };
    let s = Store::open_with(dir.path().join("h.shoal"), &o, OpenMode::CreateNew).unwrap();
    let m = s.map("m").unwrap();
    // Keys unique in their last 4 bytes too (the 4+4 map's keys).
    let keys: Vec<[u8; 16]> = (0..n)
        .map(|i| format!("key:{i:012}").into_bytes().try_into().unwrap())
        .collect();
    let mut shuffled = keys.clone();
    let mut x = 0x9e37_79b9_7f4a_7c15u64;
    for i in (1..shuffled.len()).rev() {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        shuffled.swap(i, (x % (i as u64 + 1)) as usize);
    }
    let absent: Vec<[u8; 16]> = (0..n)
        .map(|i| format!("nop:{i:012}").into_bytes().try_into().unwrap())
        .collect();
    var_put_insert(&m, &keys);
    var_put_new_length(&m, &keys);
    var_put_same_length(&m, &keys);
    let mut buf = Vec::new();
    assert_eq!(var_get_present(&m, &shuffled, &mut buf), n);
    assert_eq!(var_get_absent(&m, &absent, &mut buf), 0);
    let f = s.fixed_map("f4", 4, 4).unwrap();
    fixed4_put(&f, &keys);
    assert_eq!(fixed4_get(&f, &shuffled), n);
    let f = s.fixed_map("f8", 8, 8).unwrap();
    fixed8_put(&f, &keys);
    assert_eq!(fixed8_get(&f, &shuffled), n);
    fixed8_add(&f, &shuffled);
    let f = s.fixed_map("f16", 16, 16).unwrap();
    fixed16_put(&f, &keys);
    assert_eq!(fixed16_get(&f, &shuffled), n);
}
