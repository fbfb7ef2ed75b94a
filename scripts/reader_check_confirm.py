"""The pre-registered analysis of issue #51 (docs/results/README.md, "Pre-registration: does the
reader check predict where UDCG helps? (issue #51)"), exactly as written there.

    python scripts/reader_check_confirm.py docs/results/nq-qwen1.5b-readercheck docs/results/nq-qwen0.5b-readercheck
    python scripts/reader_check_confirm.py A B --out docs/results/reader-check-confirm

A is the arm whose reader passed the reader check on the published NQ data (1.5B), B the arm whose
reader failed it (0.5B). Until both runs hold the target of questions (200) it prints only how far
they are: the plan's (f) forbids computing its statistics before then. At the target, on the first
200 questions of both runs (which must be the same questions, in the same order):

- the reader check of each arm's single-passage annotations of those questions (AUC with its 95%
  interval, answered share, verdict: ``reader_check_ties.annotations_check``);
- the primary Delta = mean S2 of A over its usable questions - the same of B
  (``reader_check_ties.s2_contrast``): its 95% bootstrap interval (10,000 resamples, seed 0), the
  two-sided swap-test p (1,000,000 swaps, seed 0) with its Monte Carlo standard error, the smallest
  Delta detectable at 80% power ((1.96 + 0.84) x the bootstrap standard error), and the row of the
  decision table;
- the secondaries T1-T4 with Holm over them, and each arm's pooled tie decomposition and S1.

``--out FOLDER`` writes ``README.md`` (the analysis and the command) and ``per-question.jsonl.gz``
(each question's S2 and S3 under both readers); nothing before the target.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import NamedTuple

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))

from reader_check_ties import Settings, annotations_check, s2_contrast, swap_test, tie_parts  # noqa: E402
from udcg.experiment import paired  # noqa: E402
from udcg.experiment.reporting import finite, question_order, read_per_question, write_jsonl_gz  # noqa: E402
from udcg.io.files import atomic_write_text  # noqa: E402
from udcg.metrics.stats import holm, monte_carlo_se, sign_flip_pvalues  # noqa: E402

PLAN_ANCHOR = "pre-registration-does-the-reader-check-predict-where-udcg-helps-issue-51"


class Plan(NamedTuple):
    target: int = 200
    flips: int = 1_000_000
    boot: int = 10_000
    check_boot: int = 1_000
    alpha: float = 0.05
    power_z: float = 1.959964 + 0.841621  # two-sided 5% and 80% power, normal approximation


def decision(a_passes: bool, b_fails: bool, p: float, delta: float, alpha: float) -> str:
    """The pre-registration's decision table (d)."""
    if not (a_passes and b_fails):
        return ("not a test of the check: on these questions the check does not split the readers as published; "
                "Delta is a contrast of two readers only")
    if p >= alpha:
        return "not shown at this size: no difference detected"
    if delta > 0:
        return "supported: the reader that passes orders nDCG's tied pairs better than the one that fails"
    return "contradicted: the reader that fails orders nDCG's tied pairs better"


def _v(p: float) -> str:
    return f"{p:.4f}" if p >= 1e-4 or p == 0 else f"{p:.1e}"


def _mean(values: dict) -> float:
    return float(np.mean(list(values.values()))) if values else float("nan")


def _nanmean(v: np.ndarray) -> float:
    return float(np.mean(v[np.isfinite(v)])) if np.isfinite(v).any() else float("nan")


def _sorted(values: dict) -> np.ndarray:
    return np.array([values[q] for q in sorted(values)], dtype=float)


def _size(folder: Path) -> int:
    """The questions a run holds; 0 before its first chunk is published."""
    return len(question_order(folder)) if (folder / "data" / "pools.jsonl.gz").is_file() else 0


def incomplete(a: Path, b: Path, plan: Plan) -> list[str] | None:
    sizes = [_size(f) for f in (a, b)]
    if min(sizes) >= plan.target:
        return None
    return [f"{a.name}: {sizes[0]}, {b.name}: {sizes[1]} of {plan.target} questions: incomplete. The pre-registered "
            f"statistics are computed only once both runs hold {plan.target} questions (pre-registration (f))."]


def questions(a: Path, b: Path, plan: Plan) -> list[str]:
    qa, qb = (question_order(f)[:plan.target] for f in (a, b))
    if qa != qb:
        raise SystemExit(f"{a} and {b}: their first {plan.target} questions differ: the plan pairs the same questions")
    return qa


