//! Reads inside write transactions of ordered maps: cursors, ranges, prefixes and counts
//! that see the transaction's own writes (and its nested transactions'), writes at a
//! cursor, and cursors taken up again after writes through the transaction.

use shoal::{Error, OrderedOptions, Store};

fn shm_dir() -> tempfile::TempDir {
    tempfile::tempdir_in("/dev/shm")
        .or_else(|_| tempfile::tempdir())
        .unwrap()
}

type Entries = Vec<(Vec<u8>, Vec<u8>)>;

fn kv(k: &str, v: &str) -> (Vec<u8>, Vec<u8>) {
    (k.as_bytes().to_vec(), v.as_bytes().to_vec())
}

#[test]
fn a_cursor_in_an_empty_map_and_after_the_first_put() {
    let d = shm_dir();
    let s = Store::open(d.path().join("o.shoal")).unwrap();
    let m = s.ordered_map("m").unwrap();
    let mut w = m.write().unwrap();
    {
        let mut c = w.cursor();
        assert!(!c.first().unwrap());
        assert!(!c.last().unwrap());
        assert!(!c.seek_ge(b"").unwrap());
        assert!(!c.seek_le(b"zz").unwrap());
        assert_eq!(c.entry(), None);
        assert_eq!(c.position().unwrap(), None);
        assert!(!c.remove_current().unwrap());
        assert!(!c.put_current(b"v").unwrap());
    }
    assert_eq!(w.range(None, None).unwrap(), Entries::new());
    assert_eq!(w.first().unwrap(), None);
    assert_eq!(w.len(), 0);
    w.put(b"", b"").unwrap();
    let mut c = w.cursor();
    assert!(c.first().unwrap());
    assert_eq!(c.entry(), Some((&b""[..], &b""[..])));
}

#[test]
fn a_cursor_skips_keys_removed_in_the_transaction_and_sees_keys_put_in_it() {
    let d = shm_dir();
    let s = Store::open(d.path().join("o.shoal")).unwrap();
    let m = s.ordered_map("m").unwrap();
    for k in ["a", "b", "c", "d", "e"] {
        m.put(k.as_bytes(), b"old").unwrap();
    }
    let mut w = m.write().unwrap();
    w.remove(b"b").unwrap();
    w.remove(b"d").unwrap();
    w.put(b"c", b"new").unwrap();
    w.put(b"bb", b"added").unwrap();
    let want = vec![
        kv("a", "old"),
        kv("bb", "added"),
        kv("c", "new"),
        kv("e", "old"),
    ];
    assert_eq!(w.range(None, None).unwrap(), want);
    let mut rev = want.clone();
    rev.reverse();
    assert_eq!(w.range_rev(None, None).unwrap(), rev);
    assert_eq!(w.count_range(Some(b"b"), Some(b"d")).unwrap(), 2);
    assert_eq!(w.len(), 4);
    assert_eq!(w.first().unwrap(), Some(kv("a", "old")));
    assert_eq!(w.last().unwrap(), Some(kv("e", "old")));
    let p: Entries = w.prefix(b"b").unwrap().map(Result::unwrap).collect();
    assert_eq!(p, vec![kv("bb", "added")]);
    {
        let mut c = w.cursor();
        assert!(!c.seek(b"b").unwrap(), "removed in the transaction");
        assert!(c.seek_ge(b"b").unwrap());
        assert_eq!(c.key(), Some(&b"bb"[..]));
        assert_eq!(c.position().unwrap(), Some(1));
        assert!(c.move_next().unwrap());
        assert_eq!(c.entry(), Some((&b"c"[..], &b"new"[..])));
        assert!(c.move_next().unwrap());
        assert_eq!(c.key(), Some(&b"e"[..]), "d is removed");
        assert!(!c.move_next().unwrap());
        assert!(c.seek_le(b"d").unwrap());
        assert_eq!(c.key(), Some(&b"c"[..]));
        assert_eq!(c.count_values().unwrap(), 1);
    }
    // Nothing of it is seen outside, and the committed map is the transaction's view.
    assert_eq!(m.get(b"b").unwrap(), Some(b"old".to_vec()));
    w.commit().unwrap();
    assert_eq!(m.range(None, None).unwrap(), want);
}

