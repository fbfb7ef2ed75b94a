"""The judges of ``udcg validate``: pool relevance, 5-point utility grades, and answer outcomes, by
rules or by an LLM judge through the judge runner (``udcg.grade.runner``, cached per run folder in
``cache/judge-*.jsonl``, in chunks of ``reader.chunk_size`` like every model step of the run)."""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from pathlib import Path

from udcg.experiment.config import Config
from udcg.flows.reading import Progress
from udcg.records import Outcome, Question
from udcg.resumable import key, split_key


def judge_relevance(pooled: list[Question], judge_backend, cfg: Config, run_dir: Path,
                    progress: Progress) -> tuple[list[Question], int]:
    """Relabel every pooled passage with the LLM relevance judge (paper Fig. 5). An unparseable
    reply keeps the rule label; their number is returned (and reported)."""
    from udcg.grade.judges import LLMJudge
    from udcg.grade.runner import passage_items, judge_items

    judge = LLMJudge(judge_backend, "relevance", prompt_version=cfg.grading.prompt_version,
                     max_new_tokens=cfg.grading.max_new_tokens)
    items = passage_items(pooled)
    with progress(len(items), f"judge relevance ({judge_backend.name})", "passage") as bar:
        records = judge_items(judge, items, run_dir / "cache" / "judge-relevance.jsonl", cfg.reader.chunk_size, bar.update)
    labels = {(r["qid"], r["pid"]): r["label"] for r in records}
    kept = sum(label is None for label in labels.values())
    out = [dataclasses.replace(q, passages=tuple(
        p if labels[q.qid, p.docid] is None else dataclasses.replace(p, relevant=labels[q.qid, p.docid] == "relevant")
        for p in q.passages)) for q in pooled]
    return out, kept


def grade_passages(pooled: list[Question], judge_backend, cfg: Config, run_dir: Path,
                   progress: Progress) -> tuple[dict[tuple[str, str], int | None], str]:
    """5-point utility grades for RA-nWG. ``rules``: relevant -> 5, not relevant -> 2 (answer-bearing
    passages are "decisive"; the rest "weak relevance", neither harmful nor useful); otherwise the
    LLM grade judge (seed 000's rubric), None where its reply could not be parsed."""
    if judge_backend is None:
        return {(q.qid, p.docid): 5 if p.relevant else 2 for q in pooled for p in q.passages}, "rules: relevant -> 5, else 2"
    from udcg.grade.judges import LLMJudge
    from udcg.grade.runner import passage_items, judge_items

    judge = LLMJudge(judge_backend, "grade", prompt_version=cfg.grading.prompt_version,
                     max_new_tokens=cfg.grading.max_new_tokens)
    items = passage_items(pooled)
    with progress(len(items), f"judge grade ({judge_backend.name})", "passage") as bar:
        records = judge_items(judge, items, run_dir / "cache" / "judge-grade.jsonl", cfg.reader.chunk_size, bar.update)
    return {(r["qid"], r["pid"]): r["label"] for r in records}, f"LLM grade judge {judge_backend.name} ({judge.prompt_id})"


def grade_answers(items: list, judge_backend, cfg: Config, run_dir: Path,
                  progress: Progress) -> tuple[dict[str, Outcome], str]:
    """The ``Outcome`` of every answer item, by context key (qid<TAB>docid…): rules by default
    (abstention detection, then the answer match), or the LLM answer judge (paper Fig. 6); label
    None where the judge's reply could not be parsed (``error`` says why, ``note`` any relabelling)."""
    from udcg.grade.judges import LLMJudge, RuleJudge
    from udcg.grade.runner import item_key, judge_items

    g = cfg.grading
    if judge_backend is None:
        judge = RuleJudge("answer", match=g.match, f1_threshold=g.f1_threshold,
                          require_relevant_context=g.require_relevant_context)
        records = [j.to_record(judge.task) for j in judge.judge(items)]
    else:
        judge = LLMJudge(judge_backend, "answer", prompt_version=g.prompt_version, max_new_tokens=g.max_new_tokens,
                         require_relevant_context=g.require_relevant_context)
        with progress(len(items), f"judge answers ({judge_backend.name})", "answer") as bar:
            records = judge_items(judge, items, run_dir / "cache" / "judge-answer.jsonl", cfg.reader.chunk_size, bar.update)
    out = {item_key(it): Outcome(qid=it.qid, cid=it.cid, answer=it.answer, label=r["label"],
                                 error=r.get("error", ""), note=r.get("note", ""))
           for it, r in zip(items, records, strict=True)}
    return out, judge.name + (" (correct needs a relevant passage in the context)" if g.require_relevant_context else "")


def answer_items(pooled_by_qid: dict[str, Question], keys: Sequence[str], answers: dict[str, str]) -> list:
    """AnswerItems for context keys (cid = the docids joined by tabs, so key = qid<TAB>cid)."""
    from udcg.grade.judges import AnswerItem

    items = []
    for k in keys:
        qid, *docids = split_key(k)
        q = pooled_by_qid[qid]
        relevant = {p.docid for p in q.passages if p.relevant}
        items.append(AnswerItem(qid=qid, cid=key(*docids), question=q.text, answers=q.answers, answer=answers[k],
                                context_has_relevant=any(docid in relevant for docid in docids)))
    return items
