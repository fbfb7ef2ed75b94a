"""``udcg.metrics.contexts``: measure names through ``parse_metric``, hand-computed toy contexts
through ``score_batch`` (names, cut-offs, NaN = NA, missing inputs named), and the classical part
cross-checked against ir_measures (pytrec_eval) on random contexts."""

from __future__ import annotations

import math

import ir_measures
import numpy as np
import pytest
from scipy.special import expit

from udcg.errors import InputError
from udcg.metrics.contexts import ContextBatch, parse_metric, parse_metrics, score_batch
from udcg.metrics.measures import Measure
from udcg.metrics.udcg_theta import UDCGTheta

# Two contexts of k = 3 passages, in prompt (= rank) order. Context 0 holds relevant passages at
# ranks 2 and 3 and its question's pool holds 3 relevant passages; context 1 holds none of its 1.
RELEVANT = np.array([[False, True, True], [False, False, False]])
N_RELEVANT = np.array([3, 1])
TOY = ContextBatch(RELEVANT, n_relevant=N_RELEVANT)

LOG2_3 = math.log2(3)


def score(batch: ContextBatch, spec: str, **kw) -> dict[str, list[float]]:
    return {name: list(v) for name, v in score_batch(batch, parse_metrics(spec), **kw).items()}


# ---------------------------------------------------------------- names


@pytest.mark.parametrize("text, canonical", [
    ("ndcg@3", "nDCG@3"), ("MRR", "RR"), ("map", "AP"), ("hit@2", "Success@2"), ("Recall@3", "R@3"),
    ("P", "P"), ("P(rel=1)@5", "P@5"), ("udcg", "UDCG"), ("UDCG-theta@5", "UDCG_theta@5"),
    ("ra_nwg@5", "RA-nWG@5"), ("erag", "eRAG"), ("answer-prob", "ANSWER_PROB"), (" containment @ 2 ", "containment@2"),
])
def test_metric_names_parse_to_one_canonical_spelling(text, canonical):
    m = parse_metric(text)
    assert str(m) == canonical and m == parse_metric(canonical)


def test_a_cutoff_is_optional_for_contexts_and_parameters_are_refused():
    assert parse_metric("P") == Measure("P") and parse_metric("P").k is None  # the whole context
    with pytest.raises(InputError, match=r"--metrics: P\(rel=2\)@5 has parameters.*write P@5"):
        parse_metric("P(rel=2)@5", "--metrics")
    with pytest.raises(InputError, match="eRAG takes no cutoff"):
        parse_metric("eRAG@3")
    with pytest.raises(InputError, match="unknown measure 'BLEU'"):
        parse_metric("BLEU")


def test_parse_metrics_keeps_first_seen_order_once_and_refuses_nothing():
    assert [str(m) for m in parse_metrics("nDCG@3, rr,MRR,,P@2")] == ["nDCG@3", "RR", "P@2"]
    assert parse_metrics(["UDCG", "udcg@3"]) == [Measure("UDCG"), Measure("UDCG", 3)]
    with pytest.raises(InputError, match="cfg.metrics: no metrics given"):
        parse_metrics(" , ", "cfg.metrics")


# ---------------------------------------------------------------- classical measures, by hand


def test_classical_values_by_hand():
    out = score(TOY, "P@2,P,R@3,F1@3,Success@1,Success@2,RR,AP,Rprec,DCG@2,nDCG@1,nDCG@3,ERR@2,ERR,AUC-PR")
    assert list(out) == ["P@2", "P", "R@3", "F1@3", "Success@1", "Success@2", "RR", "AP", "Rprec", "DCG@2",
                         "nDCG@1", "nDCG@3", "ERR@2", "ERR", "AUC-PR"]
    expected = {
        "P@2": [1 / 2, 0], "P": [2 / 3, 0], "R@3": [2 / 3, 0], "F1@3": [2 / 3, 0],
        "Success@1": [0, 0], "Success@2": [1, 0], "RR": [1 / 2, 0],
        "AP": [(1 / 2 + 2 / 3) / 3, 0],  # precision at ranks 2 and 3, over the pool's 3 relevant
        "Rprec": [2 / 3, 0],  # ctx 1: top 1 of its 1 relevant
        "DCG@2": [1 / LOG2_3, 0], "nDCG@1": [0, 0],
        "nDCG@3": [(1 / LOG2_3 + 1 / 2) / (1 + 1 / LOG2_3 + 1 / 2), 0],  # ideal: 3 relevant in the pool
        # binary relevance: R = (2^1 - 1) / 2^1 = 1/2 per relevant passage
        "ERR@2": [1 / 2 * 1 / 2, 0], "ERR": [1 / 2 * 1 / 2 + 1 / 3 * 1 / 2 * 1 / 2, 0],
    }
    for name, values in expected.items():
        assert out[name] == pytest.approx(values), name
    assert 0 < out["AUC-PR"][0] < 1 and out["AUC-PR"][1] == 0


