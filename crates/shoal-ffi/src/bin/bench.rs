//! The Rust half of the ABI-overhead benchmark: the same puts and gets as
//! `bench/bench_c.c` does through the C ABI, through the Rust API. `bench/run.sh` runs
//! both and prints the ratio.
//!
//! Usage:
//! * `shoal-ffi-bench STORE_PATH OPS KEYS` (KEYS a power of two): prints
//!   `rust put_ns=<ns per put> get_ns=<ns per get>`.
//! * `shoal-ffi-bench --interleaved STORE_PATH OPS KEYS ROUNDS`: in this one process,
//!   alternates chunks of OPS calls through the exported `shoal_*` functions (the ABI
//!   code path, called directly) and through the Rust API, ROUNDS times, and prints the
//!   median of each: a comparison that load from other processes affects equally.

use std::ffi::c_void;
use std::hint::black_box;
use std::time::Instant;

/// The key of operation `i`: a permutation of 0..keys in each block of `keys` operations.
fn key(i: u64, keys: u64) -> [u8; 8] {
    (i.wrapping_mul(0x9E37_79B9_7F4A_7C15) & (keys - 1)).to_le_bytes()
}

type Res<T> = Result<T, Box<dyn std::error::Error>>;

/// Both halves reserve 16 GiB (not the 1 TiB default, which valgrind cannot map).
fn open(path: &str) -> Res<shoal::Store> {
    let o = shoal::Options {
        max_size: 16 << 30,
        ..Default::default()
    };
    Ok(shoal::Store::open_with(
        path,
        &o,
        shoal::OpenMode::OpenOrCreate,
    )?)
}

fn rust_puts(m: &shoal::Map, from: u64, ops: u64, keys: u64) -> Res<f64> {
    let t = Instant::now();
    for i in from..from + ops {
        black_box(m.put(&key(i, keys), &i.to_le_bytes())?);
    }
    Ok(t.elapsed().as_nanos() as f64 / ops as f64)
}

fn rust_gets(m: &shoal::Map, ops: u64, keys: u64) -> Res<f64> {
    let mut buf = Vec::with_capacity(64);
    let mut sum = 0u64;
    let t = Instant::now();
    for i in 0..ops {
        if !m.get_into(&key(i, keys), &mut buf)? {
            return Err("key missing".into());
        }
        sum = sum.wrapping_add(buf[0] as u64);
    }
    black_box(sum);
    Ok(t.elapsed().as_nanos() as f64 / ops as f64)
}

fn abi_puts(m: *const shoal_ffi::shoal_map, from: u64, ops: u64, keys: u64) -> Res<f64> {
    let t = Instant::now();
    for i in from..from + ops {
        let (k, v) = (key(i, keys), i.to_le_bytes());
        let mut replaced = false;
        // SAFETY: a live map handle; key and value are 8 readable bytes; `replaced` is a
        // writable local.
        let rc = unsafe {
            shoal_ffi::shoal_map_put(
                m,
                k.as_ptr() as *const c_void,
                8,
                v.as_ptr() as *const c_void,
                8,
                &mut replaced,
            )
        };
        if rc != shoal_ffi::SHOAL_OK {
            return Err(format!("shoal_map_put: {rc:?}").into());
        }
    }
    Ok(t.elapsed().as_nanos() as f64 / ops as f64)
}

fn abi_gets(m: *const shoal_ffi::shoal_map, ops: u64, keys: u64) -> Res<f64> {
    let mut buf = [0u8; 64];
    let mut sum = 0u64;
    let t = Instant::now();
    for i in 0..ops {
        let k = key(i, keys);
        let mut len = 0usize;
        // SAFETY: a live map handle; the key is 8 readable bytes; buf has 64 writable
        // bytes; `len` is a writable local.
        let rc = unsafe {
            shoal_ffi::shoal_map_get(
                m,
                k.as_ptr() as *const c_void,
                8,
                buf.as_mut_ptr() as *mut c_void,
                buf.len(),
                &mut len,
            )
        };
        if rc != shoal_ffi::SHOAL_OK {
            return Err(format!("shoal_map_get: {rc:?}").into());
        }
        sum = sum.wrapping_add(buf[0] as u64);
    }
    black_box(sum);
    Ok(t.elapsed().as_nanos() as f64 / ops as f64)
}

