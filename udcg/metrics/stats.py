"""Paired significance tests, multiple-testing correction and bootstrap intervals over queries.

Conventions (those of ``scipy.stats.permutation_test(..., permutation_type="samples")``):

- The paired permutation test flips the sign of each difference d = a - b; its statistic is the
  mean of d. With n <= ``exact_max_n`` (default ``EXACT_MAX_N`` = 24) it enumerates all 2^n sign
  vectors and p counts the observed statistic among them (no +1): p is then scipy's exact p
  (``n_resamples=np.inf``). Otherwise it draws ``n_resamples`` (default ``DEFAULT_RESAMPLES`` =
  100,000) seeded random sign vectors and p = (count + 1) / (n_resamples + 1), an estimate of the
  exact p with Monte Carlo standard error ``monte_carlo_se`` (at most 0.0032 at 100,000 flips).
  Two-sided p = min(1, 2 * min(p_less, p_greater)). A null statistic equal to the observed one
  within a relative 100 machine epsilons counts as "at least as extreme" (scipy's ``gamma``).
- **Order never matters**: the differences are tested in a canonical order (sorted by value), so p
  depends on the differences as a multiset, never on the order of the queries in a file or dict
  (the random sign vector i is always applied to the i-th smallest difference).
- Pairs where either value is NaN are dropped before any test. No pair left: p = NaN. Every
  difference zero: p = 1.0 exactly (nothing distinguishes the two, whatever the test).
- Holm-Bonferroni adjusted p-values are monotone in the raw p and capped at 1; NaN p-values stay
  NaN and are not counted in the family.
- Intervals are percentile bootstrap intervals of the mean; non-finite values are dropped.
  ``bootstrap_means`` resamples *queries* (rows) once and gives every column (runs, paired
  differences) its mean over the same resamples, each over the drawn rows where it is defined.
- The exact enumeration builds the 2^n sums of sign-flipped differences incrementally, 2^20 at a
  time (8 MB), and recomputes, as scipy does, only the sums within a tolerance of the observed
  statistic (the ties that decide the count), so its p equals scipy's while costing about 2^n
  additions, not n 2^n (n = 24: about 0.2 s here). The random regime draws each sign vector as
  packed random bits and computes every null statistic by one matrix product per chunk,
  recomputing the same near ones; ``sign_flip_pvalues`` tests many difference vectors at once on
  shared flips (3,000 queries x 100,000 flips: about a second).
- ``min_detectable_difference``: the true mean difference a paired test at level ``alpha`` would
  detect with the given power, from the spread of the observed differences (an estimate: the
  noncentral t power of the paired t-test; see ``min_detectable_difference``).

Resampling is done in chunks of about ``_CHUNK_ELEMENTS`` numbers, so 20,000 queries x 100,000
resamples stays within a few tens of MB; the random draws do not depend on the chunk size.
"""

from __future__ import annotations

import math
from functools import lru_cache

import numpy as np

from udcg.errors import InputError
from udcg.metrics.constants import ALPHA, DEFAULT_RESAMPLES, LEVEL, N_BOOT, POWER, TEST, TESTS

ALTERNATIVES = ("two-sided", "greater", "less")
EXACT_MAX_N = 24  # exact enumeration up to here: 2^24 sign vectors, about 0.2 s (docs/reliability.md)
_EXACT_BLOCK = 20  # sign vectors of the first 20 differences enumerated at once (2^20 sums, 8 MB)
_CHUNK_ELEMENTS = 1 << 21  # float64 numbers per chunk: 16 MB
_EPS = np.finfo(np.float64).eps * 100  # scipy.stats.permutation_test's relative tolerance


def _differences(a: object, b: object) -> np.ndarray:
    """d = a - b over the pairs where both are defined (validates shapes)."""
    x, y = np.asarray(a, dtype=float), np.asarray(b, dtype=float)
    if x.ndim != 1 or y.ndim != 1:
        raise InputError(f"paired test: a and b must be 1-D per-query values, got shapes {x.shape} and {y.shape}")
    if len(x) != len(y):
        raise InputError(f"paired test: a has {len(x)} values and b has {len(y)} "
                         "(both must hold one value per query, on the same queries)")
    keep = ~(np.isnan(x) | np.isnan(y))
    return x[keep] - y[keep]


def _tolerance(d: np.ndarray) -> float:
    """A bound far above the rounding of any order of summing the sign-flipped differences' mean."""
    n = len(d)
    return max(1e-9, 8 * n * float(np.finfo(np.float64).eps)) * float(np.abs(d).sum()) / n


