"""The sampling estimator: Wilson interval, abstention detector, rounds and early stop, and the
agreement of the sampled share with the exact probability from the same model's logits."""

from __future__ import annotations

import math
import os

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st
from scipy.stats import binomtest, norm

from udcg.annotate.sampling import SampledEstimate, SamplingPlan, sample_abstention, starts_with_no_response, wilson_interval
from tests.conftest import ScriptedBackend
from udcg.llm.base import GenerationParams

# ---------------------------------------------------------------- Wilson interval


def test_wilson_hand_computed():
    # k=5, n=10, z=1.96: centre 0.5, half-width 1.96/1.38416 * sqrt(0.025 + 0.009604) = 0.263410
    low, high = wilson_interval(5, 10, 1.96)
    assert low == pytest.approx(0.236590, abs=1e-6) and high == pytest.approx(0.763410, abs=1e-6)
    # k=0: the low bound is exactly 0, the high bound z^2/n / (1 + z^2/n) = 0.384160/1.384160
    low, high = wilson_interval(0, 10, 1.96)
    assert low == 0.0 and high == pytest.approx(0.277540, abs=1e-6)
    assert wilson_interval(10, 10, 1.96) == pytest.approx((1 - 0.277540, 1.0), abs=1e-6)


@given(n=st.integers(1, 2000), data=st.data(), z=st.sampled_from([1.0, 1.645, 1.96, 2.576]))
def test_wilson_matches_scipy_and_inverts_the_score_test(n, data, z):
    k = data.draw(st.integers(0, n))
    low, high = wilson_interval(k, n, z)
    assert 0.0 <= low <= k / n <= high <= 1.0
    confidence = 2 * norm.cdf(z) - 1
    ref = binomtest(k, n).proportion_ci(confidence_level=confidence, method="wilson")
    assert (low, high) == pytest.approx((ref.low, ref.high), abs=1e-9)
    for bound in (low, high):  # at an interior bound, the score statistic equals z
        if 0.0 < bound < 1.0:
            assert abs(k / n - bound) / math.sqrt(bound * (1 - bound) / n) == pytest.approx(z, rel=1e-7)


@given(k=st.integers(0, 50), n=st.integers(1, 50))
def test_wilson_narrows_with_more_trials(k, n):
    k = min(k, n)
    low1, high1 = wilson_interval(k, n)
    low4, high4 = wilson_interval(4 * k, 4 * n)
    assert high4 - low4 < high1 - low1


@pytest.mark.parametrize("k,n,z", [(1, 0, 1.96), (-1, 5, 1.96), (6, 5, 1.96), (1, 5, 0.0), (1, 5, math.nan), (1.0, 5, 1.96), (True, 5, 1.96)])
def test_wilson_rejects_bad_arguments(k, n, z):
    with pytest.raises(ValueError):
        wilson_interval(k, n, z)


# ---------------------------------------------------------------- abstention detector


@pytest.mark.parametrize(
    "answer",
    ["NO-RESPONSE", "no-response", "No response", "  NO_RESPONSE.", "**NO-RESPONSE**", '"NO-RESPONSE"',
     "NO - RESPONSE", "NO-RESPONSE: the documents do not say", "\nNo-Response", "NORESPONSE"],
)
def test_detector_accepts_no_response_variants(answer):
    assert starts_with_no_response(answer)


@pytest.mark.parametrize(
    "answer",
    ["", "Paris", "No, response times vary", "The answer is NO-RESPONSE", "No responses were recorded.", "NO-RESPONSES",
     "Nope", "NO"],
)
def test_detector_rejects_other_answers(answer):
    assert not starts_with_no_response(answer)


# ---------------------------------------------------------------- rounds, seeds, early stop (scripted backend)


def abstain_at_chat_probability(chat, params) -> list[str]:
    """NO-RESPONSE with a fixed probability per chat (chat content = that probability), from a RNG
    seeded by (params.seed, chat)."""
    p = float(chat[-1]["content"])
    rng = np.random.default_rng([params.seed, int(p * 1e6)])
    return ["NO-RESPONSE" if u < p else "Paris" for u in rng.random(params.n)]


def abstainer() -> ScriptedBackend:
    return ScriptedBackend(answer=abstain_at_chat_probability)


def _chats(*probs):
    return [[{"role": "user", "content": str(p)}] for p in probs]


def test_one_round_counts_and_order():
    backend = abstainer()
    est = sample_abstention(backend, _chats(1.0, 0.0, 0.5), SamplingPlan(n=40, temperature=0.7, seed=3))
    assert [e.n for e in est] == [40, 40, 40]
    assert est[0].p == 1.0 and est[1].p == 0.0 and est[0].k == 40 and est[1].k == 0
    assert (est[0].low, est[0].high) == pytest.approx(wilson_interval(40, 40))
    assert 0.2 < est[2].p < 0.8
    assert len(backend.calls) == 1
    params = backend.calls[0].params
    assert (params.n, params.temperature, params.seed) == (40, 0.7, 3)


