"""The pre-registered confirmatory analysis of issue #38 (docs/results/README.md, "Pre-registration:
equivalence within ±0.03 on NQ for the 1.5B reader"), exactly as written there.

    python scripts/confirm_equivalence.py docs/results/nq-qwen1.5b-confirm
    python scripts/confirm_equivalence.py docs/results/nq-qwen1.5b-confirm --out docs/results/confirm-equivalence

Until the run holds its target of questions (350) it prints only how far it is: the plan's (f)
forbids computing the confirmatory statistics before then. At the target, on the confirmatory
questions (121-350 of the run's question order):

- the primary D = mean over usable questions of rho_q(UDCG) - rho_q(nDCG), its 95% and 90%
  percentile bootstrap intervals (10,000 resamples of questions, seed 0), the two-sided paired
  sign-flip p and the TOST p at ±0.03 (``udcg.metrics.equivalence.equivalence_test``), both from
  1,000,000 seeded flips with the Monte Carlo standard error, and the row of the decision table;
- which of the paper's six per-LLM NQ margins the 95% interval excludes;
- the secondaries S1-S3 (pairwise accuracy; the tie decomposition's two parts, per question) and S4
  (D over all questions, with its TOST beside it), with Holm over S1-S4, and the share of the
  outcome-differing context pairs that nDCG ties (descriptive, as (e) asks for S2);
- then, labelled post hoc (issue #51, outside the plan): the p floor of the flips, D without the
  questions on which a metric is constant, and S1 split into its tied and untied parts (``post_hoc``).

``--out FOLDER`` writes ``README.md`` (the analysis and the command that makes it) and
``per-question.jsonl.gz`` (each confirmatory question's values behind it); nothing before the target.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import NamedTuple

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))

from results_table import graded_main_contexts, main_contexts, margins_reading  # noqa: E402
from udcg.experiment import paired  # noqa: E402
from udcg.experiment.reporting import finite, question_order, read_per_question, write_jsonl_gz  # noqa: E402
from udcg.io.files import atomic_write_text  # noqa: E402
from udcg.metrics.equivalence import equivalence_test  # noqa: E402
from udcg.metrics.stats import (bootstrap_ci, holm, is_estimated, monte_carlo_se,  # noqa: E402
                                sign_flip_pvalues)
from udcg.metrics.ties import TieDecomposition, tie_decomposition, ties_by_question  # noqa: E402

class Plan(NamedTuple):
    after: int = 120  # questions 1..after were seen before the plan: outside the confirmatory sample
    target: int = 350
    margin: float = 0.03
    flips: int = 1_000_000
    boot: int = 10_000
    alpha: float = 0.05


def decision(p_two: float, p_tost: float, mean: float, alpha: float, margin: float) -> str:
    """The pre-registration's decision table (d)."""
    different, equivalent = p_two < alpha, p_tost < alpha
    if different and equivalent:
        return f"different, but by less than ±{margin}: a real difference smaller than any NQ margin the paper reports"
    if different:
        return ("different: UDCG follows this reader's outcomes better than nDCG" if mean > 0 else
                "different: nDCG follows this reader's outcomes better than UDCG")
    if equivalent:
        return (f"equivalent within ±{margin}: UDCG and nDCG follow this reader's outcomes equally well, to within a "
                "margin smaller than any NQ margin the paper reports (+0.030 to +0.134)")
    return "inconclusive at this size: neither a difference nor equivalence"


def _v(p: float) -> str:
    """A p-value or its standard error: four decimals, or two significant digits below 0.0001
    (1,000,000 flips resolve p down to about 1e-6: a small p never prints as 0.0000)."""
    return f"{p:.4f}" if p >= 1e-4 or p == 0 else f"{p:.1e}"


def _p(p: float, flips: int, n: int, alternative: str = "two-sided") -> str:
    """p with its Monte Carlo standard error (``alternative``: "two-sided", or "greater" for a
    one-sided p such as the TOST's, whose error is that of one tail), or "(exact)"."""
    se = f" ± {_v(monte_carlo_se(p, flips, alternative))} (Monte Carlo SE)" if is_estimated(n) else " (exact)"
    return f"{_v(p)}{se}"


def _differences(rows: list[dict], statistic: str, qids: list[str]) -> np.ndarray:
    x, y = paired.aligned(rows, "UDCG", "nDCG", statistic, qids)
    d = x - y
    return d[np.isfinite(d)]


