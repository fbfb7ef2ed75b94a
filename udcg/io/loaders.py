"""Loaders for the shared QA data sets (PopQA, NQ-open, SQuAD, NoMIRACL, DPR files), one per file shape, and
relevance by answer containment. ``udcg.io.sources`` is the public entry point (it re-exports these
and finds the right loader for a name, folder or file); the table of what each loader sets as
``Passage.relevant`` is in its docstring. Malformed input raises ``InputError`` naming file:line
(or record), the field and the fix."""

from __future__ import annotations

import dataclasses
import itertools
import json
import logging
import math
import re
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Any

from udcg.errors import InputError
from udcg.io.files import iter_jsonl, read_json, read_text, require
from udcg.text import normalize_answer, normalized_aliases
from udcg.records import Passage, Question

log = logging.getLogger(__name__)


# ---------------------------------------------------------------- shared helpers


def _answers(obj: dict, where: str) -> tuple[str, ...]:
    answers = require(obj, "answers", list, where, "a list of reference answer strings")
    if not all(isinstance(a, str) for a in answers):
        raise InputError(f"{where}: field 'answers' must hold only strings (write each alias as a string)")
    if not answers:
        raise InputError(f"{where}: field 'answers' is empty (give at least one reference answer)")
    return tuple(answers)


def _score(value: Any, where: str) -> float | None:
    if value is None:
        return None
    try:
        score = float(value)
    except (TypeError, ValueError):
        raise InputError(f"{where}: field 'score' = {value!r} is not a number (write a retriever score)") from None
    if not math.isfinite(score):
        raise InputError(f"{where}: field 'score' = {value!r} is not finite (write a finite retriever score)")
    return score


def _iter_jsonl_any(path: Path) -> Iterator[tuple[int, dict]]:
    """``io.iter_jsonl`` that also reads gzip-compressed files (``.gz``)."""
    if path.suffix != ".gz":
        yield from iter_jsonl(path)
        return
    lines = read_text(path).splitlines()  # decompressed with a size limit (a gzip bomb stops there)
    for line_no, line in enumerate(lines, start=1):
        if not line.strip():
            continue
        try:
            obj = json.loads(line)
        except json.JSONDecodeError as e:
            raise InputError(f"{path}:{line_no}: invalid JSON at column {e.colno}: {e.msg} (fix or remove this line)") from None
        if not isinstance(obj, dict):
            raise InputError(f"{path}:{line_no}: expected a JSON object, got {type(obj).__name__} (one object per line)")
        yield line_no, obj


def _json_list(path: Path, what: str) -> list:
    data = read_json(path)
    if not isinstance(data, list) or not data:
        raise InputError(f"{path}: expected a non-empty JSON list of {what}, got {type(data).__name__}")
    return data


def _json_records(path: Path, what: str, limit: int | None) -> Iterator[tuple[str, dict]]:
    """(where, object) for the first ``limit`` objects of a JSON list file."""
    for i, obj in enumerate(itertools.islice(_json_list(path, what), limit)):
        where = f"{path}: record {i}"
        if not isinstance(obj, dict):
            raise InputError(f"{where}: expected an object, got {type(obj).__name__}")
        yield where, obj


def unique_qids(questions: list[Question], path: Path) -> list[Question]:
    seen: set[str] = set()
    for q in questions:
        if q.qid in seen:
            raise InputError(f"{path}: duplicate question id {q.qid!r} (question ids must be unique)")
        seen.add(q.qid)
    return questions


# ---------------------------------------------------------------- relevance by containment


class ContainmentChecker:
    """``contains_answer`` with each distinct passage text normalised once (pools and labelling
    re-read the same passages for many questions). ``contains(text, aliases)`` takes
    ``aliases = metrics.text.normalized_aliases(answers)``, computed once per question."""

    def __init__(self) -> None:
        self._haystacks: dict[str, str] = {}

    def contains(self, text: str, aliases: tuple[str, ...]) -> bool:
        haystack = self._haystacks.get(text)
        if haystack is None:
            haystack = self._haystacks[text] = f" {normalize_answer(text)} "
        return any(f" {alias} " in haystack for alias in aliases)


def label_by_containment(questions: Iterable[Question], only_missing: bool = True) -> list[Question]:
    """New questions whose passages are labelled relevant iff their text contains an answer alias.

    ``only_missing=True`` fills only ``relevant is None`` and keeps existing labels; ``False``
    relabels every passage. Questions without answers cannot be labelled: their unlabelled
    passages stay ``None``. The inputs are never modified.
    """
    out = []
    checker = ContainmentChecker()
    for q in questions:
        if not q.answers:
            out.append(q)
            continue
        aliases = normalized_aliases(q.answers)
        passages = tuple(
            p if (only_missing and p.relevant is not None)
            else dataclasses.replace(p, relevant=checker.contains(p.text, aliases))
            for p in q.passages
        )
        out.append(dataclasses.replace(q, passages=passages))
    return out


