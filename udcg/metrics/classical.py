"""Classical IR metrics as vectorised numpy kernels over many queries at once.

Input convention
----------------
``gains``: float matrix (n_queries, depth), the judged gain of the document at each rank, rank 1
first; unjudged documents and padding beyond a query's run length are 0; graded, float and negative
gains are allowed. ``n_rel``: per query, the number of judged documents with gain >= ``rel_level``
(all judged documents, retrieved or not — trec_eval's ``num_rel``). ``ideal``: per query, all judged
gains sorted descending (padding 0), for nDCG. ``n_rel == (ideal >= rel_level).sum(1)``.

A document is *relevant* when its gain >= ``rel_level`` (trec_eval's ``relevance_level``, default
1); ``rel_level`` must be > 0 so that padding and unjudged documents (gain 0) never count.
``k=None`` means the whole depth. Every function returns one float per query, shape (n_queries,).

Definitions (all per query; "rank" is 1-based; queries with ``n_rel == 0`` score 0, as in trec_eval)
- P@k = |rel in top k| / k (missing ranks count as non-relevant: trec_eval ``P_k``).
- R@k = |rel in top k| / n_rel (``recall_k``). F1@k = 2·P@k·R@k / (P@k + R@k), 0 when both are 0.
- Success@k (hit@k) = 1 if some relevant document is in the top k (``success_k``).
- RR@k = 1 / rank of the first relevant document if that rank <= k, else 0 (``recip_rank`` for k=None).
- AP@k = Σ_{relevant ranks i <= k} P@i / n_rel — divides by n_rel, not min(n_rel, k)
  (trec_eval ``map_cut_k``; ``map`` for k=None).
- Rprec = |rel in top n_rel| / n_rel.
- DCG@k = Σ_{i<=k} g_i / log2(i + 1) with g = max(gain, 0) (trec_eval ignores negative gains in
  nDCG), or g = 2^max(gain, 0) - 1 with ``exponential=True``. nDCG@k = DCG@k / IDCG@k, IDCG from the
  ideal vector, 0 when IDCG is 0 (``ndcg_cut_k``; ``ndcg`` for k=None).
- ERR@k (Chapelle et al. 2009) = Σ_{i<=k} (1/i) R_i Π_{j<i} (1 - R_j), R_i = (2^max(g_i,0) - 1) /
  2^max_grade. ``max_grade`` defaults to 4 like gdeval, ir_measures' provider of ERR (gdeval
  fixes it at 4; the grade scale's maximum is the usual choice — pass it). Seed 002 uses
  R_i = g_i / max_grade instead; that is a different metric.
- Interpolated precision at recall levels 0.0, 0.1, …, 1.0, exactly as trec_eval's
  ``iprec_at_recall``: level r needs c = floor(r·n_rel + 0.9) relevant documents (computed in
  doubles, as trec_eval does); its value is the maximum precision at any rank at or below the rank
  of the c-th relevant document (c = 0: any rank), and 0 if fewer than c are retrieved.
- AUC-PR = area under those 11 points by the trapezoid rule:
  Σ_{j=0}^{9} 0.1·(iP(j/10) + iP((j+1)/10)) / 2. (trec_eval's ``11pt_avg`` is their plain mean;
  AUC-PR weights the two end points by half.) AUC-PR@k uses the ranking cut at k.
- containment@k = 1 if a passage in the top k contains a reference answer (see metrics.text).
- eRAG (Salemi & Zamani 2024) of a context = the mean (default) or max of its passages' downstream
  scores (each the score of the answer generated from that passage alone; the paper used ROUGE-L).
- ANSWER_PROB (paper App. C) of a context = the mean (default), sum or max of its passages'
  log-likelihoods of the reference answer (each log P(answer | question, passage), <= 0).
"""

from __future__ import annotations

import math

import numpy as np

from udcg.errors import InputError
from udcg.metrics.curves import (RECALL_LEVELS, ap_curve, at, auc_pr_of, average_precision_at, containment_at,
                                 dcg_curve, err_curve, f1_at, first_hit, hits_curve, interpolated_precision_at,
                                 ndcg_at, precision_at, r_precision_of, recall_at, reciprocal_rank_at, success_at)

__all__ = ["RECALL_LEVELS", "answer_containment", "answer_prob", "auc_pr", "average_precision", "dcg", "erag", "err",
           "f1", "interpolated_precision", "ndcg", "precision", "r_precision", "recall", "reciprocal_rank", "success"]


# ---------------------------------------------------------------- validation


