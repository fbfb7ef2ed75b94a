"""Correlation statistics (paper §7.2): per-question Spearman against scipy, bootstrap, paired test."""

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy.stats import kendalltau, spearmanr

from udcg.errors import InputError
from udcg.flows.correlate import STATISTICS as TABLE_STATISTICS
from udcg.flows.correlate import correlation_table_of
from udcg.metrics.correlation import (STATISTICS, bootstrap_mean_ci, per_question, per_question_kendall,
                                     per_question_pairwise, per_question_spearman, summarize)
from udcg.metrics.paired_tests import CorrelationTests
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


def test_too_few_questions_give_no_interval():
    """A percentile interval from fewer than 5 questions would be a lie, so NA."""
    assert np.isnan(bootstrap_mean_ci([0.7])).all()
    assert np.isnan(bootstrap_mean_ci([0.7, 0.1, 0.3, 0.5])).all()
    assert np.isfinite(bootstrap_mean_ci([0.7, 0.1, 0.3, 0.5, 0.2])).all()


def test_bad_input():
    with pytest.raises(InputError, match="inf"):
        per_question_spearman([np.inf, 1], [0, 1], ["q", "q"])
    with pytest.raises(InputError, match="equal length"):
        per_question_spearman([1, 2], [0], ["q", "q"])
    with pytest.raises(InputError, match="spearman, kendall, pairwise"):
        per_question("tau", [1, 2], [0, 1], ["q", "q"])


# ------------------------------------------------------------------ tie-neutral statistics


def test_kendall_and_pairwise_toy_by_hand():
    # q1: outcomes (2, 1, 0), metric (0.9, 0.9, 0.1): pairs (1,2) tie in the metric, (1,3) and (2,3) in order
    #     tau-b = 2 / sqrt(2 untied in m * 3 untied in o) = 0.8165; accuracy = (0.5 + 1 + 1) / 3
    # q2: outcomes (2, 0, 0), metric (0.1, 0.5, 0.3): both differing pairs reversed; the tie in o is ignored
    #     tau-b = -2 / sqrt(3 * 2) = -0.8165; accuracy = 0
    metric = [0.9, 0.9, 0.1, 0.1, 0.5, 0.3]
    outcome = [2, 1, 0, 2, 0, 0]
    groups = ["q1"] * 3 + ["q2"] * 3
    tau = per_question_kendall(metric, outcome, groups)[1]
    acc = per_question_pairwise(metric, outcome, groups)[1]
    assert tau == pytest.approx([2 / np.sqrt(6), -2 / np.sqrt(6)])
    assert acc == pytest.approx([2.5 / 3, 0.0])


def test_constant_metric_and_outcome_for_the_pair_statistics():
    _, acc, status = per_question_pairwise([0.5, 0.5, 0.5], [0, 1, 2], ["q"] * 3)
    assert acc[0] == 0.5 and status[0] == 2  # a constant metric is at chance, not at 0
    assert per_question_kendall([0.5, 0.5, 0.5], [0, 1, 2], ["q"] * 3)[1][0] == 0.0
    assert np.isnan(per_question_pairwise([0.5, 0.5, 0.5], [0, 1, 2], ["q"] * 3, constant_metric="drop")[1][0])
    _, acc, status = per_question_pairwise([0.1, 0.9], [2, 2], ["q", "q"])
    assert np.isnan(acc[0]) and status[0] == 1  # no pair with different outcomes


def test_na_metric_makes_the_question_na_never_zero():
    metric = [np.nan, 0.2, 0.9, 0.1, 0.5, 0.3]
    outcome = [2, 1, 0, 2, 0, 0]
    groups = ["q1"] * 3 + ["q2"] * 3
    for stat in STATISTICS:
        _, value, status = per_question(stat, metric, outcome, groups)
        assert np.isnan(value[0]) and list(status) == [3, 0]
    s = summarize("m", metric, outcome, groups, n_boot=10)
    assert s.n_na_metric == 1 and s.n_questions == 1 and s.mean_rho == pytest.approx(-np.sqrt(3) / 2)
    # all equal outcomes outrank NA: there is nothing to correlate whatever the metric
    assert per_question("spearman", [np.nan, 1.0], [1, 1], ["q", "q"])[2][0] == 1


