"""Resumable annotation: p_abs and utility for every (question, passage), for one model.

The work runs through the one resumable runner (``udcg.resumable``): chunks of ``chunk_size`` passages
cut from the whole input, each finished chunk appended to the cache (JSONL, fsynced) in one write;
killed and restarted, the runner computes only what is missing, so the final output is identical to
an uninterrupted run. The output is written atomically at the end.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from udcg import resumable
from udcg.errors import BackendError, InputError
from udcg.annotate.prompt import DEFAULT_VERSION
from udcg.io.cache import AppendCache
from udcg.llm.base import Backend, BaseBackend, Capabilities
from udcg.records import Annotation, Question

log = logging.getLogger(__name__)
# An annotation cache record's keys, in the order written (the file's format, whatever the order of
# the Annotation's fields): its docid under the key "pid"; censored true, else null.
CACHE_KEYS = ("qid", "pid", "model", "estimator", "p_abs", "prompt_version", "ci_low", "ci_high", "n_samples", "note",
              "estimator_used", "censored")
_ATTRIBUTE = {"pid": "docid"}


@dataclass(frozen=True)
class AnnotateConfig:
    estimator: str = "first-token"
    prompt_version: str = DEFAULT_VERSION
    chunk_size: int | None = None  # passages per cached, fsynced unit of work; None: the backend's (its chunk_size)
    # sampling estimator only
    n_samples: int = 20
    temperature: float = 1.0
    target_width: float | None = None
    seed: int = 0


@dataclass
class AnnotateStats:
    n_passages: int = 0
    n_computed: int = 0
    n_changed: int = 0  # cached pairs computed again: the question or passage text changed
    n_censored: int = 0  # pairs whose p_abs is censored (outside an API's top-k list)
    seconds: float = 0.0
    notes: dict[str, int] = field(default_factory=dict)

    @property
    def passages_per_s(self) -> float:
        return self.n_computed / self.seconds if self.seconds > 0 else float("nan")


def annotation_key(qid: str, docid: str) -> str:
    """The cache key of one (question, passage) annotation."""
    return resumable.key(qid, docid)


def cached_annotations(cache: AppendCache) -> dict[str, Annotation]:
    """Every finished annotation of a cache, ``{annotation_key: Annotation}``; a damaged record (a
    p_abs of 5.0 or "0.3", a field missing) is one error naming the file, line, field and the fix."""
    out = {}
    for k, rec in cache.done.items():
        problem = _record_problem(rec)
        if problem:
            line = cache.line_of(k)
            raise InputError(f"{cache.path}{f':{line}' if line else ''}: cache record {resumable.shown_key(k)!r}: {problem} (the "
                             "file was edited or damaged: delete this line to compute the pair again, or the cache file "
                             "to start over)")
        out[k] = annotation_from(rec)
    return out


def annotation_record(a: Annotation) -> dict:
    """An annotation as a cache record's fields, ``CACHE_KEYS`` in order."""
    record = {key: getattr(a, _ATTRIBUTE.get(key, key)) for key in CACHE_KEYS}
    record["censored"] = True if a.censored else None
    return record


def annotation_from(record: dict) -> Annotation:
    """The Annotation of a checked cache record (``annotation_record``'s inverse); a record of an
    older version, without the later keys, takes their defaults."""
    values = {_ATTRIBUTE.get(key, key): record[key] for key in CACHE_KEYS if key in record}
    values["censored"] = bool(values.get("censored"))
    return Annotation(**values)


def _record_problem(rec: dict) -> str:
    """What is wrong with a cached annotation record, or ""."""
    for name in ("qid", "pid", "model", "estimator", "prompt_version"):
        if not isinstance(rec.get(name), str):
            return f"field {name!r} is {'missing' if name not in rec else repr(rec[name])[:40]}, not text"
    for name in ("p_abs", "ci_low", "ci_high"):
        value = rec.get(name)
        if value is None and name != "p_abs":
            continue
        if isinstance(value, bool) or not isinstance(value, (int, float)) or not 0.0 <= value <= 1.0:
            return f"field {name!r} is {'missing' if name not in rec else repr(value)[:40]}, not a probability in [0, 1]"
    n = rec.get("n_samples")
    if n is not None and (isinstance(n, bool) or not isinstance(n, int) or n < 1):
        return f"field 'n_samples' is {n!r:.40}, not a positive integer"
    if not isinstance(rec.get("note", ""), str):
        return "field 'note' is not text"
    return ""


def _estimate(backend: Backend, chats: list, cfg: AnnotateConfig) -> list:
    """One chunk -> one Estimate (p_abs, interval, samples, note) per chat, in order."""
    from udcg.annotate.estimators import abstention_estimates

    options = ({"n": cfg.n_samples, "temperature": cfg.temperature, "seed": cfg.seed, "target_width": cfg.target_width}
               if cfg.estimator == "sampling" else {})
    return abstention_estimates(backend, chats, cfg.estimator, **options)


class _Replay(BaseBackend):
    """Serves the finished results of a failed API batch again, so they become estimates exactly as
    in a successful call (no second request)."""

    capabilities = Capabilities(api=True, top_list=True)

    def __init__(self, name: str, rows: list):
        self.name, self._rows = name, rows

    def next_token_logprobs(self, chats: list, candidates: Sequence[str]) -> list:
        return [r.logprobs for r in self._rows]

    def first_token_logprobs(self, chats: list, candidates: Sequence[str]) -> list:
        return self._rows

    first_token_scores = first_token_logprobs


