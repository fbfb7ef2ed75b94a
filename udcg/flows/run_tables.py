"""A run read as columns (``udcg.io.trec_columns.RunColumns``) -> ``GainTable``, the same table
``udcg.metrics.evaluate.run_table`` builds from dicts, with the string work done by pyarrow:

- run qid -> query index: through the run's few distinct qids;
- (qid, docid) -> qrels relevance and -> utility (NaN when absent): ``pyarrow.compute.index_in``
  of every docid among the judged ones, then integer keys (query, judged docid) and
  ``np.searchsorted``;
- the docid tie-break: ranks (docid descending) computed only for the rows whose float32 scores tie.

The numbers (ranking, gain and ideal matrices) are ``udcg.metrics.gains.row_table``.
"""

from __future__ import annotations

import logging
import math
from collections.abc import Iterable, Mapping
from typing import Any

import numpy as np

from udcg.errors import InputError
from udcg.io.trec_columns import RunColumns
from udcg.metrics.gains import GainTable, RunRows, flat_values, row_table

log = logging.getLogger(__name__)
Table = Mapping[str, Mapping[str, Any]]


def columns_table(columns: RunColumns, qrels: Table | None, utilities: Table | None = None,
                  depth: int | None = None, *, judged: bool = False, pairs: Table | None = None) -> GainTable:
    """``run_table(run, qrels, utilities, depth, judged=, pairs=)`` for a run given as columns:
    queries of the qrels (in qrels order; without qrels, the run's own), ``extra["utility"]`` in
    rank order (NaN = no utility; the first ``depth`` ranks) when ``utilities`` are given, and
    ``extra["qrel"]`` / ``extra["pair"]`` as ``run_table`` makes them."""
    queries = qrels if qrels is not None else {qid: {} for qid in columns.qids}
    qids = tuple(queries)
    index = {qid: i for i, qid in enumerate(qids)}
    to_table = np.fromiter((index.get(qid, -1) for qid in columns.qids), np.int32, len(columns.qids))
    query = to_table[columns.query] if len(columns) else np.zeros(0, np.int32)
    unjudged = int((to_table < 0).sum())
    if unjudged:
        log.info("%d run queries have no qrels and are not scored (ir_measures/trec_eval policy)", unjudged)
    judgements = [queries[qid] for qid in qids]
    judged_lengths, judged_values = flat_values(judgements, "qrels relevance")
    entry = _entries(columns, query, judgements, judged_lengths)
    relevance = np.zeros(len(columns))
    judged_rows = np.flatnonzero(entry >= 0)
    relevance[judged_rows] = judged_values[entry[judged_rows]]
    extra = {}
    if utilities is not None:
        extra["utility"] = _utility_column(columns, query, qids, utilities)
    if judged:
        extra["qrel"] = np.full(len(columns), math.nan)
        extra["qrel"][judged_rows] = relevance[judged_rows]
    if pairs is not None:
        extra["pair"] = _utility_column(columns, query, qids, pairs)
    extra = extra or None
    rows = RunRows(query, columns.scores, relevance, _docid_rank(columns), extra)
    return row_table(qids, rows, judged_lengths, judged_values, extra_default=float("nan"), extra_depth=depth)


def run_queries(run: RunColumns | Mapping[str, Any]) -> Iterable[str]:
    """The qids of a run, dict or columns, in order of first appearance."""
    return run.qids if isinstance(run, RunColumns) else run


def _entries(columns: RunColumns, query: np.ndarray, maps: list[Mapping[str, Any]], lengths: np.ndarray) -> np.ndarray:
    """Per row r, the position of ``docids[r]`` among the keys of ``maps[query[r]]``, counted over
    all maps concatenated in order (-1: not there)."""
    import pyarrow as pa
    import pyarrow.compute as pc

    out = np.full(len(columns), -1, dtype=np.int32 if lengths.sum() < 1 << 31 else np.int64)
    if not lengths.sum() or not len(columns):
        return out
    # a key that is not a string never matches a run's docid (as on the dict path); "" is no docid
    encoded = pc.dictionary_encode(pa.array([d if isinstance(d, str) else "" for m in maps for d in m], pa.string()))
    n_docs = len(encoded.dictionary)
    keys = np.repeat(np.arange(len(maps), dtype=np.int64), lengths) * n_docs + encoded.indices.to_numpy()
    by_key = np.argsort(keys, kind="stable")
    keys = keys[by_key]
    doc = pc.fill_null(pc.index_in(columns.docids, value_set=encoded.dictionary), -1).to_numpy()
    rows = np.flatnonzero((doc >= 0) & (query >= 0))
    row_keys = query[rows].astype(np.int64) * n_docs + doc[rows]
    at = np.minimum(np.searchsorted(keys, row_keys), len(keys) - 1)
    hit = keys[at] == row_keys
    out[rows[hit]] = by_key[at[hit]]
    return out


def _utility_column(columns: RunColumns, query: np.ndarray, qids: tuple[str, ...], utilities: Table) -> np.ndarray:
    """Per row, the utility of (qid, docid), NaN when there is none. A value looked up must be a
    number, NaN or finite (the dict path's check; values of documents outside the run are not read)."""
    maps = [utilities.get(qid, {}) for qid in qids]
    lengths = np.fromiter(map(len, maps), np.int64, len(maps))
    values = np.fromiter((_number(v) for m in maps for v in m.values()), np.float64, int(lengths.sum()))
    entry = _entries(columns, query, maps, lengths)
    found = np.flatnonzero(entry >= 0)
    if np.isnan(values[entry[found]]).any():
        bad = np.fromiter((_number(v, None) is None for m in maps for v in m.values()), bool, values.size)
        if bad[entry[found]].any():
            raise InputError("utility: every value must be a number (fix the dict or the file it came from)")
    out = np.full(len(columns), math.nan)
    out[found] = values[entry[found]]
    if np.isinf(out).any():
        raise InputError("utility: NaN or inf values (give finite numbers)")
    return out


def _number(value: Any, bad: float | None = math.nan) -> float | None:
    """The value as a float; ``bad`` for a value that is not a number (refused if looked up)."""
    try:
        return float(value)
    except (TypeError, ValueError):
        return bad


def _docid_rank(columns: RunColumns):
    """Integers ordering the given rows by docid descending (byte order, as ``str`` compares), smallest first."""
    import pyarrow as pa
    import pyarrow.compute as pc

    def rank(rows: np.ndarray) -> np.ndarray:
        docids = columns.docids.take(pa.array(rows, pa.int64())).combine_chunks()
        return pc.rank(docids, sort_keys="descending", tiebreaker="first").to_numpy()
    return rank
