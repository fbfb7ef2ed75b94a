"""The reader check's AUC in numpy alone: by ranks, bootstrapped over queries, and after relabelling.

The AUC of p_abs separating irrelevant from relevant pairs is the probability that a random
irrelevant pair has a higher p_abs than a random relevant one, ties counting half (the
Mann-Whitney U over n_irrelevant * n_relevant; ``sklearn.metrics.roc_auc_score`` with irrelevant as
the positive class gives the same number, which the tests check). One kernel, ``auc_rows``, computes
it under any rows of pair weights; the bootstrap over queries weighs each pair by how often its
query was drawn (``auc_interval``), and ``relabelled_aucs`` gives the AUC after the first m pairs of
an order are relabelled relevant, for every m at once (the verdict's fragility). numpy only: the
check runs at the end of every ``udcg annotate``, which must not load scikit-learn, scipy's stats,
pandas or pyarrow for it.
"""

from __future__ import annotations

import numpy as np

CHUNK = 1 << 16  # numbers held at once by a bootstrap matrix (rows x pairs or queries): 0.5 MB of float64


def tie_starts(sorted_p: np.ndarray) -> np.ndarray:
    """Where each distinct value of the sorted ``sorted_p`` begins."""
    return np.flatnonzero(np.r_[True, sorted_p[1:] != sorted_p[:-1]]) if len(sorted_p) else np.zeros(0, dtype=int)


def auc_rows(irrelevant: np.ndarray, starts: np.ndarray, weights: np.ndarray) -> np.ndarray:
    """The AUC (irrelevant above relevant, ties half) under each row of pair ``weights`` (rows x
    pairs, the pairs sorted by p_abs and ``irrelevant`` in that order; ``starts``: where each distinct
    p_abs begins). NaN for a row without weight on one of the classes."""
    w_irr = np.add.reduceat(weights * irrelevant, starts, axis=1)
    w_rel = np.add.reduceat(weights * ~irrelevant, starts, axis=1)
    below = np.cumsum(w_rel, axis=1) - w_rel
    with np.errstate(invalid="ignore", divide="ignore"):
        return (w_irr * (below + 0.5 * w_rel)).sum(axis=1) / (w_irr.sum(axis=1) * w_rel.sum(axis=1))


def auc(p_abs: np.ndarray, irrelevant: np.ndarray) -> float:
    """The AUC of ``p_abs`` with ``irrelevant`` the positive class; NaN without both classes."""
    if not (irrelevant.any() and (~irrelevant).any()):
        return float("nan")
    order = np.argsort(p_abs, kind="stable")
    return float(auc_rows(irrelevant[order], tie_starts(p_abs[order]), np.ones((1, len(order))))[0])


def query_matrix(irrelevant: np.ndarray, query: np.ndarray, starts: np.ndarray, n_q: int) -> np.ndarray:
    """``C[a, b]``: the pairs (irrelevant of query a, relevant of query b) in which the irrelevant
    one's p_abs is higher, ties half (pairs sorted by p_abs, ``starts`` their tie groups), so that a
    resample drawing query q w_q times has the AUC w C w / ((w . irrelevant) (w . relevant))."""
    group = np.repeat(np.arange(len(starts)), np.diff(np.r_[starts, len(query)]))
    g_irr = np.zeros((len(starts), n_q))
    g_rel = np.zeros((len(starts), n_q))
    np.add.at(g_irr, (group[irrelevant], query[irrelevant]), 1.0)
    np.add.at(g_rel, (group[~irrelevant], query[~irrelevant]), 1.0)
    return g_irr.T @ (np.cumsum(g_rel, axis=0) - 0.5 * g_rel)


