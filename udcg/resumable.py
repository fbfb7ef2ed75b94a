"""The one resumable runner every model step uses: requests in, records in an append-only cache out.

A request is ``(key, payload)``; its finished record is one line ``{"key": key, **body}`` of a
``udcg.io.cache.AppendCache``. One policy for every step (annotation, judging, answers, per-passage
reads):

- **keys** name content, not positions: ``key(*parts)`` joins the parts with tabs
  (``qid<TAB>docid``, ``qid<TAB>docid1<TAB>docid2…``, ``qid<TAB>cid``); a tab or backslash inside an id
  is escaped (``\t``, ``\\``), so two different id lists never share a key (ids without them, all
  ids of older caches, keep their key);
- **what the model saw**: with ``fingerprint(payload)`` (a hash of the rendered prompt), each record
  holds it as ``input``; a cached record whose ``input`` differs (the question, passage or corpus
  text was edited) is computed again and counted (``StepStats.changed``). Records of caches made
  before fingerprints have no ``input`` and are used as they are;
- **provenance**: a cache holds the settings that made each record (model, prompt, estimator, …);
  ``check_provenance`` refuses a cache made with other settings, naming both and the fix;
- **chunks** are cut from the whole request list, in order, never from what is cached, so a chunk
  always has the same batch mates: a killed process, restarted, computes its unfinished chunks exactly
  as an uninterrupted one did. A chunk is computed when any of its records is missing, and then its
  missing records only (work already done is never redone, so a run grown by questions, runs or a
  study costs only its new records); they are appended in one ``append_many`` (one fsync). A chunk
  torn by a kill (a short last line) is cut off on open and computed again;
- **in parallel** (``parallel`` > 1, for an API model that keeps that many requests in flight):
  the missing records are cut into pieces of two windows (2 x ``parallel`` requests) that
  ``_WORKERS`` threads compute at once, so the backend's window of requests in flight stays full
  across pieces (no barrier between chunks). Finished records go to the cache as each piece
  finishes (written and flushed: a kill -9 loses only the pieces in flight, at most
  ``_WORKERS`` x 2 windows of requests), and are fsynced every ``SYNC_SECONDS`` (a machine crash
  loses at most that much finished work) and at the end. Requests to an API are independent of
  their batch mates, so pieces need no fixed composition. After a failure no new piece starts;
  the finished ones are kept and the error names the resume;
- **progress** ``progress(n)``: n requests done (the cached ones first, then chunk by chunk; within a
  chunk as the backend says how far its call has got, ``udcg.progress.advance``, the chunk's last
  request counted once the chunk is saved);
- **stats** ``StepStats``: requests, records computed in this call, seconds spent computing.
"""

from __future__ import annotations

import hashlib
import json
import re
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Protocol, TypeVar

from udcg.errors import BackendError, InputError
from udcg.io.cache import AppendCache
from udcg.progress import metered

if TYPE_CHECKING:
    from udcg.llm.base import BaseBackend

T = TypeVar("T")
_ESCAPED = re.compile(r"\\(t|\\)")
SYNC_SECONDS = 1.0  # in a parallel fill, finished records are fsynced this often (and at the end)
# Threads of a parallel fill, each computing pieces of 2 x window requests. Measured against an
# instant local server (scripts/bench_api.py, 2 cores): 4 threads with pieces of window / 2 and an
# fsync every window / 2 records reached 0.79-0.83 of a raw client; fewer, larger pieces wake the
# runner threads (and take the interpreter lock from the HTTP loop) a quarter as often, and an
# fsync per second instead of per piece takes disk flushes off the path: 0.9 and above.
_WORKERS = 2


def key(*parts: str) -> str:
    """The cache key of a request: its parts (question id, passage ids, …) joined by tabs, a tab or
    backslash inside a part escaped."""
    return "\t".join(p.replace("\\", "\\\\").replace("\t", "\\t") if ("\t" in p or "\\" in p) else p for p in parts)


def split_key(k: str) -> list[str]:
    """The parts of a key (the inverse of ``key``)."""
    if "\\" not in k:
        return k.split("\t")
    return [_ESCAPED.sub(lambda m: "\t" if m.group(1) == "t" else "\\", part) for part in k.split("\t")]


def fingerprint(obj: object) -> str:
    """A short hash of what a model is shown (a chat, a prompt): the ``input`` field of a record."""
    text = json.dumps(obj, sort_keys=True, ensure_ascii=False, separators=(",", ":"))
    return hashlib.blake2b(text.encode(), digest_size=12).hexdigest()


def is_stale(record: Mapping, seen: str) -> bool:
    """Whether a cached record was made for another input than ``seen`` (a record from before
    fingerprints holds no ``input`` and counts as current)."""
    return record.get("input", seen) != seen


