"""How many queries a margin needs: planning figures for ``udcg compare --equivalence``, from the
spread of the paired differences seen. The assumptions are those of the minimum detectable
difference (``stats.min_detectable_difference``): the differences shift as a whole and their
standard deviation sd stays as observed; the sign-flip test is taken as the t-test it tends to, and
Wilcoxon's signed-rank test at its asymptotic relative efficiency 3/π (the margin times √(3/π)).

- ``queries_to_detect``: the smallest n whose MDD (two-sided test at ``alpha``, ``power``) is at
  most the margin: nc(n - 1) · sd / √n <= margin, nc the t noncentrality of ``stats.t_noncentrality``.
- ``queries_to_show_equivalence``: the smallest n at which the TOST at ``alpha`` shows equivalence
  within ±margin with probability ``power`` when the true difference is 0: (t_{1-alpha} +
  t_{(1+power)/2}) · sd / √n <= margin with n - 1 degrees of freedom (the normal-theory
  approximation of the TOST's power; a true difference nearer the margin needs more queries).
- Neither is below the fewest queries on which the test's p can go below alpha at all
  (``p_floor.queries_to_reach``; one-sided for the TOST): the exact sign-flip test needs 6 queries
  at alpha 0.05 (2 / 2^6 < 0.05), 5 for each one-sided test of the TOST (1 / 2^5).

``queries_needed`` gives both from a vector of paired differences (compare's pairs, correlate's
rho differences); ``count_of`` is how the outputs show one. Each is found from the normal
approximation's n, a lower bound (a t quantile exceeds the normal one), by galloping upward and
bisecting. NaN when the differences do not vary (sd 0 or NaN); inf beyond ``MAX_QUERIES``.
"""

from __future__ import annotations

import math
from collections.abc import Callable

import numpy as np

from udcg.errors import InputError
from udcg.metrics.constants import ALPHA, POWER, TEST
from udcg.metrics.p_floor import queries_to_reach
from udcg.metrics.stats import DEFAULT_RESAMPLES, EXACT_MAX_N, TESTS, t_noncentrality

MAX_QUERIES = 10**9


def _check(margin: float, alpha: float, power: float, method: str) -> float:
    """The margin in the t-test's units (Wilcoxon: times √(3/π)); the arguments checked."""
    if method not in TESTS:
        raise InputError(f"paired test {method!r} is unknown: use one of {', '.join(TESTS)}")
    if not 0 < alpha < 1 or not 0 < power < 1:
        raise InputError(f"alpha = {alpha!r}, power = {power!r}: both must lie between 0 and 1 (e.g. 0.05 and 0.8)")
    if isinstance(margin, bool) or not 0 < margin < math.inf:
        raise InputError(f"margin = {margin!r}: use a positive number (e.g. 0.01)")
    return margin * math.sqrt(3 / math.pi) if method == "wilcoxon" else margin


def _smallest(enough: Callable[[int], bool], start: int) -> float:
    """The smallest n >= start with ``enough(n)``, ``enough`` monotone in n; inf beyond MAX_QUERIES."""
    if start > MAX_QUERIES:
        return math.inf
    lo, step = start - 1, 1  # enough(lo) is false (or lo is below the range)
    while not enough(lo + step):
        lo += step
        step *= 2
        if lo > MAX_QUERIES:
            return math.inf
    hi = lo + step
    while hi - lo > 1:
        mid = (lo + hi) // 2
        lo, hi = (lo, mid) if enough(mid) else (mid, hi)
    return float(hi) if hi <= MAX_QUERIES else math.inf


def queries_to_detect(sd: float, margin: float, alpha: float = ALPHA, power: float = POWER,
                      method: str = TEST) -> float:
    """The queries at which a two-sided paired test at ``alpha`` detects a true mean difference of
    ``margin`` with probability ``power``, differences spread with standard deviation ``sd``."""
    from scipy import stats as scipy_stats

    margin = _check(margin, alpha, power, method)
    if not sd > 0 or not math.isfinite(sd):
        return math.nan
    normal = (scipy_stats.norm.isf(alpha / 2) + scipy_stats.norm.ppf(power)) * sd / margin

    def enough(n: int) -> bool:
        try:
            return n >= 2 and t_noncentrality(n - 1, alpha, power) * sd / math.sqrt(n) <= margin
        except InputError:  # alpha too small for a t-test on so few queries
            return False

    return _smallest(enough, max(2, math.ceil(normal ** 2), _floor_n(alpha, method, "two-sided")))


def _floor_n(alpha: float, method: str, alternative: str) -> float:
    """The fewest queries on which the test's p can go below ``alpha`` at all (``p_floor``); the
    search starts there (inf: never)."""
    n = queries_to_reach(alpha, method, EXACT_MAX_N, DEFAULT_RESAMPLES, alternative)
    return MAX_QUERIES + 1 if math.isinf(n) else int(n)


def queries_to_show_equivalence(sd: float, margin: float, alpha: float = ALPHA, power: float = POWER,
                                method: str = TEST) -> float:
    """The queries at which the TOST at ``alpha`` shows equivalence within ±``margin`` with
    probability ``power`` when the true mean difference is 0, differences spread with ``sd``."""
    from scipy import stats as scipy_stats

    margin = _check(margin, alpha, power, method)
    if not sd > 0 or not math.isfinite(sd):
        return math.nan
    normal = (scipy_stats.norm.isf(alpha) + scipy_stats.norm.ppf((1 + power) / 2)) * sd / margin

    def enough(n: int) -> bool:
        quantiles = scipy_stats.t.isf(alpha, n - 1) + scipy_stats.t.ppf((1 + power) / 2, n - 1) if n >= 2 else math.inf
        return quantiles * sd / math.sqrt(n) <= margin

    return _smallest(enough, max(2, math.ceil(normal ** 2), _floor_n(alpha, method, "greater")))


def queries_needed(differences: object, margin: float, alpha: float = ALPHA, power: float = POWER,
                   method: str = TEST) -> tuple[float, float]:
    """(``queries_to_detect``, ``queries_to_show_equivalence``) with the spread of these paired
    differences (NaN-free): the sample standard deviation; NaN for both with fewer than two."""
    d = np.asarray(differences, dtype=float)
    sd = float(np.std(d, ddof=1)) if d.size > 1 else math.nan
    return (queries_to_detect(sd, margin, alpha, power, method),
            queries_to_show_equivalence(sd, margin, alpha, power, method))


def count_of(queries: float) -> int | str | None:
    """A planned number of queries as the outputs give it: an int, "unreachable" beyond
    ``MAX_QUERIES`` (inf), None where there is none (NaN)."""
    return None if math.isnan(queries) else "unreachable" if math.isinf(queries) else int(queries)
