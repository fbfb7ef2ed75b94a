"""The measure registry: a measure declared here alone (one ``Definition`` and its kernel, nothing
else in udcg touched) is parsed and scored by ``score --run``, ``compare``, ``udcg.evaluate`` and
the contexts path (``score CONTEXTS``, ``correlate``, validate's ``score_records``); the built-in
declarations agree with the grammar; bad declarations are refused."""

from __future__ import annotations

import json

import numpy as np
import pytest

import udcg
from udcg.cli import main
from udcg.errors import InputError
from udcg.experiment import studies
from udcg.flows import run_scores
from udcg.io.sources import example_path
from udcg.metrics import curves, registry
from udcg.metrics.contexts import ContextBatch, parse_metrics, score_batch
from udcg.metrics.gains import ranked_docids
from udcg.metrics.measures import parse_measure
from udcg.records import ContextRecord

RUNS = {name: example_path() / "runs" / f"{name}.trec" for name in ("bm25", "dense")}
QRELS = example_path() / "qrels" / "test.tsv"


def relevant_count(m, s):
    """Relevant documents in the top k, not divided by k (P@k times k)."""
    return curves.at(s.rel(m.param("rel"))[1], s.cutoff(m)).astype(float)


def utility_sum(m, s):
    """The sum of the top-k utilities."""
    u, _ = s.utilities(m, s.cutoff(m))
    return u.sum(1)


@pytest.fixture
def new_measures():
    added = [registry.register(registry.Definition("RelCount", relevant_count, cutoff="required", params={"rel": 1},
                                                   aliases=("relevant-count",))),
             registry.register(registry.Definition("USum", utility_sum, needs={"utilities"}))]
    yield
    for definition in added:
        registry.unregister(definition.name)


def run(*argv) -> int:
    return main([str(a) for a in argv])


def _utilities(tmp_path):
    """A utility for every document of both runs, in a ``qid 0 docid utility`` file, and as a dict."""
    rng = np.random.default_rng(0)
    table = {}
    for path in RUNS.values():
        for qid, docs in run_scores._read_run(path).items():
            table.setdefault(qid, {}).update({d: round(float(rng.uniform(-1, 1)), 6) for d in docs})
    path = tmp_path / "utilities.qrels"
    path.write_text("".join(f"{q} 0 {d} {u!r}\n" for q, docs in table.items() for d, u in docs.items()))
    return path, table


def test_a_new_measure_is_scored_by_score_run(tmp_path, new_measures, capsys):
    util_path, util = _utilities(tmp_path)
    out = tmp_path / "per_query.tsv"
    assert run("score", "--run", RUNS["bm25"], "--qrels", QRELS, "--utilities", util_path,
               "--metrics", "RelCount@5,relevant-count(rel=2)@3,USum@5,P@5", "-o", out) == 0
    rows = {}
    for line in out.read_text().splitlines():
        qid, measure, value = line.split("\t")
        rows.setdefault(qid, {})[measure] = float(value)
    bm25 = run_scores._read_run(RUNS["bm25"])
    for qid, row in rows.items():
        assert row["RelCount@5"] == pytest.approx(5 * row["P@5"])
        assert row["RelCount(rel=2)@3"] == 0.0  # the qrels are binary
        assert row["USum@5"] == pytest.approx(sum(util[qid][d] for d in ranked_docids(bm25[qid])[:5]))
    assert "all\tRelCount@5\t" in capsys.readouterr().out


def test_a_new_measure_is_scored_by_compare_and_the_api(tmp_path, new_measures, capsys):
    util_path, _ = _utilities(tmp_path)
    assert run("compare", "--run", RUNS["bm25"], "--run", RUNS["dense"], "--qrels", QRELS, "--utilities", util_path,
               "--metrics", "RelCount@5,USum@5", "--n-boot", "200") == 0
    assert "| RelCount@5 |" in capsys.readouterr().out
    cmp = udcg.compare(RUNS, QRELS, utilities=util_path, metrics="RelCount@5,USum@5,P@5", n_boot=200)
    assert cmp.measures == ("RelCount@5", "USum@5", "P@5")
    for name, path in RUNS.items():
        means = udcg.evaluate(path, QRELS, utilities=util_path, metrics="RelCount@5,USum@5,P@5").means()
        assert cmp.cells[name]["RelCount@5"].mean == pytest.approx(5 * means["P@5"])
        assert cmp.cells[name]["USum@5"].mean == pytest.approx(means["USum@5"])
    with pytest.raises(InputError, match="USum@5 needs utilities"):
        udcg.evaluate(RUNS["bm25"], QRELS, metrics="USum@5")
    with pytest.raises(InputError, match="RelCount@5 needs qrels"):
        udcg.evaluate(RUNS["bm25"], utilities=util_path, metrics="RelCount@5")


