"""Store.backup, the hot backup: a copy of a store in use, taken while a thread or
another process writes, opens, passes check and holds one instant's state (a pair of
keys written together in one transaction is equal in the copy)."""

import multiprocessing
import struct
import threading

import pytest

import _workers as w
import shoal


def check_copy(copy):
    with shoal.open(copy) as c:
        assert c.check().ok
        f = c.fixed_map("pair", 1, 8, create=False)
        a, b = f[b"a"], f[b"b"]
        assert a == b, (struct.unpack("<Q", a)[0], struct.unpack("<Q", b)[0])
        assert struct.unpack("<Q", a)[0] >= 100
        assert c.map("m", key="str", value="str", create=False)["k"] == "v"


def test_backup_while_a_thread_writes(store, path, tmp_path):
    store.map("m", key="str", value="str")["k"] = "v"
    f = store.fixed_map("pair", 1, 8)
    ready, stop = threading.Event(), threading.Event()
    counts = []

    def writer():
        i = 0
        while not stop.is_set():
            i += 1
            x = struct.pack("<Q", i)
            store.transaction().put(f, b"a", x).put(f, b"b", x).commit()
            if i == 100:
                ready.set()
        counts.append(i)

    t = threading.Thread(target=writer)
    t.start()
    try:
        assert ready.wait(60), "the writer made no progress"
        copies = [tmp_path / f"copy{i}.shoal" for i in range(3)]
        for c in copies:
            n = store.backup(c)
            assert n == c.stat().st_size
    finally:
        stop.set()
        t.join(60)
    assert counts and counts[0] >= 100
    for c in copies:
        check_copy(c)
    with pytest.raises(shoal.AlreadyExists):
        store.backup(copies[0])
    assert store.check().ok


def test_backup_while_another_process_writes(store, path, tmp_path):
    store.map("m", key="str", value="str")["k"] = "v"
    store.fixed_map("pair", 1, 8)
    ctx = multiprocessing.get_context("spawn")
    # Events reach a child as arguments of Process (not through a pool's queue).
    ready, stop = ctx.Event(), ctx.Event()
    p = ctx.Process(target=w.pair_writer, args=(path, ready, stop))
    p.start()
    try:
        assert ready.wait(60), "the writer process made no progress"
        copies = [tmp_path / f"copy{i}.shoal" for i in range(3)]
        for c in copies:
            store.backup(c)
    finally:
        stop.set()
        p.join(60)
    assert p.exitcode == 0
    for c in copies:
        check_copy(c)
