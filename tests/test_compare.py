"""Run comparison: means, intervals, paired tests with Holm per measure, and the rendered reports
(families, difference intervals and detectable differences: tests/test_compare_families.py)."""

import csv
import io
import json

import numpy as np
import pytest

from udcg.errors import InputError
from udcg.metrics.compare import FORMATS, CompareTests, compare_scores, format_comparison
from udcg.metrics.stats import bootstrap_ci, holm, paired_test


@pytest.fixture(scope="module")
def toy():
    """Three runs on 60 queries: "dense|x" dominates; bm25 and hybrid differ only by noise."""
    rng = np.random.default_rng(0)
    base = rng.uniform(0, 1, 60)
    rr = rng.uniform(0, 1, 60)
    hybrid_rr = rr + rng.normal(0, 0.05, 60)
    hybrid_rr[3] = np.nan  # a query without a value in one run
    return {"bm25": {"nDCG@10": base, "RR": rr},
            "dense|x": {"nDCG@10": base + 0.2 + rng.normal(0, 0.02, 60), "RR": rr + 0.2 + rng.normal(0, 0.02, 60)},
            "hybrid": {"RR": hybrid_rr, "nDCG@10": base + rng.normal(0, 0.05, 60)}}


@pytest.fixture(scope="module")
def cmp(toy):
    return compare_scores(toy, tests=CompareTests(n_resamples=999, n_boot=500))


def test_cells_pairs_and_beats(toy, cmp):
    assert cmp.runs == ("bm25", "dense|x", "hybrid") and cmp.measures == ("nDCG@10", "RR")
    cell = cmp.cells["hybrid"]["RR"]
    assert cell.n == 59 and cell.mean == pytest.approx(np.nanmean(toy["hybrid"]["RR"]))
    full = cmp.cells["bm25"]["RR"]  # no NaN: the same resamples as bootstrap_ci's
    assert (full.low, full.high) == pytest.approx(bootstrap_ci(toy["bm25"]["RR"], 500), abs=1e-12)
    assert len(cmp.pairs) == 3 * 2  # run pairs x measures, Holm within each measure
    for m in cmp.measures:
        family = [t for t in cmp.pairs if t.measure == m]
        assert [t.p_holm for t in family] == pytest.approx(list(holm([t.p for t in family])))
    first = cmp.pairs[0]
    assert (first.measure, first.run_a, first.run_b) == ("nDCG@10", "bm25", "dense|x")
    assert first.p == paired_test(toy["bm25"]["nDCG@10"], toy["dense|x"]["nDCG@10"], n_resamples=999)
    assert first.diff == pytest.approx(-0.2, abs=0.01) and first.significant
    assert cmp.beats["dense|x"] == {"nDCG@10": ["bm25", "hybrid"], "RR": ["bm25", "hybrid"]}
    assert cmp.beats["bm25"] == {"nDCG@10": [], "RR": []} and cmp.beats["hybrid"] == {"nDCG@10": [], "RR": []}
    assert cmp.correction == "measure" and cmp.test == "permutation" and cmp.n_resamples == 999


def test_other_tests_and_determinism(toy, cmp):
    assert compare_scores(toy, tests=CompareTests(n_resamples=999, n_boot=500)) == cmp  # seeded
    for test in ("t", "wilcoxon"):
        other = compare_scores(toy, tests=CompareTests(test=test, n_boot=200))
        assert other.beats["dense|x"]["RR"] == ["bm25", "hybrid"]
        assert other.pairs[0].p == paired_test(toy["bm25"]["nDCG@10"], toy["dense|x"]["nDCG@10"], test)


def test_markdown(cmp):
    text = format_comparison(cmp)
    lines = text.splitlines()
    assert lines[0] == "|  | run | nDCG@10 (n=60) | RR |"  # hybrid's RR lacks a query: rows state their n
    row_b = lines[3]
    assert row_b.startswith(r"| b | dense\|x | **") and row_b.count("ᵃᶜ") == 2  # beats a and c, bold best
    assert row_b.endswith("(n=60) |") and lines[4].endswith("(n=59) |") and "**" not in row_b.split("] ")[-1]
    assert "| nDCG@10 | bm25 | dense\\|x |" in text and "| yes |" in text and "| no |" in text
    footer = text[text.index("Test:"):]
    assert "Test: paired sign-flip permutation test" in footer and "Holm within each measure" in footer
    assert "3 comparisons per family" in footer and "alpha = 0.05" in footer
    assert "n queries differ by row" in lines[-1] and "none for RR: the runs' means there are over different" in lines[-1]
    assert "| measure | run A | run B | n |" in text and "| RR | bm25 | hybrid | 59 |" in text


