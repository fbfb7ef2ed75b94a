"""TREC run and qrels files, read into plain dicts (the layout pytrec_eval and ir_measures take).

- Run: ``qid Q0 docid rank score tag`` — six whitespace-separated fields. Like trec_eval, the second
  field and the rank are ignored: the order comes from the score. ``read_run`` returns
  ``{qid: {docid: score}}``; ``ranked_docids`` orders one query the way trec_eval does.
- Qrels: ``qid iter docid rel`` — four fields; ``rel`` may be graded, negative or a float
  (trec_eval truncates a float rel to an integer; we keep it). Returns ``{qid: {docid: rel}}``.

Ordering rule (trec_eval 9.x, ``form_res_rels.c``): score descending, ties broken by docid
descending (byte order, ``strcmp``). trec_eval stores scores as C ``float``, so two scores that are
equal once rounded to 32 bits tie; we round the same way (checked against pytrec_eval).

A (qid, docid) pair appearing twice is an error in both files (trec_eval refuses duplicate docs).
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from pathlib import Path

import numpy as np

from udcg.errors import InputError
from udcg.io import atomic_write_text, read_text

Run = dict[str, dict[str, float]]
Qrels = dict[str, dict[str, float]]


def _number(raw: str, where: str, field: str, fix: str) -> float:
    try:
        value = float(raw)
    except ValueError:
        raise InputError(f"{where}: field {field!r} = {raw!r} is not a number ({fix})") from None
    if not math.isfinite(value):
        raise InputError(f"{where}: field {field!r} = {raw!r} is not finite ({fix})")
    return value


def _rows(path: Path, n_fields: int, layout: str):
    for line_no, line in enumerate(read_text(path).splitlines(), start=1):
        fields = line.split()
        if not fields:
            continue
        if len(fields) != n_fields:
            raise InputError(f"{path}:{line_no}: {len(fields)} fields, expected {n_fields} "
                             f"({layout}, separated by spaces or tabs)")
        yield f"{path}:{line_no}", fields


def _read_table(path: str | Path, kind: str, layout: str, field: int, fix: str, twice: str) -> dict[str, dict[str, float]]:
    """``{qid: {docid: value}}`` from a whitespace-separated TREC file with the given ``layout``
    (qid first, docid third, the value in column ``field``, counted from 0); a docid twice for a
    query is an error."""
    path = Path(path)
    names = layout.split()
    table: dict[str, dict[str, float]] = {}
    first_seen: dict[tuple[str, str], str] = {}
    for where, cols in _rows(path, len(names), layout):
        qid, docid = cols[0], cols[2]
        value = _number(cols[field], where, names[field], fix)
        docs = table.setdefault(qid, {})
        if docid in docs:
            raise InputError(f"{where}: docid {docid!r} {twice} for query {qid!r} (first at "
                             f"{first_seen[qid, docid]}; keep one line per document)")
        docs[docid] = value
        first_seen[qid, docid] = where
    if not table:
        raise InputError(f"{path}: no {kind} lines (expected '{layout}')")
    return table


def read_run(path: str | Path) -> Run:
    """Read a TREC run file into ``{qid: {docid: score}}`` (file order kept within a query)."""
    return _read_table(path, "run", "qid Q0 docid rank score tag", 4, "the 5th field must be the retrieval score",
                       "appears twice")


def read_qrels(path: str | Path) -> Qrels:
    """Read a TREC qrels file into ``{qid: {docid: rel}}``."""
    return _read_table(path, "qrels", "qid 0 docid relevance", 3, "the 4th field must be the graded relevance, e.g. 0, 1, 2",
                       "is judged twice")


def trec_score(score: float) -> float:
    """The score as trec_eval compares it (rounded to a 32-bit float)."""
    return float(np.float32(score))


def ranked_docids(scores: Mapping[str, float]) -> list[str]:
    """One query's docids in trec_eval order: float32 score descending, then docid descending."""
    return sorted(scores, key=lambda d: (trec_score(scores[d]), d), reverse=True)


def _format_score(value: float) -> str:
    return repr(float(value))


def format_run(run: Mapping[str, Mapping[str, float]], tag: str = "udcg") -> str:
    """TREC run text, each query in trec_eval order with ranks 1..n."""
    if not tag or any(ch.isspace() for ch in tag):
        raise InputError(f"run tag {tag!r}: must be one word without spaces")
    lines = []
    for qid, scores in run.items():
        _check_ids(qid, scores)
        for rank, docid in enumerate(ranked_docids(scores), start=1):
            lines.append(f"{qid} Q0 {docid} {rank} {_format_score(scores[docid])} {tag}\n")
    return "".join(lines)


def write_run(path: str | Path, run: Mapping[str, Mapping[str, float]], tag: str = "udcg") -> None:
    atomic_write_text(path, format_run(run, tag))


def _check_ids(qid: str, docs: Mapping[str, float]) -> None:
    for name in (qid, *docs):
        if not name or any(ch.isspace() for ch in name):
            raise InputError(f"query {qid!r}: id {name!r} is empty or has whitespace (TREC ids are single words)")


def format_qrels(qrels: Mapping[str, Mapping[str, float]]) -> str:
    def rel_text(v: float) -> str:
        return str(int(v)) if float(v).is_integer() else repr(float(v))
    for qid, docs in qrels.items():
        _check_ids(qid, docs)
    return "".join(f"{qid} 0 {docid} {rel_text(rel)}\n" for qid, docs in qrels.items() for docid, rel in docs.items())


def write_qrels(path: str | Path, qrels: Mapping[str, Mapping[str, float]]) -> None:
    atomic_write_text(path, format_qrels(qrels))
