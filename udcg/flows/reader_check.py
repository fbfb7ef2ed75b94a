"""``udcg reader-check`` and ``udcg.reader_check``: can the reader of a utilities folder measure
distraction, and on which queries? Computed from the p_abs already there (no model time) by
``metrics.reader_check``; ``udcg annotate --run`` prints it at its end and writes it to the folder's
``meta.json``. When the verdict hangs on the unjudged labels, the check names the ``udcg annotate``
command that judges them (``judge_command``: the folder's own annotate command, from the inputs its
meta.json records, with ``--unjudged judge --judge rules``, or ``--judge MODEL`` where answer
containment would relabel none of the unjudged pairs: ``suggested_judge``) and how long that takes;
pairs judged by the rule the qrels agree with carry ``labels_caveat``."""

from __future__ import annotations

import shlex
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import replace
from pathlib import Path

from udcg.annotate.utilities import UtilityRecord, load_utilities, recorded_meta
from udcg.errors import InputError
from udcg.flows.annotate_options import AnnotateOptions, default_estimator
from udcg.flows.reader_check_options import ReaderCheckOptions
from udcg.io.files import atomic_write_text
from udcg.metrics.reader_check import ReaderCheck, ReaderPairs, check_reader_pairs
from udcg.progress import duration
from udcg.records import query_key

UNJUDGED = "unjudged-irrelevant"  # the relevance source of a pair the qrels do not judge


def check_records(records: Iterable[UtilityRecord], model: str, estimator: str,
                  options: ReaderCheckOptions | None = None) -> ReaderCheck:
    """The reader check of utility records (one reader and estimator), taken in the canonical order
    (query, then document: ``query_key``) so that no mean or interval depends on the file's order;
    ``options``: the interval's resamples and seed (``ReaderCheckOptions``, those of ``udcg reader-check``)."""
    o = options or ReaderCheckOptions()
    recs = sorted(records, key=lambda r: (query_key(r.qid), r.docid))
    pairs = ReaderPairs([r.p_abs for r in recs], [r.relevant for r in recs],
                        [r.relevance_source != UNJUDGED for r in recs], [r.qid for r in recs], [r.docid for r in recs])
    return check_reader_pairs(pairs, model=model, estimator=estimator, n_boot=o.n_boot, seed=o.seed)


FOLDER = ("a utilities folder is what udcg annotate --run ... -o FOLDER writes: its utilities.jsonl holds each pair's "
          "p_abs, relevance and where the relevance came from, which the check needs")


def check_utilities(path: str | Path, options: ReaderCheckOptions | None = None) -> ReaderCheck:
    """The reader check of a utilities folder (``udcg annotate --run``'s) or its utilities.jsonl; a
    ``qid 0 docid value`` file (qrels, utilities.qrels) is refused: it keeps no p_abs of its own
    (a utility of 0 could be either class) nor whether a pair was judged."""
    p = Path(path)
    if p.is_file() and not p.name.lower().endswith((".jsonl", ".json", ".jsonl.gz", ".json.gz")):
        raise InputError(f"{path}: not a utilities folder or utilities.jsonl ({FOLDER}; give that folder)")
    utilities = load_utilities(path)
    if not len(utilities):
        raise InputError(f"{path}: no annotated pairs (run udcg annotate --run ... -o {path} first)")
    check = check_records(utilities.records.values(), utilities.model, utilities.estimator, options)
    folder = p if p.is_dir() else p.parent
    return with_judge_command(check, folder, recorded_meta(folder) or {})


def reader_flags(api: bool, estimator: str, prompt: str, sampling: Mapping[str, object]) -> list[str]:
    """The annotate flags that make a rerun's reader settings those of the folder (the cache's
    provenance): the estimator and prompt where not the default, the sampling settings with them."""
    flags = [] if estimator == default_estimator(api) else ["--estimator", estimator]
    flags += [] if prompt == AnnotateOptions.prompt else ["--prompt", prompt]
    for name, value in sampling.items():
        if value is not None:
            flags += [f"--{name.replace('_', '-')}", str(value)]
    return flags


def judge_command(folder: str | Path, meta: Mapping, judge: str | None = None, *, runs: Sequence[str] | None = None,
                  depth: int | None = None) -> str:
    """The ``udcg annotate`` command(s) that judge the folder's unjudged pairs (one per run depth), from
    the inputs its meta.json records; ``runs`` and ``depth``: those of these run files' top ``depth``
    only (compare's pair of runs; the corpus and model then, where the folder does not record its
    inputs, from what it records of them, else CORPUS and MODEL). ``judge``: ``suggested_judge``
    where not given. "" when the folder records no run files and none are given (written by an
    earlier version, or by the Python API on runs held in memory)."""
    inputs = meta.get("inputs") if isinstance(meta.get("inputs"), dict) else {}
    recorded = meta.get("runs")
    if runs is not None:
        by_depth = {int(depth or 10): [str(r) for r in runs]}
    elif isinstance(recorded, dict) and recorded and all(isinstance(r, dict) and r.get("file") for r in recorded.values()) \
            and inputs.get("corpus") and inputs.get("model"):
        by_depth: dict[int, list[str]] = {}
        for run in recorded.values():
            by_depth.setdefault(int(run["depth"]), []).append(str(run["file"]))
    else:
        return ""
    corpus = inputs.get("corpus") or meta.get("collection") or "CORPUS"
    model = inputs.get("model") or meta.get("model") or "MODEL"
    commands = []
    for k, files in sorted(by_depth.items()):
        argv = ["udcg", "annotate", "--corpus", str(corpus), *[a for f in files for a in ("--run", f)], "--depth", str(k)]
        for name in ("queries", "qrels", "answers", "limit"):
            if inputs.get(name) is not None:
                argv += [f"--{name}", str(inputs[name])]
        argv += ["--model", str(model), *(["--api-base", "URL"] if inputs.get("api") else []),
                 *[str(f) for f in inputs.get("flags", [])], "-o", str(folder), "--unjudged", "judge",
                 "--judge", judge or suggested_judge(meta)]
        commands.append(shlex.join(argv))
    return " && ".join(commands)


