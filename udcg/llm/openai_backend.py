"""A backend over any OpenAI-compatible chat-completions API (OpenAI, vLLM, SGLang, TGI, `udcg serve`).

- ``generate``: ``n`` answers per chat (the `sampling` estimator builds on it).
- ``next_token_logprobs``: the `api-logprobs` estimator: the first generated position's
  ``top_logprobs`` list; a candidate whose first token is not in the list gets -inf (p = 0), and
  ``first_token_logprobs`` says so in a per-chat note.
- ``continuation_logprobs``: needs open weights; raises ``BackendError``.

Requests go through the ``openai`` SDK (``AsyncOpenAI``: connections, timeouts, typed errors), run
concurrently under a concurrency bound and an optional requests-per-minute pace. Retries are ours,
not the SDK's (its ``max_retries`` is 0): its retries stay on one base URL, and ours go to the next
one, so a fleet of servers can share one corpus past a dead member; they count against the pace;
and a ``Retry-After`` (read from the SDK error's ``response``) longer than ``max_retry_after`` fails
the request at once. Retried: 429 / 408 / 409 / 5xx, timeouts, dropped connections and bodies that
are not JSON, with exponential backoff. Results are per item: the ``*_each`` methods return a value
or a ``BackendError`` per chat and can report each result as it arrives (``on_result``), so one
failed request never loses the finished ones. The API key is read from the environment for every
request and never stored in the backend, messages, logs or ``repr``.

Payload building and response parsing are pure functions (``udcg.llm.openai_wire``), tested alone.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import itertools
import json
import logging
import math
import os
import random
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from typing import Any

from udcg.errors import BackendError, InputError
from udcg.llm.base import Chat, GenerationParams
from udcg.llm.openai_wire import (backoff_delay, candidate_logprob, chat_payload, chunk_seed, logprobs_payload,
                                  parse_answers, parse_first_top_logprobs, retry_after_seconds)
from udcg.redact import redact, url_secrets

log = logging.getLogger(__name__)

RETRY_STATUSES = frozenset({408, 409, 429})  # plus every 5xx
# The SDK client needs a key to start; every request overrides it (_auth_header), so it is never sent.
_KEY_SENT_PER_REQUEST = "sent-per-request"


# ---------------------------------------------------------------- backend


@dataclass(frozen=True, slots=True)
class ApiLogprobs:
    """First-token log-probabilities of the candidates for one chat, from the API's top list."""

    logprobs: dict[str, float]  # candidate -> logprob (-inf when absent from the top list)
    note: str = ""  # non-empty when a candidate was absent (its probability is reported as 0)
    top: dict[str, float] | None = None  # the raw top list, token text -> logprob


class BatchError(BackendError):
    """Some requests of a batch failed after their retries. ``results`` holds, in input order, the
    value of every finished request and the ``BackendError`` of every failed one."""

    def __init__(self, message: str, results: list[Any]):
        super().__init__(message)
        self.results = results


class _Pacer:
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


