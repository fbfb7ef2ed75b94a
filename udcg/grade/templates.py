"""The judge prompts: versioned package data (``udcg/grade/prompts/<task>-<version>.txt``).

- ``relevance-v1``: the paper's Fig. 5, as in the authors' public code (``src/prompts.py``).
- ``answer-v1``: the paper's Fig. 6, as in the authors' public code (the ``...`` lines of the
  figure are code fences there).
- ``grade5-v1``: the 1-5 utility rubric of seed 000 (§2.1 and §6), laid out like Fig. 5.

Untrusted text (question, answers, passage, predicted answer) goes into the prompt's fenced block.
Runs of three or more backticks in it are replaced by as many U+02CB MODIFIER LETTER GRAVE ACCENT
characters, so no passage can close the fence and write outside it; placeholders are filled in one
pass, so a passage that contains ``{question}`` is left as it is.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from functools import cache
from importlib import resources

from udcg.errors import InputError

TASK_FILES = {"relevance": "relevance", "grade": "grade5", "answer": "answer"}
_FENCE_RUN = re.compile(r"`{3,}")
_PLACEHOLDER = re.compile(r"\{(question|answers|document|answer)\}")


@cache
def load_template(task: str, version: str = "v1") -> str:
    """The prompt text of a task (relevance | grade | answer) at a version."""
    if task not in TASK_FILES:
        raise InputError(f"unknown judge task {task!r} (use one of {', '.join(TASK_FILES)})")
    name = f"{TASK_FILES[task]}-{version}.txt"
    try:
        return resources.files("udcg.grade").joinpath("prompts", name).read_text(encoding="utf-8").strip()
    except FileNotFoundError:
        raise InputError(f"no prompt {name!r} for task {task!r} (available: {', '.join(available(task))})") from None


def available(task: str) -> list[str]:
    prefix = f"{TASK_FILES[task]}-"
    return sorted(p.name[len(prefix) : -4] for p in resources.files("udcg.grade").joinpath("prompts").iterdir()
                  if p.name.startswith(prefix) and p.name.endswith(".txt"))


def prompt_id(task: str, version: str) -> str:
    """The name written next to every judgement, e.g. ``relevance-v1``."""
    return f"{TASK_FILES[task]}-{version}"


def neutralize(text: str) -> str:
    """Untrusted text made safe for a fenced block: backtick runs >= 3 become U+02CB runs."""
    return _FENCE_RUN.sub(lambda m: "\u02cb" * len(m.group(0)), text)


def format_answers(answers: Sequence[str]) -> str:
    """The acceptable answers as the authors' prompt shows them: a Python list literal."""
    return repr(list(answers))


def render(template: str, values: Mapping[str, str]) -> str:
    """Fill ``{question}``, ``{answers}``, ``{document}``, ``{answer}`` in one pass; values are
    neutralised, and the template's other braces (its JSON example) are left alone."""
    missing = set(_PLACEHOLDER.findall(template)) - set(values)
    if missing:
        raise ValueError(f"template needs {sorted(missing)}")
    return _PLACEHOLDER.sub(lambda m: neutralize(values[m.group(1)]), template)
