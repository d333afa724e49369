//! Seeds for the fuzz targets (`fuzz/`, `scripts/fuzz.sh`): real store files for
//! `open_check`'s corpus and op sequences for `ops_model`'s and `fixed_model`'s. With
//! `SHOAL_FUZZ_SEEDS=DIR` they are written to `DIR/open_check`, `DIR/ops_model` and
//! `DIR/fixed_model`;
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
        ..Default::default()
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
    make(open_dir, "ordered", false, |s| {
        let m = s.ordered_map("o").unwrap();
        let mut w = m.write().unwrap();
        for i in 0..600u32 {
            w.put(format!("key{i:05}").as_bytes(), &[i as u8; 20])
                .unwrap();
        }
        w.commit().unwrap();
        for i in (0..600u32).step_by(3) {
            m.remove(format!("key{i:05}").as_bytes()).unwrap();
        }
        m.put(b"", b"empty key").unwrap();
    });
    make(open_dir, "ordered-forms", false, |s| {
        let opts = |u64_keys, duplicates| shoal::OrderedOptions {
            u64_keys,
            duplicates,
        };
        let ints = s.ordered_map_with("ints", &opts(true, false)).unwrap();
        let multi = s.ordered_map_with("multi", &opts(false, true)).unwrap();
        let both = s.ordered_map_with("both", &opts(true, true)).unwrap();
        let mut w = ints.write_with(&[&multi, &both]).unwrap();
        for i in 0..300u64 {
            w.put(&ints, &(i << 20).to_le_bytes(), &[i as u8; 12])
                .unwrap();
            let k = [b'k', (i % 7) as u8, 0];
            w.put(&multi, &k, &i.to_be_bytes()).unwrap();
            w.put(&both, &(i % 5).to_le_bytes(), &[i as u8; 3]).unwrap();
        }
        w.commit().unwrap();
    });
    make(open_dir, "ordered-deep", false, |s| {
        // Keys of 400 bytes: branches of a few children, so a tree of several levels in
        // a few dozen pages; then commits that free pages (the free-page queue has
        // entries) and a removed run of keys (emptied pages dropped).
        let m = s.ordered_map("deep").unwrap();
        let key = |i: u32| format!("{i:05}").repeat(80).into_bytes();
        let mut w = m.write().unwrap();
        for i in 0..160u32 {
            w.put(&key(i), &[i as u8; 8]).unwrap();
        }
        w.commit().unwrap();
        for i in (0..160u32).step_by(11) {
            m.put(&key(i), &[0xee; 100]).unwrap();
        }
        let mut w = m.write().unwrap();
        for i in 40..75u32 {
            w.remove(&key(i)).unwrap();
        }
        w.commit().unwrap();
    });
    make(open_dir, "ordered-long", false, |s| {
        // Keys kept out of line (past 984 bytes) sharing their first 1000 bytes, so the
        // separators between them are out of line too; some removed, some with values
        // out of line as well.
        let m = s.ordered_map("long").unwrap();
        let key = |i: u32| format!("{}{i:05}", "k".repeat(1000)).into_bytes();
        let mut w = m.write().unwrap();
        for i in 0..40u32 {
            w.put(&key(i), &vec![i as u8; 10 + 100 * (i as usize % 15)])
                .unwrap();
        }
        w.commit().unwrap();
        for i in (0..40u32).step_by(4) {
            m.remove(&key(i)).unwrap();
        }
    });
    make(open_dir, "ordered-free", false, |s| {
        // Two maps written by multi-map transactions, one short transaction at a time,
        // so both free-page queues wrap over many commits; a third map dropped.
        let a = s.ordered_map("a").unwrap();
        let b = s.ordered_map("b").unwrap();
        let mut t = a.write_with(&[&b]).unwrap();
        for i in 0..200u32 {
            t.put(&a, &i.to_be_bytes(), &[1; 60]).unwrap();
            t.put(&b, &i.to_be_bytes(), &[2; 60]).unwrap();
        }
        t.commit().unwrap();
        for i in 0..250u32 {
            let mut t = b.write_with(&[&a]).unwrap();
            t.put(&a, &(i * 7 % 200).to_be_bytes(), &[i as u8; 60])
                .unwrap();
            t.remove(&b, &(i * 13 % 200).to_be_bytes()).unwrap();
            t.put(&b, &(200 + i).to_be_bytes(), &[3; 10]).unwrap();
            t.commit().unwrap();
        }
        let c = s.ordered_map("dropped").unwrap();
        c.put(b"k", b"v").unwrap();
        s.drop_map("dropped").unwrap();
    });
    make(open_dir, "queue-set", false, |s| {
        let set = s
            .queue_set(
                "q",
                &shoal::QueueSetOptions::new(24, 40)
                    .queue_with_limit("work", 10)
                    .queue("done")
                    .redeliver(true),
            )
            .unwrap();
        let (free, work, done) = (
            set.queue("free").unwrap(),
            set.queue("work").unwrap(),
            set.queue("done").unwrap(),
        );
        for i in 0..8u8 {
            let mut e = set.pull(free).unwrap().unwrap();
            e.write(0, &[i; 24]);
            set.push(work, e).unwrap();
        }
        set.move_to(free, done, 5).unwrap();
        set.pull(work).unwrap().unwrap().keep(); // held by a process that will be gone
        s.map("m").unwrap().put(b"k", b"v").unwrap();
    });
    make(open_dir, "log", false, |s| {
        let log = s
            .log(
                "l",
                &shoal::LogOptions::new(16, 48).policy(shoal::FullPolicy::Wait),
            )
            .unwrap();
        let mut r = log.reader("drain").unwrap();
        log.reader("idle").unwrap();
        for i in 0..12u64 {
            log.append_fields(i as u8, b"line", &[(b"i", &i.to_le_bytes())])
                .unwrap();
        }
        for _ in 0..5 {
            r.read().unwrap().unwrap();
        }
        s.log("over", &shoal::LogOptions::new(4, 8))
            .unwrap()
            .append(1, b"x")
            .unwrap();
        s.map("m").unwrap().put(b"k", b"v").unwrap();
    });
    #[cfg(feature = "failpoints")]
    crashed_seeds(open_dir);
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
    // fixed_model: [kind, key, arg] triples; 64 puts fill the tiny segments (splits).
    let fixed_dir = &base.join("fixed_model");
    std::fs::create_dir_all(fixed_dir).unwrap();
    let mut all = Vec::new();
    for kind in 0..16u8 {
        for key in [0u8, 1, 2, 63] {
            all.extend([kind, key, 16 + kind]);
        }
    }
    std::fs::write(fixed_dir.join("every-op"), &all).unwrap();
    let mut fill = Vec::new();
    for i in 0..64u8 {
        fill.extend([0, i, i]);
    }
    for i in 0..100u8 {
        fill.extend([i % 16, i.wrapping_mul(7), 255 - i]);
    }
    std::fs::write(fixed_dir.join("fill-and-mix"), &fill).unwrap();
}

