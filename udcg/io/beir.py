"""The user's retrieval collection: corpus, queries (with reference answers) and qrels.

``read_collection(corpus, queries=None, qrels=None, answers=None, split="test")`` takes ``corpus`` as

- a BEIR folder: ``corpus.jsonl``, ``queries.jsonl`` (each may be ``.jsonl.gz``) and
  ``qrels/<split>.tsv``; ``queries`` and ``qrels`` default to the folder's. A folder without a
  ``qrels/`` subfolder gives empty qrels; a ``qrels/`` without ``<split>.tsv`` is an error.
- a corpus file: JSONL (``.gz`` too) or a JSON list, read by udcg's own parser so a bad record is
  reported as ``file:line``; or a Parquet file (read with ``pyarrow``);
- a folder written by ``datasets``' ``save_to_disk`` (a ``DatasetDict`` gives its ``corpus`` split,
  or its only split; its ``queries`` split, if any, is the default queries);
- ``hf:NAME[:CONFIG]``: a data set on the Hugging Face hub (see ``udcg.io.hf``).

Corpus records: an id (``_id`` as in BEIR, or ``id``/``docid``/``doc_id``), ``text``, optional
``title``. Query records: an id (``_id``, ``id``, ``qid`` or ``query_id``), the text (``text``,
``query`` or ``question``), answers in ``answers`` or BEIR's ``metadata.answers`` (a list, or one
string). ``answers`` (a file of ``{"_id" or "qid": ..., "answers": [...]}``) fills or replaces the
queries' answers. Qrels are TREC or BEIR qrels (``udcg.io.trec.read_qrels``).

Policies: every malformed record, duplicate id, and qrels query missing from the queries is an
``InputError`` naming file:line (``file: row i`` for Parquet and ``datasets`` tables), the field and
the fix. Qrels documents missing from the corpus are only logged (some public BEIR qrels judge
documents their corpus lacks); ``check_run`` is strict about runs (see there).

Reading only the documents a command needs (``docids=``, a set of ids): memory grows with the
documents kept, not with the corpus. A JSONL corpus is streamed line by line, parsing only the lines
of needed ids (``udcg.io.files.JsonlScan``: ``.gz`` decompressed as it streams, bounded by the
gzip-bomb ratio; no whole-file size limit); a Parquet file, a ``save_to_disk`` folder or ``hf:`` is
read in record batches (``udcg.io.hf.TableScan``); a JSON list is read whole. With ``docids``:

- every needed document is checked as above; a duplicate needed id is an ``InputError`` at
  file:line. Documents that are not needed are not checked (duplicates among them are not found:
  that would hold every id in memory);
- a line that is not a JSON object (bad JSON, not UTF-8) is the located error if it holds a needed
  id, else skipped and counted in one warning ("3 unreadable corpus lines skipped, first at
  FILE:LINE"); a needed document never found is then ``check_run``'s error, which names the skipped
  lines;
- qrels documents missing from the corpus are still logged, counted over all qrels documents (the
  scan notes which of them it meets, without keeping their text);
- ``Collection.scan`` says what the read did: records scanned, kept, bytes, seconds (MB/s).
"""

from __future__ import annotations

import logging
import time
from collections.abc import Iterator, Mapping, Set
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from udcg.io import hf as hfdata, irds
from udcg.errors import InputError
from udcg.io.files import MAX_PASSAGE_CHARS, JsonlScan, read_records, stream_lines
from udcg.records import Passage, Question
from udcg.io.trec import ranked_docids, read_qrels

log = logging.getLogger(__name__)

DOC_ID_FIELDS = ("_id", "id", "docid", "doc_id")
QUERY_ID_FIELDS = ("_id", "id", "qid", "query_id")
QUERY_TEXT_FIELDS = ("text", "query", "question")


