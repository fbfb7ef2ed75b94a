"""udcg answer: the reader's answer to each run's top-k context (resumable), as contexts JSONL."""

from __future__ import annotations

import argparse
import sys

from udcg.commands._parser import Deprecated, add_model_options, command, model_choice
from udcg.flows.answer_options import AnswerOptions


def add_parser(sub: argparse._SubParsersAction) -> None:
    p = command(sub, "answer", help="the reader LLM's answer to each run's top-k context (resumable)",
                description="""Show the reader each run's top-k documents for each query, in rank order, in the
                project's reader prompt, and record its greedy answer. The output is a contexts JSONL (qid, cid =
                run name, pids, relevant, utilities, n_relevant) that is also the input of `udcg judge answer`;
                the judged file feeds `udcg fit-theta` and `udcg correlate`. Resumable: rerun the same command
                after a crash; contexts already answered (by any run) are not asked again. Before any model call
                it prints the prompts it will send, an estimate of the time and the difference in correct rate
                between two runs its queries could detect (refined once the first prompts are answered).""",
                examples=[("udcg answer --corpus BEIR_DIR --run bm25.trec --run dense.trec --k 5 \\\n"
                           "      --model qwen2.5-coder-0.5b --utilities utilities -o answers.jsonl"),
                          ("udcg answer --corpus BEIR_DIR --run bm25.trec --run dense.trec --sample 10 --seed 1 \\\n"
                           "      --model qwen2.5-coder-0.5b -o answers10.jsonl   # 10 random queries, the same for both"),
                          ("udcg answer --corpus BEIR_DIR --run bm25.trec --run dense.trec --detect 0.1 \\\n"
                           "      --model qwen2.5-coder-0.5b -o answers.jsonl   # the --sample N that detects 0.1"),
                          "udcg judge answer answers.jsonl -o judged.jsonl --judge rules --require-relevant-context",
                          "udcg fit-theta judged.jsonl --k 5 -o theta.json",
                          "udcg correlate judged.jsonl --metrics UDCG,nDCG,P,RR --baseline UDCG"])
    p.add_argument("--run", action="append", default=[], required=True, help="TREC run file (repeatable)")
    p.add_argument("--corpus", required=True, help="BEIR folder, corpus JSONL/Parquet, a datasets folder, hf:NAME, or irds:NAME")
    AnswerOptions.add_arguments(p)
    p.add_argument("--samples", dest="samples", type=int, action=Deprecated, new="--subsets")
    add_model_options(p, role="reader", help="the reader: an offline alias, a model folder or hub id, openai:MODEL, "
                      "SCHEME:MODEL of an installed backend (udcg models), or the API's model name with --api-base")
    p.add_argument("-o", "--output", required=True, help="contexts JSONL with the answers")
    p.add_argument("--no-progress", action="store_true", help="no progress bar")
    p.set_defaults(func=main)


def main(args: argparse.Namespace) -> int:
    from udcg.flows.answer import answer_run_files
    from udcg.progress import follow_libraries

    options = AnswerOptions.from_args(args)
    if args.detect is not None:
        from udcg.flows.answer import detection_plan

        for line in detection_plan(args.detect, model_choice(args), len(args.run), options.samples):
            print(line)
        return 0
    follow_libraries(not args.no_progress)
    result = answer_run_files(args.corpus, args.run, args.output, model_choice(args), options,
                         show_progress=not args.no_progress, say=lambda line: print(line, file=sys.stderr))
    print(result.line(options.samples), file=sys.stderr)
    return 0
