"""Issue #34 item 1: the reader check, from the utilities already computed (no model time): counts,
mean p_abs, the share of irrelevant pairs answered, the AUC with a bootstrap interval over queries,
and the verdict; printed by every `udcg annotate`, written to meta.json, `udcg.reader_check`, and
`udcg reader-check`. The verdicts are checked on the published readers' real p_abs."""

from __future__ import annotations

import gzip
import json
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from sklearn.metrics import roc_auc_score

import udcg
from udcg.cli import main
from udcg.metrics.reader_check import AUC_MIN, ReaderPairs, check_reader_pairs
from udcg.metrics.reader_queries import by_query
from tests.test_own_runs import _annotate, beir  # noqa: F401  (the fixture)

RESULTS = Path(__file__).resolve().parents[1] / "docs" / "results"


def _published(run: str) -> list[dict]:
    return [json.loads(line) for line in gzip.open(RESULTS / run / "data" / "annotations.jsonl.gz", "rt")]


def _abstention(model: str) -> list[dict]:
    rows = [json.loads(line) for line in gzip.open(RESULTS / "reader-abstention" / "passages.jsonl.gz", "rt")]
    return [r for r in rows if r["model"] == model and r["prompt_version"] == "udcg-code-v1"]


def _check(rows: list[dict], **kw):
    return check_reader_pairs(ReaderPairs([r["p_abs"] for r in rows], [r["relevant"] for r in rows], [True] * len(rows),
                                    [r["qid"] for r in rows]), **kw)


def test_the_auc_is_sklearns_and_its_interval_brackets_it():
    rows = _published("nq-qwen1.5b")
    check = _check(rows, model="qwen2.5-coder-1.5b", estimator="first-token")
    y = [not r["relevant"] for r in rows]
    assert check.auc == pytest.approx(roc_auc_score(y, [r["p_abs"] for r in rows]), abs=1e-12)
    assert check.auc_low < check.auc < check.auc_high and check.auc_high - check.auc_low < 0.2
    assert check.n_relevant + check.n_judged_irrelevant == len(rows) == 1800 and check.n_unjudged == 0
    assert check.answered_irrelevant == pytest.approx(np.mean([r["p_abs"] < 0.5 for r in rows if not r["relevant"]]))
    assert _check(rows, n_boot=200, seed=3).auc_low != check.auc_low  # seeded: another seed, another interval


def test_a_resampled_auc_is_sklearns_weighted_auc():
    """Each bootstrap resample weighs a pair by how often its query was drawn: the same AUC as
    sklearn's with those sample weights (ties half)."""
    from udcg.metrics.reader_auc import auc_rows

    rows = _published("popqa-qwen0.5b")
    p = np.array([round(r["p_abs"], 2) for r in rows])  # rounded: many ties
    irr = np.array([not r["relevant"] for r in rows])
    weights = np.random.default_rng(1).integers(0, 3, size=(3, len(rows))).astype(float)
    order = np.argsort(p, kind="stable")
    starts = np.flatnonzero(np.r_[True, p[order][1:] != p[order][:-1]])
    got = auc_rows(irr[order], starts, weights[:, order])
    for w, auc in zip(weights, got):
        assert auc == pytest.approx(roc_auc_score(irr, p, sample_weight=w), abs=1e-12)


@pytest.mark.parametrize("source, can", [("nq-qwen1.5b", True), ("nq-qwen0.5b", False), ("popqa-qwen0.5b", False),
                                         ("popqa-qwen1.5b", False), ("abstention:qwen2.5-coder-1.5b", True),
                                         ("abstention:qwen2.5-coder-0.5b", False)])
def test_the_verdicts_on_the_published_readers(source, can):
    """The thresholds' justification (module docstring): the readers under which UDCG gained on
    nDCG pass; the others fail."""
    rows = _abstention(source.split(":")[1]) if source.startswith("abstention:") else _published(source)
    check = _check(rows, n_boot=200)
    assert check.can_measure_distraction is can, (check.auc, check.answered_irrelevant)
    text = "\n".join(check.lines())
    assert "AUC of p_abs separating irrelevant from relevant pairs" in text
    assert ("can measure distraction" in text) if can else ("cannot measure distraction" in text
                                                              and "qwen2.5-coder-1.5b" in text)


