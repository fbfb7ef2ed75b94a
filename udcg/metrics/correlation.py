"""Correlation of a metric with answer outcomes (paper §7.2).

Per question: rank its contexts by outcome (correct > abstained > wrong, ties share the average
rank) and by the metric, take Spearman's rho; average over questions. A question whose outcomes
are all equal has no rho: it is excluded and counted. A question whose outcomes differ but whose
metric values are all equal has rho = 0 by default (the metric cannot tell its contexts apart;
dropping it would flatter degenerate metrics) — ``constant_metric="drop"`` excludes it instead;
both counts are reported.

Beside Spearman (the paper's statistic), two statistics over the pairs of a question's contexts,
computed by the same per-question machinery (``per_question``):

- ``kendall``: Kendall's tau-b (``scipy.stats.kendalltau(variant="b")``): (concordant - discordant)
  / sqrt(pairs untied in the metric * pairs untied in the outcome). It still divides by the pairs
  the metric leaves untied, so, like Spearman, it scores a metric that ties the contexts of one
  outcome level higher than one that spreads them (3 correct / 7 wrong contexts, every differing
  pair in order: tau-b 0.935 with the 7 wrong ones tied, 0.683 with them spread).
- ``pairwise``: the pairwise ordering accuracy over the pairs with different outcomes: 1 for a
  pair the metric orders like the outcome, 1/2 for a metric tie, 0 otherwise; mean over those
  pairs. Ties within an outcome level do not enter, so it is tie-neutral (1.0 for both metrics
  above). Chance level is 0.5; a constant metric scores 0.5.

NA policy: a question whose metric is NaN (NA) for any of its contexts has no value for that
metric (status 3, counted), never a value computed as if NA were 0.

Significance: percentile bootstrap over questions for the mean (``stats.bootstrap_ci``); the
correlation tables test the difference between two metrics with ``stats.paired_test`` (a paired
permutation test by default).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from scipy.stats import rankdata, spearmanr

from udcg.errors import InputError
from udcg.metrics.constants import CONSTANT, CONSTANT_METRIC, LEVEL, N_BOOT
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
    pooled_rho: float  # Spearman over all contexts pooled (those with a metric value)
    n_na_metric: int = 0  # excluded: the metric is NA (NaN) for some of the question's contexts


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


def _pair_signs(x: np.ndarray) -> np.ndarray:
    """sign(x_i - x_j) for every pair i < j of each row: (n_rows, n) -> (n_rows, n(n-1)/2)."""
    i, j = np.triu_indices(x.shape[1], 1)
    return np.sign(x[:, i] - x[:, j])


def _spearman_rows(m: np.ndarray, o: np.ndarray) -> np.ndarray:
    return _pearson_rows(rankdata(m, axis=1), rankdata(o, axis=1))


def _kendall_rows(m: np.ndarray, o: np.ndarray) -> np.ndarray:
    """Kendall's tau-b per row: sum(sm * so) / sqrt(pairs untied in m * pairs untied in o)."""
    sm, so = _pair_signs(m), _pair_signs(o)
    den = np.sqrt(np.abs(sm).sum(1) * np.abs(so).sum(1))
    with np.errstate(invalid="ignore", divide="ignore"):
        return np.where(den > 0, (sm * so).sum(1) / np.where(den > 0, den, 1), np.nan)


def _pairwise_rows(m: np.ndarray, o: np.ndarray) -> np.ndarray:
    """Share of the pairs with different outcomes that m orders like o, a tie in m counting 1/2."""
    sm, so = _pair_signs(m), _pair_signs(o)
    n = np.abs(so).sum(1)
    with np.errstate(invalid="ignore", divide="ignore"):
        return np.where(n > 0, 0.5 + 0.5 * (sm * so).sum(1) / np.where(n > 0, n, 1), np.nan)


# statistic -> (per-row kernel, its value for a constant metric under constant_metric="zero")
_KERNELS = {"spearman": (_spearman_rows, 0.0), "kendall": (_kendall_rows, 0.0), "pairwise": (_pairwise_rows, 0.5)}
STATISTICS = tuple(_KERNELS)


