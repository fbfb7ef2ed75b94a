"""The Python API (udcg.udcg / evaluate / compare / score_runs): the README's example, hand-computed
values, the dict and file inputs giving the same numbers, and the classical part against ir_measures."""

from __future__ import annotations

import math

import ir_measures
import numpy as np
import pytest

import udcg
from udcg.errors import InputError
from udcg.experiment import run_scores
from udcg.io.sources import example_path

RUN = {"q1": {"d1": 2.0, "d2": 1.0}, "q2": {"d3": 1.5, "d1": 0.5}}
QRELS = {"q1": {"d1": 1}, "q2": {"d4": 1}}
UTILITIES = {"q1": {"d1": 0.9, "d2": -0.7}, "q2": {"d3": -0.2, "d1": -0.95}}


def _sigmoid(x: float) -> float:
    return 1 / (1 + math.exp(-x))


def test_the_readme_example_by_hand():
    assert udcg.udcg([0.9, -0.4, 0.0, -0.8, 0.2]) == pytest.approx(_sigmoid((1.1 - 1.2 / 3) / 5))
    got = udcg.evaluate(RUN, QRELS, utilities=UTILITIES, metrics=["UDCG@2", "nDCG@2", "P@2"])
    q1 = _sigmoid((0.9 - 0.7 / 3) / 2)
    q2 = _sigmoid(-(0.2 + 0.95) / 3 / 2)
    assert got == pytest.approx({"UDCG@2": (q1 + q2) / 2, "nDCG@2": 0.5, "P@2": 0.25})
    per_query = udcg.evaluate(RUN, QRELS, utilities=UTILITIES, metrics="UDCG@2", per_query=True)
    assert per_query["q1"]["UDCG@2"] == pytest.approx(q1) and per_query["q2"]["UDCG@2"] == pytest.approx(q2)
    frame = udcg.evaluate(RUN, QRELS, utilities=UTILITIES, metrics="UDCG@2,P@2", as_frame=True)
    assert frame.loc["P@2", "mean"] == 0.25


def test_a_short_ranking_is_a_shorter_context_and_an_empty_one_is_nan():
    run = {"q1": {"d1": 1.0}, "q2": {}}
    got = udcg.evaluate(run, {"q1": {"d1": 1}, "q2": {"d9": 1}}, utilities={"q1": {"d1": 0.6}},
                        metrics=["UDCG@5"], per_query=True)
    assert got["q1"]["UDCG@5"] == pytest.approx(_sigmoid(0.6))  # one document: divides by 1, not 5
    assert math.isnan(got["q2"]["UDCG@5"])


def test_without_qrels_only_utility_measures_and_the_runs_queries():
    assert udcg.evaluate(RUN, utilities=UTILITIES, metrics=["UDCG@1"]) == pytest.approx(
        {"UDCG@1": (_sigmoid(0.9) + _sigmoid(-0.2 / 3)) / 2})
    with pytest.raises(InputError, match="needs qrels"):
        udcg.evaluate(RUN, utilities=UTILITIES, metrics=["nDCG@2"])
    with pytest.raises(InputError, match="needs utilities"):
        udcg.evaluate(RUN, QRELS, metrics=["UDCG@2"])


def test_classical_values_equal_ir_measures_on_the_packaged_runs():
    folder = example_path()
    qrels = folder / "qrels" / "test.tsv"
    measures = ["nDCG@5", "P@5", "RR", "AP", "R@10"]
    for name in ("bm25", "dense", "hybrid"):
        ours = udcg.evaluate(folder / "runs" / f"{name}.trec", qrels, metrics=measures, per_query=True)
        run = {q: d for q, d in run_scores._read_run(folder / "runs" / f"{name}.trec").items()}
        theirs = {}
        judged = {q: {d: int(r) for d, r in docs.items()} for q, docs in run_scores._read_qrels(qrels).items()}
        for m in ir_measures.iter_calc([ir_measures.parse_measure(x) for x in measures], judged, run):
            theirs.setdefault(m.query_id, {})[str(m.measure)] = m.value
        for qid, row in theirs.items():
            for measure, value in row.items():
                assert ours[qid][measure] == pytest.approx(value, abs=1e-9), (name, qid, measure)


def test_compare_from_files_equals_compare_from_dicts(tmp_path):
    folder = example_path()
    rng = np.random.default_rng(0)
    runs = {n: run_scores._read_run(folder / "runs" / f"{n}.trec") for n in ("bm25", "dense")}
    utilities: dict = {}
    for run in runs.values():
        for q, docs in run.items():
            utilities.setdefault(q, {}).update({d: float(rng.uniform(-1, 1)) for d in docs})
    (tmp_path / "u.qrels").write_text("".join(f"{q} 0 {d} {u!r}\n" for q, docs in utilities.items()
                                              for d, u in docs.items()))
    a = udcg.compare([folder / "runs" / "bm25.trec", folder / "runs" / "dense.trec"], folder / "qrels" / "test.tsv",
                     utilities=tmp_path / "u.qrels", metrics="UDCG@5,nDCG@5", n_boot=500)
    b = udcg.compare(runs, run_scores._read_qrels(folder / "qrels" / "test.tsv"), utilities=utilities,
                     metrics=["UDCG@5", "nDCG@5"], n_boot=500)
    assert a.to_dict() == b.to_dict()
    assert a.runs == ("bm25", "dense") and "UDCG@5" in a.format("markdown")
    assert a.to_frame().loc[("dense", "nDCG@5"), "mean"] == pytest.approx(1.0)


def test_bad_api_input_is_an_input_error(tmp_path):
    with pytest.raises(InputError, match="at least two runs"):
        udcg.compare({"a": RUN}, QRELS, metrics="P@1")
    with pytest.raises(InputError, match="two runs named"):
        udcg.compare([tmp_path / "x.trec", tmp_path / "sub" / "x.trec"], QRELS, metrics="P@1")
    with pytest.raises(InputError, match="run 'r'"):
        udcg.score_runs({"r": 42}, QRELS, metrics="P@1")
    with pytest.raises(InputError, match="unknown measure"):
        udcg.evaluate(RUN, QRELS, metrics=["bleu@4"])
    with pytest.raises(InputError, match="does not say which model"):
        udcg.evaluate(RUN, QRELS, utilities=UTILITIES, metrics=["UDCG@2"], model="m")
