"""``udcg compare`` and ``udcg.compare``: score the runs, add the judged answers' outcome rates when
given, and compare (``udcg.metrics.compare.compare_scores``).

Answer outcomes (``answers=``: the output of ``udcg answer`` + ``udcg judge answer``, a contexts
JSONL whose lines hold ``qid``, ``cid`` and ``outcome``): for each compared run, the lines whose
``cid`` is the run's name (``udcg answer`` names a run's context by the run file's name, as
``compare`` does; ``sample-i`` contexts and other runs' lines are left out) give per query 1 or 0
for each of ``correct``, ``abstained`` and ``wrong`` (NaN where the run has no judged answer for
the query: no context of k documents, or an unparseable judgement). These three rows get the same
paired tests, intervals, detectable differences and family rule as the metrics; a run beats
another on more correct and on fewer wrong answers, and on abstentions neither way.

Refused, with the file and line: a line without ``qid``/``cid``, a file without outcomes (not judged
yet), an outcome that is not correct/abstained/wrong/null, a duplicate (qid, cid), an answer of a
compared run for a query that is not compared (the file was made for other queries), and a compared
run without any judged answer.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any

import numpy as np

from udcg.errors import InputError
from udcg.flows.reader_check import reader_note
from udcg.flows.label_checks import fragilities, label_block
from udcg.flows.run_options import CompareOptions
from udcg.flows.run_scores import Run, RunScores, scored_runs
from udcg.io.files import read_records
from udcg.metrics.compare import Comparison, compare_scores
from udcg.metrics.measures import Measure
from udcg.records import OUTCOME_LABELS

# The answer-outcome rows are rates this flow makes, not measures of the registry: their direction is
# declared here; a measure's direction is its definition's (``Measure.direction``, read by compare_scores).
OUTCOME_DIRECTION = {"correct": 1, "abstained": 0, "wrong": -1}  # more correct, fewer wrong; abstaining: neither
EXTENSIONS = {".md": "markdown", ".csv": "csv", ".json": "json", ".tex": "latex"}  # -o's, when --format is not given
FIX = "give the output of `udcg judge answer` on `udcg answer`'s contexts of these runs"


def _outcome(obj: dict, where: str) -> str | None:
    if "outcome" not in obj:
        raise InputError(f"{where}: no field 'outcome': these answers are not judged yet (run `udcg judge answer "
                         "ANSWERS -o judged.jsonl` and pass judged.jsonl)")
    label = obj["outcome"]
    if label is not None and label not in OUTCOME_LABELS:
        raise InputError(f"{where}: field 'outcome' = {label!r}: expected one of {', '.join(OUTCOME_LABELS)} or null "
                         f"({FIX})")
    return label


def answer_rates(path: str | Path, runs: Sequence[str], qids: Sequence[str]
                 ) -> tuple[dict[str, dict[str, np.ndarray]], str]:
    """``{run: {"correct"|"abstained"|"wrong": 0/1 per query of qids, NaN = no judged answer}}`` and
    a footer sentence saying what the rows are and how many queries each run has (module doc)."""
    position = {q: i for i, q in enumerate(qids)}
    wanted = set(runs)
    labels: dict[str, dict[int, str | None]] = {r: {} for r in runs}
    seen: dict[tuple[str, str], str] = {}
    cids: dict[str, None] = {}
    for where, obj in read_records(path):
        for key in ("qid", "cid"):
            if not isinstance(obj.get(key), (str, int)) or isinstance(obj.get(key), bool):
                raise InputError(f"{where}: field {key!r} is missing or not a string ({FIX})")
        qid, cid = str(obj["qid"]), str(obj["cid"])
        label = _outcome(obj, where)
        if (qid, cid) in seen:
            raise InputError(f"{where}: duplicate (qid, cid) = ({qid!r}, {cid!r}), first at {seen[qid, cid]} "
                             "(one judged answer per query and run)")
        seen[qid, cid] = where
        cids[cid if not cid.startswith("sample-") else "sample-*"] = None
        if cid not in wanted:
            continue
        if qid not in position:
            raise InputError(f"{where}: query {qid!r} (run {cid!r}) is not among the {len(qids)} compared queries "
                             "(the qrels' queries): these answers were made for other queries; answer the runs on "
                             "the compared queries (udcg answer --queries, --limit)")
        labels[cid][position[qid]] = label
    for run in runs:
        if not labels[run]:
            found = ", ".join(list(cids)[:8]) or "none"
            raise InputError(f"{path}: no judged answers for run {run!r} (answers are matched by cid = the run file's "
                             f"name; the file's cids: {found}); run `udcg answer --run` with this run, then `udcg "
                             "judge answer`, or leave the run out")
    out: dict[str, dict[str, np.ndarray]] = {}
    counts = []
    for run in runs:
        out[run] = {}
        for name in OUTCOME_LABELS:
            v = np.full(len(qids), np.nan)
            for i, label in labels[run].items():
                if label is not None:
                    v[i] = float(label == name)
            out[run][name] = v
        unparseable = sum(label is None for label in labels[run].values())
        counts.append(f"{run} {len(labels[run]) - unparseable} of {len(qids)}"
                      + (f" ({unparseable} unparseable left out)" if unparseable else ""))
    note = (f"correct, abstained, wrong: the share of queries whose answer to the run's context, judged in "
            f"{Path(path).name}, has that outcome (0 or 1 per query); judged queries: {', '.join(counts)}"
            + ("" if all(len(labels[r]) == len(qids) for r in runs) else
               " (--judged-only puts every row, the measures included, on the queries judged for every run)")
            + "; their MDD is the difference in correct rate these queries could detect (`udcg answer --detect D` "
            "gives the queries for a difference D).")
    return out, note


def _ranges(measures: Sequence[Measure | str]) -> dict[str, float]:
    """The width of each measure's range where known: 1 for the measures in [0, 1] and the rates."""
    out = {}
    for m in measures:
        if m in OUTCOME_LABELS or (isinstance(m, Measure) and m.unit):
            out[m] = 1.0
    return out


