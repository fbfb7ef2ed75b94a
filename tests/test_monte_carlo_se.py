"""The Monte Carlo standard error of a sign-flip p (``udcg.metrics.stats.monte_carlo_se``): the
two-sided p doubles its smaller tail, a one-sided p (and so a TOST p, the larger of two one-sided p)
is one tail. Each formula is checked against the spread of p over seeds (issue #51 item 3)."""

from __future__ import annotations

import math

import numpy as np
import pytest

from udcg.errors import InputError
from udcg.metrics.stats import monte_carlo_se, sign_flip_pvalues


def test_the_formulas_by_hand():
    assert monte_carlo_se(0.126, 1_000_000) == pytest.approx(math.sqrt(0.126 * 1.874 / 1e6))  # 0.00049
    assert monte_carlo_se(0.126, 1_000_000, "greater") == pytest.approx(math.sqrt(0.126 * 0.874 / 1e6))  # 0.00033
    assert monte_carlo_se(0.126, 1_000_000, "less") == monte_carlo_se(0.126, 1_000_000, "greater")
    assert monte_carlo_se(1.0, 100) == pytest.approx(0.1) and monte_carlo_se(1.0, 100, "greater") == 0.0
    assert math.isnan(monte_carlo_se(float("nan"), 100, "less"))
    with pytest.raises(InputError, match="alternative 'both' is unknown"):
        monte_carlo_se(0.5, 100, "both")


@pytest.mark.parametrize("alternative", ["two-sided", "greater"])
def test_the_error_is_the_spread_of_p_over_seeds(alternative):
    """400 seeds x 2,000 flips on one vector whose p is about 0.1 (one-sided) / 0.2 (two-sided): the
    formula at the mean p is the standard deviation of the p's, within 15% (the sd of 400 draws has a
    relative error of about 3.5%); the other formula is off by far more."""
    d = np.random.default_rng(7).normal(0.25, 1.0, 40)
    ps = np.array([sign_flip_pvalues([d], 2_000, seed, alternative=alternative)[0] for seed in range(400)])
    other = "greater" if alternative == "two-sided" else "two-sided"
    assert ps.std(ddof=1) == pytest.approx(monte_carlo_se(ps.mean(), 2_000, alternative), rel=0.15)
    assert abs(ps.std(ddof=1) / monte_carlo_se(ps.mean(), 2_000, other) - 1) > 0.25
