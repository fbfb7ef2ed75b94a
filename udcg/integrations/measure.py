"""udcg's measures as ir_measures measures: ``udcg.ir_measure("UDCG@5", utilities=...)`` works in
``ir_measures.calc_aggregate`` / ``iter_calc`` and in PyTerrier's ``pt.Experiment(eval_metrics=[...])``,
and once udcg is imported ``ir_measures.parse_measure("UDCG@5")`` knows ``UDCG`` and ``UDCG_theta``.

The measure is one of ir_measures' runtime measures (its ``RuntimeProvider`` runs any measure with a
``runtime_impl``): ir_measures hands it the run and the qrels as DataFrames, and it scores them with
udcg's own code (``udcg.flows.run_scores.score_runs``), so its values are those of ``udcg score`` and
``udcg compare`` on the same run, qrels and utilities: trec_eval's ranking (score, then docid
descending), udcg's handling of unannotated documents (``unannotated=``), gamma and UDCG_theta.

A measure is its name (ir_measures compares and hashes measures by their ``repr``, and
``pt.Experiment`` names its columns by it), so the name carries whatever changes the value, in
ir_measures' ``Measure(param=...)@k`` style, defaults left out: ``UDCG@5``,
``UDCG(gamma=0.5)@5``, ``UDCG(unannotated='zero',utilities='utilities#3fa2c1d0')@5``,
``UDCG_theta(theta='theta-k5#9b1e04c2')@5``. Utilities and a UDCG_theta model are read when the
measure is made and named by the folder's or file's name and a hash of what was read (``#HASH``
alone for a dict or a frame): two measures are equal only when they hold the same utilities (or
model) and parameters. Without utilities a measure reads the run's ``utility`` column
(``udcg.pyterrier.results(..., utilities=...)`` or ``udcg.pyterrier.Utility`` add it), which is
what ``parse_measure("UDCG@5")`` means; ``UDCG(utilities='FOLDER')@5`` reads a folder by name.
What was read is kept for the process, keyed by its label, so a name made here parses back here.

Queries follow ir_measures: those of the qrels. A qrels query the run does not rank is an empty
ranking, UDCG sigma(0) = 0.5 (``udcg.metrics.evaluate``), counted in every mean, with a warning
(the notes of ``udcg.evaluate``, on the ``udcg`` logger).
"""

from __future__ import annotations

import functools
import hashlib
import json
import logging
from pathlib import Path
from typing import Any

from udcg.errors import InputError
from udcg.extras import need

# udcg's scoring stack (numpy, scipy) is imported inside the functions that score or read: naming
# UDCG in ir_measures' registry, which ``import ir_measures`` triggers once udcg is imported, stays light.

log = logging.getLogger(__name__)
# the measures ir_measures.parse_measure knows once udcg is imported, with the parameters that change
# their values (what ``_param_names`` derives from a measure's needs; a test holds the two equal)
NAMED = {"UDCG": ("gamma", "unannotated", "utilities"), "UDCG_theta": ("theta", "unannotated", "utilities")}
_HELD: dict[str, tuple[Any, str]] = {}  # label -> (the utilities table or UDCG_theta model, its full SHA-256)


def ir_measure(name: str, utilities: Any = None, *, gamma: float | None = None, theta: Any = None,
               unannotated: str = "error", model: str | None = None, prompt_version: str | None = None):
    """An ir_measures measure computing the udcg measure ``name`` (``UDCG@5``, ``UDCG_theta@5``,
    ``UDCG``, any measure of ``udcg.metrics.measures``). ``utilities``: a ``udcg annotate --run``
    folder or utilities file, or ``{qid: {docid: utility}}``, read now; without it, the run's own
    ``utility`` column. ``theta``: a UDCG_theta model or its JSON file; ``unannotated``: ``error``
    (default), ``zero`` or ``worst`` for a top-k document without a utility; ``model`` /
    ``prompt_version`` refuse utilities made for another reader. The name says what differs from
    the defaults (module doc)."""
    from udcg.flows.run_scores import read_utilities
    from udcg.metrics.evaluate import UtilityOptions
    from udcg.metrics.measures import Measure, parse_measure

    ir_measures = need("ir_measures", "udcg.ir_measure")
    measure = parse_measure(name, where="udcg.ir_measure") if isinstance(name, str) else name
    if not isinstance(measure, Measure):
        raise InputError(f"udcg.ir_measure: give a measure name such as 'UDCG@5', got {type(name).__name__}")
    UtilityOptions(unannotated=unannotated)  # checked for every measure, as udcg score checks it
    cls = _measure_class(ir_measures, str(Measure(measure.name, None, measure.params)))
    params: dict[str, Any] = {"cutoff": measure.cutoff}
    if utilities is not None:
        params["utilities"] = hold_utilities(utilities, model, prompt_version)
    else:
        read_utilities(None, model, prompt_version)  # model / prompt without utilities: one line
    wanted = {"gamma": gamma, "theta": theta, "unannotated": unannotated}
    params.update({k: v for k, v in wanted.items() if k in cls.SUPPORTED_PARAMS})
    return cls(**params)


