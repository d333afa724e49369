"""Ordered-map functions run in child processes (importable under spawn)."""

import random

import shoal


def transfer(a, b, n, seed):
    """n transfers between accounts of ordered maps a and b, each in one transaction;
    every fourth one is aborted by an exception raised inside its block."""
    rnd = random.Random(seed)
    store = a.store
    maps = [a, b]
    done = 0
    for i in range(n):
        src, dst = rnd.choice(maps), rnd.choice(maps)
        ks, kd = f"acct{rnd.randrange(10):02d}", f"acct{rnd.randrange(10):02d}"
        amount = rnd.randrange(1, 10)
        try:
            with store.ordered_write(maps) as t:
                t.put(src, ks, t.get(src, ks) - amount)
                t.put(dst, kd, t.get(dst, kd) + amount)
                if i % 4 == 3:
                    raise KeyError("abandoned on purpose")
            done += 1
        except KeyError:
            pass
    return done


def kill_me_mid_transaction(path, ready):
    """Writes half a transaction, signals, and waits to be killed."""
    with shoal.open(path, create=False) as s:
        m = s.ordered_map("k", key="str", value="int")
        t = m.write()
        for i in range(200):
            t[f"half{i:03d}"] = i
        ready.set()
        while True:
            t[f"half{0:03d}"] = 0


def take_sequences(path, name, n, out):
    """Takes n numbers from ordered map `name`'s sequence, 3 at a time, and adds one
    pair per number to the multimap `name`-log (so the parent can count them); puts the
    numbers on `out`."""
    with shoal.open(path, create=False) as s:
        m = s.ordered_map(name, u64_keys=True)
        log = s.ordered_map(f"{name}-log", key="str", value="uint", duplicates=True)
        got = []
        while len(got) < n:
            first = m.next_sequence(3)
            got.extend(range(first, first + 3))
            with log.write() as t:
                for v in range(first, first + 3):
                    t.add("taken", v)
        out.put(got)
