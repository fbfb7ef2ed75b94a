"""udcg fit-theta: learn UDCG_theta's positional weights for one k from graded contexts."""

from __future__ import annotations

import argparse
import sys

from udcg.commands._parser import command

DESCRIPTION = """Fit UDCG_theta on contexts with utilities and graded outcomes (contexts JSONL: qid, utilities or
relevant+p_abs, outcome). One model per k."""


def add_parser(sub: argparse._SubParsersAction) -> None:
    p = command(sub, "fit-theta", help="learn UDCG_theta's 2k positional weights (ranking SVM)", description=DESCRIPTION,
                examples=["udcg fit-theta train_contexts.jsonl --k 5 -o theta_k5.json"])
    p.add_argument("input", help="contexts JSONL with utilities and outcomes")
    p.add_argument("-o", "--output", required=True, help="model file (JSON)")
    p.add_argument("--k", type=int, default=None, help="use contexts of exactly this k (default: the only k present)")
    p.add_argument("--variant", choices=("full", "rel-only", "binary"), default="full",
                   help="full: u+ and u- features; rel-only: u+ only; binary: 0/1 relevance instead of u+")
    p.add_argument("--C", type=_C, default=0.01,
                   help="SVM-rank's C (default 0.01, its default), or auto: chosen by cross-validation grouped by "
                   "question over 0.001 ... 1000, the smallest C within one standard error of the best")
    p.add_argument("--cv-score", choices=("spearman", "pairwise"), default="spearman",
                   help="with --C auto: held-out mean per-question Spearman (default) or pairwise ordering accuracy")
    p.add_argument("--cv-folds", type=int, default=5, help="with --C auto: GroupKFold folds over the questions (default 5)")
    p.add_argument("--seed", type=int, default=0, help="the SVM solver's random_state (default 0)")
    p.set_defaults(func=main)


def _C(text: str) -> float | str:
    """A number, else the text as given: its range (> 0, or auto) is checked with every bound (udcg.bounds)."""
    try:
        return float(text)
    except ValueError:
        return text


def main(args: argparse.Namespace) -> int:
    from udcg.flows.theta import fit_theta_file, validation_curve_table, weights_table

    theta, warnings = fit_theta_file(args.input, args.output, k=args.k, variant=args.variant, C=args.C,
                                     cv_folds=args.cv_folds, cv_score=args.cv_score, seed=args.seed)
    print(weights_table(theta).markdown(4))
    for warning in warnings:
        print(f"warning: {warning}", file=sys.stderr)
    curve = validation_curve_table(theta)
    if curve is not None:
        print(curve.markdown(4))
    print(f"saved to {args.output}", file=sys.stderr)
    return 0
