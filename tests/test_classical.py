"""Classical metrics: hand-computed toys (incl. the seeds' worked examples and where they are wrong),
hypothesis properties, and cross-checks against naive loops and ir_measures (pytrec_eval, gdeval,
msmarco providers)."""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra.numpy import arrays

from udcg.errors import InputError
from udcg.metrics import classical as C
from udcg.text import contains_answer, normalize_answer

LOG2 = math.log2

# Seed 002's running example: c1..c10 in rank order, RELEVANT = {c1, c3, c5, c8}, graded 2/1.
RUNNING = np.array([[2, 0, 1, 0, 2, 0, 0, 1, 0, 0]], dtype=float)
RUNNING_IDEAL = np.array([[2, 2, 1, 1]], dtype=float)
N_REL = np.array([4])


def close(a, b, tol=1e-12):
    return abs(float(np.asarray(a).ravel()[0]) - b) <= tol


# ---------------------------------------------------------------- seed 002, hand-computed


def test_seed002_precision_recall_table_holds():
    for k, p, r in [(1, 1.0, 0.25), (3, 2 / 3, 0.5), (5, 0.6, 0.75), (8, 0.5, 1.0), (10, 0.4, 1.0)]:
        assert close(C.precision(RUNNING, k), p)
        assert close(C.recall(RUNNING, N_REL, k), r)
    assert close(C.f1(RUNNING, N_REL, 5), 2 * 0.6 * 0.75 / (0.6 + 0.75))
    assert close(C.r_precision(RUNNING, N_REL), 0.5)  # seed: 0.500, agrees
    assert close(C.reciprocal_rank(RUNNING), 1.0)  # seed: 1.000, agrees
    assert close(C.success(RUNNING, 3), 1.0)


def test_seed002_ap_is_not_0729():
    # Relevant at ranks 1, 3, 5, 8: AP = (1/1 + 2/3 + 3/5 + 4/8) / 4 = 83/120 = 0.6917.
    # The seed's own formula gives this; its printed AP (and Context Precision) 0.729 does not follow.
    ap = C.average_precision(RUNNING, N_REL)
    assert close(ap, 83 / 120)
    assert not close(ap, 0.729, tol=5e-4)
    # Its small example does follow: [c1..c5], relevant {c1, c3}: (1 + 2/3) / 2 = 0.833.
    assert close(C.average_precision([[1, 0, 1, 0, 0]], [2]), (1 + 2 / 3) / 2)


def test_seed002_bad_ranking_ap_is_not_0354():
    # [c2, c4, c6, c7, c9, c1, c3, c5, c8, c10]: relevant at ranks 6..9.
    bad = [[0, 0, 0, 0, 0, 1, 1, 1, 1, 0]]
    ap = C.average_precision(bad, N_REL)
    assert close(ap, (1 / 6 + 2 / 7 + 3 / 8 + 4 / 9) / 4)  # 0.3180
    assert not close(ap, 0.354, tol=5e-4)
    assert close(C.average_precision([[1, 1, 1, 1, 0, 0, 0, 0, 0, 0]], N_REL), 1.0)  # "good" = 1.000, agrees


def test_seed002_context_precision_bad_order_is_not_0533():
    # [c2, c4, c1, c3, c5]: relevant at ranks 3, 4, 5. As AP over |R| = 4 (the seed's definition):
    # (1/3 + 2/4 + 3/5) / 4 = 0.3583; RAGAS divides by the relevant items retrieved (3): 0.4778.
    # The seed prints 0.533, which neither gives.
    order = [[0, 0, 1, 1, 1]]
    ap = C.average_precision(order, N_REL)
    assert close(ap, (1 / 3 + 2 / 4 + 3 / 5) / 4)
    ragas = C.average_precision(order, [3])
    assert close(ragas, (1 / 3 + 2 / 4 + 3 / 5) / 3)
    assert not close(ap, 0.533, tol=5e-4) and not close(ragas, 0.533, tol=5e-4)
    assert close(C.average_precision([[1, 1, 1, 1, 0]], N_REL), 1.0)  # good order = 1.000, agrees


