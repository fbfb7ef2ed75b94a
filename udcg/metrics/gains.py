"""The run and qrels as matrices (``GainTable``): ``{qid: {docid: score}}`` and ``{qid: {docid: rel}}``
dicts walked once into rank-ordered gain matrices, for ``udcg.metrics.evaluate``.

Ranking follows trec_eval: score as a 32-bit float descending, then docid descending. Queries are
those of the qrels, in qrels order; a qrels query missing from the run is an empty ranking, and a
run query without qrels is skipped (logged). The walk over the dicts runs in C when the optional
extension ``udcg.metrics._walk`` is built (``_walk.c``), else in Python, with the same values.
"""

from __future__ import annotations

import gc
import logging
import math
import operator
from collections.abc import Mapping
from dataclasses import dataclass, field
from itertools import chain, repeat

import numpy as np

from udcg.errors import InputError

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
