"""The Python API for notebooks: score and compare retrieval runs with UDCG beside nDCG & co.

Runs and qrels are the dict-of-dicts that ir_measures, pytrec_eval and ranx users have
(``{qid: {docid: score}}``, ``{qid: {docid: relevance}}``) or paths to TREC files; utilities are
``{qid: {docid: utility}}``, a ``udcg annotate --run`` output folder, or a utilities file::

    import udcg
    udcg.udcg([0.9, -0.4, 0.0, -0.8, 0.2])                      # one context -> 0.5349...
    udcg.evaluate("bm25.trec", "qrels.tsv", utilities="utilities", metrics=["UDCG@5", "nDCG@5"])
    cmp = udcg.compare({"bm25": "bm25.trec", "dense": "dense.trec"}, "qrels.tsv",
                       utilities="utilities", metrics=["UDCG@5", "nDCG@5"])
    print(cmp.format("markdown"))

Queries follow ir_measures' policy: those of the qrels (a qrels query missing from a run is an
empty ranking); without qrels (UDCG only), the union of the runs' queries.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from udcg.experiment.theta import load_theta
from udcg.errors import InputError
from udcg.metrics.evaluate import (UtilityOptions, as_measures, check_inputs, evaluate_table, run_table,
                                   utility_coverage, utility_depth)
from udcg.metrics.measures import UTILITY, Measure
from udcg.metrics.udcg import GAMMA, UDCGTheta, check_utilities, udcg as _udcg_matrix

log = logging.getLogger(__name__)

Run = Mapping[str, Mapping[str, float]]
DEFAULT_METRICS = ("UDCG@5", "nDCG@5", "P@5", "RR@5")


def udcg(utilities: Any, gamma: float = GAMMA) -> float | np.ndarray:
    """UDCG (Eq. 4) of one context (a list of utilities in prompt order) -> a float, or of a
    (contexts, k) matrix -> one value per row."""
    arr = np.asarray(utilities, dtype=float)
    values = _udcg_matrix(check_utilities(arr), gamma)
    return float(values[0]) if arr.ndim == 1 else values


def _read_run(run: Run | str | Path, what: str = "run") -> Run:
    from udcg.io.trec import read_run

    if isinstance(run, (str, Path)):
        return read_run(run)
    if not isinstance(run, Mapping):
        raise InputError(f"{what}: give a {{qid: {{docid: score}}}} dict or a TREC run file path, got {type(run).__name__}")
    return run


def _read_qrels(qrels: Run | str | Path | None) -> Run | None:
    from udcg.io.trec import read_qrels

    if qrels is None or isinstance(qrels, Mapping):
        return qrels
    if isinstance(qrels, (str, Path)):
        return read_qrels(qrels)
    raise InputError(f"qrels: give a {{qid: {{docid: relevance}}}} dict or a qrels file path, got {type(qrels).__name__}")


def read_utilities(utilities: Any, model: str | None = None, prompt_version: str | None = None) -> Run | None:
    """``{qid: {docid: utility}}`` from a dict, a ``udcg annotate --run`` folder or a utilities
    file; with ``model``/``prompt_version``, refuse utilities made for another reader."""
    from udcg.annotate.utilities import Utilities, read_utilities as read

    if utilities is None:
        if model or prompt_version:
            raise InputError("a model or prompt version was given to check utilities, but no utilities")
        return None
    if isinstance(utilities, (str, Path)):
        utilities = read(utilities)
    if isinstance(utilities, Utilities):
        utilities.check_for(model, prompt_version)
        return utilities.as_dict()
    if isinstance(utilities, Mapping):
        if model or prompt_version:
            raise InputError("a plain utilities dict does not say which model made it; give the annotate folder "
                             "to check it, or leave out model/prompt")
        return utilities
    raise InputError(f"utilities: give a {{qid: {{docid: utility}}}} dict, a folder or a file, got {type(utilities).__name__}")


def _measures(metrics: Sequence[str | Measure] | str) -> list[Measure]:
    out = as_measures(metrics)
    if not out:
        raise InputError("metrics: no measures given (e.g. ['UDCG@5', 'nDCG@5'])")
    return list(dict.fromkeys(out))


@dataclass
class RunScores:
    """Per-query values of one run: ``values[measure][i]`` for query ``qids[i]``; ``coverage[k]`` =
    (annotated documents, documents) in the top-k, for each cutoff of a utility measure."""

    name: str
    qids: tuple[str, ...]
    values: dict[str, np.ndarray]
    coverage: dict[int | None, tuple[int, int]] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)

    def means(self) -> dict[str, float]:
        return {m: float(np.nanmean(v)) if (~np.isnan(v)).any() else float("nan") for m, v in self.values.items()}

    def rows(self) -> list[tuple[str, str, float]]:
        """``(qid, measure, value)`` rows, query-major (``udcg.metrics.evaluate.format_tsv``)."""
        return [(qid, m, float(v[i])) for i, qid in enumerate(self.qids) for m, v in self.values.items()]


def score_runs(runs: Mapping[str, Run | str | Path], qrels: Run | str | Path | None = None, *,
               utilities: Any = None, metrics: Sequence[str | Measure] | str = DEFAULT_METRICS,
               gamma: float = GAMMA, theta: UDCGTheta | str | Path | None = None, unannotated: str = "error",
               model: str | None = None, prompt_version: str | None = None) -> dict[str, RunScores]:
    """Per-query values of every run on one query set (see the module doc), with the notes a user
    should see (queries skipped, short rankings, coverage)."""
    wanted = _measures(metrics)
    if not runs:
        raise InputError("no runs given")
    loaded = {name: _read_run(run, f"run {name!r}") for name, run in runs.items()}
    qrels_d = _read_qrels(qrels)
    needs_utility = any(m.name in UTILITY for m in wanted)
    util = read_utilities(utilities, model, prompt_version) if needs_utility or utilities is not None else None
    check_inputs(wanted, qrels_d, util)
    if isinstance(theta, (str, Path)):
        theta = load_theta(theta)
    queries = qrels_d if qrels_d is not None else {q: {} for run in loaded.values() for q in run}
    out = {}
    for name, run in loaded.items():
        opts = UtilityOptions(gamma=gamma, theta=theta, unannotated=unannotated, where=f"run {name!r}")
        table = run_table(run, queries, util if needs_utility else None, utility_depth(wanted))
        values = {str(m): v for m, v in evaluate_table(table, wanted, opts).items()}
        scores = RunScores(name, table.qids, values, notes=_notes(run, queries, table, wanted))
        if needs_utility:
            scores.coverage = {m.cutoff: utility_coverage(table, m.cutoff) for m in wanted if m.name in UTILITY}
        out[name] = scores
    return out


def _notes(run: Run, queries: Run, table, wanted: list[Measure]) -> list[str]:
    notes = []
    skipped = sum(q not in queries for q in run)
    if skipped:
        notes.append(f"{skipped} run queries have no qrels and are not scored (ir_measures/trec_eval policy)")
    empty = int((table.depth == 0).sum())
    if empty:
        notes.append(f"{empty} scored queries have no documents in the run (classical measures 0, UDCG NaN)")
    cutoffs = sorted({m.cutoff for m in wanted if m.cutoff is not None})
    if cutoffs:
        short = int(((table.depth > 0) & (table.depth < cutoffs[-1])).sum())
        if short:
            notes.append(f"{short} queries have fewer than {cutoffs[-1]} documents (UDCG@{cutoffs[-1]} reads their "
                         "shorter context; P@k still divides by k)")
    return notes


def _frame(rows: Any, index: str | list[str]):
    try:
        import pandas as pd
    except ImportError:
        raise InputError("as_frame=True needs pandas (pip install pandas)") from None
    return pd.DataFrame(rows).set_index(index)


def evaluate(run: Run | str | Path, qrels: Run | str | Path | None = None, *, utilities: Any = None,
             metrics: Sequence[str | Measure] | str = DEFAULT_METRICS, gamma: float = GAMMA,
             theta: UDCGTheta | str | Path | None = None, unannotated: str = "error", per_query: bool = False,
             as_frame: bool = False, model: str | None = None, prompt_version: str | None = None):
    """Mean of every measure over the queries, ``{measure: value}`` (ir_measures' calc_aggregate);
    with ``per_query``, ``{qid: {measure: value}}`` (pytrec_eval's shape). ``as_frame`` returns a
    pandas DataFrame instead."""
    scores = score_runs({"run": run}, qrels, utilities=utilities, metrics=metrics, gamma=gamma, theta=theta,
                        unannotated=unannotated, model=model, prompt_version=prompt_version)["run"]
    for note in scores.notes:
        log.warning(note)
    if per_query:
        table = {qid: {m: float(v[i]) for m, v in scores.values.items()} for i, qid in enumerate(scores.qids)}
        return _frame([{"qid": q, **row} for q, row in table.items()], "qid") if as_frame else table
    means = scores.means()
    return _frame([{"measure": m, "mean": v} for m, v in means.items()], "measure") if as_frame else means


def compare(runs: Mapping[str, Run | str | Path] | Sequence[str | Path], qrels: Run | str | Path | None = None, *,
            utilities: Any = None, metrics: Sequence[str | Measure] | str = DEFAULT_METRICS, gamma: float = GAMMA,
            theta: UDCGTheta | str | Path | None = None, unannotated: str = "error", test: str = "permutation",
            alpha: float = 0.05, n_resamples: int = 10_000, n_boot: int = 10_000, seed: int = 0,
            model: str | None = None, prompt_version: str | None = None):
    """Every run's mean and 95% interval per measure, a paired test between every pair of runs and
    Holm's correction over the whole table (``udcg.metrics.compare.Comparison``: ``.format(fmt)``,
    ``.to_dict()``, ``.to_frame()``). ``runs`` is ``{name: run}`` or a list of run files (named
    by file name)."""
    from udcg.metrics.compare import compare_scores

    if not isinstance(runs, Mapping):
        runs = named_runs(runs)
    if len(runs) < 2:
        raise InputError(f"compare needs at least two runs, got {len(runs)}")
    scores = score_runs(runs, qrels, utilities=utilities, metrics=metrics, gamma=gamma, theta=theta,
                        unannotated=unannotated, model=model, prompt_version=prompt_version)
    return compare_scores({name: s.values for name, s in scores.items()}, test=test, alpha=alpha,
                          n_resamples=n_resamples, n_boot=n_boot, seed=seed)


def named_runs(paths: Sequence[str | Path]) -> dict[str, str | Path]:
    """``{name: path}`` named by the file name without extensions; two equal names are an error."""
    out: dict[str, str | Path] = {}
    for path in paths:
        name = Path(path).name.split(".")[0] or str(path)
        if name in out:
            raise InputError(f"{path}: two runs named {name!r} (the file names without extension must differ)")
        out[name] = path
    return out
