"""`udcg serve` under hostile requests (issue 17, defects 8 and "udcg serve"): every malformed
request is a 400 (never a 500), stalled request bodies and idle connections are dropped after the
server's timeout instead of holding a thread each, and a busy port fails before the model loads.
Real servers on 127.0.0.1 over a scripted backend (no model), with bounded loops."""

from __future__ import annotations

import http.client
import json
import socket
import threading
import time

import pytest

from tests.conftest import ScriptedBackend, free_port
from udcg.cli import main
from udcg.llm.server import ChatCompletionServer

CHAT = [{"role": "user", "content": "Say hi."}]


@pytest.fixture
def server():
    srv = ChatCompletionServer(ScriptedBackend(answer="hi"), port=0, timeout=0.5)
    srv.start_in_thread()
    yield srv
    srv.shutdown()
    srv.server_close()


def post(srv, body: bytes, timeout: float = 10) -> tuple[int, dict]:
    conn = http.client.HTTPConnection(*srv.server_address[:2], timeout=timeout)
    conn.request("POST", "/v1/chat/completions", body=body, headers={"Content-Type": "application/json"})
    response = conn.getresponse()
    out = response.status, json.loads(response.read())
    conn.close()
    return out


MALFORMED = {
    "seed-5000-digits": b'{"messages": [{"role": "user", "content": "x"}], "seed": ' + b"9" * 5000 + b"}",
    "n-5000-digits": b'{"messages": [{"role": "user", "content": "x"}], "n": -' + b"1" * 5000 + b"}",
    "nested-100000-deep": b'{"messages": ' + b"[" * 100_000 + b"]" * 100_000 + b"}",
    "nested-content": b'{"messages": [{"role": "user", "content": ' + b"[" * 50_000 + b"]" * 50_000 + b"}]}",
    "nan-temperature": b'{"messages": [{"role": "user", "content": "x"}], "temperature": NaN}',
    "not-utf8": b'{"messages": "\xff\xfe"}',
    "top-level-list": b"[1, 2, 3]",
    "message-not-object": b'{"messages": [42]}',
    "stop-not-strings": b'{"messages": [{"role": "user", "content": "x"}], "stop": [1]}',
    "max-tokens-string": b'{"messages": [{"role": "user", "content": "x"}], "max_tokens": "many"}',
}


@pytest.mark.parametrize("name", list(MALFORMED))
def test_every_malformed_request_is_a_400(server, name):
    status, body = post(server, MALFORMED[name])
    assert status == 400, (name, body)
    assert body["error"]["type"] == "invalid_request_error" and len(body["error"]["message"]) < 500
    assert post(server, json.dumps({"messages": CHAT}).encode())[0] == 200  # the server lives on


def _stall(srv, announced: int = 100, sent: int = 10) -> socket.socket:
    sock = socket.create_connection(srv.server_address[:2], timeout=10)
    sock.sendall(b"POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
                 + f"Content-Length: {announced}\r\n\r\n".encode() + b"{" * sent)
    return sock


def _closed_within(sock: socket.socket, seconds: float) -> bytes | None:
    """What the server sends before closing, or None if it is still open after ``seconds``."""
    sock.settimeout(seconds)
    data = b""
    try:
        while chunk := sock.recv(65536):
            data += chunk
    except TimeoutError:
        return None
    except OSError:
        pass
    return data


def test_stalled_bodies_are_dropped_and_do_not_hold_threads(server):
    """50 clients announce 100 bytes and send 10: each gets a 408 and its thread ends within the
    timeout (0.5 s here), while a well-formed request is served meanwhile."""
    before = threading.active_count()
    socks = [_stall(server) for _ in range(50)]
    started = time.monotonic()
    assert post(server, json.dumps({"messages": CHAT}).encode())[0] == 200
    replies = [_closed_within(s, 5) for s in socks]
    for s in socks:
        s.close()
    assert all(r is not None for r in replies), "a stalled connection was still open after 5 s"
    assert all(b" 408 " in r.split(b"\r\n")[0] for r in replies), replies[0]
    assert time.monotonic() - started < 10
    deadline = time.monotonic() + 5
    while threading.active_count() > before and time.monotonic() < deadline:
        time.sleep(0.05)
    assert threading.active_count() <= before


def test_a_dripping_body_is_cut_at_the_deadline(server):
    """One byte every 0.1 s never trips a per-read timeout; the whole-body deadline still ends it."""
    sock = _stall(server, announced=1000, sent=1)
    started, reply = time.monotonic(), None
    sock.settimeout(0.1)
    while time.monotonic() - started < 5:
        try:
            sock.sendall(b" ")
            reply = sock.recv(65536)
            if reply or reply == b"":
                break
        except TimeoutError:
            continue
        except OSError:
            reply = b""
            break
    sock.close()
    assert reply is not None and time.monotonic() - started < 3
    assert reply == b"" or b" 408 " in reply.split(b"\r\n")[0]


def test_idle_connections_are_closed(server):
    sock = socket.create_connection(server.server_address[:2], timeout=10)
    assert _closed_within(sock, 5) == b""  # nothing sent: closed after the 0.5 s timeout, no reply
    sock.close()


def test_busy_port_fails_before_the_model_loads(monkeypatch, capsys):
    from udcg.llm import registry

    loaded = []
    monkeypatch.setattr(registry, "load_backend", lambda *a, **kw: loaded.append(a) or ScriptedBackend(answer="hi"))
    port = free_port()
    with socket.socket() as busy:
        busy.bind(("127.0.0.1", port))
        busy.listen()
        rc = main(["serve", "--model", "smollm2-135m", "--port", str(port)])
    err = capsys.readouterr().err
    assert rc == 2 and loaded == [], err
    lines = err.strip().splitlines()
    assert len(lines) == 1 and f"cannot listen on 127.0.0.1:{port}" in lines[0] and "--port" in lines[0]
