"""``udcg reader-check --json`` says what the text says (issue #48's trial: the text said
"borderline", the JSON ``"verdict": "cannot"`` with ``"borderline": true``): ``verdict`` is the
verdict line's word, ``leans`` the thresholds' side of a borderline one; the API's ``conclusion``
is the same word; a record read back (``meta.json``), new or of an earlier version, is the same check."""

from __future__ import annotations

import gzip
import json
from pathlib import Path

import pytest

import udcg
from udcg.cli import main
from udcg.flows.reader_check import reader_note, recorded_check
from udcg.metrics.reader_check import ReaderCheck

RESULTS = Path(__file__).resolve().parents[1] / "docs" / "results"


def _rows(run: str, queries: int) -> list[dict]:
    """The first record per (query, passage) of a published run's annotations, its first ``queries`` queries."""
    rows: dict = {}
    for line in gzip.open(RESULTS / run / "data" / "annotations.jsonl.gz", "rt"):
        r = json.loads(line)
        rows.setdefault((r["qid"], r["pid"]), r)
    keep = set(list(dict.fromkeys(q for q, _ in rows))[:queries])
    return [r for (q, _), r in rows.items() if q in keep]


def _folder(path: Path, rows: list[dict]) -> Path:
    path.mkdir()
    (path / "utilities.jsonl").write_text("".join(json.dumps(
        {"qid": r["qid"], "docid": r["pid"], "p_abs": r["p_abs"], "relevant": r["relevant"], "relevance_source": "qrels",
         "model": "qwen2.5-coder-0.5b", "estimator": "first-token"}) + "\n" for r in rows))
    return path


@pytest.fixture
def borderline(tmp_path: Path) -> Path:
    """10 queries of the published 0.5B NQ reader: AUC about 0.60, its interval reaching above 0.75."""
    return _folder(tmp_path / "utilities", _rows("nq-qwen0.5b", 10))


def test_the_json_verdict_is_the_texts(borderline, capsys):
    assert main(["reader-check", str(borderline), "--n-boot", "300"]) == 0
    text = capsys.readouterr().out
    assert "  verdict: borderline: the AUC" in text
    assert main(["reader-check", str(borderline), "--n-boot", "300", "--json"]) == 0
    record = json.loads(capsys.readouterr().out)[str(borderline)]
    assert record["verdict"] == "borderline" and record["leans"] == "cannot" and record["borderline"] is True
    check = udcg.reader_check(borderline, n_boot=300)
    assert check.conclusion == "borderline" and check.verdict == "cannot" and check.to_dict() == record


def test_a_settled_verdict_has_no_lean(tmp_path, capsys):
    folder = _folder(tmp_path / "u", _rows("nq-qwen1.5b", 40))
    assert main(["reader-check", str(folder), "--n-boot", "300", "--json"]) == 0
    record = json.loads(capsys.readouterr().out)[str(folder)]
    check = udcg.reader_check(folder, n_boot=300)
    assert not check.borderline and record["verdict"] == check.verdict == check.conclusion and record["leans"] is None
    assert ("  verdict: this reader " + ("can" if check.verdict == "can" else "cannot")) in "\n".join(check.lines())


def test_a_record_reads_back_as_the_same_check(borderline):
    check = udcg.reader_check(borderline, n_boot=300)
    back = ReaderCheck.from_dict(json.loads(json.dumps(check.to_dict())))
    assert back.verdict == "cannot" and back.borderline and back.lines() == check.lines()
    # a record of an earlier version: the thresholds' side under "verdict", "borderline" beside it, no "leans"
    old = {**check.to_dict(), "verdict": "cannot"}
    del old["leans"]
    assert ReaderCheck.from_dict(old).lines() == check.lines()
    # compare's footer reads the record annotate wrote into meta.json: the same sentence either way
    (borderline / "meta.json").write_text(json.dumps({"model": "qwen2.5-coder-0.5b", "reader_check": check.to_dict()}))
    assert recorded_check(borderline).conclusion == "borderline"
    (note,) = reader_note(borderline, ["UDCG@5"])
    assert f"{check.verdict_text()}." in note and "borderline: the AUC" in note


def test_the_judged_only_line_and_record_agree():
    """The check of the judged pairs alone says "borderline (leans ...)" in the text and in its record."""
    rows = _rows("nq-qwen0.5b", 10)
    from udcg.metrics.reader_check import ReaderPairs, check_reader_pairs

    unjudged = [i for i, r in enumerate(rows) if not r["relevant"]][::3]  # a third of the irrelevant pairs unjudged
    check = check_reader_pairs(ReaderPairs([r["p_abs"] for r in rows], [r["relevant"] for r in rows],
                                     [i not in unjudged for i in range(len(rows))], [r["qid"] for r in rows]),
                         n_boot=300)
    j = check.judged_only
    assert j is not None and j.borderline and j.verdict == "cannot"
    record = check.to_dict()["judged_only"]
    assert record["verdict"] == "borderline" and record["leans"] == "cannot"
    assert check.judged_line().endswith("verdict: borderline (leans cannot)")


def test_the_trials_own_folder_says_borderline_in_both(capsys):
    """The DPR trial's utilities (tests/data/dpr-trial-qwen0.5b, 5 queries, 45 pairs): the text said
    "borderline" and the JSON "cannot" (docs/trial-dpr.md)."""
    folder = str(Path(__file__).parent / "data" / "dpr-trial-qwen0.5b")
    assert main(["reader-check", folder]) == 0
    assert "  verdict: borderline: the AUC 0.666 is below 0.75" in capsys.readouterr().out
    assert main(["reader-check", folder, "--json"]) == 0
    record = json.loads(capsys.readouterr().out)[folder]
    assert (record["verdict"], record["leans"], record["borderline"]) == ("borderline", "cannot", True)
