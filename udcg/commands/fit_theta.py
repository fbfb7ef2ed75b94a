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
    p.set_defaults(func=run)


MIN_QUESTIONS = 30  # below this, or PAIRS_PER_WEIGHT pairs per weight, fit-theta warns that the weights are unstable
PAIRS_PER_WEIGHT = 20


def _C(text: str) -> float | str:
    if text == "auto":
        return text
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r}: give a number > 0 or auto") from None
    if not value > 0:
        raise argparse.ArgumentTypeError(f"{text!r}: C must be > 0 (or auto)")
    return value


def run(args: argparse.Namespace) -> int:
    from udcg.errors import InputError
    from udcg.experiment.scoring import read_contexts
    from udcg.experiment.theta import fit_model, save_theta, training_set, validation_curve_table, weights_table

    if args.k is not None and args.k <= 0:
        raise InputError(f"--k {args.k}: must be a positive integer (the number of passages per context)")
    u, y, groups, relevance = training_set(read_contexts(args.input), args.k, args.input)
    model = fit_model(u, y, groups, relevance, args.variant, args.C, cv=args.cv_folds, cv_score=args.cv_score,
                      random_state=args.seed)
    save_theta(model, args.output)
    print(weights_table(model).markdown(4))
    weights = model.coef_.size
    if model.n_queries_ < MIN_QUESTIONS or model.n_pairs_ < PAIRS_PER_WEIGHT * weights:
        print(f"warning: fitted from {model.n_queries_} questions and {model.n_pairs_} context pairs for {weights} "
              f"weights: too few for stable weights (a rule of thumb: at least {MIN_QUESTIONS} questions with "
              f"differing outcomes and {PAIRS_PER_WEIGHT} pairs per weight); signs and sizes here may be noise, "
              "not positional effects", file=sys.stderr)
    if model.saturated_:
        print(f"warning: saturated fit: {model.margin_share_:.0%} of the {model.n_pairs_} training pairs lie inside the "
              f"margin, so the weights are the mean pair difference (cosine {model.cosine_mean_difference_:.4f}), "
              "not positional effects; a larger --C fits past the average, if the data support it", file=sys.stderr)
    curve = validation_curve_table(model)
    if curve is not None:
        print(curve.markdown(4))
    print(f"saved to {args.output}", file=sys.stderr)
    return 0
