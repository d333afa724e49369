"""Codec round trips and the byte layouts other languages rely on."""

import math
import struct

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import shoal

I64 = st.integers(min_value=-(2**63), max_value=2**63 - 1)
JSON = st.recursive(
    st.none() | st.booleans() | I64 | st.floats(allow_nan=False, allow_infinity=False) | st.text(),
    lambda c: st.lists(c, max_size=4) | st.dictionaries(st.text(max_size=8), c, max_size=4),
    max_leaves=12,
)
FAST = settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])


@FAST
@given(k=st.binary(max_size=300), v=st.binary(max_size=3000))
def test_bytes(store, k, v):
    m = store.map("b")
    m[k] = v
    assert m[k] == v and type(m[k]) is bytes


@FAST
@given(k=st.text(max_size=100), v=st.text(max_size=500))
def test_str_any_unicode(store, k, v):
    m = store.map("s", key="str", value="str")
    m[k] = v
    assert m[k] == v and k in m
    raw = store.map("s", key="bytes", value="bytes")  # the same map as bytes: UTF-8
    assert raw[k.encode()] == v.encode()


def test_str_non_ascii_and_surrogates(store):
    m = store.map("s", key="str", value="str")
    for s in ("é", "日本語", "🦈 shoal", "\x00nul", ""):
        m[s] = s * 3
        assert m[s] == s * 3
    with pytest.raises(UnicodeEncodeError):
        m["\ud800"] = "lone surrogate"


@FAST
@given(k=I64, v=I64)
def test_int_round_trip_and_layout(store, k, v):
    m = store.map("i", key="int", value="int")
    m[k] = v
    assert m[k] == v
    raw = store.map("i", key="bytes", value="bytes")
    assert raw[struct.pack("<q", k)] == struct.pack("<q", v)


def test_int_limits_and_types(store):
    m = store.map("i", key="int", value="int")
    m[2**63 - 1] = -(2**63)
    assert m[2**63 - 1] == -(2**63)
    for big in (2**63, -(2**63) - 1, 10**30):
        with pytest.raises(OverflowError):
            m[big] = 1
        with pytest.raises(OverflowError):
            m[1] = big
    for bad in (1.0, "1", b"1", None, [1]):
        with pytest.raises(TypeError):
            m[bad] = 1
        with pytest.raises(TypeError):
            m[1] = bad
    m[True] = False  # bool is an int
    assert m[1] == 0


@FAST
@given(k=st.floats(allow_nan=False), v=st.floats())
def test_float_round_trip_and_layout(store, k, v):
    m = store.map("f", key="float", value="float")
    m[k] = v
    got = m[k]
    assert (math.isnan(v) and math.isnan(got)) or got == v
    assert store.map("f", key="bytes", value="bytes")[struct.pack("<d", k)] == struct.pack("<d", v)


def test_float_types(store):
    m = store.map("f", key="float", value="float")
    m[3] = 4  # ints are accepted, stored as floats
    assert m[3.0] == 4.0 and type(m[3.0]) is float
    m[-0.0] = 1.0
    # keys compare by bit pattern (documented): -0.0 and 0.0 are different keys
    assert m[-0.0] == 1.0 and 0.0 not in m
    for bad in ("1.0", b"x", None):
        with pytest.raises(TypeError):
            m[bad] = 1.0
        with pytest.raises(TypeError):
            m[1.0] = bad


@FAST
@given(k=st.text(max_size=20) | I64, v=JSON)
def test_json(store, k, v):
    m = store.map("j", key="json", value="json")
    m[k] = v
    assert m[k] == v


def test_json_canonical_and_strict(store):
    m = store.map("j", key="json", value="json")
    m[{"b": 1, "a": 2}] = "x"  # object keys are sorted: equal objects, equal keys
    raw = store.map("j", key="bytes", value="bytes")
    assert raw[b'{"a":2,"b":1}'] == b'"x"'
    m["é"] = ["ü"]
    assert raw['"é"'.encode()] == '["ü"]'.encode()  # UTF-8, not \\u escapes
    with pytest.raises(ValueError):
        m["nan"] = float("nan")
    with pytest.raises(TypeError):
        m["set"] = {1, 2}


@FAST
@given(v=st.tuples(I64, st.text(), st.frozensets(st.integers())))
def test_pickle_opt_in(store, v):
    m = store.map("p", key="pickle", value="pickle")
    m[v] = {"v": v}
    assert m[v] == {"v": v}


def test_codec_names(store):
    assert shoal.CODECS == ["bytes", "str", "int", "float", "json", "pickle", "uint"]
    for c in shoal.CODECS:
        m = store.map("n-" + c, key=c, value=c)
        assert (m.key_codec, m.value_codec) == (c, c)


def test_codecs_are_recorded_and_taken_by_a_map_opened_without_them(store):
    m = store.map("people", key="str", value="json")
    m["ann"] = {"age": 7}
    assert (m.key_type, m.value_type) == ("utf8", "json")
    again = store.map("people")  # no codecs: the recorded ones
    assert (again.key_codec, again.value_codec) == ("str", "json")
    assert again["ann"] == {"age": 7}
    with pytest.raises(shoal.InvalidArgument, match="values as json, not i64"):
        store.map("people", key="str", value="int")
    assert store.map("people", value="bytes")["ann"] == b'{"age":7}'  # any map as bytes
    plain = store.map("plain")
    assert (plain.key_type, plain.value_type, plain.key_codec) == (None, None, "bytes")
    # A map that recorded nothing takes any codecs (one made by an older library).
    assert store.map("plain", value="int").value_type is None
    n = store.map("n", key="uint", value="float")
    n[2**64 - 1] = 0.5
    assert store.map("n")[2**64 - 1] == 0.5
    assert (n.key_type, n.value_type) == ("u64", "f64")
    with pytest.raises(OverflowError):
        n[-1] = 1.0


def test_a_pickled_map_is_decoded_only_when_asked_for(store):
    p = store.map("jobs", value="pickle")
    p[b"a"] = {1, 2}
    assert p.value_type == "user:0x6c6b6369703a7970"
    with pytest.raises(shoal.InvalidArgument, match='value="pickle"'):
        store.map("jobs")
    assert store.map("jobs", value="pickle")[b"a"] == {1, 2}
