"""udcg compare: several runs side by side, with paired differences, their intervals and detectable
differences, paired tests and Holm's correction per measure (ranx style); judged answers optional."""

from __future__ import annotations

import argparse
import sys

from udcg.commands._parser import command

FORMATS = {".md": "markdown", ".csv": "csv", ".json": "json", ".tex": "latex"}


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
    p.add_argument("--run", action="append", default=[], help="TREC run file (give two or more; key runs: in --config)")
    p.add_argument("--qrels", help="qrels: TREC (qid 0 docid rel), BEIR TSV or irds:NAME; needed for classical measures")
    p.add_argument("--utilities", help="utilities for UDCG@k: the udcg annotate --run folder, or a file")
    p.add_argument("--metrics", default="UDCG@5,nDCG@5,P@5,RR@5", help="measures (default UDCG@5,nDCG@5,P@5,RR@5)")
    p.add_argument("--test", default="permutation", choices=("permutation", "t", "wilcoxon"),
                   help="paired test (default permutation: sign flips, exact for n <= 24)")
    p.add_argument("--correction", default="measure", choices=("measure", "table", "none"),
                   help="the Holm family: measure (default: the run pairs of each measure), table (every run pair x "
                   "every measure) or none (raw p)")
    p.add_argument("--alpha", type=float, default=0.05, help="significance level after the correction (default 0.05)")
    p.add_argument("--power", type=float, default=0.8, help="power of the minimum detectable difference (default 0.8)")
    p.add_argument("--answers", help="judged answers (udcg answer, then udcg judge answer): adds each run's correct / "
                   "abstained / wrong rates, matched by cid = run file name")
    p.add_argument("--judged-only", action="store_true",
                   help="with --answers: every row, the measures included, on the queries where every run has a "
                   "judged answer (one population for answer rates and metrics, e.g. after udcg answer --sample)")
    p.add_argument("--ties", metavar="MEASURE",
                   help="one of --metrics (e.g. nDCG@5): add a table of every other measure on each run pair's queries "
                   "where the two runs tie on it, with the same tests: a difference there is one MEASURE cannot show")
    p.add_argument("--equivalence", metavar="MARGINS",
                   help="the smallest difference that matters, one number for every row (e.g. 0.01) or per row "
                   "(UDCG@5=0.005,nDCG@5=0.02): adds each pair's equivalence test (TOST, the same test and correction) "
                   "and a decision: different, equivalent, different within the margin, or inconclusive")
    p.add_argument("--baseline", metavar="RUN",
                   help="compare each other run with this one only (a run's name, e.g. bm25, or its file as given to "
                   "--run): one comparison per other run in each Holm family instead of every pair")
    p.add_argument("--n-resamples", type=int, default=100_000,
                   help="random sign flips when n > 24 (default 100000; more for a smaller Monte Carlo error of p)")
    p.add_argument("--n-boot", type=int, default=10_000, help="bootstrap resamples for the intervals (default 10000)")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--gamma", type=float, default=1 / 3, help="UDCG's weight of the negative part (paper: 1/3)")
    p.add_argument("--theta", help="a fitted UDCG_theta model (JSON) for UDCG_theta@k")
    p.add_argument("--unannotated", default="error", choices=("error", "zero", "worst"),
                   help="a top-k document without a utility: error (default), zero (u = 0) or worst (u = -1)")
    p.add_argument("--model", help="refuse utilities made by another model")
    p.add_argument("--prompt", help="refuse utilities made with another prompt version")
    p.add_argument("--format", choices=("markdown", "csv", "json", "latex"), help="default: from -o's extension, "
                   "else markdown")
    p.add_argument("-o", "--output", help="write the table here (.md, .csv, .json, .tex); it is printed too")
    p.add_argument("--plot", metavar="FILE", help="write a forest plot of the table's pair rows (.png or .svg; needs "
                   "matplotlib): each pair's difference, its interval and ±MDD, one panel per measure")
    p.add_argument("--per-query", metavar="TSV", help="write which queries drive each gap: one row per measure and "
                   "query, each run's value and each compared pair's difference A - B (TSV with a header)")
    p.add_argument("--label-rows", metavar="TSV", help="with --qrels: write the label checks' per-query rows (relevant "
                   "count, corpus share, flags, each run's unjudged top-k pairs) as TSV (the footer's labels block)")
    _config_keys(p)
    p.set_defaults(func=main)


def _config_keys(p: argparse.ArgumentParser) -> None:
    """Every option but --config is a key of --config's file: its default kept aside and set to None
    here, so that main knows which flags were given (they override the file)."""
    from udcg.flows.compare_config import Option

    actions = [a for a in p._actions if a.option_strings and a.dest not in ("help", "config")]
    options = [Option(a.dest, repeated=isinstance(a, argparse._AppendAction), switch=isinstance(a, argparse._StoreTrueAction),
                      convert=a.type, choices=a.choices) for a in actions]
    defaults = {a.dest: a.default for a in actions}
    p.set_defaults(**dict.fromkeys(defaults), config_options=options, config_defaults=defaults)


def main(args: argparse.Namespace) -> int:
    from pathlib import Path

    from udcg.errors import InputError
    from udcg.flows.compare_config import merged, read_options
    from udcg.flows.run_compare import compare_run_files
    from udcg.flows.label_checks import label_details, write_label_rows
    from udcg.flows.run_scores import alias_notes, named_runs
    from udcg.flows.score import score_notes

    from_file = read_options(args.config, args.config_options) if args.config else {}
    args = argparse.Namespace(**{**vars(args), **merged(vars(args), from_file, args.config_defaults)})
    if len(args.run) < 2:
        raise InputError(f"--run: compare needs two or more runs, got {len(args.run)} (give --run twice or more, or --config "
                         "FILE with runs:; use udcg score for one)")
    if args.label_rows and not args.qrels:
        raise InputError("--label-rows: the label checks read the qrels; give --qrels")
    fmt = args.format or (FORMATS.get(Path(args.output).suffix.lower(), "markdown") if args.output else "markdown")
    text, scores = compare_run_files(args.run, args.output, fmt, qrels=args.qrels, utilities=args.utilities,
                                     metrics=args.metrics, gamma=args.gamma, theta=args.theta,
                                     unannotated=args.unannotated, model=args.model, prompt_version=args.prompt,
                                     answers=args.answers, test=args.test, alpha=args.alpha,
                                     n_resamples=args.n_resamples, n_boot=args.n_boot, seed=args.seed,
                                     correction=args.correction, power=args.power, judged_only=args.judged_only,
                                     ties=args.ties, equivalence=args.equivalence, baseline=args.baseline,
                                     plot=args.plot, per_query=args.per_query)
    print(text)
    labels = next(iter(scores.values())).labels
    if args.verbose:  # the footer holds the label block: only what -v adds to it, when there is any
        for line in label_details(labels, dict(zip(named_runs(args.run), args.run)), args.utilities):
            print(line, file=sys.stderr)
    if args.label_rows:
        write_label_rows(args.label_rows, labels)
    for line in alias_notes(args.metrics):
        print(line, file=sys.stderr)
    for line in score_notes(scores):
        print(line, file=sys.stderr)
    return 0
