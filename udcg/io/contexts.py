"""The contexts file (JSONL, one context per line) that `score`, `fit-theta`, `correlate` and
`validate` exchange:

    {"qid": "q1", "cid": "q1:0", "pids": ["d3", "d7", ...],          # pids optional
     "relevant": [true, false, ...],                                  # per position, prompt order
     "utilities": [0.93, -0.41, ...],                                 # or "p_abs": [...] with "relevant"
     "n_relevant": 3,                   # optional: relevant passages in the question's pool
     "grades": [5, 2, ...], "corpus_grades": [n1, n2, n3, n4, n5],   # optional, for RA-nWG
     "pool_grades": [n1, ..., n5],     # optional: grade counts of the retrieval pool, for PROC and %PROC
     "erag": [...], "answer_ll": [...], "contains": [...],            # optional per-passage scores
     "outcome": "correct" | "abstained" | "wrong" | null,             # optional, graded answer
     "metrics": {"UDCG": 0.61, ...}}                                  # added by `udcg score`

The authors' format (items with "passages") is read too: one context per item.

Every context becomes a ``udcg.records.ContextRecord``; this module is the only one that reads or
writes the line: ``read_context_file`` (any contexts file, every field checked, the input objects kept
for outputs that echo them), ``from_json``/``to_json`` (the lines ``udcg validate`` writes, byte for
byte) and ``write_contexts``.

k rule: ``--k K`` keeps the first K passages of every context, and a metric cut-off ``@K`` scores
the first K; a context with fewer than K passages is an error naming it (a shorter context is a
different k, and UDCG divides by k), never a silent cut at the context's length. Duplicate ids
(``example_id``, or ``(qid, cid)``) are errors too.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from udcg.errors import InputError
from udcg.io.authors import question_from_authors
from udcg.io.files import atomic_write_jsonl, read_records
from udcg.records import OUTCOME_LABELS, OUTCOME_SCORE, ContextRecord, Outcome

MAX_COUNT = 1_000_000  # passages in one question's pool: more is not a pool (and nDCG's ideal would not fit in memory)
MAX_SCORE = 1e6  # |erag|, |answer_ll|: per-passage scores and log-probabilities are far smaller
_LISTS = {"relevant": bool, "utilities": float, "p_abs": float, "grades": int, "erag": float,
          "answer_ll": float, "contains": bool}
_COUNTS = ("corpus_grades", "pool_grades")
Utilities = Callable[[Sequence[bool], Sequence[float]], np.ndarray]  # (relevant, p_abs) -> utilities
_TUPLES = ("pids", "relevant", "p_abs", "utilities", "contains", "grades", "corpus_grades", "pool_grades", "erag",
           "answer_ll")
# A line's known fields, in the order they are written (then the record's extra fields).
_ORDER = ("qid", "cid", "study", "split", "pids", "relevant", "p_abs", "utilities", "contains", "n_relevant",
          "grades", "corpus_grades", "pool_grades", "erag", "answer_ll", "answer", "outcome", "outcome_note", "metrics")
# A line's key -> the record's attribute, where they differ (the file's "pids" are the record's docids).
_ATTRIBUTE = {"pids": "docids"}


@dataclass(frozen=True)
class ContextFile:
    """The contexts of a file, in file order: the records, where each was (file:line, for error
    messages) and the input objects as read (for outputs that keep every input field)."""

    records: tuple[ContextRecord, ...]
    where: tuple[str, ...]
    sources: tuple[dict, ...]

    def __len__(self) -> int:
        return len(self.records)

    def outcome_scores(self) -> np.ndarray:
        """correct 2 > abstained 1 > wrong 0 per context; a context without a label is an error naming it."""
        out = np.empty(len(self.records))
        for i, r in enumerate(self.records):
            if r.label not in OUTCOME_SCORE:
                raise InputError(f"{self.where[i]}: field 'outcome' = {r.label!r} (give one of "
                                 f"{', '.join(OUTCOME_LABELS)}; unparseable judgements cannot be correlated — "
                                 "re-judge or drop them)")
            out[i] = OUTCOME_SCORE[r.label]
        return out


def _check_list(value: object, name: str, kind: type, k: int | None, where: str) -> list:
    if not isinstance(value, list):
        raise InputError(f"{where}: field {name!r} must be a list (one value per position)")
    if k is not None and len(value) != k:
        raise InputError(f"{where}: field {name!r} has {len(value)} values but the context has {k} passages")
    for v in value:
        ok = isinstance(v, bool) if kind is bool else (isinstance(v, (int, float)) and not isinstance(v, bool))
        if kind is int and ok and float(v) != int(v):
            ok = False
        if not ok or (kind is not bool and not math.isfinite(float(v))):
            raise InputError(f"{where}: field {name!r} holds {v!r} (expected {kind.__name__} values, finite)")
    if name == "p_abs" and any(not 0 <= v <= 1 for v in value):
        raise InputError(f"{where}: field 'p_abs' holds a value outside [0, 1] (probabilities only)")
    if name == "utilities" and any(abs(v) > 1 for v in value):
        raise InputError(f"{where}: field 'utilities' holds a value outside [-1, 1] (u = R * (1 - p_abs))")
    if name == "grades" and any(v not in (1, 2, 3, 4, 5) for v in value):
        raise InputError(f"{where}: field 'grades' holds a value outside 1..5 (use the 5-point rubric)")
    if name in ("erag", "answer_ll") and any(abs(v) > MAX_SCORE for v in value):
        raise InputError(f"{where}: field {name!r} holds a value beyond +-{MAX_SCORE:g} (a per-passage score or "
                         "log-probability is far smaller; check how it was computed)")
    return list(value)


def _check_counts(value: object, name: str, where: str) -> list[int]:
    if not (isinstance(value, list) and len(value) == 5 and all(isinstance(c, int) and not isinstance(c, bool)
                                                                 and 0 <= c <= MAX_COUNT for c in value)):
        raise InputError(f"{where}: field {name!r} must be 5 counts of passages of grade 1..5, each in 0..{MAX_COUNT:,}")
    return value


def _check_consistent(checked: dict, where: str) -> None:
    """Fields that describe the same passages must agree: a silent contradiction is a wrong score."""
    rel, u = checked.get("relevant"), checked.get("utilities")
    if rel is not None and u is not None:
        for i, (r, v) in enumerate(zip(rel, u)):
            if (r and v < 0) or (not r and v > 0):
                raise InputError(f"{where}: position {i}: 'relevant' is {str(r).lower()} but 'utilities' holds {v!r} "
                                 "(u = R * (1 - p_abs) is >= 0 for a relevant passage and <= 0 for an irrelevant one)")
    if rel is not None and checked.get("n_relevant") is not None and checked["n_relevant"] < sum(rel):
        raise InputError(f"{where}: field 'n_relevant' = {checked['n_relevant']} is smaller than the {sum(rel)} relevant "
                         "passages of this context (it counts the relevant passages of the question's whole pool)")
    grades, corpus, pool = checked.get("grades"), checked.get("corpus_grades"), checked.get("pool_grades")
    for name, counts in (("corpus_grades", corpus), ("pool_grades", pool)):
        if grades is not None and counts is not None:
            for g in range(1, 6):
                if grades.count(g) > counts[g - 1]:
                    raise InputError(f"{where}: the context holds {grades.count(g)} passage(s) of grade {g} but field "
                                     f"{name!r} counts {counts[g - 1]} (the context's passages are part of the pool: "
                                     "each count must be at least the context's)")
    if corpus is not None and pool is not None and any(p > c for p, c in zip(pool, corpus)):
        raise InputError(f"{where}: field 'pool_grades' counts more passages of some grade than 'corpus_grades' "
                         "(the retrieval pool is part of the labelled corpus)")


def _outcome(obj: dict, qid: str, cid: str, where: str) -> Outcome | None:
    """The graded outcome of a line: 'outcome' (a label, or null for a judge's reply that could not
    be parsed) with 'outcome_note'; None when the line has no 'outcome' field."""
    if "outcome" not in obj:
        return None
    label = obj["outcome"]
    if label is not None and (not isinstance(label, str) or label not in OUTCOME_LABELS):
        raise InputError(f"{where}: field 'outcome' = {str(label)[:40]!r} (give one of {', '.join(OUTCOME_LABELS)}, or "
                         "null for a judgement that could not be parsed)")
    answer, note, error = obj.get("answer"), obj.get("outcome_note"), obj.get("error")
    return Outcome(qid, cid, answer if isinstance(answer, str) else "", label,
                   error=error if label is None and isinstance(error, str) else "",
                   note=note if isinstance(note, str) else "")


def _record(qid: str, cid: str, checked: dict, obj: dict, where: str, extra: dict) -> ContextRecord:
    docids = obj.get("pids")
    if docids is not None and not (isinstance(docids, list) and all(isinstance(d, (str, int)) and not isinstance(d, bool)
                                                                     for d in docids)):
        raise InputError(f"{where}: field 'pids' must be a list of document ids (one per position)")
    answer = obj.get("answer")
    return ContextRecord(
        qid=qid, cid=cid, relevant=tuple(checked["relevant"]), docids=tuple(docids or ()),
        study=obj.get("study") if isinstance(obj.get("study"), str) else None,
        split=obj.get("split") if isinstance(obj.get("split"), str) else None,
        **{n: (tuple(checked[n]) if n in checked else None)
           for n in ("p_abs", "utilities", "contains", "grades", "corpus_grades", "pool_grades", "erag", "answer_ll")},
        n_relevant=checked.get("n_relevant"), answer=answer if isinstance(answer, str) else None,
        outcome=_outcome(obj, qid, cid, where), metrics=dict(obj["metrics"]) if obj.get("metrics") is not None else None,
        extra=extra)


def _add_utilities(checked: dict, where: str, make: Utilities | None) -> None:
    """With ``make`` (the utility formula, ``udcg.metrics.udcg.utilities_from``): 'utilities' made from
    'relevant' and 'p_abs' when absent; when both are given they must agree."""
    if make is None or checked.get("p_abs") is None:
        return
    expected = make(checked["relevant"], checked["p_abs"]).tolist()
    given = checked.get("utilities")
    if given is None:
        checked["utilities"] = expected
        return
    for i, (v, e) in enumerate(zip(given, expected)):
        if abs(v - e) > 1e-6:
            raise InputError(f"{where}: position {i}: 'utilities' holds {v!r} but 'relevant' and 'p_abs' give {e!r} "
                             "(give one of them, or make them agree)")


def _from_context(obj: dict, where: str, k_cut: int | None, make: Utilities | None = None) -> ContextRecord:
    qid = obj.get("qid")
    if not isinstance(qid, (str, int)) or isinstance(qid, bool):
        raise InputError(f"{where}: missing field 'qid' (every context names its question)")
    checked: dict = {}
    k = None
    for name, kind in _LISTS.items():
        if name in obj and obj[name] is not None:
            checked[name] = _check_list(obj[name], name, kind, k, where)
            k = len(checked[name])
    if k == 0:
        raise InputError(f"{where}: the context has no passages (k must be >= 1)")
    if k is None:
        raise InputError(f"{where}: no per-position field (give 'relevant' and 'utilities' or 'p_abs')")
    if "p_abs" in checked and "utilities" not in checked and "relevant" not in checked:
        raise InputError(f"{where}: 'p_abs' needs 'relevant' to make utilities (u = R * (1 - p_abs))")
    if "relevant" not in checked and "utilities" in checked:
        checked["relevant"] = [u > 0 for u in checked["utilities"]]
    if "relevant" not in checked:
        raise InputError(f"{where}: no 'relevant' or 'utilities' (every context needs one of them, one value per passage)")
    if obj.get("n_relevant") is not None:
        v = obj["n_relevant"]
        if isinstance(v, bool) or not isinstance(v, int) or not 0 <= v <= MAX_COUNT:
            raise InputError(f"{where}: field 'n_relevant' = {str(v)[:40]} must be an integer in 0..{MAX_COUNT:,} "
                             "(the number of relevant passages in the question's pool)")
        checked["n_relevant"] = v
    for name in _COUNTS:
        if obj.get(name) is not None:
            checked[name] = _check_counts(obj[name], name, where)
    _check_consistent(checked, where)
    _add_utilities(checked, where, make)
    cid = obj.get("cid")
    extra = {n: v for n, v in obj.items() if n not in _ORDER}
    return _cut(_record(str(qid), "" if cid is None else str(cid), checked, obj, where, extra), k_cut, where)


def _cut(record: ContextRecord, k_cut: int | None, where: str = "") -> ContextRecord:
    """The record's first ``k_cut`` positions; a context shorter than k is a different k (UDCG
    divides by k): an error, never a silent cut at the context's length."""
    if k_cut is None:
        return record
    if record.k < k_cut:
        raise InputError(f"{where}: the context has {record.k} passages, fewer than --k {k_cut} "
                         f"(use --k {record.k} or less, or leave out --k to score whole contexts)")
    cut = {n: getattr(record, n)[:k_cut] for n in (*_LISTS, "docids") if getattr(record, n) is not None}
    return dataclasses.replace(record, **cut)


