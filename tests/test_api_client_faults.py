"""Round four (issue 36), the API client side: the response schema checked in one place
(``udcg.llm.openai_wire``), fleets whose retries leave a dead member, secrets of any length and form,
damaged cache records, environment values the HTTP clients cannot send, and start-up that grows with
the work. Servers are real: a raw HTTP server on 127.0.0.1 scripted per path
(``/<case>/v1/chat/completions``) and ``scripts/instant_openai_server.py``; a dead member is a closed
port on 127.0.0.1. API cases run over both HTTP clients (``UDCG_HTTP_CLIENT``)."""

from __future__ import annotations

import json
import subprocess
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest

from udcg.cli import main
from udcg.errors import BackendError

CLIENTS = ["aiohttp", "httpx"]
EXAMPLE = Path(__file__).resolve().parents[1] / "udcg" / "data" / "nq-example"
CHAT = [{"role": "user", "content": "q"}]
OK_CHOICE = {"index": 0, "message": {"role": "assistant", "content": "Paris"}, "finish_reason": "stop"}
TOP = [{"token": "NO", "logprob": -0.7}, {"token": "The", "logprob": -0.9}]
LOGPROBS = {"content": [{"token": "NO", "logprob": -0.7, "top_logprobs": TOP}]}

# case -> the body the raw server answers with (every request), and the field the error must name
MALFORMED = {
    "bare-strings": ({"choices": ["NO-RESPONSE", "Paris"]}, "choices[0] is a string, not an object"),
    "message-null": ({"choices": [{"index": 0, "message": None}]}, "choices[0].message is null, not an object"),
    "message-string": ({"choices": [{"index": 0, "message": "Paris"}]}, "choices[0].message is a string"),
    "message-missing": ({"choices": [{"index": 0, "text": "Paris"}]}, "choices[0].message is null, not an object"),
    "mixed-index": ({"choices": [{**OK_CHOICE, "index": 0}, {**OK_CHOICE, "index": "1"}]}, "choices[1].index is a string"),
    "index-repeated": ({"choices": [OK_CHOICE, OK_CHOICE]}, "choices[].index repeats a value"),
    "content-list": ({"choices": [{"index": 0, "message": {"content": ["Paris"]}}]}, "choices[0].message.content is a list"),
    "choices-object": ({"choices": {"0": OK_CHOICE}}, "'choices' is an object, not a list"),
    "body-list": ([OK_CHOICE], "the body is a list, not an object"),
    "logprobs-list": ({"choices": [{**OK_CHOICE, "logprobs": [LOGPROBS]}]}, "choices[0].logprobs is a list"),
    "logprobs-content-object": ({"choices": [{**OK_CHOICE, "logprobs": {"content": LOGPROBS["content"][0]}}]},
                                "choices[0].logprobs.content is an object, not a list"),
    "top-object": ({"choices": [{**OK_CHOICE, "logprobs": {"content": [{"token": "NO", "logprob": -0.7,
                                                                          "top_logprobs": {"NO": -0.7}}]}}]},
                   "top_logprobs is an object, not a list"),
    "logprob-positive": ({"choices": [{**OK_CHOICE, "logprobs": {"content": [{"token": "NO", "logprob": 2.5}]}}]},
                         "malformed logprobs entry"),
    "logprob-string": ({"choices": [{**OK_CHOICE, "logprobs": {"content": [{"token": "NO", "logprob": "-0.7"}]}}]},
                       "malformed logprobs entry"),
}


def _key_of(headers) -> str:
    return (headers.get("Authorization") or "").removeprefix("Bearer ")


ECHOES = {  # servers that quote the key back: in an error (retried, logged) or inside the answer
    "echo-500": lambda body, headers: (500, {"error": {"message": f"overloaded; your header was {headers.get('Authorization')}"}}),
    "echo-answer": lambda body, headers: {"choices": [{"index": i, "message": {"content": f"Paris (key {_key_of(headers)})"}}
                                                      for i in range(body.get("n") or 1)]},
    "ok": lambda body, headers: {"choices": [{**OK_CHOICE, "index": i} for i in range(body.get("n") or 1)]},
}


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    bodies: dict = {}
    seen: list = []

    def log_message(self, *args):
        pass

    def do_POST(self):
        raw = self.rfile.read(int(self.headers.get("Content-Length", 0)))
        case = self.path.strip("/").split("/")[0]
        self.seen.append((case, self.headers.get("Authorization"), raw))
        body = self.bodies[case](json.loads(raw), self.headers) if callable(self.bodies.get(case)) else self.bodies.get(case)
        status, body = body if isinstance(body, tuple) else (200 if case in self.bodies else 404, body)
        out = json.dumps(body).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(out)))
        self.end_headers()
        self.wfile.write(out)


