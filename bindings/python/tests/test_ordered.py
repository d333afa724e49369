"""Ordered maps: MutableMapping semantics in key order checked against
sortedcontainers.SortedDict, slices, irange, counts and seeks, snapshots, write
transactions over one and several maps, threads, and other processes (transfers whose
sums every snapshot checks; a writer SIGKILLed inside a transaction)."""

import multiprocessing as mp
import os
import signal
import threading
import time

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from sortedcontainers import SortedDict

import _oworkers as ow
import shoal


def test_mapping_in_key_order(store):
    m = store.ordered_map("o", key="str", value="json")
    ref = {}
    for i in [5, 3, 9, 1, 7, 3, 0, 12, 11]:
        m[f"k{i:02d}"] = {"i": i}
        ref[f"k{i:02d}"] = {"i": i}
    assert len(m) == len(ref)
    assert list(m) == sorted(ref)
    assert list(reversed(m)) == sorted(ref, reverse=True)
    assert list(m.items()) == sorted(ref.items())
    assert list(m.values()) == [ref[k] for k in sorted(ref)]
    assert m == ref
    assert m["k05"] == {"i": 5} and "k05" in m and "k04" not in m
    with pytest.raises(KeyError):
        m["k04"]
    assert m.get("k04", 1) == 1
    assert m.put_if_absent("k05", 0) is False and m.put_if_absent("k04", 4) is True
    assert m.put_if_present("k06", 6) is False and m.put_if_present("k04", 44) is True
    assert m.setdefault("k04", 0) == 44 and m.setdefault("k13", 13) == 13
    assert m.pop("k13") == 13 and m.pop("k13", None) is None
    with pytest.raises(KeyError):
        m.pop("k13")
    del m["k04"]
    with pytest.raises(KeyError):
        del m["k04"]
    assert m.first() == ("k00", {"i": 0}) and m.last() == ("k12", {"i": 12})
    m.clear()
    assert len(m) == 0 and m.first() is None and m.last() is None and list(m) == []


def test_slices(store):
    m = store.ordered_map("s", key="str", value="int")
    for i in range(20):
        m[f"k{i:02d}"] = i
    assert m["k03":"k06"] == [("k03", 3), ("k04", 4), ("k05", 5)]
    assert m["k03":"k06":-1] == [("k05", 5), ("k04", 4), ("k03", 3)]
    assert m[:"k02"] == [("k00", 0), ("k01", 1)]
    assert m["k18":] == [("k18", 18), ("k19", 19)]
    assert m["k06":"k03"] == []
    assert len(m[:]) == 20
    with pytest.raises(ValueError):
        m["k01":"k05":2]
    with pytest.raises(TypeError):
        m["a":"b"] = 1
    del m["k10":"k15"]
    assert list(m.irange("k09", "k15")) == ["k09", "k15"]
    assert len(m) == 15


KEYS = st.binary(min_size=0, max_size=6)


# The store fixture is shared by the examples on purpose: each clears the map first.
@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    ops=st.lists(st.tuples(st.sampled_from(["put", "del", "ins", "rep"]), KEYS, st.binary(max_size=8)), max_size=120),
    lo=st.none() | KEYS,
    hi=st.none() | KEYS,
    incl=st.tuples(st.booleans(), st.booleans()),
    rev=st.booleans(),
)
def test_against_sorteddict(path, ops, lo, hi, incl, rev):
    with shoal.open(path) as s:
        m = s.ordered_map(f"h{os.getpid()}")
        m.clear()
        ref = SortedDict()
        for op, k, v in ops:
            if op == "put":
                m[k] = v
                ref[k] = v
            elif op == "del":
                assert (k in ref) == m._n.remove(k)
                ref.pop(k, None)
            elif op == "ins":
                assert m.put_if_absent(k, v) == (k not in ref)
                ref.setdefault(k, v)
            else:
                assert m.put_if_present(k, v) == (k in ref)
                if k in ref:
                    ref[k] = v
        assert list(m.items()) == list(ref.items())
        want = list(ref.irange(lo, hi, incl, rev))
        assert list(m.irange(lo, hi, incl, rev)) == want
        assert list(m.irange_items(lo, hi, incl, rev)) == [(k, ref[k]) for k in want]
        assert m.count_range(lo, hi, incl) == len(list(ref.irange(lo, hi, incl)))
        # Seeks against SortedDict's bisects.
        if lo is not None:
            keys = ref.keys()
            i, j = ref.bisect_left(lo), ref.bisect_right(lo)
            assert m.ceiling_key(lo) == (keys[i] if i < len(keys) else None)
            assert m.higher_key(lo) == (keys[j] if j < len(keys) else None)
            assert m.floor_key(lo) == (keys[j - 1] if j > 0 else None)
            assert m.lower_key(lo) == (keys[i - 1] if i > 0 else None)
            assert m.count_range(None, lo) == i
        with m.snapshot() as snap:
            assert snap[lo:hi] == [(k, ref[k]) for k in ref.irange(lo, hi, (True, False))]
            assert len(snap) == len(ref)


