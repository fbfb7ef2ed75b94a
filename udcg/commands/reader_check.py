"""udcg reader-check: can the reader of a utilities folder measure distraction? (no model time)"""

from __future__ import annotations

import argparse
import json

from udcg.commands._parser import command
from udcg.flows.reader_check_options import ReaderCheckOptions


def add_parser(sub: argparse._SubParsersAction) -> None:
    p = command(sub, "reader-check", help="can this reader measure distraction? from a utilities folder, no model",
                description="""From the p_abs udcg annotate --run already wrote (no model time), for each utilities
                folder: pairs relevant / judged-irrelevant / unjudged, their mean p_abs, the share of irrelevant
                pairs the reader answers from (p_abs < 0.5), the AUC with which p_abs separates irrelevant from
                relevant pairs (95% bootstrap interval over queries), and a verdict: the reader can measure
                distraction when that AUC is at least 0.75 and it answers from at most half of the irrelevant
                pairs (thresholds from the published reader data: docs/reliability.md#reader-check). udcg
                annotate --run prints the same check at its end and writes it to the folder's meta.json. On which
                queries: a line counts the queries where the reader answers from an irrelevant pair and those
                where it abstains on a relevant one; -o writes every query's counts and mean p_abs as a TSV.""",
                examples=["udcg reader-check utilities-0.5b utilities-1.5b",
                          "udcg reader-check utilities --json",
                          "udcg reader-check utilities -o queries.tsv"])
    p.add_argument("utilities", nargs="+", help="utilities folder(s) written by udcg annotate --run (or utilities.jsonl)")
    ReaderCheckOptions.add_arguments(p)
    p.set_defaults(func=main)


def main(args: argparse.Namespace) -> int:
    from udcg.flows.reader_check import check_all, write_query_checks

    o = ReaderCheckOptions.from_args(args)
    if o.plot:
        from udcg.flows.plots import figure_path, plot_reader_checks

        figure_path(o.plot)
    checks = check_all(args.utilities, o)
    if o.plot:
        plot_reader_checks(args.utilities, checks, o.plot)
    if o.output:
        write_query_checks(o.output, {str(path): c for path, c in zip(args.utilities, checks)})
    if o.json:
        print(json.dumps({str(path): c.to_dict() for path, c in zip(args.utilities, checks)}, indent=2, sort_keys=True))
        return 0
    from udcg.flows.label_checks import recorded_labels

    for path, check in zip(args.utilities, checks):
        print(f"{path}:")
        print("\n".join(check.lines() + check.query_lines() + recorded_labels(path)))
    return 0
