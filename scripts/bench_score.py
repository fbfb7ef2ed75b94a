"""Benchmark: ``udcg score --run`` against ir_measures on the same TREC run and qrels FILES, end to
end, each in its own subprocess (interpreter start, imports, reading, scoring, writing).

Data (seeded, written once into a temporary folder): a run of N queries x DEPTH documents in TREC
format (``qid Q0 docid rank score tag``, docids drawn from 8.8M MS MARCO-like ids, scores rounded
to 4 decimals so that some tie) and graded qrels (grades 0..3, ``--judged`` documents per query,
most of them inside the run, a few queries judged but missing from the run).

Timed, per round, interleaved, cold (a fresh process each):
- udcg: ``python -m udcg score --run RUN --qrels QRELS --metrics nDCG@10,RR@10,R@1000,AP -o OUT``;
- ir_measures: ``ir_measures.calc_aggregate([nDCG@10, RR@10, R@1000, AP], read_trec_qrels(QRELS),
  read_trec_run(RUN))`` in a minimal script.

Peak resident memory of each child is its ``ru_maxrss`` (``os.wait4``). The means must agree to
1e-9. The last line is ``ratio: X`` = ir_measures seconds / udcg seconds (best of ``--repeat``).

    .venv/bin/python scripts/bench_score.py [--queries 7000] [--depth 1000] [--repeat 1]
    .venv/bin/python scripts/bench_score.py --profile   # + udcg under cProfile and -X importtime
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
MEASURES = "nDCG@10,RR@10,R@1000,AP"
IR_MEASURES = """
import sys, ir_measures
from ir_measures import nDCG, RR, R, AP
means = ir_measures.calc_aggregate([nDCG@10, RR@10, R@1000, AP], ir_measures.read_trec_qrels(sys.argv[1]),
                                   ir_measures.read_trec_run(sys.argv[2]))
for measure, value in means.items():
    print(f"{measure}\\t{value!r}")
