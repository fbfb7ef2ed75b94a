"""Issue #50 item 10: docs/notebook.ipynb runs as shipped (nbclient, the python3 kernel of this
environment), in a copy of docs/ so that nothing is written there, and shows its results as
tables and its figure as a PNG."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

DOCS = Path(__file__).resolve().parent.parent / "docs"


def test_the_example_notebook_runs_and_renders_tables_and_a_figure(tmp_path):
    pytest.importorskip("ipykernel", reason="running the notebook needs a Jupyter kernel (pip install ipykernel)")
    pytest.importorskip("matplotlib", reason="the notebook's figure needs matplotlib (the experiment extra)")
    import nbformat
    from nbclient import NotebookClient

    for name in ("notebook.ipynb", "nq-example-utilities.jsonl"):
        shutil.copy(DOCS / name, tmp_path / name)
    notebook = nbformat.read(tmp_path / "notebook.ipynb", as_version=4)
    assert all(not cell.get("outputs") for cell in notebook.cells if cell.cell_type == "code")  # shipped clean
    NotebookClient(notebook, kernel_name="python3", timeout=300,
                   resources={"metadata": {"path": str(tmp_path)}}).execute()  # a failing cell raises
    outputs = [cell.outputs for cell in notebook.cells if cell.cell_type == "code"]
    shown = [out[-1].get("data", {}) if out else {} for out in outputs]
    evaluate, per_query, compare, rows, figure, check = shown[1:]
    assert "<th>UDCG@5</th><th>nDCG@5</th>" in evaluate["text/html"] and "<td>0.9000</td>" in evaluate["text/html"]
    assert "qid" in per_query["text/html"]
    assert compare["text/html"].count("<table>") == 2 and "<td>bm25</td><td>dense</td>" in compare["text/html"]
    assert compare["text/plain"].startswith("<Comparison of 2 runs")
    assert "bm25 - dense" in rows["text/html"] and "nq11" in rows["text/html"]
    assert "image/png" in figure and (tmp_path / "forest.png").exists()
    assert "cannot measure distraction" in check["text/html"]
    assert not list(DOCS.glob("forest.png"))
