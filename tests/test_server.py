"""The OpenAI-compatible server: request checking and response layout (pure), then the real server
over real models, spoken to with the official ``openai`` client and raw HTTP, and ``udcg serve``."""

from __future__ import annotations

import http.client
import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.conftest import TINY_SERVED_NAME, free_port
from udcg.llm.base import BaseBackend, Capabilities, GenerationParams
from udcg.llm.server import ChatCompletionServer
from udcg.llm.server_wire import ChatRequest, RequestError, TokenLogprob, completion_body, parse_request

CHAT = [{"role": "system", "content": "Answer briefly."}, {"role": "user", "content": "Capital of France?"}]

# ---------------------------------------------------------------- pure


def test_parse_request_reads_every_parameter():
    body = {"model": "m", "messages": CHAT, "temperature": 0.7, "top_p": 0.9, "max_tokens": 12, "n": 3, "seed": 5,
            "stop": "\n", "logprobs": True, "top_logprobs": 4, "frequency_penalty": 0, "user": "ignored"}
    req = parse_request(body, "m")
    assert req == ChatRequest(tuple(CHAT), GenerationParams(max_new_tokens=12, temperature=0.7, top_p=0.9, n=3, seed=5, stop=("\n",)), True, 4)
    parts = [{"role": "user", "content": [{"type": "text", "text": "a"}, {"type": "text", "text": "b"}]}]
    assert parse_request({"messages": parts}, "m").chat == ({"role": "user", "content": "ab"},)
    assert parse_request({"messages": CHAT, "max_completion_tokens": 9}, "m").params.max_new_tokens == 9


def test_parse_request_defaults_follow_openai():
    req = parse_request({"messages": CHAT}, "m")
    assert (req.params.temperature, req.params.top_p, req.params.n, req.logprobs, req.top_logprobs) == (1.0, 1.0, 1, False, 0)
    seeds = {parse_request({"messages": CHAT}, "m").params.seed for _ in range(5)}
    assert len(seeds) > 1  # no seed: fresh draws each time


@pytest.mark.parametrize(
    "body,status,param",
    [
        ([], 400, None),
        ({"model": "other", "messages": CHAT}, 404, "model"),
        ({"messages": []}, 400, "messages"),
        ({"messages": [{"role": "robot", "content": "x"}]}, 400, "messages"),
        ({"messages": [{"role": "user", "content": 3}]}, 400, "messages"),
        ({"messages": [{"role": "user", "content": [{"type": "image_url"}]}]}, 400, "messages"),
        ({"messages": CHAT, "temperature": 2.5}, 400, "temperature"),
        ({"messages": CHAT, "temperature": "hot"}, 400, "temperature"),
        ({"messages": CHAT, "top_p": 0}, 400, "top_p"),
        ({"messages": CHAT, "n": 0}, 400, "n"),
        ({"messages": CHAT, "max_tokens": 0}, 400, "max_tokens"),
        ({"messages": CHAT, "max_tokens": 10**6}, 400, "max_tokens"),
        ({"messages": CHAT, "seed": 1.5}, 400, "seed"),
        ({"messages": CHAT, "stop": ["a", "b", "c", "d", "e"]}, 400, "stop"),
        ({"messages": CHAT, "stop": [""]}, 400, "stop"),
        ({"messages": CHAT, "logprobs": "yes"}, 400, "logprobs"),
        ({"messages": CHAT, "top_logprobs": 3}, 400, "top_logprobs"),
        ({"messages": CHAT, "logprobs": True, "top_logprobs": 21}, 400, "top_logprobs"),
    ],
)
def test_parse_request_refuses_bad_bodies(body, status, param):
    with pytest.raises(RequestError) as info:
        parse_request(body, "m")
    assert (info.value.status, info.value.param) == (status, param)