@dataclass(frozen=True)
class CorpusScan:
    """What reading a corpus for the needed documents did (``read_collection(..., docids=...)``)."""

    scanned: int  # corpus records (lines, rows) read
    kept: int  # needed documents found
    nbytes: int  # bytes read (a .gz: decompressed)
    seconds: float
    skipped: int = 0  # unreadable lines skipped: none held a needed document
    first_skipped: str = ""  # where the first was, and why
    docstore: bool = False  # looked up by id in an ir_datasets docstore (scanned = ids looked up), not scanned

    def line(self) -> str:
        if self.docstore:
            return (f"corpus: {self.scanned:,} documents looked up in the ir_datasets docstore, {self.kept:,} found "
                    f"in {self.seconds:.1f} s")
        rate = f"{self.nbytes / 1e6 / self.seconds:,.0f} MB/s" if self.seconds > 0 else "instant"
        return (f"corpus: {self.scanned:,} documents scanned, {self.kept:,} kept (the ones used); "
                f"{self.nbytes / 1e6:,.1f} MB in {self.seconds:.1f} s ({rate})")


@dataclass(frozen=True)
class Collection:
    corpus: Mapping[str, Passage]  # docid -> Passage(docid=docid, text, title); with docids: the needed ones
    queries: Mapping[str, Question]  # qid -> Question(qid, text, answers, passages=())
    qrels: Mapping[str, Mapping[str, float]]  # qid -> {docid: relevance}; may be empty
    source: str  # what was read, for provenance and messages
    scan: CorpusScan | None = None  # with docids: what the corpus read did


# ---------------------------------------------------------------- records from any source


def _is_table(source: str | Path, role: str) -> bool:
    """True for ``hf:``, Parquet or a ``save_to_disk`` folder; False for a JSON(L) file; else an error."""
    if str(source).startswith(hfdata.HUB_PREFIX):
        return True
    path = Path(source)
    if not path.exists():
        raise InputError(f"{path}: no such file or folder (check the {role} path)")
    if path.is_dir() and not hfdata.is_saved_dataset(path):
        raise InputError(f"{path}: a folder, but not one written by datasets' save_to_disk (give the {role} "
                         "as a JSONL or Parquet file)")
    return path.is_dir() or path.suffix == ".parquet"


def _records(source: str | Path, role: str) -> Iterator[tuple[str, dict]]:
    """(location, record) pairs from a JSON(L)[.gz] file, Parquet, a saved folder or ``hf:``."""
    text = str(source)
    if not _is_table(source, role):  # JSON or JSONL, .gz too (decompressed with a size limit)
        yield from read_records(source)
    elif text.startswith(hfdata.HUB_PREFIX) or Path(source).is_dir():
        yield from hfdata.rows(hfdata.pick(hfdata.load(source), role, text), text)
    else:
        yield from hfdata.TableScan(source, role).rows()


def _field(obj: dict, names: tuple[str, ...], where: str, what: str) -> Any:
    for name in names:
        if obj.get(name) is not None:
            return name, obj[name]
    alts = "/".join(repr(n) for n in names[1:])
    raise InputError(f"{where}: missing field {names[0]!r} (every {what} needs it; {alts} also work)")


def _id(obj: dict, names: tuple[str, ...], where: str, what: str) -> str:
    name, value = _field(obj, names, where, f"{what} record")
    if isinstance(value, bool) or not isinstance(value, (str, int)):
        raise InputError(f"{where}: field {name!r} = {value!r} must be a string or an integer ({what} id)")
    value = str(value)
    if not value or any(ch.isspace() for ch in value):
        raise InputError(f"{where}: field {name!r} = {value!r} is empty or has whitespace "
                         "(TREC runs and qrels need single-word ids: replace the whitespace, e.g. with '_', in the "
                         "corpus, queries, qrels and runs alike)")
    return value


def _string(obj: dict, name: str, where: str, fix: str) -> str:
    value = obj.get(name)
    if value is None:
        return ""
    if not isinstance(value, str):
        raise InputError(f"{where}: field {name!r} must be a string, got {type(value).__name__} ({fix})")
    return value


