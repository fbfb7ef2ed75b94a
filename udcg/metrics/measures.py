"""Measures as values, ir_measures style: ``Measure("nDCG", 10)`` prints ``nDCG@10``, hashes, compares,
and ``parse_measures("P@5,nDCG@10,rr")`` builds them from what users type. This is the one measure
grammar of udcg: ``score``, ``score --run``, ``compare``, ``correlate``, configs and the Python API
all parse through it.

Spelling follows ir_measures: ``P@5``, ``R@10``, ``F1@5``, ``Success@5``, ``RR``, ``RR@10``, ``AP``,
``AP@100``, ``Rprec``, ``DCG@10``, ``nDCG@10``, ``ERR@10``, ``AUC-PR``; parameters go in
parentheses before the cutoff, ``P(rel=2)@5``, ``nDCG(dcg='exp-log2')@10``, ``ERR(max_grade=3)@10``.
Input is case-insensitive and accepts the aliases MRR→RR, MAP→AP, hit/hits→Success,
Recall→R, Precision→P, R-Precision→Rprec, AUCPR→AUC-PR. A parameter equal to its default is
dropped, so ``P(rel=1)@5 == P@5``.

Beyond the classical family: ``UDCG[@k]`` and ``UDCG_theta[@k]`` (utility-based; ``@k`` = the first
k passages of the ranking or context, no ``@k`` = the whole context), the set-based family of
seed 000 (``RA-nWG``, ``PROC``, ``%PROC``, ``N-Recall4+``, ``N-Recall5``, ``Precision4+``,
``Harm``, each ``[@k]``), the per-passage LLM signals ``eRAG`` and ``ANSWER_PROB`` (whole context
only) and ``containment[@k]``. Where a measure applies to a whole context (contexts JSONL), a
measure that needs a cutoff on a TREC run (``P@k``) may omit it: ``parse_measure(...,
whole_context=True)``.

Names, aliases, cutoff rules and parameters are read from ``udcg.metrics.registry``, where each
measure is declared once with its kernel (``SPECS`` is a view of it); a measure registered there is
parsed like the built-in ones. ``Measure`` itself is defined in ``udcg.metrics.measure_types`` (and
importable from here).
"""

from __future__ import annotations

import re
from collections.abc import Iterator, Mapping
from typing import Any

from udcg.bounds import MAX_CUTOFF  # the largest k of @k, declared once with every bound
from udcg.errors import InputError
from udcg.metrics import registry
from udcg.metrics.measure_types import Measure



class _Specs(Mapping):
    """``SPECS[name]`` = (cutoff rule, {param: default}) of every registered measure: a view of
    ``udcg.metrics.registry``, in the order declared."""

    def __getitem__(self, name: str) -> tuple[str, Mapping[str, Any]]:
        d = registry.definition(name)
        return d.cutoff, d.params

    def __iter__(self) -> Iterator[str]:
        return (d.name for d in registry.definitions())

    def __len__(self) -> int:
        return len(registry.definitions())


SPECS = _Specs()
_TOKEN = re.compile(r"^\s*([A-Za-z%][\w\-+%θ]*?)\s*(?:\((.*)\))?\s*(?:@\s*([^\s@]+))?\s*$")


def known_names() -> str:
    forms = {"required": "{}@k", "optional": "{}[@k]", "none": "{}"}
    return ", ".join(forms[d.cutoff].format(d.name) for d in registry.definitions())


def make_measure(name: str, cutoff: int | None = None, where: str = "measure", whole_context: bool = False,
                 **params: Any) -> Measure:
    """Build a checked Measure; ``name`` may be any accepted spelling or alias. With
    ``whole_context`` a measure that needs a cutoff on a run may omit it (the whole context)."""
    definition = registry.lookup(name)
    if definition is None:
        raise InputError(f"{where}: unknown measure {name!r} (known: {known_names()}; aliases MRR, MAP, hit@k)")
    canon, cutoff_rule, defaults = definition.name, definition.cutoff, definition.params
    if cutoff is None and cutoff_rule == "required" and not whole_context:
        raise InputError(f"{where}: {canon} needs a cutoff (write {canon}@10)")
    if cutoff is not None and cutoff_rule == "none":
        raise InputError(f"{where}: {canon} takes no cutoff (write {canon})")
    if cutoff is not None and (isinstance(cutoff, bool) or not isinstance(cutoff, int) or cutoff < 1):
        raise InputError(f"{where}: cutoff {cutoff!r} of {canon} must be a positive integer")
    if cutoff is not None and cutoff > MAX_CUTOFF:  # the score matrices have k columns per query
        raise InputError(f"{where}: cutoff {str(cutoff)[:40]} of {canon} is too large: a cutoff must be an integer "
                         f"in 1..{MAX_CUTOFF} (a ranking or context of at most {MAX_CUTOFF:,} documents)")
    clean = {}
    for key, value in params.items():
        if key not in defaults:
            allowed = ", ".join(defaults) or "none"
            raise InputError(f"{where}: {canon} has no parameter {key!r} (allowed: {allowed})")
        value = _check_param(canon, key, value, where, definition.choices.get(key))
        if value != defaults[key]:
            clean[key] = value
    return Measure(canon, cutoff, tuple(sorted(clean.items())))


