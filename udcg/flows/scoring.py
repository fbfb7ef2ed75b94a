"""Scoring a contexts file: utilities from relevance and p(NO-RESPONSE) (Eq. 2, ``udcg.metrics.udcg``),
contexts grouped by k into metric batches, every metric per context; the scored items as
``udcg score`` writes them (input fields kept, 'metrics' added, and the authors' ``udcg[<model>]``
field recomputed for the authors' format)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from collections.abc import Sequence

import numpy as np

from udcg.errors import InputError
from udcg.io.contexts import ContextRows, read_context_rows
from udcg.io.tables import Table
from udcg.metrics.contexts import ContextBatch, MetricName, parse_metrics, score_batch
from udcg.metrics.udcg import GAMMA, udcg, utilities_from

if TYPE_CHECKING:  # scikit-learn is imported only when a theta model is used
    from udcg.metrics.udcg_theta import UDCGTheta


def read_contexts(path: str, model: str | None = None, k: int | None = None) -> ContextRows:
    """A contexts file (``udcg.io.contexts``) with every context's utilities: given, or made from
    'relevant' and 'p_abs'; both given must agree."""
    rows = read_context_rows(path, model, k)
    rows.fields[:] = [with_utilities(fields, where) for where, fields in zip(rows.where, rows.fields)]
    return rows


def with_utilities(fields: dict, where: str) -> dict:
    """The context's fields with 'utilities' made from 'relevant' and 'p_abs' when absent; both
    given must agree."""
    rel, p_abs, u = fields.get("relevant"), fields.get("p_abs"), fields.get("utilities")
    if rel is None or p_abs is None:
        return fields
    expected = utilities_from(rel, p_abs).tolist()
    if u is None:
        return {**fields, "utilities": expected}
    for i, (v, e) in enumerate(zip(u, expected)):
        if abs(v - e) > 1e-6:
            raise InputError(f"{where}: position {i}: 'utilities' holds {v!r} but 'relevant' and 'p_abs' give {e!r} "
                             "(give one of them, or make them agree)")
    return fields


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


# ---------------------------------------------------------------- udcg score's output


def default_metrics(rows: ContextRows, spec: str, model: str | None = None) -> tuple[list[MetricName], str]:
    """The metrics of ``spec``, + RA-nWG when every context has grades; UDCG is left out when some
    context has no utilities, with the reason (else the reason is ""; ``model``: the one chosen)."""
    metrics = parse_metrics(spec + (",RA-nWG" if all("grades" in f for f in rows.fields) else ""))
    if all("utilities" in f for f in rows.fields):
        return metrics, ""
    models = sorted({m for raw in rows.raw for p in raw.get("passages", []) if isinstance(p, dict)
                     for m in (p.get("models_info") or {})})
    why = (f"the passages carry p_abs of several models ({', '.join(models)}); choose one with --model"
           if len(models) > 1 and model is None else "some contexts have no utilities (udcg annotate first)")
    return [m for m in metrics if m.family != "UDCG"], why


def authors_udcg(passages: Sequence[dict], gamma: float) -> dict[str, float]:
    """The authors' ``udcg[<model>]`` field of an item: UDCG of its passages for every model
    annotated on all of them ({} when a passage lacks ``is_relevant``)."""
    models = set.intersection(*(set(p.get("models_info", {})) for p in passages)) if passages else set()
    if not models or not all(isinstance(p.get("is_relevant"), bool) for p in passages):
        return {}
    rel = [p["is_relevant"] for p in passages]
    return {m: float(udcg(utilities_from(rel, [p["models_info"][m]["no_res_prob"] for p in passages])[None], gamma)[0])
            for m in sorted(models)}


def scored_items(rows: ContextRows, values: dict[str, np.ndarray], gamma: float, k: int | None = None) -> list[dict]:
    """Each input item with every field kept, its metric ``values`` added to 'metrics' (NaN = NA
    -> None) and, for the authors' format, ``udcg[<model>]`` of its first ``k`` passages."""
    out = []
    for i, raw in enumerate(rows.raw):
        item = dict(raw)
        item["metrics"] = {**(raw.get("metrics") or {}), **{n: (None if np.isnan(v[i]) else float(v[i])) for n, v in values.items()}}
        if "passages" in raw:
            by_model = authors_udcg(raw["passages"][:k] if k else raw["passages"], gamma)
            if by_model:
                item["udcg"] = {**(raw.get("udcg") or {}), **by_model}
        out.append(item)
    return out


def means_table(values: dict[str, np.ndarray], title: str) -> Table:
    """Mean, count and NA count of every metric over the contexts."""
    table = Table(["metric", "mean", "n", "NA"], title=title)
    for name, v in values.items():
        ok = ~np.isnan(v)
        table.add(metric=name, mean=float(v[ok].mean()) if ok.any() else float("nan"), n=int(ok.sum()), NA=int((~ok).sum()))
    return table
