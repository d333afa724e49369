#!/usr/bin/env python3
"""Benchmarks of shoal's Python binding against other ways to share a dict between
processes, in one run on one machine.

Workload: N keys and values of 16 bytes each (bytes objects).
  PUT        N single puts into an empty store, in a random order (each visible to other
             processes at once); a separate table gives PUT in key order, a B-tree's best case
  GET        N single gets of present keys, in random order
  MIX 98/2   N operations, 98% gets and 2% puts (overwrites), random keys
  GET_MANY   batched gets (100 keys per call) where the peer has a batch call
  GET x2     two processes doing GET at once; total operations per second
  lost update  P processes each increment one counter M times: naive `d[k] = d[k] + 1`,
             and the peer's atomic primitive (if any). A correct store ends at P*M.

Every phase is measured --reps times (default 3) and the report gives the median and the
spread; a measurement repeats its passes until it has lasted --min-secs (default 2 s), and
a PUT that takes less than that is repeated on a fresh store. The key objects of every
pass are created in the order the pass visits them, so the harness's own reads are
sequential: shuffling references to one set of key objects would make every peer pay a
cache miss of the harness's per operation (and let dict match keys by identity).
Every phase has a time budget: a peer too slow to finish is measured on what it did in
the budget (the table says so). Peers: dict (reference, not shared between processes),
shoal, py-lmdb, multiprocessing.Manager().dict(), UltraDict, shared-memory-dict,
diskcache, redis-py against a redis-server this script starts on a unix socket.

Run through bench/run.sh, which installs the peers; see README.md.
"""

import argparse
import gc
import json
import multiprocessing as mp
import os
import platform
import random
import re
import shutil
import socket
import subprocess
import sys
import tempfile
import time
import traceback

KEY_LEN = VAL_LEN = 16
BATCH = 100  # keys per GET_MANY call
CHUNK = 1000  # operations between two looks at the clock


# ---------------------------------------------------------------------------------------
# Peers. Each has: setup() in the parent; attach() in a forked child (returns a fresh
# handle); loops that take the handle; counter_* for the lost-update test; teardown().
# ---------------------------------------------------------------------------------------


class Peer:
    name = "?"
    shared = True  # False: processes do not see each other's writes (plain dict)
    atomic_name = None  # the atomic increment primitive, if any
    batch_name = None  # the batch-get primitive, if any

    def setup(self, n):
        raise NotImplementedError

    def handle(self):
        """The object the loops use in this process."""
        return self.h

    def attach(self):
        """In a child process: a handle of its own on the same data."""
        return self.h

    # The generic loops work on anything with d[k] / d[k] = v.
    @staticmethod
    def put_loop(h, keys, vals):
        for k, v in zip(keys, vals):
            h[k] = v

    @staticmethod
    def get_loop(h, keys):
        for k in keys:
            h[k]

    @staticmethod
    def mix_loop(h, ops):
        for k, v in ops:
            if v is None:
                h[k]
            else:
                h[k] = v

    get_many_loop = None  # (h, batches) -> None

    # lost update
    def counter_setup(self):
        """A fresh, small namespace for the counter, so that slow-at-size peers are not
        penalised; returns nothing. Runs in the parent."""
        self.c = self.make_counter()

    def counter_attach(self):
        return self.c

    def counter_naive(self, c, key, m):
        for _ in range(m):
            c[key] = c.get(key, 0) + 1

    counter_atomic = None  # (c, key, m)

    def counter_read(self, c, key):
        return c.get(key, 0)

    def before_fork(self):
        """Called in the parent before children are forked."""

    def after_fork(self):
        """Called in the parent after the children are done."""

    def teardown(self):
        pass

    def version(self):
        return ""


class DictPeer(Peer):
    name = "dict (reference)"
    shared = False

    def setup(self, n):
        self.h = {}

    def make_counter(self):
        return {}

    def version(self):
        return platform.python_version()


class ShoalPeer(Peer):
    name = "shoal"
    atomic_name = "Map.add"
    batch_name = "Map.get_many"

    def setup(self, n):
        import shoal

        self.mod = shoal
        self.path = f"/dev/shm/shoal-bench-{os.getpid()}.shoal"
        shoal.remove(self.path, missing_ok=True)
        self.store = shoal.open(self.path)
        self.h = self.store.map("bench")

    def attach(self):
        # A store opened before fork keeps working in the child; a fresh open works too.
        return self.mod.open(self.path).map("bench")

    @staticmethod
    def get_many_loop(h, batches):
        for b in batches:
            h.get_many(b)

    def make_counter(self):
        return self.store.map("counter", key="str", value="int")

    def counter_attach(self):
        return self.mod.open(self.path).map("counter", key="str", value="int")

    @staticmethod
    def counter_atomic(c, key, m):
        for _ in range(m):
            c.add(key)

    def teardown(self):
        self.store.close()
        self.mod.remove(self.path, missing_ok=True)

    def version(self):
        return self.mod.__version__


