//! What the model-checking fuzz targets (`ops_model`, `fixed_model`) share: their small
//! store, the model, a compare-and-swap checked against it, and the comparison of a whole
//! map with it.

use std::collections::HashMap;

/// What the map should hold.
pub type Model = HashMap<Vec<u8>, Vec<u8>>;

/// One compare-and-swap on `k`, checked against the model and applied to it. The
/// expected value is the current one (`arg` even) or `v`; the new one is `v`, or none
/// (`arg` a multiple of 3). `cas` runs it on the map.
pub fn check_cas(
    model: &mut Model,
    k: Vec<u8>,
    v: &[u8],
    arg: u8,
    at: usize,
    cas: impl FnOnce(Option<&[u8]>, Option<&[u8]>) -> bool,
) {
    let cur = model.get(&k).cloned();
    let expected = if arg % 2 == 0 {
        cur.clone()
    } else {
        Some(v.to_vec())
    };
    let new = if arg % 3 == 0 { None } else { Some(v.to_vec()) };
    let r = cas(expected.as_deref(), new.as_deref());
    let want = cur == expected;
    assert_eq!(
        r,
        want || (expected.is_none() && new.is_none()),
        "op {at}: cas"
    );
    if want {
        match new {
            Some(n) => model.insert(k, n),
            None => model.remove(&k),
        };
    }
}

/// Iteration yields each entry of the model once and nothing else, and `len` agrees.
pub fn check_whole<E: std::fmt::Debug>(
    items: impl Iterator<Item = Result<(Vec<u8>, Vec<u8>), E>>,
    len: u64,
    model: &Model,
    at: usize,
) {
    let mut seen = HashMap::new();
    for item in items {
        let (k, v) = item.expect("iterate");
        assert!(seen.insert(k, v).is_none(), "op {at}: a key iterated twice");
    }
    assert_eq!(&seen, model, "op {at}: iteration differs from the model");
    assert_eq!(len, model.len() as u64, "op {at}: len");
}

/// The store file of this fuzzing process, in /dev/shm (`tag` tells the targets apart).
pub fn store_path(tag: &str) -> std::path::PathBuf {
    std::path::PathBuf::from(format!(
        "/dev/shm/shoal-fuzz-{tag}-{}.shoal",
        std::process::id()
    ))
}

/// A small store (64 KiB chunks, so that growth and the cleaner come early), created
/// anew or opened again.
pub fn open_store(tag: &str, create: bool) -> shoal::Store {
    let o = shoal::Options {
        chunk_size: 64 * 1024,
        max_size: 1 << 30,
        max_processes: 4,
        max_threads: 8,
        max_maps: 4,
        ..shoal::Options::default()
    };
    let mode = if create {
        shoal::OpenMode::CreateNew
    } else {
        shoal::OpenMode::Open
    };
    shoal::Store::open_with(store_path(tag), &o, mode).expect("open the store")
}
