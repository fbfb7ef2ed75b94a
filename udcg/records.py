"""Records that cross stage boundaries: frozen, checked once, one name per concept.

- ``Passage``: one candidate passage of a question's pool.
- ``Question``: a question, its reference answers and its pool of passages (rank order).
- ``Estimate``: the abstention probability p_abs of one (question, passage), with its interval.
- ``Annotation``: that estimate for one model, estimator and prompt.
- ``Context``: the passages shown to the reader for one question, in prompt order.
- ``Outcome``: the graded answer the reader gave for one context.
- ``ContextRecord``: one context of an experiment with its per-position fields, outcome and metrics.
- ``query_key``: the canonical order of query ids, the one every per-query vector follows, so that
  no result depends on the order of the input's lines.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass, field
from typing import Literal

_DIGITS = re.compile(r"([0-9]+)")


def query_key(qid: object) -> tuple:
    """The sort key of the canonical query order: the id's runs of digits compared as numbers, the
    rest as text (``nq2`` before ``nq10``, as numbered ids are usually listed), then the id itself
    (``q01`` before ``q1``): a total order on any ids, whatever the order they were read in."""
    text = str(qid)
    parts = _DIGITS.split(text)  # text at even positions, digits at odd ones: like compares with like
    return tuple(int(p) if i % 2 else p for i, p in enumerate(parts)), text


OutcomeLabel = Literal["correct", "abstained", "wrong"]
OUTCOME_LABELS: tuple[str, ...] = ("correct", "abstained", "wrong")
# correct > abstained > wrong (paper §6.2): the value each label ranks by.
OUTCOME_SCORE: dict[str, float] = {"correct": 2.0, "abstained": 1.0, "wrong": 0.0}


@dataclass(frozen=True, slots=True)
class Passage:
    docid: str
    text: str
    title: str = ""
    relevant: bool | None = None  # None = not judged yet
    grade: int | None = None  # 1..5 utility grade (seed 000), None = not graded
    score: float | None = None  # retriever score, if any
    # model name -> abstention probability, the authors' models_info[<model>].no_res_prob
    p_abs: dict[str, float] = field(default_factory=dict, compare=False, hash=False)


@dataclass(frozen=True, slots=True)
class Question:
    qid: str
    text: str
    answers: tuple[str, ...] = ()
    passages: tuple[Passage, ...] = ()

    def passage(self, docid: str) -> Passage:
        for p in self.passages:
            if p.docid == docid:
                return p
        raise KeyError(docid)


@dataclass(frozen=True, slots=True)
class Estimate:
    """The abstention probability p_abs of one (question, passage), as an estimator gave it: the one
    declaration of its fields, on which ``Annotation`` and the utility file's
    ``udcg.annotate.utilities.UtilityRecord`` are built. ``ci_low``/``ci_high``: its interval (a
    sampled share's, or [0, bound] when censored); ``n_samples``: the answers sampled."""

    p_abs: float
    ci_low: float | None = None
    ci_high: float | None = None
    n_samples: int | None = None
    note: str = ""
    estimator_used: str = ""  # the estimator that gave this p_abs (e.g. api-logprobs-censored; "": the one asked for)
    censored: bool = False  # True: the abstention token was outside a top-k list (p_abs in [0, ci_high])


@dataclass(frozen=True, slots=True, kw_only=True)
class Annotation(Estimate):
    """The p_abs ``Estimate`` of one (question, passage) for one model, estimator and prompt."""

    qid: str
    docid: str
    model: str
    estimator: str  # first-token | sequence | sampling | api-logprobs
    prompt_version: str

    def __post_init__(self) -> None:
        if not (math.isfinite(self.p_abs) and 0.0 <= self.p_abs <= 1.0):
            raise ValueError(f"p_abs must be a probability in [0, 1], got {self.p_abs!r}")


@dataclass(frozen=True, slots=True)
class Context:
    qid: str
    cid: str
    docids: tuple[str, ...]


@dataclass(frozen=True, slots=True)
class Outcome:
    qid: str
    cid: str
    answer: str
    label: OutcomeLabel | None  # None = the judge's reply could not be parsed
    error: str = ""  # why the reply could not be parsed
    note: str = ""  # why the judge's label was changed (e.g. correct -> wrong: no relevant passage)



@dataclass(frozen=True, slots=True)
class ContextRecord:
    """One context with what is known about it, one line of a contexts file (``udcg.io.contexts``
    reads and writes it, and nothing else does): per position, in prompt order, ``docids`` (the
    line's "pids"; ``pids`` is an alias), ``relevant``,
    ``p_abs`` and ``utilities`` (Eq. 2), answer containment ``contains``, and where known the 1..5
    ``grades``, single-passage ``erag`` scores and ``answer_ll``; ``n_relevant``,
    ``corpus_grades`` and ``pool_grades`` count the question's labelled pool and retrieval pool.
    ``study``/``split`` place it in an experiment (None outside one). ``answer`` once answered,
    ``outcome`` once graded (its ``label`` None: the judge's reply could not be parsed); ``metrics``
    once scored, {name: value or None (NA)}. ``extra``: the line's other fields (the question, the
    reader's name, the judge's reply …), kept as they were and written back after the known ones."""

    qid: str
    cid: str
    relevant: tuple[bool, ...]
    docids: tuple[str, ...] = ()
    study: str | None = None
    split: str | None = None
    p_abs: tuple[float, ...] | None = None  # None = not known (then the metrics that need it are NA)
    utilities: tuple[float, ...] | None = None
    contains: tuple[bool, ...] | None = None
    n_relevant: int | None = None
    grades: tuple[int, ...] | None = None
    corpus_grades: tuple[int, ...] | None = None
    pool_grades: tuple[int, ...] | None = None
    erag: tuple[float, ...] | None = None
    answer_ll: tuple[float, ...] | None = None
    answer: str | None = None
    outcome: Outcome | None = None
    metrics: dict[str, float | None] | None = field(default=None, hash=False)
    extra: dict[str, object] = field(default_factory=dict, compare=False, hash=False)

    @property
    def k(self) -> int:
        return len(self.relevant)

    @property
    def pids(self) -> tuple[str, ...]:
        """An alias of ``docids`` (read-only), the name of the contexts file's key ("pids")."""
        return self.docids

    @property
    def label(self) -> OutcomeLabel | None:
        """The graded outcome's label; None when not graded or not parseable."""
        return None if self.outcome is None else self.outcome.label
