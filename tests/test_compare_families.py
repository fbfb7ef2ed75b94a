"""compare: the Holm family (per measure by default), the paired difference's interval from the same
resampled queries as the run intervals, the minimum detectable difference, the permutation p against
scipy on a tied discrete measure, the exact-or-random choice, and every output naming the family."""

import csv
import io
import json

import numpy as np
import pytest
from scipy import stats as ss

import udcg
from udcg.cli import main
from udcg.errors import InputError
from udcg.metrics import compare as compare_module
from udcg.metrics.compare import CompareTests, compare_scores
from udcg.metrics.stats import (bootstrap_ci, bootstrap_means, holm, min_detectable_difference,
                                paired_permutation_test, paired_test, sign_flip_pvalues,
                                percentile_interval)


def _runs(n=40, seed=0, measures=("A", "B", "C")):
    """Three runs; on every measure run x is better than y by about 0.1, z equals y plus noise."""
    rng = np.random.default_rng(seed)
    out = {"x": {}, "y": {}, "z": {}}
    for j, m in enumerate(measures):
        base = rng.uniform(0, 1, n)
        out["y"][m] = base
        out["x"][m] = base + 0.1 + rng.normal(0, 0.15 + 0.05 * j, n)
        out["z"][m] = base + rng.normal(0, 0.1, n)
    return out


def _subset(scores, measures):
    return {r: {m: v for m, v in by_m.items() if m in measures} for r, by_m in scores.items()}


def _p_holm(cmp, measure):
    return [t.p_holm for t in cmp.pairs if t.measure == measure]


def test_per_measure_family_does_not_move_when_a_measure_is_added():
    scores = _runs()
    two = compare_scores(_subset(scores, {"A", "B"}), tests=CompareTests(n_boot=200, n_resamples=999))
    three = compare_scores(scores, tests=CompareTests(n_boot=200, n_resamples=999))
    assert two.correction == three.correction == "measure"
    assert _p_holm(two, "A") == _p_holm(three, "A") and _p_holm(two, "B") == _p_holm(three, "B")
    assert three.family_sizes == {"A": 3, "B": 3, "C": 3}
    for m in ("A", "B", "C"):
        assert _p_holm(three, m) == pytest.approx(list(holm([t.p for t in three.pairs if t.measure == m])))


def test_table_family_moves_when_a_measure_is_added():
    scores = _runs()
    two = compare_scores(_subset(scores, {"A", "B"}), tests=CompareTests(n_boot=200, n_resamples=999, correction="table"))
    three = compare_scores(scores, tests=CompareTests(n_boot=200, n_resamples=999, correction="table"))
    assert two.family_sizes["A"] == 6 and three.family_sizes["A"] == 9
    assert _p_holm(two, "A") != _p_holm(three, "A")
    assert [t.p_holm for t in three.pairs] == pytest.approx(list(holm([t.p for t in three.pairs])))
    # the raw p-values are the same whatever the family
    assert [t.p for t in two.pairs if t.measure == "A"] == [t.p for t in three.pairs if t.measure == "A"]


def test_no_correction_uses_the_raw_p():
    cmp = compare_scores(_runs(), tests=CompareTests(n_boot=200, n_resamples=999, correction="none"))
    assert all(np.isnan(t.p_holm) for t in cmp.pairs)
    assert all(t.significant == (t.p < 0.05) for t in cmp.pairs)
    assert cmp.mdd_alpha == {"A": 0.05, "B": 0.05, "C": 0.05}
    # issue #34: no family size without a correction (before: "none (9 comparisons, each at alpha)")
    assert "p (Holm" not in cmp.format() and "Correction: none (raw p, each comparison at alpha)" in cmp.format()
    assert "famil" not in cmp.format().split("Correction:")[1].split("\n")[0]
    with pytest.raises(InputError, match="measure, table, none"):
        compare_scores(_runs(), tests=CompareTests(correction="bonferroni"))


