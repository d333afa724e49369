"""Ordered maps beyond the mapping: integer keys, multimaps, cursors (checked against a
sorted list), compare-and-swap, range removal, sorted appends, sequences, markers and
nested transactions (checked against a dict model with savepoints), and two processes
sharing a sequence and a multimap."""

import bisect
import multiprocessing as mp
import random

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import _oworkers as ow
import shoal

TOP = 2**64 - 1


def test_u64_keys_sort_as_numbers(store):
    m = store.ordered_map("u", u64_keys=True, value="str")
    assert m.u64_keys and not m.duplicates
    keys = [0, 1, 255, 256, 2**32, 2**63, TOP, 70000, 3]
    for k in keys:
        m[k] = str(k)
    assert list(m) == sorted(keys)
    assert m[256] == "256" and 257 not in m
    # Bounds, inclusive or not, down to the ends of the integers.
    assert list(m.irange(3, 256)) == [3, 255, 256]
    assert list(m.irange(3, 256, (False, False))) == [255]
    assert list(m.irange(2**63, TOP)) == [2**63, TOP]
    assert list(m.irange(TOP, None, (False, True))) == []
    assert list(m.irange(None, TOP, (True, True), reverse=True))[:2] == [TOP, 2**63]
    assert m.count_range(0, TOP, (True, True)) == len(keys)
    assert m.higher_key(TOP) is None and m.ceiling_key(TOP) == TOP
    assert m.floor_key(2**40) == 2**32 and m.lower_key(0) is None
    with pytest.raises(OverflowError):
        m[-1] = "x"
    with pytest.raises(TypeError):
        m["1"] = "x"
    # Iteration goes on past any internal batch.
    big = store.ordered_map("big", u64_keys=True, value="uint")
    big.extend_sorted((i * 7, i) for i in range(1000))
    assert list(big.values()) == list(range(1000))
    assert list(reversed(big))[:3] == [6993, 6986, 6979]


def test_options_and_codecs_are_checked(store):
    store.ordered_map("u", u64_keys=True)
    store.ordered_map("d", duplicates=True)
    with pytest.raises(shoal.InvalidArgument):
        store.ordered_map("u")  # created with integer keys
    with pytest.raises(shoal.InvalidArgument):
        store.ordered_map("d", duplicates=False)
    with pytest.raises(shoal.InvalidArgument):
        store.ordered_map("u2", u64_keys=True, key="str")
    with pytest.raises(shoal.InvalidArgument):
        store.ordered_map("b2", key="uint")
    m = store.ordered_map("u", u64_keys=True, create=False)
    assert m.u64_keys and store.ordered_map("d", duplicates=True).duplicates


def test_multimap(store):
    m = store.ordered_map("mm", key="str", value="str", duplicates=True)
    assert m.add("k", "b") is True and m.add("k", "a") is True and m.add("k", "b") is False
    m.add("j", "z")
    assert m.get_all("k") == ["a", "b"] and m.count_values("k") == 2 and m.get_all("x") == []
    assert m["k"] == "a" and len(m) == 3
    assert list(m.items()) == [("j", "z"), ("k", "a"), ("k", "b")]
    assert m.remove_value("k", "a") is True and m.remove_value("k", "a") is False
    m["k"] = "only"
    assert m.get_all("k") == ["only"]
    del m["k"]
    assert "k" not in m and list(m) == ["j"]
    with pytest.raises(shoal.InvalidArgument):
        m.compare_and_swap("j", "z", "y")
    with pytest.raises(shoal.InvalidArgument):
        store.ordered_map("plain").add(b"k", b"v")
    # Many values of one key, more than any batch, then keys around it.
    with m.write() as t:
        for i in range(500):
            t.add("many", f"{i:04d}")
        t.add("manz", "after")
    assert m.count_values("many") == 500
    assert list(m.irange_items("many", "many")) == [("many", f"{i:04d}") for i in range(500)]
    assert [k for k in m.irange("many", None, (False, True))] == ["manz"]
    assert m.count_range("many", "manz") == 500


