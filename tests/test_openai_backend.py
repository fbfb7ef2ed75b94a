"""OpenAIBackend: pure payload/parsing functions, then the contract against a real local server
(``tiny_server``), with a fault-injecting proxy in front for retries, partial failures and key hygiene."""

from __future__ import annotations

import asyncio
import logging
import math
import time
from email.utils import formatdate

import pytest
from hypothesis import given
from hypothesis import strategies as st

from tests.conftest import TINY_SERVED_NAME, free_port
from tests.faultproxy import FaultProxy
from udcg.errors import BackendError, InputError
from udcg.llm.base import GenerationParams
from udcg.llm.openai_backend import OpenAIBackend
from udcg.llm.openai_settings import ClientSettings, ReadSettings, from_options
from udcg.llm.openai_results import BatchError
from udcg.llm.openai_transport import Pacer as _Pacer
from udcg.llm.openai_wire import (
    backoff_delay,
    candidate_logprob,
    chat_payload,
    chunk_seed,
    logprobs_payload,
    parse_answers,
    parse_first_top_logprobs,
    retry_after_seconds,
)

CHAT = [{"role": "system", "content": "Answer briefly."}, {"role": "user", "content": "Capital of France?"}]

# ---------------------------------------------------------------- pure functions


def test_chat_payload_carries_every_generation_parameter():
    params = GenerationParams(max_new_tokens=7, temperature=0.5, top_p=0.9, n=3, seed=11, stop=("\n",))
    body = chat_payload("m", CHAT, params)
    assert body == {"model": "m", "messages": CHAT, "temperature": 0.5, "top_p": 0.9, "max_tokens": 7, "n": 3, "seed": 11, "stop": ["\n"]}
    assert "stop" not in chat_payload("m", CHAT, GenerationParams())


def test_logprobs_payload_asks_for_one_token_and_the_top_list():
    body = logprobs_payload("m", CHAT, 5)
    assert (body["max_tokens"], body["logprobs"], body["top_logprobs"], body["temperature"], body["n"]) == (1, True, 5, 0.0, 1)


def _response(*contents, logprobs=None):
    choices = [{"index": i, "message": {"role": "assistant", "content": c}, "logprobs": logprobs, "finish_reason": "stop"} for i, c in enumerate(contents)]
    return {"id": "x", "object": "chat.completion", "choices": choices}


def test_parse_answers_orders_by_index_and_checks_n():
    body = _response("a", "b", None)
    body["choices"].reverse()
    assert parse_answers(body, 3) == ["a", "b", ""]
    with pytest.raises(BackendError, match="returned 3 answers, asked for n=2"):
        parse_answers(body, 2)
    for bad in ({}, {"choices": []}, {"choices": "x"}, [], {"choices": [{"message": {"content": 3}}]}):
        with pytest.raises(BackendError):
            parse_answers(bad, 1)


def test_parse_first_top_logprobs_reads_the_openai_layout():
    entry = {"token": "NO", "logprob": -0.4, "bytes": [78, 79],
             "top_logprobs": [{"token": "NO", "logprob": -0.4}, {"token": "The", "logprob": -1.3}, {"token": "N", "logprob": -4.0}]}
    body = _response("NO", logprobs={"content": [entry, {"token": "-", "logprob": -0.1, "top_logprobs": []}]})
    assert parse_first_top_logprobs(body) == {"NO": -0.4, "The": -1.3, "N": -4.0}
    with pytest.raises(BackendError, match="no logprobs.content"):
        parse_first_top_logprobs(_response("NO"))
    with pytest.raises(BackendError, match="malformed logprobs entry"):
        parse_first_top_logprobs(_response("NO", logprobs={"content": [{"token": "NO"}]}))


def test_candidate_logprob_longest_prefix_explicit_token_and_absence():
    top = {"NO": -0.5, "N": -2.0, "The": -1.0}
    assert candidate_logprob(top, "NO-RESPONSE") == (-0.5, "")
    assert candidate_logprob(top, "NO-RESPONSE", first_token="N") == (-2.0, "")
    lp, note = candidate_logprob({"The": -0.1}, "NO-RESPONSE")
    assert lp == -math.inf and "absent from the top-1 list" in note and "probability censored" in note
    lp, note = candidate_logprob(top, "NO-RESPONSE", first_token="NO-")
    assert lp == -math.inf and "'NO-'" in note


