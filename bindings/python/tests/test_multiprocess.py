"""Many processes on one store: under fork, spawn and forkserver."""

import multiprocessing as mp
import os
import random
import signal
import time

import pytest

import _workers as w
import shoal

METHODS = ["fork", "spawn", "forkserver"]


@pytest.mark.parametrize("method", METHODS)
def test_writers_and_readers_at_once(store, method):
    ctx = mp.get_context(method)
    m = store.map("wr", key="str", value="int")
    n_writers, per = 3, 2000
    with ctx.Pool(n_writers + 2) as pool:
        readers = [pool.apply_async(w.read_until_done, (m, 0)) for _ in range(2)]
        writers = [pool.apply_async(w.write_range, (m, j * per, (j + 1) * per)) for j in range(n_writers)]
        assert [r.get(60) for r in writers] == [per] * n_writers
        m["done"] = 1
        for r in readers:
            seen, bad = r.get(60)
            assert bad == 0
    del m["done"]
    assert len(m) == n_writers * per
    assert m == {f"k{i}": i * 3 for i in range(n_writers * per)}
    assert store.check().ok


LOST_UPDATE = [
    ("incr", "fork"),
    ("incr", "spawn"),
    ("incr", "forkserver"),
    ("cas", "fork"),
    ("modify", "fork"),
]


@pytest.mark.parametrize("how,method", LOST_UPDATE)
def test_no_lost_update(store, how, method):
    """N processes x M increments = exactly N*M."""
    n, per = 4, 1000
    fn = {"incr": w.incr_many, "cas": w.cas_incr_many, "modify": w.modify_incr_many}[how]
    ctx = mp.get_context(method)
    m = store.map("counter", key="str", value="int")
    procs = [ctx.Process(target=fn, args=(m, per)) for _ in range(n)]
    for p in procs:
        p.start()
    for p in procs:
        p.join(120)
        assert p.exitcode == 0
    assert m["counter"] == n * per


def test_store_opened_before_fork_works_in_child(store):
    """No pickling at all: the child inherits the open store and map through fork()."""
    m = store.map("inh", key="str", value="str")
    m["parent"] = "yes"
    pid = os.fork()
    if pid == 0:
        code = 1
        try:
            if m["parent"] == "yes":
                m["child"] = str(os.getpid())
                code = 0
        finally:
            os._exit(code)
    _, status = os.waitpid(pid, 0)
    assert os.waitstatus_to_exitcode(status) == 0
    assert m["child"] == str(pid)
    assert store.check().ok


@pytest.mark.parametrize("method", METHODS)
def test_pass_map_and_store_to_child(store, method):
    ctx = mp.get_context(method)
    m = store.map("pass", key="str", value="json")
    m["a"] = {"x": [1, 2]}
    with ctx.Pool(1) as pool:
        assert pool.apply(w.map_info, (m,)) == ("pass", "str", "json", {"a": {"x": [1, 2]}})
        assert pool.apply(w.store_roundtrip, (store,)) == store.path
    assert store.map("from-child", key="str", value="str")["pid"].isdigit()


def test_setdefault_and_pop_are_atomic(store):
    ctx = mp.get_context("fork")
    m = store.map("race", key="str", value="int")
    keys = [f"p{i}" for i in range(3000)]
    m.put_many((k, 1) for k in keys)
    with ctx.Pool(4) as pool:
        winners = pool.starmap(w.setdefault_race, [(m, "sd", j) for j in range(8)])
        assert len(set(winners)) == 1 and winners[0] == m["sd"]
        got = pool.starmap(w.pop_race, [(m, keys)] * 4)
    popped = [k for g in got for k in g]
    assert sorted(popped) == sorted(keys)  # each key popped by exactly one process
    assert all(k not in m for k in keys)


def test_sigkilled_writer_leaves_map_usable(store):
    ctx = mp.get_context("fork")
    rnd = random.Random(7)
    for round_ in range(6):
        ready = ctx.Event()
        p = ctx.Process(target=w.put_forever, args=(store.path, ready))
        p.start()
        assert ready.wait(30)
        time.sleep(rnd.uniform(0.02, 0.2))
        os.kill(p.pid, signal.SIGKILL)
        p.join()
        assert p.exitcode == -signal.SIGKILL
        # reopen (a fresh handle in this process), read everything, write, check
        with shoal.open(store.path, create=False) as s:
            m = s.map("kill", key="str", value="bytes")
            items = dict(m.items())
            assert len(items) == len(m)
            for k, v in list(items.items())[:500]:
                assert m[k] == v
            m[f"after-{round_}"] = b"ok"
            m.pop("k1", None)
            assert m[f"after-{round_}"] == b"ok"
            r = s.check()
            assert r.ok, str(r)
