"""The model-facing steps of ``udcg validate``: pools, relevance, per-passage scores, answers, outcomes.

Every step that calls a model works through an append-only cache in the run folder
(``udcg.io.AppendCache``, fsynced per chunk). Work is cut into fixed chunks decided from the whole
request list, never from what is already cached, so a chunk always runs with the same batch
composition and a killed run, restarted, produces exactly the values of an uninterrupted one. (A
chunk torn by a kill is recomputed whole, for the same composition; only its missing records are
appended.)

Cache keys name content, not positions: an answer is keyed by ``qid<TAB>pid1<TAB>pid2…`` (the
question and the passages in prompt order), so a context drawn by two studies is answered once, and
the single-passage answers eRAG needs are the answers to the one-passage contexts of the k = 1 study.
"""

from __future__ import annotations

import contextlib
import dataclasses
import logging
import math
import time
from collections.abc import Callable, Sequence
from pathlib import Path

import numpy as np

from udcg.errors import InputError
from udcg.experiment.config import Config
from udcg.io.authors import read_authors
from udcg.io.cache import AppendCache
from udcg.io.files import atomic_write_json, atomic_write_jsonl, read_json
from udcg.llm.base import Chat, GenerationParams
from udcg.records import Question

log = logging.getLogger(__name__)

Progress = Callable[[int, str, str], object]  # (total, description, unit) -> context manager with update(n)


def context_key(qid: str, pids: Sequence[str]) -> str:
    """The cache key of a context: the question and the passages in prompt order."""
    return "\t".join((qid, *pids))


def split_key(key: str) -> tuple[str, list[str]]:
    qid, *pids = key.split("\t")
    return qid, pids


def context_requests(by_qid: dict[str, Question], keys: Sequence[str], cfg: Config) -> list[tuple[str, Chat]]:
    """(key, reader chat) for context keys: the question and its passages' texts in prompt order."""
    out = []
    for key in keys:
        qid, pids = split_key(key)
        q = by_qid[qid]
        out.append((key, passage_chat(q, [q.passage(pid).text for pid in pids], cfg)))
    return out


class LazyBackend:
    """A backend loaded on first use, so a rerun whose model work is all cached loads no model."""

    def __init__(self, model: str, threads: int | None = None, **options: object) -> None:
        self.model, self.options, self._backend, self.threads = model, options, None, threads
        self.name = Path(model).name if Path(model).expanduser().is_dir() else model
        self.load_seconds = 0.0

    def _get(self):
        if self._backend is None:
            from udcg.llm.registry import load_backend

            t0 = time.perf_counter()
            if self.threads:
                import torch

                torch.set_num_threads(self.threads)
            self._backend = load_backend(self.model, **self.options)
            self.load_seconds = time.perf_counter() - t0
            self.name = self._backend.name
        return self._backend

    def next_token_logprobs(self, chats, candidates):
        return self._get().next_token_logprobs(chats, candidates)

    def continuation_logprobs(self, requests):
        return self._get().continuation_logprobs(requests)

    def generate(self, chats, params=GenerationParams()):
        return self._get().generate(chats, params)

    def can_read(self) -> bool:
        """Whether the model (loaded now) is a ``udcg.llm.base.PromptReader``."""
        return callable(getattr(self._get(), "read", None))

    def read(self, chats, candidates, continuations, max_new_tokens=32):
        return self._get().read(chats, candidates, continuations, max_new_tokens)


# ---------------------------------------------------------------- questions and pools


def _select(questions: list[Question], cfg: Config) -> list[Question]:
    limit = cfg.data.limit
    if limit is None or limit >= len(questions):
        return questions
    if cfg.data.select == "first":
        return questions[:limit]
    # A seeded permutation, cut: a larger limit keeps the smaller one's questions, in the same order,
    # and adds new ones after them, so a run grown with --set data.limit=N reuses its finished chunks.
    rng = np.random.default_rng(np.random.SeedSequence([cfg.seed, 0x5E1EC7]))
    return [questions[i] for i in rng.permutation(len(questions))[:limit]]


def _load(ref: str, cfg: Config, limit: int | None = None) -> list[Question]:
    from udcg.io.sources import load_dataset

    return load_dataset(ref, limit=limit, data_dir=cfg.data.data_dir)