fn median(v: &mut [f64]) -> f64 {
    v.sort_by(|a, b| a.total_cmp(b));
    v[v.len() / 2]
}

fn interleaved(path: &str, ops: u64, keys: u64, rounds: u32) -> Res<()> {
    let _ = shoal::Store::destroy(path);
    let store = open(path)?;
    let m = store.map("bench")?;
    rust_puts(&m, 0, keys, keys)?;
    let cpath = std::ffi::CString::new(path)?;
    let mut s: *mut shoal_ffi::shoal_store = std::ptr::null_mut();
    let mut cm: *mut shoal_ffi::shoal_map = std::ptr::null_mut();
    // SAFETY: a NUL-terminated path, NULL options, writable out-pointers; the handles are
    // closed below.
    unsafe {
        if shoal_ffi::shoal_store_open(cpath.as_ptr(), std::ptr::null(), &mut s)
            != shoal_ffi::SHOAL_OK
            || shoal_ffi::shoal_map_open(s, c"bench".as_ptr(), 0, std::ptr::null(), &mut cm)
                != shoal_ffi::SHOAL_OK
        {
            return Err("opening through the ABI failed".into());
        }
    }
    let (mut ap, mut rp, mut ag, mut rg) = (vec![], vec![], vec![], vec![]);
    // Each side goes first in half of the rounds (the first pass after a put phase
    // pays for colder caches).
    for r in 0..rounds as u64 {
        if r % 2 == 0 {
            ap.push(abi_puts(cm, r * ops, ops, keys)?);
            rp.push(rust_puts(&m, r * ops, ops, keys)?);
            ag.push(abi_gets(cm, ops, keys)?);
            rg.push(rust_gets(&m, ops, keys)?);
        } else {
            rp.push(rust_puts(&m, r * ops, ops, keys)?);
            ap.push(abi_puts(cm, r * ops, ops, keys)?);
            rg.push(rust_gets(&m, ops, keys)?);
            ag.push(abi_gets(cm, ops, keys)?);
        }
    }
    // SAFETY: handles from the opens above, not used afterwards.
    unsafe {
        shoal_ffi::shoal_map_close(cm);
        shoal_ffi::shoal_store_close(s);
    }
    drop(m);
    drop(store);
    shoal::Store::destroy(path)?;
    let (ap, rp, ag, rg) = (
        median(&mut ap),
        median(&mut rp),
        median(&mut ag),
        median(&mut rg),
    );
    println!("interleaved in one process: {rounds} rounds of {ops} calls each, medians");
    println!("         ABI path   Rust API   ABI/Rust");
    println!("put   {ap:10.1} {rp:10.1}   {:8.3}", ap / rp);
    println!("get   {ag:10.1} {rg:10.1}   {:8.3}", ag / rg);
    Ok(())
}

fn main() -> Res<()> {
    let a: Vec<String> = std::env::args().collect();
    if a.len() == 6 && a[1] == "--interleaved" {
        let keys: u64 = a[4].parse()?;
        if !keys.is_power_of_two() {
            return Err("KEYS must be a power of two".into());
        }
        return interleaved(&a[2], a[3].parse()?, keys, a[5].parse()?);
    }
    if a.len() != 4 {
        return Err(
            "usage: shoal-ffi-bench STORE_PATH OPS KEYS | --interleaved STORE_PATH OPS KEYS ROUNDS"
                .into(),
        );
    }
    let (path, ops, keys): (&str, u64, u64) = (&a[1], a[2].parse()?, a[3].parse()?);
    if !keys.is_power_of_two() {
        return Err("KEYS must be a power of two".into());
    }
    let _ = shoal::Store::destroy(path);
    let store = open(path)?;
    let m = store.map("bench")?;
    rust_puts(&m, 0, keys, keys)?;
    let put_ns = rust_puts(&m, 0, ops, keys)?;
    let get_ns = rust_gets(&m, ops, keys)?;
    drop(m);
    drop(store);
    shoal::Store::destroy(path)?;
    println!("rust put_ns={put_ns:.1} get_ns={get_ns:.1}");
    Ok(())
}
