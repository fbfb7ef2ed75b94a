"""``udcg judge relevance|grade|answer INPUT -o OUTPUT --judge rules|MODEL``."""

from __future__ import annotations

import argparse
import logging
import sys
from pathlib import Path

from udcg.commands._parser import command

log = logging.getLogger(__name__)

EXAMPLES = ["udcg judge relevance data.json -o rel.jsonl                    containment rule, no model",
            "udcg judge relevance data.json -o rel.jsonl --judge qwen2.5-coder-0.5b --write-authors data.judged.json",
            "udcg judge grade data.json -o grades.jsonl --judge qwen2.5-coder-1.5b",
            "udcg judge answer answers.jsonl -o outcomes.jsonl --require-relevant-context"]
NOTES = """INPUT is the authors' JSON/JSONL ({example_id, question, answers, passages:[{doc_id, text}]}) for
relevance and grade, and a JSONL of {qid, cid, question, answers, answer, context_has_relevant?}
for answer. A killed run resumes from OUTPUT.cache.jsonl when the same command is run again."""


def add_parser(subparsers: argparse._SubParsersAction) -> None:
    p = command(subparsers, "judge", help="judge passage relevance, 1-5 utility grades or answer outcomes",
                description="Judge passages or answers with rules or an LLM (the paper's prompts).",
                examples=EXAMPLES, notes=NOTES)
    p.add_argument("task", choices=("relevance", "grade", "answer"))
    p.add_argument("input", type=Path)
    p.add_argument("-o", "--output", type=Path, required=True, help="JSONL of judgements")
    p.add_argument("--judge", default="rules", help="'rules' (default, no model) or a model alias / HF id / local dir")
    p.add_argument("--prompt-version", default="v1", help="judge prompt version (default v1)")
    p.add_argument("--batch-size", type=int, metavar="N",
                   help="prompts per forward pass of a local model (default: the backend's own choice)")
    p.add_argument("--chunk-size", type=int, metavar="N",
                   help="items per cached, fsynced unit of work (default: the --batch-size if given, else 8)")
    p.add_argument("--max-new-tokens", type=int, default=128, help="reply budget per judgement (default 128)")
    p.add_argument("--retries", type=int, default=1, help="follow-up turns for an unparseable reply (default 1)")
    p.add_argument("--match", choices=("contains", "exact", "f1"), default="contains",
                   help="answer rule: alias contained in the answer, exact match, or token F1 (default contains)")
    p.add_argument("--f1-threshold", type=float, default=0.5, help="token F1 that counts as correct (default 0.5)")
    p.add_argument("--require-relevant-context", action="store_true",
                   help="count an answer correct only if its context held a relevant passage (paper §6.2)")
    p.add_argument("--write-authors", type=Path, metavar="PATH",
                   help="also write INPUT with is_relevant (relevance) or grade (grade) set from the judgements")
    p.add_argument("--cache", type=Path, help="resume cache (default OUTPUT.cache.jsonl)")
    p.add_argument("--keep-raw", action="store_true", help="keep every raw model reply in the output (for auditing)")
    p.add_argument("--retry-unparseable", action="store_true",
                   help="on resume, judge again the items whose earlier reply could not be parsed")
    p.add_argument("--no-progress", action="store_true", help="no progress bar")
    p.set_defaults(func=run)


def _make_judge(args: argparse.Namespace, task):
    from udcg.grade.judges import LLMJudge, RuleJudge

    if args.judge == "rules":
        return RuleJudge(task, match=args.match, f1_threshold=args.f1_threshold,
                         require_relevant_context=args.require_relevant_context)
    from udcg.llm.registry import resolve

    backend = resolve(args.judge, batch_size=args.batch_size).load()  # an API model refuses --batch-size
    return LLMJudge(backend, task, prompt_version=args.prompt_version, max_new_tokens=args.max_new_tokens,
                    retries=args.retries, require_relevant_context=args.require_relevant_context,
                    keep_raw=args.keep_raw)


def _with_inputs(path, records: list[dict]) -> list[dict]:
    """Each judged answer merged into its input record, with ``outcome`` = the label (null when the
    reply could not be parsed), so the output is a contexts JSONL for fit-theta and correlate."""
    from udcg.io.files import read_records

    by_key = {(str(r["qid"]), str(r["cid"])): r for r in records}
    out = []
    for _, obj in read_records(path):
        judged = by_key[str(obj["qid"]), str(obj["cid"])]
        out.append({**obj, **{k: v for k, v in judged.items() if k not in ("qid", "cid")}, "outcome": judged["label"]})
    return out


def run(args: argparse.Namespace) -> int:
    from udcg.progress import bar as progress_bar
    from udcg.progress import follow_libraries

    from udcg.errors import InputError
    from udcg.grade import runner
    from udcg.grade.judges import get_task
    from udcg.io.authors import read_authors, write_authors
    from udcg.io.files import atomic_write_jsonl

    task = get_task(args.task)
    for flag, value, low in (("--batch-size", args.batch_size, 1), ("--chunk-size", args.chunk_size, 1),
                             ("--max-new-tokens", args.max_new_tokens, 1), ("--retries", args.retries, 0)):
        if value is not None and value < low:  # checked before any file is read or model loaded
            raise InputError(f"{flag} {value}: must be an integer >= {low}")
    if args.write_authors and task.name == "answer":
        raise InputError("--write-authors works for relevance and grade (answers have no authors' format)")
    if args.output.resolve() == args.input.resolve():
        raise InputError(f"{args.output}: the output would overwrite the input (choose another -o)")
    raw_items: list[dict] = []
    if task.name == "answer":
        items = runner.read_answer_items(args.input)
    else:
        raw_items, questions = read_authors(args.input)
        items = runner.passage_items(questions)
    runner.check_answers(items, task, str(args.input))
    follow_libraries(not args.no_progress)
    judge = _make_judge(args, task)  # after the input checks: a bad file fails before a model loads
    cache = args.cache or args.output.with_name(args.output.name + ".cache.jsonl")
    with progress_bar(total=len(items), desc=f"judge {task.name}", unit="item", enabled=not args.no_progress) as bar:
        chunk_size = args.chunk_size or args.batch_size or 8
        records = runner.run_judge(judge, items, cache, chunk_size=chunk_size, progress=bar.update,
                                   redo_unparseable=args.retry_unparseable)
    if task.name == "answer":  # keep each input record (a context: relevant, utilities, ...) and add its outcome
        records = _with_inputs(args.input, records)
    atomic_write_jsonl(args.output, records)
    if args.write_authors:
        out, skipped = runner.write_back(raw_items, records, task)
        write_authors(args.write_authors, out)
        if skipped:
            log.warning("%d passage(s) left unchanged in %s: their judgement could not be parsed", skipped, args.write_authors)
    summary = runner.summarize(records)
    print(f"udcg judge {task.name}: {runner.format_summary(summary)} -> {args.output}", file=sys.stderr)
    if summary["unparseable"]:
        print(f"  {summary['unparseable']} unparseable repl(ies) kept with label null, raw reply and error "
              f"(rerun with --retry-unparseable to try them again)", file=sys.stderr)
    return 0
