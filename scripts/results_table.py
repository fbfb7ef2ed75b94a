"""The README's headline table from published ``udcg validate`` reports: per data set, Table 3 over
all questions (no UDCG_theta) and over the test questions, one column each.

    python scripts/results_table.py docs/results/popqa-qwen0.5b:PopQA docs/results/nq-qwen0.5b:NQ

Each cell: mean per-question Spearman rho with its 95% bootstrap interval, the mean Kendall tau-b and
the pairwise ordering accuracy (ties count half), and the paired permutation p against UDCG after
Holm's correction over the table's comparisons. Bold: the table's best by mean rho (its ``best``
column: a circular metric is never best); "circular" marks eRAG where it scores its own outcome.

``--summary`` prints the README's one-row-per-run table instead: questions, the main study's shares
of correct and abstained contexts (from ``data/contexts.jsonl.gz``), UDCG's rho / tau-b / pairwise
accuracy over all questions, the best classical metric by rho with the same three, that metric's
Holm-corrected p against UDCG on each statistic, and the smallest gap in mean per-question rho
between UDCG and nDCG that the paired test detects with 80% power (two-sided alpha 0.05).

    python scripts/results_table.py --summary "docs/results/nq-qwen0.5b:NQ, 0.5B reader"

``--primary`` prints the pre-registered primary statistic of each run (docs/results/README.md,
issue #28): D = mean over usable questions of rho_q(UDCG) - rho_q(nDCG), its 95% percentile
bootstrap interval (10,000 resamples of questions, seed 0), the two-sided paired sign-flip p, the
usable questions and the paper's margin on that data set (``PREREGISTERED``, or ``--margin``);
the same on the questions after the first ``--new-after`` (default 50, 0: none), and both with
pairwise accuracy in place of rho; p_Holm over the primaries of the runs given; then each run's
reading by the pre-registered decision rule.

    python scripts/results_table.py --primary docs/results/nq-qwen1.5b:NQ docs/results/popqa-qwen1.5b:PopQA

``--family`` prints the secondary statistics (rho, tau-b, pairwise accuracy) of UDCG against each
metric of ``FAMILY`` in every run given, their raw p (from the run's tables) and Holm's correction
over the whole family (statistics x metrics x runs), leaving out the primary comparison (nDCG on
rho) of the runs named by ``--primary-runs`` (default: the pre-registered ones).

    python scripts/results_table.py --family docs/results/nq-qwen0.5b:NQ-0.5B docs/results/nq-qwen1.5b:NQ-1.5B ...

``--across METRIC`` compares one metric between two runs of the same questions (passages in pool
order against shuffled; two readers on the same contexts), paired on the questions usable in both:
each run's mean there, the difference, its 95% interval and the two-sided sign-flip p.

    python scripts/results_table.py --across UDCG docs/results/nq-qwen0.5b:pool docs/results/nq-qwen0.5b-shuffled:shuffled
"""

from __future__ import annotations

import argparse
import functools
import gzip
import json
import math
from pathlib import Path
from typing import NamedTuple

import numpy as np

from udcg.experiment import paired
from udcg.experiment.config import read_run_config
from udcg.experiment.reporting import question_order, read_per_question
from udcg.metrics.stats import holm, paired_permutation_test

ROWS = (("UDCG", "**UDCG**"), ("UDCG_theta", "UDCG_θ (trained on the other questions)"), ("nDCG", "nDCG"),
        ("RR", "RR (MRR)"), ("AP", "AP (MAP)"), ("P", "P (precision)"), ("Success", "Success (a relevant passage)"),
        ("RA-nWG", "RA-nWG@5"), ("eRAG", "eRAG"), ("ANSWER_PROB", "ANSWER_PROB"))


CLASSICAL = {"nDCG": "nDCG", "RR": "MRR", "AP": "MAP", "P": "P", "Success": "Success"}