def _relabel(questions: list[Question], mode: str) -> list[Question]:
    from udcg.io.sources import label_by_containment

    if mode == "labels":
        return questions
    return label_by_containment(questions, only_missing=(mode == "labels+containment"))


def retrieve_pools(cfg: Config) -> tuple[list[Question], dict]:
    """The candidate pool of every selected question (pool rank order), with relevance labels,
    and ``pools.pool_stats`` of the pools against the questions' own labelled passages."""
    from udcg.experiment import pools

    early_limit = cfg.data.limit if (cfg.pool.source == "dataset" and cfg.data.select == "first") else None
    everything = _load(cfg.data.questions, cfg, early_limit)
    questions = _select(everything, cfg)
    if cfg.pool.source == "dataset":
        pooled = _relabel(pools.pool_from_dataset(questions, cfg.pool.size), cfg.pool.relevance)
        return pooled, pools.pool_stats(pooled, pooled)
    refs = cfg.pool.corpus or (cfg.data.questions,)
    sources = [everything if ref == cfg.data.questions else _load(ref, cfg) for ref in refs]
    corpus = pools.build_corpus([q for qs in sources for q in qs], relevant_only=cfg.pool.corpus_relevant_only)
    log.info("corpus of %d passages from %s", len(corpus), ", ".join(refs))
    retrieve = pools.bm25_pools if cfg.pool.source == "bm25" else pools.dense_pools
    pooled = retrieve(questions, corpus, cfg.pool.size, with_title=cfg.pool.with_title, relevance=cfg.pool.relevance)
    return pooled, {**pools.pool_stats(pooled, questions), "corpus_size": len(corpus)}


def pool_record(q: Question) -> dict:
    """A pool in the authors' format, with each passage's retriever score when it has one."""
    passages = []
    for p in q.passages:
        d = {"doc_id": p.pid, "title": p.title, "text": p.text, "is_relevant": p.relevant}
        if p.grade is not None:
            d["grade"] = p.grade
        if p.score is not None:
            d["score"] = p.score
        passages.append(d)
    return {"example_id": q.qid, "question": q.text, "answers": list(q.answers), "passages": passages}


def cached_pools(cfg: Config, run_dir: Path) -> tuple[list[Question], dict]:
    """``retrieve_pools``, reused from ``cache/pools.jsonl`` when data and pool settings are unchanged."""
    path, meta_path = run_dir / "cache" / "pools.jsonl", run_dir / "cache" / "pools.meta.json"
    fingerprint = cfg.fingerprint("data", "pool", "seed")
    if path.is_file() and meta_path.is_file() and read_json(meta_path).get("fingerprint") == fingerprint:
        raw, questions = read_authors(path)
        questions = [dataclasses.replace(q, passages=tuple(dataclasses.replace(p, score=rp.get("score"))
                                                           for p, rp in zip(q.passages, item["passages"])))
                     for q, item in zip(questions, raw)]
        return questions, read_json(meta_path)["stats"]
    pooled, stats = retrieve_pools(cfg)
    empty = [q.qid for q in pooled if len(q.passages) < 1]
    if empty:
        raise InputError(f"question {empty[0]!r} has an empty pool (check data.questions and pool settings)")
    atomic_write_jsonl(path, [pool_record(q) for q in pooled])
    atomic_write_json(meta_path, {"fingerprint": fingerprint, "stats": stats})
    return pooled, stats


def judge_relevance(pooled: list[Question], judge_backend, cfg: Config, run_dir: Path,
                    progress: Progress) -> tuple[list[Question], int]:
    """Relabel every pooled passage with the LLM relevance judge (paper Fig. 5). An unparseable
    reply keeps the rule label; their number is returned (and reported)."""
    from udcg.grade.judges import LLMJudge
    from udcg.grade.runner import passage_items, run_judge

    judge = LLMJudge(judge_backend, "relevance", prompt_version=cfg.grading.prompt_version,
                     max_new_tokens=cfg.grading.max_new_tokens)
    items = passage_items(pooled)
    with progress(len(items), f"judge relevance ({judge_backend.name})", "passage") as bar:
        records = run_judge(judge, items, run_dir / "cache" / "judge-relevance.jsonl", cfg.reader.chunk_size, bar.update)
    labels = {(r["qid"], r["pid"]): r["label"] for r in records}
    kept = sum(label is None for label in labels.values())
    out = [dataclasses.replace(q, passages=tuple(
        p if labels[q.qid, p.pid] is None else dataclasses.replace(p, relevant=labels[q.qid, p.pid] == "relevant")
        for p in q.passages)) for q in pooled]
    return out, kept


