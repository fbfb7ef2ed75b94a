"""Two metrics compared question by question, from the per-question values of a correlation table
(the rows of ``data/per-question.jsonl.gz``: table, metric, qid, rho, tau_b, pair_acc, status).

- ``aligned``: the values of two metrics on the same questions, NaN where a value is undefined.
- ``difference_spread``: the usable questions (both values defined), the mean and sd of the
  paired differences and the smallest true mean difference the paired test would detect
  (``stats.min_detectable_difference``: 80% power, two-sided alpha 0.05 by default); none (inf)
  where the sign-flip test the correlation tables use cannot give a p below alpha on so few
  questions (``p_floor.can_reach``: fewer than 6 at 0.05), whatever the data.
- ``paired_difference``: the same with the pre-registered test (docs/results/README.md): the 95%
  percentile bootstrap interval of the mean difference over resampled questions and the two-sided
  paired sign-flip permutation p.
- ``power_table``: ``difference_spread`` of every metric of a correlation table against its baseline
  (an unreachable one reads ``undetectable``).

Differences are a - b. A question where either value is undefined (its outcomes are all equal, or
a metric is NA there) is left out of both, as the correlation tables leave it out of their tests.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

import numpy as np

from udcg.errors import InputError
from udcg.io.tables import Table
from udcg.metrics.constants import ALPHA, DEFAULT_RESAMPLES, N_BOOT, POWER
from udcg.metrics.correlation import bootstrap_mean_ci
from udcg.metrics.p_floor import can_reach
from udcg.metrics.stats import EXACT_MAX_N, min_detectable_difference, paired_permutation_test

STATISTICS = ("rho", "tau_b", "pair_acc")
POWER_COLUMNS = ["metric", "n_usable", "diff_vs_baseline", "sd_diff", "min_detectable_diff"]
UNDETECTABLE = "undetectable"  # the power table's cell where no p can beat alpha on the usable questions


@dataclass(frozen=True, slots=True)
class PairedDifference:
    """a - b over the questions where both are defined. The interval and p are NaN when not computed
    (``difference_spread``) or with too few questions."""

    n: int  # usable questions: both values defined
    mean: float
    sd: float  # sample sd (ddof 1) of the per-question differences
    min_detectable: float  # the smallest true mean difference detected with probability POWER at ALPHA (inf: none)
    ci_low: float = math.nan
    ci_high: float = math.nan
    p: float = math.nan


def aligned(rows: Iterable[dict], a: str, b: str, statistic: str = "rho",
            qids: Sequence[str] | None = None) -> tuple[np.ndarray, np.ndarray]:
    """The per-question ``statistic`` of metrics ``a`` and ``b`` from per-question rows of one table,
    on ``qids`` (default: ``a``'s questions, in the rows' order); NaN where a value is undefined or
    the question has no row for that metric."""
    if statistic not in STATISTICS:
        raise InputError(f"statistic {statistic!r} is unknown: use one of {', '.join(STATISTICS)}")
    by_metric: dict[str, dict[str, float]] = {a: {}, b: {}}
    for r in rows:
        if r["metric"] in by_metric:
            v = r.get(statistic)
            by_metric[r["metric"]][str(r["qid"])] = math.nan if v is None else float(v)
    for name, values in by_metric.items():
        if not values:
            raise InputError(f"no per-question values of metric {name!r} (the table holds other metrics: "
                             "check the metric's name)")
    order = list(by_metric[a]) if qids is None else [str(q) for q in qids]
    return tuple(np.array([by_metric[m].get(q, math.nan) for q in order]) for m in (a, b))


def difference_spread(a: object, b: object, alpha: float = ALPHA, power: float = POWER) -> PairedDifference:
    """The usable questions, mean and sd of a - b, and the smallest detectable mean difference: inf
    where the sign-flip test cannot reach ``alpha`` on the usable questions (module docstring)."""
    x, y = np.asarray(a, dtype=float), np.asarray(b, dtype=float)
    d = (x - y)[np.isfinite(x) & np.isfinite(y)]
    mdd = min_detectable_difference(x, y, alpha, power)
    if len(d) > 1 and not math.isnan(mdd) and not can_reach(len(d), alpha, "permutation", EXACT_MAX_N,
                                                             DEFAULT_RESAMPLES):
        mdd = math.inf
    return PairedDifference(n=len(d), mean=float(d.mean()) if len(d) else math.nan,
                            sd=float(np.std(d, ddof=1)) if len(d) > 1 else math.nan, min_detectable=mdd)


def paired_difference(a: object, b: object, n_boot: int = N_BOOT, n_resamples: int = 10_000, seed: int = 0,
                      alpha: float = ALPHA, power: float = POWER) -> PairedDifference:
    """``difference_spread`` with the 95% percentile bootstrap interval of the mean difference
    (``n_boot`` resamples of the usable questions; none with fewer than 5) and the two-sided paired
    sign-flip permutation p (``stats.paired_permutation_test``), both seeded with ``seed``."""
    spread = difference_spread(a, b, alpha, power)
    x, y = np.asarray(a, dtype=float), np.asarray(b, dtype=float)
    lo, hi = bootstrap_mean_ci(x - y, n_boot, seed=seed)  # NaN differences are left out
    p = paired_permutation_test(x, y, n_resamples, seed)
    return PairedDifference(spread.n, spread.mean, spread.sd, spread.min_detectable, lo, hi, p)


def power_table(rows: Sequence[dict], baseline: str, metrics: Sequence[str], title: str = "",
                circular: Iterable[str] = ()) -> Table:
    """For each of ``metrics`` but the baseline, the paired per-question rho against ``baseline``
    (``difference_spread`` of metric - baseline: ``diff_vs_baseline`` is the correlation table's);
    ``circular`` metrics are flagged as in the correlation table."""
    circular = frozenset(circular)
    columns = POWER_COLUMNS[:1] + (["circular"] if circular else []) + POWER_COLUMNS[1:]
    table = Table(columns, title=title or f"Power: per-question rho against {baseline}")
    for name in metrics:
        if name == baseline:
            continue
        s = difference_spread(*aligned(rows, name, baseline))
        flag = {"circular": "yes" if name in circular else ""} if circular else {}
        table.add(metric=name, **flag, n_usable=s.n, diff_vs_baseline=s.mean, sd_diff=s.sd,
                  min_detectable_diff=UNDETECTABLE if math.isinf(s.min_detectable) else s.min_detectable)
    return table
