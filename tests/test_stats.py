"""Paired tests, Holm correction and bootstrap intervals: against scipy, hand toys and a null simulation."""

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy import stats as ss

from udcg.errors import InputError
from udcg.metrics.correlation import bootstrap_mean_ci
from udcg.metrics import stats
from udcg.metrics.stats import TESTS, bootstrap_ci, holm, paired_permutation_test, paired_test


def _mean_diff(x, y, axis):
    return np.mean(x - y, axis=axis)


def scipy_p(a, b, n_resamples=np.inf):
    return ss.permutation_test((np.asarray(a, float), np.asarray(b, float)), _mean_diff, permutation_type="samples",
                               vectorized=True, n_resamples=n_resamples, alternative="two-sided", rng=0).pvalue


def test_exact_by_hand():
    # d = (1, 1, 1): of the 8 sign vectors only (+,+,+) reaches mean 1 and only (-,-,-) mean -1
    assert paired_permutation_test([1, 1, 1], [0, 0, 0]) == pytest.approx(2 / 8)
    # d = (2, 1): null means 1.5, 0.5, -0.5, -1.5; p_greater = 1/4 -> p = 0.5
    assert paired_permutation_test([2, 1], [0, 0]) == pytest.approx(0.5)
    # d = (3, -1, 1): null sums {3, 1, 5, 3, -3, -5, -1, -3}, observed 3; p_greater = 3/8 -> p = 0.75
    assert paired_permutation_test([3, -1, 1], [0, 0, 0]) == pytest.approx(0.75)
    assert paired_permutation_test([1, 2], [1, 2]) == 1.0  # every difference zero
    assert np.isnan(paired_permutation_test([], []))
    assert np.isnan(paired_permutation_test([np.nan, 1.0], [0.0, np.nan]))  # no pair left


@pytest.mark.parametrize("seed", range(6))
def test_exact_equals_scipy(seed):
    rng = np.random.default_rng(seed)
    n = [2, 5, 9, 12, 14, 16][seed]  # scipy enumerates 2^n slowly
    a = rng.integers(0, 4, n) / 3  # ties and repeated |d|: null statistics equal to the observed one
    b = rng.integers(0, 4, n) / 3
    b[0] = a[0] + 1 / 3
    assert paired_permutation_test(a, b) == pytest.approx(scipy_p(a, b), rel=1e-12)
    c = a + rng.normal(0.2, 0.5, n)
    assert paired_permutation_test(c, a) == pytest.approx(scipy_p(c, a), rel=1e-12)


def test_random_regime_follows_scipys_convention():
    rng = np.random.default_rng(3)
    a, b = rng.normal(size=60), rng.normal(size=60)
    p = paired_permutation_test(a, b, n_resamples=999, seed=1)
    assert p * 1000 == pytest.approx(round(p * 1000), abs=1e-9)  # 2 (count + 1) / (999 + 1)
    assert p == paired_permutation_test(a, b, n_resamples=999, seed=1)  # seeded
    # same test, different random signs (both seeded: standard error about 0.005 each)
    assert abs(paired_permutation_test(a, b, n_resamples=20_000) - scipy_p(a, b, 20_000)) < 0.03
    # a forced random regime at small n agrees with the exact p
    a, b = rng.normal(size=10), rng.normal(size=10)
    assert abs(paired_permutation_test(a, b, 20_000, exact_max_n=0) - scipy_p(a, b)) < 0.02
    # smallest possible p: 2 / (n_resamples + 1)
    assert paired_permutation_test(np.ones(50), np.zeros(50), n_resamples=99) == pytest.approx(2 / 100)


def test_chunking_changes_nothing(monkeypatch):
    rng = np.random.default_rng(5)
    a, b = rng.normal(size=(2, 11))
    c, d = rng.normal(size=(2, 45))
    before = (paired_permutation_test(a, b), paired_permutation_test(c, d, 999, seed=2), bootstrap_ci(c, 500))
    assert paired_permutation_test(np.ones(20), np.zeros(20)) == pytest.approx(2 / 2**20)  # exact at n = 20
    monkeypatch.setattr(stats, "_CHUNK_ELEMENTS", 100)  # many chunks, the last one partial
    after = (paired_permutation_test(a, b), paired_permutation_test(c, d, 999, seed=2), bootstrap_ci(c, 500))
    assert after == before


