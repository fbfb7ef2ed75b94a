"""Compare retrieval runs on per-query scores: means with bootstrap intervals, paired tests
between every pair of runs with their paired differences, intervals and minimum detectable
differences, Holm's correction over a chosen family, ranx-style reports.

``compare_scores`` returns a ``Comparison`` (data); ``format_comparison``
(``udcg.metrics.compare_report``) renders it as Markdown, CSV, JSON or LaTeX.

- **Families** (``correction``): ``"measure"`` (default) — Holm over the run pairs of each measure,
  one family per measure, as IR evaluation compares systems on one measure at a time (adding a
  measure changes no other measure's adjusted p); ``"table"`` — Holm over every run pair x every
  measure; ``"none"`` — raw p against ``alpha``. NaN p-values are outside every family.
- **Intervals** (``comparison_intervals``): one set of resampled queries (``stats.bootstrap_means``,
  seeded) gives every run's interval of the mean and every pair's interval of the mean paired
  difference, over the queries where the values are defined; without NaNs a pair's resampled
  difference is the difference of the two runs' resampled means. The resamples draw row indices, so
  the rows' order matters: ``udcg compare`` and ``udcg.compare`` give the rows in the canonical
  query order (``score_runs``), and a caller of ``compare_scores`` should too for intervals that do
  not depend on its input's order.
- **Minimum detectable difference** (MDD) of a pair: ``stats.min_detectable_difference`` at
  ``power`` (0.8) and the family's strictest Holm level alpha / m (m = comparisons in the pair's
  family; alpha with ``correction="none"``), so a true difference this large is detected with at
  least that power whatever the other p-values. An estimate from the spread of the paired
  differences (the paired t-test's power). inf (undetectable) where the test's smallest p on the
  pair's queries is not below that level (``p_floor``: 2 / 2^n for the exact sign-flip test, so
  none on 5 queries, 2 / 2^5 = 0.0625; ``PairTest.reachable``, ``p_floor`` = m x that floor).
- **Permutation test cost**: exact enumeration (n <= ``EXACT_MAX_N`` = 24 queries) unless the
  table's 2^n sums would exceed ``EXACT_BUDGET`` (a few seconds here); then every pair uses
  ``n_resamples`` (100,000) seeded random sign flips and the report says so, with the largest Monte
  Carlo standard error of an estimated p (``PairTest.p_se``). p never depends on the order of the
  queries (``stats``: canonical order).

**Where a measure ties** (``ties``, e.g. nDCG@5): for each run pair, the queries where the two
runs' values of that measure are equal (within ``EQUAL_WITHIN``), and on them each other measure's
mean paired difference with its interval (the queries resampled within them, seeded), counts,
detectable difference and paired test, Holm-corrected over this table's own families by the same
``correction`` rule (``Comparison.tie_pairs``, ``tie_family_sizes``). Where nDCG ties, a
difference in UDCG is one nDCG cannot show: on the published NQ run UDCG's whole edge over nDCG
in following the reader's answers lay in such context pairs.

**Equivalence** (``equivalence``: a margin per measure): each pair on that measure also gets the
two one-sided tests (TOST) of H0 mean difference <= -margin and >= +margin with the pair's test
(``equivalence.equivalence_pvalues``); p_TOST is the larger one-sided p, Holm-adjusted by the same
``correction`` over the equivalence tests alone. ``PairTest.decision``: "different" (significant),
"equivalent" (p_TOST below alpha), "different, within the margin" (both: a real difference smaller
than the margin) or "inconclusive" (neither); the margin is the user's statement of the smallest
difference that matters, fixed before the data.

**Against a baseline** (``baseline``: one of the runs): only (run, baseline) for each other run, so a
family holds m - 1 comparisons, not m(m - 1)/2 (PyTerrier's ``baseline=``; ``comparison.run_pairs``).

Run A *beats* run B on a measure when the paired mean difference A - B (over the queries where
both are defined) is positive and the adjusted p is below ``alpha``; without NaNs that
difference is the difference of the two means. ``direction[measure]`` turns this round: -1 for a
measure where lower is better (a wrong-answer rate), 0 for one with no better side (an abstention
rate: no run beats another, none is bold). A ``Measure`` key's default is its declared direction
(``Measure.direction``, from its definition in ``udcg.metrics.registry``); any other key's is +1.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, replace

import numpy as np

from udcg.errors import InputError
from udcg.metrics.compare_report import CSV_COLUMNS, FORMATS, footer_lines, format_comparison, label_of_test
from udcg.metrics.comparison import EQUAL_WITHIN, Cell, ComparisonData, PairTest, run_pairs
from udcg.metrics.comparison_intervals import intervals
from udcg.metrics.constants import CORRECTIONS
from udcg.metrics.equivalence import equivalence_pvalues
from udcg.metrics.measure_types import Measure
from udcg.metrics.p_floor import can_reach, smallest_p
from udcg.metrics.paired_tests import CompareTests
from udcg.metrics.planning import count_of, queries_needed
from udcg.metrics.stats import (EXACT_MAX_N, bootstrap_ci, holm, is_estimated, min_detectable_difference,
                                monte_carlo_se, paired_test, sign_flip_pvalues)

__all__ = ["CORRECTIONS", "CSV_COLUMNS", "EXACT_BUDGET", "FORMATS", "Cell", "CompareTests", "Comparison", "ComparisonData",
           "PairTest", "compare_scores", "format_comparison"]

EXACT_BUDGET = 1 << 28  # sign-flip sums of the exact tests of one table: 16 pairs at n = 24, a few seconds


@dataclass(frozen=True)
class Comparison(ComparisonData):
    """The comparison (``ComparisonData``) with its renderings: JSON-ready dict, report, DataFrames."""

    def to_dict(self) -> dict:
        """JSON-ready: NaN becomes None. ``test_label`` (permutation-exact, -random or -mixed, t,
        wilcoxon), ``correction`` (the family), ``family_sizes`` and ``footer`` (the report's
        sentences) say how the p-values were made."""
        return {"runs": list(self.runs), "labels": self.labels, "measures": list(self.measures), "test": self.test,
                "test_label": label_of_test(self), "footer": footer_lines(self),
                "alpha": self.alpha, "correction": self.correction, "family_sizes": dict(self.family_sizes),
                "mdd_alpha": dict(self.mdd_alpha), "power": self.power, "exact": self.exact,
                "n_resamples": self.n_resamples, "n_boot": self.n_boot, "level": self.level, "seed": self.seed,
                "n_queries": dict(self.n_queries), "n_shared": dict(self.n_shared), "notes": list(self.notes),
                "direction": {m: self.direction.get(m, 1) for m in self.measures},
                "cells": {r: {m: {"mean": _none(c.mean), "low": _none(c.low), "high": _none(c.high), "n": c.n}
                              for m, c in by_m.items()} for r, by_m in self.cells.items()},
                "pairs": [self._pair_dict(t) for t in self.pairs], "ties_of": self.ties_of or None,
                "tie_pairs": [self._pair_dict(t, self.tie_family_sizes) for t in self.tie_pairs],
                "tie_family_sizes": dict(self.tie_family_sizes), "tie_mdd_alpha": dict(self.tie_mdd_alpha),
                "beats": {r: {m: list(b) for m, b in by_m.items()} for r, by_m in self.beats.items()},
                "baseline": self.baseline or None}

    def _pair_dict(self, t: PairTest, sizes: Mapping[str, int] | None = None) -> dict:
        return {"measure": t.measure, "run_a": t.run_a, "run_b": t.run_b, "diff": _none(t.diff),
                "low": _none(t.low), "high": _none(t.high), "n": t.n, "mdd": _none(t.mdd),
                "undetectable": t.undetectable, "undetectable_reason": t.undetectable_reason or None,
                "p_floor": _none(t.p_floor), "p": _none(t.p),
                "p_holm": _none(t.p_holm), "p_se": _none(t.p_se), "significant": t.significant,
                "family_size": (self.family_sizes if sizes is None else sizes).get(t.measure, 0),
                "a_higher": t.a_higher, "equal": t.equal,
                "b_higher": t.b_higher, "margin": _none(t.margin), "p_tost": _none(t.p_tost),
                "p_tost_holm": _none(t.p_tost_holm), "equivalent": t.equivalent if t.decision else None,
                "decision": t.decision or None, "queries_to_detect": count_of(t.queries_to_detect),
                "queries_for_equivalence": count_of(t.queries_for_equivalence)}

    def format(self, fmt: str = "markdown", digits: int = 4) -> str:
        """The report as Markdown, CSV, JSON or LaTeX (``format_comparison``)."""
        return format_comparison(self, fmt, digits)

    def to_frame(self, kind: str = "runs"):
        """A pandas DataFrame (needs pandas). ``"runs"``: one row per (run, measure): mean, low, high,
        n, beats. ``"pairs"``: one row per (measure, run_a, run_b): diff, its interval low/high, n,
        a_higher / equal / b_higher (queries), mdd (NaN where undetectable), p, p_holm, significant,
        family_size, p_floor (the test's smallest p on n queries after the correction). ``"ties"``:
        the same for the tie table (``compare(ties=...)``; n = the pair's tied queries). ``"queries"``:
        one row per (measure, qid): each run's value and each pair's difference A - B on the query
        (``query_rows``), to find the queries that drive a gap."""
        try:
            import pandas as pd
        except ImportError:
            raise InputError("to_frame() needs pandas (pip install pandas)") from None
        if kind == "runs":
            rows = [{"run": r, "measure": m, "mean": c.mean, "low": c.low, "high": c.high, "n": c.n,
                     "beats": ",".join(self.beats[r][m])} for r, by_m in self.cells.items() for m, c in by_m.items()]
            return pd.DataFrame(rows).set_index(["run", "measure"])
        if kind in ("pairs", "ties"):
            columns = ["measure", "run_a", "run_b", "diff", "low", "high", "n", "a_higher", "equal", "b_higher", "mdd",
                       "p", "p_holm", "significant", "family_size", "margin", "p_tost", "p_tost_holm", "equivalent",
                       "decision", "queries_to_detect", "queries_for_equivalence", "p_floor"]
            dicts = ([self._pair_dict(t) for t in self.pairs] if kind == "pairs" else
                     [self._pair_dict(t, self.tie_family_sizes) for t in self.tie_pairs])
            rows = [{k: (float("nan") if v is None else v) for k, v in d.items()} for d in dicts]
            return pd.DataFrame(rows, columns=columns).set_index(["measure", "run_a", "run_b"])
        if kind == "queries":
            header, rows = self.query_rows()
            return pd.DataFrame(rows, columns=header).set_index(["measure", "qid"])
        raise InputError(f"to_frame({kind!r}): choose 'runs', 'pairs', 'ties' or 'queries'")

    def __repr__(self) -> str:
        significant = sum(t.significant for t in self.pairs)
        return (f"<Comparison of {len(self.runs)} runs ({', '.join(self.runs)}) on {', '.join(map(str, self.measures))}: "
                f"{len(self.pairs)} pairs, {significant} significant; .format(), .to_frame()>")

    def _repr_html_(self) -> str:
        """The report's tables as HTML (Jupyter), the same cells as ``format()``."""
        from udcg.metrics.html import markdown_html

        return markdown_html(self.format())

    def to_frames(self) -> dict:
        """``{"runs": to_frame("runs"), "pairs": to_frame("pairs")}``, and ``"ties"`` with a tie table."""
        frames = {"runs": self.to_frame("runs"), "pairs": self.to_frame("pairs")}
        return {**frames, "ties": self.to_frame("ties")} if self.ties_of else frames


def _none(x: float) -> float | None:
    return None if not math.isfinite(x) else float(x)


def _validate(scores: Mapping[str, Mapping[str, object]]) -> tuple[list[str], list[str], dict]:
    if not scores:
        raise InputError("compare_scores: no runs given (pass {run: {measure: per-query values}})")
    runs = list(scores)
    measures = list(scores[runs[0]])
    if not measures:
        raise InputError(f"compare_scores: run {runs[0]!r} has no measures")
    arrays: dict[str, dict[str, np.ndarray]] = {}
    for run in runs:
        if set(scores[run]) != set(measures):
            raise InputError(f"compare_scores: run {run!r} has measures {sorted(scores[run])}, run {runs[0]!r} has "
                             f"{sorted(measures)} (score every run on the same measures)")
        arrays[run] = {m: np.asarray(scores[run][m], dtype=float) for m in measures}
        for m, v in arrays[run].items():
            if v.ndim != 1:
                raise InputError(f"compare_scores: run {run!r}, measure {m!r}: expected one value per query (1-D), "
                                 f"got shape {v.shape}")
            if len(v) != len(arrays[runs[0]][m]):
                raise InputError(f"compare_scores: measure {m!r} has {len(v)} queries in run {run!r} but "
                                 f"{len(arrays[runs[0]][m])} in run {runs[0]!r} (align every run on the same queries)")
    return runs, measures, arrays


def _exact_fits(differences: list[np.ndarray]) -> bool:
    """Whether the exact sign-flip tests of these pairs stay within ``EXACT_BUDGET`` sums."""
    work = sum(1 << len(d) for d in differences if 0 < len(d) <= EXACT_MAX_N and np.any(d))
    return work <= EXACT_BUDGET


def _families(keys: list[str], pvalues: list[float], correction: str) -> tuple[np.ndarray, dict[str, int]]:
    """Adjusted p per comparison (NaN with "none") and the family size of each measure."""
    p = np.asarray(pvalues, dtype=float)
    if correction == "table":
        size = int(np.count_nonzero(~np.isnan(p)))
        return holm(p), {k: size for k in keys}
    adjusted = np.full(len(p), np.nan)
    sizes = {}
    for k in dict.fromkeys(keys):
        idx = [i for i, key in enumerate(keys) if key == k]
        sizes[k] = int(np.count_nonzero(~np.isnan(p[idx])))
        if correction == "measure":
            adjusted[idx] = holm(p[idx])
    return adjusted, sizes


@dataclass(frozen=True)
class _Tested:
    """The paired tests of a table's (measure, run a, run b) keys before their rows: ``sides[key]``
    the two runs' values compared, ``diffs`` their NaN-free differences, the raw and adjusted p, each
    measure's family size and MDD level, and whether every p is exact."""

    sides: Mapping[tuple[str, str, str], tuple[np.ndarray, np.ndarray]]
    diffs: list[np.ndarray]
    pvalues: list[float]
    adjusted: np.ndarray
    sizes: dict[str, int]
    mdd_alpha: dict[str, float]
    exact: bool


def _pair_tests(tested: _Tested, pair_ci: dict, tests: CompareTests, ranges: Mapping[str, float]) -> list[PairTest]:
    """One ``PairTest`` per (measure, run a, run b) of ``tested``; an MDD beyond the measure's range,
    or of a test whose p cannot go below the MDD's level on these queries (``p_floor``), is inf."""
    pairs = []
    test, correction, n_resamples, sizes, mdd_alpha = (tests.test, tests.correction, tests.n_resamples, tested.sizes,
                                                       tested.mdd_alpha)
    exact_max_n = EXACT_MAX_N if tested.exact else 0
    for (m, a, b), d, p, p_adj in zip(tested.sides, tested.diffs, tested.pvalues, tested.adjusted):
        decisive = p if correction == "none" else p_adj
        estimated = test == "permutation" and np.any(d) and is_estimated(len(d), exact_max_n)
        family = sizes[m] if correction != "none" and sizes[m] > 1 else 1
        floor = min(1.0, family * smallest_p(len(d), test, exact_max_n, n_resamples)) if len(d) else math.nan
        reachable = not len(d) or can_reach(len(d), mdd_alpha[m], test, exact_max_n, n_resamples)
        mdd = (min_detectable_difference(*tested.sides[m, a, b], mdd_alpha[m], tests.power, test) if reachable
               else math.inf)
        if m in ranges and mdd > ranges[m]:
            mdd = math.inf
        higher, lower = int(np.count_nonzero(d > EQUAL_WITHIN)), int(np.count_nonzero(d < -EQUAL_WITHIN))
        pairs.append(PairTest(m, a, b, float(d.mean()) if len(d) else float("nan"), p, float(p_adj),
                              bool(decisive < tests.alpha), *pair_ci[m, a, b], len(d), mdd,
                              monte_carlo_se(p, n_resamples) if estimated else float("nan"),
                              higher, len(d) - higher - lower, lower, p_floor=floor, reachable=reachable))
    return pairs


def compare_scores(scores: Mapping[str, Mapping[str, object]], *, tests: CompareTests = CompareTests(),
                   notes: tuple[str, ...] = (), direction: Mapping[str, int] | None = None,
                   ranges: Mapping[str, float] | None = None, ties: str | None = None,
                   equivalence: Mapping[str, float] | None = None, baseline: str | None = None) -> Comparison:
    """``scores[run][measure]``: per-query values, aligned on the same queries across runs (NaN =
    undefined for that query). Runs keep the given order, measures the first run's order.
    ``tests``: the paired test, its sign flips, the bootstrap resamples, seed, alpha, family
    (``correction``), power and interval level (``CompareTests``, checked when built; ``udcg
    compare``'s are ``CompareOptions.tests()``). See the module docstring for the families,
    intervals, detectable differences and ``direction``; ``notes`` are extra lines for the report's
    footer. ``ranges[measure]``: the width of the measure's range (1 for a measure in [0, 1]): a
    detectable difference beyond it is reported as undetectable (``PairTest.mdd`` = inf). ``ties``:
    one of the measures; adds the table of every other measure on each run pair's queries where the
    two runs tie on it (``Comparison.tie_pairs``, module docstring). ``equivalence[measure]``: a
    margin; each pair on that measure also gets its equivalence test (module docstring).
    ``baseline``: one of the runs; only each other run against it is compared (module docstring)."""
    runs, measures, arrays = _validate(scores)
    if baseline is not None and baseline not in runs:
        raise InputError(f"compare_scores: baseline {baseline!r} is not one of the runs compared ({', '.join(runs)})")
    compared = run_pairs(runs, baseline)
    direction = {m: int((direction or {}).get(m, m.direction if isinstance(m, Measure) else 1)) for m in measures}
    if any(v not in (-1, 0, 1) for v in direction.values()):
        raise InputError(f"compare_scores: direction {direction}: use +1 (higher is better), -1 (lower) or 0 (neither)")
    cell_ci, pair_ci = intervals(runs, compared, measures, arrays, tests.n_boot, tests.level, tests.seed)
    cells = {}
    for run in runs:
        cells[run] = {}
        for m, v in arrays[run].items():
            defined = v[~np.isnan(v)]
            cells[run][m] = Cell(float(defined.mean()) if len(defined) else float("nan"), *cell_ci[m, run],
                                 len(defined))
    n_shared = {m: int(np.count_nonzero(np.all([~np.isnan(arrays[r][m]) for r in runs], axis=0))) for m in measures}
    sides = {(m, a, b): (arrays[a][m], arrays[b][m]) for m in measures for a, b in compared}
    ranges = {m: float(w) for m, w in (ranges or {}).items() if m in measures}
    margins = {m: float(v) for m, v in (equivalence or {}).items()}
    if set(margins) - set(measures):
        raise InputError(f"compare_scores: equivalence margins for {', '.join(sorted(set(margins) - set(measures)))}: "
                         f"not among the measures compared ({', '.join(measures)})")
    pairs, tested = _tested(sides, measures, pair_ci, tests, ranges, margins)
    tie_pairs, tie_sizes, tie_alpha = (), {}, {}
    if ties is not None:
        if ties not in measures:
            raise InputError(f"compare_scores: ties = {ties!r} is not one of the measures compared ({', '.join(measures)})")
        others = [m for m in measures if m != ties]
        if not others:
            raise InputError(f"compare_scores: ties = {ties!r} is the only measure compared: the tie table compares the "
                             "others on its ties (add a measure, e.g. UDCG@5)")
        tie_pairs, tie_tested = _on_ties(compared, others, arrays, ties, tests, ranges, margins)
        tie_sizes, tie_alpha = tie_tested.sizes, tie_tested.mdd_alpha
    order = {r: i for i, r in enumerate(runs)}
    beats: dict[str, dict[str, list[str]]] = {r: {m: [] for m in measures} for r in runs}
    for t in pairs:
        if t.significant and t.diff != 0 and direction[t.measure]:
            winner, loser = (t.run_a, t.run_b) if t.diff * direction[t.measure] > 0 else (t.run_b, t.run_a)
            beats[winner][t.measure].append(loser)
    for by_m in beats.values():
        for m in by_m:
            by_m[m] = sorted(by_m[m], key=order.__getitem__)
    return Comparison(tuple(runs), tuple(measures), tests.test, float(tests.alpha), int(tests.n_resamples),
                      int(tests.n_boot), float(tests.level), {m: len(arrays[runs[0]][m]) for m in measures}, cells,
                      tuple(pairs), beats, tests.correction, tested.sizes, tested.mdd_alpha, float(tests.power),
                      tested.exact, tuple(notes), int(tests.seed), direction, n_shared, ranges,
                      "" if ties is None else str(ties), tuple(tie_pairs), tie_sizes, tie_alpha,
                      "" if baseline is None else str(baseline))


def _tested(sides: dict[tuple[str, str, str], tuple[np.ndarray, np.ndarray]], measures: list[str], pair_ci: dict,
            tests: CompareTests, ranges: Mapping[str, float], margins: Mapping[str, float]
            ) -> tuple[list[PairTest], _Tested]:
    """The paired test, correction and detectable difference of every (measure, run a, run b) of
    ``sides``, and the equivalence test of those whose measure has a margin: the pairs, and what
    they were tested at (``_Tested``: each measure's family size and MDD level, whether every p is
    exact)."""
    test, correction, alpha = tests.test, tests.correction, tests.alpha
    keys = list(sides)
    diffs = [x - y for x, y in sides.values()]
    diffs = [d[~np.isnan(d)] for d in diffs]
    exact = test != "permutation" or _exact_fits(diffs)
    if test == "permutation":  # one draw of random sign flips per query count, shared by the pairs
        pvalues = sign_flip_pvalues(diffs, tests.n_resamples, tests.seed, EXACT_MAX_N if exact else 0)
    else:
        pvalues = [paired_test(x, y, test, tests.n_resamples, tests.seed) for x, y in sides.values()]
    adjusted, sizes = _families([m for m, _, _ in keys], pvalues, correction)
    sizes = {m: sizes.get(m, 0) for m in measures}
    mdd_alpha = {m: alpha / sizes[m] if correction != "none" and sizes[m] > 1 else alpha for m in measures}
    tested = _Tested(sides, diffs, pvalues, adjusted, sizes, mdd_alpha, exact)
    pairs = _pair_tests(tested, pair_ci, tests, ranges)
    if margins:
        pairs = _equivalence(pairs, tested, margins, tests)
    return pairs, tested


def _equivalence(pairs: list[PairTest], tested: _Tested, margins: Mapping[str, float],
                 tests: CompareTests) -> list[PairTest]:
    """The pairs with the TOST of each measure with a margin (``equivalence.equivalence_pvalues``, the
    pair's test), Holm-adjusted by the same ``correction`` over the equivalence tests alone, and the
    queries the margin needs (``planning``, at the MDD's level ``tested.mdd_alpha[measure]``)."""
    diffs, levels = tested.diffs, tested.mdd_alpha
    chosen = [i for i, t in enumerate(pairs) if t.measure in margins]
    p_tost = np.full(len(pairs), np.nan)
    p_tost[chosen] = equivalence_pvalues([diffs[i] for i in chosen], [margins[pairs[i].measure] for i in chosen],
                                         tests.test, tests.n_resamples, tests.seed, EXACT_MAX_N if tested.exact else 0)
    adjusted, _ = _families([t.measure for t in pairs], list(p_tost), tests.correction)
    out = []
    for t, d, p, p_adj in zip(pairs, diffs, p_tost, adjusted):
        if t.measure not in margins:
            out.append(t)
            continue
        decisive = p if tests.correction == "none" else p_adj
        margin = float(margins[t.measure])
        detect, equivalence = queries_needed(d, margin, levels[t.measure], tests.power, tests.test)
        out.append(replace(t, margin=margin, p_tost=float(p), p_tost_holm=float(p_adj),
                           equivalent=bool(decisive < tests.alpha), queries_to_detect=detect,
                           queries_for_equivalence=equivalence))
    return out


def _on_ties(compared: list[tuple[str, str]], measures: list[str], arrays: dict, ties: str, tests: CompareTests,
             ranges: Mapping[str, float], margins: Mapping[str, float]) -> tuple[list[PairTest], _Tested]:
    """Every run pair on the queries where its two runs' ``ties`` values are equal (within
    ``EQUAL_WITHIN``): each other measure's paired test, interval (queries resampled within them),
    detectable difference and counts; Holm over this table's own families (module docstring)."""
    tied = {}
    for a, b in compared:
        ta, tb = arrays[a][ties], arrays[b][ties]
        tied[a, b] = ~np.isnan(ta) & ~np.isnan(tb) & (np.abs(ta - tb) <= EQUAL_WITHIN)
    sides = {(m, a, b): (arrays[a][m][mask], arrays[b][m][mask]) for m in measures for (a, b), mask in tied.items()}
    pair_ci = {}
    for key, (x, y) in sides.items():
        d = x - y
        pair_ci[key] = bootstrap_ci(d[~np.isnan(d)], tests.n_boot, tests.level, tests.seed)
    return _tested(sides, measures, pair_ci, tests, ranges, margins)
