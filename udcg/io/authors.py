"""The authors' public JSON format (``GiovanniTRA/UDCG``): items with a question, answers and passages."""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

from udcg.errors import InputError
from udcg.io.files import MAX_PASSAGE_CHARS, atomic_write_json, atomic_write_jsonl, checked_probability, read_records, require
from udcg.records import Passage, Question


def question_from_authors(item: dict, where: str) -> Question:
    """One item of the authors' format: {example_id, question, passages:[{doc_id, text, is_relevant,
    models_info:{<model>:{no_res_prob}}}], answers?}."""
    qid = item.get("example_id", item.get("id"))
    if qid is None:
        raise InputError(f"{where}: missing field 'example_id' (every item needs an id)")
    qid = str(qid)
    text = require(item, "question", str, where, "every item needs the question text")
    raw_passages = require(item, "passages", list, where, "a list of {doc_id, text, is_relevant}")
    if not raw_passages:
        raise InputError(f"{where}: item {qid!r} has an empty 'passages' list (give at least one passage)")
    answers = item.get("answers", [])
    if isinstance(answers, str):
        answers = [answers]
    if not isinstance(answers, list) or not all(isinstance(a, str) for a in answers):
        raise InputError(f"{where}: item {qid!r}: 'answers' must be a list of strings")
    seen: set[str] = set()
    passages = []
    for j, p in enumerate(raw_passages):
        pw = f"{where}: passage {j}"
        if not isinstance(p, dict):
            raise InputError(f"{pw}: expected an object, got {type(p).__name__}")
        docid = str(p.get("doc_id", p.get("id", f"{qid}#{j}")))
        if docid in seen:
            raise InputError(f"{pw}: duplicate doc_id {docid!r} in item {qid!r} (ids must be unique within an item)")
        seen.add(docid)
        ptext = require(p, "text", str, pw, "every passage needs text")
        if len(ptext) > MAX_PASSAGE_CHARS:
            raise InputError(f"{pw}: field 'text' of passage {docid!r} holds {len(ptext):,} characters, over the "
                             f"{MAX_PASSAGE_CHARS:,} limit (split the document into passages of a few hundred words)")
        rel = p.get("is_relevant")
        if rel is not None and not isinstance(rel, bool):
            raise InputError(f"{pw}: field 'is_relevant' must be true/false, got {rel!r}")
        p_abs: dict[str, float] = {}
        info = p.get("models_info", {})
        if not isinstance(info, dict):
            raise InputError(f"{pw}: field 'models_info' must be an object {{model: {{no_res_prob}}}}")
        for model, entry in info.items():
            if not isinstance(entry, dict) or "no_res_prob" not in entry:
                raise InputError(f"{pw}: models_info[{model!r}] needs a 'no_res_prob' number")
            if entry["no_res_prob"] is not None:
                p_abs[model] = checked_probability(entry["no_res_prob"], pw, f"models_info[{model!r}].no_res_prob")
        grade = p.get("grade")
        if grade is not None and (isinstance(grade, bool) or grade not in (1, 2, 3, 4, 5)):
            raise InputError(f"{pw}: field 'grade' = {grade!r} is not a utility grade (use an integer 1..5)")
        score = p.get("score")
        if score is not None and (isinstance(score, bool) or not isinstance(score, (int, float)) or not math.isfinite(score)):
            raise InputError(f"{pw}: field 'score' = {score!r} must be a finite number (the retriever's score) or absent")
        passages.append(Passage(docid=docid, text=ptext, title=str(p.get("title", "")), relevant=rel,
                                grade=grade, score=None if score is None else float(score), p_abs=p_abs))
    return Question(qid=qid, text=text, answers=tuple(answers), passages=tuple(passages))


def read_authors(path: str | Path) -> tuple[list[dict], list[Question]]:
    """Read the authors' JSON (a list) or JSONL. Returns the raw items (to write back with added
    fields, keeping everything the user had) and the checked questions."""
    records = read_records(path)
    questions = [question_from_authors(obj, where) for where, obj in records]
    seen: dict[str, str] = {}
    for (where, _), q in zip(records, questions):
        if q.qid in seen:
            raise InputError(f"{where}: duplicate example_id {q.qid!r} (first at {seen[q.qid]}; ids must be unique)")
        seen[q.qid] = where
    return [obj for _, obj in records], questions


def question_to_authors(q: Question) -> dict:
    item: dict[str, Any] = {"example_id": q.qid, "question": q.text}
    if q.answers:
        item["answers"] = list(q.answers)
    passages = []
    for p in q.passages:
        d: dict[str, Any] = {"doc_id": p.docid, "text": p.text}
        if p.title:
            d["title"] = p.title
        if p.relevant is not None:
            d["is_relevant"] = p.relevant
        if p.grade is not None:
            d["grade"] = p.grade
        if p.score is not None:
            d["score"] = p.score
        if p.p_abs:
            d["models_info"] = {m: {"no_res_prob": v} for m, v in p.p_abs.items()}
        passages.append(d)
    item["passages"] = passages
    return item


def write_authors(path: str | Path, items: list[dict]) -> None:
    """Write a list of items as JSON (``.json``) or JSONL (any other suffix), atomically."""
    path = Path(path)
    if path.suffix == ".json":
        atomic_write_json(path, items)
    else:
        atomic_write_jsonl(path, items)
