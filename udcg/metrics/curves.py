"""The per-rank curves of the classical measures and the values read off them: numpy kernels,
no validation (``udcg.metrics.classical`` checks its arguments, then calls these; the measure
registry's kernels call them on matrices built once per run or batch of contexts).

Each family has a *curve*: a per-rank cumulative matrix (n, depth) computed once; the value at
cutoff k is column k-1 (the last column when k is None or beyond the depth, since padding adds
nothing). Scoring many cutoffs of a family costs one pass. Conventions (trec_eval's) are written
in ``udcg.metrics.classical``'s docstring.
"""

from __future__ import annotations

import numpy as np

RECALL_LEVELS = np.arange(11) / 10.0  # 0.0, 0.1, ..., 1.0 — the same doubles as trec_eval's table


def at(curve: np.ndarray, k: int | None) -> np.ndarray:
    """Column k-1 of a cumulative curve; the last column for k=None or k > depth; 0 if empty."""
    n, depth = curve.shape
    if depth == 0:
        return np.zeros(n)
    return curve[:, (depth if k is None else min(k, depth)) - 1]


def ratio(num: np.ndarray, den: np.ndarray) -> np.ndarray:
    num = np.asarray(num, dtype=float)
    den = np.asarray(den, dtype=float)
    return np.divide(num, den, out=np.zeros(np.broadcast(num, den).shape), where=den > 0)


def hits_curve(rel: np.ndarray) -> np.ndarray:
    return np.cumsum(rel, 1, dtype=np.int32)


def ap_curve(hits: np.ndarray, rel: np.ndarray) -> np.ndarray:
    curve = hits / np.arange(1, hits.shape[1] + 1, dtype=np.float64)  # precision at each rank
    curve *= rel  # ... kept at the relevant ranks only
    return np.cumsum(curve, 1, out=curve)


def first_hit(hits: np.ndarray) -> np.ndarray:
    """0-based rank of the first relevant document; depth if there is none."""
    return (hits == 0).sum(1)


def _discounts(depth: int) -> np.ndarray:
    return 1.0 / np.log2(np.arange(2, depth + 2, dtype=np.float64))


def dcg_curve(gains: np.ndarray, exponential: bool) -> np.ndarray:
    g = np.maximum(gains, 0.0)
    if exponential:
        np.exp2(g, out=g)
        g -= 1.0
    g *= _discounts(g.shape[1])
    return np.cumsum(g, 1, out=g)


def err_curve(gains: np.ndarray, max_grade: float) -> np.ndarray:
    stop = np.exp2(np.maximum(gains, 0.0))
    stop -= 1.0
    stop /= 2.0**max_grade
    reach = np.empty_like(stop)
    if stop.shape[1]:
        reach[:, 0] = 1.0
        np.cumprod(1.0 - stop[:, :-1], 1, out=reach[:, 1:])
    reach *= stop
    reach /= np.arange(1, stop.shape[1] + 1)
    return np.cumsum(reach, 1, out=reach)


def _depth(k: int | None, depth: int) -> int:
    return depth if k is None else k


def precision_at(hits: np.ndarray, k: int | None) -> np.ndarray:
    depth = _depth(k, hits.shape[1])
    return at(hits, k) / depth if depth else np.zeros(hits.shape[0])


def recall_at(hits: np.ndarray, n_rel: np.ndarray, k: int | None) -> np.ndarray:
    return ratio(at(hits, k), n_rel)


def f1_at(hits: np.ndarray, n_rel: np.ndarray, k: int | None) -> np.ndarray:
    p, r = precision_at(hits, k), recall_at(hits, n_rel, k)
    return ratio(2.0 * p * r, p + r)


def success_at(hits: np.ndarray, k: int | None) -> np.ndarray:
    return (at(hits, k) > 0).astype(float)


def reciprocal_rank_at(first: np.ndarray, depth: int, k: int | None) -> np.ndarray:
    limit = min(_depth(k, depth), depth)
    return np.where(first < limit, 1.0 / (first + 1.0), 0.0)


def average_precision_at(ap_curve: np.ndarray, n_rel: np.ndarray, k: int | None) -> np.ndarray:
    return ratio(at(ap_curve, k), n_rel)


def r_precision_of(hits: np.ndarray, n_rel: np.ndarray) -> np.ndarray:
    n, depth = hits.shape
    if depth == 0:
        return np.zeros(n)
    col = np.clip(np.minimum(n_rel, depth) - 1, 0, None)
    return ratio(np.where(n_rel > 0, hits[np.arange(n), col], 0), n_rel)


def ndcg_at(dcg_curve: np.ndarray, ideal_curve: np.ndarray, k: int | None) -> np.ndarray:
    return ratio(at(dcg_curve, k), at(ideal_curve, k))


def interpolated_precision_at(rel: np.ndarray, hits: np.ndarray, n_rel: np.ndarray, k: int | None) -> np.ndarray:
    if k is not None and k < rel.shape[1]:
        rel, hits = rel[:, :k], hits[:, :k]
    n, depth = rel.shape
    if depth == 0:
        return np.zeros((n, RECALL_LEVELS.size))
    best_below = hits / np.arange(1, depth + 1, dtype=np.float64)  # precision at each rank ...
    np.maximum.accumulate(best_below[:, ::-1], 1, out=best_below[:, ::-1])  # ... max over ranks >= i
    needed = np.floor(RECALL_LEVELS[None, :] * n_rel[:, None] + 0.9).astype(np.int64)  # trec_eval
    needed = np.maximum(needed, 1)  # level 0 ("no document needed"): the best precision anywhere
    n_hits = hits[:, -1].astype(np.int64)
    reached = needed <= n_hits[:, None]
    hit_cols = np.nonzero(rel)[1]  # the ranks of all hits, row after row, in rank order
    start = np.cumsum(n_hits) - n_hits
    where = np.minimum(start[:, None] + needed - 1, max(hit_cols.size - 1, 0))  # the needed-th hit
    cols = hit_cols[where] if hit_cols.size else np.zeros_like(where)
    return np.where(reached, np.take_along_axis(best_below, cols, 1), 0.0)


def auc_pr_of(ip: np.ndarray) -> np.ndarray:
    return 0.05 * (ip[:, :-1] + ip[:, 1:]).sum(1)


def containment_at(contains: np.ndarray, k: int | None) -> np.ndarray:
    return success_at(hits_curve(contains), k)