class LmdbPeer(Peer):
    """One write transaction per put and one read transaction per get: each operation
    sees the latest data, like a dict shared between processes would."""

    name = "py-lmdb"
    atomic_name = "read+write in one write txn"
    batch_name = "Cursor.getmulti"

    def setup(self, n):
        import lmdb

        self.mod = lmdb
        self.dir = tempfile.mkdtemp(prefix="lmdb-bench-", dir="/dev/shm")
        self.env = self._open(self.dir)
        self.h = self.env

    def _open(self, d):
        return self.mod.open(
            d, map_size=8 << 30, sync=False, metasync=False, writemap=True, max_dbs=2, lock=True
        )

    def attach(self):
        return self._open(self.dir)  # an LMDB env must not cross fork: open again

    def before_fork(self):
        self.env.close()  # py-lmdb refuses a second open of a path still open in the process

    def after_fork(self):
        self.env = self.h = self._open(self.dir)

    @staticmethod
    def put_loop(env, keys, vals):
        for k, v in zip(keys, vals):
            with env.begin(write=True) as t:
                t.put(k, v)

    @staticmethod
    def get_loop(env, keys):
        for k in keys:
            with env.begin() as t:
                t.get(k)

    @staticmethod
    def mix_loop(env, ops):
        for k, v in ops:
            if v is None:
                with env.begin() as t:
                    t.get(k)
            else:
                with env.begin(write=True) as t:
                    t.put(k, v)

    @staticmethod
    def get_many_loop(env, batches):
        for b in batches:
            with env.begin() as t:
                t.cursor().getmulti(b)

    def make_counter(self):
        self.cdir = tempfile.mkdtemp(prefix="lmdb-ctr-", dir="/dev/shm")
        return None

    def counter_attach(self):
        return self._open(self.cdir)

    @staticmethod
    def counter_naive(env, key, m):
        key = key.encode()
        for _ in range(m):
            with env.begin() as t:
                cur = int(t.get(key) or b"0")
            with env.begin(write=True) as t:
                t.put(key, b"%d" % (cur + 1))

    @staticmethod
    def counter_atomic(env, key, m):
        key = key.encode()
        for _ in range(m):
            with env.begin(write=True) as t:
                t.put(key, b"%d" % (int(t.get(key) or b"0") + 1))

    def counter_read(self, env, key):
        env = self._open(self.cdir)
        try:
            with env.begin() as t:
                return int(t.get(key.encode()) or b"0")
        finally:
            env.close()

    def teardown(self):
        self.env.close()
        shutil.rmtree(self.dir, ignore_errors=True)
        if getattr(self, "cdir", None):
            shutil.rmtree(self.cdir, ignore_errors=True)

    def version(self):
        return self.mod.__version__


class ManagerPeer(Peer):
    name = "multiprocessing.Manager().dict()"
    atomic_name = "Manager().Lock() around get+set"

    def setup(self, n):
        self.mgr = mp.get_context("fork").Manager()
        self.h = self.mgr.dict()

    def make_counter(self):
        self.lock = self.mgr.Lock()
        return self.mgr.dict()

    def counter_atomic(self, c, key, m):
        for _ in range(m):
            with self.lock:
                c[key] = c.get(key, 0) + 1

    def teardown(self):
        self.mgr.shutdown()

    def version(self):
        return "Python " + platform.python_version()


class UltraDictPeer(Peer):
    """UltraDict keeps a full local copy in every process and streams changes through
    shared memory (a big stream buffer, so that full re-dumps are rare)."""

    name = "UltraDict"
    atomic_name = "shared_lock around get+set"

    def setup(self, n):
        from UltraDict import UltraDict

        self.cls = UltraDict
        self.name_ = f"ud{os.getpid()}"
        # ~60 bytes of stream per put; room for every put of PUT and MIX without a dump
        self.h = UltraDict(name=self.name_, create=True, buffer_size=max(1 << 20, n * 200), shared_lock=True)

    def attach(self):
        return self.cls(name=self.name_, create=False)

    def make_counter(self):
        self.cname = f"udc{os.getpid()}"
        self.c = self.cls(name=self.cname, create=True, buffer_size=1 << 24, shared_lock=True)
        return self.c

    def counter_attach(self):
        return self.cls(name=self.cname, create=False)

    @staticmethod
    def counter_atomic(c, key, m):
        for _ in range(m):
            with c.lock:
                c[key] = c.get(key, 0) + 1

    def teardown(self):
        for d in (self.h, getattr(self, "c", None)):
            if d is not None:
                try:
                    d.unlink()
                except Exception:
                    pass

    def version(self):
        import importlib.metadata as md

        return md.version("UltraDict")


