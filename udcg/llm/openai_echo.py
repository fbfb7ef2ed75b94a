"""Reading a ``/v1/completions`` echo (``echo: true``, ``logprobs``) as the log-probabilities of the
very token ids that were sent, as pure functions.

An echo is trusted by its tokens, not by its length: each echoed token must be the prompt's token at
the same position (its text, as the served model's tokenizer decodes that id, or vLLM's
``token_id:<id>``, or "" for a special token), the character offsets must run along those texts
from 0, and the echo may hold one generated token after the prompt (``max_tokens: 1``), no more. A
server that put a token in front (a BOS it added), dropped one, re-tokenised the text or answered
the lists in different lengths cannot be aligned, and that is a ``BackendError`` naming where the
echo parts from the prompt, never a number read from the neighbouring token. Values that moved
against their tokens are found by the top lists (each holds its own token's value) or by a null
after the first position. Log-probabilities must be finite numbers <= 0 (1e-4 of float noise
allowed); an echo whose prompt values are all at -inf or OpenAI's -9999 floor, or all one number,
was not scored."""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from typing import Any

from udcg.errors import BackendError

FLOOR = -9999.0  # OpenAI's (and udcg serve's) JSON stand-in for -inf
UNDECODED = ("\ufffd", "bytes:")  # a token that is part of a multi-byte character: no text of its own
MARKERS = str.maketrans({"\u2581": " ", "\u0120": " ", "\u010a": "\n"})  # SentencePiece / byte-level spellings


def same_token(echoed: Any, token_id: int, text: str, special: bool = False) -> bool:
    """Whether an echoed token is the prompt's token ``token_id`` whose text is ``text``: equal text,
    equal up to surrounding whitespace or a tokenizer's space marker, vLLM's ``token_id:<id>``, ""
    for a ``special`` token (vLLM skips their text by default), or (a piece of a multi-byte
    character) a text that either side cannot decode."""
    if not isinstance(echoed, str):
        return False
    if echoed == text or special and echoed == "":
        return True
    if echoed.startswith("token_id:"):
        return echoed[9:].strip() == str(token_id)
    if any(m in echoed for m in UNDECODED) or any(m in text for m in UNDECODED):
        return True
    return echoed.translate(MARKERS).strip() == text.translate(MARKERS).strip()


def _list(logprobs: dict, key: str, i: int) -> list | None:
    value = logprobs.get(key)
    if value is not None and not isinstance(value, list):
        raise BackendError(f"completions scoring: prompt {i}: logprobs.{key} is a {type(value).__name__}, not a list")
    return value


def _check_offsets(offsets: list, tokens: list, i: int) -> None:
    at = 0
    for j, (offset, token) in enumerate(zip(offsets, tokens, strict=False)):
        if isinstance(offset, bool) or not isinstance(offset, int) or offset != at:
            raise BackendError(f"completions scoring: prompt {i}: text_offset[{j}] is {offset!r} where the echoed "
                               f"tokens before it end at {at} (the echo is not the prompt's tokens in order)")
        at += len(token)


def _parting(tokens: list, prompt: Sequence[int], text_of: Callable[[int], str], special: Callable[[int], bool]) -> int | None:
    """The first position where the echoed tokens are not the prompt's; None when they all are."""
    for j, token_id in enumerate(prompt):
        if j >= len(tokens) or not same_token(tokens[j], token_id, text_of(token_id), special(token_id)):
            return j
    return None


def _shift_hint(tokens: list, prompt: Sequence[int], text_of: Callable[[int], str], special: Callable[[int], bool]) -> str:
    for shift in (1, 2, 3):  # the prompt found further on: tokens the server put in front
        if len(tokens) >= shift + len(prompt) and _parting(tokens[shift:], prompt, text_of, special) is None:
            return (f"; the prompt's tokens follow {shift} token(s) the server put in front ({tokens[:shift]!r}: a BOS "
                    "it added?), so every value would be read from its neighbour's token")
    return ""