def _judged_only(values: dict[str, dict[str, np.ndarray]], qids: Sequence[str]) -> tuple[dict, str, tuple]:
    """Every run's every measure restricted to the queries where every run has a judged answer (and
    those queries)."""
    keep = np.all([~np.isnan(v["correct"]) for v in values.values()], axis=0)
    if not keep.any():
        raise InputError("--judged-only: no query has a judged answer for every compared run (answer the runs on the "
                         "same queries: udcg answer --sample N --seed S with every run)")
    note = (f"--judged-only: every row (the measures included) on the {int(keep.sum())} of {len(qids)} queries where "
            "every run has a judged answer.")
    kept = tuple(q for q, k in zip(qids, keep) if k)
    return {r: {m: v[keep] for m, v in by_m.items()} for r, by_m in values.items()}, note, kept


def compare_runs(runs: Mapping[str, Run | str | Path], options: CompareOptions
                 ) -> tuple[Comparison, dict[str, RunScores]]:
    """The comparison of ``runs`` (``{name: run}``, two or more) and the scores behind it, with
    ``options`` (``CompareOptions``; its ``runs`` and outputs are the command's). With
    ``judged_only`` (needs ``answers``) every row is on the queries every run has a judged answer for;
    ``ties`` (one of ``metrics``, e.g. nDCG@5) adds every other row on each run pair's queries where
    the two runs tie on it (``compare_scores``); ``equivalence`` (a margin for every row, a {row: margin}
    dict or its text ``"UDCG@5=0.005,nDCG@5=0.02"``) adds each pair's equivalence test and decision;
    ``baseline`` (a run's name, its file as given, or its index) compares only each other run with it."""
    o = options
    if len(runs) < 2:
        raise InputError(f"compare needs at least two runs, got {len(runs)} (use score for one)")
    against = None if o.baseline is None else baseline_of(o.baseline, runs)
    if o.judged_only and o.answers is None:
        raise InputError("--judged-only restricts the table to the queries with judged answers: give --answers too")
    scores = scored_runs(runs, o, keep_pairs=True)
    values = {name: dict(s.values) for name, s in scores.items()}
    notes: tuple[str, ...] = ()
    qids = next(iter(scores.values())).qids
    if o.answers is not None:
        rates, note = answer_rates(o.answers, list(scores), qids)
        for name, by_measure in values.items():
            by_measure.update(rates[name])
        notes = (note,)
        if o.judged_only:
            values, only, qids = _judged_only(values, qids)
            notes = (*notes, only)
    rows = list(next(iter(values.values())))
    notes = (*notes, *reader_note(o.utilities, rows))
    tied_on = None if o.ties is None else _tie_measure(o.ties, rows)
    margins = None if o.equivalence is None else margins_of(o.equivalence, rows)
    cmp = compare_scores(values, tests=o.tests(), notes=notes, direction=OUTCOME_DIRECTION, ranges=_ranges(rows),
                         ties=tied_on, equivalence=margins, baseline=against)
    cmp = replace(cmp, qids=tuple(qids), per_query=values)
    files = {name: run for name, run in runs.items() if isinstance(run, (str, Path))}
    return with_label_checks(cmp, scores, files, o.utilities, fragile=not o.judged_only), scores


