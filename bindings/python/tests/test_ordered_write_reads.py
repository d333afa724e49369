"""Reads inside ordered-map write transactions: slices, iteration, counts and cursors
that see the transaction's own writes (and its nested transactions'), and cursors that
write at where they stand."""

import pytest

import shoal


def test_an_ordered_write_reads_its_own_writes(store):
    m = store.ordered_map("m", key="str", value="int")
    for i, k in enumerate("abcde"):
        m[k] = i
    with m.write() as t:
        del t["b"]
        t["bb"] = 10
        t["c"] = 20
        assert list(t) == ["a", "bb", "c", "d", "e"]
        assert list(reversed(t)) == ["e", "d", "c", "bb", "a"]
        assert len(t) == 5 and t  # a transaction is true even when its map is empty
        assert t["b":"d"] == [("bb", 10), ("c", 20)]
        assert t["b":"d":-1] == [("c", 20), ("bb", 10)]
        assert list(t.irange("bb", "d", inclusive=(False, True))) == ["c", "d"]
        assert t.count_range("b", "d") == 2
        assert t.first() == ("a", 0) and t.last() == ("e", 4)
        assert t.ceiling_key("b") == "bb" and t.floor_item("bz") == ("bb", 10)
        assert t["c"] == 20 and "b" not in t and t.get("b", -1) == -1
        assert dict(t.items()) == {"a": 0, "bb": 10, "c": 20, "d": 3, "e": 4}
        with t.nested() as n:
            n["z"] = 99
            assert t.last() == ("z", 99)
            n.abort()
        assert t.last() == ("e", 4) and len(t) == 5
        assert list(m) == ["a", "b", "c", "d", "e"]  # nothing seen outside yet
    assert list(m) == ["a", "bb", "c", "d", "e"]


def test_a_write_cursor_walks_writes_and_survives_writes(store):
    m = store.ordered_map("m", key="str", value="str")
    for k in "abc":
        m[k] = "old"
    with m.write() as t:
        t["b2"] = "new"
        c = t.cursor()
        assert list(c) == [("a", "old"), ("b", "old"), ("b2", "new"), ("c", "old")]
        assert c.seek("b") and c.position == 1
        assert c.put_current("set") and c.value == "set"
        assert t["b"] == "set"
        assert c.remove_current() and c.item is None
        assert c.next() and c.key == "b2"
        # Writes through the transaction show at the cursor.
        t["b2"] = "again"
        assert c.value == "again"
        del t["b2"]
        assert c.item is None  # in the gap b2 left
        assert c.prev() and c.key == "a"
        assert c.remove_current() and c.item is None  # a goes too
        assert not c.remove_current()  # nothing to remove in a gap
        assert c.next() and c.key == "c"
        c.close()
        assert c.closed
        with pytest.raises(shoal.Closed):
            c.first()
        c = t.cursor()
    assert list(m.items()) == [("c", "old")]
    with pytest.raises(shoal.InvalidArgument):
        c.first()  # the transaction is over
    s = m.cursor()
    assert s.first()
    with pytest.raises(shoal.InvalidArgument):
        s.remove_current()  # a snapshot's cursor does not write
    s.close()


def test_a_multimap_and_a_transaction_over_several_maps(store):
    a = store.ordered_map("a", key="str", value="str", duplicates=True)
    b = store.ordered_map("b", u64_keys=True, value="str")
    a.add("k", "1")
    with store.ordered_write([a, b]) as t:
        t.put(a, "k", "2")
        t.put(b, 7, "seven")
        t.put(b, 300, "many")
        va, vb = t.view(a), t.view(b)
        assert va.get_all("k") == ["1", "2"] and va.count_values("k") == 2
        assert vb[0:100] == [(7, "seven")] and len(vb) == 2
        c = t.cursor(a)
        assert c.seek("k") and c.value == "1"
        assert c.next_value() and c.value == "2"
        assert c.count_values() == 2
        assert c.put_current("0") and c.item == ("k", "0")
        cb = va.cursor()
        assert cb.last() and cb.item == ("k", "1")  # 2 gave way to 0
        with pytest.raises(shoal.InvalidArgument):
            t.cursor(store.ordered_map("other"))  # not in the transaction
    assert a.get_all("k") == ["0", "1"]
    assert b[7] == "seven"
