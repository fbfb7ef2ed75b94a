"""The options of ``udcg judge`` and ``udcg.judge``, each declared once (``udcg.options``): the
command's flags and the API's keywords are made from ``JudgeOptions``; the flow
(``flows/judge.judge_file``) takes the object. The model (``--judge`` and its ``--device``,
``--batch-size``, API flags) is a ``ModelChoice``, the flags of every model command
(``commands/_parser.add_model_options``); the answer rules are ``udcg.grade.rules.MATCHES``."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from udcg.grade.rules import MATCHES
from udcg.options import Options, option


@dataclass(frozen=True)
class JudgeOptions(Options):
    """How the items are judged (the prompt, the reply budget, the answer rule) and where it goes."""

    operation = "judge"

    prompt_version: str = option("v1", "judge prompt version (default {default})", kind=str)
    chunk_size: int | None = option(None, "items per cached, fsynced unit of work (default: the --batch-size if given, "
                                    "else 8)", kind=int, metavar="N")
    max_new_tokens: int = option(128, "reply budget per judgement (default {default})", kind=int)
    retries: int = option(1, "follow-up turns for an unparseable reply (default {default})", kind=int)
    match: str = option(MATCHES[0], "answer rule: span (default: an alias in the answer, or the answer a span of an "
                        "alias holding its numbers or half its words), contains (an alias in the answer: the rule "
                        "before span), exact (normalised equality) or f1 (token F1 >= --f1-threshold)", choices=MATCHES)
    f1_threshold: float = option(0.5, "token F1 that counts as correct (default {default})", kind=float)
    require_relevant_context: bool = option(False, "count an answer correct only if its context held a relevant "
                                            "passage (paper §6.2)", kind=bool)
    write_authors: str | Path | None = option(None, "also write INPUT with is_relevant (relevance) or grade (grade) "
                                              "set from the judgements", kind=Path, metavar="PATH")
    cache: str | Path | None = option(None, "resume cache (default OUTPUT.cache.jsonl)", kind=Path)
    keep_raw: bool = option(False, "keep every raw model reply in the output (for auditing)", kind=bool)
    retry_unparseable: bool = option(False, "on resume, judge again the items whose earlier reply could not be parsed",
                                     kind=bool)
