"""The settings of the paired tests, each a frozen record with its defaults (``metrics.constants``)
and its checks in one place:

- ``PairedTests``: the paired test (``TESTS``), its random sign flips beyond ``EXACT_MAX_N``
  queries, the bootstrap resamples of the intervals and the seed of both;
- ``CompareTests``: those, and how ``compare_scores`` decides: ``alpha`` after the ``correction``
  (Holm's family, ``CORRECTIONS``), the ``power`` of the detectable differences and the ``level``
  of the intervals;
- ``CorrelationTests``: those of ``PairedTests``, and what a correlation table
  (``udcg.flows.correlate``) tests: each metric against ``baseline``, a question whose metric is
  constant counted by ``constant_metric`` (``CONSTANT_METRIC``), and with ``equivalence`` (a margin
  of the rho difference) its two one-sided tests.

The options of ``udcg compare`` and ``udcg correlate`` (``flows.run_options.CompareOptions``,
``flows.correlate_options.CorrelateOptions``) declare the same defaults from the same constants and
build these records (``.tests()``). Like ``constants``, this module imports no numpy."""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

from udcg.errors import InputError
from udcg.metrics.constants import (ALPHA, CONSTANT, CORRECTION, CORRECTIONS, DEFAULT_RESAMPLES, LEVEL, N_BOOT, POWER,
                                    SEED, TEST, TESTS)


@dataclass(frozen=True)
class PairedTests:
    """The paired test (``TESTS``), ``n_resamples`` random sign flips of the permutation test beyond
    ``EXACT_MAX_N`` queries, ``n_boot`` bootstrap resamples of the intervals, and their ``seed``.
    An unknown test is refused when the record is built."""

    test: str = TEST
    n_resamples: int = DEFAULT_RESAMPLES
    n_boot: int = N_BOOT
    seed: int = SEED
    unknown_test: ClassVar[str] = "paired test"  # how an unknown test is named in its error

    def __post_init__(self) -> None:
        if self.test not in TESTS:
            raise InputError(f"{self.unknown_test} {self.test!r} is unknown: use one of {', '.join(TESTS)}")


@dataclass(frozen=True)
class CompareTests(PairedTests):
    """``compare_scores``'s settings: the ``PairedTests``, the significance level ``alpha`` after the
    ``correction`` (Holm's family: ``CORRECTIONS``), the ``power`` of the minimum detectable
    differences and the ``level`` of the intervals. An unknown test or family, or a level outside
    (0, 1), is refused when the record is built."""

    alpha: float = ALPHA
    correction: str = CORRECTION
    power: float = POWER
    level: float = LEVEL
    unknown_test: ClassVar[str] = "compare_scores: test"

    def __post_init__(self) -> None:
        super().__post_init__()
        if self.correction not in CORRECTIONS:
            raise InputError(f"compare_scores: correction {self.correction!r} is unknown: use one of "
                             f"{', '.join(CORRECTIONS)} (measure: Holm over the run pairs of each measure)")
        for name, example in (("alpha", ALPHA), ("power", POWER), ("level", LEVEL)):
            value = getattr(self, name)
            if not 0 < value < 1:
                raise InputError(f"compare_scores: {name} = {value!r}: use a value between 0 and 1 (e.g. {example})")


@dataclass(frozen=True)
class CorrelationTests(PairedTests):
    """A correlation table's settings (``udcg.flows.correlate.correlation_table_of``): the
    ``PairedTests`` of each metric's per-question statistics against ``baseline``'s (None, or a
    metric not in the table: no p-values), ``constant_metric`` (``CONSTANT_METRIC``: a question
    whose outcomes differ but whose metric is constant has rho 0, or is left out) and
    ``equivalence``: a margin of the rho difference against the baseline (None: no TOST)."""

    baseline: str | None = "UDCG"
    constant_metric: str = CONSTANT
    equivalence: float | None = None
