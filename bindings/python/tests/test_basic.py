"""Dict semantics, errors, lifecycle, pickling."""

import collections.abc
import os
import pickle
import subprocess
import sys
import threading
import time

import pytest

import shoal


def test_mapping_protocol(store):
    m = store.map("m", key="str", value="int")
    assert isinstance(m, collections.abc.MutableMapping)
    assert len(m) == 0 and not m and list(m) == []
    m["a"] = 1
    m["b"] = 2
    assert m["a"] == 1 and len(m) == 2 and "a" in m and "z" not in m
    assert m.get("z") is None and m.get("z", 5) == 5 and m.get("a", 5) == 1
    m["a"] = 10
    assert m["a"] == 10 and len(m) == 2
    del m["a"]
    assert "a" not in m
    with pytest.raises(KeyError) as e:
        m["a"]
    assert e.value.args == ("a",)
    with pytest.raises(KeyError):
        del m["a"]
    assert sorted(m) == ["b"]
    assert m == {"b": 2} and m != {"b": 3} and not (m == [("b", 2)])
    assert m.to_dict() == {"b": 2} == m.copy()


def test_views(store):
    m = store.map("v", key="str", value="str")
    m.update({"x": "1", "y": "2"}, z="3")
    assert set(m.keys()) == {"x", "y", "z"}
    assert sorted(m.values()) == ["1", "2", "3"]
    assert set(m.items()) == {("x", "1"), ("y", "2"), ("z", "3")}
    assert "x" in m.keys() and ("x", "1") in m.items() and ("x", "2") not in m.items()
    assert "2" in m.values() and "9" not in m.values()
    assert len(m.keys()) == 3 == len(m.items()) == len(m.values())
    assert m.keys() & {"x", "q"} == {"x"}
    ks = m.keys()
    m["w"] = "4"
    assert "w" in ks  # live
    assert isinstance(ks, collections.abc.KeysView)
    assert isinstance(m.items(), collections.abc.ItemsView)
    assert isinstance(m.values(), collections.abc.ValuesView)


def test_pop_popitem_setdefault_update(store):
    m = store.map("p", key="bytes", value="bytes")
    with pytest.raises(KeyError):
        m.pop(b"x")
    assert m.pop(b"x", None) is None and m.pop(b"x", b"d") == b"d"
    m[b"x"] = b"1"
    assert m.pop(b"x") == b"1" and b"x" not in m
    with pytest.raises(KeyError):
        m.popitem()
    m.update([(b"a", b"1"), (b"b", b"2")])
    got = {m.popitem(), m.popitem()}
    assert got == {(b"a", b"1"), (b"b", b"2")} and len(m) == 0
    d = b"dflt"
    assert m.setdefault(b"k", d) is d
    assert m.setdefault(b"k", b"other") == b"dflt"
    with pytest.raises(TypeError):
        m.setdefault(b"new")  # None is not bytes
    assert m.setdefault(b"k") == b"dflt"  # present: default never encoded
    with pytest.raises(TypeError):
        m.update({b"ok": b"1", b"bad": 2})
    assert b"ok" not in m  # everything is encoded before anything is written
    with pytest.raises(ValueError):
        m.update([(b"a", b"1", b"extra")])
    with pytest.raises(TypeError):
        m.pop(b"a", 1, 2)
    m.clear()
    assert len(m) == 0 and list(m.items()) == []


def test_bytes_like_inputs(store):
    m = store.map("b")
    m[bytearray(b"ba")] = memoryview(b"mv")
    assert m[b"ba"] == b"mv" and m[memoryview(b"ba")] == b"mv"
    for bad in ("str", 1, None, 1.0):
        with pytest.raises(TypeError):
            m[bad] = b"v"
        with pytest.raises(TypeError):
            m[b"k"] = bad
        with pytest.raises(TypeError):
            bad in m
        with pytest.raises(TypeError):
            m.get(bad)


def test_extras(store):
    m = store.map("x", key="str", value="int")
    assert m.put_if_absent("a", 1) and not m.put_if_absent("a", 2) and m["a"] == 1
    assert m.put_if_present("a", 3) and not m.put_if_present("b", 3) and "b" not in m
    assert m.swap("a", 4) == 3 and m.swap("c", 5) is None and m["c"] == 5
    assert m.stats()["entries"] == 2
    assert store.stats()["maps"] >= 1