def auc_interval(p_abs: np.ndarray, irrelevant: np.ndarray, query: np.ndarray, n_boot: int, seed: int
                 ) -> tuple[float, float]:
    """95% percentile interval of the AUC over ``n_boot`` resamples of the queries (with
    replacement; ``query``: each pair's query index 0 .. n_queries - 1), drawn in chunks of at most
    ``CHUNK`` numbers, so that memory stays bounded at any ``n_boot``. A resample is a row of query
    counts; its AUC is ``query_matrix``'s quadratic form where that matrix is small (a few queries'
    worth of pairs: n_queries^2 operations a resample), else ``auc_rows`` over the pairs."""
    order = np.argsort(p_abs, kind="stable")
    irr, q = irrelevant[order], query[order]
    starts = tie_starts(p_abs[order])
    n_q = int(query.max()) + 1
    small = len(starts) * n_q <= CHUNK
    if small:
        c = query_matrix(irr, q, starts, n_q)
        n_irr, n_rel = np.bincount(q[irr], minlength=n_q), np.bincount(q[~irr], minlength=n_q)
    rng = np.random.default_rng(seed)
    aucs = np.empty(n_boot)
    rows = max(1, CHUNK // max(n_q if small else len(order), n_q))
    for start in range(0, n_boot, rows):
        stop = min(n_boot, start + rows)
        draws = rng.integers(0, n_q, size=(stop - start, n_q))
        flat = (draws + n_q * np.arange(stop - start)[:, None]).ravel()  # each row's draws counted in its own bins
        w = np.bincount(flat, minlength=(stop - start) * n_q).reshape(stop - start, n_q).astype(float)
        if small:
            with np.errstate(invalid="ignore", divide="ignore"):
                aucs[start:stop] = ((w @ c) * w).sum(axis=1) / ((w @ n_irr) * (w @ n_rel))
        else:
            aucs[start:stop] = auc_rows(irr, starts, w[:, q])
    aucs = aucs[np.isfinite(aucs)]
    if not len(aucs):
        return float("nan"), float("nan")
    return float(np.quantile(aucs, 0.025)), float(np.quantile(aucs, 0.975))


def relabelled_aucs(p_abs: np.ndarray, irrelevant: np.ndarray, moved: np.ndarray) -> np.ndarray:
    """The AUC after relabelling relevant the first m pairs of ``moved`` (indices of irrelevant pairs,
    in order of non-increasing or non-decreasing p_abs), for m = 0 .. len(moved): ``out[m]``.

    Moving pair x from the irrelevant to the relevant side removes the relevant pairs it was counted
    above (those below it, half those equal) and adds the irrelevant pairs now above it (half those
    equal). Every pair moved before x lies on one side of it (the order is monotone), so the counts
    are the original classes' counts around x corrected by the earlier moves."""
    p = np.asarray(p_abs, dtype=float)
    x = p[moved]
    m = np.arange(1, len(x) + 1)
    rel, irr = np.sort(p[~irrelevant]), np.sort(p[irrelevant])
    xa = np.sort(x)
    lt, gt = np.searchsorted(xa, x, "left"), len(x) - np.searchsorted(xa, x, "right")
    falling = len(x) < 2 or x[0] >= x[-1]
    before_lt = np.zeros_like(lt) if falling else lt  # moved before x and below it
    before_gt = gt if falling else np.zeros_like(gt)  # moved before x and above it
    before_eq = m - 1 - before_lt - before_gt
    rel_below = np.searchsorted(rel, x, "left") + before_lt
    rel_equal = np.searchsorted(rel, x, "right") - np.searchsorted(rel, x, "left") + before_eq
    irr_above = len(irr) - np.searchsorted(irr, x, "right") - before_gt
    irr_equal = np.searchsorted(irr, x, "right") - np.searchsorted(irr, x, "left") - 1 - before_eq
    delta = irr_above + 0.5 * irr_equal - rel_below - 0.5 * rel_equal
    n_rel, n_irr = len(rel), len(irr)
    # the Mann-Whitney count is a multiple of 1/2: rounded to it, every relabelled count is exact, so an
    # AUC of exactly 0.75 after relabelling reads 0.75, not 0.7499999999999999 (the verdict's threshold)
    u0 = round(2 * auc(p, irrelevant) * n_rel * n_irr) / 2 if n_rel and n_irr else 0.0
    u = np.r_[u0, u0 + np.cumsum(delta)]
    k = np.r_[0, m]
    with np.errstate(invalid="ignore", divide="ignore"):
        out = u / ((n_rel + k) * (n_irr - k))
    out[(n_rel + k == 0) | (n_irr - k == 0)] = np.nan
    return out
