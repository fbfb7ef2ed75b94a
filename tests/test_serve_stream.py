"""`udcg serve` as a standard OpenAI-compatible server (issue 25, item 4): ``stream: true`` answered
with server-sent events, ``/v1/completions`` with ``logprobs`` and ``echo``, ``n`` on both, and a 400
that says why for a request the server cannot serve. The pure pieces first (the text a stream may
send, the wire checks and layouts), then real servers on 127.0.0.1 spoken to with the official
``openai`` SDK and with ``http.client``: over the tiny random Llama (fast), over a scripted
streaming backend (the stream's plumbing: delivery before the end, errors, a client that leaves),
and over SmolLM2-135M (slow)."""

from __future__ import annotations

import http.client
import json
import socket
import threading
import time

import pytest

from tests.conftest import TINY_SERVED_NAME, ScriptedBackend
from udcg.llm.base import GenerationParams
from udcg.llm.server import ChatCompletionServer
from udcg.llm.server_completions import (
    CompletionRequest,
    completion_logprobs,
    parse_completion_request,
)
from udcg.llm.server_stream import DeltaStream, releasable
from udcg.llm.server_wire import RequestError, TokenLogprob, parse_request

CHAT = [{"role": "system", "content": "Answer briefly."}, {"role": "user", "content": "Capital of France?"}]
PROMPT = "The capital of France is"

# ---------------------------------------------------------------- pure: what a stream may send


@pytest.mark.parametrize("text,stop,strip,expected", [
    ("  Paris is", (), True, "Paris is"),  # leading whitespace goes (the answer is stripped)
    ("Paris ", (), True, "Paris"),  # trailing whitespace waits: it may be stripped
    ("  Paris ", (), False, "  Paris"),  # raw text keeps its leading whitespace
    ("Paris\ufffd", (), True, "Paris"),  # half a character waits
    ("Paris. The", (". ",), True, "Paris"),  # cut at the stop string
    ("Paris.", (". ",), True, "Paris"),  # the start of a stop string waits
    ("Paris.x", (". ",), True, "Paris.x"),
    ("", ("\n",), True, ""),
])
def test_releasable(text, stop, strip, expected):
    assert releasable(text, stop, strip) == expected


def _replay(grow: list[str], final: str, n: int = 1, greedy: bool = True, stop=(), strip=True) -> dict[int, list[str]]:
    sent: dict[int, list[str]] = {}
    stream = DeltaStream(n, greedy, stop, strip, lambda c, piece: sent.setdefault(c, []).append(piece))
    for text in grow:
        stream.on_text(0, 0, text)
    assert stream.finish([[final] * n]) == [True] * n
    return sent


def test_delta_stream_pieces_add_up_to_the_final_answer():
    grow = [" ", " Par", " Paris", " Paris ", " Paris is", " Paris is.", " Paris is.\n", " Paris is.\nQ"]
    sent = _replay(grow, "Paris is.", stop=("\nQ",))
    assert sent == {0: ["Par", "is", " is", "."]} and "".join(sent[0]) == "Paris is."
    raw = _replay(grow, " Paris is.", stop=("\nQ",), strip=False)
    assert "".join(raw[0]) == " Paris is." and len(raw[0]) > 2


def test_delta_stream_greedy_serves_every_choice_and_empty_answers_get_a_piece():
    sent = _replay(["a", "a b"], "a b", n=3)
    assert sent == {c: ["a", " b"] for c in range(3)}
    assert _replay([], "", n=2) == {0: [""], 1: [""]}


def test_delta_stream_a_rewritten_decoding_waits_for_the_end():
    sent = _replay(["ab", "xy"], "ab and more")  # the second text does not extend the first
    assert "".join(sent[0]) == "ab and more"


# ---------------------------------------------------------------- pure: requests and layouts


def test_stream_fields_are_read_and_checked():
    req = parse_request({"messages": CHAT, "stream": True, "stream_options": {"include_usage": True}}, "m")
    assert (req.stream, req.include_usage) == (True, True)
    assert parse_request({"messages": CHAT, "stream": False}, "m").stream is False