def _matrix(x: object, name: str, dtype: type = float) -> np.ndarray:
    try:
        arr = np.asarray(x, dtype=dtype)
    except (TypeError, ValueError):
        raise InputError(f"argument {name!r}: not a numeric matrix (give an (n_queries, depth) array)") from None
    if arr.ndim != 2:
        raise InputError(f"argument {name!r}: expected shape (n_queries, depth), got {arr.shape} "
                         "(wrap a single ranking as [ranking])")
    if dtype is float and not np.isfinite(arr).all():
        raise InputError(f"argument {name!r}: contains NaN or inf (give finite gains; unjudged = 0)")
    return arr


def _cutoff(k: int | None) -> int | None:
    if k is None:
        return None
    if isinstance(k, bool) or not isinstance(k, (int, np.integer)) or k < 1:
        raise InputError(f"cutoff k = {k!r}: must be a positive integer or None (the whole ranking)")
    return int(k)


def _relevant(gains: object, rel_level: float) -> np.ndarray:
    if isinstance(rel_level, bool) or not isinstance(rel_level, (int, float)) or not (
            math.isfinite(rel_level) and rel_level > 0):
        raise InputError(f"rel_level = {rel_level!r}: must be a number > 0 (gain >= rel_level is relevant)")
    return _matrix(gains, "gains") >= rel_level


def _n_rel(n_rel: object, rel: np.ndarray) -> np.ndarray:
    arr = np.asarray(n_rel)
    if arr.shape != (rel.shape[0],) or not np.issubdtype(arr.dtype, np.number):
        raise InputError(f"argument 'n_rel': expected {rel.shape[0]} counts (one per query), got shape {arr.shape}")
    if not np.isfinite(arr).all() or (arr < 0).any() or (arr != np.round(arr)).any():
        raise InputError("argument 'n_rel': counts must be non-negative integers")
    arr = arr.astype(np.int64)
    short = np.flatnonzero(arr < rel.sum(1))
    if short.size:
        raise InputError(f"argument 'n_rel': query {short[0]} has n_rel = {arr[short[0]]} but more relevant "
                         "documents in its ranking (n_rel counts every judged relevant document)")
    return arr


def _ideal(ideal: object, n: int) -> np.ndarray:
    arr = _matrix(ideal, "ideal")
    if arr.shape[0] != n:
        raise InputError(f"argument 'ideal': {arr.shape[0]} rows for {n} queries (one ideal vector per query)")
    if (np.diff(arr, axis=1) > 0).any():
        raise InputError("argument 'ideal': rows must be sorted descending (all judged gains, best first)")
    return arr


def _per_passage(x: object, name: str, aggregate: str, allowed: tuple[str, ...]) -> np.ndarray:
    if aggregate not in allowed:
        raise InputError(f"aggregate = {aggregate!r}: choose one of {', '.join(allowed)}")
    arr = _matrix(x, name)
    if arr.shape[1] == 0:
        raise InputError(f"argument {name!r}: a context needs at least one passage")
    return arr


# ---------------------------------------------------------------- public functions


def precision(gains: object, k: int | None = None, rel_level: float = 1) -> np.ndarray:
    """P@k per query."""
    return precision_at(hits_curve(_relevant(gains, rel_level)), _cutoff(k))


def recall(gains: object, n_rel: object, k: int | None = None, rel_level: float = 1) -> np.ndarray:
    """R@k per query."""
    rel = _relevant(gains, rel_level)
    return recall_at(hits_curve(rel), _n_rel(n_rel, rel), _cutoff(k))


def f1(gains: object, n_rel: object, k: int | None = None, rel_level: float = 1) -> np.ndarray:
    """F1@k = harmonic mean of P@k and R@k per query."""
    rel = _relevant(gains, rel_level)
    return f1_at(hits_curve(rel), _n_rel(n_rel, rel), _cutoff(k))


def success(gains: object, k: int | None = None, rel_level: float = 1) -> np.ndarray:
    """Success@k (hit@k) per query: 1.0 if a relevant document is in the top k."""
    return success_at(hits_curve(_relevant(gains, rel_level)), _cutoff(k))


def reciprocal_rank(gains: object, k: int | None = None, rel_level: float = 1) -> np.ndarray:
    """RR@k per query (MRR is its mean)."""
    hits = hits_curve(_relevant(gains, rel_level))
    return reciprocal_rank_at(first_hit(hits), hits.shape[1], _cutoff(k))


