"""UDCG (Eq. 4) and UDCG_theta (Eq. 3): toys by hand, properties, a naive loop, the authors' file."""

import json
import math
from importlib import resources

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra.numpy import arrays
from sklearn.base import clone
from sklearn.pipeline import make_pipeline
from sklearn.preprocessing import FunctionTransformer

from udcg.errors import InputError
from udcg.flows.theta import load_theta, save_theta
from udcg.metrics.udcg import AUTHORS_GAMMA, GAMMA, pairwise_differences, theta_features, udcg_matrix, utilities_from, utility
from udcg.metrics.udcg_theta import SATURATED_SHARE, UDCGTheta, choose_C


def naive_udcg(relevant, p_abs, gamma):
    """The definition read literally: one passage at a time."""
    total = 0.0
    for r, p in zip(relevant, p_abs):
        u = (1 - p) if r else -(1 - p)
        total += max(u, 0) + gamma * min(u, 0)
    return 1 / (1 + math.exp(-total / len(relevant)))


def test_toy_by_hand():
    # k = 4: u = [0.9, -0.6, 0, -0.3]; (0.9 + (1/3)(-0.9)) / 4 = 0.15; sigmoid(0.15) = 0.537429845...
    assert udcg_matrix([[0.9, -0.6, 0.0, -0.3]])[0] == pytest.approx(1 / (1 + math.exp(-0.15)), abs=1e-15)
    assert udcg_matrix([[0.0, 0.0]])[0] == 0.5
    # all relevant and never abstaining: sigmoid(1)
    assert udcg_matrix([[1.0, 1.0, 1.0]])[0] == pytest.approx(1 / (1 + math.exp(-1)))
    # all distracting: sigmoid(-gamma)
    assert udcg_matrix([[-1.0, -1.0]], gamma=0.5)[0] == pytest.approx(1 / (1 + math.exp(0.5)))


def test_utility_is_eq2_for_one_passage_and_for_many():
    assert (utility(True, 0.25), utility(False, 0.25), utility(True, 1.0), utility(False, 0.0)) == (0.75, -0.75, 0.0, -1.0)
    assert type(utility(True, 0.5)) is float
    rel, p = [True, False, True, False], [0.1, 0.2, 0.3, 0.9]
    assert utilities_from(rel, p).tolist() == [utility(r, x) for r, x in zip(rel, p)]  # the same numbers, bit for bit


def test_reproduces_authors_stored_values():
    path = resources.files("udcg") / "data" / "authors-sample.json"
    items = json.loads(path.read_text())
    for item in items:
        for model, stored in item["udcg"].items():
            rel = [p["is_relevant"] for p in item["passages"]]
            pab = [p["models_info"][model]["no_res_prob"] for p in item["passages"]]
            ours = udcg_matrix(utilities_from(rel, pab)[None], gamma=AUTHORS_GAMMA)[0]
            assert abs(ours - stored) <= 1e-12
            # with the paper's exact 1/3 the values differ in the 5th decimal: the file used 0.333
            assert abs(udcg_matrix(utilities_from(rel, pab)[None], gamma=GAMMA)[0] - stored) > 1e-6


@settings(max_examples=200, deadline=None)
@given(st.integers(1, 8).flatmap(lambda k: st.tuples(
    st.lists(st.booleans(), min_size=k, max_size=k),
    st.lists(st.floats(0, 1), min_size=k, max_size=k))), st.floats(0, 2))
def test_matches_naive_loop(case, gamma):
    rel, p = case
    assert udcg_matrix(utilities_from(rel, p)[None], gamma)[0] == pytest.approx(naive_udcg(rel, p, gamma), abs=1e-12)


@settings(max_examples=200, deadline=None)
@given(arrays(float, st.tuples(st.integers(1, 5), st.integers(1, 6)), elements=st.floats(-1, 1)))
def test_properties(u):
    s = udcg_matrix(u)
    assert ((s > 0) & (s < 1)).all()
    # permutation invariant within a context (an LLM reads the context as a whole)
    assert np.allclose(udcg_matrix(u[:, ::-1]), s)
    # raising any utility never lowers UDCG
    assert (udcg_matrix(np.clip(u + 0.1, -1, 1)) >= s - 1e-15).all()
    # vectorised over rows = row by row
    assert np.allclose(s, [udcg_matrix(row[None])[0] for row in u])


def test_bad_input():
    with pytest.raises(InputError, match="outside"):
        udcg_matrix([[1.5]])
    with pytest.raises(InputError, match="NaN"):
        udcg_matrix([[np.nan]])
    with pytest.raises(InputError, match="gamma"):
        udcg_matrix([[0.1]], gamma=-1)