@pytest.mark.parametrize("extra,param,says", [
    ({"stream": "yes"}, "stream", "true or false"),
    ({"stream_options": {"include_usage": True}}, "stream_options", "only allowed with stream"),
    ({"stream": True, "stream_options": {"continuous": True}}, "stream_options", "include_usage"),
    ({"tools": [{"type": "function", "function": {"name": "f"}}]}, "tools", "not supported"),
    ({"response_format": {"type": "json_object"}}, "response_format", "not supported"),
    ({"frequency_penalty": 0.5}, "frequency_penalty", "not supported"),
    ({"logit_bias": {"42": 5}}, "logit_bias", "not supported"),
    ({"n": 1000, "max_tokens": 100}, "n", "100,000 tokens to generate"),
    ({"n": 200}, "n", "the default when max_tokens is not given"),
])
def test_chat_requests_the_server_cannot_serve_are_refused(extra, param, says):
    with pytest.raises(RequestError) as info:
        parse_request({"messages": CHAT, **extra}, "m")
    assert (info.value.status, info.value.param) == (400, param) and says in info.value.message


def test_budget_is_the_servers_choice():
    assert parse_request({"messages": CHAT, "n": 1024, "max_tokens": 16}, "m").params.n == 1024  # the sampling estimator
    with pytest.raises(RequestError, match="more than this server's 1,000"):
        parse_request({"messages": CHAT, "n": 4, "max_tokens": 300}, "m", max_request_tokens=1000)


def test_parse_completion_request():
    req = parse_completion_request({"model": "m", "prompt": ["a", [1, 2]], "max_tokens": 3, "n": 2, "temperature": 0,
                                    "logprobs": 2, "echo": True, "seed": 1, "stop": "\n", "best_of": 2}, "m")
    assert req == CompletionRequest(("a", (1, 2)), GenerationParams(max_new_tokens=3, temperature=0.0, n=2, seed=1, stop=("\n",)),
                                    3, 2, True)
    default = parse_completion_request({"prompt": "a"}, "m")
    assert (default.max_tokens, default.logprobs, default.echo, default.stream) == (16, None, False, False)
    score = parse_completion_request({"prompt": "a", "max_tokens": 0, "echo": True, "logprobs": 0}, "m")
    assert (score.max_tokens, score.params.max_new_tokens, score.logprobs) == (0, 1, 0)


@pytest.mark.parametrize("body,param,says", [
    ({}, "prompt", "required"),
    ({"prompt": 5}, "prompt", "a string"),
    ({"prompt": []}, "prompt", "a string"),
    ({"prompt": [1, -2]}, "prompt", "token ids"),
    ({"prompt": ["a"] * 129}, "prompt", "129 prompts"),
    ({"prompt": "a", "logprobs": True}, "logprobs", "integer"),
    ({"prompt": "a", "logprobs": 21}, "logprobs", "integer"),
    ({"prompt": "a", "echo": "yes"}, "echo", "true or false"),
    ({"prompt": "a", "max_tokens": 0}, "max_tokens", "echo: true"),
    ({"prompt": "a", "best_of": 3}, "best_of", "not supported"),
    ({"prompt": "a", "suffix": "end"}, "suffix", "not supported"),
    ({"prompt": ["a"] * 8, "n": 8, "max_tokens": 1000}, "n", "x 8 prompts = 64,000 tokens"),
])
def test_completion_requests_the_server_cannot_serve_are_refused(body, param, says):
    with pytest.raises(RequestError) as info:
        parse_completion_request(body, "m")
    assert (info.value.status, info.value.param) == (400, param) and says in info.value.message