/// Stores as a process killed mid-write leaves them: the file's bytes copied at a fail
/// point (the `hit`-th time the workload reaches it), locks held, intent committed or
/// not, a bucket half-written. Opening such a copy recovers the dead writer's txn, so
/// the fuzzer mutates what recovery reads (redo lists, split intents, held locks) from
/// real starting points. Each copy must open, recover and check clean as it is.
#[cfg(feature = "failpoints")]
fn crashed_seeds(dir: &Path) {
    use std::sync::atomic::{AtomicU64, Ordering};
    use std::sync::{Arc, Mutex};
    const POINTS: &[(&str, u64)] = &[
        ("write.committed", 40),
        ("write.half_applied", 90),
        ("split.building", 2),
        // 2, not 3: 80 keys need at least 3 segments of 30 slots (2 splits) whatever the
        // file's random hash seed, and 1 seed in ~12 made no third (seen in CI).
        ("split.published", 2),
        ("split.removing", 2),
        ("alloc.committed", 3),
        ("fixed.committed", 30),
        ("fixed.add_counted", 20),
        // 3: 80 keys need at least 4 segments of 21 cells, so at least 3 moves made new
        // ones, whatever the file's hash seed (6 was short once in ~10 runs, CI).
        ("fixed.move.copied", 3),
        ("fixed.move.published", 2),
        ("clean.moved", 5),
        ("uid.taken", 60),
        // A log's record reserved and half written: its writer dead in the copy.
        ("log.reserved", 5),
        ("log.half_written", 7),
    ];
    for &(point, hit) in POINTS {
        let tmp =
            Path::new("/dev/shm").join(format!("shoal-seed-{}-crash.shoal", std::process::id()));
        let _ = std::fs::remove_file(&tmp);
        let snap: Arc<Mutex<Option<Vec<u8>>>> = Arc::default();
        let (seen, path, out) = (AtomicU64::new(0), tmp.clone(), snap.clone());
        shoal::failpoints::callback(point, move || {
            if seen.fetch_add(1, Ordering::SeqCst) + 1 == hit {
                *out.lock().unwrap() = Some(std::fs::read(&path).unwrap());
            }
        })
        .unwrap();
        {
            let s = Store::open_with(&tmp, &opts(point.starts_with("write")), OpenMode::CreateNew)
                .unwrap();
            crash_workload(&s, point.starts_with("uid"));
        }
        shoal::failpoints::clear(point);
        std::fs::remove_file(&tmp).unwrap();
        let bytes = snap
            .lock()
            .unwrap()
            .take()
            .unwrap_or_else(|| panic!("the workload reached {point} fewer than {hit} times"));
        let name = format!("crashed-at-{point}");
        std::fs::write(dir.join(&name), &bytes).unwrap();
        std::fs::write(&tmp, &bytes).unwrap();
        {
            let s = Store::open_with(&tmp, &opts(false), OpenMode::Open)
                .unwrap_or_else(|e| panic!("seed {name}: {e}"));
            let r = s.check().unwrap();
            assert!(r.is_ok(), "seed {name} after recovery: {r}");
            if point.starts_with("log.") {
                // The copy's writer is dead mid-record: a reader passes its hole.
                let log = s.open_log("log").unwrap();
                let mut r = log.reader("drain").unwrap();
                while r.read().unwrap().is_some() {}
                assert_eq!(r.skipped(), 1, "seed {name}");
                assert_eq!(r.position(), log.stats().unwrap().appended, "seed {name}");
            }
        }
        std::fs::remove_file(&tmp).unwrap();
        eprintln!("seed {name}: {} bytes", bytes.len());
    }
}

