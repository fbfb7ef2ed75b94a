"""Resumable annotation: p_abs and utility for every (question, passage), for one model.

Work is cut into fixed chunks decided from the whole input (not from what is already done), so a
chunk always runs with the same batch composition and gives the same numbers. A finished chunk is
appended to a cache (JSONL, fsynced) in one write; killed and restarted, the runner skips every
chunk whose passages are all cached and recomputes the rest, so the final output is identical to
an uninterrupted run. The output is written atomically at the end.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path

from udcg.errors import InputError
from udcg.io import AppendCache
from udcg.llm.base import Backend
from udcg.records import Annotation, Question

log = logging.getLogger(__name__)

ESTIMATORS = ("first-token", "sequence", "sampling", "api-logprobs")


@dataclass(frozen=True)
class AnnotateConfig:
    estimator: str = "first-token"
    prompt_version: str = "udcg-code-v1"
    chunk_size: int = 32
    # sampling estimator only
    n_samples: int = 20
    temperature: float = 1.0
    target_width: float | None = None
    seed: int = 0


@dataclass
class AnnotateStats:
    n_passages: int = 0
    n_computed: int = 0
    seconds: float = 0.0
    notes: dict[str, int] = field(default_factory=dict)

    @property
    def passages_per_s(self) -> float:
        return self.n_computed / self.seconds if self.seconds > 0 else float("nan")


def _key(qid: str, pid: str) -> str:
    return f"{qid}\t{pid}"


def _estimate(backend: Backend, chats: list, cfg: AnnotateConfig) -> list:
    """One chunk -> one Estimate (p_abs, interval, samples, note) per chat, in order."""
    from udcg.annotate.estimators import abstention_estimates

    options = ({"n": cfg.n_samples, "temperature": cfg.temperature, "seed": cfg.seed, "target_width": cfg.target_width}
               if cfg.estimator == "sampling" else {})
    return abstention_estimates(backend, chats, cfg.estimator, **options)


def annotate(questions: Sequence[Question], backend: Backend, cfg: AnnotateConfig, cache_path: str | Path,
             progress: Callable[[int], None] | None = None) -> tuple[dict[str, Annotation], AnnotateStats]:
    """Annotate every passage; returns {qid<TAB>pid: Annotation} and run statistics."""
    from udcg.annotate.prompt import reader_chat

    if cfg.estimator not in ESTIMATORS:
        raise InputError(f"--estimator {cfg.estimator!r}: unknown (choose one of {', '.join(ESTIMATORS)})")
    if cfg.chunk_size < 1:
        raise InputError(f"chunk size {cfg.chunk_size}: must be >= 1")
    items = [(q, p) for q in questions for p in q.passages]
    chunks = [items[i:i + cfg.chunk_size] for i in range(0, len(items), cfg.chunk_size)]
    stats = AnnotateStats(n_passages=len(items))
    with AppendCache(cache_path) as cache:
        for rec in cache.done.values():
            same = (rec["model"], rec["estimator"], rec["prompt_version"]) == (backend.name, cfg.estimator, cfg.prompt_version)
            if not same:
                raise InputError(f"{cache_path}: cache made with model={rec['model']!r}, estimator={rec['estimator']!r}, "
                                 f"prompt={rec['prompt_version']!r}; use the same settings or delete the cache")
        for chunk in chunks:
            keys = [_key(q.qid, p.pid) for q, p in chunk]
            if all(k in cache for k in keys):
                if progress:
                    progress(len(chunk))
                continue
            chats = [reader_chat(q.text, [p.text], cfg.prompt_version) for q, p in chunk]
            t0 = time.perf_counter()
            results = _estimate(backend, chats, cfg)
            stats.seconds += time.perf_counter() - t0
            stats.n_computed += len(chunk)
            records = []
            for (q, p), key, r in zip(chunk, keys, results, strict=True):
                a = Annotation(qid=q.qid, pid=p.pid, model=backend.name, estimator=cfg.estimator, p_abs=r.p_abs,
                               prompt_version=cfg.prompt_version, ci_low=r.ci_low, ci_high=r.ci_high,
                               n_samples=r.n_samples, note=r.note)
                records.append({"key": key, **asdict(a)})
            cache.append_many(records)
            if progress:
                progress(len(chunk))
        done = {k: Annotation(**{f: v for f, v in rec.items() if f != "key"}) for k, rec in cache.done.items()}
    for a in done.values():
        if a.note:
            stats.notes[a.note] = stats.notes.get(a.note, 0) + 1
    return done, stats