@pytest.mark.parametrize("correction, words", [
    ("measure", ["Holm within each measure", "3 families", "3 comparisons per family"]),
    ("table", ["Holm over the whole table", "9 comparisons"]),
])
def test_every_format_names_the_family_the_test_and_the_count(correction, words):
    cmp = compare_scores(_runs(), tests=CompareTests(n_boot=200, n_resamples=999, correction=correction))
    for fmt in ("markdown", "latex"):
        text = cmp.format(fmt)
        assert "sign-flip permutation test" in text and all(w in text for w in words), (fmt, text)
    data = json.loads(cmp.format("json"))
    assert data["correction"] == correction and data["test_label"] == "permutation-random"
    assert set(data["family_sizes"].values()) == {3 if correction == "measure" else 9}
    assert all(w in " ".join(data["footer"]) for w in words)
    assert all(p["family_size"] == data["family_sizes"][p["measure"]] for p in data["pairs"])
    pairs = [r for r in csv.DictReader(io.StringIO(cmp.format("csv"))) if r["kind"] == "pair"]
    assert {r["correction"] for r in pairs} == {correction} and {r["test"] for r in pairs} == {"permutation-random"}
    assert {int(r["family_size"]) for r in pairs} == {3 if correction == "measure" else 9}
    assert cmp.to_dict()["footer"] == data["footer"]


def test_difference_interval_comes_from_the_run_intervals_resamples():
    scores = _runs(n=30)
    cmp = compare_scores(scores, tests=CompareTests(n_boot=400, seed=7))
    x, y = scores["x"]["A"], scores["y"]["A"]
    # a naive loop over the same index matrix: one draw of (n_boot, n) query indices
    idx = np.random.default_rng(7).integers(0, 30, size=(400, 30))
    mx, my = x[idx].mean(1), y[idx].mean(1)
    assert (cmp.cells["x"]["A"].low, cmp.cells["x"]["A"].high) == pytest.approx(percentile_interval(mx), abs=1e-12)
    assert (cmp.cells["x"]["A"].low, cmp.cells["x"]["A"].high) == pytest.approx(bootstrap_ci(x, 400, seed=7), abs=1e-12)
    pair = next(t for t in cmp.pairs if (t.measure, t.run_a, t.run_b) == ("A", "x", "y"))
    assert (pair.low, pair.high) == pytest.approx(percentile_interval(mx - my), abs=1e-12)
    assert (pair.low, pair.high) == pytest.approx(percentile_interval((x - y)[idx].mean(1)), abs=1e-12)
    assert pair.low < pair.diff < pair.high and pair.n == 30


def test_difference_interval_with_undefined_queries():
    scores = _runs(n=30)
    x = scores["x"]["A"].copy()
    x[[2, 5]] = np.nan
    scores["x"]["A"] = x
    cmp = compare_scores(scores, tests=CompareTests(n_boot=300, seed=1))
    pair = next(t for t in cmp.pairs if (t.measure, t.run_a, t.run_b) == ("A", "x", "y"))
    d = x - scores["y"]["A"]
    idx = np.random.default_rng(1).integers(0, 30, size=(300, 30))
    expected = np.nanmean(d[idx], axis=1)  # each resample: the mean over its drawn queries where d is defined
    assert (pair.low, pair.high) == pytest.approx(percentile_interval(expected), abs=1e-12)
    assert pair.n == 28 and pair.diff == pytest.approx(np.nanmean(d))
    cell = cmp.cells["x"]["A"]
    assert (cell.low, cell.high) == pytest.approx(percentile_interval(np.nanmean(x[idx], axis=1)), abs=1e-12)
    # the kernel: one product for many columns, the same resamples for each
    both = bootstrap_means(np.column_stack([x, scores["y"]["A"]]), 300, 1)
    assert both[:, 1] == pytest.approx(scores["y"]["A"][idx].mean(1))


