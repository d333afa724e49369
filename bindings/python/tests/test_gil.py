"""The GIL and single-key calls: they keep the GIL while they need not wait, and release
it while they wait for a lock or a bucket that another process holds (a stopped one here),
so that the other threads of the process keep running."""

import mmap
import multiprocessing as mp
import os
import random
import signal
import struct
import threading
import time

import pytest

import _workers as w
import shoal


class Ticker:
    """A thread that notes the time every few milliseconds: it can only do so while it
    holds the GIL."""

    def __init__(self):
        self.ticks = []
        self.stop = False
        self.t = threading.Thread(target=self.run)

    def run(self):
        while not self.stop:
            self.ticks.append(time.monotonic())
            time.sleep(0.002)

    def __enter__(self):
        self.t.start()
        return self

    def __exit__(self, *exc):
        self.stop = True
        self.t.join()

    def ran_between(self, t0, t1):
        return any(t0 < t < t1 for t in self.ticks)


def waits_with_the_gil_released(call, at_least):
    """Runs `call`, which must raise shoal.Timeout after waiting `at_least` seconds, and
    asserts that another thread ran in the middle of the wait."""
    with Ticker() as ticker:
        time.sleep(0.01)
        t0 = time.monotonic()
        with pytest.raises(shoal.Timeout):
            call()
        t1 = time.monotonic()
    assert t1 - t0 >= at_least * 0.9
    # Not at the edges: the GIL may change hands just before the call or after it.
    assert ticker.ran_between(t0 + 0.2 * at_least, t1 - 0.2 * at_least), (
        "no other thread ran while the call waited: the GIL was held"
    )


def _make_busy(mm, bucket):
    """Makes the seq in word 0 of the bucket at `bucket` odd (a writer mid-change, for
    both bucket layouts); returns a function that restores it and closes `mm`."""
    word = struct.unpack_from("<Q", mm, bucket)[0]
    assert word & 1 == 0
    struct.pack_into("<Q", mm, bucket, word | 1)

    def restore():
        struct.pack_into("<Q", mm, bucket, word)
        mm.close()

    return restore


def mark_bucket_busy(path, key, value_len):
    """Sets the seq of the bucket holding `key` to odd, as a writer stopped in the middle
    of changing the bucket leaves it (docs/FORMAT.md: a bucket's word 0 is seq | overflow
    << 32, a slot is tag << 48 | record offset, and a record of a small key and value in
    one of a store's first maps starts with a 2-byte header, 0x80 | map << 4 | key length
    >> 2, (key length & 3) << 6 | value length). Returns a function that restores the
    bucket."""
    with open(path, "r+b") as f:
        mm = mmap.mmap(f.fileno(), 0)
    chunks_off = struct.unpack_from("<Q", mm, 96)[0]
    file_end = struct.unpack_from("<Q", mm, 256)[0]
    at = mm.find(key, chunks_off, file_end)
    assert at > 0 and mm.find(key, at + 1, file_end) == -1
    rec = at - 2  # the short header
    b0, b1 = mm[rec], mm[rec + 1]
    assert b0 & 0x80 and (b0 & 15) << 2 | b1 >> 6 == len(key) and b1 & 63 == value_len
    low = struct.pack("<Q", rec)[:6]
    slots = []
    i = mm.find(low, chunks_off, file_end)
    while i != -1:
        if i % 8 == 0 and i % 128 != 0 and struct.unpack_from("<Q", mm, i)[0] & (2**48 - 1) == rec:
            slots.append(i)
        i = mm.find(low, i + 1, file_end)
    assert len(slots) == 1, slots
    return _make_busy(mm, slots[0] & ~127)


def test_reads_that_wait_release_the_gil(path):
    """m[k], m.get(k) and `k in m` on a bucket a writer left busy wait for it with the
    GIL released, then raise shoal.Timeout."""
    timeout = 0.5
    s = shoal.open(path, lock_timeout=timeout)
    m = s.map("busy")
    for i in range(20):  # so that the record is not the first of its chunk
        m[b"other-%010d" % i] = b"x" * 16
    key = b"busy-" + os.urandom(11)
    m[key] = b"v" * 16
    restore = mark_bucket_busy(path, key, 16)
    try:
        waits_with_the_gil_released(lambda: m[key], timeout)
        waits_with_the_gil_released(lambda: m.get(key), timeout)
        waits_with_the_gil_released(lambda: key in m, timeout)
        waits_with_the_gil_released(lambda: m.setdefault(key, b"d"), timeout)
    finally:
        restore()
    assert m[key] == b"v" * 16 and m.get(key) == b"v" * 16 and key in m
    assert s.check().ok
    s.close()


def mark_fixed_bucket_busy(path, m, key):
    """Sets the seq of the bucket holding `key`, the only entry of fixed map `m`, to odd,
    as a writer stopped in the middle of changing the bucket leaves it (docs/FORMAT.md,
    "Fixed-size maps": a bucket's word 0 is seq (bits 0..23) | overflow << 24 | bitmap
    << 32, and cell i starts with its key, at bucket + 8 + i × cell bytes, or, in a map
    with tags (format version 8, where the bucket has a spare byte per cell), at bucket +
    (bucket bytes − cells × cell bytes) + i × cell bytes). Returns a function that
    restores the bucket."""
    st = m.stats()
    assert st["entries"] == 1
    cell, cells, size = st["cell_bytes"], st["cells_per_bucket"], st["bucket_bytes"]
    cells_at = size - cells * cell if size - 8 - cells * cell >= cells else 8
    with open(path, "r+b") as f:
        mm = mmap.mmap(f.fileno(), 0)
    at = mm.find(key)
    assert at > 0 and mm.find(key, at + 1) == -1
    # The key's cell is the only one in use in its bucket: of the words where its bucket
    # could start, the bucket's is the one whose bitmap has just that cell's bit.
    buckets = [
        b
        for i, b in ((i, at - cells_at - i * cell) for i in range(cells))
        if b >= 0 and b % 64 == 0 and struct.unpack_from("<Q", mm, b)[0] >> 32 == 1 << i
    ]
    assert len(buckets) == 1, buckets
    return _make_busy(mm, buckets[0])


