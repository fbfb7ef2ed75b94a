"""Every published result rebuilds from its committed data alone, byte for byte, with no model:
each validate run under docs/results/ (``udcg report``), the UDCG_theta transfer table and the
reader-abstention table (from its cache)."""

from __future__ import annotations

import json
import math
import os
import shlex
import shutil
import sys
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


def test_the_paired_reader_comparison_rebuilds(tmp_path, monkeypatch, capsys):
    published = RESULTS / "readers-paired"
    if not (published / "README.md").is_file():
        pytest.skip("no published reader comparison")
    command = (published / "README.md").read_text(encoding="utf-8").split("    python scripts/compare_readers.py ")[1]
    argv = shlex.split(command.split(" --out")[0])  # every option of the published command but the folder
    monkeypatch.chdir(RESULTS.parents[1])  # the run paths are the repository-relative ones of the command
    assert load_script("compare_readers").main([*argv, "--out", str(tmp_path)]) == 0
    capsys.readouterr()
    for name in ("README.md", "summary.json", "per-question.jsonl.gz"):
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


def _abstention_items(module) -> list[dict]:
    from udcg.io.sources import default_data_dir

    data_dir = default_data_dir()
    if data_dir is None or not (data_dir / "popqa-contriever-100").is_dir():
        pytest.skip("no shared PopQA data: set $UDCG_DATA_DIR to the folder holding popqa-contriever-100/")
    return module.select(data_dir, 100)


def test_the_reader_abstention_table_rebuilds_from_its_cache(tmp_path, monkeypatch, capsys):
    """scripts/reader_abstention.py reads every result from its published cache (a copy: no model is
    loaded) and writes the same table and per-passage data, and the table its README shows."""
    published = RESULTS / "reader-abstention"
    module = load_script("reader_abstention")
    _abstention_items(module)
    shutil.copytree(published / "cache", tmp_path / "cache")
    monkeypatch.setattr("udcg.llm.registry.load_backend", lambda *a, **kw: pytest.fail("a model was loaded"))
    monkeypatch.setattr(sys, "argv", ["reader_abstention.py", "--data-dir", os.environ["UDCG_DATA_DIR"],
                                      "--work", str(tmp_path / "cache"), "--out", str(tmp_path / "out")])
    assert module.main() == 0
    capsys.readouterr()
    for name in ("table.md", "passages.jsonl.gz"):
        assert (tmp_path / "out" / name).read_bytes() == (published / name).read_bytes(), name
    made, shown = (json.loads((folder / "table.json").read_text()) for folder in (tmp_path / "out", published))
    assert made["table"] == shown["table"]  # model_seconds_this_run: the seconds of the run that wrote it
    assert (tmp_path / "out" / "table.md").read_text() in (published / "README.md").read_text()


def test_reader_abstention_computes_only_what_its_cache_lacks(tmp_path, monkeypatch):
    """Through the cached runner: missing records are read in chunks and appended; cached ones are kept."""
    from tests.conftest import ScriptedBackend

    module = load_script("reader_abstention")
    items = [{"qid": f"q{i}", "pid": f"p{i}", "rank": 1, "relevant": i % 2 == 0, "question": f"question {i}?",
              "answers": ["Paris"], "text": f"passage {i}"} for i in range(5)]
    cache = tmp_path / "cache.jsonl"
    cache.write_text(json.dumps({"key": "q0\tp0", "p_abs": 0.5, "answer": "NO-RESPONSE"}) + "\n")
    backend = ScriptedBackend(reads=True, first=lambda chat, candidates: {c: math.log(0.25) for c in candidates},
                              answer="Paris")
    monkeypatch.setattr("udcg.llm.registry.load_backend", lambda *a, **kw: backend)
    rows, _ = module.measure(items, "scripted", "udcg-code-v1", cache, chunk=2)
    assert [(r["p_abs"], r["abstained"], r["correct"]) for r in rows] == [(0.5, True, False)] + [(0.25, False, True)] * 4
    assert [len(call.chats) for call in backend.calls] == [1, 2, 1]  # chunks [q0 q1] [q2 q3] [q4], q0 cached
    assert len(cache.read_text().splitlines()) == 5
    assert module.measure(items, "scripted", "udcg-code-v1", cache, chunk=2)[0] == rows and len(backend.calls) == 3


def test_the_confirmatory_analysis_rebuilds(tmp_path, monkeypatch, capsys):
    """Issue #38's verdict (written at question 350 by scripts/confirm_equivalence.py --out)."""
    published = RESULTS / "confirm-equivalence"
    if not (published / "README.md").is_file():
        pytest.skip("the confirmatory run has not reached its target yet")
    monkeypatch.chdir(RESULTS.parents[1])
    out = tmp_path / "confirm-equivalence"
    assert load_script("confirm_equivalence").main(["docs/results/nq-qwen1.5b-confirm", "--out", str(out)]) == 0
    capsys.readouterr()
    readme = (out / "README.md").read_text(encoding="utf-8").replace(out.as_posix(), "docs/results/confirm-equivalence")
    assert readme == (published / "README.md").read_text(encoding="utf-8")
    assert (out / "per-question.jsonl.gz").read_bytes() == (published / "per-question.jsonl.gz").read_bytes()
