"""Two readers on identical contexts, compared question by question (issue #28 item 5).

    python scripts/compare_readers.py --pair "NQ" docs/results/nq-qwen1.5b docs/results/nq-qwen0.5b-pool15 \\
        --pair "PopQA" docs/results/popqa-qwen1.5b docs/results/popqa-qwen0.5b-pool15 \\
        --out docs/results/readers-paired

Each pair is (label, run A, run B), two published `udcg validate` runs whose contexts are the same
(same pool, seed and relevance labels; only the reader differs). Contexts are joined by id on the
questions both runs hold; a shared context id whose passages differ stops the script (the runs were
not built on the same pools). The statistics, fixed before the 0.5B pool-15 runs existed
(docs/results/README.md, "The two readers on the same contexts"), each A − B per question:

- ``abstain|no relevant``: the share of the question's contexts with no relevant passage that the
  reader abstained on (questions with at least one such context);
- ``abstain|relevant``: the same over contexts with at least one relevant passage;
- ``correct``: the share of all its contexts answered correctly;
- ``rho(UDCG)-rho(nDCG)``: the per-question Spearman gap of table3-all (questions usable in both).

Each on the questions where both values exist: A's and B's means, the mean difference, the 95%
percentile bootstrap interval over questions, the two-sided paired sign-flip
p, the smallest difference detectable at 80% power, and Holm's p over the whole family (statistics x
pairs). Descriptive, untested: each reader's mean single-passage p_abs on relevant and on
irrelevant passages of the contexts. ``--out`` writes README.md (the tables) and
per-question.jsonl.gz (every value behind them).
"""

from __future__ import annotations

import argparse
import json
import math
import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # run from a checkout without installing

from udcg.errors import InputError  # noqa: E402
from udcg.experiment.paired import aligned, paired_difference  # noqa: E402
from udcg.experiment.reporting import read_groups, read_per_question, write_jsonl_gz  # noqa: E402
from udcg.io.files import atomic_write_text  # noqa: E402
from udcg.metrics.stats import holm  # noqa: E402

STATISTICS = ("abstain|no relevant", "abstain|relevant", "correct", "rho(UDCG)-rho(nDCG)")


def shared_contexts(run_a: Path, run_b: Path) -> tuple[list[str], dict, dict]:
    """(question ids both runs answered, in A's order; A's and B's main-study records by context id)."""
    a = {r.cid: r for r in read_groups(run_a).get("main", [])}
    b = {r.cid: r for r in read_groups(run_b).get("main", [])}
    common = [cid for cid in a if cid in b]
    for cid in common:
        if a[cid].docids != b[cid].docids:
            raise InputError(f"context {cid}: {run_a} and {run_b} hold different passages "
                             f"({list(a[cid].docids)} vs {list(b[cid].docids)}): the runs are not on the same pools")
    if not common:
        raise InputError(f"{run_a} and {run_b} share no context id (different data sets or seeds?)")
    qids = list(dict.fromkeys(a[cid].qid for cid in common))
    return qids, {c: a[c] for c in common}, {c: b[c] for c in common}


def rates(records: dict, qids: list[str]) -> dict[str, np.ndarray]:
    """Per question: abstention share on contexts without / with a relevant passage, correct share."""
    out = {s: np.full(len(qids), math.nan) for s in STATISTICS[:3]}
    index = {q: i for i, q in enumerate(qids)}
    cells: dict[tuple[str, str], list[float]] = {}
    for r in records.values():
        if r.label is None:
            continue
        has_relevant = any(r.relevant)
        cells.setdefault((r.qid, STATISTICS[1] if has_relevant else STATISTICS[0]), []).append(r.label == "abstained")
        cells.setdefault((r.qid, STATISTICS[2]), []).append(r.label == "correct")
    for (qid, stat), values in cells.items():
        out[stat][index[qid]] = float(np.mean(values))
    return out


def passage_p_abs(records: dict) -> tuple[float, float]:
    """Mean single-passage p_abs over the distinct (question, passage) pairs of the contexts: relevant, irrelevant."""
    seen: dict[tuple[str, str], tuple[bool, float]] = {}
    for r in records.values():
        for docid, rel, p in zip(r.docids, r.relevant, r.p_abs or ()):
            seen[(r.qid, docid)] = (rel, p)
    rel = [p for is_rel, p in seen.values() if is_rel]
    irr = [p for is_rel, p in seen.values() if not is_rel]
    return float(np.mean(rel)) if rel else math.nan, float(np.mean(irr)) if irr else math.nan


