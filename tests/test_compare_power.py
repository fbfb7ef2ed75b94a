"""What a paired test can detect on few queries (issue #48's trial, docs/trial-dpr.md): the smallest
p each test can give (``udcg.metrics.p_floor``), compare's MDD where that floor is not below the
level (undetectable, said once in the footer with the queries needed), Holm's family, the tie
table, planning and the answer plan; hand-computed toys at 5 and 6 queries and a family of 3.

Before the fix, five queries on which one run beat the other every time got p = 0.0625 and an MDD
of 0.0792 (UDCG@5), a paired-t figure claiming 80% power where the exact test has none."""

from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy import stats as ss

from udcg.cli import main
from udcg.flows import answer_plan
from udcg.io.sources import example_path
from udcg.metrics.compare import CompareTests, compare_scores
from udcg.metrics.compare_power import SMALL_N
from udcg.metrics.p_floor import can_reach, queries_to_reach, smallest_p
from udcg.metrics.planning import queries_to_detect, queries_to_show_equivalence
from udcg.metrics.stats import (DEFAULT_RESAMPLES, EXACT_MAX_N, detectable_difference, min_detectable_difference,
                                paired_test, sign_flip_pvalues)

R = DEFAULT_RESAMPLES


def _floor(n: int, method: str = "permutation", alternative: str = "two-sided") -> float:
    return smallest_p(n, method, EXACT_MAX_N, R, alternative)


# ---------------------------------------------------------------- the floors by hand


def test_the_floors_by_hand():
    assert _floor(5) == 2 / 2**5 == 0.0625 and _floor(6) == 0.03125 and _floor(7) == 0.015625
    assert _floor(5, alternative="greater") == 1 / 32 and _floor(5, alternative="less") == 1 / 32
    assert _floor(5, "wilcoxon") == pytest.approx(0.0625) and _floor(6, "wilcoxon") == pytest.approx(0.03125)
    assert _floor(5, "t") == 0.0 and _floor(2, "t") == 0.0 and _floor(1, "t") == 1.0
    assert _floor(1) == 1.0 and _floor(0) == 1.0
    # random sign flips: p = (count + 1) / (R + 1) is never below 2 / (R + 1), nor (as an estimate) the exact floor
    assert smallest_p(40, "permutation", EXACT_MAX_N, 999) == 2 / 1000
    assert smallest_p(5, "permutation", 0, 999) == 0.0625
    assert smallest_p(40, "permutation", 0, 999, "greater") == 1 / 1000


@pytest.mark.parametrize("method", ["permutation", "wilcoxon"])
@pytest.mark.parametrize("n", [1, 2, 3, 5, 6, 9, 12])
def test_the_floor_is_the_tests_own_p_on_differences_of_one_sign(method, n):
    d = np.linspace(0.1, 0.9, n)  # all of one sign: the most extreme data n queries can give
    assert paired_test(d, np.zeros(n), method) == pytest.approx(_floor(n, method), rel=1e-9)
    assert paired_test(-d, np.zeros(n), method) == pytest.approx(_floor(n, method), rel=1e-9)


@settings(max_examples=60, deadline=None)
@given(st.lists(st.floats(-1, 1, allow_nan=False).filter(lambda x: abs(x) > 1e-6), min_size=1, max_size=12),
       st.sampled_from(["permutation", "wilcoxon"]))
def test_no_data_goes_below_the_floor(values, method):
    d = np.asarray(values)
    assert paired_test(d, np.zeros(len(d)), method) >= _floor(len(d), method) * (1 - 1e-9)


