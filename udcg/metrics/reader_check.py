"""Can this reader measure distraction? A check from the abstention probabilities already computed.

UDCG credits a run for putting passages the reader answers from (relevant ones) first and charges
it for passages that distract the reader: an irrelevant passage whose p_abs is high costs little
(u = -(1 - p_abs) near 0), one the reader answers from costs almost -1. UDCG can tell runs apart by
their distractors only when the reader's p_abs separates irrelevant from relevant passages. From
the pairs of one reader and estimator (p_abs, relevance, whether the relevance was judged, query):

- counts and mean p_abs of relevant, judged-irrelevant and unjudged (taken as irrelevant) pairs;
- ``answered_irrelevant``: the share of irrelevant pairs (judged or not) with p_abs < 0.5, those
  the reader answers from rather than abstains on;
- ``auc``: the probability that a random irrelevant pair has a higher p_abs than a random relevant
  one (ties count half; ``sklearn.metrics.roc_auc_score`` with irrelevant as the positive class),
  with a 95% percentile bootstrap interval over *queries* (the pairs of one query resampled together);
- a verdict with ``AUC_MIN`` and ``ANSWERED_MAX``: the reader can measure distraction when its AUC
  is at least 0.75 and it answers from at most half of the irrelevant pairs; it cannot when it
  answers from more than half of 10 or more irrelevant pairs (however few relevant pairs there are),
  or when its AUC is below 0.75; with fewer than ``MIN_PAIRS`` relevant or irrelevant pairs otherwise,
  no verdict.

On which queries (``by_query``): per query, its relevant and irrelevant pairs, their mean p_abs, the
irrelevant pairs the reader answers from (p_abs < 0.5: the distractors UDCG charges a run for) and
the relevant pairs it abstains on (p_abs >= 0.5: UDCG credits those at most half, nDCG fully);
``query_counts`` counts the queries with each. ``ReaderCheck.queries`` holds them.

The thresholds come from the published reader data (docs/results/reader-abstention and the
validation runs' annotations, docs/reliability.md#reader-check): the readers under which UDCG gained
on nDCG (the 1.5B reader on NQ: AUC 0.847, answers from 9% of the irrelevant pairs; on the 200
PopQA passages alone: 0.788, 33%) pass both; those under which it did not (the 0.5B reader: NQ
0.670 / 36%, PopQA 0.697 / 81%, the 200 passages 0.717 / 73%; the 1.5B reader on PopQA 0.650 /
47%) fail at least one.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass, field, fields

import numpy as np

from udcg.errors import InputError

AUC_MIN = 0.75  # separation a reader needs (module docstring)
ANSWERED_MAX = 0.5  # the largest share of irrelevant pairs it may answer from
MIN_PAIRS = 10  # fewer relevant or irrelevant pairs than this: no verdict
ABSTAINS_AT = 0.5  # p_abs at or above this: the reader abstains rather than answers
SUGGESTION = ("try a reader that abstains on distractors: qwen2.5-coder-1.5b (`udcg models install "
              "qwen2.5-coder-1.5b`), or the LLM your RAG system uses in production (--model NAME --api-base URL)")
_CHUNK = 1 << 21


def _json_ready(values: dict) -> dict:
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
        return _json_ready(asdict(self))


def by_query(p_abs: object, relevant: object, queries: object) -> list[QueryCheck]:
    """Each query's ``QueryCheck``, in the order of the queries' first pairs."""
    p = np.asarray(p_abs, dtype=float)
    rel = np.asarray(relevant, dtype=bool)
    q_ids = np.asarray([str(x) for x in queries], dtype=object)
    if not (p.ndim == 1 and len(p) == len(rel) == len(q_ids)):
        raise InputError(f"reader check: p_abs, relevant and queries must be one value per pair, got {len(p)}, "
                         f"{len(rel)} and {len(q_ids)}")
    _check_p(p)
    return _query_checks(p, rel, *_queries(q_ids))


def _check_p(p: np.ndarray) -> None:
    if len(p) and (np.isnan(p).any() or p.min() < 0 or p.max() > 1):
        raise InputError("reader check: every p_abs must be a number in [0, 1]")


def _queries(q_ids: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The distinct query ids, each one's first pair and every pair's query index (``np.unique``)."""
    if not len(q_ids):
        return np.zeros(0, dtype=object), np.zeros(0, dtype=int), np.zeros(0, dtype=int)
    return np.unique(q_ids, return_index=True, return_inverse=True)


