"""The Python API (udcg.udcg / udcg_many / evaluate / compare / score_runs): the README's example, run
as written and by hand, one return type per function, the dict and file inputs giving the same
numbers, and the classical part against ir_measures."""

from __future__ import annotations

import json
import math
import shutil
from pathlib import Path

import ir_measures
import numpy as np
import pytest

import udcg
from udcg.errors import InputError
from udcg.flows import run_scores
from udcg.io.sources import example_path

RUN = {"q1": {"d1": 2.0, "d2": 1.0}, "q2": {"d3": 1.5, "d1": 0.5}}
QRELS = {"q1": {"d1": 1}, "q2": {"d4": 1}}
UTILITIES = {"q1": {"d1": 0.9, "d2": -0.7}, "q2": {"d3": -0.2, "d1": -0.95}}


def _sigmoid(x: float) -> float:
    return 1 / (1 + math.exp(-x))


def test_the_readme_example_by_hand():
    assert udcg.udcg([0.9, -0.4, 0.0, -0.8, 0.2]) == pytest.approx(_sigmoid((1.1 - 1.2 / 3) / 5))
    np.testing.assert_allclose(udcg.udcg_many([[0.9, -0.4], [0.2, 0.0]]),
                               [_sigmoid((0.9 - 0.4 / 3) / 2), _sigmoid(0.2 / 2)])
    scores = udcg.evaluate(RUN, QRELS, utilities=UTILITIES, metrics=["UDCG@2", "nDCG@2", "P@2"])
    q1 = _sigmoid((0.9 - 0.7 / 3) / 2)
    q2 = _sigmoid(-(0.2 + 0.95) / 3 / 2)
    assert scores.means() == pytest.approx({"UDCG@2": (q1 + q2) / 2, "nDCG@2": 0.5, "P@2": 0.25})
    per_query = scores.per_query()
    assert per_query["q1"]["UDCG@2"] == pytest.approx(q1) and per_query["q2"]["UDCG@2"] == pytest.approx(q2)
    assert per_query["q1"]["nDCG@2"] == 1.0 and per_query["q2"]["P@2"] == 0.0
    frame = scores.to_frame()
    assert list(frame.index) == ["q1", "q2"] and list(frame.columns) == ["UDCG@2", "nDCG@2", "P@2"]
    assert frame["P@2"].mean() == 0.25 and frame.loc["q1", "UDCG@2"] == pytest.approx(q1)


def test_a_short_ranking_is_a_shorter_context_and_an_empty_one_is_sigmoid_0():
    run = {"q1": {"d1": 1.0}, "q2": {}}
    got = udcg.evaluate(run, {"q1": {"d1": 1}, "q2": {"d9": 1}, "q3": {"d9": 1}}, utilities={"q1": {"d1": 0.6}},
                        metrics=["UDCG@5"]).per_query()
    assert got["q1"]["UDCG@5"] == pytest.approx(_sigmoid(0.6))  # one document: divides by 1, not 5
    assert got["q2"]["UDCG@5"] == got["q3"]["UDCG@5"] == 0.5  # no document (q3: not in the run): every slot u = 0


def test_without_qrels_only_utility_measures_and_the_runs_queries():
    assert udcg.evaluate(RUN, utilities=UTILITIES, metrics=["UDCG@1"]).means() == pytest.approx(
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
        ours = udcg.evaluate(folder / "runs" / f"{name}.trec", qrels, metrics=measures).per_query()
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


def test_one_return_type_per_function(tmp_path):
    assert isinstance(udcg.udcg([0.5]), float) and isinstance(udcg.udcg(np.array([0.5, -0.5])), float)
    assert isinstance(udcg.udcg_many([[0.5]]), np.ndarray) and udcg.udcg_many(np.zeros((3, 2))).shape == (3,)
    with pytest.raises(InputError, match="udcg_many"):
        udcg.udcg([[0.5, 0.1], [0.2, 0.3]])
    with pytest.raises(InputError, match="udcg.udcg"):
        udcg.udcg_many([0.5, 0.1])
    folder = example_path()
    from_file = udcg.evaluate(folder / "runs" / "bm25.trec", folder / "qrels" / "test.tsv", metrics="P@5,RR")
    from_dict = udcg.evaluate(RUN, QRELS, metrics="P@5")
    assert isinstance(from_file, run_scores.RunScores) and isinstance(from_dict, run_scores.RunScores)
    assert from_file.name == "bm25" and from_dict.name == "run" and "bm25" in repr(from_file)
    assert list(from_file.per_query()) == list(from_file.qids) == list(from_file.to_frame().index)


def _readme_python_blocks() -> str:
    text = (Path(__file__).resolve().parents[1] / "README.md").read_text()
    section = text.split("\n## Python API\n", 1)[1].split("\n## ", 1)[0]
    blocks = [block.split("```", 1)[0] for block in section.split("```python\n")[1:]]
    return "\n".join(b for b in blocks if not b.startswith("# needs a model:"))  # those: tests/test_api_flows.py


def test_the_readme_python_api_runs_as_written(tmp_path, monkeypatch, capsys):
    """The README's examples, run in a folder like the quickstart's: the packaged nq-example, a
    utilities folder for the runs' documents and judged answers of each run."""
    from udcg.annotate.utilities import UtilityRecord, write_utilities

    shutil.copytree(example_path(), tmp_path / "nq-example")
    rng = np.random.default_rng(0)
    qrels = run_scores._read_qrels(tmp_path / "nq-example" / "qrels" / "test.tsv")
    records, judged = {}, []
    for name in ("bm25", "dense", "hybrid"):
        for qid, docs in run_scores._read_run(tmp_path / "nq-example" / "runs" / f"{name}.trec").items():
            for docid in docs:
                records[qid, docid] = UtilityRecord(qid=qid, docid=docid, p_abs=float(rng.uniform()),
                                                    relevant=qrels.get(qid, {}).get(docid, 0) > 0,
                                                    relevance_source="qrels", model="m", prompt_version="p")
            judged.append({"qid": qid, "cid": name, "outcome": str(rng.choice(["correct", "abstained", "wrong"]))})
    write_utilities(tmp_path / "utilities", records, {"model": "m"})
    (tmp_path / "judged.jsonl").write_text("".join(json.dumps(j) + "\n" for j in judged))
    monkeypatch.chdir(tmp_path)
    namespace: dict = {}
    exec(compile(_readme_python_blocks(), "README.md (Python API)", "exec"), namespace)
    assert namespace["scores"].means() == pytest.approx({"UDCG@2": 0.5174, "nDCG@2": 0.5, "P@2": 0.25}, abs=1e-4)
    assert namespace["scores"].per_query()["q1"] == pytest.approx({"UDCG@2": 0.5826, "nDCG@2": 1.0, "P@2": 0.5}, abs=1e-4)
    assert namespace["bm25"].name == "bm25" and set(namespace["bm25"].means()) == {"UDCG@5", "nDCG@5"}
    assert "| bm25 |" in capsys.readouterr().out
    decided = namespace["decided"]
    assert decided.ties_of == "nDCG@5" and {t.measure for t in decided.tie_pairs} == {"UDCG@5"}
    assert [t.decision for t in decided.pairs if t.measure == "UDCG@5"][0] in (
        "different", "equivalent within ±0.01", "different, within ±0.01", "inconclusive")
