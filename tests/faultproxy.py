"""A fault-injecting HTTP proxy on 127.0.0.1, for testing clients against a real server.

It forwards every request to ``upstream`` unchanged, except the ones it decides to break:

- ``"429"``: HTTP 429 without Retry-After; ``"429-retry-after"``: 429 with ``Retry-After: <retry_after>``
- ``"500"``, ``"502"``, ``"503"``: that status with an OpenAI-style error body
- ``"timeout"``: wait ``stall_s`` seconds (longer than the client's timeout), then close
- ``"drop"``: close the connection without answering
- ``"echo-auth"``: HTTP 500 whose body echoes the request's Authorization header (a careless server)
- ``"400"``: a non-retryable error
- ``"truncated"``: forward, then send the headers (full Content-Length) and half the body, and hang up
- ``"truncated-json"``: forward, then answer HTTP 200 with the first half of the body as a complete
  message (the JSON is cut, the HTTP is not)
- ``"non-json"``: HTTP 200 with an HTML error page instead of JSON (a misconfigured gateway)

Which requests break: ``script`` (the faults of the first requests, in arrival order, ``None`` =
forward), then ``rates`` (fault -> probability, drawn from a seeded RNG), and ``rule`` (a function
of the parsed JSON body returning a fault or None; it wins over both, for permanent failures of
chosen items). ``reshape`` (a function of the request path, the parsed request body and the parsed
upstream reply, returning the reply to send, or None for the upstream's as it is) rewrites forwarded
JSON replies: a server whose answers are well-formed HTTP but wrong in content. Everything is recorded in ``events``: (arrival time, fault or None, Authorization header seen).

    with FaultProxy(server_url, rates={"503": 0.2, "drop": 0.1}) as proxy:
        OpenAIBackend(model, ClientSettings(proxy.url, ...))
"""

from __future__ import annotations

import http.client
import json
import random
import socket
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import urlsplit

FAULTS = ("429", "429-retry-after", "500", "502", "503", "timeout", "drop", "echo-auth", "400",
          "truncated", "truncated-json", "non-json")


@dataclass(frozen=True)
class Event:
    at: float  # time.monotonic() when the request arrived
    path: str
    fault: str | None
    authorization: str | None


class FaultProxy:
    def __init__(
        self,
        upstream: str,
        rates: dict[str, float] | None = None,
        script: list[str | None] | None = None,
        rule: Callable[[object], str | None] | None = None,
        seed: int = 0,
        retry_after: float = 1.0,
        stall_s: float = 5.0,
        reshape: Callable[[str, object, object], object] | None = None,
    ):
        rates = dict(rates or {})
        for fault in [*rates, *(f for f in (script or []) if f)]:
            if fault not in FAULTS:
                raise ValueError(f"unknown fault {fault!r} (known: {', '.join(FAULTS)})")
        if sum(rates.values()) > 1:
            raise ValueError("fault rates add up to more than 1")
        parts = urlsplit(upstream)
        self.upstream_host, self.upstream_port = parts.hostname, parts.port
        self.rates, self.script, self.rule = rates, list(script or []), rule
        self.retry_after, self.stall_s, self.reshape = retry_after, stall_s, reshape
        self.events: list[Event] = []
        self._rng = random.Random(seed)
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._server = ThreadingHTTPServer(("127.0.0.1", 0), self._handler_class())
        self._server.daemon_threads = True
        self._thread: threading.Thread | None = None

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self._server.server_address[1]}/v1"

    def faults(self) -> list[str | None]:
        return [e.fault for e in self.events]

    def start(self) -> FaultProxy:
        self._thread = threading.Thread(target=self._server.serve_forever, name="faultproxy", daemon=True)
        self._thread.start()
        return self

    def close(self) -> None:
        self._stop.set()
        self._server.shutdown()
        self._server.server_close()

    def __enter__(self) -> FaultProxy:
        return self.start()

    def __exit__(self, *exc) -> None:
        self.close()

    def _decide(self, path: str, body: bytes, authorization: str | None) -> str | None:
        with self._lock:
            fault = None
            if len(self.events) < len(self.script):
                fault = self.script[len(self.events)]
            else:
                u, acc = self._rng.random(), 0.0
                for name, rate in self.rates.items():
                    acc += rate
                    if u < acc:
                        fault = name
                        break
            if self.rule is not None:
                try:
                    fault = self.rule(json.loads(body)) or fault
                except ValueError:
                    pass
            self.events.append(Event(time.monotonic(), path, fault, authorization))
            return fault

    def _handler_class(self):
        proxy = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, format, *args):  # noqa: A002
                pass

            def _reply(self, status: int, body: bytes, headers: dict[str, str] | None = None) -> None:
                self.send_response(status)
                for k, v in (headers or {}).items():
                    self.send_header(k, v)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def _hang_up(self) -> None:
                self.close_connection = True
                try:
                    self.connection.shutdown(socket.SHUT_RDWR)
                except OSError:
                    pass

            def _upstream(self, method: str, body: bytes | None) -> tuple[int, bytes]:
                conn = http.client.HTTPConnection(proxy.upstream_host, proxy.upstream_port, timeout=600)
                try:
                    headers = {k: v for k, v in self.headers.items() if k.lower() not in ("host", "connection")}
                    conn.request(method, self.path, body=body, headers=headers)
                    response = conn.getresponse()
                    return response.status, response.read()
                finally:
                    conn.close()

            def _forward(self, method: str, body: bytes | None) -> None:
                status, data = self._upstream(method, body)
                if proxy.reshape is not None and body and status == 200:
                    new = proxy.reshape(self.path, json.loads(body), json.loads(data))
                    if isinstance(new, (bytes, str)):
                        data = new.encode() if isinstance(new, str) else new
                    elif new is not None:
                        data = json.dumps(new).encode()
                self._reply(status, data)

            def _truncated(self, body: bytes, complete_message: bool) -> None:
                status, data = self._upstream("POST", body)
                half = data[: len(data) // 2]
                if complete_message:
                    return self._reply(status, half)
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(half)
                self.wfile.flush()
                self._hang_up()

            def do_GET(self):  # noqa: N802
                self._forward("GET", None)

            def do_POST(self):  # noqa: N802
                body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
                auth = self.headers.get("Authorization")
                fault = proxy._decide(self.path, body, auth)
                if fault is None:
                    return self._forward("POST", body)
                if fault == "drop":
                    return self._hang_up()
                if fault == "timeout":
                    proxy._stop.wait(proxy.stall_s)
                    return self._hang_up()
                if fault in ("truncated", "truncated-json"):
                    return self._truncated(body, complete_message=fault == "truncated-json")
                if fault == "non-json":
                    page = b"<html><body><h1>502 Bad Gateway</h1></body></html>"
                    self.send_response(200)
                    self.send_header("Content-Type", "text/html")
                    self.send_header("Content-Length", str(len(page)))
                    self.end_headers()
                    self.wfile.write(page)
                    return None
                if fault == "echo-auth":
                    message = f"internal error while handling Authorization: {auth}"
                    return self._reply(500, json.dumps({"error": {"message": message}}).encode())
                status = int(fault[:3])
                headers = {"Retry-After": f"{proxy.retry_after:g}"} if fault == "429-retry-after" else {}
                message = {"error": {"message": f"injected fault {fault}", "type": "fault_proxy"}}
                self._reply(status, json.dumps(message).encode(), headers)

        return Handler