class SharedMemoryDictPeer(Peer):
    """shared-memory-dict pickles the whole dict into one shared block: every operation
    (reads included) (de)serializes all of it, so its cost grows with the number of keys."""

    name = "shared-memory-dict"
    atomic_name = None

    def setup(self, n):
        from shared_memory_dict import SharedMemoryDict

        self.cls = SharedMemoryDict
        self.name_ = f"smd{os.getpid()}"
        self.h = SharedMemoryDict(name=self.name_, size=max(1 << 20, n * 80))

    def attach(self):
        return self.cls(name=self.name_, size=1)

    def make_counter(self):
        self.cname = f"smdc{os.getpid()}"
        return self.cls(name=self.cname, size=1 << 16)

    def counter_attach(self):
        return self.cls(name=self.cname, size=1 << 16)

    def teardown(self):
        for d in (self.h, getattr(self, "c", None)):
            try:
                d._memory_block.unlink()
            except Exception:
                pass

    def version(self):
        import importlib.metadata as md

        return md.version("shared-memory-dict")


class DiskcachePeer(Peer):
    name = "diskcache"
    atomic_name = "Cache.incr"

    def setup(self, n):
        import diskcache

        self.mod = diskcache
        self.dir = tempfile.mkdtemp(prefix="diskcache-bench-", dir="/dev/shm")
        self.h = diskcache.Cache(self.dir)

    def attach(self):
        return self.mod.Cache(self.dir)

    def make_counter(self):
        self.cdir = tempfile.mkdtemp(prefix="diskcache-ctr-", dir="/dev/shm")
        return None

    def counter_attach(self):
        return self.mod.Cache(self.cdir)

    @staticmethod
    def counter_atomic(c, key, m):
        for _ in range(m):
            c.incr(key)

    def counter_read(self, c, key):
        return self.mod.Cache(self.cdir).get(key, 0)

    def teardown(self):
        self.h.close()
        shutil.rmtree(self.dir, ignore_errors=True)
        if getattr(self, "cdir", None):
            shutil.rmtree(self.cdir, ignore_errors=True)

    def version(self):
        return self.mod.__version__


class RedisPeer(Peer):
    """redis-py against a redis-server started here on a unix socket, persistence off,
    one round trip per operation (no pipelining), MGET for batches."""

    name = "redis-py + redis-server"
    atomic_name = "INCR"
    batch_name = "MGET"

    def setup(self, n):
        import redis

        self.mod = redis
        exe = shutil.which("redis-server")
        if not exe:
            raise RuntimeError("redis-server not found (apt-get install redis-server failed?)")
        self.dir = tempfile.mkdtemp(prefix="redis-bench-")
        self.sock = os.path.join(self.dir, "redis.sock")
        self.proc = subprocess.Popen(
            [exe, "--port", "0", "--unixsocket", self.sock, "--unixsocketperm", "700",
             "--save", "", "--appendonly", "no", "--dir", self.dir, "--loglevel", "warning"],
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
        )
        deadline = time.time() + 10
        while not os.path.exists(self.sock):
            if self.proc.poll() is not None or time.time() > deadline:
                raise RuntimeError("redis-server did not start")
            time.sleep(0.02)
        self.h = self.attach()
        self.h.ping()
        self.server_version = self.h.info()["redis_version"]

    def attach(self):
        return self.mod.Redis(unix_socket_path=self.sock)

    @staticmethod
    def put_loop(r, keys, vals):
        s = r.set
        for k, v in zip(keys, vals):
            s(k, v)

    @staticmethod
    def get_loop(r, keys):
        g = r.get
        for k in keys:
            g(k)

    @staticmethod
    def mix_loop(r, ops):
        for k, v in ops:
            if v is None:
                r.get(k)
            else:
                r.set(k, v)

    @staticmethod
    def get_many_loop(r, batches):
        for b in batches:
            r.mget(b)

    def make_counter(self):
        return None

    def counter_attach(self):
        return self.attach()

    @staticmethod
    def counter_naive(r, key, m):
        for _ in range(m):
            r.set(key, int(r.get(key) or 0) + 1)

    @staticmethod
    def counter_atomic(r, key, m):
        for _ in range(m):
            r.incr(key)

    def counter_read(self, r, key):
        return int(self.attach().get(key) or 0)

    def teardown(self):
        try:
            self.h.shutdown(nosave=True)
        except Exception:
            pass
        try:
            self.proc.wait(5)
        except Exception:
            self.proc.kill()
        shutil.rmtree(self.dir, ignore_errors=True)

    def version(self):
        return f"redis-py {self.mod.__version__}, server {self.server_version}"