def _answers(value: Any, where: str, name: str) -> tuple[str, ...]:
    answers = [value] if isinstance(value, str) else value
    if not isinstance(answers, list) or not all(isinstance(a, str) for a in answers):
        raise InputError(f"{where}: field {name!r} must be a list of strings (write each answer alias "
                         "as a string)")
    return tuple(answers)


def _unique(items: Iterator[tuple[str, str, Any]], what: str) -> dict[str, Any]:
    out: dict[str, Any] = {}
    first: dict[str, str] = {}
    for where, key, value in items:
        if key in out:
            raise InputError(f"{where}: duplicate {what} {key!r} (first at {first[key]}; ids must be unique)")
        out[key], first[key] = value, where
    return out


# ---------------------------------------------------------------- corpus, queries, answers


def _passage(obj: dict, where: str) -> tuple[str, str, Passage]:
    docid = _id(obj, DOC_ID_FIELDS, where, "corpus")
    title = _string(obj, "title", where, "the document title, or leave it out")
    if obj.get("text") is None:
        raise InputError(f"{where}: missing field 'text' (every corpus record needs the passage text)")
    text = _string(obj, "text", where, "the passage text")
    if not (text.strip() or title.strip()):
        raise InputError(f"{where}: document {docid!r} has empty 'text' and 'title' (give its text, or drop it)")
    if len(text) > MAX_PASSAGE_CHARS:
        raise InputError(f"{where}: field 'text' of {docid!r} holds {len(text):,} characters, over the "
                         f"{MAX_PASSAGE_CHARS:,} limit (split the document into passages of a few hundred words)")
    return where, docid, Passage(docid=docid, text=text, title=title)


def _question(obj: dict, where: str) -> tuple[str, str, Question]:
    qid = _id(obj, QUERY_ID_FIELDS, where, "query")
    name, text = _field(obj, QUERY_TEXT_FIELDS, where, "query record")
    if not isinstance(text, str) or not text.strip():
        raise InputError(f"{where}: field {name!r} must be the non-empty query text, got {text!r}")
    metadata = obj.get("metadata")
    if metadata is not None and not isinstance(metadata, dict):
        raise InputError(f"{where}: field 'metadata' must be an object, got {type(metadata).__name__} "
                         "(write {\"answers\": [...]} or leave it out)")
    if obj.get("answers") is not None:
        answers = _answers(obj["answers"], where, "answers")
    elif metadata and metadata.get("answers") is not None:
        answers = _answers(metadata["answers"], where, "metadata.answers")
    else:
        answers = ()
    return where, qid, Question(qid=qid, text=text, answers=answers)


def _answer_rows(source: str | Path, queries: Mapping[str, Question]) -> Iterator[tuple[str, str, tuple]]:
    for where, obj in _records(source, "answers"):
        qid = _id(obj, ("_id", "qid", "id"), where, "query")
        if qid not in queries:
            raise InputError(f"{where}: answers for query {qid!r}, which is not in the queries (fix the id, "
                             "or remove the line)")
        if obj.get("answers") is None:
            raise InputError(f"{where}: missing field 'answers' (a list of reference answer strings)")
        answers = _answers(obj["answers"], where, "answers")
        if not answers:
            raise InputError(f"{where}: field 'answers' is empty (give at least one answer, or remove the line)")
        yield where, qid, answers


# ---------------------------------------------------------------- the needed documents only