def average_precision(gains: object, n_rel: object, k: int | None = None, rel_level: float = 1) -> np.ndarray:
    """AP@k per query (MAP is its mean); divides by n_rel like trec_eval's map_cut."""
    rel = _relevant(gains, rel_level)
    n_rel = _n_rel(n_rel, rel)
    return average_precision_at(ap_curve(hits_curve(rel), rel), n_rel, _cutoff(k))


def r_precision(gains: object, n_rel: object, rel_level: float = 1) -> np.ndarray:
    """R-Precision per query: precision at rank n_rel."""
    rel = _relevant(gains, rel_level)
    return r_precision_of(hits_curve(rel), _n_rel(n_rel, rel))


def dcg(gains: object, k: int | None = None, exponential: bool = False) -> np.ndarray:
    """DCG@k per query, negative gains counted as 0; linear gains, or 2^g - 1 if exponential."""
    return at(dcg_curve(_matrix(gains, "gains"), bool(exponential)), _cutoff(k))


def ndcg(gains: object, ideal: object, k: int | None = None, exponential: bool = False) -> np.ndarray:
    """nDCG@k per query against the ideal vector (all judged gains sorted descending)."""
    g = _matrix(gains, "gains")
    best = _ideal(ideal, g.shape[0])
    return ndcg_at(dcg_curve(g, bool(exponential)), dcg_curve(best, bool(exponential)), _cutoff(k))


def err(gains: object, k: int | None = None, max_grade: float = 4) -> np.ndarray:
    """ERR@k per query (Chapelle 2009), stop probability (2^g - 1) / 2^max_grade."""
    g = _matrix(gains, "gains")
    if isinstance(max_grade, bool) or not isinstance(max_grade, (int, float)) or not (
            math.isfinite(max_grade) and max_grade > 0):
        raise InputError(f"max_grade = {max_grade!r}: must be a number > 0 (the top of the grade scale)")
    if g.size and g.max() > max_grade:
        raise InputError(f"argument 'gains': gain {g.max():g} exceeds max_grade = {max_grade:g} "
                         "(pass the top of your grade scale as max_grade)")
    return at(err_curve(g, float(max_grade)), _cutoff(k))


def interpolated_precision(gains: object, n_rel: object, k: int | None = None,
                           rel_level: float = 1) -> np.ndarray:
    """trec_eval's iprec_at_recall at 0.0, 0.1, ..., 1.0: shape (n_queries, 11)."""
    rel = _relevant(gains, rel_level)
    return interpolated_precision_at(rel, hits_curve(rel), _n_rel(n_rel, rel), _cutoff(k))


def auc_pr(gains: object, n_rel: object, k: int | None = None, rel_level: float = 1) -> np.ndarray:
    """Trapezoid area under the 11-point interpolated precision-recall curve, per query."""
    return auc_pr_of(interpolated_precision(gains, n_rel, k, rel_level))


def answer_containment(contains: object, k: int | None = None) -> np.ndarray:
    """containment@k: ``contains[i, j]`` says whether the passage at rank j+1 holds an answer."""
    arr = np.asarray(contains)
    if arr.dtype != bool:
        raise InputError(f"argument 'contains': expected a boolean matrix, got dtype {arr.dtype} "
                         "(use metrics.text.contains_answer per passage)")
    if arr.ndim != 2:
        raise InputError(f"argument 'contains': expected shape (n_queries, depth), got {arr.shape}")
    return containment_at(arr, _cutoff(k))


def erag(scores: object, aggregate: str = "mean") -> np.ndarray:
    """eRAG per context: mean (default, the eRAG paper's Precision-style aggregation) or max of the
    per-passage downstream scores, ``scores`` of shape (n_contexts, k)."""
    arr = _per_passage(scores, "scores", aggregate, ("mean", "max"))
    return arr.mean(1) if aggregate == "mean" else arr.max(1)


def answer_prob(log_likelihoods: object, aggregate: str = "mean") -> np.ndarray:
    """ANSWER_PROB per context: mean (default), sum or max of the per-passage log-likelihoods of the
    reference answer, shape (n_contexts, k); each must be <= 0 (a log-probability)."""
    arr = _per_passage(log_likelihoods, "log_likelihoods", aggregate, ("mean", "sum", "max"))
    if (arr > 0).any():
        raise InputError("argument 'log_likelihoods': values > 0 are not log-probabilities "
                         "(give log P(answer | passage), natural log)")
    return {"mean": arr.mean, "sum": arr.sum, "max": arr.max}[aggregate](1)
