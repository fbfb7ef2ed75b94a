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
  one (ties count half; the same number as ``sklearn.metrics.roc_auc_score`` with irrelevant as the
  positive class, computed in numpy by ``metrics.reader_auc``), with a 95% percentile bootstrap
  interval over *queries* (the pairs of one query resampled together);
- a verdict with ``AUC_MIN`` and ``ANSWERED_MAX`` (``metrics.reader_verdict``): the reader can
  measure distraction when its AUC is at least 0.75 and it answers from at most half of the
  irrelevant pairs; it cannot when it answers from more than half of 10 or more irrelevant pairs
  (however few relevant pairs there are), or when its AUC is below 0.75; with fewer than
  ``MIN_PAIRS`` relevant or irrelevant pairs otherwise, no verdict. ``borderline``: a verdict the
  AUC decided whose interval reaches the other side of 0.75;
- with unjudged pairs: ``fragility``, the smallest number of unjudged pairs that, relabelled
  relevant, turn the verdict (``metrics.reader_verdict``), and ``judged_only``, the same check on
  the judged pairs alone (None without a judged irrelevant pair).

On which queries (``by_query``): per query, its relevant and irrelevant pairs, their mean p_abs, the
irrelevant pairs the reader answers from (p_abs < 0.5: the distractors UDCG charges a run for) and
the relevant pairs it abstains on (p_abs >= 0.5: UDCG credits those at most half, nDCG fully);
``query_counts`` counts the queries with each. ``ReaderCheck.queries`` holds them.

