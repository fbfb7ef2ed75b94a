"""An OpenAI-compatible HTTP server over any udcg ``Backend`` (what ``udcg serve`` starts).

Endpoints: ``POST /v1/chat/completions`` (messages, temperature, top_p, max_tokens, n, seed,
logprobs, top_logprobs, stop), ``GET /v1/models`` and ``GET /health``. Standard library only
(``http.server.ThreadingHTTPServer``); connections are served concurrently, model calls one at a
time (a lock), each request in one backend call (its ``n`` answers together).

Log-probabilities: the ``Backend`` protocol scores candidates, it does not list a distribution, so
``logprobs``/``top_logprobs`` need a backend with the optional method
``token_logprobs(requests, k) -> list[list[TokenLogprob]]`` (teacher-forced, see ``TokenLogprobs``)
or an HF backend (``model`` + ``tokenizer`` + ``encode``), for which ``hf_token_logprobs``
provides it. As vLLM does by default, logprobs are the model's raw distribution (temperature 1),
whatever temperature the answer was sampled at. ``content`` lists the answer's tokens as the
tokenizer re-tokenises the answer text; an empty answer (end of text first) lists the end token.
"""

from __future__ import annotations

import contextlib
import hmac
import json
import logging
import math
import secrets
import threading
import time
import uuid
from collections.abc import Sequence
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, Protocol, runtime_checkable

from udcg.errors import InputError
from udcg.llm.base import Backend, Chat, GenerationParams

log = logging.getLogger(__name__)

MAX_BODY_BYTES = 8 * 1024 * 1024
MAX_INT_DIGITS = 40  # seeds and counts are at most 20 digits; a longer integer is a malformed request
REQUEST_TIMEOUT = 30.0  # seconds: an idle keep-alive connection is closed, and a body must arrive in full
MAX_TOKENS_CAP = 4096
MAX_N = 1024  # OpenAI caps n at 128; local sampling estimators ask for more in one call
ROLES = ("system", "user", "assistant")


@dataclass(frozen=True, slots=True)
class TokenLogprob:
    """One answer token: its text, its log-probability, and the top-k alternatives at its position."""

    token: str
    logprob: float
    top: tuple[tuple[str, float], ...]


@runtime_checkable
class TokenLogprobs(Protocol):
    def token_logprobs(self, requests: Sequence[tuple[Chat, str]], k: int) -> list[list[TokenLogprob]]:
        """Per (chat, answer): the answer's tokens, teacher-forced after the answer position, with
        the top-k (k >= 1) of each position; an empty answer gives one entry: the end token."""
        ...


class RequestError(Exception):
    """A request the server refuses: HTTP status, message, offending parameter."""

    def __init__(self, status: int, message: str, param: str | None = None):
        super().__init__(message)
        self.status, self.message, self.param = status, message, param


@dataclass(frozen=True, slots=True)
class ChatRequest:
    chat: tuple[dict[str, str], ...]
    params: GenerationParams
    logprobs: bool
    top_logprobs: int


# ---------------------------------------------------------------- wire format (pure functions)


def _content_text(content: Any, i: int) -> str:
    if isinstance(content, str):
        return content
    if isinstance(content, list):  # [{"type": "text", "text": ...}, ...]
        parts = []
        for part in content:
            if not (isinstance(part, dict) and part.get("type") == "text" and isinstance(part.get("text"), str)):
                raise RequestError(400, f"messages[{i}].content: only text parts are supported", "messages")
            parts.append(part["text"])
        return "".join(parts)
    raise RequestError(400, f"messages[{i}].content must be a string or a list of text parts", "messages")


def _number(body: dict, field: str, default: float, low: float, high: float, low_open: bool = False) -> float:
    value = body.get(field, default)
    if value is None:
        return default
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
        raise RequestError(400, f"{field} must be a number, got {value!r}", field)
    if value > high or value < low or (low_open and value == low):
        raise RequestError(400, f"{field} must be in {'(' if low_open else '['}{low:g}, {high:g}], got {value!r}", field)
    return float(value)


def _integer(body: dict, field: str, default: int | None, low: int, high: int) -> int | None:
    value = body.get(field, default)
    if value is None:
        return default
    if isinstance(value, bool) or not isinstance(value, int) or not low <= value <= high:
        raise RequestError(400, f"{field} must be an integer in [{low}, {high}], got {value!r}", field)
    return value


def _parse_int(text: str) -> int:
    if len(text.lstrip("-")) > MAX_INT_DIGITS:
        raise ValueError(f"an integer of {len(text.lstrip('-')):,} digits")
    return int(text)


def _reject_constant(name: str) -> float:
    raise ValueError(f"{name} is not valid JSON")


