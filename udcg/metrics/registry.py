"""The measure registry: every measure declared once, with what it takes and what it needs, and its
kernel. The grammar (``udcg.metrics.measures``) reads names, aliases, cutoff rules and parameters
from here; ``score --run``, ``compare`` and the Python API (``udcg.metrics.evaluate``) and the
contexts path (``udcg.metrics.contexts``: ``score CONTEXTS``, ``validate``, ``correlate``) score a
measure by calling its kernel (``score``) on their ``udcg.metrics.signals.Signals``.

A definition says:

- ``name``: the canonical spelling (printed); ``aliases``: other spellings accepted (any case);
- ``cutoff``: ``"required"`` (P@k: on a run k must be given; a context without @k is read whole),
  ``"optional"`` (no @k = the whole ranking or context) or ``"none"`` (Rprec, eRAG);
- ``params``: ``{name: default}`` written ``P(rel=2)@5``; a value must be one of ``choices[name]``
  when given, else a positive number;
- ``needs``: the inputs it reads, from ``NEEDS``: ``qrels`` (relevance: a run's qrels, a context's
  'relevant'), ``utilities``, ``theta`` (a fitted UDCG_theta model), and the per-passage fields only
  contexts carry (``grades``, ``corpus_grades``, ``pool_grades``, ``erag``, ``answer_ll``,
  ``contains``). A run scores the measures whose needs are in ``RUN_INPUTS``; its inputs are
  checked (and utilities read to the depth asked for) from these needs.

Adding a measure: a kernel (``udcg.metrics.kernels`` for the built-in ones), one ``register(...)``
(below, in ``BUILTIN``, for a built-in one) and a test; nothing else changes.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import numpy as np

from udcg.metrics import kernels as K

if TYPE_CHECKING:
    from udcg.metrics.measures import Measure
    from udcg.metrics.signals import Signals

Kernel = Callable[["Measure", "Signals"], np.ndarray]
NEEDS = ("qrels", "utilities", "theta", "grades", "corpus_grades", "pool_grades", "erag", "answer_ll", "contains")
RUN_INPUTS = frozenset(("qrels", "utilities", "theta"))  # what a run (+ qrels, utilities, --theta) can give
CUTOFF_RULES = ("required", "optional", "none")
DCG_CHOICES = ("log2", "exp-log2")
_NAME = re.compile(r"^[A-Za-z%][\w\-+%θ]*$")  # a name the grammar reads back


@dataclass(frozen=True)
class Definition:
    """One measure (see the module doc)."""

    name: str
    kernel: Kernel
    needs: frozenset[str] = frozenset(("qrels",))
    cutoff: str = "optional"
    params: Mapping[str, Any] = field(default_factory=dict)
    choices: Mapping[str, tuple] = field(default_factory=dict)
    aliases: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        object.__setattr__(self, "needs", frozenset(self.needs))
        unknown = sorted(self.needs - set(NEEDS))
        if unknown:
            raise ValueError(f"measure {self.name!r}: unknown need {unknown[0]!r} (known: {', '.join(NEEDS)})")
        if self.cutoff not in CUTOFF_RULES:
            raise ValueError(f"measure {self.name!r}: cutoff {self.cutoff!r} is not one of {', '.join(CUTOFF_RULES)}")
        bad = [n for n in (self.name, *self.aliases) if not _NAME.match(n)]
        if bad:
            raise ValueError(f"measure {self.name!r}: {bad[0]!r} cannot be parsed back (a letter, then letters, "
                             "digits, _ - + %)")
        if set(self.choices) - set(self.params):
            raise ValueError(f"measure {self.name!r}: choices for a parameter it does not take")

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


def score(measure: Measure, signals: Signals) -> np.ndarray:
    """One value per row of ``signals``: the measure's kernel."""
    return _DEFINITIONS[measure.name].kernel(measure, signals)


# ---------------------------------------------------------------- the built-in measures

_REL = {"rel": 1}
_DCG = {"params": {"dcg": "log2"}, "choices": {"dcg": DCG_CHOICES}}
_UTILITY = frozenset(("utilities",))
_SET = frozenset(("grades", "corpus_grades"))
_POOLED = _SET | {"pool_grades"}

BUILTIN = (
    Definition("P", K.precision, cutoff="required", params=_REL, aliases=("precision",)),
    Definition("R", K.recall, cutoff="required", params=_REL, aliases=("recall",)),
    Definition("F1", K.f1, cutoff="required", params=_REL, aliases=("f",)),
    Definition("Success", K.success, cutoff="required", params=_REL, aliases=("hit", "hits")),
    Definition("RR", K.reciprocal_rank, params=_REL, aliases=("mrr",)),
    Definition("AP", K.average_precision, params=_REL, aliases=("map",)),
    Definition("Rprec", K.r_precision, cutoff="none", params=_REL, aliases=("r-precision", "r_precision")),
    Definition("DCG", K.dcg, **_DCG),
    Definition("nDCG", K.ndcg, **_DCG),
    Definition("ERR", K.err, params={"max_grade": 4}),
    Definition("AUC-PR", K.auc_pr, params=_REL, aliases=("aucpr", "auc_pr")),
    Definition("UDCG", K.udcg, needs=_UTILITY),
    Definition("UDCG_theta", K.udcg_theta, needs=_UTILITY | {"theta"}, aliases=("udcg-theta", "udcg_θ", "udcgθ")),
    Definition("RA-nWG", K.set_based, needs=_SET, aliases=("ranwg", "ra_nwg")),
    Definition("PROC", K.set_based_pooled, needs=_POOLED),
    Definition("%PROC", K.set_based_pooled, needs=_POOLED),
    Definition("N-Recall4+", K.set_based, needs=_SET),
    Definition("N-Recall5", K.set_based, needs=_SET),
    Definition("Precision4+", K.set_based, needs=_SET),
    Definition("Harm", K.set_based, needs=_SET),
    Definition("eRAG", K.erag, needs={"erag"}, cutoff="none"),
    Definition("ANSWER_PROB", K.answer_prob, needs={"answer_ll"}, cutoff="none", aliases=("answer-prob",)),
    Definition("containment", K.containment, needs={"contains"}),
)
for _definition in BUILTIN:
    register(_definition)
