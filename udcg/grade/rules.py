"""Rule-based judges that need no LLM: answer containment, exact match, token F1, the span rule
(the default answer rule), abstention.

The answer normalisation and the containment rule are ``udcg.text``'s (SQuAD v1.1
normalisation: lower-case, punctuation and the articles a/an/the dropped, whitespace collapsed), so
the relevance judge and the answer-containment metric always agree.
"""

from __future__ import annotations

import re
import unicodedata
from collections import Counter
from collections.abc import Sequence

from udcg.text import answer_tokens, contains_answer, is_number, normalize_answer, normalized_aliases

__all__ = ["normalize_answer", "contains_answer", "exact_match", "token_f1", "span_match", "is_abstention",
           "answer_outcome", "MATCHES", "RULES"]

# The judge that needs no model (``--judge rules``, the default): answer containment for relevance, the answer rules
# for answers.
RULES = "rules"

# The answer rules, the default first: "span" (extractive gold), then the older ones by their names.
MATCHES = ("span", "contains", "exact", "f1")

# Words that carry no answer alone (an answer made only of these is never correct by the span rule).
STOP_WORDS = frozenset("""
    a an the of in on at to for by with from into onto about as and or nor but than then so is are was were be
    been being it its this that these those there here he she they them his her hers their theirs him we us our
    you your i me my who whom whose which what when where why how not also very some any all each
    """.split()) | {"%"}
_BRACKETS = re.compile(r"\([^()]*\)|\[[^\[\]]*\]")

# The abstention family: the reader prompt's NO-RESPONSE plus the usual refusals (paper Fig. 6).
# Matched on lower-cased text with curly apostrophes straightened.
_ABSTENTION = re.compile("|".join((
    r"no[-_]?response",                                        # the reader prompt's token
    r"^no response\W*$",
    r"\bi\s+(?:do\s+not|don't|dont)\s+know\b",
    r"\bi\s*(?:'m|am)\s+(?:not\s+(?:sure|certain)|unsure|uncertain)\b",
    r"(?:^|\bi\s*(?:'m|am)?\s*)(?:cannot|can't|can\s+not|unable\s+to)\s+"
    r"(?:answer|provide|determine|find|say|tell|respond)\b",
    r"^(?:there\s+is\s+)?(?:not\s+enough|insufficient)\s+information\b",
    r"\b(?:documents?|context|passages?)\s+(?:does\s+not|doesn't|do\s+not|don't)\s+"
    r"(?:contain|mention|provide|say|specify|include|state)\b",
    r"^(?:unknown|n/?a|no\s+answer)\W*$",
)))


def exact_match(prediction: str, answers: Sequence[str]) -> bool:
    """True when the normalised prediction equals a normalised answer alias."""
    pred = normalize_answer(prediction)
    return bool(pred) and pred in normalized_aliases(answers)


def token_f1(prediction: str, answers: Sequence[str]) -> float:
    """Best token-level F1 (bag of normalised words) of the prediction against any alias; 0.0
    when there is no non-empty alias or the prediction is empty."""
    pred = normalize_answer(prediction).split()
    best = 0.0
    for alias in normalized_aliases(answers):
        gold = alias.split()
        common = sum((Counter(pred) & Counter(gold)).values())
        if common:
            precision, recall = common / len(pred), common / len(gold)
            best = max(best, 2 * precision * recall / (precision + recall))
    return best


def _within(part: tuple[str, ...], whole: tuple[str, ...]) -> bool:
    """True when ``part`` occurs in ``whole`` as a contiguous run of tokens."""
    n = len(part)
    return any(whole[i:i + n] == part for i in range(len(whole) - n + 1))


def _alias_forms(alias: str) -> set[tuple[str, ...]]:
    """An alias's tokens, and its tokens without a bracketed aside ("13.3% (95% CI 6.9-23.6%)")."""
    forms = {answer_tokens(alias), answer_tokens(_BRACKETS.sub(" ", alias))}
    return {f for f in forms if f}


def _span_of(answer: tuple[str, ...], alias: tuple[str, ...]) -> bool:
    """The answer, a run of the alias's tokens, is enough of it: every number of the alias (the
    answer is then the number, whatever unit the gold adds), else half its content words; never
    part of a list (an alias with "and": each item is part of the answer)."""
    if not _within(answer, alias) or "and" in alias:  # a list ("Malia and Sasha") needs every item
        return False
    numbers = [t for t in alias if is_number(t)]
    if numbers:
        return all(t in answer for t in numbers)
    content = [t for t in alias if t not in STOP_WORDS]
    return 2 * sum(t not in STOP_WORDS for t in answer) >= len(content)


def span_match(prediction: str, answers: Sequence[str]) -> bool:
    """The span rule, for gold that is an extractive span: correct when the answer holds a content
    word and (a) an alias occurs in it as a run of tokens (containment) or (b) it is a run of an
    alias's tokens holding every number of the alias ("76" for "76 amino acids"; the scale is part of
    a number: "7" is not "7 million") or, for an alias without numbers, half its content words
    ("Obama" for "Barack Obama", not "Carver" for "George Washington Carver"; not "Malia" for the
    list "Malia and Sasha", whose every item is asked for). Tokens are
    ``udcg.text.answer_tokens`` (numbers whole, "four" = "4"); a bracketed aside of an alias may be
    left out ("13.3%" for "13.3% (95% CI 6.9-23.6%)")."""
    pred = answer_tokens(prediction)
    if all(t in STOP_WORDS for t in pred):
        return False
    forms = {f for a in answers for f in _alias_forms(a)}
    return any(_within(alias, pred) or _span_of(pred, alias) for alias in forms)


def is_abstention(answer: str) -> bool:
    """True for NO-RESPONSE, an empty answer, and the "I don't know" family of refusals."""
    text = unicodedata.normalize("NFKC", answer).replace("\u2019", "'").lower().strip()
    return not text or bool(_ABSTENTION.search(text))


def answer_outcome(answer: str, answers: Sequence[str], match: str = "span", f1_threshold: float = 0.5) -> str:
    """Rule-based outcome of a predicted answer: "abstained" for an abstention, else "correct"
    when it matches an alias (``match``: "span" = ``span_match``, the default; "contains" = an
    alias occurs in the answer, the rule before "span" and the one the published validation runs record;
    "exact" = normalised equality; "f1" = token F1 >= ``f1_threshold``), else "wrong"."""
    if is_abstention(answer):
        return "abstained"
    if match == "span":
        ok = span_match(answer, answers)
    elif match == "contains":
        ok = contains_answer(answer, answers)
    elif match == "exact":
        ok = exact_match(answer, answers)
    elif match == "f1":
        ok = token_f1(answer, answers) >= f1_threshold
    else:
        raise ValueError(f"unknown match rule {match!r} (use {', '.join(MATCHES)})")
    return "correct" if ok else "wrong"
