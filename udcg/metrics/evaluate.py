"""Score a TREC run against qrels: dicts -> gain matrices (``udcg.metrics.gains``) -> the run's
``RunSignals`` -> each measure's kernel (``udcg.metrics.registry``); one per-rank curve per measure
family (hits, AP, DCG, ERR, ...), computed once and read off at every cutoff asked for. A run
scores the measures whose declared needs are qrels, utilities and a UDCG_theta model.

Query policy (ir_measures' default, trec_eval's with ``-c``): the queries scored are those of the
qrels, in qrels order. A qrels query missing from the run gets every measure's value on an empty
ranking and counts in every mean: 0 for the classical measures (ir_measures emits
``measure.DEFAULT`` = 0 for it), sigma(0) = 0.5 for UDCG and UDCG_theta (every slot of the context
empty, u = 0: a context that neither helps nor misleads). trec_eval without ``-c`` (pytrec_eval)
averages over the run's queries instead; ranx refuses such a run unless ``make_comparable``. A run query
without qrels is skipped (logged), as pytrec_eval does. A query whose qrels hold no relevant
document scores 0 (trec_eval's convention).

Results are keyed by ``Measure`` (a ``str``: its canonical name). Output rows are ``(qid, measure, value)``, query-major, measures in the order given — the
layout of ``ir_measures.iter_calc`` written as ``qid<TAB>measure<TAB>value``.

UDCG@k and UDCG_theta@k of a run are UDCG / UDCG_theta of its top-k documents read as one context,
with utilities ``{qid: {docid: u}}`` (``udcg annotate --run``). A ranking shorter than k is a
shorter context (UDCG divides by the number of documents there); an empty one is 0.5. A top-k
document without a utility follows ``unannotated``: ``error`` (default: say which and stop),
``zero`` (u = 0, neither helps nor misleads) or ``worst`` (u = -1, a fully misleading passage).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np

from udcg.errors import InputError
from udcg.metrics import registry
from udcg.metrics.constants import UNANNOTATED
from udcg.metrics.gains import GainTable, gain_table
from udcg.metrics.measures import Measure, parse_measure, parse_measures
from udcg.metrics.signals import Signals
from udcg.metrics.udcg import GAMMA, check_gamma

if TYPE_CHECKING:  # scikit-learn is imported only when a theta model is used
    from udcg.metrics.udcg_theta import UDCGTheta




@dataclass(frozen=True)
class UtilityOptions:
    """How UDCG and UDCG_theta are computed on a run (see the module doc)."""

    gamma: float = GAMMA
    theta: UDCGTheta | None = None
    unannotated: str = "error"
    where: str = "run"

    def __post_init__(self) -> None:
        check_gamma(self.gamma)
        if self.unannotated not in UNANNOTATED:
            raise InputError(f"unannotated = {self.unannotated!r}: choose one of {', '.join(UNANNOTATED)}")


def top_k_utilities(table: GainTable, k: int | None, opts: UtilityOptions) -> tuple[np.ndarray, np.ndarray]:
    """(utilities of the top-k documents, zero-padded to k columns; context length per query).
    ``table.extra["utility"]`` holds NaN where a ranked document has no utility."""
    if "utility" not in table.extra:
        raise InputError("UDCG needs utilities (give --utilities FOLDER from udcg annotate --run, or utilities=...)")
    width = table.gains.shape[1] if k is None else k
    length = np.minimum(table.depth, width)
    u = np.zeros((len(table.qids), width))
    have = min(width, table.extra["utility"].shape[1])
    u[:, :have] = table.extra["utility"][:, :have]
    inside = np.arange(width)[None, :] < length[:, None]
    missing = inside & np.isnan(u)
    u[~inside] = 0.0
    if missing.any():
        if opts.unannotated == "error":
            i, j = np.argwhere(missing)[0]
            raise InputError(f"{opts.where}: {int(missing.sum())} of the {int(inside.sum())} top-{width} documents have no "
                             f"utility (first: query {table.qids[i]!r}, rank {j + 1}); annotate them (udcg annotate "
                             "--run ...) or choose unannotated zero|worst")
        u[missing] = -1.0 if opts.unannotated == "worst" else 0.0
    return u, length


def utility_coverage(table: GainTable, k: int | None) -> tuple[int, int]:
    """(annotated documents, documents) among the top-k of every query."""
    util = table.extra["utility"]
    width = util.shape[1] if k is None else min(k, util.shape[1])
    inside = np.arange(width)[None, :] < np.minimum(table.depth, width)[:, None]
    return int((inside & ~np.isnan(util[:, :width])).sum()), int(inside.sum())


class RunSignals(Signals):
    """A run's ``Signals`` (``udcg.metrics.signals``): its GainTable, utilities as ``opts`` say."""

    def __init__(self, table: GainTable, opts: UtilityOptions) -> None:
        super().__init__(table.gains, opts.gamma, opts.theta)
        self.table = table
        self.opts = opts

    @property
    def ideal(self) -> np.ndarray:
        return self.table.ideal

    def n_rel(self, level: float) -> np.ndarray:
        return self.table.n_rel(level)

    def utilities(self, measure: Measure, k: int | None) -> tuple[np.ndarray, np.ndarray]:
        return top_k_utilities(self.table, k, self.opts)

    def passage(self, name: str, measure: Measure) -> np.ndarray:
        raise _contexts_only(measure)


def _contexts_only(measure: Measure) -> InputError:
    return InputError(f"{measure} is scored on contexts, not on a run (udcg score CONTEXTS.jsonl --metrics {measure})")


