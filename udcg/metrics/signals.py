"""What a measure's kernel reads (``udcg.metrics.registry``): one ``Signals`` per run or batch of
contexts, its matrices in rank order, its curves computed once and shared by every measure.

Two providers fill it in: ``udcg.metrics.evaluate.RunSignals`` (a run with its qrels and utilities)
and ``udcg.metrics.contexts.ContextSignals`` (contexts with their per-passage fields). A kernel
reads only through this interface, so one kernel scores runs and contexts alike:

- ``gains`` (n, depth): the relevance gain at each rank (a context: 1 relevant, 0 not); ``ideal``:
  every judged gain sorted descending (nDCG's ideal); ``n_rel(level)``: judged documents with gain
  >= level (a context: the relevant passages of its question's pool);
- ``rel(level)``, ``ap(level)``, ``first(level)``, ``dcg(exponential)``, ``ideal_dcg(exponential)``
  and ``cached(key, make)`` for any other curve (``udcg.metrics.curves``), computed once a batch;
- ``cutoff(measure)``: the measure's k as this input reads it. A run keeps k (P@10 of a ranking of
  3 documents divides by 10, as trec_eval does); a context shorter than k is read whole, min(k, length);
- ``utilities(measure, k)``: (the top-k utilities, zero-padded beyond a shorter ranking; the length
  of each row, or None when every row has all its k);
- ``passage(name, measure)``: a per-passage field of contexts ('grades', 'erag', ...), refused on a run;
- ``fitted_theta(measure)``, ``gamma``; ``top_grade``: the top of the relevance scale where the data
  fixes it (1: contexts carry binary relevance), else None; ``context_k``: the contexts' length
  (None for a run).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import numpy as np

from udcg.errors import InputError
from udcg.metrics import curves
from udcg.metrics.measure_types import Measure

if TYPE_CHECKING:  # scikit-learn is imported only when a theta model is used
    from udcg.metrics.udcg_theta import UDCGTheta


class Signals:
    """The shared part: curves cached by key. Providers define ``ideal``, ``n_rel``, ``utilities``
    and ``passage`` (and ``cutoff`` where a short row is read whole)."""

    top_grade: float | None = None
    context_k: int | None = None

    def __init__(self, gains: np.ndarray, gamma: float, theta: UDCGTheta | None) -> None:
        self.gains = gains
        self.gamma = gamma
        self.theta = theta
        self._cache: dict[tuple, Any] = {}

    @property
    def depth(self) -> int:
        return self.gains.shape[1]

    @property
    def ideal(self) -> np.ndarray:
        raise NotImplementedError

    def n_rel(self, level: float) -> np.ndarray:
        raise NotImplementedError

    def utilities(self, measure: Measure, k: int | None) -> tuple[np.ndarray, np.ndarray | None]:
        raise NotImplementedError

    def passage(self, name: str, measure: Measure) -> np.ndarray:
        raise NotImplementedError

    def cutoff(self, measure: Measure) -> int | None:
        return measure.cutoff

    def cached(self, key: tuple, make: Callable[[], Any]) -> Any:
        if key not in self._cache:
            self._cache[key] = make()
        return self._cache[key]

    def rel(self, level: float) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """(relevant at each rank, relevant documents up to each rank, n_rel) at this level."""
        def make():
            rel = self.gains >= level
            return rel, curves.hits_curve(rel), self.n_rel(level)
        return self.cached(("rel", level), make)

    def ap(self, level: float) -> np.ndarray:
        rel, hits, _ = self.rel(level)
        return self.cached(("ap", level), lambda: curves.ap_curve(hits, rel))

    def first(self, level: float) -> np.ndarray:
        return self.cached(("first", level), lambda: curves.first_hit(self.rel(level)[1]))

    def dcg(self, exponential: bool) -> np.ndarray:
        return self.cached(("dcg", exponential), lambda: curves.dcg_curve(self.gains, exponential))

    def ideal_dcg(self, exponential: bool) -> np.ndarray:
        return self.cached(("ideal-dcg", exponential), lambda: curves.dcg_curve(self.ideal, exponential))

    def fitted_theta(self, measure: Measure) -> UDCGTheta:
        if self.theta is None:
            raise InputError(f"{measure} needs a fitted model (udcg fit-theta, then --theta MODEL.json)")
        return self.theta