def test_mdd_follows_the_t_power_formula_and_the_family_level():
    rng = np.random.default_rng(3)
    a, b = rng.normal(0.5, 0.3, 50), rng.normal(0.5, 0.3, 50)
    sd, n = np.std(a - b, ddof=1), 50
    mdd = min_detectable_difference(a, b, 0.05, 0.8)
    approx = (ss.t.ppf(0.975, n - 1) + ss.t.ppf(0.8, n - 1)) * sd / np.sqrt(n)
    assert mdd == pytest.approx(approx, rel=0.01)
    # the exact noncentral-t power at the MDD is the power asked for
    nc = mdd * np.sqrt(n) / sd
    crit = ss.t.ppf(0.975, n - 1)
    assert ss.nct.sf(crit, n - 1, nc) + ss.nct.cdf(-crit, n - 1, nc) == pytest.approx(0.8, abs=1e-6)
    assert min_detectable_difference(a, b, 0.05 / 3) > mdd  # Holm's strictest step of a family of 3
    assert min_detectable_difference(a, b, method="wilcoxon") == pytest.approx(mdd / np.sqrt(3 / np.pi))
    assert np.isnan(min_detectable_difference([1.0, 2.0], [0.0, 1.0]))  # the differences do not vary
    assert np.isnan(min_detectable_difference([1.0], [0.0]))
    for n in (2, 3, 4):  # few degrees of freedom: scipy's far tail is NaN there, the MDD is not
        assert np.isfinite(min_detectable_difference(np.arange(1.0, n + 1), np.zeros(n), 0.05 / 3))
    cmp = compare_scores(_runs(), tests=CompareTests(n_boot=200, n_resamples=999))
    pair = cmp.pairs[0]
    assert cmp.mdd_alpha["A"] == pytest.approx(0.05 / 3)
    assert pair.mdd == min_detectable_difference(_runs()["x"]["A"], _runs()["y"]["A"], 0.05 / 3, 0.8)


def test_sign_flip_test_has_about_the_stated_power_at_the_mdd():
    """Simulation: differences with the spread of a sample, shifted to a true mean = MDD."""
    rng = np.random.default_rng(11)
    n, sd = 30, 0.2
    sample = rng.normal(0, sd, n)
    mdd = min_detectable_difference(sample, np.zeros(n))
    hits = [paired_test(rng.normal(mdd, np.std(sample, ddof=1), n), np.zeros(n), n_resamples=499, seed=i) < 0.05
            for i in range(400)]
    assert np.mean(hits) == pytest.approx(0.8, abs=0.07)


@pytest.mark.parametrize("n, seed", [(12, 0), (16, 1), (20, 2)])
def test_permutation_p_equals_scipy_on_a_tied_discrete_measure(n, seed):
    """P@5 takes values in {0, .2, ..., 1}: many equal |d| and null statistics tied with the observed one."""
    rng = np.random.default_rng(seed)
    a = rng.integers(0, 6, n) / 5
    b = np.clip(a - rng.choice([0, 0, 0.2, 0.4, -0.2], n), 0, 1)
    d = a - b
    theirs = ss.permutation_test((d,), lambda x, axis: np.mean(x, axis=axis), vectorized=True, n_resamples=np.inf,
                                 permutation_type="samples", alternative="two-sided").pvalue
    assert paired_test(a, b) == theirs  # the same arithmetic on the ties: equal, not just close
    cmp = compare_scores({"a": {"P@5": a}, "b": {"P@5": b}}, tests=CompareTests(n_boot=100))
    assert cmp.pairs[0].p == theirs and cmp.exact and json.loads(cmp.format("json"))["test_label"] == "permutation-exact"
    assert "exact (all 2^n sign flips)" in cmp.format()


def test_many_exact_pairs_switch_to_seeded_random_flips(monkeypatch):
    rng = np.random.default_rng(4)
    scores = {f"r{i}": {"P@5": rng.integers(0, 6, 20) / 5} for i in range(4)}  # 6 pairs at n = 20
    assert compare_scores(scores, tests=CompareTests(n_boot=100)).exact
    monkeypatch.setattr(compare_module, "EXACT_BUDGET", 5 * 2**20)  # room for 5 pairs of 2^20 sums only
    cmp = compare_scores(scores, tests=CompareTests(n_boot=100, n_resamples=999))
    assert not cmp.exact
    assert [t.p for t in cmp.pairs] == [paired_test(scores[t.run_a]["P@5"], scores[t.run_b]["P@5"], n_resamples=999,
                                                    exact_max_n=0) for t in cmp.pairs]
    text = cmp.format()
    assert "999 random sign flips, seed 0, for every pair" in text and "more than a few seconds" in text
    assert json.loads(cmp.format("json"))["test_label"] == "permutation-random"


