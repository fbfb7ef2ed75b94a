"""``udcg.io.tables.Table``: a report as data, rendered to Markdown, CSV and JSON with NaN as NA."""

from __future__ import annotations

import json
import math

from udcg.io.tables import Table


def table() -> Table:
    t = Table(["metric", "mean", "n"], title="Scores")
    t.add(metric="UDCG", mean=0.61234, n=10, extra="not a column")
    t.add(metric="RA-nWG@5", mean=math.nan, n=0)
    t.add(metric="RR", n=3)  # a missing value
    return t


def test_markdown_rounds_floats_and_writes_na_for_nan():
    assert table().markdown(digits=2) == (
        "### Scores\n\n"
        "| metric | mean | n |\n"
        "|---|---|---|\n"
        "| UDCG | 0.61 | 10 |\n"
        "| RA-nWG@5 | NA | 0 |\n"
        "| RR |  | 3 |\n")
    assert Table(["a"]).markdown() == "| a |\n|---|\n"  # no title, no rows


def test_csv_and_records_keep_only_the_columns_and_leave_nan_empty():
    assert table().csv() == "metric,mean,n\nUDCG,0.61234,10\nRA-nWG@5,,0\nRR,,3\n"
    assert table().records() == [{"metric": "UDCG", "mean": 0.61234, "n": 10},
                                 {"metric": "RA-nWG@5", "mean": None, "n": 0},
                                 {"metric": "RR", "mean": None, "n": 3}]


def test_write_picks_the_format_by_suffix_and_leaves_no_temporary(tmp_path):
    t = table()
    for name in ("t.md", "t.csv", "t.json"):
        t.write(tmp_path / name)
    assert (tmp_path / "t.md").read_text() == t.markdown()
    assert (tmp_path / "t.csv").read_text() == t.csv()
    assert json.loads((tmp_path / "t.json").read_text()) == t.records()  # valid JSON: NaN became null
    assert sorted(p.name for p in tmp_path.iterdir()) == ["t.csv", "t.json", "t.md"]
