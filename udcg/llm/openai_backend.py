"""A backend over any OpenAI-compatible chat-completions API (OpenAI, vLLM, SGLang, TGI, `udcg serve`).

- ``generate``: ``n`` answers per chat (the `sampling` estimator builds on it).
- ``next_token_logprobs``, ``continuation_logprobs``, ``read``: exact through ``/v1/completions``
  where the server scores text (``udcg.llm.openai_scoring``); else first tokens from the chat
  ``top_logprobs`` list (``first_token_logprobs``, the `api-logprobs` estimator): a candidate outside
  it gets -inf and a per-chat note (the estimators record it as censored, never 0), and
  continuations raise ``BackendError``.

Requests go out through one keep-alive connection pool and one event loop per backend
(``udcg.llm.openai_transport``: the SDK's httpx client class, a JSON body built once per prompt),
shared by every call, thread and base URL, under one backend-wide window of ``max_concurrency``
requests in flight and an optional requests-per-minute pace. Calls from several threads at once
(the runner's workers) share the window, so it stays full across chunks of work. A request's
retry goes to the next member of a fleet (``udcg.llm.openai_fleet``), past a dead one; retries
count against the pace; a ``Retry-After`` over ``max_retry_after`` fails the request at once.
Retried, with exponential backoff: 429 / 408 / 409 / 5xx, timeouts, dropped connections and bodies
that are not JSON. Results are per item: the ``*_each`` methods return a value
or a ``BackendError`` per chat and can report each result as it arrives (``on_result``), so one
failed request never loses the finished ones. The API key is read from the environment for every
request and never stored in the backend, messages, logs or ``repr``.

Payload building and response parsing are pure functions (``udcg.llm.openai_wire``), tested alone.
"""

from __future__ import annotations

import asyncio
import json
import logging
import os
import random
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import replace
from typing import Any

from udcg.errors import BackendError, InputError
from udcg.llm.base import Chat, GenerationParams
from udcg.llm.openai_fleet import Fleet
from udcg.llm.openai_results import ApiLogprobs, raise_on_errors
from udcg.llm.openai_scoring import ExactScoring
from udcg.llm.openai_settings import ClientSettings, ReadSettings, from_options
from udcg.llm.openai_target import SCORING as SCORING, SERVER_SOURCES, target  # SCORING: also read from here
from udcg.llm.openai_transport import JobBatch, Pacer, Transport, post_bounded, request_failure
from udcg.llm.openai_wire import (backoff_delay, check_key, endpoint, error_text, hint, retryable, candidate_logprob, chat_payload, chunk_seed, logprobs_payload,
                                  check_count, parse_choices, parse_first_top_logprobs, request_headers, retry_after_seconds)
from udcg.redact import redact, redact_echo, url_secrets

log = logging.getLogger(__name__)




# ---------------------------------------------------------------- backend