def _contexts(path, n_q=12, k=4, seed=0):
    rng = np.random.default_rng(seed)
    lines = []
    for q in range(n_q):
        for c in range(5):
            rel = rng.random(k) < 0.4
            p = rng.random(k)
            lines.append({"qid": f"q{q}", "cid": f"q{q}:{c}", "relevant": rel.tolist(), "p_abs": p.round(4).tolist(),
                          "outcome": str(rng.choice(["correct", "abstained", "wrong"]))})
    path.write_text("".join(json.dumps(line) + "\n" for line in lines))
    return lines


def test_a_new_measure_is_scored_on_contexts(tmp_path, new_measures, capsys):
    lines = _contexts(tmp_path / "contexts.jsonl")
    out = tmp_path / "scored.jsonl"
    assert run("score", tmp_path / "contexts.jsonl", "--metrics", "RelCount,RelCount@2,USum@3", "-o", out) == 0
    for line, scored in zip(lines, (json.loads(x) for x in out.read_text().splitlines())):
        u = np.where(line["relevant"], 1.0, -1.0) * (1 - np.asarray(line["p_abs"]))
        assert scored["metrics"]["RelCount"] == sum(line["relevant"])
        assert scored["metrics"]["RelCount@2"] == sum(line["relevant"][:2])
        assert scored["metrics"]["USum@3"] == pytest.approx(u[:3].sum())
    capsys.readouterr()
    assert run("correlate", tmp_path / "contexts.jsonl", "--metrics", "RelCount@2,USum,P@2", "--n-boot", "200",
               "-o", tmp_path / "table.json") == 0
    assert {r["metric"] for r in json.loads((tmp_path / "table.json").read_text())} >= {"RelCount@2", "USum"}
    # validate's path: records of one k, a cutoff beyond the context read as the whole context
    records = [ContextRecord(qid="q", cid=f"c{i}", relevant=tuple(rel), utilities=(0.5, -0.25, 0.0))
               for i, rel in enumerate([(True, False, True), (False, False, False)])]
    scored = studies.score_records(records, ["RelCount@5", "USum"], gamma=1 / 3, n_relevant="context")
    assert [r.metrics for r in scored] == [{"RelCount@5": 2.0, "USum": 0.25}, {"RelCount@5": 0.0, "USum": 0.25}]
    batch = score_batch(ContextBatch(np.array([[True, True]]), utilities=np.array([[0.5, 0.5]])),
                        parse_metrics("RelCount,USum@1"))
    assert {m: v.tolist() for m, v in batch.items()} == {"RelCount": [2.0], "USum@1": [0.5]}


def test_a_measure_gone_from_the_registry_is_unknown_again(new_measures):
    assert str(parse_measure("relevant-count(rel=2)@3")) == "RelCount(rel=2)@3"
    registry.unregister("USum")
    try:
        with pytest.raises(InputError, match="unknown measure 'USum'"):
            parse_measure("USum@5")
    finally:
        registry.register(registry.Definition("USum", utility_sum, needs={"utilities"}))


def test_bad_declarations_are_refused():
    with pytest.raises(ValueError, match="spelling 'p' is 'P'"):
        registry.register(registry.Definition("p", relevant_count))
    with pytest.raises(ValueError, match="'map' is 'AP'"):
        registry.register(registry.Definition("MeanAP", relevant_count, aliases=("MAP",)))
    with pytest.raises(ValueError, match="unknown need 'clicks'"):
        registry.Definition("Clicks", relevant_count, needs={"clicks"})
    with pytest.raises(ValueError, match="cutoff 'sometimes'"):
        registry.Definition("X", relevant_count, cutoff="sometimes")
    with pytest.raises(ValueError, match="cannot be parsed back"):
        registry.Definition("two words", relevant_count)


def test_the_builtin_needs_decide_where_a_measure_is_scored():
    on_runs = {d.name for d in registry.definitions() if d.needs <= registry.RUN_INPUTS}
    assert on_runs == {"P", "R", "F1", "Success", "RR", "AP", "Rprec", "DCG", "nDCG", "ERR", "AUC-PR", "UDCG",
                       "UDCG_theta"}
    with pytest.raises(InputError, match="scored on contexts, not on a run"):
        udcg.evaluate(RUNS["bm25"], QRELS, metrics="RA-nWG@5")
    assert registry.needs(parse_measure("PROC@5")) == {"grades", "corpus_grades", "pool_grades"}