The thresholds come from the published reader data (docs/results/reader-abstention and the
validation runs' annotations, docs/reliability.md#reader-check): the readers under which UDCG gained
on nDCG (the 1.5B reader on NQ: AUC 0.847, answers from 9% of the irrelevant pairs; on the 200
PopQA passages alone: 0.788, 33%) pass both; those under which it did not (the 0.5B reader: NQ
0.670 / 36%, PopQA 0.697 / 81%, the 200 passages 0.717 / 73%; the 1.5B reader on PopQA 0.650 /
47%) fail at least one. Six readings of one model family: passing is what UDCG's charge for
distractors needs, not evidence that UDCG ranks runs better than nDCG (the confirmatory NQ run's
1.5B reader passed, AUC 0.895 on its confirmatory questions 121-350, and UDCG's gain on the
pre-registered statistic was inconclusive); the check of the LLM a RAG system uses in production is the evidence that counts.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field, fields, replace

import numpy as np

from udcg.errors import InputError
from udcg.metrics.reader_auc import auc as _auc
from udcg.metrics.reader_auc import auc_interval
from udcg.metrics.reader_queries import QueryCheck, check_p, json_ready, query_checks, query_counts, query_index
from udcg.metrics.reader_verdict import (ABSTAINS_AT, ANSWERED_MAX, AUC_MIN, MIN_PAIRS, VerdictFragility, fragile_limit,
                                         fragility, verdicts)

BASIS = "set on six published readings of one model family: docs/reliability.md#reader-check"
PRODUCTION = "the check of the LLM your RAG system uses in production is the evidence that counts"
OFFLINE_PASSED = "qwen2.5-coder-1.5b"  # the offline reader that passed on the published NQ annotations


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
    fragility: VerdictFragility | None = None  # with unjudged pairs and a verdict: how many of them flip it
    judged_only: ReaderCheck | None = None  # the check of the judged pairs alone (with a judged irrelevant pair)
    judge_command: str = ""  # the command that judges the unjudged pairs (set by the flow that knows the folder)
    judge_estimate: str = ""  # how long it takes (pairs, measured rate)
    labels_caveat: str = ""  # what the labels rest on, where the flow knows it (pairs judged by the qrels' own rule)

    @property
    def can_measure_distraction(self) -> bool:
        return self.verdict == "can"

    @property
    def borderline(self) -> bool:
        """A verdict the AUC decided whose 95% interval reaches the other side of ``AUC_MIN``."""
        if self.verdict == "can":
            return self.auc_low < AUC_MIN
        by_auc = self.verdict == "cannot" and not self.answered_irrelevant > ANSWERED_MAX
        return by_auc and self.auc_high >= AUC_MIN

    @property
    def conclusion(self) -> str:
        """What the verdict line says: "can", "cannot", "borderline" or "too few pairs" (``to_dict``'s
        ``verdict``; ``verdict`` is the thresholds' side, ``to_dict``'s ``leans`` when borderline)."""
        return "borderline" if self.borderline else self.verdict

    @property
    def hangs_on_labels(self) -> bool:
        """The verdict flips when at most max(3, 5%) of the unjudged pairs are relabelled relevant."""
        return self.fragility is not None and self.fragility.fragile

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
        """The check ``to_dict`` wrote (None back to NaN, or to "" for a name), without its per-query
        rows; a record of an earlier version (no fragility) reads as one without it."""
        types = {f.name: f.type for f in fields(cls) if f.name not in _NESTED}
        missing = [n for n in types if n not in data and n not in _ADDED]
        if missing:
            raise InputError(f"a reader check without {', '.join(missing)} (written by another udcg version?)")
        values = {n: ("" if t == "str" else math.nan) if data.get(n) is None else data[n] for n, t in types.items()
                  if n in data}
        if values.get("verdict") == "borderline":  # the record says what the text says; the side is its leans
            values["verdict"] = str(data.get("leans") or ("can" if (data.get("auc") or 0) >= AUC_MIN else "cannot"))
        nested = {"fragility": VerdictFragility.from_dict(data["fragility"]) if data.get("fragility") else None,
                  "judged_only": cls.from_dict(data["judged_only"]) if data.get("judged_only") else None}
        return cls(**values, **nested)

    def to_dict(self) -> dict:
        """JSON-ready (NaN becomes None), with the thresholds the verdict used; ``verdict`` what the
        verdict line says (``conclusion``: "borderline" included), ``leans`` the thresholds' side of a
        borderline verdict ("can" or "cannot"; None otherwise); the per-query counts as ``per_query``
        (``query_line``), not the queries themselves; ``fragility`` and ``judged_only`` (None where
        they do not apply)."""
        out = json_ready({f.name: getattr(self, f.name) for f in fields(self) if f.name not in _NESTED})
        return {**out, "verdict": self.conclusion, "leans": self.verdict if self.borderline else None,
                "borderline": self.borderline, "per_query": query_counts(self.queries),
                "fragility": self.fragility.to_dict() if self.fragility else None,
                "judged_only": _brief(self.judged_only.to_dict()) if self.judged_only else None,
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
        """The check as the commands print it: counts, means, the AUC named as such, the verdict;
        with unjudged pairs, how far the verdict hangs on them (``label_lines``)."""
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
                "  verdict: " + self.verdict_text(), *self.label_lines()]

    def verdict_text(self) -> str:
        """The verdict in words: what the evidence shows, what the thresholds rest on (``BASIS``), and
        for a reader that fails, what to check instead (never the reader just checked)."""
        if self.verdict == "too few pairs":
            return (f"too few pairs to tell ({self.n_relevant} relevant, "
                    f"{self.n_judged_irrelevant + self.n_unjudged} irrelevant; {MIN_PAIRS} of each needed)")
        answered = f"answers from {_pct(self.answered_irrelevant)}"
        if self.borderline:
            side = (f"passes {AUC_MIN} but its 95% interval reaches down to {_f(self.auc_low)}"
                    if self.verdict == "can" else f"is below {AUC_MIN} but its 95% interval reaches {_f(self.auc_high)}")
            return (f"borderline: the AUC {_f(self.auc)} {side} (it {answered} <= {ANSWERED_MAX:.0%} of the irrelevant "
                    f"pairs), so these pairs do not settle whether this reader can measure distraction (the thresholds "
                    f"are {BASIS}); more queries narrow the interval; {PRODUCTION}")
        if self.verdict == "can":
            return (f"this reader can measure distraction by the check's thresholds (AUC {_f(self.auc)} >= {AUC_MIN}, "
                    f"{answered} <= {ANSWERED_MAX:.0%} of the irrelevant pairs; {BASIS}): its p_abs separates "
                    "irrelevant from relevant passages, as UDCG's charge for distractors needs; that alone does not "
                    "show that UDCG ranks runs better than nDCG with it (the confirmatory NQ run's reader passed, AUC "
                    f"0.895, and UDCG's gain on its pre-registered statistic was inconclusive); {PRODUCTION}")
        why = []
        if self.answered_irrelevant > ANSWERED_MAX:
            why.append(f"it {answered} of the irrelevant pairs (more than {ANSWERED_MAX:.0%})")
        if not self.auc >= AUC_MIN and not np.isnan(self.auc):
            few = f", from only {self.n_relevant} relevant pairs" if self.n_relevant < MIN_PAIRS else ""
            why.append(f"its AUC {_f(self.auc)} is below {AUC_MIN}{few}")
        other = ("" if OFFLINE_PASSED in self.model.lower() else
                 f", or the offline {OFFLINE_PASSED} (`udcg models install {OFFLINE_PASSED}`), which passed on the "
                 "published NQ annotations and failed on PopQA's")
        return (f"this reader cannot measure distraction by the check's thresholds ({BASIS}): {' and '.join(why)}; "
                "UDCG then charges runs for passages this reader answers from whether or not they mislead it, and under "
                "the published readers that failed UDCG did not gain on nDCG; check the LLM your RAG system uses in "
                f"production instead (--model NAME --api-base URL){other}")

    def label_lines(self) -> list[str]:
        """``labels_caveat``; with unjudged pairs and a verdict, how many of them, relabelled relevant, flip
        it (count first); when few (``hangs_on_labels``) the command that judges them; when the verdicts
        differ or it hangs on the labels, the check of the judged pairs alone."""
        fr = self.fragility
        caveat = [f"  labels: {self.labels_caveat}"] if self.labels_caveat else []
        if fr is None:
            return caveat
        if fr.flips_at is None:
            out = [f"  labels: {fr.n_unjudged} unjudged pairs taken as irrelevant; no number of them relabelled relevant "
                   f"({fr.order}) turns the verdict"]
        else:
            few = f"{fr.flips_at} pair{'s' if fr.flips_at != 1 else ''} would turn it to {fr.verdict_after}"
            of = (f"of the {fr.n_unjudged} unjudged pairs taken as irrelevant ({fr.flips_at / fr.n_unjudged:.1%}); "
                  f"it hangs on them when at most max(3, 5% of them) = {fragile_limit(fr.n_unjudged)} do")
            if fr.fragile:
                named = ", ".join(" ".join(filter(None, p)) for p in fr.pairs[:3]) + (", ..." if fr.flips_at > 3 else "")
                judge = (f"judge them: {self.judge_command}" + (f" ({self.judge_estimate})" if self.judge_estimate else "")
                         if self.judge_command else "judge them: rerun the udcg annotate that wrote these utilities with "
                         "--unjudged judge --judge MODEL (or --judge rules, where the qrels were not made by answer "
                         "containment)")
                out = [f"  labels: {few} (AUC {_f(fr.auc_after)}, answers from {_pct(fr.answered_after)} of the "
                       f"irrelevant pairs), relabelled relevant ({fr.order}: {named}), {of}: the verdict hangs on the "
                       f"unjudged labels; {judge}"]
            else:
                out = [f"  labels: {few}, relabelled relevant ({fr.order}), {of}"]
        judged = self.judged_only
        if fr.fragile or (judged is not None and judged.verdict != self.verdict):
            out.append(self.judged_line())
        return caveat + out

    def judged_line(self) -> str:
        """The check recomputed on the judged pairs alone, or why it cannot be."""
        j = self.judged_only
        if j is None:
            return (f"  judged pairs only: none of the irrelevant pairs is judged ({self.n_judged_irrelevant} "
                    "judged-irrelevant), so the check cannot be recomputed without the unjudged labels")
        word = f"borderline (leans {j.verdict})" if j.borderline else j.verdict
        return (f"  judged pairs only ({j.n_relevant} relevant, {j.n_judged_irrelevant} judged-irrelevant): AUC "
                f"{_f(j.auc)} [{_f(j.auc_low)}, {_f(j.auc_high)}], answers from {_pct(j.answered_irrelevant)} of the "
                f"irrelevant pairs; verdict: {word}")

    def label_note(self) -> str:
        """For a footer: "" unless the verdict hangs on the unjudged labels."""
        fr = self.fragility
        if not self.hangs_on_labels:
            return ""
        return (f" It hangs on the unjudged labels: {fr.flips_at} of its {fr.n_unjudged} unjudged pairs, relabelled "
                f"relevant, turn it to {fr.verdict_after} (udcg reader-check names the command that judges them).")


_NESTED = ("queries", "fragility", "judged_only")
_ADDED = ("judge_command", "judge_estimate", "labels_caveat")  # fields a record of an earlier version lacks


def _brief(data: dict) -> dict:
    """A judged-only check's record: its numbers, without per-query counts or thresholds."""
    return {k: v for k, v in data.items() if k not in ("per_query", "thresholds", "fragility", "judged_only")}


def _f(x: float) -> str:
    return "NA" if math.isnan(x) else f"{x:.3f}"


def _pct(x: float) -> str:
    return "NA" if math.isnan(x) else f"{x:.0%}"


def _mean(v: np.ndarray) -> float:
    return float(v.mean()) if len(v) else math.nan


@dataclass(frozen=True)
class ReaderPairs:
    """One reader's pairs, checked when built: ``p_abs`` in [0, 1], ``relevant`` (bool), ``judged``
    (bool: False for an unjudged pair taken as irrelevant) and ``queries`` (any ids, kept as str)
    per pair; ``docids`` (optional) name the pairs the fragility lists. Each is kept as an array."""

    p_abs: np.ndarray
    relevant: np.ndarray
    judged: np.ndarray
    queries: np.ndarray
    docids: np.ndarray | None = None

    def __post_init__(self) -> None:
        p = np.asarray(self.p_abs, dtype=float)
        rel = np.asarray(self.relevant, dtype=bool)
        jud = np.asarray(self.judged, dtype=bool)
        q_ids = np.asarray([str(x) for x in self.queries], dtype=object)
        d_ids = None if self.docids is None else np.asarray([str(x) for x in self.docids], dtype=object)
        if not (p.ndim == 1 and len(p) == len(rel) == len(jud) == len(q_ids)) or (d_ids is not None
                                                                                 and len(d_ids) != len(p)):
            raise InputError(f"reader check: p_abs, relevant, judged and queries must be one value per pair, got "
                             f"{len(p)}, {len(rel)}, {len(jud)} and {len(q_ids)}")
        check_p(p)
        for name, value in (("p_abs", p), ("relevant", rel), ("judged", jud), ("queries", q_ids), ("docids", d_ids)):
            object.__setattr__(self, name, value)


def check_reader_pairs(pairs: ReaderPairs, *, model: str = "", estimator: str = "", n_boot: int = 1000,
                       seed: int = 0) -> ReaderCheck:
    """The reader check of one reader's pairs (``ReaderPairs``), made by ``model`` with ``estimator``;
    the AUC's interval from ``n_boot`` bootstrap resamples of the queries, seeded."""
    p, rel, jud, q_ids, d_ids = pairs.p_abs, pairs.relevant, pairs.judged, pairs.queries, pairs.docids
    check = _check(p, rel, jud, q_ids, model, estimator, n_boot, seed)
    if not check.n_unjudged:
        return check
    kept = rel | jud
    judged_only = (_check(p[kept], rel[kept], jud[kept], q_ids[kept], model, estimator, n_boot, seed)
                   if check.n_judged_irrelevant else None)
    return replace(check, fragility=fragility(p, rel, jud, check.verdict, q_ids, d_ids), judged_only=judged_only)


def _check(p: np.ndarray, rel: np.ndarray, jud: np.ndarray, q_ids: np.ndarray, model: str, estimator: str,
           n_boot: int, seed: int) -> ReaderCheck:
    irr = ~rel
    names, first, query = query_index(q_ids)
    n_rel, n_irr = int(rel.sum()), int(irr.sum())
    answered = _mean((p[irr] < ABSTAINS_AT).astype(float))
    if n_rel and n_irr:
        auc = _auc(p, irr)
        low, high = auc_interval(p, irr, query, n_boot, seed)
    else:
        auc = low = high = float("nan")
    verdict = str(verdicts(n_rel, n_irr, answered, auc))
    return ReaderCheck(model, estimator, n_rel, int((irr & jud).sum()), int((irr & ~jud).sum()), _mean(p[rel]),
                       _mean(p[irr & jud]), _mean(p[irr & ~jud]), answered, auc, low, high,
                       len(names), verdict, tuple(query_checks(p, rel, names, first, query)))