/// Splits, overwrites and a compaction (the cleaner moves records), a fixed-size map
/// with adds, and for `uid.taken` a map with UIDs whose keys come and go (its table takes
/// several chunks, so only there): every fail point in `crashed_seeds` is reached.
#[cfg(feature = "failpoints")]
fn crash_workload(s: &Store, uids: bool) {
    let log = s.log("log", &shoal::LogOptions::new(8, 40)).unwrap();
    let mut r = log.reader("drain").unwrap();
    for i in 0..10u64 {
        log.append_fields(2, b"line", &[(b"i", &i.to_le_bytes())])
            .unwrap();
        if i % 3 == 0 {
            r.read().unwrap();
        }
    }
    if uids {
        let u = s
            .map_with(
                "u",
                &MapOptions {
                    uids: true,
                    ..tiny()
                },
                true,
            )
            .unwrap();
        for round in 0..4u8 {
            for i in 0..80u64 {
                u.put(format!("u{i}").as_bytes(), &[round; 30]).unwrap();
                if i % 5 == round as u64 {
                    u.remove(format!("u{i}").as_bytes()).unwrap();
                }
            }
        }
        return;
    }
    let m = s.map_with("t", &tiny(), true).unwrap();
    let opts = shoal::FixedOptions {
        segment_buckets: 2,
        stash_buckets: 1,
        ..Default::default()
    };
    let f = s.fixed_map_with("f", 8, 8, &opts, true).unwrap();
    for round in 0..8u8 {
        if round == 3 {
            s.compact().unwrap();
        }
        for i in 0..80u64 {
            // Each round overwrites a different third: by the compaction, round 0's
            // chunks are a third live, so cleaning them moves records.
            if (i + round as u64) % 3 == 0 || round == 0 {
                m.put(format!("k{i}").as_bytes(), &vec![round; 1500])
                    .unwrap();
            }
            f.put(&i.to_le_bytes(), &[round; 8]).unwrap();
            f.add(&(i % 7).to_le_bytes(), 1).unwrap();
        }
    }
}