class OpenAIBackend(ExactScoring):
    """``udcg.llm.base.Backend`` over OpenAI-compatible ``/chat/completions`` endpoints.

    ``client``: the HTTP client's settings (``udcg.llm.openai_settings.ClientSettings``: the base
    URLs, the key's environment variable, requests in flight, pace, timeout, retries and backoff);
    ``read``: how answers and log-probabilities are asked for and read (``ReadSettings``: the top
    list's length, the server's cap on ``n``, candidates' first tokens, the tokenizer, the scoring
    route); ``name``: the name results record (default: ``model``). Each is checked when made.
    """

    def __init__(self, model: str, client: ClientSettings | None = None, read: ReadSettings | None = None, *,
                 name: str | None = None):
        client, read = client or ClientSettings(), read or ReadSettings()
        self.model, self.name, self.api_key_env = model, name or model, client.api_key_env
        self.tokenizer, self.scoring = read.tokenizer or model, read.scoring
        self._scorer_state: tuple[Any, str] | None = None  # (CompletionsScorer or None, why not): found out once
        self._scorer_lock = threading.Lock()  # ExactScoring finds it out once
        self.base_urls = client.base_urls
        self.max_concurrency, self.requests_per_minute, self.timeout = (client.max_concurrency, client.requests_per_minute,
                                                                        client.timeout)
        self.max_retries, self.backoff_base, self.backoff_max = client.max_retries, client.backoff_base, client.backoff_max
        self.max_retry_after, self.top_logprobs, self.max_n_per_request = (client.max_retry_after, read.top_logprobs,
                                                                           read.max_n_per_request)
        self.candidate_tokens = dict(read.candidate_tokens or {})
        self._rng = random.Random(client.jitter_seed)
        self._pacer = Pacer(client.requests_per_minute)
        self._fleet = Fleet(self.base_urls)  # which member each attempt goes to, which are down
        self._endpoints = tuple(endpoint(u, "chat/completions") for u in self.base_urls)
        self._transport = Transport(client.max_concurrency, client.timeout)
        check_key(os.environ.get(self.api_key_env) or "", self.api_key_env)  # before any request
        self._jobs: asyncio.Queue | None = None  # (call, index, job) for the workers; made on the transport's loop
        self._jobs_loop: asyncio.AbstractEventLoop | None = None
        self._workers, self._busy = [], 0  # the tasks taking jobs; how many of them are running one
        self.notes: dict[str, str] = {}  # what was found out about the server (e.g. it ignores n)
        self._deadlines: dict[asyncio.Task, float] = {}  # request task -> when it is overdue
        self._overdue: dict[asyncio.Task, bool] = {}
        self._watchdog: asyncio.Task | None = None

    @property
    def concurrent_requests(self) -> int:
        """Requests this backend keeps in flight (``udcg.resumable`` runs that many items at once)."""
        return self.max_concurrency

    def __repr__(self) -> str:
        return redact(f"OpenAIBackend(model={self.model!r}, base_urls={list(self.base_urls)!r}, api_key_env={self.api_key_env!r})")

    def _secrets(self) -> list[str]:
        """The key (read now, from the environment) and any credentials inside the base URLs."""
        key = os.environ.get(self.api_key_env) or ""
        return [key, *(s for u in self.base_urls for s in url_secrets(u))]

    # ------------------------------------------------------------ Backend protocol

    def generate(self, chats: Sequence[Chat], params: GenerationParams = GenerationParams()) -> list[list[str]]:
        return raise_on_errors(self.generate_each(chats, params), "generate")

    def next_token_logprobs(self, chats: Sequence[Chat], candidates: Sequence[str]) -> list[dict[str, float]]:
        results = self.first_token_scores(chats, candidates)
        for i, r in enumerate(results):
            if r.note:
                log.info("chat %d: %s", i, r.note)
        return [r.logprobs for r in results]

    # ------------------------------------------------------------ per-item API

    def generate_each(
        self,
        chats: Sequence[Chat],
        params: GenerationParams = GenerationParams(),
        on_result: Callable[[int, Any], None] | None = None,
    ) -> list[list[str] | BackendError]:
        """Like ``generate`` but per item: each entry is the answers or the ``BackendError``.
        More than ``max_n_per_request`` answers per chat are asked for in several requests, the c-th
        with seed ``chunk_seed(seed, c)``. A server that ignores ``n`` (one answer where more were
        asked: ``transformers serve``, llama.cpp) is found out at its first such answer, once; from
        then on every answer is its own request, seeded the same way (``notes["n"]`` says so)."""

        secrets = self._secrets()  # a server that echoes the key in an answer: never stored

        async def answers(chat: Chat) -> list[str]:
            out: list[str] = []
            while len(out) < params.n:
                size = 1 if "n" in self.notes else min(self.max_n_per_request, params.n - len(out))
                request = replace(params, n=size, seed=chunk_seed(params.seed, len(out) if "n" in self.notes else
                                                                  len(out) // self.max_n_per_request))
                got = await self._post(chat_payload(self.model, chat, request), parse=parse_choices)
                if len(got) == 1 and size > 1:
                    self._n_ignored(size)
                else:
                    check_count(got, size)
                out.extend(redact_echo(a, secrets) for a in got)
            return out

        return self._run_jobs([(lambda chat=chat: answers(chat)) for chat in chats], on_result)

    def _n_ignored(self, asked: int) -> None:
        if "n" not in self.notes:
            self.notes["n"] = (f"the server answered n={asked} with one answer (it ignores 'n'): "
                               "every answer was asked for in its own request, seeded apart")
            log.warning("%s: %s", self.name, self.notes["n"])

    def first_token_logprobs(self, chats: Sequence[Chat], candidates: Sequence[str]) -> list[ApiLogprobs]:
        return raise_on_errors(self.first_token_logprobs_each(chats, candidates), "first_token_logprobs")

    def first_token_logprobs_each(
        self,
        chats: Sequence[Chat],
        candidates: Sequence[str],
        on_result: Callable[[int, Any], None] | None = None,
    ) -> list[ApiLogprobs | BackendError]:
        """The `api-logprobs` estimator per chat, with a note naming absent candidates."""
        payloads = [logprobs_payload(self.model, chat, self.top_logprobs) for chat in chats]

        def parse(body: dict) -> ApiLogprobs:
            top = parse_first_top_logprobs(body)
            found, notes = {}, []
            for cand in candidates:
                found[cand], note = candidate_logprob(top, cand, self.candidate_tokens.get(cand))
                if note:
                    notes.append(note)
            return ApiLogprobs(found, "; ".join(notes), top)

        return self._run_jobs([(lambda p=p: self._post(p, parse=parse)) for p in payloads], on_result)

    # ------------------------------------------------------------ transport

    def close(self) -> None:
        """Close the connection pool and its event-loop thread (a later call opens them again)."""
        tasks = [t for t in (self._watchdog, *self._workers) if t is not None]
        self._watchdog, self._workers, self._jobs = None, [], None
        for task in tasks:
            if not task.get_loop().is_closed():
                task.get_loop().call_soon_threadsafe(task.cancel)
        self._transport.close()

    def _run_jobs(self, jobs: list[Callable[[], Any]], on_result) -> list[Any]:
        """Run every job (an async callable: one item's requests and parsing) concurrently under the
        backend-wide window; each result or ``BackendError`` in input order, reported as it arrives."""
        if not jobs:
            return []
        try:
            return self._transport.run(self._each(jobs, on_result))
        finally:
            if note := self._fleet.note():
                self.notes["fleet"] = note

    async def _each(self, jobs: list[Callable[[], Any]], on_result) -> list[Any]:
        """Every job goes to the backend's workers: at most ``max_concurrency`` long-lived tasks on the
        transport's loop, shared by every call and thread (the window), so a request costs a queue
        entry, not a task; workers start as jobs need them (20 jobs: 20, whatever the bound)."""
        call = JobBatch(len(jobs), on_result, asyncio.get_running_loop().create_future())
        queue = self._queue()
        for i, job in enumerate(jobs):
            queue.put_nowait((call, i, job))
        needed = min(self.max_concurrency, self._busy + queue.qsize())
        self._workers += [asyncio.get_running_loop().create_task(self._work(queue)) for _ in range(needed - len(self._workers))]
        try:
            await call.done
        except asyncio.CancelledError:
            call.abandoned = True  # its queued jobs are skipped
            raise
        if call.error is not None:
            raise call.error
        return call.results

    def _queue(self) -> asyncio.Queue:
        loop = asyncio.get_running_loop()
        if self._jobs is None or self._jobs_loop is not loop:  # first use, or a new loop after close()
            self._jobs, self._jobs_loop, self._workers, self._busy = asyncio.Queue(), loop, [], 0
        return self._jobs

    async def _work(self, queue: asyncio.Queue) -> None:
        while True:
            call, i, job = await queue.get()
            if call.abandoned:
                continue
            self._busy += 1
            try:
                value = await job()
            except BackendError as e:  # parse errors quote the body, which a server may fill with the key
                value = BackendError(redact(str(e), self._secrets()))
            except Exception as e:  # not an API failure (a bug): the call raises it
                value, call.error = None, call.error or e
            finally:
                self._busy -= 1
            call.finish(i, value)

    async def _watch_deadlines(self) -> None:
        """``timeout`` bounds a whole request, not each read (a server trickling one byte at a time
        would never time out): overdue requests are cancelled and answered as timed out. One
        watchdog per backend, so a request costs a dict entry, not a timer."""
        while True:
            await asyncio.sleep(min(1.0, self.timeout / 4))
            now = time.monotonic()
            for task, deadline in list(self._deadlines.items()):
                if now > deadline and task not in self._overdue:
                    self._overdue[task] = True
                    task.cancel()

    async def _post(self, payload: dict, path: str = "chat/completions", parse: Callable[[Any], Any] | None = None) -> Any:
        """POST one payload (serialised once) to ``path``; the body read by ``parse`` (as is without) or a
        scrubbed BackendError. A faulty member (unreachable, a body not JSON) passes the request at once
        to the next member not yet tried in this round; a round ends at another failure or when every
        member was tried, and the next (a retry) backs off. A member whose body ``parse`` refuses (not
        the OpenAI schema) is out of this request's turn; when every member is, it fails naming each fault."""
        content = json.dumps(payload, separators=(",", ":")).encode()
        problem, member, attempts, retry, tried, faults, garbage = "", self._fleet.first(), 0, 0, set(), {}, set()
        while True:
            client = self._transport.client(self._busy)  # made before the pace is claimed (a new pool takes a while)
            await self._pacer.wait()
            url = self._endpoints[member] if path == "chat/completions" else endpoint(self.base_urls[member], path)
            body, problem, retry_after, faulty = await self._attempt(client, url, content)
            attempts += 1
            if not problem:
                try:
                    parsed = body if parse is None else parse(body)
                except BackendError as e:
                    if len(self.base_urls) == 1:
                        raise
                    problem, faulty = f"POST {url}: {e}", True
                    garbage.add(member)
                else:
                    self._fleet.answered(member)
                    return parsed
            faults[member] = problem.partition(": ")[2]
            if faulty:
                self._fleet.failed(member, faults[member])
            tried.add(member)
            member = self._next_member(member, garbage)
            if faulty and member not in tried:  # another member, in this round: at once
                log.info("%s; trying the next member at once", redact(problem, self._secrets()))
                continue
            if retry == self.max_retries or len(garbage) == len(self.base_urls):
                break
            secrets, retry, tried = self._secrets(), retry + 1, set(garbage)
            if retry_after is not None and retry_after > self.max_retry_after:
                raise BackendError(redact(f"{problem}; the server asks to retry after {retry_after:g}s, more than max_retry_after={self.max_retry_after:g}s", secrets))
            delay = retry_after if retry_after is not None else backoff_delay(retry - 1, self.backoff_base, self.backoff_max, self._rng.random())
            log.warning("%s; retry %d/%d in %.2fs", redact(problem, secrets), retry, self.max_retries, delay)
            await asyncio.sleep(delay)
        if len(faults) > 1:  # a fleet: one line naming each member's last fault
            problem = "every fleet member failed this request: " + "; ".join(f"{self.base_urls[i]}: {faults[i]}" for i in sorted(faults))
        where = f"; the server is set by {SERVER_SOURCES}" if "connection failed" in problem else ""
        raise BackendError(redact(f"{problem} (gave up after {attempts} attempts, max_retries={self.max_retries}){where}",
                                  self._secrets()))

    def _next_member(self, member: int, garbage: set[int]) -> int:
        """The member after ``member`` for a request's next attempt, past those that answered it garbage."""
        for _ in self.base_urls:
            member = self._fleet.after(member)
            if member not in garbage:
                break
        return member

    async def _attempt(self, client, url: str, content: bytes) -> tuple[Any, str, float | None, bool]:
        """One POST: (body, "", None, False), or (None, what went wrong, the Retry-After in seconds or
        None, whether the member is faulty: it could not be reached, or its body is not JSON) when it
        may be retried. A status that retrying
        cannot fix raises a scrubbed BackendError."""
        task = asyncio.current_task()
        self._deadlines[task] = time.monotonic() + self.timeout
        if self._watchdog is None or self._watchdog.get_loop() is not asyncio.get_running_loop():  # new after close()
            self._watchdog = asyncio.get_running_loop().create_task(self._watch_deadlines())
        try:
            response = await post_bounded(client, url, content, self._headers())  # a capped body
        except asyncio.CancelledError:
            if not self._overdue.get(task):  # cancelled by the caller, not by the deadline
                raise
            return None, f"POST {url}: timed out after {self.timeout:g}s (no complete answer in that time)", None, True
        except Exception as e:
            failure = request_failure(e)
            if failure is None:
                raise
            kind, cause = failure
            if kind == "timeout":
                return None, f"POST {url}: timed out after {self.timeout:g}s", None, True
            said = " ".join(str(cause).split())  # one line: aiohttp quotes the bad bytes over several
            return None, f"POST {url}: connection failed ({type(cause).__name__}: {said})", None, True
        finally:
            self._deadlines.pop(task, None)
            if self._overdue.pop(task, False):  # the deadline's cancel was absorbed here, whatever form it took
                task.uncancel()
        status = response.status_code
        if status >= 400:
            problem = f"POST {url}: HTTP {status}: {error_text(response)}"
            if not retryable(status):
                raise BackendError(redact(problem + hint(status, self.api_key_env), self._secrets())) from None
            return None, problem, retry_after_seconds(response.headers.get("retry-after")), False
        try:  # the body as sent (the parsers read the wire format, top_logprobs included)
            return json.loads(response.content), "", None, False
        except ValueError:  # a cut or garbled body (a proxy, a server restart): retried like a 5xx
            return None, f"POST {url}: HTTP {status} but the body is not JSON: {response.text[:200]!r}", None, True

    def _headers(self) -> dict[str, str]:
        """This request's headers: JSON, and the key read from the environment now (none when unset)."""
        return request_headers(os.environ.get(self.api_key_env) or "", self.api_key_env)


def from_registry(model: str, **kw: Any) -> OpenAIBackend:
    """``load_backend("openai:MODEL", base_urls=..., ...)``: a ``ModelSpec``'s flat options made
    into the backend's settings (``openai_settings.from_options``). Without ``base_urls`` (a spec
    not ``settled``): ``target``."""
    if not model:
        raise InputError("model 'openai:': give the served model name after the colon (e.g. openai:gpt-4o-mini)")
    if not kw.get("base_urls"):
        kw["base_urls"] = target(None, kw.get("api_key_env") or "OPENAI_API_KEY")[0]
    client, read, rest = from_options(kw)
    return OpenAIBackend(model, client, read, **rest)
