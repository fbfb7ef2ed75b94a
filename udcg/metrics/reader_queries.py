"""The reader check's per-query view (``udcg.metrics.reader_check``'s "On which queries"): per query,
its relevant and irrelevant pairs, their mean p_abs, the irrelevant pairs the reader answers from
(p_abs < 0.5) and the relevant pairs it abstains on (p_abs >= 0.5); ``query_counts`` counts the
queries with each. The pairs' p_abs are checked here (``check_p``) for both modules."""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass

import numpy as np

from udcg.errors import InputError
from udcg.metrics.reader_verdict import ABSTAINS_AT


def json_ready(values: dict) -> dict:
    """NaN becomes None."""
    return {k: (None if isinstance(v, float) and math.isnan(v) else v) for k, v in values.items()}


@dataclass(frozen=True)
class QueryCheck:
    """One query's pairs in the reader check (module docstring); a mean is NaN without such pairs."""

    qid: str
    n_relevant: int
    n_irrelevant: int
    mean_p_relevant: float
    mean_p_irrelevant: float
    answered_irrelevant: int  # irrelevant pairs with p_abs < 0.5: the reader answers from them
    abstained_relevant: int  # relevant pairs with p_abs >= 0.5: the reader abstains on them

    def to_dict(self) -> dict:
        return json_ready(asdict(self))


def by_query(p_abs: object, relevant: object, queries: object) -> list[QueryCheck]:
    """Each query's ``QueryCheck``, in the order of the queries' first pairs."""
    p = np.asarray(p_abs, dtype=float)
    rel = np.asarray(relevant, dtype=bool)
    q_ids = np.asarray([str(x) for x in queries], dtype=object)
    if not (p.ndim == 1 and len(p) == len(rel) == len(q_ids)):
        raise InputError(f"reader check: p_abs, relevant and queries must be one value per pair, got {len(p)}, "
                         f"{len(rel)} and {len(q_ids)}")
    check_p(p)
    return query_checks(p, rel, *query_index(q_ids))


def check_p(p: np.ndarray) -> None:
    """Refuse a p_abs that is not a number in [0, 1]."""
    if len(p) and (np.isnan(p).any() or p.min() < 0 or p.max() > 1):
        raise InputError("reader check: every p_abs must be a number in [0, 1]")


def query_index(q_ids: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The distinct query ids, each one's first pair and every pair's query index (``np.unique``)."""
    if not len(q_ids):
        return np.zeros(0, dtype=object), np.zeros(0, dtype=int), np.zeros(0, dtype=int)
    return np.unique(q_ids, return_index=True, return_inverse=True)


def query_checks(p: np.ndarray, rel: np.ndarray, names: np.ndarray, first: np.ndarray, index: np.ndarray
                 ) -> list[QueryCheck]:
    """Each query's ``QueryCheck`` from the pairs' p_abs, relevance and ``query_index``."""
    n = len(names)

    def count(mask: np.ndarray, weights: np.ndarray | None = None) -> np.ndarray:
        return np.bincount(index[mask], weights=None if weights is None else weights[mask], minlength=n)

    n_rel, n_irr = count(rel), count(~rel)
    with np.errstate(invalid="ignore", divide="ignore"):
        mean_rel, mean_irr = count(rel, p) / n_rel, count(~rel, p) / n_irr
    answered, abstained = count(~rel & (p < ABSTAINS_AT)), count(rel & (p >= ABSTAINS_AT))
    return [QueryCheck(str(names[i]), int(n_rel[i]), int(n_irr[i]), float(mean_rel[i]), float(mean_irr[i]),
                       int(answered[i]), int(abstained[i])) for i in np.argsort(first, kind="stable")]


def query_counts(checks: tuple[QueryCheck, ...] | list[QueryCheck]) -> dict[str, int]:
    """Queries with an irrelevant pair, those where the reader answers from one; queries with a
    relevant pair, those where it abstains on one."""
    return {"with_irrelevant": sum(1 for c in checks if c.n_irrelevant),
            "answered_irrelevant": sum(1 for c in checks if c.answered_irrelevant),
            "with_relevant": sum(1 for c in checks if c.n_relevant),
            "abstained_relevant": sum(1 for c in checks if c.abstained_relevant)}
