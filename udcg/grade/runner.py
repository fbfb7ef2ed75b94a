"""Resumable judging: inputs, the cache-backed run loop, the summary, and writing labels back.

Judging runs through the one resumable runner (``udcg.resumable``): chunks of ``chunk_size`` items cut
from the whole input, each finished chunk appended to the cache keyed by (qid, docid) or (qid, cid)
in one write; a killed run restarts without redoing them, and the final output is written
atomically from the cache, in input order, identical to an uninterrupted run.
"""

from __future__ import annotations

import copy
from collections import Counter
from collections.abc import Callable, Sequence
from pathlib import Path

from udcg import resumable
from udcg.errors import InputError
from udcg.grade.judges import AnswerItem, Item, Judge, PassageItem, Task
from udcg.io.cache import AppendCache
from udcg.io.files import read_records, require
from udcg.records import Question

# ---------------------------------------------------------------- inputs


def passage_items(questions: Sequence[Question]) -> list[PassageItem]:
    """One item per (question, passage) of the authors' format, in file order."""
    return [PassageItem(qid=q.qid, docid=p.docid, question=q.text, answers=q.answers, text=p.text, title=p.title)
            for q in questions for p in q.passages]


def read_answer_items(path: str | Path) -> list[AnswerItem]:
    """A JSONL (or JSON list) of {qid, cid, question, answers, answer, context_has_relevant?}."""
    items, seen = [], {}
    for where, obj in read_records(path):
        qid = str(require(obj, "qid", (str, int), where, "the answer task reads records {qid, cid, question, answers, answer}"))
        cid = str(require(obj, "cid", (str, int), where, "every answer needs its context id"))
        question = require(obj, "question", str, where, "give the question text")
        answers = require(obj, "answers", (list, str), where, "give the reference answers as a list of strings")
        answers = [answers] if isinstance(answers, str) else answers
        if not answers or not all(isinstance(a, str) for a in answers):
            raise InputError(f"{where}: field 'answers' must be a non-empty list of strings")
        answer = require(obj, "answer", str, where, "give the predicted answer (an empty string if none)")
        has_rel = obj.get("context_has_relevant")
        if has_rel is not None and not isinstance(has_rel, bool):
            raise InputError(f"{where}: field 'context_has_relevant' must be true/false, got {has_rel!r}")
        if (qid, cid) in seen:
            raise InputError(f"{where}: duplicate (qid, cid) = ({qid!r}, {cid!r}), first at {seen[qid, cid]} (make cid unique per question)")
        seen[qid, cid] = where
        items.append(AnswerItem(qid=qid, cid=cid, question=question, answers=tuple(answers), answer=answer,
                                 context_has_relevant=has_rel))
    return items


def check_answers(items: Sequence[Item], task: Task, where: str) -> None:
    """Relevance and grades are judged against reference answers: every question needs some."""
    if task.name == "answer":
        return
    missing = sorted({it.qid for it in items if not any(a.strip() for a in it.answers)})
    if missing:
        raise InputError(f"{where}: {len(missing)} question(s) without 'answers' (first: {missing[0]!r}); "
                         "the judges compare passages with the reference answers, add an 'answers' list")


# ---------------------------------------------------------------- the run


def item_key(item: Item) -> str:
    if item.ID_FIELD == "cid":  # a context id is udcg's own key of its passage ids (or a run name)
        return resumable.key(item.qid, *resumable.split_key(item.item_id))
    return resumable.key(item.qid, item.item_id)


def _check_labels(cache: AppendCache, judge: Judge) -> None:
    """Every cached label is one of the task's, or null (unparseable)."""
    allowed = list(judge.task.choices.labels.values())
    for key, rec in cache.done.items():
        label = rec.get("label", "(missing)")
        if label is not None and (isinstance(label, bool) or label not in allowed):
            raise InputError(f"{cache.path}: item {resumable.shown_key(key)!r}: cached label {label!r} is not one of the "
                             f"{judge.task.name} task's ({', '.join(map(str, allowed))}) or null (the cache was edited: "
                             "delete that line to judge the item again)")