def _containment(meta: Mapping) -> dict:
    """What annotate recorded of answer containment on its pairs (``label_checks.containment_record``)."""
    record = meta.get("containment")
    return record if isinstance(record, dict) else {}


def rules_add_nothing(meta: Mapping) -> bool:
    """Whether ``--judge rules`` (answer containment) would relabel none of the unjudged pairs: no
    unjudged pair of the folder's last annotate holds an answer alias."""
    record = _containment(meta)
    return bool(record.get("unjudged")) and record.get("unjudged_contained") == 0


def qrels_agree_with_containment(meta: Mapping) -> bool:
    """Whether the qrels agree with answer containment on every pair they judge (at least one of
    them relevant): qrels made by containment, or indistinguishable from it on these pairs."""
    record = _containment(meta)
    return bool(record.get("qrels_relevant")) and record.get("qrels_agree") == record.get("qrels_pairs")


def suggested_judge(meta: Mapping) -> str:
    """``rules``, unless answer containment would relabel none of the unjudged pairs (qrels made by
    containment: the rule that made them, applied again): then a model, the folder's reader."""
    if not rules_add_nothing(meta):
        return "rules"
    inputs = meta.get("inputs") if isinstance(meta.get("inputs"), dict) else {}
    return str(inputs.get("model") or meta.get("model") or "MODEL")


def judge_estimate(n_pairs: int, meta: Mapping) -> str:
    """How long judging ``n_pairs`` takes: by rules, no model; by a model, one generation a pair,
    each at least the one forward pass a reader's p_abs costs, so at least ``n_pairs`` at the rate the
    folder's reader was measured at (its meta.json's model time, load included). Where containment
    would relabel none of them (``rules_add_nothing``), says so instead of offering the rules."""
    timed = meta.get("model_time") if isinstance(meta.get("model_time"), dict) else {}
    pairs, seconds = timed.get("pairs") or 0, timed.get("seconds") or 0.0
    if rules_add_nothing(meta):
        head = (f"{n_pairs} pairs to judge with --judge {suggested_judge(meta)}, a generated label a pair; not --judge "
                "rules: answer containment relabels none of them (none holds an answer alias)"
                + (", and the qrels agree with containment on every pair they judge: the rule that made them"
                   if qrels_agree_with_containment(meta) else ""))
    else:
        head = (f"{n_pairs} pairs to judge: --judge rules (answer containment) runs no model; --judge MODEL generates "
                "a label a pair")
    if not (pairs and seconds > 0):
        return f"{head} (no reader rate recorded in this folder to time it)"
    rate = pairs / seconds
    return (f"{head}{'; that takes' if rules_add_nothing(meta) else ','} at least {duration(n_pairs / rate)} with a "
            "judge of the reader's size (this folder's reader: "
            f"{rate:.2f} pairs/s over {pairs} pairs, one forward pass a pair; a judge also generates its label)")


def labels_caveat(meta: Mapping, sources: Mapping | None = None) -> str:
    """Where pairs were judged by ``--judge rules`` and the qrels agree with answer containment on
    every pair they judge: that those labels are the qrels' own rule applied again, not an
    independent judgment, with the model judge's command; else ""."""
    sources = sources if sources is not None else meta.get("relevance_sources") or {}
    judged = int(sources.get("judge", 0)) if isinstance(sources, Mapping) else 0
    if not judged or _containment(meta).get("judge") != "rules" or not qrels_agree_with_containment(meta):
        return ""
    inputs = meta.get("inputs") if isinstance(meta.get("inputs"), dict) else {}
    model = str(inputs.get("model") or meta.get("model") or "MODEL")
    record = _containment(meta)
    return (f"the {judged} pairs labelled by annotate's judge were judged by --judge rules, answer containment, and "
            f"the qrels agree with containment on all {record.get('qrels_pairs')} pairs they judge in the last annotate "
            "call (made by it, or "
            "indistinguishable from it): the same rule applied again, not an independent judgment (0 unjudged does not "
            f"mean judged); a model judges them: rerun with --judge {model}")


def with_judge_command(check: ReaderCheck, folder: str | Path, meta: Mapping) -> ReaderCheck:
    """``check`` with the command that judges its unjudged pairs and its time, when its verdict
    hangs on them (``ReaderCheck.hangs_on_labels``), and ``labels_caveat``."""
    check = replace(check, labels_caveat=labels_caveat(meta))
    if not check.hangs_on_labels:
        return check
    return replace(check, judge_command=judge_command(folder, meta), judge_estimate=judge_estimate(check.n_unjudged, meta))


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
    record = (recorded_meta(utilities) or {}).get("reader_check")
    try:
        return ReaderCheck.from_dict(record) if isinstance(record, dict) else None
    except (ValueError, AttributeError, TypeError, InputError):
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
            f"{check.verdict_text()}.{check.label_note()}",)


def check_all(paths: Sequence[str | Path], options: ReaderCheckOptions | None = None) -> list[ReaderCheck]:
    """``check_utilities`` of each folder or file (one reader and estimator each), with ``options``."""
    if not paths:
        raise InputError("give one or more utilities folders (udcg annotate --run ... -o FOLDER)")
    return [check_utilities(p, options) for p in paths]
