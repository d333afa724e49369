//! Key and value types recorded in maps: written at creation, seen by every other handle
//! and process, refused when another is asked for, checked against fixed sizes.

use shoal::{DataType, Error, FixedOptions, MapOptions, OpenMode, Options, Store};

fn store(dir: &tempfile::TempDir) -> Store {
    Store::open_with(
        dir.path().join("t.shoal"),
        &Options {
            max_size: 64 << 20,
            ..Options::default()
        },
        OpenMode::CreateNew,
    )
    .unwrap()
}

fn typed(k: DataType, v: DataType) -> MapOptions {
    MapOptions {
        key_type: Some(k),
        value_type: Some(v),
        ..Default::default()
    }
}

#[test]
fn types_are_recorded_at_creation_and_seen_by_every_handle() {
    let d = tempfile::tempdir().unwrap();
    let s = store(&d);
    let all = [
        DataType::Bytes,
        DataType::Utf8,
        DataType::I64,
        DataType::U64,
        DataType::F64,
        DataType::Json,
        DataType::User(u64::MAX),
        DataType::User(shoal::USER_TAG_PYTHON_PICKLE),
    ];
    for (i, k) in all.iter().enumerate() {
        let v = all[(i + 3) % all.len()];
        let m = s.map_with(&format!("m{i}"), &typed(*k, v), true).unwrap();
        assert_eq!((m.key_type(), m.value_type()), (Some(*k), Some(v)));
    }
    // Another process's view: the file opened anew.
    drop(s);
    let s = Store::open_existing(d.path().join("t.shoal")).unwrap();
    for (i, k) in all.iter().enumerate() {
        let m = s.open_map(&format!("m{i}")).unwrap();
        assert_eq!(
            (m.key_type(), m.value_type()),
            (Some(*k), Some(all[(i + 3) % all.len()]))
        );
    }
    let plain = s.map("plain").unwrap();
    assert_eq!((plain.key_type(), plain.value_type()), (None, None));
    assert_eq!(DataType::User(255).to_string(), "user:0xff");
    assert_eq!(DataType::F64.to_string(), "f64");
}

#[test]
fn another_type_than_the_recorded_one_is_refused() {
    let d = tempfile::tempdir().unwrap();
    let s = store(&d);
    s.map_with("m", &typed(DataType::Utf8, DataType::Json), true)
        .unwrap();
    match s.map_with("m", &typed(DataType::Utf8, DataType::F64), true) {
        Err(Error::InvalidArgument(why)) => {
            assert!(why.contains("values as json, not f64"), "{why}")
        }
        other => panic!("a conflicting value type was accepted: {:?}", other.err()),
    }
    match s.map_with("m", &typed(DataType::User(1), DataType::Json), false) {
        Err(Error::InvalidArgument(why)) => assert!(why.contains("keys as utf8"), "{why}"),
        other => panic!("a conflicting key type was accepted: {:?}", other.err()),
    }
    assert!(matches!(
        s.map_with("u", &typed(DataType::Unknown(9), DataType::Json), true),
        Err(Error::InvalidArgument(_))
    ));
    // Asking for no type, for the recorded ones, or for bytes (the raw view) opens it.
    s.map_with("m", &typed(DataType::Bytes, DataType::Bytes), false)
        .unwrap();
    s.open_map("m").unwrap();
    s.map_with("m", &typed(DataType::Utf8, DataType::Json), false)
        .unwrap();
    // A map that recorded none takes any (made without types, or by an older library).
    s.map("old").unwrap();
    let m = s
        .map_with("old", &typed(DataType::I64, DataType::I64), true)
        .unwrap();
    assert_eq!(m.key_type(), None, "types are recorded only at creation");
}

#[test]
fn fixed_maps_record_types_that_fit_their_sizes() {
    let d = tempfile::tempdir().unwrap();
    let s = store(&d);
    let o = |k, v| FixedOptions {
        key_type: k,
        value_type: v,
        ..Default::default()
    };
    let f = s
        .fixed_map_with(
            "counts",
            8,
            8,
            &o(Some(DataType::U64), Some(DataType::F64)),
            true,
        )
        .unwrap();
    assert_eq!(
        (f.key_type(), f.value_type()),
        (Some(DataType::U64), Some(DataType::F64))
    );
    let f = s
        .fixed_map_with("ids", 16, 8, &o(Some(DataType::Bytes), None), true)
        .unwrap();
    assert_eq!(
        (f.key_type(), f.value_type()),
        (Some(DataType::Bytes), None)
    );
    for (k, v, (ks, vs)) in [
        (Some(DataType::I64), None, (16, 8)),
        (None, Some(DataType::F64), (8, 4)),
    ] {
        match s.fixed_map_with("bad", ks, vs, &o(k, v), true) {
            Err(Error::InvalidArgument(why)) => assert!(why.contains("8 bytes"), "{why}"),
            other => panic!("a number type of another size: {:?}", other.err()),
        }
    }
    assert!(matches!(
        s.fixed_map_with("bad", 8, 8, &o(None, None), false),
        Err(Error::NotFound(_))
    ));
    match s.fixed_map_with("counts", 8, 8, &o(Some(DataType::I64), None), true) {
        Err(Error::InvalidArgument(why)) => assert!(why.contains("keys as u64"), "{why}"),
        other => panic!("a conflicting key type was accepted: {:?}", other.err()),
    }
}

/// The offset of the header of the map in catalog entry `id` (FORMAT.md: the header's
/// `catalog_off` at byte 88; an entry's header offset at byte 16 of its 256).
fn map_header(file: &[u8], id: u64) -> usize {
    let word = |at: usize| u64::from_le_bytes(file[at..at + 8].try_into().unwrap());
    word((word(88) + 256 * id + 16) as usize) as usize
}

#[test]
fn check_reports_type_words_that_are_not_types() {
    let d = tempfile::tempdir().unwrap();
    let path = d.path().join("t.shoal");
    {
        let s = store(&d);
        s.map_with("m", &typed(DataType::Utf8, DataType::I64), true)
            .unwrap();
        assert!(s.check().unwrap().is_ok());
    }
    let good = std::fs::read(&path).unwrap();
    let hdr = map_header(&good, 0);
    assert_eq!(
        &good[hdr + 136..hdr + 138],
        &[2, 3],
        "utf8 and i64 at byte 136"
    );
    for (at, byte) in [(138, 1u8), (144, 5), (152, 9)] {
        let mut bad = good.clone();
        bad[hdr + at] = byte;
        std::fs::write(&path, &bad).unwrap();
        let s = Store::open_existing(&path).unwrap();
        let r = s.check().unwrap();
        assert!(
            r.problems.iter().any(|p| p.contains("type words")),
            "byte {at}: {r:?}"
        );
        drop(s);
        let (s, rep) = Store::repair(&path).unwrap();
        assert!(
            s.check().unwrap().is_ok(),
            "byte {at}: after repair {rep:?}"
        );
    }
}
