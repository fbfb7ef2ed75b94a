"""``udcg judge relevance|grade|answer INPUT -o OUTPUT --judge rules|MODEL``."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from udcg.commands._parser import add_model_options, command, model_choice
from udcg.flows.judge import MATCHES


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
    p.add_argument("--prompt-version", default="v1", help="judge prompt version (default v1)")
    p.add_argument("--chunk-size", type=int, metavar="N",
                   help="items per cached, fsynced unit of work (default: the --batch-size if given, else 8)")
    p.add_argument("--max-new-tokens", type=int, default=128, help="reply budget per judgement (default 128)")
    p.add_argument("--retries", type=int, default=1, help="follow-up turns for an unparseable reply (default 1)")
    p.add_argument("--match", choices=MATCHES, default=MATCHES[0],
                   help="answer rule: span (default: an alias in the answer, or the answer a span of an alias "
                   "holding its numbers or half its words), contains (an alias in the answer: the rule before "
                   "span), exact (normalised equality) or f1 (token F1 >= --f1-threshold)")
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
    p.set_defaults(func=main)


def main(args: argparse.Namespace) -> int:
    from udcg.flows.judge import judge_file
    from udcg.progress import follow_libraries

    follow_libraries(not args.no_progress)
    result = judge_file(args.task, args.input, args.output, judge=model_choice(args),
                        prompt_version=args.prompt_version, chunk_size=args.chunk_size, max_new_tokens=args.max_new_tokens,
                        retries=args.retries, match=args.match, f1_threshold=args.f1_threshold,
                        require_relevant_context=args.require_relevant_context, write_authors=args.write_authors,
                        cache=args.cache, keep_raw=args.keep_raw, retry_unparseable=args.retry_unparseable,
                        say=lambda line: print(f"udcg judge: {line}", file=sys.stderr),
                        show_progress=not args.no_progress)
    for line in result.lines():
        print(line, file=sys.stderr)
    return 0
