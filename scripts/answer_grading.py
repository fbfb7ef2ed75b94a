"""The answer rules against hand labels and an LLM judge, on answers the published runs recorded.

    .venv/bin/python scripts/answer_grading.py sample        # the sample to label (runs/answer-grading/)
    .venv/bin/python scripts/answer_grading.py llm-subset -o runs/answer-grading/llm-input.jsonl
    .venv/bin/udcg judge answer runs/answer-grading/llm-input.jsonl -o runs/answer-grading/llm-0.5b.jsonl \
        --judge qwen2.5-coder-0.5b --batch-size 4 --chunk-size 4      # the LLM judge (resumable)
    .venv/bin/python scripts/answer_grading.py figures --llm docs/answer-grading-llm.jsonl   # the doc's figures

``sample``: from the context answers of the four published validation runs (NQ and PopQA, readers
qwen2.5-coder-0.5b and 1.5b: ``docs/results/*/data/contexts.jsonl.gz``, gold aliases from the
run's ``pools.jsonl.gz``), the distinct (question, answer) pairs that are not abstentions, then
``--per-set`` drawn per data set (seed 0, over a sorted order; stratum "random"), then every other
pair the span and contains rules grade differently (stratum "rules-differ"), written as the answer
task's input ({qid, cid, question, answers, answer, source, stratum}). Abstentions are left out:
every rule treats them alike, so they would only inflate agreement.

``llm-subset``: the answers the LLM judge grades (minutes per answer on a CPU): every rules-differ
answer, then ``--random`` of the random stratum (seed 1).

``figures``: each rule (span, contains, exact, f1) and the LLM judge against the hand labels
(``docs/answer-grading-labels.jsonl``: the sample's lines with ``hand`` = "correct" | "wrong" and
an optional ``note``), per stratum: the share agreeing with a 95% Wilson interval, Cohen's kappa
with a 95% percentile bootstrap interval over the answers (10,000 draws, seed 0); the LLM judge on
the answers it graded (its output, or its cache while it runs); and every disagreement of the span
rule, of contains and of the LLM judge, as Markdown.
"""

from __future__ import annotations

import argparse
import gzip
import json
import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # run from a checkout without installing

ROOT = Path(__file__).resolve().parents[1]
RUNS = ("nq-qwen0.5b", "nq-qwen1.5b", "popqa-qwen0.5b", "popqa-qwen1.5b")
SAMPLE = ROOT / "runs" / "answer-grading" / "sample.jsonl"  # then labelled by hand into LABELS
LABELS = ROOT / "docs" / "answer-grading-labels.jsonl"
RULES = ("span", "contains", "exact", "f1")


def _jsonl_gz(path: Path) -> list[dict]:
    with gzip.open(path, "rt", encoding="utf-8") as f:
        return [json.loads(line) for line in f if line.strip()]


def candidates(results: Path) -> dict[str, list[dict]]:
    """Distinct non-abstaining (question, answer) pairs per data set, in a sorted order."""
    from udcg.grade.rules import is_abstention

    by_set: dict[str, dict[tuple, dict]] = {}
    for run in RUNS:
        pools = {q["example_id"]: q for q in _jsonl_gz(results / run / "data" / "pools.jsonl.gz")}
        for ctx in _jsonl_gz(results / run / "data" / "contexts.jsonl.gz"):
            answer = ctx.get("answer") or ""
            if is_abstention(answer):
                continue
            q = pools[ctx["qid"]]
            data_set = run.split("-")[0]
            row = {"qid": ctx["qid"], "question": q["question"], "answers": q["answers"], "answer": answer.strip(),
                   "source": f"{run}:{ctx['cid']}"}
            by_set.setdefault(data_set, {}).setdefault((ctx["qid"], answer.strip().lower()), row)
    return {s: [rows[k] for k in sorted(rows)] for s, rows in sorted(by_set.items())}