def test_completion_body_layout():
    req = parse_request({"messages": CHAT, "n": 2, "max_tokens": 2, "logprobs": True, "top_logprobs": 1}, "m")
    tokens = [[TokenLogprob("Pa", -0.1, (("Pa", -0.1), ("Lo", -2.5))), TokenLogprob("ris", -0.2, (("ris", -0.2),))], []]
    body = completion_body(req, "m", ["Paris", ""], tokens, (10, [2, 0]), created=7)
    assert body["object"] == "chat.completion" and body["created"] == 7 and body["model"] == "m"
    assert body["usage"] == {"prompt_tokens": 10, "completion_tokens": 2, "total_tokens": 12}
    first, second = body["choices"]
    assert (first["finish_reason"], second["finish_reason"]) == ("length", "stop")
    assert first["logprobs"]["content"][0] == {"token": "Pa", "logprob": -0.1, "bytes": [80, 97],
                                               "top_logprobs": [{"token": "Pa", "logprob": -0.1, "bytes": [80, 97]}]}
    assert second["message"] == {"role": "assistant", "content": ""} and second["logprobs"] == {"content": []}


# ---------------------------------------------------------------- the real server


def _raw(server, method, path, body=None, headers=None):
    host, port = server.server_address[:2]
    conn = http.client.HTTPConnection(host, port, timeout=60)
    data = body if isinstance(body, bytes) or body is None else json.dumps(body).encode()
    conn.request(method, path, body=data, headers={"Content-Type": "application/json", **(headers or {})})
    response = conn.getresponse()
    status, payload = response.status, json.loads(response.read())
    conn.close()
    return status, payload


def test_models_health_and_unknown_paths(tiny_server):
    assert _raw(tiny_server, "GET", "/v1/models") == (200, {"object": "list", "data": [{"id": TINY_SERVED_NAME, "object": "model", "created": 0, "owned_by": "udcg"}]})
    assert _raw(tiny_server, "GET", "/health")[0] == 200
    assert _raw(tiny_server, "GET", "/v2/x")[0] == 404
    assert _raw(tiny_server, "POST", "/v1/embeddings", {"input": "x"})[0] == 404


def test_http_errors_are_openai_shaped(tiny_server):
    status, body = _raw(tiny_server, "POST", "/v1/chat/completions", b"{not json")
    assert status == 400 and body["error"]["type"] == "invalid_request_error"
    status, body = _raw(tiny_server, "POST", "/v1/chat/completions", {"messages": CHAT, "n": 0})
    assert status == 400 and body["error"]["param"] == "n"


def test_official_openai_client_round_trip(tiny_server, tiny_backend):
    import openai

    client = openai.OpenAI(base_url=tiny_server.url, api_key="unused", max_retries=0)
    assert [m.id for m in client.models.list()] == [TINY_SERVED_NAME]
    r = client.chat.completions.create(model=TINY_SERVED_NAME, messages=CHAT, temperature=0, max_tokens=5, n=2)
    expected = tiny_backend.generate([CHAT], GenerationParams(max_new_tokens=5, temperature=0.0, n=2))[0]
    assert [c.message.content for c in r.choices] == expected
    assert r.usage.prompt_tokens == len(tiny_backend.encode(CHAT))
    with pytest.raises(openai.BadRequestError):
        client.chat.completions.create(model=TINY_SERVED_NAME, messages=CHAT, temperature=9)
    with pytest.raises(openai.NotFoundError):
        client.chat.completions.create(model="gpt-4o", messages=CHAT)


