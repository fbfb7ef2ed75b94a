"""Round four (issue 36, items 15 and 16): real ``udcg serve`` processes on 127.0.0.1 with the
smallest offline model (smollm2-135m) and clients that leave. A non-streamed request abandoned by
its client stopped using the model only when done (the next client waited 75.7 s); n = 1000 x
max_tokens = 32, inside the token budget, ran past 240 s; a 2 MB prompt was tokenised under the
model lock (9.6 s) before being refused; a client that left put a BrokenPipeError traceback in the
log. The server here has a time budget of 30 s (``--max-request-seconds``): on this shared 2-core
machine a 4-token answer took 6 s under load, so the margins are wide."""

from __future__ import annotations

import http.client
import json
import os
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.conftest import free_port

REPO = Path(__file__).resolve().parents[1]
BUDGET = 30.0
CHAT = [{"role": "user", "content": "Write a long story about a cat."}]


@pytest.fixture(scope="module")
def served(tmp_path_factory):
    log = tmp_path_factory.mktemp("serve") / "serve.log"
    port = free_port()
    env = {**os.environ, "PYTHONPATH": str(REPO), "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1"}
    with open(log, "w") as err:
        proc = subprocess.Popen([sys.executable, "-m", "udcg", "serve", "--model", "smollm2-135m", "--port", str(port),
                                 "--max-request-seconds", str(BUDGET)], stdout=subprocess.DEVNULL, stderr=err, env=env)
    try:
        deadline = time.monotonic() + 900  # loading the model on a machine at load 20-30 took over 180 s (issue 49)
        while True:
            assert proc.poll() is None, log.read_text()
            try:
                if _request(port, "GET", "/health", None, timeout=2)[0] == 200:
                    break
            except OSError:
                pass
            assert time.monotonic() < deadline, "udcg serve did not start"
            time.sleep(0.5)
        yield port, log
    finally:
        proc.terminate()
        proc.wait(timeout=30)


def _request(port: int, method: str, path: str, body: dict | None, timeout: float = 120) -> tuple[int, dict]:
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=timeout)
    conn.request(method, path, body=None if body is None else json.dumps(body),
                 headers={"Content-Type": "application/json"})
    response = conn.getresponse()
    out = response.status, json.loads(response.read())
    conn.close()
    return out


def _abandon(port: int, body: dict, after: float) -> None:
    """Send a request and hang up ``after`` seconds later without reading the answer."""
    data = json.dumps(body).encode()
    sock = socket.create_connection(("127.0.0.1", port), timeout=10)
    sock.sendall(b"POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
                 + f"Content-Length: {len(data)}\r\n\r\n".encode() + data)
    time.sleep(after)
    sock.close()


LONG = {"messages": CHAT, "n": 16, "max_tokens": 1024, "temperature": 1.0}  # far more than the budget on a CPU
SHORT = {"messages": [{"role": "user", "content": "Say hi."}], "max_tokens": 4, "temperature": 0}


@pytest.mark.slow  # a real model in a real server
def test_an_abandoned_non_streamed_request_stops_using_the_model(served):
    port, _ = served
    assert _request(port, "POST", "/v1/chat/completions", SHORT)[0] == 200  # warm
    _abandon(port, LONG, after=1.0)
    t0 = time.monotonic()
    status, body = _request(port, "POST", "/v1/chat/completions", SHORT)
    waited = time.monotonic() - t0
    assert status == 200 and body["choices"][0]["message"]["content"] is not None
    assert waited < BUDGET - 10, f"the next client waited {waited:.1f} s for an abandoned request"


@pytest.mark.slow  # a real model in a real server
def test_a_request_past_the_time_budget_is_stopped_with_a_clear_error(served):
    port, _ = served
    t0 = time.monotonic()
    status, body = _request(port, "POST", "/v1/chat/completions",
                            {"messages": CHAT, "n": 1000, "max_tokens": 32, "temperature": 1.0})
    took = time.monotonic() - t0
    message = body["error"]["message"]
    assert status == 400 and f"time budget of {BUDGET:g} s" in message and "\n" not in message, body
    assert took < BUDGET + 15, took
    assert _request(port, "POST", "/v1/chat/completions", SHORT)[0] == 200  # the model is free again


