"""docs/answer-grading.md's data: the hand-labelled sample is the one the script draws from the
published runs, and the figures the document quotes are the ones the script computes."""

from __future__ import annotations

import json
from pathlib import Path

from tests.conftest import load_script

ROOT = Path(__file__).resolve().parents[1]
LABELS = ROOT / "docs" / "answer-grading-labels.jsonl"


def _rows() -> list[dict]:
    return [json.loads(line) for line in LABELS.read_text(encoding="utf-8").splitlines()]


def test_the_labelled_answers_are_the_scripts_sample():
    script = load_script("answer_grading")
    drawn = script.sample(75, 0, ROOT / "docs" / "results")
    rows = _rows()
    assert [{k: v for k, v in r.items() if k not in ("hand", "note")} for r in rows] == drawn
    assert all(r["hand"] in ("correct", "wrong") for r in rows)
    assert sum(r["stratum"] == "random" for r in rows) == 150


def test_the_document_quotes_the_scripts_figures():
    text = (ROOT / "docs" / "answer-grading.md").read_text(encoding="utf-8")
    figures = load_script("answer_grading").figures(LABELS, ROOT / "docs" / "answer-grading-llm.jsonl")
    rule_rows = [line for line in figures.splitlines() if line.startswith(("| span |", "| contains |", "| exact |",
                                                                          "| f1 |", "| (hand) |", "| LLM judge |"))]
    assert len(rule_rows) == 22
    for line in rule_rows:
        assert line in text, line