def with_label_checks(cmp: Comparison, scores: dict[str, RunScores], runs: Mapping[str, Any], utilities: Any, *,
                      fragile: bool = True) -> Comparison:
    """``cmp`` with the label block at the end of its footer (``flows.label_checks``), and each
    run's ``labels`` holding the fragility of every significant UDCG difference (``fragile``; not
    with ``--judged-only``, whose rows stand on a subset of the queries)."""
    check = next(iter(scores.values())).labels
    if check is None:
        return cmp
    check = replace(check, fragility=tuple(fragilities(cmp, scores)) if fragile else ())
    for s in scores.values():
        s.labels, s.top = check, None
    return replace(cmp, notes=(*cmp.notes, *label_block(check, runs, utilities)))


def margins_of(spec: float | str | Mapping[str, float], rows: list) -> dict:
    """{row: margin} from ``--equivalence``: one number for every row, or ``ROW=MARGIN`` pairs (a
    measure in any spelling, or correct / abstained / wrong); each margin a positive number."""
    from udcg.metrics.measures import parse_measure

    def margin(value: Any, where: str) -> float:
        try:
            m = float(value)
        except (TypeError, ValueError, OverflowError):
            m = math.nan
        if isinstance(value, bool) or not 0 < m < math.inf:
            raise InputError(f"--equivalence {where}: the margin must be a positive number (the smallest difference "
                             "that matters to you, e.g. 0.01 or UDCG@5=0.005,nDCG@5=0.02)")
        return m

    if isinstance(spec, Mapping):
        items = list(spec.items())
    elif isinstance(spec, str) and "=" in spec:
        parts = [part.strip() for part in spec.split(",") if part.strip()]
        bad = [part for part in parts if "=" not in part]
        if bad:
            raise InputError(f"--equivalence {bad[0]}: give ROW=MARGIN for every row named (e.g. "
                             "UDCG@5=0.005,nDCG@5=0.02), or one number for every row")
        items = [part.split("=", 1) for part in parts]
    else:  # one margin for every row
        try:
            if isinstance(spec, str):
                float(spec)
        except ValueError:  # a word, not a number: a ROW=MARGIN pair without its margin
            raise InputError(f"--equivalence {_shown(spec)}: give one number for every row (e.g. 0.01) or ROW=MARGIN "
                             "pairs (UDCG@5=0.005,nDCG@5=0.02)") from None
        every = margin(spec, _shown(spec))
        return {row: every for row in rows}
    out = {}
    for name, value in items:
        name = str(name).strip()
        key = name if name in OUTCOME_DIRECTION else parse_measure(name, "--equivalence")
        if key not in rows:
            raise InputError(f"--equivalence {name}: not one of the rows compared ({', '.join(map(str, rows))})")
        out[key] = margin(value, f"{_shown(name)}={_shown(value)}")
    if not out:
        raise InputError("--equivalence: no margin given (e.g. 0.01 or UDCG@5=0.005,nDCG@5=0.02)")
    return out


