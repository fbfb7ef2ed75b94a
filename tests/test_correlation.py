"""Correlation statistics (paper §7.2): per-question Spearman against scipy, bootstrap, paired test."""

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy.stats import spearmanr

from udcg.contextfile import ContextRows
from udcg.errors import InputError
from udcg.experiment.correlate import correlation_table
from udcg.metrics.correlation import bootstrap_mean_ci, paired_bootstrap, per_question_spearman, summarize
from udcg.metrics.stats import holm, paired_test


def test_toy_by_hand():
    # q1: outcomes wrong, abstained, correct; metric increasing -> rho = 1
    # q2: outcomes correct, wrong, wrong (ties share rank 1.5); metric 0.1, 0.5, 0.9
    #     ranks: outcome (3, 1.5, 1.5), metric (1, 2, 3) -> rho = -0.8660254 (sqrt(3)/2)
    # q3: all correct -> no rho, counted
    metric = [0.1, 0.2, 0.3, 0.1, 0.5, 0.9, 0.4, 0.4, 0.4]
    outcome = [0, 1, 2, 2, 0, 0, 2, 2, 2]
    groups = ["q1"] * 3 + ["q2"] * 3 + ["q3"] * 3
    qids, rho, status = per_question_spearman(metric, outcome, groups)
    assert list(qids) == ["q1", "q2", "q3"]
    assert rho[0] == pytest.approx(1.0)
    assert rho[1] == pytest.approx(-np.sqrt(3) / 2)
    assert np.isnan(rho[2]) and list(status) == [0, 0, 1]
    s = summarize("m", metric, outcome, groups, n_boot=200)
    assert s.n_questions == 2 and s.n_constant_outcome == 1
    assert s.mean_rho == pytest.approx((1 - np.sqrt(3) / 2) / 2)


def test_constant_metric_policy():
    metric, outcome, groups = [0.5, 0.5, 0.5], [0, 1, 2], ["q"] * 3
    assert per_question_spearman(metric, outcome, groups)[1][0] == 0.0
    assert np.isnan(per_question_spearman(metric, outcome, groups, constant_metric="drop")[1][0])
    assert summarize("m", metric, outcome, groups, n_boot=10).n_constant_metric == 1


@settings(max_examples=100, deadline=None)
@given(st.integers(1, 12), st.integers(2, 10), st.integers(0, 10_000))
def test_matches_scipy_per_question(n_q, n_ctx, seed):
    rng = np.random.default_rng(seed)
    sizes = rng.integers(2, n_ctx + 1, size=n_q)  # unequal group sizes too
    groups = np.repeat(np.arange(n_q), sizes)
    metric = rng.integers(0, 4, size=len(groups)).astype(float)  # ties in the metric too
    outcome = rng.integers(0, 3, size=len(groups)).astype(float)
    _, rho, status = per_question_spearman(metric, outcome, groups)
    for q in range(n_q):
        m, o = metric[groups == q], outcome[groups == q]
        if np.ptp(o) == 0:
            assert np.isnan(rho[q]) and status[q] == 1
        elif np.ptp(m) == 0:
            assert rho[q] == 0.0 and status[q] == 2
        else:
            assert rho[q] == pytest.approx(spearmanr(m, o).statistic, abs=1e-12)


def test_bootstrap_ci_covers_mean_and_is_seeded():
    v = np.random.default_rng(0).normal(0.3, 0.2, 400)
    lo, hi = bootstrap_mean_ci(v, n_boot=2000, seed=1)
    assert lo < v.mean() < hi
    assert hi - lo == pytest.approx(2 * 1.96 * v.std() / np.sqrt(400), rel=0.15)
    assert (lo, hi) == bootstrap_mean_ci(v, n_boot=2000, seed=1)


def test_paired_bootstrap():
    rng = np.random.default_rng(0)
    a = rng.normal(0.4, 0.3, 300)
    diff, p = paired_bootstrap(a, a - 0.2 + rng.normal(0, 0.05, 300), n_boot=2000)
    assert diff == pytest.approx(0.2, abs=0.02) and p < 0.01
    diff, p = paired_bootstrap(a, a + rng.normal(0, 0.05, 300), n_boot=2000)
    assert p > 0.05
    assert paired_bootstrap(a, a) == (0.0, 1.0)
    with pytest.raises(InputError):
        paired_bootstrap(a, a[:10])


def test_too_few_questions_give_no_interval_and_no_p_value():
    """Two questions with the same sign of difference would give p = 1/n_boot: a lie, so NA."""
    assert np.isnan(bootstrap_mean_ci([0.7])).all()
    assert np.isnan(bootstrap_mean_ci([0.7, 0.1, 0.3, 0.5])).all()
    assert np.isfinite(bootstrap_mean_ci([0.7, 0.1, 0.3, 0.5, 0.2])).all()
    diff, p = paired_bootstrap([0.9, 0.4, np.nan], [0.5, 0.2, 0.2])
    assert diff == pytest.approx(0.3) and np.isnan(p)


def test_bad_input():
    with pytest.raises(InputError, match="NaN"):
        per_question_spearman([np.nan, 1], [0, 1], ["q", "q"])
    with pytest.raises(InputError, match="equal length"):
        per_question_spearman([1, 2], [0], ["q", "q"])


def test_table_p_values_are_paired_tests_of_the_rhos_with_holm():
    rng = np.random.default_rng(4)
    n_q, k = 30, 4
    qid = np.repeat([f"q{i}" for i in range(n_q)], k)
    outcome = rng.integers(0, 3, n_q * k)
    labels = np.array(["wrong", "abstained", "correct"])[outcome]
    metrics = {"A": outcome + rng.normal(0, 0.5, n_q * k), "B": outcome + rng.normal(0, 2, n_q * k),
               "C": rng.normal(0, 1, n_q * k)}
    rows = ContextRows([f"line {i}" for i in range(n_q * k)],
                       [{"metrics": {m: float(v[i]) for m, v in metrics.items()}} for i in range(n_q * k)],
                       list(qid), [{"outcome": o} for o in labels])
    rhos = {m: per_question_spearman(v, outcome, qid)[1] for m, v in metrics.items()}
    for test in ("permutation", "t"):
        table = {r["metric"]: r for r in correlation_table(rows, None, "A", n_boot=200, test=test, n_resamples=999).rows}
        for m in ("B", "C"):  # the old column names stay; the p is the paired test of the per-question rhos
            assert table[m]["p_vs_baseline"] == paired_test(rhos[m], rhos["A"], test, 999)
            assert table[m]["diff_vs_baseline"] == pytest.approx(np.nanmean(rhos[m] - rhos["A"]))
        assert [table[m]["p_holm"] for m in ("B", "C")] == list(holm([table["B"]["p_vs_baseline"],
                                                                      table["C"]["p_vs_baseline"]]))
        assert np.isnan(table["A"]["p_vs_baseline"]) and np.isnan(table["A"]["p_holm"])
    assert table["C"]["p_holm"] < 0.05
    with pytest.raises(InputError, match="permutation, t, wilcoxon"):
        correlation_table(rows, None, "A", n_boot=10, test="bootstrap")