#[test]
fn writes_at_a_cursor_and_the_gap_a_removal_leaves() {
    let d = shm_dir();
    let s = Store::open(d.path().join("o.shoal")).unwrap();
    let m = s.ordered_map("m").unwrap();
    for k in ["a", "b", "c"] {
        m.put(k.as_bytes(), b"1").unwrap();
    }
    let mut w = m.write().unwrap();
    {
        let mut c = w.cursor();
        assert!(c.seek(b"b").unwrap());
        assert!(c.remove_current().unwrap());
        assert_eq!(c.entry(), None, "in the gap b left");
        assert!(!c.remove_current().unwrap(), "nothing to remove in a gap");
        assert!(c.move_prev().unwrap());
        assert_eq!(c.key(), Some(&b"a"[..]));
        assert!(c.move_next().unwrap());
        assert_eq!(c.key(), Some(&b"c"[..]));
        // A value out of line, written at the cursor, read back through it.
        let big = vec![9u8; 5000];
        assert!(c.put_current(&big).unwrap());
        assert_eq!(c.entry(), Some((&b"c"[..], &big[..])));
        assert!(c.remove_current().unwrap());
        assert!(!c.move_next().unwrap(), "c was the last");
        assert!(c.put(b"b2", b"x").unwrap());
        assert_eq!(c.entry(), Some((&b"b2"[..], &b"x"[..])));
        assert!(c.move_prev().unwrap());
        assert_eq!(c.key(), Some(&b"a"[..]));
    }
    assert_eq!(
        w.range(None, None).unwrap(),
        vec![kv("a", "1"), kv("b2", "x")]
    );
    // A cursor in a gap stays there when the removed key is put back through the
    // transaction; the entry put back is what its next move finds, either way.
    let place = {
        let mut c = w.cursor();
        assert!(c.seek(b"a").unwrap());
        assert!(c.remove_current().unwrap());
        c.into_place()
    };
    w.put(b"a", b"2").unwrap();
    let mut c = w.cursor_at(place.clone()).unwrap();
    assert_eq!(c.entry(), None, "still in the gap");
    assert!(c.move_next().unwrap());
    assert_eq!(c.entry(), Some((&b"a"[..], &b"2"[..])));
    let mut c = w.cursor_at(place).unwrap();
    assert!(c.move_prev().unwrap());
    assert_eq!(c.entry(), Some((&b"a"[..], &b"2"[..])));
    // A key over the limit is refused, and the entry stays.
    {
        let mut c = w.cursor();
        assert!(c.first().unwrap());
        let too_long_key = vec![b'k'; shoal::MAX_ORDERED_KEY + 1];
        assert!(matches!(
            c.put(&too_long_key, b"v"),
            Err(Error::InvalidArgument(_))
        ));
    }
    w.commit().unwrap();
    assert_eq!(
        m.range(None, None).unwrap(),
        vec![kv("a", "2"), kv("b2", "x")]
    );
}

