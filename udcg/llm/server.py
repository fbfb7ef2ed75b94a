"""An OpenAI-compatible HTTP server over any udcg ``Backend`` (what ``udcg serve`` starts).

Endpoints: ``POST /v1/chat/completions`` (messages, temperature, top_p, max_tokens, n, seed,
logprobs, top_logprobs, stop, stream, stream_options), ``POST /v1/completions`` (prompt,
max_tokens, temperature, top_p, n, seed, stop, logprobs, echo, stream, stream_options; an
open-weights backend only), ``GET /v1/models`` and ``GET /health``. Standard library only
(``http.server.ThreadingHTTPServer``); connections are served concurrently, model calls one at a
time (a lock), each request in one backend call (its ``n`` answers together). A request's work is
bounded (``max_request_tokens``: prompt tokens plus n x max_tokens; a prompt too long for it is
refused by its length before it is tokenised) and timed (``max_request_seconds`` of model work,
``udcg.llm.server_watch``), so one client cannot hold the model for minutes; a larger request is a
400 that says so. A client that goes away stops its request's model work, streamed or not, within
a token, and leaves one log line, not a traceback.

``stream: true`` is answered with server-sent events (``udcg.llm.server_stream``), chunked, as a
backend that streams (``HFBackend``) writes each token; other backends send each answer whole. The
events start with the first piece of text, so a request that fails before it (a chat too long for
the model) still gets a plain JSON error; a failure after it is an ``{"error": ...}`` event, then
``[DONE]``. A client that goes away stops the generation at its next token.

Answering a request with the model, and what that needs of a backend beyond the protocol
(log-probabilities, streaming, raw-text completions, token counts): ``udcg.llm.server_model``.
Request checking and response layout are pure functions (``udcg.llm.server_wire``,
``server_completions``, ``server_stream``); this module speaks HTTP.
"""

from __future__ import annotations

import contextlib
import hmac
import json
import logging
import select
import socket
import sys
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from udcg.errors import InputError
from udcg.llm.base import Backend
from udcg.llm.server_completions import parse_completion_request
from udcg.llm.server_model import ModelService
from udcg.llm.serve_options import ServeOptions
from udcg.llm.server_stream import DONE, sse
from udcg.llm.server_watch import ClientGone, Watch
from udcg.llm.server_wire import (
    ChatRequest,
    RequestError,
    error_body,
    parse_body,
    parse_request,
)

log = logging.getLogger(__name__)

MAX_BODY_BYTES = 8 * 1024 * 1024
REQUEST_TIMEOUT = 30.0  # seconds: an idle keep-alive connection is closed, and a body must arrive in full


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


# ---------------------------------------------------------------- server


class ChatCompletionServer(ThreadingHTTPServer):
    """``ThreadingHTTPServer`` serving one backend under ``model_name``. ``port=0`` picks a free port."""

    daemon_threads = True
    request_queue_size = 128  # clients of a fleet connect at once; the default 5 makes the rest wait seconds

    def __init__(self, backend: Backend, host: str = ServeOptions.host, port: int = ServeOptions.port,
                 model_name: str | None = None,
                 api_key: str | None = None, timeout: float = REQUEST_TIMEOUT,
                 max_request_tokens: int = ServeOptions.max_request_tokens,
                 max_request_seconds: float = ServeOptions.max_request_seconds):
        self.backend = backend
        self.timeout = timeout  # idle connections, request bodies and stalled stream readers (see _Handler)
        self._api_key = api_key  # when set, requests need "Authorization: Bearer <api_key>"
        self.model_name = model_name or backend.name
        self.max_request_tokens, self.max_request_seconds = max_request_tokens, max_request_seconds
        self.service = ModelService(backend, self.model_name, max_request_tokens)
        self.model_lock = self.service.lock
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

    def handle_error(self, request: Any, client_address: Any) -> None:
        """A client that drops its connection (a stream closed after [DONE]) is no server error."""
        if isinstance(sys.exc_info()[1], ConnectionError):
            log.debug("%s closed the connection", client_address)
        else:
            super().handle_error(request, client_address)

    def start_in_thread(self) -> threading.Thread:
        thread = threading.Thread(target=self.serve_forever, name="udcg-serve", daemon=True)
        thread.start()
        return thread

    def complete(self, request: ChatRequest) -> dict:
        """The chat-completions response body of a request (not streamed)."""
        return self.service.chat(request, None)