def test_the_0_5b_reader_is_refused_for_answering_from_distractors():
    check = _check(_abstention("qwen2.5-coder-0.5b"), n_boot=200)
    assert check.answered_irrelevant == pytest.approx(0.73) and check.auc == pytest.approx(0.717, abs=5e-4)
    assert "it answers from 73% of the irrelevant pairs" in check.verdict_text() and check.auc < AUC_MIN


def test_answering_from_most_distractors_is_a_verdict_even_with_few_relevant_pairs():
    """Found by the SQuAD trial (docs/trial-squad.md): 8 relevant pairs, 52 irrelevant ones answered
    from 79% of the time; before, "too few pairs to tell"."""
    rows = _abstention("qwen2.5-coder-0.5b")
    few = [r for r in rows if not r["relevant"]] + [r for r in rows if r["relevant"]][:8]
    check = _check(few, n_boot=100)
    assert check.n_relevant == 8 and check.verdict == "cannot" and check.answered_irrelevant > 0.5
    assert "from only 8 relevant pairs" in check.verdict_text() or check.auc >= AUC_MIN


def test_too_few_pairs_gives_no_verdict_and_bad_input_is_refused():
    check = check_reader_pairs(ReaderPairs([0.1, 0.9, 0.8], [True, False, False], [True, True, False], ["q1", "q1", "q2"]))
    assert check.verdict == "too few pairs" and check.auc == 1.0 and check.n_unjudged == 1
    with pytest.raises(udcg.errors.InputError, match="one value per pair"):
        check_reader_pairs(ReaderPairs([0.1], [True, False], [True], ["q"]))
    with pytest.raises(udcg.errors.InputError, match=r"in \[0, 1\]"):
        check_reader_pairs(ReaderPairs([1.5], [True], [True], ["q"]))


def test_annotate_prints_it_writes_it_to_meta_and_the_api_and_command_agree(beir, tmp_path, tiny_model_dir,  # noqa: F811
                                                                            capsys):
    folder, runs = beir
    out = tmp_path / "utilities"
    err = _annotate(folder, runs, ["a", "b"], out, tiny_model_dir, capsys)
    assert "reader check (" in err and "AUC of p_abs separating irrelevant from relevant pairs" in err
    assert "verdict: too few pairs to tell (3 relevant" in err
    meta = json.loads((out / "meta.json").read_text())
    api = udcg.reader_check(out)
    assert meta["reader_check"] == api.to_dict() and meta["reader_check"]["thresholds"]["auc_min"] == AUC_MIN
    assert api.n_relevant == 3 and api.n_judged_irrelevant == 2 and api.n_unjudged == 7
    assert "\n".join(api.query_lines()) in err and "  per query: it answers from an irrelevant pair on" in err
    again = _annotate(folder, runs, ["a"], out, tiny_model_dir, capsys)  # nothing new: still printed
    assert "new pairs annotated: 0" in again and "reader check (" in again
    assert main(["reader-check", str(out), "--json"]) == 0
    printed = json.loads(capsys.readouterr().out)
    assert printed[str(out)] == api.to_dict()
    assert main(["reader-check", str(tmp_path / "nothing")]) == 2
    assert "no such utilities file or folder" in capsys.readouterr().err