def _query_checks(p: np.ndarray, rel: np.ndarray, names: np.ndarray, first: np.ndarray, index: np.ndarray
                  ) -> list[QueryCheck]:
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


@dataclass(frozen=True)
class ReaderCheck:
    """The reader check of one reader and estimator (module docstring); NaN where undefined."""

    model: str
    estimator: str
    n_relevant: int
    n_judged_irrelevant: int
    n_unjudged: int
    mean_p_relevant: float
    mean_p_judged_irrelevant: float
    mean_p_unjudged: float
    answered_irrelevant: float  # share of irrelevant pairs (judged or not) with p_abs < 0.5
    auc: float
    auc_low: float
    auc_high: float
    n_queries: int
    verdict: str  # "can", "cannot" or "too few pairs"
    queries: tuple[QueryCheck, ...] = field(default=(), repr=False)  # per query, in the order of their first pairs

    @property
    def can_measure_distraction(self) -> bool:
        return self.verdict == "can"

    def __repr__(self) -> str:
        return (f"<ReaderCheck ({self.who()}): AUC {_f(self.auc)} [{_f(self.auc_low)}, {_f(self.auc_high)}], "
                f"verdict {self.verdict!r}; .lines(), .to_dict()>")

    def _repr_html_(self) -> str:
        """The check as a table of its pairs (count, mean p_abs) and its AUC and verdict (Jupyter)."""
        from udcg.metrics.html import markdown_html

        rows = [("relevant", self.n_relevant, self.mean_p_relevant),
                ("judged irrelevant", self.n_judged_irrelevant, self.mean_p_judged_irrelevant),
                ("unjudged (taken as irrelevant)", self.n_unjudged, self.mean_p_unjudged)]
        return markdown_html("\n".join([f"reader check ({self.who()}), {self.n_queries} queries",
                                         "| pairs | count | mean p_abs |", "|---|---|---|",
                                         *(f"| {name} | {n} | {_f(p)} |" for name, n, p in rows),
                                         self.lines()[2].strip(), self.lines()[3].strip()]))

    @classmethod
    def from_dict(cls, data: dict) -> ReaderCheck:
        """The check ``to_dict`` wrote (None back to NaN, or to "" for a name), without its per-query rows."""
        types = {f.name: f.type for f in fields(cls) if f.name != "queries"}
        missing = [n for n in types if n not in data]
        if missing:
            raise InputError(f"a reader check without {', '.join(missing)} (written by another udcg version?)")
        return cls(**{n: ("" if t == "str" else math.nan) if data[n] is None else data[n] for n, t in types.items()})

    def to_dict(self) -> dict:
        """JSON-ready (NaN becomes None), with the thresholds the verdict used; the per-query counts
        as ``per_query`` (``query_line``), not the queries themselves."""
        out = _json_ready({f.name: getattr(self, f.name) for f in fields(self) if f.name != "queries"})
        return {**out, "per_query": query_counts(self.queries),
                "thresholds": {"auc_min": AUC_MIN, "answered_irrelevant_max": ANSWERED_MAX, "min_pairs": MIN_PAIRS}}

    def query_line(self) -> str:
        """On which queries: how many have an irrelevant pair the reader answers from, and how many a
        relevant pair it abstains on."""
        c = query_counts(self.queries)
        return (f"  per query: it answers from an irrelevant pair on {c['answered_irrelevant']} of the "
                f"{c['with_irrelevant']} queries that have one (distractors: UDCG charges a run for them) and abstains "
                f"on a relevant pair on {c['abstained_relevant']} of the {c['with_relevant']} that have one (UDCG "
                "credits those at most half, nDCG fully)")

    def worst_line(self, n: int = 5) -> str:
        """The ``n`` queries whose irrelevant pairs the reader answers from most (count, then share,
        then query id), or "" when it answers from none."""
        hit = sorted((c for c in self.queries if c.answered_irrelevant),
                     key=lambda c: (-c.answered_irrelevant, -c.answered_irrelevant / c.n_irrelevant, c.qid))[:n]
        if not hit:
            return ""
        return ("  most distracting queries (irrelevant pairs answered from / irrelevant pairs): "
                + ", ".join(f"{c.qid} {c.answered_irrelevant}/{c.n_irrelevant}" for c in hit))

    def query_lines(self) -> list[str]:
        """On which queries, as the commands print it under the check: ``query_line`` and, when the
        reader answers from any irrelevant pair, ``worst_line``."""
        worst = self.worst_line()
        return [self.query_line(), *([worst] if worst else [])]

    def who(self) -> str:
        """The reader and estimator the utilities name, as the check's lines and notes give them."""
        return f"{self.model or 'model unnamed'}, {self.estimator or 'estimator unknown'}"

    def lines(self) -> list[str]:
        """The check as the commands print it: counts, means, the AUC named as such, the verdict."""
        who = self.who()
        means = [f"relevant {_f(self.mean_p_relevant)}"]
        if self.n_judged_irrelevant:
            means.append(f"judged irrelevant {_f(self.mean_p_judged_irrelevant)}")
        if self.n_unjudged:
            means.append(f"unjudged {_f(self.mean_p_unjudged)}")
        return [f"reader check ({who}; from the utilities, no model time): {self.n_relevant} relevant, "
                f"{self.n_judged_irrelevant} judged-irrelevant, {self.n_unjudged} unjudged pairs "
                f"(taken as irrelevant) over {self.n_queries} queries",
                f"  mean p_abs: {', '.join(means)}; answers (p_abs < 0.5) from "
                f"{_pct(self.answered_irrelevant)} of the irrelevant pairs",
                f"  AUC of p_abs separating irrelevant from relevant pairs: {_f(self.auc)} "
                f"[{_f(self.auc_low)}, {_f(self.auc_high)}] (95% bootstrap over queries; 0.5 = no separation)",
                "  verdict: " + self.verdict_text()]

    def verdict_text(self) -> str:
        if self.verdict == "too few pairs":
            return (f"too few pairs to tell ({self.n_relevant} relevant, "
                    f"{self.n_judged_irrelevant + self.n_unjudged} irrelevant; {MIN_PAIRS} of each needed)")
        if self.verdict == "can":
            border = (f" (its interval reaches below {AUC_MIN}: borderline)" if self.auc_low < AUC_MIN else "")
            return (f"this reader can measure distraction (AUC {_f(self.auc)} >= {AUC_MIN}, answers from "
                    f"{_pct(self.answered_irrelevant)} <= {ANSWERED_MAX:.0%} of the irrelevant pairs){border}: "
                    "UDCG's differences between runs reflect how distracting their passages are for it")
        why = []
        if self.answered_irrelevant > ANSWERED_MAX:
            why.append(f"it answers from {_pct(self.answered_irrelevant)} of the irrelevant pairs (more than "
                       f"{ANSWERED_MAX:.0%})")
        if not self.auc >= AUC_MIN and not np.isnan(self.auc):
            few = f", from only {self.n_relevant} relevant pairs" if self.n_relevant < MIN_PAIRS else ""
            why.append(f"its AUC {_f(self.auc)} is below {AUC_MIN}{few}")
        return (f"this reader cannot measure distraction: {' and '.join(why)}; UDCG's differences between runs "
                f"will mostly reflect how answerable their irrelevant passages are, not how distracting; {SUGGESTION}")


