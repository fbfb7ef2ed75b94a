"""Strict parsing of a judge's JSON reply ``{"motivation": ..., "grade": ...}``.

The reply must hold exactly one grade, and that grade must be one of the task's choices. A few
common malformations are repaired, each named in ``Parsed.repair`` so nothing is silent:

- ``code-fence``: the JSON sits inside a Markdown code fence (```json ... ```);
- ``surrounding-text``: prose before or after the JSON object;
- ``single-quotes``: a Python-style dict (``{'grade': 'A'}``), read with ``ast.literal_eval``;
- ``trailing-comma``: a comma before the closing brace;
- ``truncated``: the object never closes (the token budget ran out) but its one ``"grade": "X"``
  line is complete;
- ``grade-line``: the object closes but is not valid JSON (typically unescaped quotes inside the
  motivation), and its one ``"grade": "X"`` is complete;
- ``grade-text``: the grade value carries its word (``"A: RELEVANT"``) or is only the word
  (``"IRRELEVANT"``); the word must agree with the letter.

Everything else is a failure with a one-line reason: no JSON, no grade field, a grade outside the
allowed set, or two grades in one reply (a repeated answer format is not guessed between).
"""

from __future__ import annotations

import ast
import json
import re
from collections.abc import Mapping
from dataclasses import dataclass

_FENCE = re.compile(r"```[ \t]*[A-Za-z0-9_-]*[ \t]*\n?(.*?)```", re.S)
_GRADE_KEY = re.compile(r"""["']grade["']\s*:""", re.I)
# one complete grade value, followed by the end of the object/line or by another key (so the
# template's `"grade": "A" or "B"` and `"A", "B", or "C"` are not read as grades)
_GRADE_LINE = re.compile(r"""["']grade["']\s*:\s*(?:"([^"\n]*)"|'([^'\n]*)'|([A-Za-z0-9]+))"""
                         r"""(?=\s*(?:}|$|,\s*$|,\s*["'][^"'\n]*["']\s*:))""", re.I | re.M)
_TRAILING_COMMA = re.compile(r",\s*([}\]])")
_LETTER_WORD = re.compile(r"^\(?([A-Za-z0-9])\)?\s*[:.)\-=]\s*\(?([A-Za-z]+)\)?$")
_STRIP = " \t\r\n.*`\"'()[]"


@dataclass(frozen=True, slots=True)
class Choices:
    """The grades a task accepts: code in the reply -> label, and code -> the word the prompt
    gives it (``{"A": "RELEVANT"}``), which the parser also accepts as the grade."""

    labels: Mapping[str, object]
    words: Mapping[str, str]

    def describe(self) -> str:
        return ", ".join(self.labels)


@dataclass(frozen=True, slots=True)
class Parsed:
    label: object | None  # None = unparseable
    motivation: str = ""
    error: str = ""
    repair: tuple[str, ...] = ()


def _fail(error: str) -> Parsed:
    return Parsed(label=None, error=error)


def _objects(text: str) -> tuple[list[str], bool]:
    """Top-level ``{...}`` spans in text (string-aware, both quote styles), and whether an object
    was left open at the end."""
    spans, depth, start, quote, escaped = [], 0, 0, "", False
    for i, ch in enumerate(text):
        if quote:
            if escaped:
                escaped = False
            elif ch == "\\":
                escaped = True
            elif ch == quote:
                quote = ""
        elif ch in "\"'" and depth:
            # an apostrophe inside a word ("doesn't") is not a quote in a double-quoted dict
            if ch == "'" and i and text[i - 1].isalnum():
                continue
            quote = ch
        elif ch == "{":
            if depth == 0:
                start = i
            depth += 1
        elif ch == "}" and depth:
            depth -= 1
            if depth == 0:
                spans.append(text[start : i + 1])
    return spans, depth > 0


def _load(span: str) -> tuple[object, tuple[str, ...]]:
    """Decode one object span, trying the named repairs in order. Raises ValueError."""
    try:
        return json.loads(span, strict=False), ()
    except ValueError:
        pass
    no_comma = _TRAILING_COMMA.sub(r"\1", span)
    if no_comma != span:
        try:
            return json.loads(no_comma, strict=False), ("trailing-comma",)
        except ValueError:
            pass
    if "'" not in span:
        raise ValueError("not valid JSON")
    try:
        value = ast.literal_eval(no_comma)
    except (ValueError, SyntaxError, MemoryError, RecursionError):
        raise ValueError("not valid JSON") from None
    return value, ("single-quotes",)


