"""Store.backup, the hot backup: a copy of a store in use, taken while a thread or
another process writes, opens, passes check and holds one instant's state (a pair of
keys written together in one transaction, in two maps a chunk apart in the file, is
equal in the copy)."""

import multiprocessing
import struct
import threading

import pytest

import _workers as w
import shoal


def check_copy(copy):
    with shoal.open(copy) as c:
        assert c.check().ok
        a = c.fixed_map("pa", 1, 8, create=False)[b"k"]
        b = c.fixed_map("pb", 1, 8, create=False)[b"k"]
        assert a == b, (struct.unpack("<Q", a)[0], struct.unpack("<Q", b)[0])
        assert struct.unpack("<Q", a)[0] >= 100
        assert c.map("m", key="str", value="str", create=False)["k"] == "v"


def copies_while(store, tmp_path, writer, ready, stop):
    """Starts `writer` (a Thread or a Process running w.pair_writer), copies the store 20
    times once it is going, stops it; returns the copies' paths."""
    writer.start()
    try:
        assert ready.wait(60), "the writer made no progress"
        copies = [tmp_path / f"copy{i}.shoal" for i in range(20)]
        for c in copies:
            assert store.backup(c) == c.stat().st_size
    finally:
        stop.set()
        writer.join(60)
    return copies


def test_backup_while_a_thread_writes(store, path, tmp_path):
    store.map("m", key="str", value="str")["k"] = "v"
    fa, fb = store.fixed_map("pa", 1, 8), store.fixed_map("pb", 1, 8)
    ready, stop = threading.Event(), threading.Event()
    t = threading.Thread(target=w.pair_writer, args=(path, ready, stop))
    copies = copies_while(store, tmp_path, t, ready, stop)
    assert not t.is_alive()
    assert fa[b"k"] == fb[b"k"] and struct.unpack("<Q", fa[b"k"])[0] >= 100
    for c in copies:
        check_copy(c)
    with pytest.raises(shoal.AlreadyExists):
        store.backup(copies[0])
    assert store.check().ok


def test_backup_while_another_process_writes(store, path, tmp_path):
    store.map("m", key="str", value="str")["k"] = "v"
    store.fixed_map("pa", 1, 8), store.fixed_map("pb", 1, 8)
    ctx = multiprocessing.get_context("spawn")
    # Events reach a child as arguments of Process (not through a pool's queue).
    ready, stop = ctx.Event(), ctx.Event()
    p = ctx.Process(target=w.pair_writer, args=(path, ready, stop))
    copies = copies_while(store, tmp_path, p, ready, stop)
    assert p.exitcode == 0
    for c in copies:
        check_copy(c)