def test_retry_after_seconds_parses_seconds_and_dates():
    assert retry_after_seconds("3") == 3.0
    assert retry_after_seconds(" 1.5 ") == 1.5
    assert retry_after_seconds("-4") == 0.0
    assert retry_after_seconds(None) is None and retry_after_seconds("soon") is None and retry_after_seconds("nan") is None
    now = 1_700_000_000.0
    assert retry_after_seconds(formatdate(now + 30, usegmt=True), now=now) == pytest.approx(30.0)
    assert retry_after_seconds(formatdate(now - 30, usegmt=True), now=now) == 0.0


def test_chunk_seeds_keep_the_first_and_differ_for_the_rest():
    assert chunk_seed(42, 0) == 42
    seeds = {chunk_seed(42, c) for c in range(1, 200)} | {chunk_seed(43, c) for c in range(1, 200)}
    assert len(seeds) == 398 and all(0 <= x < 2**31 for x in seeds)


@given(attempt=st.integers(0, 30), base=st.floats(0.001, 5), cap=st.floats(0.01, 60), u=st.floats(0, 1, exclude_max=True))
def test_backoff_delay_is_jittered_exponential_and_capped(attempt, base, cap, u):
    full = min(cap, base * 2.0**attempt)
    assert 0.5 * full <= backoff_delay(attempt, base, cap, u) <= full


@pytest.mark.parametrize(
    "kw", [{"base_urls": []}, {"base_urls": "localhost:8000"}, {"max_concurrency": 0}, {"timeout": 0}, {"max_retries": -1},
           {"top_logprobs": 21}, {"requests_per_minute": 0}],
)
def test_constructor_rejects_bad_settings(kw):
    with pytest.raises(InputError):
        OpenAIBackend("m", *from_options({"base_urls": "http://127.0.0.1:1/v1", **kw})[:2])


def test_continuation_logprobs_need_a_server_that_scores_text():
    with pytest.raises(BackendError, match=r"need a server that scores text .*no tokenizer for 'm'.*--tokenizer, reader.tokenizer"):
        OpenAIBackend("m", ClientSettings("http://127.0.0.1:1/v1")).continuation_logprobs([(CHAT, "Paris")])
    with pytest.raises(BackendError, match=r"scores text .*scoring: top-logprobs"):
        OpenAIBackend("m", ClientSettings("http://127.0.0.1:1/v1"), ReadSettings(scoring="top-logprobs")).continuation_logprobs(
            [(CHAT, "Paris")])


# ---------------------------------------------------------------- against the real local server

QUESTIONS = ["Capital of France?", "Who wrote Hamlet?", "2+2?", "Largest planet?", "Boiling point of water?", "Colour of the sky?"]
CHATS = [[{"role": "system", "content": "Answer briefly."}, {"role": "user", "content": q}] for q in QUESTIONS]
GREEDY = GenerationParams(max_new_tokens=6, temperature=0.0)


def _client(url, **kw) -> OpenAIBackend:
    client, read, _ = from_options({"base_urls": url, "api_key_env": "UDCG_TEST_API_KEY", "backoff_base": 0.01, "timeout": 30.0,
                                    **kw})
    return OpenAIBackend(TINY_SERVED_NAME, client, read)


@pytest.fixture(scope="module")
def reference(tiny_backend):
    return tiny_backend.generate(CHATS, GREEDY)


def test_order_kept_batch_equals_one_by_one_equals_local(tiny_server, tiny_backend, reference):
    client = _client(tiny_server.url, max_concurrency=4)
    batched = client.generate(CHATS, GREEDY)
    assert batched == [client.generate([c], GREEDY)[0] for c in CHATS]
    assert batched == reference
    assert len({a[0] for a in batched}) > 1  # the chats really get different answers


def test_sampling_is_seeded_and_n_answers_come_back(tiny_server):
    client = _client(tiny_server.url)
    params = GenerationParams(max_new_tokens=4, temperature=1.0, n=5, seed=7)
    a, b = client.generate(CHATS[:2], params), client.generate(CHATS[:2], params)
    assert a == b and all(len(x) == 5 for x in a)
    assert client.generate(CHATS[:2], GenerationParams(max_new_tokens=4, temperature=1.0, n=5, seed=8)) != a


def test_more_answers_than_one_request_allows_are_split(tiny_server):
    params = GenerationParams(max_new_tokens=3, temperature=1.0, n=5, seed=4)
    with FaultProxy(tiny_server.url) as proxy:
        answers = _client(proxy.url, max_n_per_request=2).generate(CHATS[:2], params)
    assert [len(a) for a in answers] == [5, 5] and len(proxy.events) == 6
    first_two = _client(tiny_server.url).generate(CHATS[:2], GenerationParams(max_new_tokens=3, temperature=1.0, n=2, seed=4))
    assert [a[:2] for a in answers] == first_two