def _primary(d: np.ndarray, plan: Plan) -> dict:
    p_two = sign_flip_pvalues([d], plan.flips)[0]
    p_tost, p_lower, p_upper = equivalence_test(d, plan.margin, plan.flips)
    lo95, hi95 = bootstrap_ci(d, plan.boot, 0.95, 0)
    lo90, hi90 = bootstrap_ci(d, plan.boot, 0.90, 0)
    spread = paired.difference_spread(d, np.zeros_like(d))
    return {"n": len(d), "mean": float(d.mean()), "ci95": (lo95, hi95), "ci90": (lo90, hi90), "p": p_two,
            "p_tost": p_tost, "p_lower": p_lower, "p_upper": p_upper, "min_detectable": spread.min_detectable}


class Data(NamedTuple):
    """What the analysis reads from the run, once: the question order, the per-question rows of
    table3-all, the tie decomposition's parts of each confirmatory question and over all of them."""
    order: list[str]
    rows: list[dict]
    ties: dict
    pooled: TieDecomposition
    no_relevant: frozenset = frozenset()  # questions whose pool holds no relevant passage (post hoc, issue #51)
    constant: frozenset = frozenset()  # questions on whose contexts UDCG or nDCG is constant (post hoc, issue #51)
    shares: dict | None = None  # per question: the three accuracies of ``ties`` and its tied and all pairs


def _without_relevant_passage(folder: Path) -> frozenset:
    """The questions whose contexts all say their pool holds no relevant passage (``n_relevant`` 0)."""
    seen: dict[str, bool] = {}
    for r in graded_main_contexts(folder):
        seen[r["qid"]] = seen.get(r["qid"], True) and r.get("n_relevant") == 0
    return frozenset(q for q, none in seen.items() if none)


def load(folder: Path, plan: Plan = Plan()) -> Data:
    order = question_order(folder)
    contexts = main_contexts(folder, set(order[plan.after:plan.target]))
    return Data(order, read_per_question(folder, "table3-all"), ties_by_question(*contexts),
                tie_decomposition(*contexts, metric_name="UDCG", baseline_name="nDCG"),
                _without_relevant_passage(folder), _constant(*contexts), _shares(*contexts))


def _constant(udcg: np.ndarray, ndcg: np.ndarray, outcome: np.ndarray, qids: np.ndarray) -> frozenset:
    """The questions on whose contexts UDCG or nDCG takes one value: those issue #28's first usable
    rule dropped (amended after its first 50 questions to rho 0)."""
    return frozenset(str(q) for q in set(qids.tolist()) if any(np.ptp(v[qids == q]) == 0 for v in (udcg, ndcg)))


def _shares(udcg: np.ndarray, ndcg: np.ndarray, outcome: np.ndarray, qids: np.ndarray) -> dict:
    """Per question with an outcome-differing pair: (UDCG's accuracy on the pairs nDCG ties, on the
    others, nDCG's there, the tied pairs, all pairs), from ``tie_decomposition`` of that question."""
    out = {}
    for q in sorted(set(qids.tolist())):
        m = qids == q
        t = tie_decomposition(udcg[m], ndcg[m], outcome[m], qids[m])
        if t.n_pairs:
            out[str(q)] = (t.tied_metric, t.untied_metric, t.untied_baseline, t.n_tied, t.n_pairs)
    return out


