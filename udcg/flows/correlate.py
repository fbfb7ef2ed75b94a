"""The paper's Table 3 for a set of scored contexts: mean per-question Spearman per metric, and
beside it the tie-neutral statistics (``udcg.metrics.correlation``): Kendall's tau-b and the
pairwise ordering accuracy over the context pairs with different outcomes.

Each statistic of each metric is summarised alike: the mean over the questions where it is
defined, its percentile bootstrap interval, and the paired test of its per-question values
against the baseline metric's (``stats.paired_test``: a sign-flip permutation test by default),
raw and Holm-corrected over the table's comparisons of that statistic. Spearman keeps the
historical column names (``mean_rho``, ``ci_low``, ``ci_high``, ``p_vs_baseline``, ``p_holm``,
``best``); the others are ``mean_tau_b``/``tau_b_*`` and ``pair_acc``/``pair_acc_*``.

A metric listed in ``circular`` (e.g. eRAG at k = 1, whose score is computed from the very answer
that is graded) gets ``circular = yes``, is never marked best and stays out of the Holm family: its
raw p-values are shown, its Holm columns are NaN, and the others are corrected among themselves."""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np

from udcg.io.contexts import ContextFile
from udcg.flows.scoring import score_rows
from udcg.errors import InputError
from udcg.metrics.constants import ALPHA, CONSTANT, GAMMA, POWER
from udcg.metrics.contexts import parse_metric, parse_metrics
from udcg.metrics.correlation import bootstrap_mean_ci, per_question, summarize
from udcg.metrics.equivalence import decision, equivalence_pvalues
from udcg.metrics.paired_tests import CorrelationTests
from udcg.metrics.planning import count_of, queries_needed
from udcg.metrics.stats import EXACT_MAX_N, holm, monte_carlo_se, paired_test
from udcg.metrics.ties import TieDecomposition, tie_decomposition
from udcg.io.tables import Table

if TYPE_CHECKING:  # scikit-learn is imported only when a theta model is used
    from udcg.flows.correlate_options import CorrelateOptions
    from udcg.metrics.udcg_theta import UDCGTheta

# statistic -> (name in udcg.metrics.correlation, mean column, interval columns, raw p, Holm p, best column)
STATISTICS = {
    "rho": ("spearman", "mean_rho", ("ci_low", "ci_high"), "p_vs_baseline", "p_holm", "best"),
    "tau_b": ("kendall", "mean_tau_b", ("tau_b_ci_low", "tau_b_ci_high"), "p_tau_b", "p_tau_b_holm", "best_tau_b"),
    "pair_acc": ("pairwise", "pair_acc", ("pair_acc_ci_low", "pair_acc_ci_high"), "p_pair_acc", "p_pair_acc_holm",
                 "best_pair_acc"),
}
COLUMNS = ["metric", "mean_rho", "ci_low", "ci_high", "n_questions", "no_rho_outcome", "const_metric", "na_metric",
           "pooled_rho", "diff_vs_baseline", "p_vs_baseline", "p_holm", "best",
           "mean_tau_b", "tau_b_ci_low", "tau_b_ci_high", "p_tau_b", "p_tau_b_holm", "best_tau_b",
           "pair_acc", "pair_acc_ci_low", "pair_acc_ci_high", "p_pair_acc", "p_pair_acc_holm", "best_pair_acc"]


def metric_values(file: ContextFile, spec: str | None, gamma: float = GAMMA,
                  theta: UDCGTheta | None = None) -> dict[str, np.ndarray]:
    """Values from the file's 'metrics' field when present, else computed from the context fields;
    keyed by the stored names, or by the ``Measure``s of ``spec`` (each its canonical name)."""
    stored = [r.metrics or {} for r in file.records]
    if spec is None:
        names = list(dict.fromkeys(n for s in stored for n in s))
        if not names:
            raise InputError("the contexts carry no 'metrics' (run udcg score first, or pass --metrics)")
    else:
        names = parse_metrics(spec)
    out: dict[str, np.ndarray] = {}
    missing = [n for n in names if not all(n in s and s[n] is not None for s in stored)]
    if missing:
        out.update(score_rows(file, parse_metrics(missing), gamma, theta))
    for n in names:
        if n not in out:
            out[n] = np.array([s[n] for s in stored], dtype=float)
    return {n: out[n] for n in names}


