"""The Python API for notebooks: score and compare retrieval runs with UDCG beside nDCG & co.

Runs and qrels are the dict-of-dicts that ir_measures, pytrec_eval and ranx users have
(``{qid: {docid: score}}``, ``{qid: {docid: relevance}}``), paths to TREC files, ranx ``Run`` /
``Qrels`` objects or PyTerrier-shaped DataFrames (``qid, docno, score`` / ``qid, docno, label``;
``udcg.io.frames``); qrels also ``irds:NAME``; utilities are ``{qid: {docid: utility}}``, a
``udcg annotate --run`` output folder, a utilities file or a ``qid, docno, utility`` DataFrame::

    import udcg
    udcg.udcg([0.9, -0.4, 0.0, -0.8, 0.2])                      # one context -> 0.5349...
    udcg.udcg_many([[0.9, -0.4], [0.2, 0.0]])                   # contexts x k -> one value per context
    scores = udcg.evaluate("bm25.trec", "qrels.tsv", utilities="utilities", metrics=["UDCG@5", "nDCG@5"])
    scores.means(), scores.per_query(), scores.to_frame()       # a RunScores, whatever the input
    cmp = udcg.compare({"bm25": "bm25.trec", "dense": "dense.trec"}, "qrels.tsv",
                       utilities="utilities", metrics=["UDCG@5", "nDCG@5"])
    print(cmp.format("markdown"))

Each function returns one type: ``udcg`` a float, ``udcg_many`` an array, ``evaluate`` a
``RunScores``, ``score_runs`` ``{name: RunScores}``, ``compare`` a ``Comparison``.

The model flows run as their commands do (the same ``udcg.flows`` functions, resumable, with
progress bars): ``annotate_runs`` (runs -> utilities folder, its report), ``answer_runs`` (runs'
contexts -> answers file, an ``AnswerResult``), ``judge`` (a ``JudgeResult``), ``fit_theta`` (the fitted
``UDCGTheta``), ``correlate`` (the correlation ``Table``).

Queries follow ir_measures' policy: those of the qrels (a qrels query missing from a run is an
empty ranking); without qrels (UDCG only), the union of the runs' queries.
"""

from __future__ import annotations

import inspect
import logging
from collections.abc import Callable, Mapping, Sequence
from dataclasses import fields
from pathlib import Path
from typing import Any, TYPE_CHECKING

import numpy as np

from udcg import api_args
from udcg.api_args import checked, id_table, one_of, optional
from udcg.errors import InputError
from udcg.flows import run_scores as _scores
from udcg.flows.annotate_options import AnnotateOptions
from udcg.flows.answer_options import AnswerOptions
from udcg.flows.correlate_options import CorrelateOptions
from udcg.flows.judge_options import JudgeOptions
from udcg.flows.reader_check_options import ReaderCheckOptions
from udcg.flows.run_options import CompareOptions, ScoringOptions
from udcg.flows.theta_options import FitThetaOptions
from udcg.flows.run_scores import DEFAULT_METRICS, Run, RunScores
from udcg.grade.rules import RULES
from udcg.llm.registry import ModelChoice
from udcg.metrics.udcg import GAMMA, udcg_matrix as _udcg_matrix

if TYPE_CHECKING:  # scikit-learn is imported only when a UDCG_theta is used
    from udcg.metrics.udcg_theta import UDCGTheta

__all__ = ["DEFAULT_METRICS", "ModelChoice", "Run", "RunScores", "annotate_runs", "answer_runs", "compare", "correlate", "evaluate",
           "fit_theta", "judge", "named_runs", "read_utilities", "reader_check", "score_runs", "udcg", "udcg_many"]

log = logging.getLogger(__name__)
_TABLES = {"qrels": optional(id_table("relevance")), "utilities": optional(api_args.utilities),
           "metrics": api_args.metrics, "theta": optional(api_args.theta)}