def _split(fast: np.ndarray, observed: float, gamma: float, tol: float) -> tuple[int, int, np.ndarray]:
    """Null statistics computed fast (another summation order than scipy's): those farther than
    ``gamma + tol`` from the observed one are on their side whatever the rounding and are counted
    here; the mask of the others, whose count depends on scipy's exact arithmetic, is returned."""
    near = np.abs(fast - observed) <= gamma + tol
    far = fast[~near]
    return int(np.count_nonzero(far < observed)), int(np.count_nonzero(far > observed)), near


def _recount(d: np.ndarray, flips: np.ndarray, observed: float, gamma: float) -> tuple[int, int]:
    """(null <= observed + gamma, null >= observed - gamma) over the rows of the boolean ``flips``,
    each null the mean of the sign-flipped differences computed as scipy computes it."""
    null = np.where(flips, -d, d).mean(axis=1)  # = (signs * d).mean(axis=1) bit for bit
    return int(np.count_nonzero(null <= observed + gamma)), int(np.count_nonzero(null >= observed - gamma))


def _sign_sums(d: np.ndarray) -> np.ndarray:
    """The 2^len(d) sums of the sign-flipped ``d``: entry k flips d[i] when bit i of k is set."""
    sums = np.empty(1 << len(d))
    sums[0], m = float(d.sum()), 1
    for x in d:  # sums[:m] hold the sign vectors of d[:i]; those with bit i set go to sums[m:2m]
        np.subtract(sums[:m], 2 * x, out=sums[m:2 * m])
        m *= 2
    return sums


