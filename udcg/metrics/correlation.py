"""Correlation of a metric with answer outcomes (paper §7.2).

Per question: rank its contexts by outcome (correct > abstained > wrong, ties share the average
rank) and by the metric, take Spearman's rho; average over questions. A question whose outcomes
are all equal has no rho: it is excluded and counted. A question whose outcomes differ but whose
metric values are all equal has rho = 0 by default (the metric cannot tell its contexts apart;
dropping it would flatter degenerate metrics) — ``constant_metric="drop"`` excludes it instead;
both counts are reported.

Significance: percentile bootstrap over questions for the mean (``stats.bootstrap_ci``); the
correlation tables test the difference between two metrics with ``stats.paired_test`` (a paired
permutation test by default). ``paired_bootstrap`` is the earlier paired test, kept for callers.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from scipy.stats import rankdata, spearmanr

from udcg.errors import InputError
from udcg.metrics.stats import bootstrap_ci


@dataclass(frozen=True, slots=True)
class CorrelationSummary:
    metric: str
    mean_rho: float
    ci_low: float
    ci_high: float
    n_questions: int  # questions with a defined rho
    n_constant_outcome: int  # excluded: all outcomes equal
    n_constant_metric: int  # outcomes differ, metric constant (rho = 0, or excluded with "drop")
    pooled_rho: float  # Spearman over all contexts pooled


def _group_slices(groups: np.ndarray) -> tuple[np.ndarray, list[np.ndarray]]:
    order = np.argsort(groups, kind="stable")
    g = groups[order]
    bounds = np.flatnonzero(np.r_[True, g[1:] != g[:-1], True])
    return g[bounds[:-1]], [order[a:b] for a, b in zip(bounds[:-1], bounds[1:])]


def _pearson_rows(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    a = a - a.mean(1, keepdims=True)
    b = b - b.mean(1, keepdims=True)
    den = np.sqrt((a * a).sum(1) * (b * b).sum(1))
    with np.errstate(invalid="ignore", divide="ignore"):
        return np.where(den > 0, (a * b).sum(1) / np.where(den > 0, den, 1), np.nan)


def per_question_spearman(metric: object, outcome: object, groups: object,
                          constant_metric: str = "zero") -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Returns (question ids, rho per question with NaN where undefined, status per question:
    0 = defined, 1 = constant outcome, 2 = constant metric)."""
    m = np.asarray(metric, dtype=float)
    o = np.asarray(outcome, dtype=float)
    g = np.asarray(groups)
    if not (m.shape == o.shape == g.shape) or m.ndim != 1:
        raise InputError(f"metric, outcome and groups must be 1-D of equal length, got {m.shape}, {o.shape}, {g.shape}")
    if not np.isfinite(m).all():
        raise InputError("metric values contain NaN/inf (score every context; NA metrics cannot be correlated)")
    if constant_metric not in ("zero", "drop"):
        raise InputError(f"constant_metric = {constant_metric!r}: use 'zero' or 'drop'")
    qids, slices = _group_slices(g)
    rho = np.full(len(slices), np.nan)
    status = np.zeros(len(slices), dtype=int)
    sizes = np.array([len(s) for s in slices])
    for size in np.unique(sizes):  # vectorise over questions with the same number of contexts
        which = np.flatnonzero(sizes == size)
        idx = np.stack([slices[i] for i in which])
        rm, ro = rankdata(m[idx], axis=1), rankdata(o[idx], axis=1)
        r = _pearson_rows(rm, ro)
        const_o = np.ptp(o[idx], axis=1) == 0
        const_m = (np.ptp(m[idx], axis=1) == 0) & ~const_o
        r[const_o] = np.nan
        r[const_m] = 0.0 if constant_metric == "zero" else np.nan
        rho[which] = r
        status[which] = np.where(const_o, 1, np.where(const_m, 2, 0))
    return qids, rho, status


# Fewer questions than this get no bootstrap interval and no p-value (NaN, shown as NA): with a
# handful of questions the resampled means take only a few values, and when every per-question
# difference has the same sign the "p-value" is 1/n_boot whatever the evidence.
MIN_BOOTSTRAP_QUESTIONS = 5


def bootstrap_mean_ci(values: np.ndarray, n_boot: int = 10_000, level: float = 0.95, seed: int = 0) -> tuple[float, float]:
    """``stats.bootstrap_ci`` with at least ``MIN_BOOTSTRAP_QUESTIONS`` questions."""
    return bootstrap_ci(values, n_boot, level, seed, min_n=MIN_BOOTSTRAP_QUESTIONS)


def summarize(name: str, metric: object, outcome: object, groups: object, constant_metric: str = "zero",
              n_boot: int = 10_000, level: float = 0.95, seed: int = 0) -> CorrelationSummary:
    _, rho, status = per_question_spearman(metric, outcome, groups, constant_metric)
    lo, hi = bootstrap_mean_ci(rho, n_boot, level, seed)
    defined = rho[np.isfinite(rho)]
    m, o = np.asarray(metric, dtype=float), np.asarray(outcome, dtype=float)
    pooled = float(spearmanr(m, o).statistic) if np.ptp(m) > 0 and np.ptp(o) > 0 else float("nan")
    return CorrelationSummary(metric=name, mean_rho=float(defined.mean()) if len(defined) else float("nan"),
                              ci_low=lo, ci_high=hi, n_questions=int(len(defined)),
                              n_constant_outcome=int((status == 1).sum()), n_constant_metric=int((status == 2).sum()),
                              pooled_rho=pooled)


def paired_bootstrap(rho_a: np.ndarray, rho_b: np.ndarray, n_boot: int = 10_000, seed: int = 0) -> tuple[float, float]:
    """Mean difference (a - b) over questions where both rhos are defined, and the two-sided
    bootstrap p-value of 'no difference' (twice the share of resampled means on the far side of 0)."""
    a, b = np.asarray(rho_a, dtype=float), np.asarray(rho_b, dtype=float)
    if a.shape != b.shape:
        raise InputError("paired bootstrap needs the rhos of both metrics on the same questions")
    keep = np.isfinite(a) & np.isfinite(b)
    d = a[keep] - b[keep]
    if len(d) == 0:
        return float("nan"), float("nan")
    if len(d) < MIN_BOOTSTRAP_QUESTIONS:  # a difference, but no test
        return float(d.mean()), float("nan")
    rng = np.random.default_rng(seed)
    means = d[rng.integers(0, len(d), size=(n_boot, len(d)))].mean(1)
    observed = float(d.mean())
    if np.all(d == 0):
        return 0.0, 1.0
    p = 2 * min((means <= 0).mean(), (means >= 0).mean())
    return observed, float(min(1.0, max(p, 1.0 / n_boot)))
