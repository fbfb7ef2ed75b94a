"""``udcg reader-check`` and ``udcg.reader_check``: can the reader of a utilities folder measure
distraction, and on which queries? Computed from the p_abs already there (no model time) by
``metrics.reader_check``; ``udcg annotate --run`` prints it at its end and writes it to the folder's
``meta.json``."""

from __future__ import annotations

import json
from collections.abc import Iterable, Sequence
from pathlib import Path

from udcg.annotate.utilities import META, UtilityRecord, load_utilities
from udcg.errors import InputError
from udcg.io.files import atomic_write_text
from udcg.metrics.reader_check import ReaderCheck, reader_check
from udcg.records import query_key

UNJUDGED = "unjudged-irrelevant"  # the relevance source of a pair the qrels do not judge


def check_records(records: Iterable[UtilityRecord], model: str = "", estimator: str = "", *, n_boot: int = 1000,
                  seed: int = 0) -> ReaderCheck:
    """The reader check of utility records (one reader and estimator), taken in the canonical order
    (query, then document: ``query_key``) so that no mean or interval depends on the file's order."""
    recs = sorted(records, key=lambda r: (query_key(r.qid), r.docid))
    return reader_check([r.p_abs for r in recs], [r.relevant for r in recs],
                        [r.relevance_source != UNJUDGED for r in recs], [r.qid for r in recs],
                        model=model, estimator=estimator, n_boot=n_boot, seed=seed)


def check_utilities(path: str | Path, *, n_boot: int = 1000, seed: int = 0) -> ReaderCheck:
    """The reader check of a utilities folder (``udcg annotate --run``'s) or file."""
    utilities = load_utilities(path)
    if not len(utilities):
        raise InputError(f"{path}: no annotated pairs (run udcg annotate --run ... -o {path} first)")
    return check_records(utilities.records.values(), utilities.model, utilities.estimator, n_boot=n_boot, seed=seed)


QUERY_COLUMNS = ("qid", "relevant", "irrelevant", "mean_p_abs_relevant", "mean_p_abs_irrelevant",
                 "answered_irrelevant", "abstained_relevant")


def write_query_checks(output: str | Path, checks: dict[str, ReaderCheck]) -> None:
    """One TSV with a header: a row per query of each check (``QUERY_COLUMNS``, NaN as nan; the
    canonical query order), with a leading ``utilities`` column naming the folder when there are several."""
    several = len(checks) > 1
    lines = ["\t".join((("utilities",) if several else ()) + QUERY_COLUMNS)]
    for folder, check in checks.items():
        lines += ["\t".join(([folder] if several else []) + [c.qid, str(c.n_relevant), str(c.n_irrelevant),
                            repr(c.mean_p_relevant), repr(c.mean_p_irrelevant), str(c.answered_irrelevant),
                            str(c.abstained_relevant)]) for c in check.queries]
    atomic_write_text(output, "\n".join(lines) + "\n")


def recorded_check(utilities: str | Path) -> ReaderCheck | None:
    """The reader check ``udcg annotate --run`` recorded with a utilities folder (its ``meta.json``;
    for a file, the meta.json beside it), or None: nothing recorded (a hand-made file), or a record
    this version cannot read."""
    path = Path(utilities)
    meta = (path if path.is_dir() else path.parent) / META
    try:
        record = json.loads(meta.read_text(encoding="utf-8")).get("reader_check")
        return ReaderCheck.from_dict(record) if isinstance(record, dict) else None
    except (OSError, ValueError, AttributeError, TypeError, InputError):
        return None


def reader_note(utilities: object, rows: Sequence) -> tuple[str, ...]:
    """With a UDCG row among ``rows`` and a utilities folder or file: the reader check recorded with
    it (``recorded_check``), in one line for a footer or stderr; else nothing."""
    if not isinstance(utilities, (str, Path)) or not any(str(r).startswith("UDCG") for r in rows):
        return ()
    check = recorded_check(utilities)
    if check is None:
        return ()
    return (f"UDCG's reader ({check.who()}), checked on its "
            f"utilities' {check.n_queries} queries when they were written (per query: udcg reader-check): "
            f"{check.verdict_text()}.",)


def check_all(paths: Sequence[str | Path], *, n_boot: int = 1000, seed: int = 0) -> list[ReaderCheck]:
    """``check_utilities`` of each folder or file (one reader and estimator each)."""
    if not paths:
        raise InputError("give one or more utilities folders (udcg annotate --run ... -o FOLDER)")
    return [check_utilities(p, n_boot=n_boot, seed=seed) for p in paths]