class Preregistered(NamedTuple):
    run: str  # the run folder whose primary decides the data set
    margin: float  # the paper's gap in mean per-question rho, UDCG - nDCG (Llama-3B, Table 3)
    target: int  # questions to run before a verdict


# by data set (config data.questions); docs/results/README.md, "Pre-registration", (a) and (b)
PREREGISTERED = {"nq": Preregistered("nq-qwen1.5b", 0.536 - 0.458, 120),
                 "popqa": Preregistered("popqa-qwen1.5b", 0.525 - 0.438, 90)}
# The paper's Table 3 (seed 003): UDCG - nDCG in mean per-question rho for each of its six LLMs, by data set.
PAPER_MARGINS = {
    "nq": {"Llama-3B": 0.536 - 0.458, "Llama-8B": 0.611 - 0.515, "Llama-70B": 0.665 - 0.560,
           "Gemma-4B": 0.587 - 0.557, "Mistral-7B": 0.629 - 0.548, "Qwen-7B": 0.605 - 0.471},
    "popqa": {"Llama-3B": 0.525 - 0.438, "Llama-8B": 0.599 - 0.499, "Llama-70B": 0.707 - 0.669,
              "Gemma-4B": 0.607 - 0.514, "Mistral-7B": 0.542 - 0.438, "Qwen-7B": 0.397 - 0.236},
}
# (c): UDCG against each classical metric and eRAG over all questions, and UDCG_theta on the test half
FAMILY = (("table3-all.json", ("nDCG", "RR", "AP", "P", "Success", "eRAG")), ("table3.json", ("UDCG_theta",)))
FAMILY_STATISTICS = (("ρ", "mean_rho", "p_vs_baseline"), ("τ_b", "mean_tau_b", "p_tau_b"),
                     ("pairwise acc.", "pair_acc", "p_pair_acc"))


def _pv(p: float | None) -> str:
    """A p-value with three decimals below 0.1, two above; "< 0.001" below that (never "0.000")."""
    if p is None or math.isnan(p):
        return "NA"
    return "< 0.001" if p < 0.001 else f"{p:.3f}" if p < 0.1 else f"{p:.2f}"


def _p(p: float) -> str:
    return "p_Holm < 0.001" if p < 0.001 else f"p_Holm = {_pv(p)}"


def _num(v: object) -> str:
    return "NA" if v is None or math.isnan(v) else f"{v:.3f}"


def _mdd(v: float) -> str:
    """A smallest detectable difference: inf where the sign-flip test cannot reach alpha on so few questions."""
    return "undetectable" if v == math.inf else _num(v)


def _signed(v: float) -> str:
    return "NA" if math.isnan(v) else f"{v:+.3f}"


def power_cell(folder: Path) -> str:
    """The smallest gap in mean per-question rho between UDCG and nDCG (all questions) detected with
    80% power by the paired test, two-sided alpha 0.05."""
    return _mdd(paired.difference_spread(*paired.aligned(read_per_question(folder, "table3-all"), "UDCG", "nDCG"))
                .min_detectable)


def column(table: list[dict]) -> tuple[dict[str, str], int, int]:
    """{metric: cell}, questions with a rho, and all questions (rho counted + no rho)."""
    rows = {r["metric"]: r for r in table}
    cells = {}
    for name, _ in ROWS:
        r = rows.get(name)
        if r is None:
            cells[name] = "—"
            continue
        rho = _num(r["mean_rho"])
        cell = f"**{rho}**" if r.get("best") == "*" else rho
        cell += f" [{_num(r['ci_low'])}, {_num(r['ci_high'])}]"
        if r.get("mean_tau_b") is not None:
            cell += f"; τ_b {_num(r['mean_tau_b'])}"
        if r.get("pair_acc") is not None:
            cell += f"; acc {_num(r['pair_acc'])}"
        if r.get("circular") == "yes":
            cell += " (circular)"
        p = r.get("p_holm")
        if p is not None and name != "UDCG":
            cell += f"; {_p(p)}"
        cells[name] = cell
    n_rho = rows["UDCG"]["n_questions"]
    return cells, n_rho, n_rho + rows["UDCG"]["no_rho_outcome"]


