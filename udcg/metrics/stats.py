"""Paired significance tests, multiple-testing correction and bootstrap intervals over queries.

Conventions (those of ``scipy.stats.permutation_test(..., permutation_type="samples")``):

- The paired permutation test flips the sign of each difference d = a - b; its statistic is the
  mean of d. With n <= ``exact_max_n`` it enumerates all 2^n sign vectors and p counts the
  observed statistic among them (no +1); otherwise it draws ``n_resamples`` random sign vectors
  and p = (count + 1) / (n_resamples + 1). Two-sided p = min(1, 2 * min(p_less, p_greater)).
  A null statistic equal to the observed one within a relative 100 machine epsilons counts as
  "at least as extreme" (scipy's ``gamma``).
- Pairs where either value is NaN are dropped before any test. No pair left: p = NaN. Every
  difference zero: p = 1.0 (nothing distinguishes the two, whatever the test).
- Holm-Bonferroni adjusted p-values are monotone in the raw p and capped at 1; NaN p-values stay
  NaN and are not counted in the family.
- Intervals are percentile bootstrap intervals of the mean; non-finite values are dropped.

Resampling is done in chunks of about ``_CHUNK_ELEMENTS`` numbers, so 20,000 queries x 10,000
resamples stays within a few tens of MB; the random draws do not depend on the chunk size.
"""

from __future__ import annotations

import numpy as np

from udcg.errors import InputError

TESTS = ("permutation", "t", "wilcoxon")
EXACT_MAX_N = 20
_CHUNK_ELEMENTS = 1 << 21  # float64 numbers per chunk: 16 MB
_EPS = np.finfo(np.float64).eps * 100  # scipy.stats.permutation_test's relative tolerance


def _differences(a: object, b: object) -> np.ndarray:
    """d = a - b over the pairs where both are defined (validates shapes)."""
    x, y = np.asarray(a, dtype=float), np.asarray(b, dtype=float)
    if x.ndim != 1 or y.ndim != 1:
        raise InputError(f"paired test: a and b must be 1-D per-query values, got shapes {x.shape} and {y.shape}")
    if len(x) != len(y):
        raise InputError(f"paired test: a has {len(x)} values and b has {len(y)} "
                         "(both must hold one value per query, on the same queries)")
    keep = ~(np.isnan(x) | np.isnan(y))
    return x[keep] - y[keep]


def _count_extreme(d: np.ndarray, signs: np.ndarray, observed: float, gamma: float) -> tuple[int, int]:
    """(null <= observed + gamma, null >= observed - gamma) over the rows of ``signs``."""
    null = (signs * d).mean(axis=1)  # mean of the sign-flipped differences, as scipy computes it
    return int(np.count_nonzero(null <= observed + gamma)), int(np.count_nonzero(null >= observed - gamma))