def test_cutoffs_beyond_the_context_are_the_whole_context():
    out = score(TOY, "P@3,P@10,P,nDCG@3,nDCG@10,nDCG,RR@1,RR@2,RR")
    assert out["P@10"] == out["P@3"] == out["P"]  # a context of 3 passages: P@10 is P@3, not hits/10
    assert out["nDCG@10"] == out["nDCG@3"] == out["nDCG"]
    assert out["RR@1"] == [0, 0] and out["RR@2"] == out["RR"] == [1 / 2, 0]


def test_without_pool_counts_recall_uses_the_relevant_passages_in_the_context():
    out = score(ContextBatch(RELEVANT), "R@3,AP,nDCG@3")
    assert out["R@3"] == pytest.approx([1, 0])  # 2 of the context's own 2
    assert out["AP"] == pytest.approx([(1 / 2 + 2 / 3) / 2, 0])
    assert out["nDCG@3"] == pytest.approx([(1 / LOG2_3 + 1 / 2) / (1 + 1 / LOG2_3), 0])


def test_fewer_pool_relevant_than_context_relevant_is_refused():
    with pytest.raises(InputError, match="context 0 of the batch: n_relevant = 1 is smaller than its 2"):
        score_batch(ContextBatch(RELEVANT, n_relevant=np.array([1, 1])), parse_metrics("R@3"))


# ---------------------------------------------------------------- the other families, by hand

UTILITIES = np.array([[-0.5, 0.8, 0.2], [0.0, -0.9, -0.3]])


def test_udcg_by_hand_and_its_cutoff():
    out = score(ContextBatch(RELEVANT, utilities=UTILITIES), "UDCG,UDCG@1,UDCG@10")
    # (sum of positive utilities + gamma * sum of negative ones) / k, gamma = 1/3, through a sigmoid
    assert out["UDCG"] == pytest.approx([expit((1.0 - 0.5 / 3) / 3), expit((-1.2 / 3) / 3)])
    assert out["UDCG@1"] == pytest.approx([expit(-0.5 / 3), expit(0.0)])
    assert out["UDCG@10"] == out["UDCG"]
    assert score(ContextBatch(RELEVANT, utilities=UTILITIES), "UDCG", gamma=1.0)["UDCG"] == \
        pytest.approx([expit(0.5 / 3), expit(-1.2 / 3)])


def test_udcg_theta_uses_the_fitted_model_and_needs_one():
    x = np.array([[1.0, 0.0, 0.0], [0.0, 0.0, -1.0], [0.5, 0.5, 0.0], [-1.0, 0.0, 0.0]])
    theta = UDCGTheta(C=1.0).fit(x, np.array([2, 0, 2, 0]), groups=np.array(["a", "a", "b", "b"]))
    out = score(ContextBatch(RELEVANT, utilities=UTILITIES), "UDCG_theta", theta=theta)
    assert out["UDCG_theta"] == pytest.approx(list(theta.predict(UTILITIES)))
    with pytest.raises(InputError, match="UDCG_theta needs a fitted model"):
        score(ContextBatch(RELEVANT, utilities=UTILITIES), "UDCG_theta")


def test_per_passage_signals_and_containment():
    batch = ContextBatch(RELEVANT, erag=np.array([[0.2, 0.6, 1.0], [0.0, 0.0, 0.3]]),
                         answer_ll=np.array([[-1.0, -2.0, -3.0], [-0.5, -0.5, -2.0]]),
                         contains=np.array([[False, True, False], [False, False, False]]))
    out = score(batch, "eRAG,ANSWER_PROB,containment@1,containment@2,containment")
    assert out["eRAG"] == pytest.approx([0.6, 0.1])
    assert out["ANSWER_PROB"] == pytest.approx([-2.0, -1.0])
    assert out["containment@1"] == [0, 0] and out["containment@2"] == out["containment"] == [1, 0]