def baseline_of(baseline: str | int | Path, runs: Mapping[str, Any]) -> str:
    """The name of the run ``baseline`` names: a run's name, its file as given (``--run``), or its
    index in ``runs`` (PyTerrier's ``baseline=0``)."""
    names = list(runs)
    if isinstance(baseline, int) and not isinstance(baseline, bool):
        if not -len(names) <= baseline < len(names):
            raise InputError(f"--baseline {baseline}: no run at that index ({len(names)} runs: 0 to {len(names) - 1})")
        return names[baseline]
    if str(baseline) in runs:
        return str(baseline)
    files = [name for name, run in runs.items() if isinstance(run, (str, Path)) and Path(run) == Path(baseline)]
    if files:
        return files[0]
    raise InputError(f"--baseline {_shown(str(baseline))}: not one of the runs compared ({', '.join(names)}); give a "
                     "run's name or its file as given to --run (in Python also its index, e.g. baseline=0)")


def _tie_measure(text: str, measures: list) -> Measure:
    """The measure named by ``--ties``, which must be one of the compared measures."""
    from udcg.metrics.measures import parse_measure

    measure = parse_measure(text, "--ties")
    if measure not in measures:
        raise InputError(f"--ties {text}: not one of the measures compared ({', '.join(map(str, measures))}); add it "
                         f"to --metrics (e.g. --metrics UDCG@5,{measure})")
    if len(measures) == 1:
        raise InputError(f"--ties {text}: the only row compared; the tie table compares the others on its ties (add "
                         f"one to --metrics, e.g. --metrics UDCG@5,{measure})")
    return measure


def compare_run_files(options: CompareOptions) -> tuple[str, dict[str, RunScores]]:
    """``udcg compare``: the run files of ``options.runs`` (named by file name) compared with
    ``compare_runs``, the table rendered in ``options.format`` (else by ``output``'s extension, else
    Markdown) and written to ``output`` when given, its forest plot to ``plot``
    (``flows.plots.comparison_figure``, from the same comparison), its per-query rows to ``per_query``
    (TSV with a header, ``Comparison.query_rows``); (the text, the scores)."""
    from udcg.flows.run_scores import named_runs
    from udcg.io.files import atomic_write_text
    from udcg.metrics.compare import format_comparison

    o = options
    if o.plot is not None or o.per_query is not None:
        from udcg.io.writing import check_outputs

        given = [("--plot", o.plot), ("--per-query", o.per_query), ("-o", o.output)]
        check_outputs([(flag, path, False) for flag, path in given if path is not None],
                      [("--run", r) for r in o.runs])
    if o.plot is not None:
        from udcg.flows.plots import comparison_figure, figure_path, save_figure

        figure_path(o.plot)
    cmp, scores = compare_runs(named_runs(o.runs), o)
    text = format_comparison(cmp, o.format or EXTENSIONS.get(Path(o.output or "").suffix.lower(), "markdown"), o.digits)
    if o.output:
        atomic_write_text(o.output, text)
    if o.per_query is not None:
        header, rows = cmp.query_rows()
        atomic_write_text(o.per_query, "".join("\t".join(map(str, row)) + "\n" for row in [header, *rows]))
    if o.plot is not None:
        save_figure(comparison_figure(cmp), o.plot)
    return text, scores


def _shown(value: Any) -> str:
    """A value as a message shows it: text as typed, anything else cut (``bounds.short``)."""
    from udcg.bounds import short

    return value[:40] if isinstance(value, str) else short(value)