def test_iteration_spans_batches_and_keeps_its_view(store):
    m = store.ordered_map("big", key="str", value="int")
    with m.write() as t:
        for i in range(1000):
            t[f"k{i:04d}"] = i
    it = iter(m.items())
    first = [next(it) for _ in range(10)]
    # Writes after the iteration started are not in it (it reads one snapshot).
    m["k0005x"] = -1
    del m["k0999"]
    rest = list(it)
    got = first + rest
    assert got == [(f"k{i:04d}", i) for i in range(1000)]
    assert list(m.irange("k0500", "k0600", reverse=True)) == [f"k{i:04d}" for i in range(600, 499, -1)]
    assert m.count_range("k0100", "k0200") == 100


def test_snapshot(store):
    m = store.ordered_map("snap")
    m[b"a"] = b"1"
    m[b"b"] = b"2"
    snap = m.snapshot()
    m[b"a"] = b"9"
    m[b"c"] = b"3"
    assert snap[b"a"] == b"1" and b"c" not in snap and len(snap) == 2
    assert dict(snap) == {b"a": b"1", b"b": b"2"}
    assert snap.sequence > 0 and snap.map is m
    assert snap.ceiling_key(b"b") == b"b" and snap.higher_key(b"b") is None
    errors = []

    def elsewhere():
        try:
            snap.get(b"a")
        except RuntimeError as e:
            errors.append(e)

    th = threading.Thread(target=elsewhere)
    th.start()
    th.join(30)
    assert len(errors) == 1  # a snapshot stays on its thread
    snap.close()
    assert snap.closed
    with pytest.raises(shoal.Closed):
        snap.get(b"a")
    assert m[b"a"] == b"9"


def test_write_transactions(store):
    a = store.ordered_map("a", key="str", value="int")
    b = store.ordered_map("b", key="str", value="int")
    with a.write() as t:
        t["x"] = 1
        assert t["x"] == 1 and "x" in t and t.get("y") is None
        assert "x" not in a  # not committed yet
        assert t.put_if_absent("x", 2) is False
    assert a["x"] == 1 and t.sequence is not None
    with pytest.raises(shoal.InvalidArgument):
        t["z"] = 3  # over
    with pytest.raises(RuntimeError):
        with a.write() as t:
            t["x"] = 100
            del t["x"]
            t["w"] = 5
            raise RuntimeError("boom")
    assert a["x"] == 1 and "w" not in a
    # A second writer of the map on the same thread would wait for itself: refused.
    with pytest.raises(shoal.InvalidArgument, match="re-entrant"):
        with a.write() as t:
            t["q"] = 1
            a["q"] = 2
    assert "q" not in a
    t = a.write()
    t["w"] = 5
    t.abort()
    assert "w" not in a
    with store.ordered_write([a, b]) as t:
        t.put(a, "x", t.get(a, "x") - 1)
        t.put(b, "x", 1)
    sa, sb = store.ordered_snapshot([a, b])
    assert sa.sequence == sb.sequence and sa["x"] == 0 and sb["x"] == 1
    sa.close()
    sb.close()
    c = store.ordered_map("c")
    with pytest.raises(shoal.InvalidArgument):
        with store.ordered_write([a]) as t:
            t.put(c, b"k", b"v")  # not in the transaction
    with pytest.raises(TypeError):
        store.ordered_write([store.map("h")])


