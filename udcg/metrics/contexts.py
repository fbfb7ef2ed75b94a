"""Score contexts with named metrics: one dispatch from metric names to the pure kernels.

A context is the k passages shown to the reader, in prompt order (= rank order). A batch holds
n contexts of the same k as matrices; callers with mixed k split by k (``score_contexts`` does).

Metric names (case-insensitive on input, canonical spelling on output):
  UDCG, UDCG_theta, RA-nWG@k, PROC@k, N-Recall4+@k, N-Recall5@k, Precision4+@k, Harm@k,
  eRAG, ANSWER_PROB, containment@k,
  and the classical ones with binary relevance: P@k, R@k, F1@k, Success@k (= HITS@k, hit@k),
  RR (MRR), AP (MAP), Rprec, nDCG@k, DCG@k, ERR@k, AUC-PR.
Without "@k" a cut-off-taking metric uses the whole context. Recall-type metrics and the nDCG
ideal use ``n_relevant`` = the number of relevant passages in the question's pool when given,
else the number in the context (document which one a report used).
"""

from __future__ import annotations

import re
from dataclasses import dataclass

import numpy as np

from udcg.errors import InputError
from udcg.metrics import classical, setbased
from udcg.metrics.udcg import GAMMA, UDCGTheta, udcg

_CLASSICAL = {  # lowercased name -> (canonical, function, needs n_rel)
    "p": ("P", classical.precision, False),
    "r": ("R", classical.recall, True),
    "f1": ("F1", classical.f1, True),
    "success": ("Success", classical.success, False),
    "hits": ("Success", classical.success, False),
    "hit": ("Success", classical.success, False),
    "rr": ("RR", classical.reciprocal_rank, False),
    "mrr": ("RR", classical.reciprocal_rank, False),
    "ap": ("AP", classical.average_precision, True),
    "map": ("AP", classical.average_precision, True),
    "rprec": ("Rprec", None, True),
    "ndcg": ("nDCG", None, True),
    "dcg": ("DCG", None, False),
    "err": ("ERR", None, False),
    "auc-pr": ("AUC-PR", classical.auc_pr, True),
}
_SETBASED = {"ra-nwg": "RA-nWG", "proc": "PROC", "%proc": "%PROC", "n-recall4+": "N-Recall4+",
             "n-recall5": "N-Recall5", "precision4+": "Precision4+", "harm": "Harm"}
_PLAIN = {"udcg": "UDCG", "udcg_theta": "UDCG_theta", "erag": "eRAG", "answer_prob": "ANSWER_PROB",
          "containment": "containment"}
_NO_CUTOFF = {"UDCG", "UDCG_theta", "eRAG", "ANSWER_PROB", "Rprec"}
_NAME = re.compile(r"^\s*([A-Za-z0-9_%+\-]+?)(?:@(\d+))?\s*$")


@dataclass(frozen=True, slots=True)
class MetricName:
    family: str  # canonical name without cut-off
    k: int | None = None

    def __str__(self) -> str:
        return self.family if self.k is None else f"{self.family}@{self.k}"


def parse_metric(text: str) -> MetricName:
    m = _NAME.match(text)
    key = m.group(1).lower() if m else ""
    known = sorted({v[0] for v in _CLASSICAL.values()} | set(_SETBASED.values()) | set(_PLAIN.values()))
    if key in _CLASSICAL:
        family = _CLASSICAL[key][0]
    elif key in _SETBASED:
        family = _SETBASED[key]
    elif key in _PLAIN:
        family = _PLAIN[key]
    else:
        raise InputError(f"unknown metric {text!r} (known: {', '.join(known)}; add @k for a cut-off)")
    k = int(m.group(2)) if m.group(2) else None
    if k is not None and k <= 0:
        raise InputError(f"metric {text!r}: the cut-off must be a positive integer")
    if k is not None and family in _NO_CUTOFF:
        raise InputError(f"metric {text!r}: {family} takes no @k (it scores the whole context)")
    return MetricName(family, k)


def parse_metrics(spec: str) -> list[MetricName]:
    names = [parse_metric(part) for part in spec.split(",") if part.strip()]
    if not names:
        raise InputError("no metrics given (e.g. --metrics UDCG,nDCG@5,RR)")
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


def _need(batch: ContextBatch, field: str, metric: MetricName) -> np.ndarray:
    value = getattr(batch, field)
    if value is None:
        raise InputError(f"metric {metric} needs '{field}' for every context (annotate/judge first, or drop the metric)")
    return value


def score_batch(batch: ContextBatch, metrics: list[MetricName], gamma: float = GAMMA,
                theta: UDCGTheta | None = None) -> dict[str, np.ndarray]:
    rel = np.asarray(batch.relevant, dtype=bool)
    n, k = rel.shape
    gains = rel.astype(float)
    n_rel = rel.sum(1) if batch.n_relevant is None else np.asarray(batch.n_relevant, dtype=float)
    if (n_rel < rel.sum(1)).any():
        raise InputError("n_relevant is smaller than the number of relevant passages in a context")
    out: dict[str, np.ndarray] = {}
    for m in metrics:
        cut = min(m.k, k) if m.k is not None else None
        if m.family == "UDCG":
            out[str(m)] = udcg(_need(batch, "utilities", m), gamma)
        elif m.family == "UDCG_theta":
            if theta is None:
                raise InputError("metric UDCG_theta needs a fitted model (udcg fit-theta, then --theta MODEL.json)")
            out[str(m)] = theta.predict(_need(batch, "utilities", m))
        elif m.family in _SETBASED.values():
            grades = np.asarray(_need(batch, "grades", m), dtype=int)
            values = setbased.set_metrics(grades, _need(batch, "corpus_counts", m), k=m.k or k)
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
            fn, needs_rel = next((f, r) for canon, f, r in _CLASSICAL.values() if canon == m.family)
            out[str(m)] = fn(gains, n_rel, cut) if needs_rel else fn(gains, cut)
    return out
