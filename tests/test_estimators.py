"""Abstention estimators: hand-computed values on a scripted backend, the registry, and the real
backend cross-checked against independent full forward passes."""

from __future__ import annotations

import math
from collections.abc import Sequence

import pytest
from hypothesis import given
from hypothesis import strategies as st

from udcg.annotate import estimators
from udcg.annotate.estimators import abstention_estimates, abstention_probs, register_estimator
from udcg.records import Estimate
from udcg.annotate.prompt import reader_chat
from udcg.errors import BackendError, InputError
from tests import lazy
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


def test_sampling_counts_abstentions_with_a_wilson_interval():
    backend = ScriptedBackend(answer={"a": ["NO-RESPONSE", "Paris", "no response.", "Lyon"], "b": ["Paris"] * 4})
    a, b = abstention_estimates(backend, [chat("a"), chat("b")], "sampling", n=4, temperature=0.7, seed=3)
    assert (a.p_abs, a.n_samples, b.p_abs, b.n_samples) == (0.5, 4, 0.0, 4)
    assert 0.0 < a.ci_low < 0.5 < a.ci_high < 1.0 and b.ci_low == 0.0
    (call,) = backend.calls
    assert call.method == "generate" and call.chats == (chat("a"), chat("b"))
    params = call.params
    assert (params.n, params.temperature, params.seed) == (4, 0.7, 3)


def test_registry_accepts_floats_and_objects():
    register_estimator("test-constant", lambda backend, chats, value=0.3: [value] * len(chats))
    try:
        assert abstention_probs(ScriptedBackend(), [chat("a"), chat("b")], "test-constant", value=0.6) == [0.6, 0.6]
        assert "test-constant" in estimators.estimator_names()
    finally:
        estimators._ESTIMATORS.pop("test-constant")


@pytest.mark.parametrize("bad", [1.5, -0.1, math.nan, "0.5"])
def test_registry_rejects_non_probabilities(bad):
    register_estimator("test-bad", lambda backend, chats: [bad] * len(chats))
    try:
        with pytest.raises(BackendError, match="chat 0"):
            abstention_probs(ScriptedBackend(), [chat("a")], "test-bad")
    finally:
        estimators._ESTIMATORS.pop("test-bad")


def test_errors():
    with pytest.raises(InputError, match="unknown abstention estimator 'nope'.*first-token"):
        abstention_probs(ScriptedBackend(), [chat("a")], "nope")
    assert abstention_probs(ScriptedBackend(), [], "first-token") == []

    short = ScriptedBackend(first={"a": 0.0}, fault_on="next_token_logprobs", fault=lambda: [])  # no row for the chat
    with pytest.raises(BackendError, match="returned 0 results for 1 chats"):
        abstention_probs(short, [chat("a")])
    with pytest.raises(BackendError, match="not a log-probability"):
        abstention_probs(ScriptedBackend(first={"a": 0.5}), [chat("a")])
    with pytest.raises(BackendError, match="no log-probabilities"):
        abstention_probs(ScriptedBackend(continuation={"a": []}), [chat("a")], "sequence")


# ---------------------------------------------------------------- on a real (tiny) model

torch = lazy.importorskip("torch")
from tests.test_hf_backend import CHATS, authors_first_token, naive_continuation, smol_dir, tiny, tiny_dir  # noqa: E402,F401


def test_first_token_on_hf_backend_matches_authors_loop(tiny):  # noqa: F811
    ours = abstention_probs(tiny, CHATS, "first-token")
    assert ours == pytest.approx([authors_first_token(tiny, c) for c in CHATS], abs=1e-6)


def test_sequence_on_hf_backend_matches_full_forward(tiny):  # noqa: F811
    ours = abstention_probs(tiny, CHATS, "sequence")
    expected = [math.exp(sum(naive_continuation(tiny, c, "NO-RESPONSE"))) for c in CHATS]
    assert ours == pytest.approx(expected, rel=1e-4, abs=1e-12)
    firsts = abstention_probs(tiny, CHATS, "first-token")
    assert all(s <= f * (1 + 1e-5) for s, f in zip(ours, firsts))


@pytest.mark.slow
def test_qwen_abstains_more_on_an_irrelevant_passage_than_on_a_relevant_one():
    from udcg.llm.hf import HFBackend

    backend = HFBackend("qwen2.5-coder-0.5b", device="cpu", dtype="float32")
    question = "In what city was Frank Herbert born?"
    chats: Sequence = [reader_chat(question, ["Frank Herbert was born on October 8, 1920, in Tacoma, Washington."]),
                       reader_chat(question, ["The Eiffel Tower is a wrought-iron lattice tower in Paris, France."])]
    first = abstention_probs(backend, chats, "first-token")
    assert first == pytest.approx([authors_first_token(backend, c) for c in chats], abs=1e-5)
    seq = abstention_probs(backend, chats, "sequence")
    assert first[0] < 0.05 and first[1] > 10 * first[0]  # measured: 0.0013 and 0.13
    assert seq[0] <= first[0] + 1e-6 and seq[1] <= first[1] + 1e-6 and seq[1] > 10 * seq[0]
