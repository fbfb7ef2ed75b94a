"""Every published result rebuilds from its committed data alone, byte for byte, with no model:
each validate run under docs/results/ (``udcg report``) and the UDCG_theta transfer table."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.conftest import load_script
from udcg.cli import main

RESULTS = Path(__file__).resolve().parents[1] / "docs" / "results"
RUNS = sorted(p.parent.parent for p in RESULTS.glob("*/data/contexts.jsonl.gz"))


def _files(folder: Path) -> list[Path]:
    return sorted(p.relative_to(folder) for sub in ("tables", "figures") for p in (folder / sub).rglob("*") if p.is_file())


@pytest.mark.parametrize("run", RUNS, ids=[r.name for r in RUNS])
def test_udcg_report_rebuilds_the_published_run(run, tmp_path, capsys):
    assert main(["report", str(run), "-o", str(tmp_path)]) == 0
    capsys.readouterr()
    rebuilt = [Path("report.md"), Path("summary.json"), *_files(run)]
    assert _files(tmp_path) == _files(run)
    assert [p for p in rebuilt if (tmp_path / p).read_bytes() != (run / p).read_bytes()] == []


def test_the_theta_transfer_table_rebuilds(tmp_path):
    published = RESULTS / "theta-transfer"
    if not (published / "table.md").is_file():
        pytest.skip("no published transfer table")
    module = load_script("theta_transfer")
    assert module.main([str(RESULTS / "nq-qwen0.5b"), str(RESULTS / "popqa-qwen0.5b"), "--out", str(tmp_path)]) == 0
    for name in ("table.md", "table.json", "per-context.jsonl.gz"):
        assert (tmp_path / name).read_bytes() == (published / name).read_bytes(), name


def test_the_readme_results_table_matches_the_published_runs(monkeypatch):
    """Each row of the README's results table is what ``results_table.py --summary`` reads off the run."""
    root = RESULTS.parents[1]
    module = load_script("results_table")
    monkeypatch.chdir(root)
    rows = [line.strip() for line in (root / "README.md").read_text().splitlines()
            if line.strip().startswith("| [") and "/report.md) |" in line]
    assert rows, "the README has no results table"
    for row in rows:
        label, link = row[3:].split("](", 1)
        folder = Path(link.split("/report.md)", 1)[0])
        assert row == module.summary_row(folder, label), folder
