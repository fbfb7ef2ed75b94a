"""The README's headline table from published ``udcg validate`` reports: per data set, Table 3 over
all questions (no UDCG_theta) and over the test questions, one column each.

    python scripts/results_table.py docs/results/popqa-qwen0.5b:PopQA docs/results/nq-qwen0.5b:NQ

Each cell: mean per-question Spearman rho, the 95% bootstrap interval for UDCG, UDCG_theta, nDCG and
the column's best (bold), and the paired-bootstrap p against UDCG.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

ROWS = (("UDCG", "**UDCG**"), ("UDCG_theta", "UDCG_θ (trained on the other questions)"), ("nDCG", "nDCG"),
        ("RR", "RR (MRR)"), ("AP", "AP (MAP)"), ("P", "P (precision)"), ("RA-nWG", "RA-nWG@5"),
        ("eRAG", "eRAG"), ("ANSWER_PROB", "ANSWER_PROB"))
WITH_INTERVAL = {"UDCG", "UDCG_theta", "nDCG"}


def _p(p: float) -> str:
    return "p < 0.001" if p < 0.001 else f"p = {p:.3f}" if p < 0.1 else f"p = {p:.2f}"


def column(table: list[dict]) -> tuple[dict[str, str], int, int]:
    """{metric: cell}, questions with a rho, and all questions (rho counted + no rho)."""
    rows = {r["metric"]: r for r in table}
    best = max(rows.values(), key=lambda r: r["mean_rho"])["metric"]
    cells = {}
    for name, _ in ROWS:
        r = rows.get(name)
        if r is None:
            cells[name] = "—"
            continue
        cell = f"**{r['mean_rho']:.3f}**" if name == best else f"{r['mean_rho']:.3f}"
        if name in WITH_INTERVAL or name == best:
            cell += f" [{r['ci_low']:.3f}, {r['ci_high']:.3f}]"
        if name == best:
            cell += " (best)"
        if r["p_vs_baseline"] is not None and name != "UDCG":
            cell += f", {_p(r['p_vs_baseline'])}"
        cells[name] = cell
    n_rho = rows["UDCG"]["n_questions"]
    return cells, n_rho, n_rho + rows["UDCG"]["no_rho_outcome"]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("reports", nargs="+", help="DIR:LABEL of a published report folder")
    args = ap.parse_args()
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
