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

k rule: ``--k K`` keeps the first K passages of every context, and a metric cut-off ``@K`` scores
the first K; a context with fewer than K passages is an error naming it (a shorter context is a
different k, and UDCG divides by k), never a silent cut at the context's length. Duplicate ids
(``example_id``, or ``(qid, cid)``) are errors too.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from udcg.errors import InputError
from udcg.io.authors import question_from_authors
from udcg.io.files import read_records
from udcg.records import OUTCOME_LABELS, OUTCOME_SCORE

MAX_COUNT = 1_000_000  # passages in one question's pool: more is not a pool (and nDCG's ideal would not fit in memory)
MAX_SCORE = 1e6  # |erag|, |answer_ll|: per-passage scores and log-probabilities are far smaller
_LISTS = {"relevant": bool, "utilities": float, "p_abs": float, "grades": int, "erag": float,
          "answer_ll": float, "contains": bool}


@dataclass
class ContextRows:
    """Parsed contexts, in file order, with their locations for error messages."""

    where: list[str]
    raw: list[dict]
    qid: list[str]
    fields: list[dict]  # per context: name -> list (per position) or scalar

    def __len__(self) -> int:
        return len(self.qid)

    def outcome_scores(self) -> np.ndarray:
        """correct 2 > abstained 1 > wrong 0; every context must have a label."""
        out = np.empty(len(self))
        for i, f in enumerate(self.fields):
            label = f.get("outcome")
            if label not in OUTCOME_SCORE:
                raise InputError(f"{self.where[i]}: field 'outcome' = {label!r} (give one of {', '.join(OUTCOME_LABELS)}; "
                                 "unparseable judgements cannot be correlated — re-judge or drop them)")
            out[i] = OUTCOME_SCORE[label]
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


def _check_consistent(fields: dict, where: str) -> None:
    """Fields that describe the same passages must agree: a silent contradiction is a wrong score."""
    rel, u = fields.get("relevant"), fields.get("utilities")
    if rel is not None and u is not None:
        for i, (r, v) in enumerate(zip(rel, u)):
            if (r and v < 0) or (not r and v > 0):
                raise InputError(f"{where}: position {i}: 'relevant' is {str(r).lower()} but 'utilities' holds {v!r} "
                                 "(u = R * (1 - p_abs) is >= 0 for a relevant passage and <= 0 for an irrelevant one)")
    if rel is not None and fields.get("n_relevant") is not None and fields["n_relevant"] < sum(rel):
        raise InputError(f"{where}: field 'n_relevant' = {fields['n_relevant']} is smaller than the {sum(rel)} relevant "
                         "passages of this context (it counts the relevant passages of the question's whole pool)")
    grades, corpus, pool = fields.get("grades"), fields.get("corpus_grades"), fields.get("pool_grades")
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


def _from_context(obj: dict, where: str, k_cut: int | None) -> tuple[str, dict]:
    qid = obj.get("qid")
    if not isinstance(qid, (str, int)) or isinstance(qid, bool):
        raise InputError(f"{where}: missing field 'qid' (every context names its question)")
    fields: dict = {}
    k = None
    for name, kind in _LISTS.items():
        if name in obj and obj[name] is not None:
            fields[name] = _check_list(obj[name], name, kind, k, where)
            k = len(fields[name])
    if k == 0:
        raise InputError(f"{where}: the context has no passages (k must be >= 1)")
    if k is None:
        raise InputError(f"{where}: no per-position field (give 'relevant' and 'utilities' or 'p_abs')")
    if "p_abs" in fields and "utilities" not in fields and "relevant" not in fields:
        raise InputError(f"{where}: 'p_abs' needs 'relevant' to make utilities (u = R * (1 - p_abs))")
    if "relevant" not in fields and "utilities" in fields:
        fields["relevant"] = [u > 0 for u in fields["utilities"]]
    if "relevant" not in fields:
        raise InputError(f"{where}: no 'relevant' or 'utilities' (every context needs one of them, one value per passage)")
    for name in ("n_relevant",):
        if obj.get(name) is not None:
            v = obj[name]
            if isinstance(v, bool) or not isinstance(v, int) or not 0 <= v <= MAX_COUNT:
                raise InputError(f"{where}: field {name!r} = {str(v)[:40]} must be an integer in 0..{MAX_COUNT:,} "
                                 "(the number of relevant passages in the question's pool)")
            fields[name] = v
    for name in ("corpus_grades", "pool_grades"):
        if obj.get(name) is not None:
            fields[name] = _check_counts(obj[name], name, where)
    _check_consistent(fields, where)
    if "outcome" in obj:
        fields["outcome"] = obj["outcome"]
    return str(qid), _cut(fields, k_cut, where)


