"""Context records of an experiment (``udcg.records.ContextRecord``), built from what is known of each
pooled passage: grades, erag and answer_ll only when known for every passage of the context (else
the metric that needs it is NA). The contexts file's line is ``udcg.io.contexts``'s to read and
write (``to_json(from_json(line)) == line`` for every line a run writes)."""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from dataclasses import dataclass

from udcg.metrics.udcg import utilities_from, utility
from udcg.records import ContextRecord, Outcome


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


def context_record(qid: str, cid: str, study: str, split: str, docids: Sequence[str], scores: dict[str, PassageScore],
                   n_relevant: int, corpus_grades: list[int] | None) -> ContextRecord:
    """The record of one context before it is answered: per-position fields from ``scores``; grades,
    erag and answer_ll only when every passage has one."""
    ps = [scores[docid] for docid in docids]
    every = lambda name: all(getattr(p, name) is not None for p in ps)  # noqa: E731
    graded = every("grade") and corpus_grades is not None
    return ContextRecord(
        qid=qid, cid=cid, study=study, split=split, docids=tuple(docids), relevant=tuple(p.relevant for p in ps),
        p_abs=tuple(p.p_abs for p in ps),
        utilities=tuple(utilities_from([p.relevant for p in ps], [p.p_abs for p in ps]).tolist()),
        contains=tuple(p.contains for p in ps), n_relevant=n_relevant,
        grades=tuple(p.grade for p in ps) if graded else None,
        corpus_grades=tuple(corpus_grades) if graded else None,
        erag=tuple(p.erag for p in ps) if every("erag") else None,
        answer_ll=tuple(p.answer_ll for p in ps) if every("answer_ll") else None)


def answered(record: ContextRecord, answer: str, label: str | None, note: str = "") -> ContextRecord:
    """The record with the reader's answer and its graded outcome (``label`` None: the judge's reply
    could not be parsed; ``note`` says why a label was changed)."""
    return dataclasses.replace(record, answer=answer,
                               outcome=Outcome(record.qid, record.cid, answer, label, note=note or ""))
