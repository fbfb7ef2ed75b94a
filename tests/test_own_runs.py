"""The everyday job on the user's own runs, through the CLI with a real (tiny, random) model:
annotate runs incrementally, score and compare them with UDCG@k, answer, judge, fit-theta,
correlate — and the same UDCG@k from the run path and the contexts path."""

from __future__ import annotations

import json

import numpy as np
import pytest

from udcg.annotate.utilities import load_utilities
from udcg.cli import main

QUERIES = {"q1": ("who wrote hamlet", ["Shakespeare"]), "q2": ("capital of france", ["Paris"]),
           "q3": ("largest planet", ["Jupiter"])}
DOCS = {"d1": "Hamlet is a tragedy written by William Shakespeare.", "d2": "Paris is the capital of France.",
        "d3": "Jupiter is the largest planet in the Solar System.", "d4": "The Thames flows through London.",
        "d5": "Mount Everest is the highest mountain.", "d6": "Shakespeare was born in Stratford-upon-Avon.",
        "d7": "Lyon is a city in France.", "d8": "Saturn has rings."}
QRELS = {"q1": {"d1": 1, "d6": 0}, "q2": {"d2": 1}, "q3": {"d3": 1, "d8": 0}}


def _write_run(path, ranking: dict[str, list[str]], tag: str) -> None:
    path.write_text("".join(f"{q} Q0 {d} {r + 1} {10 - r} {tag}\n" for q, docs in ranking.items()
                            for r, d in enumerate(docs)))


@pytest.fixture()
def beir(tmp_path):
    folder = tmp_path / "beir"
    (folder / "qrels").mkdir(parents=True)
    (folder / "corpus.jsonl").write_text("".join(json.dumps({"_id": d, "title": "", "text": t}) + "\n"
                                                 for d, t in DOCS.items()))
    (folder / "queries.jsonl").write_text("".join(json.dumps({"_id": q, "text": t, "metadata": {"answers": a}}) + "\n"
                                                  for q, (t, a) in QUERIES.items()))
    (folder / "qrels" / "test.tsv").write_text("query-id\tcorpus-id\tscore\n" + "".join(
        f"{q}\t{d}\t{r}\n" for q, docs in QRELS.items() for d, r in docs.items()))
    runs = tmp_path / "runs"
    runs.mkdir()
    _write_run(runs / "a.trec", {"q1": ["d1", "d4", "d6"], "q2": ["d7", "d2", "d5"], "q3": ["d8", "d3", "d4"]}, "a")
    _write_run(runs / "b.trec", {"q1": ["d6", "d1", "d5"], "q2": ["d2", "d7", "d4"], "q3": ["d3", "d8", "d5"]}, "b")
    _write_run(runs / "c.trec", {"q1": ["d4", "d2", "d1"], "q2": ["d5", "d4", "d2"], "q3": ["d4", "d5", "d3"]}, "c")
    return folder, runs


def _annotate(folder, runs, names, out, model, capsys, depth=3):
    argv = ["annotate", "--corpus", str(folder), "--depth", str(depth), "--model", str(model), "-o", str(out),
            "--no-progress"]
    for name in names:
        argv += ["--run", str(runs / f"{name}.trec")]
    assert main(argv) == 0
    return capsys.readouterr().err


