"""TREC run and qrels files, read into plain dicts (the layout pytrec_eval and ir_measures take).

- Run: ``qid Q0 docid rank score tag`` — six whitespace-separated fields. Like trec_eval, the second
  field and the rank are ignored: the order comes from the score. ``read_run`` returns
  ``{qid: {docid: score}}``; ``ranked_docids`` orders one query the way trec_eval does.
- Qrels: ``qid iter docid rel`` — four fields; ``rel`` may be graded, negative or a float
  (trec_eval truncates a float rel to an integer; we keep it). Returns ``{qid: {docid: rel}}``.
  BEIR's ``qrels/*.tsv`` are read too: ``query-id corpus-id score``, three fields, with or without
  a header line (a header is recognised only on line 1, when its third field is not a number).
  One file holds one layout: a line with 3 fields in a 4-field file (or back) is an error.

Ordering rule (trec_eval 9.x, ``form_res_rels.c``): score descending, ties broken by docid
descending (byte order, ``strcmp``). trec_eval stores scores as C ``float``, so two scores that are
equal once rounded to 32 bits tie; we round the same way (checked against pytrec_eval).

A (qid, docid) pair appearing twice is an error in both files (trec_eval refuses duplicate docs).
"""

from __future__ import annotations

import math
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import NamedTuple

import numpy as np

from udcg.errors import InputError
from udcg.io.files import atomic_write_text, read_text

Run = dict[str, dict[str, float]]
MAX_GRADE = 1000.0  # |relevance| in qrels: gains 2**rel - 1 of nDCG(dcg='exp-log2') stay finite
Qrels = dict[str, dict[str, float]]


def _number(raw: str, where: str, field: str, fix: str) -> float:
    try:
        value = float(raw)
    except ValueError:
        raise InputError(f"{where}: field {field!r} = {raw!r} is not a number ({fix})") from None
    if not math.isfinite(value):
        raise InputError(f"{where}: field {field!r} = {raw!r} is not finite ({fix})")
    return value


class _Layout(NamedTuple):
    columns: str  # the field names, space-separated
    docid: int  # column of the docid (counted from 0; the qid is always column 0)
    value: int  # column of the score / relevance
    fix: str  # what the value column must hold
    header: bool = False  # line 1 may be a header (its value field is not a number)


_RUN = _Layout("qid Q0 docid rank score tag", 2, 4, "the 5th field must be the retrieval score")
_TREC_QRELS = _Layout("qid 0 docid relevance", 2, 3, "the 4th field must be the graded relevance, e.g. 0, 1, 2")
_BEIR_QRELS = _Layout("query-id corpus-id score", 1, 2, "the 3rd field must be the graded relevance, e.g. 0, 1, 2",
                      header=True)


def _is_number(raw: str) -> bool:
    try:
        float(raw)
    except ValueError:
        return False
    return True


def _rows(path: Path, layouts: tuple[_Layout, ...]) -> Iterator[tuple[str, list[str], _Layout]]:
    """(where, fields, layout) per non-blank line. The first line picks the layout by its number of
    fields; every later line must have as many."""
    by_width = {len(lay.columns.split()): lay for lay in layouts}
    layout, first = None, 0
    text = read_text(path)  # a byte-order mark at the start is dropped there
    inner = text.find("\ufeff")
    if inner >= 0:  # inside the file (files joined, each with its BOM): it would become part of an id
        raise InputError(f"{path}:{text.count(chr(10), 0, inner) + 1}: a byte-order mark (U+FEFF) inside the file, "
                         "which would become part of an id (files joined with a BOM each? remove it)")
    for line_no, line in enumerate(text.splitlines(), start=1):
        cols = line.split()
        if not cols:
            continue
        if layout is None:
            if len(cols) not in by_width:
                expected = " or ".join(f"{n} ({lay.columns})" for n, lay in by_width.items())
                raise InputError(f"{path}:{line_no}: {len(cols)} fields, expected {expected}, "
                                 "separated by spaces or tabs")
            layout, first = by_width[len(cols)], line_no
            if line_no == 1 and layout.header and not _is_number(cols[layout.value]):
                continue  # a header line such as BEIR's "query-id corpus-id score"
        elif len(cols) != len(layout.columns.split()):
            if len(cols) in by_width:
                raise InputError(f"{path}:{line_no}: {len(cols)} fields ({by_width[len(cols)].columns}), but "
                                 f"line {first} has {len(layout.columns.split())} ({layout.columns}); one file holds "
                                 "one layout (convert every line to the same one)")
            raise InputError(f"{path}:{line_no}: {len(cols)} fields, expected {len(layout.columns.split())} "
                             f"({layout.columns}, separated by spaces or tabs)")
        yield f"{path}:{line_no}", cols, layout


def _read_table(path: str | Path, kind: str, layouts: tuple[_Layout, ...], twice: str,
                limit: float | None = None) -> dict[str, dict[str, float]]:
    """``{qid: {docid: value}}`` from a whitespace-separated TREC/BEIR file in one of ``layouts``
    (qid first; docid and value where the layout says); a docid twice for a query is an error."""
    path = Path(path)
    table: dict[str, dict[str, float]] = {}
    first_seen: dict[tuple[str, str], str] = {}
    for where, cols, layout in _rows(path, layouts):
        qid, docid = cols[0], cols[layout.docid]
        value = _number(cols[layout.value], where, layout.columns.split()[layout.value], layout.fix)
        if limit is not None and abs(value) > limit:  # 2**rel (nDCG exp-log2) and sums of gains would overflow to inf/NaN
            raise InputError(f"{where}: field {layout.columns.split()[layout.value]!r} = {cols[layout.value]} is beyond "
                             f"+-{limit:g} ({layout.fix})")
        docs = table.setdefault(qid, {})
        if docid in docs:
            raise InputError(f"{where}: docid {docid!r} {twice} for query {qid!r} (first at "
                             f"{first_seen[qid, docid]}; keep one line per document)")
        docs[docid] = value
        first_seen[qid, docid] = where
    if not table:
        expected = " or ".join(f"'{lay.columns}'" for lay in layouts)
        raise InputError(f"{path}: no {kind} lines (expected {expected})")
    return table


def read_run(path: str | Path) -> Run:
    """Read a TREC run file into ``{qid: {docid: score}}`` (file order kept within a query)."""
    return _read_table(path, "run", (_RUN,), "appears twice")


def read_qrels(path: str | Path) -> Qrels:
    """Read TREC qrels (``qid 0 docid rel``) or BEIR qrels (``query-id corpus-id score``, header
    optional) into ``{qid: {docid: rel}}``; ``irds:NAME``: the qrels of that ir_datasets dataset."""
    from udcg.io import irds

    if irds.is_irds(path):
        return irds.dataset_qrels(path)
    return _read_table(path, "qrels", (_TREC_QRELS, _BEIR_QRELS), "is judged twice", limit=MAX_GRADE)


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
            raise InputError(f"query {qid!r}: id {name!r} is empty or has whitespace (TREC ids are single words: replace the whitespace, e.g. with '_', in every file alike)")


def format_qrels(qrels: Mapping[str, Mapping[str, float]]) -> str:
    def rel_text(v: float) -> str:
        return str(int(v)) if float(v).is_integer() else repr(float(v))
    for qid, docs in qrels.items():
        _check_ids(qid, docs)
    return "".join(f"{qid} 0 {docid} {rel_text(rel)}\n" for qid, docs in qrels.items() for docid, rel in docs.items())


def write_qrels(path: str | Path, qrels: Mapping[str, Mapping[str, float]]) -> None:
    atomic_write_text(path, format_qrels(qrels))
