"""Rule-based judges: abstention family, exact match, token F1 (hand-computed and properties)."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from udcg.grade.rules import answer_outcome, contains_answer, exact_match, is_abstention, token_f1


@pytest.mark.parametrize("text", [
    "NO-RESPONSE", "no-response", "NO-RESPONSE.", "NO_RESPONSE", "Answer: NO-RESPONSE", "No response",
    "I don't know.", "I don\u2019t know the names of his children", "I do not know", "i dont know",
    "I'm not sure about this information", "I am not certain.", "I'm uncertain and don't want to guess",
    "I cannot answer that.", "I can't determine this from the documents", "I cannot provide that information",
    "I am unable to answer", "Unable to determine.", "Not enough information.",
    "The documents do not contain the answer.", "The context doesn't mention it.", "Unknown", "N/A", "",
    "   ",
])
def test_abstentions(text):
    assert is_abstention(text)


@pytest.mark.parametrize("text", [
    "Paris", "Malia and Sasha", "None of the above were elected; the winner was Smith",
    "There was no response from the government until 1990", "The unknown soldier", "I know: it is 1998",
    "He cannot swim", "politician",
])
def test_not_abstentions(text):
    assert not is_abstention(text)


def test_exact_match_and_f1_by_hand():
    assert exact_match("The Eiffel Tower!", ["eiffel tower"])
    assert not exact_match("Eiffel", ["eiffel tower"])
    assert not exact_match("", ["the"])  # both normalise to empty: never a match
    # "big red dog" vs "red dog": P = 2/3, R = 1 -> F1 = 0.8
    assert token_f1("big red dog", ["red dog"]) == pytest.approx(0.8)
    # best alias wins: "dog" vs ["cat", "red dog"] -> P = 1, R = 1/2 -> 2/3
    assert token_f1("dog", ["cat", "red dog"]) == pytest.approx(2 / 3)
    assert token_f1("dog dog", ["dog"]) == pytest.approx(2 * 0.5 * 1 / 1.5)  # bag counts: P = 1/2
    assert token_f1("", ["dog"]) == 0.0 and token_f1("dog", []) == 0.0


def test_containment_is_whole_word():
    assert contains_answer("He was a politician in Texas.", ["politician"])
    assert not contains_answer("Depoliticians", ["politician"])
    assert not contains_answer("anything", ["The", "?"])


def test_answer_outcome_rejects_unknown_rule():
    with pytest.raises(ValueError, match="unknown match"):
        answer_outcome("x", ["x"], match="fuzzy")


words = st.lists(st.sampled_from(["red", "dog", "cat", "the", "big", "Sasha", "1998"]), max_size=6).map(" ".join)


@given(words, st.lists(words, min_size=1, max_size=3))
def test_f1_properties(pred, answers):
    f1 = token_f1(pred, answers)
    assert 0.0 <= f1 <= 1.0
    if exact_match(pred, answers):
        assert f1 == pytest.approx(1.0)
    if contains_answer(pred, answers) or exact_match(pred, answers):
        assert f1 > 0
    assert token_f1(pred, answers) == max(token_f1(pred, [a]) for a in answers)


@given(words, st.lists(words, min_size=1, max_size=3))
def test_outcome_orders_by_strictness(pred, answers):
    """exact => contained (as the whole answer) => F1 = 1 >= any threshold."""
    if is_abstention(pred):
        return
    if answer_outcome(pred, answers, "exact") == "correct":
        assert answer_outcome(pred, answers, "contains") == "correct"
        assert answer_outcome(pred, answers, "f1", 1.0) == "correct"
