"""scripts/results_table.py: the README's headline table from published report tables."""

from __future__ import annotations

import gzip
import json
import statistics
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import load_script
from udcg.metrics.stats import bootstrap_ci

SCRIPT = Path(__file__).resolve().parents[1] / "scripts" / "results_table.py"


def _row(metric, rho, p, n=8, none=2, best="", tau=None, acc=None, circular=None):
    row = {"metric": metric, "mean_rho": rho, "ci_low": rho - 0.1, "ci_high": rho + 0.1, "n_questions": n,
           "no_rho_outcome": none, "p_vs_baseline": p, "p_holm": None if p is None else min(1.0, 3 * p), "best": best,
           "mean_tau_b": tau, "pair_acc": acc}
    if circular is not None:
        row["circular"] = circular
    return row


def test_one_column_per_table_best_in_bold_and_holm_p_against_udcg(tmp_path):
    tables = tmp_path / "run" / "tables"
    tables.mkdir(parents=True)
    (tables / "table3-all.json").write_text(json.dumps(
        [_row("eRAG", 0.7, 0.01, 20, 4, circular="yes"), _row("nDCG", 0.61, 0.0001, 20, 4, best="*", tau=0.5, acc=0.8),
         _row("UDCG", 0.5, None, 20, 4, tau=0.4, acc=0.75, circular="")]))
    (tables / "table3.json").write_text(json.dumps(
        [_row("UDCG_theta", 0.7, 0.1, best="*"), _row("UDCG", 0.55, None), _row("nDCG", 0.52, 0.5)]))
    out = subprocess.run([sys.executable, str(SCRIPT), f"{tmp_path / 'run'}:Toy"], capture_output=True, text=True,
                         check=True).stdout.splitlines()
    assert out[0] == ("| metric | Toy, 24 questions (all; ρ defined for 20; no θ) | "
                      "Toy, 10 test questions (ρ defined for 8) |")
    cells = [line[2:-2].split(" | ") for line in out[2:]]
    rows = {c[0]: c[1:] for c in cells}
    assert rows["**UDCG**"] == ["0.500 [0.400, 0.600]; τ_b 0.400; acc 0.750", "0.550 [0.450, 0.650]"]
    assert rows["nDCG"] == ["**0.610** [0.510, 0.710]; τ_b 0.500; acc 0.800; p_Holm < 0.001", "0.520 [0.420, 0.620]; p_Holm = 1.00"]
    assert rows["UDCG_θ (trained on the other questions)"] == ["—", "**0.700** [0.600, 0.800]; p_Holm = 0.30"]
    assert rows["eRAG"][0] == "0.700 [0.600, 0.800] (circular); p_Holm = 0.030"  # higher rho, never best
    assert rows["AP (MAP)"] == ["—", "—"]


def test_summary_row_reads_outcome_shares_and_the_best_classical_metric(tmp_path):
    run = tmp_path / "run"
    (run / "tables").mkdir(parents=True)
    (run / "data").mkdir()
    full = lambda metric, rho, tau, acc, p=None: {  # noqa: E731
        **_row(metric, rho, p, n=9, none=1, tau=tau, acc=acc), "p_tau_b_holm": None if p is None else 0.0123,
        "p_pair_acc_holm": None if p is None else 1.0}
    (run / "tables" / "table3-all.json").write_text(json.dumps(
        [full("UDCG", 0.5, 0.4, 0.75), full("eRAG", 0.9, 0.8, 0.9, 0.01), full("nDCG", 0.61, 0.5, 0.8, 0.02),
         full("P", 0.6, 0.55, 0.7, 0.3), {**full("AP", 0.0, 0.0, 0.0, 0.5), "mean_rho": None}]))
    outcomes = ["correct"] * 3 + ["abstained"] * 2 + ["wrong"] * 3
    studies = ["main"] * 8 + ["positions"] * 4
    with gzip.open(run / "data" / "contexts.jsonl.gz", "wt") as fh:
        for i, study in enumerate(studies):
            fh.write(json.dumps({"study": study, "outcome": outcomes[i] if study == "main" else "correct"}) + "\n")
    # UDCG - nDCG per question: 0.1, 0.3, 0.2, 0.4 (q5 unusable): sd 0.129, 3 df
    _per_question(run, {"UDCG": [0.6, 0.5, 0.4, 0.9, None], "nDCG": [0.5, 0.2, 0.2, 0.5, None]})
    module = load_script("results_table")
    # 3/8 correct = 38%, 2/8 abstained = 25%; eRAG is not classical; nDCG beats P on rho; NA rho skipped.
    assert module.summary_row(run, "Toy") == (
        f"| [Toy]({run.as_posix()}/report.md) | 10 | 38% / 25% | 0.500 / 0.400 / 0.750 | "
        "nDCG 0.610 / 0.500 / 0.800 | 0.060 / 0.012 / 1.00 | undetectable |")  # 4 questions: sign-flip p >= 0.125


