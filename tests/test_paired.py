"""udcg.experiment.paired: paired per-question differences, the power table, and the report's power
section, on hand-computed toys and on a published run."""

from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np
import pytest
from scipy import stats as scipy_stats

from udcg.errors import InputError
from udcg.experiment import paired, reporting
from udcg.metrics.stats import bootstrap_ci, min_detectable_difference

RUN = Path(__file__).resolve().parents[1] / "docs" / "results" / "nq-qwen0.5b"  # stays at 50 questions (pre-registration)


def _rows(values: dict[str, list[float | None]], qids: list[str]) -> list[dict]:
    return [{"table": "table3-all", "metric": m, "qid": q, "rho": v, "tau_b": v, "pair_acc": None if v is None else 0.5,
             "status": 0 if v is not None else 1} for m, vs in values.items() for q, v in zip(qids, vs)]


def test_aligned_reads_values_on_the_given_questions_with_nan_where_undefined():
    rows = _rows({"UDCG": [0.5, None, 0.1], "nDCG": [0.2, 0.3, None]}, ["q1", "q2", "q3"])
    a, b = paired.aligned(rows, "UDCG", "nDCG")
    assert np.array_equal(a, [0.5, np.nan, 0.1], equal_nan=True)
    assert np.array_equal(b, [0.2, 0.3, np.nan], equal_nan=True)
    a, b = paired.aligned(rows, "UDCG", "nDCG", "pair_acc", qids=["q3", "q1", "q9"])
    assert np.array_equal(a, [0.5, 0.5, np.nan], equal_nan=True)  # q9 has no row: NaN
    with pytest.raises(InputError, match="'MRR'"):
        paired.aligned(rows, "UDCG", "MRR")
    with pytest.raises(InputError, match="statistic"):
        paired.aligned(rows, "UDCG", "nDCG", "spearman")


def mdd_at(a, b, alpha):
    return min_detectable_difference(np.array(a), np.array(b), alpha, 0.8)


def test_difference_spread_by_hand():
    # a - b = 0.1, 0.3, 0.2, 0.4 on the usable questions (the NaN one left out of both)
    a = [0.6, 0.5, 0.4, 0.9, np.nan]
    b = [0.5, 0.2, 0.2, 0.5, 0.3]
    s = paired.difference_spread(a, b)
    assert s.n == 4 and s.mean == pytest.approx(0.25)
    assert s.sd == pytest.approx(math.sqrt((0.15**2 + 0.05**2 + 0.05**2 + 0.15**2) / 3))
    # the paired t formula's shift: the paired t-test (3 df) rejects at two-sided 0.05 with probability
    # 0.8 there (scipy's noncentral t), above the normal approximation (z_0.975 + z_0.8) sd / sqrt(n)
    mdd = min_detectable_difference(np.array(a), np.array(b), 0.05, 0.8)
    nc = mdd / (s.sd / 2)
    crit = scipy_stats.t.ppf(0.975, 3)
    assert scipy_stats.nct.sf(crit, 3, nc) + scipy_stats.nct.cdf(-crit, 3, nc) == pytest.approx(0.8, abs=1e-6)
    assert mdd > (1.959964 + 0.841621) * s.sd / 2
    # but the tables' sign-flip test cannot go below 2 / 2^4 = 0.125 on 4 questions: nothing is detectable
    assert s.min_detectable == math.inf
    six = paired.difference_spread(a[:4] + [0.7, 0.3], b[:4] + [0.2, 0.1])  # 2 / 2^6 = 0.031 < 0.05: the t formula
    assert six.n == 6 and six.min_detectable == min_detectable_difference(np.array(a[:4] + [0.7, 0.3]),
                                                                          np.array(b[:4] + [0.2, 0.1]), 0.05, 0.8)
    assert math.isfinite(six.min_detectable) and paired.difference_spread(a, b, alpha=0.2).min_detectable == mdd_at(
        a, b, 0.2)
    assert math.isnan(s.ci_low) and math.isnan(s.p)  # no test asked
    one = paired.difference_spread([1.0, np.nan], [0.0, 0.0])
    assert one.n == 1 and one.mean == 1.0 and math.isnan(one.sd) and math.isnan(one.min_detectable)


def test_paired_difference_exact_sign_flip_p_by_hand_and_the_bootstrap_of_the_differences():
    # d = 0.2, 0.1, 0.3, 0.4, -0.1 (sum 0.9; |d| sum 1.1): a flipped set of |d| summing to <= 0.1
    # keeps the sum >= 0.9: {}, {0.1}, {-0.1}: 3 of 32 sign vectors, two-sided p = 2 * 3/32
    a = np.array([0.5, 0.4, 0.6, np.nan, 0.9, 0.0])
    b = np.array([0.3, 0.3, 0.3, 0.2, 0.5, 0.1])
    d = paired.paired_difference(a, b)
    assert d.n == 5 and d.mean == pytest.approx(0.18) and d.p == pytest.approx(6 / 32)
    assert (d.ci_low, d.ci_high) == bootstrap_ci((a - b)[[0, 1, 2, 4, 5]], 10_000, 0.95, 0)
    assert d.ci_low <= d.mean <= d.ci_high
    few = paired.paired_difference([0.5, 0.4], [0.1, 0.5])  # fewer than 5 questions: no interval
    assert math.isnan(few.ci_low) and few.p == 1.0