@pytest.mark.slow  # a real model in a real server
def test_a_2mb_prompt_is_refused_before_the_model_lock(served):
    """While another client's long request holds the model, the 2 MB prompt's 400 comes at once."""
    port, _ = served
    import threading

    holder = threading.Thread(target=_abandon, args=(port, LONG, 4.0))
    holder.start()
    time.sleep(1.0)
    t0 = time.monotonic()
    status, body = _request(port, "POST", "/v1/chat/completions",
                            {"messages": [{"role": "user", "content": "x " * 1_000_000}], "max_tokens": 4})
    took = time.monotonic() - t0
    holder.join()
    assert status == 400 and "2,000,000 characters" in body["error"]["message"], body
    assert took < 3.0, took


@pytest.mark.slow  # a real model in a real server
def test_clients_that_leave_leave_no_traceback_in_the_log(served):
    """Clients that hang up at once, mid-generation and mid-stream: one info line each, no traceback."""
    port, log = served
    for after in (0.0, 0.05, 0.5):
        _abandon(port, SHORT, after)
        _abandon(port, {**SHORT, "max_tokens": 64, "stream": True}, after)
    _abandon(port, LONG, 0.5)
    assert _request(port, "POST", "/v1/chat/completions", SHORT)[0] == 200
    text = log.read_text()
    assert "Traceback" not in text and "BrokenPipeError:" not in text, text[-3000:]
    assert "left before its answer was sent" in text


# ---------------------------------------------------------------- 50 clients at once (a scripted backend)


def test_fifty_clients_abandoning_and_streaming_at_once(caplog):
    """50 clients at once on one server: 20 non-streamed requests abandoned after 50 ms, 15 streams
    abandoned after their first event, 15 that read their answer. Each long answer is 200 words told
    5 ms apart (1 s of model time). Every reader gets its exact answer; each abandoned request stops
    within CHECK_EVERY of model time or at its next write; no traceback is logged; the model is free
    at the end."""
    import logging
    import threading

    from tests.conftest import ScriptedBackend
    from udcg.llm.server import ChatCompletionServer

    told = []
    long_answer = " ".join(["w"] * 200)
    backend = ScriptedBackend(answer={"long": long_answer, "short": "a short answer"}, streams=True,
                              between=lambda: (told.append(1), time.sleep(0.005)))
    server = ChatCompletionServer(backend, port=0, timeout=10)
    server.start_in_thread()
    port = server.server_address[1]
    results: dict[int, object] = {}

    def client(i: int) -> None:
        long = {"messages": [{"role": "user", "content": "long"}]}
        if i < 20:
            _abandon(port, long, 0.05)
        elif i < 35:
            _abandon(port, {**long, "stream": True}, 0.05)
        elif i < 43:
            results[i] = _request(port, "POST", "/v1/chat/completions", {"messages": [{"role": "user", "content": "short"}]})
        else:
            conn = http.client.HTTPConnection("127.0.0.1", port, timeout=120)
            conn.request("POST", "/v1/chat/completions", json.dumps({"messages": [{"role": "user", "content": "short"}],
                                                                      "stream": True}))
            response = conn.getresponse()
            text = "".join(json.loads(line[6:])["choices"][0]["delta"].get("content") or ""
                           for line in response.read().decode().splitlines()
                           if line.startswith("data: {") and json.loads(line[6:])["choices"])
            results[i] = (response.status, text)
            conn.close()

    try:
        with caplog.at_level(logging.INFO, logger="udcg.llm.server"):
            threads = [threading.Thread(target=client, args=(i,)) for i in range(50)]
            t0 = time.monotonic()
            for t in threads:
                t.start()
            for t in threads:
                t.join(timeout=300)
            took = time.monotonic() - t0
            deadline = time.monotonic() + 30
            while not server.model_lock.acquire(blocking=False):
                assert time.monotonic() < deadline, "the model is still busy with abandoned requests"
                time.sleep(0.05)
            server.model_lock.release()
    finally:
        server.shutdown()
        server.server_close()
    assert len(results) == 15
    for i, got in results.items():
        if i < 43:
            assert got[0] == 200 and got[1]["choices"][0]["message"]["content"] == "a short answer", got
        else:
            assert got == (200, "a short answer"), got
    assert len(told) < 35 * 200 / 2, f"{len(told)} words told for 35 abandoned requests of 200 words"
    assert not [r for r in caplog.records if r.exc_info], [r.getMessage() for r in caplog.records if r.exc_info]
    print(f"50 clients in {took:.1f} s; {len(told)} words told for 35 abandoned requests of 200 words each")