PEERS = [
    ("dict", DictPeer, None),
    ("shoal", ShoalPeer, "shoal"),
    ("lmdb", LmdbPeer, "lmdb"),
    ("manager", ManagerPeer, None),
    ("ultradict", UltraDictPeer, "UltraDict"),
    ("shared-memory-dict", SharedMemoryDictPeer, "shared-memory-dict"),
    ("diskcache", DiskcachePeer, "diskcache"),
    ("redis", RedisPeer, "redis"),
]


# ---------------------------------------------------------------------------------------
# Measurement
# ---------------------------------------------------------------------------------------


def timed(fn, h, items, budget):
    """Runs fn(h, chunk) over `items` in chunks until done or out of budget.
    Returns (items done, seconds)."""
    return timed_put(lambda h, a, b: fn(h, a), h, items, items, budget)


def timed_put(fn, h, keys, vals, budget):
    """Runs fn(h, keys chunk, vals chunk) until done or out of budget. Chunks start at
    one operation and double up to CHUNK while they take under 5 ms, so that a peer
    that takes seconds per operation still stops close to its budget."""
    done = 0
    chunk = 1
    gc.disable()
    t0 = time.perf_counter()
    try:
        while done < len(keys):
            t1 = time.perf_counter()
            fn(h, keys[done : done + chunk], vals[done : done + chunk])
            done = min(len(keys), done + chunk)
            now = time.perf_counter()
            if now - t0 > budget:
                break
            if chunk < CHUNK and now - t1 < 0.005:
                chunk *= 2
    finally:
        el = time.perf_counter() - t0
        gc.enable()
    return done, el


def _child_get(peer, present, budget, min_secs, barrier, q):
    try:
        h = peer.attach()
        order = list(present)
        random.Random(os.getpid()).shuffle(order)
        h_keys = [key(i) for i in order]  # created in the order they are read
        barrier.wait(60)
        done, el = measure(lambda: timed(peer.get_loop, h, h_keys, budget), min_secs, budget)
        q.put((done, el, None))
    except Exception:
        q.put((0, 0.0, traceback.format_exc()))


def _child_counter(peer, kind, key, m, barrier, q):
    try:
        c = peer.counter_attach()
        fn = peer.counter_naive if kind == "naive" else peer.counter_atomic
        barrier.wait(60)
        t0 = time.perf_counter()
        fn(c, key, m)
        q.put((time.perf_counter() - t0, None))
    except Exception:
        q.put((0.0, traceback.format_exc()))


def run_children(peer, target, args_list, timeout):
    peer.before_fork()
    try:
        return _run_children(target, args_list, timeout)
    finally:
        peer.after_fork()


def _run_children(target, args_list, timeout):
    ctx = mp.get_context("fork")
    q = ctx.Queue()
    barrier = ctx.Barrier(len(args_list))
    procs = [ctx.Process(target=target, args=(*a, barrier, q)) for a in args_list]
    for p in procs:
        p.start()
    out = []
    deadline = time.time() + timeout
    try:
        for _ in procs:
            out.append(q.get(timeout=max(1.0, deadline - time.time())))
    except Exception:  # a child hung past the timeout: report it, do not lose the peer
        msg = f"child did not finish within {timeout:.0f} s"
        filler = (0, 0.0, msg) if target is _child_get else (0.0, msg)
        out += [filler] * (len(procs) - len(out))
    for p in procs:
        p.join(10)
        if p.is_alive():
            p.kill()
    return out


def key(i):
    return b"k%015d" % i


def val(i):
    return b"v%015d" % i


def measure(one_pass, min_secs, budget):
    """One measurement: passes (each returns (ops, seconds)) until min_secs have passed
    (or budget, for a peer too slow for one pass). Returns (ops, seconds)."""
    ops = secs = 0.0
    while True:
        done, el = one_pass()
        ops += done
        secs += el
        if secs >= min_secs or secs >= budget or done == 0:
            return ops, secs