def _exact_counts(d: np.ndarray, observed: float, gamma: float) -> tuple[int, int]:
    """(null <= observed + gamma, null >= observed - gamma) over all 2^n sign vectors, sign vector
    k flipping d[i] when bit i of k is set. The sums are built incrementally, ``_EXACT_BLOCK`` bits
    at a time, and only those within rounding of the observed statistic are recomputed (``_split``)."""
    n = len(d)
    low = min(n, _EXACT_BLOCK)
    block = _sign_sums(d[:low])
    shifts = _sign_sums(d[low:]) if n > low else np.zeros(1)
    tol = _tolerance(d)
    less = greater = 0
    rows = max(1, _CHUNK_ELEMENTS // n)
    for high, shift in enumerate(shifts):
        lo, hi, near = _split((block + shift) / n, observed, gamma, tol)
        less, greater = less + lo, greater + hi
        ks = ((high << low) | np.flatnonzero(near)).astype("<u8")
        for start in range(0, len(ks), rows):
            chunk = ks[start:start + rows]
            flips = np.unpackbits(chunk.view(np.uint8).reshape(len(chunk), 8), axis=1, bitorder="little")[:, :n]
            lo, hi = _recount(d, flips.astype(bool), observed, gamma)
            less, greater = less + lo, greater + hi
    return less, greater


def _p_value(less: int, greater: int, total: int, adjustment: int, alternative: str = "two-sided") -> float:
    p_less = (less + adjustment) / (total + adjustment)
    p_greater = (greater + adjustment) / (total + adjustment)
    if alternative == "less":
        return float(min(1.0, p_less))
    if alternative == "greater":
        return float(min(1.0, p_greater))
    return float(min(1.0, 2 * min(p_less, p_greater)))


def _random_flips(rng: np.random.Generator, rows: int, n: int) -> np.ndarray:
    """``rows`` random sign vectors of length n as 0/1 (1 = flip): each row is ceil(n / 32) random
    32-bit words, bit i of the row flipping the i-th difference; the stream does not depend on how
    many rows are drawn at once."""
    words = rng.integers(0, 1 << 32, size=(rows, (n + 31) // 32), dtype=np.uint32)
    return np.unpackbits(words.astype("<u4").view(np.uint8), axis=1, bitorder="little")[:, :n]


def _random_counts(ds: list[np.ndarray], n_resamples: int, seed: int) -> list[tuple[int, int]]:
    """(less, greater) of each difference vector (all of one length n, in canonical order) over the
    same ``n_resamples`` random sign vectors drawn from ``seed`` (``_random_flips``): one matrix
    product per chunk gives every vector's null statistics (``_split``)."""
    n = len(ds[0])
    observed = [float(d.mean()) for d in ds]
    gamma = [abs(_EPS * o) for o in observed]
    tol = [_tolerance(d) for d in ds]
    counts = [[0, 0] for _ in ds]
    stacked = np.column_stack(ds)
    totals = stacked.sum(axis=0)
    rng = np.random.default_rng(seed)
    rows = max(1, _CHUNK_ELEMENTS // n)
    for start in range(0, n_resamples, rows):
        bits = _random_flips(rng, min(n_resamples, start + rows) - start, n)
        fast = (totals - 2.0 * (bits.astype(np.float64) @ stacked)) / n
        for j, d in enumerate(ds):
            lo, hi, near = _split(fast[:, j], observed[j], gamma[j], tol[j])
            if near.any():
                extra = _recount(d, bits[near].astype(bool), observed[j], gamma[j])
                lo, hi = lo + extra[0], hi + extra[1]
            counts[j][0] += lo
            counts[j][1] += hi
    return [(lo, hi) for lo, hi in counts]


def monte_carlo_se(p: float, n_resamples: int, alternative: str = "two-sided") -> float:
    """The Monte Carlo standard error of a sign-flip p estimated from ``n_resamples`` random flips.
    Two-sided, p = 2 min(p_less, p_greater): sqrt(p (2 - p) / n_resamples) (the binomial error of the
    smaller tail, doubled; at most sqrt(1 / n_resamples)). One-sided ("greater", "less", and so a
    TOST p, the larger of two one-sided p): the binomial error of that tail, sqrt(p (1 - p) /
    n_resamples) (at most sqrt(1 / (4 n_resamples))). NaN for a NaN p."""
    if alternative not in ALTERNATIVES:
        raise InputError(f"alternative {alternative!r} is unknown: use one of {', '.join(ALTERNATIVES)}")
    if math.isnan(p):
        return float("nan")
    q = min(p, 1.0)
    return float(math.sqrt(q * (2 - q if alternative == "two-sided" else 1 - q) / n_resamples))


def is_estimated(n: int, exact_max_n: int = EXACT_MAX_N) -> bool:
    """Whether the sign-flip p of ``n`` (not all zero) differences is a Monte Carlo estimate."""
    return n > exact_max_n


def sign_flip_pvalues(differences: list[np.ndarray], n_resamples: int = DEFAULT_RESAMPLES, seed: int = 0,
                      exact_max_n: int = EXACT_MAX_N, alternative: str = "two-sided") -> list[float]:
    """``paired_permutation_test``'s p of each vector of paired differences (NaN-free), the same
    values one by one would give: vectors of one length share their random sign flips (each test
    draws the same ones from ``seed``), so many run pairs cost one draw and one product per chunk.
    Each vector is tested in canonical (sorted) order: p depends on it as a multiset only.
    ``alternative``: "two-sided", "greater" (H1: the mean difference is above 0) or "less", as in
    ``scipy.stats.permutation_test``."""
    _check_resamples(n_resamples)
    if alternative not in ALTERNATIVES:
        raise InputError(f"alternative {alternative!r} is unknown: use one of {', '.join(ALTERNATIVES)}")
    differences = [np.sort(np.asarray(d, dtype=float)) for d in differences]
    out: list[float] = [float("nan")] * len(differences)
    random: dict[int, list[int]] = {}
    for i, d in enumerate(differences):
        if len(d) == 0:
            continue
        if not np.any(d):
            out[i] = 1.0
        elif len(d) <= exact_max_n:
            observed = float(d.mean())
            out[i] = _p_value(*_exact_counts(d, observed, abs(_EPS * observed)), 1 << len(d), 0, alternative)
        else:
            random.setdefault(len(d), []).append(i)
    for indices in random.values():
        group = [differences[i] for i in indices]
        for i, (less, greater) in zip(indices, _random_counts(group, int(n_resamples), seed)):
            out[i] = _p_value(less, greater, int(n_resamples), 1, alternative)
    return out


def _check_resamples(n_resamples: int) -> None:
    if isinstance(n_resamples, bool) or not isinstance(n_resamples, (int, np.integer)) or n_resamples < 1:
        raise InputError(f"n_resamples = {n_resamples!r}: use a positive integer (e.g. 10000)")


def paired_permutation_test(a: object, b: object, n_resamples: int = DEFAULT_RESAMPLES, seed: int = 0,
                            exact_max_n: int = EXACT_MAX_N) -> float:
    """Two-sided p of the paired sign-flip permutation test on the mean of a - b (module docstring)."""
    _check_resamples(n_resamples)
    return sign_flip_pvalues([_differences(a, b)], n_resamples, seed, exact_max_n)[0]


def paired_test(a: object, b: object, method: str = TEST, n_resamples: int = DEFAULT_RESAMPLES, seed: int = 0,
                exact_max_n: int = EXACT_MAX_N) -> float:
    """Two-sided p of a paired test of 'no difference between a and b': ``method`` is one of
    ``TESTS``: the sign-flip permutation test, Student's paired t (``scipy.stats.ttest_rel``) or
    the Wilcoxon signed-rank test (``scipy.stats.wilcoxon``, zero differences dropped)."""
    if method not in TESTS:
        raise InputError(f"paired test {method!r} is unknown: use one of {', '.join(TESTS)}")
    if method == "permutation":
        return paired_permutation_test(a, b, n_resamples, seed, exact_max_n)
    d = np.sort(_differences(a, b))  # canonical order: the same p whatever the order of the queries
    if len(d) == 0:
        return float("nan")
    if not np.any(d):
        return 1.0
    from scipy import stats as scipy_stats  # here, so that the CLI can read TESTS without loading scipy

    if method == "t":
        return float(scipy_stats.ttest_rel(d, np.zeros_like(d)).pvalue) if len(d) >= 2 else float("nan")
    return float(scipy_stats.wilcoxon(d, zero_method="wilcox").pvalue)


def holm(pvalues: object) -> np.ndarray:
    """Holm-Bonferroni adjusted p-values, in the input order; NaN stays NaN, outside the family."""
    p = np.asarray(pvalues, dtype=float)
    if p.ndim != 1:
        raise InputError(f"holm: p-values must be a flat list, got shape {p.shape}")
    known = ~np.isnan(p)
    if np.any((p[known] < 0) | (p[known] > 1)):
        raise InputError(f"holm: p-values must lie in [0, 1], got {p[known][(p[known] < 0) | (p[known] > 1)][:3]}")
    out = np.full(p.shape, np.nan)
    v = p[known]
    order = np.argsort(v, kind="stable")
    m = len(v)
    adjusted = np.empty(m)
    adjusted[order] = np.minimum(1.0, np.maximum.accumulate((m - np.arange(m)) * v[order]))
    out[known] = adjusted
    return out


def bootstrap_ci(values: object, n_boot: int = N_BOOT, level: float = LEVEL, seed: int = 0, *,
                 min_n: int = 2) -> tuple[float, float]:
    """Percentile bootstrap interval of the mean of the finite ``values``; (nan, nan) with fewer
    than ``min_n`` of them. Same random stream as one ``rng.integers(0, n, (n_boot, n))`` draw."""
    if not 0 < level < 1:
        raise InputError(f"level = {level!r}: use a confidence level between 0 and 1 (e.g. 0.95)")
    _check_resamples(n_boot)
    v = np.asarray(values, dtype=float).ravel()
    v = v[np.isfinite(v)]
    n = len(v)
    if n < max(min_n, 1):
        return float("nan"), float("nan")
    rng = np.random.default_rng(seed)
    means = np.empty(n_boot)
    rows = max(1, _CHUNK_ELEMENTS // n)
    for start in range(0, n_boot, rows):
        stop = min(n_boot, start + rows)
        means[start:stop] = v[rng.integers(0, n, size=(stop - start, n))].mean(1)
    a = (1 - level) / 2
    return float(np.quantile(means, a)), float(np.quantile(means, 1 - a))


def bootstrap_means(columns: object, n_boot: int = N_BOOT, seed: int = 0) -> np.ndarray:
    """(n_boot, columns) resampled means of the columns of an (n, columns) array over the SAME
    resamples of its rows: resample b draws n row indices with replacement (``bootstrap_ci``'s
    stream for n values), and each column's mean is over the drawn rows where it is finite (NaN when
    none is). A column of per-query values of one run, another of the paired differences of two
    runs: their intervals come from one set of resampled queries."""
    _check_resamples(n_boot)
    x = np.asarray(columns, dtype=float)
    if x.ndim != 2 or x.shape[0] == 0:
        raise InputError(f"bootstrap_means: expected an (n queries, columns) array with n >= 1, got shape {x.shape}")
    n = x.shape[0]
    finite = np.isfinite(x)
    k = x.shape[1]
    # one product gives the resampled sums and, with NaNs, the resampled counts of defined rows
    stacked = x if finite.all() else np.hstack([np.where(finite, x, 0.0), finite.astype(float)])
    rng = np.random.default_rng(seed)
    out = np.empty((n_boot, k))
    rows = max(1, _CHUNK_ELEMENTS // n)
    for start in range(0, n_boot, rows):
        stop = min(n_boot, start + rows)
        draws = rng.integers(0, n, size=(stop - start, n))  # chunk-invariant stream
        weights = np.bincount((draws + n * np.arange(stop - start)[:, None]).ravel(),
                              minlength=(stop - start) * n).reshape(stop - start, n).astype(float)
        sums = weights @ stacked
        with np.errstate(invalid="ignore", divide="ignore"):
            out[start:stop] = sums / n if stacked is x else sums[:, :k] / sums[:, k:]
    return out


def percentile_interval(means: object, level: float = LEVEL) -> tuple[float, float]:
    """The percentile interval of resampled means (NaN resamples left out; (nan, nan) if none)."""
    if not 0 < level < 1:
        raise InputError(f"level = {level!r}: use a confidence level between 0 and 1 (e.g. 0.95)")
    m = np.asarray(means, dtype=float)
    m = m[np.isfinite(m)]
    if not len(m):
        return float("nan"), float("nan")
    a = (1 - level) / 2
    return float(np.quantile(m, a)), float(np.quantile(m, 1 - a))


MAX_CRITICAL = 1e6  # a t critical value beyond this comes from an alpha no data set can reach


@lru_cache(maxsize=256)
def t_noncentrality(df: int, alpha: float, power: float) -> float:
    """The noncentrality at which a two-sided t-test with ``df`` degrees of freedom at level
    ``alpha`` rejects with probability ``power``."""
    from scipy import optimize, stats as scipy_stats

    crit = scipy_stats.t.ppf(1 - alpha / 2, df)  # (the published values' way; isf only where 1 - alpha/2 rounds to 1)
    if not np.isfinite(crit):
        crit = scipy_stats.t.isf(alpha / 2, df)
    if not np.isfinite(crit) or crit > MAX_CRITICAL:
        raise InputError(f"alpha = {alpha:g} (per comparison) is too small for a t-test on {df + 1} queries (its critical "
                         f"value is {crit:g}); use a larger alpha (e.g. 0.05)")

    def shortfall(nc: float) -> float:
        lower = scipy_stats.nct.cdf(-crit, df, nc)  # the far tail: tiny, and NaN in scipy's extreme cases
        return scipy_stats.nct.sf(crit, df, nc) + (0.0 if np.isnan(lower) else lower) - power

    if shortfall(0.0) >= 0:  # with no difference at all the test already rejects that often
        raise InputError(f"power = {power:g} is not above the test's level alpha = {alpha:g} (per comparison): "
                         "give a power above it (e.g. 0.8)")
    high = crit + scipy_stats.norm.ppf(power) + 1.0
    while shortfall(high) < 0:
        high *= 2
    return float(optimize.brentq(shortfall, 0.0, high, xtol=1e-10))


def min_detectable_difference(a: object, b: object, alpha: float = ALPHA, power: float = POWER,
                              method: str = TEST) -> float:
    """The smallest true mean difference of a - b that a two-sided paired test at level ``alpha``
    would detect with probability ``power`` on as many queries as here, given the spread of the
    observed differences d (pairs with a NaN dropped): MDD = delta * sd(d) / sqrt(n), delta the
    noncentrality at which the paired t-test with n - 1 degrees of freedom has that power
    (about (t_{1-alpha/2} + t_power) * sd / sqrt(n)). An estimate: sd(d) is estimated, and the
    differences are assumed to shift as a whole. The sign-flip permutation test on the mean is
    asymptotically the t-test, so it gets the same value; Wilcoxon's is divided by sqrt(3/pi), its
    asymptotic relative efficiency under normal differences. NaN with fewer than 2 pairs or when
    the differences do not vary."""
    d = _differences(a, b)
    return detectable_difference(float(np.std(d, ddof=1)) if len(d) > 1 else math.nan, len(d), alpha, power, method)


def detectable_difference(sd: float, n: int, alpha: float = ALPHA, power: float = POWER,
                          method: str = TEST) -> float:
    """``min_detectable_difference`` on ``n`` queries whose paired differences spread with standard
    deviation ``sd`` (observed there; assumed when planning a run: ``udcg answer --sample``)."""
    if method not in TESTS:
        raise InputError(f"paired test {method!r} is unknown: use one of {', '.join(TESTS)}")
    if not 0 < alpha < 1 or not 0 < power < 1:
        raise InputError(f"alpha = {alpha!r}, power = {power!r}: both must lie between 0 and 1 (e.g. 0.05 and 0.8)")
    if n < 2 or not sd > 0:
        return float("nan")
    mdd = t_noncentrality(n - 1, float(alpha), float(power)) * sd / np.sqrt(n)
    return float(mdd / np.sqrt(3 / np.pi) if method == "wilcoxon" else mdd)