@settings(max_examples=100, deadline=None)
@given(st.integers(1, 10), st.integers(2, 10), st.integers(0, 10_000))
def test_kendall_matches_scipy_and_pairwise_matches_a_naive_loop(n_q, n_ctx, seed):
    rng = np.random.default_rng(seed)
    sizes = rng.integers(2, n_ctx + 1, size=n_q)
    groups = np.repeat(np.arange(n_q), sizes)
    metric = rng.integers(0, 4, size=len(groups)).astype(float)
    outcome = rng.integers(0, 3, size=len(groups)).astype(float)
    _, tau, status = per_question_kendall(metric, outcome, groups)
    _, acc, _ = per_question_pairwise(metric, outcome, groups)
    for q in range(n_q):
        m, o = metric[groups == q], outcome[groups == q]
        if status[q] == 0:
            assert tau[q] == pytest.approx(kendalltau(m, o, variant="b").statistic, abs=1e-12)
        if status[q] != 1:
            scores = [1.0 if (m[i] - m[j]) * (o[i] - o[j]) > 0 else 0.5 if m[i] == m[j] else 0.0
                      for i in range(len(m)) for j in range(i + 1, len(m)) if o[i] != o[j]]
            assert acc[q] == pytest.approx(np.mean(scores), abs=1e-12)


def test_issue_example_spearman_rewards_ties_pairwise_accuracy_does_not():
    """3 correct and 7 wrong contexts, every differing-outcome pair in order by all three metrics:
    Spearman gives 0.866 when the contexts within each level are tied as P ties them (the 3 correct
    ones, the 2 wrong ones with a relevant passage, the 5 without), 0.851 and 0.798 as ties are
    spread; the pairwise accuracy is 1 for all three. Kendall's tau-b rewards ties too."""
    outcome = [2] * 3 + [0] * 7
    groups = ["q"] * 10
    like_p = [0.6, 0.6, 0.6, 0.2, 0.2, 0, 0, 0, 0, 0]
    partly_spread = [0.9, 0.8, 0.7, 0.3, 0.2, 0, 0, 0, 0, 0]
    like_udcg = [0.9, 0.8, 0.7, 0.45, 0.4, 0.35, 0.3, 0.25, 0.2, 0.1]  # distraction spreads the wrong ones
    rho = [per_question_spearman(m, outcome, groups)[1][0] for m in (like_p, partly_spread, like_udcg)]
    assert rho == pytest.approx([0.866, 0.851, 0.798], abs=5e-4)
    assert rho[0] - rho[2] > 0.036  # more than the PopQA gap the README reports
    assert [per_question_pairwise(m, outcome, groups)[1][0] for m in (like_p, partly_spread, like_udcg)] == [1.0] * 3
    tau = [per_question_kendall(m, outcome, groups)[1][0] for m in (like_p, like_udcg)]
    assert tau == pytest.approx([np.sqrt(21 / 31), np.sqrt(21 / 45)])  # 21 pairs untied in o; 45 - 14 in like_p
    assert tau[0] > tau[1]


def test_table_has_tie_neutral_columns_with_their_own_tests_and_holm():
    rng = np.random.default_rng(7)
    n_q, k = 25, 5
    qid = np.repeat([f"q{i}" for i in range(n_q)], k)
    outcome = rng.integers(0, 3, n_q * k)  # wrong 0, abstained 1, correct 2
    metrics = {"A": outcome + rng.normal(0, 0.7, n_q * k), "B": np.round(outcome + rng.normal(0, 1, n_q * k)),
               "C": rng.normal(0, 1, n_q * k)}
    table = {r["metric"]: r for r in correlation_table_of(metrics, outcome.astype(float), qid,
                                                          CorrelationTests(baseline="A", n_boot=200, n_resamples=999)).rows}
    for stat, column, p_col, holm_col in (("kendall", "mean_tau_b", "p_tau_b", "p_tau_b_holm"),
                                          ("pairwise", "pair_acc", "p_pair_acc", "p_pair_acc_holm")):
        per_q = {m: per_question(stat, v, outcome, qid)[1] for m, v in metrics.items()}
        for m in metrics:
            assert table[m][column] == pytest.approx(np.nanmean(per_q[m]))
            lo, hi = bootstrap_mean_ci(per_q[m], 200)
            assert (table[m][column.replace("mean_", "") + "_ci_low"], table[m][column.replace("mean_", "") + "_ci_high"]) == (lo, hi)
        for m in ("B", "C"):
            assert table[m][p_col] == paired_test(per_q[m], per_q["A"], "permutation", 999)
        assert [table[m][holm_col] for m in ("B", "C")] == list(holm([table["B"][p_col], table["C"][p_col]]))
        assert np.isnan(table["A"][p_col])
    assert table["A"]["best"] == table["A"]["best_tau_b"] == table["A"]["best_pair_acc"] == "*"
    assert table["C"]["pair_acc"] == pytest.approx(0.5, abs=0.1) and table["C"]["p_pair_acc_holm"] < 0.05


