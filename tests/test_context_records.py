"""Context records of an experiment: built from per-passage scores, read from and written to the
contexts file unchanged (``udcg.io.contexts``), scored without touching their input, correlated like
the contexts-file route; the one record every flow reads (a typed outcome, the line's other fields
kept as extra)."""

from __future__ import annotations

import dataclasses
import json

import pytest
from scipy.special import expit

from udcg.errors import InputError
from udcg.experiment import studies
from udcg.experiment.context_records import PassageScore, answered, context_record
from udcg.io.contexts import from_json, read_context_file, to_json
from udcg.flows.correlate import correlation_table
from udcg.metrics.paired_tests import CorrelationTests
from udcg.flows.scoring import read_contexts
from udcg.records import ContextRecord, Outcome

ORDER = ["qid", "cid", "study", "split", "pids", "relevant", "p_abs", "utilities", "contains", "n_relevant",
         "grades", "corpus_grades", "erag", "answer_ll", "answer", "outcome", "outcome_note", "metrics"]


def scores() -> dict[str, PassageScore]:
    return {"a": PassageScore(True, 0.2, True, grade=5, erag=1.0, answer_ll=-0.5),
            "b": PassageScore(False, 0.5, False, grade=2, erag=0.0, answer_ll=-3.0),
            "c": PassageScore(False, 0.9, False, grade=2, erag=0.5, answer_ll=-2.0),
            "d": PassageScore(True, 0.6, True, grade=None, erag=1.0)}


def test_a_record_holds_the_per_position_fields_in_prompt_order():
    r = context_record("q", "q:0", "main", "test", ["b", "a"], scores(), n_relevant=2, corpus_grades=[0, 2, 0, 0, 1])
    assert (r.relevant, r.p_abs, r.contains, r.k) == ((False, True), (0.5, 0.2), (False, True), 2)
    assert r.utilities == pytest.approx((-0.5, 0.8)) and r.utilities == (scores()["b"].utility, scores()["a"].utility)
    assert (r.grades, r.corpus_grades, r.erag, r.answer_ll) == ((2, 5), (0, 2, 0, 0, 1), (0.0, 1.0), (-3.0, -0.5))
    partial = context_record("q", "q:1", "main", "test", ["a", "d"], scores(), 2, [0, 2, 0, 0, 1])
    assert partial.grades is None and partial.corpus_grades is None and partial.answer_ll is None  # d has neither
    assert partial.erag == (1.0, 1.0)


def test_the_contexts_file_line_keeps_its_order_and_reads_back_unchanged():
    r = context_record("q", "q:0", "main", "train", ["b", "a"], scores(), 2, [0, 2, 0, 0, 1])
    line = to_json(r)
    assert list(line) == [k for k in ORDER if k not in ("answer", "outcome", "outcome_note", "metrics")]
    assert line["pids"] == ["b", "a"] and isinstance(line["relevant"], list)
    done = studies.score_records([answered(r, "Paris", None, "judge reply unparseable")], ["UDCG", "P"], 1 / 3)[0]
    line = to_json(done)
    assert list(line) == ORDER[:10] + ["grades", "corpus_grades", "erag", "answer_ll", "answer", "outcome",
                                       "outcome_note", "metrics"]
    assert line["outcome"] is None and line["metrics"] == {"UDCG": pytest.approx(expit((0.8 - 0.5 / 3) / 2)), "P": 0.5}
    text = json.dumps(line)
    assert json.dumps(to_json(from_json(json.loads(text)))) == text and from_json(json.loads(text)) == done
    assert "outcome_note" not in to_json(answered(r, "Paris", "correct"))


def test_a_bad_line_is_a_located_error():
    with pytest.raises(InputError, match="contexts.jsonl.gz:3: missing field 'relevant'"):
        from_json({"qid": "q", "cid": "q:0"}, "contexts.jsonl.gz:3")
    with pytest.raises(InputError, match="unknown field 'utility'"):
        from_json({"qid": "q", "cid": "q:0", "relevant": [True], "utility": [1.0]})