def test_the_command_on_a_published_readers_utilities(tmp_path, capsys):
    rows = _published("nq-qwen1.5b")
    path = tmp_path / "utilities.jsonl"
    path.write_text("".join(json.dumps({"qid": r["qid"], "docid": r["pid"], "p_abs": r["p_abs"],
                                        "relevant": r["relevant"], "relevance_source": "qrels",
                                        "model": "qwen2.5-coder-1.5b", "estimator": "first-token"}) + "\n"
                            for r in rows))
    assert main(["reader-check", str(path), "--n-boot", "200"]) == 0
    out = capsys.readouterr().out
    assert "reader check (qwen2.5-coder-1.5b, first-token" in out and "this reader can measure distraction" in out
    assert "answers (p_abs < 0.5) from 9% of the irrelevant pairs" in out
    answered = {r["qid"] for r in rows if not r["relevant"] and r["p_abs"] < 0.5}
    abstained = {r["qid"] for r in rows if r["relevant"] and r["p_abs"] >= 0.5}
    assert (f"it answers from an irrelevant pair on {len(answered)} of the {len({r['qid'] for r in rows if not r['relevant']})}"
            f" queries that have one") in out
    assert f"abstains on a relevant pair on {len(abstained)} of the {len({r['qid'] for r in rows if r['relevant']})}" in out
    counts = {}
    for r in {(r["qid"], r["pid"]): r for r in reversed(rows)}.values():  # one record per pair, the first kept
        if not r["relevant"]:
            n, k = counts.get(r["qid"], (0, 0))
            counts[r["qid"]] = (n + (r["p_abs"] < 0.5), k + 1)
    top = min(counts, key=lambda q: (-counts[q][0], -counts[q][0] / counts[q][1], q))
    assert f"most distracting queries (irrelevant pairs answered from / irrelevant pairs): {top} " \
           f"{counts[top][0]}/{counts[top][1]}" in out


def test_on_which_queries_by_hand():
    """q2's two pairs and q1's three, interleaved: the counts and means per query, in first-pair order."""
    checks = by_query([0.9, 0.2, 0.6, 0.3, 0.4], [False, True, True, False, False], ["q2", "q1", "q1", "q2", "q1"])
    assert [c.qid for c in checks] == ["q2", "q1"]
    q2, q1 = checks
    assert (q2.n_relevant, q2.n_irrelevant, q2.answered_irrelevant, q2.abstained_relevant) == (0, 2, 1, 0)
    assert np.isnan(q2.mean_p_relevant) and q2.mean_p_irrelevant == pytest.approx(0.6)
    assert (q1.n_relevant, q1.n_irrelevant, q1.answered_irrelevant, q1.abstained_relevant) == (2, 1, 1, 1)
    assert q1.mean_p_relevant == pytest.approx(0.4) and q1.mean_p_irrelevant == pytest.approx(0.4)
    assert q2.to_dict()["mean_p_relevant"] is None
    with pytest.raises(udcg.errors.InputError, match=r"in \[0, 1\]"):
        by_query([0.2, float("nan")], [True, False], ["q", "q"])
    with pytest.raises(udcg.errors.InputError, match="one value per pair"):
        by_query([0.2], [True, False], ["q", "q"])
    check = check_reader_pairs(ReaderPairs([0.9, 0.2, 0.6, 0.3, 0.4], [False, True, True, False, False], [True] * 5,
                                     ["q2", "q1", "q1", "q2", "q1"]))
    assert [c.qid for c in check.queries] == ["q2", "q1"] and check.queries[1] == q1  # q2's NaN mean equals nothing
    assert check.to_dict()["per_query"] == {"with_irrelevant": 2, "answered_irrelevant": 2, "with_relevant": 1,
                                            "abstained_relevant": 1}
    assert "on 2 of the 2 queries that have one" in check.query_line()
    # q1 and q2 each answer from one irrelevant pair: q2 (1 of 2) after q1 (1 of 1), the larger share first
    assert check.worst_line().endswith(": q1 1/1, q2 1/2") and check.worst_line(1).endswith(": q1 1/1")
    assert check_reader_pairs(ReaderPairs([0.9, 0.1], [False, True], [True, True], ["q", "q"])).worst_line() == ""
    assert "on 1 of the 1 that have one" in check.query_line()
    # no reader named: the check's lines and the compare footer's note say so alike
    assert check.who() == "model unnamed, estimator unknown"
    assert "(model unnamed, estimator unknown;" in check.lines()[0]