def test_csv_parses_back(cmp):
    rows = list(csv.DictReader(io.StringIO(format_comparison(cmp, "csv"))))
    cells = [r for r in rows if r["kind"] == "cell"]
    pairs = [r for r in rows if r["kind"] == "pair"]
    assert len(cells) == 3 * 2 and len(pairs) == 6
    dense_rr = next(r for r in cells if r["run"] == "dense|x" and r["measure"] == "RR")
    assert float(dense_rr["mean"]) == cmp.cells["dense|x"]["RR"].mean and dense_rr["beats"] == "bm25 hybrid"
    assert [float(r["p_holm"]) for r in pairs] == [t.p_holm for t in cmp.pairs]


def test_json_parses_back(cmp):
    data = json.loads(format_comparison(cmp, "json"))
    assert data == json.loads(json.dumps(cmp.to_dict()))
    assert data["labels"] == {"bm25": "a", "dense|x": "b", "hybrid": "c"} and data["correction"] == "measure"
    assert data["beats"]["dense|x"]["RR"] == ["bm25", "hybrid"] and len(data["pairs"]) == 6
    assert data["cells"]["hybrid"]["RR"]["n"] == 59


def test_latex(cmp):
    text = format_comparison(cmp, "latex", digits=3)
    assert text.count(r"\begin{tabular}") == 2 and r"\textbf{" in text and "$^{ac}$" in text
    assert r"dense|x" in text and "95\\%" in text
    assert set(FORMATS) == {"markdown", "csv", "json", "latex"}


def test_nan_and_single_run():
    one = compare_scores({"only": {"m": [0.1, np.nan, 0.3]}}, tests=CompareTests(n_boot=50))
    assert one.pairs == () and one.beats == {"only": {"m": []}}
    assert json.loads(format_comparison(one, "json"))["cells"]["only"]["m"]["n"] == 2
    empty = compare_scores({"a": {"m": [np.nan]}, "b": {"m": [np.nan]}}, tests=CompareTests(n_boot=50))
    assert json.loads(format_comparison(empty, "json"))["pairs"][0]["p"] is None  # NaN -> null
    assert "NA" in format_comparison(empty)


def test_bad_input(toy):
    with pytest.raises(InputError, match="3 queries in run 'b' but 2"):
        compare_scores({"a": {"m": [1, 2]}, "b": {"m": [1, 2, 3]}})
    with pytest.raises(InputError, match="permutation, t, wilcoxon"):
        compare_scores(toy, tests=CompareTests(test="sign"))
    with pytest.raises(InputError, match="same measures"):
        compare_scores({"a": {"m": [1.0]}, "b": {"n": [1.0]}})
    with pytest.raises(InputError, match="no runs"):
        compare_scores({})
    with pytest.raises(InputError, match="format"):
        format_comparison(compare_scores({"a": {"m": [1.0]}}, tests=CompareTests(n_boot=10)), "html")


def test_queries_where_a_is_higher_equal_lower():
    """By hand: q1 a > b, q2 equal, q3 equal up to floating-point noise (0.1 + 0.2 vs 0.3), q4 a < b,
    q5 a < b, q6 undefined for b: 1 / 2 / 2 of n = 5, in every rendering."""
    a = [0.5, 0.2, 0.1 + 0.2, 0.3, 0.0, 0.7]
    b = [0.1, 0.2, 0.3, 0.4, 0.1, np.nan]
    cmp = compare_scores({"a": {"m": a}, "b": {"m": b}}, tests=CompareTests(n_boot=50))
    (t,) = cmp.pairs
    assert (t.n, t.a_higher, t.equal, t.b_higher) == (5, 1, 2, 2)
    assert "| m | a | b | 5 | " in format_comparison(cmp) and " | 1 / 2 / 2 | " in format_comparison(cmp)
    assert "queries A > / = / < B" in format_comparison(cmp)
    (row,) = [r for r in csv.DictReader(io.StringIO(format_comparison(cmp, "csv"))) if r["kind"] == "pair"]
    assert (row["a_higher"], row["equal"], row["b_higher"]) == ("1", "2", "2")
    (pair,) = json.loads(format_comparison(cmp, "json"))["pairs"]
    assert (pair["a_higher"], pair["equal"], pair["b_higher"]) == (1, 2, 2)
    latex = format_comparison(cmp, "latex")
    assert "1 / 2 / 2" in latex and r"queries A \textgreater{} / = / \textless{} B" in latex
    assert "<" not in latex and ">" not in latex  # in LaTeX's default OT1 text font they print as ¡ and ¿
    swapped = compare_scores({"b": {"m": b}, "a": {"m": a}}, tests=CompareTests(n_boot=50)).pairs[0]
    assert (swapped.a_higher, swapped.equal, swapped.b_higher) == (2, 2, 1)


