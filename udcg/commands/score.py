"""udcg score: metric values per context (authors' format or contexts JSONL), or per query for TREC files."""

from __future__ import annotations

import argparse
import sys

from udcg.commands._parser import command
from udcg.flows.run_options import ScoringOptions
from udcg.flows.score import DEFAULT_CONTEXT_METRICS as DEFAULT_METRICS


def add_parser(sub: argparse._SubParsersAction) -> None:
    p = command(sub, "score", help="add metric values to contexts, or evaluate a TREC run",
                description="""Score contexts (the authors' JSON/JSONL, or a contexts JSONL) with every metric
                asked for, keeping all input fields (and the authors' udcg[<model>] field); or, with
                --run/--qrels, write per-query values as qid<TAB>measure<TAB>value (with several runs,
                run<TAB>qid<TAB>measure<TAB>value) and print each run's means in the same layout, qid = all
                (trec_eval's name for the mean row).""",
                examples=["udcg score data.json -o scored.json --gamma 0.333",
                          "udcg score contexts.jsonl -o scored.jsonl --metrics UDCG,nDCG@5,RA-nWG@5 --k 5",
                          "udcg score --run run.txt --qrels qrels.txt --metrics P@5,nDCG@10,RR -o per_query.tsv",
                          ("udcg score --run bm25.trec --run dense.trec --qrels qrels.tsv --utilities utilities \\\n"
                           "      --metrics UDCG@5,nDCG@5,P@5 -o per_query.tsv")])
    p.add_argument("input", nargs="?", help="authors' JSON/JSONL or contexts JSONL")
    p.add_argument("-o", "--output", required=True, help="output file (.json = JSON list, else JSONL; TSV for --run)")
    p.add_argument("--label-rows", metavar="TSV", help="with --run and --qrels: write the label checks' per-query rows "
                   "(relevant count, flags, each run's unjudged top-k pairs) as TSV")
    p.add_argument("--k", type=int, default=None, help="cut every context to its first k passages")
    ScoringOptions.add_arguments(p, helps={  # the flags of runs' scoring (udcg.flows.run_options), here for contexts too
        "runs": "TREC run file (qid Q0 docid rank score tag); repeat for several runs (the TSV then starts with a run "
                "column)",
        "metrics": f"comma-separated (default {DEFAULT_METRICS}, + RA-nWG when grades exist; with --run required)",
        "gamma": "weight of the negative part in UDCG (paper: 1/3; the authors' stored values use 0.333)",
        "model": "which models_info[<model>] to use when several are present; with --utilities, refuse utilities made "
                 "by another model"})
    p.set_defaults(func=main)


def main(args: argparse.Namespace) -> int:
    from udcg.errors import InputError

    if args.run or args.qrels or args.utilities:
        if not args.run or args.input:
            raise InputError("give one or more --run with --qrels and/or --utilities (and no INPUT) to evaluate runs")
        return _score_runs(args)
    if not args.input:
        raise InputError("give an INPUT file (or --run and --qrels)")
    return _score_contexts(args)


def _score_runs(args: argparse.Namespace) -> int:
    from udcg.errors import InputError
    from udcg.flows.score import score_run_files

    if args.metrics is None:
        raise InputError("--metrics is required with --run (e.g. --metrics UDCG@5,nDCG@5,P@5)")
    if args.label_rows and not args.qrels:
        raise InputError("--label-rows: the label checks read the qrels; give --qrels")
    result = score_run_files(ScoringOptions.from_args(args), args.output)
    for line in result.mean_lines():
        print(line)
    for line in result.note_lines(verbose=args.verbose):
        print(line, file=sys.stderr)
    if args.label_rows:
        from udcg.flows.label_checks import write_label_rows

        write_label_rows(args.label_rows, next(iter(result.scores.values())).labels)
    print(result.summary(), file=sys.stderr)
    return 0


def _score_contexts(args: argparse.Namespace) -> int:
    from udcg.flows.score import score_context_file

    result = score_context_file(args.input, args.output, metrics=args.metrics, k=args.k,
                                gamma=ScoringOptions.from_args(args).gamma, reader=args.model, theta=args.theta)
    for note in result.notes:
        print(f"udcg score: {note}", file=sys.stderr)
    print(result.means.markdown(4))
    return 0