def test_former_names_warn_and_still_work(store):
    """insert, replace and incr stay one release as the former names of put_if_absent,
    put_if_present and add: the same calls, with a DeprecationWarning at the caller."""
    m = store.map("former", key="str", value="int")
    with pytest.warns(DeprecationWarning, match="put_if_absent") as w:
        assert m.insert("a", 1) and not m.insert("a", 2)
    assert w[0].filename == __file__
    with pytest.warns(DeprecationWarning, match="put_if_present"):
        assert m.replace("a", 3) and not m.replace("b", 3)
    with pytest.warns(DeprecationWarning, match="renamed add"):
        assert m.incr("a") == 4 and m.incr("n", 5) == 5
    assert m.to_dict() == {"a": 4, "n": 5}
    with pytest.warns(DeprecationWarning), pytest.raises(TypeError, match="incr needs"):
        store.map("former_str", key="str", value="str").incr("x")
    f = store.fixed_map("former_fixed", 2, 2)
    with pytest.warns(DeprecationWarning, match="put_if_absent") as w:
        assert f.insert(b"ab", b"12") and not f.insert(b"ab", b"34")
    assert w[0].filename == __file__
    with pytest.warns(DeprecationWarning, match="put_if_present"):
        assert f.replace(b"ab", b"56") and not f.replace(b"cd", b"78")
    assert f.to_dict() == {b"ab": b"56"}


def test_rmw_api(store):
    m = store.map("r", key="str", value="int")
    assert m.add("n") == 1 and m.add("n", 10) == 11 and m.add("n", -12) == -1
    m["big"] = 2**63 - 1
    assert m.add("big") == -(2**63)  # wraps like int64, documented
    with pytest.raises(TypeError):
        store.map("r2", key="str", value="str").add("n")
    with pytest.raises(OverflowError):
        m.add("n", 2**64)
    with pytest.raises(TypeError):
        m.add("n", 1.5)
    A = shoal.ABSENT
    assert not A and repr(A) == "shoal.ABSENT" and pickle.loads(pickle.dumps(A)) is A
    assert m.compare_and_swap("c", A, 1) and not m.compare_and_swap("c", A, 2)
    assert not m.compare_and_swap("c", 2, 3) and m.compare_and_swap("c", 1, 3) and m["c"] == 3
    assert m.compare_and_swap("c", 3, A) and "c" not in m
    assert m.modify("c", lambda v: 7 if v is A else v + 1) == 7
    assert m.modify("c", lambda v: v * 2) == 14 and m["c"] == 14
    assert m.modify("c", lambda v: A) is A and "c" not in m
    assert m.modify("c", lambda v: A) is A and "c" not in m

    def boom(v):
        raise RuntimeError("no")

    m["c"] = 1
    with pytest.raises(RuntimeError):
        m.modify("c", boom)
    assert m["c"] == 1
    m.put_many({"p": 1, "q": 2})
    m.put_many([("r", 3)])
    assert m.get_many(["p", "q", "r", "zz"]) == [1, 2, 3, None]
    assert m.get_many(iter(["zz"]), default=-1) == [-1]
    assert m.get_many([]) == []
    assert m.remove_many(["p", "zz"]) == 1 and "p" not in m
    with pytest.raises(TypeError):
        m.get_many("pq")  # a str is not taken as an iterable of keys
    many = {f"k{i}": i for i in range(5000)}
    m.put_many(many)
    assert m.get_many(list(many)) == list(many.values())