def test_higher_equal_lower_partition_the_pairs_queries(toy, cmp):
    """Property: the three counts add up to n and agree with the sign of every paired difference."""
    for t in cmp.pairs:
        d = np.asarray(toy[t.run_a][t.measure]) - np.asarray(toy[t.run_b][t.measure])
        d = d[~np.isnan(d)]
        assert t.a_higher + t.equal + t.b_higher == t.n == len(d)
        assert (t.a_higher, t.b_higher) == (sum(x > 0 for x in d), sum(x < 0 for x in d))  # no exact ties here


def _tie_toy():
    rng = np.random.default_rng(7)
    tie = {"a": np.array([1.0, 0.5, 0.5, 0.0, 1.0, 0.5, 0.0, 1.0, np.nan, 0.5]),
           "b": np.array([1.0, 0.5, 0.0, 0.0, 1.0, 0.5, 0.0, 0.5, 0.5, 0.5]),
           "c": np.array([1.0, 1.0, 0.5, 0.0, 0.0, 0.5, 0.0, 1.0, 0.5, 0.5])}
    return {r: {"nDCG@5": tie[r], "UDCG@5": rng.uniform(0.45, 0.55, 10), "P@5": np.round(rng.uniform(0, 1, 10), 1)}
            for r in "abc"}


def test_where_a_measure_ties_each_pair_is_compared_on_its_tied_queries():
    """By hand: a and b tie on nDCG@5 at queries 0, 1, 3, 4, 5, 6, 9 (query 8 is undefined for a),
    so the tie table's a-b row is compare_scores on those seven queries alone; Holm runs over the
    three pairs of each measure, and the tie measure itself has no row."""
    scores = _tie_toy()
    cmp = compare_scores(scores, tests=CompareTests(n_boot=200), ties="nDCG@5")
    assert cmp.ties_of == "nDCG@5" and {t.measure for t in cmp.tie_pairs} == {"UDCG@5", "P@5"}
    assert [(t.measure, t.run_a, t.run_b) for t in cmp.tie_pairs][:3] == [("UDCG@5", "a", "b"), ("UDCG@5", "a", "c"),
                                                                          ("UDCG@5", "b", "c")]
    tied = [0, 1, 3, 4, 5, 6, 9]
    alone = compare_scores({r: {"UDCG@5": scores[r]["UDCG@5"][tied]} for r in "ab"}, tests=CompareTests(n_boot=200))
    (ab,), (ref,) = [t for t in cmp.tie_pairs if t.measure == "UDCG@5" and t.run_b == "b"], alone.pairs
    assert ab.n == 7 and (ab.diff, ab.p, ab.low, ab.high) == pytest.approx((ref.diff, ref.p, ref.low, ref.high))
    assert (ab.a_higher, ab.equal, ab.b_higher) == (ref.a_higher, ref.equal, ref.b_higher)
    udcg_rows = [t for t in cmp.tie_pairs if t.measure == "UDCG@5"]
    assert [t.p_holm for t in udcg_rows] == pytest.approx(list(holm([t.p for t in udcg_rows])))
    assert cmp.tie_family_sizes == {"UDCG@5": 3, "P@5": 3} and cmp.tie_mdd_alpha["UDCG@5"] == pytest.approx(0.05 / 3)
    assert [t.n for t in cmp.tie_pairs if t.measure == "P@5"] == [7, 7, 6]  # a-c: 0, 2, 3, 5, 6, 7, 9; b-c: 0, 3, 5, 6, 8, 9
    plain = compare_scores(scores, tests=CompareTests(n_boot=200))
    assert cmp.to_dict()["pairs"] == plain.to_dict()["pairs"]  # the main table: untouched