@pytest.mark.parametrize("level, method, alternative, n", [
    (0.05, "permutation", "two-sided", 6),  # 2 / 2^6 = 0.03125 < 0.05; 2 / 2^5 = 0.0625 is not
    (0.05 / 3, "permutation", "two-sided", 7),  # a family of 3 under Holm: 2 / 2^7 = 0.0156 < 0.0167
    (0.05 / 2, "permutation", "two-sided", 7),  # 0.03125 > 0.025
    (0.05, "permutation", "greater", 5),  # each one-sided test of the TOST: 1 / 32 < 0.05
    (0.05, "wilcoxon", "two-sided", 6),
    (0.05, "t", "two-sided", 2),
])
def test_the_queries_a_level_needs(level, method, alternative, n):
    assert queries_to_reach(level, method, EXACT_MAX_N, R, alternative) == n
    assert can_reach(n, level, method, EXACT_MAX_N, R, alternative)
    assert not can_reach(n - 1, level, method, EXACT_MAX_N, R, alternative)


@settings(max_examples=40, deadline=None)
@given(st.floats(1e-4, 0.5), st.sampled_from(["permutation", "wilcoxon", "t"]))
def test_the_queries_needed_are_the_first_n_that_reach_the_level(level, method):
    n = int(queries_to_reach(level, method, EXACT_MAX_N, R))
    assert can_reach(n, level, method, EXACT_MAX_N, R)
    assert all(not can_reach(m, level, method, EXACT_MAX_N, R) for m in range(1, n))


def test_a_level_below_the_random_flips_floor_is_never_reached():
    assert math.isinf(queries_to_reach(1e-9, "permutation", EXACT_MAX_N, R))  # 2 / 2^31 needs 31 > 24 exact queries
    assert queries_to_reach(1e-6, "permutation", EXACT_MAX_N, R) == 21  # exact up to 24 queries


def test_the_mdd_is_undetectable_where_the_floor_is_not_below_its_level():
    d = np.array([0.06, 0.05, 0.07, 0.08, 0.04])

    def mdd(values: np.ndarray, **kw) -> float:
        return compare_scores({"a": {"M": values}, "b": {"M": np.zeros(len(values))}}, tests=CompareTests(n_boot=100, **kw)).pairs[0].mdd

    assert math.isinf(mdd(d))  # before: 0.0266, the paired-t figure, which stays the t-test's
    assert mdd(d, test="t") == min_detectable_difference(d, np.zeros(5), method="t") == pytest.approx(0.0266, abs=1e-4)
    assert math.isinf(mdd(d, test="wilcoxon"))
    six = np.r_[d, 0.05]
    assert mdd(six) == min_detectable_difference(six, np.zeros(6))


# ---------------------------------------------------------------- compare: toys at 5 and 6 queries


def _two(n: int, shift: float = 0.06) -> dict:
    x = np.linspace(0.3, 0.9, n)
    return {"bm25": {"UDCG@5": x - shift - 0.005 * np.arange(n)}, "dense": {"UDCG@5": x}}  # dense ahead on each


FIVE = ("With n = 5 queries the exact sign-flip test's smallest p is 0.0625 > 0.05: no difference can be significant "
        "(MDD: undetectable); use at least 6 queries.")


def test_five_queries_one_run_better_on_every_one_is_undetectable():
    cmp = compare_scores(_two(5), tests=CompareTests(n_boot=200))
    (t,) = cmp.pairs
    assert (t.a_higher, t.equal, t.b_higher) == (0, 0, 5) and t.p == 0.0625 and not t.significant
    assert math.isinf(t.mdd) and t.undetectable and not t.reachable and t.p_floor == 0.0625
    text = cmp.format()
    assert "| undetectable |" in text and text.count(FIVE) == 1
    assert "exceeds the measure's whole range" not in text
    record = json.loads(cmp.format("json"))
    pair = record["pairs"][0]
    assert pair["mdd"] is None and pair["undetectable"] is True and pair["p_floor"] == 0.0625
    assert "smallest p on 5 queries is 0.0625" in pair["undetectable_reason"]
    assert FIVE in record["footer"]
    row = cmp.to_frame("pairs").iloc[0]
    assert math.isnan(row["mdd"]) and row["p_floor"] == 0.0625