def test_seed002_ndcg5_is_not_0793():
    dcg5 = 2 / 1 + 1 / LOG2(4) + 2 / LOG2(6)
    idcg5 = 2 / 1 + 2 / LOG2(3) + 1 / LOG2(4) + 1 / LOG2(5)  # ideal grades 2, 2, 1, 1, 0
    assert close(C.dcg(RUNNING, 5), dcg5)
    assert round(dcg5, 3) == 3.274  # the seed's DCG@5 agrees
    assert round(idcg5, 3) == 4.193 and round(idcg5, 3) != 4.131  # the seed's IDCG@5 4.131 does not
    ndcg5 = C.ndcg(RUNNING, RUNNING_IDEAL, 5)
    assert close(ndcg5, dcg5 / idcg5)  # 0.7808
    assert not close(ndcg5, 0.793, tol=5e-4)


def test_seed002_ndcg_curve_mostly_wrong():
    # Seed's Metric@K table: NDCG@1 0.613, @3 0.686, @8 0.870, @10 0.870. With its grades:
    want = {1: 1.0, 3: (2 + 0.5) / (2 + 2 / LOG2(3) + 0.5),
            8: (2 + 0.5 + 2 / LOG2(6) + 1 / LOG2(9)) / (2 + 2 / LOG2(3) + 0.5 + 1 / LOG2(5))}
    want[10] = want[8]
    for k, seed_value in [(1, 0.613), (3, 0.686), (8, 0.870), (10, 0.870)]:
        got = C.ndcg(RUNNING, RUNNING_IDEAL, k)
        assert close(got, want[k])
        assert not close(got, seed_value, tol=5e-4)


def test_seed002_err_uses_linear_stop_probability_not_chapelle():
    # The seed's R_i = grade / max_grade gives R_1 = 1 and ERR = 1.000 (consistent with itself).
    # Chapelle's R_i = (2^g - 1) / 2^gmax with gmax = 2: R(2) = 3/4, R(1) = 1/4.
    r2, r1 = 3 / 4, 1 / 4
    want = r2 + (1 - r2) * r1 / 3 + (1 - r2) * (1 - r1) * r2 / 5 + (1 - r2) * (1 - r1) * (1 - r2) * r1 / 8
    got = C.err(RUNNING, 10, max_grade=2)
    assert close(got, want)
    assert not close(got, 1.0, tol=1e-3)


def test_seed002_auc_pr_by_hand():
    # Relevant at ranks 1, 3, 5, 8 (precisions 1, 2/3, 3/5, 1/2), n_rel = 4. Level r needs
    # floor(4r + 0.9) hits: 0,1,1,2,2,2,3,3,4,4,4 -> iP = 1,1,1,2/3,2/3,2/3,.6,.6,.5,.5,.5
    ip = [1, 1, 1, 2 / 3, 2 / 3, 2 / 3, 0.6, 0.6, 0.5, 0.5, 0.5]
    np.testing.assert_allclose(C.interpolated_precision(RUNNING, N_REL)[0], ip, atol=1e-12)
    assert close(C.auc_pr(RUNNING, N_REL), sum(0.1 * (a + b) / 2 for a, b in zip(ip, ip[1:])))  # 0.695


# ---------------------------------------------------------------- seeds 001 and 004


def test_seed001_ndcg_with_ideal_from_the_retrieved_list():
    # Seed 001 sorts the retrieved grades for IDCG (a "local" ideal); pass that ideal to reproduce it.
    rel = np.array([[3, 2, 3, 0, 1]], dtype=float)
    dcg5 = 3 + 2 / LOG2(3) + 3 / LOG2(4) + 0 + 1 / LOG2(6)
    idcg5 = 3 + 3 / LOG2(3) + 2 / LOG2(4) + 1 / LOG2(5)
    assert close(C.dcg(rel, 5), dcg5)
    assert close(C.ndcg(rel, -np.sort(-rel, 1), 5), dcg5 / idcg5)


def test_seed004_worked_comparison():
    # Rel = {doc-3, doc-9}; ranking [doc-7, doc-3, doc-1, doc-9, doc-2].
    g = np.array([[0, 1, 0, 1, 0]], dtype=float)
    assert close(C.success(g, 5), 1.0)
    assert close(C.recall(g, [2], 5), 1.0)
    assert close(C.reciprocal_rank(g), 0.5)
    ndcg = C.ndcg(g, [[1, 1]], 5)
    assert close(ndcg, (1 / LOG2(3) + 1 / LOG2(5)) / (1 + 1 / LOG2(3)))
    assert round(float(ndcg[0]), 2) == 0.65


