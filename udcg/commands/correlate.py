"""udcg correlate: which metric's ranking of contexts best follows the answer outcomes (paper §7.2)."""

from __future__ import annotations

import argparse
import sys

from udcg.commands._parser import command
from udcg.flows.correlate_options import CorrelateOptions

DESCRIPTION = """Per question, Spearman's rho between a metric's ranking of its contexts and their outcomes
(correct > abstained > wrong, ties shared); mean over questions with a bootstrap interval, questions without a rho
counted, paired p-values (sign-flip permutation test by default) against a baseline metric with their Holm
correction, and the pooled correlation."""


def add_parser(sub: argparse._SubParsersAction) -> None:
    p = command(sub, "correlate", help="Spearman of each metric with answer outcomes, per question",
                description=DESCRIPTION,
                examples=["udcg correlate scored.jsonl --metrics UDCG,nDCG@5,RR,AP --baseline UDCG -o table.md"])
    p.add_argument("input", help="contexts JSONL with outcomes (and metrics, or the fields to compute them)")
    CorrelateOptions.add_arguments(p)  # every other flag, declared once (udcg.flows.correlate_options)
    p.set_defaults(func=main)


def main(args: argparse.Namespace) -> int:
    from udcg.flows.correlate import compact_table, correlate_file

    options = CorrelateOptions.from_args(args)
    table, baseline, notes = correlate_file(args.input, options)
    for note in notes:
        print(f"udcg correlate: {note}", file=sys.stderr)
    if options.full:
        print(table.markdown(3))
    else:
        print(compact_table(table, baseline).markdown(3))
        print("(the compact view: every column with --full, and always in -o FILE)", file=sys.stderr)
    if options.ties:
        from udcg.flows.correlate import ties_of_file

        print("\n".join(ties_of_file(args.input, baseline or options.baseline or "UDCG", options.ties,
                                      gamma=options.gamma, theta=options.theta).lines()))
    if options.output:
        table.write(options.output)
    return 0
