"""Multi-key transactions (Store.transaction, Store.watch, Store.snapshot_get)."""

import struct
import threading

import pytest

import shoal


def k(i):
    return struct.pack("<Q", i)


def v(x):
    return struct.pack("<q", x)


def val(b):
    return struct.unpack("<q", b)[0]


def test_transfer_then_and_else(store):
    acct = store.fixed_map("acct", 8, 8)
    acct[k(1)] = v(100)
    acct[k(2)] = v(5)
    with store.transaction() as t:
        t.when_int(acct, k(1), ">=", 30)
        t.add(acct, k(1), -30).add(acct, k(2), 30)
    assert t.succeeded
    assert t.results == [(True, v(100)), (True, v(5))]
    assert val(acct[k(1)]) == 70 and val(acct[k(2)]) == 35

    t = store.transaction().when_int(acct, k(1), ">=", 1000).add(acct, k(1), -1000)
    t.otherwise.put_if_absent(acct, k(3), v(7)).get(acct, k(2))
    ok, results = t.commit()
    assert not ok
    assert results == [(True, None), (False, v(35))]
    assert val(acct[k(1)]) == 70 and val(acct[k(3)]) == 7

    ok, _ = (
        store.transaction()
        .when_equals(acct, k(3), v(7))
        .when_present(acct, k(2))
        .when_absent(acct, k(9))
        .remove(acct, k(3))
        .put(acct, k(9), v(1))
        .commit()
    )
    assert ok and k(3) not in acct and val(acct[k(9)]) == 1


def test_a_block_that_raises_commits_nothing(store):
    acct = store.fixed_map("acct", 8, 8)
    with pytest.raises(RuntimeError):
        with store.transaction() as t:
            t.put(acct, k(1), v(1))
            raise RuntimeError("no")
    assert k(1) not in acct and t.succeeded is None


def test_errors(store):
    acct = store.fixed_map("acct", 8, 8)
    with pytest.raises(shoal.InvalidArgument):
        store.transaction().put(acct, b"short", v(1)).commit()
    with pytest.raises(shoal.InvalidArgument, match="twice"):
        store.transaction().put(acct, k(1), v(1)).add(acct, k(1), 1).commit()
    t = store.transaction()
    for i in range(40):
        t.put(acct, k(i), v(i))
    with pytest.raises(shoal.InvalidArgument, match="too large"):
        t.commit()
    assert len(acct) == 0
    with pytest.raises(ValueError):
        store.transaction().when_int(acct, k(1), "=<", 1)


def test_watch_and_snapshot_under_threads(store):
    acct = store.fixed_map("acct", 8, 8)
    n, start = 16, 100
    for i in range(n):
        acct[k(i)] = v(start)
    stop = threading.Event()
    bad = []

    def transfer(seed):
        import random

        r = random.Random(seed)
        for _ in range(300):
            a, b = r.sample(range(n), 2)

            def move(w):
                x, y = w.get_int(acct, k(a)), w.get_int(acct, k(b))
                if x >= 3:
                    w.put_int(acct, k(a), x - 3)
                    w.put_int(acct, k(b), y + 3)

            store.watch(move)

    def read():
        items = [(acct, k(i)) for i in range(n)]
        while not stop.is_set():
            s = sum(val(x) for x in store.snapshot_get(items))
            if s != n * start:
                bad.append(s)

    readers = [threading.Thread(target=read)]
    writers = [threading.Thread(target=transfer, args=(i,)) for i in range(2)]
    for t in readers + writers:
        t.start()
    for t in writers:
        t.join()
    stop.set()
    for t in readers:
        t.join()
    assert not bad
    assert sum(val(acct[k(i)]) for i in range(n)) == n * start
    assert store.snapshot_get([(acct, k(99))]) == [None]


def test_variable_maps_mixed_with_fixed(store):
    names = store.map("names", key="str", value="int", uids=True)
    notes = store.map("notes", key="str", value="json")
    acct = store.fixed_map("acct", 8, 8)
    names["alice"] = 100
    acct[k(2)] = v(0)
    with store.transaction() as t:
        t.when_int(names, "alice", ">=", 40).when_present(acct, k(2))
        t.add(names, "alice", -40).add(acct, k(2), 40)
        t.put(notes, "log", {"moved": 40, "to": [2]})
        t.otherwise.put(notes, "log", "refused")
    assert t.succeeded
    assert t.results == [(True, 100), (True, v(0)), (True, None)]
    assert names["alice"] == 60 and val(acct[k(2)]) == 40
    assert notes["log"] == {"moved": 40, "to": [2]}
    # Old values come back through the codec, the else-list runs on a failed condition.
    t = store.transaction().when_equals(names, "alice", 1).put(names, "alice", 0)
    t.otherwise.get(notes, "log").get(names, "alice")
    ok, res = t.commit()
    assert not ok and res == [(False, {"moved": 40, "to": [2]}), (False, 60)]
    # The version condition: holds with the current version, then the put moved it.
    ver = names.version("alice")
    assert names.version("nobody") is None
    assert store.transaction().when_version(names, "alice", ver).put(names, "alice", 7).commit()[0]
    assert not store.transaction().when_version(names, "alice", ver).put(names, "alice", 8).commit()[0]
    assert names["alice"] == 7
    with pytest.raises(shoal.InvalidArgument):
        store.transaction().when_version(notes, "log", 1).remove(notes, "log").commit()
    with pytest.raises(TypeError):  # the key codec refuses bytes for a "str" key
        store.transaction().put(names, b"raw", 1).commit()
    # A snapshot over both kinds, decoded.
    assert store.snapshot_get([(names, "alice"), (acct, k(2)), (notes, "log"), (names, "x")]) == [
        7, v(40), {"moved": 40, "to": [2]}, None]


def test_watch_over_variable_maps(store):
    names = store.map("wnames", key="str", value="int")
    docs = store.map("wdocs", key="str", value="json")
    names["a"] = 10
    docs["d"] = {"b": 1, "a": 2}

    def move(w):
        n = w.get_int(names, "a")
        d = w.get(docs, "d")
        w.put_int(names, "a", n - 1)
        w.put(docs, "d", dict(d, c=n))
        return n

    assert store.watch(move) == 10
    assert names["a"] == 9 and docs["d"] == {"b": 1, "a": 2, "c": 10}

    # A key changed between the read and the commit makes the function run again.
    runs = []

    def racy(w):
        n = w.get_int(names, "a")
        if not runs:
            names["a"] = 100
        runs.append(n)
        w.put_int(names, "a", n + 1)

    store.watch(racy)
    assert runs == [9, 100] and names["a"] == 101