class OpenAIBackend:
    """``udcg.llm.base.Backend`` over OpenAI-compatible ``/chat/completions`` endpoints.

    ``base_urls``: one URL or several, each ending where the OpenAI client's ``base_url`` ends
    (e.g. ``http://127.0.0.1:8000/v1``). ``api_key_env``: the environment variable holding the key
    (unset: no Authorization header, fine for local servers). ``max_retries``: retries per request
    after the first attempt. ``max_retry_after``: the longest ``Retry-After`` honoured; a server
    asking for a longer wait fails the request. ``max_n_per_request``: the server's cap on ``n``
    (OpenAI: 128); more answers per chat are asked for in several requests. ``requests_per_minute``:
    request starts are spaced by 60/rpm seconds, retries included. ``candidate_tokens``: the first
    token of a candidate as the API's tokenizer writes it (e.g. ``{"NO-RESPONSE": "NO"}``); without
    it, the longest top-list token that is a prefix of the candidate is taken.
    """

    def __init__(
        self,
        model: str,
        base_urls: str | Sequence[str] = "https://api.openai.com/v1",
        *,
        name: str | None = None,
        api_key_env: str = "OPENAI_API_KEY",
        max_concurrency: int = 8,
        requests_per_minute: float | None = None,
        timeout: float = 60.0,
        max_retries: int = 5,
        backoff_base: float = 0.5,
        backoff_max: float = 30.0,
        max_retry_after: float = 120.0,
        top_logprobs: int = 20,
        max_n_per_request: int = 128,
        candidate_tokens: dict[str, str] | None = None,
        jitter_seed: int = 0,
    ):
        urls = [base_urls] if isinstance(base_urls, str) else list(base_urls)
        if not urls or not all(isinstance(u, str) and u.startswith(("http://", "https://")) for u in urls):
            raise InputError(redact(f"OpenAI backend: base URLs {urls!r} must be one or more http:// or https:// URLs "
                             "(e.g. http://127.0.0.1:8000/v1)"))
        for field, value, integer in (("max_concurrency", max_concurrency, True), ("timeout", timeout, False),
                                      ("max_n_per_request", max_n_per_request, True)):
            _check_positive(field, value, integer)
        if requests_per_minute is not None:
            _check_positive("requests_per_minute", requests_per_minute)
        if isinstance(max_retries, bool) or not isinstance(max_retries, int) or max_retries < 0:
            raise InputError(f"OpenAI backend: max_retries must be an integer >= 0, got {max_retries!r}")
        if isinstance(top_logprobs, bool) or not isinstance(top_logprobs, int) or not 1 <= top_logprobs <= 20:
            raise InputError(f"OpenAI backend: top_logprobs must be an integer in 1..20 (the API's limit), got {top_logprobs!r}")
        self.model, self.name, self.api_key_env = model, name or model, api_key_env
        self.base_urls = tuple(u.rstrip("/") for u in urls)
        self.max_concurrency, self.requests_per_minute, self.timeout = max_concurrency, requests_per_minute, timeout
        self.max_retries, self.backoff_base, self.backoff_max = max_retries, backoff_base, backoff_max
        self.max_retry_after, self.top_logprobs, self.max_n_per_request = max_retry_after, top_logprobs, max_n_per_request
        self.candidate_tokens = dict(candidate_tokens or {})
        self._rng = random.Random(jitter_seed)
        self._pacer = _Pacer(requests_per_minute)
        self._url_turn = itertools.count()

    def __repr__(self) -> str:
        return redact(f"OpenAIBackend(model={self.model!r}, base_urls={list(self.base_urls)!r}, api_key_env={self.api_key_env!r})")

    def _secrets(self) -> list[str]:
        """The key (read now, from the environment) and any credentials inside the base URLs."""
        key = os.environ.get(self.api_key_env) or ""
        return [key, *(s for u in self.base_urls for s in url_secrets(u))]

    # ------------------------------------------------------------ Backend protocol

    def generate(self, chats: Sequence[Chat], params: GenerationParams = GenerationParams()) -> list[list[str]]:
        return _raise_on_errors(self.generate_each(chats, params), "generate")

    def next_token_logprobs(self, chats: Sequence[Chat], candidates: Sequence[str]) -> list[dict[str, float]]:
        results = _raise_on_errors(self.first_token_logprobs_each(chats, candidates), "next_token_logprobs")
        for i, r in enumerate(results):
            if r.note:
                log.info("chat %d: %s", i, r.note)
        return [r.logprobs for r in results]

    def continuation_logprobs(self, requests: Sequence[tuple[Chat, str]]) -> list[list[float]]:
        raise BackendError(
            f"backend {self.name!r} is an OpenAI-compatible API: teacher-forced continuation log-probabilities "
            "need open weights (use a local model, e.g. --model qwen2.5-coder-0.5b, or the first-token/sampling estimators)"
        )

    # ------------------------------------------------------------ per-item API

    def generate_each(
        self,
        chats: Sequence[Chat],
        params: GenerationParams = GenerationParams(),
        on_result: Callable[[int, Any], None] | None = None,
    ) -> list[list[str] | BackendError]:
        """Like ``generate`` but per item: each entry is the answers or the ``BackendError``.
        More than ``max_n_per_request`` answers per chat are asked for in several requests."""
        sizes = [min(self.max_n_per_request, params.n - start) for start in range(0, params.n, self.max_n_per_request)]
        chunks = [replace(params, n=size, seed=chunk_seed(params.seed, c)) for c, size in enumerate(sizes)]
        items = [[chat_payload(self.model, chat, p) for p in chunks] for chat in chats]

        def parse(bodies: list[dict]) -> list[str]:
            return [a for body, p in zip(bodies, chunks, strict=True) for a in parse_answers(body, p.n)]

        return self._run_all(items, parse, on_result)

    def first_token_logprobs(self, chats: Sequence[Chat], candidates: Sequence[str]) -> list[ApiLogprobs]:
        return _raise_on_errors(self.first_token_logprobs_each(chats, candidates), "first_token_logprobs")

    def first_token_logprobs_each(
        self,
        chats: Sequence[Chat],
        candidates: Sequence[str],
        on_result: Callable[[int, Any], None] | None = None,
    ) -> list[ApiLogprobs | BackendError]:
        """The `api-logprobs` estimator per chat, with a note naming absent candidates."""
        items = [[logprobs_payload(self.model, chat, self.top_logprobs)] for chat in chats]

        def parse(bodies: list[dict]) -> ApiLogprobs:
            top = parse_first_top_logprobs(bodies[0])
            found, notes = {}, []
            for cand in candidates:
                found[cand], note = candidate_logprob(top, cand, self.candidate_tokens.get(cand))
                if note:
                    notes.append(note)
            return ApiLogprobs(found, "; ".join(notes), top)

        return self._run_all(items, parse, on_result)

    # ------------------------------------------------------------ transport

    def _run_all(self, items: list[list[dict]], parse: Callable[[list[dict]], Any], on_result) -> list[Any]:
        """Post every item's payloads (concurrently across items); parse each item's bodies."""
        if not items:
            return []
        coro = self._post_all(items, parse, on_result)
        try:
            asyncio.get_running_loop()
        except RuntimeError:
            return asyncio.run(coro)
        # Called from inside an event loop (a notebook): run ours in a worker thread.
        with concurrent.futures.ThreadPoolExecutor(1) as pool:
            return pool.submit(asyncio.run, coro).result()

    async def _post_all(self, items: list[list[dict]], parse, on_result) -> list[Any]:
        import openai

        gate = asyncio.Semaphore(self.max_concurrency)
        timeout = openai.Timeout(self.timeout, connect=min(self.timeout, 10.0))
        results: list[Any] = [None] * len(items)
        # One connection pool per call (an event loop's connections die with it), one client per
        # base URL over it. The SDK's retries are off: ours go to the next base URL (see _post).
        # The client holds no key: each request carries the one in the environment (_auth_header).
        async with openai.AsyncOpenAI(base_url=self.base_urls[0], api_key=_KEY_SENT_PER_REQUEST, timeout=timeout,
                                      max_retries=0) as first:
            clients = [first, *(first.with_options(base_url=url) for url in self.base_urls[1:])]

            async def one(i: int) -> None:
                async with gate:
                    try:
                        results[i] = parse([await self._post(clients, payload) for payload in items[i]])
                    except BackendError as e:  # parse errors quote the body, which a server may fill with the key
                        results[i] = BackendError(redact(str(e), self._secrets()))
                if on_result is not None:
                    on_result(i, results[i])

            await asyncio.gather(*(one(i) for i in range(len(items))))
        return results

    async def _post(self, clients: list, payload: dict) -> dict:
        """POST one payload, each attempt to the next base URL; the JSON body or a scrubbed BackendError."""
        problem = ""
        for attempt in range(self.max_retries + 1):
            turn = next(self._url_turn) % len(clients)
            await self._pacer.wait()
            body, problem, retry_after = await self._attempt(clients[turn], f"{self.base_urls[turn]}/chat/completions", payload)
            if not problem:
                return body
            if attempt == self.max_retries:
                break
            secrets = self._secrets()
            if retry_after is not None and retry_after > self.max_retry_after:
                raise BackendError(redact(f"{problem}; the server asks to retry after {retry_after:g}s, more than max_retry_after={self.max_retry_after:g}s", secrets))
            delay = retry_after if retry_after is not None else backoff_delay(attempt, self.backoff_base, self.backoff_max, self._rng.random())
            log.warning("%s; retry %d/%d in %.2fs", redact(problem, secrets), attempt + 1, self.max_retries, delay)
            await asyncio.sleep(delay)
        raise BackendError(redact(f"{problem} (gave up after {self.max_retries + 1} attempts)", self._secrets()))

    async def _attempt(self, client, url: str, payload: dict) -> tuple[Any, str, float | None]:
        """One POST: (body, "", None), or (None, what went wrong, the Retry-After in seconds or None)
        when it may be retried. A status that retrying cannot fix raises a scrubbed BackendError."""
        import openai

        try:
            raw = await client.chat.completions.with_raw_response.create(**payload, extra_headers=self._auth_header())
        except openai.APITimeoutError:
            return None, f"POST {url}: timed out after {self.timeout:g}s", None
        except openai.APIConnectionError as e:
            cause = e.__cause__ or e
            return None, f"POST {url}: connection failed ({type(cause).__name__}: {cause})", None
        except openai.APIStatusError as e:
            problem = f"POST {url}: HTTP {e.status_code}: {_error_text(e)}"
            if not _retryable(e.status_code):
                raise BackendError(redact(problem + _hint(e.status_code, self.api_key_env), self._secrets())) from None
            return None, problem, retry_after_seconds(e.response.headers.get("retry-after"))
        try:  # the body as sent (the parsers read the wire format, top_logprobs included)
            return json.loads(raw.content), "", None
        except ValueError:  # a cut or garbled body (a proxy, a server restart): retried like a 5xx
            return None, f"POST {url}: HTTP 200 but the body is not JSON: {raw.text[:200]!r}", None

    def _auth_header(self) -> dict[str, Any]:
        """The key, read from the environment now, as this request's Authorization header (none when unset)."""
        import openai

        key = os.environ.get(self.api_key_env) or ""
        return {"Authorization": f"Bearer {key}" if key else openai.Omit()}


