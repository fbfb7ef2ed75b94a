"""udcg fit-theta: learn UDCG_theta's positional weights for one k from graded contexts."""

from __future__ import annotations

import argparse
import sys


def add_parser(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("fit-theta", help="learn UDCG_theta's 2k positional weights (ranking SVM)",
                       description="Fit UDCG_theta on contexts with utilities and graded outcomes "
                       "(contexts JSONL: qid, utilities or relevant+p_abs, outcome). One model per k.",
                       epilog="example:\n  udcg fit-theta train_contexts.jsonl --k 5 -o theta_k5.json",
                       formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("input", help="contexts JSONL with utilities and outcomes")
    p.add_argument("-o", "--output", required=True, help="model file (JSON)")
    p.add_argument("--k", type=int, default=None, help="use contexts of exactly this k (default: the only k present)")
    p.add_argument("--variant", choices=("full", "rel-only", "binary"), default="full",
                   help="full: u+ and u- features; rel-only: u+ only; binary: 0/1 relevance instead of u+")
    p.add_argument("--C", type=_C, default=0.01,
                   help="SVM-rank's C (default 0.01, its default), or auto: chosen by cross-validation grouped by "
                   "question over 0.001 ... 1000")
    p.add_argument("--cv-score", choices=("spearman", "pairwise"), default="spearman",
                   help="with --C auto: held-out mean per-question Spearman (default) or pairwise ordering accuracy")
    p.add_argument("--cv-folds", type=int, default=5, help="with --C auto: GroupKFold folds over the questions (default 5)")
    p.add_argument("--seed", type=int, default=0, help="the SVM solver's random_state (default 0)")
    p.set_defaults(func=run)


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
    import numpy as np

    from udcg.experiment.scoring import read_contexts
    from udcg.errors import InputError
    from udcg.experiment.theta import save_theta
    from udcg.metrics.udcg import UDCGTheta
    from udcg.io.tables import Table

    if args.k is not None and args.k <= 0:
        raise InputError(f"--k {args.k}: must be a positive integer (the number of passages per context)")
    rows = read_contexts(args.input)
    ks = np.array([len(f.get("utilities", [])) for f in rows.fields])
    if (ks == 0).any():
        i = int(np.flatnonzero(ks == 0)[0])
        raise InputError(f"{rows.where[i]}: no utilities (annotate first: udcg annotate)")
    k = args.k or (int(ks[0]) if len(set(ks)) == 1 else None)
    if k is None:
        raise InputError(f"{args.input}: contexts have several k ({sorted(set(ks.tolist()))}); choose one with --k")
    idx = np.flatnonzero(ks == k)
    if len(idx) == 0:
        raise InputError(f"{args.input}: --k {k}: no context has exactly {k} passages (choose a k from {sorted(set(ks.tolist()))})")
    u = np.asarray([rows.fields[i]["utilities"] for i in idx])
    y = rows.outcome_scores()[idx]
    groups = np.asarray([rows.qid[i] for i in idx])
    rel = np.asarray([rows.fields[i]["relevant"] for i in idx], dtype=bool)
    model = UDCGTheta(variant=args.variant, C=args.C, cv=args.cv_folds, cv_score=args.cv_score, random_state=args.seed)
    model.fit(u, y, groups, relevance=rel if args.variant == "binary" else None)
    save_theta(model, args.output)
    t = Table(["position", "alpha", "beta"], title=f"UDCG_theta ({args.variant}, k={k}, C = {model.C_:g}) from "
              f"{model.n_queries_} questions, {model.n_pairs_} pairs")
    for i, (a, b) in enumerate(zip(model.alpha_, model.beta_), start=1):
        t.add(position=i, alpha=float(a), beta=float(b))
    print(t.markdown(4))
    if model.cv_results_:
        cv = model.cv_results_
        curve = Table(["C", f"mean held-out {cv['score']}", "chosen"],
                      title=f"validation curve ({cv['folds']} folds grouped by question)")
        for C, mean in zip(cv["C"], cv["mean"]):
            curve.add(**{"C": C, f"mean held-out {cv['score']}": float("nan") if mean is None else mean,
                         "chosen": "*" if C == model.C_ else ""})
        print(curve.markdown(4))
    print(f"saved to {args.output}", file=sys.stderr)
    return 0
