"""Abstention estimators: hand-computed values on a scripted backend, the registry, and the real
backend cross-checked against independent full forward passes."""

from __future__ import annotations

import math
from collections.abc import Sequence

import pytest
from hypothesis import given
from hypothesis import strategies as st

from udcg.annotate import estimators
from udcg.annotate.estimators import Estimate, abstention_estimates, abstention_probs, register_estimator
from udcg.annotate.prompt import reader_chat
from udcg.errors import BackendError, InputError
from tests.conftest import Call, ScriptedBackend


def chat(text: str) -> list[dict]:
    return [{"role": "system", "content": "sys"}, {"role": "user", "content": text}]


def test_first_token_is_exp_of_the_logprob():
    backend = ScriptedBackend(first={"a": math.log(0.25), "b": 0.0, "c": -math.inf})
    assert abstention_probs(backend, [chat("a"), chat("b"), chat("c")]) == pytest.approx([0.25, 1.0, 0.0])
    assert backend.calls == [Call("next_token_logprobs", (chat("a"), chat("b"), chat("c")), candidates=("NO-RESPONSE",))]


def test_sequence_is_the_product_of_the_conditionals():
    backend = ScriptedBackend(continuation={"a": [math.log(0.5), math.log(0.8), math.log(0.9)], "b": [math.log(0.1)]})
    assert abstention_probs(backend, [chat("a"), chat("b")], "sequence") == pytest.approx([0.36, 0.1])
    assert backend.calls == [Call("continuation_logprobs", (chat("a"), chat("b")), continuations=("NO-RESPONSE", "NO-RESPONSE"))]


@given(st.lists(st.floats(min_value=0.01, max_value=1.0), min_size=1, max_size=6))
def test_sequence_never_exceeds_first_token(probs):
    backend = ScriptedBackend(first={"x": math.log(probs[0])}, continuation={"x": [math.log(p) for p in probs]})
    seq = abstention_probs(backend, [chat("x")], "sequence")[0]
    assert seq == pytest.approx(math.prod(probs), rel=1e-9)
    assert seq <= abstention_probs(backend, [chat("x")], "first-token")[0] + 1e-12


def test_api_logprobs_censors_a_token_outside_the_top_list_never_zero():
    backend = ScriptedBackend(first={"in": math.log(0.7), "out": -math.inf})
    inside, outside = abstention_estimates(backend, [chat("in"), chat("out")], "api-logprobs")
    assert inside == Estimate(pytest.approx(0.7), note="", estimator_used="api-logprobs")
    # without the top list the only bound is 1: p_abs in [0, 1], recorded as 0.5, never 0
    assert (outside.p_abs, outside.ci_low, outside.ci_high, outside.censored) == (0.5, 0.0, 1.0, True)
    assert outside.estimator_used == "api-logprobs-censored" and outside.note.startswith("censored")


def test_the_censoring_bound_is_the_lists_last_probability():
    assert estimators.censored_bound({"a": math.log(0.6), "b": math.log(0.3), "c": math.log(0.05)}) == pytest.approx(0.05)
    # rounded log-probabilities may sum past 1: the last probability still bounds what is outside
    assert estimators.censored_bound({"a": -0.01, "b": -4.6}) == pytest.approx(math.exp(-4.6))
    assert estimators.censored_bound({}) == estimators.censored_bound(None) == 1.0