def test_api_logprobs_match_the_local_logits(tiny_server, tiny_backend):
    client = _client(tiny_server.url, top_logprobs=5)
    results = client.first_token_logprobs(CHATS[:3], ["NO-RESPONSE"])
    for chat, r in zip(CHATS[:3], results, strict=True):
        assert len(r.top) >= 5
        tokens = sorted(r.top, key=r.top.get, reverse=True)[:3]
        local = tiny_backend.next_token_logprobs([chat], tokens)[0]
        assert [r.top[t] for t in tokens] == pytest.approx([local[t] for t in tokens], abs=1e-4)
        if r.logprobs["NO-RESPONSE"] == -math.inf:
            assert "absent from the top-" in r.note
        else:
            assert r.note == ""


def test_transient_faults_of_every_kind_are_retried(tiny_server, reference, caplog):
    script = ["429", "429-retry-after", "500", "502", "503", "drop", "timeout", "truncated", "truncated-json", "non-json"]
    with FaultProxy(tiny_server.url, script=script, retry_after=0.3, stall_s=3.0) as proxy:
        client = _client(proxy.url, max_retries=len(script), timeout=1.0)
        assert client.generate(CHATS[:1], GREEDY) == reference[:1]
    assert proxy.faults() == [*script, None]
    gap = proxy.events[2].at - proxy.events[1].at  # after the 429 carrying Retry-After: 0.3
    assert gap >= 0.3
    assert sum("retry" in r.getMessage() for r in caplog.records) == len(script)


def test_random_faults_lose_nothing(tiny_server, reference):
    rates = {"429": 0.1, "429-retry-after": 0.05, "503": 0.1, "502": 0.05, "drop": 0.1}
    with FaultProxy(tiny_server.url, rates=rates, seed=1, retry_after=0.05) as proxy:
        client = _client(proxy.url, max_retries=12, max_concurrency=3)
        assert client.generate(CHATS * 3, GREEDY) == reference * 3
    assert sum(f is not None for f in proxy.faults()) >= 3


def test_persistent_failure_keeps_the_finished_items(tiny_server, reference):
    doomed = QUESTIONS[2]
    rule = lambda body: "503" if body["messages"][-1]["content"] == doomed else None  # noqa: E731
    seen = {}
    with FaultProxy(tiny_server.url, rule=rule) as proxy:
        client = _client(proxy.url, max_retries=2)
        with pytest.raises(BatchError, match=r"1 of 6 requests failed; first \(item 2\)") as info:
            client.generate(CHATS, GREEDY)
        each = client.generate_each(CHATS, GREEDY, on_result=lambda i, r: seen.__setitem__(i, r))
    results = info.value.results
    assert isinstance(info.value, BackendError)
    assert [r for i, r in enumerate(results) if i != 2] == [r for i, r in enumerate(reference) if i != 2]
    assert isinstance(results[2], BackendError) and "HTTP 503" in str(results[2]) and "gave up after 3 attempts" in str(results[2])
    assert sorted(seen) == list(range(6)) and seen[0] == each[0] == reference[0]
    assert proxy.faults().count("503") == 6  # 3 attempts for each of the two calls


def test_client_errors_are_not_retried(tiny_server):
    with FaultProxy(tiny_server.url, rates={"400": 1.0}) as proxy:
        with pytest.raises(BatchError, match="HTTP 400"):
            _client(proxy.url, max_retries=5).generate(CHATS[:1], GREEDY)
    assert len(proxy.events) == 1
    with pytest.raises(BatchError, match=r"HTTP 404: model 'nope' is not served.*check the base URL"):
        OpenAIBackend("nope", ClientSettings(tiny_server.url)).generate(CHATS[:1], GREEDY)


def test_a_retry_after_beyond_the_limit_fails_fast(tiny_server):
    with FaultProxy(tiny_server.url, rates={"429-retry-after": 1.0}, retry_after=600) as proxy:
        start = time.monotonic()
        with pytest.raises(BatchError, match="retry after 600s, more than max_retry_after=5s"):
            _client(proxy.url, max_retry_after=5.0).generate(CHATS[:1], GREEDY)
    assert time.monotonic() - start < 5 and len(proxy.events) == 1


def test_round_robin_over_several_servers_and_past_a_dead_one(tiny_server, reference):
    dead = f"http://127.0.0.1:{free_port()}/v1"
    with FaultProxy(tiny_server.url) as a, FaultProxy(tiny_server.url) as b:
        assert _client([a.url, b.url], max_concurrency=2).generate(CHATS, GREEDY) == reference
        assert len(a.events) == len(b.events) == 3
        assert _client([dead, a.url], max_retries=3).generate(CHATS, GREEDY) == reference


