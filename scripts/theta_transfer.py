"""UDCG_theta across data sets (the paper's protocol): the weights one run learned on its train
questions, scored on another run's test contexts, beside that run's own UDCG_theta and plain UDCG.

    python scripts/theta_transfer.py docs/results/nq-qwen0.5b docs/results/popqa-qwen0.5b \
        --out docs/results/theta-transfer

Both directions are run (A -> B and B -> A). Reads only published data: each run's
``data/contexts.jsonl.gz`` (the main study, test split, k of the model) and ``theta/full-k{k}.json``;
no model is loaded. Writes ``table.md`` / ``table.json`` (Table 3's layout per direction: mean
per-question Spearman, Kendall tau-b and pairwise accuracy with 95% bootstrap intervals, paired
permutation p against UDCG and Holm within the direction) and ``per-context.jsonl.gz`` (each test
context's three scores and its outcome), from which the table can be re-derived.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from udcg.flows.correlate import correlation_table_of  # noqa: E402
from udcg.metrics.paired_tests import CorrelationTests  # noqa: E402
from udcg.experiment.reporting import finite, read_groups, write_jsonl_gz  # noqa: E402
from udcg.flows.theta import load_theta  # noqa: E402
from udcg.io.files import atomic_write_json, atomic_write_text  # noqa: E402
from udcg.records import OUTCOME_SCORE  # noqa: E402


def test_contexts(run: Path, k: int) -> list:
    return [r for r in read_groups(run)["main"] if r.split == "test" and r.k == k and r.label in OUTCOME_SCORE]


def direction(source: Path, target: Path, k: int, n_boot: int, seed: int) -> tuple[object, list[dict]]:
    """Table 3's layout for ``target``'s test contexts: UDCG, UDCG_theta fitted on ``target``'s train
    questions, UDCG_theta fitted on ``source``'s train questions."""
    records = test_contexts(target, k)
    if not records:
        raise SystemExit(f"{target}: no graded test contexts with k = {k} in data/contexts.jsonl.gz")
    u = np.array([r.utilities for r in records], dtype=float)
    own, other = load_theta(target / "theta" / f"full-k{k}.json"), load_theta(source / "theta" / f"full-k{k}.json")
    names = {"UDCG": "UDCG", "own": f"UDCG_theta ({target.name})", "transfer": f"UDCG_theta ({source.name})"}
    values = {names["UDCG"]: np.array([r.metrics["UDCG"] for r in records], dtype=float),
              names["own"]: own.predict(u),
              names["transfer"]: other.predict(u)}
    stored = np.array([r.metrics.get("UDCG_theta", np.nan) for r in records], dtype=float)
    if not np.allclose(stored, values[names["own"]], equal_nan=True):  # the published scores, re-derived
        raise SystemExit(f"{target}: theta/full-k{k}.json does not give the published UDCG_theta scores")
    outcome = np.array([OUTCOME_SCORE[r.label] for r in records], dtype=float)
    groups = np.array([r.qid for r in records])
    table = correlation_table_of(values, outcome, groups, CorrelationTests(baseline="UDCG", n_boot=n_boot, seed=seed),
                                 title=f"UDCG_theta from {source.name} on {target.name}'s test questions, k = {k} "
                                       f"({len(set(groups.tolist()))} questions, {len(records)} contexts)")
    rows = [{"source": source.name, "target": target.name, "qid": r.qid, "cid": r.cid, "outcome": r.label,
             **{name: float(v[i]) for name, v in values.items()}} for i, r in enumerate(records)]
    return table, rows


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("run_a", type=Path)
    ap.add_argument("run_b", type=Path)
    ap.add_argument("--out", type=Path, required=True)
    ap.add_argument("--k", type=int, default=5)
    ap.add_argument("--n-boot", type=int, default=10_000)
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args(argv)
    tables, rows = [], []
    for source, target in ((args.run_a, args.run_b), (args.run_b, args.run_a)):
        table, per_context = direction(source, target, args.k, args.n_boot, args.seed)
        tables.append(table)
        rows += per_context
    args.out.mkdir(parents=True, exist_ok=True)
    markdown = "\n\n".join(t.markdown(3) for t in tables)
    atomic_write_text(args.out / "table.md", markdown + "\n")
    atomic_write_json(args.out / "table.json", [{"title": t.title, "rows": t.records()} for t in tables])
    write_jsonl_gz(args.out / "per-context.jsonl.gz", (finite(r) for r in rows))
    print(markdown)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