def _f(x: float) -> str:
    return "NA" if math.isnan(x) else f"{x:.3f}"


def _pct(x: float) -> str:
    return "NA" if math.isnan(x) else f"{x:.0%}"


def _mean(v: np.ndarray) -> float:
    return float(v.mean()) if len(v) else float("nan")


def _auc_rows(s_order: np.ndarray, irrelevant: np.ndarray, starts: np.ndarray, weights: np.ndarray) -> np.ndarray:
    """The AUC (irrelevant above relevant, ties half) under each row of pair ``weights`` (rows x
    pairs, the pairs sorted by p_abs; ``starts``: where each distinct p_abs begins)."""
    w_irr = np.add.reduceat(weights * irrelevant, starts, axis=1)
    w_rel = np.add.reduceat(weights * ~irrelevant, starts, axis=1)
    below = np.cumsum(w_rel, axis=1) - w_rel
    with np.errstate(invalid="ignore", divide="ignore"):
        return (w_irr * (below + 0.5 * w_rel)).sum(axis=1) / (w_irr.sum(axis=1) * w_rel.sum(axis=1))


def _auc_interval(p_abs: np.ndarray, irrelevant: np.ndarray, query: np.ndarray, n_boot: int, seed: int
                  ) -> tuple[float, float]:
    """95% percentile interval of the AUC over ``n_boot`` resamples of the queries (with replacement)."""
    order = np.argsort(p_abs, kind="stable")
    s, irr, q = p_abs[order], irrelevant[order], query[order]
    starts = np.flatnonzero(np.r_[True, s[1:] != s[:-1]])
    n_q = int(query.max()) + 1
    rng = np.random.default_rng(seed)
    aucs = np.empty(n_boot)
    rows = max(1, _CHUNK // max(len(s), n_q))
    for start in range(0, n_boot, rows):
        stop = min(n_boot, start + rows)
        draws = rng.integers(0, n_q, size=(stop - start, n_q))
        counts = np.stack([np.bincount(d, minlength=n_q) for d in draws]).astype(float)
        aucs[start:stop] = _auc_rows(s, irr, starts, counts[:, q])
    aucs = aucs[np.isfinite(aucs)]
    if not len(aucs):
        return float("nan"), float("nan")
    return float(np.quantile(aucs, 0.025)), float(np.quantile(aucs, 0.975))


def reader_check(p_abs: object, relevant: object, judged: object, queries: object, *, model: str = "",
                 estimator: str = "", n_boot: int = 1000, seed: int = 0) -> ReaderCheck:
    """The reader check of one reader's pairs: ``p_abs`` in [0, 1], ``relevant`` (bool), ``judged``
    (bool: False for an unjudged pair taken as irrelevant) and ``queries`` (any ids) per pair."""
    p = np.asarray(p_abs, dtype=float)
    rel = np.asarray(relevant, dtype=bool)
    jud = np.asarray(judged, dtype=bool)
    q_ids = np.asarray([str(x) for x in queries], dtype=object)
    if not (p.ndim == 1 and len(p) == len(rel) == len(jud) == len(q_ids)):
        raise InputError(f"reader check: p_abs, relevant, judged and queries must be one value per pair, got "
                         f"{len(p)}, {len(rel)}, {len(jud)} and {len(q_ids)}")
    _check_p(p)
    irr = ~rel
    names, first, query = _queries(q_ids)
    n_rel, n_irr = int(rel.sum()), int(irr.sum())
    answered = _mean((p[irr] < ABSTAINS_AT).astype(float))
    if n_rel and n_irr:
        from sklearn.metrics import roc_auc_score

        auc = float(roc_auc_score(irr, p))
        low, high = _auc_interval(p, irr, query, n_boot, seed)
    else:
        auc = low = high = float("nan")
    if n_irr >= MIN_PAIRS and answered > ANSWERED_MAX:
        verdict = "cannot"  # answering from most distractors needs no relevant pair to be seen
    elif n_rel < MIN_PAIRS or n_irr < MIN_PAIRS:
        verdict = "too few pairs"
    else:
        verdict = "can" if auc >= AUC_MIN else "cannot"
    return ReaderCheck(model, estimator, n_rel, int((irr & jud).sum()), int((irr & ~jud).sum()), _mean(p[rel]),
                       _mean(p[irr & jud]), _mean(p[irr & ~jud]), answered, auc, low, high,
                       len(names), verdict, tuple(_query_checks(p, rel, names, first, query)))