def post_hoc(data: Data, confirm: list[str], main: dict, ps: list[float], plan: Plan) -> list[str]:
    """Issue #51, written after the verdict and outside the plan: where S1-S3's p sits against the
    flips' floor; D without the usable questions on which UDCG or nDCG is constant (issue #28's first
    usable rule dropped them; how many have no relevant passage in the pool, where nDCG is 0 on every
    context); and S1 split per question into what comes from nDCG's ties and from the other pairs."""
    floor = 2 / (plan.flips + 1)
    at_floor = [name for name, p in zip(("S1", "S2", "S3"), ps) if p <= floor * (1 + 1e-9)]
    kept = [q for q in confirm if q not in data.constant]
    d = _differences(data.rows, "rho", kept)
    dropped = [q for q in confirm if q in data.constant and np.isfinite(_differences(data.rows, "rho", [q])).any()]
    rest = _primary(d, plan)
    lo, hi = rest["ci95"]
    x, _ = paired.aligned(data.rows, "UDCG", "nDCG", "rho", dropped)
    without = sum(q in data.no_relevant for q in dropped)
    lines = ["", "Post hoc (issue #51, written after the verdict; not part of the plan, which it leaves unchanged):", ""]
    if at_floor:
        lines.append(f"- {' and '.join(at_floor)}: p = {_v(floor)} is the floor of the two-sided test at {plan.flips:,} "
                     f"flips, 2 / ({plan.flips:,} + 1): no flip reached the observed mean.")
    if dropped:
        lines.append(f"- D without the {len(dropped)} usable questions on whose contexts a metric is constant (issue #28's "
                     f"first usable rule, amended after its first 50 questions, dropped them; {without} of them have no "
                     f"relevant passage in the pool, so nDCG is 0 on every context and ρ_nDCG 0 by the amended rule; "
                     f"their mean ρ_UDCG {float(np.nanmean(x)):+.3f}): D = {rest['mean']:+.4f}, 95% interval "
                     f"[{lo:+.4f}, {hi:+.4f}], two-sided p {_v(rest['p'])}, TOST p {_v(rest['p_tost'])} ({rest['n']} "
                     "questions): the decision table would read \""
                     f"{decision(rest['p'], rest['p_tost'], rest['mean'], plan.alpha, plan.margin).split(':')[0]}\". "
                     "The pre-registered verdict, on every usable question, stands.")
    wanted = set(confirm)
    parts = [(n_t / n * (t - 0.5) if n_t else 0.0, (n - n_t) / n * (u - v) if n_t < n else 0.0)
             for q, (t, u, v, n_t, n) in (data.shares or {}).items() if q in wanted]
    if parts:
        tie_part, other = (float(np.mean([p[k] for p in parts])) for k in (0, 1))
        lines.append(f"- S1 split per question into its parts (the tied share x (UDCG's accuracy on the tied pairs - 0.5), "
                     f"and the untied share x (UDCG's - nDCG's accuracy there)), over the {len(parts)} questions with "
                     f"outcome-differing pairs: {tie_part:+.4f} from nDCG's ties and {other:+.4f} from the other pairs "
                     f"(sum {tie_part + other:+.4f}; {tie_part / (tie_part + other):.0%} of it from the ties).")
    return lines


def analysis(folder: Path, plan: Plan = Plan(), data: Data | None = None) -> list[str]:
    """The confirmatory analysis as Markdown lines (module docstring)."""
    order = question_order(folder) if data is None else data.order
    if len(order) < plan.target:
        return [f"{folder.name}: incomplete: {len(order)} of {plan.target} questions. The confirmatory statistics are "
                f"computed only once question {plan.target} has run (pre-registration (f))."]
    data = data or load(folder, plan)
    confirm = order[plan.after:plan.target]
    rows = data.rows
    main = _primary(_differences(rows, "rho", confirm), plan)
    every = _primary(_differences(rows, "rho", order[:plan.target]), plan)
    acc = _differences(rows, "pair_acc", confirm)
    by_q = data.ties
    tied = np.array([t for t, _, _ in by_q.values() if np.isfinite(t)]) - 0.5
    untied = np.array([u - v for _, u, v in by_q.values() if np.isfinite(u) and np.isfinite(v)])
    secondary = [("S1 pairwise accuracy, UDCG − nDCG", acc), ("S2 UDCG on the pairs nDCG ties, − 0.5", tied),
                 ("S3 on the other pairs, UDCG − nDCG", untied)]
    ps = [sign_flip_pvalues([v], plan.flips)[0] for _, v in secondary] + [every["p"]]
    p_holm = holm(ps)
    lo, hi = main["ci95"]
    d = paired.PairedDifference(main["n"], main["mean"], float("nan"), main["min_detectable"], lo, hi, main["p"])
    lines = [f"Confirmatory sample: questions {plan.after + 1}-{plan.target} of {folder.name} ({len(confirm)} questions, "
             f"{main['n']} usable).", "",
             f"- D = {main['mean']:+.4f}, 95% interval [{lo:+.4f}, {hi:+.4f}], 90% interval "
             f"[{main['ci90'][0]:+.4f}, {main['ci90'][1]:+.4f}]",
             f"- two-sided p = {_p(main['p'], plan.flips, main['n'])}",
             f"- TOST at ±{plan.margin}: p = {_p(main['p_tost'], plan.flips, main['n'], 'greater')} (H0 D ≤ −{plan.margin}: "
             f"{_v(main['p_lower'])}; H0 D ≥ +{plan.margin}: {_v(main['p_upper'])})",
             f"- smallest difference detectable with 80% power: {main['min_detectable']:.3f}",
             f"- the paper's NQ margins: {margins_reading(d, 'nq')}",
             f"- **verdict: {decision(main['p'], main['p_tost'], main['mean'], plan.alpha, plan.margin)}**", "",
             "| secondary | questions | mean | p | p_Holm (S1-S4) |", "|---|---|---|---|---|"]
    for (name, v), p, ph in zip(secondary, ps, p_holm):
        lines.append(f"| {name} | {len(v)} | {float(np.mean(v)) if len(v) else float('nan'):+.4f} | {_v(p)} | {_v(ph)} |")
    lines.append(f"| S4 D over questions 1-{plan.target} (not confirmatory) | {every['n']} | {every['mean']:+.4f} | "
                 f"{_v(every['p'])} | {_v(p_holm[-1])} |")
    t = data.pooled
    lines += ["", f"S4's TOST at ±{plan.margin} (descriptive): p = {_v(every['p_tost'])}; 95% interval "
                  f"[{every['ci95'][0]:+.4f}, {every['ci95'][1]:+.4f}].", "",
              f"S2's share (descriptive): of the confirmatory questions' {t.n_pairs} outcome-differing context pairs "
              f"({t.n_questions} questions), nDCG scores {t.n_tied} equal ({t.share_tied:.1%}); pooled over them, UDCG "
              f"orders {t.tied_metric:.3f} of those right (a tie: 0.5), and of the others UDCG {t.untied_metric:.3f}, "
              f"nDCG {t.untied_baseline:.3f}."]
    return lines + post_hoc(data, confirm, main, ps[:3], plan)