def choose_baseline(spec: str | None, baseline: str | None) -> tuple[str, str]:
    """The baseline of a contexts-file table (``baseline``, default UDCG) and, when ``spec`` lists
    metrics without it, why the table has no p-values. A ``baseline`` given but not in a given
    ``spec`` is an error (checked before any file is read)."""
    chosen = baseline or "UDCG"
    if spec is None:
        return chosen, ""
    names = parse_metrics(spec)
    if baseline is not None and parse_metric(baseline, "--baseline") not in names:
        raise InputError(f"--baseline {baseline}: not among --metrics {spec} (add it, or choose "
                         f"--baseline from {', '.join(names)}): without it no p-value can be computed")
    return chosen, "" if chosen in names else (f"no p-values: the baseline {chosen} is not among --metrics (add it, "
                                               "or give --baseline)")


def check_stored_baseline(file: ContextFile, baseline: str, source: str) -> None:
    """A baseline named for a file's stored 'metrics' must be one of them."""
    stored = sorted(set().union(*(r.metrics or {} for r in file.records)))
    if parse_metric(baseline, "--baseline") not in stored:
        raise InputError(f"--baseline {baseline}: {source} holds no such metric (it holds: "
                         f"{', '.join(stored) or 'none'}; choose one of them or pass --metrics)")


def _vs_baseline(rho: np.ndarray, rho_base: np.ndarray, test: str, n_resamples: int, seed: int) -> tuple[float, float]:
    """Mean difference over the questions where both are defined, and the paired test's p."""
    both = np.isfinite(rho) & np.isfinite(rho_base)
    diff = float((rho[both] - rho_base[both]).mean()) if both.any() else float("nan")
    return diff, paired_test(rho, rho_base, test, n_resamples, seed)


def per_question_values(values: dict[str, np.ndarray], outcome: np.ndarray, groups: np.ndarray,
                        constant_metric: str = CONSTANT
                        ) -> tuple[np.ndarray, dict[str, dict[str, np.ndarray]], dict[str, np.ndarray]]:
    """(question ids, {metric: {statistic key: value per question}}, {metric: status per question})
    for graded contexts: metric ``values`` (one per context; NaN = NA), ``outcome`` scores and
    ``groups`` (question id per context). Statistic keys are those of ``STATISTICS``; status as in
    ``udcg.metrics.correlation.per_question``."""
    out: dict[str, dict[str, np.ndarray]] = {}
    status: dict[str, np.ndarray] = {}
    qids = np.array([])
    for name, v in values.items():
        out[name] = {}
        for key, (stat, *_) in STATISTICS.items():
            qids, out[name][key], status[name] = per_question(stat, v, outcome, groups, constant_metric)
    return qids, out, status


def correlation_table(file: ContextFile, spec: str | None, tests: CorrelationTests = CorrelationTests(), *,
                      gamma: float = GAMMA, theta: UDCGTheta | None = None, title: str = "",
                      circular: tuple[str, ...] | frozenset[str] = (), best: str = "mean") -> Table:
    """Table 3 of a contexts file (``correlation_table_of``): metric values from the file's
    'metrics', else computed from its fields (``metric_values``); every context must be graded."""
    values = metric_values(file, spec, gamma, theta)
    return correlation_table_of(values, file.outcome_scores(), np.asarray([r.qid for r in file.records]), tests,
                                title=title, circular=circular, best=best)