def test_the_tie_table_in_every_rendering():
    cmp = compare_scores(_tie_toy(), tests=CompareTests(n_boot=200), ties="nDCG@5")
    text = format_comparison(cmp)
    assert "Where nDCG@5 ties: each run pair on the queries where its two runs' nDCG@5 values are equal:" in text
    assert "| measure | run A | run B | queries tied on nDCG@5 | mean diff" in text and "| UDCG@5 | a | b | 7 |" in text
    assert "Holm over the run pairs of each measure in this table (3 per family)" in text
    rows = list(csv.DictReader(io.StringIO(format_comparison(cmp, "csv"))))
    ties = [r for r in rows if r["kind"] == "tie-pair"]
    assert len(ties) == 6 and {r["tied_on"] for r in ties} == {"nDCG@5"} and ties[0]["n"] == "7"
    assert all(r["tied_on"] == "" for r in rows if r["kind"] != "tie-pair")
    data = json.loads(format_comparison(cmp, "json"))
    assert data["ties_of"] == "nDCG@5" and len(data["tie_pairs"]) == 6 and data["tie_pairs"][0]["family_size"] == 3
    assert r"queries tied on nDCG@5" in format_comparison(cmp, "latex")
    frame = cmp.to_frame("ties")
    assert frame.loc[("UDCG@5", "a", "b"), "n"] == 7 and set(cmp.to_frames()) == {"runs", "pairs", "ties"}
    plain = compare_scores(_tie_toy(), tests=CompareTests(n_boot=200))
    assert "Where" not in format_comparison(plain) and json.loads(format_comparison(plain, "json"))["ties_of"] is None
    with pytest.raises(InputError, match="ties = 'MAP' is not one of the measures compared"):
        compare_scores(_tie_toy(), tests=CompareTests(n_boot=200), ties="MAP")
    with pytest.raises(InputError, match="ties = 'm' is the only measure compared"):
        compare_scores({"a": {"m": [0.1, 0.2]}, "b": {"m": [0.1, 0.3]}}, tests=CompareTests(n_boot=200), ties="m")


def test_equivalence_decisions_in_every_rendering():
    """Four pairs built for the four decisions (margin 0.01, 40 queries): b = a + 0 noise-only
    (equivalent), c = a + 0.05 (different), d = a + 0.003 with tiny noise (different, within the
    margin); and, with 6 queries and wide noise, inconclusive. p_TOST is equivalence_pvalues'
    and Holm runs over the equivalence tests of each measure."""
    from udcg.metrics.equivalence import equivalence_pvalues

    rng = np.random.default_rng(5)
    a = rng.uniform(0.3, 0.7, 40)
    scores = {"a": {"m": a}, "b": {"m": a + rng.normal(0, 0.002, 40)}, "c": {"m": a + 0.05 + rng.normal(0, 0.002, 40)},
              "d": {"m": a + 0.003 + rng.normal(0, 0.0005, 40)}}
    cmp = compare_scores(scores, tests=CompareTests(n_boot=200, n_resamples=2000), equivalence={"m": 0.01})
    by = {(t.run_a, t.run_b): t for t in cmp.pairs}
    assert by["a", "b"].decision == "equivalent within ±0.01" and not by["a", "b"].significant
    assert by["a", "c"].decision == "different" and not by["a", "c"].equivalent
    assert by["a", "d"].decision == "different, within ±0.01"
    raw = equivalence_pvalues([scores[t.run_a]["m"] - scores[t.run_b]["m"] for t in cmp.pairs], [0.01] * 6,
                              n_resamples=2000, exact_max_n=0)
    assert [t.p_tost for t in cmp.pairs] == pytest.approx(raw)
    assert [t.p_tost_holm for t in cmp.pairs] == pytest.approx(list(holm(raw)))
    few = compare_scores({"a": {"m": a[:6]}, "b": {"m": a[:6] + rng.normal(0, 0.05, 6)}},
                         tests=CompareTests(n_boot=200), equivalence={"m": 0.01})
    assert few.pairs[0].decision == "inconclusive"
    text = format_comparison(cmp)
    assert "| equivalence: ±margin, p (TOST, Holm) | decision |" in text and "| ±0.01: " in text
    assert "Equivalence: margins ±0.01; two one-sided tests" in text
    rows = [r for r in csv.DictReader(io.StringIO(format_comparison(cmp, "csv"))) if r["kind"] == "pair"]
    assert {r["decision"] for r in rows} >= {"different", "equivalent within ±0.01", "different, within ±0.01"}
    assert all(r["margin"] == "0.01" and r["equivalent"] in ("yes", "no") for r in rows)
    pairs = json.loads(format_comparison(cmp, "json"))["pairs"]
    assert pairs[0]["decision"] == by["a", "b"].decision and pairs[0]["margin"] == 0.01
    assert r"$\pm$0.01" in format_comparison(cmp, "latex")
    assert cmp.to_frame("pairs").loc[("m", "a", "c"), "decision"] == "different"
    plain = compare_scores(scores, tests=CompareTests(n_boot=200, n_resamples=2000))
    assert "decision" not in format_comparison(plain) and plain.pairs[0].decision == ""
    assert json.loads(format_comparison(plain, "json"))["pairs"][0]["decision"] is None
    with pytest.raises(InputError, match="equivalence margins for x: not among the measures"):
        compare_scores(scores, tests=CompareTests(n_boot=200), equivalence={"x": 0.01})
