"""fit-theta says when its data are too few for stable weights (and not when they are enough)."""

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
    assert main(["fit-theta", str(_contexts(tmp_path, None)), "--k", "5", "-o", str(tmp_path / "all.json")]) == 0
    assert "warning" not in capsys.readouterr().err
