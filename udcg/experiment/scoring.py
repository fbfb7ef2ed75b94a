"""Scoring a contexts file: utilities from relevance and p(NO-RESPONSE) (Eq. 2, ``udcg.metrics.udcg``),
contexts grouped by k into metric batches, every metric per context."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from udcg.errors import InputError
from udcg.io.contexts import ContextRows, read_context_rows
from udcg.metrics.contexts import ContextBatch, MetricName, score_batch
from udcg.metrics.udcg import GAMMA, UDCGTheta, utilities_from


def read_contexts(path: str, model: str | None = None, k: int | None = None) -> ContextRows:
    """A contexts file (``udcg.io.contexts``) with every context's utilities: given, or made from
    'relevant' and 'p_abs'; both given must agree."""
    rows = read_context_rows(path, model, k)
    for where, fields in zip(rows.where, rows.fields):
        add_utilities(fields, where)
    return rows


def add_utilities(fields: dict, where: str) -> None:
    rel, p_abs, u = fields.get("relevant"), fields.get("p_abs"), fields.get("utilities")
    if rel is None or p_abs is None:
        return
    expected = utilities_from(rel, p_abs).tolist()
    if u is None:
        fields["utilities"] = expected
        return
    for i, (v, e) in enumerate(zip(u, expected)):
        if abs(v - e) > 1e-6:
            raise InputError(f"{where}: position {i}: 'utilities' holds {v!r} but 'relevant' and 'p_abs' give {e!r} "
                             "(give one of them, or make them agree)")


def _matrix(fields: Sequence[dict], name: str, dtype: type) -> np.ndarray | None:
    if not all(name in f for f in fields):
        return None
    return np.asarray([f[name] for f in fields], dtype=dtype)


def batches_by_k(rows: ContextRows) -> dict[int, tuple[np.ndarray, ContextBatch]]:
    """Group contexts by k: k -> (row indices, batch)."""
    ks = np.array([len(f["relevant"]) if "relevant" in f else len(f["utilities"]) for f in rows.fields])
    out = {}
    for k in np.unique(ks):
        idx = np.flatnonzero(ks == k)
        fs = [rows.fields[i] for i in idx]
        rel = _matrix(fs, "relevant", bool)
        if rel is None:
            raise InputError(f"{rows.where[idx[0]]}: some contexts lack 'relevant' (every context needs it)")
        n_rel = np.array([f.get("n_relevant", sum(f["relevant"])) for f in fs], dtype=float)
        out[int(k)] = (idx, ContextBatch(relevant=rel, utilities=_matrix(fs, "utilities", float), n_relevant=n_rel,
                                         grades=_matrix(fs, "grades", int), corpus_counts=_matrix(fs, "corpus_grades", float),
                                         erag=_matrix(fs, "erag", float), answer_ll=_matrix(fs, "answer_ll", float),
                                         contains=_matrix(fs, "contains", bool),
                                         pool_counts=_matrix(fs, "pool_grades", float)))
    return out


def score_rows(rows: ContextRows, metrics: list[MetricName], gamma: float = GAMMA,
               theta: UDCGTheta | None = None) -> dict[str, np.ndarray]:
    """Every metric for every context, in file order (NaN = NA)."""
    out = {str(m): np.full(len(rows), np.nan) for m in metrics}
    for k, (idx, batch) in batches_by_k(rows).items():
        too_deep = [m for m in metrics if m.k is not None and m.k > k]
        if too_deep:  # same rule as --k: a cut-off beyond the context is an error, not a silent P@k -> P@len
            raise InputError(f"{rows.where[idx[0]]}: metric {too_deep[0]} cuts at {too_deep[0].k} but the context has "
                             f"{k} passages (use {too_deep[0].family}@{k} or less, or {too_deep[0].family} for the whole context)")
        thetas = [m for m in metrics if m.family == "UDCG_theta"]
        if thetas and theta is not None and (thetas[0].k or k) != theta.k_:
            raise InputError(f"{rows.where[idx[0]]}: {thetas[0]} scores {thetas[0].k or k} passages but the UDCG_theta model "
                             f"was fitted for k = {theta.k_} (fit one for this k: udcg fit-theta --k {thetas[0].k or k})")
        for name, values in score_batch(batch, metrics, gamma, theta).items():
            out[name][idx] = values
    return out
