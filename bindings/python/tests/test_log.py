"""Shared logs from Python: appends with levels and fields, named readers whose cursors
outlive their processes, the full-ring policies, waits that release the GIL, and
shoal.LogHandler writing `logging` records from several processes into one log."""

import logging
import multiprocessing
import os
import pickle
import signal
import threading
import time

import pytest

import _lworkers as w
import shoal


def test_append_and_read_levels_fields_and_origin(store):
    log = store.log("app", 64, 200)
    assert (log.name, log.slots, log.max_record, log.policy) == ("app", 64, 200, "overwrite")
    r = log.reader("drain")
    assert log.append("started") == 0
    assert log.append(b"\xffraw", level=shoal.LogLevel.ERROR, fields={"path": "/a", b"ms": b"12"}) == 1
    assert log.append("pairs", 7, [("k", "1"), (b"k", bytearray(b"2"))]) == 2
    a = r.read()
    assert (a.seq, a.level, a.message, a.text, a.fields) == (0, 6, b"started", "started", [])
    assert (a.pid, a.tid) == (os.getpid(), threading.get_native_id())
    assert abs(a.time - time.time()) < 600 and a.time_ns == int(a.time_ns)
    b = r.read()
    assert (b.seq, b.level, b.message, b.text) == (1, 3, b"\xffraw", "\ufffdraw")
    assert b.fields == [(b"path", b"/a"), (b"ms", b"12")]
    assert (b.field("path"), b.field(b"ms"), b.field("none", "dflt")) == (b"/a", b"12", "dflt")
    c = r.read()
    assert (c.level, c.fields) == (7, [(b"k", b"1"), (b"k", b"2")])
    assert r.read() is None
    assert (r.name, r.position, r.missed, r.skipped) == ("drain", 3, 0, 0)
    assert store.logs() == ["app"]
    again = store.log("app")  # opened as it is
    assert (again.slots, again.max_record) == (64, 200)
    assert pickle.loads(pickle.dumps(log)).slots == 64
    st = log.stats()
    assert (st["appended"], st["dropped"], st["holes"]) == (3, 0, 0)
    assert st["readers"] == [{"name": "drain", "position": 3, "missed": 0, "skipped": 0}]
    assert log.remove_reader("drain") and not log.remove_reader("drain")
    assert log.stats()["readers"] == []


def test_bad_input_raises_clear_errors(store):
    with pytest.raises(shoal.NotFound):
        store.log("absent")
    with pytest.raises(shoal.InvalidArgument, match="both slots and max_record"):
        store.log("x", 64)
    with pytest.raises(shoal.InvalidArgument):
        store.log("x", 1, 100)
    with pytest.raises(shoal.InvalidArgument):
        store.log("x", 64, 0)
    with pytest.raises(shoal.InvalidArgument, match="policy"):
        store.log("x", 64, 100, policy="never")
    store.map("m")
    with pytest.raises(shoal.InvalidArgument):
        store.log("m", 8, 8)
    log = store.log("app", 8, 100)
    with pytest.raises(shoal.InvalidArgument):
        log.append("x" * 101)
    with pytest.raises(shoal.InvalidArgument):  # 92 bytes of message and 8 + 1 of field
        log.append("x" * 92, fields={"k": ""})
    assert log.append("x" * 91, fields={"k": ""}) == 0  # nothing was appended before
    with pytest.raises(TypeError):
        log.append(5)
    with pytest.raises(TypeError):
        log.append("x", fields={"k": 5})
    with pytest.raises(TypeError):
        log.append("x", fields=[("k",)])
    with pytest.raises(OverflowError):
        log.append("x", level=256)
    with pytest.raises(shoal.InvalidArgument):
        log.append("x", timeout=-1)
    with pytest.raises(shoal.InvalidArgument):
        log.reader("")
    assert log.stats()["appended"] == 1


def test_full_ring_policies(store):
    drop = store.log("drop", 4, 64, policy="drop")
    dr = drop.reader("r")
    assert [drop.append(str(i)) for i in range(6)] == [0, 1, 2, 3, None, None]
    assert drop.stats()["dropped"] == 2
    assert [x.text for x in dr] == ["0", "1", "2", "3"]

    wait = store.log("wait", 4, 64, policy="wait")
    wr = wait.reader("r")
    for i in range(4):
        wait.append(str(i))
    t0 = time.monotonic()
    with pytest.raises(shoal.Timeout):
        wait.append("late", timeout=0.2)
    assert time.monotonic() - t0 >= 0.15
    assert wr.read().text == "0"
    assert wait.append("4", timeout=5) == 4  # room again

    over = store.log("over", 4, 64)
    orr = over.reader("r")
    for i in range(10):
        over.append(str(i))
    assert [x.seq for x in orr] == [6, 7, 8, 9]
    assert orr.missed == 6