def test_cas_remove_range_append_sequences_markers(store):
    m = store.ordered_map("c", key="str", value="int")
    assert m.compare_and_swap("a", shoal.ABSENT, 1) is True
    assert m.compare_and_swap("a", shoal.ABSENT, 2) is False
    assert m.compare_and_swap("a", 2, 3) is False and m["a"] == 1
    assert m.compare_and_swap("a", 1, 5) is True and m["a"] == 5
    assert m.compare_and_swap("a", 5, shoal.ABSENT) is True and "a" not in m
    m.extend_sorted((f"k{i:03d}", i) for i in range(100))
    with pytest.raises(shoal.InvalidArgument):
        m.extend_sorted([("z1", 1), ("z0", 0)])  # out of order: nothing loaded
    assert "z1" not in m and len(m) == 100
    with pytest.raises(shoal.InvalidArgument):
        m.append("k050", 0)
    m.append("z", -1)
    assert m.remove_range("k010", "k020") == 10
    assert m.remove_range("k020", "k030", (False, True)) == 10
    assert m.count_range("k010", "k031") == 1  # k020 stays
    assert m.estimate_range(None, None) == len(m) == 81
    del m["k000":"k010"]
    assert m.first() == ("k020", 20)
    assert m.sequence == 0
    assert m.next_sequence() == 0 and m.next_sequence(10) == 1 and m.sequence == 11
    with m.write() as t:
        assert t.next_sequence(5) == 11
        t.set_marker(3, 42)
        assert t.compare_and_swap("z", -1, -2) is True
        assert t.remove_range("k090", "k100") == 10
    assert m.sequence == 16 and store.ordered_marker(3) == 42 and m["z"] == -2
    with pytest.raises(shoal.InvalidArgument):
        store.ordered_marker(14)
    with m.write() as t:
        t.next_sequence(100)
        t.set_marker(3, 7)
        t.abort()
    assert m.sequence == 16 and store.ordered_marker(3) == 42
    with m.snapshot() as s:
        assert s.map_sequence == 16
    m.clear()
    assert len(m) == 0


def test_nested_transactions(store):
    m = store.ordered_map("n", key="str", value="int")
    with m.write() as t:
        t["a"] = 1
        with t.nested() as n:
            n["b"] = 2
            assert t["b"] == 2
        with pytest.raises(KeyError):
            with t.nested() as n:
                n["c"] = 3
                del n["a"]
                t.set_marker(0, 9)
                raise KeyError("undo")
        assert "c" not in t and t["a"] == 1 and not n.active
        with t.nested() as n1:
            n1["d"] = 4
            n2 = n1.nested()
            n2["e"] = 5
            with pytest.raises(shoal.InvalidArgument):
                n1.commit()  # n2 is inside it, still open
            with pytest.raises(shoal.InvalidArgument):
                t.commit()
            n2.abort()
            assert "e" not in t and t["d"] == 4
            with pytest.raises(shoal.InvalidArgument):
                n2.commit()  # over
    assert dict(m) == {"a": 1, "b": 2, "d": 4} and store.ordered_marker(0) == 0
    # A nested commit is undone by its parent's abort.
    t = m.write()
    with t.nested() as n:
        n["x"] = 1
    t.abort()
    assert "x" not in m
    # Over several maps.
    a, b = store.ordered_map("na"), store.ordered_map("nb")
    with store.ordered_write([a, b]) as t:
        t.put(a, b"k", b"1")
        with pytest.raises(ZeroDivisionError):
            with t.nested() as n:
                n.put(b, b"k", b"2")
                1 / 0
        with t.nested() as n:
            n.put(b, b"j", b"3")
    assert dict(a) == {b"k": b"1"} and dict(b) == {b"j": b"3"}