def _from_authors(obj: dict, where: str, reader: str | None, k_cut: int | None,
                  make: Utilities | None = None) -> ContextRecord:
    q = question_from_authors(obj, where)
    checked: dict = {}
    rels = [p.relevant for p in q.passages]
    if all(r is not None for r in rels):
        checked["relevant"] = rels
    models = set.intersection(*(set(p.p_abs) for p in q.passages))
    chosen = reader or (next(iter(models)) if len(models) == 1 else None)
    if chosen is not None:
        missing = [p.docid for p in q.passages if chosen not in p.p_abs]
        if missing:
            raise InputError(f"{where}: passage {missing[0]!r} has no models_info[{chosen!r}].no_res_prob (annotate it first)")
        if "relevant" not in checked:
            raise InputError(f"{where}: a passage has no 'is_relevant' (judge relevance first: udcg judge relevance)")
        checked["p_abs"] = [p.p_abs[chosen] for p in q.passages]
    grades = [p.grade for p in q.passages]
    if all(g is not None for g in grades):
        checked["grades"] = grades
        checked["corpus_grades"] = [grades.count(g) for g in range(1, 6)]  # the item's passages are its pool
    if "relevant" not in checked:
        raise InputError(f"{where}: nothing to score (every passage needs 'is_relevant', and models_info for UDCG; "
                         "udcg judge relevance --write-authors adds it)")
    _add_utilities(checked, where, make)
    line = {"pids": [p.docid for p in q.passages], **{n: obj[n] for n in ("outcome", "metrics") if n in obj}}
    return _cut(_record(q.qid, "", checked, line, where, {}), k_cut, where)