def test_power_table_is_each_metric_minus_the_baseline_without_the_baseline():
    rows = _rows({"UDCG": [0.6, 0.5, 0.4, 0.9], "nDCG": [0.5, 0.2, 0.2, 0.5], "P": [0.6, 0.5, 0.4, None]},
                 ["q1", "q2", "q3", "q4"])
    table = paired.power_table(rows, "UDCG", ["UDCG", "P", "nDCG"], "t")
    assert table.columns == paired.POWER_COLUMNS and [r["metric"] for r in table.rows] == ["P", "nDCG"]
    p, ndcg = table.rows
    assert (p["n_usable"], p["diff_vs_baseline"], p["sd_diff"]) == (3, 0.0, 0.0)
    assert math.isnan(p["min_detectable_diff"])  # the differences do not vary
    assert ndcg["n_usable"] == 4 and ndcg["diff_vs_baseline"] == pytest.approx(-0.25)
    assert ndcg["min_detectable_diff"] == "undetectable"  # 4 questions: no sign-flip p below 0.05
    more = _rows({"UDCG": [0.6, 0.5, 0.4, 0.9, 0.7, 0.3], "nDCG": [0.5, 0.2, 0.2, 0.5, 0.2, 0.1]},
                 ["q1", "q2", "q3", "q4", "q5", "q6"])
    six = paired.power_table(more, "UDCG", ["nDCG"]).rows[0]
    spread = paired.difference_spread([0.5, 0.2, 0.2, 0.5, 0.2, 0.1], [0.6, 0.5, 0.4, 0.9, 0.7, 0.3])
    assert six["min_detectable_diff"] == spread.min_detectable and math.isfinite(spread.min_detectable)
    flagged = paired.power_table(rows, "UDCG", ["P", "nDCG"], circular=["P"])
    assert flagged.columns[:2] == ["metric", "circular"] and [r["circular"] for r in flagged.rows] == ["yes", ""]


def test_the_report_shows_the_power_of_table3_all_and_keeps_its_tables(tmp_path):
    """A published run rebuilt: the power table sits beside the others, agrees with Table 3 (all
    questions) and with the per-question data, and the correlation tables' files are unchanged."""
    tables, _, per_question = reporting.report(RUN, tmp_path)
    power = {r["metric"]: r for r in tables["table3-all-power"].rows}
    table3 = {r["metric"]: r for r in tables["table3-all"].rows}
    assert list(power) == [m for m in table3 if m != "UDCG"]
    rows = reporting.read_per_question(RUN, "table3-all")
    for metric, r in power.items():
        assert r["diff_vs_baseline"] == pytest.approx(table3[metric]["diff_vs_baseline"], abs=1e-12)
        a, b = paired.aligned(rows, metric, "UDCG")
        usable = np.isfinite(a) & np.isfinite(b)
        assert r["n_usable"] == usable.sum() and r["sd_diff"] == pytest.approx(np.std((a - b)[usable], ddof=1))
    assert power["nDCG"]["n_usable"] == 42 and power["nDCG"]["min_detectable_diff"] == pytest.approx(0.0878, abs=5e-4)
    for suffix in (".md", ".csv", ".json"):
        assert (tmp_path / "tables" / f"table3-all-power{suffix}").is_file()
    for name in ("table3-all.json", "table3-all.md", "table3-all.csv"):
        assert (tmp_path / "tables" / name).read_bytes() == (RUN / "tables" / name).read_bytes(), name
    report = (tmp_path / "report.md").read_text()
    assert report.index("### Power of Table 3 (all questions)") > report.index("### Table 3 (all questions")
    assert "How to read it: the paired test (two-sided, α 0.05)" in report
    assert json.loads((tmp_path / "summary.json").read_text())["tables"]["table3-all-power"][0]["metric"] == "RR"
    # the data files are not touched
    assert {r["table"] for r in per_question} == {"table3", "table3-all", "table4", "k1", "k3", "k5"}


def test_question_order_is_the_selection_order_of_the_pools():
    order = reporting.question_order(RUN)
    assert len(order) == 50 and order[:2] == ["nq79", "nq1719"]
    with pytest.raises(InputError, match="no per-question values of table 'k2'"):
        reporting.read_per_question(RUN, "k2")
