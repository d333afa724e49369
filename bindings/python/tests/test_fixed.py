"""shoal.FixedMap: fixed-size maps of bytes (Store.fixed_map)."""

import multiprocessing
import os
import pickle
import struct
import uuid

import hypothesis.strategies as st
import pytest
from hypothesis import settings
from hypothesis.stateful import RuleBasedStateMachine, invariant, rule

import shoal


def k4(i):
    return struct.pack("<I", i)


def v8(i):
    return struct.pack("<q", i)


def test_basic_mapping(store):
    f = store.fixed_map("f", 4, 8)
    assert isinstance(f, shoal.FixedMap)
    assert f.name == "f" and f.key_size == 4 and f.value_size == 8
    assert f.store is store
    assert len(f) == 0 and not f
    f[k4(1)] = v8(10)
    f[k4(2)] = v8(20)
    assert f[k4(1)] == v8(10)
    assert k4(1) in f and k4(3) not in f
    assert len(f) == 2
    assert f.get(k4(3)) is None
    assert f.get(k4(3), b"x") == b"x"
    assert f.get(k4(2)) == v8(20)
    with pytest.raises(KeyError):
        f[k4(3)]
    with pytest.raises(KeyError):
        del f[k4(3)]
    del f[k4(2)]
    assert sorted(f) == [k4(1)]
    assert dict(f.items()) == {k4(1): v8(10)}
    assert list(f.values()) == [v8(10)]
    assert list(f.keys()) == [k4(1)]
    assert f == {k4(1): v8(10)}
    assert f != {k4(1): v8(11)}
    assert f.to_dict() == {k4(1): v8(10)}
    # MutableMapping mixins
    assert f.setdefault(k4(5), v8(5)) == v8(5)
    assert f.setdefault(k4(5), v8(6)) == v8(5)
    assert f.pop(k4(5)) == v8(5)
    assert f.pop(k4(5), None) is None
    with pytest.raises(KeyError):
        f.pop(k4(5))
    with pytest.raises(TypeError):
        f.pop(k4(5), 1, 2)
    f[k4(6)] = v8(6)
    k, v = f.popitem()
    assert (k, v) in ((k4(1), v8(10)), (k4(6), v8(6)))
    f[k] = v
    f.update({k4(7): v8(7)}, )
    assert f[k4(7)] == v8(7)
    assert "FixedMap" in repr(f)
    f.clear()
    assert len(f) == 0


def test_swap_put_many_remove_many(store):
    f = store.fixed_map("sw", 4, 8)
    assert f.swap(k4(1), v8(1)) is None
    assert f.swap(k4(1), v8(2)) == v8(1)
    f.put_many({k4(2): v8(2), k4(3): v8(3)})
    f.put_many([(k4(4), v8(4))])
    assert f.to_dict() == {k4(i): v8(i) for i in (1, 2, 3, 4)} | {k4(1): v8(2)}
    with pytest.raises(shoal.InvalidArgument, match="item 1"):
        f.put_many([(k4(5), v8(5)), (k4(6), b"short")])
    assert f[k4(5)] == v8(5)  # the pair before the bad one was put
    assert k4(6) not in f
    assert f.remove_many([k4(1), k4(9), k4(5), k4(1)]) == 2
    assert sorted(f) == [k4(2), k4(3), k4(4)]
    with pytest.raises(TypeError):
        f.remove_many(k4(2))
    with pytest.raises(shoal.InvalidArgument):
        f.swap(k4(2), b"x")
    assert f[k4(2)] == v8(2)


