//! `Store::object_stats`: one set of figures for every object, whatever its kind, that
//! agrees with each kind's own stats.

use shoal::{MapOptions, Store};

fn tmp() -> tempfile::TempDir {
    tempfile::tempdir_in("/dev/shm").unwrap()
}

#[test]
fn every_kind_reports_its_figures_through_one_call() {
    let dir = tmp();
    let s = Store::open(dir.path().join("s.shoal")).unwrap();

    let m = s.map("var").unwrap();
    for i in 0..5000u32 {
        m.put(format!("key{i}").as_bytes(), &[i as u8; 24]).unwrap();
    }
    for i in 0..1000u32 {
        m.remove(format!("key{i}").as_bytes()).unwrap();
    }
    let u = s
        .map_with(
            "uids",
            &MapOptions {
                uids: true,
                ..MapOptions::default()
            },
            true,
        )
        .unwrap();
    u.put(b"one", b"1").unwrap();
    let f = s.fixed_map("fixed", 8, 4).unwrap();
    for i in 0..3000u64 {
        f.put(&i.to_le_bytes(), &(i as u32).to_le_bytes()).unwrap();
    }

    let vs = s.object_stats("var").unwrap().expect("the variable map");
    let ms = m.stats().unwrap();
    assert_eq!(vs.entries, 4000);
    assert_eq!(vs.entries, ms.entries);
    assert_eq!(vs.live_bytes, ms.live_bytes);
    assert!(vs.live_bytes >= 4000 * (7 + 24), "{vs:?}");
    assert_eq!(vs.segments, ms.segments);
    assert!(
        vs.segments > 1,
        "5,000 keys split the first segment: {vs:?}"
    );
    assert_eq!(vs.splits, ms.splits);
    assert_eq!(vs.directory_depth, ms.directory_depth);
    assert!(vs.index_bytes >= vs.segments * 8192, "{vs:?}");

    let us = s.object_stats("uids").unwrap().expect("the map with UIDs");
    assert_eq!(us.entries, 1);
    assert_eq!(us.live_bytes, u.stats().unwrap().live_bytes);

    let fs = s.object_stats("fixed").unwrap().expect("the fixed map");
    let fx = f.stats().unwrap();
    assert_eq!(fs.entries, 3000);
    assert_eq!(fs.live_bytes, 3000 * 12);
    assert_eq!(fs.segments, fx.segments);
    assert_eq!(fs.index_bytes, fx.segment_bytes);
    assert_eq!(fs.splits, fx.splits);
    assert_eq!(fs.directory_depth, fx.directory_depth);

    assert_eq!(s.object_stats("absent").unwrap(), None);
    assert!(s.drop_map("fixed").unwrap());
    assert_eq!(s.object_stats("fixed").unwrap(), None);
}
