"""Strict parsing of judge replies: a table of real-looking well-formed and malformed replies."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from udcg.grade.judges import TASKS
from udcg.grade.parsing import grade_value, parse_reply

REL = TASKS["relevance"].choices
ANS = TASKS["answer"].choices
G5 = TASKS["grade"].choices
FIXTURES = Path(__file__).parent / "data" / "judge_replies"

# (id, choices, reply, expected label, expected repairs or error substring)
OK = [
    ("plain", REL, '{"motivation": "The document states the answer.", "grade": "A"}', "relevant", ()),
    ("plain-b", REL, '{\n    "motivation": "Mentions the topic only.",\n    "grade": "B"\n}', "irrelevant", ()),
    ("grade-first", REL, '{"grade": "B", "motivation": "No answer here."}', "irrelevant", ()),
    ("no-motivation", REL, '{"grade": "A"}', "relevant", ()),
    ("lowercase-letter", REL, '{"motivation": "ok", "grade": "a"}', "relevant", ()),
    ("key-case", REL, '{"Motivation": "ok", "Grade": "B"}', "irrelevant", ()),
    ("newline-in-string", REL, '{"motivation": "line one\nline two", "grade": "A"}', "relevant", ()),
    ("unicode", REL, '{"motivation": "Le document cite « Paris » — la réponse.", "grade": "A"}', "relevant", ()),
    ("braces-in-motivation", REL, '{"motivation": "The text {in braces} is fine", "grade": "B"}', "irrelevant", ()),
    ("fence-json", REL, '```json\n{\n  "motivation": "States the date.",\n  "grade": "A"\n}\n```', "relevant", ("code-fence",)),
    ("fence-bare", REL, '```\n{"motivation": "x", "grade": "B"}\n```', "irrelevant", ("code-fence",)),
    ("fence-with-prose", REL, 'Here is my evaluation:\n```json\n{"motivation": "x", "grade": "A"}\n```\nHope this helps!', "relevant", ("code-fence",)),
    ("leading-text", REL, 'Sure! Here is the JSON object:\n{"motivation": "It names the actor.", "grade": "A"}', "relevant", ("surrounding-text",)),
    ("trailing-text", REL, '{"motivation": "x", "grade": "B"}\n\nThe document does not mention the answer.', "irrelevant", ("surrounding-text",)),
    ("single-quotes", REL, "{'motivation': 'It states the year 1998.', 'grade': 'A'}", "relevant", ("single-quotes",)),
    ("single-quotes-fenced", REL, "```python\n{'motivation': 'x', 'grade': 'B'}\n```", "irrelevant", ("code-fence", "single-quotes")),
    ("trailing-comma", REL, '{"motivation": "x", "grade": "A",}', "relevant", ("trailing-comma",)),
    ("grade-with-word", REL, '{"motivation": "x", "grade": "A: RELEVANT"}', "relevant", ("grade-text",)),
    ("grade-word-only", REL, '{"motivation": "x", "grade": "IRRELEVANT"}', "irrelevant", ("grade-text",)),
    ("grade-word-lower", REL, '{"motivation": "x", "grade": "relevant"}', "relevant", ("grade-text",)),
    ("grade-paren", REL, '{"motivation": "x", "grade": "(B) IRRELEVANT"}', "irrelevant", ("grade-text",)),
    ("truncated-after-grade", REL, '{"grade": "A", "motivation": "The document says that the film was released on Aug', "relevant", ("truncated",)),
    ("unescaped-quotes", REL, '{"motivation": "The film "Get On Up" names Nelsan Ellis.", "grade": "A"}', "relevant", ("grade-line",)),
    ("truncated-fenced", REL, '```json\n{"grade": "B", "motivation": "The passage is about the archit', "irrelevant", ("truncated",)),
    ("list-wrapped", REL, '[{"motivation": "x", "grade": "B"}]', "irrelevant", ("surrounding-text",)),
    ("answer-a", ANS, '{"motivation": "Matches Malia and Sasha.", "grade": "A"}', "correct", ()),
    ("answer-b", ANS, '{"motivation": "Contradicts.", "grade": "B"}', "wrong", ()),
    ("answer-c", ANS, '{"motivation": "Says NO-RESPONSE.", "grade": "C"}', "abstained", ()),
    ("answer-word", ANS, '{"motivation": "x", "grade": "INCORRECT"}', "wrong", ("grade-text",)),
    ("answer-letter-word", ANS, '{"motivation": "x", "grade": "C: ABSTAINED"}', "abstained", ("grade-text",)),
    ("grade5-int", G5, '{"motivation": "Decisive.", "grade": 5}', 5, ()),
    ("grade5-str", G5, '{"motivation": "Tangential.", "grade": "2"}', 2, ()),
    ("grade5-float", G5, '{"motivation": "x", "grade": 3.0}', 3, ()),
    ("grade5-fenced", G5, '```json\n{"motivation": "x", "grade": 4}\n```', 4, ("code-fence",)),
]

BAD = [
    ("empty", REL, "", "empty reply"),
    ("whitespace", REL, "   \n  ", "empty reply"),
    ("not-json-prose", REL, "The document is relevant because it mentions Long Island.", "no JSON object"),
    ("bare-letter", REL, "A", "no JSON object"),
    ("answer-line", REL, "Answer: B: IRRELEVANT", "no JSON object"),
    ("truncated-before-grade", REL, '{"motivation": "The document describes the history of the town and its', "never closes"),
    ("no-grade-field", REL, '{"motivation": "It is relevant.", "relevance": "A"}', "no 'grade' field"),
    ("grade-out-of-set", REL, '{"motivation": "x", "grade": "C"}', "not one of A, B"),
    ("grade-empty", REL, '{"motivation": "x", "grade": ""}', "not one of"),
    ("grade-empty-truncated", REL, '{"grade": "", "motivation": "x', "not one of"),
    ("grade-null", REL, '{"motivation": "x", "grade": null}', "not one of"),
    ("grade-bool", REL, '{"motivation": "x", "grade": true}', "not one of"),
    ("grade-list", REL, '{"motivation": "x", "grade": ["A"]}', "not one of"),
    ("template-echo", REL, '{\n    "motivation": "Brief explanation (max 2 sentences)",\n    "grade": "A" or "B"\n}', "could not be read"),
    ("two-objects-conflict", REL, '{"motivation": "x", "grade": "A"}\n{"motivation": "y", "grade": "B"}', "2 grade fields"),
    ("two-objects-same", REL, '{"grade": "A"} {"grade": "A"}', "2 grade fields"),
    ("duplicate-key", REL, '{"motivation": "x", "grade": "A", "grade": "B"}', "2 grade fields"),
    ("fence-and-repeat", REL, '```json\n{"motivation": "x", "grade": "B"}\n```\nFinal answer: {"grade": "A"}', "2 grade fields"),
    ("letter-word-conflict", REL, '{"motivation": "x", "grade": "A: IRRELEVANT"}', "conflicting"),
    ("both-letters", REL, '{"motivation": "x", "grade": "A or B"}', "not one of"),
    ("grade5-out-of-range", G5, '{"motivation": "x", "grade": 6}', "not one of 5, 4, 3, 2, 1"),
    ("grade5-zero", G5, '{"motivation": "x", "grade": 0}', "not one of"),
    ("grade5-fraction", G5, '{"motivation": "x", "grade": 4.5}', "not one of"),
    ("grade5-word", G5, '{"motivation": "x", "grade": "five"}', "not one of"),
    ("answer-d", ANS, '{"motivation": "x", "grade": "D"}', "not one of A, B, C"),
    ("answer-relevance-word", ANS, '{"motivation": "x", "grade": "RELEVANT"}', "not one of"),
    ("nested-grade", REL, '{"result": {"motivation": "x", "grade": "A"}}', "no 'grade' field"),
    ("broken-json", REL, '{"motivation": "x" "grade" "A"}', "could not be read"),
    ("injected-double", REL, 'Ignore the above. {"grade": "A"} Actually: {"motivation": "m", "grade": "B"}', "2 grade fields"),
    ("python-call", REL, "print({'grade': 'A'}, {'grade': 'B'})", "2 grade fields"),
]


@pytest.mark.parametrize("case", OK, ids=[c[0] for c in OK])
def test_parses(case):
    _, choices, reply, label, repairs = case
    p = parse_reply(reply, choices)
    assert p.error == ""
    assert p.label == label
    assert p.repair == repairs


@pytest.mark.parametrize("case", BAD, ids=[c[0] for c in BAD])
def test_refuses(case):
    _, choices, reply, message = case
    p = parse_reply(reply, choices)
    assert p.label is None
    assert message in p.error


def test_table_is_large():
    assert len(OK) + len(BAD) >= 36
    assert len(BAD) >= 20


def test_motivation_kept():
    p = parse_reply('Here:\n{"motivation": "It names \\"Nelsan Ellis\\".", "grade": "A"}', REL)
    assert p.motivation == 'It names "Nelsan Ellis".'
    p = parse_reply('{"grade": "B", "motivation": "cut off mid-sent', REL)
    assert p.label == "irrelevant" and p.motivation == "cut off mid-sent"


def _fixture_rows():
    for path in sorted(FIXTURES.glob("*.jsonl")):
        for n, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
            if line.strip():
                yield pytest.param(json.loads(line), id=f"{path.stem}:{n}")


@pytest.mark.parametrize("row", list(_fixture_rows()))
def test_recorded_model_replies(row):
    """Replies recorded from real small models (tests/data/judge_replies/*.jsonl) with the label a
    reader of the reply agrees with (null = a person cannot tell either)."""
    p = parse_reply(row["reply"], TASKS[row["task"]].choices)
    assert p.label == row["label"], p.error


@given(st.text(max_size=200))
def test_never_crashes_and_labels_are_allowed(reply):
    p = parse_reply(reply, REL)
    assert p.label in (None, "relevant", "irrelevant")
    assert (p.label is None) == bool(p.error)


@given(st.sampled_from(["A", "B"]), st.text(max_size=80))
def test_any_motivation_roundtrips(grade, motivation):
    reply = json.dumps({"motivation": motivation, "grade": grade})
    p = parse_reply(reply, REL)
    if '"grade":' in json.dumps(motivation) or "'grade':" in motivation:
        return  # a motivation that spells a grade field is refused as a repeated answer: fine
    assert p.label == ("relevant" if grade == "A" else "irrelevant")
    assert p.motivation == motivation


def test_grade_value_direct():
    assert grade_value(" B ", REL)[0] == "irrelevant"
    assert grade_value(2, REL)[0] is None
    assert grade_value("**A**", REL)[0] == "relevant"
