"""The cached model calls of ``udcg validate`` (and ``udcg answer``): per-passage p_abs, answers
and answer log-likelihoods, context answers.

Every call goes through the one resumable runner (``udcg.resumable``) and an append-only cache in the
run folder: chunks of ``reader.chunk_size`` requests cut from the whole request list, a chunk's
missing records computed and appended in one write, so a killed run, restarted, produces exactly
the values of an uninterrupted one, and a grown run computes only its new records.

Cache keys name content, not positions: an answer is keyed by ``qid<TAB>docid1<TAB>docid2…`` (the
question and the passages in prompt order), so a context drawn by two studies is answered once, and
the single-passage answers eRAG needs are the answers to the one-passage contexts of the k = 1 study.
"""

from __future__ import annotations

import contextlib
import logging
import math
from collections.abc import Sequence
from pathlib import Path

from udcg import resumable
from udcg.experiment.config import Config
from udcg.flows.reading import Progress, answer_expect, context_key, loglik_expect, split_context_key
from udcg.io.cache import AppendCache
from udcg.llm.base import Chat
from udcg.records import Question

log = logging.getLogger(__name__)

def context_requests(by_qid: dict[str, Question], keys: Sequence[str], cfg: Config) -> list[tuple[str, Chat]]:
    """(key, reader chat) for context keys: the question and its passages' texts in prompt order."""
    out = []
    for key in keys:
        qid, docids = split_context_key(key)
        q = by_qid[qid]
        out.append((key, passage_chat(q, [q.passage(docid).text for docid in docids], cfg)))
    return out


# ---------------------------------------------------------------- cached model calls


# ---------------------------------------------------------------- per-passage scores


def _annotate_config(cfg: Config):
    from udcg.annotate.runner import AnnotateConfig

    return AnnotateConfig(estimator=cfg.annotation.estimator, prompt_version=cfg.reader.prompt_version,
                          chunk_size=cfg.reader.chunk_size, seed=cfg.seed)




class _PassageCaches:
    """The three per-passage caches seen by the runner as one: a passage is cached when each cache
    that takes it holds it (the log-likelihood cache takes only questions with a reference answer);
    a chunk's records go to the caches that miss them, one append each."""

    def __init__(self, annotations: AppendCache, answers: AppendCache, logliks: AppendCache | None,
                 with_reference: set[str]) -> None:
        self.path = annotations.path
        self._caches = {"annotate": annotations, "answer": answers, "loglik": logliks}
        self._with_reference = with_reference

    def _takes(self, name: str, key: str) -> bool:
        return self._caches[name] is not None and (name != "loglik" or key in self._with_reference)

    def __contains__(self, key: str) -> bool:
        return all(key in cache for name, cache in self._caches.items() if self._takes(name, key))

    def get(self, key: str) -> dict | None:
        return None

    def append_many(self, records: list[dict], sync: bool = True) -> None:
        for name, cache in self._caches.items():
            if cache is None:
                continue
            new = [{"key": r["key"], **r[name]} for r in records if self._takes(name, r["key"]) and r["key"] not in cache]
            if new or sync:
                cache.append_many(new, sync=sync)


def read_passages(pooled: list[Question], backend, cfg: Config, run_dir: Path, progress: Progress,
                  loglik: bool) -> dict | None:
    """Fill the three per-passage caches (p_abs, the single-passage answer, and with ``loglik`` the
    log-likelihood of the reference answer) from one prompt pass per passage, for a reader that is
    a ``PromptReader`` and the first-token estimator; the separate steps then find them done.
    Returns timing stats, or None when nothing was read this way (they compute it themselves).

    Chunks are cut from the whole pool list, as in the annotation step (``udcg.resumable``); a passage
    is read when any of its records is missing, and only its missing records are appended."""
    from udcg.annotate.estimators import probability
    from udcg.records import Estimate
    from udcg.annotate.prompt import ABSTAIN
    from udcg.annotate.runner import annotation_body, provenance

    acfg = _annotate_config(cfg)
    if acfg.estimator != "first-token":
        return None
    requests = [(context_key(q.qid, [p.docid]), (q, p)) for q in pooled for p in q.passages]
    answer_fields = answer_expect(backend.name, cfg.reader.prompt_version, cfg.reader.max_new_tokens)
    loglik_fields = loglik_expect(backend.name, cfg.reader.prompt_version)

    def compute(items: list[tuple[Question, object]]) -> list[dict]:
        readings = backend.read([passage_chat(q, [p.text], cfg) for q, p in items], [ABSTAIN],
                                [q.answers[0] if q.answers else "" for q, _ in items], cfg.reader.max_new_tokens)
        out = []
        for (q, p), r in zip(items, readings, strict=True):
            p_abs = probability(r.first[ABSTAIN], f"{backend.name}: passage {context_key(q.qid, [p.docid])!r}")
            out.append({"annotate": annotation_body(q, p, backend.name, acfg, Estimate(p_abs)),
                        "answer": {"answer": r.answer.strip(), **answer_fields},
                        "loglik": {"answer": q.answers[0] if q.answers else "", "loglik": float(math.fsum(r.continuation)),
                                   **loglik_fields}})
        return out

    with contextlib.ExitStack() as stack:
        cache = run_dir / "cache"
        caches = _PassageCaches(
            stack.enter_context(resumable.open_cache(cache / "annotate.jsonl", provenance(backend.name, acfg))),
            stack.enter_context(resumable.open_cache(cache / "answers.jsonl", answer_fields)),
            stack.enter_context(resumable.open_cache(cache / "answer-ll.jsonl", loglik_fields)) if loglik else None,
            {key for key, (q, _) in requests if q.answers})
        if all(key in caches for key, _ in requests) or not backend.can_read():
            return None
        with progress(len(requests), f"read passages ({backend.name})", "passage") as bar:
            stats = resumable.fill(caches, requests, compute, cfg.reader.chunk_size, progress=bar.update,
                                   parallel=resumable.parallelism(backend))  # an API reader: chunks share its window
    return stats.summary()


def annotate_pools(pooled: list[Question], backend, cfg: Config, run_dir: Path, progress: Progress) -> tuple[dict, dict]:
    """p_abs of every pooled passage alone (the annotation runner); {qid<TAB>docid: Annotation}."""
    from udcg.annotate.runner import annotate

    acfg = _annotate_config(cfg)
    n = sum(len(q.passages) for q in pooled)
    with progress(n, f"annotate p_abs ({backend.name})", "passage") as bar:
        done, stats = annotate(pooled, backend, acfg, run_dir / "cache" / "annotate.jsonl", bar.update)
    return done, resumable.StepStats(stats.n_passages, stats.n_computed, stats.seconds).summary()


def passage_chat(q: Question, texts: Sequence[str], cfg: Config) -> Chat:
    from udcg.annotate.prompt import reader_chat

    return reader_chat(q.text, list(texts), cfg.reader.prompt_version)
