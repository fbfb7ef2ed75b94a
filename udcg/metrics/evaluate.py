"""Score a TREC run against qrels: dicts -> gain matrices -> one per-rank curve per measure family
(hits, AP, DCG, ERR, ...), read off at every cutoff asked for.

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

import gc
import logging
import math
import operator
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from itertools import chain, repeat
from typing import Any

import numpy as np

from udcg.errors import InputError
from udcg.metrics import classical as C
from udcg.metrics.measures import CLASSICAL, UTILITY, Measure, parse_measure, parse_measures
from udcg.metrics.udcg import GAMMA, UDCGTheta, _udcg, check_gamma

try:  # the dict walk in C, built at install when a compiler is there (see _walk.c); else pure Python
    from udcg.metrics import _walk
except ImportError:
    _walk = None

log = logging.getLogger(__name__)
_values = operator.methodcaller("values")
_EMPTY: dict[str, float] = {}


@dataclass(frozen=True)
class GainTable:
    """The run and qrels as matrices: ``gains[i, j]`` = judged gain of the document at rank j+1 of
    query ``qids[i]`` (0 if unjudged or beyond the run), ``ideal[i]`` = all judged gains of the
    query sorted descending (0-padded), ``extra[name][i, j]`` = the value of another per-document
    map (abstention probabilities, utilities, ...) for the document at rank j+1 (0 if absent),
    ``n_judged[i]`` = the number of judged documents of the query (any gain, negative included)."""

    qids: tuple[str, ...]
    gains: np.ndarray
    ideal: np.ndarray
    extra: dict[str, np.ndarray] = field(default_factory=dict)
    n_judged: np.ndarray | None = None
    depth: np.ndarray | None = None  # documents ranked per query

    def n_rel(self, rel_level: float) -> np.ndarray:
        return (self.ideal >= rel_level).sum(1)


def _floats(values, count: int, what: str) -> np.ndarray:
    try:
        arr = np.fromiter(values, dtype=np.float64, count=count)
    except (TypeError, ValueError):
        raise InputError(f"{what}: every value must be a number (fix the dict or the file it came from)") from None
    return _finite(arr, what)


def _finite(arr: np.ndarray, what: str, allow_nan: bool = False) -> np.ndarray:
    if not (~np.isinf(arr) if allow_nan else np.isfinite(arr)).all():
        raise InputError(f"{what}: NaN or inf values (give finite numbers)")
    return arr


def ranked_docids(scores: Mapping[str, float]) -> list[str]:
    """One query's docids in trec_eval order: score as a 32-bit float descending, then docid
    descending (``udcg.io.trec.format_run`` writes runs in the same order; a test checks they agree)."""
    return sorted(scores, key=lambda d: (float(np.float32(scores[d])), d), reverse=True)


def _walked(name: str, *args, total: int, what: str, allow_nan: bool = False) -> np.ndarray | None:
    """``_walk.<name>(*args, out)`` into a fresh buffer, or None when the C walk is not built or the
    input is not plain dicts of numbers (the Python walk then gives the same values, or the error)."""
    if _walk is None:
        return None
    out = np.empty(total, dtype=np.float64)
    try:
        getattr(_walk, name)(*args, out)
    except (TypeError, ValueError):
        return None
    return _finite(out, what, allow_nan)


def _all_values(rows: list[Mapping[str, float]], total: int, what: str) -> np.ndarray:
    """Every value of every row, concatenated in row and dict order."""
    arr = _walked("values", rows, total=total, what=what)
    return arr if arr is not None else _floats(chain.from_iterable(map(_values, rows)), total, what)


def _scatter(flat: np.ndarray, lengths: np.ndarray, fill: float, dtype: type) -> np.ndarray:
    """Rows of variable length, concatenated -> an (n, max length) matrix padded with ``fill``."""
    width = int(lengths.max()) if lengths.size else 0
    if lengths.size and (lengths == width).all():
        return flat.astype(dtype, copy=False).reshape(lengths.size, width)
    out = np.full((lengths.size, width), fill, dtype=dtype)
    out[np.arange(width)[None, :] < lengths[:, None]] = flat  # row-major = concatenation order
    return out


def _order(scores: np.ndarray, lengths: np.ndarray, rows: list[Mapping[str, float]]) -> np.ndarray:
    """Column order per query, trec_eval style. Vectorised by float32 score; queries with tied
    scores are re-sorted with the docid tie-break."""
    keys = _scatter(scores.astype(np.float32), lengths, -np.inf, np.float32)
    order = np.argsort(-keys, axis=1, kind="stable")
    sorted_keys = np.take_along_axis(keys, order, 1)
    valid = np.arange(keys.shape[1])[None, 1:] < lengths[:, None]
    tied = np.flatnonzero(((sorted_keys[:, 1:] == sorted_keys[:, :-1]) & valid).any(1))
    for i in tied:
        position = {d: j for j, d in enumerate(rows[i])}
        order[i, : lengths[i]] = [position[d] for d in ranked_docids(rows[i])]
    return order


def _lookup(maps: list[Mapping[str, float]], rows: list[Mapping[str, float]], total: int, what: str,
            default: float = 0.0) -> np.ndarray:
    """For each query, the value of each run document in ``maps`` (``default`` if absent), concatenated."""
    nan = math.isnan(default)
    arr = _walked("lookup", maps, rows, default, total=total, what=what, allow_nan=nan)
    if arr is not None:
        return arr
    fill = repeat(default)
    try:
        arr = np.fromiter(chain.from_iterable(map(m.get, r, fill) for m, r in zip(maps, rows)), np.float64, count=total)
    except (TypeError, ValueError):
        raise InputError(f"{what}: every value must be a number (fix the dict or the file it came from)") from None
    return _finite(arr, what, nan)


def _ranked(flat: np.ndarray, lengths: np.ndarray, order: np.ndarray, depth: int | None = None,
            fill: float = 0.0) -> np.ndarray:
    """The values in rank order; only the first ``depth`` ranks when given."""
    return np.take_along_axis(_scatter(flat, lengths, fill, np.float64), order if depth is None else order[:, :depth], 1)


def gain_table(run: Mapping[str, Mapping[str, float]], qrels: Mapping[str, Mapping[str, float]],
               extra: Mapping[str, Mapping[str, Mapping[str, float]]] | None = None, *,
               extra_default: float = 0.0, extra_depth: int | None = None) -> GainTable:
    """Turn ``{qid: {docid: score}}`` and ``{qid: {docid: rel}}`` into a GainTable over the qrels
    queries (see the module doc for the policy on missing queries). ``extra`` maps a name to
    another ``{qid: {docid: value}}`` to put in rank order (looked up in the same pass).

    The cyclic garbage collector is paused while the dicts are walked: the walk allocates only
    short-lived, acyclic objects, and a collection pass would otherwise traverse every dict of the
    input again and again (about a tenth of the time on 100,000 queries)."""
    was_enabled = gc.isenabled()
    gc.disable()
    try:
        return _gain_table(run, qrels, extra, extra_default, extra_depth)
    finally:
        if was_enabled:
            gc.enable()


def _gain_table(run, qrels, extra, extra_default: float = 0.0, extra_depth: int | None = None) -> GainTable:
    qids = tuple(qrels)
    rows = list(map(run.get, qids, repeat(_EMPTY)))
    judged = list(map(qrels.__getitem__, qids))
    unjudged = len(run) - (len(rows) - sum(map(operator.is_, rows, repeat(_EMPTY))))
    if unjudged:
        log.info("%d run queries have no qrels and are not scored (ir_measures/trec_eval policy)", unjudged)
    lengths = np.fromiter(map(len, rows), np.int64, len(qids))
    total = int(lengths.sum())
    scores = _all_values(rows, total, "run scores")
    order = _order(scores, lengths, rows)
    gains = _ranked(_lookup(judged, rows, total, "qrels relevance"), lengths, order)
    more = {name: _ranked(_lookup(list(map(values.get, qids, repeat(_EMPTY))), rows, total, name, extra_default),
                          lengths, order, extra_depth, extra_default)
            for name, values in (extra or {}).items()}
    q_lengths = np.fromiter(map(len, judged), np.int64, len(qids))
    all_judged = _all_values(judged, int(q_lengths.sum()), "qrels relevance")
    ideal = np.sort(_scatter(all_judged, q_lengths, 0.0, np.float64), axis=1)[:, ::-1]
    return GainTable(qids, gains, ideal, more, q_lengths, lengths)


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
