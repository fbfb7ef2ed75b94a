"""scripts/results_table.py: the README's headline table from published report tables."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

SCRIPT = Path(__file__).resolve().parents[1] / "scripts" / "results_table.py"


def _row(metric, rho, p, n=8, none=2):
    return {"metric": metric, "mean_rho": rho, "ci_low": rho - 0.1, "ci_high": rho + 0.1, "n_questions": n,
            "no_rho_outcome": none, "p_vs_baseline": p}


def test_one_column_per_table_best_in_bold_and_p_against_udcg(tmp_path):
    tables = tmp_path / "run" / "tables"
    tables.mkdir(parents=True)
    (tables / "table3-all.json").write_text(json.dumps(
        [_row("nDCG", 0.61, 0.0004, 20, 4), _row("UDCG", 0.5, None, 20, 4), _row("eRAG", 0.3, 0.042, 20, 4)]))
    (tables / "table3.json").write_text(json.dumps(
        [_row("UDCG_theta", 0.7, 0.3), _row("UDCG", 0.55, None), _row("nDCG", 0.52, 0.5)]))
    out = subprocess.run([sys.executable, str(SCRIPT), f"{tmp_path / 'run'}:Toy"], capture_output=True, text=True,
                         check=True).stdout.splitlines()
    assert out[0] == ("| metric | Toy, 24 questions (all; ρ defined for 20; no θ) | "
                      "Toy, 10 test questions (ρ defined for 8) |")
    cells = [line[2:-2].split(" | ") for line in out[2:]]
    rows = {c[0]: c[1:] for c in cells}
    assert rows["**UDCG**"] == ["0.500 [0.400, 0.600]", "0.550 [0.450, 0.650]"]
    assert rows["nDCG"][0] == "**0.610** [0.510, 0.710] (best), p < 0.001"
    assert rows["UDCG_θ (trained on the other questions)"] == ["—", "**0.700** [0.600, 0.800] (best), p = 0.30"]
    assert rows["eRAG"][0] == "0.300, p = 0.042"
    assert rows["AP (MAP)"] == ["—", "—"]
