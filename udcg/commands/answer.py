"""udcg answer: the reader's answer to each run's top-k context (resumable), as contexts JSONL."""

from __future__ import annotations

import argparse
import sys

from udcg.commands._parser import Deprecated, add_model_options, command, model_choice


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
    p.add_argument("--queries", help="queries file or irds:NAME (default: the BEIR folder's or irds dataset's)")
    p.add_argument("--sample", type=int, default=None, metavar="N",
                   help="answer N queries drawn at random (--seed), the same N for every run: the cheap way to "
                   "check UDCG against real answers (then compare --answers ... --judged-only)")
    p.add_argument("--detect", type=float, default=None, metavar="D",
                   help="plan only: print the queries (--sample N), prompts and time at which a difference D in "
                   "correct rate between two runs would be detected (e.g. 0.1), then stop before any model call")
    p.add_argument("--limit", type=int, default=None, help="only the first N queries of the queries file (file "
                   "order, as annotate --limit; --sample draws them at random instead); the runs' other queries are left out")
    p.add_argument("--qrels", help="qrels or irds:NAME (default: the BEIR folder's qrels/test.tsv); relevance of each position")
    p.add_argument("--answers", help="JSONL of {_id, answers} (default: queries' metadata.answers)")
    p.add_argument("--utilities", help="the udcg annotate --run folder: adds each position's utility")
    p.add_argument("--k", type=int, default=5, help="documents per context (default 5)")
    p.add_argument("--subsets", dest="samples", type=int, default=0, metavar="N", help="also N random k-subsets per query of the "
                   "runs' top --depth (rank order kept), so contexts differ within a query (for fit-theta and correlate; "
                   "was --samples, which still works)")
    p.add_argument("--samples", dest="samples", type=int, action=Deprecated, new="--subsets")
    p.add_argument("--depth", type=int, default=20, help="with --subsets: the pool depth per run (default 20)")
    p.add_argument("--seed", type=int, default=0, help="the seed of --sample and --subsets (default 0)")
    add_model_options(p, role="reader", help="the reader: an offline alias, a model folder or hub id, openai:MODEL, "
                      "SCHEME:MODEL of an installed backend (udcg models), or the API's model name with --api-base")
    p.add_argument("--prompt", default="udcg-code-v1", help="reader prompt version (udcg-code-v1, paper-fig4-v1)")
    p.add_argument("--max-new-tokens", type=int, default=32, help="answer length limit (default 32)")
    p.add_argument("--chunk-size", type=int, default=16, help="contexts per cached, fsynced unit of work (default 16)")
    p.add_argument("-o", "--output", required=True, help="contexts JSONL with the answers")
    p.add_argument("--cache", help="resume cache (default OUTPUT.cache.jsonl)")
    p.add_argument("--no-progress", action="store_true", help="no progress bar")
    p.set_defaults(func=main)


def main(args: argparse.Namespace) -> int:
    from udcg.flows.answer import answer_runs
    from udcg.progress import follow_libraries

    if args.detect is not None:
        from udcg.flows.answer import detection_plan

        for line in detection_plan(args.detect, model_choice(args), len(args.run), args.samples):
            print(line)
        return 0
    follow_libraries(not args.no_progress)
    result = answer_runs(args.corpus, args.run, args.output, model_choice(args), k=args.k, queries=args.queries,
                         qrels=args.qrels, answers=args.answers, utilities=args.utilities, limit=args.limit, sample=args.sample,
                         samples=args.samples,
                         depth=args.depth, seed=args.seed, prompt=args.prompt, max_new_tokens=args.max_new_tokens,
                         chunk_size=args.chunk_size, cache=args.cache, show_progress=not args.no_progress,
                         say=lambda line: print(line, file=sys.stderr))
    print(result.line(args.samples), file=sys.stderr)
    return 0