# ---------------------------------------------------------------- PopQA (Self-RAG retrieval)


def load_popqa(path: str | Path, *, label: bool = False, contriever_only: bool = False,
               keep_empty: bool = False, limit: int | None = None) -> list[Question]:
    """PopQA long-tail with its 25 passages per question (``popqa_longtail_w_gs*.jsonl``).

    The file mixes two sources: Contriever hits (with ``id`` and ``score``) and passages without
    ``id``/``score`` that Self-RAG's ``w_gs`` file adds at ranks 6-10 (a whole Wikipedia page
    start, often the subject's own page; some have empty text). Those get the docid
    ``popqa-gs:{qid}:{rank}`` and ``score=None``. ``contriever_only`` drops them; passages with
    empty text are dropped unless ``keep_empty``. ``label`` fills relevance by answer containment.
    """
    path = Path(path)
    questions = []
    for line_no, obj in itertools.islice(_iter_jsonl_any(path), limit):
        where = f"{path}:{line_no}"
        qid = obj.get("id")
        if qid is None or isinstance(qid, bool):
            raise InputError(f"{where}: missing field 'id' (every PopQA line needs its question id)")
        qid = str(qid)
        text = require(obj, "question", str, where, "the question text")
        ctxs = require(obj, "ctxs", list, where, "a list of {id, title, text, score} passages")
        passages = []
        for rank, c in enumerate(ctxs):
            cw = f"{where}: ctxs[{rank}]"
            if not isinstance(c, dict):
                raise InputError(f"{cw}: expected an object, got {type(c).__name__}")
            ptext = require(c, "text", str, cw, "every passage needs text")
            if "id" not in c and contriever_only:
                continue
            if not ptext.strip() and not keep_empty:
                continue
            docid = str(c["id"]) if "id" in c else f"popqa-gs:{qid}:{rank}"
            passages.append(Passage(docid=docid, text=ptext, title=str(c.get("title", "")),
                                    score=_score(c.get("score"), cw)))
        if not passages:
            raise InputError(f"{where}: question {qid!r} has no usable passage in 'ctxs' (give at least one)")
        _check_unique_docids(passages, where, qid)
        questions.append(Question(qid=qid, text=text, answers=_answers(obj, where), passages=tuple(passages)))
    questions = unique_qids(questions, path)
    return label_by_containment(questions) if label else questions


def _check_unique_docids(passages: list[Passage], where: str, qid: str) -> None:
    seen: set[str] = set()
    for p in passages:
        if p.docid in seen:
            raise InputError(f"{where}: question {qid!r} lists passage id {p.docid!r} twice (ids must be unique per question)")
        seen.add(p.docid)


# ---------------------------------------------------------------- Natural Questions (open)


def load_nq_open_gold(path: str | Path, limit: int | None = None) -> list[Question]:
    """NQ-open with its gold passage (lost-in-the-middle ``nq-open-oracle.jsonl[.gz]``).

    The file has no ids: question ``nq{i}`` and passage ``nq-gold:{i}`` (``i`` = 0-based line index).
    The passage is relevant iff ``isgold``.
    """
    path = Path(path)
    questions = []
    for i, (line_no, obj) in enumerate(itertools.islice(_iter_jsonl_any(path), limit)):
        where = f"{path}:{line_no}"
        text = require(obj, "question", str, where, "the question text")
        ctxs = require(obj, "ctxs", list, where, "a one-element list with the gold passage")
        passages = []
        for j, c in enumerate(ctxs):
            cw = f"{where}: ctxs[{j}]"
            if not isinstance(c, dict):
                raise InputError(f"{cw}: expected an object, got {type(c).__name__}")
            gold = require(c, "isgold", bool, cw, "true for the gold passage")
            docid = f"nq-gold:{i}" if len(ctxs) == 1 else f"nq-gold:{i}:{j}"
            passages.append(Passage(docid=docid, text=require(c, "text", str, cw, "every passage needs text"),
                                    title=str(c.get("title", "")), relevant=gold))
        if not passages:
            raise InputError(f"{where}: field 'ctxs' is empty (give the gold passage)")
        questions.append(Question(qid=f"nq{i}", text=text, answers=_answers(obj, where), passages=tuple(passages)))
    return questions