def test_pair_rows_in_frames_and_the_old_frame_kept():
    pytest.importorskip("pandas")
    cmp = compare_scores(_runs(), tests=CompareTests(n_boot=200, n_resamples=999))
    runs = cmp.to_frame()
    assert runs.index.names == ["run", "measure"] and list(runs.columns) == ["mean", "low", "high", "n", "beats"]
    pairs = cmp.to_frame("pairs")
    assert pairs.index.names == ["measure", "run_a", "run_b"] and len(pairs) == 9
    row = pairs.loc[("A", "x", "y")]
    first = cmp.pairs[0]
    assert (row["diff"], row["low"], row["high"], row["mdd"], row["p"]) == (first.diff, first.low, first.high,
                                                                            first.mdd, first.p)
    frames = cmp.to_frames()
    assert frames["runs"].equals(runs) and frames["pairs"].equals(pairs)
    with pytest.raises(InputError, match="'runs', 'pairs', 'ties' or 'queries'"):
        cmp.to_frame("cells")


def test_cli_correction_option(tmp_path, capsys):
    from udcg.io.sources import example_path

    folder = example_path()
    args = ["compare", "--run", str(folder / "runs" / "bm25.trec"), "--run", str(folder / "runs" / "dense.trec"),
            "--run", str(folder / "runs" / "hybrid.trec"), "--qrels", str(folder / "qrels" / "test.tsv"),
            "--metrics", "nDCG@5,P@5,RR@5", "--n-boot", "200"]
    assert main(args + ["-o", str(tmp_path / "m.json")]) == 0
    assert "Holm within each measure" in capsys.readouterr().out
    assert main(args + ["--correction", "table", "-o", str(tmp_path / "t.csv")]) == 0
    rows = list(csv.DictReader((tmp_path / "t.csv").open()))
    assert {r["correction"] for r in rows if r["kind"] == "pair"} == {"table"}
    assert {r["family_size"] for r in rows if r["kind"] == "pair"} <= {"9", "8", "7", "6"}
    per_measure = json.loads((tmp_path / "m.json").read_text())
    assert per_measure["correction"] == "measure" and all(p["mdd"] is None or p["mdd"] > 0
                                                           for p in per_measure["pairs"])
    with pytest.raises(SystemExit) as exit_:  # argparse's choices: exit 2 with the choices named
        main(args + ["--correction", "family"])
    assert exit_.value.code == 2 and "measure, table, none" in capsys.readouterr().err.replace("'", "")