def test_seeded_sampling_and_stop(tiny_server):
    import openai

    client = openai.OpenAI(base_url=tiny_server.url, api_key="unused", max_retries=0)
    ask = lambda **kw: [c.message.content for c in client.chat.completions.create(model=TINY_SERVED_NAME, messages=CHAT, max_tokens=6, **kw).choices]  # noqa: E731
    a = ask(temperature=1.0, seed=1, n=4)
    assert a == ask(temperature=1.0, seed=1, n=4) and a != ask(temperature=1.0, seed=2, n=4) and len(set(a)) > 1
    full = ask(temperature=0)[0]
    cut = full[len(full) // 2 :][:2]
    assert cut and ask(temperature=0, stop=[cut])[0] == full[: full.index(cut)].strip()


@pytest.mark.slow
def test_logprobs_are_the_models_own(smollm2_server, smollm2_backend):
    import openai

    client = openai.OpenAI(base_url=smollm2_server.url, api_key="unused", max_retries=0)
    r = client.chat.completions.create(model=smollm2_backend.name, messages=CHAT, temperature=0, max_tokens=6, logprobs=True, top_logprobs=5)
    content = r.choices[0].logprobs.content
    assert "".join(t.token for t in content) == r.choices[0].message.content
    for t in content:  # greedy: every token is the top one, and the list is sorted
        assert [x.logprob for x in t.top_logprobs] == sorted((x.logprob for x in t.top_logprobs), reverse=True)
        assert t.token == t.top_logprobs[0].token and t.logprob == pytest.approx(t.top_logprobs[0].logprob)
    first = {x.token: x.logprob for x in content[0].top_logprobs}
    local = smollm2_backend.next_token_logprobs([CHAT], list(first))[0]
    assert [first[t] for t in first] == pytest.approx([local[t] for t in first], abs=1e-4)
    cont = smollm2_backend.continuation_logprobs([(CHAT, r.choices[0].message.content)])[0]
    assert [t.logprob for t in content] == pytest.approx(cont, abs=1e-4)


def test_a_failing_backend_gives_500_and_the_server_lives_on():
    class Broken(BaseBackend):  # a backend that declares it can be served, and fails
        name, capabilities = "broken", Capabilities(serve=True)

        def generate(self, chats, params=GenerationParams()):
            raise RuntimeError("out of memory")

        next_token_logprobs = continuation_logprobs = generate

    server = ChatCompletionServer(Broken(), port=0)
    server.start_in_thread()
    try:
        status, body = _raw(server, "POST", "/v1/chat/completions", {"messages": CHAT})
        assert status == 500 and "out of memory" in body["error"]["message"]
        status, body = _raw(server, "POST", "/v1/chat/completions", {"messages": CHAT, "logprobs": True})
        assert status == 400 and "cannot list token log-probabilities" in body["error"]["message"]
        assert _raw(server, "GET", "/health")[0] == 200
    finally:
        server.shutdown()
        server.server_close()


def test_api_key_is_required_when_set(tiny_backend):
    server = ChatCompletionServer(tiny_backend, port=0, api_key="s3cret")
    server.start_in_thread()
    try:
        assert _raw(server, "GET", "/v1/models")[0] == 401
        assert _raw(server, "POST", "/v1/chat/completions", {"messages": CHAT}, {"Authorization": "Bearer wrong"})[0] == 401
        ok = _raw(server, "POST", "/v1/chat/completions", {"messages": CHAT, "max_tokens": 1}, {"Authorization": "Bearer s3cret"})
        assert ok[0] == 200 and _raw(server, "GET", "/health")[0] == 200
    finally:
        server.shutdown()
        server.server_close()


@pytest.mark.slow
def test_udcg_serve_command_starts_a_working_server(tmp_path):
    port = free_port()
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "PYTHONPATH": str(Path(__file__).resolve().parents[1])}
    log = open(tmp_path / "serve.log", "w")
    proc = subprocess.Popen([sys.executable, "-m", "udcg", "serve", "--model", "smollm2-135m", "--port", str(port)],
                            stdout=log, stderr=subprocess.STDOUT, env=env)
    try:
        conn_ok = False
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline and proc.poll() is None:
            try:
                conn = http.client.HTTPConnection("127.0.0.1", port, timeout=5)
                conn.request("GET", "/health")
                conn_ok = conn.getresponse().status == 200
                conn.close()
                break
            except OSError:
                time.sleep(0.5)
        assert conn_ok, (tmp_path / "serve.log").read_text()
        from udcg.llm.openai_backend import OpenAIBackend
        from udcg.llm.openai_settings import ClientSettings

        answers = OpenAIBackend("smollm2-135m", ClientSettings(f"http://127.0.0.1:{port}/v1")).generate([CHAT], GenerationParams(max_new_tokens=4))
        assert len(answers) == 1 and answers[0][0].strip()
    finally:
        proc.terminate()
        proc.wait(timeout=30)
        log.close()
