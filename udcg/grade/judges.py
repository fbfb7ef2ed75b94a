"""Judges: an LLM behind the paper's prompts, or rules that need no model.

Three tasks:

- ``relevance``: question + acceptable answers + passage -> "relevant" | "irrelevant" (Fig. 5);
- ``grade``: question + acceptable answers + passage -> utility grade 5..1 (seed 000's rubric);
- ``answer``: question + acceptable answers + predicted answer -> "correct" | "wrong" |
  "abstained" (Fig. 6; the labels of ``udcg.records``).

Every judge returns one ``Judgement`` per item, in input order. An unparseable LLM reply is a
judgement with ``label=None``, the raw reply and the parse error, never a default label.
"""

from __future__ import annotations

import logging
from abc import ABC, abstractmethod
from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from typing import ClassVar, Union

from udcg.errors import BackendError, InputError
from udcg.grade import rules, templates
from udcg.grade.parsing import Choices, Parsed, parse_reply
from udcg.llm.base import Backend, GenerationParams
from udcg.records import Outcome

log = logging.getLogger(__name__)


@dataclass(frozen=True, slots=True, kw_only=True)
class _Item:
    """What every judged item carries: the question and its acceptable answers. Keyword-only, as
    are the items built on it (``PassageItem(qid=..., docid=..., ...)``)."""

    ID_FIELD: ClassVar[str]  # the item id's key in the judgement records ("pid" or "cid")
    qid: str
    question: str
    answers: tuple[str, ...]


@dataclass(frozen=True, slots=True, kw_only=True)
class PassageItem(_Item):
    """One (question, passage) pair to judge for relevance or a utility grade."""

    ID_FIELD: ClassVar[str] = "pid"
    docid: str
    text: str
    title: str = ""

    @property
    def item_id(self) -> str:
        return self.docid


@dataclass(frozen=True, slots=True, kw_only=True)
class AnswerItem(_Item):
    """One predicted answer (for context ``cid`` of question ``qid``) to grade."""

    ID_FIELD: ClassVar[str] = "cid"
    cid: str
    answer: str
    context_has_relevant: bool | None = None

    @property
    def item_id(self) -> str:
        return self.cid


Item = Union[PassageItem, AnswerItem]


@dataclass(frozen=True, slots=True)
class Task:
    name: str
    choices: Choices
    item_type: type[PassageItem | AnswerItem]  # what the task judges

    @property
    def id_field(self) -> str:
        """The records' key for the item id: "pid" or "cid"."""
        return self.item_type.ID_FIELD


TASKS: dict[str, Task] = {
    "relevance": Task("relevance", Choices({"A": "relevant", "B": "irrelevant"},
                                           {"A": "RELEVANT", "B": "IRRELEVANT"}), PassageItem),
    "grade": Task("grade", Choices({str(g): g for g in (5, 4, 3, 2, 1)}, {}), PassageItem),
    "answer": Task("answer", Choices({"A": "correct", "B": "wrong", "C": "abstained"},
                                     {"A": "CORRECT", "B": "INCORRECT", "C": "ABSTAINED"}), AnswerItem),
}


def get_task(name: str) -> Task:
    if name not in TASKS:
        raise InputError(f"unknown judge task {name!r} (use one of {', '.join(TASKS)})")
    return TASKS[name]


@dataclass(frozen=True, slots=True)
class Judgement:
    qid: str
    item_id: str
    label: str | int | None  # None = the judge's reply could not be parsed
    judge: str
    prompt_version: str
    motivation: str = ""
    error: str = ""
    raw: str | None = None  # the reply, kept when it could not be parsed
    repair: tuple[str, ...] = ()
    attempts: int = 1
    note: str = ""

    def to_record(self, task: Task) -> dict:
        rec = {"qid": self.qid, task.id_field: self.item_id, "task": task.name, "label": self.label,
               "motivation": self.motivation, "judge": self.judge, "prompt_version": self.prompt_version}
        if self.label is None:
            rec["error"] = self.error
        if self.raw is not None:
            rec["raw"] = self.raw
        if self.repair:
            rec["repair"] = list(self.repair)
        if self.attempts != 1:
            rec["attempts"] = self.attempts
        if self.note:
            rec["note"] = self.note
        return rec