def aligned_values(logprobs: Any, prompt: Sequence[int], text_of: Callable[[int], str], i: int = 0,
                   special: Callable[[int], bool] = lambda token_id: False) -> list:
    """The echoed log-probability values of ``prompt``'s tokens, position by position, once the echo
    is shown to be those tokens (``BackendError`` otherwise). ``text_of``: a token id's text as the
    served model's tokenizer decodes it alone; ``special``: whether an id is a special token."""
    if not isinstance(logprobs, dict):
        raise BackendError(f"completions scoring: prompt {i}: no echoed logprobs (the server must support echo with logprobs)")
    values, tokens, offsets = (_list(logprobs, k, i) for k in ("token_logprobs", "tokens", "text_offset"))
    n = len(prompt)
    if values is None or tokens is None:
        raise BackendError(f"completions scoring: prompt {i}: the echo has no "
                           f"{'token_logprobs' if values is None else 'tokens'} list, so its values cannot be matched "
                           "to the prompt's tokens (the server must echo tokens with their logprobs)")
    if len(tokens) != len(values) or offsets is not None and len(offsets) != len(values):
        raise BackendError(f"completions scoring: prompt {i}: the echo's lists differ in length (tokens {len(tokens)}, "
                           f"token_logprobs {len(values)}, text_offset {len(offsets) if offsets is not None else '-'})")
    parting = _parting(tokens, prompt, text_of, special)
    if parting is not None:
        seen = repr(tokens[parting]) if parting < len(tokens) else "nothing (the echo ends)"
        raise BackendError(f"completions scoring: prompt {i}: echoed token {parting} is {seen}, not the prompt's "
                           f"{text_of(prompt[parting])!r} (id {prompt[parting]}){_shift_hint(tokens, prompt, text_of, special)}; "
                           "the echo cannot be matched to the ids sent")
    if len(values) > n + 1:
        raise BackendError(f"completions scoring: prompt {i}: the echo holds {len(values)} tokens for a prompt of {n} "
                           "and max_tokens 1 (at most one generated token may follow the prompt)")
    if offsets is not None:
        _check_offsets(offsets, tokens, i)
    _check_tops(_list(logprobs, "top_logprobs", i), tokens, values, n, i)
    return values[:n]


def _number(x: Any) -> bool:
    return isinstance(x, (int, float)) and not isinstance(x, bool)


def _check_tops(tops: list | None, tokens: list, values: list, n: int, i: int) -> None:
    """Where a position's top list holds its own token (OpenAI, vLLM and udcg serve add it), the two
    values agree: values moved against their tokens disagree almost everywhere, and are refused when
    most positions do (one position may disagree where another id has the same text in the list)."""
    if tops is None:
        return
    checked, differ = 0, []
    for j in range(1, min(n, len(tops))):
        top, v, token = tops[j], values[j], tokens[j]
        if (not isinstance(top, dict) or not isinstance(token, str) or not token.strip()
                or any(m in token for m in UNDECODED)):
            continue
        listed = top.get(token)
        if not _number(listed) or not _number(v):
            continue
        checked += 1
        if not (abs(listed - v) <= 1e-3 or listed == v):
            differ.append(j)
    if len(differ) >= 2 and len(differ) * 2 > checked:
        j = differ[0]
        raise BackendError(f"completions scoring: prompt {i}: {len(differ)} of {checked} echoed tokens have another "
                           f"log-probability in token_logprobs than in their top_logprobs (token {j}, {tokens[j]!r}: "
                           f"{values[j]!r} against {tops[j][tokens[j]]!r}): the echo's values are not its tokens'")


def check_values(values: Sequence[Any], i: int) -> list[float]:
    """The values as floats; refuses anything that is not a finite log-probability (NaN, -inf, a
    string, a positive value past float noise)."""
    for v in values:
        if isinstance(v, bool) or not isinstance(v, (int, float)) or not math.isfinite(v) or v > 1e-4:
            raise BackendError(f"completions scoring: prompt {i}: {v!r} is not a log-probability"
                               + (" (a server that scores text gives every token a finite one)" if v == -math.inf else ""))
    return [float(v) for v in values]


def check_scored(values: Sequence[Any], i: int) -> None:
    """Refuses an echo that scored nothing: a prompt value after the first (which has none) that is
    not a number <= 0 (null, NaN, a string: the values are not the tokens'), every one of them at
    -inf, OpenAI's -9999 floor or below, or (three or more) every one the same number (0.0: each
    token certain)."""
    rest = list(values[1:])
    for j, v in enumerate(rest, 1):
        if isinstance(v, bool) or not isinstance(v, (int, float)) or math.isnan(v) or v > 1e-4:
            raise BackendError(f"completions scoring: prompt {i}: echoed token {j} has {v!r}, not a log-probability "
                               "(only the first token of an echo has none)")
    if len(rest) >= 3 and len(set(rest)) == 1 or rest and all(v <= FLOOR for v in rest):
        raise BackendError(f"completions scoring: prompt {i}: every echoed log-probability of the prompt is "
                           f"{rest[0]!r}{' or below' if len(set(rest)) > 1 else ''}: the server did not score the text "
                           "(a model gives a prompt's tokens different, finite log-probabilities)")