def correlation_table_of(values: dict[str, np.ndarray], outcome: np.ndarray, groups: np.ndarray,
                         tests: CorrelationTests = CorrelationTests(), *, title: str = "",
                         circular: tuple[str, ...] | frozenset[str] = (), best: str = "mean") -> Table:
    """Table 3's layout for graded contexts: metric ``values`` (one per context, NaN = NA),
    ``outcome`` scores and ``groups`` (question id per context); one row per metric, sorted by
    mean rho (module docstring). ``tests`` (``CorrelationTests``): the baseline the others are
    tested against, the paired test, its sign flips, the bootstrap resamples and seed, how a
    constant metric counts, and the equivalence margin. A metric NA for some context of a question
    has no value for that question (``na_metric`` counts them); ``circular`` metrics are flagged,
    never best and outside the Holm family (raw p kept, Holm p NaN). ``best``: "mean" marks the
    highest mean of each statistic; "significant" marks it only where the paired tests against the
    baseline, Holm-corrected, tell it apart from every other metric (``significant_best``).
    ``tests.equivalence``: a margin for the rho difference against the baseline; adds
    ``EQUIVALENCE_COLUMNS`` (``_equivalence``)."""
    baseline, constant_metric, equivalence = tests.baseline, tests.constant_metric, tests.equivalence
    n_boot, seed, test, n_resamples = tests.n_boot, tests.seed, tests.test, tests.n_resamples
    _, stats, _ = per_question_values(values, outcome, groups, constant_metric)
    circular = frozenset(circular) & set(values)
    columns = (COLUMNS[:1] + (["circular"] if circular else []) + COLUMNS[1:]
               + (EQUIVALENCE_COLUMNS if equivalence is not None else []))
    table = Table(columns, title=title or f"Spearman with answer outcomes over {len(set(groups.tolist()))} questions, "
                                          f"{len(groups)} contexts")
    for name, v in values.items():
        s = summarize(name, v, outcome, groups, constant_metric, n_boot, seed=seed)
        row = {"metric": name, "n_questions": s.n_questions, "no_rho_outcome": s.n_constant_outcome,
               "const_metric": s.n_constant_metric, "na_metric": s.n_na_metric, "pooled_rho": s.pooled_rho}
        if circular:
            row["circular"] = "yes" if name in circular else ""
        for key, (_, mean_col, (lo_col, hi_col), p_col, _, _) in STATISTICS.items():
            per_q = stats[name][key]
            if key == "rho":
                row.update({mean_col: s.mean_rho, lo_col: s.ci_low, hi_col: s.ci_high})
            else:
                defined = per_q[np.isfinite(per_q)]
                lo, hi = bootstrap_mean_ci(per_q, n_boot, seed=seed)
                row.update({mean_col: float(defined.mean()) if len(defined) else float("nan"), lo_col: lo, hi_col: hi})
            diff, p = (_vs_baseline(per_q, stats[baseline][key], test, n_resamples, seed)
                       if baseline in stats and name != baseline else (float("nan"), float("nan")))
            row[p_col] = p
            if key == "rho":
                row["diff_vs_baseline"] = diff
        table.add(**row)
    family = [r for r in table.rows if r["metric"] not in circular]
    for key, (_, mean_col, _, p_col, holm_col, best_col) in STATISTICS.items():
        for row in table.rows:
            row[holm_col] = float("nan")
        for row, p_holm in zip(family, holm([r[p_col] for r in family])):
            row[holm_col] = float(p_holm)
        candidates = [r for r in table.rows if r["metric"] not in circular and np.isfinite(r[mean_col])]
        top = max(candidates, key=lambda r: r[mean_col])["metric"] if candidates else None
        if best == "significant":
            top = significant_best(candidates, mean_col, holm_col, baseline)
        for row in table.rows:
            row[best_col] = "*" if row["metric"] == top else ""
    if equivalence is not None:
        _equivalence(table.rows, stats, baseline, circular, equivalence, test, n_resamples, seed)
    table.rows.sort(key=lambda r: -r["mean_rho"] if np.isfinite(r["mean_rho"]) else np.inf)
    return table


EQUIVALENCE_COLUMNS = ["rho_margin", "rho_p_tost", "rho_p_tost_holm", "decision", "questions_to_detect",
                       "questions_for_equivalence"]
PLAN_POWER = POWER  # the power of the questions-needed figures (compare's default)


