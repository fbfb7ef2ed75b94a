"""Issue #34 item 5 (quiet and true output): a measure spelled as an alias is named once; an output
naming an existing input file gets the input's message, not "is not a regular file"."""

from __future__ import annotations

import shutil

from udcg.cli import main
from udcg.io.sources import example_path
from udcg.metrics.measures import alias_notes


def test_an_alias_is_named_once_and_case_alone_is_no_note(tmp_path, capsys):
    assert alias_notes("MRR@5,ndcg@5,map,MRR@5") == ["MRR@5 is RR@5 (an alias; the output names it RR@5)",
                                                      "map is AP (an alias; the output names it AP)"]
    folder = example_path()
    assert main(["score", "--run", str(folder / "runs" / "bm25.trec"), "--qrels", str(folder / "qrels" / "test.tsv"),
                 "--metrics", "MRR@5,P@5", "-o", str(tmp_path / "pq.tsv")]) == 0
    out, err = capsys.readouterr()
    assert "all\tRR@5\t" in out and err.count("MRR@5 is RR@5") == 1
    assert main(["compare", "--run", str(folder / "runs" / "bm25.trec"), "--run", str(folder / "runs" / "dense.trec"),
                 "--qrels", str(folder / "qrels" / "test.tsv"), "--metrics", "MRR@5", "--n-boot", "100"]) == 0
    assert capsys.readouterr().err.count("MRR@5 is RR@5") == 1


def test_annotate_o_naming_an_existing_qrels_file_says_it_is_an_input(tmp_path, capsys):
    folder = tmp_path / "nq-example"
    shutil.copytree(example_path(), folder)
    before = (folder / "qrels" / "test.tsv").read_bytes()
    assert main(["annotate", "--corpus", str(folder), "--run", str(folder / "runs" / "bm25.trec"), "--qrels",
                 str(folder / "qrels" / "test.tsv"), "--model", "smollm2-135m", "-o",
                 str(folder / "qrels" / "test.tsv")]) == 2
    err = capsys.readouterr().err
    assert "is not a regular file" not in err and "an output never replaces an input" in err
    assert (folder / "qrels" / "test.tsv").read_bytes() == before


def test_the_tie_note_only_when_ties_reach_the_top_k_named_by_the_run(caplog):
    """bm25 of the packaged example has 4 queries with tied scores, all below rank 5: for P@5 no note
    (a count at INFO, `udcg -v`), for P@10 one note saying so, and from the API named by the run."""
    import logging

    import udcg
    from udcg.flows.run_scores import score_runs

    folder = example_path()
    run, qrels = folder / "runs" / "bm25.trec", folder / "qrels" / "test.tsv"
    assert not [n for n in score_runs({"bm25": run}, qrels, metrics="P@5")["bm25"].notes if "tied" in n]
    assert [n for n in score_runs({"bm25": run}, qrels, metrics="P@10")["bm25"].notes if "tied" in n] == [
        "4 queries have tied scores within the top 10: ranked as trec_eval ranks them (score, then docid "
        "descending), not by the file's rank column"]
    with caplog.at_level(logging.INFO):
        udcg.evaluate(run, qrels, metrics="P@5")
    ties = [r for r in caplog.records if "tied scores" in r.getMessage()]
    assert len(ties) == 1 and ties[0].levelno == logging.INFO
    assert ties[0].getMessage() == "bm25: 4 queries have tied scores below the top 5 only (no effect on these measures)"
    caplog.clear()
    with caplog.at_level(logging.WARNING):
        udcg.evaluate(run, qrels, metrics="P@10")
    assert [r.getMessage()[:45] for r in caplog.records if "tied" in r.getMessage()] == [
        "bm25: 4 queries have tied scores within the t"]  # before: no run name from udcg.evaluate