def _needed_docs(source: str | Path, keep: Set[str], watch: Set[str]) -> tuple[dict[str, Passage], CorpusScan, set]:
    """The documents of ``keep`` in the corpus, what the read did, and the ids of ``watch`` met."""
    t0 = time.perf_counter()
    records = None
    if _is_table(source, "corpus"):
        scan: hfdata.TableScan | JsonlScan = hfdata.TableScan(source, "corpus", DOC_ID_FIELDS, keep, watch)
        rows = scan.rows()
    else:
        scan = JsonlScan(source, DOC_ID_FIELDS, keep, watch)
        if _is_jsonl(Path(source)):
            rows = scan.rows()
        else:  # a JSON list (or one pretty-printed object): read whole, as without docids, then filtered
            records = read_records(source)
            rows = (row for where, obj in records for row in scan.kept(where, obj))
    docs = _unique((_passage(obj, where) for where, obj in rows), "docid")
    scanned, nbytes = (scan.scanned, scan.nbytes) if records is None else (len(records), Path(source).stat().st_size)
    skipped, first = getattr(scan, "skipped", 0), getattr(scan, "first_skipped", "")
    if skipped:
        log.warning("%s: %d unreadable corpus lines skipped (none holds a needed document), first at %s", source,
                    skipped, first)
    return docs, CorpusScan(scanned, len(docs), nbytes, time.perf_counter() - t0, skipped, first), scan.seen


def _is_jsonl(path: Path) -> bool:
    """True when the first non-blank line is a whole ``{...}`` (else a JSON list or one pretty object)."""
    for _, line in stream_lines(path):
        if not line.isspace():
            return line.strip().startswith(b"{") and line.strip().endswith(b"}")
    return False


# ---------------------------------------------------------------- the folder and the whole


def _member(folder: Path, name: str) -> Path:
    for path in (folder / name, folder / f"{name}.gz"):
        if path.is_file():
            return path
    raise InputError(f"{folder}: no {name} (or {name}.gz) in this folder (a BEIR folder holds corpus.jsonl, "
                     "queries.jsonl and qrels/<split>.tsv; or give a corpus file, Parquet file or a "
                     "datasets save_to_disk folder)")


def _folder_qrels(folder: Path, split: str) -> Path | None:
    qrels_dir = folder / "qrels"
    if not qrels_dir.is_dir():
        return None
    path = qrels_dir / f"{split}.tsv"
    if not path.is_file():
        found = ", ".join(sorted(p.stem for p in qrels_dir.glob("*.tsv"))) or "none"
        raise InputError(f"{qrels_dir}: no {split}.tsv for split {split!r} (splits here: {found}; "
                         "pick one with split=...)")
    return path


def _default_queries(corpus: str | Path) -> str | Path:
    """The ``queries`` split of a ``DatasetDict`` corpus; otherwise the user must name the file."""
    text = str(corpus)
    if irds.is_irds(text):
        return text
    if text.startswith(hfdata.HUB_PREFIX) or hfdata.is_saved_dataset(Path(corpus)):
        if "queries" in hfdata.splits(hfdata.load(corpus)):
            return corpus
    raise InputError(f"{corpus}: no queries given (pass the queries file, e.g. BEIR's queries.jsonl)")


def read_queries(queries: str | Path) -> dict[str, Question]:
    """``{qid: Question}`` of a queries file (JSONL, Parquet, a saved ``datasets`` folder or ``hf:``),
    every record checked; a BEIR folder gives its ``queries.jsonl``."""
    if irds.is_irds(queries):
        return irds.dataset_queries(queries)
    if Path(queries).is_dir() and not hfdata.is_saved_dataset(Path(queries)):
        queries = _member(Path(queries), "queries.jsonl")
    questions = _unique((_question(obj, where) for where, obj in _records(queries, "queries")), "query id")
    if not questions:
        raise InputError(f"{queries}: no query records (expected one record per query)")
    return questions