def test_kinds_codecs_and_limits(store):
    store.map("hash")
    with pytest.raises(shoal.InvalidArgument):
        store.ordered_map("hash")
    store.ordered_map("ord")
    with pytest.raises(shoal.InvalidArgument, match="ordered_map"):
        store.map("ord")
    assert store.map_kind("ord") == ("ordered", None, None)
    assert store.ordered_maps() == ["ord"] and "ord" not in store.maps()
    with pytest.raises(shoal.NotFound):
        store.ordered_map("absent", create=False)
    with pytest.raises(shoal.InvalidArgument):
        store.ordered_map("o2", key="int")
    m = store.ordered_map("ord")
    with pytest.raises(shoal.InvalidArgument):
        m[b"x" * 16385] = b"v"  # too large a key
    m[b""] = b""
    assert m[b""] == b""
    with pytest.raises(TypeError):
        m["not bytes"] = b"v"


def test_writers_on_threads_wait_without_the_gil(store):
    """A thread holding a map's write transaction does Python work while another waits
    for the same map: the waiter must not hold the GIL, or the holder could not finish."""
    m = store.ordered_map("t", key="str", value="int")
    m["n"] = 0
    started = threading.Event()

    def writer(n):
        for _ in range(n):
            with m.write() as t:
                started.set()
                v = t["n"]
                time.sleep(0.001)  # Python work while holding the lock
                t["n"] = v + 1

    ths = [threading.Thread(target=writer, args=(50,)) for _ in range(3)]
    for th in ths:
        th.start()
    for th in ths:
        th.join(120)
        assert not th.is_alive()
    assert m["n"] == 150


@pytest.mark.parametrize("method", ["fork", "spawn"])
def test_transfers_in_another_process(store, method):
    a = store.ordered_map("acct-a", key="str", value="int")
    b = store.ordered_map("acct-b", key="str", value="int")
    for i in range(10):
        a[f"acct{i:02d}"] = 100
        b[f"acct{i:02d}"] = 100
    ctx = mp.get_context(method)
    with ctx.Pool(2) as pool:
        jobs = [pool.apply_async(ow.transfer, (a, b, 300, seed)) for seed in (1, 2)]
        reads = 0
        while not all(j.ready() for j in jobs):
            sa, sb = store.ordered_snapshot([a, b])
            total = sum(sa.values()) + sum(sb.values())
            sa.close()
            sb.close()
            assert total == 2000, f"snapshot {reads}: total {total}"
            reads += 1
        done = [j.get(120) for j in jobs]
    assert all(225 == d for d in done)  # every fourth aborted
    assert sum(a.values()) + sum(b.values()) == 2000
    assert store.check().ok


def test_writer_killed_inside_a_transaction(store):
    m = store.ordered_map("k", key="str", value="int")
    m["before"] = 1
    ctx = mp.get_context("fork")
    ready = ctx.Event()
    p = ctx.Process(target=ow.kill_me_mid_transaction, args=(store.path, ready))
    p.start()
    assert ready.wait(60)
    os.kill(p.pid, signal.SIGKILL)
    p.join(60)
    assert p.exitcode == -signal.SIGKILL
    # Nothing of the transaction shows, and the map's writer lock is recovered.
    assert list(m.items()) == [("before", 1)]
    with m.write() as t:
        t["after"] = 2
    assert list(m) == ["after", "before"]
    assert store.check().ok


def test_closed_store(path):
    s = shoal.open(path)
    m = s.ordered_map("c")
    m[b"k"] = b"v"
    it = iter(m)
    s.close()
    for call in (lambda: m[b"k"], lambda: m.put_if_absent(b"x", b"y"), lambda: len(m), lambda: next(it)):
        with pytest.raises(shoal.Closed):
            call()


def test_pickles_to_a_reopen(store):
    import pickle

    m = store.ordered_map("p", key="str", value="str")
    m["a"] = "b"
    m2 = pickle.loads(pickle.dumps(m))
    assert m2["a"] == "b" and m2.name == "p"