def test_on_which_queries_matches_a_loop_over_the_published_pairs(tmp_path, capsys):
    """Property on real data: every query's row of `reader-check -o` equals a plain loop over its
    pairs, whatever the order of the file's lines."""
    rows = _published("nq-qwen1.5b")
    path = tmp_path / "utilities.jsonl"
    shuffled = [rows[i] for i in np.random.default_rng(3).permutation(len(rows))]
    path.write_text("".join(json.dumps({"qid": r["qid"], "docid": r["pid"], "p_abs": r["p_abs"],
                                        "relevant": r["relevant"], "relevance_source": "qrels",
                                        "model": "qwen2.5-coder-1.5b", "estimator": "first-token"}) + "\n"
                            for r in shuffled))
    out = tmp_path / "queries.tsv"
    assert main(["reader-check", str(path), "--n-boot", "100", "-o", str(out)]) == 0
    capsys.readouterr()
    lines = out.read_text().splitlines()
    assert lines[0].split("\t") == ["qid", "relevant", "irrelevant", "mean_p_abs_relevant", "mean_p_abs_irrelevant",
                                    "answered_irrelevant", "abstained_relevant"]
    by_qid = {}
    for r in rows:
        by_qid.setdefault(r["qid"], {}).setdefault(r["pid"], r)  # the utilities file keeps one record per pair
    assert len(lines) - 1 == len(by_qid)
    for line in lines[1:]:
        qid, n_rel, n_irr, m_rel, m_irr, answered, abstained = line.split("\t")
        pairs = list(by_qid[qid].values())
        rel = [r["p_abs"] for r in pairs if r["relevant"]]
        irr = [r["p_abs"] for r in pairs if not r["relevant"]]
        assert (int(n_rel), int(n_irr)) == (len(rel), len(irr))
        assert (int(answered), int(abstained)) == (sum(p < 0.5 for p in irr), sum(p >= 0.5 for p in rel))
        for mean, values in ((m_rel, rel), (m_irr, irr)):
            assert (mean == "nan") if not values else float(mean) == pytest.approx(sum(values) / len(values))
    other = tmp_path / "other.jsonl"
    other.write_text(path.read_text())
    assert main(["reader-check", str(path), str(other), "--n-boot", "100", "-o", str(out)]) == 0
    capsys.readouterr()
    both = out.read_text().splitlines()
    assert both[0] == "utilities\t" + lines[0] and both[1:] == [f"{p}\t{line}" for p in (path, other) for line in lines[1:]]
    assert main(["reader-check", str(path), "--n-boot", "100", "-o", str(path)]) == 2  # never replaces its input
    assert "which this command reads" in capsys.readouterr().err


def test_annotate_of_a_qa_file_prints_it_and_writes_it_to_the_meta_file(tmp_path, tiny_model_dir, capsys):
    items = [{"example_id": f"q{i}", "question": f"who wrote play {i}?", "answers": ["Shakespeare"],
              "passages": [{"doc_id": f"d{i}{j}", "text": text, "is_relevant": j == 0}
                           for j, text in enumerate(["Hamlet was written by Shakespeare.", "Paris is in France.",
                                                     "The Thames flows through London."])]} for i in range(2)]
    path = tmp_path / "qa.json"
    path.write_text(json.dumps(items))
    out = tmp_path / "annotated.json"
    assert main(["annotate", str(path), "-o", str(out), "--model", str(tiny_model_dir), "--no-progress"]) == 0
    err = capsys.readouterr().err
    assert "reader check (" in err and "2 relevant, 4 judged-irrelevant, 0 unjudged pairs" in err
    meta = json.loads((tmp_path / "annotated.json.meta.json").read_text())
    assert meta["reader_check"]["n_relevant"] == 2 and meta["reader_check"]["verdict"] == "too few pairs"
    counts = meta["reader_check"]["per_query"]
    assert (f"per query: it answers from an irrelevant pair on {counts['answered_irrelevant']} of the 2 queries that "
            f"have one" in err) and f"abstains on a relevant pair on {counts['abstained_relevant']} of the 2" in err
    assert ("most distracting queries" in err) == (counts["answered_irrelevant"] > 0)


