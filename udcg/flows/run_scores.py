"""Scoring retrieval runs: per-query values of every measure for each run on one query set, with
the notes a user should see. The engine under ``udcg.api`` (``score_runs``, ``read_utilities``) and
the ``score --run``, ``compare``, ``annotate --run`` and ``answer`` commands.

Queries follow ir_measures' policy: those of the qrels (a qrels query missing from a run is an
empty ranking); without qrels (UDCG only), the union of the runs' queries. They are scored, listed
and compared in the canonical query order (``udcg.records.query_key``: ``nq2`` before ``nq10``),
whatever the order of the files' lines: per-query rows, means (float sums) and the bootstrap
intervals of ``compare`` are the same for any order of the runs', qrels' and utilities' lines.

The qrels, utilities and UDCG_theta model are read (and checked) first, so a bad one fails before
a long run is read. A run given as a file is read as columns (``udcg.io.trec_columns``,
``udcg.flows.run_tables``): the same values as the dict path, for runs of millions of lines; a
run given as a dict takes the dict path (``udcg.metrics.evaluate.run_table``).
"""

from __future__ import annotations

import logging
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from numbers import Real
from pathlib import Path
from typing import Any

import numpy as np

from udcg.errors import InputError
from udcg.flows.run_options import ScoringOptions
from udcg.flows.run_tables import columns_table, run_queries
from udcg.flows.theta import load_theta
from udcg.io.frames import as_dict, check_nested
from udcg.io.trec_columns import RunColumns
from udcg.metrics.gains import plain_numbers
from udcg.metrics.labels import RELEVANT_AT, LabelCheck, label_check, top_k_counts
from udcg.metrics.evaluate import (UtilityOptions, as_measures, check_inputs, evaluate_table, reads_utilities, run_table,
                                   utility_coverage, utility_depth)
from udcg.metrics.measures import Measure
from udcg.records import query_key

log = logging.getLogger(__name__)
Run = Mapping[str, Mapping[str, float]]
DEFAULT_METRICS = ScoringOptions.metrics  # udcg.DEFAULT_METRICS: the measures of a run scored without --metrics


def _read_run(run: Run | str | Path, what: str = "run") -> Run:
    from udcg.io.trec import read_run

    if isinstance(run, (str, Path)):
        return read_run(run)
    return _check_run(as_dict(run, "score", what), what)


def _load_run(run: Run | str | Path, what: str = "run") -> Run | RunColumns:
    """A run file as columns (the fast path for long runs); a dict as it is."""
    from udcg.io.trec_columns import read_run_columns

    if isinstance(run, (str, Path)):
        return read_run_columns(run)
    return _check_run(as_dict(run, "score", what), what)


def _check_run(run: Any, what: str) -> Run:
    if not isinstance(run, Mapping):
        raise InputError(f"{what}: give a {{qid: {{docid: score}}}} dict, a TREC run file path, a ranx Run or a "
                         f"DataFrame (qid, docno, score), got {type(run).__name__}")
    return check_nested(run, what, "score")


def _check_utilities(utilities: Mapping) -> Mapping:
    """Every utility of a dict a number in [-1, 1], as in a utilities file (u = R * (1 - p_abs)).
    Checked at array speed (the value types as the dict walk reads them, ``plain_numbers``; the range
    with numpy); only a dict that fails is walked value by value, to name the first bad utility."""
    check_nested(utilities, "utilities", "utility")
    try:
        u = plain_numbers(utilities.values(), "utilities")  # finite ints and floats (no bool), or None
    except InputError:
        u = None  # NaN or inf: named below
    if u is not None and ((u >= -1.0) & (u <= 1.0)).all():
        return utilities
    for qid, docs in utilities.items():
        for docid, u in docs.items():
            if isinstance(u, bool) or not isinstance(u, Real) or not -1.0 <= u <= 1.0:
                raise InputError(f"utilities: the utility of ({str(qid)[:80]!r}, {str(docid)[:80]!r}) is {str(u)[:40]}, "
                                 "not a number in [-1, 1] (a utility is R * (1 - p_abs), R = +1 or -1)")
    return utilities


def _read_qrels(qrels: Run | str | Path | None) -> Run | None:
    from udcg.io.trec import read_qrels

    if qrels is None:
        return qrels
    qrels = as_dict(qrels, "relevance", "qrels")
    if isinstance(qrels, Mapping):
        return check_nested(qrels, "qrels", "relevance")
    if isinstance(qrels, (str, Path)):
        return read_qrels(qrels)
    raise InputError(f"qrels: give a {{qid: {{docid: relevance}}}} dict, a qrels file path, a ranx Qrels or a "
                     f"DataFrame (qid, docno, label), got {type(qrels).__name__}")


