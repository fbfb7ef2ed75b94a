"""Score contexts with named metrics: each measure's kernel (``udcg.metrics.registry``) on the
batch's ``ContextSignals``, the same kernel that scores a run.

A context is the k passages shown to the reader, in prompt order (= rank order). A batch holds
n contexts of the same k as matrices; callers with mixed k split by k (``score_contexts`` does).

Metric names (the grammar of ``udcg.metrics.measures``; case-insensitive on input, canonical
spelling on output):
  UDCG[@k], UDCG_theta[@k], RA-nWG@k, PROC@k, N-Recall4+@k, N-Recall5@k, Precision4+@k, Harm@k,
  eRAG, ANSWER_PROB, containment@k,
  and the classical ones with binary relevance: P@k, R@k, F1@k, Success@k (= HITS@k, hit@k),
  RR (MRR), AP (MAP), Rprec, nDCG@k, DCG@k, ERR@k, AUC-PR; and any other registered measure.
Without "@k" a cut-off-taking metric uses the whole context. Recall-type metrics and the nDCG
ideal use ``n_relevant`` = the number of relevant passages in the question's pool when given,
else the number in the context (document which one a report used).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np

from udcg.errors import InputError
from udcg.metrics import registry
from udcg.metrics.measures import Measure, parse_measure, split_measures
from udcg.metrics.signals import Signals
from udcg.metrics.udcg import GAMMA, checked_utilities

if TYPE_CHECKING:  # scikit-learn is imported only when a theta model is used
    from udcg.metrics.udcg_theta import UDCGTheta


def parse_metric(text: str, where: str = "metric") -> Measure:
    """One measure of the shared grammar, for contexts: a cutoff is optional everywhere (no cutoff
    = the whole context). Contexts carry binary relevance, so parameters are refused."""
    m = parse_measure(text, where=where, whole_context=True)
    if m.params:
        raise InputError(f"{where}: {m} has parameters, but contexts carry binary relevance "
                         f"(write {m.name}{'' if m.k is None else f'@{m.k}'})")
    return m


def parse_metrics(spec: str | Sequence[str], where: str = "--metrics") -> list[Measure]:
    """A comma-separated string (split as every measure list is: ``split_measures``, so a comma inside
    a measure's parentheses stays in it) or a list of measure strings -> Measures, duplicates once."""
    parts = split_measures(spec) if isinstance(spec, str) else list(spec)
    names = [parse_metric(part, where) for part in parts if not isinstance(part, str) or part.strip()]
    if not names:
        raise InputError(f"{where}: no metrics given (e.g. --metrics UDCG@5,nDCG@5,RR)")
    return list(dict.fromkeys(names))


@dataclass(frozen=True)
class ContextBatch:
    """n contexts of k passages. Optional fields are None when unknown."""

    relevant: np.ndarray  # (n, k) bool
    utilities: np.ndarray | None = None  # (n, k) in [-1, 1]
    n_relevant: np.ndarray | None = None  # (n,) relevant passages in the pool
    grades: np.ndarray | None = None  # (n, k) 1..5
    corpus_counts: np.ndarray | None = None  # (n, 5) grade counts in the labelled pool
    erag: np.ndarray | None = None  # (n, k) per-passage downstream scores
    answer_ll: np.ndarray | None = None  # (n, k) per-passage log P(reference answer | passage)
    contains: np.ndarray | None = None  # (n, k) bool, passage holds an answer alias
    pool_counts: np.ndarray | None = None  # (n, 5) grade counts in the retrieval pool (PROC, %PROC)


_FIELDS = {"corpus_grades": "corpus_counts", "pool_grades": "pool_counts"}  # need -> ContextBatch field, where they differ


class ContextSignals(Signals):
    """A batch's ``Signals`` (``udcg.metrics.signals``): binary relevance, ``n_relevant`` as the
    relevant passages of the pool (else of the context), a cutoff beyond the context read as the
    whole context, per-passage fields from the batch."""

    top_grade = 1.0  # contexts carry binary relevance

    def __init__(self, batch: ContextBatch, gamma: float = GAMMA, theta: UDCGTheta | None = None) -> None:
        rel = np.asarray(batch.relevant, dtype=bool)
        super().__init__(rel.astype(float), gamma, theta)
        self.batch = batch
        self.context_k = rel.shape[1]
        n_rel = rel.sum(1) if batch.n_relevant is None else np.asarray(batch.n_relevant, dtype=float)
        if (n_rel < rel.sum(1)).any():
            row = int(np.flatnonzero(n_rel < rel.sum(1))[0])
            raise InputError(f"context {row} of the batch: n_relevant = {n_rel[row]:g} is smaller than its "
                             f"{int(rel[row].sum())} relevant passages (n_relevant counts the question's whole pool)")
        self._n_relevant = n_rel

    def n_rel(self, level: float) -> np.ndarray:
        n_rel = self._n_relevant
        if not np.isfinite(n_rel).all() or (n_rel != np.round(n_rel)).any():
            raise InputError("n_relevant: counts of relevant passages must be non-negative integers")
        return n_rel.astype(np.int64)

    @property
    def ideal(self) -> np.ndarray:
        n_rel = self._n_relevant
        width = int(max(self.depth, n_rel.max(initial=0)))
        return (np.arange(width)[None, :] < n_rel[:, None]).astype(float)

    def cutoff(self, measure: Measure) -> int | None:
        return None if measure.k is None else min(measure.k, self.depth)

    def utilities(self, measure: Measure, k: int | None) -> tuple[np.ndarray, None]:
        return checked_utilities(self.passage("utilities", measure)[:, :k]), None

    def passage(self, name: str, measure: Measure) -> np.ndarray:
        value = getattr(self.batch, _FIELDS.get(name, name))
        if value is None:
            fix = ("give 'pool_grades', the 5 grade counts of the question's retrieval pool, or drop the metric"
                   if name == "pool_grades" else "annotate/judge first, or drop the metric")
            raise InputError(f"metric {measure} needs '{name}' for every context ({fix})")
        return value


def score_batch(batch: ContextBatch, metrics: list[Measure], gamma: float = GAMMA,
                theta: UDCGTheta | None = None) -> dict[Measure, np.ndarray]:
    """{measure: one value per context of the batch}, each from its kernel (a Measure is its
    canonical name: ``values["UDCG@5"]`` reads it too)."""
    signals = ContextSignals(batch, gamma, theta)
    return {m: registry.score(m, signals) for m in metrics}
