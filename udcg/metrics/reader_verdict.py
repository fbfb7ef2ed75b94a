"""The reader check's verdict rule and how far it hangs on the unjudged labels (its fragility).

The rule (``verdicts``, thresholds below; why these: ``udcg.metrics.reader_check``'s docstring and
docs/reliability.md#reader-check): "cannot" when the reader answers (p_abs < 0.5) from more than
half of 10 or more irrelevant pairs; else "too few pairs" with fewer than 10 relevant or 10
irrelevant pairs; else "can" when the AUC is at least 0.75, "cannot" below.

Fragility: UDCG and the check take every unjudged pair as irrelevant. ``fragility`` relabels
unjudged pairs relevant one at a time, in the order that moves the verdict the most, and finds the
smallest number that turns it into the other verdict:

- against "can", the unjudged pairs the reader abstains on most first (highest p_abs): a relevant
  passage the reader abstains on is what lowers the AUC (the packaged example's nq6 / nq-gold:73,
  p_abs 0.912, a relevant passage its qrels do not judge);
- against "cannot", the pairs it answers from most first (lowest p_abs): a relevant passage the
  qrels missed looks exactly like an irrelevant one the reader answers from, and those are what
  make a reader fail for answering from distractors.

Each order is the one that moves the AUC and the answered share fastest towards the other verdict,
so no smaller number of relabelled unjudged pairs flips it. The verdict *hangs on the unjudged
labels* when that number is at most ``fragile_limit(n)`` = max(``FRAGILE_MIN``, 5% of the ``n``
unjudged pairs), absolute as well as relative:

- relative, ``FRAGILE_SHARE`` (5%): a share of missing relevant labels that shallow qrels reach
  easily (one judged passage per query: on the packaged example 1 of its 151 unjudged pairs is
  relevant);
- absolute, ``FRAGILE_MIN`` (3 pairs): on a small folder 5% is a single pair, so a share alone says
  "hangs" only when one pair flips the verdict. The DPR trial (docs/trial-dpr.md: 35 unjudged pairs,
  5% = 1.75) had 2 flipping pairs, both passages a lenient judge calls relevant and answer
  containment cannot (a surname for the full name; the Seaway for the River), and the share rule
  said nothing. Three pairs are read by hand in a minute and judged by a model in a few; a
  verdict that three labels turn is not settled by the labels, whatever their share.

"too few pairs" has no fragility.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from udcg.metrics.reader_auc import relabelled_aucs

AUC_MIN = 0.75  # separation a reader needs (reader_check's docstring)
ANSWERED_MAX = 0.5  # the largest share of irrelevant pairs it may answer from
MIN_PAIRS = 10  # fewer relevant or irrelevant pairs than this: no verdict
ABSTAINS_AT = 0.5  # p_abs at or above this: the reader abstains rather than answers
FRAGILE_SHARE = 0.05  # a verdict that this share of the unjudged pairs, relabelled relevant, flips hangs on them
FRAGILE_MIN = 3  # ... and one that this many flip, whatever their share (module docstring)
LISTED = 10  # pairs of a flip kept by name


def verdicts(n_relevant: np.ndarray, n_irrelevant: np.ndarray, answered: np.ndarray, auc: np.ndarray) -> np.ndarray:
    """The verdict ("can", "cannot", "too few pairs") of each set of counts, answered share and AUC."""
    n_rel, n_irr = np.asarray(n_relevant), np.asarray(n_irrelevant)
    answered, auc = np.asarray(answered, dtype=float), np.asarray(auc, dtype=float)
    return np.where((n_irr >= MIN_PAIRS) & (answered > ANSWERED_MAX), "cannot",  # needs no relevant pair to be seen
                    np.where((n_rel < MIN_PAIRS) | (n_irr < MIN_PAIRS), "too few pairs",
                             np.where(auc >= AUC_MIN, "can", "cannot")))


def fragile_limit(n_unjudged: int) -> int:
    """The most relabelled pairs a verdict may need to flip and still hang on the unjudged labels:
    max(``FRAGILE_MIN``, 5% of them)."""
    return max(FRAGILE_MIN, math.floor(FRAGILE_SHARE * n_unjudged))


@dataclass(frozen=True)
class VerdictFragility:
    """How many unjudged pairs, relabelled relevant, turn the verdict (module docstring)."""

    n_unjudged: int
    order: str  # "highest p_abs first" (against "can") or "lowest p_abs first" (against "cannot")
    flips_at: int | None  # the smallest number that turns the verdict; None: no number does
    verdict_after: str  # the verdict with those pairs relabelled ("" when none flips it)
    auc_after: float
    answered_after: float
    pairs: tuple[tuple[str, str], ...] = ()  # the first of those pairs (at most LISTED): (qid, docid)

    @property
    def fragile(self) -> bool:
        """The verdict hangs on the unjudged labels: at most ``fragile_limit`` of them flip it."""
        return self.flips_at is not None and self.flips_at <= fragile_limit(self.n_unjudged)

    def to_dict(self) -> dict:
        return {"n_unjudged": self.n_unjudged, "order": self.order, "flips_at": self.flips_at,
                "verdict_after": self.verdict_after, "fragile": self.fragile, "share_max": FRAGILE_SHARE,
                "min_pairs": FRAGILE_MIN, "limit": fragile_limit(self.n_unjudged),
                "auc_after": None if math.isnan(self.auc_after) else self.auc_after,
                "answered_after": None if math.isnan(self.answered_after) else self.answered_after,
                "pairs": [list(p) for p in self.pairs]}

    @classmethod
    def from_dict(cls, data: dict) -> VerdictFragility:
        nan = float("nan")
        return cls(int(data["n_unjudged"]), str(data["order"]), data["flips_at"], str(data["verdict_after"] or ""),
                   nan if data.get("auc_after") is None else float(data["auc_after"]),
                   nan if data.get("answered_after") is None else float(data["answered_after"]),
                   tuple((str(q), str(d)) for q, d in data.get("pairs", [])))


def fragility(p_abs: np.ndarray, relevant: np.ndarray, judged: np.ndarray, verdict: str, queries: np.ndarray,
              docids: np.ndarray | None = None) -> VerdictFragility | None:
    """The ``Fragility`` of ``verdict`` (the check's, on these pairs), or None for "too few pairs" or
    without unjudged pairs. ``queries`` and ``docids`` (or none) name the pairs a flip relabels."""
    unjudged = ~relevant & ~judged
    n_unjudged = int(unjudged.sum())
    if verdict not in ("can", "cannot") or not n_unjudged:
        return None
    against_can = verdict == "can"
    candidates = np.flatnonzero(unjudged)
    moved = candidates[np.argsort(-p_abs[candidates] if against_can else p_abs[candidates], kind="stable")]
    irrelevant = ~relevant
    aucs = relabelled_aucs(p_abs, irrelevant, moved)
    m = np.arange(len(moved) + 1)
    n_irr = int(irrelevant.sum()) - m
    answered_pairs = int((irrelevant & (p_abs < ABSTAINS_AT)).sum()) - np.r_[0, np.cumsum(p_abs[moved] < ABSTAINS_AT)]
    with np.errstate(invalid="ignore", divide="ignore"):
        answered = np.where(n_irr > 0, answered_pairs / np.maximum(n_irr, 1), np.nan)
    after = verdicts(int(relevant.sum()) + m, n_irr, answered, aucs)
    other = "cannot" if against_can else "can"
    hits = np.flatnonzero(after == other)
    order = "highest p_abs first" if against_can else "lowest p_abs first"
    if not len(hits):
        return VerdictFragility(n_unjudged, order, None, "", float("nan"), float("nan"))
    k = int(hits[0])
    names = [(str(queries[i]), "" if docids is None else str(docids[i])) for i in moved[:min(k, LISTED)]]
    return VerdictFragility(n_unjudged, order, k, other, float(aucs[k]), float(answered[k]), tuple(names))
