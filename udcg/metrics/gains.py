"""The run and qrels as matrices (``GainTable``): ``{qid: {docid: score}}`` and ``{qid: {docid: rel}}``
dicts walked once into rank-ordered gain matrices, for ``udcg.metrics.evaluate``.

Ranking follows trec_eval: score as a 32-bit float descending, then docid descending. Queries are
those of the qrels, in qrels order; a qrels query missing from the run is an empty ranking, and a
run query without qrels is skipped (logged). The walk over the dicts runs in C when the optional
extension ``udcg.metrics._walk`` is built (``_walk.c``), else in Python, with the same values.

``row_table`` builds the same table from rows (query index, score, relevance per line of a run
file), the kernel of the columnar path (``udcg.flows.run_tables``); ``ranked_rows`` is its
ranking: one stable sort of a (query, float32 score) key, then docid order among ties only.
"""

from __future__ import annotations

import contextlib
import gc
import logging
import math
import operator
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
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


NO_TIE = np.iinfo(np.int64).max  # first_tie of a query without tied scores


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
    tied_queries: int = 0  # queries with two equal (float32) scores, ordered by docid among them
    first_tie: np.ndarray | None = None  # per query, the 0-based rank of its first tied pair (NO_TIE: none)

    def ties_within(self, k: int | None) -> int:
        """Queries whose tied scores reach into the top ``k`` (None: anywhere in the ranking), where
        the tie-break decides the order or the membership of the top k."""
        if self.first_tie is None:
            return self.tied_queries
        return int(np.count_nonzero(self.first_tie < (NO_TIE if k is None else k)))

    def n_rel(self, rel_level: float) -> np.ndarray:
        return (self.ideal >= rel_level).sum(1)