def parse_body(raw: bytes) -> Any:
    """The JSON of a request body; anything malformed (bad UTF-8 or JSON, NaN, an integer of more
    than MAX_INT_DIGITS digits, nesting deeper than the interpreter's limit) is a 400."""
    try:
        return json.loads(raw.decode("utf-8"), parse_int=_parse_int, parse_constant=_reject_constant)
    except (json.JSONDecodeError, UnicodeDecodeError) as e:
        raise RequestError(400, f"the body is not valid JSON: {e}") from None
    except RecursionError:
        raise RequestError(400, "the body is nested too deeply") from None
    except ValueError as e:
        raise RequestError(400, f"the body is not accepted JSON: {e}") from None


def check_port_free(host: str, port: int) -> None:
    """Raise InputError now if nothing can listen on host:port (before a model takes minutes to load)."""
    import socket

    if port == 0:
        return
    try:
        infos = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)
    except OSError as e:
        raise InputError(f"cannot listen on {host}:{port}: {e.strerror or e} (check --host)") from None
    family, kind, proto, _, address = infos[0]
    with socket.socket(family, kind, proto) as probe:
        probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)  # as the server binds: TIME_WAIT is no conflict
        try:
            probe.bind(address)
        except OSError as e:
            raise InputError(f"cannot listen on {host}:{port}: {e.strerror or e} (pick another --port or --host)") from None


def parse_request(body: Any, served_model: str) -> ChatRequest:
    """Check a chat-completions request body; raise ``RequestError`` naming the bad parameter."""
    if not isinstance(body, dict):
        raise RequestError(400, "the request body must be a JSON object")
    model = body.get("model")
    if model is not None and model != served_model:
        raise RequestError(404, f"model {model!r} is not served here (this server serves {served_model!r})", "model")
    messages = body.get("messages")
    if not isinstance(messages, list) or not messages:
        raise RequestError(400, "messages must be a non-empty list of {role, content} objects", "messages")
    chat = []
    for i, m in enumerate(messages):
        if not isinstance(m, dict) or m.get("role") not in ROLES:
            raise RequestError(400, f"messages[{i}].role must be one of {', '.join(ROLES)}", "messages")
        chat.append({"role": m["role"], "content": _content_text(m.get("content"), i)})
    stop = body.get("stop")
    stop = [stop] if isinstance(stop, str) else ([] if stop is None else stop)
    if not isinstance(stop, list) or len(stop) > 4 or not all(isinstance(s, str) and s for s in stop):
        raise RequestError(400, "stop must be a string or a list of at most 4 non-empty strings", "stop")
    logprobs = body.get("logprobs") or False
    if not isinstance(logprobs, bool):
        raise RequestError(400, f"logprobs must be true or false, got {logprobs!r}", "logprobs")
    top_logprobs = _integer(body, "top_logprobs", 0, 0, 20)
    if top_logprobs and not logprobs:
        raise RequestError(400, "top_logprobs needs logprobs: true", "top_logprobs")
    seed = _integer(body, "seed", None, -(2**63), 2**64 - 1)
    max_tokens = body.get("max_completion_tokens", body.get("max_tokens"))
    params = GenerationParams(
        max_new_tokens=_integer({"max_tokens": max_tokens}, "max_tokens", 256, 1, MAX_TOKENS_CAP),
        temperature=_number(body, "temperature", 1.0, 0.0, 2.0),
        top_p=_number(body, "top_p", 1.0, 0.0, 1.0, low_open=True),
        n=_integer(body, "n", 1, 1, MAX_N),
        seed=secrets.randbits(31) if seed is None else seed % 2**32,  # no seed: fresh draws, as OpenAI
        stop=tuple(stop),
    )
    return ChatRequest(tuple(chat), params, logprobs, top_logprobs)


def _logprob_entry(token: str, logprob: float) -> dict:
    # JSON has no -inf: a probability that underflows is written as -9999.0, as OpenAI does.
    return {"token": token, "logprob": max(logprob, -9999.0), "bytes": list(token.encode("utf-8"))}


