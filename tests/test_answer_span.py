"""The default answer rule, "span": an alias in the answer, or the answer a span of an alias that
keeps its numbers (with their scale) or half its content words (issue #48, item 3)."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from udcg.grade.judges import MATCHES, RuleJudge
from udcg.grade.rules import answer_outcome, span_match
from udcg.text import answer_tokens


@pytest.mark.parametrize(("answer", "gold"), [
    ("76", ["76 amino acids"]),                          # a bare number against number + unit
    ("13.3%", ["13.3% (95% CI 6.9-23.6%)"]),             # the gold's parenthetical is an aside
    ("13.3 percent", ["13.3%"]),
    ("Obama", ["Barack Obama"]),                         # half the alias's content words
    ("mucosal immune response", ["the mucosal immune response"]),
    ("four", ["4"]), ("1,000", ["1000"]), ("7.5 million", ["7,500,000"]),
    ("It was released in May 1995.", ["1995"]),          # the alias in the answer (the old rule)
    ("Obama's", ["Barack Obama"]),
    ("counter-clockwise", ["counterclockwise"]),         # a hyphen inside a word joins it (as contains does)
    ("1939-1945", ["1939"]),                             # a hyphen between numbers separates them
])
def test_span_grades_these_correct(answer, gold):
    assert span_match(answer, gold)
    assert answer_outcome(answer, gold) == "correct"  # the default rule


@pytest.mark.parametrize(("answer", "gold"), [
    ("the", ["the mucosal immune response"]),            # no content word
    ("of the", ["the Department of the Interior"]),
    ("2019", ["2003"]),
    ("76", ["76 to 80 amino acids"]),                    # half a range is not the answer
    ("7", ["7 million"]),                                # the scale is part of the number
    ("amino acids", ["76 amino acids"]),                 # the number is the answer
    ("Carver", ["George Washington Carver"]),            # a third of the alias
    ("23.6%", ["13.3% (95% CI 6.9-23.6%)"]),             # the interval's end, not the estimate
    ("Paris", ["London"]),
    ("Malia", ["Malia and Sasha"]),                      # one item of a list
])
def test_span_grades_these_wrong(answer, gold):
    assert not span_match(answer, gold)
    assert answer_outcome(answer, gold) == "wrong"


def test_the_old_rule_keeps_its_name_and_its_verdicts():
    assert "contains" in MATCHES and "span" in MATCHES
    assert answer_outcome("76", ["76 amino acids"], "contains") == "wrong"
    assert answer_outcome("It was 76 amino acids long", ["76 amino acids"], "contains") == "correct"
    assert RuleJudge("answer").match == "span" and RuleJudge("answer").name == "rules:span"
    assert RuleJudge("answer", match="contains").name == "rules:contains"


def test_tokens_keep_numbers_whole():
    assert answer_tokens("13.3% (95% CI 6.9-23.6%)") == ("13.3", "%", "95", "%", "ci", "6.9", "23.6", "%")
    assert answer_tokens("The 1,000 Days") == ("1000", "days")
    assert answer_tokens("seven million") == ("7000000",)
    assert answer_tokens("2.50") == ("2.5",)
    assert answer_tokens("") == ()


def test_judge_answer_rules_grades_by_span_by_default(tmp_path):
    rows = [{"qid": "q1", "cid": "c1", "question": "how long is it", "answers": ["76 amino acids"], "answer": "76"},
            {"qid": "q2", "cid": "c1", "question": "when", "answers": ["2003"], "answer": "2019"},
            {"qid": "q3", "cid": "c1", "question": "what", "answers": ["the mucosal immune response"], "answer": "the"}]
    src = tmp_path / "answers.jsonl"
    src.write_text("".join(json.dumps(r) + "\n" for r in rows))
    out = tmp_path / "judged.jsonl"
    done = subprocess.run([sys.executable, "-m", "udcg", "judge", "answer", str(src), "-o", str(out), "--judge", "rules",
                           "--no-progress"], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    judged = [json.loads(line) for line in out.read_text().splitlines()]
    assert [r["outcome"] for r in judged] == ["correct", "wrong", "wrong"]


words = st.lists(st.sampled_from(["red", "dog", "the", "of", "Sasha", "1998", "76", "amino", "%", "(x)"]),
                 max_size=6).map(" ".join)


@settings(deadline=None)  # no timing: the suite runs at any machine load
@given(words, st.lists(words, min_size=1, max_size=3))
def test_span_properties(pred, answers):
    """no content word => never correct; else contains => span (but where contains' normalisation drops a
    '%' of the alias: "1998 %" is contained in "red 1998", a percentage the span rule keeps apart from the
    year); span is a property of each alias alone."""
    if all(t in {"the", "of", "%"} for t in answer_tokens(pred)):
        assert not span_match(pred, answers)
    elif answer_outcome(pred, [a for a in answers if "%" not in a], "contains") == "correct":
        assert span_match(pred, answers)
    assert span_match(pred, answers) == any(span_match(pred, [a]) for a in answers)


def test_a_percentage_is_not_the_bare_number():
    """Hypothesis found it: contains drops the '%' and calls "red 1998" correct for "1998 %"; span does not."""
    assert answer_outcome("red 1998", ["1998 %"], "contains") == "correct"
    assert not span_match("red 1998", ["1998 %"]) and span_match("red 1998 %", ["1998 %"])


@settings(deadline=None)  # no timing: the suite runs at any machine load
@given(words, words)
def test_an_answer_equal_to_an_alias_is_correct(text, other):
    if any(t not in {"the", "of", "%"} for t in answer_tokens(text)):
        assert span_match(text, [other, text])


@settings(deadline=None)  # no timing: the suite runs at any machine load
@given(st.text(max_size=40), st.lists(st.text(max_size=30), min_size=1, max_size=3))
def test_any_text_grades_without_error(pred, answers):
    tokens = answer_tokens(pred)
    assert all(t and t == t.lower() for t in tokens)
    assert answer_outcome(pred, answers) in ("correct", "wrong", "abstained")
