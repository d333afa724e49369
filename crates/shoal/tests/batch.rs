//! `batch`: a group of writes under `sync_writes` is flushed once, at its end, also when
//! it fails; results and errors pass through; `put_many` and `remove_many` of both map
//! kinds are batches; nested batches flush once, at the outermost end; a batch defers
//! only its own store's flushes; `begin_batch` opens one without a closure.
//!
//! The flushes are counted at the `store.flush` fail point, so the counts are checked only
//! with the `failpoints` feature (the test command enables it); the rest holds without.
//! One test in this binary: the fail point's counter is process-wide.

use shoal::{Error, OpenMode, Options, Store};

#[test]
fn batch_flushes_once_and_passes_results_and_errors_through() {
    let d = tempfile::tempdir_in("/dev/shm")
        .or_else(|_| tempfile::tempdir())
        .unwrap();
    let o = Options {
        sync_writes: true,
        ..Options::default()
    };
    let s = Store::open_with(d.path().join("b.shoal"), &o, OpenMode::CreateNew).unwrap();
    let m = s.map("m").unwrap();
    let f = s.fixed_map("f", 8, 8).unwrap();

    #[cfg(feature = "failpoints")]
    let flushes = shoal::failpoints::counter("store.flush").unwrap();
    let mut expected = 0u64;
    let mut flushed = |more: u64, what: &str| {
        expected += more;
        #[cfg(feature = "failpoints")]
        assert_eq!(
            flushes.load(std::sync::atomic::Ordering::SeqCst),
            expected,
            "flushes after {what}"
        );
        #[cfg(not(feature = "failpoints"))]
        let _ = what;
    };

    // A single write flushes once, as sync_writes promises.
    m.put(b"single", b"1").unwrap();
    flushed(1, "one put");
    f.put(&[1; 8], &[1; 8]).unwrap();
    flushed(1, "one fixed put");

    // Twenty writes to two maps, one flush; the closure's result comes back.
    let r: Result<u32, Error> = s.batch(|| {
        for i in 0..10u64 {
            m.put(format!("k{i}").as_bytes(), b"v")?;
            f.put(&i.to_le_bytes(), &(i * 2).to_le_bytes())?;
        }
        Ok(7)
    });
    assert_eq!(r.unwrap(), 7);
    flushed(1, "a batch of 20 writes");
    assert_eq!(m.len().unwrap(), 11);
    assert_eq!(
        f.get(&3u64.to_le_bytes()).unwrap(),
        Some(6u64.to_le_bytes().to_vec())
    );

    // Batch calls of both map kinds.
    let items: Vec<(Vec<u8>, Vec<u8>)> = (100..150u64)
        .map(|i| (i.to_le_bytes().to_vec(), i.to_be_bytes().to_vec()))
        .collect();
    let pairs: Vec<(&[u8], &[u8])> = items.iter().map(|(k, v)| (&k[..], &v[..])).collect();
    m.put_many(&pairs).unwrap();
    flushed(1, "Map::put_many");
    f.put_many(&pairs).unwrap();
    flushed(1, "FixedMap::put_many");
    let keys: Vec<&[u8]> = pairs.iter().map(|(k, _)| *k).collect();
    assert_eq!(m.remove_many(&keys[..20]).unwrap(), 20);
    flushed(1, "Map::remove_many");
    assert_eq!(f.remove_many(&keys[..30]).unwrap(), 30);
    flushed(1, "FixedMap::remove_many");

    // A failing batch: the writes before the error stay, are flushed, and the error is
    // the closure's.
    let r: Result<(), Error> = f.batch(|| {
        m.put(b"before the error", b"kept")?;
        f.put(b"short", &[0; 8])?;
        m.put(b"after the error", b"never")?;
        Ok(())
    });
    assert!(matches!(r, Err(Error::InvalidArgument(_))), "{r:?}");
    flushed(1, "a failed batch");
    assert_eq!(m.get(b"before the error").unwrap(), Some(b"kept".to_vec()));
    assert_eq!(m.get(b"after the error").unwrap(), None);

    // A batch whose closure has its own error type (as the C ABI's does).
    #[derive(Debug)]
    enum Mine {
        Shoal(Error),
        Refused(u32),
    }
    impl From<Error> for Mine {
        fn from(e: Error) -> Mine {
            Mine::Shoal(e)
        }
    }
    let r: Result<(), Mine> = m.batch(|| {
        m.put(b"own error", b"x")?;
        Err(Mine::Refused(42))
    });
    assert!(matches!(r, Err(Mine::Refused(42))), "{r:?}");
    flushed(1, "a batch with its own error");
    let r: Result<(), Mine> = m.batch(|| {
        m.put(&vec![0u8; 70_000], b"key too long")?;
        Ok(())
    });
    assert!(
        matches!(r, Err(Mine::Shoal(Error::InvalidArgument(_)))),
        "{r:?}"
    );
    flushed(1, "a batch failing with a Shoal error");

    // Nested: the inner batches do not flush; the outer one does, once.
    let r: Result<(), Error> = s.batch(|| {
        m.batch(|| m.put(b"inner", b"1").map(|_| ()))?;
        f.put_many(&pairs[..5])?;
        m.put(b"outer", b"2")?;
        Ok(())
    });
    r.unwrap();
    flushed(1, "nested batches");

    // A closure that panics: nothing is flushed at its end (the panic goes on), but the
    // thread's writes flush again afterwards, as sync_writes promises.
    let r = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        let _: Result<(), Error> = s.batch(|| {
            m.put(b"before the panic", b"1")?;
            panic!("a caller's closure panics");
        });
    }));
    assert!(r.is_err());
    flushed(0, "a batch that panicked");
    m.put(b"after the panic", b"2").unwrap();
    flushed(1, "a put after a batch that panicked");

    // Two stores: a batch of one does not defer the other's flushes, so a write to the
    // second inside it flushes at once, and each store's batch flushes its own.
    let other = Store::open_with(d.path().join("o.shoal"), &o, OpenMode::CreateNew).unwrap();
    let om = other.map("m").unwrap();
    let r: Result<(), Error> = s.batch(|| {
        m.put(b"first store", b"1")?;
        flushed(0, "a write inside a batch");
        om.put(b"second store", b"1")?;
        flushed(1, "a write to another store inside a batch");
        other.batch(|| {
            om.put(b"second store, batched", b"2")?;
            m.put(b"first store again", b"2").map(|_| ())
        })?;
        flushed(1, "the inner batch of the other store");
        Ok(())
    });
    r.unwrap();
    flushed(1, "the outer batch");

    // A batch opened without a closure: ended explicitly, nested in a closure's, and
    // dropped without `end`.
    let b = s.begin_batch();
    m.put(b"guarded 1", b"1").unwrap();
    f.put(&[9; 8], &[9; 8]).unwrap();
    flushed(0, "writes in an open batch");
    let r: Result<(), Error> = s.batch(|| m.put(b"guarded 2", b"2").map(|_| ()));
    r.unwrap();
    flushed(0, "a closure batch inside an open one");
    b.end().unwrap();
    flushed(1, "Batch::end");
    {
        let _b = s.begin_batch();
        m.put(b"dropped batch", b"1").unwrap();
        flushed(0, "a write in a batch about to be dropped");
    }
    flushed(1, "a dropped batch");
    let outer = s.begin_batch();
    let inner = s.begin_batch();
    assert!(!inner.end_without_flush(), "an inner batch owes no flush");
    assert!(
        outer.end_without_flush(),
        "the outermost batch of a sync_writes store owes one"
    );
    flushed(0, "batches ended without flushing");
    m.put(b"after the batches", b"1").unwrap();
    flushed(1, "a put after every batch ended");

    // Without sync_writes, a batch flushes nothing.
    let d2 = tempfile::tempdir_in("/dev/shm")
        .or_else(|_| tempfile::tempdir())
        .unwrap();
    let plain = Store::open_with(
        d2.path().join("p.shoal"),
        &Options::default(),
        OpenMode::CreateNew,
    )
    .unwrap();
    let pm = plain.map("m").unwrap();
    let r: Result<(), Error> = plain.batch(|| {
        pm.put(b"a", b"b")?;
        pm.put(b"c", b"d").map(|_| ())
    });
    r.unwrap();
    pm.put(b"e", b"f").unwrap();
    assert!(
        !plain.begin_batch().end_without_flush(),
        "no flush owed without sync_writes"
    );
    flushed(0, "writes to a store without sync_writes");

    let report = s.check().unwrap();
    assert!(report.is_ok(), "{report}");
}
