"""The paper's Table 3 for a set of scored contexts: mean per-question Spearman per metric."""

from __future__ import annotations

import numpy as np

from udcg.contextfile import ContextRows, score_rows
from udcg.errors import InputError
from udcg.metrics.contexts import parse_metrics
from udcg.metrics.correlation import paired_bootstrap, per_question_spearman, summarize
from udcg.metrics.udcg import GAMMA, UDCGTheta
from udcg.report import Table

COLUMNS = ["metric", "mean_rho", "ci_low", "ci_high", "n_questions", "no_rho_outcome", "const_metric",
           "pooled_rho", "diff_vs_baseline", "p_vs_baseline", "best"]


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


def correlation_table(rows: ContextRows, spec: str | None, baseline: str | None = "UDCG", gamma: float = GAMMA,
                      theta: UDCGTheta | None = None, constant_metric: str = "zero", n_boot: int = 10_000,
                      seed: int = 0, title: str = "") -> Table:
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
        diff, p = (paired_bootstrap(rhos[name], rhos[baseline], n_boot, seed)
                   if baseline in rhos and name != baseline else (float("nan"), float("nan")))
        table.add(metric=name, mean_rho=s.mean_rho, ci_low=s.ci_low, ci_high=s.ci_high, n_questions=s.n_questions,
                  no_rho_outcome=s.n_constant_outcome, const_metric=s.n_constant_metric, pooled_rho=s.pooled_rho,
                  diff_vs_baseline=diff, p_vs_baseline=p, best="*" if name == best else "")
    table.rows.sort(key=lambda r: -r["mean_rho"])
    return table
