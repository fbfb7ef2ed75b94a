"""The options of ``udcg correlate`` and ``udcg.correlate``, each declared once (``udcg.options``):
the command's flags and the API's keywords are made from ``CorrelateOptions``; the flow
(``flows/correlate.correlate_file``) takes the object, and its tables the record it builds
(``CorrelateOptions.tests``: ``metrics.paired_tests.CorrelationTests``, the same defaults from
``metrics.constants``)."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from udcg.metrics.constants import CONSTANT, CONSTANT_METRIC, DEFAULT_RESAMPLES, GAMMA, N_BOOT, SEED, TEST, TESTS
from udcg.metrics.paired_tests import CorrelationTests
from udcg.options import Options, option


@dataclass(frozen=True)
class CorrelateOptions(Options):
    """Which metrics are correlated with the answer outcomes, against which baseline, by which test."""

    operation = "correlate"

    metrics: str | None = option(None, "metrics to compare (default: every metric in the file's 'metrics')", kind=str)
    baseline: str | None = option(None, "metric the others are tested against (paired test; default UDCG, when it is "
                                  "among the metrics)", kind=str)
    test: str = option(TEST, "paired test of the per-question rhos against the baseline: permutation "
                       "(default), t or wilcoxon", choices=TESTS)
    n_resamples: int = option(DEFAULT_RESAMPLES, "random sign flips of the permutation test beyond 24 questions "
                              "(default {default}; exact enumeration up to 24); the footer gives the Monte Carlo "
                              "standard error of p", kind=int)
    gamma: float = option(GAMMA, "UDCG's weight of the negative part (paper: 1/3)", kind=float)
    theta: str | Path | None = option(None, "fitted UDCG_theta model, to include UDCG_theta", kind=Path)
    constant_metric: str = option(CONSTANT, "a question whose outcomes differ but whose metric is constant: rho = 0 "
                                  "(default) or excluded", choices=CONSTANT_METRIC)
    equivalence: float | None = option(None, "the smallest rho difference from the baseline that matters (e.g. 0.03): "
                                       "adds each metric's two one-sided tests against the baseline (the same test, "
                                       "Holm over the same family) and a decision: different, equivalent, different "
                                       "within the margin, or inconclusive", kind=float, metavar="MARGIN")
    n_boot: int = option(N_BOOT, "bootstrap resamples for the intervals (default {default})", kind=int)
    seed: int = option(SEED, "the seed of the bootstrap and the random sign flips (default {default})", kind=int)
    ties: str | None = option(None, "also the tie decomposition of the baseline (default UDCG) against METRIC (e.g. "
                              "nDCG@5): among the context pairs whose outcomes differ, the share METRIC scores equal, "
                              "how often each orders those and the other pairs right", kind=str, metavar="METRIC",
                              api=False)
    full: bool = option(False, "print every column (intervals and raw/Holm p of rho, tau-b and pairwise accuracy, "
                        "pooled rho, counts); default: metric, rho [95%% CI], p vs baseline (Holm), tau-b, pairwise "
                        "accuracy", kind=bool, api=False)
    output: str | None = option(None, "write the full table (.md, .csv or .json), whatever --full", short="-o",
                                kind=str, api=False)

    def tests(self, baseline: str | None) -> CorrelationTests:
        """The table's tests (``flows.correlate.correlation_table``'s ``tests``) against ``baseline``
        (the one ``choose_baseline`` chose): the test, sign flips, bootstrap resamples, seed, how a
        constant metric counts and the equivalence margin."""
        return CorrelationTests(baseline=baseline, **self.keywords("test", "n_resamples", "n_boot", "seed",
                                                                   "constant_metric", "equivalence"))