def test_annotate_runs_is_incremental_and_scores_agree(beir, tmp_path, tiny_model_dir, capsys):
    folder, runs = beir
    out = tmp_path / "utilities"
    err = _annotate(folder, runs, ["a", "b"], out, tiny_model_dir, capsys)
    # union of a and b top-3: q1 {d1,d4,d6,d5}, q2 {d7,d2,d5,d4}, q3 {d8,d3,d4,d5} = 12 pairs
    assert "pairs in the runs' top-depth: 12; new pairs annotated: 12; already in" in err
    first = load_utilities(out)
    assert len(first) == 12 and first.model == tiny_model_dir.name
    sources = {r.relevance_source for r in first.records.values()}
    assert sources == {"qrels", "unjudged-irrelevant"}
    assert first.records["q1", "d1"].relevant and not first.records["q1", "d6"].relevant  # qrels grade 0
    # a third run costs only its new pairs: c's top-3 adds (q1, d2) alone
    err = _annotate(folder, runs, ["c"], out, tiny_model_dir, capsys)
    assert "pairs in the runs' top-depth: 9; new pairs annotated: 1; already in" in err
    err = _annotate(folder, runs, ["a", "b", "c"], out, tiny_model_dir, capsys, depth=3)
    assert "new pairs annotated: 0" in err and "(no model loaded)" in err
    again = load_utilities(out)
    assert len(again) == 13 and again.records["q1", "d2"].relevance_source == "unjudged-irrelevant"
    assert {k: r.p_abs for k, r in again.records.items() if k in first.records} == \
        {k: r.p_abs for k, r in first.records.items()}

    # score --run with utilities: UDCG@3 by hand from the utility file
    per_query = tmp_path / "pq.tsv"
    assert main(["score", "--run", str(runs / "a.trec"), "--qrels", str(folder / "qrels" / "test.tsv"),
                 "--utilities", str(out), "--metrics", "UDCG@3,nDCG@3,P@3", "-o", str(per_query)]) == 0
    rows = [line.split("\t") for line in per_query.read_text().splitlines()]
    got = {q: float(v) for q, m, v in rows if m == "UDCG@3"}
    u = again.as_dict()
    ranking = {"q1": ["d1", "d4", "d6"], "q2": ["d7", "d2", "d5"], "q3": ["d8", "d3", "d4"]}
    for q, docs in ranking.items():
        vals = np.array([u[q][d] for d in docs])
        expected = 1 / (1 + np.exp(-(vals.clip(0).sum() + vals.clip(None, 0).sum() / 3) / 3))
        assert got[q] == pytest.approx(expected, abs=1e-12)
    assert "annotated@3 = 9/9" in capsys.readouterr().err

    # the contexts path on the same top-3 gives the same UDCG@3
    contexts = tmp_path / "contexts.jsonl"
    contexts.write_text("".join(json.dumps({"qid": q, "cid": "a", "relevant": [u[q][d] > 0 for d in docs],
                                            "utilities": [u[q][d] for d in docs]}) + "\n" for q, docs in ranking.items()))
    scored = tmp_path / "scored.jsonl"
    assert main(["score", str(contexts), "-o", str(scored), "--metrics", "UDCG@3,UDCG"]) == 0
    for line in scored.read_text().splitlines():
        rec = json.loads(line)
        assert rec["metrics"]["UDCG@3"] == pytest.approx(got[rec["qid"]], abs=1e-12)
        assert rec["metrics"]["UDCG"] == pytest.approx(got[rec["qid"]], abs=1e-12)


def test_unannotated_pairs_and_unjudged_policies(beir, tmp_path, tiny_model_dir, capsys):
    folder, runs = beir
    out = tmp_path / "u"
    _annotate(folder, runs, ["a"], out, tiny_model_dir, capsys, depth=2)
    qrels = str(folder / "qrels" / "test.tsv")
    argv = ["score", "--run", str(runs / "a.trec"), "--qrels", qrels, "--utilities", str(out), "--metrics", "UDCG@3",
            "-o", str(tmp_path / "x.tsv")]
    assert main(argv) == 2
    assert "3 of the 9 top-3 documents have no utility" in capsys.readouterr().err
    assert main(argv + ["--unannotated", "zero"]) == 0
    assert "annotated@3 = 6/9" in capsys.readouterr().err
    assert main(["annotate", "--corpus", str(folder), "--run", str(runs / "a.trec"), "--depth", "2", "--model",
                 str(tiny_model_dir), "-o", str(tmp_path / "u2"), "--unjudged", "error", "--no-progress"]) == 2
    assert "have no qrels judgement" in capsys.readouterr().err
    # another model's utilities are refused
    assert main(argv + ["--unannotated", "zero", "--model", "other-model"]) == 2
    assert "were made with model" in capsys.readouterr().err


