"""Set-based metrics of seed 000 §6 (RA-nWG, arXiv 2511.09545): RA-nWG@K, PROC@K, %PROC@K,
N-Recall4+@K, N-Recall5@K, Precision4+@K, Harm@K. NA is NaN.

Inputs, vectorised over queries:
- ``topk``: (n, K) integer grades 1..5 of the passages fed to the LLM; 0 marks an empty slot
  (fewer than K passages), which weighs 0 and is neither good nor harmful.
- ``corpus_counts``: (n, 5) number of labelled passages of grade 1..5 in the global labelled pool U.
- ``pool_counts``: (n, 5) the same for the retrieval pool P (for PROC@K); optional.
"""

from __future__ import annotations

import math

import numpy as np

from udcg.errors import InputError

SETBASED = ("RA-nWG", "PROC", "%PROC", "N-Recall4+", "N-Recall5", "Precision4+", "Harm")  # set_metrics' keys
BASE = np.array([0.0, 0.0, 0.1, 0.5, 1.0])  # b_1 .. b_5
FALLBACK = np.array([0.0, 0.0, 0.2, 1.0, 1.0])  # w_1 .. w_5 when the pool has no grade 5


def rarity_weights(counts: np.ndarray, alpha: float = 1.0, cap4: float = 1.0, cap3: float = 0.25) -> np.ndarray:
    """(n, 5) counts per grade -> (n, 5) weights w_1..w_5 (seed 000 §6, with the no-grade-5 fallback)."""
    counts = np.asarray(counts, dtype=float)
    N = counts.sum(1, keepdims=True)
    with np.errstate(divide="ignore", invalid="ignore"):
        p = np.where(N > 0, counts / np.where(N > 0, N, 1), 0.0)
        r = np.where(p > 0, BASE / np.where(p > 0, p, 1) ** alpha, 0.0)  # r_g = 0 when p_g = 0
        r5 = r[:, 4:5]
        ratio = np.where(r5 > 0, r / np.where(r5 > 0, r5, 1), 0.0)
    w = np.zeros_like(ratio)
    w[:, 4] = 1.0
    w[:, 3] = np.minimum(ratio[:, 3], cap4)
    w[:, 2] = np.minimum(ratio[:, 2], cap3)
    return np.where(counts[:, 4:5] > 0, w, FALLBACK)


def _oracle_gain(weights: np.ndarray, counts: np.ndarray, K: int) -> np.ndarray:
    """Sum of the K largest passage weights, given per-grade weights and counts (greedy by weight)."""
    order = np.argsort(-weights, axis=1, kind="stable")
    w = np.take_along_axis(weights, order, 1)
    c = np.take_along_axis(np.asarray(counts, dtype=float), order, 1)
    before = np.cumsum(c, 1) - c
    take = np.clip(K - before, 0, c)
    return (take * w).sum(1)


def _slot_weights(topk: np.ndarray, weights: np.ndarray) -> np.ndarray:
    padded = np.hstack([np.zeros((len(weights), 1)), weights])  # grade 0 = empty slot -> 0
    return np.take_along_axis(padded, topk, 1)


def _ratio(num: np.ndarray, den: np.ndarray) -> np.ndarray:
    with np.errstate(divide="ignore", invalid="ignore"):
        return np.where(den > 0, num / np.where(den > 0, den, 1), np.nan)


def set_metrics(topk: object, corpus_counts: object, pool_counts: object = None, k: int | None = None,
                alpha: float = 1.0, cap4: float = 1.0, cap3: float = 0.25, harm_max_grade: int = 2) -> dict[str, np.ndarray]:
    """All set-based metrics at cut-off K (default: topk's width). Each value has shape (n,); NA is NaN.
    ``harm_max_grade``: grades <= this count as harmful (seed §6: 2; §2.3 also allows 1)."""
    T = np.asarray(topk)
    if T.ndim == 1:
        T = T[None, :]
    if T.ndim != 2 or not np.issubdtype(T.dtype, np.integer) and not np.all(np.mod(T, 1) == 0):
        raise InputError("topk: expected an (n, K) matrix of integer grades 1..5 (0 = empty slot)")
    T = T.astype(int)
    if ((T < 0) | (T > 5)).any():
        raise InputError("topk: grades must be integers 1..5 (0 marks an empty slot); found a value outside 0..5")
    C = np.asarray(corpus_counts, dtype=float)
    if C.ndim == 1:
        C = C[None, :]
    if C.shape != (T.shape[0], 5) or (C < 0).any() or not np.isfinite(C).all():
        raise InputError(f"corpus_counts: expected ({T.shape[0]}, 5) non-negative counts of grades 1..5, got shape {C.shape}")
    K = T.shape[1] if k is None else int(k)
    if K <= 0:
        raise InputError(f"k = {k!r}: must be a positive integer")
    if K < T.shape[1]:
        T = T[:, :K]
    if not (math.isfinite(alpha) and alpha >= 0):
        raise InputError(f"alpha = {alpha!r}: must be >= 0 (1 = proportional rarity, 0 = no rarity)")

    w = rarity_weights(C, alpha, cap4, cap3)
    g_obs = _slot_weights(T, w).sum(1)
    g_oracle = _oracle_gain(w, C, K)
    out = {"RA-nWG": _ratio(g_obs, g_oracle)}
    if pool_counts is not None:
        P = np.asarray(pool_counts, dtype=float)
        if P.ndim == 1:
            P = P[None, :]
        if P.shape != C.shape or (P < 0).any() or (P > C).any():
            raise InputError("pool_counts: expected (n, 5) counts, each <= the corpus count of that grade (P is a subset of U)")
        proc = _ratio(_oracle_gain(w, P, K), g_oracle)
        out["PROC"] = proc
        out["%PROC"] = _ratio(out["RA-nWG"], proc)
    r4, r5 = C[:, 3] + C[:, 4], C[:, 4]
    g4, g5 = (T >= 4).sum(1), (T == 5).sum(1)
    out["N-Recall4+"] = _ratio(g4, np.minimum(K, r4))
    out["N-Recall5"] = _ratio(g5, np.minimum(K, r5))
    out["Precision4+"] = g4 / K
    out["Harm"] = ((T >= 1) & (T <= harm_max_grade)).sum(1) / K
    return out


def ra_nwg(topk: object, corpus_counts: object, k: int | None = None, alpha: float = 1.0) -> np.ndarray:
    """RA-nWG@K per query (NaN = NA when the global oracle gain is 0)."""
    return set_metrics(topk, corpus_counts, k=k, alpha=alpha)["RA-nWG"]


def grade_counts(grades: object) -> np.ndarray:
    """Counts of grades 1..5 in a list of grades (one query) -> shape (5,)."""
    g = np.asarray(grades, dtype=int)
    if ((g < 1) | (g > 5)).any():
        raise InputError("grades must be integers 1..5")
    return np.bincount(g, minlength=6)[1:]