def load_nq_pon(path: str | Path, limit: int | None = None) -> list[Question]:
    """NQ-open gold passages of *The Power of Noise* (``test_dataset.json``): qid = NQ
    ``example_id``, docid = ``idx_gold_in_corpus`` (the DPR Wikipedia passage index), relevant."""
    path = Path(path)
    questions = []
    for where, obj in _json_records(path, "{example_id, question, answers, text}", limit):
        qid = require(obj, "example_id", (int, str), where, "the NQ example id")
        idx = require(obj, "idx_gold_in_corpus", (int, str), where, "the gold passage's corpus index")
        passage = Passage(docid=str(idx), text=require(obj, "text", str, where, "the gold passage text"), relevant=True)
        questions.append(Question(qid=str(qid), text=require(obj, "question", str, where, "the question text"),
                                  answers=_answers(obj, where), passages=(passage,)))
    return unique_qids(questions, path)


# ---------------------------------------------------------------- SQuAD v1.1


def load_squad(path: str | Path, limit: int | None = None) -> list[Question]:
    """SQuAD v1.1: each question with all paragraphs of its article (docid ``{title}#{index}``).

    The paragraph the question was written on is relevant; the article's other paragraphs are
    ``None`` (SQuAD does not judge them; ``label_by_containment`` can fill them).
    Answers: the distinct annotated answer texts in order.
    """
    path = Path(path)
    data = read_json(path)
    if not isinstance(data, dict):
        raise InputError(f"{path}: expected a SQuAD object {{version, data:[articles]}}, got {type(data).__name__}")
    articles = require(data, "data", list, str(path), "a list of {title, paragraphs} articles")
    questions: list[Question] = []
    for a_i, article in enumerate(articles):
        aw = f"{path}: data[{a_i}]"
        if not isinstance(article, dict):
            raise InputError(f"{aw}: expected an article object, got {type(article).__name__}")
        title = require(article, "title", str, aw, "the article title")
        paras = require(article, "paragraphs", list, aw, "a list of {context, qas} paragraphs")
        pool = tuple(_squad_paragraph(p, f"{aw}: paragraphs[{j}]", title, j) for j, p in enumerate(paras))
        for j, para in enumerate(paras):
            for q_i, qa in enumerate(require(para, "qas", list, f"{aw}: paragraphs[{j}]", "a list of questions")):
                if limit is not None and len(questions) >= limit:
                    return unique_qids(questions, path)
                questions.append(_squad_question(qa, f"{aw}: paragraphs[{j}]: qas[{q_i}]", pool, j))
    return unique_qids(questions, path)


def _squad_paragraph(para: Any, where: str, title: str, j: int) -> Passage:
    if not isinstance(para, dict):
        raise InputError(f"{where}: expected a paragraph object, got {type(para).__name__}")
    return Passage(docid=f"{title}#{j}", text=require(para, "context", str, where, "the paragraph text"),
                   title=title.replace("_", " "))


def _squad_question(qa: Any, where: str, pool: tuple[Passage, ...], j: int) -> Question:
    if not isinstance(qa, dict):
        raise InputError(f"{where}: expected a question object, got {type(qa).__name__}")
    raw = require(qa, "answers", list, where, "a list of {answer_start, text}")
    answers: list[str] = []
    for a in raw:
        if not isinstance(a, dict) or not isinstance(a.get("text"), str):
            raise InputError(f"{where}: every entry of 'answers' needs a 'text' string")
        if a["text"] not in answers:
            answers.append(a["text"])
    if not answers:
        raise InputError(f"{where}: field 'answers' is empty (SQuAD v1.1 questions all have an answer)")
    passages = pool[:j] + (dataclasses.replace(pool[j], relevant=True),) + pool[j + 1:]
    return Question(qid=str(require(qa, "id", str, where, "the SQuAD question id")),
                    text=require(qa, "question", str, where, "the question text"),
                    answers=tuple(answers), passages=passages)


# ---------------------------------------------------------------- NoMIRACL


_NUMBERED = re.compile(r"(?:^|\n\n)\[(\d+)\] ")