def _check_positive(field: str, value, integer: bool = False) -> None:
    ok = isinstance(value, int) if integer else isinstance(value, (int, float)) and math.isfinite(value)
    if isinstance(value, bool) or not ok or value <= 0:
        raise InputError(f"OpenAI backend: {field} must be a positive {'integer' if integer else 'number'}, got {value!r}")


def _retryable(status: int) -> bool:
    return status in RETRY_STATUSES or status >= 500


def _hint(status: int, api_key_env: str) -> str:
    if status in (401, 403):
        return f" (check the API key in the environment variable {api_key_env})"
    if status == 404:
        return " (check the base URL, which should end in /v1, and the model name)"
    return ""


def _error_text(error) -> str:
    """The server's message in an SDK ``APIStatusError`` (its ``body`` is the JSON's ``error`` object, or the text)."""
    message = error.body.get("message") if isinstance(error.body, dict) else error.body
    if isinstance(message, str) and message.strip():
        return message[:300]
    return error.response.reason_phrase


def _raise_on_errors(results: list[Any], what: str) -> list[Any]:
    failed = [i for i, r in enumerate(results) if isinstance(r, BackendError)]
    if failed:
        first = results[failed[0]]
        raise BatchError(f"{what}: {len(failed)} of {len(results)} requests failed; first (item {failed[0]}): {first}", results)
    return results


def from_registry(model: str, **kw: Any) -> OpenAIBackend:
    """``load_backend("openai:MODEL", base_urls=..., ...)``. Without ``base_urls``: the
    comma-separated ``UDCG_OPENAI_BASE_URLS``, else ``OPENAI_BASE_URL``, else OpenAI's own API."""
    if not model:
        raise InputError("model 'openai:': give the served model name after the colon (e.g. openai:gpt-4o-mini)")
    if "base_urls" not in kw:
        env = os.environ.get("UDCG_OPENAI_BASE_URLS") or os.environ.get("OPENAI_BASE_URL")
        if env:
            kw["base_urls"] = [u.strip() for u in env.split(",") if u.strip()]
    return OpenAIBackend(model, **kw)

