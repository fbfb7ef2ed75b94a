"""TREC files, trec_eval ordering, evaluate_trec — and the cross-check of every classical metric
against ir_measures (pytrec_eval, gdeval and msmarco providers) on random runs with graded qrels."""

from __future__ import annotations

import json
import math
import random
import subprocess
import sys
from pathlib import Path

import ir_measures
import numpy as np
import pytest
import pytrec_eval

from udcg.errors import InputError
from udcg.metrics.evaluate import evaluate_arrays, evaluate_trec, format_tsv, gain_table, mean_by_measure
from udcg.metrics.measures import parse_measures
from udcg.io.files import atomic_write_text
from udcg.io.trec import format_qrels, format_run, ranked_docids, read_qrels, read_run, write_qrels, write_run


def write(tmp_path: Path, name: str, text: str) -> Path:
    path = tmp_path / name
    path.write_text(text, encoding="utf-8")
    return path


# ---------------------------------------------------------------- files


def test_read_run_and_qrels(tmp_path):
    run = read_run(write(tmp_path, "run", "1 Q0 d1 1 2.5 bm25\n\n1 Q0 d2 2 -1e-3 bm25\n2\tQ0\td9\t1\t7\tbm25\n"))
    assert run == {"1": {"d1": 2.5, "d2": -0.001}, "2": {"d9": 7.0}}
    qrels = read_qrels(write(tmp_path, "qrels", "1 0 d1 2\n1 0 d7 -1\n2 0 d9 0.5\n"))
    assert qrels == {"1": {"d1": 2.0, "d7": -1.0}, "2": {"d9": 0.5}}


@pytest.mark.parametrize("reader, text, fragment", [
    (read_run, "1 Q0 d1 1 2.5\n", "run:1: 5 fields, expected 6"),
    (read_run, "1 Q0 d1 1 2.5 t\n1 Q0 d2 2 high t\n", "run:2: field 'score' = 'high' is not a number"),
    (read_run, "1 Q0 d1 1 nan t\n", "not finite"),
    (read_run, "1 Q0 d1 1 2 t\n1 Q0 d1 2 1 t\n", "run:2: docid 'd1' appears twice .*first at .*run:1"),
    (read_run, "\n\n", "no run lines"),
    (read_qrels, "1 0\n", r"run:1: 2 fields, expected 4 \(qid 0 docid relevance\) or 3 \(query-id corpus-id score\)"),
    (read_qrels, "1 0 d1 1 x\n", "run:1: 5 fields, expected 4"),
    (read_qrels, "1 0 d1 yes\n", "field 'relevance' = 'yes' is not a number"),
    (read_qrels, "1 0 d1 1\n1 0 d1 2\n", "judged twice"),
])
def test_bad_files_name_file_line_field_and_fix(tmp_path, reader, text, fragment):
    with pytest.raises(InputError, match=fragment):
        reader(write(tmp_path, "run", text))


def test_beir_qrels_with_and_without_header(tmp_path):
    expected = {"q1": {"d1": 1.0, "d2": 0.0}, "q2": {"d1": 2.0}}
    body = "q1\td1\t1\nq1\td2\t0\n\nq2\td1\t2\n"
    assert read_qrels(write(tmp_path, "a.tsv", "query-id\tcorpus-id\tscore\n" + body)) == expected
    assert read_qrels(write(tmp_path, "b.tsv", body)) == expected
    assert read_qrels(write(tmp_path, "c.tsv", "qid docid rel\nq1 d1 1\n")) == {"q1": {"d1": 1.0}}  # any header words
    # 4-column TREC qrels read as before, and a 3-field first line with a numeric 3rd field is data
    assert read_qrels(write(tmp_path, "d", "q1 0 d1 1\n")) == {"q1": {"d1": 1.0}}
    assert read_qrels(write(tmp_path, "e.tsv", "1\t2\t3\n")) == {"1": {"2": 3.0}}