def load_nomiracl(path: str | Path, split: str | None = None, limit: int | None = None) -> list[Question]:
    """NoMIRACL baseline prompts: passages parsed from the numbered ``[1] … [n]`` CONTEXTS block
    of ``prompt``, ids from ``docids``. Text is the passage as shown there (``Title: text``).

    ``split`` is ``relevant`` (≥1 of the passages is relevant, which one is not recorded: all
    ``None``) or ``nonrelevant`` (all judged non-relevant: ``False``); by default it is read from
    the file name. NoMIRACL has no answer strings.
    """
    path = Path(path)
    split = split or _nomiracl_split(path)
    if split not in ("relevant", "nonrelevant"):
        raise InputError(f"{path}: unknown NoMIRACL split {split!r} (use 'relevant' or 'nonrelevant')")
    label = None if split == "relevant" else False
    questions = []
    for line_no, obj in itertools.islice(iter_jsonl(path), limit):
        where = f"{path}:{line_no}"
        docids = require(obj, "docids", list, where, "the list of passage ids")
        texts = _nomiracl_passages(require(obj, "prompt", str, where, "the prompt with numbered passages"), where)
        if len(texts) != len(docids):
            raise InputError(f"{where}: 'prompt' holds {len(texts)} numbered passages but 'docids' has "
                             f"{len(docids)} ids (they must match one to one)")
        passages = [Passage(docid=str(d), text=t, relevant=label) for d, t in zip(docids, texts)]
        _check_unique_docids(passages, where, str(obj.get("query_id")))
        question = _nomiracl_question(obj["prompt"], where)
        qid = require(obj, "query_id", str, where, "the query id")
        questions.append(Question(qid=qid, text=question, passages=tuple(passages)))
    return unique_qids(questions, path)


def _nomiracl_split(path: Path) -> str:
    name = path.name.lower().replace("_", "").replace("-", "")
    if "nonrelevant" in name:
        return "nonrelevant"
    if "relevant" in name:
        return "relevant"
    raise InputError(f"{path}: cannot tell the NoMIRACL split from the file name (pass split='relevant' or 'nonrelevant')")


def _nomiracl_question(prompt: str, where: str) -> str:
    m = re.search(r"QUESTION:\n(.*?)\n\nCONTEXTS:\n", prompt, flags=re.S)
    if not m or not m.group(1).strip():
        raise InputError(f"{where}: field 'prompt' has no 'QUESTION:\\n…\\n\\nCONTEXTS:' block (use the vanilla prompt file)")
    return m.group(1).strip()


def _nomiracl_passages(prompt: str, where: str) -> list[str]:
    _, sep, block = prompt.partition("\n\nCONTEXTS:\n")
    if not sep:
        raise InputError(f"{where}: field 'prompt' has no 'CONTEXTS:' block (use the vanilla prompt file)")
    block = block.rsplit("\n\nOUTPUT:", 1)[0]
    marks = list(_NUMBERED.finditer(block))
    numbers = [int(m.group(1)) for m in marks]
    if numbers != list(range(1, len(marks) + 1)) or not marks or marks[0].start() != 0:
        raise InputError(f"{where}: field 'prompt': passages are not numbered [1], [2], … from the start of CONTEXTS")
    ends = [m.start() for m in marks[1:]] + [len(block)]
    return [block[m.end():end].strip() for m, end in zip(marks, ends)]


# ---------------------------------------------------------------- DPR


def load_dpr(path: str | Path, limit: int | None = None) -> list[Question]:
    """DPR retriever-training records: ``positive_ctxs`` (relevant), then ``hard_negative_ctxs`` and
    ``negative_ctxs`` (not relevant). qid ``dpr{i}``; docid = ``passage_id``. A passage listed twice
    keeps its first (positive-first) entry; one both positive and negative is an error."""
    path = Path(path)
    questions = []
    for i, (where, obj) in enumerate(_json_records(path, "DPR records", limit)):
        passages: dict[str, Passage] = {}
        for field, rel in (("positive_ctxs", True), ("hard_negative_ctxs", False), ("negative_ctxs", False)):
            for j, c in enumerate(obj.get(field) or []):
                cw = f"{where}: {field}[{j}]"
                if not isinstance(c, dict):
                    raise InputError(f"{cw}: expected an object, got {type(c).__name__}")
                docid = str(require(c, "passage_id", (str, int), cw, "the DPR passage id"))
                if docid in passages:
                    if passages[docid].relevant != rel:
                        raise InputError(f"{cw}: passage {docid!r} is listed as both positive and negative (keep one)")
                    continue
                passages[docid] = Passage(docid=docid, text=require(c, "text", str, cw, "every passage needs text"),
                                        title=str(c.get("title", "")), relevant=rel, score=_score(c.get("score"), cw))
        if not passages:
            raise InputError(f"{where}: no passages in positive_ctxs / hard_negative_ctxs / negative_ctxs")
        questions.append(Question(qid=f"dpr{i}", text=require(obj, "question", str, where, "the question text"),
                                  answers=_answers(obj, where), passages=tuple(passages.values())))
    return questions