def _equivalence(rows: list[dict], stats: dict, baseline: str | None, circular: frozenset[str], margin: float,
                 test: str, n_resamples: int, seed: int) -> None:
    """Each metric's rho against the baseline's with its two one-sided tests at ``margin`` (the paired
    test of the table; ``metrics.equivalence``), Holm over the same family as p_holm, and the
    decision of the Holm-corrected difference and equivalence tests at ``ALPHA``; the questions the
    margin needs at Holm's strictest level ALPHA / m and ``PLAN_POWER``, from the spread of the
    per-question rho differences (``planning.count_of``: an int, "unreachable" or None)."""
    tested = [r for r in rows if baseline in stats and r["metric"] != baseline]
    diffs = []
    for r in tested:
        rho, base = stats[r["metric"]]["rho"], stats[baseline]["rho"]
        both = np.isfinite(rho) & np.isfinite(base)
        diffs.append(rho[both] - base[both])
    p_tost = equivalence_pvalues(diffs, [margin] * len(diffs), test, n_resamples, seed)
    family = [i for i, r in enumerate(tested) if r["metric"] not in circular]
    adjusted = dict(zip(family, holm([p_tost[i] for i in family])))
    level = ALPHA / max(1, len(family))
    for row in rows:
        row.update({"rho_margin": margin, "rho_p_tost": float("nan"), "rho_p_tost_holm": float("nan"), "decision": "",
                    "questions_to_detect": None, "questions_for_equivalence": None})
    for i, r in enumerate(tested):
        r["rho_p_tost"] = float(p_tost[i])
        detect, equivalent = queries_needed(diffs[i], margin, level, PLAN_POWER, test)
        r["questions_to_detect"], r["questions_for_equivalence"] = count_of(detect), count_of(equivalent)
        if i in adjusted and np.isfinite(adjusted[i]) and np.isfinite(r["p_holm"]):
            r["rho_p_tost_holm"] = float(adjusted[i])
            r["decision"] = decision(bool(r["p_holm"] < ALPHA), bool(adjusted[i] < ALPHA), margin)


MIN_QUESTIONS = 20  # below this many usable questions, correlate warns
# ALPHA (metrics.constants, compare's default): the level of the Holm-corrected paired tests behind a "best" mark


def significant_best(rows: list[dict], mean_col: str, holm_col: str, baseline: str | None) -> str | None:
    """The highest-mean metric when the table's tests tell it apart from every other metric: the
    baseline, when every other metric is significantly below it (Holm p < ``ALPHA``); another
    metric, when it is significantly above the baseline and every other metric significantly
    below. None otherwise (only tests against the baseline are made, so nothing else is claimed)."""
    base = next((r for r in rows if r["metric"] == baseline), None)
    if base is None or not rows:
        return None
    top = max(rows, key=lambda r: r[mean_col])

    def differs(r: dict, above: bool) -> bool:
        p = r[holm_col]
        return bool(np.isfinite(p) and p < ALPHA and (r[mean_col] > base[mean_col]) == above)

    others = [r for r in rows if r is not top and r is not base]
    if top is not base and not differs(top, True):
        return None
    return top["metric"] if all(differs(r, False) for r in others) else None


COMPACT_COLUMNS = ["metric", "rho [95% CI]", "p vs baseline (Holm)", "tau_b", "pairwise accuracy"]


def _p_text(p: float, digits: int) -> str:
    if not np.isfinite(p):
        return "—"
    return f"< {10 ** -digits:.{digits}f}" if p < 10 ** -digits else f"{p:.{digits}f}"


def compact_table(table: Table, baseline: str | None, digits: int = 3) -> Table:
    """The few columns a user looks at first: per metric the mean per-question Spearman rho with
    its interval, the raw and Holm p of rho against ``baseline``, the mean Kendall tau-b and the
    pairwise ordering accuracy (``correlation_table_of``'s rows, in its order; circular metrics
    keep their flag). The full table has every interval and p of every statistic."""
    p_column = f"p vs {baseline} (Holm)" if baseline else COMPACT_COLUMNS[2]
    circular = "circular" in table.columns
    tost = "decision" in table.columns
    margin = next((r["rho_margin"] for r in table.rows), float("nan")) if tost else float("nan")
    d_column = f"rho vs {baseline}: decision (TOST ±{margin:g}, Holm p)"
    out = Table(["metric", *(["circular"] if circular else []), "rho [95% CI]", p_column, *([d_column] if tost else []),
                 "tau_b", "pairwise accuracy"], title=table.title)
    for r in table.rows:
        rho = "NA" if not np.isfinite(r["mean_rho"]) else (
            f"{r['mean_rho']:.{digits}f} [{r['ci_low']:.{digits}f}, {r['ci_high']:.{digits}f}]"
            if np.isfinite(r["ci_low"]) else f"{r['mean_rho']:.{digits}f}")
        p = "—" if not np.isfinite(r["p_vs_baseline"]) else (f"{_p_text(r['p_vs_baseline'], digits)} "
                                                             f"({_p_text(r['p_holm'], digits)})")
        decided = ({d_column: f"{r['decision']} ({_p_text(r['rho_p_tost_holm'], digits)}{_needed(r)})"
                               if r["decision"] else "—"} if tost else {})
        out.add(metric=r["metric"], **({"circular": r["circular"]} if circular else {}), **{
            "rho [95% CI]": rho, p_column: p, **decided, "tau_b": r["mean_tau_b"], "pairwise accuracy": r["pair_acc"]})
    return out