def _utilities(utilities: Any, ndim: int, what: str, other: str) -> np.ndarray:
    try:
        arr = np.asarray(utilities) if not isinstance(utilities, (str, bytes, Mapping)) else None
    except ValueError:  # lists of different lengths
        arr = None
    if arr is None or arr.dtype.kind not in "iuf":
        raise InputError(f"utilities: give {what}, got {type(utilities).__name__}"
                         f"{' of unequal lengths or non-numbers' if isinstance(utilities, (list, tuple)) else ''}")
    if arr.ndim != ndim:
        raise InputError(f"utilities: give {what}, got an array of shape {arr.shape} ({other})")
    return arr.astype(float)


@checked("score", utilities=api_args.as_given)  # checked by _utilities, which names the shape wanted
def udcg(utilities: Any, gamma: float = GAMMA) -> float:
    """UDCG (Eq. 4) of one context: its passages' utilities in prompt order -> a float."""
    u = _utilities(utilities, 1, "a list of numbers (one context)", "for several contexts use udcg.udcg_many")
    return float(_udcg_matrix(u, gamma)[0])


@checked("score", utilities=api_args.as_given)  # checked by _utilities, which names the shape wanted
def udcg_many(utilities: Any, gamma: float = GAMMA) -> np.ndarray:
    """UDCG (Eq. 4) of each context of a (contexts, k) matrix or list of equal-length lists -> an
    array, one value per context."""
    return _udcg_matrix(_utilities(utilities, 2, "a list of equal-length lists of numbers (contexts x k)",
                                   "for one context use udcg.udcg"), gamma)


@checked("score", run=id_table("score"), **_TABLES)
@ScoringOptions.door
def evaluate(run: Run | str | Path, qrels: Run | str | Path | None = None, **options: Any) -> RunScores:
    """Score one run: a ``RunScores``, whatever the input. ``.means()``: ``{measure: mean over the
    queries}`` (ir_measures' calc_aggregate); ``.per_query()``: ``{qid: {measure: value}}``
    (pytrec_eval's shape); ``.to_frame()``: a pandas DataFrame, one row per query; ``.qids``,
    ``.values`` (``{measure: array}``), ``.coverage`` and ``.notes`` (also logged as warnings). Every
    result is keyed by ``Measure``, a ``str`` equal to the measure's canonical name (``"nDCG@5"``)."""
    name = next(iter(_scores.named_runs([run]))) if isinstance(run, (str, Path)) else _ranx_name(run) or "run"  # a file: its name
    scores = _scores.scored_runs({name: run}, ScoringOptions.of("evaluate", qrels=qrels, **options))[name]
    _log_notes(scores)
    return scores


def _log_notes(scores: RunScores) -> None:
    """A run's notes as warnings, each once and named by the run (the tie note only when ties reach
    into the top k; a count of the others at INFO: ``udcg.flows.run_scores``)."""
    for note in scores.notes:
        log.warning("%s: %s", scores.name, note)


@checked("compare", runs=api_args.run_set, answers=optional(api_args.path), **_TABLES)
@CompareOptions.door
def compare(runs: Mapping[str, Run | str | Path] | Sequence[str | Path], qrels: Run | str | Path | None = None,
            **options: Any):
    """Every run's mean and 95% interval per measure; for every pair of runs the mean paired
    difference with its interval (the same resampled queries), its minimum detectable difference
    at ``power`` (inf, ``.undetectable``, where the test's p cannot go below alpha on these queries:
    ``.reachable``, ``.p_floor``) and a paired test, Holm-corrected within each measure (``correction="measure"``;
    ``"table"``: over every pair x measure; ``"none"``). ``answers``: a judged answers file
    (``udcg answer`` + ``udcg judge answer``) adds correct / abstained / wrong rows for the runs;
    ``judged_only`` puts every row on the queries every run has a judged answer for; ``ties`` (one of
    ``metrics``, e.g. "nDCG@5") adds every other measure on each run pair's queries tied on it
    (``.tie_pairs``, ``.to_frame("ties")``); ``equivalence`` (a margin for every row, or
    ``{"UDCG@5": 0.005, "nDCG@5": 0.02}``) adds each pair's equivalence test and ``.decision``;
    ``baseline`` (a run's name or index, PyTerrier's ``baseline=0``) compares only each other run with
    it (a smaller Holm family: one comparison per other run).
    Returns a ``udcg.metrics.compare.Comparison``: ``.format(fmt)``, ``.to_dict()``,
    ``.to_frame()`` (runs), ``.to_frame("pairs")``, ``.to_frames()``. ``runs`` is ``{name: run}``,
    a list of run files (named by file name) or a list of named ranx ``Run``s."""
    from udcg.flows.run_compare import compare_runs

    if not isinstance(runs, Mapping):
        runs = _ranx_runs(runs) or _scores.named_runs(runs)
    cmp, scores = compare_runs(runs, CompareOptions.of("compare", qrels=qrels, **options))
    for s in scores.values():
        _log_notes(s)
    return cmp