def test_put_insert_replace_remove_cas(store):
    f = store.fixed_map("f", 2, 2)
    assert f.put(b"ab", b"12") is False
    assert f.put(b"ab", b"34") is True
    assert f.put_if_absent(b"ab", b"56") is False
    assert f.put_if_absent(b"cd", b"56") is True
    assert f.put_if_present(b"ef", b"00") is False
    assert f.put_if_present(b"cd", b"78") is True
    assert f[b"cd"] == b"78"
    assert f.compare_and_swap(b"cd", b"00", b"11") is False
    assert f.compare_and_swap(b"cd", b"78", b"11") is True
    assert f.compare_and_swap(b"cd", shoal.ABSENT, b"22") is False
    assert f.compare_and_swap(b"cd", b"11", shoal.ABSENT) is True
    assert b"cd" not in f
    assert f.compare_and_swap(b"cd", shoal.ABSENT, b"22") is True
    assert f[b"cd"] == b"22"
    assert f.remove(b"cd") is True
    assert f.remove(b"cd") is False


def test_add(store):
    f = store.fixed_map("c", 8, 8)
    k = b"counter!"
    assert f.add(k) == 1
    assert f.add(k, 41) == 42
    assert f.add(k, -50) == -8
    assert struct.unpack("<q", f[k])[0] == -8
    g = store.fixed_map("g", 8, 4)
    with pytest.raises(ValueError):
        g.add(k)


def test_get_many(store):
    f = store.fixed_map("gm", 4, 8)
    for i in range(0, 200, 2):
        f[k4(i)] = v8(i * 10)
    keys = [k4(i) for i in range(200)]
    got = f.get_many(keys)
    assert got == [v8(i * 10) if i % 2 == 0 else None for i in range(200)]
    assert f.get_many(iter(keys[:3]), default=b"-") == [v8(0), b"-", v8(20)]
    assert f.get_many([]) == []
    with pytest.raises(TypeError):
        f.get_many(k4(1))  # a single key, not an iterable of keys
    with pytest.raises(ValueError):
        f.get_many([k4(1), b"toolong!"])  # wrong key size


def test_modify(store):
    f = store.fixed_map("md", 4, 8)
    k = k4(7)
    seen = []

    def bump(cur):
        seen.append(cur)
        n = 0 if cur is shoal.ABSENT else struct.unpack("<q", cur)[0]
        return v8(n + 5)

    assert f.modify(k, bump) == v8(5)
    assert f.modify(k, bump) == v8(10)
    assert seen == [shoal.ABSENT, v8(5)]
    assert f.modify(k, lambda cur: shoal.ABSENT) is shoal.ABSENT
    assert k not in f
    assert f.modify(k, lambda cur: shoal.ABSENT) is shoal.ABSENT  # absent stays absent
    assert k not in f

    class Boom(Exception):
        pass

    f[k] = v8(1)

    def fail(cur):
        raise Boom()

    with pytest.raises(Boom):
        f.modify(k, fail)
    assert f[k] == v8(1)  # an exception changes nothing
    with pytest.raises(ValueError):
        f.modify(k, lambda cur: b"short")  # wrong value size
    assert f[k] == v8(1)


def test_modify_reruns_when_the_key_changes_in_between(store):
    f = store.fixed_map("mr", 4, 8)
    k = k4(1)
    f[k] = v8(1)
    calls = []

    def racy(cur):
        calls.append(cur)
        if len(calls) == 1:
            f[k] = v8(100)  # another write comes in between
        return v8(struct.unpack("<q", cur)[0] + 1)

    assert f.modify(k, racy) == v8(101)
    assert calls == [v8(1), v8(100)]
    assert f[k] == v8(101)


def _modify_worker(path, n, barrier):
    s = shoal.open(path, create=False)
    f = s.fixed_map("mp", 4, 8, create=False)
    barrier.wait(60)  # all at once, so that their read-modify-writes interleave
    for _ in range(n):
        f.modify(k4(3), lambda cur: v8((0 if cur is shoal.ABSENT else struct.unpack("<q", cur)[0]) + 1))
    s.close()


def test_modify_loses_no_update_across_processes(store):
    store.fixed_map("mp", 4, 8)
    ctx = multiprocessing.get_context("fork")
    barrier = ctx.Barrier(4)
    ps = [ctx.Process(target=_modify_worker, args=(store.path, 3000, barrier)) for _ in range(4)]
    for p in ps:
        p.start()
    for p in ps:
        p.join(300)
        assert p.exitcode == 0
    assert struct.unpack("<q", store.fixed_map("mp", 4, 8)[k4(3)])[0] == 12000