@pytest.mark.parametrize("text, fragment", [
    ("q1\td1\t1\nq1 0 d2 1\n", r"x.tsv:2: 4 fields \(qid 0 docid relevance\), but line 1 has 3 .*one layout"),
    ("q1 0 d2 1\nq1\td1\t1\n", r"x.tsv:2: 3 fields \(query-id corpus-id score\), but line 1 has 4"),
    ("query-id\tcorpus-id\tscore\nq1 0 d2 1\n", "x.tsv:2: 4 fields .*but line 1 has 3"),
    ("query-id\tcorpus-id\tscore\n", "no qrels lines"),
    ("q1\td1\t1\nq2\td1\thigh\n", "x.tsv:2: field 'score' = 'high' is not a number"),  # a header only on line 1
    ("\nquery-id\tcorpus-id\tscore\n", "x.tsv:2: field 'score' = 'score' is not a number"),
    ("q1\td1\t1\nq1\td1\t0\n", "x.tsv:2: docid 'd1' is judged twice .*first at .*x.tsv:1"),
])
def test_bad_beir_qrels_name_the_line(tmp_path, text, fragment):
    with pytest.raises(InputError, match=fragment):
        read_qrels(write(tmp_path, "x.tsv", text))


def test_missing_and_empty_files(tmp_path):
    with pytest.raises(InputError, match="no such file"):
        read_run(tmp_path / "nope")
    with pytest.raises(InputError, match="empty"):
        read_qrels(write(tmp_path, "q", ""))


def test_write_and_read_back(tmp_path):
    run = {"7": {"b": 1.0, "a": 1.0, "c": 3.25}, "8": {"x": -2.0}}
    write_run(tmp_path / "out.run", run, tag="mine")
    assert (tmp_path / "out.run").read_text().splitlines()[:3] == [
        "7 Q0 c 1 3.25 mine", "7 Q0 b 2 1.0 mine", "7 Q0 a 3 1.0 mine"]
    assert read_run(tmp_path / "out.run") == run
    qrels = {"7": {"a": 2.0, "b": -1.0, "c": 0.5}}
    write_qrels(tmp_path / "out.qrels", qrels)
    assert read_qrels(tmp_path / "out.qrels") == qrels
    assert format_qrels(qrels).splitlines()[0] == "7 0 a 2"
    with pytest.raises(InputError, match="tag"):
        format_run(run, tag="two words")
    with pytest.raises(InputError, match="whitespace"):
        format_run({"q 1": {"a": 1.0}})
    with pytest.raises(InputError, match="whitespace"):
        format_qrels({"q1": {"a b": 1.0}})


# ---------------------------------------------------------------- trec_eval ordering


def test_ties_break_by_docid_descending_like_pytrec_eval():
    scores = {"d10": 1.0, "d2": 1.0, "d1": 1.0, "a": 1.0, "z": 0.5}
    assert ranked_docids(scores) == ["d2", "d10", "d1", "a", "z"]
    # Check against pytrec_eval: only the doc ranked first is relevant, for each candidate.
    for target in scores:
        qrels = {"q": {target: 1}}
        p1 = pytrec_eval.RelevanceEvaluator(qrels, {"P_1"}).evaluate({"q": scores})["q"]["P_1"]
        assert p1 == (1.0 if target == "d2" else 0.0)


def test_scores_are_compared_as_32_bit_floats_like_trec_eval():
    # 1.00000001 and 1.0 differ as doubles but are one float32: trec_eval sees a tie -> docid desc.
    scores = {"a": 1.00000001, "b": 1.0}
    assert ranked_docids(scores) == ["b", "a"]
    ours = evaluate_trec({"q": scores}, {"q": {"a": 1}}, "P@1")
    theirs = pytrec_eval.RelevanceEvaluator({"q": {"a": 1}}, {"P_1"}).evaluate({"q": scores})["q"]["P_1"]
    assert ours == [("q", "P@1", theirs)] and theirs == 0.0
    assert ranked_docids({"a": 1.0000001, "b": 1.0}) == ["a", "b"]  # distinct in float32


# ---------------------------------------------------------------- evaluate_trec


