"""The two HTTP clients the API backend can ride on (``udcg.llm.openai_transport.client_kind``):
aiohttp (the default where it is installed) and the SDK's httpx client. Both give the same answers
from a real local server, and both report a server that misbehaves on 127.0.0.1 (drops the
connection, garbles its status line) as a failed connection, never as a timeout, and retry it.
The body limits, gzip and trickling servers of the other fault tests run on the default client."""

from __future__ import annotations

import socket
import sys
import threading
from pathlib import Path

import pytest

from udcg.cli import main
from udcg.errors import InputError
from udcg.llm.openai_backend import OpenAIBackend
from udcg.llm.openai_settings import ClientSettings
from udcg.llm.openai_transport import CLIENT_ENV, client_kind, env_proxy

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "scripts"))
from instant_openai_server import Process as InstantServer  # noqa: E402

CLIENTS = ["aiohttp", "httpx"]
CHATS = [[{"role": "user", "content": f"question {i}: who wrote it?"}] for i in range(12)]


@pytest.fixture(scope="module")
def instant():
    with InstantServer(0.0) as server:
        yield server.url


def _raw_server(reply: bytes):
    """A server on 127.0.0.1 that reads each request and answers ``reply`` (b"": nothing), then closes."""
    server = socket.socket()
    server.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    server.bind(("127.0.0.1", 0))
    server.listen(16)

    def serve() -> None:
        while True:
            try:
                conn, _ = server.accept()
            except OSError:
                return
            with conn:
                conn.recv(65536)
                if reply:
                    conn.sendall(reply)

    threading.Thread(target=serve, daemon=True).start()
    return server, f"http://127.0.0.1:{server.getsockname()[1]}/v1"


@pytest.mark.parametrize("name", CLIENTS)
def test_the_client_is_the_one_asked_for(name, monkeypatch):
    monkeypatch.setenv(CLIENT_ENV, name)
    assert client_kind() == name
    backend = OpenAIBackend("m", ClientSettings("http://127.0.0.1:9/v1"))
    assert backend._transport.kind == name
    backend.close()


def test_aiohttp_is_the_default_where_it_is_installed(monkeypatch):
    pytest.importorskip("aiohttp")
    monkeypatch.delenv(CLIENT_ENV, raising=False)
    assert client_kind() == "aiohttp"


def test_an_unknown_client_is_refused_in_one_line(monkeypatch, tmp_path, capsys):
    monkeypatch.setenv(CLIENT_ENV, "requests")
    with pytest.raises(InputError, match="UDCG_HTTP_CLIENT='requests': use one of aiohttp, httpx"):
        OpenAIBackend("m", ClientSettings("http://127.0.0.1:9/v1"))
    rc = main(["annotate", "udcg/data/popqa-sample.jsonl", "--limit", "1", "-o", str(tmp_path / "o.jsonl"),
               "--model", "m", "--api-base", "http://127.0.0.1:9/v1"])
    err = capsys.readouterr().err.strip().splitlines()
    assert rc == 2 and len(err) == 1 and "UDCG_HTTP_CLIENT" in err[0]
    assert not (tmp_path / "o.jsonl").exists()


def test_both_clients_read_the_same_log_probabilities(instant, monkeypatch):
    got = []
    for name in CLIENTS:
        monkeypatch.setenv(CLIENT_ENV, name)
        backend = OpenAIBackend("bench", ClientSettings(instant, max_concurrency=4))
        try:
            got.append(backend.next_token_logprobs(CHATS, ["NO-RESPONSE", "Paris"]))
        finally:
            backend.close()
    assert got[0] == got[1]
    assert len({round(r["NO-RESPONSE"], 9) for r in got[0]}) == len(CHATS)  # the answers do differ


@pytest.mark.parametrize("name", CLIENTS)
@pytest.mark.parametrize("reply, what", [(b"", "closes the connection"), (b"garbage\r\n\r\n", "garbles the status line")])
def test_a_misbehaving_server_is_a_failed_connection_not_a_timeout(name, reply, what, monkeypatch):
    monkeypatch.setenv(CLIENT_ENV, name)
    server, url = _raw_server(reply)
    backend = OpenAIBackend("m", ClientSettings(url, timeout=20, max_retries=1, backoff_base=0.01))
    try:
        [result] = backend.generate_each([[{"role": "user", "content": "hi"}]])
    finally:
        backend.close()
        server.close()
    message = str(result)
    assert "connection failed" in message and "timed out" not in message, (what, message)
    assert "gave up after 2 attempts" in message and "\n" not in message


@pytest.mark.parametrize("name", CLIENTS)
def test_a_proxy_named_in_the_environment_carries_the_request(name, monkeypatch):
    """HTTP_PROXY points at a server on 127.0.0.1 that records what reaches it: the request arrives
    there in a proxy's absolute form, for a host that does not even resolve."""
    seen: list[bytes] = []
    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    server.listen(4)

    def serve() -> None:
        conn, _ = server.accept()
        with conn:
            seen.append(conn.recv(65536).split(b"\r\n")[0])
            conn.sendall(b"HTTP/1.1 503 Service Unavailable\r\nContent-Length: 0\r\nConnection: close\r\n\r\n")

    threading.Thread(target=serve, daemon=True).start()
    for var in ("NO_PROXY", "no_proxy", "ALL_PROXY", "all_proxy", "HTTPS_PROXY", "https_proxy", "http_proxy"):
        monkeypatch.delenv(var, raising=False)
    monkeypatch.setenv("HTTP_PROXY", f"http://127.0.0.1:{server.getsockname()[1]}")
    monkeypatch.setenv(CLIENT_ENV, name)
    env_proxy.cache_clear()
    backend = OpenAIBackend("m", ClientSettings("http://api.example.invalid/v1", timeout=10, max_retries=0))
    try:
        [result] = backend.generate_each([[{"role": "user", "content": "hi"}]])
    finally:
        backend.close()
        server.close()
        env_proxy.cache_clear()
    assert seen == [b"POST http://api.example.invalid/v1/chat/completions HTTP/1.1"]
    assert "HTTP 503" in str(result)