def summary_row(folder: Path, label: str) -> str:
    """One README row: a run's outcome shares, UDCG and the best classical metric on all three statistics."""
    rows = {r["metric"]: r for r in json.loads((folder / "tables" / "table3-all.json").read_text())}
    with gzip.open(folder / "data" / "contexts.jsonl.gz", "rt") as fh:
        outcomes = [c["outcome"] for c in map(json.loads, fh) if c["study"] == "main"]
    share = {o: round(100 * outcomes.count(o) / len(outcomes)) for o in ("correct", "abstained")}
    udcg = rows["UDCG"]
    best = max((m for m in CLASSICAL if rows.get(m, {}).get("mean_rho") is not None),
               key=lambda m: rows[m]["mean_rho"])
    b = rows[best]
    stats = lambda r: " / ".join(_num(r[k]) for k in ("mean_rho", "mean_tau_b", "pair_acc"))  # noqa: E731
    ps = " / ".join(_pv(b[k]) for k in ("p_holm", "p_tau_b_holm", "p_pair_acc_holm"))
    n = udcg["n_questions"] + udcg["no_rho_outcome"]
    return (f"| [{label}]({folder.as_posix()}/report.md) | {n} | {share['correct']}% / {share['abstained']}% | "
            f"{stats(udcg)} | {CLASSICAL[best]} {stats(b)} | {ps} | {power_cell(folder)} |")


def _dataset(folder: Path) -> str:
    """The run's data set name (config.yaml's data.questions: nq, popqa)."""
    return Path(read_run_config(folder / "config.yaml").data.questions).name


def preregistered(folder: Path) -> Preregistered | None:
    """The pre-registration of the run's data set (config.yaml's data.questions), if any."""
    return PREREGISTERED.get(_dataset(folder))


def primary(folder: Path, statistic: str = "rho", after: int = 0) -> tuple[int, paired.PairedDifference]:
    """(questions, UDCG - nDCG on ``statistic`` over the usable ones) over all the run's questions,
    or over those after the first ``after`` in the run's question order. The questions keep the
    per-question file's order, the correlation tables' (resampling is by position): over all
    questions the rho p is the report's p of nDCG against UDCG."""
    rows = read_per_question(folder, "table3-all")
    new = set(question_order(folder)[after:])
    qids = [r["qid"] for r in rows if r["metric"] == "UDCG" and r["qid"] in new]
    return len(qids), paired.paired_difference(*paired.aligned(rows, "UDCG", "nDCG", statistic, qids))


def reading(d: paired.PairedDifference, n: int, plan: Preregistered | None, folder: Path) -> str:
    """The pre-registered decision rule's sentence for a run's primary."""
    if plan is None or plan.run != folder.name:
        head = "not a pre-registered primary: "
    elif n < plan.target:
        return f"incomplete: {n} of {plan.target} questions, no verdict (pre-registration (b))"
    else:
        head = ""
    if d.p < 0.05:
        return head + ("UDCG predicts this reader's outcomes better than nDCG" if d.mean > 0 else
                       "nDCG predicts this reader's outcomes better than UDCG")
    return head + f"no difference detected (smallest difference detectable with 80% power: {_mdd(d.min_detectable)})"


def margins_reading(d: paired.PairedDifference, dataset: str) -> str:
    """Which of the paper's per-LLM margins on ``dataset`` the 95% interval of ``d`` excludes and
    which it contains (issue #38 item 1: say exactly which)."""
    margins = sorted(PAPER_MARGINS.get(dataset, {}).items(), key=lambda item: item[1])
    if not margins or math.isnan(d.ci_low):
        return "no paper margins to compare with"
    inside = [f"{llm} {_signed(m)}" for llm, m in margins if d.ci_low <= m <= d.ci_high]
    outside = [f"{llm} {_signed(m)}" for llm, m in margins if not d.ci_low <= m <= d.ci_high]
    return (f"the interval [{_signed(d.ci_low)}, {_signed(d.ci_high)}] excludes "
            f"{', '.join(outside) or 'none'} and contains {', '.join(inside) or 'none'}")


