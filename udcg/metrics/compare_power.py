"""What a comparison's tests can detect, in the report's words (``udcg.metrics.compare_report``'s
footer): the line that says what the MDD is, and, once, the queries below which the chosen test
cannot be significant at all (``metrics.p_floor``: with 5 queries the exact sign-flip test's
smallest p is 2 / 2^5 = 0.0625 > 0.05) with the number of queries that would let it be.

The MDD is the paired t-test's (``stats.min_detectable_difference``); the sign-flip test on the
mean tends to it as n grows. On few queries, where the exact test's p nears its floor, its own power
at that MDD is lower: ``SMALL_N``.
"""

from __future__ import annotations

import math

from udcg.metrics.comparison import ComparisonData, PairTest
from udcg.metrics.p_floor import queries_to_reach, smallest_p
from udcg.metrics.stats import EXACT_MAX_N

# Below this many queries the sign-flip (or Wilcoxon) test's own power at the paired-t MDD falls short
# of the power stated: normal differences at n = 6, 0.62 instead of 0.80; n = 8, 0.79 (tests/test_compare_power.py)
SMALL_N = 8


def per_measure(values: dict[str, object], fmt) -> str:
    """One value for every measure, or each measure's own, formatted by ``fmt``."""
    distinct = set(values.values())
    if len(distinct) == 1:
        return fmt(next(iter(distinct)))
    return ", ".join(f"{m}: {fmt(v)}" for m, v in values.items())


def _regime(cmp: ComparisonData, n: int) -> tuple[str, int]:
    """The test as a sentence names it, and the sign flips' exact limit it ran with."""
    exact_max_n = EXACT_MAX_N if cmp.exact else 0
    if cmp.test == "t":
        return "paired t-test", exact_max_n
    if cmp.test == "wilcoxon":
        return "Wilcoxon signed-rank test", exact_max_n
    if n <= exact_max_n:
        return "exact sign-flip test", exact_max_n
    return f"sign-flip test with {cmp.n_resamples:,} random flips", exact_max_n


def floor_lines(cmp: ComparisonData, pairs: tuple[PairTest, ...], sizes: dict[str, int], levels: dict[str, float],
                where: str = "") -> list[str]:
    """One sentence per (queries, family) of the pairs no data could make significant: the test's
    smallest p, after the family's correction, and the queries that would give it a chance."""
    groups: dict[tuple[int, int, float], list[PairTest]] = {}
    for t in pairs:
        if not t.reachable:
            family = sizes.get(t.measure, 1) if cmp.correction != "none" else 1
            groups.setdefault((t.n, max(family, 1), levels.get(t.measure, cmp.alpha)), []).append(t)
    out = []
    for (n, family, level), tests in groups.items():
        name, exact_max_n = _regime(cmp, n)
        raw = smallest_p(n, cmp.test, exact_max_n, cmp.n_resamples)
        needed = queries_to_reach(level, cmp.test, exact_max_n, cmp.n_resamples)
        holm = (f"; Holm over the {family} comparisons of its family makes it {tests[0].p_floor:.4g}"
                if family > 1 else "")
        more = ("no number of queries lets it reach that level" if math.isinf(needed) else
                f"use at least {int(needed)} queries")
        sign = ">" if tests[0].p_floor > cmp.alpha else "≥"
        measures = sorted({str(t.measure) for t in tests})
        which = "" if len(tests) == len(pairs) else f" ({', '.join(measures)})"
        out.append(f"{where + ', w' if where else 'W'}ith n = {n} quer{'y' if n == 1 else 'ies'}{which} the {name}'s smallest p is {raw:.4g}"
                   f"{holm} {sign} {cmp.alpha:g}: no difference can be significant (MDD: undetectable); {more}.")
    return out


def _range_note(cmp: ComparisonData) -> str:
    if not any(t.undetectable and t.reachable for t in cmp.pairs):
        return ""
    return (" undetectable: the detectable difference exceeds the measure's whole range (" +
            ", ".join(f"{m}: {w:g}" for m, w in cmp.ranges.items()) + "): no true difference can be shown with "
            "this many queries.")


def _small_note(cmp: ComparisonData) -> str:
    """Where the test is the sign-flip or Wilcoxon test and a pair has fewer than ``SMALL_N`` queries
    (and a chance to be significant): the MDD overstates that test's power there."""
    if cmp.test == "t" or not any(t.reachable and 0 < t.n < SMALL_N for t in cmp.pairs):
        return ""
    return (f" With fewer than {SMALL_N} queries this test's own power at the MDD is below {cmp.power:.0%} (its p "
            "nears its floor: with normal differences the exact sign-flip test has 62% power at 6 queries where the "
            "paired t-test has 80%).")


def mdd_line(cmp: ComparisonData) -> str:
    """The footer's line that says what the MDD is and where there is none."""
    level = per_measure(cmp.mdd_alpha, lambda a: f"{a:.4g}")
    at = ("alpha" if cmp.correction == "none" else
          "alpha/m (m = comparisons in the pair's family: Holm's strictest step)")
    spread = "paired-t power" + (", / √(3/π) for Wilcoxon" if cmp.test == "wilcoxon" else "")
    return (f"MDD: the smallest true mean difference this test would detect with {cmp.power:.0%} power at {at} = "
            f"{level}; an estimate from the spread of the paired differences ({spread})." + _range_note(cmp)
            + _small_note(cmp))
