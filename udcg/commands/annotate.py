"""udcg annotate: abstention probability and utility of every (question, passage) for one LLM."""

from __future__ import annotations

import argparse
import sys

from udcg.commands._parser import add_model_options, command, model_choice
from udcg.flows.annotate_options import RUNS, AnnotateOptions


def add_parser(sub: argparse._SubParsersAction) -> None:
    p = command(sub, "annotate", help="p(NO-RESPONSE) and utility per passage, for one LLM (resumable)",
                description="""Give every (question, passage) its abstention probability p_abs for one reader LLM,
                alone in the paper's prompt, and its utility u = R * (1 - p_abs). Writes the authors'
                models_info[<model>].no_res_prob plus our record (estimator, interval, samples, prompt version).
                Relevance R comes from is_relevant, else answer containment. Resumable: rerun the same command
                after a crash; finished passages are not recomputed.""",
                examples=[("udcg annotate --corpus BEIR_DIR --run bm25.trec --run dense.trec --depth 5 \\\n"
                           "      --model qwen2.5-coder-0.5b -o utilities     # your runs: the union of their top-5"),
                          "udcg annotate data.json -o annotated.json --model qwen2.5-coder-0.5b",
                          ("udcg annotate popqa_longtail_w_gs_example.jsonl \\\n"
                           "      --limit 10 -o popqa10.jsonl --model qwen2.5-coder-0.5b --estimator sequence"),
                          ("OPENAI_API_KEY=... udcg annotate data.json -o out.json --api-base https://api.openai.com/v1 \\\n"
                           "      --model gpt-4o-mini --estimator sampling --samples 20 --temperature 1.0 --target-width 0.2")])
    p.add_argument("input", nargs="?", help="authors' JSON/JSONL, or a QA data set file (PopQA, NQ, SQuAD, ...); "
                   "leave out with --run")
    p.add_argument("-o", "--output", required=True, help="output (.json = JSON list, else JSONL), authors' format; "
                   "with --run: the utilities folder (created, or extended with the new pairs only)")
    runs = p.add_argument_group("your runs (BEIR folder or files, TREC runs)")
    runs.add_argument("--run", action="append", default=[], metavar="RUN",
                      help="TREC run file (repeatable): annotate the union of the runs' top --depth documents")
    runs.add_argument("--corpus", help="BEIR folder, corpus JSONL/Parquet, a datasets save_to_disk folder, hf:NAME, or irds:NAME (ir_datasets)")
    AnnotateOptions.add_arguments(runs, group=RUNS)
    add_model_options(p, role="reader", help="the reader: an offline alias (smollm2-135m, qwen2.5-coder-0.5b, "
                      "qwen2.5-coder-1.5b), a Hugging Face id or local directory, openai:MODEL, SCHEME:MODEL of an "
                      "installed backend (udcg models), or the API's model name with --api-base")
    AnnotateOptions.add_arguments(p, group="")
    p.add_argument("--no-progress", action="store_true", help="no progress bar")
    p.set_defaults(func=main)


def main(args: argparse.Namespace) -> int:
    from udcg.errors import InputError
    from udcg.flows.annotate import annotate_file, annotate_run_files, reader
    from udcg.progress import follow_libraries

    if args.run and (args.input or not args.corpus):
        raise InputError("with --run give --corpus (a BEIR folder or corpus file) and no INPUT file")
    if not args.run and not args.input:
        raise InputError("give an INPUT file, or --corpus with one or more --run")
    options = AnnotateOptions.from_args(args)
    reader_ = reader(model_choice(args), options)
    if args.run:
        follow_libraries(not args.no_progress)
        report = annotate_run_files(args.corpus, args.run, args.output, reader_, options,
                                    show_progress=not args.no_progress, say=lambda line: print(line, file=sys.stderr))
        for line in report.lines(args.output, verbose=args.verbose):
            print(line, file=sys.stderr)
        return 0
    follow_libraries(not args.no_progress)
    done = annotate_file(args.input, args.output, reader_, limit=options.limit, show_progress=not args.no_progress,
                         say=lambda line: print(f"udcg annotate: {line}", file=sys.stderr))
    print(done.summary, file=sys.stderr)
    for note in done.server_notes:  # what was found out about an API server
        print(f"server: {note}", file=sys.stderr)
    return 0