def test_six_queries_can_be_significant_and_keep_their_mdd():
    cmp = compare_scores(_two(6), tests=CompareTests(n_boot=200))
    (t,) = cmp.pairs
    assert t.p == 0.03125 and t.significant and t.reachable and t.p_floor == 0.03125
    assert t.mdd == min_detectable_difference(_two(6)["bm25"]["UDCG@5"], _two(6)["dense"]["UDCG@5"], 0.05, 0.8)
    assert math.isfinite(t.mdd) and "no difference can be significant" not in cmp.format()
    assert cmp.to_dict()["pairs"][0]["undetectable_reason"] is None


def test_a_family_of_three_under_holm_needs_seven_queries():
    """Three runs on 6 queries: each raw p can be 0.03125, but Holm's first step needs p < 0.05 / 3:
    3 x 0.03125 = 0.09375, so none of the three can be significant; without correction each can."""
    x = np.linspace(0.3, 0.9, 6)
    scores = {"a": {"M": x + 0.1}, "b": {"M": x}, "c": {"M": x + 0.05}}
    cmp = compare_scores(scores, tests=CompareTests(n_boot=200))
    assert [t.p for t in cmp.pairs] == [0.03125] * 3 and [t.p_holm for t in cmp.pairs] == [0.09375] * 3
    assert all(t.undetectable and not t.reachable and t.p_floor == 0.09375 for t in cmp.pairs)
    line = ("With n = 6 queries the exact sign-flip test's smallest p is 0.03125; Holm over the 3 comparisons of its "
            "family makes it 0.09375 > 0.05: no difference can be significant (MDD: undetectable); use at least 7 "
            "queries.")
    assert cmp.format().count(line) == 1
    raw = compare_scores(scores, tests=CompareTests(n_boot=200, correction="none"))
    assert all(t.reachable and math.isfinite(t.mdd) and t.significant for t in raw.pairs)
    against = compare_scores(scores, tests=CompareTests(n_boot=200), baseline="b")  # a family of 2: 2 x 0.03125 = 0.0625
    assert all(not t.reachable for t in against.pairs) and "use at least 7 queries" in against.format()
    seven = {r: {"M": np.r_[v["M"], v["M"][-1] + 0.01]} for r, v in scores.items()}
    assert all(t.reachable and math.isfinite(t.mdd) for t in compare_scores(seven, tests=CompareTests(n_boot=200)).pairs)


def test_the_whole_table_is_one_family():
    x = np.linspace(0.3, 0.9, 7)
    scores = {"a": {"M": x + 0.1, "N": x + 0.2}, "b": {"M": x, "N": x}}
    assert all(t.reachable for t in compare_scores(scores, tests=CompareTests(n_boot=200)).pairs)  # one comparison per measure
    table = compare_scores(scores, tests=CompareTests(n_boot=200, correction="table"))  # 2 comparisons at 0.05 / 2: 2 / 2^7 < 0.025
    assert all(t.reachable for t in table.pairs)
    six = {r: {m: v[:6] for m, v in by_m.items()} for r, by_m in scores.items()}
    table6 = compare_scores(six, tests=CompareTests(n_boot=200, correction="table"))
    assert all(not t.reachable for t in table6.pairs) and "Holm over the 2 comparisons" in table6.format()


@pytest.mark.parametrize("test, floor, name", [("wilcoxon", 0.0625, "Wilcoxon signed-rank test"),
                                               ("permutation", 0.0625, "exact sign-flip test")])
def test_every_test_with_a_floor_says_so(test, floor, name):
    cmp = compare_scores(_two(5), tests=CompareTests(n_boot=200, test=test))
    (t,) = cmp.pairs
    assert not t.reachable and t.p_floor == pytest.approx(floor) and t.p >= t.p_floor - 1e-12
    assert f"With n = 5 queries the {name}'s smallest p is 0.0625 > 0.05" in cmp.format()


def test_the_t_test_has_no_floor_from_two_queries():
    cmp = compare_scores(_two(5), tests=CompareTests(n_boot=200, test="t"))
    (t,) = cmp.pairs
    assert t.reachable and math.isfinite(t.mdd) and t.p_floor == 0.0 and t.significant
    assert "no difference can be significant" not in cmp.format()


