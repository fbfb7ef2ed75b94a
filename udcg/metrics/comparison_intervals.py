"""The intervals of a comparison of runs (``udcg.metrics.compare.compare_scores``): every run's mean
and every compared pair's mean paired difference, percentile bootstrap intervals all from one set of
resampled queries per query count (``stats.bootstrap_means``, seeded). Without NaNs a pair's
resampled difference is the difference of the two runs' resampled means; with NaNs, the pair's
differences over the queries where both are defined are resampled as a column of their own.
"""

from __future__ import annotations

import math

import numpy as np

from udcg.metrics.stats import bootstrap_means, percentile_interval


def intervals(runs: list[str], pairs: list[tuple[str, str]], measures: list[str], arrays: dict, n_boot: int,
              level: float, seed: int
              ) -> tuple[dict[tuple[str, str], tuple[float, float]], dict[tuple[str, str, str], tuple[float, float]]]:
    """Percentile intervals of every run's mean and every pair's mean difference, all from one set
    of resampled queries per query count (``bootstrap_means``)."""
    columns: dict[int, list[np.ndarray]] = {}
    where: dict[tuple, tuple[int, int]] = {}

    def add(key: tuple, values: np.ndarray) -> None:
        group = columns.setdefault(len(values), [])
        where[key] = (len(values), len(group))
        group.append(values)

    for m in measures:
        for r in runs:
            add((m, r), arrays[r][m])
        for a, b in pairs:
            x, y = arrays[a][m], arrays[b][m]
            if np.isnan(x).any() or np.isnan(y).any():  # else the resampled difference is a difference of means
                add((m, a, b), np.where(np.isnan(x) | np.isnan(y), np.nan, x - y))
    boot = {n: bootstrap_means(np.column_stack(cols), n_boot, seed) if n else np.full((n_boot, len(cols)), np.nan)
            for n, cols in columns.items()}

    def resampled(key: tuple) -> np.ndarray:
        n, j = where[key]
        return boot[n][:, j]

    cell_ci, pair_ci = {}, {}
    for m in measures:
        for r in runs:
            enough = np.count_nonzero(~np.isnan(arrays[r][m])) >= 2
            cell_ci[m, r] = percentile_interval(resampled((m, r)), level) if enough else (math.nan, math.nan)
        for a, b in pairs:
            x, y = arrays[a][m], arrays[b][m]
            both = np.count_nonzero(~(np.isnan(x) | np.isnan(y)))
            means = resampled((m, a, b)) if (m, a, b) in where else resampled((m, a)) - resampled((m, b))
            pair_ci[m, a, b] = percentile_interval(means, level) if both >= 2 else (math.nan, math.nan)
    return cell_ci, pair_ci
