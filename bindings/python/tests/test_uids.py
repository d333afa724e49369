"""Stable UIDs: Store.map(..., uids=True), Map.uid / put_uid and the *_by_uid methods."""

import pickle

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import shoal


def test_uid_roundtrip(store):
    m = store.map("u", key="str", value="str", uids=True)
    assert m.uids
    a = m.put_uid("alice", "admin")
    assert isinstance(a, int) and a > 0
    assert m.put_uid("alice", "root") == a  # a replaced key keeps its UID
    b = m.put_uid("bob", "guest")
    assert b != a
    assert m.uid("alice") == a and m.uid("bob") == b
    assert m.uid("nobody") is None
    m["alice"] = "owner"  # a plain write keeps the UID too
    assert m.uid("alice") == a
    assert m.get_by_uid(a) == "owner"
    assert m.key_by_uid(a) == "alice"
    m.put_by_uid(a, "x" * 1000)
    assert m["alice"] == "x" * 1000 and m.uid("alice") == a
    assert m.remove_by_uid(b) == "guest"
    assert "bob" not in m and len(m) == 1
    assert store.check().ok


def test_stale_uid_error(store):
    m = store.map("u", uids=True)
    a = m.put_uid(b"k", b"v")
    del m[b"k"]
    for call in (
        lambda: m.get_by_uid(a),
        lambda: m.key_by_uid(a),
        lambda: m.put_by_uid(a, b"w"),
        lambda: m.remove_by_uid(a),
        lambda: m.update_by_uid(a, lambda v: v),
    ):
        with pytest.raises(shoal.StaleUidError) as e:
            call()
        assert isinstance(e.value, KeyError) and isinstance(e.value, shoal.Error)
        assert "stale" in str(e.value)
    assert b"k" not in m  # the stale put did not bring it back
    # Never handed out: stale too.
    with pytest.raises(shoal.StaleUidError):
        m.get_by_uid(123456)
    with pytest.raises(KeyError):  # catchable as a KeyError
        m.get_by_uid(a)


def test_stale_after_reuse(store):
    m = store.map("u", uids=True)
    a = m.put_uid(b"a", b"1")
    assert m.remove_by_uid(a) == b"1"
    reused = False
    for i in range(64):
        u = m.put_uid(b"n%d" % i, b"v")
        assert u != a
        if u & 0xFFFFFFFF == a & 0xFFFFFFFF:  # the same table entry, a new generation
            reused = True
            with pytest.raises(shoal.StaleUidError):
                m.get_by_uid(a)
            assert m.key_by_uid(u) == b"n%d" % i
            break
    assert reused


def test_add_and_update_by_uid(store):
    m = store.map("c", key="str", value="int", uids=True)
    c = m.put_uid("hits", 5)
    assert m.add_by_uid(c) == 6
    assert m.add_by_uid(c, -10) == -4
    assert m["hits"] == -4
    assert m.update_by_uid(c, lambda v: v * 2) == -8
    assert m.get_by_uid(c) == -8
    # An exception from the function propagates and changes nothing.
    with pytest.raises(ZeroDivisionError):
        m.update_by_uid(c, lambda v: v // 0)
    assert m.get_by_uid(c) == -8
    # A value of the wrong type: TypeError, nothing changed.
    with pytest.raises(TypeError):
        m.update_by_uid(c, lambda v: "nope")
    assert m.get_by_uid(c) == -8
    # ABSENT removes the key; the UID becomes stale.
    assert m.update_by_uid(c, lambda v: shoal.ABSENT) is shoal.ABSENT
    assert "hits" not in m
    with pytest.raises(shoal.StaleUidError):
        m.add_by_uid(c)
    s = store.map("s", uids=True)
    u = s.put_uid(b"k", b"12345678")
    with pytest.raises(TypeError):
        s.add_by_uid(u)  # needs the "int" value codec, like add


def test_map_without_uids_refuses(store):
    m = store.map("plain")
    assert not m.uids
    m[b"k"] = b"v"
    for call in (
        lambda: m.uid(b"k"),
        lambda: m.put_uid(b"k", b"v"),
        lambda: m.get_by_uid(1),
        lambda: m.key_by_uid(1),
        lambda: m.put_by_uid(1, b"v"),
        lambda: m.remove_by_uid(1),
        lambda: m.update_by_uid(1, lambda v: v),
    ):
        with pytest.raises(shoal.InvalidArgument) as e:
            call()
        # Says how to get UIDs, in Python: not the Rust MapOptions::uids.
        assert 'store.map("plain", uids=True)' in str(e.value), e.value
        assert "MapOptions" not in str(e.value), e.value
    # UIDs are chosen at creation.
    with pytest.raises(shoal.InvalidArgument):
        store.map("plain", uids=True)
    # An existing UID map opens without asking again, and create=False works with uids.
    store.map("withuids", uids=True)
    assert store.map("withuids").uids
    assert store.map("withuids", create=False, uids=True).uids
    with pytest.raises(shoal.NotFound):
        store.map("missing", create=False, uids=True)


def test_uid_arguments(store):
    m = store.map("u", uids=True)
    with pytest.raises(OverflowError):
        m.get_by_uid(-1)
    with pytest.raises(OverflowError):
        m.get_by_uid(1 << 64)
    with pytest.raises(TypeError):
        m.get_by_uid("1")  # type: ignore[arg-type]


def test_uids_survive_pickling_and_other_handles(store):
    m = store.map("u", key="str", value="json", uids=True)
    a = m.put_uid("k", {"x": 1})
    again = pickle.loads(pickle.dumps(m))
    assert again.uids and again.get_by_uid(a) == {"x": 1}
    store.close()
    with pytest.raises(shoal.Closed):
        m.get_by_uid(a)


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    ops=st.lists(
        st.tuples(st.sampled_from(["put", "put_by_uid", "remove", "remove_by_uid"]), st.integers(0, 7), st.binary(max_size=20)),
        max_size=60,
    )
)
def test_uids_follow_a_model(store, ops):
    """A dict of key -> (uid, value) and the set of dead UIDs predict every by-UID call."""
    name = "h"
    store.drop_map(name)
    m = store.map(name, uids=True)
    model: dict[bytes, tuple[int, bytes]] = {}
    dead: set[int] = set()
    for op, k, v in ops:
        key = b"k%d" % k
        if op == "put":
            u = m.put_uid(key, v)
            if key in model:
                assert u == model[key][0]
            else:
                assert u not in {x for x, _ in model.values()}
            model[key] = (u, v)
        elif op == "put_by_uid":
            if key in model:
                m.put_by_uid(model[key][0], v)
                model[key] = (model[key][0], v)
        elif op == "remove":
            if key in model:
                dead.add(model.pop(key)[0])
            m.pop(key, None)
        else:
            if key in model:
                u, old = model.pop(key)
                assert m.remove_by_uid(u) == old
                dead.add(u)
        for key2, (u, val) in model.items():
            assert m.get_by_uid(u) == val and m.key_by_uid(u) == key2 and m.uid(key2) == u
        for u in dead:
            with pytest.raises(shoal.StaleUidError):
                m.get_by_uid(u)
    assert len(m) == len(model)