def test_evaluate_trec_layout_and_missing_query_policy(tmp_path):
    run = {"q1": {"a": 3.0, "b": 2.0}, "q9": {"x": 1.0}}  # q9 has no qrels: skipped
    qrels = {"q1": {"b": 1}, "q2": {"c": 1}}  # q2 not in the run: 0, like ir_measures' default
    rows = evaluate_trec(run, qrels, "P@1,RR")
    assert rows == [("q1", "P@1", 0.0), ("q1", "RR", 0.5), ("q2", "P@1", 0.0), ("q2", "RR", 0.0)]
    theirs = {(m.query_id, str(m.measure)): m.value
              for m in ir_measures.iter_calc([ir_measures.P @ 1, ir_measures.RR], qrels, run)}
    assert theirs == {(q, m): v for q, m, v in rows}
    assert mean_by_measure(rows) == {"P@1": 0.0, "RR": 0.25}
    assert format_tsv(rows).splitlines()[1] == "q1\tRR\t0.5"
    atomic_write_text(tmp_path / "deep" / "scores.tsv", format_tsv(rows))
    assert (tmp_path / "deep" / "scores.tsv").read_text() == format_tsv(rows)
    assert [p.name for p in (tmp_path / "deep").iterdir()] == ["scores.tsv"]  # no temp file left


def test_gain_table_and_extra_values():
    run = {"q1": {"a": 1.0, "b": 3.0, "c": 1.0}, "q2": {"x": 0.5}}
    qrels = {"q2": {"x": 2, "y": 3, "z": -1}, "q1": {"c": 1}, "q3": {"w": 1}}
    p_abs = {"q1": {"a": 0.1, "b": 0.2}, "q2": {"x": 0.9}}
    table = gain_table(run, qrels, extra={"p_abs": p_abs})
    assert table.qids == ("q2", "q1", "q3")
    np.testing.assert_array_equal(table.gains, [[2, 0, 0], [0, 1, 0], [0, 0, 0]])  # q1: b, c, a
    np.testing.assert_array_equal(table.ideal, [[3, 2, -1], [1, 0, 0], [1, 0, 0]])
    np.testing.assert_array_equal(table.extra["p_abs"], [[0.9, 0, 0], [0.2, 0, 0.1], [0, 0, 0]])
    with pytest.raises(InputError, match="p_abs"):
        gain_table(run, qrels, extra={"p_abs": {"q1": {"a": "high"}}})


def test_evaluate_trec_rejects_bad_values():
    with pytest.raises(InputError, match="run scores"):
        evaluate_trec({"q": {"a": "high"}}, {"q": {"a": 1}}, "P@1")
    with pytest.raises(InputError, match="qrels relevance"):
        evaluate_trec({"q": {"a": 1.0}}, {"q": {"a": float("nan")}}, "P@1")
    with pytest.raises(InputError, match="max_grade"):
        evaluate_trec({"q": {"a": 1.0}}, {"q": {"a": 5}}, "ERR@5")
    with pytest.raises(InputError, match="unknown measure"):
        evaluate_trec({"q": {"a": 1.0}}, {"q": {"a": 1}}, "BLEU")


# ---------------------------------------------------------------- cross-check against ir_measures

PYTREC = ("P@1,P@3,P@5,P@10,P@30,R@1,R@5,R@10,R@30,Success@1,Success@3,Success@10,RR,AP,AP@5,AP@10,"
          "AP@100,Rprec,nDCG,nDCG@1,nDCG@5,nDCG@10,nDCG@30,P(rel=2)@5,R(rel=2)@10,AP(rel=2),Rprec(rel=3),"
          "RR(rel=2),Success(rel=3)@5")
EXP_GAINS = {g: 2**g - 1 for g in range(0, 5)} | {-1: 0}


def random_collection(seed: int, n_queries: int, float32_ties: bool = True):
    """Graded qrels in -1..4 and runs with many exact ties (1-decimal scores), some float32-only
    ties, queries missing from either side, and queries without any relevant document."""
    rng = np.random.default_rng(seed)
    run, qrels = {}, {}
    for q in range(n_queries):
        qid = str(q + 1)
        pool = [f"d{i}" for i in range(rng.integers(1, 40))]
        if rng.random() < 0.9:
            docs = rng.choice(pool, size=rng.integers(1, len(pool) + 1), replace=False)
            scores = np.round(rng.normal(size=docs.size), 1)
            if float32_ties:
                scores = scores + np.where(rng.random(docs.size) < 0.2, 1e-9, 0.0)
            run[qid] = {str(d): float(s) for d, s in zip(docs, scores)}
        if rng.random() < 0.92:
            judged = rng.choice(pool, size=rng.integers(1, len(pool) + 1), replace=False)
            top = rng.integers(0, 5)
            qrels[qid] = {str(d): int(rng.integers(-1, top + 1)) for d in judged}
    return run, qrels