class Judge(ABC):
    """What every judge declares, so that the resumable runner asks instead of probing:

    - ``task``, and ``name`` (recorded as each judgement's ``judge``);
    - ``prompt_id``: the recorded ``prompt_version`` (a versioned prompt's id, or the rules' version);
    - ``backend``: the model it asks (its concurrency sets the runner's parallelism), None for rules;
    - ``shown(item)``: what the judge is shown of an item (the cache's input fingerprint)."""

    task: Task
    backend: Backend | None

    @property
    @abstractmethod
    def name(self) -> str: ...

    @property
    @abstractmethod
    def prompt_id(self) -> str: ...

    def shown(self, item: Item) -> str:
        """The item itself (a judge without a prompt); an LLM judge shows its rendered prompt."""
        return repr(item)

    @abstractmethod
    def judge(self, items: Sequence[Item]) -> list[Judgement]: ...


def _check_items(task: Task, items: Sequence[Item]) -> None:
    kind = task.item_type
    for it in items:
        if not isinstance(it, kind):
            raise TypeError(f"the {task.name} judge takes {kind.__name__}s, got {type(it).__name__}")


def require_context(judgements: list[Judgement], items: Sequence[Item]) -> list[Judgement]:
    """Paper §6.2: an answer counts as correct only if its context held a relevant passage; a
    matching answer from a context without one becomes "wrong" (the reader should have
    abstained), with a note saying so."""
    out = []
    for j, it in zip(judgements, items):
        if it.context_has_relevant is None:
            raise InputError(f"item qid={it.qid!r} cid={it.cid!r}: missing 'context_has_relevant' "
                             "(needed to require a relevant passage; give true/false or drop the option)")
        if j.label == "correct" and not it.context_has_relevant:
            j = replace(j, label="wrong", note="matches a reference answer, but the context held no relevant passage")
        out.append(j)
    return out


def to_outcomes(judgements: Sequence[Judgement], items: Sequence[AnswerItem]) -> list[Outcome]:
    """The answer judgements as ``udcg.records.Outcome`` records (label None = unparseable)."""
    return [Outcome(qid=it.qid, cid=it.cid, answer=it.answer, label=j.label, error=j.error, note=j.note)
            for j, it in zip(judgements, items, strict=True)]


# ---------------------------------------------------------------- LLM judge

RETRY_MESSAGE = ("Your reply could not be read: {error}. Reply again with only the JSON object, "
                 'no other text: {{"motivation": "...", "grade": {grades}}}')


@dataclass
class LLMJudge(Judge):
    """A judge that asks ``backend`` (greedy decoding) with the task's versioned prompt.

    An unparseable reply is retried ``retries`` times as a follow-up turn that quotes the parse
    error; after that it is recorded as unparseable. ``keep_raw`` keeps every raw reply (for
    auditing a judge), not only the unparseable ones."""

    backend: Backend
    task: Task
    prompt_version: str = "v1"
    max_new_tokens: int = 128
    retries: int = 1
    require_relevant_context: bool = False
    keep_raw: bool = False
    template: str = field(init=False, repr=False)

    def __post_init__(self) -> None:
        if isinstance(self.task, str):
            self.task = get_task(self.task)
        if self.retries < 0 or self.max_new_tokens < 1:
            raise InputError("retries must be >= 0 and max_new_tokens >= 1")
        self.template = templates.load_template(self.task.name, self.prompt_version)

    @property
    def name(self) -> str:
        return self.backend.name

    @property
    def prompt_id(self) -> str:
        return templates.prompt_id(self.task.name, self.prompt_version)

    def prompt(self, item: Item) -> str:
        values = {"question": item.question, "answers": templates.format_answers(item.answers)}
        if isinstance(item, AnswerItem):
            values["answer"] = item.answer
        else:
            values["document"] = item.text
        return templates.render(self.template, values)

    def shown(self, item: Item) -> str:
        return self.prompt(item)

    def _generate(self, chats: list[list[dict]]) -> list[str]:
        params = GenerationParams(max_new_tokens=self.max_new_tokens, temperature=0.0, n=1)
        replies = self.backend.generate(chats, params)
        if len(replies) != len(chats) or any(not r for r in replies):
            raise BackendError(f"backend {self.name!r} returned {len(replies)} results for {len(chats)} chats")
        return [r[0] for r in replies]

    def judge(self, items: Sequence[Item]) -> list[Judgement]:
        _check_items(self.task, items)
        if not items:
            return []
        chats = [[{"role": "user", "content": self.prompt(it)}] for it in items]
        replies = self._generate(chats)
        parsed = [parse_reply(r, self.task.choices) for r in replies]
        attempts = [1] * len(items)
        for _ in range(self.retries):
            todo = [i for i, p in enumerate(parsed) if p.label is None]
            if not todo:
                break
            grades = " or ".join(f'"{c}"' for c in self.task.choices.labels)
            retry_chats = [chats[i] + [{"role": "assistant", "content": replies[i]},
                                       {"role": "user", "content": RETRY_MESSAGE.format(error=parsed[i].error, grades=grades)}]
                           for i in todo]
            for i, reply in zip(todo, self._generate(retry_chats)):
                replies[i], parsed[i], attempts[i] = reply, parse_reply(reply, self.task.choices), attempts[i] + 1
        out = [self._judgement(it, p, r, a) for it, p, r, a in zip(items, parsed, replies, attempts)]
        if self.require_relevant_context:
            out = require_context(out, items)
        return out

    def _judgement(self, item: Item, p: Parsed, reply: str, attempts: int) -> Judgement:
        if p.label is None:
            log.info("unparseable reply for %s/%s: %s", item.qid, item.item_id, p.error)
        return Judgement(qid=item.qid, item_id=item.item_id, label=p.label, judge=self.name,
                         prompt_version=self.prompt_id, motivation=p.motivation, error=p.error,
                         raw=reply if p.label is None or self.keep_raw else None, repair=p.repair,
                         attempts=attempts)


