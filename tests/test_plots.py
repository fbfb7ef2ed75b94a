"""Issue #50 item 9: ``compare --plot`` (a forest plot) and ``reader-check --plot`` (p_abs of the
relevant and irrelevant pairs) are drawn from the comparison's and the check's own numbers. The
utilities are a real annotation of the packaged example's three runs by smollm2-135m, rebuilt from
its resume cache (tests/data/nq-example-smollm2) without loading the model."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import numpy as np
import pytest

from tests import lazy

lazy.importorskip("matplotlib", reason="the figures need matplotlib (the experiment extra)")

from tests.example_utilities import QRELS, RUNS, smollm2_utilities  # noqa: E402
from udcg.cli import main  # noqa: E402
from udcg.flows.plots import comparison_figure, reader_check_figure  # noqa: E402
from udcg.flows.reader_check import check_utilities  # noqa: E402
from udcg.flows.run_compare import compare_runs  # noqa: E402
from udcg.flows.run_options import CompareOptions  # noqa: E402


@pytest.fixture(scope="module")
def utilities(tmp_path_factory):
    return smollm2_utilities(tmp_path_factory.mktemp("plots") / "utilities")


def _argv(utilities: Path, *extra: str) -> list[str]:
    return ["compare", *[a for run in RUNS.values() for a in ("--run", str(run))], "--qrels", str(QRELS),
            "--utilities", str(utilities), "--metrics", "UDCG@5,nDCG@5", "--n-boot", "500", *extra]


def _artist(ax, gid: str):
    return next(a for a in [*ax.lines, *ax.collections] if a.get_gid() == gid)


def test_the_forest_plot_draws_the_tables_numbers(utilities, tmp_path, capsys):
    """Every pair's dot, interval and ±MDD band are the comparison's values; the CLI's figure is of
    the same comparison as its JSON table (the pairs there are the pairs drawn here)."""
    argv = _argv(utilities, "-o", str(tmp_path / "table.json"), "--plot", str(tmp_path / "forest.png"),
                 "--correction", "none", "--alpha", "0.3")
    assert main(argv) == 0
    capsys.readouterr()
    assert (tmp_path / "forest.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    table = json.loads((tmp_path / "table.json").read_text())
    cmp, _ = compare_runs({k: str(v) for k, v in RUNS.items()},
                          CompareOptions(qrels=str(QRELS), utilities=str(utilities), metrics="UDCG@5,nDCG@5", n_boot=500,
                                         correction="none", alpha=0.3))
    assert [(p["measure"], p["run_a"], p["run_b"], p["diff"], p["low"], p["high"], p["mdd"]) for p in table["pairs"]] \
        == [(t.measure, t.run_a, t.run_b, t.diff, t.low, t.high, t.mdd) for t in cmp.pairs]
    fig = comparison_figure(cmp)
    axes = fig.axes
    assert [ax.get_title(loc="left").split()[0] for ax in axes] == ["UDCG@5", "nDCG@5"]
    for ax, measure in zip(axes, cmp.measures):
        tests = [t for t in cmp.pairs if t.measure == measure]
        assert [label.get_text() for label in ax.get_yticklabels()] == [f"{t.run_a} − {t.run_b}" for t in tests]
        np.testing.assert_array_equal(_artist(ax, "diff").get_xdata(), [t.diff for t in tests])
        segments = _artist(ax, "interval").get_segments()
        np.testing.assert_array_equal([s[:, 0] for s in segments], [[t.low, t.high] for t in tests])
        bands = _artist(ax, "mdd").get_segments()
        np.testing.assert_array_equal([s[:, 0] for s in bands], [[-t.mdd, t.mdd] for t in tests])
        np.testing.assert_array_equal(_artist(ax, "significant").get_xdata(), [t.diff for t in tests if t.significant])
        assert any(line.get_xdata()[0] == 0 for line in ax.lines if line.get_gid() is None)  # the 0 line
    assert any(t.significant for t in cmp.pairs) and not all(t.significant for t in cmp.pairs)


def test_an_svg_and_the_reader_checks_figure(utilities, tmp_path, capsys):
    assert main(_argv(utilities, "--plot", str(tmp_path / "forest.svg"))) == 0
    assert (tmp_path / "forest.svg").read_text().lstrip().startswith("<?xml")
    assert main(["reader-check", str(utilities), "--plot", str(tmp_path / "reader.png")]) == 0
    assert (tmp_path / "reader.png").read_bytes()[:4] == b"\x89PNG"
    capsys.readouterr()
    check = check_utilities(utilities)
    records = [json.loads(line) for line in (utilities / "utilities.jsonl").read_text().splitlines()]
    assert len(records) == check.n_relevant + check.n_judged_irrelevant + check.n_unjudged
    pairs = {"u": [(r["p_abs"], "relevant" if r["relevant"] else "unjudged") for r in records]}
    ax = reader_check_figure({"u": check}, pairs).axes[0]
    assert f"AUC {check.auc:.3f} [{check.auc_low:.3f}, {check.auc_high:.3f}]" in ax.get_title(loc="left")
    legend = [t.get_text() for t in ax.get_legend().get_texts()]
    assert f"relevant ({check.n_relevant} pairs)" in legend
    assert f"unjudged (taken as irrelevant) ({check.n_unjudged} pairs)" in legend


def test_a_figure_of_another_format_or_over_a_run_is_refused_before_any_work(utilities, tmp_path, capsys):
    assert main(_argv(utilities, "-o", str(tmp_path / "t.md"), "--plot", str(tmp_path / "forest.pdf"))) == 2
    err = capsys.readouterr().err.strip()
    assert err.endswith("forest.pdf: give a .png or .svg file (the figure's format follows the extension)")
    assert len(err.splitlines()) == 1 and not (tmp_path / "t.md").exists()
    run = tmp_path / "bm25.png"
    shutil.copy(RUNS["bm25"], run)
    argv = ["compare", "--run", str(run), "--run", str(RUNS["dense"]), "--qrels", str(QRELS), "--metrics", "nDCG@5",
            "--plot", str(run)]
    assert main(argv) == 2
    assert "--plot" in capsys.readouterr().err and run.read_text() == RUNS["bm25"].read_text()


def test_without_matplotlib_one_line_names_the_extra(utilities, tmp_path, capsys, monkeypatch):
    import sys

    for name in ("matplotlib", "matplotlib.figure", "matplotlib.backends.backend_agg"):
        monkeypatch.setitem(sys.modules, name, None)  # as if not installed
    assert main(_argv(utilities, "--plot", str(tmp_path / "f.png"))) == 2
    assert capsys.readouterr().err == ("udcg compare: error: --plot needs matplotlib, which is not installed: "
                                       "pip install -e '.[experiment]'\n")
    assert main(["reader-check", str(utilities), "--plot", str(tmp_path / "r.png")]) == 2
    assert "pip install -e '.[experiment]'" in capsys.readouterr().err
