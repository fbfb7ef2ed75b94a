"""How many queries a margin needs (``udcg.metrics.planning``; compare --equivalence's "queries
needed"): the detection figure against statsmodels' power solver and against udcg's own MDD on
either side of it, the equivalence figure against a simulation of the TOST, and compare's outputs."""

import csv
import io
import json
import math

import numpy as np
import pytest
from scipy import stats as ss
from statsmodels.stats.power import TTestPower

from udcg.errors import InputError
from udcg.metrics.compare import CompareTests, compare_scores
from udcg.metrics.planning import MAX_QUERIES, queries_to_detect, queries_to_show_equivalence
from udcg.metrics.stats import min_detectable_difference


def _spread(n: int, sd: float) -> np.ndarray:
    """n differences with mean 0 and sample standard deviation exactly sd."""
    z = np.random.default_rng(n).normal(size=n)
    return (z - z.mean()) / z.std(ddof=1) * sd


@pytest.mark.parametrize("sd, margin, alpha, power", [(0.184, 0.03, 0.05, 0.8), (0.0125, 0.005, 0.05, 0.8),
                                                      (0.3, 0.1, 0.01, 0.9), (0.05, 0.04, 0.05 / 3, 0.8),
                                                      (1.0, 2.0, 0.05, 0.8)])
def test_detection_is_statsmodels_power_solution_rounded_up(sd, margin, alpha, power):
    n = queries_to_detect(sd, margin, alpha, power, method="t")  # the sign-flip test's floor: test_compare_power.py
    exact = TTestPower().solve_power(effect_size=margin / sd, alpha=alpha, power=power, alternative="two-sided")
    assert n == max(2, math.ceil(exact - 1e-9))


@pytest.mark.parametrize("sd, margin", [(0.184, 0.03), (0.0125, 0.005), (0.2, 0.15)])
def test_detection_is_the_first_n_whose_mdd_is_within_the_margin(sd, margin):
    n = int(queries_to_detect(sd, margin))
    d = _spread(n, sd)
    assert min_detectable_difference(d, np.zeros(n)) <= margin
    fewer = _spread(n - 1, sd)
    assert n == 2 or min_detectable_difference(fewer, np.zeros(n - 1)) > margin


@pytest.mark.parametrize("sd, margin", [(0.184, 0.03), (1.0, 0.5)])
def test_equivalence_figure_gives_the_tost_its_power_by_simulation(sd, margin):
    """At the planned n, Student's TOST at 0.05 shows equivalence about 80% of the time when the
    true difference is 0 (the figure is a normal-theory approximation: within 3 points); at half
    that n, far less often."""
    n = int(queries_to_show_equivalence(sd, margin))
    rng = np.random.default_rng(0)

    def power(n: int) -> float:
        d = rng.normal(0, sd, size=(20_000, n))
        se = d.std(axis=1, ddof=1) / np.sqrt(n)
        crit = ss.t.isf(0.05, n - 1)
        return float(np.mean(((d.mean(axis=1) + margin) / se > crit) & ((d.mean(axis=1) - margin) / se < -crit)))

    assert abs(power(n) - 0.8) < 0.03
    assert power(n // 2) < 0.6
    assert queries_to_show_equivalence(sd, margin) > queries_to_detect(sd, margin) * 0.9  # about as many or more


def test_wilcoxon_degenerate_and_bad_input():
    assert queries_to_detect(0.2, 0.05, method="wilcoxon") == queries_to_detect(0.2, 0.05 * math.sqrt(3 / math.pi))
    assert math.isnan(queries_to_detect(0.0, 0.05)) and math.isnan(queries_to_show_equivalence(float("nan"), 0.05))
    assert queries_to_detect(1.0, 1e-6) == math.inf and MAX_QUERIES < 8e12  # (2.8 / 1e-6)^2 queries
    with pytest.raises(InputError, match="margin = 0"):
        queries_to_detect(0.1, 0)
    with pytest.raises(InputError, match="power = 1"):
        queries_to_show_equivalence(0.1, 0.05, power=1)
    with pytest.raises(InputError, match="paired test 'z' is unknown"):
        queries_to_detect(0.1, 0.05, method="z")


def test_compare_prints_and_writes_what_an_inconclusive_pair_needs():
    rng = np.random.default_rng(1)
    base = rng.uniform(0, 1, 30)
    scores = {"a": {"M": base + rng.normal(0, 0.05, 30), "N": base}, "b": {"M": base, "N": base + 0.3},
              "c": {"M": base + rng.normal(0, 0.05, 30), "N": base + 0.3 + rng.normal(0, 0.01, 30)}}
    cmp = compare_scores(scores, equivalence={"M": 0.001, "N": 0.2}, tests=CompareTests(n_resamples=2000))
    by = {(t.measure, t.run_a, t.run_b): t for t in cmp.pairs}
    t = by["M", "a", "b"]
    assert t.decision == "inconclusive"
    d = scores["a"]["M"] - scores["b"]["M"]
    assert t.queries_to_detect == queries_to_detect(float(np.std(d, ddof=1)), 0.001, 0.05 / 3, 0.8)
    assert t.queries_for_equivalence == queries_to_show_equivalence(float(np.std(d, ddof=1)), 0.001, 0.05 / 3, 0.8)
    assert t.queries_to_detect > 30
    text = cmp.format()
    assert (f"inconclusive (queries needed: {int(t.queries_to_detect)} to detect ±0.001, "
            f"{int(t.queries_for_equivalence)} to show equivalence)") in text
    assert "Queries needed (inconclusive pairs)" in text
    assert by["N", "a", "b"].decision == "different" and "different (queries" not in text
    small = float(np.std(scores["a"]["N"] - scores["c"]["N"], ddof=1))  # 0.01 against a margin of 0.2: a few
    assert queries_to_detect(small, 0.2, 0.05 / 3, method="t") <= 3
    # but the exact sign-flip test's p cannot go below 0.05 / 3 on fewer than 7 queries (2 / 2^7 < 0.0167)
    assert by["N", "a", "c"].queries_to_detect == queries_to_detect(small, 0.2, 0.05 / 3) == 7
    record = next(p for p in json.loads(cmp.format("json"))["pairs"] if (p["measure"], p["run_a"]) == ("M", "a")
                  and p["run_b"] == "b")
    assert record["queries_to_detect"] == int(t.queries_to_detect)
    rows = [r for r in csv.DictReader(io.StringIO(cmp.format("csv"))) if r["kind"] == "pair"]
    assert rows[0]["queries_for_equivalence"] == str(int(t.queries_for_equivalence))
    assert cmp.to_frame("pairs").loc[("M", "a", "b"), "queries_to_detect"] == t.queries_to_detect
    plain = compare_scores(scores, tests=CompareTests(n_resamples=2000))
    assert all(math.isnan(p.queries_to_detect) for p in plain.pairs)
    assert "queries_to_detect" not in plain.format() and json.loads(plain.format("json"))["pairs"][0][
        "queries_to_detect"] is None
