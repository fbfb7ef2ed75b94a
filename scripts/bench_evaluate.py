"""Benchmark: scoring user runs with udcg (``udcg.score_runs``: UDCG@10, nDCG@10, P@10, AP) against
pytrec_eval on the classical part, in the same process.

Data (seeded): 2 runs x N queries x 100 documents with continuous scores; qrels with 5 judged
documents per query (grades 0..3, most of them inside the runs); a utility for every retrieved
(query, document) pair, as ``udcg annotate --run`` writes them. Every dict holds fresh string objects,
as if read from its own file.

Timed, cold, per arm, over the 2 runs:
- udcg: ``score_runs`` from the dicts (dicts -> matrices, the four measures, UDCG@10 with its
  coverage check) — a superset of what pytrec_eval computes;
- pytrec_eval: ``RelevanceEvaluator(qrels, {ndcg_cut_10, P_10, map})`` built and evaluated per run.

Per-query values are checked equal (1e-9) on the classical part. The last line is
``ratio: X`` = pytrec_eval seconds / udcg seconds (best of ``--repeat`` interleaved rounds each).

    .venv/bin/python scripts/bench_evaluate.py [--n-queries 20000] [--depth 100] [--repeat 3]
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # run from a checkout without installing

MEASURES = ["UDCG@10", "nDCG@10", "P@10", "AP"]
PYTREC = {"ndcg_cut_10": "nDCG@10", "P_10": "P@10", "map": "AP"}


def make_data(n: int, depth: int, seed: int):
    rng = np.random.default_rng(seed)
    runs, utilities, qrels = {}, {}, {}
    pool = [f"doc{i:07d}" for i in range(depth * 3)]
    for name in ("run_a", "run_b"):
        runs[name] = {}
    for i in range(n):
        qid = f"q{i}"
        docs = rng.choice(len(pool), size=depth * 2, replace=False)
        judged = rng.choice(docs[: depth + depth // 2], size=5, replace=False)
        qrels[qid] = {str(pool[d]): int(g) for d, g in zip(judged, rng.integers(0, 4, size=5))}
        seen: dict[str, float] = {}
        for j, name in enumerate(runs):
            chosen = docs[j * (depth // 2): j * (depth // 2) + depth]
            scores = rng.normal(size=depth)
            runs[name][qid] = {str(pool[d]): float(s) for d, s in zip(chosen, scores)}
            for d in chosen:
                seen.setdefault(str(pool[d]), 0.0)
        utilities[qid] = {d: float(u) for d, u in zip(seen, rng.uniform(-1, 1, size=len(seen)))}
    return runs, qrels, utilities


def run_ours(runs, qrels, utilities):
    from udcg.api import score_runs

    t0 = time.perf_counter()
    scores = score_runs(runs, qrels, utilities=utilities, metrics=MEASURES)
    return time.perf_counter() - t0, scores


def run_pytrec(runs, qrels):
    import pytrec_eval

    t0 = time.perf_counter()
    out = {}
    for name, run in runs.items():
        evaluator = pytrec_eval.RelevanceEvaluator(qrels, set(PYTREC))
        out[name] = evaluator.evaluate(run)
    return time.perf_counter() - t0, out


def check(ours, theirs) -> float:
    worst = 0.0
    for name, scores in ours.items():
        for key, measure in PYTREC.items():
            mine = scores.values[measure]
            ref = np.array([theirs[name][q][key] for q in scores.qids])
            worst = max(worst, float(np.abs(mine - ref).max()))
    return worst


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--n-queries", type=int, default=20_000)
    ap.add_argument("--depth", type=int, default=100)
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args()
    print(f"load average {os.getloadavg()[0]:.2f}; 2 runs x {args.n_queries} queries x {args.depth} documents; "
          f"measures {','.join(MEASURES)}", flush=True)
    t0 = time.perf_counter()
    runs, qrels, utilities = make_data(args.n_queries, args.depth, args.seed)
    print(f"data made in {time.perf_counter() - t0:.1f} s", flush=True)
    best_ours, best_theirs = float("inf"), float("inf")
    for r in range(args.repeat):
        # fresh dict copies per round, so no arm profits from the other's warm objects
        r_runs = {n: {q: dict(d) for q, d in run.items()} for n, run in runs.items()}
        seconds, ours = run_ours(r_runs, {q: dict(d) for q, d in qrels.items()},
                                 {q: dict(d) for q, d in utilities.items()})
        theirs_seconds, theirs = run_pytrec(r_runs, {q: dict(d) for q, d in qrels.items()})
        worst = check(ours, theirs)
        print(f"round {r + 1}: udcg {seconds:.2f} s (incl. UDCG@10), pytrec_eval {theirs_seconds:.2f} s "
              f"(classical only); max |diff| on the classical part {worst:.1e}", flush=True)
        if worst > 1e-9:
            print("values differ from pytrec_eval", file=sys.stderr)
            return 1
        best_ours, best_theirs = min(best_ours, seconds), min(best_theirs, theirs_seconds)
    print(f"best: udcg {best_ours:.2f} s, pytrec_eval {best_theirs:.2f} s")
    print(f"ratio: {best_theirs / best_ours:.2f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