def _ranx_name(run: Any) -> str | None:
    from udcg.io.frames import is_ranx

    return str(run.name) if is_ranx(run) and getattr(run, "name", None) else None


def _ranx_runs(runs: Sequence[Any]) -> dict[str, Any] | None:
    """A list of named ranx ``Run``s as ``{name: run}`` (two of one name are an error); else None."""
    names = [_ranx_name(run) for run in runs]
    if not runs or None in names:
        return None
    if len(set(names)) < len(names):
        raise InputError(f"runs: two ranx runs named {next(n for n in names if names.count(n) > 1)!r} (names must differ)")
    return dict(zip(names, runs))


# ---------------------------------------------------------------- the model flows, as the commands run them


def _model(name: str, value: Any) -> str | ModelChoice:
    """A model: a ``ModelChoice`` (the model and its options as one value, as the commands' flags
    make it), or a name or folder (``api_args.model``) whose options come as keywords."""
    return value if isinstance(value, ModelChoice) else api_args.model(name, value)


# A model's keywords in the API beside it (``_model_keywords``), with their annotations: a ``ModelChoice``'s
# options, and ``api``, a dict of more of them.
_MODEL_KEYWORDS = {**{f.name: f.type for f in fields(ModelChoice) if f.name != "model"}, "api": "dict | None"}


def _model_keywords(model: str, *names: str) -> Callable:
    """``func(..., **options)`` given, right after its parameter ``model``, the keyword-only
    ``names`` (of ``_MODEL_KEYWORDS``) with default None and their annotations (what ``help`` shows
    and ``api_args.checked`` binds and checks); the function takes them out of ``options``
    (``ModelChoice.split``) for the choice. An options class's door adds its own after them."""
    def wrap(func: Callable) -> Callable:
        signature = inspect.signature(func)
        own = [p for p in signature.parameters.values() if p.kind is not p.VAR_KEYWORD]
        at = next(i for i, p in enumerate(own) if p.name == model) + 1
        added = [inspect.Parameter(name, inspect.Parameter.KEYWORD_ONLY, default=None, annotation=_MODEL_KEYWORDS[name])
                 for name in names]
        func.__signature__ = signature.replace(parameters=[*own[:at], *added, *own[at:]])
        return func
    return wrap


def _outputs_not_inputs(outputs: dict[str, Any], inputs: dict[str, Any], folder: str = "") -> None:
    """As the command line does before any work (``udcg.io.writing.check_outputs``): each output may
    be written, no two are one file, none replaces an input. ``folder``: the output that is a folder."""
    from udcg.io.writing import check_outputs

    check_outputs([(name, path, name == folder) for name, path in outputs.items() if path],
                  [(name, item) for name, value in inputs.items() if value
                   for item in (value if isinstance(value, (list, tuple)) else [value])])


def _and_model_options(func: Callable) -> Callable:
    """``func``'s signature (its options object's door) with ``**model_options`` after it: the
    ``ModelChoice`` keywords of its model (``api_base``, ``concurrency``, ``device`` ...), which
    ``checked``'s ``options_of="udcg.llm.registry:ModelChoice"`` checks (an unknown one refused there)."""
    signature = inspect.signature(func)
    more = inspect.Parameter("model_options", inspect.Parameter.VAR_KEYWORD)
    func.__signature__ = signature.replace(parameters=[*signature.parameters.values(), more])
    return func