@settings(max_examples=60, deadline=None)
@given(st.lists(st.tuples(st.sampled_from(["q1", "q2", "q3", "q10"]), st.floats(0, 1), st.booleans()), min_size=1,
                max_size=40))
def test_the_per_query_rows_add_up_to_the_check(pairs):
    """Property: whatever the pairs, the per-query counts and means add up to the check's totals and
    shares, every query appears once, in the order of its first pair."""
    qids, p, rel = zip(*pairs)
    check = check_reader_pairs(ReaderPairs(p, rel, [True] * len(p), qids), n_boot=100)
    rows = check.queries
    assert [c.qid for c in rows] == list(dict.fromkeys(qids)) and check.n_queries == len(rows)
    assert sum(c.n_relevant for c in rows) == check.n_relevant
    assert sum(c.n_irrelevant for c in rows) == check.n_judged_irrelevant + check.n_unjudged
    n_irr = sum(c.n_irrelevant for c in rows)
    if n_irr:
        assert sum(c.answered_irrelevant for c in rows) / n_irr == pytest.approx(check.answered_irrelevant)
        assert sum(c.mean_p_irrelevant * c.n_irrelevant for c in rows if c.n_irrelevant) / n_irr == pytest.approx(
            check.mean_p_judged_irrelevant)
    if check.n_relevant:
        assert sum(c.mean_p_relevant * c.n_relevant for c in rows if c.n_relevant) / check.n_relevant == \
            pytest.approx(check.mean_p_relevant)


def test_compare_names_the_recorded_check_in_its_footer(beir, tmp_path, tiny_model_dir, capsys):  # noqa: F811
    """compare with a UDCG row and a utilities folder (or its file) ends its footer with the reader
    check that annotate recorded in meta.json (score prints it on stderr); not without a UDCG row,
    nor without a readable record."""
    folder, runs = beir
    out = tmp_path / "utilities"
    _annotate(folder, runs, ["a", "b"], out, tiny_model_dir, capsys)
    check = udcg.reader_check(out)
    argv = ["compare", "--run", str(runs / "a.trec"), "--run", str(runs / "b.trec"), "--qrels",
            str(folder / "qrels" / "test.tsv"), "--n-boot", "100"]

    def footer(utilities, metrics="UDCG@3,nDCG@3") -> str:
        assert main(argv + ["--utilities", str(utilities), "--metrics", metrics]) == 0
        return capsys.readouterr().out

    line = (f"UDCG's reader ({check.model}, first-token), checked on its utilities' 3 queries when they were written "
            f"(per query: udcg reader-check): {check.verdict_text()}.")
    assert check.verdict == "too few pairs" and line in footer(out) and line in footer(out / "utilities.jsonl")
    assert "UDCG's reader" not in footer(out, "nDCG@3,P@3")
    score = ["score", "--run", str(runs / "a.trec"), "--utilities", str(out), "-o", str(tmp_path / "s.tsv")]
    assert main(score + ["--metrics", "UDCG@3"]) == 0 and line in capsys.readouterr().err  # score says it on stderr
    meta = json.loads((out / "meta.json").read_text())
    published = _check(_published("nq-qwen1.5b"), model="qwen2.5-coder-1.5b", estimator="first-token", n_boot=100)
    (out / "meta.json").write_text(json.dumps({**meta, "reader_check": published.to_dict()}))
    assert "(qwen2.5-coder-1.5b, first-token), checked on its utilities' 120 queries" in footer(out)
    assert "this reader can measure distraction by the check's thresholds (AUC" in footer(out)
    (out / "meta.json").write_text(json.dumps({**meta, "reader_check": {**published.to_dict(), "model": None}}))
    assert "UDCG's reader (model unnamed, first-token), checked on its utilities' 120 queries" in footer(out)
    (out / "meta.json").write_text("{not json")
    assert "UDCG's reader" not in footer(out)