def test_the_power_column_is_the_smallest_rho_gap_detectable_between_udcg_and_ndcg(tmp_path):
    from scipy import stats as scipy_stats

    _per_question(tmp_path, {"UDCG": [0.6, 0.5, 0.4, 0.9, 0.7, 0.3, None], "nDCG": [0.5, 0.2, 0.2, 0.5, 0.2, 0.1, None]})
    mdd = float(load_script("results_table").power_cell(tmp_path))
    d = [0.1, 0.3, 0.2, 0.4, 0.5, 0.2]
    sd = statistics.stdev(d)
    crit = scipy_stats.t.ppf(0.975, 5)  # the paired t-test on 6 questions has 80% power at that shift
    assert scipy_stats.nct.sf(crit, 5, mdd / (sd / 6**0.5)) == pytest.approx(0.8, abs=0.002)
    # on 4 questions the sign-flip test's p is at least 2 / 2^4 = 0.125: no difference is detectable
    _per_question(tmp_path, {"UDCG": [0.6, 0.5, 0.4, 0.9, None], "nDCG": [0.5, 0.2, 0.2, 0.5, None]})
    assert load_script("results_table").power_cell(tmp_path) == "undetectable"


def _per_question(run: Path, values: dict[str, list], pair_acc: dict[str, list] | None = None,
                  order: list[str] | None = None) -> None:
    """A run's data/per-question.jsonl.gz (table3-all) and, with ``order``, its pools' question order."""
    (run / "data").mkdir(parents=True, exist_ok=True)
    qids = [f"q{i}" for i in range(1, len(next(iter(values.values()))) + 1)]
    rows = [{"table": "table3-all", "metric": m, "qid": q, "rho": v, "tau_b": v,
             "pair_acc": (pair_acc or {}).get(m, vs)[i], "status": 0 if v is not None else 1}
            for m, vs in values.items() for i, (q, v) in enumerate(zip(qids, vs))]
    rows.append({"table": "table3", "metric": "UDCG", "qid": "q1", "rho": 9.0, "tau_b": 9.0, "pair_acc": 9.0, "status": 0})
    with gzip.open(run / "data" / "per-question.jsonl.gz", "wt") as fh:
        fh.writelines(json.dumps(r) + "\n" for r in rows)
    with gzip.open(run / "data" / "pools.jsonl.gz", "wt") as fh:
        fh.writelines(json.dumps({"example_id": q, "passages": []}) + "\n" for q in order or qids)


def _cells(line: str) -> list[str]:
    return line.strip("|").strip().split(" | ")


