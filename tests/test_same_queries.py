"""Issue #34 item 2 and issue #36: answers on the same queries. `answer --sample N --seed S` draws
the same N queries for every run whatever the files' order; `compare --answers` states every row's
n and, with --judged-only, puts every row on one population; a detectable difference beyond the
measure's range prints as undetectable; a mean over other queries than the other runs' is never
bolded as the best."""

from __future__ import annotations

import json
import random

import numpy as np
import pytest

import udcg
from udcg.cli import main
from udcg.io.sources import example_path
from udcg.io.trec import read_qrels, read_run
from udcg.metrics.compare import CompareTests, compare_scores

FOLDER = example_path()
RUNS = [FOLDER / "runs" / "bm25.trec", FOLDER / "runs" / "dense.trec"]
QRELS = FOLDER / "qrels" / "test.tsv"


def _sample_judged(path, n: int, seed: int = 1) -> list[str]:
    """Judged answers of bm25 and dense on ``n`` queries drawn as `answer --sample` draws them."""
    qids = sorted(read_qrels(QRELS))
    drawn = random.Random(seed).sample(qids, n)
    rng = np.random.default_rng(seed)
    path.write_text("".join(json.dumps({"qid": q, "cid": cid, "outcome": str(rng.choice(["correct", "abstained",
                                                                                          "wrong"]))}) + "\n"
                            for q in drawn for cid in ("bm25", "dense")))
    return drawn


def test_answer_sample_draws_the_same_queries_for_every_run_whatever_the_order(tmp_path, tiny_model_dir, capsys):
    folder = tmp_path / "example"
    assert main(["example", str(folder)]) == 0
    lines = (folder / "queries.jsonl").read_text().splitlines()
    (folder / "queries-reversed.jsonl").write_text("\n".join(reversed(lines)) + "\n")
    picked = []
    for queries in ("queries.jsonl", "queries-reversed.jsonl"):
        out = tmp_path / f"answers-{queries}"
        assert main(["answer", "--corpus", str(folder), "--queries", str(folder / queries), "--run",
                     str(folder / "runs" / "bm25.trec"), "--run", str(folder / "runs" / "dense.trec"), "--sample",
                     "3", "--seed", "5", "--k", "2", "--model", str(tiny_model_dir), "-o", str(out),
                     "--no-progress"]) == 0
        rows = [json.loads(line) for line in out.read_text().splitlines()]
        by_run = {cid: {r["qid"] for r in rows if r["cid"] == cid} for cid in ("bm25", "dense")}
        assert by_run["bm25"] == by_run["dense"] and len(by_run["bm25"]) == 3
        picked.append(by_run["bm25"])
    assert picked[0] == picked[1] == set(random.Random(5).sample(sorted(read_qrels(QRELS)), 3))
    capsys.readouterr()
    base = ["answer", "--corpus", str(folder), "--run", str(folder / "runs" / "bm25.trec"), "--model",
            str(tiny_model_dir), "-o", str(tmp_path / "x.jsonl")]
    assert main([*base, "--sample", "3", "--limit", "3"]) == 2
    assert "--limit and --sample: give one" in capsys.readouterr().err
    assert main([*base, "--sample", "21"]) == 2
    assert "the collection has 20 queries" in capsys.readouterr().err


def test_compare_on_a_sampled_subset_states_every_rows_n(tmp_path, capsys):
    """The issue's table: rates on 6 queries, metrics on 20, one footer saying "n queries = 20"."""
    path = tmp_path / "judged.jsonl"
    _sample_judged(path, 6)
    assert main(["compare", "--run", str(RUNS[0]), "--run", str(RUNS[1]), "--qrels", str(QRELS), "--metrics",
                 "nDCG@5,P@5", "--answers", str(path), "--n-boot", "200"]) == 0
    text = capsys.readouterr().out
    header = text.splitlines()[0]
    assert header == "|  | run | nDCG@5 (n=20) | P@5 (n=20) | correct (n=6) | abstained (n=6) | wrong (n=6) |"
    pairs = [line for line in text.splitlines() if line.startswith(("| nDCG", "| P@5", "| correct", "| abstained",
                                                                    "| wrong"))]
    assert [line.split(" | ")[3] for line in pairs] == ["20", "20", "6", "6", "6"]
    assert "n queries = 20" not in text and "n queries differ by row" in text
    assert "--judged-only puts every row" in text


def test_judged_only_puts_every_row_on_the_judged_queries(tmp_path):
    path = tmp_path / "judged.jsonl"
    drawn = _sample_judged(path, 6)
    cmp = udcg.compare(RUNS, QRELS, metrics="nDCG@5,P@5", answers=path, judged_only=True, n_boot=200)
    assert {c.n for by_m in cmp.cells.values() for c in by_m.values()} == {6} and {t.n for t in cmp.pairs} == {6}
    full = udcg.evaluate(RUNS[0], QRELS, metrics="nDCG@5")
    keep = [full.qids.index(q) for q in sorted(drawn, key=full.qids.index)]
    assert cmp.cells["bm25"]["nDCG@5"].mean == pytest.approx(full.values["nDCG@5"][keep].mean())
    rows = cmp.query_rows()[1]  # the per-query rows: the 6 judged queries, each with its own value
    assert cmp.qids == tuple(full.qids[i] for i in keep) and [r[1] for r in rows if r[0] == "nDCG@5"] == list(cmp.qids)
    assert [r[2] for r in rows if r[0] == "nDCG@5"] == full.values["nDCG@5"][keep].tolist()
    text = cmp.format()
    assert "n queries = 6." in text and "--judged-only: every row (the measures included) on the 6 of 20" in text
    with pytest.raises(udcg.errors.InputError, match="give --answers too"):
        udcg.compare(RUNS, QRELS, metrics="nDCG@5", judged_only=True)


