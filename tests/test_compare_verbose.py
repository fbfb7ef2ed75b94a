"""``udcg -v compare``: the label block is printed once (the table's footer holds it), and -v adds
only what the footer leaves out: the queries the label checks flag, when there are any (issue #48's
trial: the labels line came twice, the second time with no flagged query under it)."""

from __future__ import annotations

from pathlib import Path

import pytest

from udcg.cli import main


@pytest.fixture
def example(tmp_path: Path) -> Path:
    assert main(["example", str(tmp_path / "ex")]) == 0
    return tmp_path / "ex"


def _compare(example: Path, qrels: Path, capsys) -> tuple[str, str]:
    assert main(["-v", "compare", "--run", str(example / "runs" / "bm25.trec"), "--run",
                 str(example / "runs" / "dense.trec"), "--qrels", str(qrels), "--metrics", "nDCG@5,P@5",
                 "--n-boot", "200"]) == 0
    captured = capsys.readouterr()
    return captured.out, captured.err


def test_the_labels_line_is_printed_once_and_nothing_is_listed_without_a_flagged_query(example, capsys):
    out, err = _compare(example, example / "qrels" / "test.tsv", capsys)
    labels = "labels (qrels, top 5 of each run): unjudged pairs, counted irrelevant (R = -1):"
    assert (out + err).count(labels) == 1 and labels in out
    assert "  query " not in err and not [ln for ln in err.splitlines() if ln.startswith("labels")]


def test_with_a_flagged_query_v_lists_it_under_the_footer(example, tmp_path, capsys):
    lines = (example / "qrels" / "test.tsv").read_text().splitlines()
    qrels = tmp_path / "qrels-nq3-irrelevant.tsv"  # nq3's one judged document judged irrelevant
    qrels.write_text("\n".join(ln.rsplit("\t", 1)[0] + "\t0" if ln.startswith("nq3\t") else ln for ln in lines) + "\n")
    out, err = _compare(example, qrels, capsys)
    assert (out + err).count("labels (qrels, top 5 of each run)") == 1
    assert "  queries without a relevant document: 1 of 20 (nq3)" in out
    assert "  query nq3: 0 relevant (none)" in err.splitlines()
    assert "  query nq3: 0 relevant (none)" not in out  # the footer names the count; -v the rows