def _floats(values, count: int, what: str) -> np.ndarray:
    try:
        arr = np.fromiter(values, dtype=np.float64, count=count)
    except (TypeError, ValueError):
        raise InputError(f"{what}: every value must be a number (fix the dict or the file it came from)") from None
    except OverflowError:  # an integer beyond a float's range (10**400)
        raise InputError(f"{what}: a value is an integer too large for a float (give finite numbers)") from None
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
    input is not plain dicts of numbers (the Python walk then gives the same values, or the error).
    A helper built from an older ``_walk.c`` (without ``name``) counts as not built."""
    walk = getattr(_walk, name, None)
    if walk is None:
        return None
    out = np.empty(total, dtype=np.float64)
    try:
        walk(*args, out)
    except (TypeError, ValueError, OverflowError):
        return None
    return _finite(out, what, allow_nan)


def all_str_keys(tables: Iterable[Mapping]) -> bool | None:
    """Whether every key of every table is a str (a subclass included), read by the C walk without
    a Python step per key; None when the walk is not built or a table is not a dict (the caller
    then checks the keys itself)."""
    walk = getattr(_walk, "str_keys", None)
    if walk is None:
        return None
    try:
        return walk(tables)
    except TypeError:
        return None


def plain_numbers(maps: Sequence[Mapping[str, float]], what: str) -> np.ndarray | None:
    """Every value of every map concatenated (``flat_values``' order) when each is an int or a float
    (their subclasses; not a bool), else None (the caller walks the values to name the odd one).
    The types are checked as the values are read (C walk); without it, at C speed by
    ``set(map(type))`` first. NaN or inf: ``InputError``, as ``flat_values``."""
    maps = list(maps)
    total = int(np.fromiter(map(len, maps), np.int64, len(maps)).sum())
    arr = _walked("numbers", maps, total=total, what=what)
    if arr is not None:
        return arr
    kinds = set(map(type, chain.from_iterable(map(_values, maps))))
    if all(kind is not bool and issubclass(kind, (int, float)) for kind in kinds):
        return _all_values(maps, total, what)  # flat_values' reader, the total already counted
    return None


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


def _order(scores: np.ndarray, lengths: np.ndarray, rows: list[Mapping[str, float]]) -> tuple[np.ndarray, np.ndarray]:
    """Column order per query, trec_eval style, and each query's first tied rank (``NO_TIE``). Vectorised
    by float32 score; queries with tied scores are re-sorted with the docid tie-break."""
    keys = _scatter(scores.astype(np.float32), lengths, -np.inf, np.float32)
    order = np.argsort(-keys, axis=1, kind="stable")
    sorted_keys = np.take_along_axis(keys, order, 1)
    valid = np.arange(keys.shape[1])[None, 1:] < lengths[:, None]
    ties = (sorted_keys[:, 1:] == sorted_keys[:, :-1]) & valid
    tied = np.flatnonzero(ties.any(1))
    for i in tied:
        position = {d: j for j, d in enumerate(rows[i])}
        order[i, : lengths[i]] = [position[d] for d in ranked_docids(rows[i])]
    first = np.full(len(lengths), NO_TIE, dtype=np.int64)
    if tied.size:
        first[tied] = ties[tied].argmax(1)
    return order, first


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
    except OverflowError:  # an integer beyond a float's range (10**400)
        raise InputError(f"{what}: a value is an integer too large for a float (give finite numbers)") from None
    return _finite(arr, what, nan)


def _ranked(flat: np.ndarray, lengths: np.ndarray, order: np.ndarray, depth: int | None = None,
            fill: float = 0.0) -> np.ndarray:
    """The values in rank order; only the first ``depth`` ranks when given."""
    return np.take_along_axis(_scatter(flat, lengths, fill, np.float64), order if depth is None else order[:, :depth], 1)


def gain_table(run: Mapping[str, Mapping[str, float]], qrels: Mapping[str, Mapping[str, float]],
               extra: Mapping[str, Mapping[str, Mapping[str, float]]] | None = None, *,
               extra_default: float = 0.0, extra_depth: int | None = None, judged: bool = False) -> GainTable:
    """Turn ``{qid: {docid: score}}`` and ``{qid: {docid: rel}}`` into a GainTable over the qrels
    queries (see the module doc for the policy on missing queries). ``extra`` maps a name to
    another ``{qid: {docid: value}}`` to put in rank order (looked up in the same pass). With
    ``judged``, ``extra["qrel"]``: the qrels grade in rank order, NaN where the qrels hold no entry
    (the first ``extra_depth`` ranks; from the gains' own lookup, at no extra cost).

    The dicts are walked with the cyclic garbage collector paused (``_gc_paused``): the walk
    allocates only short-lived, acyclic objects, and a collection pass would otherwise traverse
    every dict of the input again and again (about a tenth of the time on 100,000 queries)."""
    with _gc_paused():
        return _gain_table(run, qrels, extra, extra_default, extra_depth, judged)


@contextlib.contextmanager
def _gc_paused() -> Iterator[None]:
    """The cyclic garbage collector off for the ``with`` block, then as it was on entry (enabled
    again only if it was enabled), also when the block raises. The collector is process-wide, so
    the pause lasts exactly one call: nothing of it is left after ``gain_table`` returns."""
    was_enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was_enabled:
            gc.enable()


def _gain_table(run, qrels, extra, extra_default: float = 0.0, extra_depth: int | None = None,
                judged_column: bool = False) -> GainTable:
    qids = tuple(qrels)
    rows = list(map(run.get, qids, repeat(_EMPTY)))
    judged = list(map(qrels.__getitem__, qids))
    unjudged = len(run) - (len(rows) - sum(map(operator.is_, rows, repeat(_EMPTY))))
    if unjudged:
        log.info("%d run queries have no qrels and are not scored (ir_measures/trec_eval policy)", unjudged)
    lengths = np.fromiter(map(len, rows), np.int64, len(qids))
    total = int(lengths.sum())
    scores = _all_values(rows, total, "run scores")
    order, first_tie = _order(scores, lengths, rows)
    grades = _lookup(judged, rows, total, "qrels relevance", math.nan if judged_column else 0.0)
    gains = _ranked(np.nan_to_num(grades, nan=0.0) if judged_column else grades, lengths, order)
    more = {name: _ranked(_lookup(list(map(values.get, qids, repeat(_EMPTY))), rows, total, name, extra_default),
                          lengths, order, extra_depth, extra_default)
            for name, values in (extra or {}).items()}
    if judged_column:  # a NaN grade in the qrels themselves is refused below (all_judged)
        more["qrel"] = _ranked(grades, lengths, order, extra_depth, math.nan)
    q_lengths = np.fromiter(map(len, judged), np.int64, len(qids))
    all_judged = _all_values(judged, int(q_lengths.sum()), "qrels relevance")
    ideal = np.sort(_scatter(all_judged, q_lengths, 0.0, np.float64), axis=1)[:, ::-1]
    return GainTable(qids, gains, ideal, more, q_lengths, lengths, int(np.count_nonzero(first_tie < NO_TIE)),
                     first_tie)


def flat_values(maps: Sequence[Mapping[str, float]], what: str) -> tuple[np.ndarray, np.ndarray]:
    """(number of values per map, every value concatenated in map and dict order), checked as the
    dict walk checks them (``what``: every value must be a finite number)."""
    lengths = np.fromiter(map(len, maps), np.int64, len(maps))
    return lengths, _all_values(list(maps), int(lengths.sum()), what)


@dataclass(frozen=True)
class RunRows:
    """A run as rows, ``row_table``'s input: row r ranks a document with ``scores[r]`` for query
    ``query[r]`` (an index into the table's qids; < 0: a run query without qrels, skipped), judged
    ``relevance[r]`` (0 if unjudged), with ``extra[name][r]``; a query's rows are in run order.
    ``docid_rank(rows)`` gives integers that order the given rows by docid descending, smallest
    first; it is asked only about rows whose float32 scores tie."""

    query: np.ndarray
    scores: np.ndarray
    relevance: np.ndarray
    docid_rank: Callable[[np.ndarray], np.ndarray]
    extra: Mapping[str, np.ndarray] | None = None


def row_table(qids: Sequence[str], rows: RunRows, judged_lengths: np.ndarray, judged_values: np.ndarray, *,
              extra_default: float = 0.0, extra_depth: int | None = None) -> GainTable:
    """The GainTable of a run given as rows (``RunRows``: the kernel under the columnar path;
    ``gain_table`` gives the same table from dicts), for the queries ``qids``.
    ``judged_lengths[i]`` / ``judged_values`` hold every judged value of query i (concatenated,
    query by query). An ``extra`` map absent for a ranked document is ``extra_default`` there; its
    matrix keeps the first ``extra_depth`` ranks (None: all)."""
    n = len(qids)
    query = np.asarray(rows.query)
    ranked, first_tie = _ranked_rows(query, _finite(np.asarray(rows.scores, dtype=np.float64), "run scores"), n,
                                     rows.docid_rank)
    lengths = np.bincount(query[ranked], minlength=n).astype(np.int64)
    gains = _scatter(np.asarray(rows.relevance, dtype=np.float64)[ranked], lengths, 0.0, np.float64)
    more = {name: np.ascontiguousarray(_scatter(np.asarray(values, dtype=np.float64)[ranked], lengths, extra_default,
                                                np.float64)[:, :extra_depth])
            for name, values in (rows.extra or {}).items()}
    ideal = np.sort(_scatter(judged_values, judged_lengths, 0.0, np.float64), axis=1)[:, ::-1]
    return GainTable(tuple(qids), gains, ideal, more, np.asarray(judged_lengths, dtype=np.int64), lengths,
                     int(np.count_nonzero(first_tie < NO_TIE)), first_tie)


def ranked_rows(query: np.ndarray, scores: np.ndarray, n: int, docid_rank: Callable[[np.ndarray], np.ndarray]) -> np.ndarray:
    """The rows with ``query >= 0`` (all ``< n``), query by query (0 first), each query in trec_eval
    order: float32 score descending, then ``docid_rank`` ascending. One stable sort of a 64-bit key
    (query, score), in linear time when the run is written query by query, best first; then the
    rows of equal keys (ties) are re-ordered by docid."""
    return _ranked_rows(query, scores, n, docid_rank)[0]


def _ranked_rows(query: np.ndarray, scores: np.ndarray, n: int,
                 docid_rank: Callable[[np.ndarray], np.ndarray]) -> tuple[np.ndarray, np.ndarray]:
    """``ranked_rows``, and each query's first tied rank (``NO_TIE``: none)."""
    kept = query >= 0
    rows = None if kept.all() else np.flatnonzero(kept)  # None: every row
    del kept
    q = query if rows is None else query[rows]
    if q.size and (q[1:] < q[:-1]).any():  # queries interleaved, or not in qids order: group them first
        by_query = np.argsort(q.astype(np.uint16) if n <= 1 << 16 else q, kind="stable")
        rows = by_query if rows is None else rows[by_query]
        q = query[rows]
    with np.errstate(over="ignore"):  # a score beyond float32 is +-inf to trec_eval too
        bits = (scores if rows is None else scores[rows]).astype(np.float32)
    bits += np.float32(0.0)  # -0.0 ties 0.0
    bits = bits.view(np.uint32)
    flip = bits >> np.uint32(31)  # larger float, smaller key: flip the magnitude of non-negative floats
    flip -= np.uint32(1)
    flip &= np.uint32(0x7FFFFFFF)
    bits ^= flip
    del flip
    key = q.astype(np.uint64)
    key <<= np.uint64(32)
    np.bitwise_or(key, bits, out=key)
    del bits, q
    order = np.argsort(key, kind="stable")
    rows = order if rows is None else rows[order]
    key = key[order]
    del order
    pairs = np.flatnonzero(key[1:] == key[:-1])  # rows p and p + 1 tie
    first_tie = np.full(n, NO_TIE, dtype=np.int64)
    if pairs.size:
        of_pair = (key[pairs] >> np.uint64(32)).astype(np.int64)
        start = np.searchsorted(key >> np.uint64(32), of_pair.astype(np.uint64), side="left")
        np.minimum.at(first_tie, of_pair, pairs - start)
    del key
    if pairs.size:
        tied = np.union1d(pairs, pairs + 1)
        segment = np.cumsum(~np.isin(tied - 1, pairs))  # a run of equal keys
        by_docid = np.lexsort((np.asarray(docid_rank(rows[tied])), segment))
        rows[tied] = rows[tied[by_docid]]
    return rows, first_tie