def sample(per_set: int, seed: int, results: Path) -> list[dict]:
    """``per_set`` random pairs per data set (stratum "random"), then every other pair the span and
    contains rules grade differently (stratum "rules-differ": where the choice of rule matters)."""
    from udcg.grade.rules import answer_outcome

    rng = np.random.default_rng(seed)
    out = []
    for data_set, rows in candidates(results).items():
        picked = sorted(rng.choice(len(rows), size=min(per_set, len(rows)), replace=False))
        out += [{**rows[i], "cid": f"{data_set}-{n}", "stratum": "random"} for n, i in enumerate(picked)]
        differ = [i for i, r in enumerate(rows) if i not in set(picked)
                  and answer_outcome(r["answer"], r["answers"], "span") != answer_outcome(r["answer"], r["answers"], "contains")]
        out += [{**rows[i], "cid": f"{data_set}-d{n}", "stratum": "rules-differ"} for n, i in enumerate(differ)]
    return out


def llm_subset(labels: Path, n_random: int, seed: int) -> list[dict]:
    """The answers the LLM judge grades (it costs minutes per answer on a CPU): every rules-differ
    answer first, then ``n_random`` of the random stratum (seeded), as the answer task's input."""
    rows = [json.loads(line) for line in labels.read_text(encoding="utf-8").splitlines() if line.strip()]
    random_rows = [r for r in rows if r["stratum"] == "random"]
    picked = sorted(np.random.default_rng(seed).choice(len(random_rows), size=min(n_random, len(random_rows)),
                                                       replace=False))
    keep = [r for r in rows if r["stratum"] == "rules-differ"] + [random_rows[i] for i in picked]
    return [{k: r[k] for k in ("qid", "cid", "question", "answers", "answer", "stratum")} for r in keep]


def kappa_interval(a: np.ndarray, b: np.ndarray, n_boot: int = 10_000, seed: int = 0) -> tuple[float, float, float]:
    """Cohen's kappa of two binary label vectors and its percentile bootstrap 95% interval."""
    from udcg.grade.agreement import cohen_kappa

    k = cohen_kappa(list(a), list(b), labels=[True, False])
    rng = np.random.default_rng(seed)
    idx = rng.integers(0, len(a), size=(n_boot, len(a)))
    aa, bb = a[idx], b[idx]
    po = (aa == bb).mean(1)
    pa, pb = aa.mean(1), bb.mean(1)
    pe = pa * pb + (1 - pa) * (1 - pb)
    with np.errstate(invalid="ignore", divide="ignore"):
        boot = (po - pe) / (1 - pe)
    lo, hi = np.nanpercentile(boot, [2.5, 97.5])
    return k, float(lo), float(hi)


def _table(rows: list[dict], judges: dict[str, np.ndarray], hand: np.ndarray) -> list[str]:
    from scipy.stats import binomtest

    lines = ["| judge | correct | agrees with hand [95% Wilson] | Cohen's kappa [95% bootstrap] |", "|---|---:|---|---|",
             f"| (hand) | {int(hand.sum())} | | |"]
    for name, labs in judges.items():
        k, lo, hi = kappa_interval(hand, labs)
        kappa = (f"{k:.3f} [{lo:.3f}, {hi:.3f}]" if 0 < labs.sum() < len(labs) and 0 < hand.sum() < len(hand)
                 else "- (one side gives one label throughout)")
        same = int((labs == hand).sum())
        ci = binomtest(same, len(labs)).proportion_ci(method="wilson")
        lines.append(f"| {name} | {int(labs.sum())} | {same}/{len(labs)} = {same / len(labs):.3f} "
                     f"[{ci.low:.2f}, {ci.high:.2f}] | {kappa} |")
    return lines