def test_early_stop_drops_decided_chats_and_caps_at_n():
    backend = abstainer()
    est = sample_abstention(backend, _chats(1.0, 0.5, 0.0),
                            SamplingPlan(n=100, temperature=1.0, seed=0, target_width=0.2, batch=10))
    # all-abstain / never-abstain chats: Wilson width at k=0 of m is 3.8416/(m+3.8416) < 0.2 from m = 16
    assert est[0].n == est[2].n == 20 and est[0].width < 0.2 and est[2].width < 0.2
    assert est[1].n == 100 or est[1].width < 0.2
    assert [len(c.chats) for c in backend.calls][:2] == [3, 3] and backend.calls[2].chats == tuple(_chats(0.5))
    assert [c.params.seed for c in backend.calls] == list(range(len(backend.calls)))  # a new seed per round
    assert all(c.params.n == 10 for c in backend.calls)


def test_last_round_is_trimmed_to_n():
    backend = abstainer()
    est = sample_abstention(backend, _chats(0.5), SamplingPlan(n=25, temperature=1.0, seed=0, batch=10))
    assert [c.params.n for c in backend.calls] == [10, 10, 5] and est[0].n == 25


def test_same_arguments_same_estimates():
    a = sample_abstention(abstainer(), _chats(0.3, 0.6), SamplingPlan(n=50, temperature=1.0, seed=9, batch=7))
    b = sample_abstention(abstainer(), _chats(0.3, 0.6), SamplingPlan(n=50, temperature=1.0, seed=9, batch=7))
    assert a == b and all(isinstance(e, SampledEstimate) for e in a)


def test_custom_judge_is_used():
    est = sample_abstention(abstainer(), _chats(0.0), SamplingPlan(n=5, temperature=1.0, seed=0),
                            is_abstention=lambda a: a == "Paris")
    assert est[0].p == 1.0


@pytest.mark.parametrize("kw", [{"n": 0}, {"temperature": 0.0}, {"batch": 0}, {"target_width": 0.0}, {"target_width": 1.5}])
def test_bad_arguments_raise(kw):
    args = {"n": 10, "temperature": 1.0, "seed": 0, **kw}
    with pytest.raises(ValueError):
        sample_abstention(abstainer(), _chats(0.5), SamplingPlan(**args))


def test_no_chats_no_calls():
    backend = abstainer()
    assert sample_abstention(backend, [], SamplingPlan(n=10, temperature=1.0, seed=0)) == [] and backend.calls == []


# ---------------------------------------------------------------- agreement with the exact probability
#
# The quantity compared. Under sampling, "the answer starts with NO-RESPONSE" happens when the model
# writes NO-RESPONSE in any of its tokenisations and spellings (Qwen also writes "No-RESPONSE"),
# so its probability is not the first-token probability of the paper's estimator. What sampling
# estimates exactly is checked here: answers of one token (max_new_tokens=1), judged abstentions
# when the answer text is the first token of NO-RESPONSE ("NO"); its exact probability is the
# softmax(logits / T) mass of every token whose decoded, stripped text is "NO" (the backend strips
# answers, so " NO" counts too), at the same temperature T, from the same model's logits.


def exact_share(backend, chat, temperature: float, text: str) -> float:
    """softmax(logits / T) mass, at the answer position, of the tokens whose stripped text is ``text``."""
    import torch

    tok = backend.tokenizer
    with torch.inference_mode():
        logits = backend.model(torch.tensor([backend.encode(chat)], device=backend.model.device)).logits[0, -1].float().cpu()
    probs = torch.softmax(logits / temperature, dim=-1)
    vocab = tok.batch_decode([[i] for i in range(probs.shape[0])], skip_special_tokens=True)
    return float(sum(probs[i] for i, t in enumerate(vocab) if t.strip() == text))


def _via_api(server, backend, **kw):
    from udcg.llm.openai_backend import OpenAIBackend
    from udcg.llm.openai_settings import ClientSettings, ReadSettings

    return OpenAIBackend(backend.name, ClientSettings(server.url, max_concurrency=2), ReadSettings(**kw))


def test_api_sampling_equals_local_sampling(tiny_server, tiny_backend):
    chats = [[{"role": "user", "content": q}] for q in ("Capital of France?", "Who wrote Hamlet?", "2+2?")]
    judge = lambda a: len(a) % 2 == 0  # noqa: E731 (the tiny model's answers are random text)
    plan = SamplingPlan(n=24, temperature=1.0, seed=5, target_width=0.3, batch=8, max_new_tokens=3)
    local = sample_abstention(tiny_backend, chats, plan, judge)
    assert sample_abstention(_via_api(tiny_server, tiny_backend), chats, plan, judge) == local
    assert len({e.n for e in local} | {e.k for e in local}) > 1


