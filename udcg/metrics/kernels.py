"""The kernel of every built-in measure: ``kernel(measure, signals) -> one value per row`` (a query
of a run, or a context), declared with its measure in ``udcg.metrics.registry``. A kernel reads its
input through ``udcg.metrics.signals.Signals`` only, so the same kernel scores a TREC run
(``score --run``, ``compare``) and contexts (``score CONTEXTS``, ``validate``, ``correlate``).

Each kernel is named after its measure with ``_kernel`` (``precision_kernel`` is the kernel of
``P``; ``udcg.metrics.classical.precision`` is the array function it agrees with), so no name
means two things. Kernels do not validate what the providers already checked; the definitions (trec_eval's
conventions) are in ``udcg.metrics.classical``, ``udcg.metrics.setbased`` and ``udcg.metrics.udcg``.
"""

from __future__ import annotations

import numpy as np

from udcg.errors import InputError
from udcg.metrics import classical, curves, setbased
from udcg.metrics.measure_types import Measure
from udcg.metrics.signals import Signals
from udcg.metrics.udcg import check_gamma, udcg_rows


# ---------------------------------------------------------------- binary relevance (gain >= rel)


def precision_kernel(m: Measure, s: Signals) -> np.ndarray:
    return curves.precision_at(s.rel(m.param("rel"))[1], s.cutoff(m))


def recall_kernel(m: Measure, s: Signals) -> np.ndarray:
    _, hits, n_rel = s.rel(m.param("rel"))
    return curves.recall_at(hits, n_rel, s.cutoff(m))


def f1_kernel(m: Measure, s: Signals) -> np.ndarray:
    _, hits, n_rel = s.rel(m.param("rel"))
    return curves.f1_at(hits, n_rel, s.cutoff(m))


def success_kernel(m: Measure, s: Signals) -> np.ndarray:
    return curves.success_at(s.rel(m.param("rel"))[1], s.cutoff(m))


def reciprocal_rank_kernel(m: Measure, s: Signals) -> np.ndarray:
    level = m.param("rel")
    return curves.reciprocal_rank_at(s.first(level), s.depth, s.cutoff(m))


def average_precision_kernel(m: Measure, s: Signals) -> np.ndarray:
    level = m.param("rel")
    return curves.average_precision_at(s.ap(level), s.rel(level)[2], s.cutoff(m))


def r_precision_kernel(m: Measure, s: Signals) -> np.ndarray:
    _, hits, n_rel = s.rel(m.param("rel"))
    return curves.r_precision_of(hits, n_rel)


def auc_pr_kernel(m: Measure, s: Signals) -> np.ndarray:
    rel, hits, n_rel = s.rel(m.param("rel"))
    return curves.auc_pr_of(curves.interpolated_precision_at(rel, hits, n_rel, s.cutoff(m)))


# ---------------------------------------------------------------- graded relevance


def dcg_kernel(m: Measure, s: Signals) -> np.ndarray:
    return curves.at(s.dcg(m.param("dcg") == "exp-log2"), s.cutoff(m))


def ndcg_kernel(m: Measure, s: Signals) -> np.ndarray:
    exponential = m.param("dcg") == "exp-log2"
    return curves.ndcg_at(s.dcg(exponential), s.ideal_dcg(exponential), s.cutoff(m))


def err_kernel(m: Measure, s: Signals) -> np.ndarray:
    """ERR with the top grade ``max_grade`` (contexts: 1, their relevance is binary)."""
    top = m.param("max_grade") if s.top_grade is None else s.top_grade
    if s.gains.size and s.gains.max() > top:
        raise InputError(f"{m}: a relevance grade of {s.gains.max():g} exceeds max_grade = "
                         f"{top} (write ERR(max_grade=G)@k with G the top of your scale)")
    return curves.at(s.cached(("err", top), lambda: curves.err_curve(s.gains, float(top))), s.cutoff(m))


# ---------------------------------------------------------------- utilities


def udcg_kernel(m: Measure, s: Signals) -> np.ndarray:
    """UDCG of the top k (a shorter ranking is a shorter context; none at all is sigma(0) = 0.5)."""
    u, length = s.utilities(m, s.cutoff(m))
    return udcg_rows(u, check_gamma(s.gamma), length)


def udcg_theta_kernel(m: Measure, s: Signals) -> np.ndarray:
    """UDCG_theta of the top k; without @k, the whole context (contexts) or the model's k (a run)."""
    theta = s.fitted_theta(m)
    k = s.cutoff(m) or s.context_k or theta.k_
    if k != theta.k_:
        raise InputError(f"{m}: the UDCG_theta model was fitted for k = {theta.k_} (write "
                         f"UDCG_theta@{theta.k_}, or fit one for k = {k})")
    u, _ = s.utilities(m, k)  # zero-padded: an empty slot is u = 0, so no passage at all is sigma(0) = 0.5
    return theta.predict(u)


# ---------------------------------------------------------------- per-passage signals (contexts)


def _set_based(m: Measure, s: Signals, pooled: bool) -> np.ndarray:
    grades = np.asarray(s.passage("grades", m), dtype=int)
    pool = s.passage("pool_grades", m) if pooled else None
    # K as written, also beyond a shorter context (an oracle context from a short pool): seed 000's K
    return setbased.set_metrics(grades, s.passage("corpus_grades", m), pool, k=m.cutoff or s.depth)[m.name]


def set_based_kernel(m: Measure, s: Signals) -> np.ndarray:
    return _set_based(m, s, pooled=False)


def set_based_pooled_kernel(m: Measure, s: Signals) -> np.ndarray:
    """PROC and %PROC: they also read the grade counts of the question's retrieval pool."""
    return _set_based(m, s, pooled=True)


def erag_kernel(m: Measure, s: Signals) -> np.ndarray:
    return classical.erag(s.passage("erag", m))


def answer_prob_kernel(m: Measure, s: Signals) -> np.ndarray:
    return classical.answer_prob(s.passage("answer_ll", m))


def containment_kernel(m: Measure, s: Signals) -> np.ndarray:
    return classical.answer_containment(np.asarray(s.passage("contains", m), dtype=bool), s.cutoff(m))
