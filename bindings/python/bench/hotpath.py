#!/usr/bin/env python3
"""Cost of one single-key call from Python (m[k], m[k] = v, get, in, del), for work on
the binding's hot path.

    python hotpath.py OP R            # R rounds of OP over 100,000 keys; prints ns/call
    valgrind --tool=callgrind python hotpath.py OP R

Instructions per call: run under callgrind with two values of R and divide the
difference of the totals by the difference of the calls (setup and teardown cancel out):

    bash bindings/python/bench/hotpath.sh [python]

OP is get (m[k]), getm (m.get(k)), put (m[k] = v, replacing), ins (m[k] = v into an
empty map), in (k in m), del (del m[k] then m[k] = v again: two calls), dict_get / dict_put (the same loops on a dict, the
floor of the Python loop itself). The same ops prefixed with f (fget, fgetm, fput, fins,
fin, fdel) run on a FixedMap (Store.fixed_map, 16 + 16 bytes), and fadd is m.add(k) on
one with 8-byte values. Keys and values are 16-byte bytes, like bench.py.
"""

import os
import random
import sys
import time

KEYS = 100_000


def main():
    op, rounds = sys.argv[1], int(sys.argv[2])
    keys = [b"k%015d" % i for i in range(KEYS)]
    random.Random(1).shuffle(keys)
    vals = [b"v%015d" % i for i in range(KEYS)]
    pairs = list(zip(keys, vals))
    fixed = op.startswith("f")
    if fixed:
        op = op[1:]
    if op.startswith("dict_"):
        m = dict(zip(keys, vals))
        store = None
    else:
        import shoal

        path = f"/dev/shm/shoal-hotpath-{os.getpid()}.shoal"
        shoal.remove(path, missing_ok=True)
        # A smaller address-space reservation than the default 1 TiB, which valgrind
        # cannot map.
        store = shoal.open(path, max_size=1 << 32)
        if fixed:
            vsize = 8 if op == "add" else 16
            m = store.fixed_map("bench", 16, vsize)
            for k, v in pairs:
                m[k] = v[:vsize]
        else:
            m = store.map("bench")
            m.put_many(zip(keys, vals))
    t = time.perf_counter()
    for r in range(rounds):
        if op in ("get", "dict_get"):
            for k in keys:
                m[k]
        elif op == "getm":
            g = m.get
            for k in keys:
                g(k)
        elif op in ("put", "dict_put"):
            for k, v in pairs:
                m[k] = v
        elif op == "ins":
            m = store.fixed_map(f"ins{r}", 16, 16) if fixed else store.map(f"ins{r}")
            for k, v in pairs:
                m[k] = v
        elif op == "in":
            for k in keys:
                k in m
        elif op == "del":
            for k, v in pairs:
                del m[k]
                m[k] = v
        elif op == "add" and fixed:
            a = m.add
            for k in keys:
                a(k)
        else:
            raise SystemExit(f"unknown op {op}")
    dt = time.perf_counter() - t
    if store is not None:
        store.close()
        shoal.remove(path)
    n = rounds * KEYS
    print(f"{sys.argv[1]} x{n}: {dt / max(n, 1) * 1e9:.0f} ns/call")


main()
