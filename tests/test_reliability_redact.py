"""Secret redaction (issue 17, defect 1): the API key is masked in every form a server may echo it
in (verbatim, cut at a length limit from either end, URL-encoded, JSON-escaped, base64, inside an
HTTP Basic header) and credentials inside URLs are masked, in error messages, logs and saved files.
The sweep runs ``udcg.redact.redact`` on each form, then the same forms through a real HTTP server
on 127.0.0.1 that echoes them, the OpenAI backend and the real CLI. No model is loaded."""

from __future__ import annotations

import base64
import http.server
import json
import threading
from urllib.parse import quote, quote_plus, unquote

import pytest

from udcg.cli import main
from udcg.redact import MIN_CUT, env_secrets, redact

KEY = "sk-live+SECRET/abcdefghij0123456789xyz="  # '+', '/' and '=' make every encoding differ
USER, PASSWORD = "alice", "pw-Sup3rSecret!"


def forms(key: str) -> dict[str, str]:
    """Every way an echo may carry the key, by name."""
    out = {"verbatim": key, "urlencoded": quote(key, safe=""), "urlencoded-plus": quote_plus(key),
           "urlencoded-lower": quote(key, safe="").replace("%2B", "%2b").replace("%2F", "%2f").replace("%3D", "%3d"),
           "json-escaped": json.dumps(key)[1:-1].replace("/", "\\/"),
           "base64": base64.b64encode(key.encode()).decode(), "base64-url": base64.urlsafe_b64encode(key.encode()).decode(),
           "basic-auth": base64.b64encode(f"user:{key}".encode()).decode(),
           "basic-auth-2": base64.b64encode(f"me:{key}".encode()).decode()}
    for n in (MIN_CUT, 20, len(key) - 1):
        out[f"prefix-{n}"] = key[:n]
        out[f"suffix-{n}"] = key[-n:]
        out[f"urlencoded-prefix-{n}"] = quote(key, safe="")[:n + 6]
    return out


def leaked(text: str, secret: str) -> list[str]:
    """Windows of MIN_CUT characters of the secret readable in text, as is, URL-decoded or base64-decoded."""
    readable = [text, unquote(text), text.replace("\\/", "/")]
    for run in __import__("re").findall(r"[A-Za-z0-9+/_=-]{8,}", text):
        for start in range(4):
            chunk = run[start:].replace("-", "+").replace("_", "/").rstrip("=")
            chunk = chunk[: len(chunk) - len(chunk) % 4]
            try:
                readable.append(base64.b64decode(chunk).decode("latin-1"))
            except ValueError:
                pass
    windows = {secret[i:i + MIN_CUT] for i in range(len(secret) - MIN_CUT + 1)}
    return sorted(w for w in windows if any(w in r for r in readable))


@pytest.mark.parametrize("form", list(forms(KEY)))
def test_redact_masks_every_form_of_the_key(form):
    text = f"HTTP 401: Incorrect API key provided: {forms(KEY)[form]} (see the docs)"
    clean = redact(text, [KEY])
    assert "***" in clean and not leaked(clean, KEY), clean
    assert clean.startswith("HTTP 401: Incorrect API key provided: ") and clean.endswith(" (see the docs)")


@pytest.mark.parametrize("url", [f"http://{USER}:{PASSWORD}@127.0.0.1:9/v1", f"https://{USER}@api.example.com/v1",
                                 f"http%3A%2F%2F{USER}%3A{quote(PASSWORD)}%40host%2Fv1"])
def test_redact_masks_credentials_inside_urls(url):
    clean = redact(f"POST {url}/chat/completions: connection failed", [])
    assert PASSWORD not in clean and quote(PASSWORD) not in clean and USER not in clean, clean
    assert "127.0.0.1" in clean or "example.com" in clean or "host" in clean


def test_redact_leaves_ordinary_text_alone():
    text = "POST http://127.0.0.1:8000/v1/chat/completions: HTTP 503: busy; mail me at a@b.org"
    assert redact(text, [KEY]) == text
    assert redact("short", ["abc"]) == "short"  # secrets under MIN_CUT characters are not masked (too common)


def test_a_machines_secret_named_variables_do_not_garble_messages(tmp_path, monkeypatch):
    """A CI machine's variable named like a secret but holding words (or a socket path, as
    SSH_AUTH_SOCK) masked 4-letter pieces of them: "the ***ice refused", "4 res***", "a *** of"."""
    sock = tmp_path / "agent.sock"
    sock.write_text("")
    monkeypatch.setenv("CI_SERVICE_AUTH", "service-results-default-server")
    monkeypatch.setenv("SSH_AUTH_SOCK", str(sock))
    text = "the service refused the key; 1 results for 4 requests (a fault of that package or of the server)"
    assert redact(text, env_secrets()) == text
    assert str(sock) not in env_secrets()
    assert redact("echo service-results-default-server", env_secrets()) == "echo ***"
    assert redact("cut: ...s-default-se...", env_secrets()) == "cut: ...***..."  # a cut of 8 or more is still masked
    assert redact("cut ...j0123...", [KEY]) == "cut ...***..."  # a short cut that reads as no word too


class _Echo(http.server.BaseHTTPRequestHandler):
    """Answers every POST with 401 and an error message that echoes the form named in the path."""

    form = "verbatim"

    def do_POST(self):  # noqa: N802
        self.rfile.read(int(self.headers.get("Content-Length") or 0))
        echoed = forms(self.headers["Authorization"].removeprefix("Bearer ")).get(type(self).form, "")
        if type(self).form == "cut-at-300":  # the client keeps 300 characters: the key's end is cut off
            echoed = " " * (300 - len("Incorrect API key provided: ") - len(KEY) + 1) + KEY
        body = json.dumps({"error": {"message": f"Incorrect API key provided: {echoed}"}})
        data = body.encode()
        self.send_response(401)
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def log_message(self, *args):
        pass


@pytest.fixture
def echo_server():
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _Echo)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    yield server
    server.shutdown()
    server.server_close()


@pytest.mark.parametrize("form", ["verbatim", "cut-at-300", "urlencoded", "urlencoded-plus", "base64", "basic-auth",
                                  "json-escaped", "suffix-20"])
def test_cli_never_shows_or_writes_an_echoed_key(form, echo_server, tmp_path, monkeypatch, capsys):
    """The real annotate command through a server that echoes the key: the one-line error, the
    logs (-v) and every file written hold no readable piece of the key or the URL's password."""
    monkeypatch.setattr(_Echo, "form", form)
    monkeypatch.setenv("MY_KEY_VAR", KEY)
    src = tmp_path / "in.json"
    src.write_text(json.dumps([{"example_id": "q1", "question": "Who wrote Hamlet?", "answers": ["Shakespeare"],
                                "passages": [{"doc_id": "d1", "text": "Hamlet is by Shakespeare.", "is_relevant": True}]}]))
    port = echo_server.server_address[1]
    rc = main(["-v", "annotate", str(src), "-o", str(tmp_path / "out.json"), "--model", "gpt-x", "--no-progress",
               "--api-base", f"http://{USER}:{PASSWORD}@127.0.0.1:{port}/v1", "--api-key-env", "MY_KEY_VAR",
               "--max-retries", "0"])
    err = capsys.readouterr().err
    assert rc == 1 and "HTTP 401" in err and "MY_KEY_VAR" in err, err
    written = "".join(p.read_text(errors="replace") for p in tmp_path.rglob("*") if p.is_file() and p != src)
    for secret in (KEY, PASSWORD):
        assert not leaked(err + written, secret), (form, err)
    assert "***" in err
