"""The connection side of the API backend: one event loop in a daemon thread and one set of keep-alive
connections per backend, shared by every request, every call and every base URL of a fleet.

Why not a client per call: a new client per chunk of work meant a new event loop, TLS context and
TCP connection for nearly every request, and an in-flight window that emptied at every chunk
boundary. Here the loop and the pool live as long as the backend; calls from any thread (the
runner's workers, a notebook's event loop) submit coroutines to it and wait on a
``concurrent.futures.Future``.

The HTTP client is one of the ``openai`` SDK's own client classes, used directly: a request body is
JSON bytes built once per prompt, not the SDK's typed request transform (about 1.6 ms of client CPU
per request). Which class (``client_class``): ``openai.DefaultAioHttpClient`` (the SDK's ``aiohttp``
extra: the httpx interface over aiohttp's connections and C HTTP parser) when aiohttp is installed,
as ``udcg[llm]`` does, else ``openai.DefaultAsyncHttpxClient``; ``UDCG_HTTP_CLIENT=httpx`` or
``aiohttp`` chooses. Against a local server that answers at once, the aiohttp one spent half the
client CPU per request (2,770-2,910 against 1,360-1,390 pairs/s, ``scripts/bench_api.py``'s data).
``http_module()`` is the httpx package both come from (``httpx`` or ``httpx2``, by SDK version),
for its exception types; ``connection_error`` names the aiohttp errors the SDK's adapter passes on
or maps to a timeout although no time ran out (a dropped connection).

The connections are spread over pools of at most ``POOL_SIZE``, taken in turn: an httpx pool looks
at each of its connections on every request it places (whether it is idle, expired, readable), so
one pool of 256 connections spends most of the client's CPU choosing a connection (measured:
about twice the client CPU per request of pools of 32 at 256 requests in flight).
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import functools
import importlib
import itertools
import os
import threading
import time
from collections.abc import Coroutine
from typing import Any

from udcg.errors import BackendError, InputError
from udcg.redact import redact

POOL_SIZE = 32  # connections per httpx pool (see the module docstring)


CLIENT_ENV = "UDCG_HTTP_CLIENT"
CLIENTS = ("aiohttp", "httpx")


def client_class():
    """The SDK's HTTP client class this process uses (module docstring); an unknown
    ``UDCG_HTTP_CLIENT`` or an aiohttp client asked for but not installed is an InputError."""
    import openai

    asked = os.environ.get(CLIENT_ENV, "").strip().lower()
    if asked and asked not in CLIENTS:
        raise InputError(f"{CLIENT_ENV}={asked!r}: use one of {', '.join(CLIENTS)} (or leave it unset)")
    if asked != "httpx":
        try:
            import aiohttp  # noqa: F401  (the SDK's aiohttp extra)

            return openai.DefaultAioHttpClient
        except (ImportError, AttributeError):  # no aiohttp, or an SDK without the class
            if asked == "aiohttp":
                raise InputError(f"{CLIENT_ENV}=aiohttp, but aiohttp or the SDK's aiohttp client is missing "
                                 "(pip install 'openai[aiohttp]')") from None
    return openai.DefaultAsyncHttpxClient


def connection_error(e: BaseException) -> BaseException | None:
    """The aiohttp error behind ``e`` (itself, or the cause of the httpx error the SDK's adapter raised
    for it) unless that error is a real timeout; None otherwise. The adapter maps a dropped or refused
    connection to ``ConnectTimeout`` and lets other aiohttp errors through unmapped."""
    for error in (e, e.__cause__):
        if error is not None and type(error).__module__.partition(".")[0] == "aiohttp":
            return None if isinstance(error, TimeoutError) else error
    return None


@functools.lru_cache(maxsize=1)
def http_module():
    """The httpx package the installed ``openai`` SDK is built on (its exceptions and Timeout)."""
    import openai

    base = next(c for c in openai.DefaultAsyncHttpxClient.__mro__[1:] if c.__name__ == "AsyncClient")
    return importlib.import_module(base.__module__.partition(".")[0])


class Transport:
    """A daemon thread running one event loop, and at most ``max_connections`` connections (created
    on that loop at first use) in pools of at most ``POOL_SIZE``, kept alive between requests."""

    def __init__(self, max_connections: int, timeout: float) -> None:
        self.max_connections, self.timeout = max_connections, timeout
        self.client_class = client_class()  # a bad UDCG_HTTP_CLIENT fails here, before any request
        self._loop: asyncio.AbstractEventLoop | None = None
        self._clients: list = []
        self._turn = itertools.count()
        self._lock = threading.Lock()

    def _start(self) -> asyncio.AbstractEventLoop:
        with self._lock:
            if self._loop is None or self._loop.is_closed():
                loop = asyncio.new_event_loop()
                threading.Thread(target=loop.run_forever, name="udcg-api-loop", daemon=True).start()
                self._loop = loop
            return self._loop

    def client(self):
        """The next pool in turn (call on the transport's loop)."""
        if not self._clients:
            http = http_module()
            pools = -(-self.max_connections // POOL_SIZE)
            size = -(-self.max_connections // pools)
            self._clients = [self.client_class(
                timeout=http.Timeout(self.timeout, connect=min(self.timeout, 10.0)),
                limits=http.Limits(max_connections=size, max_keepalive_connections=size)) for _ in range(pools)]
        return self._clients[next(self._turn) % len(self._clients)]

    def submit(self, coro: Coroutine[Any, Any, Any]) -> concurrent.futures.Future:
        return asyncio.run_coroutine_threadsafe(coro, self._start())

    def run(self, coro: Coroutine[Any, Any, Any]) -> Any:
        """Run ``coro`` on the transport's loop and wait for it (from any thread but the loop's own)."""
        future = self.submit(coro)
        try:
            return future.result()
        except BaseException:
            future.cancel()
            raise

    def close(self) -> None:
        """Close the pool and stop the loop (a later call starts them again)."""
        with self._lock:
            loop, clients, self._loop, self._clients = self._loop, self._clients, None, []
        if loop is None or loop.is_closed():
            return
        for client in clients:
            try:
                asyncio.run_coroutine_threadsafe(client.aclose(), loop).result(timeout=5)
            except Exception:  # closing is best effort: the connections die with the process anyway
                pass
        loop.call_soon_threadsafe(loop.stop)


MAX_BODY_BYTES = 64 * 1024**2  # a chat completion is a few KiB; 128 answers with log-probabilities a few MiB


async def post_bounded(client, url: str, content: bytes, headers: dict[str, str], limit: int | None = None):
    """POST and read the response, its body (decompressed) at most ``limit`` bytes: a Content-Length
    over the limit fails before the body is read, a longer stream where it passes the limit, with a
    ``BackendError`` (no retry: a server that sends gigabytes will send them again). Returns the
    response with its body read (``.content``, ``.text``, ``.headers``, ``.status_code``)."""
    http, limit = http_module(), MAX_BODY_BYTES if limit is None else limit
    request = client.build_request("POST", url, content=content, headers=headers)
    response = await client.send(request, stream=True)
    try:
        declared = response.headers.get("content-length", "")
        size = int(declared) if declared.isdigit() and len(declared) < 20 else None
        if size is not None and size <= limit and not response.headers.get("content-encoding"):
            await response.aread()  # framed by its Content-Length: the body cannot run past it
            return response
        chunks, total = [], 0
        if size is None or size <= limit:
            async for chunk in response.aiter_bytes():
                total += len(chunk)
                if total > limit:
                    break
                chunks.append(chunk)
    finally:
        await response.aclose()
    if (size is not None and size > limit) or total > limit:
        what = f"declares {size:,} bytes" if size is not None and size > limit else f"runs past {limit:,} bytes"
        raise BackendError(redact(f"POST {url}: HTTP {response.status_code}, the response body {what}, over the "
                                  f"{limit:,}-byte limit of one response (is this an OpenAI-compatible endpoint? check "
                                  "the base URL)"))
    kept = [(k, v) for k, v in response.headers.multi_items()  # the body is decoded already
            if k.lower() not in ("content-encoding", "content-length", "transfer-encoding")]
    return http.Response(response.status_code, headers=kept, content=b"".join(chunks), request=request,
                         extensions=response.extensions)


class Pacer:
    """Spaces request starts at least 60/rpm seconds apart to stay under a requests-per-minute
    limit. A start is claimed when it happens, not booked ahead: a waiter that wakes late (a busy
    machine) cannot be followed by one on time less than an interval after it. Lives as long as the
    backend, so the limit holds across calls (and threads), not only within one batch."""

    def __init__(self, requests_per_minute: float | None):
        self.interval = 60.0 / requests_per_minute if requests_per_minute else 0.0
        self._next = 0.0
        self._lock = threading.Lock()

    async def wait(self) -> None:
        if not self.interval:
            return
        while True:
            with self._lock:
                now = time.monotonic()
                if now >= self._next:
                    self._next = now + self.interval
                    return
                delay = self._next - now
            await asyncio.sleep(delay)


class JobBatch:
    """One call of the API backend's jobs: its results in input order, reported as each arrives, and done when all are."""

    def __init__(self, n: int, on_result, done: asyncio.Future) -> None:
        self.results: list[Any] = [None] * n
        self.remaining, self.on_result, self.done = n, on_result, done
        self.abandoned = False
        self.error: BaseException | None = None

    def finish(self, i: int, value: Any) -> None:
        self.results[i] = value
        if self.on_result is not None and self.error is None:
            try:
                self.on_result(i, value)
            except Exception as e:
                self.error = e
        self.remaining -= 1
        if not self.remaining and not self.done.done():
            self.done.set_result(None)