def read_context_file(path: str | Path, reader: str | None = None, k: int | None = None,
                       utilities: Utilities | None = None) -> ContextFile:
    """The contexts of a file (a contexts JSONL, or the authors' format: one context per item), every
    field checked. ``reader``: the model whose p_abs to read from the authors' ``models_info`` (needed when
    several are present); ``k``: keep the first k passages of every context; ``utilities``: the
    utility formula, to make each context's utilities from 'relevant' and 'p_abs' (the flows pass
    ``udcg.metrics.udcg.utilities_from``: ``udcg.flows.scoring.read_contexts``)."""
    if k is not None and k <= 0:
        raise InputError(f"--k {k}: must be a positive integer")
    records, wheres, sources = [], [], []
    seen: dict[tuple, str] = {}
    for where, obj in read_records(path):
        if "passages" not in obj and ("ctxs" in obj or "positive_ctxs" in obj):
            raise InputError(f"{where}: a retrieval data set row ('ctxs'), not a context with utilities: run "
                             f"'udcg annotate {path} -o annotated.json --model MODEL' first (it reads this format "
                             "and adds the utilities), then score annotated.json")
        for name in ("metrics", "udcg"):  # score adds to these objects: anything else cannot be kept
            if name in obj and not isinstance(obj[name], dict):
                raise InputError(f"{where}: field {name!r} must be an object {{name: value}}, got "
                                 f"{type(obj[name]).__name__} (remove it; udcg score writes it)")
        authors = "passages" in obj
        record = _from_authors(obj, where, reader, k, utilities) if authors else _from_context(obj, where, k, utilities)
        if authors or obj.get("cid") is not None:
            key = (record.qid, record.cid)
            if key in seen:
                what = f"example_id {record.qid!r}" if authors else f"(qid, cid) = ({record.qid!r}, {record.cid!r})"
                raise InputError(f"{where}: duplicate {what}, first at {seen[key]} (ids must be unique; remove or rename one)")
            seen[key] = where
        records.append(record)
        wheres.append(where)
        sources.append(obj)
    return ContextFile(tuple(records), tuple(wheres), tuple(sources))


