"""Equivalence: two one-sided tests (TOST) that a mean paired difference lies within ±margin, with
the paired tests of ``udcg.metrics.stats`` (the sign-flip test, Student's t, Wilcoxon's signed-rank
test). ``udcg compare --equivalence`` and the issue #38 pre-registration use them."""

from __future__ import annotations

import math

import numpy as np

from udcg.errors import InputError
from udcg.metrics.constants import TEST
from udcg.metrics.stats import DEFAULT_RESAMPLES, EXACT_MAX_N, TESTS, sign_flip_pvalues


def _check_margin(margin: object) -> None:
    if isinstance(margin, bool) or not isinstance(margin, (int, float)) or not 0 < margin < math.inf:
        raise InputError(f"equivalence margin = {margin!r}: use a positive number (e.g. 0.03)")


def _sign_flip_sides(differences: list[np.ndarray], margins: list[float], n_resamples: int, seed: int,
                     exact_max_n: int) -> tuple[list[float], list[float]]:
    """The one-sided sign-flip p of H0 mean <= -margin (on d + margin, "greater") and of H0 mean >=
    +margin (on d - margin, "less") of each vector, on the same seeded flips."""
    lower = sign_flip_pvalues([d + m for d, m in zip(differences, margins)], n_resamples, seed, exact_max_n, "greater")
    upper = sign_flip_pvalues([d - m for d, m in zip(differences, margins)], n_resamples, seed, exact_max_n, "less")
    return lower, upper


def equivalence_test(differences: object, margin: float, n_resamples: int = DEFAULT_RESAMPLES, seed: int = 0,
                     exact_max_n: int = EXACT_MAX_N) -> tuple[float, float, float]:
    """Two one-sided sign-flip tests (TOST) of equivalence within ``margin``: (p_TOST, p_lower,
    p_upper). p_lower tests H0 mean <= -margin on the differences + margin (alternative
    "greater"); p_upper tests H0 mean >= +margin on the differences - margin ("less"); both on the
    same seeded flips. The mean lies within (-margin, +margin) at level alpha when p_TOST = max(p_lower,
    p_upper) < alpha. NaN differences are dropped; none left: NaN."""
    _check_margin(margin)
    d = np.asarray(differences, dtype=float).ravel()
    d = d[~np.isnan(d)]
    if len(d) == 0:
        return float("nan"), float("nan"), float("nan")
    (lower,), (upper,) = _sign_flip_sides([d], [margin], n_resamples, seed, exact_max_n)
    return max(lower, upper), lower, upper


def equivalence_pvalues(differences: list[np.ndarray], margins: list[float], method: str = TEST,
                        n_resamples: int = DEFAULT_RESAMPLES, seed: int = 0, exact_max_n: int = EXACT_MAX_N
                        ) -> list[float]:
    """p_TOST of each vector of paired differences (NaN-free) with its margin: the larger p of the
    two one-sided tests of H0 mean <= -margin (on d + margin, "greater") and H0 mean >= +margin (on
    d - margin, "less"), each by ``method``: the sign-flip test (``equivalence_test``'s values, the
    vectors of one length sharing their flips), Student's t (``scipy.stats.ttest_1samp``) or
    Wilcoxon's signed-rank test (``scipy.stats.wilcoxon``). NaN for an empty vector."""
    if method not in TESTS:
        raise InputError(f"paired test {method!r} is unknown: use one of {', '.join(TESTS)}")
    for m in margins:
        _check_margin(m)
    ds = [np.sort(np.asarray(d, dtype=float)) for d in differences]
    if method == "permutation":
        return [float(max(lo, up)) for lo, up in zip(*_sign_flip_sides(ds, margins, n_resamples, seed, exact_max_n))]
    from scipy import stats as scipy_stats

    out = []
    for d, m in zip(ds, margins):
        lo, up = d + m, d - m
        if len(lo) == 0 or (method == "t" and len(lo) < 2):
            out.append(float("nan"))
        elif method == "t" and np.ptp(lo) == 0:  # no spread: the mean is known, each H0 holds or is refuted
            out.append(float(max(lo[0] <= 0, up[0] >= 0)))
        elif method == "t":
            out.append(float(max(scipy_stats.ttest_1samp(lo, 0.0, alternative="greater").pvalue,
                                 scipy_stats.ttest_1samp(up, 0.0, alternative="less").pvalue)))
        else:
            p_lo = scipy_stats.wilcoxon(lo, zero_method="wilcox", alternative="greater").pvalue if np.any(lo) else 1.0
            p_up = scipy_stats.wilcoxon(up, zero_method="wilcox", alternative="less").pvalue if np.any(up) else 1.0
            out.append(float(max(p_lo, p_up)))
    return out


def decision(significant: bool, equivalent: bool, margin: float) -> str:
    """The decision of a difference test and an equivalence test at one level: different,
    equivalent within ±margin, different within ±margin (both: real, smaller than the margin), or
    inconclusive (neither)."""
    if significant and equivalent:
        return f"different, within ±{margin:g}"
    if significant:
        return "different"
    return f"equivalent within ±{margin:g}" if equivalent else "inconclusive"