# ------------------------------------------------------------------ UDCG_theta

def synthetic(w_true, n_q=300, k=5, noise=0.05, seed=0):
    rng = np.random.default_rng(seed)
    rel = rng.random((n_q * 10, k)) < 0.3
    u = np.where(rel, 1.0, -1.0) * (1 - rng.random((n_q * 10, k)))
    s = theta_features(u) @ w_true + rng.normal(0, noise, len(u))
    y = np.digitize(s, np.quantile(s, [1 / 3, 2 / 3])).astype(float)
    return u, y, np.repeat(np.arange(n_q), 10)


W_TRUE = np.array([1.0, 0.6, 0.4, 0.6, 0.9, 0.3, 0.2, 0.1, 0.2, 0.3])  # U-shaped alpha, "lost in the middle"


def cosine(a, b):
    return a @ b / np.linalg.norm(a) / np.linalg.norm(b)


def test_recovers_known_positional_weights():
    u, y, g = synthetic(W_TRUE)
    model = UDCGTheta(C=100).fit(u, y, g)
    assert cosine(model.coef_, W_TRUE) > 0.995
    # the U shape of alpha survives: ends above the middle
    a = model.alpha_
    assert a[0] > a[2] and a[4] > a[2]
    # SVM-rank's default C = 0.01 regularises hard but keeps the direction roughly
    assert cosine(UDCGTheta().fit(u, y, g).coef_, W_TRUE) > 0.85


def test_pairs_only_within_questions_with_different_outcomes():
    X = np.array([[1.0], [2.0], [3.0], [10.0]])
    D, s = pairwise_differences(X, np.array([0.0, 1.0, 1.0, 2.0]), np.array(["a", "a", "a", "b"]))
    # question a: pairs (0,1) and (0,2) differ in outcome, (1,2) tie; question b has one context
    assert len(s) == 2
    assert sorted((D[:, 0] * s).tolist()) == [1.0, 2.0]  # better context has larger x here


def test_sklearn_contract_clone_pipeline_and_json(tmp_path):
    u, y, g = synthetic(W_TRUE, n_q=60)
    model = UDCGTheta(variant="full", C=1.0)
    assert clone(model).get_params() == model.get_params()
    model.fit(u, y, g)
    assert model.alpha_.shape == (5,) and model.beta_.shape == (5,)
    pipe = make_pipeline(FunctionTransformer(lambda x: x), UDCGTheta(C=1.0))
    pipe.fit(u, y, udcgtheta__groups=g)
    assert np.allclose(pipe.predict(u), model.predict(u))
    save_theta(model, tmp_path / "theta.json")
    loaded = load_theta(tmp_path / "theta.json")
    assert np.array_equal(loaded.predict(u), model.predict(u))
    assert loaded.get_params() == model.get_params()


@pytest.mark.parametrize("variant,n_features", [("full", 10), ("rel-only", 5), ("binary", 10)])
def test_variants(variant, n_features):
    u, y, g = synthetic(W_TRUE, n_q=60)
    m = UDCGTheta(variant=variant, C=1.0).fit(u, y, g)
    assert m.coef_.shape == (n_features,)
    assert m.beta_.shape == (5,)
    if variant == "rel-only":
        assert not m.beta_.any()
    p = m.predict(u)
    assert ((p > 0) & (p < 1)).all()


def test_theta_errors(tmp_path):
    u, y, g = synthetic(W_TRUE, n_q=10)
    with pytest.raises(InputError, match="groups"):
        UDCGTheta().fit(u, y)
    with pytest.raises(InputError, match="different outcomes"):
        UDCGTheta().fit(u, np.zeros(len(y)), g)
    with pytest.raises(InputError, match="variant"):
        UDCGTheta(variant="nope").fit(u, y, g)
    m = UDCGTheta(C=1.0).fit(u, y, g)
    with pytest.raises(InputError, match="fitted for k = 5"):
        m.predict(u[:, :3])
    (tmp_path / "bad.json").write_text('{"type": "other"}')
    with pytest.raises(InputError, match="not a saved UDCGTheta"):
        load_theta(tmp_path / "bad.json")


