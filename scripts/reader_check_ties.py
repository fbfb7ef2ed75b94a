"""Post hoc (issue #51): does the reader check foretell where UDCG beats nDCG? For every published
validate run, the reader check of its single-passage annotations beside the tie decomposition of
UDCG's pairwise accuracy against nDCG's, and the two readers on identical contexts contrasted.

    python scripts/reader_check_ties.py --out docs/results/reader-check-ties

Per run (the main study's graded contexts, ``data/contexts.jsonl.gz``; the annotations,
``data/annotations.jsonl.gz``):

- the reader check (``udcg.metrics.reader_check.check_reader_pairs``, every pair judged, 1,000 bootstrap
  resamples of questions, seed 0): the AUC of p_abs separating irrelevant from relevant pairs with its
  95% interval, the share of irrelevant pairs the reader answers from (p_abs < 0.5) and the verdict;
- S2 as issue #38 defined it (``udcg.metrics.ties.ties_by_question``): per question with context
  pairs whose outcomes differ and whose nDCG is equal, UDCG's pairwise accuracy on those pairs - 0.5;
  its mean over those questions, 95% percentile bootstrap interval (10,000 resamples, seed 0), sd, and
  the two-sided sign-flip p (``udcg.metrics.stats.sign_flip_pvalues``, 100,000 flips, seed 0);
- S3: on the outcome-differing pairs nDCG orders, UDCG's accuracy - nDCG's, per-question mean;
- pooled over the run's pairs (``tie_decomposition``): the share nDCG ties, UDCG's accuracy there,
  and both metrics' on the others.

Paired (``CONTRASTS``: the 1.5B reader and the 0.5B reader on identical contexts, the 0.5B run's
questions): Delta = mean S2 of reader A over its questions with tied pairs - the same of reader B,
``s2_contrast``: 95% bootstrap interval over the questions (each resample's two means over the same
drawn questions, ``udcg.metrics.stats.bootstrap_means``) and the two-sided p of the permutation
test that swaps the two readers' values within each question (``swap_test``), 100,000 swaps, seed 0.

Nothing here was planned before the data were seen: every figure is descriptive. ``--out`` writes
``README.md`` (the table and this command) and ``per-question.jsonl.gz`` (each run's per-question
S2 and S3 values).
"""

from __future__ import annotations

import argparse
import gzip
import json
import sys
from pathlib import Path
from typing import NamedTuple

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))

from results_table import main_contexts  # noqa: E402
from udcg.experiment.reporting import finite, question_order, write_jsonl_gz  # noqa: E402
from udcg.io.files import atomic_write_text  # noqa: E402
from udcg.metrics.reader_check import ReaderCheck, ReaderPairs, check_reader_pairs  # noqa: E402
from udcg.metrics.stats import bootstrap_ci, bootstrap_means, percentile_interval, sign_flip_pvalues  # noqa: E402
from udcg.metrics.ties import TieDecomposition, tie_decomposition, ties_by_question  # noqa: E402

RUNS = (("NQ", "0.5B", "pools of 25", "nq-qwen0.5b"), ("NQ", "0.5B", "pools of 25, passages shuffled", "nq-qwen0.5b-shuffled"),
        ("NQ", "0.5B", "the 1.5B pools of 15", "nq-qwen0.5b-pool15"), ("NQ", "1.5B", "pools of 15, 120 questions", "nq-qwen1.5b"),
        ("NQ", "1.5B", "pools of 15, 350 questions", "nq-qwen1.5b-confirm"), ("PopQA", "0.5B", "pools of 25", "popqa-qwen0.5b"),
        ("PopQA", "0.5B", "the 1.5B pools of 15", "popqa-qwen0.5b-pool15"), ("PopQA", "1.5B", "pools of 15", "popqa-qwen1.5b"))
CONTRASTS = (("NQ", "nq-qwen1.5b", "nq-qwen0.5b-pool15"), ("PopQA", "popqa-qwen1.5b", "popqa-qwen0.5b-pool15"))


class Settings(NamedTuple):
    flips: int = 100_000
    boot: int = 10_000
    check_boot: int = 1_000
    seed: int = 0


class RunRow(NamedTuple):
    """One run's reader check and tie decomposition (module docstring)."""
    questions: int
    check: ReaderCheck
    s2: dict  # question -> UDCG's accuracy on the pairs nDCG ties - 0.5
    s3: dict  # question -> UDCG's - nDCG's accuracy on the other pairs
    pooled: TieDecomposition


