"""Can the labels be trusted? Checks of the relevance labels a verdict stands on, where they are read.

Every measure takes a top-k document without a qrels entry as irrelevant (UDCG: R = -1), and every
qrels file is taken on faith. From per-query counts (no document ids, no model):

- **unjudged share** of each run's top-k pairs: those without a qrels entry (judged@k's complement,
  the pooling-depth question an IR reviewer asks);
- **zero relevant**: queries whose qrels hold no relevant document (grade >= ``RELEVANT_AT``, as
  trec_eval's relevance level): every run fails them on nDCG, P and RR, whatever it retrieves;
- **implausible relevant counts**: a query with at least ``LOOSE_MIN`` relevant documents that is
  either an outlier among its own qrels (``LOOSE_FACTOR`` times the median count of the queries
  with any) or, where the corpus size is known, marks ``LOOSE_CORPUS_SHARE`` of the corpus relevant.
  That is the signature of qrels made by answer containment with a short answer (the answer ``3``
  matched 708 of 3,572 passages, ``four`` 118, ``2003`` 65, against a median of a few): a factoid
  question is answered by the passages of one or a few documents, and 5% of a corpus of 3,572
  passages cut from 98 papers is every passage of five whole papers. The share of the *pool* (the
  runs' top-k) does not separate them: a good run's top-k is all relevant on a loose query and on an
  easy one alike;
- **containment of a short/numeric answer** (where the answers are at hand: ``annotate``): a query
  whose answers include a bare number or a single token of at most 4 characters (``udcg.text.
  short_answer``: ``2002``, ``3``, ``four``, ``UK``) with at least ``SHORT_MIN`` relevant documents
  and ``SHORT_FACTOR`` times the median count: labels likely loose. Containment of such an answer
  matches wherever the token occurs, not where the question is answered, so the answer itself says
  why the count is suspect and a lower multiple than the blind rule's 10 is evidence enough. The
  two trials: the biomedical qrels' ``3`` matched 708 of 3,572 passages (``four`` 118, ``2003`` 65,
  against a median of a few), which the blind rule catches; the DPR trial's (docs/trial-dpr.md)
  ``2002`` matched 15 passages, 9 of them wrong (a birthday, a baseball season, a comic series), at
  3.75 times its five queries' median of 4 (2% of 751 passages), which it does not. Twice the
  median flags dpr4 down to 8 relevant; a minimum of 5 keeps quiet a short answer that sits in
  the passages of one or two documents. The blind rule's flags are unchanged (the line names the
  answer of a flagged short-answer query; the short line names the others).

``LabelCheck.lines()`` is the short block the commands print (at most three lines);
``LabelCheck.rows()`` the per-query rows (``-v``, ``to_dict``).
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import numpy as np

from udcg.errors import InputError

RELEVANT_AT = 1.0  # a qrels grade at or above this is relevant (trec_eval's relevance level)
LOOSE_MIN = 10  # fewer relevant documents than this are never implausible
LOOSE_FACTOR = 10  # ... at least this many times the median count of the queries with any
LOOSE_CORPUS_SHARE = 0.05  # ... or at least this share of the corpus (when its size is known)
SHORT_MIN = 5  # a query with a short or numeric answer (udcg.text.short_answer) and this many relevant documents
SHORT_FACTOR = 2  # ... and this many times the median count: labels likely loose (module docstring)
SHOWN = 5  # query ids named in a line
ROW_COLUMNS = ("qid", "relevant", "corpus_share", "zero_relevant", "implausible", "short_answer", "short_loose")


@dataclass(frozen=True)
class QueryLabels:
    """One query's labels: its relevant count, their share of the corpus (NaN: size unknown), the
    unjudged top-k pairs of each run (in ``LabelCheck.runs`` order), and the flags."""

    qid: str
    n_relevant: int
    corpus_share: float
    unjudged: tuple[int, ...]
    zero_relevant: bool
    implausible: bool
    short_answer: str = ""  # a bare-number or short-token answer alias ("" when none, or answers not at hand)
    short_loose: bool = False  # with it, relevant count at or above ``LabelCheck.short_at``: labels likely loose

    def to_dict(self, runs: Sequence[str] = ()) -> dict:
        return {"qid": self.qid, "relevant": self.n_relevant,
                "corpus_share": None if math.isnan(self.corpus_share) else self.corpus_share,
                "zero_relevant": self.zero_relevant, "implausible": self.implausible,
                "short_answer": self.short_answer, "short_loose": self.short_loose,
                "unjudged": dict(zip(runs, self.unjudged))}


@dataclass(frozen=True)
class LabelCheck:
    """The label checks of one set of runs on one qrels (module docstring)."""

    k: int | None  # the depth checked (None: the whole ranking)
    runs: tuple[str, ...]
    unjudged: tuple[int, ...]  # per run: top-k pairs without a qrels entry
    ranked: tuple[int, ...]  # per run: top-k pairs
    corpus_size: int | None
    loose_at: float  # the relevant count at or above which a query is implausible
    queries: tuple[QueryLabels, ...]
    source: str = "qrels"
    judge_labelled: tuple[int, ...] = ()  # per run: of its unjudged pairs, those annotate's judge labelled (compare)
    fragility: tuple = ()  # compare's relabelling bounds (``udcg.metrics.fragility.Fragility``), one per UDCG pair
    short_at: float | None = None  # the count at or above which a short-answer query is likely loose (None: no answers)
    median: float = math.nan  # the median relevant count of the queries with any

    @property
    def zero_relevant(self) -> tuple[QueryLabels, ...]:
        return tuple(q for q in self.queries if q.zero_relevant)

    @property
    def implausible(self) -> tuple[QueryLabels, ...]:
        return tuple(q for q in self.queries if q.implausible)

    @property
    def short_loose(self) -> tuple[QueryLabels, ...]:
        """Queries whose labels rest on a short or numeric answer and look loose (module docstring)."""
        return tuple(q for q in self.queries if q.short_loose)

    def share(self, run: str) -> float:
        """The share of ``run``'s top-k pairs that are unjudged (NaN without pairs)."""
        i = self.runs.index(run)
        return self.unjudged[i] / self.ranked[i] if self.ranked[i] else math.nan

    def lines(self) -> list[str]:
        """The block the commands print: the unjudged share of each run, then a line for the
        queries without a relevant document and one for the implausible ones, when there are any."""
        at = "the whole ranking" if self.k is None else f"top {self.k}"
        shares = ", ".join(f"{r} {u}/{n} ({_pct(u / n if n else math.nan)})"
                           for r, u, n in zip(self.runs, self.unjudged, self.ranked))
        out = [f"labels ({self.source}, {at} of each run): unjudged pairs, counted irrelevant (R = -1): {shares}"
               + ("; of them labelled by annotate's judge in the utilities (UDCG reads its label): "
                  + ", ".join(f"{r} {n}" for r, n in zip(self.runs, self.judge_labelled))
                  if any(self.judge_labelled) else "")]
        zero, loose = self.zero_relevant, self.implausible
        n = len(self.queries)
        if zero:
            out.append(f"  queries without a relevant document: {len(zero)} of {n} ({_ids(zero)}): every run fails "
                       "them on nDCG/P/RR whatever it retrieves (judge their pairs, or leave them out)")
        if loose:
            shown = ", ".join(f"{q.qid} {q.n_relevant}" + ("" if math.isnan(q.corpus_share) else
                                                            f" = {_pct(q.corpus_share)} of the corpus")
                              + (f", answer `{q.short_answer}`" if q.short_answer else "")
                              for q in sorted(loose, key=lambda q: -q.n_relevant)[:SHOWN])
            out.append(f"  implausible relevant counts: {len(loose)} of {n} queries ({shown}{_more(loose)}; "
                       f"flagged at >= {self.loose_at:g} relevant): loose qrels, e.g. answer containment of a short "
                       "answer; check them before reading any measure")
        short = [q for q in self.short_loose if not q.implausible]
        if short:
            shown = ", ".join(f"{q.qid} `{q.short_answer}` {q.n_relevant} relevant"
                              for q in sorted(short, key=lambda q: -q.n_relevant)[:SHOWN])
            out.append(f"  containment of a short/numeric answer: labels likely loose: {len(short)} of {n} queries "
                       f"({shown}{_more(short)}; flagged at >= {self.short_at:g} relevant, {SHORT_FACTOR}x the median "
                       f"{self.median:g} and at least {SHORT_MIN}, for an answer that is a bare number or one token of "
                       "<= 4 characters): made by answer containment, such qrels mark every passage where the token "
                       "occurs; check them before reading any measure")
        return out

    def rows(self) -> list[dict]:
        """One JSON-ready dict per query (``ROW_COLUMNS`` and ``unjudged``: {run: count})."""
        return [q.to_dict(self.runs) for q in self.queries]

    def to_dict(self) -> dict:
        return {"k": self.k, "source": self.source, "corpus_size": self.corpus_size, "loose_at": self.loose_at,
                "runs": {r: {"unjudged": u, "pairs": n, **({"judge_labelled": self.judge_labelled[i]}
                                                            if self.judge_labelled else {})}
                         for i, (r, u, n) in enumerate(zip(self.runs, self.unjudged, self.ranked))},
                "zero_relevant": [q.qid for q in self.zero_relevant], "implausible": [q.qid for q in self.implausible],
                "short_loose": [q.qid for q in self.short_loose], "short_at": self.short_at,
                "thresholds": {"relevant_at": RELEVANT_AT, "loose_min": LOOSE_MIN, "loose_factor": LOOSE_FACTOR,
                               "loose_corpus_share": LOOSE_CORPUS_SHARE, "short_min": SHORT_MIN,
                               "short_factor": SHORT_FACTOR},
                "fragility": [f.to_dict() for f in self.fragility], "per_query": self.rows()}


