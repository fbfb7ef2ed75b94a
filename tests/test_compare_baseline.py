"""compare against a baseline (``--baseline RUN``, ``baseline=``): only each other run against the
baseline, the run as A; the Holm family is those comparisons (m - 1 per measure, not m(m - 1)/2).
Checked by hand on a toy, against the all-pairs table's own numbers, and against PyTerrier's
``pt.Experiment(baseline=0, correction="holm")``, an independent implementation of the same design."""

import json

import numpy as np
import pytest
from ir_measures import P, nDCG

import udcg
from tests import lazy
from udcg.cli import main
from udcg.errors import InputError
from udcg.io.sources import example_path
from udcg.metrics.compare import CompareTests, compare_scores

# imported on first use (tests/lazy.py): collecting the suite does not load them
pt = lazy.LazyModule("pyterrier")

EX = example_path()
RUNS = {name: str(EX / "runs" / f"{name}.trec") for name in ("bm25", "dense", "hybrid")}
QRELS = str(EX / "qrels" / "test.tsv")


def _toy():
    """Four runs on 12 queries: c and d better than the baseline b by about 0.1 and 0.2."""
    rng = np.random.default_rng(3)
    base = rng.uniform(0, 1, 12)
    return {"a": {"M": base + rng.normal(0, 0.1, 12)}, "b": {"M": base},
            "c": {"M": base + 0.1 + rng.normal(0, 0.1, 12)}, "d": {"M": base + 0.2 + rng.normal(0, 0.1, 12)}}


def test_by_hand_pairs_family_and_holm():
    scores = _toy()
    every = compare_scores(scores)
    against = compare_scores(scores, baseline="b")
    assert [(t.run_a, t.run_b) for t in against.pairs] == [("a", "b"), ("c", "b"), ("d", "b")]
    assert against.family_sizes == {"M": 3} and every.family_sizes == {"M": 6}
    assert against.mdd_alpha == {"M": 0.05 / 3}
    for t in against.pairs:
        b = scores["b"]["M"]
        assert t.diff == pytest.approx(np.mean(scores[t.run_a]["M"] - b), abs=1e-15)
        same = next(u for u in every.pairs if {u.run_a, u.run_b} == {t.run_a, "b"})
        assert t.p == same.p  # the same paired test; the sign of the difference turns with the order
        sign = 1 if same.run_a == t.run_a else -1
        assert t.diff == pytest.approx(sign * same.diff, abs=1e-15)
        low, high = (same.low, same.high) if sign == 1 else (-same.high, -same.low)
        assert (t.low, t.high) == pytest.approx((low, high), abs=1e-12)
    p = sorted(t.p for t in against.pairs)  # Holm by hand over the three
    holm = np.maximum.accumulate([min(1.0, (3 - i) * x) for i, x in enumerate(p)])
    assert sorted(t.p_holm for t in against.pairs) == pytest.approx(holm, abs=1e-15)
    assert "the other runs' comparisons with the baseline b on one measure" in against.format()
    assert against.to_dict()["baseline"] == "b" and every.to_dict()["baseline"] is None
    assert against.beats["d"]["M"] == ["b"] and against.beats["a"]["M"] == [] and "a" in every.beats["d"]["M"]
    with pytest.raises(InputError, match="baseline 'x' is not one of the runs compared"):
        compare_scores(scores, baseline="x")


def test_ties_and_equivalence_follow_the_baseline_pairs():
    scores = {r: {**v, "N": np.round(v["M"], 1)} for r, v in _toy().items()}
    cmp = compare_scores(scores, baseline="d", ties="N", equivalence={"M": 0.05}, tests=CompareTests(correction="table"))
    assert [(t.measure, t.run_a, t.run_b) for t in cmp.tie_pairs] == [("M", r, "d") for r in "abc"]
    assert all(t.decision for t in cmp.pairs if t.measure == "M")
    assert cmp.family_sizes == {"M": 6, "N": 6}  # the whole table: 3 comparisons x 2 measures
    assert "the other runs' comparisons with the baseline d × every measure, 6 comparisons" in cmp.format()


def test_against_pyterrier_experiment_with_a_baseline_and_holm():
    """PyTerrier's t-test of every system against the baseline and its Holm correction (statsmodels),
    per measure, equal udcg's with test="t"; its +/- counts equal the queries A > / < B."""
    names = list(RUNS)
    topics, qrels = udcg.pyterrier.topics(EX), udcg.pyterrier.qrels(QRELS)
    table = pt.Experiment([udcg.pyterrier.results(path) for path in RUNS.values()], topics, qrels,
                          eval_metrics=[nDCG @ 5, P @ 5], names=names, baseline=0, correction="holm")
    table = table.set_index("name")
    ours = udcg.compare(RUNS, QRELS, metrics="nDCG@5,P@5", test="t", baseline="bm25")
    assert [(t.measure, t.run_a, t.run_b) for t in ours.pairs] == [(m, r, "bm25") for m in ("nDCG@5", "P@5")
                                                                   for r in ("dense", "hybrid")]
    for t in ours.pairs:
        row = table.loc[t.run_a]
        assert row[t.measure] - table.loc["bm25", t.measure] == pytest.approx(t.diff, abs=1e-12)
        assert row[f"{t.measure} p-value"] == pytest.approx(t.p, rel=1e-9)
        assert row[f"{t.measure} p-value corrected"] == pytest.approx(t.p_holm, rel=1e-9)
        assert (row[f"{t.measure} +"], row[f"{t.measure} -"]) == (t.a_higher, t.b_higher)
    by_index = udcg.compare(RUNS, QRELS, metrics="nDCG@5,P@5", test="t", baseline=0)
    assert by_index.to_dict() == ours.to_dict()


def test_cli_names_the_baseline_by_name_or_file_and_refuses_another(tmp_path, capsys):
    argv = ["compare", *[a for path in RUNS.values() for a in ("--run", path)], "--qrels", QRELS,
            "--metrics", "nDCG@5,P@5", "--n-boot", "200"]
    outs = []
    for baseline in ("dense", RUNS["dense"]):
        out = tmp_path / f"{len(outs)}.json"
        assert main([*argv, "--baseline", baseline, "-o", str(out)]) == 0
        outs.append(json.loads(out.read_text()))
    capsys.readouterr()
    assert outs[0] == outs[1] and outs[0]["baseline"] == "dense"
    assert [(p["run_a"], p["run_b"]) for p in outs[0]["pairs"]] == [("bm25", "dense"), ("hybrid", "dense")] * 2
    assert main([*argv, "--baseline", "bm2"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "--baseline bm2: not one of the runs compared (bm25, dense, hybrid)" in err
    with pytest.raises(InputError, match="--baseline 3: no run at that index"):
        udcg.compare(RUNS, QRELS, metrics="nDCG@5", baseline=3)