def completion_body(
    request: ChatRequest,
    model: str,
    answers: Sequence[str],
    logprobs: Sequence[Sequence[TokenLogprob]] | None = None,
    token_counts: tuple[int, Sequence[int]] | None = None,
    created: int | None = None,
) -> dict:
    """The chat-completions response for a request and its answers. ``logprobs``: the tokens of each
    answer; ``token_counts``: (prompt tokens, tokens of each answer), for ``usage`` and for
    ``finish_reason`` ("length" when an answer used all of max_tokens, else "stop")."""
    choices = []
    for i, answer in enumerate(answers):
        choice: dict[str, Any] = {"index": i, "message": {"role": "assistant", "content": answer}, "logprobs": None}
        if logprobs is not None:
            choice["logprobs"] = {
                "content": [
                    {**_logprob_entry(t.token, t.logprob),
                     "top_logprobs": [_logprob_entry(tok, lp) for tok, lp in t.top[: request.top_logprobs]]}
                    for t in logprobs[i]
                ]
            }
        full = token_counts is not None and token_counts[1][i] >= request.params.max_new_tokens
        choice["finish_reason"] = "length" if full else "stop"
        choices.append(choice)
    body: dict[str, Any] = {
        "id": f"chatcmpl-{uuid.uuid4().hex}",
        "object": "chat.completion",
        "created": int(time.time()) if created is None else created,
        "model": model,
        "choices": choices,
    }
    if token_counts is not None:
        prompt, each = token_counts[0], sum(token_counts[1])
        body["usage"] = {"prompt_tokens": prompt, "completion_tokens": each, "total_tokens": prompt + each}
    return body


def error_body(status: int, message: str, param: str | None = None) -> dict:
    kind = "invalid_request_error" if status < 500 else "server_error"
    return {"error": {"message": message, "type": kind, "param": param, "code": status}}


# ---------------------------------------------------------------- HF token logprobs


def hf_token_logprobs(backend: Any, requests: Sequence[tuple[Chat, str]], k: int) -> list[list[TokenLogprob]]:
    """``TokenLogprobs`` for an HF backend, from its ``model``, ``tokenizer`` and ``encode(chat)``
    (the token ids up to the answer position, exactly as the backend scores them). One forward pass
    per request over prompt + answer tokens."""
    import torch

    tok, model = backend.tokenizer, backend.model
    out = []
    for chat, answer in requests:
        prompt = list(backend.encode(chat))
        ids = tok(answer, add_special_tokens=False)["input_ids"] if answer else []
        end = tok.eos_token_id
        if not ids and end is not None:
            ids = [end]
        with torch.inference_mode():
            logits = model(torch.tensor([prompt + ids], device=model.device)).logits[0, len(prompt) - 1 : -1]
        logp = torch.log_softmax(logits.float(), dim=-1)
        top_lp, top_ids = logp.topk(max(1, k), dim=-1)
        rows = []
        for pos, token_id in enumerate(ids):
            top = tuple((tok.decode([int(t)]), float(lp)) for t, lp in zip(top_ids[pos], top_lp[pos], strict=True))
            rows.append(TokenLogprob(tok.decode([token_id]), float(logp[pos, token_id]), top))
        out.append(rows)
    return out


def token_logprobs_of(backend: Any):
    """The token-logprobs function of a backend, or None if it cannot provide one."""
    if isinstance(backend, TokenLogprobs):
        return backend.token_logprobs
    if all(hasattr(backend, a) for a in ("model", "tokenizer", "encode")):
        return lambda requests, k: hf_token_logprobs(backend, requests, k)
    return None


def _token_counts(backend: Any, chat: Chat, answers: Sequence[str]) -> tuple[int, list[int]] | None:
    if not all(hasattr(backend, a) for a in ("tokenizer", "encode")):
        return None
    each = [len(backend.tokenizer(a, add_special_tokens=False)["input_ids"]) if a else 0 for a in answers]
    return len(backend.encode(chat)), each


# ---------------------------------------------------------------- server


