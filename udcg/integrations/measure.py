"""udcg's measures as ir_measures measures: ``udcg.ir_measure("UDCG@5", utilities=...)`` works in
``ir_measures.calc_aggregate`` / ``iter_calc`` and in PyTerrier's ``pt.Experiment(eval_metrics=[...])``.

The measure is one of ir_measures' runtime measures (its ``RuntimeProvider`` runs any measure with a
``runtime_impl``): ir_measures hands it the run and the qrels as DataFrames, and it scores them with
udcg's own code (``udcg.flows.run_scores.score_runs``), so its values are those of ``udcg score`` and
``udcg compare`` on the same run, qrels and utilities: trec_eval's ranking (score, then docid
descending), udcg's handling of unannotated documents (``unannotated=``), gamma and UDCG_theta.

Queries follow ir_measures: those of the qrels. A qrels query the run does not rank has no UDCG (an
empty context): its value is NaN and the measure's own mean (``calc_aggregate``) leaves it out, as
``udcg score`` does; ``pt.Experiment`` averages the per-query values itself, so its mean is then NaN.

The utilities: a folder or a utilities file (read when first needed, again when it changed), a
``{qid: {docid: utility}}`` dict, or the run's own ``utility`` column (``udcg.pyterrier.Utility``);
a UDCG_theta model is read once. ``measure @ k`` gives the same measure at another cutoff.
ir_measures tells measures apart by their names: two ``UDCG@5`` made with different utilities are
one column of ``pt.Experiment`` (score such runs in two calls).
"""

from __future__ import annotations

import functools
import math
from pathlib import Path
from typing import Any

from udcg.errors import InputError
from udcg.extras import need
from udcg.flows.run_scores import read_utilities, score_runs
from udcg.flows.theta import load_theta
from udcg.io.frames import frame_to_dict
from udcg.metrics.evaluate import UtilityOptions, reads_utilities
from udcg.metrics.measures import Measure, parse_measure


def ir_measure(name: str, utilities: Any = None, *, gamma: float | None = None, theta: Any = None,
               unannotated: str = "error", model: str | None = None, prompt_version: str | None = None):
    """An ir_measures measure computing the udcg measure ``name`` (``UDCG@5``, ``UDCG_theta@5``,
    ``UDCG``, any measure of ``udcg.metrics.measures``). ``utilities``: a ``udcg annotate --run``
    folder or utilities file (read when the measure is first computed, again when it changed), or
    ``{qid: {docid: utility}}``; without it, the run's own ``utility`` column (what
    ``udcg.pyterrier.Utility`` adds). ``theta``: a UDCG_theta model or its JSON file;
    ``unannotated``: ``error`` (default), ``zero`` or ``worst`` for a top-k document without a
    utility; ``model`` / ``prompt_version`` refuse utilities made for another reader."""
    ir_measures = need("ir_measures", "udcg.ir_measure")
    measure = parse_measure(name, where="udcg.ir_measure") if isinstance(name, str) else name
    if not isinstance(measure, Measure):
        raise InputError(f"udcg.ir_measure: give a measure name such as 'UDCG@5', got {type(name).__name__}")
    options = UtilityOptions(**({} if gamma is None else {"gamma": gamma}), unannotated=unannotated)
    if isinstance(theta, (str, Path)):
        theta = load_theta(theta)
    base = Measure(measure.name, None, measure.params)
    spec = {"base": base, "utilities": _Source(utilities, model, prompt_version), "gamma": options.gamma,
            "theta": theta, "unannotated": unannotated}
    cls = type(str(base), (_measure_class(ir_measures),), {"NAME": str(base), "__name__": str(base), "_udcg": spec})
    return cls(cutoff=measure.cutoff) if measure.cutoff is not None else cls()


class _Source:
    """The utilities of a measure: a dict as given, a folder or file read on first use and again
    when it changed (a pipeline may write it after the measure was made), or the run's column."""

    def __init__(self, utilities: Any, model: str | None, prompt_version: str | None) -> None:
        self.path = Path(utilities) if isinstance(utilities, (str, Path)) else None
        self.model, self.prompt_version = model, prompt_version
        self.value = None if self.path is not None else read_utilities(utilities, model, prompt_version)
        self.stamp: tuple = ()

    def _stamp(self) -> tuple:
        files = sorted(self.path.iterdir()) if self.path.is_dir() else [self.path] if self.path.exists() else []
        return tuple((f.name, f.stat().st_mtime_ns, f.stat().st_size) for f in files)

    def get(self, run, measure: Measure) -> dict | None:
        if self.path is not None:
            stamp = self._stamp()
            if self.value is None or stamp != self.stamp:
                self.value, self.stamp = read_utilities(self.path, self.model, self.prompt_version), stamp
            return self.value
        if self.value is not None or not reads_utilities(measure):
            return self.value
        if "utility" not in run.columns:
            raise InputError(f"udcg.ir_measure: {measure} needs utilities: give utilities= (a udcg annotate --run folder, "
                             "a utilities file or {qid: {docid: utility}}) or a run with a utility column "
                             "(udcg.pyterrier.Utility adds it)")
        known = run[run["utility"].notna()]
        return read_utilities(frame_to_dict(known, "utility", f"the run's utility column (for {measure})"))


@functools.cache
def _measure_class(ir_measures) -> type:
    """The base class of udcg's ir_measures measures (built on first use: ir_measures is optional)."""
    from ir_measures.measures.base import Measure as IrMeasure, MeanAgg, ParamInfo

    class NanMean(MeanAgg):
        """The mean of the values that are not NaN (a query without a context has no UDCG)."""

        def add(self, value):
            if not math.isnan(value):
                super().add(value)

    class UdcgMeasure(IrMeasure):
        SUPPORTED_PARAMS = {"cutoff": ParamInfo(dtype=int, required=False, desc="ranking cutoff threshold")}
        DEFAULT = float("nan")  # a qrels query the run does not rank: an empty context, no UDCG
        RUN_INPUTS = ["query_id", "doc_id", "score"]
        QREL_INPUTS = ["query_id", "doc_id", "relevance"]
        _udcg: dict = {}

        def udcg_measure(self) -> Measure:
            base = self._udcg["base"]
            return Measure(base.name, self.params.get("cutoff"), base.params)

        def runtime_impl(self, qrels, run):
            spec, measure = self._udcg, self.udcg_measure()
            run_d = frame_to_dict(run, "score", f"run (for {measure})")
            qrels_d = frame_to_dict(qrels, "relevance", f"qrels (for {measure})")
            util = spec["utilities"].get(run, measure)
            scores = score_runs({"ir_measures": run_d}, qrels_d, utilities=util, metrics=[measure],
                                gamma=spec["gamma"], theta=spec["theta"], unannotated=spec["unannotated"])["ir_measures"]
            for qid, value in zip(scores.qids, scores.values[str(measure)].tolist()):
                if qid in run_d:
                    yield ir_measures.Metric(qid, self, value)

        def aggregator(self):
            return NanMean()

    return UdcgMeasure
