"""Benchmark: udcg's metrics vs pytrec_eval on the same in-memory run and qrels.

Data (seeded): N queries, each with 30 judged passages (grades 0..4, some -1 "harmful" in the
qrels), a run of the top 20 of them with continuous scores, and a per-passage abstention
probability (for UDCG). Timing is cold for us — the first call counts — and includes turning the
dicts into matrices. pytrec_eval gets the same dicts; its time includes building the evaluator.

Ours computes a superset: every classical measure pytrec_eval computes here, plus F1@k, RR@10,
ERR@k, DCG@k, AUC-PR (pytrec_eval has no such measure; it computes the 11 iprec points AUC-PR is
built from), UDCG and RA-nWG@5. ``ratio`` = pytrec_eval time / our total time (everything).

    .venv/bin/python scripts/bench_metrics.py [--n-queries 100000] [--seed 0] [--check]
    .venv/bin/python scripts/bench_metrics.py --walks 3   # dicts -> matrices only: C walk vs Python walk
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # run from a checkout without installing

DEPTH, JUDGED = 20, 30
OURS = ("P@5,P@10,P@20,R@5,R@10,R@20,Success@1,Success@5,Success@10,RR,AP,AP@10,Rprec,"
        "nDCG,nDCG@5,nDCG@10,nDCG@20,AUC-PR,F1@5,F1@10,RR@10,ERR@10,ERR@20,DCG@10")
PYTREC = {"P_5", "P_10", "P_20", "recall_5", "recall_10", "recall_20", "success_1", "success_5",
          "success_10", "recip_rank", "map", "map_cut_10", "Rprec", "ndcg", "ndcg_cut_5", "ndcg_cut_10",
          "ndcg_cut_20", "iprec_at_recall"}
SAME = {"P@5": "P_5", "P@10": "P_10", "R@10": "recall_10", "Success@5": "success_5", "RR": "recip_rank",
        "AP": "map", "AP@10": "map_cut_10", "Rprec": "Rprec", "nDCG": "ndcg", "nDCG@10": "ndcg_cut_10"}


def make_data(n: int, seed: int):
    """{qid: {docid: score}}, {qid: {docid: grade}}, {qid: {docid: p_abs}} with fresh string objects
    per dict, as if each had been read from its own file."""
    rng = np.random.default_rng(seed)
    docs = rng.choice(10**7, size=(n, JUDGED), replace=True)
    grades = rng.choice([-1, 0, 1, 2, 3, 4], p=[0.05, 0.45, 0.2, 0.15, 0.1, 0.05], size=(n, JUDGED))
    scores = rng.normal(size=(n, DEPTH))
    p_abs = rng.random(size=(n, DEPTH))
    run, qrels, abst = {}, {}, {}
    for i in range(n):
        ids = list(dict.fromkeys(docs[i].tolist()))  # distinct docids of this query
        qrels[f"q{i}"] = {f"doc{d:07d}": g for d, g in zip(ids, grades[i].tolist())}
        run[f"q{i}"] = {f"doc{d:07d}": s for d, s in zip(ids[:DEPTH], scores[i].tolist())}
        abst[f"q{i}"] = {f"doc{d:07d}": p for d, p in zip(ids[:DEPTH], p_abs[i].tolist())}
    return run, qrels, abst


def run_ours(run, qrels, abst, timings):
    from udcg.metrics.evaluate import evaluate_table, gain_table
    from udcg.metrics.setbased import ra_nwg
    from udcg.metrics.udcg import udcg_matrix, utilities_from

    t0 = time.perf_counter()
    table = gain_table(run, qrels, extra={"p_abs": abst})  # p_abs put in rank order in the same pass
    t1 = time.perf_counter()
    values = {str(m): v for m, v in evaluate_table(table, OURS).items()}
    t2 = time.perf_counter()
    utilities = utilities_from(table.gains[:, :DEPTH] >= 1, table.extra["p_abs"][:, :DEPTH])
    values["UDCG"] = udcg_matrix(utilities)
    t3 = time.perf_counter()
    # RA-nWG: grade 1..5 = qrels gain + 1 (gain -1 and 0 -> grade 1); every retrieved passage is judged.
    n_judged = table.n_judged
    topk = np.clip(table.gains[:, :DEPTH], 0, 4).astype(np.int64) + 1
    upper = np.stack([(table.ideal == g - 1).sum(1) for g in range(2, 6)], axis=1)  # grades 2..5
    counts = np.hstack([(n_judged - upper.sum(1))[:, None], upper])
    values["RA-nWG@5"] = ra_nwg(topk, counts, k=5)
    t4 = time.perf_counter()
    timings.update({"ours: dicts -> matrices (incl. p_abs)": t1 - t0, "ours: classical measures": t2 - t1,
                    "ours: UDCG": t3 - t2, "ours: RA-nWG@5": t4 - t3})
    return table.qids, values


def run_pytrec(run, qrels, timings):
    import pytrec_eval

    t0 = time.perf_counter()
    evaluator = pytrec_eval.RelevanceEvaluator(qrels, PYTREC)
    t1 = time.perf_counter()
    result = evaluator.evaluate(run)
    t2 = time.perf_counter()
    timings.update({"pytrec_eval: RelevanceEvaluator(qrels)": t1 - t0, "pytrec_eval: evaluate(run)": t2 - t1})
    return result


def check(qids, values, result) -> float:
    worst = 0.0
    for ours_name, theirs_name in SAME.items():
        theirs = np.array([result[q][theirs_name] for q in qids])
        worst = max(worst, float(np.abs(values[ours_name] - theirs).max()))
    return worst


def repeat_cold(args: argparse.Namespace) -> None:
    """Each repetition is a fresh interpreter, so our first call is always cold."""
    import statistics
    import subprocess

    ratios = []
    for i in range(args.repeat):
        cmd = [sys.executable, __file__, "--n-queries", str(args.n_queries), "--seed", str(args.seed)]
        out = subprocess.run(cmd + (["--check"] if args.check else []), capture_output=True, text=True,
                             check=True).stdout
        print(f"--- run {i + 1}/{args.repeat}\n{out}", end="")
        ratios.append(float(out.strip().splitlines()[-1].split()[1]))
    print(f"ratios: {', '.join(f'{r:.2f}' for r in ratios)} (median of {args.repeat} cold runs below)")
    print(f"ratio: {statistics.median(ratios):.2f}")


def compare_walks(run, qrels, abst, rounds: int) -> None:
    """gain_table with the C dict walk and with the pure-Python one, interleaved in this process."""
    from udcg.metrics import evaluate, gains

    walk = gains._walk
    if walk is None:
        print("the C walk is not built (no compiler at install): nothing to compare")
        return
    seconds: dict[str, list[float]] = {"C walk": [], "Python walk": []}
    for r in range(rounds):
        for arm in (("C walk", "Python walk") if r % 2 == 0 else ("Python walk", "C walk")):
            gains._walk = walk if arm == "C walk" else None
            t = time.perf_counter()
            evaluate.gain_table(run, qrels, extra={"p_abs": abst})
            seconds[arm].append(time.perf_counter() - t)
    gains._walk = walk
    for arm, values in seconds.items():
        print(f"{arm:<12} dicts -> matrices: {', '.join(f'{v:.2f}' for v in values)} s")
    print(f"walk ratio: {sum(seconds['Python walk']) / sum(seconds['C walk']):.2f}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n-queries", type=int, default=100_000)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--check", action="store_true", help="also compare shared measures (after timing)")
    parser.add_argument("--repeat", type=int, default=1,
                        help="run N fresh processes (each cold) and report the median ratio (default 1)")
    parser.add_argument("--walks", type=int, default=0, metavar="ROUNDS",
                        help="only compare the C and Python dict walks over ROUNDS interleaved rounds")
    args = parser.parse_args()
    if args.n_queries < 1 or args.repeat < 1 or args.walks < 0:
        parser.error("--n-queries and --repeat must be >= 1, --walks >= 0")
    if args.repeat > 1:
        repeat_cold(args)
        return

    t = time.perf_counter()
    run, qrels, abst = make_data(args.n_queries, args.seed)
    print(f"data: {args.n_queries} queries x {DEPTH} ranked passages, {JUDGED} judged "
          f"(generated in {time.perf_counter() - t:.2f} s, not timed)")
    print(f"machine: {os.cpu_count()} CPUs, load average {os.getloadavg()[0]:.1f} at start")
    if args.walks:
        compare_walks(run, qrels, abst, args.walks)
        return
    timings: dict[str, float] = {}
    qids, values = run_ours(run, qrels, abst, timings)
    result = run_pytrec(run, qrels, timings)
    ours_total = sum(v for k, v in timings.items() if k.startswith("ours"))
    theirs_total = sum(v for k, v in timings.items() if k.startswith("pytrec_eval"))
    for name, seconds in timings.items():
        print(f"{name:<42} {seconds:8.3f} s")
    print(f"{'ours: total':<42} {ours_total:8.3f} s  ({len(values)} measures)")
    print(f"{'pytrec_eval: total':<42} {theirs_total:8.3f} s  ({len(PYTREC) + 10} measures, iprec = 11)")
    if args.check:
        print(f"max |ours - pytrec_eval| over {len(SAME)} shared measures: {check(qids, values, result):.3g}")
    print(f"ratio: {theirs_total / ours_total:.2f}")


if __name__ == "__main__":
    main()
