"""Scoring a contexts file: utilities from relevance and p(NO-RESPONSE) (Eq. 2, ``udcg.metrics.udcg``),
contexts grouped by k into metric batches, every metric per context; the scored items as
``udcg score`` writes them (input fields kept, 'metrics' added, and the authors' ``udcg[<model>]``
field recomputed for the authors' format)."""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import TYPE_CHECKING

import numpy as np

from udcg.errors import InputError
from udcg.io.contexts import ContextFile, read_context_file
from udcg.io.tables import Table
from udcg.metrics.contexts import ContextBatch, parse_metrics, score_batch
from udcg.metrics.measures import Measure
from udcg.metrics.udcg import GAMMA, udcg_matrix, utilities_from
from udcg.records import ContextRecord

if TYPE_CHECKING:  # scikit-learn is imported only when a theta model is used
    from udcg.metrics.udcg_theta import UDCGTheta


def read_contexts(path: str, reader: str | None = None, k: int | None = None) -> ContextFile:
    """A contexts file (``udcg.io.contexts``) with every context's utilities: given, or made from
    'relevant' and 'p_abs' (Eq. 2, ``utilities_from``); both given must agree."""
    return read_context_file(path, reader, k, utilities=utilities_from)


def field_matrix(records: Sequence[ContextRecord], name: str, dtype: type) -> np.ndarray | None:
    """The field ``name`` of every record as one matrix; None when some record does not know it."""
    if not records or any(getattr(r, name) is None for r in records):
        return None
    return np.asarray([getattr(r, name) for r in records], dtype=dtype)


def context_batch(records: Sequence[ContextRecord], n_relevant: str = "pool") -> ContextBatch:
    """The metrics' batch of records of one k. ``n_relevant``: "pool" reads each record's count of
    relevant passages in its question's pool (the context's own when not known); "context" always
    the context's own."""
    n_rel = (np.array([sum(r.relevant) if r.n_relevant is None else r.n_relevant for r in records], dtype=float)
             if n_relevant == "pool" else None)
    m = lambda name, dtype: field_matrix(records, name, dtype)  # noqa: E731
    return ContextBatch(relevant=m("relevant", bool), utilities=m("utilities", float), n_relevant=n_rel,
                        grades=m("grades", int), corpus_counts=m("corpus_grades", float), erag=m("erag", float),
                        answer_ll=m("answer_ll", float), contains=m("contains", bool),
                        pool_counts=m("pool_grades", float))


def batches_by_k(file: ContextFile) -> dict[int, tuple[np.ndarray, ContextBatch]]:
    """Group contexts by k: k -> (row indices, batch)."""
    ks = np.array([r.k for r in file.records])
    return {int(k): (idx, context_batch([file.records[i] for i in idx]))
            for k in np.unique(ks) for idx in [np.flatnonzero(ks == k)]}


def score_rows(file: ContextFile, metrics: list[Measure], gamma: float = GAMMA,
               theta: UDCGTheta | None = None) -> dict[Measure, np.ndarray]:
    """Every metric for every context, in file order (NaN = NA)."""
    out = {m: np.full(len(file), np.nan) for m in metrics}
    for k, (idx, batch) in batches_by_k(file).items():
        too_deep = [m for m in metrics if m.k is not None and m.k > k]
        if too_deep:  # same rule as --k: a cut-off beyond the context is an error, not a silent P@k -> P@len
            raise InputError(f"{file.where[idx[0]]}: metric {too_deep[0]} cuts at {too_deep[0].k} but the context has "
                             f"{k} passages (use {too_deep[0].family}@{k} or less, or {too_deep[0].family} for the whole context)")
        thetas = [m for m in metrics if m.family == "UDCG_theta"]
        if thetas and theta is not None and (thetas[0].k or k) != theta.k_:
            raise InputError(f"{file.where[idx[0]]}: {thetas[0]} scores {thetas[0].k or k} passages but the UDCG_theta model "
                             f"was fitted for k = {theta.k_} (fit one for this k: udcg fit-theta --k {thetas[0].k or k})")
        for m, values in score_batch(batch, metrics, gamma, theta).items():
            out[m][idx] = values
    return out


# ---------------------------------------------------------------- udcg score's output


def default_metrics(file: ContextFile, spec: str, reader: str | None = None) -> tuple[list[Measure], str]:
    """The metrics of ``spec``, + RA-nWG when every context has grades; UDCG is left out when some
    context has no utilities, with the reason (else the reason is ""; ``reader``: the model chosen)."""
    metrics = parse_metrics(spec + (",RA-nWG" if all(r.grades is not None for r in file.records) else ""))
    if all(r.utilities is not None for r in file.records):
        return metrics, ""
    models = sorted({m for raw in file.sources for p in raw.get("passages", []) if isinstance(p, dict)
                     for m in (p.get("models_info") or {})})
    why = (f"the passages carry p_abs of several models ({', '.join(models)}); choose one with --model"
           if len(models) > 1 and reader is None else "some contexts have no utilities (udcg annotate first)")
    return [m for m in metrics if m.family != "UDCG"], why


def authors_udcg(passages: Sequence[dict], gamma: float) -> dict[str, float]:
    """The authors' ``udcg[<model>]`` field of an item: UDCG of its passages for every model
    annotated on all of them ({} when a passage lacks ``is_relevant``)."""
    models = set.intersection(*(set(p.get("models_info", {})) for p in passages)) if passages else set()
    if not models or not all(isinstance(p.get("is_relevant"), bool) for p in passages):
        return {}
    rel = [p["is_relevant"] for p in passages]
    return {m: float(udcg_matrix(utilities_from(rel, [p["models_info"][m]["no_res_prob"] for p in passages])[None], gamma)[0])
            for m in sorted(models)}


def scored_items(file: ContextFile, values: dict[str, np.ndarray], gamma: float, k: int | None = None) -> list[dict]:
    """Each input item with every field kept (``udcg.io.contexts.scored_lines``), its metric
    ``values`` added to 'metrics' (NaN = NA -> None) and, for the authors' format, ``udcg[<model>]``
    of its first ``k`` passages."""
    from udcg.io.contexts import scored_lines

    metrics = [{n: (None if np.isnan(v[i]) else float(v[i])) for n, v in values.items()} for i in range(len(file))]
    by_model = [authors_udcg(raw["passages"][:k] if k else raw["passages"], gamma) if "passages" in raw else {}
                for raw in file.sources]
    return scored_lines(file, metrics, by_model)


def means_table(values: dict[str, np.ndarray], title: str) -> Table:
    """Mean, count and NA count of every metric over the contexts. The mean is the correctly rounded
    sum (``math.fsum``) over the count: the same for any order of the contexts file's lines."""
    table = Table(["metric", "mean", "n", "NA"], title=title)
    for name, v in values.items():
        ok = ~np.isnan(v)
        mean = math.fsum(v[ok].tolist()) / int(ok.sum()) if ok.any() else float("nan")
        table.add(metric=name, mean=mean, n=int(ok.sum()), NA=int((~ok).sum()))
    return table
