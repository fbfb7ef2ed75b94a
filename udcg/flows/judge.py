"""The judge flow: passage relevance, 1-5 utility grades or answer outcomes, by rules or an LLM
judge (the paper's prompts), resumable; answer outcomes are merged into their contexts."""

from __future__ import annotations

import logging
from dataclasses import dataclass
from pathlib import Path

from udcg.errors import InputError
from udcg.flows.judge_options import JudgeOptions
from udcg.grade.rules import RULES
from udcg.llm.registry import ModelChoice, ModelSpec
from udcg.progress import bar

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class JudgeResult:
    task: str
    summary: dict  # udcg.grade.runner.count_labels
    output: Path

    def lines(self) -> list[str]:
        from udcg.grade.runner import format_summary

        out = [f"udcg judge {self.task}: {format_summary(self.summary)} -> {self.output}"]
        if self.summary["unparseable"]:
            out.append(f"  {self.summary['unparseable']} unparseable repl(ies) kept with label null, raw reply and "
                       "error (rerun with --retry-unparseable to try them again)")
        return out


def _make_judge(task, spec: ModelSpec | None, options: JudgeOptions, say=lambda line: None):
    from udcg.grade.judges import LLMJudge, RuleJudge
    from udcg.llm.registry import where_it_goes

    if spec is None:
        return RuleJudge(task, **options.keywords("match", "f1_threshold", "require_relevant_context"))
    spec = spec.settled()  # an openai: model's server, settled once (the line and the backend read it)
    if spec.api:  # names the server (an openai: model without one refuses without a key)
        say(where_it_goes(spec).replace("reader ", "judge ", 1))
    backend = spec.load()
    return LLMJudge(backend, task, **options.keywords("prompt_version", "max_new_tokens", "retries",
                                                      "require_relevant_context", "keep_raw"))


def judge_file(task_name: str, path: str | Path, output: str | Path, options: JudgeOptions | None = None, *,
               judge: str | ModelChoice = RULES, show_progress: bool = True, say=lambda line: None) -> JudgeResult:
    """Judge every item of ``path`` (the authors' format for relevance and grade, a contexts JSONL
    with answers for answer) and write the judgements to ``output``; a bad file fails before a model
    loads. ``options``: how (``JudgeOptions``; its ``write_authors``: also the input with is_relevant
    or grade set from the judgements).
    ``judge``: ``rules`` or a model (a name or a ``ModelChoice`` with its options: ``--batch-size``,
    the API flags; resolved once); ``say``: a line for the user (an API judge's server)."""
    from udcg.grade import runner
    from udcg.grade.judges import get_task
    from udcg.io.authors import read_authors, write_authors as write_authors_file
    from udcg.io.contexts import judged_lines
    from udcg.io.files import atomic_write_jsonl

    o = options or JudgeOptions()
    task = get_task(task_name)
    path, output = Path(path), Path(output)
    choice = ModelChoice.of(judge)  # "rules": no model
    batch_size = choice.batch_size  # also the default --chunk-size
    if batch_size is not None and batch_size < 1:  # checked before any file is read (the options: by JudgeOptions)
        raise InputError(f"--batch-size {batch_size}: must be an integer >= 1")
    if o.write_authors and task.name == "answer":
        raise InputError("--write-authors works for relevance and grade (answers have no authors' format)")
    if output.resolve() == path.resolve():
        raise InputError(f"{output}: the output would overwrite the input (choose another -o)")
    spec = None if choice.model == RULES else choice.spec()
    if spec is not None:  # an API model refuses --batch-size; a core install: which extra, before any work
        spec.check_installed()
    raw_items: list[dict] = []
    if task.name == "answer":
        items = runner.read_answer_items(path)
    else:
        raw_items, questions = read_authors(path)
        items = runner.passage_items(questions)
    runner.check_answers(items, task, str(path))
    # after the input checks: a bad file fails before a model loads
    judge_ = _make_judge(task, spec, o, say=say)
    cache = Path(o.cache) if o.cache else output.with_name(output.name + ".cache.jsonl")
    with bar(total=len(items), desc=f"judge {task.name}", unit="item", enabled=show_progress) as progress:
        records = runner.judge_items(judge_, items, cache, chunk_size=o.chunk_size or batch_size or 8,
                                     progress=progress.update, redo_unparseable=o.retry_unparseable)
    # each input line kept (a context: relevant, utilities, ...) with its outcome added
    atomic_write_jsonl(output, judged_lines(path, records) if task.name == "answer" else records)
    if o.write_authors:
        out, skipped = runner.write_back(raw_items, records, task)
        write_authors_file(o.write_authors, out)
        if skipped:
            log.warning("%d passage(s) left unchanged in %s: their judgement could not be parsed", skipped,
                        o.write_authors)
    return JudgeResult(task.name, runner.count_labels(records), output)