# ---------------------------------------------------------------- cached model calls


def _open_cache(path: Path, expect: dict) -> AppendCache:
    cache = AppendCache(path)
    for rec in cache.done.values():
        found = {k: rec.get(k) for k in expect}
        if found != expect:
            cache.close()
            raise InputError(f"{path}: made with {found}, this run uses {expect}; use another output folder "
                             "or delete that cache file")
    return cache


def _rate(stats: dict) -> dict:
    """Round the seconds and add the throughput of what was computed in this run."""
    seconds = stats["seconds"]
    return {**stats, "seconds": round(seconds, 3),
            "per_second": round(stats["computed"] / seconds, 3) if seconds > 0 else None}


def _chunks(items: list, size: int) -> list[list]:
    return [items[i:i + size] for i in range(0, len(items), size)]


def _dedup(requests: Sequence[tuple]) -> list[tuple]:
    seen: dict[str, tuple] = {}
    for r in requests:
        seen.setdefault(r[0], r)
    return list(seen.values())


def _answer_expect(model: str, prompt_version: str, max_new_tokens: int) -> dict:
    return {"model": model, "prompt_version": prompt_version, "max_new_tokens": max_new_tokens}


def _loglik_expect(model: str, prompt_version: str) -> dict:
    return {"model": model, "prompt_version": prompt_version}


def generate_cached(backend, requests: Sequence[tuple[str, Chat]], cache_path: Path, max_new_tokens: int,
                    prompt_version: str, chunk_size: int, progress: Progress, desc: str) -> tuple[dict[str, str], dict]:
    """Greedy answers for (key, chat) requests, resumable. Returns {key: answer} and timing stats.

    Only the requests missing from the cache are chunked, in order, so a run grown by questions or by
    a study answers only its new prompts. A chunk is appended in one write, so a resumed run cuts its
    remaining requests at the same boundaries as the run it resumes and batches them alike."""
    expect = _answer_expect(backend.name, prompt_version, max_new_tokens)
    params = GenerationParams(max_new_tokens=max_new_tokens, temperature=0.0, n=1)
    requests = _dedup(requests)
    stats = {"requests": len(requests), "computed": 0, "seconds": 0.0}
    with _open_cache(cache_path, expect) as cache, progress(len(requests), desc, "prompt") as bar:
        todo = [r for r in requests if r[0] not in cache]
        bar.update(len(requests) - len(todo))
        for chunk in _chunks(todo, chunk_size):
            t0 = time.perf_counter()
            answers = backend.generate([chat for _, chat in chunk], params)
            stats["seconds"] += time.perf_counter() - t0
            stats["computed"] += len(chunk)
            cache.append_many([{"key": key, "answer": a[0].strip(), **expect}
                               for (key, _), a in zip(chunk, answers, strict=True)])
            bar.update(len(chunk))
        return {key: cache.get(key)["answer"] for key, _ in requests}, _rate(stats)


def loglik_cached(backend, requests: Sequence[tuple[str, Chat, str]], cache_path: Path, prompt_version: str,
                  chunk_size: int, progress: Progress) -> tuple[dict[str, float], dict]:
    """log P(continuation | chat) (sum over its tokens) per (key, chat, continuation), resumable."""
    expect = _loglik_expect(backend.name, prompt_version)
    requests = _dedup(requests)
    stats = {"requests": len(requests), "computed": 0, "seconds": 0.0}
    with _open_cache(cache_path, expect) as cache, progress(len(requests), "answer log-likelihood", "passage") as bar:
        for chunk in _chunks(requests, chunk_size):
            if all(key in cache for key, _, _ in chunk):
                bar.update(len(chunk))
                continue
            t0 = time.perf_counter()
            lps = backend.continuation_logprobs([(chat, text) for _, chat, text in chunk])
            stats["seconds"] += time.perf_counter() - t0
            stats["computed"] += len(chunk)
            cache.append_many([{"key": key, "answer": text, "loglik": float(math.fsum(lp)), **expect}
                               for (key, _, text), lp in zip(chunk, lps, strict=True) if key not in cache])
            bar.update(len(chunk))
        return {key: min(0.0, cache.get(key)["loglik"]) for key, _, _ in requests}, _rate(stats)