def split_difference(folder: Path, first: int, statistic: str = "rho",
                     n_resamples: int = 100_000) -> tuple[float, float, float, int, int]:
    """UDCG - nDCG on ``statistic`` over the first ``first`` questions of the run's order against the
    questions after them: (mean of the first, mean of the later, two-sided p of the two-sample
    permutation test of equal means, usable first, usable later). The p comes from
    ``scipy.stats.permutation_test`` (independent samples, ``n_resamples`` seeded draws)."""
    from scipy import stats as scipy_stats

    rows = read_per_question(folder, "table3-all")
    order = question_order(folder)
    parts = []
    for qids in (order[:first], order[first:]):
        x, y = paired.aligned(rows, "UDCG", "nDCG", statistic, qids)
        d = x - y
        parts.append(d[np.isfinite(d)])
    test = scipy_stats.permutation_test(parts, lambda a, b, axis: a.mean(axis=axis) - b.mean(axis=axis),
                                        permutation_type="independent", vectorized=True,
                                        n_resamples=n_resamples, random_state=0)
    return float(parts[0].mean()), float(parts[1].mean()), float(test.pvalue), len(parts[0]), len(parts[1])


class Line(NamedTuple):
    label: str
    what: str
    questions: int
    d: paired.PairedDifference
    margin: float  # NaN: none to compare with
    is_primary: bool


def _line(line: Line, p_holm: float | None) -> str:
    d, m = line.d, line.margin
    known = not (math.isnan(m) or math.isnan(d.ci_low))
    inside = ("yes" if d.ci_low <= m <= d.ci_high else "no") if known else "—"
    return (f"| {line.label} | {line.what} | {line.questions} | {d.n} | {_signed(d.mean)} | "
            f"[{_signed(d.ci_low)}, {_signed(d.ci_high)}] | {_pv(d.p)} | {'—' if p_holm is None else _pv(p_holm)} | "
            f"{'—' if math.isnan(m) else _signed(m)} | {inside} | {_mdd(d.min_detectable)} |")


def primary_table(specs: list[tuple[Path, str]], margin: float | None, new_after: int) -> list[str]:
    """The primary and its sensitivity analyses for each run (module docstring), as Markdown lines."""
    lines: list[Line] = []
    readings = []
    for folder, label in specs:
        plan = preregistered(folder)
        paper = margin if margin is not None else plan.margin if plan else math.nan
        for statistic, name in (("rho", "ρ"), ("pair_acc", "pairwise acc.")):
            for after in (0, new_after) if new_after else (0,):
                n, d = primary(folder, statistic, after)
                is_primary = statistic == "rho" and not after
                what = f"{name}, " + (f"questions after the first {after}" if after else "all questions")
                lines.append(Line(label, what + (" (primary)" if is_primary else ""), n, d,
                                  paper if statistic == "rho" else math.nan, is_primary))
                if is_primary:
                    readings.append(f"- {label}: {reading(d, n, plan, folder)}; "
                                    f"{margins_reading(d, _dataset(folder))} (the paper's six LLMs)")
        if new_after:
            first, later, p, n_first, n_later = split_difference(folder, new_after)
            readings.append(f"- {label}: ρ gap on the first {new_after} questions {_signed(first)} ({n_first} usable) "
                            f"against {_signed(later)} on the later ones ({n_later} usable), two-sample "
                            f"permutation p {_pv(p)}")
    p_holm = iter(holm([line.d.p for line in lines if line.is_primary]))
    head = ("| run | statistic | questions | usable | UDCG − nDCG | 95% interval | p | p_Holm (primaries) | "
            "paper's margin | margin in the interval | detectable at 80% |")
    return [head, "|---" * 11 + "|", *(_line(line, float(next(p_holm)) if line.is_primary else None) for line in lines),
            "", *readings]


