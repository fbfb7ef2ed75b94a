"""The C dict walk under gain_table (udcg/metrics/_walk.c) against the pure-Python walk it replaces:
same matrices on random runs, the same fallbacks and errors on input it does not take."""

from __future__ import annotations

import importlib
import os
import types

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from udcg.errors import InputError
from udcg.metrics import gains

if os.environ.get("UDCG_REQUIRE_C_WALK") == "1":  # set by `make test`: a helper that stopped building is a failure
    walk = importlib.import_module("udcg.metrics._walk")
else:
    walk = pytest.importorskip("udcg.metrics._walk", reason="the optional C walk is not built (no compiler at install)")


def _tables(run, qrels, extra, monkeypatch):
    fast = gains.gain_table(run, qrels, extra)
    with monkeypatch.context() as m:
        m.setattr(gains, "_walk", None)
        slow = gains.gain_table(run, qrels, extra)
    return fast, slow


def _same(a, b):
    assert a.qids == b.qids
    for x, y in [(a.gains, b.gains), (a.ideal, b.ideal), (a.n_judged, b.n_judged)] + \
            [(a.extra[k], b.extra[k]) for k in a.extra]:
        np.testing.assert_array_equal(x, y)


number = st.one_of(st.integers(-3, 5), st.floats(-5, 5, allow_nan=False), st.booleans(),
                   st.integers(0, 4).map(np.int64), st.floats(0, 1).map(np.float32))
docs = st.dictionaries(st.sampled_from([f"d{i}" for i in range(12)]), number, max_size=8)


@settings(max_examples=60, deadline=None)
@given(run=st.dictionaries(st.sampled_from(["q1", "q2", "q3", "q4"]), docs, max_size=4),
       qrels=st.dictionaries(st.sampled_from(["q1", "q2", "q3", "q5"]), docs, min_size=1, max_size=4),
       p_abs=st.dictionaries(st.sampled_from(["q1", "q2", "q4"]), docs, max_size=3))
def test_c_walk_equals_python_walk(run, qrels, p_abs):
    mp = pytest.MonkeyPatch()
    try:
        fast, slow = _tables(run, qrels, {"p_abs": p_abs}, mp)
    finally:
        mp.undo()
    _same(fast, slow)


def test_primitives_hand_computed():
    out = np.empty(5)
    walk.values([{"a": 1, "b": 2.5}, {}, {"c": True, "d": np.int64(3), "e": np.float32(0.5)}], out)
    assert out.tolist() == [1.0, 2.5, 1.0, 3.0, 0.5]
    out = np.empty(3)
    walk.lookup([{"a": 7, "z": 1}, {"b": 2}], [{"a": 0, "b": 0}, {"b": 0}], -1.0, out)
    assert out.tolist() == [7.0, -1.0, 2.0]


@pytest.mark.parametrize("call", [
    lambda out: walk.values([{"a": 1}], out[:2]),  # fewer items than the buffer
    lambda out: walk.values([{"a": 1, "b": 2, "c": 3, "d": 4}], out),  # more items
    lambda out: walk.values([{"a": "1"}], out),  # a string is not a number
    lambda out: walk.values([types.MappingProxyType({"a": 1})], out),  # not a dict
    lambda out: walk.lookup([{}], [{}, {}], 0.0, out),  # lengths differ
    lambda out: walk.values([{"a": 1}], out.astype(np.float32)),  # not float64
])
def test_primitives_refuse_what_they_do_not_take(call):
    with pytest.raises((TypeError, ValueError)):
        call(np.empty(3))


def test_non_dict_mappings_and_bad_values_fall_back_with_the_same_results_and_errors(monkeypatch):
    run = {"q1": {"a": 2.0, "b": 1.0}}
    proxied = types.MappingProxyType({"q1": types.MappingProxyType({"a": 1, "c": 2})})
    fast, slow = _tables(run, proxied, None, monkeypatch)
    _same(fast, slow)
    assert fast.gains.tolist() == [[1.0, 0.0]]
    for bad, match in [({"q1": {"a": "x"}}, "every value must be a number"), ({"q1": {"a": float("nan")}}, "NaN or inf")]:
        with pytest.raises(InputError, match=match):
            gains.gain_table(run, bad)
        with pytest.raises(InputError, match=match):
            gains.gain_table(bad, {"q1": {"a": 1}})


def test_key_and_number_primitives_hand_computed():
    assert walk.str_keys([{"a": 1}, {}, {"b": 2}]) is True
    assert walk.str_keys({"q": {"a": 1}, "r": {"b": 2, 3: 4}}.values()) is False  # any iterable of dicts
    assert walk.str_keys([{type("Id", (str,), {})("a"): 1}]) is True  # a str subclass, as str.join takes it
    with pytest.raises(TypeError):
        walk.str_keys([{"a": 1}, types.MappingProxyType({"b": 2})])
    out = np.empty(4)
    walk.numbers([{"a": 1, "b": 2.5}, {"c": np.float64(-1.0), "d": 10}], out)
    assert out.tolist() == [1.0, 2.5, -1.0, 10.0]
    for odd in [True, np.int64(1), np.float32(0.5), "1", None]:  # no bool; numpy ints and float32 to the slow walk
        with pytest.raises(TypeError):
            walk.numbers([{"a": 1.0, "b": odd}], np.empty(2))


keyed = st.dictionaries(st.one_of(st.sampled_from(["a", "b", "c"]), st.integers(0, 3), st.booleans()), number,
                        max_size=4)


@settings(max_examples=80, deadline=None)
@given(tables=st.lists(keyed, max_size=4))
def test_key_and_number_checks_equal_their_python_fallbacks(tables):
    mp = pytest.MonkeyPatch()
    try:
        fast_keys, fast_numbers = gains.all_str_keys(tables), gains.plain_numbers(tables, "u")
        mp.setattr(gains, "_walk", None)
        assert gains.all_str_keys(tables) is None  # the caller's own check then (api_args: str.join)
        slow_numbers = gains.plain_numbers(tables, "u")
    finally:
        mp.undo()
    assert fast_keys == all(type(k) is str for t in tables for k in t)
    assert (fast_numbers is None) == (slow_numbers is None)
    if fast_numbers is not None:
        np.testing.assert_array_equal(fast_numbers, slow_numbers)


def test_a_helper_built_from_an_older_walk_c_counts_as_not_built(monkeypatch):
    """After an update without a rebuild the old helper lacks str_keys and numbers: the Python checks run."""
    monkeypatch.setattr(gains, "_walk", types.SimpleNamespace(values=walk.values, lookup=walk.lookup))
    assert gains.all_str_keys([{"a": 1}]) is None
    assert gains.plain_numbers([{"a": 1, "b": 0.5}], "u").tolist() == [1.0, 0.5]
    assert gains.plain_numbers([{"a": True}], "u") is None
