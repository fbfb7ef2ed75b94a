"""Score contexts with named metrics: one dispatch from metric names to the pure kernels.

A context is the k passages shown to the reader, in prompt order (= rank order). A batch holds
n contexts of the same k as matrices; callers with mixed k split by k (``score_contexts`` does).

Metric names (the grammar of ``udcg.metrics.measures``; case-insensitive on input, canonical
spelling on output):
  UDCG[@k], UDCG_theta[@k], RA-nWG@k, PROC@k, N-Recall4+@k, N-Recall5@k, Precision4+@k, Harm@k,
  eRAG, ANSWER_PROB, containment@k,
  and the classical ones with binary relevance: P@k, R@k, F1@k, Success@k (= HITS@k, hit@k),
  RR (MRR), AP (MAP), Rprec, nDCG@k, DCG@k, ERR@k, AUC-PR.
Without "@k" a cut-off-taking metric uses the whole context. Recall-type metrics and the nDCG
ideal use ``n_relevant`` = the number of relevant passages in the question's pool when given,
else the number in the context (document which one a report used).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from udcg.errors import InputError
from udcg.metrics import classical, setbased
from udcg.metrics.measures import SETBASED, Measure, parse_measure
from udcg.metrics.udcg import GAMMA, udcg

if TYPE_CHECKING:  # scikit-learn is imported only when a theta model is used
    from udcg.metrics.udcg_theta import UDCGTheta

_CLASSICAL = {  # canonical name -> (function, needs n_rel); nDCG, DCG, ERR, Rprec are special-cased
    "P": (classical.precision, False),
    "R": (classical.recall, True),
    "F1": (classical.f1, True),
    "Success": (classical.success, False),
    "RR": (classical.reciprocal_rank, False),
    "AP": (classical.average_precision, True),
    "AUC-PR": (classical.auc_pr, True),
}

MetricName = Measure  # one measure type for every path (udcg.metrics.measures)


def parse_metric(text: str, where: str = "metric") -> Measure:
    """One measure of the shared grammar, for contexts: a cutoff is optional everywhere (no cutoff
    = the whole context). Contexts carry binary relevance, so parameters are refused."""
    m = parse_measure(text, where=where, whole_context=True)
    if m.params:
        raise InputError(f"{where}: {m} has parameters, but contexts carry binary relevance "
                         f"(write {m.name}{'' if m.k is None else f'@{m.k}'})")
    return m


def parse_metrics(spec: str | Sequence[str], where: str = "--metrics") -> list[Measure]:
    """A comma-separated string or a list of measure strings -> Measures, duplicates once."""
    parts = spec.split(",") if isinstance(spec, str) else list(spec)
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


def _need(batch: ContextBatch, field: str, metric: MetricName) -> np.ndarray:
    value = getattr(batch, field)
    if value is None:
        name = {"corpus_counts": "corpus_grades", "pool_counts": "pool_grades"}.get(field, field)  # as contexts files spell it
        fix = ("give 'pool_grades', the 5 grade counts of the question's retrieval pool, or drop the metric"
               if name == "pool_grades" else "annotate/judge first, or drop the metric")
        raise InputError(f"metric {metric} needs '{name}' for every context ({fix})")
    return value


def score_batch(batch: ContextBatch, metrics: list[Measure], gamma: float = GAMMA,
                theta: UDCGTheta | None = None) -> dict[str, np.ndarray]:
    rel = np.asarray(batch.relevant, dtype=bool)
    n, k = rel.shape
    gains = rel.astype(float)
    n_rel = rel.sum(1) if batch.n_relevant is None else np.asarray(batch.n_relevant, dtype=float)
    if (n_rel < rel.sum(1)).any():
        row = int(np.flatnonzero(n_rel < rel.sum(1))[0])
        raise InputError(f"context {row} of the batch: n_relevant = {n_rel[row]:g} is smaller than its "
                         f"{int(rel[row].sum())} relevant passages (n_relevant counts the question's whole pool)")
    out: dict[str, np.ndarray] = {}
    for m in metrics:
        cut = min(m.k, k) if m.k is not None else None
        if m.family == "UDCG":  # UDCG@k: the first k passages are the context
            out[str(m)] = udcg(_need(batch, "utilities", m)[:, :cut], gamma)
        elif m.family == "UDCG_theta":
            if theta is None:
                raise InputError("metric UDCG_theta needs a fitted model (udcg fit-theta, then --theta MODEL.json)")
            out[str(m)] = theta.predict(_need(batch, "utilities", m)[:, :cut])
        elif m.family in SETBASED:
            grades = np.asarray(_need(batch, "grades", m), dtype=int)
            pool = _need(batch, "pool_counts", m) if m.family in ("PROC", "%PROC") else None
            values = setbased.set_metrics(grades, _need(batch, "corpus_counts", m), pool, k=m.k or k)
            out[str(m)] = values[m.family]
        elif m.family == "eRAG":
            out[str(m)] = classical.erag(_need(batch, "erag", m))
        elif m.family == "ANSWER_PROB":
            out[str(m)] = classical.answer_prob(_need(batch, "answer_ll", m))
        elif m.family == "containment":
            out[str(m)] = classical.answer_containment(np.asarray(_need(batch, "contains", m), dtype=bool), cut)
        elif m.family == "nDCG":
            width = int(max(k, n_rel.max(initial=0)))
            ideal = (np.arange(width)[None, :] < n_rel[:, None]).astype(float)
            out[str(m)] = classical.ndcg(gains, ideal, cut)
        elif m.family == "DCG":
            out[str(m)] = classical.dcg(gains, cut)
        elif m.family == "ERR":
            out[str(m)] = classical.err(gains, cut, max_grade=1)
        elif m.family == "Rprec":
            out[str(m)] = classical.r_precision(gains, n_rel)
        else:
            fn, needs_rel = _CLASSICAL[m.family]
            out[str(m)] = fn(gains, n_rel, cut) if needs_rel else fn(gains, cut)
    return out