def annotations_check(folder: Path, settings: Settings = Settings(), qids: set[str] | None = None) -> ReaderCheck:
    """The reader check of a run's published single-passage annotations (every pair judged), of
    ``qids`` only when given."""
    with gzip.open(folder / "data" / "annotations.jsonl.gz", "rt", encoding="utf-8") as fh:
        rows = [r for r in map(json.loads, fh) if qids is None or r["qid"] in qids]
    pairs = ReaderPairs([r["p_abs"] for r in rows], [r["relevant"] for r in rows], [True] * len(rows),
                        [r["qid"] for r in rows])
    return check_reader_pairs(pairs, n_boot=settings.check_boot, seed=settings.seed)


def tie_parts(folder: Path, qids: set[str] | None = None) -> tuple[dict, dict, TieDecomposition]:
    """Per-question S2 and S3 (module docstring) and the pooled decomposition, of ``qids`` only when given."""
    contexts = main_contexts(folder, qids)
    by_q = ties_by_question(*contexts)
    s2 = {q: t - 0.5 for q, (t, _, _) in by_q.items() if np.isfinite(t)}
    s3 = {q: u - v for q, (_, u, v) in by_q.items() if np.isfinite(u) and np.isfinite(v)}
    return s2, s3, tie_decomposition(*contexts, metric_name="UDCG", baseline_name="nDCG")


def run_row(folder: Path, settings: Settings = Settings()) -> RunRow:
    return RunRow(len(question_order(folder)), annotations_check(folder, settings), *tie_parts(folder))


def _values(by_q: dict) -> np.ndarray:
    return np.array([by_q[q] for q in sorted(by_q)], dtype=float)


