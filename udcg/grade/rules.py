"""Rule-based judges that need no LLM: answer containment, exact match, token F1, abstention.

The answer normalisation and the containment rule are ``udcg.text``'s (SQuAD v1.1
normalisation: lower-case, punctuation and the articles a/an/the dropped, whitespace collapsed), so
the relevance judge and the answer-containment metric always agree.
"""

from __future__ import annotations

import re
import unicodedata
from collections import Counter
from collections.abc import Sequence

from udcg.text import contains_answer, normalize_answer, normalized_aliases

__all__ = ["normalize_answer", "contains_answer", "exact_match", "token_f1", "is_abstention", "answer_outcome"]

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


def is_abstention(answer: str) -> bool:
    """True for NO-RESPONSE, an empty answer, and the "I don't know" family of refusals."""
    text = unicodedata.normalize("NFKC", answer).replace("\u2019", "'").lower().strip()
    return not text or bool(_ABSTENTION.search(text))


def answer_outcome(answer: str, answers: Sequence[str], match: str = "contains", f1_threshold: float = 0.5) -> str:
    """Rule-based outcome of a predicted answer: "abstained" for an abstention, else "correct"
    when it matches an alias (``match``: "contains" = an alias occurs in the answer, "exact" =
    normalised equality, "f1" = token F1 >= ``f1_threshold``), else "wrong"."""
    if is_abstention(answer):
        return "abstained"
    if match == "contains":
        ok = contains_answer(answer, answers)
    elif match == "exact":
        ok = exact_match(answer, answers)
    elif match == "f1":
        ok = token_f1(answer, answers) >= f1_threshold
    else:
        raise ValueError(f"unknown match rule {match!r} (use contains, exact or f1)")
    return "correct" if ok else "wrong"