# ---------------------------------------------------------------- per-passage scores


def _annotate_config(cfg: Config):
    from udcg.annotate.runner import AnnotateConfig

    return AnnotateConfig(estimator=cfg.annotation.estimator, prompt_version=cfg.reader.prompt_version,
                          chunk_size=cfg.reader.chunk_size, seed=cfg.seed)


def _can_read(backend) -> bool:
    can = getattr(backend, "can_read", None)
    return can() if callable(can) else callable(getattr(backend, "read", None))


def read_passages(pooled: list[Question], backend, cfg: Config, run_dir: Path, progress: Progress,
                  loglik: bool) -> dict | None:
    """Fill the three per-passage caches (p_abs, the single-passage answer, and with ``loglik`` the
    log-likelihood of the reference answer) from one prompt pass per passage, for a reader that is
    a ``PromptReader`` and the first-token estimator; the separate steps then find them done.
    Returns timing stats, or None when nothing was read this way (they compute it themselves).

    Chunks are cut from the whole pool list, as in the annotation step; a chunk is read again when
    any of its records is missing from any cache, and only its missing records are appended."""
    from udcg.annotate.estimators import Estimate, probability
    from udcg.annotate.prompt import ABSTAIN
    from udcg.annotate.runner import annotation_record, check_cache

    acfg = _annotate_config(cfg)
    if acfg.estimator != "first-token":
        return None
    items = [(q, p) for q in pooled for p in q.passages]
    answer_expect = _answer_expect(backend.name, cfg.reader.prompt_version, cfg.reader.max_new_tokens)
    loglik_expect = _loglik_expect(backend.name, cfg.reader.prompt_version)
    stats = {"requests": len(items), "computed": 0, "seconds": 0.0}
    with contextlib.ExitStack() as stack:
        annotations = stack.enter_context(AppendCache(run_dir / "cache" / "annotate.jsonl"))
        check_cache(annotations, backend.name, acfg)
        answers = stack.enter_context(_open_cache(run_dir / "cache" / "answers.jsonl", answer_expect))
        logliks = stack.enter_context(_open_cache(run_dir / "cache" / "answer-ll.jsonl", loglik_expect)) if loglik else {}

        def missing(q: Question, p) -> bool:
            key = context_key(q.qid, [p.pid])
            return key not in annotations or key not in answers or (loglik and bool(q.answers) and key not in logliks)

        chunks = [c for c in _chunks(items, cfg.reader.chunk_size) if any(missing(q, p) for q, p in c)]
        if not chunks or not _can_read(backend):
            return None
        with progress(sum(map(len, chunks)), f"read passages ({backend.name})", "passage") as bar:
            for chunk in chunks:
                t0 = time.perf_counter()
                readings = backend.read([passage_chat(q, [p.text], cfg) for q, p in chunk], [ABSTAIN],
                                        [q.answers[0] if q.answers else "" for q, _ in chunk], cfg.reader.max_new_tokens)
                stats["seconds"] += time.perf_counter() - t0
                stats["computed"] += len(chunk)
                new: dict[str, list[dict]] = {"annotate": [], "answer": [], "loglik": []}
                for (q, p), r in zip(chunk, readings, strict=True):
                    key = context_key(q.qid, [p.pid])
                    if key not in annotations:
                        p_abs = probability(r.first[ABSTAIN], f"{backend.name}: passage {key!r}")
                        new["annotate"].append(annotation_record(q, p, backend.name, acfg, Estimate(p_abs)))
                    if key not in answers:
                        new["answer"].append({"key": key, "answer": r.answer.strip(), **answer_expect})
                    if loglik and q.answers and key not in logliks:
                        new["loglik"].append({"key": key, "answer": q.answers[0], "loglik": float(math.fsum(r.continuation)),
                                              **loglik_expect})
                annotations.append_many(new["annotate"])
                answers.append_many(new["answer"])
                if loglik:
                    logliks.append_many(new["loglik"])
                bar.update(len(chunk))
    return _rate(stats)