#[test]
fn a_cursor_place_survives_writes_through_the_transaction_and_nested_aborts() {
    let d = shm_dir();
    let s = Store::open(d.path().join("o.shoal")).unwrap();
    let m = s.ordered_map("m").unwrap();
    let other = s.ordered_map("other").unwrap();
    // Enough keys for a tree of several levels, so the writes copy and split pages the
    // cursor's path named.
    let key = |i: u32| format!("k{i:06}").into_bytes();
    let mut w = m.write().unwrap();
    for i in 0..4000 {
        w.put(&key(i * 2), &[1u8; 40]).unwrap();
    }
    w.commit().unwrap();
    let mut w = m.write().unwrap();
    let mut c = w.cursor();
    assert!(c.seek(&key(2000)).unwrap());
    let place = c.into_place();
    // Writes all around the cursor's leaf, and its own entry's value changed.
    for i in 0..2000 {
        w.put(&key(i * 2 + 1), &[2u8; 40]).unwrap();
    }
    w.put(&key(2000), b"changed").unwrap();
    let mut c = w.cursor_at(place).unwrap();
    assert_eq!(c.entry(), Some((&key(2000)[..], &b"changed"[..])));
    assert!(c.move_next().unwrap());
    assert_eq!(c.key(), Some(&key(2001)[..]));
    assert_eq!(c.position().unwrap(), Some(2001));
    let place = c.into_place();
    // Its entry removed in a nested transaction that commits: the cursor stands in the
    // gap; then one that aborts puts it back.
    {
        let mut n = w.nested();
        n.remove(&key(2001)).unwrap();
        n.commit();
    }
    let c = w.cursor_at(place).unwrap();
    assert_eq!(c.entry(), None);
    let place = c.into_place();
    {
        // The removed key put back in a nested transaction: the cursor stays in the gap,
        // and a move either way finds the entry put back.
        let mut n = w.nested();
        n.put(&key(2001), b"back").unwrap();
        let mut c = n.cursor_at(place.clone()).unwrap();
        assert_eq!(c.entry(), None);
        assert!(c.move_next().unwrap());
        assert_eq!(c.entry(), Some((&key(2001)[..], &b"back"[..])));
        assert!(c.move_prev().unwrap());
        assert_eq!(c.key(), Some(&key(2000)[..]));
        let mut c = n.cursor_at(place.clone()).unwrap();
        assert!(c.move_prev().unwrap());
        assert_eq!(c.key(), Some(&key(2001)[..]));
        n.abort();
    }
    // A place taken inside a nested transaction on an entry it put, taken up again after
    // the nested transaction aborted: the entry is gone, the cursor is in its gap.
    let place = {
        let mut n = w.nested();
        n.put(&key(2001), b"back").unwrap();
        let mut c = n.cursor_at(place).unwrap();
        assert!(c.move_next().unwrap());
        assert_eq!(c.entry(), Some((&key(2001)[..], &b"back"[..])));
        let inner = c.into_place();
        n.abort();
        inner
    };
    let mut c = w.cursor_at(place).unwrap();
    assert_eq!(c.entry(), None, "the nested put was undone");
    assert!(c.move_next().unwrap());
    assert_eq!(c.key(), Some(&key(2002)[..]));
    let place = c.into_place();
    // A place is of one map.
    let mut t = other.write().unwrap();
    assert!(matches!(
        t.cursor_at(place.clone()),
        Err(Error::InvalidArgument(_))
    ));
    drop(t);
    let mut t = other.write_with(&[]).unwrap();
    assert!(matches!(
        t.cursor_at(&other, place.clone()),
        Err(Error::InvalidArgument(_))
    ));
    assert!(matches!(t.cursor(&m), Err(Error::InvalidArgument(_))));
    drop(t);
    let mut c = w.cursor_at(place).unwrap();
    assert_eq!(c.key(), Some(&key(2002)[..]));
    assert!(c.last().unwrap());
    assert_eq!(c.key(), Some(&key(7998)[..]));
}

