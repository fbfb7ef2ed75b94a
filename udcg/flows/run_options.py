"""The options of scoring and comparing runs, each declared once (``udcg.options``): ``ScoringOptions``
(``udcg score --run``'s, ``udcg.evaluate``'s and ``udcg.score_runs``'s) and ``CompareOptions``
(``udcg compare``'s and ``udcg.compare``'s: the scoring options and the comparison's). The command's
flags, its ``--config`` keys and the API's keywords are made from these fields; the flows take the
object. Choices are the metrics' own tuples (``TESTS``, ``CORRECTIONS``, ``UNANNOTATED``,
``FORMATS``), the paired tests' defaults the metrics' constants (``metrics.constants``: ``N_BOOT``,
``ALPHA``, ...), ranges ``udcg.bounds.PARAMETERS``; ``CompareOptions.tests()`` is the comparison's
``metrics.paired_tests.CompareTests``. A test finds any second declaration (``tests/test_options.py``)."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from udcg.metrics.constants import (ALPHA, CORRECTION, CORRECTIONS, DEFAULT_RESAMPLES, FORMATS, GAMMA, N_BOOT, POWER,
                                    SEED, TEST, TESTS, UNANNOTATED)
from udcg.metrics.paired_tests import CompareTests
from udcg.options import Options, option

UNANNOTATED_HELP = "a top-k document without a utility: error (default), zero (u = 0) or worst (u = -1)"


@dataclass(frozen=True)
class ScoringOptions(Options):
    """What scores runs: the queries' labels, the utilities and how each measure is computed."""

    operation = "score"

    runs: tuple[str, ...] = option((), "TREC run file (give two or more; key runs: in --config)", flag="--run",
                                   kind=str, repeated=True, api=False)
    qrels: Any = option(None, "qrels: TREC (qid 0 docid rel), BEIR TSV or irds:NAME; needed for classical measures")
    utilities: Any = option(None, "utilities for UDCG@k: the udcg annotate --run folder, or a file")
    metrics: Any = option(("UDCG@5", "nDCG@5", "P@5", "RR@5"), "measures (default {default})")
    gamma: float = option(GAMMA, "UDCG's weight of the negative part (paper: 1/3)", kind=float)
    theta: Any = option(None, "a fitted UDCG_theta model (JSON) for UDCG_theta@k")
    unannotated: str = option("error", UNANNOTATED_HELP, choices=UNANNOTATED)
    model: str | None = option(None, "refuse utilities made by another model", kind=str)
    prompt_version: str | None = option(None, "refuse utilities made with another prompt version", flag="--prompt",
                                        kind=str)


@dataclass(frozen=True)
class CompareOptions(ScoringOptions):
    """``udcg compare``: the scoring options, the tests and tables of the comparison, its outputs."""

    operation = "compare"

    test: str = option(TEST, "paired test (default permutation: sign flips, exact for n <= 24)", choices=TESTS)
    correction: str = option(CORRECTION, "the Holm family: measure (default: the run pairs of each measure), table "
                             "(every run pair x every measure) or none (raw p)", choices=CORRECTIONS)
    alpha: float = option(ALPHA, "significance level after the correction (default {default})", kind=float)
    power: float = option(POWER, "power of the minimum detectable difference (default {default})", kind=float)
    answers: str | Path | None = option(None, "judged answers (udcg answer, then udcg judge answer): adds each run's "
                                        "correct / abstained / wrong rates, matched by cid = run file name", kind=Path)
    judged_only: bool = option(False, "with --answers: every row, the measures included, on the queries where every "
                               "run has a judged answer (one population for answer rates and metrics, e.g. after udcg "
                               "answer --sample)", kind=bool)
    ties: str | None = option(None, "one of --metrics (e.g. nDCG@5): add a table of every other measure on each run "
                              "pair's queries where the two runs tie on it, with the same tests: a difference there "
                              "is one MEASURE cannot show", kind=str, metavar="MEASURE")
    equivalence: Any = option(None, "the smallest difference that matters, one number for every row (e.g. 0.01) or "
                              "per row (UDCG@5=0.005,nDCG@5=0.02): adds each pair's equivalence test (TOST, the same "
                              "test and correction) and a decision: different, equivalent, different within the "
                              "margin, or inconclusive", metavar="MARGINS")
    baseline: Any = option(None, "compare each other run with this one only (a run's name, e.g. bm25, or its file as "
                           "given to --run): one comparison per other run in each Holm family instead of every pair",
                           metavar="RUN")
    n_resamples: int = option(DEFAULT_RESAMPLES, "random sign flips when n > 24 (default {default}; more for a smaller "
                              "Monte Carlo error of p)", kind=int)
    n_boot: int = option(N_BOOT, "bootstrap resamples for the intervals (default {default})", kind=int)
    seed: int = option(SEED, "the seed of the bootstrap and the random sign flips (default {default})", kind=int)
    format: str | None = option(None, "default: from -o's extension, else markdown", choices=FORMATS, api=False)
    digits: int = option(4, "decimals of the Markdown and LaTeX tables' numbers (default {default}; the intervals of "
                         "the run rows 2 fewer, at least 2; JSON and CSV keep every digit)", kind=int, metavar="N",
                         api=False)
    output: str | None = option(None, "write the table here (.md, .csv, .json, .tex); it is printed too", short="-o",
                                kind=str, api=False)
    plot: str | None = option(None, "write a forest plot of the table's pair rows (.png or .svg; needs matplotlib): "
                              "each pair's difference, its interval and ±MDD, one panel per measure", kind=str,
                              metavar="FILE", api=False)
    per_query: str | None = option(None, "write which queries drive each gap: one row per measure and query, each "
                                   "run's value and each compared pair's difference A - B (TSV with a header)",
                                   kind=str, metavar="TSV", api=False)
    label_rows: str | None = option(None, "with --qrels: write the label checks' per-query rows (relevant count, "
                                    "corpus share, flags, each run's unjudged top-k pairs) as TSV (the footer's labels "
                                    "block)", kind=str, metavar="TSV", api=False)

    def tests(self) -> CompareTests:
        """The comparison's tests (``metrics.compare.compare_scores``'s ``tests``): its test, sign flips,
        bootstrap resamples, seed, alpha, family and power; the intervals' level is the default."""
        return CompareTests(**self.keywords("test", "n_resamples", "n_boot", "seed", "alpha", "correction", "power"))