def _hold(name: str, value: Any, text: str) -> str:
    """Keep ``value`` under ``NAME#HASH`` (the first 8 hex digits of the SHA-256 of ``text``)."""
    digest = hashlib.sha256(text.encode()).hexdigest()
    label = f"{name}#{digest[:8]}"
    if label in _HELD and _HELD[label][1] != digest:
        raise InputError(f"two different inputs hash to {label!r}; copy one to a folder of another name")
    _HELD.setdefault(label, (value, digest))
    return label


def _path(given: Any, what: str) -> Path | None:
    if not isinstance(given, (str, Path)):
        return None
    if not Path(given).exists():
        raise InputError(f"{what} {str(given)!r}: no such folder or file, and no {what} of that label were read in "
                         "this process (name a udcg annotate folder or a file, or make the measure with "
                         "udcg.ir_measure)")
    return Path(given)


def hold_utilities(utilities: Any, reader: str | None = None, prompt_version: str | None = None) -> str:
    """The label of ``utilities`` (read now and kept): ``NAME#HASH`` for a folder or file, ``#HASH``
    for a dict or frame; the hash is of the ``(qid, docid, utility)`` triples, sorted."""
    from udcg.flows.run_scores import read_utilities

    if isinstance(utilities, str) and utilities in _HELD:
        return utilities
    path = _path(utilities, "utilities")
    table = {q: dict(docs) for q, docs in read_utilities(utilities, reader, prompt_version).items()}  # a copy
    text = "".join(f"{q}\t{d}\t{float(table[q][d])!r}\n" for q in sorted(table) for d in sorted(table[q]))
    return _hold(path.resolve().name if path else "", table, text)


def hold_theta(theta: Any) -> str:
    """The label of a UDCG_theta model (or its JSON file): ``NAME#HASH`` of what predicts (k, variant,
    weights)."""
    from udcg.flows.theta import load_theta

    if isinstance(theta, str) and theta in _HELD:
        return theta
    path = _path(theta, "theta")
    fitted = load_theta(path) if path else theta
    if not hasattr(fitted, "coef_") or not hasattr(fitted, "predict"):
        raise InputError(f"theta: give a fitted UDCG_theta model or its JSON file (udcg fit-theta), got "
                         f"{type(theta).__name__}")
    text = json.dumps([fitted.k_, fitted.variant, [float(c) for c in fitted.coef_]])
    return _hold(path.resolve().stem if path else "", fitted, text)


def _held(label: str, what: str) -> Any:
    if label not in _HELD:
        raise InputError(f"{what} {label!r} were not read in this process: make the measure here (udcg.ir_measure)")
    return _HELD[label][0]


@functools.cache
def _base(ir_measures) -> type:
    """The base class of udcg's ir_measures measures (built on first use: ir_measures is optional)."""
    from ir_measures.measures.base import Measure as IrMeasure

    class UdcgMeasure(IrMeasure):
        RUN_INPUTS = ["query_id", "doc_id", "score"]
        QREL_INPUTS = ["query_id", "doc_id", "relevance"]

        def __init__(self, **params: Any) -> None:
            params = {k: v for k, v in params.items() if v is not None}
            unknown = sorted(set(params) - set(self.SUPPORTED_PARAMS))
            if unknown:
                raise InputError(f"{self.NAME}: no parameter {unknown[0]!r} (it takes "
                                 f"{', '.join(self.SUPPORTED_PARAMS)})")
            if set(params) - {"utilities", "theta"}:  # a value to check: udcg's checks (and defaults)
                params = _checked(self.NAME, params)
            if "utilities" in params:
                params["utilities"] = hold_utilities(params["utilities"])
            if "theta" in params:
                params["theta"] = hold_theta(params["theta"])
            super().__init__(**dict(sorted(params.items())))

        def udcg_measure(self):
            from udcg.metrics.measures import Measure, parse_measure

            base = parse_measure(self.NAME, where="udcg.ir_measure")
            return Measure(base.name, self.params.get("cutoff"), base.params)

        def _utilities(self, run, measure) -> dict | None:
            from udcg.flows.run_scores import read_utilities
            from udcg.io.frames import frame_to_dict
            from udcg.metrics.evaluate import reads_utilities

            if "utilities" in self.params:
                return _held(self.params["utilities"], "utilities")
            if not reads_utilities(measure):
                return None
            if "utility" not in run.columns:
                raise InputError(f"udcg.ir_measure: {self} needs utilities: bind them "
                                 f"(udcg.ir_measure('{measure}', utilities=FOLDER), or "
                                 f"\"{measure.name}(utilities='FOLDER')@{measure.cutoff or 5}\" to "
                                 "ir_measures.parse_measure) or give a run with a utility column "
                                 "(udcg.pyterrier.results(..., utilities=FOLDER) or udcg.pyterrier.Utility adds it)")
            known = run[run["utility"].notna()]
            return read_utilities(frame_to_dict(known, "utility", f"the run's utility column (for {self})"))

        def runtime_impl(self, qrels, run):
            from udcg.flows.run_scores import score_runs
            from udcg.io.frames import frame_to_dict
            from udcg.metrics.udcg import GAMMA

            measure = self.udcg_measure()
            run_d = frame_to_dict(run, "score", f"run (for {self})")
            qrels_d = frame_to_dict(qrels, "relevance", f"qrels (for {self})")
            theta = self.params.get("theta")
            scores = score_runs({"run": run_d}, qrels_d, utilities=self._utilities(run, measure), metrics=[measure],
                                gamma=self.params.get("gamma", GAMMA), theta=theta and _held(theta, "theta"),
                                unannotated=self.params.get("unannotated", "error"))["run"]
            for note in scores.notes:
                log.warning("%s: %s", self, note)
            for qid, value in zip(scores.qids, scores.values[measure].tolist()):
                yield ir_measures.Metric(qid, self, value)

    return UdcgMeasure