#[test]
fn a_multimaps_values_inside_a_write_transaction() {
    let d = shm_dir();
    let s = Store::open(d.path().join("o.shoal")).unwrap();
    let opts = OrderedOptions {
        duplicates: true,
        ..OrderedOptions::default()
    };
    let m = s.ordered_map_with("mm", &opts).unwrap();
    m.put(b"a", b"1").unwrap();
    m.put(b"a", b"3").unwrap();
    m.put(b"b", b"1").unwrap();
    let mut w = m.write().unwrap();
    w.put(b"a", b"2").unwrap();
    w.remove_value(b"a", b"3").unwrap();
    w.put(b"c", b"9").unwrap();
    assert_eq!(w.count_values(b"a").unwrap(), 2);
    assert_eq!(w.get_all(b"a").unwrap(), vec![b"1".to_vec(), b"2".to_vec()]);
    assert_eq!(w.len(), 4);
    {
        let mut c = w.cursor();
        assert!(c.seek(b"a").unwrap());
        assert_eq!(c.value(), Some(&b"1"[..]));
        assert_eq!(c.count_values().unwrap(), 2);
        assert!(c.next_value().unwrap());
        assert_eq!(c.value(), Some(&b"2"[..]));
        assert!(!c.next_value().unwrap(), "3 was removed in the transaction");
        assert!(c.next_key().unwrap());
        assert_eq!(c.entry(), Some((&b"b"[..], &b"1"[..])));
        assert!(c.next_key().unwrap());
        assert_eq!(c.entry(), Some((&b"c"[..], &b"9"[..])));
        assert!(c.prev_key().unwrap());
        assert!(c.prev_key().unwrap());
        assert_eq!(c.entry(), Some((&b"a"[..], &b"2"[..])), "a's last value");
        assert!(c.seek_value(b"a", b"1").unwrap());
        assert!(!c.seek_value(b"a", b"3").unwrap());
        assert!(c.seek_value_ge(b"a", b"10").unwrap());
        assert_eq!(c.value(), Some(&b"2"[..]));
        // A value replaced at the cursor: the pair gives way, the cursor follows.
        assert!(c.put_current(b"0").unwrap());
        assert_eq!(c.entry(), Some((&b"a"[..], &b"0"[..])));
        assert_eq!(c.position().unwrap(), Some(0));
        assert!(c.seek_le(b"b").unwrap());
        assert_eq!(c.entry(), Some((&b"b"[..], &b"1"[..])));
        assert!(c.remove_current().unwrap());
        assert!(c.move_prev().unwrap());
        assert_eq!(c.entry(), Some((&b"a"[..], &b"1"[..])));
    }
    let all = w.range(None, None).unwrap();
    assert_eq!(all, vec![kv("a", "0"), kv("a", "1"), kv("c", "9")]);
    w.commit().unwrap();
    assert_eq!(m.range(None, None).unwrap(), all);
}

#[test]
fn moves_among_values_need_a_multimap_and_prefixes_need_byte_keys() {
    let d = shm_dir();
    let s = Store::open(d.path().join("o.shoal")).unwrap();
    let m = s.ordered_map("m").unwrap();
    let n = s
        .ordered_map_with(
            "n",
            &OrderedOptions {
                u64_keys: true,
                ..OrderedOptions::default()
            },
        )
        .unwrap();
    let mut w = m.write().unwrap();
    w.put(b"a", b"1").unwrap();
    let mut c = w.cursor();
    assert!(c.first().unwrap());
    assert!(matches!(c.next_value(), Err(Error::InvalidArgument(_))));
    assert!(matches!(c.next_key(), Err(Error::InvalidArgument(_))));
    drop(w);
    let mut w = n.write().unwrap();
    for i in [300u64, 2, 70_000] {
        w.put(&i.to_le_bytes(), b"v").unwrap();
    }
    assert!(matches!(w.prefix(b"\x02"), Err(Error::InvalidArgument(_))));
    let keys: Vec<u64> = w
        .iter(None, None)
        .unwrap()
        .map(|e| u64::from_le_bytes(e.unwrap().0.try_into().unwrap()))
        .collect();
    assert_eq!(keys, vec![2, 300, 70_000], "integer keys sort as numbers");
    let mut c = w.cursor();
    assert!(c.seek_le(&1000u64.to_le_bytes()).unwrap());
    assert_eq!(c.key(), Some(&300u64.to_le_bytes()[..]));
}