def grade_value(value: object, choices: Choices) -> tuple[object | None, str, tuple[str, ...]]:
    """Map a reply's grade value to a label. Returns (label, error, repairs)."""
    if isinstance(value, bool) or not isinstance(value, (str, int, float)):
        return None, f"grade {value!r} is not one of {choices.describe()}", ()
    if isinstance(value, float):
        if not value.is_integer():
            return None, f"grade {value!r} is not one of {choices.describe()}", ()
        value = int(value)
    raw = str(value).strip(_STRIP)
    codes = {c.upper(): c for c in choices.labels}
    words = {w.upper(): c for c, w in choices.words.items()}
    if raw.upper() in codes:
        return choices.labels[codes[raw.upper()]], "", ()
    if raw.upper() in words:
        return choices.labels[words[raw.upper()]], "", ("grade-text",)
    m = _LETTER_WORD.match(raw)
    if m and m.group(1).upper() in codes:
        code = codes[m.group(1).upper()]
        if words.get(m.group(2).upper()) == code:
            return choices.labels[code], "", ("grade-text",)
        return None, f"grade {value!r} names letter {code} with another word (conflicting)", ()
    return None, f"grade {value!r} is not one of {choices.describe()}", ()


def _grade_field(obj: dict) -> list[str]:
    return [k for k in obj if isinstance(k, str) and k.strip().lower() == "grade"]


def parse_reply(reply: str, choices: Choices) -> Parsed:
    """Parse a judge reply into a label, strictly; see the module docstring for the repairs."""
    text = reply.strip()
    if not text:
        return _fail("empty reply")
    n_keys = len(_GRADE_KEY.findall(text))
    if n_keys > 1:
        return _fail(f"the reply holds {n_keys} grade fields (repeated or conflicting answers are not guessed)")
    repairs: list[str] = []
    body = text
    fenced = _FENCE.findall(text)
    if fenced and any("{" in f for f in fenced):
        body = "\n".join(f for f in fenced if "{" in f)
        repairs.append("code-fence")
    spans, open_at_end = _objects(body)
    if not spans:
        return _truncated(body, choices, open_at_end, repairs)
    found: list[tuple[dict, tuple[str, ...]]] = []
    errors = []
    for span in spans:
        try:
            obj, fixes = _load(span)
        except ValueError as e:
            errors.append(str(e))
            continue
        if isinstance(obj, dict) and _grade_field(obj):
            found.append((obj, fixes))
    if not found:
        if errors:
            return _truncated(body, choices, False, repairs) if n_keys else _fail(
                f"the JSON object could not be read ({errors[0]})")
        return _fail("the JSON object has no 'grade' field")
    if len(found) > 1:
        return _fail(f"the reply holds {len(found)} JSON answers (not guessed between)")
    obj, fixes = found[0]
    repairs.extend(fixes)
    if body.strip() != spans[0].strip() or len(spans) > 1:
        repairs.append("surrounding-text")
    keys = _grade_field(obj)
    if len(keys) > 1:
        return _fail(f"the JSON object has {len(keys)} grade fields ({', '.join(map(repr, keys))})")
    label, error, fixes = grade_value(obj[keys[0]], choices)
    if label is None:
        return _fail(error)
    return Parsed(label=label, motivation=_motivation(obj), repair=tuple(repairs) + fixes)


def _motivation(obj: dict) -> str:
    for k, v in obj.items():
        if isinstance(k, str) and k.strip().lower() == "motivation" and v is not None:
            return v if isinstance(v, str) else json.dumps(v, ensure_ascii=False)
    return ""


def _truncated(body: str, choices: Choices, open_at_end: bool, repairs: list[str]) -> Parsed:
    """Last resort: one complete ``"grade": "X"`` line in an object that never closed or failed
    to decode. Anything less is a failure."""
    lines = _GRADE_LINE.findall(body)
    if len(lines) != 1:
        if "{" not in body:
            return _fail("no JSON object in the reply")
        if open_at_end:
            return _fail("the JSON object never closes and has no complete grade (raise max_new_tokens?)")
        return _fail("the JSON object could not be read and has no complete grade line")
    label, error, fixes = grade_value("".join(lines[0]), choices)  # one alternative matched
    if label is None:
        return _fail(error)
    m = re.search(r"""["']motivation["']\s*:\s*"((?:[^"\\]|\\.)*)""", body, re.I)
    motivation = m.group(1) if m else ""
    how = "truncated" if open_at_end else "grade-line"
    return Parsed(label=label, motivation=motivation, repair=tuple(repairs) + (how,) + fixes)