def test_pacer_spaces_request_starts():
    async def starts():
        pacer, times = _Pacer(600), []  # 600 per minute = one every 0.1 s

        async def one():
            await pacer.wait()
            times.append(time.monotonic())  # no await between the claim and this line

        await asyncio.gather(*(one() for _ in range(5)))
        return times

    times = asyncio.run(starts())
    assert min(b - a for a, b in zip(times, times[1:])) >= 0.1 - 1e-3


def test_pacer_keeps_the_spacing_when_a_waiter_wakes_late(monkeypatch):
    """A busy machine wakes a sleeper late; the next start must still come a full interval after the
    late one (a pacer that books slots ahead would let it follow at once)."""
    real_sleep = asyncio.sleep
    late = {"first": True}

    async def oversleep(delay):
        if late["first"]:
            late["first"] = False
            delay += 0.08  # the first sleeper wakes 80 ms late
        await real_sleep(delay)

    async def starts():
        pacer, times = _Pacer(600), []

        async def one():
            await pacer.wait()
            times.append(time.monotonic())

        await asyncio.gather(*(one() for _ in range(4)))
        return times

    monkeypatch.setattr("udcg.llm.openai_backend.asyncio.sleep", oversleep)
    times = asyncio.run(starts())
    assert len(times) == 4 and min(b - a for a, b in zip(times, times[1:])) >= 0.1 - 1e-3


def test_requests_per_minute_limits_the_rate_at_the_server(tiny_server):
    with FaultProxy(tiny_server.url) as proxy:
        _client(proxy.url, requests_per_minute=300, max_concurrency=6).generate(CHATS[:5], GenerationParams(max_new_tokens=1))
    arrivals = [e.at for e in proxy.events]
    assert len(arrivals) == 5 and arrivals[-1] - arrivals[0] >= 4 * 0.2 - 0.05  # 300 per minute = one every 0.2 s


def test_the_api_key_is_sent_but_never_shown(tiny_server, monkeypatch, caplog, tmp_path):
    key = "sk-udcg-test-9f8e7d6c5b4a"
    monkeypatch.setenv("UDCG_TEST_API_KEY", key)
    caplog.set_level(logging.DEBUG)
    echo = lambda body: "echo-auth" if body["messages"][-1]["content"] == QUESTIONS[0] else None  # noqa: E731
    with FaultProxy(tiny_server.url, rule=echo) as proxy:
        client = _client(proxy.url, max_retries=1)
        with pytest.raises(BatchError) as info:
            client.generate(CHATS[:2], GREEDY)
    assert {e.authorization for e in proxy.events} == {f"Bearer {key}"}
    assert "internal error while handling Authorization: Bearer ***" in str(info.value)
    written = tmp_path / "everything.txt"
    written.write_text("\n".join([str(info.value), repr(info.value.results), repr(client), str(vars(client)), caplog.text]))
    assert key not in written.read_text() and key[-8:] not in written.read_text()


def test_only_the_named_variable_is_sent_whatever_the_sdk_finds_in_the_environment(tiny_server, monkeypatch):
    """The SDK reads OPENAI_API_KEY and OPENAI_CUSTOM_HEADERS by itself; a backend told to use another
    variable sends that one's key, or no Authorization header when it is unset."""
    monkeypatch.setenv("OPENAI_API_KEY", "sk-some-other-service-0000")
    monkeypatch.setenv("OPENAI_CUSTOM_HEADERS", "Authorization: Bearer sk-ambient-header-1111")
    monkeypatch.delenv("UDCG_TEST_API_KEY", raising=False)
    with FaultProxy(tiny_server.url) as proxy:
        client = _client(proxy.url)
        client.generate(CHATS[:1], GREEDY)
        monkeypatch.setenv("UDCG_TEST_API_KEY", "sk-udcg-named-2222")  # read at request time, not at construction
        client.generate(CHATS[:1], GREEDY)
    assert [e.authorization for e in proxy.events] == [None, "Bearer sk-udcg-named-2222"]


def test_load_backend_openai_scheme(tiny_server, monkeypatch, reference):
    from udcg.llm.registry import load_backend

    backend = load_backend(f"openai:{TINY_SERVED_NAME}", base_urls=tiny_server.url)
    assert isinstance(backend, OpenAIBackend) and backend.generate(CHATS[:2], GREEDY) == reference[:2]
    monkeypatch.setenv("UDCG_OPENAI_BASE_URLS", f"{tiny_server.url}, {tiny_server.url}")
    assert load_backend(f"openai:{TINY_SERVED_NAME}").base_urls == (tiny_server.url, tiny_server.url)
    with pytest.raises(InputError, match="give the served model name"):
        load_backend("openai:")