def read_collection(corpus: str | Path, queries: str | Path | None = None, qrels: str | Path | None = None,
                    answers: str | Path | None = None, split: str = "test",
                    docids: Set[str] | None = None) -> Collection:
    """Read a corpus, its queries (answers filled from ``answers`` if given) and qrels; see the
    module docstring for the accepted layouts and the checks. With ``docids``, the corpus holds only
    those documents (the ones found; ``check_run`` with the depth used names any missing)."""
    text = str(corpus)
    folder = None if text.startswith((hfdata.HUB_PREFIX, irds.PREFIX)) else Path(corpus)
    corpus_source: str | Path = corpus
    if folder is not None and folder.is_dir() and not hfdata.is_saved_dataset(folder):
        corpus_source = _member(folder, "corpus.jsonl")
        queries = queries if queries is not None else _member(folder, "queries.jsonl")
        qrels = qrels if qrels is not None else _folder_qrels(folder, split)
    if irds.is_irds(text):
        queries = queries if queries is not None else text
        qrels = qrels if qrels is not None or not irds.dataset(text).has_qrels() else text
    judged = read_qrels(qrels) if qrels is not None else {}
    scan, seen = None, None
    if irds.is_irds(text):
        docs, looked_up, seconds = irds.read_docs(text, docids)
        scan = CorpusScan(looked_up, len(docs), 0, seconds, docstore=True) if docids is not None else None
        seen = {d for rels in judged.values() for d in rels}  # judged documents are not looked up (ids only)
    elif docids is None:
        docs = _unique((_passage(obj, where) for where, obj in _records(corpus_source, "corpus")), "docid")
    else:
        docs, scan, seen = _needed_docs(corpus_source, docids, {d for rels in judged.values() for d in rels})
    if not (docs if scan is None else scan.scanned):
        raise InputError(f"{corpus_source}: no corpus records (expected one record per document)")
    queries = queries if queries is not None else _default_queries(corpus)
    questions = read_queries(queries)
    if answers is not None:
        filled = _unique(_answer_rows(answers, questions), "query id")
        questions = {qid: Question(qid=qid, text=q.text, answers=filled.get(qid, q.answers))
                     for qid, q in questions.items()}
    unknown = [qid for qid in judged if qid not in questions]
    if unknown:
        raise InputError(f"{qrels}: {len(unknown)} of {len(judged)} judged queries are not in the queries, e.g. "
                         f"{unknown[0]!r} (give the queries file that goes with these qrels)")
    unjudgeable = {d for rels in judged.values() for d in rels if d not in (docs if seen is None else seen)}
    if unjudgeable:
        log.warning("%s: %d judged documents are not in the corpus, e.g. %r", qrels, len(unjudgeable),
                    min(unjudgeable))
    return Collection(corpus=docs, queries=questions, qrels=judged, source=text, scan=scan)


def check_run(run: Mapping[str, Mapping[str, float]], collection: Collection, where: str,
              depth: int | None = None, queries_source: str | None = None) -> None:
    """Check that a run (``udcg.io.trec.read_run``) was made on ``collection``.

    Policy: every query of the run must be one of the collection's queries, and every document the
    command uses (with ``depth``: each ranking's top ``depth`` in trec_eval order, the documents a
    collection read with ``docids`` holds; without: every retrieved document) one of its corpus;
    otherwise ``InputError`` with the count, the first example and the fix (a run for other queries
    or another corpus would be annotated against the wrong texts); unreadable corpus lines that were
    skipped are named, as they may hold the missing documents. Collection queries absent from the
    run are allowed. A document twice in one ranking is already refused by ``read_run``.
    ``queries_source``: the queries file the user named, for the message (default: the collection).
    """
    unknown = [qid for qid in run if qid not in collection.queries]
    if unknown:
        raise InputError(f"{where}: {len(unknown)} of {len(run)} run queries are not in the queries of "
                         f"{queries_source or collection.source}, e.g. {unknown[0]!r} (give the queries this run was "
                         "made for, or remove those queries from the run)")
    used = ((qid, ranked_docids(docs)[:depth] if depth is not None else docs) for qid, docs in run.items())
    missing = [(qid, docid) for qid, docs in used for docid in docs if docid not in collection.corpus]
    if missing:
        qid, docid = missing[0]
        top = f" in the top {depth}" if depth is not None else ""
        scan = collection.scan
        skipped = (f"; {scan.skipped} unreadable corpus lines were skipped, first at {scan.first_skipped}"
                   if scan is not None and scan.skipped else "")
        raise InputError(f"{where}: {len(missing)} retrieved documents{top} are not in the corpus of "
                         f"{collection.source}, e.g. {docid!r} for query {qid!r} (give the corpus this run "
                         f"retrieved from{skipped})")
