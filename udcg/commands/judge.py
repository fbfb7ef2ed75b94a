"""``udcg judge relevance|grade|answer INPUT -o OUTPUT --judge rules|MODEL``."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from udcg.commands._parser import add_model_options, command, model_choice
from udcg.flows.judge_options import JudgeOptions


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
    add_model_options(p, "--judge", default="rules", role="judge",
                      help="'rules' (default, no model), a model alias / HF id / local dir, openai:MODEL, SCHEME:MODEL "
                      "of an installed backend (udcg models), or the API's model name with --api-base")
    JudgeOptions.add_arguments(p)
    p.add_argument("--no-progress", action="store_true", help="no progress bar")
    p.set_defaults(func=main)


def main(args: argparse.Namespace) -> int:
    from udcg.flows.judge import judge_file
    from udcg.progress import follow_libraries

    follow_libraries(not args.no_progress)
    result = judge_file(args.task, args.input, args.output, JudgeOptions.from_args(args), judge=model_choice(args),
                        say=lambda line: print(f"udcg judge: {line}", file=sys.stderr),
                        show_progress=not args.no_progress)
    for line in result.lines():
        print(line, file=sys.stderr)
    return 0