def _on_run(measure: Measure) -> Measure:
    """The measure, when a run can give what it needs (``registry.RUN_INPUTS``)."""
    if not registry.needs(measure) <= registry.RUN_INPUTS:
        raise _contexts_only(measure)
    return measure


def as_measures(measures: Sequence[Measure | str] | str) -> list[Measure]:
    """A comma-separated string, or a list of Measures and/or measure strings."""
    if isinstance(measures, Measure):
        return [measures]
    if isinstance(measures, str):
        return parse_measures(measures)
    out = []
    for m in measures:
        if isinstance(m, str) and not isinstance(m, Measure):
            m = parse_measure(m, where="measures")
        if not isinstance(m, Measure):
            raise InputError(f"measures: {m!r} is not a Measure (write e.g. 'P@5' or parse_measures('P@5,nDCG@10'))")
        out.append(m)
    return out


def evaluate_table(table: GainTable, measures: Sequence[Measure | str] | str,
                   opts: UtilityOptions | None = None) -> dict[Measure, np.ndarray]:
    """{measure: one value per query of the table}, each from its kernel (``udcg.metrics.registry``);
    measures of one family share their curve."""
    wanted = [_on_run(m) for m in as_measures(measures)]
    signals = RunSignals(table, opts or UtilityOptions())
    return {m: registry.score(m, signals) for m in wanted}


def run_table(run: Mapping[str, Mapping[str, float]], qrels: Mapping[str, Mapping[str, float]] | None,
              utilities: Mapping[str, Mapping[str, float]] | None = None, depth: int | None = None, *,
              judged: bool = False, pairs: Mapping[str, Mapping[str, float]] | None = None) -> GainTable:
    """The GainTable of a run, with ``extra["utility"]`` in rank order (NaN = no utility; the
    first ``depth`` ranks only, when given) when ``utilities`` are given. Without qrels the run's
    own queries are scored (utility measures only). ``judged``: also ``extra["qrel"]``, the qrels
    grade in rank order (NaN = no qrels entry: ``udcg.metrics.labels``); ``pairs``: also
    ``extra["pair"]``, a number per (query, document) (NaN = none), to tell one pair in two runs."""
    extra = {name: values for name, values in (("utility", utilities), ("pair", pairs)) if values is not None} or None
    return gain_table(run, qrels if qrels is not None else {qid: {} for qid in run}, extra,
                      extra_default=float("nan"), extra_depth=depth, judged=judged and qrels is not None)


def reads_utilities(measure: Measure) -> bool:
    """Whether the measure reads utilities (UDCG, UDCG_theta, ...: its declared needs)."""
    return "utilities" in registry.needs(measure)


def utility_depth(measures: Sequence[Measure]) -> int | None:
    """How many ranks of utilities the utility measures read (None = all)."""
    cutoffs = [m.cutoff for m in measures if reads_utilities(m)]
    return None if not cutoffs or None in cutoffs else max(cutoffs)


def evaluate_arrays(run: Mapping[str, Mapping[str, float]], qrels: Mapping[str, Mapping[str, float]] | None,
                    measures: Sequence[Measure | str] | str, *, utilities: Mapping[str, Mapping[str, float]] | None = None,
                    opts: UtilityOptions | None = None) -> tuple[tuple[str, ...], dict[Measure, np.ndarray]]:
    """Per-query values as arrays: (qids, {measure: values aligned with qids})."""
    wanted = as_measures(measures)  # checked before the (longer) conversion
    check_inputs(wanted, qrels, utilities)
    table = run_table(run, qrels, utilities if any(map(reads_utilities, wanted)) else None, utility_depth(wanted))
    return table.qids, evaluate_table(table, wanted, opts)


def check_inputs(wanted: list[Measure], qrels, utilities) -> None:
    """Every measure is one a run can score, and its inputs are given (its declared needs: qrels,
    utilities), before a run is read."""
    for m in wanted:
        _on_run(m)
    judged = [m for m in wanted if "qrels" in registry.needs(m)]
    if judged and qrels is None:
        raise InputError(f"{judged[0]} needs qrels (give --qrels, or score only UDCG@k)")
    annotated = [m for m in wanted if reads_utilities(m)]
    if annotated and utilities is None:
        raise InputError(f"{annotated[0]} needs utilities (give --utilities FOLDER from udcg annotate --run, "
                         "or utilities=...)")


def evaluate_trec(run: Mapping[str, Mapping[str, float]], qrels: Mapping[str, Mapping[str, float]] | None,
                  measures: Sequence[Measure | str] | str, *, utilities: Mapping[str, Mapping[str, float]] | None = None,
                  opts: UtilityOptions | None = None) -> list[tuple[str, Measure, float]]:
    """Per-query rows ``(qid, measure, value)``, query-major, qrels order (see module doc)."""
    qids, values = evaluate_arrays(run, qrels, measures, utilities=utilities, opts=opts)
    columns = [(m, v.tolist()) for m, v in values.items()]
    return [(qid, m, vals[i]) for i, qid in enumerate(qids) for m, vals in columns]


def mean_by_measure(rows: Sequence[tuple[str, str, float]]) -> dict[str, float]:
    """The mean over queries of each measure (MAP, MRR, ...), in first-seen order; a NaN value is
    left out of the mean."""
    sums: dict[str, list[float]] = {}
    for _, name, value in rows:
        sums.setdefault(name, []).append(value)
    return {name: float(np.nanmean(vals)) if not np.isnan(vals).all() else float("nan") for name, vals in sums.items()}


def format_tsv(rows: Sequence[tuple[str, str, float]]) -> str:
    """``qid<TAB>measure<TAB>value`` lines; values written with full precision (repr)."""
    return "".join(f"{qid}\t{name}\t{value!r}\n" for qid, name, value in rows)
