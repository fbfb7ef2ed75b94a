"""The utility file of a collection: one signed utility per annotated (query, document) pair.

``udcg annotate --run`` writes a folder::

    utilities/
      annotations.jsonl   append-only resume cache: p_abs per pair (model, estimator, prompt, interval)
      utilities.jsonl     one record per pair: qid, docid, p_abs, relevant, relevance_source, utility,
                          model, estimator, prompt_version, ci_low, ci_high, n_samples, note
      utilities.qrels     the same utilities TREC-qrels-like: ``qid 0 docid utility``
      meta.json           what produced it (model, estimator, prompt, runs, depth, counts, version)

``load_utilities`` accepts that folder, its ``utilities.jsonl``, or any ``qid 0 docid utility``
file (then model and prompt are unknown). ``utility = R * (1 - p_abs)``, R = +1 for a relevant
document, -1 otherwise (Eq. 2), so a relevant document gives u in [0, 1] and an irrelevant one
u in [-1, 0].
"""

from __future__ import annotations

import json
import math
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path

from udcg.errors import InputError
from udcg.io.files import atomic_write_json, atomic_write_jsonl, atomic_write_text, read_records
from udcg.metrics.udcg import utility
from udcg.records import Estimate

ANNOTATIONS = "annotations.jsonl"
UTILITIES = "utilities.jsonl"
QRELS = "utilities.qrels"
META = "meta.json"
RELEVANCE_SOURCES = ("qrels", "judge", "unjudged-irrelevant", "given")


# A utilities.jsonl record's keys, in the order written (then "utility"): the file's format,
# whatever the order of the record's fields. The estimate's estimator_used and censored are not written.
RECORD_KEYS = ("qid", "docid", "p_abs", "relevant", "relevance_source", "model", "estimator", "prompt_version",
               "ci_low", "ci_high", "n_samples", "note")


@dataclass(frozen=True, slots=True, kw_only=True)
class UtilityRecord(Estimate):
    """The utility of one (query, document) pair for one reader model and prompt: its p_abs
    ``Estimate`` and relevance."""

    qid: str
    docid: str
    relevant: bool
    relevance_source: str  # qrels | judge | unjudged-irrelevant | given
    model: str = ""
    estimator: str = ""
    prompt_version: str = ""

    @property
    def utility(self) -> float:
        return utility(self.relevant, self.p_abs)

    def to_dict(self) -> dict:
        return {**{key: getattr(self, key) for key in RECORD_KEYS}, "utility": self.utility}


@dataclass(frozen=True)
class Utilities:
    """Utilities by query and document, and what produced them (empty strings when unknown)."""

    records: Mapping[tuple[str, str], UtilityRecord]
    source: str
    model: str = ""
    prompt_version: str = ""
    estimator: str = ""

    def as_dict(self) -> dict[str, dict[str, float]]:
        """``{qid: {docid: utility}}``, the shape of a qrels dict."""
        out: dict[str, dict[str, float]] = {}
        for (qid, docid), rec in self.records.items():
            out.setdefault(qid, {})[docid] = rec.utility
        return out

    def __len__(self) -> int:
        return len(self.records)

    def check_for(self, reader: str | None = None, prompt_version: str | None = None) -> None:
        """Refuse utilities made for another reader model or prompt than the one asked for."""
        for field, want in (("model", reader), ("prompt_version", prompt_version)):
            have = getattr(self, field)
            if want and have and have != want:
                raise InputError(f"{self.source}: utilities were made with {field} {have!r}, but {want!r} was asked "
                                 f"(annotate with {want!r}, or drop the option to use these)")
            if want and not have:
                raise InputError(f"{self.source}: the file does not say which {field} made these utilities, so it "
                                 f"cannot be checked against {want!r} (use the utilities.jsonl of udcg annotate)")


def _float(value: object, where: str, field: str, low: float, high: float) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value) \
            or not low <= value <= high:
        raise InputError(f"{where}: field {field!r} = {value!r} must be a number in [{low:g}, {high:g}]")
    return float(value)