def loose_threshold(n_relevant: np.ndarray, corpus_size: int | None = None) -> float:
    """The relevant count at or above which a query is implausible (module docstring)."""
    with_any = n_relevant[n_relevant > 0]
    at = LOOSE_FACTOR * float(np.median(with_any)) if len(with_any) else math.inf
    if corpus_size:
        at = min(at, LOOSE_CORPUS_SHARE * corpus_size)
    return max(float(LOOSE_MIN), at)


def label_check(qids: Sequence[str], n_relevant: object, counts: Mapping[str, tuple[object, object]], *,
                k: int | None, corpus_size: int | None = None, source: str = "qrels",
                judge_labelled: Mapping[str, object] | None = None,
                short_answers: Mapping[str, str] | None = None) -> LabelCheck:
    """The label checks from per-query counts: ``n_relevant[i]`` relevant documents of query
    ``qids[i]`` in the qrels; ``counts[run] = (unjudged, ranked)``: for each run, its top-k pairs
    per query without a qrels entry / in all (as ``top_k_counts`` gives them); ``corpus_size`` when
    known; ``judge_labelled[run][i]``: of the unjudged ones, those a relevance judge labelled in the
    utilities; ``short_answers``: where the answers are at hand, {qid: its short or numeric answer
    alias} ("" or absent: none)."""
    rel = np.asarray(n_relevant, dtype=np.int64)
    runs = tuple(counts)
    un = {r: np.asarray(counts[r][0], dtype=np.int64) for r in runs}
    top = {r: np.asarray(counts[r][1], dtype=np.int64) for r in runs}
    if any(len(v) != len(qids) for v in (rel, *un.values(), *top.values())):
        raise InputError(f"label check: one count per query ({len(qids)}) for the relevant documents and for each "
                         "run's unjudged and ranked pairs")
    if corpus_size is not None and corpus_size < 1:
        corpus_size = None
    at = loose_threshold(rel, corpus_size)
    share = rel / corpus_size if corpus_size else np.full(len(rel), math.nan)
    zero, loose = rel == 0, rel >= at
    with_any = rel[rel > 0]
    median = float(np.median(with_any)) if len(with_any) else math.nan
    short_at = None if short_answers is None else max(float(SHORT_MIN), SHORT_FACTOR * (median if len(with_any) else 0))
    short = [str((short_answers or {}).get(str(q)) or "") for q in qids]
    per_run = np.stack([un[r] for r in runs], axis=1) if runs else np.zeros((len(rel), 0), np.int64)
    queries = tuple(QueryLabels(str(q), int(rel[i]), float(share[i]), tuple(int(x) for x in per_run[i]),
                                bool(zero[i]), bool(loose[i]), short[i],
                                bool(short[i]) and short_at is not None and bool(rel[i] >= short_at))
                    for i, q in enumerate(qids))
    judge = tuple(int(np.sum(judge_labelled[r])) for r in runs) if judge_labelled else ()
    return LabelCheck(k, runs, tuple(int(un[r].sum()) for r in runs), tuple(int(top[r].sum()) for r in runs),
                      corpus_size, at, queries, source, judge, short_at=short_at, median=median)


def top_k_counts(judged: np.ndarray, depth: np.ndarray, k: int | None) -> tuple[np.ndarray, np.ndarray]:
    """Per query: (unjudged, ranked) pairs among the top ``k`` of a run, from ``judged[i, j]``
    (the document at rank j + 1 has a qrels entry; any value past the ranking) and each query's
    ranking length ``depth``."""
    width = judged.shape[1] if k is None else min(k, judged.shape[1])
    inside = np.arange(width)[None, :] < np.minimum(depth, width)[:, None]
    return (inside & ~judged[:, :width]).sum(1), inside.sum(1)


def _pct(x: float) -> str:
    return "NA" if math.isnan(x) else f"{x:.0%}"


def _ids(queries: Sequence[QueryLabels]) -> str:
    return ", ".join(q.qid for q in queries[:SHOWN]) + _more(queries)


def _more(queries: Sequence[QueryLabels]) -> str:
    return f", ... (all: udcg -v)" if len(queries) > SHOWN else ""