def test_errors_hierarchy(path):
    assert issubclass(shoal.NotFound, shoal.Error) and issubclass(shoal.NotFound, FileNotFoundError)
    assert issubclass(shoal.Timeout, TimeoutError) and issubclass(shoal.NoSpace, OSError)
    for name in ("StoreFull", "Corrupt", "NotAStore", "VersionMismatch", "InvalidArgument", "Closed", "DecodeError"):
        assert issubclass(getattr(shoal, name), shoal.Error)
    with pytest.raises(shoal.NotFound) as e:
        shoal.open(path, create=False)
    assert e.value.errno == 2 and repr(e.value).startswith("NotFound")
    with pytest.raises(FileNotFoundError):
        shoal.remove(path)
    shoal.remove(path, missing_ok=True)
    with shoal.open(path, exclusive=True):
        pass
    with pytest.raises(shoal.AlreadyExists):
        shoal.open(path, exclusive=True)
    with shoal.open(path) as s:
        with pytest.raises(shoal.NotFound):
            s.map("nope", create=False)
        m = s.map("m")  # no codecs recorded: others may read it their way
        with pytest.raises(shoal.InvalidArgument):
            m[b"k" * (shoal.MAX_KEY_LEN + 1)] = b"v"
        with pytest.raises(ValueError):
            s.map("m", key="utf8")
        m[b"five"] = b"12345"
        with pytest.raises(shoal.DecodeError):
            s.map("m", value="int")[b"five"]
        m[b"bad"] = b"\xff"
        with pytest.raises(shoal.DecodeError):
            s.map("m", value="str")[b"bad"]
    # pickled exceptions come back as shoal.X
    err = pickle.loads(pickle.dumps(shoal.StoreFull("x")))
    assert type(err) is shoal.StoreFull


def test_not_a_store_and_store_full(tmp_path, path):
    p = tmp_path / "junk"
    p.write_bytes(b"not a store at all" * 100)
    with pytest.raises(shoal.NotAStore):
        shoal.open(p)
    with shoal.open(path, max_size=4 << 20, chunk_size=64 << 10) as s:
        m = s.map("f")
        with pytest.raises(shoal.StoreFull):
            for i in range(100000):
                m[i.to_bytes(8, "little")] = b"x" * 1000
        assert s.check().ok
        m[b"\x00" * 8] = b"overwrite still works"


def test_close_and_context(path):
    with shoal.open(path) as s:
        m = s.map("m", key="str", value="str")
        m["a"] = "b"
        it = iter(m)
        assert not s.closed and s.path == path
        assert "m" in s.maps()
    assert s.closed and "closed" in repr(s) and "closed" in repr(m)
    for f in (lambda: m["a"], lambda: s.map("m"), lambda: len(m), lambda: next(it), s.check):
        with pytest.raises(shoal.Closed):
            f()
    with pytest.raises(ValueError):
        pickle.dumps(s)
    s.close()  # twice is fine
    s2 = shoal.open(path, create=False)  # the file stays
    assert s2.map("m", key="str", value="str")["a"] == "b"
    assert s2.drop_map("m") and not s2.drop_map("m") and s2.maps() == []
    s2.close()
    shoal.remove(path)
    assert not shoal.resolve_path(path).endswith("x")
    assert shoal.resolve_path("demo") == "/dev/shm/demo.shoal"


def test_pickle_roundtrip_same_process(store):
    m = store.map("pk", key="int", value="json")
    m[1] = {"a": [1, 2]}
    m2 = pickle.loads(pickle.dumps(m))
    assert (m2.name, m2.key_codec, m2.value_codec) == ("pk", "int", "json")
    assert m2[1] == {"a": [1, 2]} and m2.store.path == store.path
    s2 = pickle.loads(pickle.dumps(store))
    assert s2.path == store.path and s2.map("pk", key="int", value="json") == m


def test_iteration_is_weakly_consistent(store):
    m = store.map("it", key="int", value="int")
    m.put_many((i, i) for i in range(3000))
    seen = []
    for k in m:  # mutating while iterating never raises
        seen.append(k)
        if k % 2 == 0:
            del m[k]
        m[10000 + k] = 0
    assert len(set(seen)) == len(seen)
    assert set(range(3000)) <= set(seen) | set()
    assert all(k % 2 == 1 for k in m if k < 3000)


def test_threads_release_the_gil(store):
    m = store.map("t", key="int", value="int")
    def work(base):
        for i in range(2000):
            m[base + i] = i
            m.add(-1)
    ts = [threading.Thread(target=work, args=(j * 10000,)) for j in range(4)]
    for t in ts:
        t.start()
    for t in ts:
        t.join()
    assert len(m) == 8001 and m[-1] == 8000
    assert store.check().ok


def test_check_report(store):
    store.map("c")[b"k"] = b"v"
    r = store.check()
    assert r.ok and r.problems == [] and r.maps >= 1 and r.entries >= 1
    assert "ok" in str(r) and "CheckReport" in repr(r)


