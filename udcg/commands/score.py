"""udcg score: metric values per context (authors' format or contexts JSONL), or per query for TREC files."""

from __future__ import annotations

import argparse
import sys

from udcg.commands._parser import command

DEFAULT_METRICS = "UDCG,nDCG,P,Success,RR,AP"


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
    p.add_argument("--metrics", default=None, help=f"comma-separated (default {DEFAULT_METRICS}, + RA-nWG when grades exist)")
    p.add_argument("--k", type=int, default=None, help="cut every context to its first k passages")
    p.add_argument("--gamma", type=float, default=1 / 3, help="weight of the negative part in UDCG (paper: 1/3; "
                   "the authors' stored values use 0.333)")
    p.add_argument("--model", default=None, help="which models_info[<model>] to use when several are present; with "
                   "--utilities, refuse utilities made by another model")
    p.add_argument("--theta", default=None, help="a fitted UDCG_theta model (JSON) for the UDCG_theta metric")
    p.add_argument("--run", action="append", default=[], help="TREC run file (qid Q0 docid rank score tag); repeat "
                   "for several runs (the TSV then starts with a run column)")
    p.add_argument("--qrels", help="qrels: TREC (qid 0 docid rel) or BEIR TSV (query-id corpus-id score, header optional)")
    p.add_argument("--utilities", help="utilities for UDCG@k on runs: the udcg annotate --run folder, or a file")
    p.add_argument("--unannotated", default="error", choices=("error", "zero", "worst"),
                   help="a top-k document without a utility: error (default), zero (u = 0) or worst (u = -1)")
    p.add_argument("--prompt", default=None, help="with --utilities: refuse utilities made with another prompt version")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from udcg.errors import InputError

    if args.run or args.qrels or args.utilities:
        if not args.run or args.input:
            raise InputError("give one or more --run with --qrels and/or --utilities (and no INPUT) to evaluate runs")
        return _run_trec(args)
    if not args.input:
        raise InputError("give an INPUT file (or --run and --qrels)")
    return _run_contexts(args)


def _run_trec(args: argparse.Namespace) -> int:
    from udcg.experiment.run_scores import named_runs, score_runs
    from udcg.errors import InputError
    from udcg.io.files import atomic_write_text
    from udcg.metrics.evaluate import format_tsv

    if args.metrics is None:
        raise InputError("--metrics is required with --run (e.g. --metrics UDCG@5,nDCG@5,P@5)")
    scores = score_runs(named_runs(args.run), args.qrels, utilities=args.utilities, metrics=args.metrics,
                        gamma=args.gamma, theta=args.theta, unannotated=args.unannotated, model=args.model,
                        prompt_version=args.prompt)
    several = len(scores) > 1
    text = "".join(("".join(f"{name}\t{line}" for line in format_tsv(s.rows()).splitlines(keepends=True))
                    if several else format_tsv(s.rows())) for name, s in scores.items())
    atomic_write_text(args.output, text)
    for name, s in scores.items():
        for measure, mean in s.means().items():
            print(f"{name}\t" * several + f"all\t{measure}\t{mean!r}")  # the written rows' layout, qid = all
        for k, (annotated, total) in s.coverage.items():
            print(f"{name}: annotated@{k if k is not None else 'all'} = {annotated}/{total}", file=sys.stderr)
        for note in s.notes:
            print(f"{name}: {note}", file=sys.stderr)
    n = sum(len(s.qids) * len(s.values) for s in scores.values())
    print(f"wrote {n} per-query values of {len(scores)} run(s) to {args.output}", file=sys.stderr)
    return 0


def _run_contexts(args: argparse.Namespace) -> int:
    from udcg.experiment.scoring import default_metrics, means_table, read_contexts, score_rows, scored_items
    from udcg.experiment.theta import load_theta
    from udcg.io.authors import write_authors
    from udcg.metrics.contexts import parse_metrics

    rows = read_contexts(args.input, model=args.model, k=args.k)
    if args.metrics is None:
        metrics, why = default_metrics(rows, DEFAULT_METRICS, args.model)
        if why:  # nothing annotated yet: classical only
            print(f"udcg score: UDCG left out of the default metrics: {why}", file=sys.stderr)
    else:
        metrics = parse_metrics(args.metrics)
    theta = load_theta(args.theta) if args.theta else None
    values = score_rows(rows, metrics, args.gamma, theta)
    write_authors(args.output, scored_items(rows, values, args.gamma, args.k))
    print(means_table(values, f"{len(rows)} contexts from {args.input}").markdown(4))
    return 0