def analysis(a: Path, b: Path, plan: Plan = Plan()) -> tuple[list[str], list[dict]]:
    """The analysis as Markdown lines and the per-question rows (module docstring)."""
    waiting = incomplete(a, b, plan)
    if waiting:
        return waiting, []
    qids = questions(a, b, plan)
    wanted = set(qids)
    settings = Settings(flips=plan.flips, boot=plan.boot, check_boot=plan.check_boot)
    checks = [annotations_check(f, settings, wanted) for f in (a, b)]
    (s2a, s3a, pooled_a), (s2b, s3b, pooled_b) = (tie_parts(f, wanted) for f in (a, b))
    c = s2_contrast(s2a, s2b, qids, settings)
    mdd = plan.power_z * c.se
    verdict = decision(checks[0].can_measure_distraction, not checks[1].can_measure_distraction, c.p, c.delta, plan.alpha)
    both = sorted(set(s2a) & set(s2b))
    order = sorted(qids)
    t4_a = np.array([s3a.get(q, np.nan) for q in order])
    t4_b = np.array([s3b.get(q, np.nan) for q in order])
    secondary = [("T1 arm A's S2 (UDCG on nDCG's ties − 0.5)", _sorted(s2a)),
                 ("T2 arm B's S2", _sorted(s2b)),
                 ("T3 Delta on the questions usable in both arms, paired", np.array([s2a[q] - s2b[q] for q in both]))]
    ps = [sign_flip_pvalues([v], plan.flips)[0] if len(v) else float("nan") for _, v in secondary]
    ps.append(swap_test(t4_a, t4_b, plan.flips, 0))
    p_holm = holm(ps)
    lines = [f"Questions: the first {plan.target} of {a.name} and {b.name} (the same questions, identical contexts).",
             "", "| arm | run | reader check: AUC [95%] | answers from irrelevant | verdict | usable questions | S2 |",
             "|---|---|---|---|---|---|---|"]
    for arm, folder, check, s2 in (("A", a, checks[0], s2a), ("B", b, checks[1], s2b)):
        lines.append(f"| {arm} | {folder.name} | {check.auc:.3f} [{check.auc_low:.3f}, {check.auc_high:.3f}] | "
                     f"{check.answered_irrelevant:.0%} | {check.verdict} | {len(s2)} | {_mean(s2):+.4f} |")
    lines += ["", f"- Delta = S2(A) − S2(B) = {c.delta:+.4f}, 95% interval [{c.ci[0]:+.4f}, {c.ci[1]:+.4f}] "
                  f"({c.n_a} and {c.n_b} usable questions, {c.n_both} in both)",
              f"- two-sided p = {_v(c.p)} ± {_v(monte_carlo_se(c.p, plan.flips))} (Monte Carlo SE; the readers swapped "
              f"within questions, {plan.flips:,} swaps)",
              f"- smallest Delta detectable with 80% power: {mdd:.3f}",
              f"- **verdict: {verdict}**", "",
              "| secondary | questions | mean | p | p_Holm (T1-T4) |", "|---|---|---|---|---|"]
    for (name, v), p, ph in zip(secondary, ps, p_holm):
        lines.append(f"| {name} | {len(v)} | {float(np.mean(v)) if len(v) else float('nan'):+.4f} | {_v(p)} | {_v(ph)} |")
    lines.append(f"| T4 S3 (UDCG − nDCG on the untied pairs), arm A − arm B | {int(np.isfinite(t4_a).sum())} / "
                 f"{int(np.isfinite(t4_b).sum())} | {_nanmean(t4_a) - _nanmean(t4_b):+.4f} | {_v(ps[3])} | "
                 f"{_v(p_holm[3])} |")
    rows = read_per_question(a, "table3-all"), read_per_question(b, "table3-all")
    lines += ["", "Descriptive (pooled over each arm's outcome-differing context pairs; S1: pairwise accuracy UDCG − nDCG, "
                  "per-question mean):", ""]
    for arm, t, r in (("A", pooled_a, rows[0]), ("B", pooled_b, rows[1])):
        x, y = paired.aligned(r, "UDCG", "nDCG", "pair_acc", qids)
        s1 = x - y
        lines.append(f"- arm {arm}: {t.n_pairs} pairs over {t.n_questions} questions, nDCG ties {t.n_tied} "
                     f"({t.share_tied:.1%}); UDCG orders {t.tied_metric:.3f} of those right, and of the others UDCG "
                     f"{t.untied_metric:.3f}, nDCG {t.untied_baseline:.3f}; S1 {float(np.nanmean(s1)):+.4f}.")
    per_question = [finite({"qid": q, "S2_A": s2a.get(q, float("nan")), "S2_B": s2b.get(q, float("nan")),
                            "S3_A": s3a.get(q, float("nan")), "S3_B": s3b.get(q, float("nan"))}) for q in qids]
    return lines, per_question


def main(argv: list[str] | None = None, plan: Plan = Plan()) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("a", type=Path, help="arm A's run folder (the reader that passed the check)")
    parser.add_argument("b", type=Path, help="arm B's run folder (the reader that failed it)")
    parser.add_argument("--out", type=Path, help="write README.md and per-question.jsonl.gz here (at the target only)")
    args = parser.parse_args(argv)
    for run in (args.a, args.b):
        if args.out is not None and args.out.resolve().is_relative_to(run.resolve()):
            parser.error(f"--out {args.out}: inside the run folder {run}, whose files `udcg report` rebuilds")
    lines, per_question = analysis(args.a, args.b, plan)
    if args.out is not None and per_question:
        command = (f"python scripts/reader_check_confirm.py {args.a.as_posix()} {args.b.as_posix()} "
                   f"--out {args.out.as_posix()}")
        head = ["# Does the reader check predict where UDCG helps? The pre-registered test (issue #51)", "",
                f"The analysis of the pre-registration in [README.md](../README.md#{PLAN_ANCHOR}), made by", "",
                f"    {command}", "", "from the two runs' per-context data; `per-question.jsonl.gz` holds each "
                "question's S2 and S3 under both readers.", ""]
        args.out.mkdir(parents=True, exist_ok=True)
        atomic_write_text(args.out / "README.md", "\n".join(head + lines) + "\n")
        write_jsonl_gz(args.out / "per-question.jsonl.gz", per_question)
    print("\n".join(lines))
    return 0


if __name__ == "__main__":
    sys.exit(main())