def test_compare_answer_judge_fit_correlate(beir, tmp_path, tiny_model_dir, capsys):
    folder, runs = beir
    out = tmp_path / "u"
    _annotate(folder, runs, ["a", "b", "c"], out, tiny_model_dir, capsys)
    table = tmp_path / "table.json"
    assert main(["compare", "--run", str(runs / "a.trec"), "--run", str(runs / "b.trec"), "--run",
                 str(runs / "c.trec"), "--qrels", str(folder / "qrels" / "test.tsv"), "--utilities", str(out),
                 "--metrics", "UDCG@3,nDCG@3", "-o", str(table)]) == 0
    data = json.loads(table.read_text())
    assert "UDCG@3" in json.dumps(data) and "nDCG@3" in json.dumps(data)
    answers = tmp_path / "answers.jsonl"
    argv = ["answer", "--corpus", str(folder), "--run", str(runs / "a.trec"), "--run", str(runs / "b.trec"),
            "--k", "2", "--samples", "2", "--depth", "3", "--model", str(tiny_model_dir), "--utilities", str(out),
            "-o", str(answers), "--no-progress", "--max-new-tokens", "4"]
    assert main(argv) == 0
    records = [json.loads(line) for line in answers.read_text().splitlines()]
    assert len(records) == 3 * (2 + 2)
    assert all(len(r["utilities"]) == 2 and len(r["relevant"]) == 2 for r in records)
    capsys.readouterr()
    assert main(argv) == 0  # resumed: nothing new
    assert "0 new prompts answered" in capsys.readouterr().err
    judged = tmp_path / "judged.jsonl"
    assert main(["judge", "answer", str(answers), "-o", str(judged), "--judge", "rules",
                 "--require-relevant-context", "--no-progress"]) == 0
    rows = [json.loads(line) for line in judged.read_text().splitlines()]
    assert all(r["outcome"] in ("correct", "abstained", "wrong") and "utilities" in r for r in rows)
    assert main(["correlate", str(judged), "--metrics", "UDCG,nDCG,P"]) == 0


@pytest.mark.parametrize("lines, words", [
    ("q9 Q0 d1 1 3 x\n", ["1 run queries are not in the queries", "q9"]),
    ("q1 Q0 d99 1 3 x\n", ["not in the corpus", "d99"]),
    ("q1 Q0 d1 1 3 x\nq1 Q0 d1 2 2 x\n", ["appears twice", ":2"]),
])
def test_bad_runs_stop_before_any_model_loads(beir, tmp_path, capsys, lines, words):
    folder, _ = beir
    bad = tmp_path / "bad.trec"
    bad.write_text(lines)
    out = tmp_path / "u"
    assert main(["annotate", "--corpus", str(folder), "--run", str(bad), "--model", "no-such-model-loaded",
                 "-o", str(out), "--no-progress"]) == 2
    err = capsys.readouterr().err
    assert len(err.strip().splitlines()) == 1, err
    for word in words:
        assert word.lower() in err.lower(), err
    assert not out.exists()


def test_several_runs_all_scored_or_an_error(beir, tmp_path, capsys):
    folder, runs = beir
    qrels = str(folder / "qrels" / "test.tsv")
    out = tmp_path / "pq.tsv"
    assert main(["score", "--run", str(runs / "a.trec"), "--run", str(runs / "b.trec"), "--qrels", qrels,
                 "--metrics", "P@2", "-o", str(out)]) == 0
    rows = [line.split("\t") for line in out.read_text().splitlines()]
    assert {r[0] for r in rows} == {"a", "b"} and len(rows) == 6
    assert main(["score", "--run", str(runs / "a.trec"), "--run", str(tmp_path / "missing.trec"), "--qrels", qrels,
                 "--metrics", "P@2", "-o", str(tmp_path / "x.tsv")]) == 2
    assert not (tmp_path / "x.tsv").exists()
    assert main(["compare", "--run", str(runs / "a.trec"), "--qrels", qrels, "--metrics", "P@2"]) == 2
    assert "two or more runs" in capsys.readouterr().err
    assert main(["score", "--run", str(runs / "a.trec"), "--metrics", "nDCG@2", "-o", str(tmp_path / "y.tsv")]) == 2
    assert "needs qrels" in capsys.readouterr().err


def test_unjudged_pairs_judged_by_the_rule_judge(beir, tmp_path, tiny_model_dir, capsys):
    folder, runs = beir
    out = tmp_path / "u"
    err = _annotate_with(folder, runs, out, tiny_model_dir, capsys, ["--unjudged", "judge", "--judge", "rules"])
    assert "relevance of these pairs: judge 4, qrels 5" in err, err
    recs = load_utilities(out).records
    # d6 is judged 0 in the qrels although it names Shakespeare: the qrels win over the judge
    assert recs["q1", "d6"].relevance_source == "qrels" and not recs["q1", "d6"].relevant
    # (q2, d7) is unjudged: "Lyon is a city in France." does not contain "Paris"
    assert recs["q2", "d7"].relevance_source == "judge" and not recs["q2", "d7"].relevant
    assert (out / "judgements.jsonl").is_file()


def _annotate_with(folder, runs, out, model, capsys, extra):
    argv = ["annotate", "--corpus", str(folder), "--run", str(runs / "a.trec"), "--depth", "3", "--model", str(model),
            "-o", str(out), "--no-progress", *extra]
    assert main(argv) == 0
    return capsys.readouterr().err