def test_backup_idle_copies_a_closed_store_and_refuses_an_open_one(tmp_path):
    p, c = tmp_path / "b.shoal", tmp_path / "b-copy.shoal"
    s = shoal.open(p)
    s.map("m", key="str", value="str")["a"] = "b"
    with pytest.raises(shoal.TooManyUsers):
        shoal.backup_idle(p, c)
    assert not c.exists()
    s.close()
    assert shoal.backup_idle(p, c) == p.stat().st_size
    with pytest.raises(shoal.AlreadyExists):
        shoal.backup_idle(p, c)
    with shoal.open(c) as copy:
        assert copy.map("m", key="str", value="str")["a"] == "b"
        assert copy.check().ok


def test_disk_store_flush_and_repair(tmp_path):
    p = tmp_path / "disk.shoal"  # on disk: checksums on by default
    with shoal.open(p, sync_writes=False) as s:
        m = s.map("m", key="str", value="str")
        m["a"] = "b"
        s.flush()
    s2, report = shoal.repair(p)  # opens normally: nothing to repair
    assert report == {"found": [], "dropped": [], "rebuilt": []}
    assert s2.map("m", key="str", value="str")["a"] == "b"
    s2.close()
    with shoal.open(p, sync_writes=True) as s:
        s.map("m", key="str", value="str")["c"] = "d"
        assert s.check().ok


def _fs_type(path):
    """The type of the filesystem holding `path` (from /proc/mounts; "" if unknown)."""
    best, fs = "", ""
    try:
        with open("/proc/mounts") as f:
            for line in f:
                mnt, typ = line.split()[1:3]
                if (str(path) + "/").startswith(mnt.rstrip("/") + "/") and len(mnt) > len(best):
                    best, fs = mnt, typ
    except OSError:
        pass
    return fs


def test_unclean_store_with_a_torn_record_names_shoal_repair(tmp_path):
    if _fs_type(tmp_path) == "tmpfs":
        pytest.skip(f"{tmp_path} is on tmpfs, where no store is verified on open")
    p = tmp_path / "torn.shoal"  # on disk: checksums on by default
    with shoal.open(p) as s:
        m = s.map("m")
        m[b"good"] = b"g" * 100
        m[b"torn"] = b"t" * 100
    b = bytearray(p.read_bytes())
    at = b.find(b"torntttt")
    assert at > 0
    b[at + 4 + 50] ^= 1  # a byte of its value: the record fails its checksum
    b[576:584] = bytes(8)  # the clean flag: not closed cleanly, as after an OS crash
    p.write_bytes(bytes(b))
    with pytest.raises(shoal.Corrupt) as e:
        shoal.open(p, create=False)
    msg = str(e.value)
    assert "not closed cleanly" in msg and f'shoal.repair("{p}")' in msg, msg
    assert "Store::" not in msg, msg
    s, report = shoal.repair(p)
    assert len(report["dropped"]) == 1, report
    m = s.map("m")
    assert m[b"good"] == b"g" * 100 and b"torn" not in m
    s.close()


def test_a_directory_is_an_invalid_argument(tmp_path):
    for call in (lambda: shoal.open(tmp_path), lambda: shoal.open(tmp_path, create=False), lambda: shoal.repair(tmp_path)):
        with pytest.raises(shoal.InvalidArgument, match="is a directory"):
            call()


def test_batch_groups_writes_and_nests(tmp_path):
    p = tmp_path / "batch.shoal"  # on disk, where sync_writes flushes for real
    with shoal.open(p, sync_writes=True) as s:
        m = s.map("m")
        f = s.fixed_map("f", 8, 8)
        with s.batch() as b:
            assert isinstance(b, shoal.Batch)
            for i in range(100):
                m[b"k%d" % i] = b"v"
                f[i.to_bytes(8, "little")] = (2 * i).to_bytes(8, "little")
            with s.batch():  # nested: the outermost flushes
                m[b"inner"] = b"1"
        assert len(m) == 101 and m[b"inner"] == b"1"
        assert f[(7).to_bytes(8, "little")] == (14).to_bytes(8, "little")
        # An exception in the block propagates; the writes before it stay.
        with pytest.raises(KeyError):
            with s.batch():
                m[b"before"] = b"kept"
                raise KeyError("in the block")
        assert m[b"before"] == b"kept"
        # A Batch is entered once.
        b = s.batch()
        with b:
            with pytest.raises(RuntimeError):
                b.__enter__()
        assert s.check().ok
    with shoal.open(p) as s2:  # and everything is in the file
        assert len(s2.map("m")) == 102
    closed_store = shoal.open(tmp_path / "closed.shoal")
    closed_store.close()
    with pytest.raises(shoal.Closed):
        closed_store.batch()