def figures(labels: Path, llm: Path | None) -> str:
    from udcg.grade.rules import answer_outcome

    rows = [json.loads(line) for line in labels.read_text(encoding="utf-8").splitlines() if line.strip()]
    hand = np.array([r["hand"] == "correct" for r in rows])
    judges = {m: np.array([answer_outcome(r["answer"], r["answers"], m) == "correct" for r in rows]) for m in RULES}
    lines = []
    for stratum in ("random", "rules-differ"):
        keep = np.array([r["stratum"] == stratum for r in rows])
        sets = {s: sum(r["cid"].startswith(s + "-") for r, k in zip(rows, keep) if k) for s in ("nq", "popqa")}
        lines += [f"Stratum {stratum}: {int(keep.sum())} answers ({sets['nq']} NQ, {sets['popqa']} PopQA).", ""]
        lines += _table([r for r, k in zip(rows, keep) if k], {n: j[keep] for n, j in judges.items()}, hand[keep]) + [""]
    if llm is not None:  # the judge's output (outcome) or its cache (label), on the answers it graded
        graded = {(r["qid"], r.get("cid", r.get("key", "").partition("\t")[2])): r.get("outcome", r.get("label"))
                  for r in map(json.loads, llm.read_text().splitlines())}
        judged = np.array([(r["qid"], r["cid"]) in graded for r in rows])
        judges["LLM judge"] = np.array([graded.get((r["qid"], r["cid"])) == "correct" for r in rows])
        labels_ = [graded.get((r["qid"], r["cid"])) for r in rows]
        for stratum in ("random", "rules-differ"):
            keep = judged & np.array([r["stratum"] == stratum for r in rows])
            lines += [f"The answers the LLM judge graded, stratum {stratum}: {int(keep.sum())}.", ""]
            lines += _table([r for r, k in zip(rows, keep) if k], {n: j[keep] for n, j in judges.items()},
                            hand[keep]) + [""]
        for rule in ("span", "contains"):  # the rule against the LLM judge, with no hand label between them
            a, b = judges[rule][judged], judges["LLM judge"][judged]
            k, lo, hi = kappa_interval(b, a)
            lines.append(f"{rule} against the LLM judge on the {int(judged.sum())} answers it graded: "
                         f"{int((a == b).sum())} agree, kappa {k:.3f} [{lo:.3f}, {hi:.3f}].")
        lines.append(f"The LLM judge called {sum(v == 'abstained' for v in labels_)} answer(s) abstained and left "
                     f"{sum(v is None for v, k in zip(labels_, judged) if k)} unparseable (both count as not correct).")
    cell = lambda t: t.replace("|", "/").replace("\n", " ")  # noqa: E731
    for name in ("span", "contains", "LLM judge"):
        if name not in judges:
            continue
        off = [r for r, h, j, k in zip(rows, hand, judges[name], judged if llm is not None and name == "LLM judge"
                                       else np.ones(len(rows), bool)) if k and h != j]
        lines += ["", f"Disagreements of {name} with the hand labels ({len(off)}):", "",
                  f"| id | question | gold | answer | hand | {name} | note |", "|---|---|---|---|---|---|---|"]
        for r in off:
            gold = "; ".join(r["answers"])
            gold = gold if len(gold) <= 70 else gold[:67] + "..."
            answer = r["answer"] if len(r["answer"]) <= 90 else r["answer"][:87] + "..."
            lines.append(f"| {r['cid']} | {cell(r['question'])} | {cell(gold)} | {cell(answer)} | {r['hand']} | "
                         f"{'wrong' if r['hand'] == 'correct' else 'correct'} | {cell(r.get('note', ''))} |")
    return "\n".join(lines) + "\n"


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    sub = ap.add_subparsers(dest="step", required=True)
    s = sub.add_parser("sample")
    s.add_argument("--per-set", type=int, default=75)
    s.add_argument("--seed", type=int, default=0)
    s.add_argument("--results", type=Path, default=ROOT / "docs" / "results")
    s.add_argument("-o", "--output", type=Path, default=SAMPLE)
    u = sub.add_parser("llm-subset")
    u.add_argument("--labels", type=Path, default=LABELS)
    u.add_argument("--random", type=int, default=40, help="answers of the random stratum (default 40)")
    u.add_argument("--seed", type=int, default=1)
    u.add_argument("-o", "--output", type=Path, required=True)
    f = sub.add_parser("figures")
    f.add_argument("--labels", type=Path, default=LABELS)
    f.add_argument("--llm", type=Path, help="udcg judge answer's output on the sample")
    args = ap.parse_args()
    from udcg.io.files import atomic_write_jsonl

    if args.step in ("sample", "llm-subset"):
        rows = (sample(args.per_set, args.seed, args.results) if args.step == "sample"
                else llm_subset(args.labels, args.random, args.seed))
        atomic_write_jsonl(args.output, rows)
        print(f"{len(rows)} answers -> {args.output}", file=sys.stderr)
    else:
        sys.stdout.write(figures(args.labels, args.llm))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