def test_wrong_sizes_raise_value_error(store):
    f = store.fixed_map("f", 4, 8)
    for call in (
        lambda: f[b"abc"],
        lambda: f.__setitem__(b"abcd", b"short"),
        lambda: f.__setitem__(b"abcde", v8(1)),
        lambda: b"ab" in f,
        lambda: f.get(b"abcdef"),
        lambda: f.compare_and_swap(b"abcd", b"x", v8(1)),
        lambda: f.add(b"ab"),
    ):
        with pytest.raises(ValueError) as e:
            call()
        assert isinstance(e.value, shoal.InvalidArgument)
    with pytest.raises(TypeError):
        f["abcd"] = v8(1)
    for ks, vs in ((0, 8), (4, 10**6), (10**6, 8)):
        with pytest.raises(ValueError):
            store.fixed_map("bad", ks, vs)


def test_open_kinds_and_errors(store):
    with pytest.raises(shoal.NotFound):
        store.fixed_map("absent", 4, 4, create=False)
    store.fixed_map("f", 4, 4)
    assert store.fixed_map("f", 4, 4, create=False).key_size == 4
    with pytest.raises(ValueError):
        store.fixed_map("f", 4, 8)
    store.map("v")
    store.map("u", uids=True)
    # The other kind: the message names the Python call that opens it, not a Rust one.
    with pytest.raises(shoal.InvalidArgument) as e:
        store.fixed_map("v", 4, 4)
    assert 'store.map("v")' in str(e.value) and "Store::" not in str(e.value)
    for call in (lambda: store.map("f"), lambda: store.map("f", uids=True)):
        with pytest.raises(shoal.InvalidArgument) as e:
            call()
        assert 'store.fixed_map("f", 4, 4)' in str(e.value) and "Store::" not in str(e.value)
    assert store.map_kind("f") == ("fixed", 4, 4)
    assert store.map_kind("v") == ("variable", None, None)
    assert store.map_kind("u") == ("uids", None, None)
    assert store.map_kind("nope") is None
    assert "f" in store.maps()


def test_iteration_and_stats(store):
    f = store.fixed_map("f", 4, 8)
    want = {k4(i): v8(i * 3) for i in range(3000)}
    f.update(want)
    assert dict(f.items()) == want
    assert set(f) == set(want)
    assert sorted(f.values()) == sorted(want.values())
    s = f.stats()
    assert s["entries"] == 3000 and s["key_size"] == 4 and s["value_size"] == 8
    assert s["capacity"] >= 3000 and s["segments"] >= 1
    # Changing the map while iterating never raises.
    for k in f:
        del f[k]
    assert len(f) == 0
    z = store.fixed_map("z", 1, 0)
    z[b"a"] = b""
    assert dict(z) == {b"a": b""}


def test_closed_store(path):
    s = shoal.open(path)
    f = s.fixed_map("f", 1, 1)
    f[b"a"] = b"b"
    it = iter(f)
    s.close()
    with pytest.raises(shoal.Closed):
        f[b"a"]
    with pytest.raises(shoal.Closed):
        next(it)
    with pytest.raises(shoal.Closed):
        s.fixed_map("f", 1, 1)
    assert "closed" in repr(f)


def _child_add(f, n):
    for _ in range(n):
        f.add(b"k" * 8)


def test_pickle_and_processes(store):
    f = store.fixed_map("cnt", 8, 8)
    g = pickle.loads(pickle.dumps(f))
    assert g.name == "cnt" and g.key_size == 8 and g.value_size == 8
    ctx = multiprocessing.get_context("fork")
    procs = [ctx.Process(target=_child_add, args=(f, 500)) for _ in range(2)]
    for p in procs:
        p.start()
    for p in procs:
        p.join(60)
        assert p.exitcode == 0
    assert struct.unpack("<q", f[b"k" * 8])[0] == 1000