class _EventStream:
    """A chunked ``text/event-stream`` response, started by its first event."""

    def __init__(self, handler: BaseHTTPRequestHandler):
        self.handler, self.started = handler, False

    def emit(self, event: bytes) -> None:
        h = self.handler
        if not self.started:
            self.started = True
            h.send_response(200)
            h.send_header("Content-Type", "text/event-stream; charset=utf-8")
            h.send_header("Cache-Control", "no-cache")
            h.send_header("Transfer-Encoding", "chunked")
            h.end_headers()
        h.wfile.write(b"%x\r\n%s\r\n" % (len(event), event))

    def end(self) -> None:
        if self.started:
            self.handler.wfile.write(b"0\r\n\r\n")


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

    def _client_gone(self) -> bool:
        """Whether the client has closed its connection: the socket reads as ended, or was reset (a
        client that sent its next request already is still there). ``poll``, not ``select``: select
        fails on a descriptor past 1023, as a busy server's are."""
        try:
            poller = select.poll()
            poller.register(self.connection, select.POLLIN | select.POLLHUP | select.POLLERR)
            if not poller.poll(0):
                return False
            return self.connection.recv(1, socket.MSG_PEEK | socket.MSG_DONTWAIT) == b""
        except BlockingIOError:
            return False
        except OSError:
            return True

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
        routes = {"/v1/chat/completions": (parse_request, self.server.service.chat),
                  "/v1/completions": (parse_completion_request, self.server.service.text)}
        if path not in routes:
            return self._send(404, error_body(404, f"no such endpoint: POST {path} (try /v1/chat/completions or /v1/completions)"))
        parse, answer = routes[path]
        stream = _EventStream(self)
        try:
            request = parse(parse_body(raw), self.server.model_name, self.server.max_request_tokens)
            body = answer(request, stream.emit if request.stream else None,
                          Watch(self.server.max_request_seconds, self._client_gone))
            if body is not None:
                self._send(200, body)
            stream.end()
        except (ClientGone, ConnectionError) as e:  # the client left: nobody to answer, no traceback
            log.info("%s left before its answer was sent%s; its request was stopped", self.address_string(),
                     f" ({type(e).__name__})" if isinstance(e, ConnectionError) else "")
            self.close_connection = True
        except RequestError as e:
            self._fail(stream, e.status, e.message, e.param)
        except InputError as e:
            self._fail(stream, 400, str(e))
        except OSError as e:
            if stream.started:  # most often the client went away: its next token stopped the generation
                log.info("%s: the stream ended early (%s: %s)", self.address_string(), type(e).__name__, e)
            else:
                log.exception("completion failed")
            self._fail(stream, 500, f"{type(e).__name__}: {e}")
        except Exception as e:  # a backend failure must not kill the server
            log.exception("completion failed")
            self._fail(stream, 500, f"{type(e).__name__}: {e}")

    def _fail(self, stream: _EventStream, status: int, message: str, param: str | None = None) -> None:
        """An error as a JSON response, or as the last events of a stream already started."""
        if not stream.started:
            return self._send(status, error_body(status, message, param))
        try:
            stream.emit(sse(error_body(status, message, param)))
            stream.emit(DONE)
            stream.end()
        except OSError:
            pass
        self.close_connection = True
        return None


def serve(backend: Backend, options: ServeOptions, api_key: str | None = None) -> None:
    """Serve until interrupted (Ctrl-C), where and as ``options`` say; with ``api_key``, requests
    need it (``options.api_key_env`` names the variable it was read from)."""
    server = ChatCompletionServer(backend, options.host, options.port, options.served_name, api_key,
                                  max_request_tokens=options.max_request_tokens,
                                  max_request_seconds=options.max_request_seconds)
    log.info("serving %r at %s (Ctrl-C to stop)", server.model_name, server.url)
    try:
        server.serve_forever()
    finally:
        server.server_close()
