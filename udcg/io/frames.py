"""Runs, qrels and utilities held as pandas DataFrames (PyTerrier's ``qid, docno, score`` /
``qid, docno, label``; ir_measures' ``query_id, doc_id, score`` / ``relevance``) or as ranx
``Run`` / ``Qrels`` objects, read into the ``{qid: {docid: value}}`` dicts every other input becomes.

Neither pandas nor ranx is imported here: an object is recognised by the module of its type, so a
plain dict never pays for them. A value that is not a finite number, an id that is missing (None,
NaN, pandas' NA, empty or blank: a TREC line cannot hold one) or a float (pandas stores an integer
column with a missing value as floats, and ``1.0`` would never match a qrels' ``1``), or a (qid,
docid) pair that appears twice, is an ``InputError`` naming the row, as in a TREC file.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

from udcg.bounds import kind, short
from udcg.errors import InputError

QID_COLUMNS = ("qid", "query_id")
DOC_COLUMNS = ("docno", "doc_id", "docid")
VALUE_COLUMNS = {"score": ("score",), "relevance": ("label", "relevance"), "utility": ("utility",)}


def _from(obj: Any, package: str) -> bool:
    return type(obj).__module__.split(".")[0] == package


def is_frame(obj: Any) -> bool:
    """A pandas DataFrame (without importing pandas)."""
    return _from(obj, "pandas") and hasattr(obj, "columns")


def is_ranx(obj: Any) -> bool:
    """A ranx ``Run`` or ``Qrels`` (without importing ranx)."""
    return _from(obj, "ranx") and hasattr(obj, "to_dict")


def _column(frame: Any, names: tuple[str, ...], what: str, role: str) -> str:
    for name in names:
        if name in frame.columns:
            return name
    have = ", ".join(map(str, frame.columns)) or "none"
    raise InputError(f"{what}: a DataFrame needs a {role} column named {' or '.join(names)} (its columns: {have})")


def _id_problem(x: Any) -> str:
    """Why ``x`` cannot be a query or document id ("" when it can)."""
    if x is None or type(x).__name__ in ("NAType", "NaTType"):
        return f"is {x!r} (every row needs one)"
    if isinstance(x, float):
        return ("is NaN (every row needs one)" if math.isnan(x) else
                f"is the float {x!r} (ids are text: give the column as strings or integers; pandas stores an "
                "integer column with a missing value as floats)")
    if type(x).__module__.split(".")[0] == "numpy" and getattr(x, "dtype", None) is not None and x.dtype.kind == "f":
        return _id_problem(float(x))
    if isinstance(x, str) and not x.strip():
        return f"is {'empty' if not x else 'blank'} (every row needs one)"
    return ""


def _check_ids(row: int, q: str, qid: Any, d: str, docid: Any, what: str) -> None:
    for column, x in ((q, qid), (d, docid)):
        if problem := _id_problem(x):
            raise InputError(f"{what}: row {row} ({q}={str(qid)[:80]!r}, {d}={str(docid)[:80]!r}): {column} {problem}")


def frame_to_dict(frame: Any, value: str, what: str) -> dict[str, dict[str, float]]:
    """``{qid: {docno: value}}`` of a DataFrame with a query, a document and a ``value`` column
    (``score``, ``relevance`` or ``utility``; see ``VALUE_COLUMNS``)."""
    q = _column(frame, QID_COLUMNS, what, "query id")
    d = _column(frame, DOC_COLUMNS, what, "document id")
    v = _column(frame, VALUE_COLUMNS[value], what, value)
    out: dict[str, dict[str, float]] = {}
    for row, (qid, docid, x) in enumerate(zip(frame[q].tolist(), frame[d].tolist(), frame[v].tolist())):
        try:
            number = float(x)
        except (TypeError, ValueError):
            number = math.nan
        if not (type(qid) is str and type(docid) is str and qid and docid and not qid.isspace() and not docid.isspace()):
            _check_ids(row, q, qid, d, docid, what)  # the usual text ids pass without a call
        if isinstance(x, bool) or not math.isfinite(number):
            raise InputError(f"{what}: row {row} ({q}={str(qid)[:80]!r}, {d}={str(docid)[:80]!r}): {v} = {str(x)[:40]!r} "
                             "is not a finite number")
        docs = out.setdefault(str(qid), {})
        if str(docid) in docs:
            raise InputError(f"{what}: row {row}: ({q}={str(qid)[:80]!r}, {d}={str(docid)[:80]!r}) appears twice "
                             "(one row per query and document)")
        docs[str(docid)] = number
    return out


def as_dict(obj: Any, value: str, what: str) -> Any:
    """A DataFrame or a ranx object as ``{qid: {docid: value}}``; anything else as it is."""
    if is_frame(obj):
        return frame_to_dict(obj, value, what)
    if is_ranx(obj):
        return {str(q): {str(d): float(x) for d, x in docs.items()} for q, docs in obj.to_dict().items()}
    return obj


def check_nested(table: Mapping, what: str, value: str) -> Mapping:
    """``table`` itself when every query maps to a ``{docid: value}`` dict (a list of docids has no
    values); else an ``InputError`` naming the first query that does not. The types are read at C
    speed; the loop runs only for a Mapping that is not a dict, or to name the wrong query."""
    if set(map(type, table.values())) <= {dict}:
        return table
    for qid, docs in table.items():
        if type(docs) is not dict and not isinstance(docs, Mapping):  # the exact type first: ABCs are slow
            raise InputError(f"{what}: query {short(qid)} maps to {kind(docs)}, not a {{docid: {value}}} dict "
                             "(e.g. {'q1': {'d1': 1.0}})")
    return table
