"""``irds:NAME``: a corpus, queries or qrels read from ir_datasets (the ``ir`` extra).

Documents come from the dataset's docstore by id (``docs_store().get_many``), so reading the
documents a command uses costs memory for those documents, not for the corpus (the docstore is
built on disk on first use, as ir_datasets does). Queries give the query text and, where the
dataset's query records have an ``answers`` field, the reference answers; qrels are the dataset's
``qrels_iter``. A dataset without the part a command needs is an ``InputError`` naming it.

A dataset of one's own (``ir_datasets.create_dataset(docs_tsv=..., queries_tsv=..., qrels_trec=...)``)
is named by registering it (``ir_datasets.registry.register("my/collection", dataset)``) in a module
named in ``$UDCG_IRDS_MODULES`` (comma-separated module names, imported before a name is looked up),
as ir_datasets' own plugins register theirs when imported.

ir_datasets' own log lines ("[INFO] Opening ... with direct file access", "[starting] building
docstore") are quieted while udcg reads from it (``quiet``: its logger at WARNING, restored after),
so that on bad input udcg's one-line error is the only line; its bars are drawn only where progress
is (``udcg.progress.library_bars``: not under --no-progress, nor off a terminal).
"""

from __future__ import annotations

import contextlib
import functools
import importlib
import io
import logging
import math
import os
import sys
import time
from collections.abc import Callable, Iterator, Set
from typing import Any, TypeVar

from udcg.errors import InputError
from udcg.extras import need
from udcg.progress import library_bars
from udcg.records import Passage, Question
from udcg.redact import env_secrets, redact

PREFIX = "irds:"
MODULES_ENV = "UDCG_IRDS_MODULES"


F = TypeVar("F", bound=Callable[..., Any])


@contextlib.contextmanager
def _quiet() -> Iterator[None]:
    """ir_datasets' logger at WARNING (and its bars hidden unless progress is drawn) for the block;
    both as they were after it."""
    try:
        from ir_datasets import log as irds_log
    except ImportError:  # not installed: ``dataset`` says so in one line
        yield
        return
    logger = irds_log.easy().logger()  # made (and set to INFO) by ir_datasets on first use: made now
    level = logger.level
    logger.setLevel(max(level, logging.WARNING))
    held = None if library_bars() else io.StringIO()
    try:
        with contextlib.nullcontext() if held is None else contextlib.redirect_stderr(held):
            yield
    finally:
        logger.setLevel(level)
        if held is not None:  # only the bars are dropped (lines redrawn with \r): any other line is shown
            kept = [line for line in held.getvalue().split("\n") if line.strip() and "\r" not in line]
            sys.stderr.write("".join(f"{line}\n" for line in kept))


def run_quietly(function: F) -> F:
    """``function`` run with ir_datasets quiet (``_quiet``)."""
    @functools.wraps(function)
    def quieted(*args: Any, **kwargs: Any) -> Any:
        with _quiet():
            return function(*args, **kwargs)
    return quieted  # type: ignore[return-value]


def is_irds(source: Any) -> bool:
    """True for a string ``irds:NAME``."""
    return isinstance(source, str) and source.startswith(PREFIX)


@run_quietly
def dataset(source: str) -> Any:
    """The ir_datasets dataset of ``irds:NAME``; an unknown name is an ``InputError``."""
    irds = need("ir_datasets", source)
    for module in filter(None, (m.strip() for m in os.environ.get(MODULES_ENV, "").split(","))):
        try:
            importlib.import_module(module)
        except ImportError as exc:
            raise InputError(redact(f"${MODULES_ENV}: cannot import {module!r} ({exc}); name importable modules that "
                                    "register ir_datasets datasets", env_secrets())) from None
        except (Exception, SystemExit) as exc:  # a module of the user's raising on import (a SyntaxError, sys.exit)
            raise InputError(redact(f"${MODULES_ENV}: the module {module!r} raised {type(exc).__name__} on import: {exc} "
                                    "(fix that module, or leave it out of the variable)", env_secrets())) from None
    name = source[len(PREFIX):]
    try:
        ds = irds.load(name)
    except KeyError:
        raise InputError(f"{source}: ir_datasets has no dataset {name!r} (a name as `ir_datasets list` prints it; a "
                         f"dataset of your own: register it in a module named in ${MODULES_ENV})") from None
    except Exception as exc:  # noqa: BLE001 (a registered dataset's own code)
        raise _faulty(source, "loading it", exc) from None
    if not all(callable(getattr(ds, f"has_{part}", None)) for part in ("docs", "queries", "qrels")):
        raise InputError(f"{source}: the name is registered to a {type(ds).__name__}, not an ir_datasets dataset "
                         f"(register ir_datasets.Dataset / create_dataset(...) objects in the module of ${MODULES_ENV})")
    return ds


def _faulty(source: str, doing: str, exc: BaseException) -> InputError:
    """The one-line error of a dataset whose own code (a module of the user's, its files) failed."""
    return InputError(redact(f"{source}: the ir_datasets dataset raised {type(exc).__name__} while {doing}: {exc} (check "
                             f"its files and the module that registers it, named in ${MODULES_ENV})", env_secrets()))


@contextlib.contextmanager
def _reading(source: str, doing: str) -> Iterator[None]:
    """A fault of the dataset's code or files inside the block as one ``InputError`` naming it."""
    try:
        yield
    except InputError:
        raise
    except Exception as exc:  # noqa: BLE001 (the dataset's code: ir_datasets' or a module of the user's)
        raise _faulty(source, doing, exc) from None


