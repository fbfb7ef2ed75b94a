"""Where a metric's edge over a baseline lies: the tie decomposition of pairwise ordering accuracy.

For one metric A against a baseline B, over each question's contexts: take every pair of contexts
of one question whose answer outcomes differ (and where both metrics are defined). Split them into
the pairs B scores equal (*tied*: B cannot order them, so it gets 1/2 on each) and the others
(*untied*). On each part, the pairwise accuracy of A and of B: 1 for a pair ordered like the
outcomes, 1/2 for a tie of the metric, 0 otherwise (``correlation.per_question_pairwise``'s
convention), pooled over the pairs of every question. Then

    overall accuracy = share_tied * tied accuracy + (1 - share_tied) * untied accuracy,

so A's gain over B splits into what A does on the pairs B cannot see (tied accuracy - 0.5) and what
it does differently on the pairs both order (untied accuracy of A - of B). Values equal within 1e-12
count as a tie. ``tie_decomposition`` is pure: numpy only.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass

import numpy as np

from udcg.errors import InputError

TIE_TOLERANCE = 1e-12


@dataclass(frozen=True)
class TieDecomposition:
    metric: str
    baseline: str
    n_questions: int  # questions with at least one outcome-differing pair
    n_pairs: int  # outcome-differing context pairs, both metrics defined
    n_tied: int  # of them, the pairs the baseline scores equal
    tied_metric: float  # the metric's accuracy on the tied pairs (NaN without any)
    untied_metric: float  # on the untied pairs
    untied_baseline: float  # the baseline's on the untied pairs (its tied accuracy is 0.5 by construction)

    @property
    def share_tied(self) -> float:
        return self.n_tied / self.n_pairs if self.n_pairs else float("nan")

    def to_dict(self) -> dict:
        return {**asdict(self), "share_tied": self.share_tied, "tied_baseline": 0.5 if self.n_tied else float("nan")}

    def lines(self) -> list[str]:
        """The decomposition in two sentences, as ``udcg correlate --ties`` prints it."""
        return [f"ties: of the {self.n_pairs} context pairs whose outcomes differ ({self.n_questions} questions), "
                f"{self.baseline} scores {self.n_tied} equal ({self.share_tied:.0%}); on those {self.metric} orders "
                f"{_f(self.tied_metric)} right against {self.baseline}'s 0.5",
                f"ties: on the other {self.n_pairs - self.n_tied} pairs {self.metric} orders {_f(self.untied_metric)} "
                f"right, {self.baseline} {_f(self.untied_baseline)} (pairwise accuracy, a metric tie counting 1/2)"]


def _f(x: float) -> str:
    return "NA" if np.isnan(x) else f"{x:.3f}"


def _scores(sign_metric: np.ndarray, sign_outcome: np.ndarray) -> np.ndarray:
    """1 for a pair ordered like the outcome, 1/2 for a metric tie, 0 otherwise."""
    return 0.5 + 0.5 * sign_metric * sign_outcome


def _sign(x: np.ndarray, i: np.ndarray, j: np.ndarray) -> np.ndarray:
    d = x[i] - x[j]
    return np.where(np.abs(d) <= TIE_TOLERANCE, 0.0, np.sign(d))


def _checked(metric: object, baseline: object, outcome: object, groups: object) -> tuple[np.ndarray, ...]:
    a, b, o = (np.asarray(x, dtype=float) for x in (metric, baseline, outcome))
    g = np.asarray(groups)
    if not (a.ndim == b.ndim == o.ndim == 1 and len(a) == len(b) == len(o) == len(g)):
        raise InputError(f"tie decomposition: metric, baseline, outcome and groups need one value per context, got "
                         f"{len(a)}, {len(b)}, {len(o)} and {len(g)}")
    return a, b, o, g


def _question_scores(a: np.ndarray, b: np.ndarray, o: np.ndarray, g: np.ndarray):
    """Per question with an outcome-differing pair (both metrics defined): (question, the metric's
    scores on the pairs the baseline ties, the metric's on the other pairs, the baseline's there)."""
    order = np.argsort(g, kind="stable")
    bounds = np.flatnonzero(np.r_[True, g[order][1:] != g[order][:-1], True])
    for start, stop in zip(bounds[:-1], bounds[1:]):
        idx = order[start:stop]
        i, j = (idx[k] for k in np.triu_indices(len(idx), 1))
        so = np.sign(o[i] - o[j])
        keep = (so != 0) & np.isfinite(a[i]) & np.isfinite(a[j]) & np.isfinite(b[i]) & np.isfinite(b[j])
        if not keep.any():
            continue
        i, j, so = i[keep], j[keep], so[keep]
        sa, sb = _sign(a, i, j), _sign(b, i, j)
        tied = sb == 0
        yield g[idx[0]], _scores(sa[tied], so[tied]), _scores(sa[~tied], so[~tied]), _scores(sb[~tied], so[~tied])


def _mean(v: np.ndarray) -> float:
    return float(v.mean()) if len(v) else float("nan")


def tie_decomposition(metric: object, baseline: object, outcome: object, groups: object, *,
                      metric_name: str = "metric", baseline_name: str = "baseline") -> TieDecomposition:
    """The tie decomposition (module docstring) of ``metric`` against ``baseline``: one value of
    each per context (NaN = not defined), the context's ``outcome`` score (higher = better answer:
    correct > abstained > wrong) and its question in ``groups``."""
    parts = list(_question_scores(*_checked(metric, baseline, outcome, groups)))
    ta, ua, ub = (np.concatenate([part[k] for part in parts]) if parts else np.zeros(0) for k in (1, 2, 3))
    return TieDecomposition(metric_name, baseline_name, len(parts), len(ta) + len(ua), len(ta), _mean(ta), _mean(ua),
                            _mean(ub))


def ties_by_question(metric: object, baseline: object, outcome: object, groups: object) -> dict[str, tuple[float, float, float]]:
    """Per question (module docstring), for paired tests over questions: {question: (the metric's
    accuracy on the pairs the baseline ties (NaN without any), on the other pairs, the baseline's
    there (NaN without any))}."""
    return {str(q): (_mean(t), _mean(u), _mean(v)) for q, t, u, v in _question_scores(*_checked(metric, baseline, outcome, groups))}