def _needed(row: dict) -> str:
    """For an inconclusive row: the questions that would decide it (``_equivalence``)."""
    if row["decision"] != "inconclusive" or row["questions_to_detect"] is None:
        return ""
    return (f"; usable questions needed: {row['questions_to_detect']} to detect, "
            f"{row['questions_for_equivalence']} for equivalence")


def correlate_file(path: str, options: CorrelateOptions) -> tuple[Table, str | None, list[str]]:
    """The correlation table of the judged contexts of ``path`` (every column) with ``options``
    (``CorrelateOptions``: checked when built, before any file is read), the baseline the others
    were tested against (None: not among the metrics) and the notes for the user."""
    from udcg.flows.scoring import read_contexts
    from udcg.flows.theta import load_theta

    o = options
    metrics, baseline, equivalence, test, n_resamples = o.metrics, o.baseline, o.equivalence, o.test, o.n_resamples
    chosen, note = choose_baseline(metrics, baseline)
    file = read_contexts(path)
    if metrics is None and baseline is not None:
        check_stored_baseline(file, baseline, path)
    if equivalence is not None and note:
        raise InputError(f"--equivalence tests each metric's rho against the baseline's, and the baseline {chosen} is "
                         "not among --metrics (add it, or give --baseline)")
    table = correlation_table(file, metrics, o.tests(chosen), gamma=o.gamma,
                              theta=load_theta(o.theta) if o.theta else None)
    notes = [note] if note else []
    usable = max((r["n_questions"] for r in table.rows), default=0)
    if test == "permutation" and usable > EXACT_MAX_N and chosen in {r["metric"] for r in table.rows}:
        notes.append(f"p vs {chosen}: {n_resamples:,} seeded random sign flips (more than {EXACT_MAX_N} questions; "
                     f"exact enumeration up to {EXACT_MAX_N}), each p an estimate with Monte Carlo standard error at "
                     f"most {monte_carlo_se(1.0, n_resamples):.4f} (--n-resamples for more)")
    if usable < MIN_QUESTIONS:
        notes.append(f"warning: only {usable} usable questions (outcomes that differ between their contexts); below "
                     f"{MIN_QUESTIONS} the intervals and p-values rest on too few questions to support a conclusion, "
                     "whatever they show: answer and judge more queries (udcg answer --sample N)")
    return table, chosen if chosen in {r["metric"] for r in table.rows} else None, notes


def ties_of_file(path: str, metric: str, baseline: str, *, gamma: float = GAMMA,
                 theta: str | None = None) -> TieDecomposition:
    """``metrics.ties.tie_decomposition`` of ``metric`` against ``baseline`` over the judged contexts
    of ``path`` (values from the file's 'metrics', else computed from its fields)."""
    from udcg.flows.scoring import read_contexts
    from udcg.flows.theta import load_theta

    a, b = str(parse_metric(metric, "--ties")), str(parse_metric(baseline, "--ties"))
    if a == b:
        raise InputError(f"--ties {baseline}: the baseline of the tie decomposition must differ from {metric} (e.g. "
                         "--ties nDCG@5)")
    file = read_contexts(path)
    values = metric_values(file, f"{a},{b}", gamma, load_theta(theta) if theta else None)
    return tie_decomposition(values[a], values[b], file.outcome_scores(), np.asarray([r.qid for r in file.records]),
                             metric_name=a, baseline_name=b)
