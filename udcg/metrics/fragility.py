"""How far a significant UDCG difference hangs on the unjudged labels (``udcg compare``).

An unjudged top-k pair is taken as irrelevant: u = -(1 - p_abs). Relabelled relevant it becomes
u = +(1 - p_abs), which moves the run's pre-logistic UDCG score by (1 + gamma)(1 - p_abs) / k. For one
pair of runs A, B with a significant mean difference on UDCG@k, ``relabel_bound`` finds how many of
the unjudged pairs of their two top-k lists, relabelled relevant, would end it (the difference no
longer significant, or of the other sign):

- the candidates are the unjudged pairs whose relabelling moves the difference towards 0 (a pair
  in both runs' top-k moves both, once: pairs are matched by their number in ``pair``);
- they are relabelled in the order of their own effect on that query's difference, largest first
  (so the pairs the reader answers from, p_abs low, come before those it abstains on: their label
  matters most to UDCG), and each prefix is scored exactly (UDCG recomputed per query from the
  summed utilities, vectorised) and tested with the caller's ``keeps`` (compare's own test, seed,
  family and alpha);
- the count is found by bisection over the prefix length: the relabelling of those ``needed``
  pairs *does* end the verdict (checked with the real test); the prefix one shorter does not.

What is exact and what is a bound: the ``needed`` pairs are a witness (relabelled, the verdict
ends), so the fewest pairs that end it are at most ``needed``; fewer could, chosen otherwise (the
greedy order ignores how the test weighs the spread of the differences), and bisection assumes the
p-value grows along the prefix. ``needed`` None: every candidate relabelled at once leaves the
difference significant; strong evidence, not proof, that no subset ends it (lowering one outlying
difference can make a sign-flip test *more* significant: p is not monotone in the labels).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
from scipy.special import expit

from udcg.errors import InputError


@dataclass(frozen=True)
class Fragility:
    """One pair's relabelling bound (module docstring): ``unjudged`` pairs in the two runs' top-k
    taken as irrelevant, ``candidates`` of them moving the difference towards 0, and ``needed``
    (None: even all of them leave it significant), with the witness pairs' numbers."""

    measure: str
    run_a: str
    run_b: str
    unjudged: int
    candidates: int
    needed: int | None
    witness: tuple[int, ...] = ()

    def to_dict(self) -> dict:
        return {"measure": self.measure, "run_a": self.run_a, "run_b": self.run_b, "unjudged": self.unjudged,
                "candidates": self.candidates, "needed": self.needed}


def _scores(u: np.ndarray, length: np.ndarray, gamma: float) -> np.ndarray:
    """The pre-logistic UDCG score per row: (sum of u+ + gamma * sum of u-) / context length (NaN: none)."""
    with np.errstate(invalid="ignore", divide="ignore"):
        total = np.clip(u, 0, None).sum(1) + gamma * np.clip(u, None, 0).sum(1)
        return np.where(length > 0, total / np.maximum(length, 1), np.nan)


def _moves(u: np.ndarray, length: np.ndarray, pair: np.ndarray, flippable: np.ndarray, gamma: float
           ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(pair number, query row, change of the row's score) of each flippable entry."""
    rows, cols = np.nonzero(flippable)
    return pair[rows, cols].astype(np.int64), rows, (1 + gamma) * -u[rows, cols] / length[rows]


@dataclass(frozen=True)
class TopK:
    """One run's top k as ``relabel_bound`` reads it (queries x k): ``utility`` as scored,
    ``length`` the context length of each query, ``pair`` each entry's pair number (the same pair
    in both runs' top k has one number) and ``unjudged`` the unjudged entries taken as irrelevant
    (u < 0), the ones a relabelling turns relevant."""

    utility: np.ndarray
    length: np.ndarray
    pair: np.ndarray
    unjudged: np.ndarray


def relabel_bound(a: TopK, b: TopK, gamma: float, keeps: Callable[[np.ndarray], bool], *, measure: str = "UDCG",
                  run_a: str = "a", run_b: str = "b") -> Fragility:
    """The relabelling bound of one run pair (module docstring): ``a`` and ``b`` the two runs' top
    k (``TopK``, one shape); ``keeps(d)``: whether the paired differences ``d`` (A - B, NaN-free)
    keep the verdict (significant, same sign)."""
    u_a, u_b = np.asarray(a.utility, float), np.asarray(b.utility, float)
    length_a, length_b, pair_a, pair_b, flip_a, flip_b = a.length, b.length, a.pair, b.pair, a.unjudged, b.unjudged
    if u_a.shape != u_b.shape or np.shape(flip_a) != u_a.shape or np.shape(flip_b) != u_b.shape:
        raise InputError(f"relabel bound: the two runs' matrices must have one shape, got {u_a.shape} and {u_b.shape}")
    x_a, x_b = _scores(u_a, length_a, gamma), _scores(u_b, length_b, gamma)
    before = expit(x_a) - expit(x_b)
    sign = np.sign(np.nanmean(before)) if np.isfinite(before).any() else 0.0
    ids_a, rows_a, dx_a = _moves(u_a, length_a, pair_a, np.asarray(flip_a, bool), gamma)
    ids_b, rows_b, dx_b = _moves(u_b, length_b, pair_b, np.asarray(flip_b, bool), gamma)
    ids, inverse = np.unique(np.concatenate([ids_a, ids_b]), return_inverse=True)
    n_q, n = len(x_a), len(ids)
    move_a = np.bincount(inverse[:len(ids_a)], dx_a, minlength=n)
    move_b = np.bincount(inverse[len(ids_a):], dx_b, minlength=n)
    row = np.zeros(n, np.int64)
    row[inverse] = np.concatenate([rows_a, rows_b])
    effect = sign * ((expit(x_a[row] + move_a) - expit(x_a[row])) - (expit(x_b[row] + move_b) - expit(x_b[row])))
    order = np.argsort(effect, kind="stable")
    order = order[effect[order] < 0]

    def differences(m: int) -> np.ndarray:
        chosen = order[:m]
        d = (expit(x_a + np.bincount(row[chosen], move_a[chosen], minlength=n_q))
             - expit(x_b + np.bincount(row[chosen], move_b[chosen], minlength=n_q)))
        return d[~np.isnan(d)]

    found = _fragility(measure, run_a, run_b, n, len(order))
    if sign == 0 or not len(order) or keeps(differences(len(order))):
        return found(None, ())
    low, high = 0, len(order)  # keeps at low (the observed verdict), not at high
    while high - low > 1:
        mid = (low + high) // 2
        low, high = (mid, high) if keeps(differences(mid)) else (low, mid)
    return found(high, tuple(int(ids[i]) for i in order[:high]))


def _fragility(measure: str, run_a: str, run_b: str, unjudged: int, candidates: int) -> Callable:
    return lambda needed, witness: Fragility(measure, run_a, run_b, unjudged, candidates, needed, witness)
