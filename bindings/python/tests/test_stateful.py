"""A shoal Map behaves like a dict: hypothesis drives both with the same operations."""

import os
import uuid

import hypothesis.strategies as st
from hypothesis import settings
from hypothesis.stateful import RuleBasedStateMachine, invariant, rule

import shoal

KEYS = st.text(alphabet="abcdeé日", max_size=3)
VALUES = st.integers(min_value=-(2**63), max_value=2**63 - 1)


class MapVsDict(RuleBasedStateMachine):
    def __init__(self):
        super().__init__()
        self.path = f"/dev/shm/shoal-hyp-{os.getpid()}-{uuid.uuid4().hex}.shoal"
        self.store = shoal.open(self.path)
        self.m = self.store.map("m", key="str", value="int")
        self.d = {}

    def teardown(self):
        self.store.close()
        shoal.remove(self.path, missing_ok=True)

    @rule(k=KEYS, v=VALUES)
    def setitem(self, k, v):
        self.m[k] = v
        self.d[k] = v

    @rule(k=KEYS)
    def getitem(self, k):
        try:
            expect = self.d[k]
        except KeyError:
            try:
                self.m[k]
            except KeyError:
                return
            raise AssertionError("shoal has a key the dict lacks")
        assert self.m[k] == expect

    @rule(k=KEYS)
    def delitem(self, k):
        try:
            del self.d[k]
        except KeyError:
            try:
                del self.m[k]
            except KeyError:
                return
            raise AssertionError("del of an absent key did not raise")
        del self.m[k]

    @rule(k=KEYS, default=VALUES)
    def get(self, k, default):
        assert self.m.get(k, default) == self.d.get(k, default)
        assert self.m.get(k) == self.d.get(k)

    @rule(k=KEYS, default=VALUES, with_default=st.booleans())
    def pop(self, k, default, with_default):
        if with_default:
            assert self.m.pop(k, default) == self.d.pop(k, default)
        elif k in self.d:
            assert self.m.pop(k) == self.d.pop(k)
        else:
            try:
                self.m.pop(k)
            except KeyError:
                return
            raise AssertionError("pop of an absent key did not raise")

    # No precondition on the model's state: which key popitem removes depends on the file's
    # random hash seed, so a precondition such as "the dict is not empty" would let that
    # seed steer which rules Hypothesis may draw, and its replay of a run would diverge
    # (FlakyStrategyDefinition). Every rule's draws must not depend on the machine's state.
    @rule()
    def popitem(self):
        if not self.d:
            try:
                self.m.popitem()
            except KeyError:
                return
            raise AssertionError("popitem of an empty map did not raise")
        k, v = self.m.popitem()
        assert self.d.pop(k) == v

    @rule(k=KEYS, v=VALUES)
    def setdefault(self, k, v):
        assert self.m.setdefault(k, v) == self.d.setdefault(k, v)

    @rule(items=st.dictionaries(KEYS, VALUES, max_size=5), as_pairs=st.booleans())
    def update(self, items, as_pairs):
        self.m.update(list(items.items()) if as_pairs else items)
        self.d.update(items)

    @rule(k=KEYS, delta=st.integers(min_value=-1000, max_value=1000))
    def incr(self, k, delta):
        new = (self.d.get(k, 0) + delta + 2**63) % 2**64 - 2**63
        self.d[k] = new
        assert self.m.add(k, delta) == new

    @rule(k=KEYS, expected=VALUES | st.just(shoal.ABSENT), new=VALUES | st.just(shoal.ABSENT))
    def compare_and_swap(self, k, expected, new):
        cur = self.d.get(k, shoal.ABSENT)
        if (expected is shoal.ABSENT and cur is shoal.ABSENT) or (
            expected is not shoal.ABSENT and cur is not shoal.ABSENT and cur == expected
        ):
            if new is shoal.ABSENT:
                self.d.pop(k, None)
            else:
                self.d[k] = new
            ok = True
        else:
            ok = False
        assert self.m.compare_and_swap(k, expected, new) == ok

    @rule(k=KEYS)
    def cas_on_current(self, k):
        # the hit path of compare_and_swap, which random expectations rarely reach
        cur = self.d.get(k, shoal.ABSENT)
        assert self.m.compare_and_swap(k, cur, 42)
        self.d[k] = 42

    @rule(keys=st.lists(KEYS, max_size=6))
    def get_many(self, keys):
        assert self.m.get_many(keys) == [self.d.get(k) for k in keys]

    @rule()
    def clear(self):
        self.m.clear()
        self.d.clear()

    @invariant()
    def same_contents(self):
        assert len(self.m) == len(self.d)
        assert self.m == self.d
        assert sorted(self.m.items()) == sorted(self.d.items())


MapVsDict.TestCase.settings = settings(max_examples=60, stateful_step_count=40, deadline=None)
test_map_vs_dict = MapVsDict.TestCase
