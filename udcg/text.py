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
from decimal import Decimal, InvalidOperation

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


# ---------------------------------------------------------------- number-aware answer tokens
# For grading an answer against extractive gold (``grade.rules.span_match``): SQuAD's normalisation
# deletes the point of "13.3" (-> "133") and keeps "1,000" and "one thousand" apart from "1000"; these
# tokens keep a number whole, as one canonical value, with its scale word folded in and "%" a token.

_NUMBER_WORDS = {w: i for i, w in enumerate(
    "zero one two three four five six seven eight nine ten eleven twelve thirteen fourteen fifteen sixteen "
    "seventeen eighteen nineteen twenty".split())}
_TENS = "thirty forty fifty sixty seventy eighty ninety".split()
_NUMBER_WORDS.update({w: 10 * i for i, w in enumerate(_TENS, start=3)})
_SCALES = {"hundred": 100, "thousand": 1_000, "million": 1_000_000, "billion": 1_000_000_000,
           "trillion": 1_000_000_000_000}
_TOKEN = re.compile(r"\d{1,3}(?:,\d{3})+(?:\.\d+)?|\d+(?:\.\d+)?|%|[^\W_]+")
_NUMBER = re.compile(r"\d+(?:\.\d+)?")
_JOINED = re.compile(r"(?<=[^\W\d_])[-'](?=[^\W\d_])")  # a hyphen or apostrophe inside a word
_ANSWER_ARTICLES = frozenset(("a", "an", "the"))


def _canonical(number: Decimal) -> str:
    text = f"{number.normalize():f}"
    return text.rstrip("0").rstrip(".") if "." in text else text


def is_number(token: str) -> bool:
    """True for a token ``answer_tokens`` made of a number ("76", "13.3", "7000000")."""
    return bool(_NUMBER.fullmatch(token))


def answer_tokens(text: str) -> tuple[str, ...]:
    """The tokens an answer is graded on: NFKC, lower case, a possessive 's and the articles a/an/the
    dropped, a hyphen or apostrophe between letters deleted, other punctuation a separator; a number
    one token in canonical form (thousands commas and trailing zeros of a decimal dropped, "four" ->
    "4", a following scale word multiplied in: "7.5 million" -> "7500000"), and "%" ("percent") a
    token of its own after a number (dropped elsewhere)."""
    lowered = unicodedata.normalize("NFKC", text).replace("\u2019", "'").lower()
    lowered = re.sub(r"'s\b", "", lowered).replace("per cent", "percent")
    lowered = _JOINED.sub("", lowered)  # "counter-clockwise", "don't": one word, as SQuAD's deletion makes them
    out: list[str] = []
    for raw in _TOKEN.findall(lowered):
        token = "%" if raw in ("percent", "per cent") else raw
        if token in _ANSWER_ARTICLES or (token == "%" and not (out and is_number(out[-1]))):
            continue  # an article, or a "%" without its number
        if token in _NUMBER_WORDS:
            token = str(_NUMBER_WORDS[token])
        if token in _SCALES and out and is_number(out[-1]):
            out[-1] = _canonical(Decimal(out[-1]) * _SCALES[token])
            continue
        out.append(_number_token(token) if token[0].isdigit() else token)
    return tuple(out)


def _number_token(token: str) -> str:
    try:
        return _canonical(Decimal(token.replace(",", "")))
    except InvalidOperation:  # a digit Decimal does not read (a letter-digit run such as "2nd" stays as it is)
        return token


SHORT_ANSWER_CHARS = 4  # a one-token answer of at most this many characters is short (``short_answer``)


def short_answer(answers: Iterable[str]) -> str:
    """The first alias that is a bare number or a single short token ("" when none is): one token as
    ``answer_tokens`` makes it, a number ("2002", "3", "four", "1,000") or at most
    ``SHORT_ANSWER_CHARS`` characters ("UK", "Mars"). Containment of such an alias matches wherever the
    token occurs, not where the question is answered (``udcg.metrics.labels``)."""
    for alias in answers:
        tokens = answer_tokens(alias)
        if len(tokens) == 1 and (is_number(tokens[0]) or len(tokens[0]) <= SHORT_ANSWER_CHARS):
            return alias.strip()
    return ""