def _check_cursor_at(c, model, i):
    """The cursor stands on model[i] (i None: on nothing)."""
    if i is None or not 0 <= i < len(model):
        assert c.item is None and c.position is None
        return False
    assert c.item == model[i] and c.position == i
    return True


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    keys=st.lists(st.integers(0, 60), max_size=40),
    moves=st.lists(st.tuples(st.sampled_from(["first", "last", "next", "prev", "seek", "ge", "le"]), st.integers(0, 61)), max_size=40),
)
def test_cursor_against_a_sorted_list(path, keys, moves):
    with shoal.open(path) as s:
        m = s.ordered_map("cur", u64_keys=True, value="uint")
        m.clear()
        for k in keys:
            m[k] = k * 2
        model = sorted((k, k * 2) for k in set(keys))
        ks = [k for k, _ in model]
        with m.cursor() as c:
            i = None
            for how, k in moves:
                if i is None and how in ("next", "prev"):
                    # Steps from no entry are not specified: reposition first.
                    continue
                if how == "first":
                    i = 0 if ks else None
                    assert c.first() == (i is not None)
                elif how == "last":
                    i = len(ks) - 1 if ks else None
                    assert c.last() == (i is not None)
                elif how == "next":
                    moved = c.next()
                    i = None if i + 1 >= len(ks) else i + 1
                    assert moved == (i is not None)
                elif how == "prev":
                    moved = c.prev()
                    i = None if i == 0 else i - 1
                    assert moved == (i is not None)
                elif how == "seek":
                    j = bisect.bisect_left(ks, k)
                    i = j if j < len(ks) and ks[j] == k else None
                    assert c.seek(k) == (i is not None)
                elif how == "ge":
                    j = bisect.bisect_left(ks, k)
                    i = j if j < len(ks) else None
                    assert c.seek_ge(k) == (i is not None)
                else:
                    j = bisect.bisect_right(ks, k) - 1
                    i = j if j >= 0 else None
                    assert c.seek_le(k) == (i is not None)
                _check_cursor_at(c, model, i)
        # Iteration from a fresh cursor is the whole map; from a seek, the rest.
        with s.ordered_map("cur", u64_keys=True, value="uint").snapshot() as snap:
            assert list(snap.cursor()) == model
            c = snap.cursor()
            if ks:
                c.seek_ge(ks[len(ks) // 2])
                assert list(c) == model[len(ks) // 2 :]


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    pairs=st.lists(st.tuples(st.binary(max_size=2), st.binary(max_size=2)), max_size=40),
    moves=st.lists(
        st.tuples(
            st.sampled_from(["next_key", "prev_key", "next_value", "prev_value", "seek_value", "value_ge", "le", "first", "last"]),
            st.binary(max_size=2),
            st.binary(max_size=2),
        ),
        max_size=30,
    ),
)
def test_multimap_cursor_against_a_sorted_list(path, pairs, moves):
    with shoal.open(path) as s:
        m = s.ordered_map("mcur", duplicates=True)
        m.clear()
        for k, v in pairs:
            m.add(k, v)
        model = sorted(set(pairs))
        c = m.cursor()
        i = None
        for how, k, v in moves:
            if how == "first":
                i = 0 if model else None
                c.first()
            elif how == "last":
                i = len(model) - 1 if model else None
                c.last()
            elif how == "next_key":
                if i is not None:
                    j = bisect.bisect_left(model, (model[i][0] + b"\0", b""))
                    i = j if j < len(model) else None
                assert c.next_key() == (i is not None)
            elif how == "prev_key":
                if i is not None:
                    j = bisect.bisect_left(model, (model[i][0], b"")) - 1
                    i = j if j >= 0 else None
                assert c.prev_key() == (i is not None)
            elif how == "next_value":
                moved = i is not None and i + 1 < len(model) and model[i + 1][0] == model[i][0]
                assert c.next_value() == moved
                i = i + 1 if moved else i
            elif how == "prev_value":
                moved = i is not None and i > 0 and model[i - 1][0] == model[i][0]
                assert c.prev_value() == moved
                i = i - 1 if moved else i
            elif how == "seek_value":
                i = model.index((k, v)) if (k, v) in model else None
                assert c.seek_value(k, v) == (i is not None)
            elif how == "value_ge":
                j = bisect.bisect_left(model, (k, v))
                i = j if j < len(model) and model[j][0] == k else None
                assert c.seek_value_ge(k, v) == (i is not None)
            else:
                j = bisect.bisect_left(model, (k + b"\0", b"")) - 1
                i = j if j >= 0 else None
                assert c.seek_le(k) == (i is not None)
            _check_cursor_at(c, model, i)
            if i is not None:
                assert c.count_values() == sum(1 for p in model if p[0] == model[i][0])
        c.close()
        assert c.closed
        with pytest.raises(shoal.Closed):
            c.first()


OPS = ["put", "del", "add", "remove_value", "remove_range", "cas", "nested_ok", "nested_undo", "append"]


@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(seed=st.integers(0, 2**32 - 1), dups=st.booleans())
def test_transactions_against_a_model(path, seed, dups):
    """Random writes in transactions with nested ones, some aborted, against a model:
    a set of (key, value) pairs (one value per key without duplicates)."""
    rnd = random.Random(seed)
    with shoal.open(path) as s:
        m = s.ordered_map(f"model{int(dups)}", u64_keys=True, value="uint", duplicates=dups)
        m.clear()
        model = set()

        def apply(t, state, depth):
            for _ in range(rnd.randrange(1, 8)):
                op = rnd.choice(OPS)
                k, v = rnd.randrange(20), rnd.randrange(4)
                if op == "put":
                    t[k] = v
                    state -= {p for p in state if p[0] == k}
                    state |= {(k, v)}
                elif op == "del":
                    assert t.remove(k) == any(p[0] == k for p in state)
                    state -= {p for p in state if p[0] == k}
                elif op == "add" and dups:
                    assert t.add(k, v) == ((k, v) not in state)
                    state |= {(k, v)}
                elif op == "remove_value":
                    assert t.remove_value(k, v) == ((k, v) in state)
                    state -= {(k, v)}
                elif op == "remove_range":
                    hi = k + rnd.randrange(5)
                    gone = {p for p in state if k <= p[0] < hi}
                    assert t.remove_range(k, hi) == len(gone)
                    state -= gone
                elif op == "cas" and not dups:
                    cur = next((p[1] for p in state if p[0] == k), shoal.ABSENT)
                    exp = cur if rnd.random() < 0.5 else rnd.choice([shoal.ABSENT, v])
                    new = rnd.choice([shoal.ABSENT, v])
                    ok = t.compare_and_swap(k, exp, new)
                    assert ok == (exp is cur or exp == cur)
                    if ok:
                        state -= {p for p in state if p[0] == k}
                        if new is not shoal.ABSENT:
                            state |= {(k, new)}
                elif op == "append":
                    top = max(state, default=(-1, 0))
                    t.append(top[0] + 1, v)
                    state |= {(top[0] + 1, v)}
                elif op.startswith("nested") and depth < 3:
                    inner = set(state)
                    try:
                        with t.nested() as n:
                            apply(n, inner, depth + 1)
                            if op == "nested_undo":
                                raise LookupError
                        state.clear()
                        state |= inner
                    except LookupError:
                        pass
                assert t.get(k) == min((p[1] for p in state if p[0] == k), default=None)

        for _ in range(rnd.randrange(1, 6)):
            state = set(model)
            t = m.write()
            apply(t, state, 0)
            if rnd.random() < 0.25:
                t.abort()
            else:
                t.commit()
                model = state
            assert sorted(m.items()) == sorted(model) == list(m.items())
            assert len(m) == len(model)


@pytest.mark.parametrize("method", ["fork", "spawn"])
def test_two_processes_share_a_sequence(store, method):
    m = store.ordered_map("seq", u64_keys=True)
    log = store.ordered_map("seq-log", key="str", value="uint", duplicates=True)
    ctx = mp.get_context(method)
    q = ctx.Queue()
    ps = [ctx.Process(target=ow.take_sequences, args=(store.path, "seq", 150, q)) for _ in range(2)]
    for p in ps:
        p.start()
    got = [q.get(timeout=120) for _ in ps]
    for p in ps:
        p.join(120)
        assert p.exitcode == 0
    # Each number went to exactly one process, and every one is in the multimap once
    # (whose values sort by their bytes: little-endian, not as numbers).
    together = sorted(got[0] + got[1])
    assert together == list(range(len(together))) and len(together) >= 300
    assert m.sequence == len(together)
    assert sorted(log.get_all("taken")) == together and log.count_values("taken") == len(together)