def test_the_tie_table_has_its_own_floor():
    """Where nDCG ties on only 3 queries, the UDCG difference on them cannot be significant."""
    x = np.linspace(0.3, 0.9, 10)
    ndcg_a, ndcg_b = x.copy(), x + 0.1
    ndcg_b[:3] = ndcg_a[:3]  # the pair ties on 3 queries
    scores = {"a": {"nDCG@5": ndcg_a, "UDCG@5": x}, "b": {"nDCG@5": ndcg_b, "UDCG@5": x + 0.05}}
    cmp = compare_scores(scores, tests=CompareTests(n_boot=200), ties="nDCG@5")
    (tied,) = cmp.tie_pairs
    assert tied.n == 3 and not tied.reachable and tied.p_floor == 0.25
    assert ("Where nDCG@5 ties, with n = 3 queries the exact sign-flip test's smallest p is 0.25 > 0.05: no "
            "difference can be significant (MDD: undetectable); use at least 6 queries.") in cmp.format()
    assert all(t.reachable for t in cmp.pairs)


# ---------------------------------------------------------------- the paired-t MDD on few queries


def _sign_flip_power(n: int, shift: float, draws: int, seed: int) -> float:
    rng = np.random.default_rng(seed)
    ds = [rng.normal(shift, 1.0, n) for _ in range(draws)]
    return float(np.mean(np.array(sign_flip_pvalues(ds)) < 0.05))


def test_the_exact_tests_own_power_at_the_mdd_falls_short_on_few_queries():
    """The MDD is the paired t-test's: at SMALL_N queries and more the exact sign-flip test has about
    the power stated at it (normal differences); on 6 queries, near its floor, far less (0.62 here),
    which the footer says."""
    def power_at_mdd(n: int) -> float:  # differences ~ normal(MDD, 1), the MDD at sd 1
        return _sign_flip_power(n, detectable_difference(1.0, n, 0.05, 0.8, "t"), 1500, n)

    assert power_at_mdd(6) == pytest.approx(0.62, abs=0.04)
    # by hand: on 6 queries only the two sign vectors of one sign reject (2 / 64 < 0.05 <= 4 / 64), so the
    # power is P(all 6 positive) + P(all 6 negative) with d ~ normal(MDD, 1)
    delta = detectable_difference(1.0, 6, 0.05, 0.8, "t")
    assert ss.norm.cdf(delta) ** 6 + ss.norm.cdf(-delta) ** 6 == pytest.approx(0.62, abs=0.01)
    assert power_at_mdd(SMALL_N) == pytest.approx(0.8, abs=0.05)
    note = "With fewer than 8 queries this test's own power at the MDD is below 80%"
    assert note in compare_scores(_two(6), tests=CompareTests(n_boot=200)).format()
    assert note not in compare_scores(_two(SMALL_N), tests=CompareTests(n_boot=200)).format()
    assert note not in compare_scores(_two(6), tests=CompareTests(n_boot=200, test="t")).format()


# ---------------------------------------------------------------- planning and the answer plan


def test_planning_starts_at_the_floor():
    assert queries_to_detect(0.01, 0.5, method="t") == 2  # the t-test's power formula alone: 2 queries
    assert queries_to_detect(0.01, 0.5) == 6  # the exact sign-flip test's p cannot go below 0.05 on fewer
    assert queries_to_detect(0.01, 0.5, 0.05 / 3) == 7
    assert queries_to_show_equivalence(0.01, 0.5) == 5  # each one-sided test: 1 / 2^5 < 0.05
    assert queries_to_show_equivalence(0.01, 0.5, method="t") == 2


