"""udcg fit-theta: learn UDCG_theta's positional weights for one k from graded contexts."""

from __future__ import annotations

import argparse
import sys

from udcg.commands._parser import command
from udcg.flows.theta_options import FitThetaOptions

DESCRIPTION = """Fit UDCG_theta on contexts with utilities and graded outcomes (contexts JSONL: qid, utilities or
relevant+p_abs, outcome). One model per k."""


def add_parser(sub: argparse._SubParsersAction) -> None:
    p = command(sub, "fit-theta", help="learn UDCG_theta's 2k positional weights (ranking SVM)", description=DESCRIPTION,
                examples=["udcg fit-theta train_contexts.jsonl --k 5 -o theta_k5.json"])
    p.add_argument("input", help="contexts JSONL with utilities and outcomes")
    p.add_argument("-o", "--output", required=True, help="model file (JSON)")
    FitThetaOptions.add_arguments(p)
    p.set_defaults(func=main)


def main(args: argparse.Namespace) -> int:
    from udcg.flows.theta import fit_theta_file, validation_curve_table, weights_table

    theta, warnings = fit_theta_file(args.input, args.output, FitThetaOptions.from_args(args))
    print(weights_table(theta).markdown(4))
    for warning in warnings:
        print(f"warning: {warning}", file=sys.stderr)
    curve = validation_curve_table(theta)
    if curve is not None:
        print(curve.markdown(4))
    print(f"saved to {args.output}", file=sys.stderr)
    return 0