def swap_test(a: np.ndarray, b: np.ndarray, flips: int = 100_000, seed: int = 0) -> float:
    """Two-sided p of Delta = nanmean(a) - nanmean(b), two readers' values per question (NaN where a
    reader has none), under the null that the readers' labels are exchangeable within each question:
    each of ``flips`` seeded random vectors swaps a[i] and b[i] where it is 1, and p = 2 min(p_less,
    p_greater), each (count + 1) / (flips + 1), a null Delta within 1e-12 of the observed counting as
    at least as extreme; NaN when a reader has no value. Order-free only over a canonical order: the
    caller sorts the questions."""
    a, b = np.asarray(a, dtype=float), np.asarray(b, dtype=float)
    ia, ib = np.isfinite(a).astype(float), np.isfinite(b).astype(float)
    if not (ia.any() and ib.any()):
        return float("nan")
    a0, b0 = np.where(ia > 0, a, 0.0), np.where(ib > 0, b, 0.0)
    observed = a0.sum() / ia.sum() - b0.sum() / ib.sum()
    rng = np.random.default_rng(seed)
    less = greater = 0
    rows = max(1, (1 << 20) // max(1, len(a)))
    for start in range(0, flips, rows):
        s = rng.integers(0, 2, size=(min(flips, start + rows) - start, len(a))).astype(float)
        keep = 1.0 - s
        with np.errstate(invalid="ignore", divide="ignore"):
            null = (keep @ a0 + s @ b0) / (keep @ ia + s @ ib) - (keep @ b0 + s @ a0) / (keep @ ib + s @ ia)
        null = null[np.isfinite(null)]
        less += int(np.count_nonzero(null <= observed + 1e-12))
        greater += int(np.count_nonzero(null >= observed - 1e-12))
    return float(min(1.0, 2 * min((less + 1) / (flips + 1), (greater + 1) / (flips + 1))))


class Contrast(NamedTuple):
    questions: int  # the questions of the contrast
    n_a: int  # of them, with a tied outcome-differing pair under reader A
    n_b: int
    n_both: int
    mean_a: float
    mean_b: float
    delta: float
    ci: tuple[float, float]
    p: float
    se: float  # the bootstrap standard error of delta


def s2_contrast(s2_a: dict, s2_b: dict, qids: list[str], settings: Settings = Settings()) -> Contrast:
    """Delta = mean S2 of reader A - of reader B over the questions ``qids`` (each reader's mean over
    those where it has tied pairs), its bootstrap interval and ``swap_test`` p (module docstring)."""
    order = sorted(qids)
    a = np.array([s2_a.get(q, np.nan) for q in order], dtype=float)
    b = np.array([s2_b.get(q, np.nan) for q in order], dtype=float)
    means = bootstrap_means(np.column_stack([a, b]), settings.boot, settings.seed)
    mean_a, mean_b = float(np.nanmean(a)), float(np.nanmean(b))
    deltas = means[:, 0] - means[:, 1]
    return Contrast(len(order), int(np.isfinite(a).sum()), int(np.isfinite(b).sum()),
                    int((np.isfinite(a) & np.isfinite(b)).sum()), mean_a, mean_b, mean_a - mean_b,
                    percentile_interval(deltas), swap_test(a, b, settings.flips, settings.seed),
                    float(np.nanstd(deltas, ddof=1)))


def _p(p: float) -> str:
    return f"{p:.4f}" if p >= 1e-4 else f"{p:.1e}"


def run_line(data_set: str, reader: str, what: str, folder: Path, row: RunRow, settings: Settings) -> str:
    c, t = row.check, row.pooled
    s2, s3 = _values(row.s2), _values(row.s3)
    lo, hi = bootstrap_ci(s2, settings.boot, 0.95, settings.seed)
    p = sign_flip_pvalues([s2], settings.flips, settings.seed)[0]
    verdict = "**passes**" if c.can_measure_distraction else "fails"
    return (f"| {data_set} | {reader} | [{folder.name}](../{folder.name}/report.md) ({what}) | {row.questions} | "
            f"{c.auc:.3f} [{c.auc_low:.3f}, {c.auc_high:.3f}] | {c.answered_irrelevant:.0%} | {verdict} | {len(s2)} | "
            f"{s2.mean():+.3f} [{lo:+.3f}, {hi:+.3f}] | {s2.std(ddof=1):.3f} | {_p(p)} | {t.share_tied:.0%} | "
            f"{t.tied_metric:.3f} | {t.untied_metric:.3f} / {t.untied_baseline:.3f} | {s3.mean():+.3f} |")


def table(results: Path, settings: Settings = Settings()) -> tuple[list[str], list[dict]]:
    """The README's lines and the per-question rows."""
    lines = ["| data set | reader | run | questions | check: AUC [95%] | answers from irrelevant | check | "
             "questions with nDCG-tied pairs | S2: UDCG on nDCG's ties − 0.5, per question [95%] | sd | p | "
             "pairs nDCG ties (pooled) | UDCG on them (a tie: 0.5) | UDCG / nDCG on the others | S3: UDCG − nDCG "
             "there, per question |", "|---" * 15 + "|"]
    rows, per_question = {}, []
    for data_set, reader, what, name in RUNS:
        row = rows[name] = run_row(results / name, settings)
        lines.append(run_line(data_set, reader, what, results / name, row, settings))
        per_question += [finite({"run": name, "qid": q, "S2": row.s2.get(q, float("nan")),
                                 "S3": row.s3.get(q, float("nan"))}) for q in question_order(results / name)]
    lines += ["", "The two readers on identical contexts (the 0.5B run's questions; Delta = mean S2 of the 1.5B "
                  "reader − of the 0.5B reader, each over its questions with nDCG-tied pairs; p: the readers swapped "
                  "within questions):", "",
              "| data set | questions | with tied pairs: 1.5B / 0.5B / both | S2: 1.5B | S2: 0.5B | Delta [95%] | p |",
              "|---" * 7 + "|"]
    for data_set, a, b in CONTRASTS:
        c = s2_contrast(rows[a].s2, rows[b].s2, question_order(results / b), settings)
        lines.append(f"| {data_set} | {c.questions} | {c.n_a} / {c.n_b} / {c.n_both} | {c.mean_a:+.3f} | "
                     f"{c.mean_b:+.3f} | {c.delta:+.3f} [{c.ci[0]:+.3f}, {c.ci[1]:+.3f}] | {_p(c.p)} |")
    return lines, per_question


def write(results: Path, out: Path, command: str, settings: Settings = Settings()) -> list[str]:
    lines, per_question = table(results, settings)
    head = ["# Post hoc: the reader check beside where UDCG beats nDCG (issue #51)", "",
            "Made by", "", f"    {command}", "",
            "after every figure below was published: nothing here was planned, and no p is confirmatory "
            "(the scripts/reader_check_ties.py docstring defines each column). The reader check is that of each "
            "run's single-passage annotations (`udcg.metrics.reader_check`); `per-question.jsonl.gz` holds each "
            "run's per-question S2 and S3.", ""]
    out.mkdir(parents=True, exist_ok=True)
    atomic_write_text(out / "README.md", "\n".join(head + lines) + "\n")
    write_jsonl_gz(out / "per-question.jsonl.gz", per_question)
    return lines


def main(argv: list[str] | None = None, settings: Settings = Settings()) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--results", type=Path, default=Path("docs/results"), help="the published results folder")
    parser.add_argument("--out", type=Path, help="write README.md and per-question.jsonl.gz here")
    args = parser.parse_args(argv)
    if args.out is None:
        print("\n".join(table(args.results, settings)[0]))
        return 0
    command = "python scripts/reader_check_ties.py" + (
        "" if args.results == Path("docs/results") else f" --results {args.results.as_posix()}") + f" --out {args.out.as_posix()}"
    print("\n".join(write(args.results, args.out, command, settings)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