def read_any_run(run: Any) -> Run:
    """``{qid: {docid: score}}`` of a TREC run file, a dict, a ranx ``Run`` or a DataFrame (qid, docno, score)."""
    return _read_run(run)


def read_any_qrels(qrels: Any) -> Run | None:
    """``{qid: {docid: relevance}}`` of a TREC/BEIR qrels file, ``irds:NAME``, a dict, a ranx ``Qrels``
    or a DataFrame (qid, docno, label); None for None."""
    return _read_qrels(qrels)


def read_utilities(utilities: Any, model: str | None = None, prompt_version: str | None = None) -> Run | None:
    """``{qid: {docid: utility}}`` from a dict, a ``udcg annotate --run`` folder or a utilities
    file; with ``model``/``prompt_version``, refuse utilities made for another reader."""
    from udcg.annotate.utilities import Utilities, load_utilities

    if utilities is None:
        if model or prompt_version:
            raise InputError("a model or prompt version was given to check utilities, but no utilities")
        return None
    if isinstance(utilities, (str, Path)):
        utilities = load_utilities(utilities)
    utilities = as_dict(utilities, "utility", "utilities")
    if isinstance(utilities, Utilities):
        utilities.check_for(model, prompt_version)
        return utilities.as_dict()
    if isinstance(utilities, Mapping):
        if model or prompt_version:
            raise InputError("a plain utilities dict does not say which model made it; give the annotate folder "
                             "to check it, or leave out model/prompt")
        return _check_utilities(utilities)
    raise InputError(f"utilities: give a {{qid: {{docid: utility}}}} dict, a folder or a file, got {type(utilities).__name__}")


def _measures(metrics: Sequence[str | Measure] | str) -> list[Measure]:
    if isinstance(metrics, Measure):
        metrics = [metrics]
    if not isinstance(metrics, (str, Sequence, set, frozenset)):
        raise InputError(f"metrics: give a list of measures (['UDCG@5', 'nDCG@5']) or a comma-separated string, "
                         f"got {type(metrics).__name__}")
    out = as_measures(metrics)
    if not out:
        raise InputError("metrics: no measures given (e.g. ['UDCG@5', 'nDCG@5'])")
    return list(dict.fromkeys(out))


@dataclass(frozen=True)
class TopPairs:
    """A run's top ``k`` pairs as matrices (queries x ranks): whether each has a qrels entry, its
    pair number (``pair_index``; NaN: no utility) and utility (NaN: none), the ranking lengths, and
    the UDCG options it was scored with."""

    judged: np.ndarray
    pair: np.ndarray | None
    utility: np.ndarray | None
    depth: np.ndarray
    opts: UtilityOptions


@dataclass(repr=False)
class RunScores:
    """Per-query values of one run: ``values[measure][i]`` for query ``qids[i]``, keyed by ``Measure``
    (a Measure is its canonical name: ``values["nDCG@10"]`` reads it too); ``coverage[k]`` =
    (annotated documents, documents) in the top-k, for each cutoff of a utility measure. What
    ``udcg.evaluate`` returns: ``means()``, ``per_query()``, ``to_frame()``."""

    name: str
    qids: tuple[str, ...]
    values: dict[Measure, np.ndarray]
    coverage: dict[int | None, tuple[int, int]] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)
    labels: LabelCheck | None = None  # the label checks of the runs scored together (udcg.metrics.labels)
    top: TopPairs | None = field(default=None, repr=False)  # the top-k pairs, for compare's fragility

    def means(self) -> dict[Measure, float]:
        """``{measure: mean over the queries}`` (ir_measures' calc_aggregate; a query the run does not
        rank counts as an empty ranking, ``udcg.metrics.evaluate``); a NaN value is left out."""
        return {m: float(np.nanmean(v)) if (~np.isnan(v)).any() else float("nan") for m, v in self.values.items()}

    def per_query(self) -> dict[str, dict[Measure, float]]:
        """``{qid: {measure: value}}`` (pytrec_eval's shape), queries in the canonical order (``query_key``)."""
        columns = {m: v.tolist() for m, v in self.values.items()}
        return {qid: {m: column[i] for m, column in columns.items()} for i, qid in enumerate(self.qids)}

    def to_frame(self, long: bool = False):
        """A pandas DataFrame (needs pandas): one row per query (index ``qid``), one column per measure;
        ``long``: one row per query and measure, ``name, qid, measure, value``, the layout of
        PyTerrier's ``pt.Experiment(..., perquery=True)``."""
        try:
            import pandas as pd
        except ImportError:
            raise InputError("to_frame() needs pandas (pip install pandas)") from None
        if long:
            return pd.DataFrame([(self.name, *row) for row in self.rows()], columns=["name", "qid", "measure", "value"])
        return pd.DataFrame(dict(self.values), index=pd.Index(self.qids, name="qid"), columns=list(self.values))

    def __repr__(self) -> str:
        means = ", ".join(f"{m} {v:.4f}" for m, v in self.means().items())
        return f"<RunScores {self.name!r}: {len(self.qids)} queries; means {means}>"

    def _repr_html_(self) -> str:
        """The means as a table, with the query count and the notes (Jupyter); per query: ``to_frame()``."""
        from udcg.metrics.html import markdown_html

        means = self.means()
        return markdown_html("\n".join([f"**{self.name}**: {len(self.qids)} queries (per query: .to_frame())",
                                         "| " + " | ".join(map(str, means)) + " |", "|---" * len(means) + "|",
                                         "| " + " | ".join(f"{v:.4f}" for v in means.values()) + " |", *self.notes]))

    def rows(self) -> list[tuple[str, Measure, float]]:
        """``(qid, measure, value)`` rows, query-major (``udcg.metrics.evaluate.format_tsv``)."""
        return [(qid, m, float(v[i])) for i, qid in enumerate(self.qids) for m, v in self.values.items()]