def compare(label: str, run_a: Path, run_b: Path, flips: int = 10_000) -> tuple[list[dict], list[dict], dict]:
    qids, a, b = shared_contexts(run_a, run_b)
    ra, rb = rates(a, qids), rates(b, qids)
    gaps = []
    for run in (run_a, run_b):
        u, n = aligned(read_per_question(run, "table3-all"), "UDCG", "nDCG", "rho", qids)
        gaps.append(u - n)
    ra[STATISTICS[3]], rb[STATISTICS[3]] = gaps
    rows = []
    for stat in STATISTICS:
        d = paired_difference(ra[stat], rb[stat], n_resamples=flips)
        both = np.isfinite(ra[stat]) & np.isfinite(rb[stat])  # the means on the paired questions alone
        rows.append({"pair": label, "statistic": stat, "n": d.n, "mean_a": float(ra[stat][both].mean()),
                     "mean_b": float(rb[stat][both].mean()), "diff": d.mean, "ci_low": d.ci_low, "ci_high": d.ci_high,
                     "p": d.p, "min_detectable": d.min_detectable})
    per_question = [{"pair": label, "qid": q, **{f"{s} A": _num(ra[s][i]) for s in STATISTICS},
                     **{f"{s} B": _num(rb[s][i]) for s in STATISTICS}} for i, q in enumerate(qids)]
    outcomes = {name: {lab: sum(r.label == lab for r in recs.values()) for lab in ("correct", "abstained", "wrong")}
                for name, recs in (("A", a), ("B", b))}
    info = {"pair": label, "run_a": str(run_a), "run_b": str(run_b), "questions": len(qids), "contexts": len(a),
            "outcomes": outcomes, "p_abs A (relevant, irrelevant)": passage_p_abs(a),
            "p_abs B (relevant, irrelevant)": passage_p_abs(b)}
    return rows, per_question, info


def _num(x: float) -> float | None:
    return None if math.isnan(x) else float(x)


def _fmt(x: float, signed: bool = False) -> str:
    return "—" if x is None or math.isnan(x) else (f"{x:+.3f}" if signed else f"{x:.3f}")


def markdown(rows: list[dict], infos: list[dict]) -> str:
    lines = ["| pair | statistic | questions | A | B | A − B | 95% interval | p | Holm p | detectable at 80% |",
             "|---|---|---|---|---|---|---|---|---|---|"]
    for r in rows:
        p, p_holm = ("< 0.001" if v < 0.001 else f"{v:.3f}" for v in (r["p"], r["p_holm"]))
        lines.append(f"| {r['pair']} | {r['statistic']} | {r['n']} | {_fmt(r['mean_a'])} | {_fmt(r['mean_b'])} | "
                     f"{_fmt(r['diff'], True)} | [{_fmt(r['ci_low'], True)}, {_fmt(r['ci_high'], True)}] | {p} | "
                     f"{p_holm} | {_fmt(r['min_detectable'])} |")
    lines += ["", "| pair | run A | run B | questions | contexts | A: correct / abstained / wrong | "
              "B: correct / abstained / wrong | mean p_abs A: relevant, irrelevant | B |", "|---|---|---|---|---|---|---|---|---|"]
    for i in infos:
        oa, ob = i["outcomes"]["A"], i["outcomes"]["B"]
        pa, pb = i["p_abs A (relevant, irrelevant)"], i["p_abs B (relevant, irrelevant)"]
        lines.append(f"| {i['pair']} | `{i['run_a']}` | `{i['run_b']}` | {i['questions']} | {i['contexts']} | "
                     f"{oa['correct']} / {oa['abstained']} / {oa['wrong']} | {ob['correct']} / {ob['abstained']} / "
                     f"{ob['wrong']} | {pa[0]:.3f}, {pa[1]:.3f} | {pb[0]:.3f}, {pb[1]:.3f} |")
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--pair", nargs=3, action="append", required=True, metavar=("LABEL", "RUN_A", "RUN_B"))
    parser.add_argument("--out", type=Path, help="folder for README.md and per-question.jsonl.gz")
    parser.add_argument("--flips", type=int, default=10_000,
                        help="random sign flips of each test beyond the exact range (default 10,000; its smallest "
                             "two-sided p is about 0.0002, which Holm over 8 rows turns into 0.002)")
    args = parser.parse_args(argv)
    for run in (Path(r) for _, a, b in args.pair for r in (a, b)):
        if args.out is not None and args.out.resolve().is_relative_to(run.resolve()):
            parser.error(f"--out {args.out}: inside the run folder {run}, whose files `udcg report` rebuilds "
                         "(give a folder beside it, e.g. docs/results/readers-paired)")
    rows, per_question, infos = [], [], []
    try:
        for label, a, b in args.pair:
            r, q, i = compare(label, Path(a), Path(b), args.flips)
            rows += r
            per_question += q
            infos.append(i)
    except InputError as e:
        print(f"compare_readers: {e}", file=sys.stderr)
        return 2
    for r, p in zip(rows, holm([r["p"] for r in rows])):
        r["p_holm"] = float(p)
    text = markdown(rows, infos)
    print(text, end="")
    if args.out:
        args.out.mkdir(parents=True, exist_ok=True)
        command = "python scripts/compare_readers.py " + " ".join(
            f'--pair "{label}" {a} {b}' for label, a, b in args.pair) + (
            f" --flips {args.flips}" if args.flips != 10_000 else "") + " --out FOLDER"
        atomic_write_text(args.out / "README.md",
            "# Two readers on identical contexts\n\nWritten by `scripts/compare_readers.py` (its docstring defines "
            "every statistic; A − B per question, paired sign-flip test, Holm over the table's rows), FOLDER being "
            "this one:\n\n" f"    {command}\n\n" + text)
        write_jsonl_gz(args.out / "per-question.jsonl.gz", per_question)
        atomic_write_text(args.out / "summary.json", json.dumps({"rows": rows, "runs": infos}, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
