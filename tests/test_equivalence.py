"""One-sided sign-flip p and the two one-sided tests (TOST) of equivalence, the issue #38
pre-registration's equivalence test: against scipy's exact permutation test and by hand."""

from __future__ import annotations

import numpy as np
import pytest
from scipy import stats as scipy_stats

from udcg.errors import InputError
from udcg.metrics.equivalence import equivalence_pvalues, equivalence_test
from udcg.metrics.stats import sign_flip_pvalues


def _scipy(d: np.ndarray, alternative: str) -> float:
    return float(scipy_stats.permutation_test((d, np.zeros_like(d)), lambda x, y, axis: np.mean(x - y, axis=axis),
                                              permutation_type="samples", alternative=alternative,
                                              n_resamples=np.inf, vectorized=True).pvalue)


@pytest.mark.parametrize("alternative", ["greater", "less", "two-sided"])
def test_one_sided_p_equals_scipys_exact_p(alternative):
    rng = np.random.default_rng(3)
    for n in (5, 9, 12):
        d = rng.normal(0.1, 0.3, n)
        assert sign_flip_pvalues([d], alternative=alternative)[0] == pytest.approx(_scipy(d, alternative), abs=1e-12)


def test_one_sided_estimate_is_close_to_the_exact_p_beyond_the_exact_range():
    rng = np.random.default_rng(5)
    d = rng.normal(0.05, 0.3, 40)
    exact = _scipy(d[:20], "greater")  # scipy's exact p on a part small enough to enumerate
    assert sign_flip_pvalues([d[:20]], alternative="greater")[0] == pytest.approx(exact, abs=1e-12)
    p = sign_flip_pvalues([d], n_resamples=200_000, alternative="greater")[0]
    approx = float(scipy_stats.permutation_test((d, np.zeros_like(d)), lambda x, y, axis: np.mean(x - y, axis=axis),
                                                permutation_type="samples", alternative="greater",
                                                n_resamples=200_000, vectorized=True, random_state=1).pvalue)
    assert abs(p - approx) < 4 * np.sqrt(approx * (1 - approx) / 200_000) + 1e-4


def test_tost_by_hand():
    # every difference 0, margin 0.03: on d + 0.03 (all 0.03) only the identity flip reaches the mean, so
    # p_lower = 1/1024; likewise p_upper on d - 0.03: equivalent
    p, lower, upper = equivalence_test(np.zeros(10), 0.03)
    assert (p, lower, upper) == (1 / 1024, 1 / 1024, 1 / 1024)
    # every difference 0.05: d - 0.03 = 0.02 > 0 is never significantly below 0 (p_upper 1): not equivalent
    p, lower, upper = equivalence_test(np.full(10, 0.05), 0.03)
    assert (lower, upper, p) == (1 / 1024, 1.0, 1.0)
    # NaN dropped; the order of the differences never matters
    rng = np.random.default_rng(0)
    d = rng.normal(0.0, 0.05, 60)
    assert equivalence_test(np.r_[d, np.nan], 0.03) == equivalence_test(d[::-1], 0.03)
    assert all(np.isnan(equivalence_test([np.nan], 0.03)))


@pytest.mark.parametrize("margin", [0, -0.1, float("inf"), "0.03", True])
def test_a_margin_that_is_not_a_positive_number_is_refused(margin):
    with pytest.raises(InputError, match="equivalence margin"):
        equivalence_test([0.1, 0.2], margin)


def test_an_unknown_alternative_is_refused():
    with pytest.raises(InputError, match="alternative 'bigger' is unknown"):
        sign_flip_pvalues([np.ones(3)], alternative="bigger")


def test_equivalence_pvalues_by_hand_and_for_every_test():
    """d = (0.01, 0.02), margin 0.05: on d + 0.05 only the identity flip reaches the observed mean
    (p_lower = 1/4), likewise on d - 0.05 (p_upper = 1/4), so p_TOST = 1/4 for the sign-flip test and
    for Wilcoxon's exact test; the sign-flip values are equivalence_test's, vector by vector."""
    d = np.array([0.01, 0.02])
    assert equivalence_pvalues([d], [0.05]) == [0.25]
    assert equivalence_pvalues([d], [0.05], "wilcoxon") == [pytest.approx(0.25)]
    rng = np.random.default_rng(1)
    ds = [rng.normal(0.002, 0.01, 30), rng.normal(0.0, 0.01, 12), rng.normal(0.02, 0.01, 30), np.array([])]
    margins = [0.005, 0.005, 0.01, 0.01]
    got = equivalence_pvalues(ds, margins)
    assert got[:3] == [equivalence_test(x, m)[0] for x, m in zip(ds[:3], margins)] and np.isnan(got[3])
    assert equivalence_pvalues([ds[0][::-1]], [0.005]) == got[:1]  # the order of the queries never matters
    # Student's t against the formula: t = (mean -+ margin) / (sd / sqrt(n)), one-sided with n - 1 df
    x, m = ds[0], 0.005
    se = x.std(ddof=1) / np.sqrt(len(x))
    lower = scipy_stats.t.sf((x.mean() + m) / se, len(x) - 1)
    upper = scipy_stats.t.cdf((x.mean() - m) / se, len(x) - 1)
    assert equivalence_pvalues([x], [m], "t") == [pytest.approx(max(lower, upper), rel=1e-9)]
    assert equivalence_pvalues([np.full(5, 0.001)], [0.005], "t") == [0.0]  # no spread, inside: both H0 refuted
    assert equivalence_pvalues([np.full(5, 0.01)], [0.005], "t") == [1.0]  # no spread, outside
    with pytest.raises(InputError, match="positive number"):
        equivalence_pvalues([x], [0.0])


def test_tost_t_equals_statsmodels_paired_tost():
    """An independent implementation: statsmodels' ttost_paired on the two runs' values."""
    from statsmodels.stats.weightstats import ttost_paired

    rng = np.random.default_rng(2)
    a = rng.uniform(0.4, 0.6, 40)
    b = a + rng.normal(0.003, 0.01, 40)
    p, _, _ = ttost_paired(a, b, -0.005, 0.005)
    assert equivalence_pvalues([a - b], [0.005], "t") == [pytest.approx(p, rel=1e-9)]