def shown_key(k: str) -> str:
    """A key as a message shows it: ``q1 / d1``."""
    return " / ".join(split_key(k))


# ---------------------------------------------------------------- provenance


def _settings(values: Mapping[str, object]) -> str:
    return ", ".join(f"{name}={value!r}" for name, value in values.items())


def check_provenance(cache: AppendCache, expect: Mapping[str, object]) -> None:
    """Refuse a cache with a record made with other settings than ``expect`` (every record holds
    these fields): the error names the cache, both settings and the fix."""
    expect = dict(expect)
    for rec in cache.done.values():
        found = {name: rec.get(name) for name in expect}
        if found != expect:
            raise InputError(f"{cache.path}: cache made with {_settings(found)}, this run uses {_settings(expect)}; "
                             "use the same settings, another output, or delete that cache file")


def open_cache(path: str | Path, expect: Mapping[str, object] | None = None) -> AppendCache:
    """The cache at ``path`` (created if absent), checked against ``expect`` when given."""
    cache = AppendCache(path)
    if expect is not None:
        try:
            check_provenance(cache, expect)
        except InputError:
            cache.close()
            raise
    return cache


# ---------------------------------------------------------------- filling a cache


class Cache(Protocol):
    """What the runner needs of a cache (``AppendCache``, or several seen as one)."""

    path: Path

    def __contains__(self, key: str) -> bool: ...
    def get(self, key: str) -> dict | None: ...
    def append_many(self, records: list[dict], sync: bool = True) -> None: ...


@dataclass
class StepStats:
    requests: int = 0  # distinct requests
    computed: int = 0  # records computed in this call
    changed: int = 0  # of them, cached records computed again because what the model sees changed
    seconds: float = 0.0  # time spent computing them

    def summary(self) -> dict:
        """``{requests, computed, seconds, per_second}`` (seconds rounded; per_second None if none)."""
        return {"requests": self.requests, "computed": self.computed, "seconds": round(self.seconds, 3),
                "per_second": round(self.computed / self.seconds, 3) if self.seconds > 0 else None}


class Unfinished(Exception):
    """Raised by a compute function whose chunk finished only in part (an API request that failed
    after its retries): ``bodies`` holds one record body per payload, None where unfinished. The
    runner keeps the finished ones, then stops with ``error``."""

    def __init__(self, bodies: Sequence[dict | None], error: Exception) -> None:
        super().__init__(str(error))
        self.bodies, self.error = list(bodies), error


def chunks(items: Sequence[T], size: int) -> list[list[T]]:
    """``items`` cut in order into chunks of ``size`` (the last one shorter)."""
    if isinstance(size, bool) or not isinstance(size, int) or size < 1:
        raise InputError(f"chunk size {size!r}: must be a positive integer")
    return [list(items[i:i + size]) for i in range(0, len(items), size)]


def fill(cache: Cache, requests: Sequence[tuple[str, T]], compute: Callable[[list[T]], Sequence[dict]],
         chunk_size: int | Callable[[], int], *, progress: Callable[[int], object] | None = None,
         redo: Callable[[dict], bool] | None = None, parallel: int = 1,
         fingerprint: Callable[[T], str] | None = None) -> StepStats:
    """Compute every request missing from ``cache``, chunk by chunk (module docstring); return stats.

    ``compute(payloads)`` returns one record body per payload, in order (the runner adds ``key``
    first). A key given twice is computed once. ``redo(record)``: cached records to compute again
    (e.g. unparseable judgements); their new record is appended and replaces the old one on load.
    ``parallel``: requests the model keeps in flight (``parallelism(backend)``); above 1, pieces are
    computed by worker threads at once. ``fingerprint``: what the model sees, per payload (module
    docstring). ``chunk_size`` may be a function (the backend's own, ``BaseBackend.chunk_size``): it is
    asked only when some request is missing, so that a rerun whose work is all cached loads no model."""
    first: dict[str, T] = {}
    for k, payload in requests:
        first.setdefault(k, payload)
    unique = list(first.items())
    stats = StepStats(requests=len(unique))
    prints = {k: fingerprint(p) for k, p in unique} if fingerprint is not None else {}

    def missing(k: str) -> bool:
        if k not in cache:
            return True
        rec = cache.get(k)
        if prints and rec is not None and is_stale(rec, prints[k]):
            stats.changed += 1
            return True
        return redo is not None and redo(rec)

    wanted = [missing(k) for k, _ in unique]
    if callable(chunk_size):
        chunk_size = chunk_size() if any(wanted) else 1
    todos = [[item for item, want in part if want] for part in chunks(list(zip(unique, wanted)), chunk_size)]
    if progress is not None and len(unique) > sum(map(len, todos)):
        progress(len(unique) - sum(map(len, todos)))
    if parallel > 1:
        _fill_parallel(cache, [item for todo in todos for item in todo], compute, parallel, progress, stats,
                      unique, prints)
        return stats
    for todo in todos:
        if not todo:
            continue
        t0 = time.perf_counter()
        within = _Within(len(todo), progress)
        try:
            with metered(within if progress is not None else None):
                bodies, error = list(compute([p for _, p in todo])), None
        except Unfinished as e:
            bodies, error = e.bodies, e.error
        stats.seconds += time.perf_counter() - t0
        records = _records(todo, bodies, prints)
        if records:
            cache.append_many(records)
        stats.computed += len(records)
        if error is not None:
            _stop(error, cache, unique)
        if progress is not None:
            progress(len(todo) - within.shown)
    return stats


