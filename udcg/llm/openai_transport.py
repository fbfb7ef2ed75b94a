"""The connection side of the API backend: one event loop in a daemon thread and one set of keep-alive
connections per backend, shared by every request, every call and every base URL of a fleet.

Why not a client per call: a new client per chunk of work meant a new event loop, TLS context and
TCP connection for nearly every request, and an in-flight window that emptied at every chunk
boundary. Here the loop and the pool live as long as the backend; calls from any thread (the
runner's workers, a notebook's event loop) submit coroutines to it and wait on a
``concurrent.futures.Future``.

The HTTP client (``client_kind``) is aiohttp where it is installed, as the ``llm`` and ``api`` extras do: its
connections and C HTTP parser, used directly; else the ``openai`` SDK's own httpx client class
(``openai.DefaultAsyncHttpxClient``). ``UDCG_HTTP_CLIENT=httpx`` or ``aiohttp`` chooses. Either way a
request body is JSON bytes built once per prompt, not the SDK's typed request transform (about
1.6 ms of client CPU per request), and ``post_bounded`` returns the same ``Reply``. Against a local
server that answers at once (``scripts/bench_api.py``'s data, interleaved runs), udcg posted
1,360-1,390 pairs/s over the httpx client, 2,720-2,910 over the SDK's aiohttp adapter (the httpx
interface on aiohttp) and 3,890-5,020 over aiohttp directly. aiohttp's own ``trust_env`` is off (it
looks for a .netrc in a worker thread on every request: 1,470-1,590 pairs/s); ``env_proxy`` reads
the proxy variables once per URL instead. ``http_module()`` is the httpx package the SDK comes with
(``httpx`` or ``httpx2``, by SDK version): its exception types, ``Timeout`` and TLS context.
``request_failure`` sorts what either client raises into a timeout or a failed connection.

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
import ssl
import threading
import time
from collections.abc import Coroutine, Mapping
from dataclasses import dataclass
from typing import Any

from udcg.errors import BackendError, InputError
from udcg.redact import redact

POOL_SIZE = 32  # connections per httpx pool (see the module docstring)


CLIENT_ENV = "UDCG_HTTP_CLIENT"
CLIENTS = ("aiohttp", "httpx")


def client_kind() -> str:
    """``aiohttp`` or ``httpx``: ``UDCG_HTTP_CLIENT`` when set, else aiohttp where it is installed;
    an unknown name, or aiohttp asked for but not installed, is an InputError."""
    asked = os.environ.get(CLIENT_ENV, "").strip().lower()
    if asked and asked not in CLIENTS:
        raise InputError(f"{CLIENT_ENV}={asked!r}: use one of {', '.join(CLIENTS)} (or leave it unset)")
    if asked == "httpx":
        return "httpx"
    try:
        importlib.import_module("aiohttp")  # installed and importing
    except ImportError:
        if asked == "aiohttp":
            raise InputError(f"{CLIENT_ENV}=aiohttp, but aiohttp is not installed (pip install aiohttp)") from None
        return "httpx"
    return "aiohttp"


def request_failure(e: BaseException) -> tuple[str, BaseException] | None:
    """(``timeout`` or ``connection``, the error to name) for what a request raised that a retry may
    fix: aiohttp's errors (its timeouts are ``TimeoutError``s) and httpx's ``HTTPError``s, an aiohttp
    error under an httpx one first; None for anything else (a bug, a body over the limit)."""
    for error in (e, e.__cause__):
        if error is not None and type(error).__module__.partition(".")[0] == "aiohttp":
            return ("timeout" if isinstance(error, TimeoutError) else "connection"), error
    http = http_module()
    if isinstance(e, http.TimeoutException):
        return "timeout", e
    if isinstance(e, http.HTTPError):
        return "connection", e.__cause__ or e
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
        self.kind = client_kind()  # a bad UDCG_HTTP_CLIENT fails here, before any request
        check_env_proxies()  # and a proxy variable the clients cannot use
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

    def client(self, in_flight: int | None = None):
        """The next pool in turn (call on the transport's loop): an aiohttp session or an httpx client.
        Pools are made as the requests in flight need them (``in_flight``; None: all of them), so a
        bound of 10,000 connections costs nothing until that many requests are in flight."""
        pools = -(-self.max_connections // POOL_SIZE)
        size = -(-self.max_connections // pools)
        wanted = pools if in_flight is None else min(pools, max(1, -(-in_flight // size)))
        while len(self._clients) < wanted:
            self._clients.append(self._pool(size))
        return self._clients[next(self._turn) % len(self._clients)]

    def _pool(self, size: int):
        http, connect = http_module(), min(self.timeout, 10.0)
        if self.kind == "httpx":
            import openai

            return openai.DefaultAsyncHttpxClient(timeout=http.Timeout(self.timeout, connect=connect),
                                                  limits=http.Limits(max_connections=size, max_keepalive_connections=size))
        import aiohttp

        # The TLS context httpx would use (its CA bundle, SSL_CERT_FILE). Not aiohttp's trust_env: it looks
        # for a .netrc in a worker thread on every request (proxies come from env_proxy instead).
        connector = aiohttp.TCPConnector(limit=size, ssl=_tls_context(http))
        return aiohttp.ClientSession(connector=connector, cookie_jar=aiohttp.DummyCookieJar(),
                                     timeout=aiohttp.ClientTimeout(total=None, sock_connect=connect,
                                                                   sock_read=self.timeout))

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
                closing = client.aclose() if hasattr(client, "aclose") else client.close()  # httpx / aiohttp
                asyncio.run_coroutine_threadsafe(closing, loop).result(timeout=5)
            except Exception:  # closing is best effort: the connections die with the process anyway
                pass
        loop.call_soon_threadsafe(loop.stop)


MAX_BODY_BYTES = 64 * 1024**2  # a chat completion is a few KiB; 128 answers with log-probabilities a few MiB


@dataclass(frozen=True, slots=True)
class Reply:
    """A response with its body read (decompressed), whichever client fetched it."""

    status_code: int
    headers: Mapping[str, str]  # case-insensitive lookups (aiohttp's and httpx's header types)
    content: bytes
    reason_phrase: str = ""

    @property
    def text(self) -> str:
        return self.content.decode("utf-8", errors="replace")


async def post_bounded(client, url: str, content: bytes, headers: dict[str, str], limit: int | None = None) -> Reply:
    """POST and read the response, its body (decompressed) at most ``limit`` bytes: a Content-Length
    over the limit fails before the body is read, a longer stream where it passes the limit, with a
    ``BackendError`` (no retry: a server that sends gigabytes will send them again)."""
    limit = MAX_BODY_BYTES if limit is None else limit
    if hasattr(client, "build_request"):
        return await _post_httpx(client, url, content, headers, limit)
    return await _post_aiohttp(client, url, content, headers, limit)


async def _post_aiohttp(session, url: str, content: bytes, headers: dict[str, str], limit: int) -> Reply:
    target, auth = _without_credentials(url)
    if auth:  # credentials in the URL: basic auth in place of any Authorization header, as httpx sends
        headers = {**{k: v for k, v in headers.items() if k.lower() != "authorization"}, "Authorization": auth}
    async with session.post(target, data=content, headers=headers, proxy=env_proxy(target)) as response:
        size = _declared(response.headers, url, response.status, limit)
        if size is not None and not response.headers.get("content-encoding"):
            body = await response.read()  # framed by its Content-Length: the body cannot run past it
        else:
            body = await _capped(response.content.iter_chunked(1 << 16), url, response.status, limit)
        return Reply(response.status, response.headers, body, response.reason or "")


@functools.lru_cache(maxsize=4)
def _tls_context(http) -> ssl.SSLContext:
    """httpx's verifying context (its CA bundle, or SSL_CERT_FILE / SSL_CERT_DIR), else the system's."""
    make = getattr(http, "create_ssl_context", None)  # public from httpx 0.28
    return make(trust_env=True) if make is not None else ssl.create_default_context()


PROXY_VARIABLES = ("HTTP_PROXY", "HTTPS_PROXY", "ALL_PROXY", "http_proxy", "https_proxy", "all_proxy")


def check_env_proxies() -> None:
    """Every proxy variable set is one the HTTP clients can use (httpx reads them all when a client
    is made, whatever the URL): an http(s) URL with a host and a port in 1-65535, never SOCKS; else
    one line naming the variable, before any request."""
    import urllib.parse

    for name in PROXY_VARIABLES:
        value = os.environ.get(name, "").strip()
        if not value:
            continue
        full = value if "://" in value else f"http://{value}"  # as httpx and urllib read a bare host:port
        scheme, problem = full.partition("://")[0].lower(), ""
        try:
            parts = urllib.parse.urlsplit(full)
            if parts.port == 0:
                raise ValueError("Port 0")
        except ValueError as e:
            problem = (f"its port is not a number in 1-65535 ({e})" if "port" in str(e).lower()
                       else f"cannot be read as a URL ({e})")
        else:
            if scheme.startswith("socks"):
                problem = "a SOCKS proxy: udcg's HTTP clients send through http:// or https:// proxies only"
            elif scheme not in ("http", "https"):
                problem = f"the scheme {scheme!r} is not a proxy's (http:// or https://)"
            elif not parts.hostname:
                problem = "no host"
        if problem:
            raise InputError(redact(f"{name}={value!r}: {problem}; fix the variable or unset it"))


@functools.lru_cache(maxsize=64)
def env_proxy(url: str) -> str | None:
    """The proxy the environment names for ``url`` (HTTP(S)_PROXY / ALL_PROXY, less NO_PROXY), as
    httpx would take it; read once per URL."""
    import urllib.parse
    import urllib.request

    parts = urllib.parse.urlsplit(url)
    if urllib.request.proxy_bypass_environment(parts.hostname or ""):
        return None
    proxies = urllib.request.getproxies_environment()
    return proxies.get(parts.scheme) or proxies.get("all")


@functools.lru_cache(maxsize=64)
def _without_credentials(url: str) -> tuple[str, str | None]:
    """(the URL without its user and password, the basic-auth header value they make, or None when
    the URL holds none); worked out once per URL."""
    if "@" not in url.partition("//")[2].partition("/")[0]:
        return url, None
    import base64

    import yarl

    parsed = yarl.URL(url)
    token = base64.b64encode(f"{parsed.user or ''}:{parsed.password or ''}".encode()).decode()
    return str(parsed.with_user(None)), f"Basic {token}"


async def _post_httpx(client, url: str, content: bytes, headers: dict[str, str], limit: int) -> Reply:
    request = client.build_request("POST", url, content=content, headers=headers)
    response = await client.send(request, stream=True)
    try:
        size = _declared(response.headers, url, response.status_code, limit)
        if size is not None and not response.headers.get("content-encoding"):
            body = await response.aread()
        else:
            body = await _capped(response.aiter_bytes(), url, response.status_code, limit)
    finally:
        await response.aclose()
    return Reply(response.status_code, response.headers, body, response.reason_phrase)


def _declared(headers: Mapping[str, str], url: str, status: int, limit: int) -> int | None:
    """The Content-Length, None when absent or unreadable; over ``limit``, the over-limit error."""
    declared = headers.get("content-length", "")
    size = int(declared) if declared.isdigit() and len(declared) < 20 else None
    if size is not None and size > limit:
        raise _over_limit(url, status, f"declares {size:,} bytes", limit)
    return size


async def _capped(chunks, url: str, status: int, limit: int) -> bytes:
    """The decoded body from an async iterator of chunks, stopping where it passes ``limit``."""
    kept, total = [], 0
    async for chunk in chunks:
        total += len(chunk)
        if total > limit:
            raise _over_limit(url, status, f"runs past {limit:,} bytes", limit)
        kept.append(chunk)
    return b"".join(kept)


def _over_limit(url: str, status: int, what: str, limit: int) -> BackendError:
    return BackendError(redact(f"POST {url}: HTTP {status}, the response body {what}, over the {limit:,}-byte "
                               "limit of one response (is this an OpenAI-compatible endpoint? check the base URL)"))


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