def _record(obj: dict, where: str) -> UtilityRecord:
    def text(field: str) -> str:
        value = obj.get(field)
        if not isinstance(value, (str, int)) or isinstance(value, bool) or str(value) == "":
            raise InputError(f"{where}: field {field!r} is missing or not an id (every record needs qid and docid)")
        return str(value)

    relevant = obj.get("relevant")
    if not isinstance(relevant, bool):
        raise InputError(f"{where}: field 'relevant' must be true or false, got {relevant!r}")
    p_abs = _float(obj.get("p_abs"), where, "p_abs", 0.0, 1.0)
    if "utility" in obj:
        given = _float(obj["utility"], where, "utility", -1.0, 1.0)
        if abs(given - utility(relevant, p_abs)) > 1e-9:
            raise InputError(f"{where}: utility {given!r} is not R * (1 - p_abs) = {utility(relevant, p_abs)!r} "
                             "(fix the record, or drop 'utility' to have it recomputed)")
    fields = {f: obj.get(f) for f in ("model", "estimator", "prompt_version", "note")}
    return UtilityRecord(qid=text("qid"), docid=text("docid"), p_abs=p_abs, relevant=relevant,
                         relevance_source=str(obj.get("relevance_source", "given")),
                         ci_low=obj.get("ci_low"), ci_high=obj.get("ci_high"), n_samples=obj.get("n_samples"),
                         **{f: str(v) if v is not None else "" for f, v in fields.items()})


def _one(values: Iterable[str], source: str, field: str) -> str:
    found = sorted({v for v in values if v})
    if len(found) > 1:
        raise InputError(f"{source}: records of several {field}s ({', '.join(map(repr, found))}); keep one per file")
    return found[0] if found else ""


def _from_jsonl(path: Path) -> Utilities:
    records: dict[tuple[str, str], UtilityRecord] = {}
    for where, obj in read_records(path):
        rec = _record(obj, where)
        if (rec.qid, rec.docid) in records:
            raise InputError(f"{where}: pair ({rec.qid!r}, {rec.docid!r}) appears twice (keep one record per pair)")
        records[rec.qid, rec.docid] = rec
    vals = list(records.values())
    return Utilities(records, str(path), _one((r.model for r in vals), str(path), "model"),
                     _one((r.prompt_version for r in vals), str(path), "prompt_version"),
                     _one((r.estimator for r in vals), str(path), "estimator"))


def _from_qrels(path: Path) -> Utilities:
    from udcg.io.trec import read_qrels

    records = {}
    for qid, docs in read_qrels(path).items():
        for docid, u in docs.items():
            if not -1.0 <= u <= 1.0:
                raise InputError(f"{path}: utility {u!r} of ({qid!r}, {docid!r}) is outside [-1, 1] "
                                 "(a utility file holds R * (1 - p_abs))")
            records[qid, docid] = UtilityRecord(qid=qid, docid=docid, p_abs=1.0 - abs(u), relevant=u > 0,
                                                relevance_source="given")
    return Utilities(records, str(path))


def load_utilities(path: str | Path) -> Utilities:
    """Utilities from an annotate output folder, a utilities JSONL, or a ``qid 0 docid utility`` file.

    From the qrels-like file a utility of exactly 0 reads as an irrelevant document the reader
    always abstains on (the sign is all the file keeps)."""
    path = Path(path)
    if path.is_dir():
        if not (path / UTILITIES).is_file():
            raise InputError(f"{path}: no {UTILITIES} in this folder (give the folder udcg annotate --run wrote, "
                             "or a utilities file)")
        path = path / UTILITIES
    if not path.exists():
        raise InputError(f"{path}: no such utilities file or folder (run udcg annotate --run ... -o FOLDER first)")
    name = path.name.lower()
    if name.endswith((".jsonl", ".json", ".jsonl.gz", ".json.gz")):
        return _from_jsonl(path)
    return _from_qrels(path)


def format_utility_qrels(records: Iterable[UtilityRecord]) -> str:
    return "".join(f"{r.qid} 0 {r.docid} {r.utility!r}\n" for r in records)


def write_utilities(folder: str | Path, records: Mapping[tuple[str, str], UtilityRecord], meta: dict) -> None:
    """Write utilities.jsonl, utilities.qrels and meta.json atomically (each file whole or not at all)."""
    folder = Path(folder)
    ordered = [records[key] for key in sorted(records)]
    atomic_write_jsonl(folder / UTILITIES, [r.to_dict() for r in ordered])
    atomic_write_text(folder / QRELS, format_utility_qrels(ordered))
    atomic_write_json(folder / META, meta)


def recorded_meta(utilities: str | Path) -> dict | None:
    """What ``write_utilities`` recorded with a utilities folder (for a file, the meta.json beside
    it): the parsed meta.json ({} when it holds no object), or None when there is none to read."""
    path = Path(utilities)
    try:
        meta = json.loads(((path if path.is_dir() else path.parent) / META).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    return meta if isinstance(meta, dict) else {}
