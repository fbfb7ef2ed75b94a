"""What a measure is, below everything that scores one: ``Measure`` (a measure as a value, the key
of every result), ``Definition`` (a measure's declaration: spellings, cutoff rule, parameters,
needs, direction, kernel) and the table of declared definitions. ``udcg.metrics.registry`` declares
the built-in measures into this table and scores them; ``udcg.metrics.measures`` parses the grammar
against it; ``udcg.metrics.signals`` and ``udcg.metrics.kernels`` name ``Measure``. Nothing here
imports another measure module, so no import circle runs through the measure types.

A ``Measure`` is its canonical name: ``str(Measure("nDCG", 10)) == "nDCG@10"``, and a Measure is a
``str`` equal to (and hashing as) that name, so results keyed by Measure are read with the printed
name too (``values["nDCG@10"]``) and written as the name (JSON, CSV, TSV, DataFrame columns).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

import numpy as np

NEEDS = ("qrels", "utilities", "theta", "grades", "corpus_grades", "pool_grades", "erag", "answer_ll", "contains")
RUN_INPUTS = frozenset(("qrels", "utilities", "theta"))  # what a run (+ qrels, utilities, --theta) can give
CUTOFF_RULES = ("required", "optional", "none")
DIRECTIONS = (1, -1, 0)  # higher is better, lower is better, no better side
NAME = re.compile(r"^[A-Za-z%][\w\-+%θ]*$")  # a name the grammar reads back


class Measure(str):
    """One measure: canonical name, cutoff (None = the whole ranking), non-default params sorted.
    The string is the canonical spelling (``P(rel=2)@5``, also its ``repr``, quoted as a str's, so a
    message naming a result's keys reads as before); two Measures are equal when their canonical
    spellings are; ``str(m)`` is a plain ``str``. Build one from user text with ``udcg.metrics.measures.parse_measure``."""

    name: str
    cutoff: int | None
    params: tuple[tuple[str, Any], ...]

    def __new__(cls, name: str, cutoff: int | None = None, params: tuple[tuple[str, Any], ...] = ()) -> Measure:
        params = tuple(params)
        text = name + ("(" + ",".join(f"{k}={v!r}" for k, v in params) + ")" if params else "")
        self = super().__new__(cls, text if cutoff is None else f"{text}@{cutoff}")
        object.__setattr__(self, "name", name)
        object.__setattr__(self, "cutoff", cutoff)
        object.__setattr__(self, "params", params)
        return self

    def __setattr__(self, key: str, value: Any) -> None:
        raise AttributeError(f"Measure is immutable (cannot set {key!r})")

    def __getnewargs__(self) -> tuple:  # pickle and copy rebuild it from its fields
        return self.name, self.cutoff, self.params

    @property
    def family(self) -> str:
        """The canonical name without parameters or cutoff (``nDCG`` of ``nDCG@5``)."""
        return self.name

    @property
    def k(self) -> int | None:
        """The cutoff, None for the whole ranking or context."""
        return self.cutoff

    @property
    def definition(self) -> Definition:
        """The measure's declaration (``definition(name)``)."""
        return definition(self.name)

    @property
    def direction(self) -> int:
        """+1 when a higher value is better, -1 when lower is, 0 when neither (``Definition.direction``)."""
        return definition(self.name).direction

    @property
    def unit(self) -> bool:
        """Whether every per-query value lies in [0, 1] (``Definition.unit``)."""
        return definition(self.name).unit

    def param(self, key: str) -> Any:
        """The value of a parameter, or its default."""
        return dict(self.params).get(key, definition(self.name).params[key])


Kernel = Callable[[Measure, Any], np.ndarray]  # (measure, udcg.metrics.signals.Signals) -> one value per row


@dataclass(frozen=True)
class Definition:
    """One measure (``udcg.metrics.registry``'s module doc): ``direction`` is +1 (higher is better),
    -1 (lower is better: a harm or error rate) or 0 (no better side); ``unit``: every per-query
    value lies in [0, 1], so a mean difference beyond 1 cannot happen. Comparisons read both."""

    name: str
    kernel: Kernel
    needs: frozenset[str] = frozenset(("qrels",))
    cutoff: str = "optional"
    params: Mapping[str, Any] = field(default_factory=dict)
    choices: Mapping[str, tuple] = field(default_factory=dict)
    aliases: tuple[str, ...] = ()
    direction: int = 1
    unit: bool = False

    def __post_init__(self) -> None:
        object.__setattr__(self, "needs", frozenset(self.needs))
        unknown = sorted(self.needs - set(NEEDS))
        if unknown:
            raise ValueError(f"measure {self.name!r}: unknown need {unknown[0]!r} (known: {', '.join(NEEDS)})")
        if self.cutoff not in CUTOFF_RULES:
            raise ValueError(f"measure {self.name!r}: cutoff {self.cutoff!r} is not one of {', '.join(CUTOFF_RULES)}")
        bad = [n for n in (self.name, *self.aliases) if not NAME.match(n)]
        if bad:
            raise ValueError(f"measure {self.name!r}: {bad[0]!r} cannot be parsed back (a letter, then letters, "
                             "digits, _ - + %)")
        if set(self.choices) - set(self.params):
            raise ValueError(f"measure {self.name!r}: choices for a parameter it does not take")
        if isinstance(self.direction, bool) or self.direction not in DIRECTIONS:
            raise ValueError(f"measure {self.name!r}: direction {self.direction!r} is not +1 (higher is better), "
                             "-1 (lower is better) or 0 (neither)")

    def spellings(self) -> tuple[str, ...]:
        """Every accepted spelling, lowercased: the name and the aliases."""
        return tuple(dict.fromkeys(s.lower() for s in (self.name, *self.aliases)))


_DEFINITIONS: dict[str, Definition] = {}
_SPELLINGS: dict[str, str] = {}  # lowercased spelling -> canonical name


def register(definition: Definition) -> Definition:
    """Add a measure; refused when its name or an alias is taken (``unregister`` it first)."""
    taken = [s for s in definition.spellings() if s in _SPELLINGS]
    if taken:
        raise ValueError(f"measure {definition.name!r}: the spelling {taken[0]!r} is {_SPELLINGS[taken[0]]!r}'s")
    _DEFINITIONS[definition.name] = definition
    _SPELLINGS.update(dict.fromkeys(definition.spellings(), definition.name))
    return definition


def unregister(name: str) -> None:
    """Remove a measure (by its canonical name) and its spellings."""
    definition = _DEFINITIONS.pop(name)
    for spelling in definition.spellings():
        _SPELLINGS.pop(spelling, None)


def lookup(spelling: str) -> Definition | None:
    """The definition of any accepted spelling (case-insensitive), or None."""
    name = _SPELLINGS.get(spelling.lower())
    return None if name is None else _DEFINITIONS[name]


def definition(name: str) -> Definition:
    """The definition of a canonical name (``Measure.name``)."""
    return _DEFINITIONS[name]


def definitions() -> tuple[Definition, ...]:
    """Every measure, in the order declared."""
    return tuple(_DEFINITIONS.values())


def needs(*measures: Measure) -> frozenset[str]:
    """What these measures read, together: ``needs(m)``, ``needs(*wanted)``."""
    return frozenset().union(*(_DEFINITIONS[m.name].needs for m in measures))