@checked("annotate", options_of="udcg.llm.registry:ModelChoice", runs=api_args.paths, model=_model,
         judge=api_args.model, api_base=api_args.api_base, scoring=optional(one_of("udcg.llm.openai_backend:SCORING")))
@_and_model_options
@AnnotateOptions.door
def annotate_runs(corpus: str | Path, runs: Sequence[str | Path], output: str | Path, model: str | ModelChoice, *,
                  show_progress: bool = True, **options: Any):
    """``udcg annotate --run``: p_abs and the utility of every pair in the union of the runs'
    top-``depth`` documents, for the reader ``model`` (a name, or a ``ModelChoice``), into the
    utilities folder ``output`` (created, or extended with the new pairs only; resumable).
    ``options``: those of ``udcg annotate`` (``udcg.flows.annotate_options.AnnotateOptions``:
    ``depth``, ``qrels``, ``unjudged``, ``estimator``, ``prompt``, ``samples`` …) and the model's
    (a ``ModelChoice``'s keywords: ``api_base``, ``concurrency``, ``device``, ``batch_size`` …, added
    to ``model``'s). Returns the report (``.computed``, ``.reused``, ``.total``, ``.lines(output)``);
    read the folder back with ``read_utilities``. Like every flow here, an output that would replace an
    input is refused before any work (``InputError``)."""
    from udcg.flows.annotate import annotate_run_files, reader

    choice, rest = ModelChoice.split(model, options)
    o = AnnotateOptions.of("annotate_runs", **rest)
    _outputs_not_inputs({"output": output}, {"corpus": corpus, "runs": runs, **o.keywords("queries", "qrels", "answers")},
                        folder="output")
    return annotate_run_files(str(corpus), [str(r) for r in runs], str(output), reader(choice, o), o,
                              show_progress=show_progress)


@checked("answer", runs=api_args.paths, model=_model)
@AnswerOptions.door
@_model_keywords("model", "batch_size", "device", "dtype", "api")
def answer_runs(corpus: str | Path, runs: Sequence[str | Path], output: str | Path, model: str | ModelChoice, *,
                show_progress: bool = True, say: Callable[[str], None] | None = None, **options: Any):
    """``udcg answer``: the reader's greedy answer to each run's top-``k`` context, written to
    ``output`` as a contexts JSONL (resumable). ``options``: those of ``udcg answer``
    (``udcg.flows.answer_options.AnswerOptions``: ``utilities``, ``samples``, ``limit``, ``prompt``,
    ``max_new_tokens`` …); ``batch_size``, ``device``, ``dtype`` and ``api`` (keywords of a
    ``ModelChoice``: api_base, concurrency, timeout, rpm, max_retries, ...) are added to ``model``'s.
    Returns an ``AnswerResult`` (``.contexts``, ``.computed``, ``.output``)."""
    from udcg.flows.answer import answer_run_files as flow

    choice, rest = ModelChoice.split(model, options)  # batch_size, device, dtype, api
    o = AnswerOptions.of("answer_runs", **rest)
    _outputs_not_inputs({"output": output, "cache": o.cache},
                        {"corpus": corpus, "runs": runs, **o.keywords("queries", "qrels", "answers", "utilities")})
    return flow(str(corpus), [str(r) for r in runs], output, choice, o, show_progress=show_progress,
                **({"say": say} if say else {}))


@checked("judge", judge=_model)
@JudgeOptions.door
@_model_keywords("judge", "batch_size", "api")
def judge(task: str, path: str | Path, output: str | Path, *, judge: str | ModelChoice = RULES,
          show_progress: bool = True, say=None, **options: Any):
    """``udcg judge TASK``: relevance, grade or answer outcomes of ``path`` by rules or an LLM judge,
    written to ``output`` (resumable). ``options``: those of ``udcg.flows.judge_options.JudgeOptions``
    (``require_relevant_context``, ``match``, ``write_authors`` …); ``batch_size`` and ``api`` (a
    ``ModelChoice``'s keywords) go with ``judge``; ``say``: a line for the user (an API judge's
    server). Returns a ``JudgeResult`` (``.summary``: counts per label and unparseable replies)."""
    from udcg.flows.judge import judge_file

    choice, rest = ModelChoice.split(judge, options)  # batch_size, api
    o = JudgeOptions.of("judge", **rest)
    _outputs_not_inputs({"output": output, "cache": o.cache, "write_authors": o.write_authors}, {"path": path})
    return judge_file(task, path, output, o, judge=choice, show_progress=show_progress,
                      **({"say": say} if say is not None else {}))


