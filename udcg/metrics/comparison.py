"""The data of a comparison of runs (``udcg.metrics.compare.compare_scores``): each run's cell per
measure, each pair's test, and the table's settings. ``udcg.metrics.compare_report`` renders it;
``udcg.metrics.compare.Comparison`` adds the renderings as methods (``format``, ``to_dict``,
``to_frame``). The data sits below both so that neither imports the other's module back.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from itertools import combinations

from udcg.metrics.constants import CORRECTION, POWER, SEED
from udcg.metrics.equivalence import decision

EQUAL_WITHIN = 1e-12  # two runs' values of a query closer than this count as equal (floating-point noise)


def labels_of(n: int) -> list[str]:
    """a, b, ..., z, aa, ab, ...: spreadsheet-style letters."""
    out = []
    for i in range(n):
        s, i = "", i + 1
        while i:
            i, r = divmod(i - 1, 26)
            s = chr(97 + r) + s
        out.append(s)
    return out


def run_pairs(runs: list[str], baseline: str | None = None) -> list[tuple[str, str]]:
    """The compared (run A, run B): every pair in run order, or (run, baseline) for each other run."""
    if baseline is None:
        return list(combinations(runs, 2))
    return [(r, baseline) for r in runs if r != baseline]


@dataclass(frozen=True, slots=True)
class Cell:
    mean: float  # over the queries where the run's value is defined
    low: float
    high: float
    n: int


@dataclass(frozen=True, slots=True)
class PairTest:
    measure: str
    run_a: str
    run_b: str
    diff: float  # mean of a - b over the queries where both are defined
    p: float
    p_holm: float  # Holm-adjusted within the pair's family; NaN with correction "none"
    significant: bool
    low: float = float("nan")  # percentile bootstrap interval of the mean paired difference
    high: float = float("nan")
    n: int = 0  # queries where both are defined
    mdd: float = float("nan")  # minimum detectable difference (module docstring)
    p_se: float = float("nan")  # Monte Carlo standard error of p (random sign flips); NaN for an exact p
    a_higher: int = 0  # of the n queries: where a's value is higher than b's, equal (|a - b| <= EQUAL_WITHIN), lower
    equal: int = 0
    b_higher: int = 0
    margin: float = float("nan")  # the equivalence margin of the pair's measure (NaN: none given)
    p_tost: float = float("nan")  # two one-sided tests: the larger p (compare's module docstring)
    p_tost_holm: float = float("nan")  # Holm-adjusted over the equivalence tests of the pair's family
    equivalent: bool = False  # the decisive p_TOST is below alpha
    queries_to_detect: float = float("nan")  # with a margin: queries to detect ±margin (``planning``), inf beyond reach
    queries_for_equivalence: float = float("nan")  # queries for the TOST to show equivalence if the difference were 0
    p_floor: float = float("nan")  # the smallest p the test can give on n queries, after the family's correction
    reachable: bool = True  # p_floor < alpha: some data on n queries would be significant (``metrics.p_floor``)

    @property
    def decision(self) -> str:
        """With a margin: different, equivalent, different within the margin, or inconclusive; else ""."""
        return "" if math.isnan(self.margin) else decision(self.significant, self.equivalent, self.margin)

    @property
    def undetectable(self) -> bool:
        """No true difference is detectable (``mdd`` is inf): the test's p cannot go below alpha on
        these queries (``reachable`` False), or the MDD exceeds the measure's range."""
        return math.isinf(self.mdd)

    @property
    def undetectable_reason(self) -> str:
        """Why there is no MDD, in words ("" when there is one)."""
        if self.reachable:
            return "the detectable difference exceeds the measure's whole range" if self.undetectable else ""
        return (f"the test's smallest p on {self.n} quer{'y' if self.n == 1 else 'ies'} is {self.p_floor:.4g} after the "
                "family's correction, not below alpha: no difference can be significant")


@dataclass(frozen=True)
class ComparisonData:
    """What a comparison found and how (``Comparison`` is this with its renderings)."""

    runs: tuple[str, ...]
    measures: tuple[str, ...]
    test: str
    alpha: float
    n_resamples: int
    n_boot: int
    level: float
    n_queries: dict[str, int]  # measure -> queries (array length)
    cells: dict[str, dict[str, Cell]]  # run -> measure -> cell
    pairs: tuple[PairTest, ...]  # run pairs in run order, measure by measure
    beats: dict[str, dict[str, list[str]]]  # run -> measure -> runs it significantly beats, in run order
    correction: str = CORRECTION  # the family: one of CORRECTIONS
    family_sizes: dict[str, int] = field(default_factory=dict)  # measure -> comparisons in its family
    mdd_alpha: dict[str, float] = field(default_factory=dict)  # measure -> the level its MDD is computed at
    power: float = POWER
    exact: bool = True  # permutation test: exact enumeration for n <= EXACT_MAX_N (False: random flips for all)
    notes: tuple[str, ...] = ()  # extra footer lines (e.g. what the answer-outcome rows are)
    seed: int = SEED
    direction: dict[str, int] = field(default_factory=dict)  # measure -> +1 higher is better, -1 lower, 0 neither
    n_shared: dict[str, int] = field(default_factory=dict)  # measure -> queries where every run is defined
    ranges: dict[str, float] = field(default_factory=dict)  # measure -> width of its range, where known
    ties_of: str = ""  # the measure whose ties split the queries of the tie table ("" = no tie table)
    tie_pairs: tuple[PairTest, ...] = ()  # each other measure per run pair, on the queries the pair ties on ties_of
    tie_family_sizes: dict[str, int] = field(default_factory=dict)  # measure -> comparisons in its tie-table family
    tie_mdd_alpha: dict[str, float] = field(default_factory=dict)  # measure -> the level of its tie-table MDD
    baseline: str = ""  # the run every other run is compared with ("" = every pair of runs)
    qids: tuple[str, ...] = ()  # the compared queries, in the order of the per-query values
    per_query: dict = field(default_factory=dict, repr=False)  # run -> measure -> the values compared, per query

    def query_rows(self) -> tuple[list[str], list[list]]:
        """Which queries drive a gap: (header, rows), one row per (measure, query): each run's value
        and, for each compared pair, the query's difference A - B (NaN where either is undefined);
        the values the table's tests and intervals were computed from. Empty without per-query values
        (a comparison made by ``compare_scores`` alone)."""
        pairs = run_pairs(list(self.runs), self.baseline or None)
        header = ["measure", "qid", *self.runs, *(f"{a} - {b}" for a, b in pairs)]
        if not self.per_query:
            return header, []
        rows = []
        for m in self.measures:
            values = {r: self.per_query[r][m] for r in self.runs}
            for i, qid in enumerate(self.qids):
                rows.append([str(m), qid, *(float(values[r][i]) for r in self.runs),
                             *(float(values[a][i] - values[b][i]) for a, b in pairs)])
        return header, rows

    def same_population(self, measure: str) -> bool:
        """Whether every run's mean of ``measure`` is over the same queries (then means compare)."""
        shared = self.n_shared.get(measure, self.n_queries.get(measure, 0))
        return all(self.cells[r][measure].n == shared for r in self.runs)

    @property
    def labels(self) -> dict[str, str]:
        return dict(zip(self.runs, labels_of(len(self.runs))))