# ---------------------------------------------------------------- lines, byte for byte


def to_json(record: ContextRecord) -> dict:
    """The contexts-file line of a record: the known fields in their order (those not known left
    out; 'outcome' once graded, null for a judgement that could not be parsed), then the record's
    extra fields as they were."""
    out: dict = {}
    for name in _ORDER:
        if name == "outcome":
            if record.outcome is not None:
                out[name] = record.label
            continue
        if name == "outcome_note":
            if record.outcome is not None and record.outcome.note:
                out[name] = record.outcome.note
            continue
        value = getattr(record, _ATTRIBUTE.get(name, name))
        if value is not None:
            out[name] = list(value) if name in _TUPLES else dict(value) if name == "metrics" else value
    out.update((n, v) for n, v in record.extra.items() if n not in out)
    return out


def from_json(obj: dict, where: str = "context") -> ContextRecord:
    """A record from a line ``udcg validate`` wrote (the inverse of ``to_json``, strict: an unknown
    field is refused); fields absent take their defaults. A line without qid, cid or relevant is an
    ``InputError`` naming ``where``."""
    if not isinstance(obj, dict):
        raise InputError(f"{where}: expected a JSON object (one context per line), got {type(obj).__name__}")
    missing = [n for n in ("qid", "cid", "relevant") if obj.get(n) is None]
    if missing:
        raise InputError(f"{where}: missing field {missing[0]!r} (every context names its question, its id and "
                         "the relevance of its passages)")
    unknown = sorted(set(obj) - set(_ORDER))
    if unknown:
        raise InputError(f"{where}: unknown field {unknown[0]!r} (a context record holds {', '.join(_ORDER)})")
    checked = {_ATTRIBUTE.get(n, n): (tuple(v) if n in _TUPLES and v is not None else dict(v) if n == "metrics" and v is not None
                                      else v)
              for n, v in obj.items() if n not in ("outcome", "outcome_note")}
    return ContextRecord(**checked, outcome=_outcome(obj, str(obj["qid"]), str(obj["cid"]), where))


