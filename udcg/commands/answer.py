"""udcg answer: the reader's answer to each run's top-k context (resumable), as contexts JSONL."""

from __future__ import annotations

import argparse
import sys

from udcg.commands._parser import command


def add_parser(sub: argparse._SubParsersAction) -> None:
    p = command(sub, "answer", help="the reader LLM's answer to each run's top-k context (resumable)",
                description="""Show the reader each run's top-k documents for each query, in rank order, in the
                project's reader prompt, and record its greedy answer. The output is a contexts JSONL (qid, cid =
                run name, pids, relevant, utilities, n_relevant) that is also the input of `udcg judge answer`;
                the judged file feeds `udcg fit-theta` and `udcg correlate`. Resumable: rerun the same command
                after a crash; contexts already answered (by any run) are not asked again.""",
                examples=[("udcg answer --corpus BEIR_DIR --run bm25.trec --run dense.trec --k 5 \\\n"
                           "      --model qwen2.5-coder-0.5b --utilities utilities -o answers.jsonl"),
                          "udcg judge answer answers.jsonl -o judged.jsonl --judge rules --require-relevant-context",
                          "udcg fit-theta judged.jsonl --k 5 -o theta.json",
                          "udcg correlate judged.jsonl --metrics UDCG,nDCG,P,RR --baseline UDCG"])
    p.add_argument("--run", action="append", default=[], required=True, help="TREC run file (repeatable)")
    p.add_argument("--corpus", required=True, help="BEIR folder, corpus JSONL/Parquet, a datasets folder, or hf:NAME")
    p.add_argument("--queries", help="queries file (default: the BEIR folder's)")
    p.add_argument("--limit", type=int, default=None, help="only the first N queries of the queries file (file "
                   "order, as annotate --limit); the runs' other queries are left out")
    p.add_argument("--qrels", help="qrels (default: the BEIR folder's qrels/test.tsv); relevance of each position")
    p.add_argument("--answers", help="JSONL of {_id, answers} (default: queries' metadata.answers)")
    p.add_argument("--utilities", help="the udcg annotate --run folder: adds each position's utility")
    p.add_argument("--k", type=int, default=5, help="documents per context (default 5)")
    p.add_argument("--samples", type=int, default=0, help="also N random k-subsets per query of the runs' top --depth "
                   "(rank order kept), so contexts differ within a query (for fit-theta and correlate)")
    p.add_argument("--depth", type=int, default=20, help="with --samples: the pool depth per run (default 20)")
    p.add_argument("--seed", type=int, default=0, help="with --samples: the seed")
    p.add_argument("--model", required=True, help="the reader: an offline alias, a model folder or hub id, or openai:MODEL")
    p.add_argument("--prompt", default="udcg-code-v1", help="reader prompt version (udcg-code-v1, paper-fig4-v1)")
    p.add_argument("--max-new-tokens", type=int, default=32, help="answer length limit (default 32)")
    p.add_argument("--batch-size", type=int, default=None,
                   help="prompts per forward pass of a local model (default: by a token budget)")
    p.add_argument("--chunk-size", type=int, default=16, help="contexts per cached, fsynced unit of work (default 16)")
    p.add_argument("--device", default=None, help="cpu, cuda, auto (default auto; a local model only)")
    p.add_argument("--dtype", default=None, help="float32, bfloat16, float16 (default float32; a local model only)")
    p.add_argument("-o", "--output", required=True, help="contexts JSONL with the answers")
    p.add_argument("--cache", help="resume cache (default OUTPUT.cache.jsonl)")
    p.add_argument("--no-progress", action="store_true", help="no progress bar")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from pathlib import Path

    from udcg.annotate.prompt import check_version
    from udcg.experiment.run_scores import named_runs, read_utilities
    from udcg.io.beir import check_run, read_collection
    from udcg.errors import InputError
    from udcg.experiment.own_runs import answer_contexts, context_record, run_contexts, run_docids, select_queries
    from udcg.experiment.steps import context_key
    from udcg.io.files import atomic_write_jsonl
    from udcg.llm.registry import resolve
    from udcg.progress import bar, follow_libraries
    from udcg.io.trec import read_run

    for flag, value in (("--k", args.k), ("--depth", args.depth), ("--max-new-tokens", args.max_new_tokens),
                        ("--batch-size", args.batch_size), ("--chunk-size", args.chunk_size), ("--limit", args.limit)):
        if value is not None and value < 1:
            raise InputError(f"{flag} {value}: must be a positive integer")
    check_version(args.prompt)
    spec = resolve(args.model, device=args.device, dtype=args.dtype, batch_size=args.batch_size,
                   defaults={"device": "auto", "dtype": "float32"})  # an API model refuses the local options
    output = Path(args.output)
    cache = Path(args.cache) if args.cache else output.with_name(output.name + ".cache.jsonl")
    if cache.resolve() == output.resolve():
        raise InputError(f"{output}: the output and the cache are one file (choose another --cache)")
    utilities = read_utilities(args.utilities, spec.name, args.prompt) if args.utilities else None
    paths = named_runs(args.run)
    runs = {name: read_run(path) for name, path in paths.items()}
    depth = max(args.k, args.depth) if args.samples else args.k  # the documents the contexts are made of
    collection = read_collection(args.corpus, queries=args.queries, qrels=args.qrels, answers=args.answers,
                                 docids=run_docids(runs, depth))
    for name, run_ in runs.items():
        check_run(run_, collection, str(paths[name]), depth=depth, queries_source=args.queries)
    runs, collection = select_queries(runs, collection, args.limit)
    print(collection.scan.line(), file=sys.stderr)
    contexts, short = run_contexts(runs, collection, args.k, samples=args.samples, depth=args.depth, seed=args.seed)
    for name, count in short.items():
        print(f"{name}: {count} queries rank fewer than {args.k} documents and get no context", file=sys.stderr)
    if not contexts:
        raise InputError(f"no context of {args.k} documents in any run (lower --k)")
    records_check = [context_record(c, collection, "", utilities) for c in contexts]  # fails before a model loads
    follow_libraries(not args.no_progress)
    answers, stats = answer_contexts(
        contexts, collection, spec.name, spec.load, cache,
        prompt_version=args.prompt, max_new_tokens=args.max_new_tokens, chunk_size=args.chunk_size,
        progress=lambda total, desc, unit: bar(total=total, desc=desc, unit=unit, enabled=not args.no_progress))
    records = [{**rec, "answer": answers[context_key(c.qid, c.docids)], "model": spec.name,
                "prompt_version": args.prompt} for c, rec in zip(contexts, records_check, strict=True)]
    atomic_write_jsonl(output, records)
    print(f"{len(records)} contexts ({len(collection.queries)} queries, {len(runs)} runs"
          f"{f', {args.samples} samples per query' if args.samples else ''}); {stats['computed']} new prompts "
          f"answered by the model, the rest from the cache -> {output}", file=sys.stderr)
    return 0
