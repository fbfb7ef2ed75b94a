"""The measure registry: every measure declared once, with what it takes and what it needs, its
direction and its kernel (the table and the types are ``udcg.metrics.measure_types``; this module
declares the built-in measures into it and scores one). The grammar (``udcg.metrics.measures``) reads names, aliases, cutoff rules and parameters
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
  checked (and utilities read to the depth asked for) from these needs;
- ``direction``: +1 higher is better (the default), -1 lower is better (``Harm``: the share of
  harmful passages), 0 no better side; ``compare`` reads it (bold, which run beats which);
- ``unit``: every per-query value lies in [0, 1]; ``compare`` reads it (a minimum detectable
  difference beyond 1 is reported as beyond the measure's range).

Adding a measure: a kernel (``udcg.metrics.kernels`` for the built-in ones), one ``register(...)``
(below, in ``BUILTIN``, for a built-in one) and a test; nothing else changes.
"""

from __future__ import annotations

import numpy as np

from udcg.metrics import kernels as K
from udcg.metrics.measure_types import Definition, Measure, definition, register
# The registry's public face (its table and types live in measure_types): explicit re-exports.
from udcg.metrics.measure_types import CUTOFF_RULES as CUTOFF_RULES, DIRECTIONS as DIRECTIONS, NEEDS as NEEDS
from udcg.metrics.measure_types import RUN_INPUTS as RUN_INPUTS, Kernel as Kernel, definitions as definitions
from udcg.metrics.measure_types import lookup as lookup, needs as needs, unregister as unregister
from udcg.metrics.signals import Signals

DCG_CHOICES = ("log2", "exp-log2")


def score(measure: Measure, signals: Signals) -> np.ndarray:
    """One value per row of ``signals``: the measure's kernel."""
    return definition(measure.name).kernel(measure, signals)


# ---------------------------------------------------------------- the built-in measures

_REL = {"rel": 1}
_DCG = {"params": {"dcg": "log2"}, "choices": {"dcg": DCG_CHOICES}}
_UTILITY = frozenset(("utilities",))
_SET = frozenset(("grades", "corpus_grades"))
_POOLED = _SET | {"pool_grades"}

BUILTIN = (
    Definition("P", K.precision_kernel, cutoff="required", params=_REL, aliases=("precision",), unit=True),
    Definition("R", K.recall_kernel, cutoff="required", params=_REL, aliases=("recall",), unit=True),
    Definition("F1", K.f1_kernel, cutoff="required", params=_REL, aliases=("f",), unit=True),
    Definition("Success", K.success_kernel, cutoff="required", params=_REL, aliases=("hit", "hits"), unit=True),
    Definition("RR", K.reciprocal_rank_kernel, params=_REL, aliases=("mrr",), unit=True),
    Definition("AP", K.average_precision_kernel, params=_REL, aliases=("map",), unit=True),
    Definition("Rprec", K.r_precision_kernel, cutoff="none", params=_REL, aliases=("r-precision", "r_precision"),
               unit=True),
    Definition("DCG", K.dcg_kernel, **_DCG),
    Definition("nDCG", K.ndcg_kernel, **_DCG, unit=True),
    Definition("ERR", K.err_kernel, params={"max_grade": 4}, unit=True),
    Definition("AUC-PR", K.auc_pr_kernel, params=_REL, aliases=("aucpr", "auc_pr"), unit=True),
    Definition("UDCG", K.udcg_kernel, needs=_UTILITY, unit=True),
    Definition("UDCG_theta", K.udcg_theta_kernel, needs=_UTILITY | {"theta"}, aliases=("udcg-theta", "udcg_θ", "udcgθ")),
    Definition("RA-nWG", K.set_based_kernel, needs=_SET, aliases=("ranwg", "ra_nwg")),
    Definition("PROC", K.set_based_pooled_kernel, needs=_POOLED),
    Definition("%PROC", K.set_based_pooled_kernel, needs=_POOLED),
    Definition("N-Recall4+", K.set_based_kernel, needs=_SET),
    Definition("N-Recall5", K.set_based_kernel, needs=_SET),
    Definition("Precision4+", K.set_based_kernel, needs=_SET),
    Definition("Harm", K.set_based_kernel, needs=_SET, direction=-1),
    Definition("eRAG", K.erag_kernel, needs={"erag"}, cutoff="none"),
    Definition("ANSWER_PROB", K.answer_prob_kernel, needs={"answer_ll"}, cutoff="none", aliases=("answer-prob",)),
    Definition("containment", K.containment_kernel, needs={"contains"}),
)
for _definition in BUILTIN:
    register(_definition)