def test_gil_is_released_during_batch_calls(store):
    """Another thread runs while get_many/put_many work in the engine."""
    m = store.map("gil")
    keys = [b"%016d" % i for i in range(20_000)]
    m.put_many(zip(keys, keys))
    count = 0
    stop = False

    def spin():
        nonlocal count
        while not stop:
            count += 1

    t = threading.Thread(target=spin)
    t.start()
    try:
        time.sleep(0.01)
        progressed = 0
        for _ in range(2):
            before = count
            m.get_many(keys)
            m.put_many(zip(keys, keys))
            progressed += count - before
        assert progressed > 0
    finally:
        stop = True
        t.join()


_PRETOUCH_PROBE = r"""
import os, sys, time, shoal

def pretouch_threads():
    n = 0
    for t in os.listdir("/proc/self/task"):
        with open(f"/proc/self/task/{t}/comm") as f:
            n += f.read().strip() == "shoal-pretouch"
    return n

path, pretouch = sys.argv[1], sys.argv[2] == "1"
with shoal.open(path, pretouch=pretouch) as s:
    m = s.map("m")
    for i in range(2000):  # ~8 MB: the file grows by many chunks
        m[b"k%d" % i] = bytes(4096)
    assert len(m) == 2000
    # A new thread names itself once it runs: wait for it (or, when off, give it time to
    # show up if it wrongly started), at most 30 s.
    deadline = time.monotonic() + (30 if pretouch else 0.5)
    while pretouch_threads() != (1 if pretouch else -1) and time.monotonic() < deadline:
        time.sleep(0.01)
    print(pretouch_threads())
"""


@pytest.mark.skipif(not os.path.isdir("/proc/self/task") or not os.path.isdir("/dev/shm"), reason="Linux /proc and /dev/shm")
@pytest.mark.parametrize("pretouch", [True, False])
def test_pretouch_option_starts_the_thread_or_not(path, pretouch):
    # A fresh interpreter: the thread, once started, serves every store of its process.
    out = subprocess.run(
        [sys.executable, "-c", _PRETOUCH_PROBE, path, "1" if pretouch else "0"],
        capture_output=True, text=True, timeout=120,
    )
    assert out.returncode == 0, out.stderr
    assert int(out.stdout) == (1 if pretouch else 0)


def test_read_only(path):
    with shoal.open(path) as s:
        m = s.map("m", key="str", value="int")
        for i in range(100):
            m[f"k{i}"] = i
        s.fixed_map("f", 8, 8)[b"\x01" * 8] = b"\x02" * 8
    before = open(path, "rb").read()
    with shoal.open(path, read_only=True) as r:
        m = r.map("m", key="str", value="int", create=False)
        assert len(m) == 100 and m["k7"] == 7
        assert sorted(m.keys()) == sorted(f"k{i}" for i in range(100))
        assert r.fixed_map("f", 8, 8, create=False)[b"\x01" * 8] == b"\x02" * 8
        assert r.check().ok
        with pytest.raises(shoal.ReadOnly) as e:
            m["k7"] = 8
        assert isinstance(e.value, PermissionError) and "read-only" in str(e.value)
        with pytest.raises(shoal.ReadOnly):
            del m["k1"]
        with pytest.raises(shoal.ReadOnly):
            r.map("new")
        with pytest.raises(shoal.ReadOnly):
            r.compact()
        assert m["k7"] == 7
    assert open(path, "rb").read() == before
    with pytest.raises(shoal.InvalidArgument):
        shoal.open(path, read_only=True, exclusive=True)
    shoal.remove(path)
    with pytest.raises(shoal.NotFound):
        shoal.open(path, read_only=True)
