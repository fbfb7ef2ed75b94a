"""Benchmark: `udcg.compare` against `ranx.compare` on the same in-memory runs and qrels.

Data (seeded): N queries, each with 30 judged passages (grades 0..3), R runs each ranking 20 of
them with continuous scores. Both compare every pair of runs on nDCG@10, P@10, RR@10 and AP@10
with the paired t-test (ranx's "student": the test both offer), and both compute the measures from
the dicts. ranx's time is warm (its numba functions compiled by a first call on a small copy, not
counted); udcg is timed twice, its first call (imports included) and a second one. udcg does more
per call: a 95% bootstrap interval of every
mean and paired difference (10,000 resamples), the detectable difference and Holm's correction.

    .venv/bin/python scripts/bench_compare.py [--n-queries 5000] [--runs 4] [--seed 0]

Prints each side's time, the largest difference of the means and p-values between the two (a
check, after timing), udcg's default comparison (sign-flip permutation test, 100,000 flips) for
information, ``ratio (udcg's first call): X`` and last ``ratio: X`` = ranx time / udcg's second
call's time (t-test, both warm).
"""

from __future__ import annotations

import argparse
import sys
import time
import warnings
from itertools import combinations
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # run from a checkout without installing

DEPTH, JUDGED = 20, 30
MEASURES = {"nDCG@10": "ndcg@10", "P@10": "precision@10", "RR@10": "mrr@10", "AP@10": "map@10"}


def make_data(n: int, runs: int, seed: int) -> tuple[dict, dict]:
    """{run: {qid: {docid: score}}} and {qid: {docid: grade}}, fresh strings per run."""
    rng = np.random.default_rng(seed)
    docs = rng.choice(10**7, size=(n, JUDGED), replace=True)
    grades = rng.choice([0, 1, 2, 3], p=[0.55, 0.25, 0.12, 0.08], size=(n, JUDGED))
    qrels, out = {}, {}
    ids = [list(dict.fromkeys(docs[i].tolist())) for i in range(n)]
    for i in range(n):
        qrels[f"q{i}"] = {f"doc{d:07d}": g for d, g in zip(ids[i], grades[i].tolist())}
    for r in range(runs):
        scores = rng.normal(size=(n, DEPTH))
        out[f"run{r}"] = {f"q{i}": {f"doc{ids[i][j]:07d}": s for j, s in zip(rng.permutation(len(ids[i]))[:DEPTH].tolist(),
                                                                              scores[i].tolist())}
                          for i in range(n)}
    return out, qrels


def run_udcg(runs: dict, qrels: dict, test: str):
    import udcg

    t0 = time.perf_counter()
    cmp = udcg.compare(runs, qrels, metrics=list(MEASURES), test=test)
    return cmp, time.perf_counter() - t0


def run_ranx(runs: dict, qrels: dict):
    import ranx

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # numba's type-safety warnings
        small = {q: qrels[q] for q in list(qrels)[:50]}
        ranx.compare(ranx.Qrels.from_dict(small), [ranx.Run.from_dict({q: r[q] for q in small}, name=n)
                                                   for n, r in runs.items()],
                     list(MEASURES.values()), stat_test="student")  # compile, not timed
        t0 = time.perf_counter()
        report = ranx.compare(ranx.Qrels.from_dict(qrels), [ranx.Run.from_dict(r, name=n) for n, r in runs.items()],
                              list(MEASURES.values()), stat_test="student")
        return report, time.perf_counter() - t0


def check(cmp, report) -> tuple[float, float]:
    """Largest |mean difference| and |p difference| between the two reports."""
    means = max(abs(cmp.cells[r][m].mean - report.results[r][theirs]) for r in cmp.runs for m, theirs in MEASURES.items())
    ps = [abs(t.p - report.comparisons[t.run_a, t.run_b][MEASURES[t.measure]]["p_value"]) for t in cmp.pairs]
    return float(means), float(np.nanmax(ps))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--n-queries", type=int, default=5000)
    ap.add_argument("--runs", type=int, default=4)
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args()
    runs, qrels = make_data(args.n_queries, args.runs, args.seed)
    n_pairs = len(list(combinations(runs, 2))) * len(MEASURES)
    print(f"{args.n_queries:,} queries, {args.runs} runs of {DEPTH} passages, {len(MEASURES)} measures: "
          f"{n_pairs} paired comparisons")
    cmp, first = run_udcg(runs, qrels, "t")
    cmp, ours = run_udcg(runs, qrels, "t")
    report, theirs = run_ranx(runs, qrels)
    print(f"udcg.compare (t-test, with 95% bootstrap intervals, MDD, Holm): first call {first:.2f} s, "
          f"second {ours:.2f} s")
    print(f"ranx.compare (student, warm): {theirs:.2f} s")
    means, ps = check(cmp, report)
    print(f"check: largest |mean difference| {means:.2e}, largest |p difference| {ps:.2e}")
    _, default = run_udcg(runs, qrels, "permutation")
    print(f"udcg.compare default (sign-flip test, 100,000 flips, for information): {default:.2f} s")
    print(f"ratio (udcg's first call): {theirs / first:.2f}")
    print(f"ratio: {theirs / ours:.2f}")


if __name__ == "__main__":
    main()