def _estimate_keeping_finished(backend: Backend, chats: list, cfg: AnnotateConfig) -> tuple[list, BackendError | None]:
    """Estimates per chat, and None with the error for the chats whose API request failed after its
    retries (``BatchError.results`` holds the finished ones); other failures propagate."""
    try:
        return _estimate(backend, chats, cfg), None
    except BackendError as e:
        results = getattr(e, "results", None)
        if cfg.estimator not in ("api-logprobs", "first-token") or not isinstance(results, list) or len(results) != len(chats):
            raise
        ok = [i for i, r in enumerate(results) if not isinstance(r, BaseException) and hasattr(r, "logprobs")]
        estimates = _estimate(_Replay(backend.name, [results[i] for i in ok]), [chats[i] for i in ok], cfg) if ok else []
        out: list = [None] * len(chats)
        for i, est in zip(ok, estimates, strict=True):
            out[i] = est
        return out, e


def provenance(model: str, cfg: AnnotateConfig) -> dict:
    """The settings every record of an annotation cache holds (``udcg.resumable.check_provenance``): with
    the sampling estimator, its settings too, so that a rerun with another --samples, --temperature,
    --target-width or --seed is refused (as ``answer`` refuses another --max-new-tokens), never
    served the old estimates."""
    return {"model": model, "estimator": cfg.estimator, "prompt_version": cfg.prompt_version, **_sampling(cfg)}


def _sampling(cfg: AnnotateConfig) -> dict:
    if cfg.estimator != "sampling":
        return {}
    return {"samples": cfg.n_samples, "temperature": cfg.temperature, "target_width": cfg.target_width, "seed": cfg.seed}


def annotation_body(q: Question, p, model: str, cfg: AnnotateConfig, estimate) -> dict:
    """The cache record of one finished annotation, without its key (the runner adds it)."""
    a = Annotation(qid=q.qid, docid=p.docid, model=model, estimator=cfg.estimator, p_abs=estimate.p_abs,
                   prompt_version=cfg.prompt_version, ci_low=estimate.ci_low, ci_high=estimate.ci_high,
                   n_samples=estimate.n_samples, note=estimate.note,
                   estimator_used=getattr(estimate, "estimator_used", "") or cfg.estimator,
                   censored=bool(getattr(estimate, "censored", False)))
    return {**annotation_record(a), **_sampling(cfg)}


def shown_fingerprint(q: Question, p, prompt_version: str) -> str:
    """The fingerprint of what the reader is shown for one pair: the question and passage texts under
    one prompt version (the chat is rendered from these alone; model and estimator are the cache's
    provenance)."""
    return resumable.fingerprint((q.text, p.text, prompt_version))


def to_compute(cache: AppendCache, questions: Sequence[Question], cfg: AnnotateConfig) -> int:
    """Pairs ``annotate`` would compute: not in the cache, or cached for another text (no model needed to say)."""
    count = 0
    for q in questions:
        for p in q.passages:
            rec = cache.get(annotation_key(q.qid, p.docid))
            count += rec is None or resumable.is_stale(rec, shown_fingerprint(q, p, cfg.prompt_version))
    return count


def annotate(questions: Sequence[Question], backend: BaseBackend, cfg: AnnotateConfig, cache_path: str | Path,
             progress: Callable[[int], None] | None = None) -> tuple[dict[str, Annotation], AnnotateStats]:
    """Annotate every passage; returns {qid<TAB>docid: Annotation} and run statistics."""
    from udcg.annotate.estimators import estimator_names
    from udcg.annotate.prompt import reader_chat

    if cfg.estimator not in estimator_names():
        raise InputError(f"--estimator {cfg.estimator!r}: unknown (choose one of {', '.join(estimator_names())})")
    items = [(q, p) for q in questions for p in q.passages]

    def seen(item: tuple[Question, object]) -> str:  # what the reader is shown: the rendered chat
        return shown_fingerprint(item[0], item[1], cfg.prompt_version)

    def compute(chunk: list[tuple[Question, object]]) -> list[dict | None]:
        # A chunk cut by a failed API request keeps its finished passages (the rest is computed on resume).
        chats = [reader_chat(q.text, [p.text], cfg.prompt_version) for q, p in chunk]
        results, failure = _estimate_keeping_finished(backend, chats, cfg)
        bodies = [None if r is None else annotation_body(q, p, backend.name, cfg, r)
                  for (q, p), r in zip(chunk, results, strict=True)]
        if failure is not None:
            raise resumable.Unfinished(bodies, failure)
        return bodies

    with resumable.open_cache(cache_path, provenance(backend.name, cfg)) as cache:
        ran = resumable.fill(cache, [(annotation_key(q.qid, p.docid), (q, p)) for q, p in items], compute,
                             cfg.chunk_size or (lambda: backend.chunk_size),
                             progress=progress, parallel=resumable.parallelism(backend), fingerprint=seen)
        done = cached_annotations(cache)
    stats = AnnotateStats(n_passages=len(items), n_computed=ran.computed, n_changed=ran.changed, seconds=ran.seconds)
    for a in done.values():
        if a.note:
            stats.notes[a.note] = stats.notes.get(a.note, 0) + 1
        stats.n_censored += bool(a.censored)
    if stats.n_censored:
        log.warning("%s", censored_warning(stats.n_censored, len(done)))
    return done, stats


def censored_warning(n_censored: int, n: int) -> str:
    """The line that warns of censored p_abs values, with their share and the fix."""
    from udcg.annotate.estimators import CENSORED_FIX

    return (f"warning: p_abs censored for {n_censored} of {n} pairs ({n_censored / n:.1%}): NO-RESPONSE was outside the "
            f"server's top log-probabilities, so p_abs is only known to lie below a bound (recorded as half of it); {CENSORED_FIX}")