def summary(runs):
    """(median rate, spread, median seconds) of measurements [(ops, seconds)]; the spread
    is half the range of the rates over the median (None for one measurement)."""
    rates = sorted(o / s for o, s in runs if s > 0)
    if not rates:
        return 0.0, None, 0.0
    med = rates[(len(rates) - 1) // 2]
    secs = sorted(s for _, s in runs)[(len(runs) - 1) // 2]
    spread = (rates[-1] - rates[0]) / 2 / med if len(rates) > 1 and med > 0 else None
    return med, spread, secs


def record(res, phase, runs):
    med, spread, secs = summary(runs)
    res["phases"][phase] = med
    res["spread"][phase] = spread
    res["secs"][phase] = secs
    res["reps"][phase] = len(runs)


def put_runs(cls, n, order, budget, min_secs, reps, res):
    """PUT of every key in `order` into fresh stores: once, or (a PUT shorter than
    min_secs) up to `reps` times, each on a new store. Returns (the last peer, set up and
    filled, keys loaded, [(ops, seconds)])."""
    keys = [key(i) for i in order]
    vals = [val(i) for i in order]
    runs = []
    peer = None
    for _ in range(reps):
        if peer is not None:
            peer.teardown()
        peer = cls()
        try:
            peer.setup(n)
            res.setdefault("version", peer.version())
            done, el = timed_put(peer.put_loop, peer.handle(), keys, vals, budget * 3)
        except BaseException:
            peer.teardown()
            raise
        runs.append((done, el))
        if el >= min_secs or done < n:
            break
    return peer, done, runs


def bench_peer(cls, n, budget, procs, incr_m, reps=3, rnd_seed=1, min_secs=2.0, key_order=True):
    rnd = random.Random(rnd_seed)
    assert len(key(0)) == KEY_LEN and len(val(0)) == VAL_LEN
    res = {"name": cls.name, "phases": {}, "spread": {}, "secs": {}, "reps": {}, "notes": []}
    if key_order:
        # A separate row: PUT in key order, on fresh stores of its own.
        kp, _, runs = put_runs(cls, n, range(n), budget, min_secs, reps, res)
        kp.teardown()
        record(res, "PUT, key order", runs)
    put_order = list(range(n))
    rnd.shuffle(put_order)
    peer, loaded, runs = put_runs(cls, n, put_order, budget, min_secs, reps, res)
    record(res, "PUT", runs)
    try:
        h = peer.handle()
        if loaded < n:
            res["notes"].append(f"loaded only {loaded:,} of {n:,} keys in its {budget * 3:.0f} s PUT budget; the other phases ran on those")
        present = put_order[:loaded]
        get_order = present[:]
        rnd.shuffle(get_order)
        # Fresh key objects, created in the order the passes read them.
        shuffled = [key(i) for i in get_order]
        record(res, "GET", [measure(lambda: timed(peer.get_loop, h, shuffled, budget), min_secs, budget) for _ in range(reps)])
        # check a sample
        for i in rnd.sample(present, min(100, loaded)):
            got = h.get(key(i)) if not isinstance(peer, (LmdbPeer,)) else None
            if isinstance(peer, LmdbPeer):
                with h.begin() as t:
                    got = t.get(key(i))
            if got != val(i):
                raise AssertionError(f"{peer.name}: wrong value for {key(i)!r}: {got!r}")
        # MIX 98/2
        ops = [(key(present[rnd.randrange(loaded)]), (b"w%015d" % i) if rnd.random() < 0.02 else None) for i in range(n)]
        record(res, "MIX 98/2", [measure(lambda: timed(peer.mix_loop, h, ops, budget), min_secs, budget) for _ in range(reps)])
        # GET_MANY
        if peer.get_many_loop is not None:
            batches = [shuffled[i : i + BATCH] for i in range(0, loaded, BATCH)]

            def one_pass():
                gc.disable()
                t0 = time.perf_counter()
                nb = 0
                while nb < len(batches):
                    peer.get_many_loop(h, batches[nb : nb + 10])
                    nb += 10
                    if time.perf_counter() - t0 > budget:
                        break
                el = time.perf_counter() - t0
                gc.enable()
                return sum(len(b) for b in batches[:nb]), el

            record(res, "GET_MANY", [measure(one_pass, min_secs, budget) for _ in range(reps)])
        h = None
        # GET from 2 processes at once
        runs = []
        for _ in range(reps):
            outs = run_children(
                peer, _child_get, [(peer, present, budget, min_secs) for _ in range(2)], timeout=budget * 4 + 120
            )
            errs = [e for _, _, e in outs if e]
            if errs:
                res["notes"].append("GET x2 failed: " + errs[0].strip().splitlines()[-1])
                break
            runs.append((sum(d for d, _, _ in outs), max(e for _, e, _ in outs)))
        if runs:
            record(res, "GET x2 procs", runs)
        # lost update
        peer.counter_setup()
        lost = {}
        for kind in ("naive", "atomic"):
            if kind == "atomic" and peer.counter_atomic is None:
                continue
            ckey = f"ctr-{kind}"
            outs = run_children(peer, _child_counter, [(peer, kind, ckey, incr_m) for _ in range(procs)], timeout=600)
            errs = [e for _, e in outs if e]
            if errs:
                lost[kind] = {"error": errs[0].strip().splitlines()[-1]}
                continue
            final = peer.counter_read(peer.c if hasattr(peer, "c") else None, ckey)
            lost[kind] = {"final": final, "expected": procs * incr_m, "seconds": max(t for t, _ in outs)}
        res["lost_update"] = lost
    finally:
        peer.teardown()
    return res


# ---------------------------------------------------------------------------------------
# Report
# ---------------------------------------------------------------------------------------

PHASES = ["PUT", "GET", "MIX 98/2", "GET_MANY", "GET x2 procs"]


def rate(x, spread=None):
    if x is None:
        return "–"
    if spread is not None:
        return f"{rate(x)} ±{100 * spread:.0f}%"
    if x >= 1e6:
        return f"{x / 1e6:.2f} M/s"
    if x >= 1e3:
        return f"{x / 1e3:.1f} k/s"
    return f"{x:.0f} /s"


def lost_cell(peer_cls, r, kind):
    lu = r.get("lost_update", {})
    if kind not in lu:
        return "–" if kind == "atomic" else "?"
    x = lu[kind]
    if "error" in x:
        return "error: " + x["error"][:60]
    ok = "✅" if x["final"] == x["expected"] else "❌"
    s = f"{ok} {x['final']:,} / {x['expected']:,}"
    if not peer_cls.shared:
        s += " (not shared)"
    return s


def loadavg():
    try:
        return open("/proc/loadavg").read().split()[0]
    except OSError:
        return "?"


def machine():
    cpu = "?"
    try:
        for line in open("/proc/cpuinfo"):
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    return f"{cpu}, {os.cpu_count()} cores, Linux {platform.release()}, Python {platform.python_version()}"


def write_report(results, skipped, args, out_dir):
    os.makedirs(out_dir, exist_ok=True)
    stem = f"python-{args.keys}"
    md = os.path.join(out_dir, stem + ".md")
    png = os.path.join(out_dir, stem + ".png")
    cls_of = {cls().name: cls for _, cls, _ in PEERS}
    lines = [
        f"# Python: shoal vs other shared dicts, {args.keys:,} keys",
        "",
        f"Command: `bash bindings/python/bench/run.sh --keys {args.keys}`. Run: "
        f"{time.strftime('%Y-%m-%d %H:%M', time.gmtime())} UTC, commit {getattr(args, 'commit', '?')}, on {machine()}. "
        f"16-byte keys and values (bytes). Operations per second "
        f"(GET_MANY: keys per second, batches of {BATCH}; GET x2: both processes together). "
        f"Key order: PUT inserts in a random order (the separate table below inserts in key order); "
        f"GET, GET_MANY and MIX read random keys; the key objects of each pass are created in the order "
        f"the pass reads them. Each figure is the median of {args.reps} measurements ± half their range "
        f"(min to max) over that median; a read measurement repeats its passes for at least "
        f"{getattr(args, 'min_secs', 0):g} s, and a PUT of all keys shorter than that is repeated on fresh "
        f"stores (phase lengths below). Time budget per phase: {args.budget:g} s (PUT: {args.budget * 3:g} s). "
        f"Load average at the start and end of the run: {args.load_start} and {args.load_end}"
        + (
            " (other jobs shared the machine: absolute figures are low; compare within the table)."
            if max([0.0] + [float(x) for x in re.findall(r"\d+\.\d+", f"{args.load_start} {args.load_end}")])
            > (os.cpu_count() or 1) / 2
            else "."
        ),
        "",
        "| peer | version | PUT | GET | MIX 98/2 | GET_MANY | GET x2 procs | lost update: naive `d[k] = d[k] + 1` | lost update: atomic primitive |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    for r in results:
        cls = cls_of.get(r["name"], Peer)
        ph = r["phases"]
        prim = f" ({cls.atomic_name})" if cls.atomic_name else ""
        lines.append(
            f"| {r['name']} | {r.get('version', '')} | "
            + " | ".join(rate(ph.get(p), r.get("spread", {}).get(p)) for p in PHASES)
            + f" | {lost_cell(cls, r, 'naive')} | {lost_cell(cls, r, 'atomic')}{prim if 'atomic' in r.get('lost_update', {}) else ''} |"
        )
    lines += ["", f"Lost update: {args.procs} processes × {args.incr:,} increments of one counter each (fork).", ""]
    if any("PUT, key order" in r["phases"] for r in results):
        lines += [
            "PUT in key order (separate runs on fresh stores; sorted inserts are a B-tree's best case):",
            "",
            "| peer | PUT, random order | PUT, key order | key order / random |",
            "|---|---|---|---|",
        ]
        for r in results:
            ph, sp = r["phases"], r.get("spread", {})
            if "PUT, key order" not in ph:
                continue
            ratio = f"{ph['PUT, key order'] / ph['PUT']:.2f}×" if ph.get("PUT") else "–"
            lines.append(
                f"| {r['name']} | {rate(ph.get('PUT'), sp.get('PUT'))} | "
                f"{rate(ph['PUT, key order'], sp.get('PUT, key order'))} | {ratio} |"
            )
        lines.append("")
    if any(r.get("secs") for r in results):
        cols = PHASES + ["PUT, key order"]
        lines += [
            "Phase lengths (seconds of the median measurement; measurements per phase in brackets):",
            "",
            "| peer | " + " | ".join(cols) + " |",
            "|---|" + "---|" * len(cols),
        ]
        for r in results:
            sec, n = r.get("secs", {}), r.get("reps", {})
            lines.append(
                f"| {r['name']} | "
                + " | ".join(f"{sec[c]:.2f} ({n.get(c, 1)})" if c in sec else "–" for c in cols)
                + " |"
            )
        lines.append("")
    notes = [(r["name"], n) for r in results for n in r["notes"]]
    if notes or skipped:
        lines.append("Notes:")
        for name, n in notes:
            lines.append(f"- {name}: {n}")
        for name, why in skipped:
            lines.append(f"- **{name}: skipped** — {why}")
        lines.append("")
    lines += [
        "How each peer is used: dict is a plain in-process dict (the reference; nothing is "
        "shared). shoal: `store.map(name)` with the bytes codec. py-lmdb: one write "
        "transaction per put and one read transaction per get (each operation sees the "
        "latest data), `Cursor.getmulti` for batches. Manager().dict(): a proxy to a "
        "server process. UltraDict: `shared_lock=True`, stream buffer sized so that no full "
        "dump happens. shared-memory-dict: its default pickle serializer (every operation "
        "(de)serializes the whole dict). diskcache: `Cache` in a /dev/shm directory. "
        "redis-py: one round trip per operation over a unix socket to a local redis-server "
        "with persistence off, MGET for batches.",
        "",
        f"![chart]({stem}.png)",
        "",
    ]
    with open(md, "w") as f:
        f.write("\n".join(lines))
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt

        fig, ax = plt.subplots(figsize=(12, 6.5))
        width = 0.8 / max(1, len(results))
        for i, r in enumerate(results):
            xs = [j + i * width for j in range(len(PHASES))]
            ys = [r["phases"].get(p) or 0 for p in PHASES]
            ax.bar(xs, ys, width, label=r["name"])
        ax.set_yscale("log")
        ax.set_xticks([j + width * (len(results) - 1) / 2 for j in range(len(PHASES))])
        ax.set_xticklabels(PHASES)
        ax.set_ylabel("operations per second (log)")
        ax.set_title(f"Shared dicts from Python: {args.keys:,} keys, 16-byte keys and values")
        ax.legend(fontsize=8, ncol=4, loc="upper center", bbox_to_anchor=(0.5, -0.07))
        ax.grid(axis="y", which="both", alpha=0.3)
        fig.tight_layout()
        fig.savefig(png, dpi=110)
    except Exception as e:  # the table matters more than the chart
        print(f"chart not written: {e}", file=sys.stderr)
    raw = os.path.join(out_dir, "raw")
    os.makedirs(raw, exist_ok=True)
    with open(os.path.join(raw, stem + ".json"), "w") as f:
        json.dump({"results": results, "skipped": skipped, "args": vars(args)}, f, indent=1)
    return md, png


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--keys", type=int, default=100_000)
    ap.add_argument("--budget", type=float, default=10.0, help="seconds per phase (PUT gets 3x)")
    ap.add_argument("--reps", type=int, default=3, help="measurements of each phase; the median counts")
    ap.add_argument("--min-secs", type=float, default=2.0, help="seconds each measurement lasts at least")
    ap.add_argument("--no-key-order", action="store_true", help="leave out the PUT-in-key-order row")
    ap.add_argument("--procs", type=int, default=4, help="processes in the lost-update test")
    ap.add_argument("--incr", type=int, default=5000, help="increments per process")
    ap.add_argument("--only", default="", help="comma-separated peer ids to run")
    ap.add_argument("--install-failures", default="", help="TSV of peer<TAB>reason from run.sh")
    ap.add_argument("--out", default=os.path.join(os.path.dirname(__file__), "..", "..", "..", "docs", "benchmarks"))
    ap.add_argument("--replot", default="", help="only rewrite the .md and .png from a raw JSON file")
    ap.add_argument("--merge", default="", help="merge this run's peers into that raw JSON file's results")
    args = ap.parse_args()
    if args.replot:
        raw = json.load(open(args.replot))
        saved = argparse.Namespace(**raw["args"])
        saved.out = args.out
        md, png = write_report(raw["results"], [tuple(x) for x in raw["skipped"]], saved, os.path.abspath(args.out))
        print(f"wrote {md}\nwrote {png}")
        return
    install_fail = {}
    if args.install_failures and os.path.exists(args.install_failures):
        for line in open(args.install_failures):
            if "\t" in line:
                k, why = line.rstrip("\n").split("\t", 1)
                install_fail[k] = why
    only = {x for x in args.only.split(",") if x}
    unknown = only - {pid for pid, _, _ in PEERS}
    if unknown:
        ap.error(f"--only: unknown peer id(s) {', '.join(sorted(unknown))}; the ids are {', '.join(pid for pid, _, _ in PEERS)}")
    results, skipped = [], []
    args.load_start = loadavg()
    try:
        args.commit = subprocess.run(
            ["git", "describe", "--always", "--dirty", "--abbrev=7"],
            cwd=os.path.dirname(os.path.abspath(__file__)),
            capture_output=True,
            text=True,
            check=True,
        ).stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        args.commit = "?"
    for pid, cls, pkg in PEERS:
        if only and pid not in only:
            continue
        peer = cls()
        if pid in install_fail:
            skipped.append((peer.name, install_fail[pid]))
            print(f"== {peer.name}: skipped ({install_fail[pid]})", flush=True)
            continue
        print(f"== {peer.name}", flush=True)
        try:
            r = bench_peer(
                cls, args.keys, args.budget, args.procs, args.incr, args.reps, min_secs=args.min_secs,
                key_order=not args.no_key_order,
            )
        except Exception as e:
            why = f"{type(e).__name__}: {e}".strip()
            if isinstance(e, ImportError):
                why = f"cannot import it ({why})"
            skipped.append((peer.name, why))
            print(f"   skipped: {why}", flush=True)
            traceback.print_exc()
            continue
        results.append(r)
        print("   " + "  ".join(f"{p}={rate(r['phases'].get(p))}" for p in PHASES), flush=True)
        print("   lost update:", json.dumps(r.get("lost_update")), flush=True)
        for n in r["notes"]:
            print("   note:", n, flush=True)
    args.load_end = loadavg()
    if args.merge:
        old = json.load(open(args.merge))
        names = {r["name"] for r in results} | {n for n, _ in skipped}
        order = [cls().name for _, cls, _ in PEERS]
        results = sorted(
            [r for r in old["results"] if r["name"] not in names] + results, key=lambda r: order.index(r["name"])
        )
        skipped = [tuple(x) for x in old["skipped"] if x[0] not in names] + skipped
        for k in ("load_start", "budget", "reps", "procs", "incr"):
            setattr(args, k, old["args"].get(k, getattr(args, k)))
        args.load_end = f"{old['args'].get('load_end', '?')}, re-run of {', '.join(sorted(names))}: {loadavg()}"
    md, png = write_report(results, skipped, args, os.path.abspath(args.out))
    print(f"\nwrote {md}\nwrote {png}")
    print(open(md).read())


if __name__ == "__main__":
    main()