def _cut(fields: dict, k_cut: int | None, where: str = "") -> dict:
    if k_cut is None:
        return fields
    depth = max((len(v) for name, v in fields.items() if name in _LISTS and isinstance(v, list)), default=0)
    if depth < k_cut:  # a context shorter than k is a different k: UDCG divides by k
        raise InputError(f"{where}: the context has {depth} passages, fewer than --k {k_cut} "
                         f"(use --k {depth} or less, or leave out --k to score whole contexts)")
    return {n: (v[:k_cut] if n in _LISTS and isinstance(v, list) else v) for n, v in fields.items()}


def _from_authors(obj: dict, where: str, model: str | None, k_cut: int | None) -> tuple[str, dict]:
    q = question_from_authors(obj, where)
    fields: dict = {}
    rels = [p.relevant for p in q.passages]
    if all(r is not None for r in rels):
        fields["relevant"] = rels
    models = set.intersection(*(set(p.p_abs) for p in q.passages))
    chosen = model or (next(iter(models)) if len(models) == 1 else None)
    if chosen is not None:
        missing = [p.pid for p in q.passages if chosen not in p.p_abs]
        if missing:
            raise InputError(f"{where}: passage {missing[0]!r} has no models_info[{chosen!r}].no_res_prob (annotate it first)")
        if "relevant" not in fields:
            raise InputError(f"{where}: a passage has no 'is_relevant' (judge relevance first: udcg judge relevance)")
        fields["p_abs"] = [p.p_abs[chosen] for p in q.passages]  # utilities: udcg.flows.scoring
    grades = [p.grade for p in q.passages]
    if all(g is not None for g in grades):
        fields["grades"] = grades
        fields["corpus_grades"] = [grades.count(g) for g in range(1, 6)]  # the item's passages are its pool
    if "outcome" in obj:
        fields["outcome"] = obj["outcome"]
    if "relevant" not in fields:
        raise InputError(f"{where}: nothing to score (every passage needs 'is_relevant', and models_info for UDCG; "
                         "udcg judge relevance --write-authors adds it)")
    return q.qid, _cut(fields, k_cut, where)


def read_context_rows(path: str, model: str | None = None, k: int | None = None) -> ContextRows:
    """The contexts of a file as checked fields; utilities from ``p_abs`` are added by
    ``udcg.flows.scoring.read_contexts``, which is what commands use."""
    if k is not None and k <= 0:
        raise InputError(f"--k {k}: must be a positive integer")
    records = read_records(path)
    rows = ContextRows([], [], [], [])
    seen: dict[tuple, str] = {}
    for where, obj in records:
        if "passages" not in obj and ("ctxs" in obj or "positive_ctxs" in obj):
            raise InputError(f"{where}: a retrieval data set row ('ctxs'), not a context with utilities: run "
                             f"'udcg annotate {path} -o annotated.json --model MODEL' first (it reads this format "
                             "and adds the utilities), then score annotated.json")
        for name in ("metrics", "udcg"):  # score adds to these objects: anything else cannot be kept
            if name in obj and not isinstance(obj[name], dict):
                raise InputError(f"{where}: field {name!r} must be an object {{name: value}}, got "
                                 f"{type(obj[name]).__name__} (remove it; udcg score writes it)")
        qid, fields = (_from_authors(obj, where, model, k) if "passages" in obj else _from_context(obj, where, k))
        cid = None if "passages" in obj else obj.get("cid")
        if "passages" in obj or cid is not None:
            key = (qid, str(cid))
            if key in seen:
                what = f"example_id {qid!r}" if cid is None else f"(qid, cid) = ({qid!r}, {str(cid)!r})"
                raise InputError(f"{where}: duplicate {what}, first at {seen[key]} (ids must be unique; remove or rename one)")
            seen[key] = where
        rows.where.append(where)
        rows.raw.append(obj)
        rows.qid.append(qid)
        rows.fields.append(fields)
    return rows