def test_fixed_reads_that_wait_release_the_gil(path):
    """FixedMap reads (m[k], get, in, setdefault) on a bucket a writer left busy wait for
    it with the GIL released, then raise shoal.Timeout."""
    timeout = 0.5
    s = shoal.open(path, lock_timeout=timeout)
    m = s.fixed_map("busy", 16, 16)
    key = b"busy-" + os.urandom(11)
    m[key] = b"v" * 16
    restore = mark_fixed_bucket_busy(path, m, key)
    try:
        waits_with_the_gil_released(lambda: m[key], timeout)
        waits_with_the_gil_released(lambda: m.get(key), timeout)
        waits_with_the_gil_released(lambda: key in m, timeout)
        waits_with_the_gil_released(lambda: m.setdefault(key, b"d" * 16), timeout)
    finally:
        restore()
    assert m[key] == b"v" * 16 and m.get(key) == b"v" * 16 and key in m
    assert s.check().ok
    s.close()


def _stopped(pid):
    with open(f"/proc/{pid}/stat") as f:
        return f.read().rsplit(")", 1)[1].split()[0] in ("T", "t")


MINE = b"mine, timed out!"


@pytest.mark.parametrize("kind", ["map", "fixed"])
def test_writes_that_wait_release_the_gil(path, kind):
    """m[k] = v and del m[k] (and a FixedMap's compare_and_swap) on a key whose segment
    lock a stopped process holds wait with the GIL released, then raise shoal.Timeout and
    change nothing."""
    timeout = 0.5
    s = shoal.open(path, lock_timeout=timeout)
    key = b"hot"
    if kind == "map":
        m = s.map("stuck")
        worker = w.overwrite_forever
        writes = [lambda: m.__setitem__(key, MINE), lambda: m.__delitem__(key)]
    else:
        m = s.fixed_map("stuck", len(key), 16)
        worker = w.overwrite_fixed_forever
        writes = [
            lambda: m.__setitem__(key, MINE),
            lambda: m.__delitem__(key),
            lambda: m.compare_and_swap(key, m.get(key), MINE),
        ]
    first = b"first value: 16b"
    m[key] = first
    ctx = mp.get_context("fork")
    ready = ctx.Event()
    child = ctx.Process(target=worker, args=(path, "stuck", key, ready))
    child.start()
    try:
        assert ready.wait(30)
        rnd = random.Random(1)
        for _ in range(1000):
            assert child.is_alive()
            os.kill(child.pid, signal.SIGSTOP)
            while not _stopped(child.pid):
                time.sleep(0.0005)
            # Stopped while holding the key's segment lock? (Most of the time it is not.)
            t0 = time.monotonic()
            try:
                m[key] = b"probe: 16 bytes."  # like the child's values: see the end
                held = False
            except shoal.Timeout:
                held = True
            if held:
                assert time.monotonic() - t0 >= timeout * 0.9
                for write in writes:
                    waits_with_the_gil_released(write, timeout)
                break
            os.kill(child.pid, signal.SIGCONT)
            time.sleep(rnd.uniform(0, 0.002))  # let it run on, to stop it elsewhere
        else:
            pytest.fail("never stopped the writer while it held its lock")
    finally:
        os.kill(child.pid, signal.SIGKILL)
        child.join()
    # The timed-out writes (MINE, del) changed nothing: the value is one of the child's,
    # a probe or the first one.
    v = m[key]
    assert len(v) == 16 and v != MINE
    last = b"last value: 16b."
    m[key] = last  # the dead writer's lock is recovered
    assert m[key] == last
    assert s.check().ok
    s.close()


@pytest.mark.parametrize("kind", ["map", "fixed"])
def test_close_while_other_threads_call(path, kind):
    """Store.close() while other threads are in single-key calls (some of them waiting
    with the GIL released): every call succeeds or raises shoal.Closed; nothing hangs."""
    for _ in range(20):
        s = shoal.open(path)
        if kind == "map":
            m = s.map("c")
            m.put_many((b"%08d" % i, b"v") for i in range(1000))
        else:
            m = s.fixed_map("c", 8, 1)
            for i in range(1000):
                m[b"%08d" % i] = b"v"
        errors = []
        go = threading.Event()

        def work(j):
            go.wait()
            try:
                for i in range(100_000):
                    k = b"%08d" % ((i * 7 + j) % 1000)
                    if i % 3 == 0:
                        m[k] = b"w"
                    elif i % 3 == 1:
                        m.get(k)
                    else:
                        k in m
            except shoal.Closed:
                pass
            except BaseException as e:  # noqa: BLE001 - reported below
                errors.append(e)

        ts = [threading.Thread(target=work, args=(j,)) for j in range(4)]
        for t in ts:
            t.start()
        go.set()
        time.sleep(0.005)
        s.close()
        for t in ts:
            t.join(30)
            assert not t.is_alive()
        assert errors == []
        with pytest.raises(shoal.Closed):
            m[b"00000001"]
    shoal.remove(path)
