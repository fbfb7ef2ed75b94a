"""The notes a scored run carries: tied scores are re-ranked by trec_eval's rule, and the user is told
how many queries that touched (file runs through the columnar parser, dict runs through the dicts)."""

from __future__ import annotations

from udcg.flows.run_scores import score_runs

RUN = """q1 Q0 d1 1 2.0 t
q1 Q0 d2 2 2.0 t
q1 Q0 d3 3 1.0 t
q2 Q0 d1 1 3.0 t
q2 Q0 d4 2 1.0 t
q3 Q0 d5 1 1.00000001 t
q3 Q0 d6 2 1.0 t
"""
QRELS = {"q1": {"d1": 1}, "q2": {"d4": 1}, "q3": {"d6": 1}}


def test_tied_queries_are_counted_for_files_and_dicts(tmp_path):
    path = tmp_path / "run.trec"
    path.write_text(RUN)
    as_dict = {"q1": {"d1": 2.0, "d2": 2.0, "d3": 1.0}, "q2": {"d1": 3.0, "d4": 1.0}, "q3": {"d5": 1.00000001, "d6": 1.0}}
    for run in (str(path), as_dict):
        notes = score_runs({"r": run}, QRELS, metrics="P@1,RR")["r"].notes
        # q1 ties at 2.0; q3's two scores are one float32, a tie to trec_eval; q2 has none
        assert [n for n in notes if "tied scores" in n] == [
            "2 queries have tied scores: ranked as trec_eval ranks them (score, then docid descending), not by the "
            "file's rank column"]
        values = score_runs({"r": run}, QRELS, metrics="P@1")["r"].values["P@1"]
        assert values.tolist() == [0.0, 0.0, 1.0]  # d2 > d1 on q1; d6 > d5 on q3 (docid descending)


def test_no_tie_no_note(tmp_path):
    path = tmp_path / "run.trec"
    path.write_text("q1 Q0 d1 1 2.0 t\nq1 Q0 d2 2 1.0 t\n")
    assert not [n for n in score_runs({"r": str(path)}, {"q1": {"d1": 1}}, metrics="P@1")["r"].notes if "tied" in n]