@ScoringOptions.door
def score_runs(runs: Mapping[str, Run | str | Path], qrels: Run | str | Path | None = None,
               **options: Any) -> dict[str, RunScores]:
    """Per-query values of every run on one query set (see the module doc), with the notes a user
    should see (queries skipped, short rankings, coverage) and, with qrels, the label checks of
    the runs' top-k (``RunScores.labels``: ``udcg.metrics.labels``). ``options``: those of
    ``ScoringOptions`` (``utilities``, ``metrics``, ``gamma``, ``theta``, ``unannotated``, ``model``,
    ``prompt_version``)."""
    return scored_runs(runs, ScoringOptions.of("score_runs", qrels=qrels, **options))


def label_depth(measures: Sequence[Measure]) -> int:
    """The depth the label checks read: the deepest cutoff of the measures (10 when none has one,
    judged@10's depth)."""
    return max((m.cutoff for m in measures if m.cutoff is not None), default=10)


def pair_index(utilities: Run, judged: set[tuple[str, str]] = frozenset()) -> Run:
    """``{qid: {docid: number}}``: one number per annotated pair, so that a pair in two runs' top-k
    is known as one (compare's fragility); the pairs of ``judged`` (labelled by annotate's judge:
    no longer unjudged) get none."""
    out, i = {}, 0
    for qid, docs in utilities.items():
        out[qid] = dict(zip(docs, map(float, range(i, i + len(docs)))))
        i += len(docs)
    for qid, docid in judged:
        out.get(qid, {}).pop(docid, None)
    return out