KEYS = st.tuples(st.integers(0, 3), st.integers(0, 3)).map(bytes)
VALUES = st.binary(min_size=3, max_size=3)


class FixedVsDict(RuleBasedStateMachine):
    def __init__(self):
        super().__init__()
        self.path = f"/dev/shm/shoal-hypf-{os.getpid()}-{uuid.uuid4().hex}.shoal"
        self.store = shoal.open(self.path)
        self.m = self.store.fixed_map("f", 2, 3)
        self.d = {}

    def teardown(self):
        self.store.close()
        shoal.remove(self.path, missing_ok=True)

    @rule(k=KEYS, v=VALUES)
    def setitem(self, k, v):
        assert self.m.put(k, v) == (k in self.d)
        self.d[k] = v

    @rule(k=KEYS)
    def getitem(self, k):
        assert self.m.get(k) == self.d.get(k)

    @rule(k=KEYS)
    def remove(self, k):
        assert self.m.remove(k) == (self.d.pop(k, None) is not None)

    @rule(k=KEYS, v=VALUES)
    def insert(self, k, v):
        assert self.m.put_if_absent(k, v) == (k not in self.d)
        self.d.setdefault(k, v)

    @rule(k=KEYS, v=VALUES)
    def replace(self, k, v):
        assert self.m.put_if_present(k, v) == (k in self.d)
        if k in self.d:
            self.d[k] = v

    @rule(k=KEYS, e=st.one_of(st.just(shoal.ABSENT), VALUES), n=st.one_of(st.just(shoal.ABSENT), VALUES))
    def cas(self, k, e, n):
        cur = self.d.get(k, shoal.ABSENT)
        ok = cur is e if e is shoal.ABSENT else cur == e
        assert self.m.compare_and_swap(k, e, n) == ok
        if ok:
            if n is shoal.ABSENT:
                self.d.pop(k, None)
            else:
                self.d[k] = n

    @rule(k=KEYS, v=VALUES)
    def setdefault(self, k, v):
        assert self.m.setdefault(k, v) == self.d.setdefault(k, v)

    @rule(k=KEYS)
    def pop(self, k):
        assert self.m.pop(k, None) == self.d.pop(k, None)

    @rule(k=KEYS, v=VALUES)
    def swap(self, k, v):
        assert self.m.swap(k, v) == self.d.get(k)
        self.d[k] = v

    @rule(items=st.lists(st.tuples(KEYS, VALUES), max_size=5))
    def put_many(self, items):
        self.m.put_many(items)
        self.d.update(items)

    @rule(keys=st.lists(KEYS, max_size=5))
    def remove_many(self, keys):
        want = sum(self.d.pop(k, None) is not None for k in keys)
        assert self.m.remove_many(keys) == want

    @rule()
    def clear(self):
        self.m.clear()
        self.d.clear()

    @invariant()
    def same(self):
        assert len(self.m) == len(self.d)
        assert self.m.to_dict() == self.d


FixedVsDict.TestCase.settings = settings(max_examples=30, stateful_step_count=30, deadline=None)
test_fixed_vs_dict = FixedVsDict.TestCase


def test_fixed_maps_record_types_for_other_languages(store):
    f = store.fixed_map("ids", 8, 8, key_type="u64", value_type="user:0x2a")
    assert (f.key_type, f.value_type) == ("u64", "user:0x2a")
    assert store.fixed_map("ids", 8, 8).key_type == "u64"
    assert store.fixed_map("raw", 4, 4).key_type is None
    with pytest.raises(shoal.InvalidArgument, match="keys as u64, not i64"):
        store.fixed_map("ids", 8, 8, key_type="i64")
    with pytest.raises(shoal.InvalidArgument, match="8 bytes"):
        store.fixed_map("wide", 16, 8, key_type="f64")
    with pytest.raises(ValueError, match="unknown type"):
        store.fixed_map("x", 8, 8, value_type="text")