# ---------------------------------------------------------------- small toys


def test_cutoffs_beyond_depth_pad_with_nonrelevant():
    g = [[1, 0]]
    assert close(C.precision(g, 4), 0.25)  # trec_eval P_k divides by k
    assert close(C.reciprocal_rank([[0, 0, 1]], 2), 0.0)
    assert close(C.reciprocal_rank([[0, 0, 1]], 3), 1 / 3)
    assert close(C.average_precision([[0, 1, 1]], [4], 2), 0.5 / 4)  # map_cut divides by n_rel


def test_rel_level_and_negative_gains():
    g = [[2, 1, -1, 3]]
    assert close(C.precision(g, 4, rel_level=2), 0.5)
    assert close(C.dcg(g, 4), 2 + 1 / LOG2(3) + 3 / LOG2(5))  # the -1 counts as 0, like trec_eval
    assert close(C.dcg(g, 2, exponential=True), 3 + 1 / LOG2(3))


def test_no_relevant_scores_zero():
    g = np.zeros((1, 3))
    for value in (C.recall(g, [0], 3), C.average_precision(g, [0]), C.r_precision(g, [0]),
                  C.ndcg(g, [[0.0]], 3), C.auc_pr(g, [0]), C.f1(g, [0], 3), C.err(g)):
        assert close(value, 0.0)


def test_interpolation_reproduces_trec_eval_rounding():
    # n_rel = 3 at recall 0.7: trec_eval computes floor(0.7*3 + 0.9) = floor(2.9999999999999996) = 2
    # relevant documents, not ceil(2.1) = 3. Relevant at ranks 1, 2, 10.
    g = np.zeros((1, 10))
    g[0, [0, 1, 9]] = 1
    ip = C.interpolated_precision(g, [3])[0]
    assert ip[7] == 1.0  # rank 2 reaches the 2 documents; with ceil it would be 3/10
    assert ip[8] == pytest.approx(0.3)


def test_containment_and_answer_normalisation():
    assert normalize_answer("The  Eiffel-Tower!") == "eiffeltower"
    assert normalize_answer("An apple, a day") == "apple day"
    assert normalize_answer("Ocean’s Eleven") == normalize_answer("Ocean's Eleven")
    assert contains_answer("It opened in 1889 in Paris.", ["1889"])
    assert not contains_answer("a party", ["art"])
    assert contains_answer("Built by Gustave  EIFFEL.", ["gustave eiffel", "x"])
    assert not contains_answer("the end", ["The"])  # an alias that normalises to nothing never counts
    contains = np.array([[False, False, True], [False, False, False]])
    np.testing.assert_array_equal(C.answer_containment(contains, 2), [0, 0])
    np.testing.assert_array_equal(C.answer_containment(contains, 3), [1, 0])


def test_erag_and_answer_prob():
    scores = [[0.2, 1.0, 0.0], [0.5, 0.5, 0.5]]
    np.testing.assert_allclose(C.erag(scores), [0.4, 0.5])
    np.testing.assert_allclose(C.erag(scores, "max"), [1.0, 0.5])
    ll = [[-1.0, -3.0], [0.0, -0.5]]
    np.testing.assert_allclose(C.answer_prob(ll), [-2.0, -0.25])
    np.testing.assert_allclose(C.answer_prob(ll, "sum"), [-4.0, -0.5])
    np.testing.assert_allclose(C.answer_prob(ll, "max"), [-1.0, 0.0])


@pytest.mark.parametrize("call, fragment", [
    (lambda: C.precision([1, 0], 1), "shape"),
    (lambda: C.precision([[1, np.nan]], 1), "NaN"),
    (lambda: C.precision([[1, 0]], 0), "positive integer"),
    (lambda: C.precision([[1, 0]], 1, rel_level=0), "rel_level"),
    (lambda: C.recall([[1, 1]], [1], 2), "n_rel"),
    (lambda: C.recall([[1, 1]], [2, 2], 2), "one per query"),
    (lambda: C.ndcg([[1, 1]], [[1, 2]], 2), "descending"),
    (lambda: C.err([[5, 0]], 2), "max_grade"),
    (lambda: C.answer_containment([[1, 0]], 1), "boolean"),
    (lambda: C.erag([[0.1]], "median"), "aggregate"),
    (lambda: C.answer_prob([[0.3]]), "log-probabilities"),
])
def test_bad_input_raises_input_error(call, fragment):
    with pytest.raises(InputError, match=fragment):
        call()