def scored_runs(runs: Mapping[str, Run | str | Path], options: ScoringOptions,
                keep_pairs: bool = False) -> dict[str, RunScores]:
    """``score_runs`` with ``options``; with ``keep_pairs`` each run's ``RunScores.top`` holds its top-k pairs."""
    utilities, theta = options.utilities, options.theta
    wanted = _measures(options.metrics)
    if not runs:
        raise InputError("no runs given")
    qrels_d = _read_qrels(options.qrels)
    needs_utility = any(map(reads_utilities, wanted))
    from udcg.flows.label_checks import recorded_short_answers

    short = recorded_short_answers(utilities)  # the answers annotate had at hand, for the label checks
    judged_by_judge: set = set()
    if keep_pairs and isinstance(utilities, (str, Path)):  # its records say which pairs a judge labelled
        from udcg.annotate.utilities import load_utilities

        utilities = load_utilities(utilities)
        judged_by_judge = {key for key, r in utilities.records.items() if r.relevance_source.startswith("judge")}
    util = read_utilities(utilities, options.model, options.prompt_version) if needs_utility or utilities is not None else None
    check_inputs(wanted, qrels_d, util)
    if isinstance(theta, (str, Path)):
        theta = load_theta(theta)
    loaded = {name: _load_run(run, f"run {name!r}") for name, run in runs.items()}
    queries = qrels_d if qrels_d is not None else {q: {} for run in loaded.values() for q in run_queries(run)}
    queries = {q: queries[q] for q in sorted(queries, key=query_key)}  # the canonical order: no line order matters
    out = {}
    k = label_depth(wanted)
    depth = utility_depth(wanted)
    depth = None if needs_utility and depth is None else max(depth or 0, k)
    pairs = pair_index(util, judged_by_judge) if keep_pairs and needs_utility else None
    counts: dict[str, tuple[np.ndarray, np.ndarray]] = {}
    by_judge: dict[str, np.ndarray] = {}
    for name, run in loaded.items():
        opts = UtilityOptions(gamma=options.gamma, theta=theta, unannotated=options.unannotated, where=f"run {name!r}")
        make = columns_table if isinstance(run, RunColumns) else run_table
        table = make(run, queries, util if needs_utility else None, depth, judged=qrels_d is not None, pairs=pairs)
        values = evaluate_table(table, wanted, opts)
        scores = RunScores(name, table.qids, values, notes=_notes(run_queries(run), queries, table, wanted, name))
        if needs_utility:
            scores.coverage = {m.cutoff: utility_coverage(table, m.cutoff) for m in wanted if reads_utilities(m)}
        if qrels_d is not None:
            judged = ~np.isnan(table.extra["qrel"][:, :depth])
            counts[name] = top_k_counts(judged, table.depth, k)
            n_relevant = table.n_rel(RELEVANT_AT)  # the same for every run: the qrels' own
            if keep_pairs:
                top = {key: table.extra[key][:, :depth] if key in table.extra else None for key in ("pair", "utility")}
                scores.top = TopPairs(judged, top["pair"], top["utility"], table.depth, opts)
                if judged_by_judge:  # a utility without a pair number: a pair annotate's judge labelled
                    by_judge[name] = top_k_counts(judged | ~(np.isnan(top["pair"]) & ~np.isnan(top["utility"])),
                                                  table.depth, k)[0]
        out[name] = scores
    if counts:
        first = next(iter(out.values()))
        check = label_check(first.qids, n_relevant, counts, k=k, judge_labelled=by_judge or None,
                            short_answers=short)
        for scores in out.values():
            scores.labels = check
    return out


EMPTY_NOTE = ("each counts in every mean as an empty ranking (classical measures 0, UDCG sigma(0) = 0.5), "
              "as ir_measures and trec_eval -c count it")
TIE_NOTE = "queries have tied scores"  # the tie note's words (udcg.api logs it at INFO)


def _tie_note(table, wanted: list[Measure], name: str) -> list[str]:
    """The tie note, when tied scores reach into the top k of the deepest cutoff (anywhere when a
    measure reads the whole ranking): there the tie-break decides order or membership. Ties below
    it change no value: only a count, logged at INFO (``udcg -v``)."""
    cutoffs = [m.cutoff for m in wanted]
    reach = None if None in cutoffs else max(cutoffs, default=None)
    touching = table.ties_within(reach)
    below = table.tied_queries - touching
    if below:
        log.info("%s: %d queries have tied scores below the top %s only (no effect on these measures)", name, below,
                 reach)
    if not touching:
        return []
    where = "" if reach is None else f" within the top {reach}"
    return [f"{touching} {TIE_NOTE}{where}: ranked as trec_eval ranks them (score, then docid descending), not by "
            "the file's rank column"]


def _notes(run_qids: Iterable[str], queries: Run, table, wanted: list[Measure], name: str = "run") -> list[str]:
    notes = []
    skipped = sum(q not in queries for q in run_qids)
    if skipped:
        notes.append(f"{skipped} run queries have no qrels and are not scored (ir_measures/trec_eval policy)")
    empty = np.flatnonzero(table.depth == 0)
    if len(empty):
        notes.append(f"{len(empty)} scored queries have no documents in the run (first: {table.qids[empty[0]]!r}): "
                     f"{EMPTY_NOTE}")
    cutoffs = sorted({m.cutoff for m in wanted if m.cutoff is not None})
    if cutoffs:
        short = int(((table.depth > 0) & (table.depth < cutoffs[-1])).sum())
        if short:
            notes.append(f"{short} queries have fewer than {cutoffs[-1]} documents (UDCG@{cutoffs[-1]} reads their "
                         "shorter context; P@k still divides by k)")
    return notes + _tie_note(table, wanted, name)


def named_runs(paths: Sequence[str | Path]) -> dict[str, str | Path]:
    """``{name: path}`` named by the file name without extensions; two equal names are an error."""
    out: dict[str, str | Path] = {}
    for path in paths:
        name = Path(path).name.split(".")[0] or str(path)
        if name in out:
            raise InputError(f"{path}: two runs named {name!r} (the file names without extension must differ)")
        out[name] = path
    return out