def test_null_rejection_rate():
    """Under H0 (exchangeable signs) a level-0.05 test rejects about 5% of the time."""
    rng = np.random.default_rng(12345)
    reps = 2000
    exact = [paired_permutation_test(*rng.normal(size=(2, 12))) for _ in range(reps)]
    rand = [paired_permutation_test(*rng.normal(size=(2, 40)), n_resamples=500, seed=i) for i in range(reps)]
    for ps in (exact, rand):
        assert 0.035 <= np.mean(np.asarray(ps) <= 0.05) <= 0.065


def test_t_and_wilcoxon_equal_scipy():
    rng = np.random.default_rng(7)
    a = rng.normal(size=30)
    b = a + rng.normal(0.3, 1, 30)
    b[:3] = a[:3]  # zero differences: wilcoxon drops them ("wilcox")
    assert paired_test(a, b, "t") == pytest.approx(ss.ttest_rel(a, b).pvalue, rel=1e-12)
    assert paired_test(a, b, "wilcoxon") == pytest.approx(ss.wilcoxon(a, b, zero_method="wilcox").pvalue, rel=1e-12)
    assert paired_test(a, b) == paired_permutation_test(a, b)
    for method in TESTS:
        assert paired_test(a, a, method) == 1.0


def test_nan_pairs_are_dropped():
    a = np.array([0.5, np.nan, 0.9, 0.1, 0.7, 0.3])
    b = np.array([0.4, 0.2, np.nan, 0.0, 0.2, 0.1])
    keep = [0, 3, 4, 5]
    for method in TESTS:
        assert paired_test(a, b, method) == paired_test(a[keep], b[keep], method)


def test_paired_bad_input():
    with pytest.raises(InputError, match="permutation, t, wilcoxon"):
        paired_test([1, 2], [1, 2], "sign")
    with pytest.raises(InputError, match="3 values and b has 2"):
        paired_test([1, 2, 3], [1, 2])
    with pytest.raises(InputError, match="n_resamples"):
        paired_permutation_test([1, 2], [0, 0], n_resamples=0)


def test_holm_by_hand_and_nan():
    # sorted 0.01, 0.02, 0.03, 0.04 (m = 4): 0.04, 0.06, 0.06 (monotone), 0.06 -> back in input order
    got = holm([0.03, 0.01, np.nan, 0.04, 0.02])
    assert got[[0, 1, 3, 4]] == pytest.approx([0.06, 0.04, 0.06, 0.06])
    assert np.isnan(got[2])
    assert holm([0.5, 0.6]) == pytest.approx([1.0, 1.0])  # capped at 1
    assert len(holm([])) == 0
    with pytest.raises(InputError, match=r"\[0, 1\]"):
        holm([0.5, 1.5])


def naive_holm(p):
    m = len(p)
    order = sorted(range(m), key=lambda i: p[i])
    out, running = [0.0] * m, 0.0
    for rank, i in enumerate(order):
        running = max(running, min(1.0, (m - rank) * p[i]))
        out[i] = running
    return out


@settings(max_examples=100, deadline=None)
@given(st.lists(st.floats(0, 1), min_size=1, max_size=30))
def test_holm_matches_naive_loop(p):
    got = holm(p)
    assert got == pytest.approx(naive_holm(p))
    assert np.all(got >= np.asarray(p)) and np.all(got <= 1)


def test_bootstrap_ci():
    v = np.random.default_rng(0).normal(0.3, 0.2, 400)
    lo, hi = bootstrap_ci(v, n_boot=2000, seed=1)
    assert lo < v.mean() < hi
    assert hi - lo == pytest.approx(2 * 1.96 * v.std() / np.sqrt(400), rel=0.15)
    assert bootstrap_ci(np.r_[v, np.nan], n_boot=2000, seed=1) == (lo, hi)  # NaN dropped
    assert np.isnan(bootstrap_ci([0.7])).all() and np.isfinite(bootstrap_ci([0.7, 0.1])).all()
    # the correlation tables' interval is this one with its own minimum of questions
    assert bootstrap_mean_ci(v, n_boot=2000, seed=1) == (lo, hi)
    with pytest.raises(InputError, match="level"):
        bootstrap_ci(v, level=95)