def test_primary_by_hand_with_the_sensitivity_rows_and_the_reading(tmp_path):
    run = tmp_path / "nq-qwen1.5b"
    # UDCG - nDCG on rho: 0.2, 0.1, 0.3, (q4 unusable), 0.4, -0.1; the pools' order puts q6, q2, q5 last
    _per_question(run, {"UDCG": [0.5, 0.4, 0.6, None, 0.9, 0.0], "nDCG": [0.3, 0.3, 0.3, None, 0.5, 0.1]},
                  pair_acc={"UDCG": [0.9, 0.8, 0.7, None, 0.6, 0.5], "nDCG": [0.5] * 3 + [None] + [0.5] * 2},
                  order=["q1", "q3", "q4", "q6", "q2", "q5"])
    (run / "config.yaml").write_text("name: toy\ndata:\n  questions: nq\n")
    lines = load_script("results_table").primary_table([(run, "Toy")], None, 3)
    assert _cells(lines[0])[:7] == ["run", "statistic", "questions", "usable", "UDCG − nDCG", "95% interval", "p"]
    rows = [_cells(line) for line in lines[2:6]]
    # all: D = 0.9 / 5; exact sign-flip p: 3 of the 32 sign vectors keep the sum >= 0.9, two-sided 6/32
    low, high = bootstrap_ci([0.2, 0.1, 0.3, 0.4, -0.1], 10_000, 0.95, 0)  # 10,000 resamples, seed 0
    assert rows[0][:6] == ["Toy", "ρ, all questions (primary)", "6", "5", "+0.180", f"[{low:+.3f}, {high:+.3f}]"]
    assert rows[0][6:10] == ["0.19", "0.19", "+0.078", "yes" if low <= 0.078 <= high else "no"]
    # after the first 3 (q6, q2, q5): 0.1, -0.1 and 0.4 -> D 0.4 / 3; exact p: sums >= 0.4 for 3 of 8 flips
    assert rows[1][:5] == ["Toy", "ρ, questions after the first 3", "3", "3", "+0.133"]
    assert rows[1][5:8] == ["[NA, NA]", "0.75", "—"]  # fewer than 5 questions: no interval
    assert rows[2][:5] == ["Toy", "pairwise acc., all questions", "6", "5", "+0.200"] and rows[2][8] == "—"
    assert rows[3][:5] == ["Toy", "pairwise acc., questions after the first 3", "3", "3", "+0.133"]
    assert lines[-2].startswith("- Toy: incomplete: 6 of 120 questions, no verdict (pre-registration (b)); "
                                f"the interval [{low:+.3f}, {high:+.3f}] excludes ")
    # first 3 in the pools' order (q1, q3; q4 unusable): 0.2, 0.3; later: -0.1, 0.1, 0.4. Of the 10
    # splits of the five into 2 + 3, 4 have a first-pair sum >= 0.5 and 8 <= 0.5: two-sided p 2 * 4/10
    assert lines[-1] == ("- Toy: ρ gap on the first 3 questions +0.250 (2 usable) against +0.133 on the later "
                         "ones (3 usable), two-sample permutation p 0.80")


def test_the_paper_margins_an_interval_excludes_are_named_one_by_one():
    module = load_script("results_table")
    d = module.paired.PairedDifference(106, 0.017, 0.18, 0.05, -0.015, 0.054, 0.34)
    assert module.margins_reading(d, "nq") == (
        "the interval [-0.015, +0.054] excludes Llama-3B +0.078, Mistral-7B +0.081, Llama-8B +0.096, "
        "Llama-70B +0.105, Qwen-7B +0.134 and contains Gemma-4B +0.030")
    assert module.margins_reading(d, "squad") == "no paper margins to compare with"


def test_family_holm_over_statistics_metrics_and_runs_without_the_primaries(tmp_path):
    def row(metric, p_rho, p_tau, p_acc, circular=""):
        return {"metric": metric, "mean_rho": 0.4, "mean_tau_b": 0.3, "pair_acc": 0.7, "p_vs_baseline": p_rho,
                "p_tau_b": p_tau, "p_pair_acc": p_acc, "circular": circular}

    def run(name, all_rows, test_rows):
        (tmp_path / name / "tables").mkdir(parents=True)
        (tmp_path / name / "tables" / "table3-all.json").write_text(json.dumps(all_rows))
        (tmp_path / name / "tables" / "table3.json").write_text(json.dumps(test_rows))
        return tmp_path / name

    udcg = row("UDCG", None, None, None)
    a = run("nq-qwen1.5b", [udcg, row("nDCG", 0.01, 0.02, 0.03), row("ANSWER_PROB", 0.001, 0.001, 0.001)],
            [udcg, row("UDCG_theta", None, 0.04, 0.5)])
    b = run("other", [udcg, row("nDCG", 0.001, 0.2, 0.3), row("eRAG", 0.0001, 0.0001, 0.0001, circular="yes")], [udcg])
    lines = load_script("results_table").family_table([(a, "A"), (b, "B")], {"nq-qwen1.5b", "popqa-qwen1.5b"})
    got = {tuple(c[:3]): (c[5], c[6]) for c in map(_cells, lines[2:-2])}
    # A's nDCG on rho is its primary; ANSWER_PROB is outside the pre-registered family, a circular
    # row outside every family, an NA p outside Holm: 7 tests, Holm by hand (x7, x6, x5, ...)
    assert got == {("A", "τ_b", "nDCG"): ("0.020", "0.12"), ("A", "pairwise acc.", "nDCG"): ("0.030", "0.15"),
                   ("A", "ρ", "UDCG_theta"): ("NA", "NA"), ("A", "τ_b", "UDCG_theta"): ("0.040", "0.16"),
                   ("A", "pairwise acc.", "UDCG_theta"): ("0.50", "0.60"), ("B", "ρ", "nDCG"): ("0.001", "0.007"),
                   ("B", "τ_b", "nDCG"): ("0.20", "0.60"), ("B", "pairwise acc.", "nDCG"): ("0.30", "0.60")}
    assert lines[-1] == "Family: 7 tests (statistics × metrics × runs); left out as primaries: nDCG on ρ in nq-qwen1.5b; p from the reports (10,000 sign flips)."