# pytrec_eval keeps C-level state between calls (see cvangysel/pytrec_eval issues #49, #57); after
# many calls in one process it hung here on a query judged only -1. Each reference therefore runs
# in a fresh interpreter.
_REFERENCE = """
import json, sys, ir_measures
data = json.load(sys.stdin)
names = {n: getattr(ir_measures, n) for n in dir(ir_measures) if not n.startswith("_")}
measures = [eval(text, names) for text in data["measures"]]
index = {m: i for i, m in enumerate(measures)}
out = [[m.query_id, index[m.measure], m.value]
       for m in ir_measures.pytrec_eval.iter_calc(measures, data["qrels"], data["run"])]
json.dump(out, sys.stdout)
"""


def pytrec_reference(measures: list[str], qrels, run, names: list[str] | None = None) -> dict:
    """{(qid, name): value} from ir_measures' pytrec_eval provider; ``measures`` are ir_measures
    expressions (``P@5``, ``nDCG(gains={0: 0, 1: 1})@3``), reported under ``names``."""
    payload = json.dumps({"measures": measures, "qrels": qrels, "run": run})
    proc = subprocess.run([sys.executable, "-c", _REFERENCE], input=payload, capture_output=True,
                          text=True, timeout=300, check=True)
    names = names or measures
    return {(qid, names[i]): value for qid, i, value in json.loads(proc.stdout)}


def by_key(metrics, rename=lambda m: str(m)):
    return {(m.query_id, rename(m.measure)): m.value for m in metrics}


def ours(run, qrels, measures):
    qids, values = evaluate_arrays(run, qrels, measures)
    return {(q, str(m)): float(v[i]) for m, v in values.items() for i, q in enumerate(qids)}


def assert_same(a: dict, b: dict, tol: float):
    assert a.keys() == b.keys()
    worst = max((abs(a[key] - b[key]), key) for key in a)
    assert worst[0] <= tol, worst


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_pytrec_eval_measures_match_to_1e9(seed):
    run, qrels = random_collection(seed, 150)
    theirs = pytrec_reference([str(m) for m in parse_measures(PYTREC)], qrels, run)
    assert_same(ours(run, qrels, PYTREC), theirs, 1e-9)


@pytest.mark.parametrize("seed", [3, 4])
def test_exponential_ndcg_matches_pytrec_eval_with_mapped_gains(seed):
    run, qrels = random_collection(seed, 150)
    names = ["nDCG(dcg='exp-log2')@3", "nDCG(dcg='exp-log2')@10", "nDCG(dcg='exp-log2')"]
    measures = [f"nDCG(gains={EXP_GAINS})@3", f"nDCG(gains={EXP_GAINS})@10", f"nDCG(gains={EXP_GAINS})"]
    theirs = pytrec_reference(measures, qrels, run, names)
    assert_same(ours(run, qrels, names), theirs, 1e-9)


@pytest.mark.parametrize("seed", [5, 6])
def test_auc_pr_and_f1_match_pytrec_eval_parts(seed):
    run, qrels = random_collection(seed, 150)
    levels = [i / 10 for i in range(11)]
    iprec = pytrec_reference([f"IPrec@{r}" for r in levels] + ["P@5", "R@5"], qrels, run)
    theirs = {}
    for qid in qrels:
        ip = [iprec[qid, f"IPrec@{r}"] for r in levels]
        theirs[qid, "AUC-PR"] = sum(0.05 * (a + b) for a, b in zip(ip, ip[1:]))
    pr = iprec
    for qid in qrels:
        p, r = pr[qid, "P@5"], pr[qid, "R@5"]
        theirs[qid, "F1@5"] = 2 * p * r / (p + r) if p + r else 0.0
    assert_same(ours(run, qrels, "AUC-PR,F1@5"), theirs, 1e-9)