# ---------------------------------------------------------------- rule judge

RULES_VERSION = "rules-v1"
MATCHES = rules.MATCHES  # how the rules match an answer to the gold answers, the default ("span") first


@dataclass
class RuleJudge(Judge):
    """The judges that need no model (the embedded default).

    - relevance: a normalised answer alias occurs in the passage (containment);
    - answer: abstention detection, then ``match`` = "span" (the default: ``rules.span_match``) |
      "contains" | "exact" | "f1" (token F1 >= ``f1_threshold``) against the aliases.
    The 5-point grade has no rule: it needs an LLM judge."""

    task: Task
    match: str = MATCHES[0]
    f1_threshold: float = 0.5
    require_relevant_context: bool = False
    prompt_version: str = RULES_VERSION
    backend: ClassVar[None] = None  # no model: the runner computes one chunk at a time

    def __post_init__(self) -> None:
        if isinstance(self.task, str):
            self.task = get_task(self.task)
        if self.task.name == "grade":
            raise InputError("the 5-point grade has no rule-based judge (give a model: --judge MODEL)")
        if self.match not in MATCHES:
            raise InputError(f"unknown match rule {self.match!r} (use {', '.join(MATCHES)})")
        if not 0.0 < self.f1_threshold <= 1.0:
            raise InputError(f"f1 threshold {self.f1_threshold!r} must be in (0, 1]")

    @property
    def name(self) -> str:
        if self.task.name == "relevance":
            return "rules:containment"
        return f"rules:{self.match}" + (f"@{self.f1_threshold:g}" if self.match == "f1" else "")

    @property
    def prompt_id(self) -> str:
        return self.prompt_version

    def judge(self, items: Sequence[Item]) -> list[Judgement]:
        _check_items(self.task, items)
        out = [self._one(it) for it in items]
        if self.require_relevant_context:
            out = require_context(out, items)
        return out

    def _one(self, item: Item) -> Judgement:
        if isinstance(item, PassageItem):
            hit = rules.contains_answer(item.text, item.answers)
            label = "relevant" if hit else "irrelevant"
            why = "an answer alias occurs in the passage" if hit else "no answer alias occurs in the passage"
        else:
            label = rules.answer_outcome(item.answer, item.answers, self.match, self.f1_threshold)
            why = {"abstained": "the answer is an abstention", "correct": f"the answer matches an alias ({self.match})",
                   "wrong": f"the answer matches no alias ({self.match})"}[label]
        return Judgement(qid=item.qid, item_id=item.item_id, label=label, judge=self.name,
                         prompt_version=self.prompt_version, motivation=why)