"""


def write_data(folder: Path, n: int, depth: int, judged: int, seed: int) -> tuple[Path, Path]:
    """A TREC run and graded qrels; the run is written query by query, ranks 1..depth."""
    rng = np.random.default_rng(seed)
    run_path, qrels_path = folder / "run.trec", folder / "qrels.txt"
    with open(run_path, "w") as run, open(qrels_path, "w") as qrels:
        for i in range(n):
            qid = f"q{i}"
            docs = np.unique(rng.integers(0, 8_841_823, size=depth + judged))[: depth + judged]
            docs = rng.permutation(docs)
            scores = np.sort(np.round(rng.normal(10.0, 2.0, size=depth), 4))[::-1]
            if i % 50 != 7:  # every 50th query is judged but absent from the run
                run.write("".join(f"{qid} Q0 {d} {r} {s:.4f} bench\n"
                                  for r, (d, s) in enumerate(zip(docs[:depth].tolist(), scores.tolist()), start=1)))
            # most judged documents inside the run (anywhere in it), the rest outside
            inside = rng.choice(min(depth, len(docs)), size=min(judged - judged // 4, depth), replace=False)
            chosen = np.concatenate([docs[inside], docs[depth:depth + judged // 4]])
            grades = rng.choice([0, 1, 2, 3], p=[0.4, 0.3, 0.2, 0.1], size=len(chosen))
            qrels.write("".join(f"{qid} 0 {d} {g}\n" for d, g in zip(chosen.tolist(), grades.tolist())))
    return run_path, qrels_path


def timed(cmd: list[str], out: Path) -> tuple[float, float, str]:
    """(seconds, peak RSS in MiB, stdout) of one child process."""
    with open(out, "w+") as stdout, open(out.with_suffix(".err"), "w+") as stderr:
        t0 = time.perf_counter()
        proc = subprocess.Popen(cmd, stdout=stdout, stderr=stderr, cwd=ROOT)
        _, status, usage = os.wait4(proc.pid, 0)
        seconds = time.perf_counter() - t0
        proc.returncode = os.waitstatus_to_exitcode(status)
        stdout.seek(0)
        stderr.seek(0)
        text, err = stdout.read(), stderr.read()
    if proc.returncode:
        raise SystemExit(f"{' '.join(cmd)} failed ({proc.returncode}):\n{err}")
    return seconds, usage.ru_maxrss / 1024, text


def means(text: str, udcg: bool) -> dict[str, float]:
    out = {}
    for line in text.splitlines():
        fields = line.split("\t")
        if udcg and len(fields) == 3 and fields[0] == "all":  # udcg score prints "all<TAB>measure<TAB>mean"
            out[fields[1]] = float(fields[2])
        elif not udcg and len(fields) == 2:
            out[fields[0]] = float(fields[1])
    return out


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--queries", type=int, default=7000)
    ap.add_argument("--depth", type=int, default=1000)
    ap.add_argument("--judged", type=int, default=10, help="judged documents per query")
    ap.add_argument("--repeat", type=int, default=1)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--profile", action="store_true", help="also profile the udcg child (cProfile, -X importtime)")
    args = ap.parse_args()
    python = sys.executable
    with tempfile.TemporaryDirectory(prefix="bench_score_") as tmp:
        folder = Path(tmp)
        t0 = time.perf_counter()
        run, qrels = write_data(folder, args.queries, args.depth, args.judged, args.seed)
        size = run.stat().st_size / 1e6
        print(f"load average {os.getloadavg()[0]:.2f}; run {args.queries} queries x {args.depth} documents "
              f"({size:.0f} MB), {args.judged} judged per query; written in {time.perf_counter() - t0:.1f} s; "
              f"measures {MEASURES}", flush=True)
        script = folder / "ir_measures_calc.py"
        script.write_text(IR_MEASURES)
        ours_cmd = [python, "-m", "udcg", "score", "--run", str(run), "--qrels", str(qrels), "--metrics", MEASURES,
                    "-o", str(folder / "per_query.tsv")]
        theirs_cmd = [python, str(script), str(qrels), str(run)]
        best = {"udcg": (float("inf"), 0.0), "ir_measures": (float("inf"), 0.0)}
        for r in range(args.repeat):
            s_ours, rss_ours, out_ours = timed(ours_cmd, folder / "udcg.out")
            s_theirs, rss_theirs, out_theirs = timed(theirs_cmd, folder / "irm.out")
            ours, theirs = means(out_ours, True), means(out_theirs, False)
            if set(ours) != set(theirs):
                print(f"different measures: udcg {sorted(ours)}, ir_measures {sorted(theirs)}", file=sys.stderr)
                return 1
            worst = max(abs(ours[m] - theirs[m]) for m in ours)
            print(f"round {r + 1}: udcg {s_ours:.2f} s, peak RSS {rss_ours:.0f} MiB; ir_measures {s_theirs:.2f} s, "
                  f"peak RSS {rss_theirs:.0f} MiB; max |diff| of the means {worst:.1e}", flush=True)
            if worst > 1e-9:
                print(f"means differ: udcg {ours}, ir_measures {theirs}", file=sys.stderr)
                return 1
            best["udcg"] = min(best["udcg"], (s_ours, rss_ours))
            best["ir_measures"] = min(best["ir_measures"], (s_theirs, rss_theirs))
        print("means: " + ", ".join(f"{m} {v:.6f}" for m, v in ours.items()))
        if args.profile:
            profile(ours_cmd, folder)
        (s_ours, rss_ours), (s_theirs, rss_theirs) = best["udcg"], best["ir_measures"]
        print(f"best: udcg {s_ours:.2f} s, peak RSS {rss_ours:.0f} MiB; ir_measures {s_theirs:.2f} s, "
              f"peak RSS {rss_theirs:.0f} MiB")
        print(f"ratio: {s_theirs / s_ours:.2f}")
    return 0


def profile(cmd: list[str], folder: Path) -> None:
    """The udcg child's import time (top modules) and its cProfile (top functions by cumulative time)."""
    prof = folder / "udcg.prof"
    timed([cmd[0], "-m", "cProfile", "-o", str(prof), *cmd[1:]], folder / "prof.out")
    import pstats

    pstats.Stats(str(prof)).sort_stats("cumulative").print_stats(25)
    proc = subprocess.run([cmd[0], "-X", "importtime", "-c", "import sys; sys.argv = ['udcg', *sys.argv[1:]]; "
                           "import runpy; runpy.run_module('udcg', run_name='__main__')", *cmd[3:]],
                          capture_output=True, text=True, cwd=ROOT)
    rows = []  # (cumulative microseconds, name indented two spaces per import level)
    for line in proc.stderr.splitlines():
        if line.startswith("import time:") and "self [us]" not in line:
            _, cumulative, name = line[len("import time:"):].split("|")
            rows.append((int(cumulative), name[1:].rstrip()))
    top = [(c, name) for c, name in rows if not name.startswith(" ")]
    print(f"imports: {sum(c for c, _ in top) / 1e6:.2f} s in all; the slowest top-level ones, with their slowest parts:")
    for cumulative, name in sorted(top, reverse=True)[:6]:
        print(f"  {cumulative / 1e6:6.3f} s {name}")
    for cumulative, name in sorted((r for r in rows if r[1].startswith("  ") and not r[1].startswith("   ")),
                                   reverse=True)[:6]:
        print(f"  {cumulative / 1e6:6.3f} s   {name.strip()} (imported by a module above)")
    heavy = [name.strip() for _, name in rows if name.strip().split(".")[0] in ("torch", "transformers")]
    print("torch/transformers imported: " + ("yes" if heavy else "no"))


if __name__ == "__main__":
    sys.exit(main())
