"""Issue #39, the metrics' names: one measure key type from the kernels to every result (``Measure``,
a ``str`` equal to its canonical name), one splitter for every list of measures, a measure's
direction in its definition (read by compare), and kernel names that no other metric function
shares."""

from __future__ import annotations

import json
import pickle

import numpy as np
import pytest

import udcg
from udcg.errors import InputError
from udcg.io.sources import example_path
from udcg.metrics import classical, curves, kernels, registry, udcg as udcg_metric
from udcg.metrics.compare import CompareTests, compare_scores
from udcg.metrics.contexts import ContextBatch, parse_metrics, score_batch
from udcg.metrics.evaluate import evaluate_table, run_table
from udcg.metrics.measures import Measure, parse_measure, parse_measures

RUNS = {name: example_path() / "runs" / f"{name}.trec" for name in ("bm25", "dense")}
QRELS = example_path() / "qrels" / "test.tsv"


def test_every_result_is_keyed_by_measure():
    run = {"q1": {"a": 2.0, "b": 1.0}, "q2": {"c": 1.0}}
    qrels = {"q1": {"b": 1}, "q2": {"c": 1}}
    table = evaluate_table(run_table(run, qrels), "P@2,RR")
    batch = score_batch(ContextBatch(np.array([[False, True]])), parse_metrics("P@2,RR"))
    scores = udcg.evaluate(RUNS["bm25"], QRELS, metrics="nDCG@5,P@5")
    for keys in (table, batch, scores.values, scores.means(), next(iter(scores.per_query().values()))):
        assert all(type(k) is Measure for k in keys), keys
    assert list(table) == list(batch) == [parse_measure("P@2"), parse_measure("RR")]
    # a Measure is its canonical name: read with the printed name, written as it
    assert scores.values["nDCG@5"] is scores.values[parse_measure("ndcg@5")]
    assert json.dumps(scores.means()) == json.dumps({str(m): v for m, v in scores.means().items()})
    assert list(scores.to_frame().columns) == ["nDCG@5", "P@5"]


def test_a_measure_is_a_frozen_str_that_pickles():
    m = parse_measure("nDCG(dcg='exp-log2')@10")
    assert m == "nDCG(dcg='exp-log2')@10" and hash(m) == hash("nDCG(dcg='exp-log2')@10")
    assert type(str(m)) is str and repr(m) == repr("nDCG(dcg='exp-log2')@10")
    back = pickle.loads(pickle.dumps(m))
    assert type(back) is Measure and (back.name, back.cutoff, back.params) == (m.name, m.cutoff, m.params)
    with pytest.raises(AttributeError, match="immutable"):
        m.cutoff = 5


def test_contexts_split_a_list_as_the_grammar_does():
    """A comma inside a measure's parentheses belongs to it, in every list (the contexts' parser used
    to split on every comma: 'P(rel=2' could not be read)."""
    assert parse_metrics("nDCG(dcg='log2',)@3, RR") == [parse_measure("nDCG@3"), parse_measure("RR")]
    for parse in (parse_metrics, lambda text: parse_measures(text, whole_context=True)):
        with pytest.raises(InputError, match=r"parameter 'rel' is given twice in 'P\(rel=2, rel=3\)@5'"):
            parse("P(rel=2, rel=3)@5,RR")


def _misses(m, s):
    """Relevant documents not in the top k: lower is better."""
    _, hits, n_rel = s.rel(1)
    return (n_rel - curves.at(hits, s.cutoff(m))).astype(float)


@pytest.fixture
def misses():
    registry.register(registry.Definition("Misses", _misses, cutoff="required", direction=-1))
    yield
    registry.unregister("Misses")


def test_direction_is_declared_with_the_measure_and_read_by_compare(misses):
    assert parse_measure("Harm@5", whole_context=True).direction == -1
    assert parse_measure("nDCG@5").direction == 1 and parse_measure("Misses@5").direction == -1
    cmp = udcg.compare(RUNS, QRELS, metrics="Misses@5,P@5", n_boot=200)
    assert cmp.direction == {"Misses@5": -1, "P@5": 1} and cmp.to_dict()["direction"]["Misses@5"] == -1
    # a lower-is-better measure: the run with fewer misses is the one that beats, and it is bold
    scores = {"a": {parse_measure("Misses@5"): np.linspace(0, 1, 30)},
              "b": {parse_measure("Misses@5"): np.linspace(0, 1, 30) + 1.0}}
    table = compare_scores(scores, tests=CompareTests(n_boot=200))
    assert table.beats["a"]["Misses@5"] == ["b"] and table.beats["b"]["Misses@5"] == []
    assert "| a | a | **0.5000**ᵇ [" in table.format("markdown")
    assert "lower is better for Misses@5" in table.format("markdown")
    # a plain string key keeps the default (+1) unless the caller says otherwise
    plain = compare_scores({r: {"Misses@5": v[parse_measure("Misses@5")]} for r, v in scores.items()}, tests=CompareTests(n_boot=200))
    assert plain.beats["b"]["Misses@5"] == ["a"]
    with pytest.raises(ValueError, match="direction 2 is not"):
        registry.Definition("Worse", _misses, direction=2)


def test_no_kernel_shares_a_name_with_another_metric_function():
    def public(module):
        return {n for n, v in vars(module).items() if callable(v) and not n.startswith("_")
                and getattr(v, "__module__", None) == module.__name__}

    taken = public(classical) | public(udcg_metric) | public(curves)
    assert not public(kernels) & taken
    assert {d.kernel.__name__ for d in registry.definitions()} <= public(kernels)
    assert all(name.endswith("_kernel") for name in public(kernels))


UNIT_PROBES = ["P@3", "R@3", "F1@3", "Success@3", "RR", "AP", "Rprec", "nDCG@3", "nDCG(dcg='exp-log2')@5", "ERR@3",
               "AUC-PR", "UDCG@3", "UDCG"]


def _random_inputs(seed: int) -> tuple[dict, dict, dict]:
    rng = np.random.default_rng(seed)
    run, qrels, utilities = {}, {}, {}
    for q in range(20):
        docs = [f"d{i}" for i in range(int(rng.integers(1, 9)))]
        run[f"q{q}"] = {d: float(rng.normal()) for d in docs}
        qrels[f"q{q}"] = {d: int(rng.integers(0, 4)) for d in docs + ["unretrieved"] if rng.random() < 0.6}
        utilities[f"q{q}"] = {d: float(rng.uniform(-1, 1)) for d in docs}
    return run, qrels, utilities


@pytest.mark.parametrize("seed", range(5))
def test_the_unit_flag_is_true_to_the_kernels(seed):
    """A measure declared ``unit`` (compare reads it: a difference beyond 1 cannot happen) gives
    values in [0, 1] on random graded runs; DCG, not declared, goes beyond 1 on the same inputs."""
    run, qrels, utilities = _random_inputs(seed)
    scores = udcg.evaluate(run, qrels, utilities=utilities, metrics=UNIT_PROBES + ["DCG@5"])
    for measure, values in scores.values.items():
        finite = values[~np.isnan(values)]
        assert finite.size, measure
        if measure == "DCG@5":
            assert not measure.unit and finite.max() > 1
        else:
            assert measure.unit and 0 <= finite.min() and finite.max() <= 1, measure
    assert {d.name for d in registry.definitions() if d.unit} == {parse_measure(m).name for m in UNIT_PROBES}