def test_the_summary_table_on_the_command_line_has_the_power_column(tmp_path):
    run = Path(__file__).resolve().parents[1] / "docs" / "results" / "nq-qwen0.5b"  # stays at 50 questions
    out = subprocess.run([sys.executable, str(SCRIPT), "--summary", f"{run}:NQ"], capture_output=True, text=True,
                         check=True).stdout.splitlines()
    assert out[0].endswith("| its p_Holm: ρ / τ_b / acc. | ρ gap UDCG − nDCG detectable at 80% |")
    assert out[1] == "|---" * 7 + "|" and out[2].endswith("| 0.92 / 1.00 / 0.47 | 0.088 |")  # since #34: canonical order


def test_across_pairs_one_metric_of_two_runs_on_the_questions_usable_in_both(tmp_path):
    a, b = tmp_path / "a", tmp_path / "b"
    _per_question(a, {"UDCG": [0.5, 0.4, None, 0.9]})
    _per_question(b, {"UDCG": [0.3, None, 0.2, 0.5]})
    lines = load_script("results_table").across_table([(a, "A"), (b, "B")], "UDCG")
    rho = _cells(lines[4])
    # usable in both: q1 (0.5 vs 0.3) and q4 (0.9 vs 0.5); A - B = 0.2, 0.4; exact two-sided p over the
    # 4 sign vectors: |mean| >= 0.3 for (+,+) and (-,-) only, 2/4
    assert rho[:7] == ["ρ", "3", "3", "2", "0.700", "0.400", "+0.300"]
    assert rho[8] == "0.50"


def test_abstention_auc_of_the_contexts_mean_p_abs_by_hand(tmp_path):
    """Three abstained contexts and three answered ones; the mean p_abs orders 8 of the 9 (abstained,
    answered) pairs right, one tie counts half: AUC (8 + 0.5) / 9. Other studies are left out."""
    (tmp_path / "data").mkdir()
    contexts = [("q1", "abstained", [0.9, 0.7]), ("q1", "correct", [0.1, 0.1]), ("q2", "abstained", [0.6, 0.4]),
                ("q2", "wrong", [0.5, 0.5]), ("q3", "abstained", [0.2, 0.4]), ("q3", "wrong", [0.4, 0.2]),
                ("q3", "abstained", [0.0, 0.0], "positions")]
    with gzip.open(tmp_path / "data" / "contexts.jsonl.gz", "wt") as fh:
        for qid, outcome, p_abs, *study in contexts:
            fh.write(json.dumps({"qid": qid, "study": (study or ["main"])[0], "outcome": outcome, "p_abs": p_abs}) + "\n")
    n, share, auc, low, high = load_script("results_table").abstention_auc(tmp_path, n_boot=200)
    # abstained means 0.8, 0.5, 0.3 against answered 0.1, 0.5, 0.3: 0.8 beats all three, 0.5 beats 0.1 and 0.3
    # and ties 0.5, 0.3 beats 0.1 and ties 0.3: (3 + 2.5 + 1.5) / 9
    assert (n, share) == (6, 0.5) and auc == pytest.approx(7 / 9)
    assert low <= auc <= high


def test_the_tie_table_by_hand(tmp_path):
    from tests.test_confirm_equivalence import _contexts

    (tmp_path / "data").mkdir()
    # q4: nDCG ties, UDCG right; q5: both order it, nDCG wrongly; q1: nDCG ties, UDCG wrong
    _contexts(tmp_path, [("q4", "correct", 0.6, 0.3), ("q4", "wrong", 0.4, 0.3), ("q5", "correct", 0.7, 0.1),
                         ("q5", "abstained", 0.5, 0.2), ("q1", "correct", 0.1, 0.1), ("q1", "wrong", 0.9, 0.1)])
    lines = load_script("results_table").ties_table([(tmp_path, "Toy")])
    assert lines[2] == "| Toy | 3 | 3 | 2 (67%) | 0.500 | 1.000 | 0.000 |"