def _recomputed_p(folder: Path, file: str, metric: str, mean: str, flips: int) -> float:
    """The paired sign-flip p of UDCG against ``metric`` on one statistic, recomputed from the run's
    per-question data with ``flips`` seeded random sign flips (or exactly, where the test enumerates),
    instead of the report's 10,000: a p at a Monte Carlo floor is then no longer the floor."""
    rows = _per_question_once(folder, file.removesuffix(".json"))
    x, y = paired.aligned(rows, "UDCG", metric, _STATISTIC_OF[mean])
    return paired_permutation_test(x, y, n_resamples=flips, seed=0)


_STATISTIC_OF = {"mean_rho": "rho", "mean_tau_b": "tau_b", "pair_acc": "pair_acc"}
_per_question_once = functools.lru_cache(maxsize=None)(read_per_question)  # --family reads each run's file once


def family_table(specs: list[tuple[Path, str]], primary_runs: set[str], flips: int | None = None) -> list[str]:
    """The secondary statistics of every run with Holm over the whole family (module docstring); with
    ``flips``, every p recomputed from the per-question data with that many sign flips."""
    tests = []  # (run, statistic, metric, UDCG's mean, the metric's, raw p or NaN)
    for folder, label in specs:
        for file, metrics in FAMILY:
            rows = {r["metric"]: r for r in json.loads((folder / "tables" / file).read_text())}
            for metric in metrics:
                r = rows.get(metric)
                if r is None or r.get("circular") == "yes":
                    continue
                for name, mean, p in FAMILY_STATISTICS:
                    if folder.name in primary_runs and metric == "nDCG" and mean == "mean_rho":
                        continue  # the primary comparison, tested on its own
                    raw = math.nan if r.get(p) is None else r[p]
                    if flips and not math.isnan(raw):
                        raw = _recomputed_p(folder, file, metric, mean, flips)
                    tests.append((label, name, metric, rows["UDCG"][mean], r[mean], raw))
    p_holm = [float(p) for p in holm([t[5] for t in tests])]
    lines = ["| run | statistic | metric | UDCG | metric's | p | p_Holm (family) |", "|---" * 7 + "|"]
    lines += [f"| {label} | {name} | {metric} | {_num(udcg)} | {_num(other)} | {_pv(p)} | {_pv(ph)} |"
              for (label, name, metric, udcg, other, p), ph in zip(tests, p_holm)]
    excluded = ", ".join(sorted(primary_runs & {folder.name for folder, _ in specs})) or "none"
    size = sum(not math.isnan(p) for p in p_holm)
    source = f"p recomputed with {flips:,} sign flips" if flips else "p from the reports (10,000 sign flips)"
    return [*lines, "", f"Family: {size} tests (statistics × metrics × runs); left out as primaries: "
                        f"nDCG on ρ in {excluded}; {source}."]


def across_table(specs: list[tuple[Path, str]], metric: str) -> list[str]:
    """One metric in two runs of the same questions (e.g. passages in pool order vs shuffled, or two
    readers on one pool), paired on the questions usable in both: run A − run B per statistic."""
    if len(specs) != 2:
        raise SystemExit("--across compares two runs: give exactly two DIR:LABEL")
    (a, label_a), (b, label_b) = specs
    # the metric's rows of both runs as two metrics of one table, so paired.aligned lines them up
    rows = [{**r, "metric": run} for run, folder in (("A", a), ("B", b))
            for r in read_per_question(folder, "table3-all") if r["metric"] == metric]
    lines = [f"| statistic | {label_a}: questions | {label_b}: questions | usable in both | {label_a} | {label_b} | "
             "A − B | 95% interval | p |", "|---" * 9 + "|"]
    for statistic, name in (("rho", "ρ"), ("tau_b", "τ_b"), ("pair_acc", "pairwise acc.")):
        x, y = paired.aligned(rows, "A", "B", statistic)  # on A's questions; NaN where B has none
        n_a, n_b = (sum(r[statistic] is not None for r in rows if r["metric"] == run) for run in "AB")
        both = np.isfinite(x) & np.isfinite(y)
        d = paired.paired_difference(x, y)
        lines.append(f"| {name} | {n_a} | {n_b} | {d.n} | {_num(float(x[both].mean()))} | {_num(float(y[both].mean()))} | "
                     f"{_signed(d.mean)} | [{_signed(d.ci_low)}, {_signed(d.ci_high)}] | {_pv(d.p)} |")
    return [f"{metric}, {label_a} against {label_b}, paired on the questions usable in both "
            "(two-sided sign-flip p, 95% percentile bootstrap interval):", "", *lines]


