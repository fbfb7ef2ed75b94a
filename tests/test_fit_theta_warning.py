"""fit-theta says when its data are too few for stable weights (and not when they are enough), and
when its fit is saturated (every training pair inside the margin: the weights are the mean pair
difference, not positional effects)."""

from __future__ import annotations

import gzip
from pathlib import Path

from udcg.cli import main

ROOT = Path(__file__).resolve().parent.parent
CONTEXTS = ROOT / "docs/results/nq-qwen0.5b/data/contexts.jsonl.gz"


def _contexts(tmp_path: Path, n: int | None) -> Path:
    lines = [line for line in gzip.open(CONTEXTS, "rt").read().splitlines() if '"study": "main"' in line]
    path = tmp_path / "contexts.jsonl"
    path.write_text("\n".join(lines[:n]) + "\n")
    return path


def test_few_questions_warn_and_many_do_not(tmp_path, capsys):
    assert main(["fit-theta", str(_contexts(tmp_path, 40)), "--k", "5", "-o", str(tmp_path / "few.json")]) == 0
    assert "warning: fitted from 4 questions" in capsys.readouterr().err
    assert main(["fit-theta", str(_contexts(tmp_path, None)), "--k", "5", "--C", "1", "-o", str(tmp_path / "all.json")]) == 0
    captured = capsys.readouterr()
    assert "warning" not in captured.err and "of the pairs inside the margin" in captured.out


def test_a_saturated_fit_prints_its_margin_share_and_warns(tmp_path, capsys):
    """With SVM-rank's default C = 0.01 the 50 published NQ questions' pairs all lie inside the margin."""
    assert main(["fit-theta", str(_contexts(tmp_path, None)), "--k", "5", "-o", str(tmp_path / "all.json")]) == 0
    captured = capsys.readouterr()
    assert "100% of the pairs inside the margin, cosine 1.0000 with the mean pair difference; SATURATED" in captured.out
    assert "warning: saturated fit" in captured.err and "too few" not in captured.err