def _naive_random_p(d, n_resamples, seed):
    """The random regime written out: the differences in canonical (sorted) order, one draw of all
    sign vectors (bit i of each row's random 32-bit words flips the i-th), scipy's statistic and counting."""
    d = np.sort(d)
    words = np.random.default_rng(seed).integers(0, 1 << 32, size=(n_resamples, (len(d) + 31) // 32), dtype=np.uint32)
    bits = np.array([[(int(w[i // 32]) >> (i % 32)) & 1 for i in range(len(d))] for w in words])
    null = ((1.0 - 2.0 * bits) * d).mean(axis=1)
    observed = d.mean()
    gamma = abs(np.finfo(float).eps * 100 * observed)
    less, greater = np.count_nonzero(null <= observed + gamma), np.count_nonzero(null >= observed - gamma)
    return min(1.0, 2 * min((less + 1) / (n_resamples + 1), (greater + 1) / (n_resamples + 1)))


def test_batched_sign_flips_equal_one_by_one_and_a_naive_loop():
    rng = np.random.default_rng(8)
    ds = [rng.integers(-2, 3, 30) / 5, rng.normal(0.1, 1, 30), rng.integers(-1, 2, 45) / 5, np.zeros(30),
          np.array([]), rng.integers(-2, 3, 10) / 5, rng.integers(-1, 2, 30) / 5]
    batch = sign_flip_pvalues(ds, 999, 3)
    single = [paired_permutation_test(d, np.zeros(len(d)), 999, 3) for d in ds]
    assert np.allclose(batch, single, rtol=0, atol=0, equal_nan=True)
    for d, p in zip(ds, batch):
        if len(d) > 24 and np.any(d):
            assert p == _naive_random_p(d, 999, 3)
    assert batch[3] == 1.0 and np.isnan(batch[4])


def test_cli_ties_option(tmp_path, capsys):
    """--ties nDCG@5 on the packaged runs (no utilities needed: P@5 beside it) adds the tie table;
    a measure not compared is one line, exit 2, before any output."""
    from udcg.io.sources import example_path

    folder = example_path()
    args = ["compare", "--run", str(folder / "runs" / "bm25.trec"), "--run", str(folder / "runs" / "dense.trec"),
            "--qrels", str(folder / "qrels" / "test.tsv"), "--metrics", "nDCG@5,P@5,MRR@5", "--n-boot", "200"]
    assert main(args + ["--ties", "ndcg@5"]) == 0
    out = capsys.readouterr().out
    assert main(args + ["--ties", "ndcg@5", "-o", str(tmp_path / "t.json")]) == 0
    assert "Where nDCG@5 ties" in out and "| P@5 | bm25 | dense | 18 |" in out and "| RR@5 | bm25 | dense | 18 |" in out
    data = json.loads((tmp_path / "t.json").read_text())
    assert data["ties_of"] == "nDCG@5" and [p["n"] for p in data["tie_pairs"]] == [18, 18]
    assert main(args + ["--ties", "MAP", "-o", str(tmp_path / "u.json")]) == 2
    err = capsys.readouterr().err
    assert "--ties MAP: not one of the measures compared (nDCG@5, P@5, RR@5)" in err and not (tmp_path / "u.json").exists()
    assert main(args[:-4] + ["--metrics", "nDCG@5", "--ties", "nDCG@5"]) == 2  # nothing else to compare on its ties
    assert "--ties nDCG@5: the only row compared" in capsys.readouterr().err
    with pytest.raises(InputError, match="ties: give a str or None"):
        udcg.compare([str(folder / "runs" / "bm25.trec"), str(folder / "runs" / "dense.trec")],
                     str(folder / "qrels" / "test.tsv"), metrics="nDCG@5", ties=5)


def test_cli_equivalence_option(tmp_path, capsys):
    """--equivalence: one number for every row or ROW=MARGIN pairs (any spelling); the API takes a
    dict too; a bad margin or row is one line, exit 2, nothing written."""
    from udcg.io.sources import example_path

    folder = example_path()
    runs = [str(folder / "runs" / f"{n}.trec") for n in ("bm25", "dense")]
    args = ["compare", "--run", runs[0], "--run", runs[1], "--qrels", str(folder / "qrels" / "test.tsv"),
            "--metrics", "nDCG@5,P@5", "--n-boot", "200"]
    assert main(args + ["--equivalence", "ndcg@5=0.3", "-o", str(tmp_path / "e.json")]) == 0
    capsys.readouterr()
    pairs = {p["measure"]: p for p in json.loads((tmp_path / "e.json").read_text())["pairs"]}
    assert pairs["nDCG@5"]["margin"] == 0.3 and pairs["P@5"]["decision"] is None
    # nDCG@5 differs on 2 of 20 queries by 0.5 and 1.0 (mean 0.1): within 0.3 by the exact TOST
    assert pairs["nDCG@5"]["decision"] == "equivalent within ±0.3" and pairs["nDCG@5"]["p_tost"] < 0.05
    assert main(args + ["--equivalence", "0.3"]) == 0
    out = capsys.readouterr().out
    assert out.count("| ±0.3: ") == 2
    api = udcg.compare(runs, str(folder / "qrels" / "test.tsv"), metrics="nDCG@5,P@5", n_boot=200,
                       equivalence={"nDCG@5": 0.3})
    assert api.to_dict()["pairs"] == json.loads((tmp_path / "e.json").read_text())["pairs"]
    for bad, words in (("0", "--equivalence 0: the margin must be a positive number"), ("MAP=0.1", "MAP: not one of the rows"),
                       ("nDCG@5", "nDCG@5: give one number for every row (e.g. 0.01) or ROW=MARGIN"), ("P@5=inf", "P@5=inf: the margin must be")):
        assert main(args + ["--equivalence", bad, "-o", str(tmp_path / "bad.json")]) == 2
        err = capsys.readouterr().err
        assert words in err and err.count("\n") == 1 and not (tmp_path / "bad.json").exists(), (bad, err)
