"""Score a TREC run against qrels: dicts -> gain matrices (``udcg.metrics.gains``) -> one per-rank
curve per measure family (hits, AP, DCG, ERR, ...), read off at every cutoff asked for.

Query policy (ir_measures' default, which follows trec_eval): the queries scored are those of the
qrels, in qrels order. A qrels query missing from the run gets every measure's value on an empty
ranking, which is 0 for all of ours (ir_measures emits ``measure.DEFAULT`` = 0 for it). A run query
without qrels is skipped (logged), as pytrec_eval does. A query whose qrels hold no relevant
document scores 0 (trec_eval's convention).

Output rows are ``(qid, str(measure), value)``, query-major, measures in the order given — the
layout of ``ir_measures.iter_calc`` written as ``qid<TAB>measure<TAB>value``.

UDCG@k and UDCG_theta@k of a run are UDCG / UDCG_theta of its top-k documents read as one context,
with utilities ``{qid: {docid: u}}`` (``udcg annotate --run``). A ranking shorter than k is a
shorter context (UDCG divides by the number of documents there); an empty one is NaN. A top-k
document without a utility follows ``unannotated``: ``error`` (default: say which and stop),
``zero`` (u = 0, neither helps nor misleads) or ``worst`` (u = -1, a fully misleading passage).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, TYPE_CHECKING

import numpy as np

from udcg.errors import InputError
from udcg.metrics import classical as C
from udcg.metrics.gains import GainTable, gain_table
from udcg.metrics.measures import CLASSICAL, UTILITY, Measure, parse_measure, parse_measures
from udcg.metrics.udcg import GAMMA, _udcg, check_gamma

if TYPE_CHECKING:  # scikit-learn is imported only when a theta model is used
    from udcg.metrics.udcg_theta import UDCGTheta

class _Curves:
    """Per-table cache of the per-rank curves, so each family is computed once for all cutoffs."""

    def __init__(self, table: GainTable) -> None:
        self.t = table
        self.cache: dict[tuple, Any] = {}

    def get(self, key: tuple, make) -> Any:
        if key not in self.cache:
            self.cache[key] = make()
        return self.cache[key]

    def rel(self, level: float) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        def make():
            rel = self.t.gains >= level
            return rel, C._hits_curve(rel), self.t.n_rel(level)
        return self.get(("rel", level), make)

    def ap(self, level: float) -> np.ndarray:
        rel, hits, _ = self.rel(level)
        return self.get(("ap", level), lambda: C._ap_curve(hits, rel))

    def first(self, level: float) -> np.ndarray:
        return self.get(("first", level), lambda: C._first_hit(self.rel(level)[1]))

    def dcg(self, exponential: bool) -> tuple[np.ndarray, np.ndarray]:
        return self.get(("dcg", exponential), lambda: (C._dcg_curve(self.t.gains, exponential),
                                                      C._dcg_curve(self.t.ideal, exponential)))


def _binary(m: Measure, curves: _Curves) -> np.ndarray:
    level = m.param("rel")
    rel, hits, n_rel = curves.rel(level)
    k = m.cutoff
    if m.name == "P":
        return C._precision(hits, k)
    if m.name == "R":
        return C._recall(hits, n_rel, k)
    if m.name == "F1":
        return C._f1(hits, n_rel, k)
    if m.name == "Success":
        return C._success(hits, k)
    if m.name == "RR":
        return C._reciprocal_rank(curves.first(level), hits.shape[1], k)
    if m.name == "AP":
        return C._average_precision(curves.ap(level), n_rel, k)
    if m.name == "Rprec":
        return C._r_precision(hits, n_rel)
    return C._auc_pr(C._interpolated_precision(rel, hits, n_rel, k))  # AUC-PR


UNANNOTATED = ("error", "zero", "worst")


@dataclass(frozen=True)
class UtilityOptions:
    """How UDCG and UDCG_theta are computed on a run (see the module doc)."""

    gamma: float = GAMMA
    theta: UDCGTheta | None = None
    unannotated: str = "error"
    where: str = "run"

    def __post_init__(self) -> None:
        check_gamma(self.gamma)
        if self.unannotated not in UNANNOTATED:
            raise InputError(f"unannotated = {self.unannotated!r}: choose one of {', '.join(UNANNOTATED)}")


def top_k_utilities(table: GainTable, k: int | None, opts: UtilityOptions) -> tuple[np.ndarray, np.ndarray]:
    """(utilities of the top-k documents, zero-padded to k columns; context length per query).
    ``table.extra["utility"]`` holds NaN where a ranked document has no utility."""
    if "utility" not in table.extra:
        raise InputError("UDCG needs utilities (give --utilities FOLDER from udcg annotate --run, or utilities=...)")
    width = table.gains.shape[1] if k is None else k
    length = np.minimum(table.depth, width)
    u = np.zeros((len(table.qids), width))
    have = min(width, table.extra["utility"].shape[1])
    u[:, :have] = table.extra["utility"][:, :have]
    inside = np.arange(width)[None, :] < length[:, None]
    missing = inside & np.isnan(u)
    u[~inside] = 0.0
    if missing.any():
        if opts.unannotated == "error":
            i, j = np.argwhere(missing)[0]
            raise InputError(f"{opts.where}: {int(missing.sum())} of the {int(inside.sum())} top-{width} documents have no "
                             f"utility (first: query {table.qids[i]!r}, rank {j + 1}); annotate them (udcg annotate "
                             "--run ...) or choose unannotated zero|worst")
        u[missing] = -1.0 if opts.unannotated == "worst" else 0.0
    return u, length


def utility_coverage(table: GainTable, k: int | None) -> tuple[int, int]:
    """(annotated documents, documents) among the top-k of every query."""
    util = table.extra["utility"]
    width = util.shape[1] if k is None else min(k, util.shape[1])
    inside = np.arange(width)[None, :] < np.minimum(table.depth, width)[:, None]
    return int((inside & ~np.isnan(util[:, :width])).sum()), int(inside.sum())


def _utility_measure(measure: Measure, table: GainTable, opts: UtilityOptions) -> np.ndarray:
    if measure.name == "UDCG":
        u, length = top_k_utilities(table, measure.cutoff, opts)
        return _udcg(u, opts.gamma, length)
    if opts.theta is None:
        raise InputError(f"{measure} needs a fitted UDCG_theta model (udcg fit-theta, then --theta MODEL.json)")
    k = opts.theta.k_ if measure.cutoff is None else measure.cutoff
    if k != opts.theta.k_:
        raise InputError(f"{measure}: the UDCG_theta model was fitted for k = {opts.theta.k_} (write "
                         f"UDCG_theta@{opts.theta.k_}, or fit one for k = {k})")
    u, length = top_k_utilities(table, k, opts)
    return np.where(length > 0, opts.theta.predict(u), np.nan)


def _compute(measure: Measure, table: GainTable, curves: _Curves, opts: UtilityOptions) -> np.ndarray:
    if measure.name in UTILITY:
        return _utility_measure(measure, table, opts)
    if measure.name not in CLASSICAL:
        raise InputError(f"{measure} is scored on contexts, not on a run (udcg score CONTEXTS.jsonl --metrics {measure})")
    if measure.name in ("DCG", "nDCG"):
        run_curve, ideal_curve = curves.dcg(measure.param("dcg") == "exp-log2")
        if measure.name == "DCG":
            return C._at(run_curve, measure.cutoff)
        return C._ndcg(run_curve, ideal_curve, measure.cutoff)
    if measure.name == "ERR":
        max_grade = measure.param("max_grade")
        if table.gains.size and table.gains.max() > max_grade:
            raise InputError(f"{measure}: a relevance grade of {table.gains.max():g} exceeds max_grade = "
                             f"{max_grade} (write ERR(max_grade=G)@k with G the top of your scale)")
        curve = curves.get(("err", max_grade), lambda: C._err_curve(table.gains, float(max_grade)))
        return C._at(curve, measure.cutoff)
    return _binary(measure, curves)


def as_measures(measures: Sequence[Measure | str] | str) -> list[Measure]:
    """A comma-separated string, or a list of Measures and/or measure strings."""
    if isinstance(measures, str):
        return parse_measures(measures)
    out = []
    for m in measures:
        if isinstance(m, str):
            m = parse_measure(m, where="measures")
        if not isinstance(m, Measure):
            raise InputError(f"measures: {m!r} is not a Measure (write e.g. 'P@5' or parse_measures('P@5,nDCG@10'))")
        out.append(m)
    return out


def evaluate_table(table: GainTable, measures: Sequence[Measure | str] | str,
                   opts: UtilityOptions | None = None) -> dict[Measure, np.ndarray]:
    """{measure: one value per query of the table}; measures of one family share their curve."""
    wanted = as_measures(measures)
    curves = _Curves(table)
    opts = opts or UtilityOptions()
    return {m: _compute(m, table, curves, opts) for m in wanted}


def run_table(run: Mapping[str, Mapping[str, float]], qrels: Mapping[str, Mapping[str, float]] | None,
              utilities: Mapping[str, Mapping[str, float]] | None = None, depth: int | None = None) -> GainTable:
    """The GainTable of a run, with ``extra["utility"]`` in rank order (NaN = no utility; the
    first ``depth`` ranks only, when given) when ``utilities`` are given. Without qrels the run's
    own queries are scored (utility measures only)."""
    extra = None if utilities is None else {"utility": utilities}
    return gain_table(run, qrels if qrels is not None else {qid: {} for qid in run}, extra,
                      extra_default=float("nan"), extra_depth=depth)


def utility_depth(measures: Sequence[Measure]) -> int | None:
    """How many ranks of utilities the utility measures read (None = all)."""
    cutoffs = [m.cutoff for m in measures if m.name in UTILITY]
    return None if not cutoffs or None in cutoffs else max(cutoffs)


def evaluate_arrays(run: Mapping[str, Mapping[str, float]], qrels: Mapping[str, Mapping[str, float]] | None,
                    measures: Sequence[Measure | str] | str, *, utilities: Mapping[str, Mapping[str, float]] | None = None,
                    opts: UtilityOptions | None = None) -> tuple[tuple[str, ...], dict[Measure, np.ndarray]]:
    """Per-query values as arrays: (qids, {measure: values aligned with qids})."""
    wanted = as_measures(measures)  # checked before the (longer) conversion
    check_inputs(wanted, qrels, utilities)
    table = run_table(run, qrels, utilities if any(m.name in UTILITY for m in wanted) else None, utility_depth(wanted))
    return table.qids, evaluate_table(table, wanted, opts)


def check_inputs(wanted: list[Measure], qrels, utilities) -> None:
    """Classical measures need qrels; UDCG and UDCG_theta need utilities."""
    classical = [m for m in wanted if m.name not in UTILITY]
    if classical and qrels is None:
        raise InputError(f"{classical[0]} needs qrels (give --qrels, or score only UDCG@k)")
    if utilities is None and any(m.name in UTILITY for m in wanted):
        raise InputError("UDCG needs utilities (give --utilities FOLDER from udcg annotate --run, or utilities=...)")


def evaluate_trec(run: Mapping[str, Mapping[str, float]], qrels: Mapping[str, Mapping[str, float]] | None,
                  measures: Sequence[Measure | str] | str, *, utilities: Mapping[str, Mapping[str, float]] | None = None,
                  opts: UtilityOptions | None = None) -> list[tuple[str, str, float]]:
    """Per-query rows ``(qid, measure, value)``, query-major, qrels order (see module doc)."""
    qids, values = evaluate_arrays(run, qrels, measures, utilities=utilities, opts=opts)
    names = [(str(m), v.tolist()) for m, v in values.items()]
    return [(qid, name, vals[i]) for i, qid in enumerate(qids) for name, vals in names]


def mean_by_measure(rows: Sequence[tuple[str, str, float]]) -> dict[str, float]:
    """The mean over queries of each measure (MAP, MRR, ...), in first-seen order; NaN values (UDCG
    of an empty ranking) are left out of the mean."""
    sums: dict[str, list[float]] = {}
    for _, name, value in rows:
        sums.setdefault(name, []).append(value)
    return {name: float(np.nanmean(vals)) if not np.isnan(vals).all() else float("nan") for name, vals in sums.items()}


def format_tsv(rows: Sequence[tuple[str, str, float]]) -> str:
    """``qid<TAB>measure<TAB>value`` lines; values written with full precision (repr)."""
    return "".join(f"{qid}\t{name}\t{value!r}\n" for qid, name, value in rows)