def graded_main_contexts(folder: Path) -> list[dict]:
    """The graded contexts of the run's main study (``data/contexts.jsonl.gz``), as published."""
    with gzip.open(folder / "data" / "contexts.jsonl.gz", "rt", encoding="utf-8") as fh:
        return [r for r in map(json.loads, fh) if r.get("study") == "main" and r.get("outcome")]


def abstention_auc(folder: Path, n_boot: int = 1_000) -> tuple[int, float, float, float, float]:
    """How well the reader's own single-passage abstention probabilities foretell its abstention on a
    five-passage context of the main study: (contexts, abstention share, ROC AUC of the context's mean
    p_abs for 'abstained' against the other outcomes (sklearn), and its 95% bootstrap interval over
    questions, ``n_boot`` resamples, seed 0)."""
    from sklearn.metrics import roc_auc_score

    rows = graded_main_contexts(folder)
    qids = sorted({r["qid"] for r in rows})
    by_q = {q: [] for q in qids}
    for r in rows:
        by_q[r["qid"]].append((r["outcome"] == "abstained", float(np.mean(r["p_abs"]))))
    pairs = [pair for q in qids for pair in by_q[q]]
    auc = float(roc_auc_score([o for o, _ in pairs], [m for _, m in pairs]))
    rng, aucs = np.random.default_rng(0), []
    for _ in range(n_boot):
        drawn = [pair for i in rng.integers(0, len(qids), len(qids)) for pair in by_q[qids[i]]]
        ys, ss = np.array([o for o, _ in drawn]), np.array([m for _, m in drawn])
        if 0 < ys.sum() < len(ys):
            aucs.append(roc_auc_score(ys, ss))
    low, high = np.percentile(aucs, [2.5, 97.5])
    return len(rows), float(np.mean([o for o, _ in pairs])), auc, float(low), float(high)


OUTCOME_SCORE = {"correct": 1.0, "abstained": 0.0, "wrong": -1.0}


def main_contexts(folder: Path, qids: set[str] | None = None) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """UDCG, nDCG, the outcome's score (correct 1 > abstained 0 > wrong -1) and the question of each
    graded context of the run's main study (of ``qids`` only, when given)."""
    rows = [r for r in graded_main_contexts(folder) if qids is None or r["qid"] in qids]
    return (np.array([r["metrics"]["UDCG"] for r in rows], dtype=float),
            np.array([r["metrics"]["nDCG"] for r in rows], dtype=float),
            np.array([OUTCOME_SCORE[r["outcome"]] for r in rows]), np.array([r["qid"] for r in rows]))