def test_a_circular_metric_is_flagged_and_never_best():
    outcome = np.array([2, 0, 1, 0] * 6, dtype=float)
    qid = np.repeat([f"q{i}" for i in range(6)], 4)
    metrics = {"eRAG": outcome.copy(), "UDCG": outcome + np.tile([0.0, 0.5, -0.9, 0.1], 6)}
    table = {r["metric"]: r for r in correlation_table_of(metrics, outcome, qid, CorrelationTests(n_boot=50),
                                                          circular=("eRAG",)).rows}
    assert table["eRAG"]["mean_rho"] == 1.0 > table["UDCG"]["mean_rho"]
    assert table["eRAG"]["circular"] == "yes" and table["UDCG"]["circular"] == ""
    assert table["eRAG"]["best"] == "" and table["UDCG"]["best"] == "*"
    plain = correlation_table_of(metrics, outcome, qid, CorrelationTests(n_boot=50))
    assert "circular" not in plain.columns and plain.rows[0]["best"] == "*"


def test_a_circular_metric_keeps_its_p_but_stays_out_of_the_holm_family():
    rng = np.random.default_rng(7)
    qid = np.repeat([f"q{i}" for i in range(12)], 5)
    outcome = rng.integers(0, 3, len(qid)).astype(float)
    metrics = {"UDCG": outcome + rng.normal(0, 1, len(qid)), "eRAG": outcome.copy(),
               "nDCG": outcome + rng.normal(0, 3, len(qid)), "RR": rng.normal(0, 1, len(qid))}
    table = {r["metric"]: r for r in correlation_table_of(metrics, outcome, qid, CorrelationTests(n_boot=50, n_resamples=999),
                                                          circular=("eRAG",)).rows}
    for _, _, _, p_col, holm_col, _ in TABLE_STATISTICS.values():
        assert np.isfinite(table["eRAG"][p_col]) and np.isnan(table["eRAG"][holm_col])  # shown, not corrected
        assert [table[m][holm_col] for m in ("nDCG", "RR")] == list(holm([table["nDCG"][p_col], table["RR"][p_col]]))
    every = {r["metric"]: r for r in correlation_table_of(metrics, outcome, qid,
                                                          CorrelationTests(n_boot=50, n_resamples=999)).rows}
    assert every["nDCG"]["p_holm"] >= table["nDCG"]["p_holm"]  # a third p in the family can only raise the others'


def test_table_p_values_are_paired_tests_of_the_rhos_with_holm():
    rng = np.random.default_rng(4)
    n_q, k = 30, 4
    qid = np.repeat([f"q{i}" for i in range(n_q)], k)
    outcome = rng.integers(0, 3, n_q * k)
    metrics = {"A": outcome + rng.normal(0, 0.5, n_q * k), "B": outcome + rng.normal(0, 2, n_q * k),
               "C": rng.normal(0, 1, n_q * k)}
    scores = outcome.astype(float)
    rhos = {m: per_question_spearman(v, outcome, qid)[1] for m, v in metrics.items()}
    for test in ("permutation", "t"):
        tests = CorrelationTests(baseline="A", n_boot=200, test=test, n_resamples=999)
        table = {r["metric"]: r for r in correlation_table_of(metrics, scores, qid, tests).rows}
        for m in ("B", "C"):  # the old column names stay; the p is the paired test of the per-question rhos
            assert table[m]["p_vs_baseline"] == paired_test(rhos[m], rhos["A"], test, 999)
            assert table[m]["diff_vs_baseline"] == pytest.approx(np.nanmean(rhos[m] - rhos["A"]))
        assert [table[m]["p_holm"] for m in ("B", "C")] == list(holm([table["B"]["p_vs_baseline"],
                                                                      table["C"]["p_vs_baseline"]]))
        assert np.isnan(table["A"]["p_vs_baseline"]) and np.isnan(table["A"]["p_holm"])
    assert table["C"]["p_holm"] < 0.05
    with pytest.raises(InputError, match="permutation, t, wilcoxon"):
        correlation_table_of(metrics, scores, qid, CorrelationTests(baseline="A", n_boot=10, test="bootstrap"))
