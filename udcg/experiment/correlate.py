"""The paper's Table 3 for a set of scored contexts: mean per-question Spearman per metric.

Each metric's per-question rhos are tested against the baseline metric's with a paired test
(``stats.paired_test``: a sign-flip permutation test by default) in ``p_vs_baseline``; ``p_holm``
is that p Holm-corrected over the table's comparisons. Intervals stay percentile bootstrap."""

from __future__ import annotations

import numpy as np

from udcg.contextfile import ContextRows, score_rows
from udcg.errors import InputError
from udcg.metrics.contexts import parse_metrics
from udcg.metrics.correlation import per_question_spearman, summarize
from udcg.metrics.stats import holm, paired_test
from udcg.metrics.udcg import GAMMA, UDCGTheta
from udcg.report import Table

COLUMNS = ["metric", "mean_rho", "ci_low", "ci_high", "n_questions", "no_rho_outcome", "const_metric",
           "pooled_rho", "diff_vs_baseline", "p_vs_baseline", "p_holm", "best"]


def metric_values(rows: ContextRows, spec: str | None, gamma: float = GAMMA,
                  theta: UDCGTheta | None = None) -> dict[str, np.ndarray]:
    """Values from the file's 'metrics' field when present, else computed from the context fields."""
    stored = [r.get("metrics", {}) for r in rows.raw]
    if spec is None:
        names = list(dict.fromkeys(n for s in stored for n in s))
        if not names:
            raise InputError("the contexts carry no 'metrics' (run udcg score first, or pass --metrics)")
    else:
        names = [str(m) for m in parse_metrics(spec)]
    out: dict[str, np.ndarray] = {}
    missing = [n for n in names if not all(n in s and s[n] is not None for s in stored)]
    if missing:
        out.update(score_rows(rows, parse_metrics(",".join(missing)), gamma, theta))
    for n in names:
        if n not in out:
            out[n] = np.array([s[n] for s in stored], dtype=float)
    return {n: out[n] for n in names}


def _vs_baseline(rho: np.ndarray, rho_base: np.ndarray, test: str, n_resamples: int, seed: int) -> tuple[float, float]:
    """Mean rho difference over the questions where both are defined, and the paired test's p."""
    both = np.isfinite(rho) & np.isfinite(rho_base)
    diff = float((rho[both] - rho_base[both]).mean()) if both.any() else float("nan")
    return diff, paired_test(rho, rho_base, test, n_resamples, seed)


def correlation_table(rows: ContextRows, spec: str | None, baseline: str | None = "UDCG", gamma: float = GAMMA,
                      theta: UDCGTheta | None = None, constant_metric: str = "zero", n_boot: int = 10_000,
                      seed: int = 0, title: str = "", test: str = "permutation", n_resamples: int = 10_000) -> Table:
    values = metric_values(rows, spec, gamma, theta)
    outcome = rows.outcome_scores()
    groups = np.asarray(rows.qid)
    rhos, summaries = {}, {}
    for name, v in values.items():
        if np.isnan(v).any():
            raise InputError(f"metric {name} is NA for some contexts (e.g. RA-nWG without a grade-4/5 passage); "
                             "it cannot be correlated — drop it or fill the labels")
        rhos[name] = per_question_spearman(v, outcome, groups, constant_metric)[1]
        summaries[name] = summarize(name, v, outcome, groups, constant_metric, n_boot, seed=seed)
    best = max(summaries, key=lambda n: summaries[n].mean_rho)
    table = Table(COLUMNS, title=title or f"Spearman with answer outcomes over {len(set(rows.qid))} questions, {len(rows)} contexts")
    for name, s in summaries.items():
        diff, p = (_vs_baseline(rhos[name], rhos[baseline], test, n_resamples, seed)
                   if baseline in rhos and name != baseline else (float("nan"), float("nan")))
        table.add(metric=name, mean_rho=s.mean_rho, ci_low=s.ci_low, ci_high=s.ci_high, n_questions=s.n_questions,
                  no_rho_outcome=s.n_constant_outcome, const_metric=s.n_constant_metric, pooled_rho=s.pooled_rho,
                  diff_vs_baseline=diff, p_vs_baseline=p, best="*" if name == best else "")
    for row, p_holm in zip(table.rows, holm([r["p_vs_baseline"] for r in table.rows])):
        row["p_holm"] = float(p_holm)
    table.rows.sort(key=lambda r: -r["mean_rho"])
    return table