def annotate_pools(pooled: list[Question], backend, cfg: Config, run_dir: Path, progress: Progress) -> tuple[dict, dict]:
    """p_abs of every pooled passage alone (the annotation runner); {qid<TAB>pid: Annotation}."""
    from udcg.annotate.runner import annotate

    acfg = _annotate_config(cfg)
    n = sum(len(q.passages) for q in pooled)
    with progress(n, f"annotate p_abs ({backend.name})", "passage") as bar:
        done, stats = annotate(pooled, backend, acfg, run_dir / "cache" / "annotate.jsonl", bar.update)
    return done, _rate({"requests": stats.n_passages, "computed": stats.n_computed, "seconds": stats.seconds})


def passage_chat(q: Question, texts: Sequence[str], cfg: Config) -> Chat:
    from udcg.annotate.prompt import reader_chat

    return reader_chat(q.text, list(texts), cfg.reader.prompt_version)


def grade_passages(pooled: list[Question], judge_backend, cfg: Config, run_dir: Path,
                   progress: Progress) -> tuple[dict[tuple[str, str], int | None], str]:
    """5-point utility grades for RA-nWG. ``rules``: relevant -> 5, not relevant -> 2 (answer-bearing
    passages are "decisive"; the rest "weak relevance", neither harmful nor useful); otherwise the
    LLM grade judge (seed 000's rubric), None where its reply could not be parsed."""
    if judge_backend is None:
        return {(q.qid, p.pid): 5 if p.relevant else 2 for q in pooled for p in q.passages}, "rules: relevant -> 5, else 2"
    from udcg.grade.judges import LLMJudge
    from udcg.grade.runner import passage_items, run_judge

    judge = LLMJudge(judge_backend, "grade", prompt_version=cfg.grading.prompt_version,
                     max_new_tokens=cfg.grading.max_new_tokens)
    items = passage_items(pooled)
    with progress(len(items), f"judge grade ({judge_backend.name})", "passage") as bar:
        records = run_judge(judge, items, run_dir / "cache" / "judge-grade.jsonl", cfg.reader.chunk_size, bar.update)
    return {(r["qid"], r["pid"]): r["label"] for r in records}, f"LLM grade judge {judge_backend.name} ({judge.prompt_id})"


# ---------------------------------------------------------------- outcomes


def grade_answers(items: list, judge_backend, cfg: Config, run_dir: Path, progress: Progress) -> tuple[dict, str]:
    """Outcome per answer item ({key: (label, note)}): rules by default (abstention detection,
    then the answer match), or the LLM answer judge (paper Fig. 6)."""
    from udcg.grade.judges import LLMJudge, RuleJudge
    from udcg.grade.runner import run_judge

    g = cfg.grading
    if judge_backend is None:
        judge = RuleJudge("answer", match=g.match, f1_threshold=g.f1_threshold,
                          require_relevant_context=g.require_relevant_context)
        records = [j.to_record(judge.task) for j in judge.judge(items)]
    else:
        judge = LLMJudge(judge_backend, "answer", prompt_version=g.prompt_version, max_new_tokens=g.max_new_tokens,
                         require_relevant_context=g.require_relevant_context)
        with progress(len(items), f"judge answers ({judge_backend.name})", "answer") as bar:
            records = run_judge(judge, items, run_dir / "cache" / "judge-answer.jsonl", cfg.reader.chunk_size, bar.update)
    out = {f"{r['qid']}\t{r['cid']}": (r["label"], r.get("note", "")) for r in records}
    return out, judge.name + (" (correct needs a relevant passage in the context)" if g.require_relevant_context else "")


def answer_items(pooled_by_qid: dict[str, Question], keys: Sequence[str], answers: dict[str, str]) -> list:
    """AnswerItems for context keys (cid = the pids joined by tabs, so key = qid<TAB>cid)."""
    from udcg.grade.judges import AnswerItem

    items = []
    for key in keys:
        qid, pids = split_key(key)
        q = pooled_by_qid[qid]
        relevant = {p.pid for p in q.passages if p.relevant}
        items.append(AnswerItem(qid=qid, cid="\t".join(pids), question=q.text, answers=q.answers, answer=answers[key],
                                context_has_relevant=any(pid in relevant for pid in pids)))
    return items
