"""Functions run in child processes (importable under spawn and forkserver)."""

import os
import time

import shoal


def write_range(m, start, stop):
    for i in range(start, stop):
        m[f"k{i}"] = i * 3
    return stop - start


def read_until_done(m, expect_min, stop_key="done"):
    """Reads while writers run: every value seen must be the one its key implies."""
    seen = 0
    bad = 0
    while True:
        done = stop_key in m
        for k, v in list(m.items()):
            if k.startswith("k") and v != int(k[1:]) * 3:
                bad += 1
            seen += 1
        if done:
            break
        time.sleep(0.001)
    return seen, bad


def incr_many(m, n):
    for _ in range(n):
        m.add("counter")


def cas_incr_many(m, n):
    for _ in range(n):
        while True:
            cur = m.get("counter", shoal.ABSENT)
            new = (0 if cur is shoal.ABSENT else cur) + 1
            if m.compare_and_swap("counter", cur, new):
                break


def modify_incr_many(m, n):
    for _ in range(n):
        m.modify("counter", lambda v: 1 if v is shoal.ABSENT else v + 1)


def setdefault_race(m, key, mine):
    return m.setdefault(key, mine)


def pop_race(m, keys):
    got = []
    for k in keys:
        v = m.pop(k, None)
        if v is not None:
            got.append(k)
    return got


def put_forever(path, ready):
    """Writes (new keys and overwrites, small and large values) until killed."""
    s = shoal.open(path)
    m = s.map("kill", key="str", value="bytes")
    i = 0
    ready.set()
    while True:
        m[f"k{i % 5000}"] = os.urandom(16) * (1 + (i % 7 == 0) * 2000)
        if i % 11 == 0:
            m.pop(f"k{(i * 7) % 5000}", None)
        i += 1


def map_info(m):
    return (m.name, m.key_codec, m.value_codec, dict(m))


def store_roundtrip(s):
    m = s.map("from-child", key="str", value="str")
    m["pid"] = str(os.getpid())
    return s.path


def overwrite_forever(path, name, key, ready):
    """Replaces the value of one key until stopped or killed. The values are made
    beforehand: with a system call per put (os.urandom), most stops took effect as the
    process left that call, outside the segment lock, and a test stopping it 1,000 times
    sometimes never caught it holding the lock (0 to 72 times in 1,000; now ~210)."""
    m = shoal.open(path).map(name)
    vals = [os.urandom(16) for _ in range(64)]
    ready.set()
    while True:
        for v in vals:
            m[key] = v


def overwrite_fixed_forever(path, name, key, ready):
    """overwrite_forever on a fixed map of 16-byte values."""
    m = shoal.open(path).fixed_map(name, len(key), 16)
    vals = [os.urandom(16) for _ in range(64)]
    ready.set()
    while True:
        for v in vals:
            m[key] = v


def pair_writer(path, ready, stop):
    """Writes key k of fixed maps "pa" and "pb" together, one transaction each, with the
    same counter, until `stop` is set; sets `ready` after its first 100 commits."""
    import struct

    with shoal.open(path) as s:
        fa, fb = s.fixed_map("pa", 1, 8), s.fixed_map("pb", 1, 8)
        i = 0
        while not stop.is_set():
            i += 1
            x = struct.pack("<Q", i)
            s.transaction().put(fa, b"k", x).put(fb, b"k", x).commit()
            if i == 100:
                ready.set()