def ties_table(specs: list[tuple[Path, str]]) -> list[str]:
    """Where UDCG's edge over nDCG lies, per run (issue #38 item 2): the tie decomposition of pairwise
    accuracy (``udcg.metrics.ties``) over the main study's context pairs whose outcomes differ."""
    from udcg.metrics.ties import tie_decomposition

    lines = ["| run | questions | outcome-differing pairs | nDCG ties | UDCG on those (nDCG: 0.5) | "
             "UDCG on the others | nDCG on the others |", "|---" * 7 + "|"]
    for folder, label in specs:
        t = tie_decomposition(*main_contexts(folder), metric_name="UDCG", baseline_name="nDCG")
        lines.append(f"| {label} | {t.n_questions} | {t.n_pairs} | {t.n_tied} ({t.share_tied:.0%}) | "
                     f"{t.tied_metric:.3f} | {t.untied_metric:.3f} | {t.untied_baseline:.3f} |")
    return lines


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("reports", nargs="+", help="DIR:LABEL of a published report folder")
    mode = ap.add_mutually_exclusive_group()
    mode.add_argument("--summary", action="store_true", help="one row per run (the README's results table)")
    mode.add_argument("--primary", action="store_true", help="the pre-registered primary of each run")
    mode.add_argument("--family", action="store_true", help="the secondary statistics, Holm over all runs given")
    mode.add_argument("--abstention-auc", action="store_true",
                      help="per run: how well the context's mean single-passage p_abs foretells abstention (ROC AUC)")
    mode.add_argument("--ties", action="store_true",
                      help="per run: the tie decomposition of UDCG's pairwise accuracy against nDCG's")
    mode.add_argument("--across", metavar="METRIC", help="one metric in two runs, paired on their common usable questions")
    ap.add_argument("--margin", type=float, help="--primary: the paper's margin (default: by data set, PREREGISTERED)")
    ap.add_argument("--new-after", type=int, default=50, help="--primary: also on the questions after the first N")
    ap.add_argument("--flips", type=int, help="--family: recompute every p from the per-question data with this "
                                              "many sign flips (e.g. 1000000), so no p sits at a Monte Carlo floor")
    ap.add_argument("--primary-runs", nargs="*", default=[p.run for p in PREREGISTERED.values()],
                    help="--family: run folder names whose nDCG-on-rho comparison is a primary, outside the family")
    args = ap.parse_args()
    specs = [(Path(folder), label) for folder, label in (spec.rsplit(":", 1) for spec in args.reports)]
    if args.summary:
        print("| run | questions | contexts correct / abstained | UDCG: ρ / τ_b / pairwise acc. | "
              "best classical by ρ (nDCG, MRR, MAP, P, Success) | its p_Holm: ρ / τ_b / acc. | "
              "ρ gap UDCG − nDCG detectable at 80% |")
        print("|---" * 7 + "|")
        for folder, label in specs:
            print(summary_row(folder, label))
        return
    if args.across:
        print("\n".join(across_table(specs, args.across)))
        return
    if args.ties:
        print("\n".join(ties_table(specs)))
        return
    if args.abstention_auc:
        print("| run | contexts | abstained | ROC AUC of the mean p_abs | 95% interval (questions resampled) |")
        print("|---" * 5 + "|")
        for folder, label in specs:
            n, share, auc, low, high = abstention_auc(folder)
            print(f"| {label} | {n} | {share:.0%} | {auc:.3f} | [{low:.3f}, {high:.3f}] |")
        return
    if args.primary or args.family:
        print("\n".join(primary_table(specs, args.margin, args.new_after) if args.primary
                        else family_table(specs, set(args.primary_runs), args.flips)))
        return
    heads, cols = [], []
    for spec in args.reports:
        folder, label = spec.rsplit(":", 1)
        tables = Path(folder) / "tables"
        for file, kind in (("table3-all.json", "all"), ("table3.json", "test")):
            cells, n_rho, n = column(json.loads((tables / file).read_text()))
            heads.append(f"{label}, {n} questions (all; ρ defined for {n_rho}; no θ)" if kind == "all"
                         else f"{label}, {n} test questions (ρ defined for {n_rho})")
            cols.append(cells)
    print("| metric | " + " | ".join(heads) + " |")
    print("|---" * (len(heads) + 1) + "|")
    for name, label in ROWS:
        print(f"| {label} | " + " | ".join(c[name] for c in cols) + " |")


if __name__ == "__main__":
    main()
