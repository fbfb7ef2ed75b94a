"""compare --answers: the judged answers' correct / abstained / wrong rates beside the metrics, with the
same paired tests, intervals and detectable differences; the errors for a file that does not fit;
answer --limit and its queries-file error."""

import json

import numpy as np
import pytest

import udcg
from udcg.cli import main
from udcg.errors import InputError
from udcg.io.sources import example_path
from udcg.metrics.stats import min_detectable_difference, paired_test

FOLDER = example_path()
RUNS = [FOLDER / "runs" / "bm25.trec", FOLDER / "runs" / "dense.trec"]
QRELS = FOLDER / "qrels" / "test.tsv"
LABELS = ("correct", "abstained", "wrong")


@pytest.fixture(scope="module")
def qids():
    return udcg.score_runs({"bm25": RUNS[0]}, QRELS, metrics="P@5")["bm25"].qids


def _judged(path, qids, seed=0, skip=(), extra=()):
    """Judged answers for bm25 and dense on every query (but ``skip``), plus sample contexts."""
    rng = np.random.default_rng(seed)
    rows = []
    for q in qids:
        for cid in ("bm25", "dense", "sample-0", "sample-1"):
            if (q, cid) not in skip:
                rows.append({"qid": q, "cid": cid, "run": cid.split("-")[0], "answer": "x",
                             "outcome": str(rng.choice(LABELS))})
    rows += list(extra)
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return rows


def test_rates_beside_the_metrics(tmp_path, qids):
    path = tmp_path / "judged.jsonl"
    rows = _judged(path, qids, skip={(qids[0], "dense")},
                   extra=[{"qid": qids[1], "cid": "hybrid", "outcome": "correct"}])  # a run not compared: ignored
    unparseable = next(r for r in rows if (r["qid"], r["cid"]) == (qids[1], "bm25"))
    unparseable["outcome"] = None  # an unparseable judgement: left out
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    cmp = udcg.compare(RUNS, QRELS, metrics="nDCG@5,P@5", answers=path, n_boot=300)
    assert cmp.measures == ("nDCG@5", "P@5", *LABELS)
    want = {run: {label: np.full(len(qids), np.nan) for label in LABELS} for run in ("bm25", "dense")}
    for r in rows:
        if r["cid"] in want and r["outcome"] is not None:
            for label in LABELS:
                want[r["cid"]][label][qids.index(r["qid"])] = float(r["outcome"] == label)
    for run in ("bm25", "dense"):
        for label in LABELS:
            assert cmp.cells[run][label].mean == pytest.approx(np.nanmean(want[run][label]))
            assert cmp.cells[run][label].n == len(qids) - 1
    for label in LABELS:
        pair = next(t for t in cmp.pairs if t.measure == label)
        a, b = want["bm25"][label], want["dense"][label]
        assert pair.p == paired_test(a, b, n_resamples=10_000)
        assert pair.n == len(qids) - 2 and pair.diff == pytest.approx(np.nanmean(a - b))
        assert pair.mdd == min_detectable_difference(a, b, 0.05, 0.8)
        assert np.isnan(pair.low) or pair.low <= pair.diff <= pair.high
    assert cmp.family_sizes["correct"] == 1  # each outcome rate is its own family
    text = cmp.format()
    assert "| correct |" in text and "judged in judged.jsonl" in text
    assert f"bm25 {len(qids) - 1} of {len(qids)} (1 unparseable left out)" in text and f"dense {len(qids) - 1} of" in text


def test_cli_prints_the_rate_rows(tmp_path, qids, capsys):
    path = tmp_path / "judged.jsonl"
    _judged(path, qids)
    argv = ["compare", "--run", str(RUNS[0]), "--run", str(RUNS[1]), "--qrels", str(QRELS), "--metrics", "P@5",
            "--answers", str(path), "--n-boot", "200"]
    assert main(argv) == 0
    out = capsys.readouterr().out
    assert "| correct |" in out and "| abstained |" in out and "| wrong |" in out
    # the answer rows' MDD is said to be the detectable difference, and where to plan for another
    assert "their MDD is the difference in correct rate these queries could detect (`udcg answer --detect D`" in out
    assert main(argv + ["-o", str(tmp_path / "t.json")]) == 0
    data = json.loads((tmp_path / "t.json").read_text())
    assert data["measures"] == ["P@5", *LABELS] and data["cells"]["bm25"]["correct"]["n"] == len(qids)


def _error(tmp_path, capsys, rows, runs=RUNS):
    path = tmp_path / "judged.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    argv = ["compare", *[a for r in runs for a in ("--run", str(r))], "--qrels", str(QRELS), "--metrics", "P@5",
            "--answers", str(path), "--n-boot", "100"]
    assert main(argv) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1, err
    with pytest.raises(InputError):
        udcg.compare(runs, QRELS, metrics="P@5", answers=path, n_boot=100)
    return err


