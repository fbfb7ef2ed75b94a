"""The questions of an experiment and their candidate pools: selection, retrieval, relevance labels,
and the pool cache of a run folder (``cache/pools.jsonl``, reused while data and pool settings hold)."""

from __future__ import annotations

import dataclasses
import logging
from pathlib import Path

import numpy as np

from udcg.errors import InputError
from udcg.experiment.config import Config
from udcg.io.authors import read_authors
from udcg.io.files import atomic_write_json, atomic_write_jsonl, read_json
from udcg.records import Question

log = logging.getLogger(__name__)


def select(questions: list[Question], cfg: Config) -> list[Question]:
    """The ``data.limit`` questions of ``data.select`` after its first ``data.skip``: the first ones, or
    a seeded permutation's prefix (the permutation does not depend on ``skip`` or ``limit``)."""
    limit, skip = cfg.data.limit, cfg.data.skip
    stop = None if limit is None else skip + limit
    if cfg.data.select == "first":
        return questions[skip:stop]
    if skip == 0 and (limit is None or limit >= len(questions)):
        return questions
    # A seeded permutation, cut: a larger limit keeps the smaller one's questions, in the same order,
    # and adds new ones after them, so a run grown with --set data.limit=N reuses its finished chunks;
    # skip = S takes the questions after the first S of the same order, none of a run cut at S.
    rng = np.random.default_rng(np.random.SeedSequence([cfg.seed, 0x5E1EC7]))
    return [questions[i] for i in rng.permutation(len(questions))[skip:stop]]


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

    early_limit = (cfg.data.skip + cfg.data.limit if (cfg.pool.source == "dataset" and cfg.data.select == "first"
                                                      and cfg.data.limit is not None) else None)
    everything = _load(cfg.data.questions, cfg, early_limit)
    questions = select(everything, cfg)
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
        d = {"doc_id": p.docid, "title": p.title, "text": p.text, "is_relevant": p.relevant}
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
