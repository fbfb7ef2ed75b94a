"""scripts/results_table.py: the README's headline table from published report tables."""

from __future__ import annotations

import gzip
import json
import subprocess
import sys
from pathlib import Path

from tests.conftest import load_script

SCRIPT = Path(__file__).resolve().parents[1] / "scripts" / "results_table.py"


def _row(metric, rho, p, n=8, none=2, best="", tau=None, acc=None, circular=None):
    row = {"metric": metric, "mean_rho": rho, "ci_low": rho - 0.1, "ci_high": rho + 0.1, "n_questions": n,
           "no_rho_outcome": none, "p_vs_baseline": p, "p_holm": None if p is None else min(1.0, 3 * p), "best": best,
           "mean_tau_b": tau, "pair_acc": acc}
    if circular is not None:
        row["circular"] = circular
    return row


def test_one_column_per_table_best_in_bold_and_holm_p_against_udcg(tmp_path):
    tables = tmp_path / "run" / "tables"
    tables.mkdir(parents=True)
    (tables / "table3-all.json").write_text(json.dumps(
        [_row("eRAG", 0.7, 0.01, 20, 4, circular="yes"), _row("nDCG", 0.61, 0.0001, 20, 4, best="*", tau=0.5, acc=0.8),
         _row("UDCG", 0.5, None, 20, 4, tau=0.4, acc=0.75, circular="")]))
    (tables / "table3.json").write_text(json.dumps(
        [_row("UDCG_theta", 0.7, 0.1, best="*"), _row("UDCG", 0.55, None), _row("nDCG", 0.52, 0.5)]))
    out = subprocess.run([sys.executable, str(SCRIPT), f"{tmp_path / 'run'}:Toy"], capture_output=True, text=True,
                         check=True).stdout.splitlines()
    assert out[0] == ("| metric | Toy, 24 questions (all; ρ defined for 20; no θ) | "
                      "Toy, 10 test questions (ρ defined for 8) |")
    cells = [line[2:-2].split(" | ") for line in out[2:]]
    rows = {c[0]: c[1:] for c in cells}
    assert rows["**UDCG**"] == ["0.500 [0.400, 0.600]; τ_b 0.400; acc 0.750", "0.550 [0.450, 0.650]"]
    assert rows["nDCG"] == ["**0.610** [0.510, 0.710]; τ_b 0.500; acc 0.800; p_Holm < 0.001", "0.520 [0.420, 0.620]; p_Holm = 1.00"]
    assert rows["UDCG_θ (trained on the other questions)"] == ["—", "**0.700** [0.600, 0.800]; p_Holm = 0.30"]
    assert rows["eRAG"][0] == "0.700 [0.600, 0.800] (circular); p_Holm = 0.030"  # higher rho, never best
    assert rows["AP (MAP)"] == ["—", "—"]


def test_summary_row_reads_outcome_shares_and_the_best_classical_metric(tmp_path):
    run = tmp_path / "run"
    (run / "tables").mkdir(parents=True)
    (run / "data").mkdir()
    full = lambda metric, rho, tau, acc, p=None: {  # noqa: E731
        **_row(metric, rho, p, n=9, none=1, tau=tau, acc=acc), "p_tau_b_holm": None if p is None else 0.0123,
        "p_pair_acc_holm": None if p is None else 1.0}
    (run / "tables" / "table3-all.json").write_text(json.dumps(
        [full("UDCG", 0.5, 0.4, 0.75), full("eRAG", 0.9, 0.8, 0.9, 0.01), full("nDCG", 0.61, 0.5, 0.8, 0.02),
         full("P", 0.6, 0.55, 0.7, 0.3), {**full("AP", 0.0, 0.0, 0.0, 0.5), "mean_rho": None}]))
    outcomes = ["correct"] * 3 + ["abstained"] * 2 + ["wrong"] * 3
    studies = ["main"] * 8 + ["positions"] * 4
    with gzip.open(run / "data" / "contexts.jsonl.gz", "wt") as fh:
        for i, study in enumerate(studies):
            fh.write(json.dumps({"study": study, "outcome": outcomes[i] if study == "main" else "correct"}) + "\n")
    module = load_script("results_table")
    # 3/8 correct = 38%, 2/8 abstained = 25%; eRAG is not classical; nDCG beats P on rho; NA rho skipped.
    assert module.summary_row(run, "Toy") == (
        f"| [Toy]({run.as_posix()}/report.md) | 10 | 38% / 25% | 0.500 / 0.400 / 0.750 | "
        "nDCG 0.610 / 0.500 / 0.800 | 0.060 / 0.012 / 1.00 |")