# ---------------------------------------------------------------- naive loops


def naive_err(row, k, gmax):
    score, reach = 0.0, 1.0
    for i, g in enumerate(row[:k], start=1):
        r = (2 ** max(g, 0) - 1) / 2**gmax
        score += reach * r / i
        reach *= 1 - r
    return score


def naive_iprec(row, n_rel):
    hits, points = 0, []
    for i, g in enumerate(row, start=1):
        if g >= 1:
            hits += 1
            points.append((hits, hits / i))
    out = []
    for lvl in C.RECALL_LEVELS:
        need = math.floor(lvl * n_rel + 0.9)
        cands = [p for h, p in points if h >= max(need, 1)]
        out.append(max(cands) if cands else 0.0)
    return out


# ---------------------------------------------------------------- hypothesis properties


@st.composite
def judged_rankings(draw, max_n=6, max_depth=12):
    """(gains, ideal, n_rel): run gains plus extra judged-but-unretrieved gains, ints in -1..4."""
    n = draw(st.integers(1, max_n))
    depth = draw(st.integers(0, max_depth))
    extra = draw(st.integers(0, 5))
    gains = draw(arrays(np.int64, (n, depth), elements=st.integers(-1, 4))).astype(float)
    more = draw(arrays(np.int64, (n, extra), elements=st.integers(-1, 4))).astype(float)
    ideal = -np.sort(-np.hstack([gains, more]), axis=1)
    return gains, ideal, (ideal >= 1).sum(1)


def all_metrics(gains, ideal, n_rel, k):
    return {
        "P": C.precision(gains, k), "R": C.recall(gains, n_rel, k), "F1": C.f1(gains, n_rel, k),
        "Success": C.success(gains, k), "RR": C.reciprocal_rank(gains, k),
        "AP": C.average_precision(gains, n_rel, k), "Rprec": C.r_precision(gains, n_rel),
        "nDCG": C.ndcg(gains, ideal, k), "nDCGexp": C.ndcg(gains, ideal, k, exponential=True),
        "ERR": C.err(gains, k), "AUC-PR": C.auc_pr(gains, n_rel, k),
    }


@settings(max_examples=150, deadline=None)
@given(judged_rankings(), st.integers(1, 15))
def test_bounds_and_row_permutation(data, k):
    gains, ideal, n_rel = data
    values = all_metrics(gains, ideal, n_rel, k)
    perm = np.random.default_rng(k).permutation(gains.shape[0])
    permuted = all_metrics(gains[perm], ideal[perm], n_rel[perm], k)
    for name, v in values.items():
        assert v.shape == (gains.shape[0],)
        assert ((v >= 0) & (v <= 1 + 1e-12)).all(), name
        np.testing.assert_allclose(permuted[name], v[perm], err_msg=name)
    assert (values["F1"] <= np.maximum(values["P"], values["R"]) + 1e-12).all()


@settings(max_examples=150, deadline=None)
@given(judged_rankings(), st.integers(1, 14))
def test_monotone_in_cutoff(data, k):
    gains, ideal, n_rel = data
    for fn in (lambda kk: C.recall(gains, n_rel, kk), lambda kk: C.success(gains, kk),
               lambda kk: C.dcg(gains, kk), lambda kk: C.average_precision(gains, n_rel, kk),
               lambda kk: C.err(gains, kk), lambda kk: C.precision(gains, kk) * kk,
               lambda kk: C.reciprocal_rank(gains, kk)):
        assert (fn(k + 1) >= fn(k) - 1e-12).all()


@settings(max_examples=150, deadline=None)
@given(judged_rankings(), st.integers(1, 12), st.randoms(use_true_random=False))
def test_set_metrics_ignore_order_inside_the_cutoff(data, k, rnd):
    gains, ideal, n_rel = data
    shuffled = gains.copy()
    top = min(k, gains.shape[1])
    for row in shuffled:
        head = list(row[:top])
        rnd.shuffle(head)
        row[:top] = head
    for fn in (C.precision, C.success):
        np.testing.assert_array_equal(fn(shuffled, k), fn(gains, k))
    for fn in (C.recall, C.f1):
        np.testing.assert_array_equal(fn(shuffled, n_rel, k), fn(gains, n_rel, k))


