"""udcg compare: several runs side by side, with paired differences, their intervals and detectable
differences, paired tests and Holm's correction per measure (ranx style); judged answers optional."""

from __future__ import annotations

import argparse
import sys

from udcg.commands._parser import command
from udcg.flows.run_options import CompareOptions


def add_parser(sub: argparse._SubParsersAction) -> None:
    p = command(sub, "compare", help="compare runs: means, 95%% intervals, paired differences, tests, Holm per measure",
                description="""Score every run on the same queries and compare them: one row per run with the mean
                and a 95% bootstrap interval of each measure; for every pair of runs the mean paired difference with
                its interval (from the same resampled queries), the minimum detectable difference (MDD: the true
                difference the test would detect with 80% power (--power), estimated from the spread of the paired
                differences) and a paired test (default: sign-flip permutation test, exact up to 24 queries, else 100,000 seeded random sign flips with the
                Monte Carlo standard error of p in the footer), with
                Holm's correction over the run pairs of each measure (--correction). A run's superscript letters
                name the runs it beats (adjusted p < alpha). --answers adds the correct / abstained / wrong rates of
                the runs' judged answers as three more rows, with the same tests.""",
                examples=[("udcg compare --run bm25.trec --run dense.trec --qrels qrels.tsv --utilities utilities \\\n"
                           "      --metrics UDCG@5,nDCG@5,P@5"),
                          ("udcg compare --run bm25.trec --run dense.trec --qrels qrels.tsv --utilities utilities \\\n"
                           "      --metrics UDCG@5,nDCG@5 --answers judged.jsonl"),
                          ("udcg compare --run bm25.trec --run dense.trec --qrels qrels.tsv --utilities utilities \\\n"
                           "      --metrics UDCG@5,nDCG@5 --ties nDCG@5"),
                          ("udcg compare --run a.trec --run b.trec --run c.trec --qrels q.tsv --metrics nDCG@10,AP "
                           "--test t --correction table -o table.tex"),
                          ("udcg compare --run bm25.trec --run dense.trec --run hybrid.trec --qrels qrels.tsv "
                           "--utilities utilities --baseline bm25"),
                          "udcg compare --config configs/compare/quickstart.yaml --test t   # the file's options, --test overridden"])
    p.add_argument("--config", metavar="FILE.yaml", help="these options from a YAML file, one key per option (runs: "
                   "[...], qrels:, utilities:, metrics:, test:, correction:, n_boot: ... as the flags are spelled, - as _); "
                   "a flag given here overrides its key (configs/compare/quickstart.yaml)")
    CompareOptions.add_arguments(p)  # every other flag, declared once (udcg.flows.run_options)
    p.set_defaults(func=main)


def main(args: argparse.Namespace) -> int:
    from udcg.errors import InputError
    from udcg.flows.compare_config import read_options
    from udcg.flows.run_compare import compare_run_files
    from udcg.flows.label_checks import label_details, write_label_rows
    from udcg.flows.run_scores import named_runs
    from udcg.flows.score import score_notes

    from_file = read_options(args.config, args.config_options) if args.config else {}
    options = CompareOptions.from_args(args, from_file)
    if len(options.runs) < 2:
        raise InputError(f"--run: compare needs two or more runs, got {len(options.runs)} (give --run twice or more, or "
                         "--config FILE with runs:; use udcg score for one)")
    if options.label_rows and not options.qrels:
        raise InputError("--label-rows: the label checks read the qrels; give --qrels")
    text, scores = compare_run_files(options)
    print(text)
    labels = next(iter(scores.values())).labels
    if args.verbose:  # the footer holds the label block: only what -v adds to it, when there is any
        for line in label_details(labels, dict(zip(named_runs(options.runs), options.runs)), options.utilities):
            print(line, file=sys.stderr)
    if options.label_rows:
        write_label_rows(options.label_rows, labels)
    for line in score_notes(scores, options.metrics):
        print(line, file=sys.stderr)
    return 0