class _Within:
    """The progress of one chunk while it is computed: the backend's share done
    (``udcg.progress.advance``) as requests, the chunk's last one held back until it is saved."""

    def __init__(self, size: int, progress: Callable[[int], object] | None) -> None:
        self.size, self.progress, self.shown = size, progress, 0

    def __call__(self, share: float) -> None:
        now = min(int(share * self.size), self.size - 1)
        if now > self.shown and self.progress is not None:
            self.progress(now - self.shown)
            self.shown = now


def parallelism(backend: BaseBackend | None) -> int:
    """How many requests ``backend`` keeps in flight: its ``concurrent_requests`` (an API backend's
    window; 1 for a local model, which computes one batch at a time); 1 without a model (rules)."""
    return 1 if backend is None else max(1, backend.concurrent_requests)


def _records(todo: list[tuple[str, T]], bodies: Sequence[dict | None], prints: Mapping[str, str]) -> list[dict]:
    if len(bodies) != len(todo):
        raise BackendError(f"{len(bodies)} results for {len(todo)} requests (a model step returns one per request)")
    if prints:
        return [{"key": k, "input": prints[k], **body} for (k, _), body in zip(todo, bodies) if body is not None]
    return [{"key": k, **body} for (k, _), body in zip(todo, bodies) if body is not None]


def _stop(error: Exception, cache: Cache, unique: list[tuple[str, T]]):
    finished = sum(k in cache for k, _ in unique)
    raise BackendError(f"{error}; {finished} of {len(unique)} records are finished and kept in {cache.path} "
                       "(rerun the same command to resume)") from None


def _fill_parallel(cache: Cache, todo: list[tuple[str, T]], compute: Callable[[list[T]], Sequence[dict]],
                   parallel: int, progress: Callable[[int], object] | None, stats: StepStats,
                   unique: list[tuple[str, T]], prints: Mapping[str, str]) -> None:
    """Worker threads compute pieces of ``todo`` at once; records are appended as pieces finish."""
    if not todo:
        return
    piece = 2 * parallel
    pieces = iter(chunks(todo, piece))
    lock = threading.Lock()
    state = {"unsynced": 0, "synced_at": time.monotonic(), "error": None}

    def finish(part: list[tuple[str, T]], bodies: Sequence[dict | None], error: BaseException | None) -> None:
        with lock:  # one writer at a time; the network work of the other threads goes on
            records = _records(part, bodies, prints)
            if records:
                state["unsynced"] += len(records)
                due = time.monotonic() - state["synced_at"] >= SYNC_SECONDS
                cache.append_many(records, sync=due)
                if due:
                    state["unsynced"], state["synced_at"] = 0, time.monotonic()
            stats.computed += len(records)
            if error is not None and state["error"] is None:
                state["error"] = error
            if progress is not None:
                progress(len(part))

    def worker() -> None:
        while True:
            with lock:
                part = None if state["error"] is not None else next(pieces, None)
            if part is None:
                return
            try:
                bodies, error = list(compute([p for _, p in part])), None
            except Unfinished as e:
                bodies, error = e.bodies, e.error
            except BaseException as e:  # anything else stops the fill; the finished pieces stay
                bodies, error = [None] * len(part), e
            finish(part, bodies, error)

    t0 = time.perf_counter()
    workers = min(_WORKERS, -(-len(todo) // piece))
    with ThreadPoolExecutor(workers, thread_name_prefix="udcg-runner") as pool:
        for future in [pool.submit(worker) for _ in range(workers)]:
            future.result()
    stats.seconds += time.perf_counter() - t0
    if state["unsynced"]:
        cache.append_many([], sync=True)
    error = state["error"]
    if isinstance(error, BackendError):
        _stop(error, cache, unique)
    if error is not None:
        raise error