def write_contexts(path: str | Path, records: Iterable[ContextRecord]) -> None:
    """A contexts JSONL, one ``to_json`` line per record, written atomically."""
    atomic_write_jsonl(path, [to_json(r) for r in records])


def scored_lines(file: ContextFile, metrics: Sequence[dict], udcg: Sequence[dict]) -> list[dict]:
    """``udcg score``'s output: each input object as it was read, its 'metrics' updated with
    ``metrics[i]`` and, where ``udcg[i]`` is not empty, its authors' 'udcg' field with ``udcg[i]``."""
    out = []
    for source, m, u in zip(file.sources, metrics, udcg, strict=True):
        item = {**source, "metrics": {**(source.get("metrics") or {}), **m}}
        if u:
            item["udcg"] = {**(source.get("udcg") or {}), **u}
        out.append(item)
    return out


def judged_lines(path: str | Path, judgements: Sequence[dict]) -> list[dict]:
    """``udcg judge answer``'s output: each input line of ``path`` with its judgement (matched by
    (qid, cid)): a context (a line with per-position fields) as its record with the typed outcome
    and the judge's fields as extra; a plain answer item as it was, with the judge's fields and
    'outcome' = the label (null: the reply could not be parsed)."""
    by_key = {(str(j["qid"]), str(j["cid"])): j for j in judgements}
    out = []
    for where, obj in read_records(path):
        qid, cid = str(obj["qid"]), str(obj["cid"])
        judged = {n: v for n, v in by_key[qid, cid].items() if n not in ("qid", "cid")}
        if not any(obj.get(n) is not None for n in _LISTS):
            out.append({**obj, **judged, "outcome": judged["label"]})
            continue
        record = _from_context({n: v for n, v in obj.items() if n not in ("outcome", "outcome_note")}, where, None)
        error, note = judged.get("error"), judged.get("note")
        outcome = Outcome(qid, cid, record.answer or "", judged["label"], error=error if isinstance(error, str) else "",
                          note=note if isinstance(note, str) else "")
        out.append(to_json(dataclasses.replace(record, outcome=outcome, extra={**record.extra, **judged})))
    return out
