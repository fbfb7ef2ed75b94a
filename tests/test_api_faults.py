"""The API client against servers that misbehave in ways a real server can be made to, on 127.0.0.1:
one that trickles its answer a byte at a time (a total deadline, not a per-read one), base URLs that
cannot work (refused before any request), and keys in URLs' query strings (never printed)."""

from __future__ import annotations

import socket
import threading
import time

import pytest

from udcg.cli import main
from udcg.errors import InputError
from udcg.llm.openai_backend import OpenAIBackend
from udcg.llm.openai_settings import ClientSettings
from udcg.redact import redact


@pytest.fixture
def trickling_server():
    """Answers every request with headers, then one byte every 0.3 s of a 1,000-byte body."""
    server = socket.socket()
    server.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    server.bind(("127.0.0.1", 0))
    server.listen(16)
    stop = threading.Event()

    def handle(conn: socket.socket) -> None:
        with conn:
            conn.recv(65536)
            conn.sendall(b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: 1000\r\n\r\n")
            for _ in range(1000):
                if stop.wait(0.3):
                    return
                try:
                    conn.sendall(b" ")
                except OSError:
                    return

    def serve() -> None:
        while not stop.is_set():
            try:
                conn, _ = server.accept()
            except OSError:
                return
            threading.Thread(target=handle, args=(conn,), daemon=True).start()

    threading.Thread(target=serve, daemon=True).start()
    yield f"http://127.0.0.1:{server.getsockname()[1]}/v1"
    stop.set()
    server.close()


def test_timeout_bounds_the_whole_request_not_each_read(trickling_server):
    backend = OpenAIBackend("m", ClientSettings(trickling_server, timeout=2, max_retries=1, backoff_base=0.05))
    t0 = time.monotonic()
    try:
        [result] = backend.generate_each([[{"role": "user", "content": "hi"}]])
    finally:
        backend.close()
    assert time.monotonic() - t0 < 8  # two attempts of 2 s, not the server's 300 s
    assert "timed out after 2s" in str(result) and "gave up after 2 attempts" in str(result)


@pytest.mark.parametrize("url, why", [("http://[::1/v1", "Invalid IPv6 URL"), ("http://127.0.0.1:99999/v1", "Port out of range"),
                                      ("http:///v1", "no host"), ("http://h:0/v1", "port 0"), ("http://h:1/v1#x", "fragment")])
def test_a_base_url_that_cannot_work_is_refused_before_any_request(url, why, tmp_path, capsys):
    with pytest.raises(InputError, match=why):
        OpenAIBackend("m", ClientSettings(url))
    rc = main(["annotate", "udcg/data/popqa-sample.jsonl", "--limit", "1", "-o", str(tmp_path / "o.jsonl"),
               "--model", "m", "--api-base", url])
    err = capsys.readouterr().err.strip().splitlines()
    assert rc == 2 and len(err) == 1 and why in err[0]


def test_a_key_in_a_query_string_goes_after_the_endpoint_and_is_never_printed(tmp_path, capsys):
    key = "qs-secret-0123456789abcdef"
    backend = OpenAIBackend("m", ClientSettings(f"http://127.0.0.1:9/v1?key={key}", timeout=1, max_retries=0))
    assert backend._endpoints[0] == f"http://127.0.0.1:9/v1/chat/completions?key={key}"  # where the server reads it
    try:
        [result] = backend.generate_each([[{"role": "user", "content": "hi"}]])
    finally:
        backend.close()
    assert "connection failed" in str(result) and key not in str(result) and "key=***" in str(result)
    rc = main(["annotate", "udcg/data/popqa-sample.jsonl", "--limit", "1", "-o", str(tmp_path / "o.jsonl"), "--model",
               "m", "--api-base", f"http://127.0.0.1:9/v1?key={key}", "--max-retries", "0"])
    out = capsys.readouterr()
    assert rc == 1 and key not in out.err + out.out and "key=***" in out.err
    assert not any(key[i:i + 4] in out.err for i in range(len(key) - 3))  # no 4-character fragment either


def test_echoed_fragments_of_a_key_of_four_characters_or_more_are_masked():
    key = "sk-proj-ABCDEFGHIJKLMNOPQRSTUVWXYZ012345"
    for fragment in (key[:9], key[5:9] + "A", key[-4:], key[10:14], key[5:30]):
        assert fragment not in redact(f"server said: ...{fragment}...", [key])
    every = [key[i:i + 4] for i in range(len("sk-proj-") - 3, len(key) - 3)]  # each holds a character past the prefix
    assert not any(f in redact(" ".join(every), [key]) for f in every)
    assert redact("an ordinary message", [key]) == "an ordinary message"


def test_the_public_prefix_of_a_key_does_not_garble_messages():
    """An OpenAI project key begins with "sk-proj-", as every such key does: its short pieces
    ("proj", "-pro") are no secret, and masking them broke paths and flags in every message."""
    key = "sk-proj-Ab3xQ9zLm2Rt7YwP0vKc5NhJ8sDf1GgE4uTi6OoB"
    message = "runs/my-project/dense.trec: line 3: unknown field 'sk-p'; add --no-progress"
    assert redact(message, [key]) == message
    assert redact(f"Incorrect API key provided: {key[:12]}****{key[-4:]}", [key]) == \
        "Incorrect API key provided: ***" + "****" + "***"  # the echo's two ends masked, its own stars kept
