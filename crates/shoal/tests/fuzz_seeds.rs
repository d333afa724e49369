//! Seeds for the fuzz targets (`fuzz/`, `scripts/fuzz.sh`): real store files for
//! `open_check`'s corpus and op sequences for `ops_model`'s. With
//! `SHOAL_FUZZ_SEEDS=DIR` they are written to `DIR/open_check` and `DIR/ops_model`;
//! without it, to a temporary directory. Either way the test checks that every seed store
//! is sound and opens again from its copied bytes.
//! Small geometry (few process and txn slots, 64 KiB chunks), so the files are small and
//! every structure is in them: maps, split segments, a doubled directory, overwritten and
//! removed keys, cleaned chunks, checksums, a dropped map.

use shoal::{MapOptions, OpenMode, Options, Store};
use std::path::Path;

fn opts(checksums: bool) -> Options {
    Options {
        chunk_size: 64 * 1024,
        max_size: 64 << 20,
        max_processes: 2,
        max_threads: 4,
        max_maps: 4,
        checksums: Some(checksums),
        ..Options::default()
    }
}

fn make(dir: &Path, name: &str, checksums: bool, f: impl FnOnce(&Store)) {
    let tmp = Path::new("/dev/shm").join(format!("shoal-seed-{}-{name}.shoal", std::process::id()));
    let _ = std::fs::remove_file(&tmp);
    {
        let s = Store::open_with(&tmp, &opts(checksums), OpenMode::CreateNew).unwrap();
        f(&s);
        assert!(s.check().unwrap().is_ok());
    }
    let bytes = std::fs::read(&tmp).unwrap();
    std::fs::write(dir.join(name), &bytes).unwrap();
    std::fs::remove_file(&tmp).unwrap();
    // The copied bytes are a store that opens and checks clean.
    std::fs::write(&tmp, &bytes).unwrap();
    {
        let s = Store::open_with(&tmp, &opts(checksums), OpenMode::Open).unwrap();
        let r = s.check().unwrap();
        assert!(r.is_ok(), "seed {name} copied: {r}");
    }
    std::fs::remove_file(&tmp).unwrap();
    eprintln!("seed {name}: {} bytes", bytes.len());
}

fn tiny() -> MapOptions {
    MapOptions {
        segment_buckets: 1,
        stash_buckets: 1,
        uids: false,
    }
}

#[test]
fn fuzz_seeds() {
    let tmp = tempfile::tempdir().unwrap();
    let base = std::env::var_os("SHOAL_FUZZ_SEEDS")
        .map(std::path::PathBuf::from)
        .unwrap_or_else(|| tmp.path().to_owned());
    let open_dir = &base.join("open_check");
    let ops_dir = &base.join("ops_model");
    std::fs::create_dir_all(open_dir).unwrap();
    std::fs::create_dir_all(ops_dir).unwrap();
    make(open_dir, "empty", false, |_| {});
    make(open_dir, "one-map", false, |s| {
        let m = s.map("users").unwrap();
        for i in 0..20 {
            m.put(
                format!("user{i}").as_bytes(),
                format!("value {i}").as_bytes(),
            )
            .unwrap();
        }
        m.remove(b"user3").unwrap();
    });
    make(open_dir, "splits", false, |s| {
        let m = s.map_with("t", &tiny(), true).unwrap();
        for i in 0..200 {
            m.put(format!("k{i}").as_bytes(), &[i as u8; 40]).unwrap();
        }
        for i in (0..200).step_by(3) {
            m.remove(format!("k{i}").as_bytes()).unwrap();
        }
    });
    make(open_dir, "cleaned", false, |s| {
        let m = s.map_with("t", &tiny(), true).unwrap();
        for round in 0..12u8 {
            for i in 0..60 {
                m.put(format!("k{i}").as_bytes(), &vec![round; 300])
                    .unwrap();
            }
        }
        s.compact().unwrap();
        m.add(b"counter", 42).unwrap();
    });
    make(open_dir, "checksums-two-maps", true, |s| {
        let a = s.map("a").unwrap();
        let b = s.map_with("b", &tiny(), true).unwrap();
        for i in 0..50 {
            a.put(format!("a{i}").as_bytes(), b"x").unwrap();
            b.put(format!("b{i}").as_bytes(), &[1u8; 100]).unwrap();
        }
        let c = s.map("dropped").unwrap();
        c.put(b"k", b"v").unwrap();
        s.drop_map("dropped").unwrap();
    });
    // ops_model: [kind, key, len] triples.
    let mut all = Vec::new();
    for kind in 0..18u8 {
        for key in [0u8, 1, 2, 250] {
            all.extend([kind, key, 16 + kind]);
        }
    }
    std::fs::write(ops_dir.join("every-op"), &all).unwrap();
    let mut fill = Vec::new();
    for i in 0..200u8 {
        fill.extend([0, i % 48, 100]);
    }
    for i in 0..100u8 {
        fill.extend([i % 18, i, 255 - (i % 2) * 200]); // a few large values
    }
    std::fs::write(ops_dir.join("fill-and-mix"), &fill).unwrap();
}