def _checked(name: str, params: dict) -> dict:
    """``params`` checked as ``udcg score`` checks them (gamma's range, ``unannotated``'s choices, the
    cutoff's bounds), gamma a float, defaults left out (so they are not in the name)."""
    from udcg.metrics.evaluate import UtilityOptions
    from udcg.metrics.measures import make_measure
    from udcg.metrics.udcg import check_gamma

    out = dict(params)
    if "gamma" in out:
        out["gamma"] = check_gamma(out["gamma"])
    UtilityOptions(**{k: out[k] for k in ("gamma", "unannotated") if k in out})
    if out.get("cutoff") is not None:
        make_measure(name.partition("(")[0], out["cutoff"], where=name)
    defaults = UtilityOptions()
    return {k: v for k, v in out.items() if k not in ("gamma", "unannotated") or v != getattr(defaults, k)}


def _param_names(base: str) -> tuple[str, ...]:
    """The parameters that change a udcg measure's value: the utilities and ``unannotated`` for one
    that reads utilities, with ``theta`` for one that needs a UDCG_theta model, else ``gamma``."""
    from udcg.metrics import registry
    from udcg.metrics.measures import parse_measure

    needs = registry.needs(parse_measure(base, where="udcg.ir_measure"))
    if "utilities" not in needs:
        return ()
    return tuple(sorted(("theta" if "theta" in needs else "gamma", "unannotated", "utilities")))


_PARAM_INFO = {"gamma": ("float", "the weight of the distracting passages (default 1/3)"),
               "unannotated": ("str", "a top-k document without a utility: error (default), zero or worst"),
               "utilities": ("str", "the utilities read (a label, or a folder's path); none: the run's column"),
               "theta": ("str", "the UDCG_theta model read (a label, or its file's path)")}


@functools.cache
def _measure_class(ir_measures, base: str) -> type:
    """The ir_measures class of one udcg measure (``base``: its name and parameters, no cutoff), with
    the parameters that change its value (``_param_names``; ``NAMED``'s without importing udcg's metrics)."""
    from ir_measures.measures.base import ParamInfo

    names = NAMED[base] if base in NAMED else _param_names(base)
    params = {"cutoff": ParamInfo(dtype=int, required=False, desc="ranking cutoff threshold")}
    for name in names:
        dtype, desc = _PARAM_INFO[name]
        params[name] = ParamInfo(dtype=float if dtype == "float" else str, default=None, desc=desc)
    return type(base, (_base(ir_measures),), {"NAME": base, "__name__": base, "SUPPORTED_PARAMS": params,
                                              "__doc__": f"udcg's {base} (udcg.integrations.measure)"})


def register_measures() -> None:
    """Name ``UDCG`` and ``UDCG_theta`` in ir_measures' registry, so ``ir_measures.parse_measure``
    reads them; ``import udcg`` calls it once ir_measures is imported (``udcg.extras.after_import``)."""
    import ir_measures

    for name in NAMED:
        cls = _measure_class(ir_measures, name)
        held = ir_measures.measures.registry.get(name)
        if held is None:
            ir_measures.measures.register(cls(), name=name)
        elif not isinstance(held, _base(ir_measures)):
            log.warning("ir_measures already has a measure named %s (%s); udcg's is udcg.ir_measure(%r)",
                        name, type(held).__module__, name)