@checked("fit-theta")
@FitThetaOptions.door
def fit_theta(contexts: str | Path, output: str | Path, **options: Any) -> UDCGTheta:
    """``udcg fit-theta``: UDCG_theta fitted on the judged contexts of ``contexts`` (one k) and saved
    to ``output``; returns the fitted estimator. ``options``: those of ``udcg fit-theta``
    (``udcg.flows.theta_options.FitThetaOptions``: ``k``, ``variant``, ``C``, ``cv_score``,
    ``cv_folds``, ``seed``). Its warnings (too few questions, a saturated fit) are logged."""
    from udcg.flows.theta import fit_theta_file

    o = FitThetaOptions.of("fit_theta", **options)
    _outputs_not_inputs({"output": output}, {"contexts": contexts})
    theta, warnings = fit_theta_file(str(contexts), output, o)
    for warning in warnings:
        log.warning(warning)
    return theta


@checked("reader-check", utilities=api_args.path)
@ReaderCheckOptions.door
def reader_check(utilities: str | Path, **options: Any):
    """Can the reader of a utilities folder (``udcg annotate --run``'s, or its utilities.jsonl)
    measure distraction? A ``udcg.metrics.reader_check.ReaderCheck`` computed from the p_abs already
    there (no model time): pair counts, mean p_abs, the share of irrelevant pairs the reader answers
    from, the AUC of p_abs separating irrelevant from relevant pairs with a bootstrap interval over
    queries, and the verdict (``.can_measure_distraction``, ``.borderline``, ``.conclusion``: the
    verdict line's word, ``to_dict()``'s ``verdict``; ``.lines()``, ``.to_dict()``);
    with unjudged pairs, ``.fragility`` (how many of them, relabelled relevant, flip the verdict;
    ``.hangs_on_labels`` when that is at most max(3, 5% of them)), ``.judged_only`` (the check of the judged
    pairs alone) and ``.judge_command`` (the annotate command that judges them); on which queries:
    ``.queries`` (one ``QueryCheck`` per query: counts, mean p_abs, irrelevant pairs answered from,
    relevant pairs abstained on) and ``.query_line()``. A qrels or other ``qid 0 docid value`` file is
    refused (``InputError``): the check needs the folder's p_abs and which pairs were judged. ``options``:
    those of ``udcg reader-check`` (``udcg.flows.reader_check_options.ReaderCheckOptions``: ``n_boot``,
    ``seed``)."""
    from udcg.flows.reader_check import check_utilities

    return check_utilities(utilities, ReaderCheckOptions.of("reader_check", **options))


@checked("correlate")
@CorrelateOptions.door
def correlate(contexts: str | Path, **options: Any):
    """``udcg correlate``: per question, Spearman's rho (and tau-b, pairwise accuracy) of each metric
    with the judged answer outcomes of ``contexts``, tested against ``baseline``; ``equivalence``: a
    margin for the rho difference, adding each metric's equivalence test and ``decision``. Returns the
    full table (a ``udcg.io.tables.Table``: ``.rows``, ``.markdown()``, ``.write(path)``)."""
    from udcg.flows.correlate import correlate_file

    table, _, notes = correlate_file(str(contexts), CorrelateOptions.of("correlate", **options))
    for note in notes:
        log.info(note)
    return table


read_utilities = checked("score", utilities=optional(api_args.utilities))(_scores.read_utilities)
score_runs = checked("score", runs=api_args.run_map, **_TABLES)(_scores.score_runs)
named_runs = checked("score", paths=api_args.paths)(_scores.named_runs)