def per_question(statistic: str, metric: object, outcome: object, groups: object,
                 constant_metric: str = CONSTANT) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """One of ``STATISTICS`` per question, vectorised over the questions with the same number of
    contexts. Returns (question ids, value per question with NaN where undefined, status per
    question: 0 = defined, 1 = constant outcome, 2 = constant metric, 3 = metric NA somewhere).
    A constant metric gets the statistic's no-information value (rho = tau = 0, accuracy 0.5) with
    ``constant_metric="zero"``, NaN with ``"drop"``."""
    if statistic not in _KERNELS:
        raise InputError(f"statistic {statistic!r} is unknown: use one of {', '.join(STATISTICS)}")
    m = np.asarray(metric, dtype=float)
    o = np.asarray(outcome, dtype=float)
    g = np.asarray(groups)
    if not (m.shape == o.shape == g.shape) or m.ndim != 1:
        raise InputError(f"metric, outcome and groups must be 1-D of equal length, got {m.shape}, {o.shape}, {g.shape}")
    if np.isinf(m).any():
        raise InputError("metric values contain inf (score every context with a finite value; NA is NaN)")
    if not np.isfinite(o).all():
        raise InputError("outcome scores contain NaN/inf (grade every context, or leave ungraded ones out)")
    if constant_metric not in CONSTANT_METRIC:
        raise InputError(f"constant_metric = {constant_metric!r}: use 'zero' or 'drop'")
    kernel, no_information = _KERNELS[statistic]
    qids, slices = _group_slices(g)
    value = np.full(len(slices), np.nan)
    status = np.zeros(len(slices), dtype=int)
    sizes = np.array([len(s) for s in slices])
    for size in np.unique(sizes):  # vectorise over questions with the same number of contexts
        which = np.flatnonzero(sizes == size)
        idx = np.stack([slices[i] for i in which])
        mm, oo = m[idx], o[idx]
        const_o = np.ptp(oo, axis=1) == 0
        na = np.isnan(mm).any(1) & ~const_o
        mm = np.where(np.isnan(mm), 0.0, mm)  # placeholders only: rows with NA get NaN below
        const_m = (np.ptp(mm, axis=1) == 0) & ~const_o & ~na
        r = kernel(mm, oo)
        r[const_o | na] = np.nan
        r[const_m] = no_information if constant_metric == "zero" else np.nan
        value[which] = r
        status[which] = np.select([const_o, na, const_m], [1, 3, 2], 0)
    return qids, value, status


def per_question_spearman(metric: object, outcome: object, groups: object,
                          constant_metric: str = CONSTANT) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """``per_question("spearman", ...)``: (question ids, rho per question, status per question)."""
    return per_question("spearman", metric, outcome, groups, constant_metric)


def per_question_kendall(metric: object, outcome: object, groups: object,
                         constant_metric: str = CONSTANT) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """``per_question("kendall", ...)``: Kendall's tau-b per question."""
    return per_question("kendall", metric, outcome, groups, constant_metric)


def per_question_pairwise(metric: object, outcome: object, groups: object,
                          constant_metric: str = CONSTANT) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """``per_question("pairwise", ...)``: pairwise ordering accuracy per question."""
    return per_question("pairwise", metric, outcome, groups, constant_metric)


# Fewer questions than this get no bootstrap interval and no p-value (NaN, shown as NA): with a
# handful of questions the resampled means take only a few values, and when every per-question
# difference has the same sign the "p-value" is 1/n_boot whatever the evidence.
MIN_BOOTSTRAP_QUESTIONS = 5


def bootstrap_mean_ci(values: np.ndarray, n_boot: int = N_BOOT, level: float = LEVEL, seed: int = 0) -> tuple[float, float]:
    """``stats.bootstrap_ci`` with at least ``MIN_BOOTSTRAP_QUESTIONS`` questions."""
    return bootstrap_ci(values, n_boot, level, seed, min_n=MIN_BOOTSTRAP_QUESTIONS)


def summarize(name: str, metric: object, outcome: object, groups: object, constant_metric: str = CONSTANT,
              n_boot: int = N_BOOT, level: float = LEVEL, seed: int = 0) -> CorrelationSummary:
    """Mean per-question Spearman with its bootstrap interval and the question counts."""
    _, rho, status = per_question_spearman(metric, outcome, groups, constant_metric)
    lo, hi = bootstrap_mean_ci(rho, n_boot, level, seed)
    defined = rho[np.isfinite(rho)]
    m, o = np.asarray(metric, dtype=float), np.asarray(outcome, dtype=float)
    known = ~np.isnan(m)
    m, o = m[known], o[known]
    pooled = float(spearmanr(m, o).statistic) if len(m) and np.ptp(m) > 0 and np.ptp(o) > 0 else float("nan")
    return CorrelationSummary(metric=name, mean_rho=float(defined.mean()) if len(defined) else float("nan"),
                              ci_low=lo, ci_high=hi, n_questions=int(len(defined)),
                              n_constant_outcome=int((status == 1).sum()), n_constant_metric=int((status == 2).sum()),
                              pooled_rho=pooled, n_na_metric=int((status == 3).sum()))