def test_a_run_without_judged_answers(tmp_path, qids, capsys):
    rows = [{"qid": q, "cid": "bm25", "outcome": "correct"} for q in qids]
    rows += [{"qid": q, "cid": "sample-0", "outcome": "wrong"} for q in qids]
    err = _error(tmp_path, capsys, rows)
    assert "no judged answers for run 'dense'" in err and "bm25, sample-*" in err and "judged.jsonl" in err


def test_answers_for_other_queries(tmp_path, qids, capsys):
    rows = [{"qid": q, "cid": c, "outcome": "correct"} for q in qids for c in ("bm25", "dense")]
    rows.insert(3, {"qid": "hotpot-17", "cid": "dense", "outcome": "wrong"})
    err = _error(tmp_path, capsys, rows)
    assert "judged.jsonl:4:" in err and "'hotpot-17'" in err and "other queries" in err


@pytest.mark.parametrize("row, words", [
    ({"cid": "bm25", "outcome": "correct"}, ["judged.jsonl:1:", "'qid'"]),
    ({"qid": "x", "cid": "bm25", "answer": "a"}, ["judged.jsonl:1:", "not judged yet", "udcg judge answer"]),
    ({"qid": "x", "cid": "bm25", "outcome": "right"}, ["judged.jsonl:1:", "'right'", "correct, abstained, wrong"]),
])
def test_bad_lines(tmp_path, capsys, row, words):
    err = _error(tmp_path, capsys, [row])
    assert all(w in err for w in words), err


def test_duplicate_answers(tmp_path, qids, capsys):
    rows = [{"qid": qids[0], "cid": "bm25", "outcome": "correct"}] * 2
    err = _error(tmp_path, capsys, rows)
    assert "judged.jsonl:2:" in err and "duplicate" in err and "judged.jsonl:1" in err


# ---------------------------------------------------------------- answer --limit and its queries-file error


def test_answer_limit_takes_the_first_queries(tmp_path, tiny_model_dir, capsys):
    out = tmp_path / "answers.jsonl"
    argv = ["answer", "--corpus", str(FOLDER), "--run", str(RUNS[0]), "--run", str(RUNS[1]), "--k", "2",
            "--model", str(tiny_model_dir), "--max-new-tokens", "2", "--no-progress", "-o", str(out)]
    assert main(argv + ["--limit", "3"]) == 0
    first = [json.loads(line)["_id"] for line in (FOLDER / "queries.jsonl").read_text().splitlines()[:3]]
    records = [json.loads(line) for line in out.read_text().splitlines()]
    assert [r["qid"] for r in records] == [q for q in first for _ in ("bm25", "dense")]
    assert "6 contexts (3 queries, 2 runs)" in capsys.readouterr().err
    assert main(argv + ["--limit", "0"]) == 2
    assert "--limit 0" in capsys.readouterr().err


def test_answer_names_the_queries_file_when_given(tmp_path, capsys):
    queries = tmp_path / "q3.jsonl"
    queries.write_text("".join(line + "\n" for line in (FOLDER / "queries.jsonl").read_text().splitlines()[:3]))
    qrels = tmp_path / "q3.tsv"
    keep = {json.loads(line)["_id"] for line in queries.read_text().splitlines()}
    qrels.write_text("".join(line + "\n" for line in QRELS.read_text().splitlines()
                             if line.split("\t")[0] in keep))
    assert main(["answer", "--corpus", str(FOLDER), "--queries", str(queries), "--qrels", str(qrels),
                 "--run", str(RUNS[0]), "--model", "no-such-model-loaded", "--no-progress",
                 "-o", str(tmp_path / "a.jsonl")]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1
    assert f"not in the queries of {queries}" in err and "bm25.trec" in err, err


def test_more_correct_and_fewer_wrong_beat_abstentions_neither(tmp_path, qids):
    path = tmp_path / "judged.jsonl"
    rows = [{"qid": q, "cid": "bm25", "outcome": "wrong" if i % 2 else "abstained"} for i, q in enumerate(qids)]
    rows += [{"qid": q, "cid": "dense", "outcome": "correct"} for q in qids]
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    cmp = udcg.compare(RUNS, QRELS, metrics="P@5", answers=path, n_boot=200)
    assert cmp.direction == {"P@5": 1, "correct": 1, "abstained": 0, "wrong": -1}
    assert cmp.beats["dense"]["correct"] == ["bm25"] and cmp.beats["dense"]["wrong"] == ["bm25"]
    assert cmp.beats["bm25"]["abstained"] == [] and cmp.beats["dense"]["abstained"] == []
    assert all(t.significant for t in cmp.pairs if t.measure != "P@5")  # tested, though not a win for anyone
    lines = cmp.format().splitlines()
    dense = next(line for line in lines if line.startswith("| b | dense"))
    assert dense.count("**") == 6  # bold: P@5, most correct (1.0), fewest wrong (0.0); abstained never
    assert "| 0.0000 [0.00, 0.00] | **0.0000**ᵃ" in dense
    assert "lower is better for wrong; no better side for abstained" in cmp.format()
