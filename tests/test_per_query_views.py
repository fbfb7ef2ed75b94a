"""Issue #50 item 10: which queries drive a gap (``compare --per-query``, ``to_frame("queries")``),
and the API's results shown as tables in a notebook (``_repr_html_``) with a short ``repr``."""

from __future__ import annotations

import json
import math

import numpy as np
import pytest

import udcg
from tests.example_utilities import QRELS, RUNS, smollm2_utilities
from udcg.cli import main

METRICS = "UDCG@5,nDCG@5"


@pytest.fixture(scope="module")
def utilities(tmp_path_factory):
    return smollm2_utilities(tmp_path_factory.mktemp("views") / "utilities")


def _tsv(path) -> tuple[list[str], list[list[str]]]:
    header, *rows = [line.split("\t") for line in path.read_text().splitlines()]
    return header, rows


def test_per_query_rows_are_the_values_the_table_compared(utilities, tmp_path, capsys):
    argv = ["compare", *[a for run in RUNS.values() for a in ("--run", str(run))], "--qrels", str(QRELS),
            "--utilities", str(utilities), "--metrics", METRICS, "--n-boot", "500", "-o", str(tmp_path / "t.json"),
            "--per-query", str(tmp_path / "q.tsv")]
    assert main(argv) == 0
    capsys.readouterr()
    header, rows = _tsv(tmp_path / "q.tsv")
    assert header == ["measure", "qid", "bm25", "dense", "hybrid", "bm25 - dense", "bm25 - hybrid", "dense - hybrid"]
    scores = {name: udcg.evaluate(str(run), str(QRELS), utilities=str(utilities), metrics=METRICS)
              for name, run in RUNS.items()}
    qids = scores["bm25"].qids
    assert len(rows) == 2 * len(qids) and [r[1] for r in rows[:len(qids)]] == list(qids)
    for row in rows:
        measure, qid = row[0], row[1]
        values = [float(v) for v in row[2:5]]
        assert values == [scores[r].per_query()[qid][measure] for r in RUNS]
        assert [float(v) for v in row[5:]] == [values[0] - values[1], values[0] - values[2], values[1] - values[2]]
    table = json.loads((tmp_path / "t.json").read_text())
    for pair in table["pairs"]:  # each pair's mean difference is the mean of its per-query column
        column = header.index(f"{pair['run_a']} - {pair['run_b']}")
        diffs = [float(r[column]) for r in rows if r[0] == pair["measure"]]
        assert math.isclose(np.mean(diffs), pair["diff"], rel_tol=1e-12, abs_tol=1e-15)


def test_to_frame_queries_and_the_notebook_displays(utilities):
    runs = {name: str(run) for name, run in RUNS.items() if name != "hybrid"}
    cmp = udcg.compare(runs, str(QRELS), utilities=str(utilities), metrics=METRICS, n_boot=500, baseline="dense")
    frame = cmp.to_frame("queries")
    assert list(frame.columns) == ["bm25", "dense", "bm25 - dense"]
    assert frame.index.names == ["measure", "qid"] and len(frame) == 2 * len(cmp.qids)
    gap = frame.loc["nDCG@5"]["bm25 - dense"]
    biggest = sorted(gap[gap != 0].index)
    assert biggest == ["nq11", "nq15"] and (gap[biggest] == -1).all()  # nDCG@5's gap: 0 / 18 / 2 in the table
    pair = next(t for t in cmp.pairs if t.measure == "nDCG@5")
    assert frame.loc["nDCG@5"]["bm25 - dense"].mean() == pytest.approx(pair.diff, abs=1e-15)

    assert len(repr(cmp)) < 200 and repr(cmp).startswith("<Comparison of 2 runs (bm25, dense)")
    page = cmp._repr_html_()
    assert page.count("<table>") == 2 and "<td>bm25</td><td>dense</td>" in page
    assert "<td>" + cmp.format().split("| nDCG@5 | bm25 | dense | ")[1].split(" |")[0] + "</td>" in page

    scores = udcg.evaluate(runs["bm25"], str(QRELS), utilities=str(utilities), metrics=METRICS)
    assert len(repr(scores)) < 200
    assert "<th>UDCG@5</th><th>nDCG@5</th>" in scores._repr_html_()
    assert f"<td>{scores.means()['nDCG@5']:.4f}</td>" in scores._repr_html_()

    check = udcg.reader_check(str(utilities))
    assert len(repr(check)) < 200 and f"AUC {check.auc:.3f}" in repr(check)
    assert f"<td>relevant</td><td>{check.n_relevant}</td>" in check._repr_html_()


def test_a_comparison_made_from_arrays_has_no_query_rows():
    from udcg.metrics.compare import CompareTests, compare_scores

    cmp = compare_scores({"a": {"m": np.array([0.1, 0.2, 0.3])}, "b": {"m": np.array([0.0, 0.2, 0.1])}}, tests=CompareTests(n_boot=50))
    assert cmp.query_rows() == (["measure", "qid", "a", "b", "a - b"], [])


def test_the_rows_file_may_be_neither_the_table_nor_a_run(tmp_path, capsys):
    argv = ["compare", "--run", str(RUNS["bm25"]), "--run", str(RUNS["dense"]), "--qrels", str(QRELS),
            "--metrics", "nDCG@5", "--n-boot", "200"]
    assert main([*argv, "-o", str(tmp_path / "x.tsv"), "--per-query", str(tmp_path / "x.tsv")]) == 2
    assert "the same file as --per-query" in capsys.readouterr().err and not (tmp_path / "x.tsv").exists()
    run = tmp_path / "dense.trec"
    run.write_text(RUNS["dense"].read_text())
    assert main(["compare", "--run", str(RUNS["bm25"]), "--run", str(run), "--qrels", str(QRELS), "--metrics",
                 "nDCG@5", "--per-query", str(run)]) == 2
    assert "an output never replaces an input" in capsys.readouterr().err
    assert run.read_text() == RUNS["dense"].read_text()