def _check_param(name: str, key: str, value: Any, where: str, choices: tuple | None) -> Any:
    if choices is not None:
        if value not in choices:
            raise InputError(f"{where}: {name}({key}={value!r}) is not known (choose {' or '.join(map(repr, choices))})")
        return value
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not value > 0 or value == float("inf"):
        raise InputError(f"{where}: {name}({key}={value!r}) must be a positive number")
    return int(value) if float(value).is_integer() else float(value)


def split_measures(text: str) -> list[str]:
    """The measures of a comma-separated list, stripped, empty ones left out: a comma inside
    parentheses belongs to its measure (``ERR(max_grade=3,x=1)@10,RR`` is two measures). Every list
    of measures is split here (``parse_measures``, the contexts' ``parse_metrics``, ``alias_notes``)."""
    return [part.strip() for part in _split_top_level(text) if part.strip()]


def _split_top_level(text: str) -> list[str]:
    parts, depth, current = [], 0, []
    for ch in text:
        if ch == "(":
            depth += 1
        elif ch == ")":
            depth -= 1
        if ch == "," and depth == 0:
            parts.append("".join(current))
            current = []
        else:
            current.append(ch)
    parts.append("".join(current))
    return parts


def _parse_value(raw: str, where: str) -> Any:
    raw = raw.strip()
    if len(raw) >= 2 and raw[0] == raw[-1] and raw[0] in "'\"":
        return raw[1:-1]
    try:
        return int(raw)
    except ValueError:
        pass
    try:
        return float(raw)
    except ValueError:
        return raw  # a bare word such as exp-log2; checked by _check_param


def parse_measure(text: str, where: str = "--metrics", whole_context: bool = False) -> Measure:
    """Parse one measure, e.g. ``nDCG@10``, ``rr``, ``P(rel=2)@5``, ``UDCG@5``."""
    if not isinstance(text, str):
        raise InputError(f"{where}: measure {text!r} is not a string (write e.g. 'nDCG@10')")
    m = _TOKEN.match(text)
    if not m or not text.strip():
        raise InputError(f"{where}: cannot read measure {text.strip()!r} (write e.g. nDCG@10 or P(rel=2)@5)")
    name, raw_params, raw_cutoff = m.groups()
    cutoff = None
    if raw_cutoff is not None:
        if not raw_cutoff.isdigit() or not raw_cutoff.isascii():
            raise InputError(f"{where}: cutoff {raw_cutoff[:40]!r} in {text.strip()[:80]!r} must be a positive integer")
        if len(raw_cutoff.lstrip("0")) > len(str(MAX_CUTOFF)):  # never read a 5,000-digit number
            shown = raw_cutoff if len(raw_cutoff) <= 40 else raw_cutoff[:40] + "..."
            raise InputError(f"{where}: cutoff {shown} is too large: a cutoff must be an integer in 1..{MAX_CUTOFF}")
        cutoff = int(raw_cutoff)
    params: dict[str, Any] = {}
    for item in _split_top_level(raw_params or ""):
        if not item.strip():
            continue
        key, sep, value = item.partition("=")
        if not sep or not key.strip():
            raise InputError(f"{where}: parameter {item.strip()!r} in {text.strip()!r} must look like key=value")
        if key.strip().lower() in params:  # RR(rel=1,rel=2): which one was meant is a guess
            raise InputError(f"{where}: parameter {key.strip()!r} is given twice in {text.strip()!r} (give it once)")
        params[key.strip().lower()] = _parse_value(value, where)
    return make_measure(name, cutoff, where=where, whole_context=whole_context, **params)


def parse_measures(text: str, where: str = "--metrics", whole_context: bool = False) -> list[Measure]:
    """Parse a comma-separated list (commas inside parentheses belong to the measure); duplicates
    are kept once, in first-seen order."""
    if not text or not text.strip():
        raise InputError(f"{where}: no measures given (write e.g. P@5,nDCG@10,RR)")
    out: dict[Measure, None] = {}
    for token in split_measures(text):
        out[parse_measure(token, where, whole_context)] = None
    if not out:
        raise InputError(f"{where}: no measures given (write e.g. P@5,nDCG@10,RR)")
    return list(out)


def alias_notes(text: str | None) -> list[str]:
    """One line per measure of a ``--metrics`` list spelled as an alias of its canonical name (``MRR@5``
    is ``RR@5``), saying which name the output uses; a difference of letter case alone is no note."""
    if not isinstance(text, str) or not text.strip():
        return []
    notes: dict[str, None] = {}
    for given in split_measures(text):
        if str(parse_measure(given)).lower() != given.lower():
            notes[f"{given} is {parse_measure(given)} (an alias; the output names it {parse_measure(given)})"] = None
    return list(notes)