class ChatCompletionServer(ThreadingHTTPServer):
    """``ThreadingHTTPServer`` serving one backend under ``model_name``. ``port=0`` picks a free port."""

    daemon_threads = True
    request_queue_size = 128  # clients of a fleet connect at once; the default 5 makes the rest wait seconds

    def __init__(self, backend: Backend, host: str = "127.0.0.1", port: int = 8000, model_name: str | None = None,
                 api_key: str | None = None, timeout: float = REQUEST_TIMEOUT):
        self.backend = backend
        self.timeout = timeout  # idle connections and request bodies (see _Handler)
        self._api_key = api_key  # when set, requests need "Authorization: Bearer <api_key>"
        self.model_name = model_name or backend.name
        self.model_lock = threading.Lock()
        self.token_logprobs = token_logprobs_of(backend)
        try:
            super().__init__((host, port), _Handler)
        except OSError as e:
            raise InputError(f"cannot listen on {host}:{port}: {e.strerror or e} (pick another --port or --host)") from None

    def authorized(self, header: str | None) -> bool:
        if not self._api_key:
            return True
        return hmac.compare_digest((header or "").encode(), f"Bearer {self._api_key}".encode())

    @property
    def url(self) -> str:
        host, port = self.server_address[:2]
        return f"http://{host}:{port}/v1"

    def start_in_thread(self) -> threading.Thread:
        thread = threading.Thread(target=self.serve_forever, name="udcg-serve", daemon=True)
        thread.start()
        return thread

    def complete(self, request: ChatRequest) -> dict:
        if request.logprobs and self.token_logprobs is None:
            raise RequestError(400, f"backend {self.model_name!r} cannot list token log-probabilities (logprobs needs an open-weights backend)", "logprobs")
        with self.model_lock:
            answers = self.backend.generate([request.chat], request.params)[0]
            logprobs = None
            if request.logprobs:
                logprobs = self.token_logprobs([(request.chat, a) for a in answers], max(1, request.top_logprobs))
            counts = _token_counts(self.backend, request.chat, answers)
        return completion_body(request, self.model_name, answers, logprobs, counts)


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"  # keep-alive: clients reuse connections
    server: ChatCompletionServer

    def setup(self) -> None:
        self.timeout = self.server.timeout  # socket timeout: an idle or stalled connection frees its thread
        super().setup()

    def log_message(self, format: str, *args: Any) -> None:  # noqa: A002 (stdlib signature)
        log.debug("%s %s", self.address_string(), format % args)

    def _read_body(self, length: int) -> bytes | None:
        """The body, or None (after a 408) when it does not arrive in full within the timeout."""
        deadline, chunks, left = time.monotonic() + self.server.timeout, [], length
        try:
            while left > 0:
                if time.monotonic() > deadline:
                    raise TimeoutError
                chunk = self.rfile.read1(min(left, 65536))
                if not chunk:
                    break
                chunks.append(chunk)
                left -= len(chunk)
        except (TimeoutError, OSError):
            left = -1
        if left != 0:
            self.close_connection = True
            with contextlib.suppress(OSError):
                self._send(408, error_body(408, f"the body did not arrive in full within {self.server.timeout:g}s"))
            return None
        return b"".join(chunks)

    def _send(self, status: int, body: dict) -> None:
        data = json.dumps(body, allow_nan=False).encode("utf-8")
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def do_GET(self) -> None:  # noqa: N802 (stdlib name)
        path = self.path.split("?", 1)[0].rstrip("/")
        if path.startswith("/v1/") and not self.server.authorized(self.headers.get("Authorization")):
            self._send(401, error_body(401, "missing or wrong API key (send Authorization: Bearer <key>)"))
        elif path == "/v1/models":
            model = {"id": self.server.model_name, "object": "model", "created": 0, "owned_by": "udcg"}
            self._send(200, {"object": "list", "data": [model]})
        elif path == "/health":
            self._send(200, {"status": "ok", "model": self.server.model_name})
        else:
            self._send(404, error_body(404, f"no such endpoint: GET {path} (try /v1/models)"))

    def do_POST(self) -> None:  # noqa: N802 (stdlib name)
        path = self.path.split("?", 1)[0].rstrip("/")
        try:
            length = int(self.headers.get("Content-Length") or 0)
        except ValueError:
            length = -1
        if not 0 < length <= MAX_BODY_BYTES:
            self.close_connection = True
            status = 413 if length > MAX_BODY_BYTES else 411
            return self._send(status, error_body(status, f"the body needs a Content-Length in 1..{MAX_BODY_BYTES} bytes"))
        raw = self._read_body(length)
        if raw is None:
            return None
        if not self.server.authorized(self.headers.get("Authorization")):
            return self._send(401, error_body(401, "missing or wrong API key (send Authorization: Bearer <key>)"))
        if path != "/v1/chat/completions":
            return self._send(404, error_body(404, f"no such endpoint: POST {path} (try /v1/chat/completions)"))
        try:
            request = parse_request(parse_body(raw), self.server.model_name)
            self._send(200, self.server.complete(request))
        except RequestError as e:
            self._send(e.status, error_body(e.status, e.message, e.param))
        except InputError as e:
            self._send(400, error_body(400, str(e)))
        except Exception as e:  # a backend failure must not kill the server
            log.exception("chat completion failed")
            self._send(500, error_body(500, f"{type(e).__name__}: {e}"))


def serve(backend: Backend, host: str = "127.0.0.1", port: int = 8000, model_name: str | None = None,
          api_key: str | None = None) -> None:
    """Serve until interrupted (Ctrl-C)."""
    server = ChatCompletionServer(backend, host, port, model_name, api_key)
    log.info("serving %r at %s (Ctrl-C to stop)", server.model_name, server.url)
    try:
        server.serve_forever()
    finally:
        server.server_close()