def test_waits_release_the_gil_and_iterators(store):
    log = store.log("app", 64, 100)
    r = log.reader("r")
    t0 = time.monotonic()
    assert r.read_wait(0.05) is None
    assert time.monotonic() - t0 >= 0.04
    assert r.read_wait(0) is None
    with pytest.raises(shoal.InvalidArgument):
        r.read_wait(-1)
    log.append("now")
    assert r.read_wait(1e19).text == "now"  # a deadline past what a clock holds: for ever
    # The appending thread needs the GIL: the record comes only if read_wait let it go.
    t = threading.Timer(0.2, lambda: log.append("from a thread"))
    t.start()
    got = r.read_wait(30)
    t.join()
    assert got is not None and got.text == "from a thread"

    def later():
        for i in range(5):
            time.sleep(0.01)
            log.append(f"f{i}")

    t = threading.Thread(target=later)
    t.start()
    assert [x.text for x in r.follow(timeout=5)][:5] == [f"f{i}" for i in range(5)]
    t.join()
    for i in range(10):
        log.append(f"m{i}")
    assert [x.text for x in r.read_many(4)] == ["m0", "m1", "m2", "m3"]
    assert [x.text for x in r.read_many()] == [f"m{i}" for i in range(4, 10)]
    assert r.read_many() == [] and list(r) == []


def test_a_reader_killed_and_restarted_resumes_at_its_named_cursor(store, path):
    log = store.log("app", 256, 100)
    log.reader("drain")
    for i in range(100):
        log.append(f"r{i}")
    ctx = multiprocessing.get_context("spawn")
    p = ctx.Process(target=w.read_then_die, args=(path, 40))
    p.start()
    p.join(120)
    assert p.exitcode == -signal.SIGKILL
    seen = store.map("seen", key="int", value="int")
    assert sorted(seen.keys()) == list(range(40))
    r = log.reader("drain")
    assert r.position == 40
    assert [x.seq for x in r] == list(range(40, 100))


def test_handler_levels_fields_and_exceptions(store):
    log = store.log("app", 256, 300)
    r = log.reader("r")
    logger = logging.getLogger("shoal-test-levels")
    logger.propagate = False
    logger.setLevel(1)
    h = shoal.LogHandler(log)
    logger.addHandler(h)
    try:
        for lv in (5, logging.DEBUG, logging.INFO, 25, logging.WARNING, logging.ERROR, logging.CRITICAL, 60):
            logger.log(lv, "at %d", lv)
        got = [(x.text, x.level) for x in r]
        assert got == [
            ("at 5", 8),
            ("at 10", 7),
            ("at 20", 6),
            ("at 25", 6),
            ("at 30", 4),
            ("at 40", 3),
            ("at 50", 2),
            ("at 60", 2),
        ]
        logger.info("who", extra={"user": "ann", "n": 3, "raw": b"\x00\xff"})
        x = r.read()
        assert x.fields == [(b"target", b"shoal-test-levels"), (b"user", b"ann"), (b"n", b"3"), (b"raw", b"\x00\xff")]
        try:
            1 / 0
        except ZeroDivisionError:
            logger.exception("failed")
        x = r.read()
        assert x.level == 3
        assert x.text.startswith("failed\nTraceback") and "ZeroDivisionError" in x.text
        logger.warning("é" * 400)  # 800 bytes: cut to fit, at a character boundary
        x = r.read()
        assert x.text == "é" * len(x.text) and 0 < len(x.message) <= 300
        cut = int(x.field("truncated"))
        assert cut == 800 - len(x.message)
        assert len(x.message) + sum(8 + len(k) + len(v) for k, v in x.fields) <= 300

        errors = []
        h.handleError = lambda rec: errors.append(rec.getMessage())
        logger.info("too many fields", extra={"big": "y" * 400})
        assert errors == ["too many fields"] and r.read() is None
    finally:
        logger.removeHandler(h)


def test_handler_records_of_several_processes_all_come_out_in_order(store, path):
    writers, n = 4, 300
    log = store.log("app", 8192, 256)
    r = log.reader("drain")
    ctx = multiprocessing.get_context("spawn")
    ps = [ctx.Process(target=w.write_through_handler, args=(path, i, n)) for i in range(writers)]
    for p in ps:
        p.start()
    got = {i: [] for i in range(writers)}
    deadline = time.monotonic() + 180
    total = 0
    while total < writers * n and time.monotonic() < deadline:
        x = r.read_wait(1)
        if x is None:
            continue
        wr, i = int(x.field("writer")), int(x.field("n"))
        assert x.text == f"record {i} of writer {wr}"
        assert x.field("target") == f"writer{wr}".encode()
        got[wr].append(i)
        total += 1
    for p in ps:
        p.join(60)
        assert p.exitcode == 0
    for wr in range(writers):
        assert got[wr] == list(range(n)), f"writer {wr}: {len(got[wr])} records, first gap " + str(
            next((k for k, v in enumerate(got[wr]) if v != k), None)
        )
    assert r.read() is None
    assert (r.missed, r.skipped) == (0, 0)
