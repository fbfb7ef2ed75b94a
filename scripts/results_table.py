"""The README's headline table from published ``udcg validate`` reports: per data set, Table 3 over
all questions (no UDCG_theta) and over the test questions, one column each.

    python scripts/results_table.py docs/results/popqa-qwen0.5b:PopQA docs/results/nq-qwen0.5b:NQ

Each cell: mean per-question Spearman rho with its 95% bootstrap interval, the mean Kendall tau-b and
the pairwise ordering accuracy (ties count half), and the paired permutation p against UDCG after
Holm's correction over the table's comparisons. Bold: the table's best by mean rho (its ``best``
column: a circular metric is never best); "circular" marks eRAG where it scores its own outcome.

``--summary`` prints the README's one-row-per-run table instead: questions, the main study's shares
of correct and abstained contexts (from ``data/contexts.jsonl.gz``), UDCG's rho / tau-b / pairwise
accuracy over all questions, the best classical metric by rho with the same three, and that metric's
Holm-corrected p against UDCG on each statistic.

    python scripts/results_table.py --summary "docs/results/nq-qwen0.5b:NQ, 0.5B reader"
"""

from __future__ import annotations

import argparse
import gzip
import json
from pathlib import Path

ROWS = (("UDCG", "**UDCG**"), ("UDCG_theta", "UDCG_θ (trained on the other questions)"), ("nDCG", "nDCG"),
        ("RR", "RR (MRR)"), ("AP", "AP (MAP)"), ("P", "P (precision)"), ("Success", "Success (a relevant passage)"),
        ("RA-nWG", "RA-nWG@5"), ("eRAG", "eRAG"), ("ANSWER_PROB", "ANSWER_PROB"))


CLASSICAL = {"nDCG": "nDCG", "RR": "MRR", "AP": "MAP", "P": "P", "Success": "Success"}


def _pv(p: float | None) -> str:
    """A p-value with three decimals below 0.1, two above."""
    return "NA" if p is None else f"{p:.3f}" if p < 0.1 else f"{p:.2f}"


def _p(p: float) -> str:
    return "p_Holm < 0.001" if p < 0.001 else f"p_Holm = {_pv(p)}"


def _num(v: object) -> str:
    return "NA" if v is None else f"{v:.3f}"


def column(table: list[dict]) -> tuple[dict[str, str], int, int]:
    """{metric: cell}, questions with a rho, and all questions (rho counted + no rho)."""
    rows = {r["metric"]: r for r in table}
    cells = {}
    for name, _ in ROWS:
        r = rows.get(name)
        if r is None:
            cells[name] = "—"
            continue
        rho = _num(r["mean_rho"])
        cell = f"**{rho}**" if r.get("best") == "*" else rho
        cell += f" [{_num(r['ci_low'])}, {_num(r['ci_high'])}]"
        if r.get("mean_tau_b") is not None:
            cell += f"; τ_b {_num(r['mean_tau_b'])}"
        if r.get("pair_acc") is not None:
            cell += f"; acc {_num(r['pair_acc'])}"
        if r.get("circular") == "yes":
            cell += " (circular)"
        p = r.get("p_holm")
        if p is not None and name != "UDCG":
            cell += f"; {_p(p)}"
        cells[name] = cell
    n_rho = rows["UDCG"]["n_questions"]
    return cells, n_rho, n_rho + rows["UDCG"]["no_rho_outcome"]


def summary_row(folder: Path, label: str) -> str:
    """One README row: a run's outcome shares, UDCG and the best classical metric on all three statistics."""
    rows = {r["metric"]: r for r in json.loads((folder / "tables" / "table3-all.json").read_text())}
    with gzip.open(folder / "data" / "contexts.jsonl.gz", "rt") as fh:
        outcomes = [c["outcome"] for c in map(json.loads, fh) if c["study"] == "main"]
    share = {o: round(100 * outcomes.count(o) / len(outcomes)) for o in ("correct", "abstained")}
    udcg = rows["UDCG"]
    best = max((m for m in CLASSICAL if rows.get(m, {}).get("mean_rho") is not None),
               key=lambda m: rows[m]["mean_rho"])
    b = rows[best]
    stats = lambda r: " / ".join(_num(r[k]) for k in ("mean_rho", "mean_tau_b", "pair_acc"))  # noqa: E731
    ps = " / ".join(_pv(b[k]) for k in ("p_holm", "p_tau_b_holm", "p_pair_acc_holm"))
    n = udcg["n_questions"] + udcg["no_rho_outcome"]
    return (f"| [{label}]({folder.as_posix()}/report.md) | {n} | {share['correct']}% / {share['abstained']}% | "
            f"{stats(udcg)} | {CLASSICAL[best]} {stats(b)} | {ps} |")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("reports", nargs="+", help="DIR:LABEL of a published report folder")
    ap.add_argument("--summary", action="store_true", help="one row per run (the README's results table)")
    args = ap.parse_args()
    if args.summary:
        print("| run | questions | contexts correct / abstained | UDCG: ρ / τ_b / pairwise acc. | "
              "best classical by ρ (nDCG, MRR, MAP, P, Success) | its p_Holm: ρ / τ_b / acc. |")
        print("|---" * 6 + "|")
        for spec in args.reports:
            folder, label = spec.rsplit(":", 1)
            print(summary_row(Path(folder), label))
        return
    heads, cols = [], []
    for spec in args.reports:
        folder, label = spec.rsplit(":", 1)
        tables = Path(folder) / "tables"
        for file, kind in (("table3-all.json", "all"), ("table3.json", "test")):
            cells, n_rho, n = column(json.loads((tables / file).read_text()))
            heads.append(f"{label}, {n} questions (all; ρ defined for {n_rho}; no θ)" if kind == "all"
                         else f"{label}, {n} test questions (ρ defined for {n_rho})")
            cols.append(cells)
    print("| metric | " + " | ".join(heads) + " |")
    print("|---" * (len(heads) + 1) + "|")
    for name, label in ROWS:
        print(f"| {label} | " + " | ".join(c[name] for c in cols) + " |")


if __name__ == "__main__":
    main()