def test_standardised_fit_keeps_eq3_and_saves_its_scaler(tmp_path):
    u, y, g = synthetic(W_TRUE, n_q=60)
    m = UDCGTheta(C=1.0).fit(u, y, g)
    F = theta_features(u)
    assert np.allclose(m.coef_ * m.scaler_.scale_, m.coef_standardized_)  # utility units = standardised / scale
    assert np.allclose(m.predict(u), 1 / (1 + np.exp(-(F @ m.coef_))))  # sigma(sum alpha u+ + beta u-), no intercept
    assert np.allclose(m.scaler_.mean_, F.mean(0)) and np.allclose(m.scaler_.scale_, F.std(0))
    save_theta(m, tmp_path / "t.json")
    saved = json.loads((tmp_path / "t.json").read_text())
    assert saved["scaler"]["scale"] == m.scaler_.scale_.tolist() and saved["C"] == 1.0 and saved["cv"] is None
    loaded = load_theta(tmp_path / "t.json")
    assert np.array_equal(loaded.predict(u), m.predict(u)) and np.array_equal(loaded.scaler_.mean_, m.scaler_.mean_)
    raw = UDCGTheta(C=1.0, standardize=False).fit(u, y, g)
    assert raw.scaler_ is None and np.array_equal(raw.coef_, raw.coef_standardized_)


def test_a_model_saved_before_standardisation_still_loads(tmp_path):
    old = {"type": "UDCGTheta", "params": {"C": 0.01, "max_iter": 100000, "tol": 1e-06, "variant": "full"}, "k": 2,
           "alpha": [0.5, 0.25], "beta": [0.1, 0.2], "coef": [0.5, 0.25, 0.1, 0.2], "n_pairs": 10, "n_queries": 3}
    (tmp_path / "old.json").write_text(json.dumps(old))
    m = load_theta(tmp_path / "old.json")
    assert m.standardize is False and m.scaler_ is None and m.C_ == 0.01
    u = np.array([[0.8, -0.5]])
    assert m.predict(u)[0] == pytest.approx(1 / (1 + np.exp(-(0.5 * 0.8 + 0.2 * -0.5))))


def test_C_auto_picks_by_grouped_cross_validation_and_records_the_curve():
    u, y, g = synthetic(W_TRUE, n_q=40, noise=0.3)
    m = UDCGTheta(C="auto", C_grid=(0.001, 1.0, 100.0), cv=4).fit(u, y, g)
    cv = m.cv_results_
    assert cv["C"] == [0.001, 1.0, 100.0] and cv["folds"] == 4 and cv["score"] == "spearman"
    assert len(cv["per_fold"]) == 3 and all(len(row) == 4 for row in cv["per_fold"])
    assert cv["rule"] == "one-se" and cv["best"] == cv["C"][int(np.argmax(cv["mean"]))]
    scores = np.array(cv["per_fold"], dtype=float)  # the standard error over the folds, by hand
    assert cv["se"] == pytest.approx(list(scores.std(1, ddof=1) / np.sqrt(4)))
    assert m.C_ == cv["C"][choose_C(np.array(cv["mean"]), np.array(cv["se"]), "one-se")[1]]
    best = UDCGTheta(C="auto", C_grid=(0.001, 1.0, 100.0), cv=4, cv_rule="best").fit(u, y, g)
    assert best.C_ == cv["best"] and best.cv_results_["rule"] == "best"
    # the curve by hand for one C: fit on three folds' questions, score the fourth's by mean per-question Spearman
    from scipy.stats import spearmanr
    from sklearn.model_selection import GroupKFold

    folds = list(GroupKFold(4).split(u, y, g))
    train, held = folds[0]
    fold_model = UDCGTheta(C=1.0).fit(u[train], y[train], g[train])
    scores = fold_model.decision_function(u[held])
    by_hand = np.mean([spearmanr(scores[g[held] == q], y[held][g[held] == q]).statistic for q in np.unique(g[held])])
    assert cv["per_fold"][1][0] == pytest.approx(by_hand)
    refit = UDCGTheta(C=m.C_).fit(u, y, g)
    assert np.array_equal(refit.coef_, m.coef_)  # the final model is the chosen C fitted on everything
    pair = UDCGTheta(C="auto", C_grid=(0.001, 1.0), cv=3, cv_score="pairwise").fit(u, y, g)
    assert pair.cv_results_["score"] == "pairwise" and 0.5 < max(pair.cv_results_["mean"]) <= 1.0


