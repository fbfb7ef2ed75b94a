"""The smallest p a paired test can give on n queries, and the queries a level needs (issue #48).

A test whose p cannot go below the level it is judged at detects nothing, whatever the data: with
five queries the exact sign-flip test's smallest two-sided p is 2 / 2^5 = 0.0625 > 0.05, so five
queries on which one run beats the other every time are not significant, and no minimum detectable
difference exists: compare's MDD is then undetectable (inf), the answer plan's too, and planning
starts at the queries that reach the level (``stats.min_detectable_difference`` itself stays the
paired t-test's power formula, which validate's power tables use on hundreds of questions). The
floors, for n differences
(all non-zero, as a true shift makes them; the most extreme data the test can see):

- sign-flip permutation test, exact (n <= ``exact_max_n``): 2 / 2^n two-sided, 1 / 2^n one-sided
  (the observed sign vector and its mirror are the only ones as extreme);
- the same with ``n_resamples`` random sign flips (p = (count + 1) / (n_resamples + 1)): the exact
  floor or 2 / (n_resamples + 1) (one-sided 1 / (n_resamples + 1)), whichever is larger;
- Wilcoxon's signed-rank test: the p scipy gives for n differences of one sign (exact up to 50
  differences: 2 / 2^n as the sign-flip test; beyond, its normal approximation);
- Student's paired t: 0 from 2 queries (p goes to 0 as the differences' spread does); 1 below.

A family corrected by Holm (or Bonferroni) rejects nothing unless its smallest p beats alpha / m
(Holm's first step), so a comparison's floor after the correction is min(1, m × floor);
``queries_to_reach`` is the smallest n whose floor is below a level (alpha / m: 6 queries for
alpha 0.05 alone, 7 for a family of 3). The functions take the regime (``exact_max_n``,
``n_resamples``) from their caller (compare, planning, the answer plan), which has it from
``udcg.metrics.stats``.
"""

from __future__ import annotations

import math
from functools import lru_cache

SEARCH_MAX = 100_000  # queries searched for a floor below a level; beyond: unreachable (inf)
WILCOXON_EXACT_MAX = 50  # scipy's wilcoxon is exact up to here (no ties, no zeros), then normal


@lru_cache(maxsize=1024)
def smallest_p(n: int, method: str, exact_max_n: int, n_resamples: int, alternative: str = "two-sided") -> float:
    """The smallest p ``method`` ("permutation", "t", "wilcoxon") can give on ``n`` paired
    differences (module docstring); 1.0 for no difference at all."""
    sides = 2 if alternative == "two-sided" else 1
    if n < 1:
        return 1.0
    if method == "t":
        return 0.0 if n >= 2 else 1.0
    if method == "wilcoxon":
        from scipy import stats as scipy_stats

        side = {"two-sided": "two-sided", "greater": "greater", "less": "greater"}[alternative]
        return float(scipy_stats.wilcoxon(range(1, n + 1), zero_method="wilcox", alternative=side).pvalue)
    exact = min(1.0, math.ldexp(sides, -n))
    return exact if n <= exact_max_n else max(exact, min(1.0, sides / (n_resamples + 1)))


def can_reach(n: int, level: float, method: str, exact_max_n: int, n_resamples: int,
              alternative: str = "two-sided") -> bool:
    """Whether ``method``'s p can be below ``level`` on ``n`` queries (some data would be significant)."""
    return smallest_p(n, method, exact_max_n, n_resamples, alternative) < level


def queries_to_reach(level: float, method: str, exact_max_n: int, n_resamples: int,
                     alternative: str = "two-sided") -> float:
    """The smallest n whose floor is below ``level``; inf when none up to ``SEARCH_MAX`` is (a level
    below the random flips' floor, 2 / (n_resamples + 1)). The floor is not monotone where the regime
    changes (exact up to ``exact_max_n`` sign flips, Wilcoxon exact up to 50): those n are scanned
    one by one, the rest (one regime, a falling floor) searched by doubling and bisection."""
    def reach(n: int) -> bool:
        return can_reach(n, level, method, exact_max_n, n_resamples, alternative)

    scanned = max(exact_max_n, WILCOXON_EXACT_MAX) + 1
    for n in range(1, scanned + 1):
        if reach(n):
            return float(n)
    lo, hi = scanned, 2 * scanned  # reach(lo) is false
    while not reach(hi):
        lo, hi = hi, hi * 2
        if hi > SEARCH_MAX:
            return math.inf
    while hi - lo > 1:
        mid = (lo + hi) // 2
        lo, hi = (lo, mid) if reach(mid) else (mid, hi)
    return float(hi)