def test_sampled_share_agrees_with_exact_probability_tiny(tiny_backend):
    chat = [{"role": "user", "content": "Who wrote Hamlet?"}]
    first = tiny_backend.generate([chat], GenerationParams(max_new_tokens=1))[0][0]  # the greedy first token
    temperature = 0.7
    exact = exact_share(tiny_backend, chat, temperature, first)
    assert 0.2 < exact < 0.8
    est = sample_abstention(tiny_backend, [chat], SamplingPlan(n=1000, temperature=temperature, seed=0, max_new_tokens=1,
                                                               batch=250, z=2.576), is_abstention=lambda a: a == first)[0]
    assert est.low <= exact <= est.high


FEW_SHOT = [
    ("The Eiffel Tower is a wrought-iron tower in Paris, France.", "In which city is the Eiffel Tower?", "Paris"),
    ("Bananas are elongated, edible fruits, botanically berries.", "Who wrote Hamlet?", "NO-RESPONSE"),
    ("Mount Everest is Earth's highest mountain above sea level.", "What is the highest mountain on Earth?", "Mount Everest"),
    ("The violin is a wooden string instrument.", "When did the Roman Empire fall?", "NO-RESPONSE"),
]
READER = ("You are given a question and you MUST respond by giving the answer (only the answer, no explanation) using only "
          "the information in the document. If the document does not contain the answer, respond with NO-RESPONSE.")


def few_shot_chat(document: str, question: str) -> list[dict]:
    """The reader prompt with four worked turns, so that SmolLM2 (which otherwise never abstains)
    abstains with a moderate probability on a document that lacks the answer."""
    chat = [{"role": "system", "content": READER}]
    for doc, q, a in FEW_SHOT:
        chat += [{"role": "user", "content": f"Document: {doc}\nQuestion: {q}\nAnswer:"}, {"role": "assistant", "content": a}]
    return chat + [{"role": "user", "content": f"Document: {document}\nQuestion: {question}\nAnswer:"}]


@pytest.mark.slow
def test_sampled_no_response_share_agrees_with_exact_probability_smollm2(smollm2_server, smollm2_backend):
    chat = few_shot_chat("Marie Curie was a physicist and chemist who conducted research on radioactivity.", "Where was Marie Curie born?")
    temperature = 0.8
    first = smollm2_backend.tokenizer.decode([smollm2_backend.first_token("NO-RESPONSE")])
    assert first == "NO"
    exact = exact_share(smollm2_backend, chat, temperature, first)
    assert 0.2 < exact < 0.8
    api = _via_api(smollm2_server, smollm2_backend, max_n_per_request=300)  # the local server allows n up to 1024
    est = sample_abstention(api, [chat], SamplingPlan(n=300, temperature=temperature, seed=0, max_new_tokens=1, z=2.576),
                            is_abstention=lambda a: a == first)[0]
    print(f"agreement: exact={exact:.4f} sampled={est.p:.4f} [{est.low:.4f}, {est.high:.4f}] n={est.n}")
    assert est.low <= exact <= est.high


# PopQA question 4382392 with its second Contriever passage (DPR Wikipedia id 3064835, "Feilden").
# PopQA: MIT licence; Wikipedia text: CC BY-SA. From minqi1/S2RAG data_eval/popqa_longtail_w_gs_example.jsonl.
FEILDEN = ("Bernard Feilden (1919–2008), British conservation architect ; Bob Feilden (1917–2004), British mechanical "
           "engineer ; Gerry Feilden (1904–1981), British general and horse racing identity ; Henry Feilden "
           "(disambiguation) ; Joseph Feilden (1824–1895), British politician ; Richard Feilden (1950–2005), British "
           "architect ; William Feilden (1772–1850), British politician ")


@pytest.mark.slow
@pytest.mark.skipif(os.environ.get("UDCG_TEST_QWEN") != "1", reason="set UDCG_TEST_QWEN=1 (several minutes on a 2-core CPU)")
def test_sampled_no_response_share_agrees_with_exact_probability_qwen_popqa():
    from udcg.llm.registry import load_backend

    backend = load_backend("qwen2.5-coder-0.5b")
    chat = [{"role": "system", "content": READER},
            {"role": "user", "content": f"Document: {FEILDEN}\nQuestion: What is Henry Feilden's occupation?\nAnswer:"}]
    exact = exact_share(backend, chat, 1.0, "NO")
    assert 0.2 < exact < 0.8
    est = sample_abstention(backend, [chat], SamplingPlan(n=400, temperature=1.0, seed=0, max_new_tokens=1, z=2.576),
                            is_abstention=lambda a: a == "NO")[0]
    print(f"agreement (qwen, PopQA): exact={exact:.4f} sampled={est.p:.4f} [{est.low:.4f}, {est.high:.4f}] n={est.n}")
    assert est.low <= exact <= est.high