def _needs(ds: Any, source: str, part: str, fix: str) -> None:
    with _reading(source, f"telling whether it has {part}"):
        has = getattr(ds, f"has_{part}")()
    if not has:
        raise InputError(f"{source}: this ir_datasets dataset has no {part} ({fix})")


def _id(value: Any, source: str, what: str) -> str:
    """An id of the dataset's records as a string; None, an empty id or another type is refused."""
    if isinstance(value, bool) or not isinstance(value, (str, int)) or not str(value).strip():
        raise InputError(f"{source}: {what} is {value!r}, not a non-empty string (check the dataset's files and the "
                         f"module that registers it, named in ${MODULES_ENV})")
    return str(value)


def _text(record: Any, source: str = "", what: str = "") -> str:
    for name in ("text", "body"):
        value = getattr(record, name, None)
        if isinstance(value, str):
            return value
    value = record.default_text()
    if not isinstance(value, str):
        raise InputError(f"{source}: {what} has no text (its text is {value!r}; check the dataset's files and the module "
                         f"that registers it, named in ${MODULES_ENV})")
    return value


@run_quietly
def read_docs(source: str, docids: Set[str] | None) -> tuple[dict[str, Passage], int, float]:
    """The documents ``docids`` found in the docstore (all documents when None), the number looked
    up (or read) and the seconds it took."""
    ds = dataset(source)
    _needs(ds, source, "docs", "give a corpus of its own with --corpus")
    t0 = time.perf_counter()
    with _reading(source, "reading its documents"):
        if docids is None:
            found = {_id(doc.doc_id, source, "a document's doc_id"): doc for doc in ds.docs_iter()}
        else:
            found = ds.docs_store().get_many(sorted(docids))
        docs = {_id(d, source, "a document's doc_id"): Passage(docid=str(d), text=_text(doc, source, f"document {d!r}"),
                                                                title=str(getattr(doc, "title", "") or ""))
                for d, doc in found.items()}
    return docs, len(found) if docids is None else len(docids), time.perf_counter() - t0


@run_quietly
def dataset_queries(source: str) -> dict[str, Question]:
    """``{qid: Question}`` of the dataset's queries (answers from an ``answers`` field where it has one)."""
    ds = dataset(source)
    _needs(ds, source, "queries", "give a queries file with --queries")
    out: dict[str, Question] = {}
    with _reading(source, "reading its queries"):
        for q in ds.queries_iter():
            answers = getattr(q, "answers", ())
            answers = (answers,) if isinstance(answers, str) else tuple(str(a) for a in answers or ())
            qid = _id(q.query_id, source, "a query's query_id")
            out[qid] = Question(qid=qid, text=_text(q, source, f"query {qid!r}"), answers=answers)
    if not out:
        raise InputError(f"{source}: the dataset has no queries (give a queries file with --queries)")
    return out


@run_quietly
def has_answers(source: str) -> bool:
    """True when the dataset's query records carry reference answers (an ``answers`` field)."""
    ds = dataset(source)
    with _reading(source, "reading its queries"):
        return bool(ds.has_queries()) and "answers" in getattr(ds.queries_cls(), "_fields", ())


@run_quietly
def dataset_qrels(source: str) -> dict[str, dict[str, float]]:
    """``{qid: {docid: relevance}}`` of the dataset's qrels."""
    ds = dataset(source)
    _needs(ds, source, "qrels", "give a qrels file with --qrels")
    out: dict[str, dict[str, float]] = {}
    with _reading(source, "reading its qrels"):
        for qrel in ds.qrels_iter():
            qid, docid = _id(qrel.query_id, source, "a qrel's query_id"), _id(qrel.doc_id, source, "a qrel's doc_id")
            docs = out.setdefault(qid, {})
            if docid in docs:
                raise InputError(f"{source}: ({qrel.query_id!r}, {qrel.doc_id!r}) is judged twice in the dataset's qrels")
            rel = qrel.relevance
            if not isinstance(rel, (int, float)) or isinstance(rel, bool) or not math.isfinite(rel):
                raise InputError(f"{source}: the qrel ({qid!r}, {docid!r}) has relevance {rel!r}, not a finite number "
                                 "(check the dataset's qrels file)")
            docs[docid] = float(rel)
    return out


@run_quietly
def dataset_questions(source: str, limit: int | None = None) -> list[Question]:
    """Questions with passages, as the paper's validation reads a QA data set: each query of the
    qrels (in the queries' order, the first ``limit``), its reference answers, and its judged
    documents from the docstore (relevant: relevance > 0). The validation judges answers, so a
    dataset whose queries carry no ``answers`` field is an ``InputError`` saying so."""
    if not has_answers(source):
        raise InputError(f"{source}: the dataset's queries have no reference answers (no 'answers' field), which the "
                         "validation needs to judge the reader's answers; use a dataset whose queries have answers")
    queries, judged = dataset_queries(source), dataset_qrels(source)
    chosen = [q for q in queries if q in judged][:limit]
    docs, _, _ = read_docs(source, {d for q in chosen for d in judged[q]})
    return [Question(qid=q, text=queries[q].text, answers=queries[q].answers,
                     passages=tuple(Passage(docid=d, text=docs[d].text, title=docs[d].title, relevant=rel > 0)
                                    for d, rel in judged[q].items() if d in docs))
            for q in chosen]