def test_set_based_metrics_by_hand_with_nan_for_na():
    # ctx 0: grades 5, 2, 1 of a labelled pool with one passage each of grades 1, 2, 5: the rarity
    # weights give grade 5 weight 1 and the others 0, so the context holds all the attainable gain.
    # ctx 1: grades 2, 1, 1 of a pool without any grade >= 3: no gain is attainable, so RA-nWG and
    # the N-Recalls are NA (NaN), never 0 or 1.
    batch = ContextBatch(RELEVANT, grades=np.array([[5, 2, 1], [2, 1, 1]]),
                         corpus_counts=np.array([[1, 1, 0, 0, 1], [2, 1, 0, 0, 0]]),
                         pool_counts=np.array([[1, 1, 0, 0, 1], [2, 1, 0, 0, 0]]))
    out = score(batch, "RA-nWG@3,PROC@3,N-Recall4+@3,N-Recall5@3,Precision4+@3,Harm@3,Harm@1")
    assert out["RA-nWG@3"][0] == pytest.approx(1.0) and math.isnan(out["RA-nWG@3"][1])
    assert out["PROC@3"][0] == pytest.approx(1.0) and math.isnan(out["PROC@3"][1])
    assert out["N-Recall4+@3"][0] == pytest.approx(1.0) and math.isnan(out["N-Recall4+@3"][1])
    assert out["N-Recall5@3"][0] == pytest.approx(1.0) and math.isnan(out["N-Recall5@3"][1])
    assert out["Precision4+@3"] == pytest.approx([1 / 3, 0])
    assert out["Harm@3"] == pytest.approx([2 / 3, 1]) and out["Harm@1"] == pytest.approx([0, 1])


@pytest.mark.parametrize("spec, needs", [
    ("UDCG", "'utilities'"), ("RA-nWG@3", "'grades'"), ("eRAG", "'erag'"), ("ANSWER_PROB", "'answer_ll'"),
    ("containment", "'contains'"),
])
def test_a_missing_input_is_named(spec, needs):
    with pytest.raises(InputError, match=f"metric {spec} needs {needs} for every context"):
        score_batch(TOY, parse_metrics(spec))


def test_missing_grade_counts_are_named_as_contexts_files_spell_them():
    grades = ContextBatch(RELEVANT, grades=np.array([[5, 2, 1], [2, 1, 1]]))
    with pytest.raises(InputError, match="needs 'corpus_grades'"):
        score_batch(grades, parse_metrics("RA-nWG@3"))
    with_corpus = ContextBatch(RELEVANT, grades=grades.grades, corpus_counts=np.array([[1, 1, 0, 0, 1]] * 2))
    with pytest.raises(InputError, match="needs 'pool_grades'.*5 grade counts"):
        score_batch(with_corpus, parse_metrics("PROC@3"))


# ---------------------------------------------------------------- against ir_measures (pytrec_eval)

CROSS_CHECKED = "P@1,P@3,R@2,R@5,Success@2,RR,RR@2,AP,AP@3,Rprec,nDCG@2,nDCG@5,nDCG"


@pytest.mark.parametrize("seed", range(5))
def test_classical_measures_equal_ir_measures_on_random_contexts(seed):
    rng = np.random.default_rng(seed)
    n, k = 40, 5
    relevant = rng.random((n, k)) < 0.3
    extra = rng.integers(0, 3, n)  # relevant passages of the pool that are not in the context
    n_relevant = relevant.sum(1) + extra
    ours = score_batch(ContextBatch(relevant, n_relevant=n_relevant), parse_metrics(CROSS_CHECKED))

    qrels, run = [], []
    for i in range(n):
        qrels += [ir_measures.Qrel(f"c{i}", f"d{j}", int(relevant[i, j])) for j in range(k)]
        qrels += [ir_measures.Qrel(f"c{i}", f"pool{j}", 1) for j in range(extra[i])]
        run += [ir_measures.ScoredDoc(f"c{i}", f"d{j}", float(k - j)) for j in range(k)]  # rank j + 1
    measures = [ir_measures.parse_measure(str(m)) for m in parse_metrics(CROSS_CHECKED)]
    theirs = {(r.query_id, str(r.measure)): r.value for r in ir_measures.iter_calc(measures, qrels, run)}
    for name, values in ours.items():
        # trec_eval leaves out a question without any relevant passage; ours scores it 0
        expected = [theirs.get((f"c{i}", name), 0.0) for i in range(n)]
        assert list(values) == pytest.approx(expected, abs=1e-12), name