def test_the_one_standard_error_rule_takes_the_most_regularised_C_near_the_best():
    """Grid sorted by increasing C (smaller C: stronger regularisation, the simpler ranking SVM)."""
    mean, se = np.array([0.30, 0.36, 0.40, 0.39]), np.array([0.02, 0.03, 0.05, 0.01])
    assert choose_C(mean, se, "best") == (2, 2)
    assert choose_C(mean, se, "one-se") == (2, 1)  # 0.36 >= 0.40 - 0.05; 0.30 is not
    assert choose_C(mean, np.array([0.02, 0.03, 0.11, 0.01]), "one-se") == (2, 0)  # a wide best reaches back to 0.30
    assert choose_C(np.array([np.nan, 0.2, 0.3]), np.array([np.nan, 0.1, np.nan]), "one-se") == (2, 2)  # no SE: no slack
    assert choose_C(np.array([0.5, 0.5, 0.4]), np.array([0.1, 0.1, 0.1]), "best") == (0, 0)  # ties to the smaller C


def test_margin_share_and_saturation_on_a_hand_made_toy():
    """Five questions, each one pair (better - worse) of rel-only features, unstandardised:
    (.25, 0), (.5, 0), (.75, 0), (1, 0), (0, .25). Hard margin (large C): w = (4, 4), margins
    1, 2, 3, 4, 1, none inside; cosine with the mean pair difference (.5, .05) = .55 / (sqrt 2 * .5025).
    Tiny C: every pair inside the margin, every dual variable at its bound, w = C' * (2.5, .25):
    saturated, cosine 1."""
    better = [(0.25, 0.0), (0.5, 0.0), (0.75, 0.0), (1.0, 0.0), (0.0, 0.25)]
    u = np.array([x for b in better for x in (b, (0.0, 0.0))])
    y, g = np.tile([2.0, 0.0], 5), np.repeat(np.arange(5), 2)
    hard = UDCGTheta(variant="rel-only", C=1e4, standardize=False).fit(u, y, g)
    assert hard.coef_ == pytest.approx([4.0, 4.0], abs=1e-4)
    assert hard.margin_share_ <= 0.4 and not hard.saturated_  # at most the two pairs on the margin
    assert hard.cosine_mean_difference_ == pytest.approx(0.55 / (np.sqrt(2) * np.hypot(0.5, 0.05)), abs=1e-4)
    tiny = UDCGTheta(variant="rel-only", C=1e-6, standardize=False).fit(u, y, g)
    assert tiny.margin_share_ == 1.0 and tiny.saturated_ and tiny.cosine_mean_difference_ == pytest.approx(1.0)
    assert tiny.coef_[0] / tiny.coef_[1] == pytest.approx(10.0)  # the mean pair difference's direction
    assert SATURATED_SHARE == 0.99


def test_margin_share_and_rule_are_saved_and_old_models_load_without_them(tmp_path):
    u, y, g = synthetic(W_TRUE, n_q=12)
    m = UDCGTheta(C="auto", C_grid=(0.001, 10.0), cv=3).fit(u, y, g)
    save_theta(m, tmp_path / "t.json")
    loaded = load_theta(tmp_path / "t.json")
    assert loaded.cv_rule == "one-se" and loaded.cv_results_ == m.cv_results_
    assert (loaded.margin_share_, loaded.cosine_mean_difference_, loaded.saturated_) == (
        m.margin_share_, m.cosine_mean_difference_, m.saturated_)
    saved = m.to_dict()
    del saved["margin_share"], saved["cosine_mean_difference"], saved["params"]["cv_rule"]
    old = UDCGTheta.from_dict(saved)  # fitted before the one-SE rule: its C by CV was the best mean
    assert old.cv_rule == "best" and np.isnan(old.margin_share_) and not old.saturated_
    with pytest.raises(InputError, match="margin_share"):
        UDCGTheta.from_dict({**m.to_dict(), "margin_share": 1.5})


def test_C_auto_errors_and_random_state_leaves_numpy_alone():
    u, y, g = synthetic(W_TRUE, n_q=10)
    with pytest.raises(InputError, match="auto"):
        UDCGTheta(C="big").fit(u, y, g)
    with pytest.raises(InputError, match="cv_rule"):
        UDCGTheta(C="auto", cv_rule="two-se").fit(u, y, g)
    with pytest.raises(InputError, match="cv_score"):
        UDCGTheta(C="auto", cv_score="ndcg").fit(u, y, g)
    with pytest.raises(InputError, match="folds"):
        UDCGTheta(C="auto", cv=1).fit(u, y, g)
    before = np.random.get_state()[1].copy()
    a = UDCGTheta(C="auto", random_state=3).fit(u, y, g)
    b = UDCGTheta(C="auto", random_state=3).fit(u, y, g)
    assert np.array_equal(np.random.get_state()[1], before)  # numpy's global generator untouched
    assert np.array_equal(a.coef_, b.coef_) and a.cv_results_ == b.cv_results_
    assert clone(a).get_params() == a.get_params()