@settings(max_examples=150, deadline=None)
@given(judged_rankings(max_n=1), st.integers(1, 12), st.data())
def test_moving_a_relevant_document_up_never_hurts(data, k, draw):
    gains, ideal, n_rel = data
    depth = gains.shape[1]
    if depth < 2:
        return
    j = draw.draw(st.integers(1, depth - 1))
    i = draw.draw(st.integers(0, j - 1))
    if not gains[0, j] > gains[0, i]:
        return
    better = gains.copy()
    better[0, [i, j]] = better[0, [j, i]]
    for fn in (lambda g: C.reciprocal_rank(g, k), lambda g: C.average_precision(g, n_rel, k),
               lambda g: C.ndcg(g, ideal, k), lambda g: C.err(g, k), lambda g: C.dcg(g, k),
               lambda g: C.auc_pr(g, n_rel, k)):
        assert fn(better)[0] >= fn(gains)[0] - 1e-12


@settings(max_examples=100, deadline=None)
@given(judged_rankings(), st.integers(1, 12))
def test_ideal_ranking_scores_one(data, k):
    _, ideal, n_rel = data
    has = n_rel > 0
    np.testing.assert_allclose(C.ndcg(ideal, ideal, k)[has], 1.0)
    np.testing.assert_allclose(C.average_precision(ideal, n_rel)[has], 1.0)
    np.testing.assert_allclose(C.r_precision(ideal, n_rel)[has], 1.0)
    np.testing.assert_allclose(C.auc_pr(ideal, n_rel)[has], 1.0)


@settings(max_examples=150, deadline=None)
@given(judged_rankings(), st.integers(1, 14), st.integers(1, 4))
def test_err_and_iprec_match_naive_loops(data, k, gmax):
    gains, _, n_rel = data
    gains = np.minimum(gains, gmax)
    want = [naive_err(list(row), k, gmax) for row in gains]
    np.testing.assert_allclose(C.err(gains, k, max_grade=gmax), want, atol=1e-12)
    want_ip = [naive_iprec(list(row), n) for row, n in zip(gains, n_rel)]
    np.testing.assert_allclose(C.interpolated_precision(gains, n_rel), want_ip, atol=1e-12)
    want_cut = [naive_iprec(list(row[:k]), n) for row, n in zip(gains, n_rel)]
    np.testing.assert_allclose(C.interpolated_precision(gains, n_rel, k), want_cut, atol=1e-12)
    ip = C.interpolated_precision(gains, n_rel)
    assert (np.diff(ip, axis=1) <= 1e-12).all()  # non-increasing in recall


@settings(max_examples=100, deadline=None)
@given(arrays(bool, st.tuples(st.integers(1, 5), st.integers(0, 8))), st.integers(1, 10))
def test_containment_is_success_on_the_contains_matrix(contains, k):
    np.testing.assert_array_equal(C.answer_containment(contains, k), C.success(contains.astype(float), k))


@settings(max_examples=100, deadline=None)
@given(arrays(np.float64, st.tuples(st.integers(1, 5), st.integers(1, 8)),
              elements=st.floats(-50, 0, allow_nan=False)), st.randoms(use_true_random=False))
def test_erag_and_answer_prob_properties(values, rnd):
    scores = -values / 50  # in [0, 1], like ROUGE-L
    mean, best = C.erag(scores), C.erag(scores, "max")
    assert (scores.min(1) - 1e-12 <= mean).all() and (mean <= best + 1e-12).all()
    shuffled = np.array([rnd.sample(list(row), len(row)) for row in scores])
    np.testing.assert_allclose(C.erag(shuffled), mean)  # order inside a context does not matter
    np.testing.assert_allclose(C.answer_prob(values, "sum"), C.answer_prob(values) * values.shape[1], atol=1e-12)
    assert (C.answer_prob(values, "max") <= 0).all()


@settings(max_examples=200, deadline=None)
@given(st.text(max_size=40), st.text(max_size=40))
def test_normalisation_properties(text, other):
    norm = normalize_answer(text)
    assert normalize_answer(norm) == norm  # idempotent
    assert norm == norm.strip() and "  " not in norm
    if norm:
        assert contains_answer(f"{other} {text} {other}", [text])
