"""udcg correlate: which metric's ranking of contexts best follows the answer outcomes (paper §7.2)."""

from __future__ import annotations

import argparse
import sys

from udcg.commands._parser import command
from udcg.flows.run_options import TESTS

DESCRIPTION = """Per question, Spearman's rho between a metric's ranking of its contexts and their outcomes
(correct > abstained > wrong, ties shared); mean over questions with a bootstrap interval, questions without a rho
counted, paired p-values (sign-flip permutation test by default) against a baseline metric with their Holm
correction, and the pooled correlation."""


def add_parser(sub: argparse._SubParsersAction) -> None:
    p = command(sub, "correlate", help="Spearman of each metric with answer outcomes, per question",
                description=DESCRIPTION,
                examples=["udcg correlate scored.jsonl --metrics UDCG,nDCG@5,RR,AP --baseline UDCG -o table.md"])
    p.add_argument("input", help="contexts JSONL with outcomes (and metrics, or the fields to compute them)")
    p.add_argument("--metrics", default=None, help="metrics to compare (default: every metric in the file's 'metrics')")
    p.add_argument("--baseline", default=None, help="metric the others are tested against (paired test; default UDCG, "
                   "when it is among the metrics)")
    p.add_argument("--test", default="permutation", choices=TESTS,
                   help="paired test of the per-question rhos against the baseline: permutation (default), t or "
                   "wilcoxon")
    p.add_argument("--n-resamples", type=int, default=100_000,
                   help="random sign flips of the permutation test beyond 24 questions (default 100000; exact "
                   "enumeration up to 24); the footer gives the Monte Carlo standard error of p")
    p.add_argument("--gamma", type=float, default=1 / 3)
    p.add_argument("--theta", default=None, help="fitted UDCG_theta model, to include UDCG_theta")
    p.add_argument("--constant-metric", choices=("zero", "drop"), default="zero",
                   help="a question whose outcomes differ but whose metric is constant: rho = 0 (default) or excluded")
    p.add_argument("--equivalence", type=float, default=None, metavar="MARGIN",
                   help="the smallest rho difference from the baseline that matters (e.g. 0.03): adds each metric's "
                   "two one-sided tests against the baseline (the same test, Holm over the same family) and a "
                   "decision: different, equivalent, different within the margin, or inconclusive")
    p.add_argument("--n-boot", type=int, default=10_000, help="bootstrap resamples for the intervals")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--ties", metavar="METRIC", default=None,
                   help="also the tie decomposition of the baseline (default UDCG) against METRIC (e.g. nDCG@5): among "
                   "the context pairs whose outcomes differ, the share METRIC scores equal, how often each orders "
                   "those and the other pairs right")
    p.add_argument("--full", action="store_true", help="print every column (intervals and raw/Holm p of rho, tau-b "
                   "and pairwise accuracy, pooled rho, counts); default: metric, rho [95%% CI], p vs baseline (Holm), "
                   "tau-b, pairwise accuracy")
    p.add_argument("-o", "--output", default=None, help="write the full table (.md, .csv or .json), whatever --full")
    p.set_defaults(func=main)


def main(args: argparse.Namespace) -> int:
    from udcg.flows.correlate import compact_table, correlate_file

    table, baseline, notes = correlate_file(args.input, metrics=args.metrics, baseline=args.baseline, gamma=args.gamma,
                                            theta=args.theta, constant_metric=args.constant_metric, n_boot=args.n_boot,
                                            seed=args.seed, test=args.test, n_resamples=args.n_resamples,
                                            equivalence=args.equivalence)
    for note in notes:
        print(f"udcg correlate: {note}", file=sys.stderr)
    if args.full:
        print(table.markdown(3))
    else:
        print(compact_table(table, baseline).markdown(3))
        print("(the compact view: every column with --full, and always in -o FILE)", file=sys.stderr)
    if args.ties:
        from udcg.flows.correlate import ties_of_file

        print("\n".join(ties_of_file(args.input, baseline or args.baseline or "UDCG", args.ties, gamma=args.gamma,
                                      theta=args.theta).lines()))
    if args.output:
        table.write(args.output)
    return 0