@pytest.fixture(scope="module")
def raw_server():
    _Handler.bodies = {**{case: body for case, (body, _) in MALFORMED.items()}, **ECHOES}
    server = ThreadingHTTPServer(("127.0.0.1", 0), _Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    yield f"http://127.0.0.1:{server.server_address[1]}"
    server.shutdown()
    server.server_close()


@pytest.fixture(params=CLIENTS)
def client(request, monkeypatch):
    monkeypatch.setenv("UDCG_HTTP_CLIENT", request.param)
    return request.param


def one_error_line(err: str, command: str) -> str:
    """The error line, the last one (a command may say what it read before); no traceback."""
    lines = [line for line in err.strip().splitlines() if line.strip()]
    assert lines and lines[-1].startswith(f"udcg {command}: error: ") and "Traceback" not in err, err
    assert sum("error" in line.lower() for line in lines) == 1, err
    return lines[-1]


def qa_file(tmp_path: Path, n_questions: int = 2, n_passages: int = 2) -> Path:
    rows = [{"example_id": f"q{i}", "question": f"Where is thing {i}?", "answers": ["Paris"],
             "passages": [{"doc_id": f"d{i}-{j}", "text": f"Passage {j} about thing {i}.", "relevance": j % 2}
                          for j in range(n_passages)]} for i in range(n_questions)]
    path = tmp_path / "qa.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return path


# ---------------------------------------------------------------- 1, 11. the response schema, one place


@pytest.mark.parametrize("case", sorted(MALFORMED))
def test_a_malformed_body_is_one_error_naming_the_field(case):
    """Bare-string choices were read as empty answers (p_abs 0.0, exit 0); logprobs as a list,
    message null or a string, mixed index types raised AttributeError / TypeError."""
    from udcg.llm.openai_wire import parse_choices, parse_first_top_logprobs

    body, words = MALFORMED[case]
    parse = parse_first_top_logprobs if "logprob" in case or "top" in case else parse_choices
    with pytest.raises(BackendError) as e:
        parse(body)
    assert words in str(e.value) and "\n" not in str(e.value), str(e.value)


def test_well_formed_bodies_still_read():
    from udcg.llm.openai_wire import parse_choices, parse_first_top_logprobs

    assert parse_choices({"choices": [{**OK_CHOICE, "index": 1, "message": {"content": None}}, OK_CHOICE]}) == ["Paris", ""]
    assert parse_choices({"choices": [{"message": {"content": "a"}}, {"message": {"content": "b"}}]}) == ["a", "b"]
    assert parse_first_top_logprobs({"choices": [{**OK_CHOICE, "logprobs": LOGPROBS}]}) == {"NO": -0.7, "The": -0.9}
    with pytest.raises(BackendError, match="no logprobs.content"):  # a server without logprobs: the hint, as before
        parse_first_top_logprobs({"choices": [{**OK_CHOICE, "logprobs": None}]})


@pytest.mark.parametrize("case, estimator", [("bare-strings", "sampling"), ("message-null", "sampling"),
                                             ("mixed-index", "sampling"), ("logprobs-list", "api-logprobs")])
def test_annotate_against_a_malformed_server_fails_in_one_line(case, estimator, client, raw_server, tmp_path, capsys):
    """``annotate --estimator sampling`` wrote p_abs 0.0 for every pair and exited 0."""
    out = tmp_path / "out.json"
    argv = ["annotate", str(qa_file(tmp_path)), "-o", str(out), "--model", "m", "--api-base", f"{raw_server}/{case}/v1",
            "--estimator", estimator, "--samples", "2", "--max-retries", "0", "--no-progress"]
    assert main(argv) == 1
    line = one_error_line(capsys.readouterr().err, "annotate")
    assert MALFORMED[case][1] in line, line
    assert not out.exists()


# ---------------------------------------------------------------- 6. a fleet with a dead member


@pytest.fixture(scope="module")
def instant_server():
    from tests.conftest import load_script

    with load_script("instant_openai_server").Process() as server:
        yield server


@pytest.mark.parametrize("estimator", ["api-logprobs", "sampling"])
def test_a_fleet_with_a_dead_member_finishes_every_pair_on_the_live_one(estimator, client, instant_server, tmp_path, capsys,
                                                                       caplog):
    """A request's retries took turns from a counter shared by every request in flight, so with one
    retry about half the requests that met the dead member met it again and the run failed; now each
    request's retry goes to the member after the one that failed it, and the output says which was down."""
    from tests.conftest import free_port

    dead = f"http://127.0.0.1:{free_port()}/v1"
    out = tmp_path / "out.json"
    argv = ["annotate", str(qa_file(tmp_path, 40, 2)), "-o", str(out), "--model", "m", "--estimator", estimator,
            "--samples", "3", "--api-base", f"{dead},{instant_server.url}", "--concurrency", "16", "--max-retries", "1",
            "--no-progress"]
    assert main(argv) == 0
    err = capsys.readouterr().err
    assert "server: fleet member down during the run: " + dead in err, err
    assert f"fleet member {dead} is down" in caplog.text
    items = json.loads(out.read_text())
    assert sum(len(item["passages"]) for item in items) == 80


def test_answer_over_a_fleet_with_a_dead_member_answers_every_context(client, instant_server, tmp_path, monkeypatch,
                                                                     capsys, caplog):
    """``udcg answer`` failed like ``annotate`` (its requests' retries met the dead member again)."""
    from tests.conftest import free_port

    dead = f"http://127.0.0.1:{free_port()}/v1"
    files = {}
    for name, urls in (("live", instant_server.url), ("fleet", f"{dead},{instant_server.url}")):
        monkeypatch.setenv("UDCG_OPENAI_BASE_URLS", urls)
        files[name] = out = tmp_path / f"{name}.jsonl"
        argv = ["answer", "--corpus", str(EXAMPLE), "--run", str(EXAMPLE / "runs" / "bm25.trec"), "--run",
                str(EXAMPLE / "runs" / "dense.trec"), "--k", "2", "--samples", "2", "--model", "openai:m",
                "--no-progress", "-o", str(out)]
        assert main(argv) == 0, capsys.readouterr().err
    assert len(files["fleet"].read_text().splitlines()) == 80  # 20 queries, 2 runs, the top-k context and the samples
    assert files["fleet"].read_bytes() == files["live"].read_bytes()
    assert f"fleet member {dead} is down" in caplog.text


def test_each_request_takes_its_own_turn_and_skips_a_member_that_is_down():
    from udcg.llm.openai_fleet import Fleet

    fleet = Fleet(["http://a/v1", "http://b/v1", "http://c/v1"])
    assert [fleet.first() for _ in range(4)] == [0, 1, 2, 0]
    assert [fleet.after(0), fleet.after(2)] == [1, 0]  # a retry: the member after the one that failed it
    fleet.failed(1, "connection refused")
    assert [fleet.first() for _ in range(3)] == [2, 2, 0] and fleet.after(0) == 2
    fleet.answered(1)
    assert fleet.after(0) == 1
    assert "http://b/v1 (1 attempts failed; last: connection refused)" in fleet.note()


# ---------------------------------------------------------------- 7, 8, 9, 10. secrets of any length and form

def udcg_process(argv: list[str], env: dict[str, str]) -> subprocess.CompletedProcess:
    import os
    import sys

    full = {**os.environ, "PYTHONPATH": str(EXAMPLE.parents[2]), "HF_HUB_OFFLINE": "1", **env}
    return subprocess.run([sys.executable, "-m", "udcg", "-v", *argv], env=full, capture_output=True, text=True, timeout=120)


@pytest.mark.parametrize("url, secret", [("http://user:Pa/ss99Word77@127.0.0.1:9/v1", "ss99Word77"),
                                         ("http://user:Pa/ss99Word77@127.0.0.1:9/v1", "Pa/ss"),
                                         ("http://us/er:Pa55Word77@127.0.0.1:9/v1", "Pa55Word77")])
def test_a_slash_in_the_url_password_is_never_printed(url, secret, tmp_path, capsys):
    """The one-line URL error printed the whole password (the userinfo mask stopped at the '/')."""
    argv = ["annotate", str(qa_file(tmp_path)), "-o", str(tmp_path / "o.json"), "--model", "m", "--api-base", url]
    assert main(argv) == 2
    line = one_error_line(capsys.readouterr().err, "annotate")
    assert secret not in line and "http://***@" in line and "percent-encode" in line, line


def test_redact_masks_unusual_userinfo_and_short_keys():
    from udcg.redact import redact, redact_echo, url_secrets

    assert redact("POST http://user:Pa/ss99Word77@host/v1/chat", []) == "POST http://***@host/v1/chat"
    assert redact("GET http://user:Pass%40Word12345@host:9/v1 ok", []) == "GET http://***@host:9/v1 ok"  # httpx's form
    assert redact("GET http://user:Pass@Word12345@host:9/v1 ok", []) == "GET http://***@host:9/v1 ok"
    assert redact("Authorization: Bearer k7Qz9Xw", ["k7Qz9Xw"]) == "Authorization: Bearer ***"
    assert redact('{"key": "k7Qz9Xw"}', ["k7Qz9Xw"]) == '{"key": "***"}'
    assert redact("task-k7Qz9Xwz and mail a@b.org", ["k7Qz9Xw"]) == "task-k7Qz9Xwz and mail a@b.org"  # not a word: kept
    assert "Pa/ss99Word77" in url_secrets("http://user:Pa/ss99Word77@host/v1")
    assert redact_echo("Paris", ["sk-0123456789abcdef"]) == "Paris"
    assert redact_echo("Paris sk-0123456789abcdef", ["sk-0123456789abcdef"]) == "Paris ***"


@pytest.mark.parametrize("client_name", CLIENTS)
def test_a_short_key_and_an_at_in_the_password_are_masked_in_verbose_logs(client_name, raw_server, tmp_path):
    """A 7-character key was logged verbatim under -v (a retried 500 that quotes the header); with
    httpx a password holding '@' was logged half-masked (http://***%40Word12345@...)."""
    key, password = "k7Qz9Xw", "Pass@Word12345"
    host = raw_server.removeprefix("http://")
    for base, secret in ((f"{raw_server}/echo-500/v1", key), (f"http://user:{password}@{host}/ok/v1", "Word12345")):
        done = udcg_process(["annotate", str(qa_file(tmp_path)), "-o", str(tmp_path / f"o{len(secret)}.json"), "--model", "m",
                             "--api-base", base, "--estimator", "sampling", "--samples", "1", "--max-retries", "1",
                             "--api-key-env", "UDCG_R4_KEY", "--no-progress"],
                            {"UDCG_R4_KEY": key, "UDCG_HTTP_CLIENT": client_name})
        assert secret not in done.stderr + done.stdout, done.stderr
        assert "***" in done.stderr or client_name == "aiohttp" and "echo" not in base, done.stderr  # httpx logs URLs
        assert done.returncode == (1 if "echo" in base else 0), done.stderr


def test_a_key_echoed_in_the_answer_text_is_never_stored(client, raw_server, tmp_path, monkeypatch, capsys):
    """``answer`` stored 'Paris (key sk-...)' in answers.jsonl and its cache."""
    key = "sk-r4-" + "9f8e7d6c5b4a3210"
    monkeypatch.setenv("OPENAI_API_KEY", key)
    monkeypatch.setenv("UDCG_OPENAI_BASE_URLS", f"{raw_server}/echo-answer/v1")
    out = tmp_path / "answers.jsonl"
    argv = ["answer", "--corpus", str(EXAMPLE), "--run", str(EXAMPLE / "runs" / "bm25.trec"), "--k", "2", "--limit", "3",
            "--model", "openai:m", "--no-progress", "-o", str(out)]
    assert main(argv) == 0, capsys.readouterr().err
    written = out.read_text() + Path(f"{out}.cache.jsonl").read_text()
    assert key not in written and "9f8e7d6c" not in written
    assert [json.loads(line)["answer"] for line in out.read_text().splitlines()] == ["Paris (key ***)"] * 3


# ---------------------------------------------------------------- 3. sampling settings are part of the cache's provenance


def _sampling_argv(where: str, tmp_path: Path, url: str, *extra: str) -> list[str]:
    if where == "file":
        return ["annotate", str(qa_file(tmp_path, 3, 2)), "-o", str(tmp_path / "out.json"), "--model", "m",
                "--api-base", url, "--estimator", "sampling", "--no-progress", *extra]
    return ["annotate", "--corpus", str(EXAMPLE), "--run", str(EXAMPLE / "runs" / "bm25.trec"), "--depth", "1",
            "-o", str(tmp_path / "utilities"), "--model", "m", "--api-base", url, "--estimator", "sampling",
            "--no-progress", *extra]


@pytest.mark.parametrize("where", ["file", "folder"])
@pytest.mark.parametrize("change", [["--samples", "7"], ["--temperature", "0.5"], ["--seed", "3"], ["--target-width", "0.3"]])
def test_another_sampling_setting_is_refused_not_served_old_estimates(where, change, instant_server, tmp_path, capsys):
    """A rerun with another --samples or --temperature reused every old estimate (0 requests,
    n_samples unchanged, no note); now it is refused, as ``answer`` refuses another --max-new-tokens."""
    assert main(_sampling_argv(where, tmp_path, instant_server.url, "--samples", "4")) == 0
    capsys.readouterr()
    again = _sampling_argv(where, tmp_path, instant_server.url, "--samples", "4", *change)
    assert main(again) == 2
    line = one_error_line(capsys.readouterr().err, "annotate")
    assert "cache made with" in line and "use the same settings, another output, or delete that cache file" in line, line
    assert main(_sampling_argv(where, tmp_path, instant_server.url, "--samples", "4")) == 0  # the same settings resume


# ---------------------------------------------------------------- 12. a damaged cached record


@pytest.mark.parametrize("value", [5.0, -0.5, "0.3", None, True])
def test_a_damaged_cached_record_is_one_line_naming_file_line_and_field(value, instant_server, tmp_path, capsys):
    """p_abs 5.0 / -0.5 / "0.3" / missing in the cache raised a ValueError or TypeError traceback."""
    argv = _sampling_argv("file", tmp_path, instant_server.url, "--samples", "2")
    assert main(argv) == 0
    cache = tmp_path / "out.json.cache.jsonl"
    lines = cache.read_text().splitlines()
    record = json.loads(lines[2])
    if value is None:
        del record["p_abs"]
    else:
        record["p_abs"] = value
    lines[2] = json.dumps(record)
    cache.write_text("\n".join(lines) + "\n")
    capsys.readouterr()
    assert main(argv) == 2
    line = one_error_line(capsys.readouterr().err, "annotate")
    assert f"out.json.cache.jsonl:3: cache record '{record['qid']} / {record['pid']}': field 'p_abs' is " in line, line
    assert "delete this line" in line


# ---------------------------------------------------------------- 13. environment values the HTTP clients cannot send

BAD_KEYS = {"trailing-newline": ("sk-abcdefgh12345678\n", "a newline"), "crlf": ("sk-abcd\r\nX-Evil: 1", "a carriage return"),
            "non-ascii": ("sk-abcdéfgh12345678", "a non-ASCII character")}
BAD_PROXIES = {"socks5": ("socks5://127.0.0.1:1080", "SOCKS"), "malformed": ("http://[::1", "cannot be read"),
               "port": ("http://127.0.0.1:99999", "port"), "no-host": ("http://:8080", "no host")}


@pytest.mark.parametrize("case", sorted(BAD_KEYS))
def test_a_key_no_http_header_can_carry_is_refused_before_any_request(case, client, raw_server, tmp_path, monkeypatch, capsys):
    """A key ending in a newline (aiohttp) or holding a non-ASCII character (httpx) raised a
    traceback, retried first; now one line naming the variable and the character, no request."""
    key, words = BAD_KEYS[case]
    monkeypatch.setenv("UDCG_R4_KEY", key)
    before = len(_Handler.seen)
    argv = ["annotate", str(qa_file(tmp_path)), "-o", str(tmp_path / "o.json"), "--model", "m", "--api-base",
            f"{raw_server}/ok/v1", "--estimator", "sampling", "--api-key-env", "UDCG_R4_KEY", "--no-progress"]
    assert main(argv) == 2
    line = one_error_line(capsys.readouterr().err, "annotate")
    assert "UDCG_R4_KEY" in line and words in line and "abcd" not in line, line
    assert len(_Handler.seen) == before  # nothing was sent


@pytest.mark.parametrize("case", sorted(BAD_PROXIES))
@pytest.mark.parametrize("name", ["HTTP_PROXY", "all_proxy"])
def test_a_proxy_the_clients_cannot_use_is_refused_before_any_request(case, name, client, raw_server, tmp_path, monkeypatch,
                                                                      capsys):
    """socks5, malformed or port-99999 HTTP_PROXY: httpx tracebacks plus 'Task was destroyed' noise."""
    from udcg.llm import openai_transport

    openai_transport.env_proxy.cache_clear()
    for other in ("HTTP_PROXY", "HTTPS_PROXY", "ALL_PROXY", "http_proxy", "https_proxy", "all_proxy", "NO_PROXY", "no_proxy"):
        monkeypatch.delenv(other, raising=False)
    value, words = BAD_PROXIES[case]
    monkeypatch.setenv(name, value)
    argv = ["annotate", str(qa_file(tmp_path)), "-o", str(tmp_path / "o.json"), "--model", "m", "--api-base",
            f"{raw_server}/ok/v1", "--estimator", "sampling", "--no-progress"]
    try:
        assert main(argv) == 2
    finally:
        openai_transport.env_proxy.cache_clear()
    err = capsys.readouterr().err
    line = one_error_line(err, "annotate")
    assert name in line and words in line and "Task was destroyed" not in err, line


# ---------------------------------------------------------------- 17. start-up grows with the work; a pace that can finish


def test_the_largest_concurrency_starts_what_the_work_needs(client, instant_server, tmp_path, capsys):
    """--concurrency 10000 made 313 connection pools (a TLS context each) and 10,000 workers before
    the first request: 24 s here (80 s on a busier machine) for 20 pairs; now 20 workers, one pool."""
    import time

    from udcg.llm.openai_backend import OpenAIBackend
    from udcg.llm.openai_settings import ClientSettings

    argv = ["annotate", str(qa_file(tmp_path, 10, 2)), "-o", str(tmp_path / "o.json"), "--model", "m", "--api-base",
            instant_server.url, "--estimator", "api-logprobs", "--concurrency", "10000", "--no-progress"]
    t0 = time.perf_counter()
    assert main(argv) == 0
    assert time.perf_counter() - t0 < 8.0
    backend = OpenAIBackend("m", ClientSettings(instant_server.url, max_concurrency=10_000))
    try:
        assert len(backend.first_token_logprobs([CHAT] * 20, ["NO-RESPONSE"])) == 20
        assert len(backend._workers) <= 20 and len(backend._transport._clients) == 1
        backend.first_token_logprobs([CHAT] * 300, ["NO-RESPONSE"])  # more work: more workers and pools
        assert 20 < len(backend._workers) <= 320 and 1 < len(backend._transport._clients) <= 10
    finally:
        backend.close()


@pytest.mark.parametrize("rpm", ["1e-9", "0.001", "0"])
def test_a_pace_that_could_never_finish_is_refused_with_its_bound(rpm, tmp_path, capsys):
    """--rpm 1e-9 was accepted: one request every 114 years."""
    from udcg.errors import InputError
    from udcg.llm.openai_backend import OpenAIBackend
    from udcg.llm.openai_settings import ClientSettings

    argv = ["annotate", str(qa_file(tmp_path)), "-o", str(tmp_path / "o.json"), "--model", "m", "--api-base",
            "http://127.0.0.1:9/v1", "--rpm", rpm]
    assert main(argv) == 2
    line = one_error_line(capsys.readouterr().err, "annotate")
    assert "must be a number in [0.01, 1000000000]" in line and "one request every 100 minutes" in line, line
    with pytest.raises(InputError, match=r"requests_per_minute = .*\[0.01, "):
        OpenAIBackend("m", ClientSettings("http://127.0.0.1:9/v1", requests_per_minute=float(rpm)))
    OpenAIBackend("m", ClientSettings("http://127.0.0.1:9/v1", requests_per_minute=0.01)).close()
