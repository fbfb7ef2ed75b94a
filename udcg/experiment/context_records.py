"""Context records of an experiment (``udcg.records.ContextRecord``): built from what is known of each
pooled passage, and read from / written to a line of the contexts file.

The line holds, in this order: qid, cid, study, split, pids, relevant, p_abs, utilities, contains,
n_relevant, then grades and corpus_grades, erag, answer_ll (each only when known for every passage
of the context: else the metric that needs it is NA), then answer, outcome, outcome_note (when not
empty) and metrics. ``to_json(from_json(line)) == line`` for every line a run writes.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from dataclasses import dataclass

from udcg.errors import InputError
from udcg.metrics.udcg import utilities_from, utility
from udcg.records import ContextRecord

_TUPLES = ("pids", "relevant", "p_abs", "utilities", "contains", "grades", "corpus_grades", "erag", "answer_ll")
_ORDER = ("qid", "cid", "study", "split", "pids", "relevant", "p_abs", "utilities", "contains", "n_relevant",
          "grades", "corpus_grades", "erag", "answer_ll", "answer", "outcome", "outcome_note", "metrics")


@dataclass(frozen=True, slots=True)
class PassageScore:
    """What the pipeline knows about one pooled passage for one question."""

    relevant: bool
    p_abs: float
    contains: bool
    grade: int | None = None  # 1..5, None = the grade judge's reply could not be parsed
    erag: float | None = None  # score of the single-passage answer against the references
    answer_ll: float | None = None  # log P(reference answer | question, passage)

    @property
    def utility(self) -> float:
        return utility(self.relevant, self.p_abs)


def context_record(qid: str, cid: str, study: str, split: str, pids: Sequence[str], scores: dict[str, PassageScore],
                   n_relevant: int, corpus_grades: list[int] | None) -> ContextRecord:
    """The record of one context before it is answered: per-position fields from ``scores``; grades,
    erag and answer_ll only when every passage has one."""
    ps = [scores[pid] for pid in pids]
    every = lambda name: all(getattr(p, name) is not None for p in ps)  # noqa: E731
    graded = every("grade") and corpus_grades is not None
    return ContextRecord(
        qid=qid, cid=cid, study=study, split=split, pids=tuple(pids), relevant=tuple(p.relevant for p in ps),
        p_abs=tuple(p.p_abs for p in ps),
        utilities=tuple(utilities_from([p.relevant for p in ps], [p.p_abs for p in ps]).tolist()),
        contains=tuple(p.contains for p in ps), n_relevant=n_relevant,
        grades=tuple(p.grade for p in ps) if graded else None,
        corpus_grades=tuple(corpus_grades) if graded else None,
        erag=tuple(p.erag for p in ps) if every("erag") else None,
        answer_ll=tuple(p.answer_ll for p in ps) if every("answer_ll") else None)


def answered(record: ContextRecord, answer: str, outcome: str | None, note: str = "") -> ContextRecord:
    """The record with the reader's answer and its graded outcome (None: the judge's reply could not
    be parsed; ``note`` says why)."""
    return dataclasses.replace(record, answer=answer, outcome=outcome, outcome_note=note or "")


def to_json(record: ContextRecord) -> dict:
    """The contexts-file line of a record (module docstring): fields not known are left out."""
    out: dict = {}
    for name in _ORDER:
        value = getattr(record, name)
        if name == "outcome":
            if record.answer is None and value is None:
                continue
        elif value is None or (name == "outcome_note" and not value):
            continue
        out[name] = list(value) if name in _TUPLES else dict(value) if name == "metrics" else value
    return out


def from_json(obj: dict, where: str = "context") -> ContextRecord:
    """A record from a contexts-file line (the inverse of ``to_json``); fields absent take their
    defaults. A line without qid, cid or relevant is an ``InputError`` naming ``where``."""
    if not isinstance(obj, dict):
        raise InputError(f"{where}: expected a JSON object (one context per line), got {type(obj).__name__}")
    missing = [n for n in ("qid", "cid", "relevant") if obj.get(n) is None]
    if missing:
        raise InputError(f"{where}: missing field {missing[0]!r} (every context names its question, its id and "
                         "the relevance of its passages)")
    unknown = sorted(set(obj) - set(_ORDER))
    if unknown:
        raise InputError(f"{where}: unknown field {unknown[0]!r} (a context record holds {', '.join(_ORDER)})")
    fields = {n: (tuple(v) if n in _TUPLES and v is not None else dict(v) if n == "metrics" and v is not None else v)
              for n, v in obj.items()}
    if fields.get("outcome_note") is None:
        fields.pop("outcome_note", None)
    return ContextRecord(**fields)