def judge_items(judge: Judge, items: Sequence[Item], cache_path: str | Path, chunk_size: int = 8,
                progress: Callable[[int], None] | None = None, redo_unparseable: bool = False) -> list[dict]:
    """Judge every item not yet in the cache, ``chunk_size`` at a time, and return all records in
    input order. ``progress(n)`` is called with the number of items finished (cached ones first).
    ``redo_unparseable`` judges again the cached items whose reply could not be parsed."""
    if not isinstance(judge, Judge):
        raise TypeError(f"{type(judge).__name__} is not a udcg.grade.judges.Judge (subclass it and declare what it is)")
    keys = [item_key(it) for it in items]
    if len(set(keys)) != len(keys):
        dup = next(k for k, n in Counter(keys).items() if n > 1)
        raise InputError(f"duplicate item {resumable.shown_key(dup)!r} (ids must be unique per question)")
    expect = {"task": judge.task.name, "judge": judge.name,
              "prompt_version": judge.prompt_id}

    def compute(chunk: list[Item]) -> list[dict]:
        return [j.to_record(judge.task) for j in judge.judge(chunk)]

    with AppendCache(cache_path) as cache:
        _check_labels(cache, judge)
        resumable.check_provenance(cache, expect)
        resumable.fill(cache, list(zip(keys, items)), compute, chunk_size, progress=progress,
                       parallel=resumable.parallelism(judge.backend),
                       fingerprint=lambda item: resumable.fingerprint(judge.shown(item)),
                       redo=(lambda rec: rec["label"] is None) if redo_unparseable else None)
        return [{k: v for k, v in cache.get(key).items() if k not in ("key", "input")} for key in keys]


def count_labels(records: Sequence[dict]) -> dict:
    """Counts per label, unparseable replies, repaired and retried ones."""
    labels = Counter(str(r["label"]) for r in records if r["label"] is not None)
    return {
        "n": len(records),
        "labels": dict(sorted(labels.items())),
        "unparseable": sum(r["label"] is None for r in records),
        "repaired": sum(bool(r.get("repair")) for r in records),
        "retried": sum(r.get("attempts", 1) > 1 for r in records),
        "notes": sum(bool(r.get("note")) for r in records),
    }


def format_summary(summary: dict) -> str:
    parts = [f"{k}={v}" for k, v in summary["labels"].items()]
    parts.append(f"unparseable={summary['unparseable']}")
    extra = [f"{k}={summary[k]}" for k in ("repaired", "retried", "notes") if summary[k]]
    return f"{summary['n']} judged: " + ", ".join(parts + extra)


# ---------------------------------------------------------------- writing labels back


def write_back(raw_items: Sequence[dict], records: Sequence[dict], task: Task) -> tuple[list[dict], int]:
    """Copies of the authors' items with each judged passage's ``is_relevant`` (relevance) or
    ``grade`` (grade task) set. Unparseable judgements leave the passage as it was. Returns the
    items and how many passages were left unchanged for that reason."""
    if task.name == "answer":
        raise InputError("answer judgements have no authors' format to write back to (use the JSONL output)")
    by_key = {(r["qid"], r["pid"]): r["label"] for r in records}
    out, skipped = [], 0
    for item in raw_items:
        item = copy.deepcopy(item)
        qid = str(item.get("example_id", item.get("id")))
        for j, p in enumerate(item["passages"]):
            label = by_key.get((qid, str(p.get("doc_id", p.get("id", f"{qid}#{j}")))))
            if label is None:
                skipped += 1
            elif task.name == "relevance":
                p["is_relevant"] = label == "relevant"
            else:
                p["grade"] = int(label)
        out.append(item)
    return out, skipped