@pytest.mark.parametrize("seed", [7, 8])
def test_err_and_exp_ndcg_match_gdeval(seed):
    # gdeval compares scores as doubles (no float32 rounding), so no float32-only ties here;
    # it prints 5 decimals, hence the tolerance.
    run, qrels = random_collection(seed, 120, float32_ties=False)
    measures = [ir_measures.ERR @ 5, ir_measures.ERR @ 20, ir_measures.nDCG(dcg="exp-log2") @ 10]
    theirs = by_key(ir_measures.gdeval.iter_calc(measures, qrels, run))
    assert_same(ours(run, qrels, [str(m) for m in measures]), theirs, 5.1e-6)


@pytest.mark.parametrize("seed", [9, 10])
def test_rr_at_k_matches_msmarco_without_ties(seed):
    # The msmarco provider breaks ties by docid ascending (trec_eval: descending) -> tie-free scores.
    run, qrels = random_collection(seed, 150)
    rng = np.random.default_rng(seed)
    run = {q: {d: float(rng.random()) for d in docs} for q, docs in run.items()}
    measures = [ir_measures.RR @ 1, ir_measures.RR @ 3, ir_measures.RR(rel=2) @ 10]
    theirs = by_key(ir_measures.msmarco.iter_calc(measures, qrels, run))
    assert_same(ours(run, qrels, [str(m) for m in measures]), theirs, 1e-12)


def naive_dcg(docs, judged, k):
    return sum(max(judged.get(d, 0), 0) / math.log2(i + 2) for i, d in enumerate(docs[:k]))


def test_dcg_matches_a_naive_loop():
    run, qrels = random_collection(11, 100)
    theirs = {(q, f"DCG@{k}"): naive_dcg(ranked_docids(run.get(q, {})), qrels[q], k) for q in qrels for k in (3, 10)}
    assert_same(ours(run, qrels, "DCG@3,DCG@10"), theirs, 1e-12)


def test_many_small_random_collections_match_pytrec_eval():
    # 400 small seeded collections (1..8 queries each) merged under distinct qids, one reference call.
    run, qrels = {}, {}
    rng = np.random.default_rng(12)
    for c in range(400):
        r, q = random_collection(int(rng.integers(2**32)), int(rng.integers(1, 9)))
        run |= {f"c{c}-{qid}": docs for qid, docs in r.items()}
        qrels |= {f"c{c}-{qid}": docs for qid, docs in q.items()}
    measures = [str(m) for m in parse_measures("P@2,R@3,Success@2,RR,AP,AP@3,Rprec,nDCG,nDCG@3,P(rel=2)@3")]
    assert_same(ours(run, qrels, measures), pytrec_reference(measures, qrels, run), 1e-9)


def test_bench_script_runs_small():
    script = Path(__file__).resolve().parents[1] / "scripts" / "bench_metrics.py"
    proc = subprocess.run([sys.executable, str(script), "--n-queries", "300", "--check"], capture_output=True,
                          text=True, timeout=300, check=True, cwd=script.parents[1])
    lines = proc.stdout.strip().splitlines()
    assert lines[-1].startswith("ratio: ") and float(lines[-1].split()[1]) > 0
    worst = next(line for line in lines if line.startswith("max |ours - pytrec_eval|"))
    assert float(worst.rsplit(" ", 1)[1]) < 1e-9


def test_the_metrics_layer_orders_a_ranking_as_the_trec_writer_does():
    """metrics may not import io, so trec_eval's order lives in both; they must agree."""
    from udcg.metrics.gains import ranked_docids as metrics_order

    rng = random.Random(7)
    for _ in range(200):
        scores = {f"d{rng.randrange(50)}": rng.choice([1.0, 1.0000001, 0.5, -2.0, rng.uniform(-3, 3)])
                  for _ in range(rng.randrange(1, 12))}
        assert metrics_order(scores) == ranked_docids(scores)