def test_completion_logprobs_layout():
    tokens = [TokenLogprob(" Paris", -0.5, ((" Paris", -0.5), (" Lyon", -1.5))), TokenLogprob(".", float("-inf"), (("!", -0.1),))]
    out = completion_logprobs(tokens, 1, 10, first="The")
    assert out == {"tokens": ["The", " Paris", "."], "token_logprobs": [None, -0.5, -9999.0],
                   "top_logprobs": [None, {" Paris": -0.5}, {"!": -0.1, ".": -9999.0}], "text_offset": [10, 13, 19]}


# ---------------------------------------------------------------- the real server: the tiny model


@pytest.fixture(scope="module")
def client(tiny_server):
    import openai

    return openai.OpenAI(base_url=tiny_server.url, api_key="unused", max_retries=0)


def _ask(client, **kw):
    return client.chat.completions.create(model=TINY_SERVED_NAME, messages=CHAT, **kw)


def _streamed(chunks) -> tuple[dict[int, str], dict[int, str], list]:
    """(content per choice, finish_reason per choice, usage chunks) of a chat stream."""
    content, finish, usage = {}, {}, []
    for chunk in chunks:
        if not chunk.choices:
            usage.append(chunk.usage)
        for choice in chunk.choices:
            content[choice.index] = content.get(choice.index, "") + (choice.delta.content or "")
            if choice.finish_reason:
                finish[choice.index] = choice.finish_reason
    return content, finish, usage


def test_sdk_streams_a_chat_completion_token_by_token(client, tiny_backend):
    chunks = list(_ask(client, temperature=0, max_tokens=12, stream=True))
    whole = _ask(client, temperature=0, max_tokens=12)
    expected = tiny_backend.generate([CHAT], GenerationParams(max_new_tokens=12))[0][0]
    pieces = [c.choices[0].delta.content for c in chunks if c.choices and c.choices[0].delta.content]
    assert whole.choices[0].message.content == expected and "".join(pieces) == expected
    assert len(pieces) >= 6, pieces  # token by token: 12 tokens, some merged where a piece ended in a space
    assert chunks[0].choices[0].delta.role == "assistant" and chunks[0].object == "chat.completion.chunk"
    assert [c.choices[0].finish_reason for c in chunks][-1] == whole.choices[0].finish_reason == "length"
    assert all(c.choices[0].finish_reason is None for c in chunks[:-1]) and len({c.id for c in chunks}) == 1