def _sign_flip_p(d: np.ndarray, n_resamples: int, seed: int, exact: bool) -> float:
    n = len(d)
    observed = float(d.mean())
    gamma = abs(_EPS * observed)
    rows = max(1, _CHUNK_ELEMENTS // n)
    less = greater = 0
    if exact:
        total, adjustment = 1 << n, 0
        shifts = np.arange(n, dtype=np.int64)
        for start in range(0, total, rows):
            k = np.arange(start, min(total, start + rows), dtype=np.int64)
            signs = 1.0 - 2.0 * ((k[:, None] >> shifts) & 1)
            lo, hi = _count_extreme(d, signs, observed, gamma)
            less, greater = less + lo, greater + hi
    else:
        total, adjustment = n_resamples, 1
        rng = np.random.default_rng(seed)
        for start in range(0, total, rows):
            bits = rng.integers(0, 2, size=(min(total, start + rows) - start, n))  # chunk-invariant stream
            lo, hi = _count_extreme(d, 1.0 - 2.0 * bits, observed, gamma)
            less, greater = less + lo, greater + hi
    p_less = (less + adjustment) / (total + adjustment)
    p_greater = (greater + adjustment) / (total + adjustment)
    return float(min(1.0, 2 * min(p_less, p_greater)))


def _check_resamples(n_resamples: int) -> None:
    if isinstance(n_resamples, bool) or not isinstance(n_resamples, (int, np.integer)) or n_resamples < 1:
        raise InputError(f"n_resamples = {n_resamples!r}: use a positive integer (e.g. 10000)")


def paired_permutation_test(a: object, b: object, n_resamples: int = 10_000, seed: int = 0,
                            exact_max_n: int = EXACT_MAX_N) -> float:
    """Two-sided p of the paired sign-flip permutation test on the mean of a - b (module docstring)."""
    _check_resamples(n_resamples)
    d = _differences(a, b)
    if len(d) == 0:
        return float("nan")
    if not np.any(d):
        return 1.0
    return _sign_flip_p(d, int(n_resamples), seed, exact=len(d) <= exact_max_n)


def paired_test(a: object, b: object, method: str = "permutation", n_resamples: int = 10_000, seed: int = 0) -> float:
    """Two-sided p of a paired test of 'no difference between a and b': ``method`` is one of
    ``TESTS``: the sign-flip permutation test, Student's paired t (``scipy.stats.ttest_rel``) or
    the Wilcoxon signed-rank test (``scipy.stats.wilcoxon``, zero differences dropped)."""
    if method not in TESTS:
        raise InputError(f"paired test {method!r} is unknown: use one of {', '.join(TESTS)}")
    if method == "permutation":
        return paired_permutation_test(a, b, n_resamples, seed)
    d = _differences(a, b)
    if len(d) == 0:
        return float("nan")
    if not np.any(d):
        return 1.0
    from scipy import stats as scipy_stats  # here, so that the CLI can read TESTS without loading scipy

    if method == "t":
        return float(scipy_stats.ttest_rel(d, np.zeros_like(d)).pvalue) if len(d) >= 2 else float("nan")
    return float(scipy_stats.wilcoxon(d, zero_method="wilcox").pvalue)


def holm(pvalues: object) -> np.ndarray:
    """Holm-Bonferroni adjusted p-values, in the input order; NaN stays NaN, outside the family."""
    p = np.asarray(pvalues, dtype=float)
    if p.ndim != 1:
        raise InputError(f"holm: p-values must be a flat list, got shape {p.shape}")
    known = ~np.isnan(p)
    if np.any((p[known] < 0) | (p[known] > 1)):
        raise InputError(f"holm: p-values must lie in [0, 1], got {p[known][(p[known] < 0) | (p[known] > 1)][:3]}")
    out = np.full(p.shape, np.nan)
    v = p[known]
    order = np.argsort(v, kind="stable")
    m = len(v)
    adjusted = np.empty(m)
    adjusted[order] = np.minimum(1.0, np.maximum.accumulate((m - np.arange(m)) * v[order]))
    out[known] = adjusted
    return out


def bootstrap_ci(values: object, n_boot: int = 10_000, level: float = 0.95, seed: int = 0, *,
                 min_n: int = 2) -> tuple[float, float]:
    """Percentile bootstrap interval of the mean of the finite ``values``; (nan, nan) with fewer
    than ``min_n`` of them. Same random stream as one ``rng.integers(0, n, (n_boot, n))`` draw."""
    if not 0 < level < 1:
        raise InputError(f"level = {level!r}: use a confidence level between 0 and 1 (e.g. 0.95)")
    _check_resamples(n_boot)
    v = np.asarray(values, dtype=float).ravel()
    v = v[np.isfinite(v)]
    n = len(v)
    if n < max(min_n, 1):
        return float("nan"), float("nan")
    rng = np.random.default_rng(seed)
    means = np.empty(n_boot)
    rows = max(1, _CHUNK_ELEMENTS // n)
    for start in range(0, n_boot, rows):
        stop = min(n_boot, start + rows)
        means[start:stop] = v[rng.integers(0, n, size=(stop - start, n))].mean(1)
    a = (1 - level) / 2
    return float(np.quantile(means, a)), float(np.quantile(means, 1 - a))