def test_scoring_returns_new_records_and_keeps_the_order_of_mixed_k():
    recs = [context_record("q", f"q:{i}", "oracle", "test", docids, scores(), 2, None)
            for i, docids in enumerate((["a", "b"], ["c"], ["b", "c"], ["a"]))]
    before = list(recs)
    scored = studies.score_each_k(recs, ["UDCG", "RR"], 1 / 3, "pool", {})
    assert recs == before and all(r.metrics is None for r in recs)  # the input is left as it was
    assert [r.cid for r in scored] == ["q:0", "q:1", "q:2", "q:3"]
    assert [r.metrics["RR"] for r in scored] == [1.0, 0.0, 0.0, 1.0]
    assert [dataclasses.replace(r, metrics=None) for r in scored] == recs
    with pytest.raises(InputError, match="several k"):
        studies.score_records(recs, ["UDCG"], 1 / 3)


def test_correlate_on_records_equals_the_contexts_file_route(tmp_path):
    outcomes = ["correct", "wrong", "abstained", "correct", "wrong", "correct"]
    recs = [ContextRecord(qid=f"q{i // 3}", cid=f"q{i // 3}:{i % 3}", relevant=(u > 0,), utilities=(u,), answer="a",
                          outcome=Outcome(f"q{i // 3}", f"q{i // 3}:{i % 3}", "a", o), metrics={"M": m, "N": n})
            for i, (u, o, m, n) in enumerate(zip([0.9, -0.4, 0.2, 0.5, -0.9, 0.1], outcomes,
                                                 [0.9, 0.1, 0.5, 0.7, 0.2, 0.4], [0.3, 0.6, 0.1, 0.2, 0.9, 0.5]))]
    ungraded = ContextRecord(qid="q0", cid="q0:x", relevant=(True,), utilities=(0.5,), answer="?", metrics={"M": 1, "N": 1})
    table, notes = studies.correlate_records([*recs, ungraded], ["M", "N"], "M", "zero", 200, 0, "toy")
    assert notes == {"contexts": 6, "ungraded_contexts": 1, "na_values": 0, "questions": 2}
    path = tmp_path / "contexts.jsonl"
    path.write_text("".join(json.dumps(to_json(r)) + "\n" for r in recs))
    again = correlation_table(read_contexts(str(path)), None, CorrelationTests(baseline="M", n_boot=200),
                              title="toy", best="significant")
    assert json.dumps(table.rows) == json.dumps(again.rows)  # NaN where undefined, in both


def test_every_flow_reads_one_record_with_a_typed_outcome_and_its_other_fields_kept(tmp_path):
    path = tmp_path / "judged.jsonl"
    lines = [{"qid": "q1", "cid": "bm25", "pids": ["d1", "d2"], "relevant": [True, False], "utilities": [0.5, -0.25],
              "question": "who?", "answer": "Ada", "outcome": "correct", "label": "correct", "model": "m"},
             {"qid": "q1", "cid": "dense", "relevant": [False, False], "answer": "x", "outcome": None,
              "outcome_note": "", "error": "no JSON in the reply"}]
    path.write_text("".join(json.dumps(line) + "\n" for line in lines))
    file = read_context_file(path)
    first, second = file.records
    assert isinstance(first.outcome, Outcome) and first.label == "correct" and first.outcome.answer == "Ada"
    assert first.extra == {"question": "who?", "label": "correct", "model": "m"} and first.docids == ("d1", "d2")
    assert first.pids == first.docids  # the documented read-only alias (the line's key)
    assert second.label is None and second.outcome.error == "no JSON in the reply"
    assert to_json(first) == {k: lines[0][k] for k in ("qid", "cid", "pids", "relevant", "utilities", "answer",
                                                       "outcome", "question", "label", "model")}
    assert file.sources[0] == lines[0]  # what score echoes back, as read
    with pytest.raises(InputError, match=r"judged.jsonl:1: field 'outcome' = 'maybe'"):
        path.write_text(json.dumps({**lines[0], "outcome": "maybe"}) + "\n")
        read_context_file(path)