def per_question(folder: Path, plan: Plan = Plan(), data: Data | None = None) -> list[dict]:
    """Each confirmatory question's values behind the analysis, in the run's question order: ρ and
    pairwise accuracy of UDCG and nDCG (table3-all) and the tie decomposition's parts."""
    data = data or load(folder, plan)
    confirm = data.order[plan.after:plan.target]
    rho, acc = (paired.aligned(data.rows, "UDCG", "nDCG", s, confirm) for s in ("rho", "pair_acc"))
    ties = data.ties
    parts = ("UDCG_on_nDCG_ties", "UDCG_elsewhere", "nDCG_elsewhere")
    return [finite({"qid": q, "rho_UDCG": rho[0][i], "rho_nDCG": rho[1][i], "pair_acc_UDCG": acc[0][i],
                    "pair_acc_nDCG": acc[1][i], **dict(zip(parts, ties.get(q, (float("nan"),) * 3)))})
            for i, q in enumerate(confirm)]


def write(folder: Path, out: Path, command: str, plan: Plan = Plan()) -> list[str]:
    """The analysis written to ``out`` (module docstring); its lines."""
    if len(question_order(folder)) < plan.target:
        return analysis(folder, plan)
    data = load(folder, plan)
    lines = analysis(folder, plan, data)
    out.mkdir(parents=True, exist_ok=True)
    head = ["# The pre-registered equivalence test on NQ for the 1.5B reader (issue #38)", "",
            "The analysis of the pre-registration in [README.md](../README.md#pre-registration-equivalence-within-003-"
            "on-nq-for-the-15b-reader-issue-38), made by", "", f"    {command}", "",
            "from the published run's per-question data; `per-question.jsonl.gz` holds each confirmatory "
            "question's values behind it.", ""]
    atomic_write_text(out / "README.md", "\n".join(head + lines) + "\n")
    write_jsonl_gz(out / "per-question.jsonl.gz", per_question(folder, plan, data))
    return lines


def main(argv: list[str] | None = None, plan: Plan = Plan()) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("run", type=Path, help="the published run folder (docs/results/nq-qwen1.5b-confirm)")
    parser.add_argument("--out", type=Path, help="write README.md and per-question.jsonl.gz here (at the target only)")
    args = parser.parse_args(argv)
    if args.out is None:
        print("\n".join(analysis(args.run, plan)))
        return 0
    if args.out.resolve().is_relative_to(args.run.resolve()):
        parser.error(f"--out {args.out}: inside the run folder {args.run}, whose files `udcg report` rebuilds "
                     "(give a folder beside it, e.g. docs/results/confirm-equivalence)")
    command = f"python scripts/confirm_equivalence.py {args.run.as_posix()} --out {args.out.as_posix()}"
    print("\n".join(write(args.run, args.out, command, plan)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