def test_a_detectable_difference_beyond_the_range_is_undetectable(tmp_path):
    """Before: "detectable differences up to 1.57 are printed for a 0-1 rate"."""
    path = tmp_path / "judged.jsonl"
    _sample_judged(path, 6, seed=3)  # 6 queries: the detectable differences of correct and wrong exceed 1
    cmp = udcg.compare(RUNS, QRELS, metrics="nDCG@5", answers=path, judged_only=True, n_boot=200)
    wide = [t for t in cmp.pairs if t.undetectable]
    assert wide and all(t.measure in ("correct", "abstained", "wrong") for t in wide)
    assert cmp.ranges == {"nDCG@5": 1.0, "correct": 1.0, "abstained": 1.0, "wrong": 1.0}
    text = cmp.format()
    assert "| undetectable |" in text and "exceeds the measure's whole range" in text
    assert "undetectable" in cmp.format("csv") and cmp.to_dict()["pairs"][-1]["mdd"] is None
    assert cmp.to_dict()["pairs"][-1]["undetectable"]
    plain = compare_scores({"a": {"x": np.array([0.0, 1, 0, 1, 0, 1])}, "b": {"x": np.array([1.0, 0, 1, 1, 0, 0])}},
                           tests=CompareTests(n_boot=100))  # 6 queries: on 5 the exact test's p cannot go below 0.0625 (test_compare_power)
    assert not plain.pairs[0].undetectable and plain.pairs[0].mdd > 1  # no range given: the number


def test_runs_on_disjoint_queries_get_no_best_mean(tmp_path):
    """Issue #36: per-query values defined on disjoint halves of the queries (NaN on the other half,
    as an answer rate is where a run has no judged answer): the means are over different queries
    and neither is the "best". Since issue #50 a query a run does not rank is an empty ranking for
    every measure (UDCG sigma(0) = 0.5), so two runs over disjoint queries are scored on one population."""
    bm25, dense, qrels = read_run(RUNS[0]), read_run(RUNS[1]), read_qrels(QRELS)
    qs = sorted(bm25)
    first, second = {q: bm25[q] for q in qs[:10]}, {q: dense[q] for q in qs[10:]}
    utilities = {q: {d: 0.8 if qrels.get(q, {}).get(d, 0) > 0 else -0.5 for run in (bm25, dense) for d in run[q]}
                 for q in qs}
    runs = udcg.compare({"first": first, "second": second}, QRELS, utilities=utilities, metrics="UDCG@5,nDCG@5",
                        n_boot=200)
    assert runs.cells["first"]["UDCG@5"].n == runs.cells["second"]["UDCG@5"].n == 20 and runs.same_population("UDCG@5")
    half = np.r_[np.linspace(0.4, 0.6, 10), np.full(10, np.nan)]
    ndcg = np.linspace(0, 1, 20)
    cmp = compare_scores({"first": {"UDCG@5": half, "nDCG@5": ndcg}, "second": {"UDCG@5": half[::-1], "nDCG@5": ndcg ** 2}},
                         tests=CompareTests(n_boot=200))
    assert cmp.cells["first"]["UDCG@5"].n == cmp.cells["second"]["UDCG@5"].n == 10 and cmp.n_shared["UDCG@5"] == 0
    assert not cmp.same_population("UDCG@5") and cmp.same_population("nDCG@5")
    text = cmp.format()
    udcg_cells = [line.split(" | ")[2] for line in text.splitlines()[2:4]]
    assert not any("**" in cell for cell in udcg_cells)  # before: the second run's mean was bold
    assert any("**" in line.split(" | ")[3] for line in text.splitlines()[2:4])  # nDCG@5: one population
    assert "none for UDCG@5: the runs' means there are over different queries" in text


def test_correction_none_prints_no_family_size():
    rng = np.random.default_rng(2)
    cmp = compare_scores({r: {"P@5": rng.integers(0, 6, 12) / 5} for r in "abc"},
                         tests=CompareTests(correction="none", n_boot=100))
    line = next(line for line in cmp.format().splitlines() if line.startswith("Test:"))
    assert "Correction: none (raw p, each comparison at alpha)" in line and "comparisons" not in line.split("none")[1]


def test_answer_subsets_was_samples_and_the_old_spelling_still_works(capsys):
    """Issue #50 item 7: `answer --sample N` (queries drawn) stood beside `--samples N` (random
    subsets per query). The second is now --subsets; --samples still works and says so."""
    from udcg.cli import build_parser

    parser = build_parser()
    new = parser.parse_args(["answer", "--corpus", "c", "--run", "r", "--model", "m", "-o", "o", "--subsets", "3"])
    assert capsys.readouterr().err == ""
    old = parser.parse_args(["answer", "--corpus", "c", "--run", "r", "--model", "m", "-o", "o", "--samples", "3"])
    assert new.samples == old.samples == 3 and new.sample is None
    assert capsys.readouterr().err == "udcg: --samples is deprecated: use --subsets (the same option, renamed)\n"