def test_streamed_sampling_n_stop_and_usage_equal_the_plain_answers(client):
    kw = dict(temperature=1.0, seed=3, n=3, max_tokens=8)
    content, finish, usage = _streamed(_ask(client, stream=True, stream_options={"include_usage": True}, **kw))
    whole = _ask(client, **kw)
    assert [content[c] for c in range(3)] == [ch.message.content for ch in whole.choices] and len(set(content.values())) > 1
    assert [finish[c] for c in range(3)] == [ch.finish_reason for ch in whole.choices]
    assert len(usage) == 1 and usage[0].model_dump() == whole.usage.model_dump()
    full = _ask(client, temperature=0, max_tokens=12).choices[0].message.content
    cut = full[len(full) // 2:][:2]
    assert _streamed(_ask(client, temperature=0, max_tokens=12, stop=[cut], stream=True))[0][0] == full[: full.index(cut)].strip()


def test_sdk_streams_with_logprobs_on_the_last_chunk(client):
    chunks = list(_ask(client, temperature=0, max_tokens=5, stream=True, logprobs=True, top_logprobs=2))
    whole = _ask(client, temperature=0, max_tokens=5, logprobs=True, top_logprobs=2)
    streamed = [t for c in chunks if c.choices and c.choices[0].logprobs for t in c.choices[0].logprobs.content]
    assert [t.model_dump() for t in streamed] == [t.model_dump() for t in whole.choices[0].logprobs.content]


def _raw_stream(server, path: str, body: dict) -> tuple[int, dict, list[bytes]]:
    host, port = server.server_address[:2]
    conn = http.client.HTTPConnection(host, port, timeout=60)
    conn.request("POST", path, body=json.dumps(body).encode(), headers={"Content-Type": "application/json"})
    response = conn.getresponse()
    status, headers, lines = response.status, dict(response.getheaders()), response.read().split(b"\n")
    conn.close()
    return status, headers, lines


def test_plain_http_client_sees_the_sse_lines(tiny_server):
    for path, body in [("/v1/chat/completions", {"messages": CHAT, "max_tokens": 4, "temperature": 0, "stream": True}),
                       ("/v1/completions", {"prompt": PROMPT, "max_tokens": 4, "temperature": 0, "stream": True})]:
        status, headers, lines = _raw_stream(tiny_server, path, body)
        assert status == 200 and headers["Content-Type"].startswith("text/event-stream"), (path, headers)
        assert lines[-3:] == [b"data: [DONE]", b"", b""]  # the last event, then the blank line that ends it
        events = lines[:-3]
        assert all(line.startswith(b"data: {") for line in events[0::2]) and set(events[1::2]) == {b""}
        chunks = [json.loads(line[len(b"data: "):]) for line in events[0::2]]
        assert chunks[-1]["choices"][0]["finish_reason"] in ("stop", "length")
        assert {c["object"] for c in chunks} == {"chat.completion.chunk" if "chat" in path else "text_completion"}


def test_completions_with_logprobs_and_echo(client, tiny_backend):
    import torch

    r = client.completions.create(model=TINY_SERVED_NAME, prompt=PROMPT, max_tokens=6, temperature=0, logprobs=3)
    prompt_ids = tiny_backend.tokenizer(PROMPT)["input_ids"]
    expected = tiny_backend.complete([prompt_ids], GenerationParams(max_new_tokens=6))[0][0]
    choice = r.choices[0]
    assert r.object == "text_completion" and choice.text == expected and expected.strip()
    lp = choice.logprobs
    assert "".join(lp.tokens) == expected and lp.text_offset[0] == len(PROMPT)
    for token, logprob, top in zip(lp.tokens, lp.token_logprobs, lp.top_logprobs, strict=True):
        assert top[token] == logprob and 3 <= len(top) <= 4  # the top 3, and the token itself if not among them
    assert r.usage.prompt_tokens == len(prompt_ids)

    echo = client.completions.create(model=TINY_SERVED_NAME, prompt=PROMPT, max_tokens=6, temperature=0, logprobs=1, echo=True)
    lp = echo.choices[0].logprobs
    assert echo.choices[0].text == PROMPT + expected
    assert lp.token_logprobs[0] is None and lp.top_logprobs[0] is None and lp.text_offset[0] == 0
    ids = prompt_ids + tiny_backend.tokenizer(expected, add_special_tokens=False)["input_ids"]
    with torch.inference_mode():  # a naive reference: the whole sequence through the model, log-softmax everywhere
        naive = torch.log_softmax(tiny_backend.model(torch.tensor([ids])).logits[0].float(), dim=-1)
    assert lp.token_logprobs[1:] == pytest.approx([float(naive[p - 1, ids[p]]) for p in range(1, len(ids))], abs=1e-4)
    assert len(lp.tokens) == len(ids)

    scored = client.completions.create(model=TINY_SERVED_NAME, prompt=PROMPT, max_tokens=0, echo=True, logprobs=0)
    assert scored.choices[0].text == PROMPT
    assert scored.choices[0].logprobs.token_logprobs[1:] == pytest.approx(lp.token_logprobs[1: len(prompt_ids)], abs=1e-4)
    assert scored.usage.completion_tokens == 0 and scored.choices[0].finish_reason == "length"


def test_completions_n_over_several_prompts_streamed_or_not(client, tiny_backend):
    kw = dict(model=TINY_SERVED_NAME, prompt=[PROMPT, [1, 2, 3]], max_tokens=5, temperature=1.0, n=2, seed=7)
    whole = client.completions.create(**kw)
    assert [c.index for c in whole.choices] == [0, 1, 2, 3]
    ids = [tiny_backend.tokenizer(PROMPT)["input_ids"], [1, 2, 3]]
    local = tiny_backend.complete(ids, GenerationParams(max_new_tokens=5, temperature=1.0, n=2, seed=7))
    assert [c.text for c in whole.choices] == [t for texts in local for t in texts]
    texts: dict[int, str] = {}
    for chunk in client.completions.create(stream=True, **kw):
        for c in chunk.choices:
            texts[c.index] = texts.get(c.index, "") + c.text
    assert [texts[i] for i in range(4)] == [c.text for c in whole.choices]
    echoed = client.completions.create(**{**kw, "echo": True, "stream": True})
    first = {}
    for chunk in echoed:
        for c in chunk.choices:
            first.setdefault(c.index, c.text)
    assert first[0] == first[1] == PROMPT


def _status(server, path: str, body: dict) -> tuple[int, dict]:
    host, port = server.server_address[:2]
    conn = http.client.HTTPConnection(host, port, timeout=60)
    conn.request("POST", path, body=json.dumps(body).encode(), headers={"Content-Type": "application/json"})
    response = conn.getresponse()
    out = response.status, json.loads(response.read())
    conn.close()
    return out


def test_requests_the_server_cannot_serve_get_a_400_that_says_why(tiny_server, client):
    import openai

    cases = [
        ("/v1/chat/completions", {"messages": CHAT, "n": 512, "max_tokens": 512}, "tokens to generate"),
        ("/v1/chat/completions", {"messages": CHAT, "tools": [{"type": "function", "function": {"name": "f"}}]}, "tools"),
        ("/v1/chat/completions", {"messages": CHAT, "stream_options": {"include_usage": True}}, "stream"),
        ("/v1/completions", {"prompt": PROMPT, "max_tokens": 0}, "echo"),
        ("/v1/completions", {"prompt": [10**9]}, "vocabulary"),
        ("/v1/completions", {"prompt": PROMPT, "logprobs": 50}, "logprobs"),
        ("/v1/completions", {"prompt": "x " * 1500, "max_tokens": 1, "logprobs": 1, "n": 25, "temperature": 1},
         "tokens of model work"),  # 1,500 prompt tokens read again for each of 25 answers scored
    ]
    for path, body, says in cases:
        status, reply = _status(tiny_server, path, body)
        assert status == 400 and says in reply["error"]["message"], (body, reply)
    with pytest.raises(openai.BadRequestError, match="tokens to generate"):
        list(_ask(client, n=100, max_tokens=4000, stream=True))  # refused before the stream starts


def test_a_chat_too_long_for_the_model_is_a_plain_400_even_when_streamed(client, tiny_backend):
    import openai

    long_chat = [{"role": "user", "content": "word " * (tiny_backend.max_positions + 10)}]
    with pytest.raises(openai.BadRequestError, match="positions"):
        list(client.chat.completions.create(model=TINY_SERVED_NAME, messages=long_chat, max_tokens=1, stream=True))


# ---------------------------------------------------------------- the stream's plumbing: a scripted backend


@pytest.fixture
def scripted():
    servers = []

    def start(**kw) -> ChatCompletionServer:
        server = ChatCompletionServer(ScriptedBackend(**kw), port=0, timeout=5)
        server.start_in_thread()
        servers.append(server)
        return server

    yield start
    for server in servers:
        server.shutdown()
        server.server_close()


def test_pieces_reach_the_client_before_the_answer_is_finished(scripted):
    """The backend waits after its first word until the client has read it: a server that
    buffered the stream would never let it go on."""
    import openai

    seen = threading.Event()
    waited = []
    server = scripted(answer="one two three", streams=True, between=lambda: waited.append(seen.wait(10)))
    client = openai.OpenAI(base_url=server.url, api_key="unused", max_retries=0)
    pieces = []
    for chunk in client.chat.completions.create(model="scripted", messages=CHAT, stream=True):
        if chunk.choices and chunk.choices[0].delta.content:
            pieces.append(chunk.choices[0].delta.content)
            seen.set()
    assert pieces == ["one", " two", " three"] and waited == [True, True]


def test_a_backend_without_streaming_sends_each_answer_whole(scripted):
    import openai

    server = scripted(answer=lambda chat, params: [f"answer {j}" for j in range(params.n)])
    client = openai.OpenAI(base_url=server.url, api_key="unused", max_retries=0)
    content, finish, _ = _streamed(client.chat.completions.create(model="scripted", messages=CHAT, n=2, stream=True))
    assert content == {0: "answer 0", 1: "answer 1"} and finish == {0: "stop", 1: "stop"}
    status, reply = _status(server, "/v1/completions", {"prompt": "x"})
    assert status == 400 and "cannot continue raw text" in reply["error"]["message"]


def test_a_failure_mid_stream_is_an_error_event_and_the_server_lives_on(scripted):
    import openai

    def fail():
        raise RuntimeError("device lost")

    server = scripted(answer="one two", streams=True, between=fail)
    client = openai.OpenAI(base_url=server.url, api_key="unused", max_retries=0)
    got = []
    with pytest.raises(openai.APIError, match="device lost"):
        for chunk in client.chat.completions.create(model="scripted", messages=CHAT, stream=True):
            got += [c.delta.content for c in chunk.choices if c.delta.content]
    assert got == ["one"]
    status, _, lines = _raw_stream(server, "/v1/chat/completions", {"messages": CHAT, "stream": True})
    assert status == 200 and b"device lost" in lines[-5] and lines[-3] == b"data: [DONE]"
    status, reply = _status(server, "/v1/chat/completions", {"messages": CHAT, "max_tokens": 1})
    assert status == 500 and "device lost" in reply["error"]["message"]  # not streamed: watched per token too (#36)


def test_a_client_that_leaves_stops_the_generation(scripted):
    """Of 2,000 words told 5 ms apart, the client reads the first and hangs up: the next writes
    fail and end the backend call within a few words; the model lock is free again."""
    told = []
    server = scripted(answer=" ".join(["w"] * 2000), streams=True, between=lambda: (told.append(1), time.sleep(0.005)))
    sock = socket.create_connection(server.server_address[:2], timeout=10)
    body = json.dumps({"messages": CHAT, "stream": True}).encode()
    sock.sendall(b"POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
                 + f"Content-Length: {len(body)}\r\n\r\n".encode() + body)
    received = b""
    while b"data: " not in received:  # the headers and the first event may come in separate reads
        chunk = sock.recv(65536)
        assert chunk, received
        received += chunk
    sock.close()
    deadline = time.monotonic() + 10
    while not server.model_lock.acquire(blocking=False):
        assert time.monotonic() < deadline, "the generation went on after the client left"
        time.sleep(0.01)
    server.model_lock.release()
    assert len(told) < 200, len(told)


# ---------------------------------------------------------------- a real model: SmolLM2-135M


@pytest.mark.slow
def test_smollm2_streams_and_scores(smollm2_server, smollm2_backend):
    import openai

    client = openai.OpenAI(base_url=smollm2_server.url, api_key="unused", max_retries=0)
    name = smollm2_backend.name
    kw = dict(model=name, messages=CHAT, temperature=0, max_tokens=16)
    pieces = [c.choices[0].delta.content for c in client.chat.completions.create(stream=True, **kw)
              if c.choices and c.choices[0].delta.content]
    assert len(pieces) >= 3 and "".join(pieces) == client.chat.completions.create(**kw).choices[0].message.content
    assert "Paris" in "".join(pieces)
    r = client.completions.create(model=name, prompt=PROMPT, max_tokens=1, temperature=0, logprobs=5, echo=True)
    lp = r.choices[0].logprobs
    assert r.choices[0].text == PROMPT + " Paris" and lp.tokens[-1] == " Paris"  # greedy: the top token, listed first
    assert max(lp.top_logprobs[-1].values()) == lp.token_logprobs[-1] and len(lp.tokens) == r.usage.total_tokens
