"""Answer normalisation (SQuAD style) and answer containment of a passage.

``normalize_answer``: lowercase, punctuation removed, the articles ``a``/``an``/``the`` removed as
whole words, whitespace collapsed — the normalisation of the SQuAD v1.1 evaluation script, so
exact-match and containment judgements agree with the usual QA tooling.

``contains_answer``: a passage contains an answer when some normalised alias occurs in the
normalised passage as a whole-token sequence (``"art"`` is not contained in ``"party"``). An alias
that normalises to the empty string (``"The"``, ``"?"``) never counts.
"""

from __future__ import annotations

import re
import string
import unicodedata
from collections.abc import Iterable

_ARTICLES = re.compile(r"\b(a|an|the)\b")
_PUNCT = frozenset(string.punctuation)
_ASCII_PUNCT = str.maketrans("", "", string.punctuation)


def normalize_answer(text: str) -> str:
    """Lowercase, drop punctuation (ASCII and Unicode P* categories) and articles, collapse spaces."""
    lowered = text.lower()
    if lowered.isascii():  # fast path: one C-level translate (ASCII P* = string.punctuation's P* chars)
        no_punct = lowered.translate(_ASCII_PUNCT)
    else:
        no_punct = "".join(
            ch for ch in lowered if ch not in _PUNCT and not unicodedata.category(ch).startswith("P")
        )
    return " ".join(_ARTICLES.sub(" ", no_punct).split())


def normalized_aliases(answers: Iterable[str]) -> tuple[str, ...]:
    """The distinct non-empty normalised forms of the reference answers, in first-seen order."""
    out: dict[str, None] = {}
    for a in answers:
        norm = normalize_answer(a)
        if norm:
            out[norm] = None
    return tuple(out)


def contains_answer(passage: str, answers: Iterable[str]) -> bool:
    """True if the normalised passage holds a normalised alias as a whole-token sequence."""
    haystack = f" {normalize_answer(passage)} "
    return any(f" {alias} " in haystack for alias in normalized_aliases(answers))