def test_the_answer_plan_says_when_no_answers_could_be_significant():
    assert answer_plan.floor_text(5, 2) == (
        "no difference in correct rate between two runs: on 5 queries the exact sign-flip test's smallest p is 0.0625, "
        "not below alpha 0.05 per run pair, whatever the answers (at least 6 queries needed)")
    assert "at least 7 queries needed" in answer_plan.floor_text(6, 3)  # 3 runs: alpha 0.05 / 3 per pair
    assert answer_plan.floor_text(6, 2) == "" and answer_plan.floor_text(20, 3) == ""
    plan = answer_plan.AnswerPlan("toy", 5, 2, 10, 0, None, answer_plan.detectable(5, 2))
    assert "smallest p is 0.0625" in plan.lines()[1] and "exceeds 1" not in plan.lines()[1]
    assert answer_plan.queries_for(0.99, 2) >= 6


# ---------------------------------------------------------------- the command, on 5 queries of the example


@pytest.fixture
def five_queries(tmp_path: Path) -> Path:
    """The packaged example (``udcg example``) cut to 5 queries, nq11 and nq15 among them: the two
    where the runs' nDCG@5 differ (before the fix: MDD 0.9213 nDCG@5, 0.1843 P@5 on them)."""
    assert main(["example", str(tmp_path / "ex")]) == 0
    ex, keep = tmp_path / "ex", {"nq0", "nq1", "nq2", "nq11", "nq15"}
    out = tmp_path / "five"
    (out / "runs").mkdir(parents=True)
    for src, dst in ((ex / "qrels" / "test.tsv", out / "qrels.tsv"), (ex / "runs" / "bm25.trec", out / "runs" / "bm25.trec"),
                     (ex / "runs" / "dense.trec", out / "runs" / "dense.trec")):
        lines = src.read_text().splitlines()
        kept = [ln for i, ln in enumerate(lines) if ln.split()[0] in keep or (src.suffix == ".tsv" and i == 0)]
        dst.write_text("\n".join(kept) + "\n")
    return out


def test_compare_on_five_queries_says_nothing_can_be_significant(five_queries, capsys):
    argv = ["compare", "--run", str(five_queries / "runs" / "bm25.trec"), "--run", str(five_queries / "runs" / "dense.trec"),
            "--qrels", str(five_queries / "qrels.tsv"), "--metrics", "nDCG@5,P@5", "--n-boot", "200"]
    assert main(argv) == 0
    out = capsys.readouterr().out
    assert "n queries = 5." in out
    rows = [ln for ln in out.splitlines() if ln.startswith(("| nDCG@5 |", "| P@5 |"))]
    assert len(rows) == 2 and all("| undetectable |" in r for r in rows), rows
    assert out.count("With n = 5 queries the exact sign-flip test's smallest p is 0.0625 > 0.05: no difference can "
                     "be significant (MDD: undetectable); use at least 6 queries.") == 1
    assert main([*argv, "--format", "json"]) == 0
    record = json.loads(capsys.readouterr().out)
    assert all(p["mdd"] is None and p["undetectable"] and p["p_floor"] == 0.0625 and p["undetectable_reason"]
               for p in record["pairs"])


def test_an_alpha_no_p_can_reach_is_said_not_computed(capsys):
    """--alpha 5e-324: the t-test's MDD has no critical value (a one-line error, exit 2); the sign-flip
    test's p cannot go below 2 / 2^20 on the example's 20 queries, so its MDD is undetectable."""
    ex = example_path()  # the packaged example
    argv = ["compare", "--run", str(ex / "runs" / "bm25.trec"), "--run", str(ex / "runs" / "dense.trec"),
            "--qrels", str(ex / "qrels" / "test.tsv"), "--metrics", "P@5", "--n-boot", "100", "--alpha", "5e-324"]
    assert main(argv) == 0
    out = capsys.readouterr().out
    assert "| undetectable |" in out and ("With n = 20 queries the exact sign-flip test's smallest p is 1.907e-06 > "
                                           "4.94066e-324: no difference can be significant (MDD: undetectable); no "
                                           "number of queries lets it reach that level.") in out
    assert main([*argv, "--test", "t"]) == 2
