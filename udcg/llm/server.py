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

Request checking and response layout are pure functions (``udcg.llm.server_wire``).
"""

from __future__ import annotations

import contextlib
import hmac
import json
import logging
import threading
import time
from collections.abc import Sequence
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, Protocol, runtime_checkable

from udcg.errors import InputError
from udcg.llm.base import Backend, Chat
from udcg.llm.server_wire import ChatRequest, RequestError, TokenLogprob, completion_body, error_body, parse_body, parse_request

log = logging.getLogger(__name__)

MAX_BODY_BYTES = 8 * 1024 * 1024
REQUEST_TIMEOUT = 30.0  # seconds: an idle keep-alive connection is closed, and a body must arrive in full


@runtime_checkable
class TokenLogprobs(Protocol):
    def token_logprobs(self, requests: Sequence[tuple[Chat, str]], k: int) -> list[list[TokenLogprob]]:
        """Per (chat, answer): the answer's tokens, teacher-forced after the answer position, with
        the top-k (k >= 1) of each position; an empty answer gives one entry: the end token."""
        ...


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
