"""The analyses of ``udcg validate``, as pure functions of context records (no model).

A context record (``udcg.records.ContextRecord``, one line of the contexts file: see
``udcg.experiment.context_records``) holds qid, cid, pids, the per-position fields (relevant, p_abs,
utilities, grades, erag, answer_ll, contains), n_relevant, corpus_grades, the answer and its outcome,
plus ``study`` and ``split``. From them:

- ``score_records`` / ``score_each_k``: every metric of every context (new records with ``metrics``);
- ``split_questions`` / ``fit_theta``: the train/test split of questions and UDCG_theta per k;
- ``correlate``: the paper's Table 3 (and Table 4) on a set of records;
- ``k_sweep_table`` (Fig. 2), ``position_table`` (Fig. 1), ``oracle_table`` (Table 2).

NA policy in correlations: a metric that is NA for a context (RA-nWG when the question's pool
holds no grade-3+ passage: its oracle gain is 0) is NaN there, never 0; a question with an NA
context has no correlation for that metric (counted as ``na_metric`` in the table). The number of
NA values is returned with each table.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import dataclasses
import hashlib
import json
import math
import re
from collections.abc import Sequence
from pathlib import Path

import numpy as np

from udcg.annotate.sampling import wilson_interval
from udcg.errors import InputError
from udcg.flows.correlate import correlation_table_of, per_question_values
from udcg.flows.scoring import context_batch, field_matrix
from udcg.flows.theta import fit_model
from udcg.io.tables import Table
from udcg.metrics import registry
from udcg.metrics.contexts import parse_metric, score_batch
from udcg.metrics.paired_tests import CorrelationTests
from udcg.metrics.udcg import udcg_matrix
from udcg.records import OUTCOME_LABELS, OUTCOME_SCORE, ContextRecord

if TYPE_CHECKING:  # scikit-learn is imported only when a theta model is used
    from udcg.metrics.udcg_theta import UDCGTheta

ABLATIONS = ("UDCG_theta(rel-only)", "UDCG_theta(binary)", "UDCG(rel-only)")
POSITION_METRICS = ("nDCG", "RR", "AP", "P", "UDCG", "UDCG_theta")
CIRCULAR_AT_K1 = ("UDCG", "UDCG_theta", "ANSWER_PROB", "eRAG")  # families read off the graded prompt itself at k = 1
Z95 = 1.959964  # the two-sided 95% normal quantile, for Fig. 1's accuracy intervals
JUDGED = frozenset(("grades", "erag", "answer_ll", "contains"))  # per-passage signals some contexts lack: NA there


# ---------------------------------------------------------------- metrics


def score_records(records: Sequence[ContextRecord], names: Sequence[str], gamma: float, n_relevant: str = "pool",
                  theta: dict[str, UDCGTheta] | None = None, ablations: bool = False) -> list[ContextRecord]:
    """The records, all of the same k, with ``metrics`` {name: value or None (NA)}.
    ``theta``: fitted UDCG_theta models by variant (``full`` gives UDCG_theta; the others, with
    ``ablations``, the Table 4 rows). A metric that needs a missing field is NA for that context."""
    if not records:
        return []
    theta = theta or {}
    ks = {r.k for r in records}
    if len(ks) != 1:
        raise InputError(f"score_records: contexts of several k {sorted(ks)} (score each k apart)")
    values: dict[str, np.ndarray] = {}
    for name in names:
        metric = parse_metric(name)
        if metric.family == "UDCG_theta":
            if "full" in theta:
                values[name] = theta["full"].predict(field_matrix(records, "utilities", float))
            continue
        judged = registry.needs(metric) & JUDGED
        have = np.array([all(getattr(r, field) is not None for field in judged) for r in records])
        out = np.full(len(records), np.nan)
        if have.any():
            subset = [r for r, h in zip(records, have) if h]
            out[have] = score_batch(context_batch(subset, n_relevant), [metric], gamma)[str(metric)]
        values[name] = out
    if ablations:
        u = field_matrix(records, "utilities", float)
        rel = field_matrix(records, "relevant", bool)
        for variant in ("rel-only", "binary"):
            if variant in theta:
                values[f"UDCG_theta({variant})"] = theta[variant].predict(u, rel if variant == "binary" else None)
        values["UDCG(rel-only)"] = udcg_matrix(u, 0.0)
    return [dataclasses.replace(r, metrics={n: (None if math.isnan(v[i]) else float(v[i])) for n, v in values.items()})
            for i, r in enumerate(records)]


def score_each_k(records: Sequence[ContextRecord], names: Sequence[str], gamma: float, n_relevant: str,
                 thetas: dict[int, dict[str, UDCGTheta]], ablations: bool = False) -> list[ContextRecord]:
    """``score_records`` on the records of each k apart (an oracle context from a pool shorter than
    oracle_k is shorter too), with that k's UDCG_theta models; the records keep their order."""
    by_k: dict[int, list[int]] = {}
    for i, r in enumerate(records):
        by_k.setdefault(r.k, []).append(i)
    scored = list(records)
    for k, idx in by_k.items():
        for i, r in zip(idx, score_records([records[i] for i in idx], names, gamma, n_relevant, thetas.get(k, {}), ablations)):
            scored[i] = r
    return scored


# ---------------------------------------------------------------- UDCG_theta


def split_questions(qids: Sequence[str], train_share: float, seed: int) -> dict[str, str]:
    """Each question to "train" or "test": the round(train_share * n) questions first in the
    order of sha256(seed:qid) train UDCG_theta. A question's split does not depend on the others'
    order; with train_share 0 every question is "test"."""
    unique = sorted(set(qids), key=lambda q: hashlib.sha256(f"{seed}:{q}".encode()).hexdigest())
    n_train = int(math.floor(train_share * len(unique) + 0.5))
    return {q: ("train" if i < n_train else "test") for i, q in enumerate(unique)}


def _graded_only(records: Sequence[ContextRecord]) -> list[ContextRecord]:
    return [r for r in records if r.label in OUTCOME_SCORE]


def outcome_array(records: Sequence[ContextRecord]) -> np.ndarray:
    return np.array([OUTCOME_SCORE[r.label] for r in records])


def fit_theta_records(records: Sequence[ContextRecord], variant: str, C: float | str, seed: int, C_grid: Sequence[float] | None = None,
              cv: int = 5, cv_score: str = "spearman") -> UDCGTheta | None:
    """UDCG_theta fitted on graded records of one k; None when no question has two contexts with
    different outcomes (nothing to learn). ``C="auto"``: chosen from ``C_grid`` by ``cv``-fold
    cross-validation grouped by question, scored by ``cv_score``. The SVM solver's coordinate
    order is seeded with ``seed`` (``random_state``; numpy's global generator is not touched)."""
    return fit_theta_why(records, variant, C, seed, C_grid, cv, cv_score)[0]


def fit_theta_why(records: Sequence[ContextRecord], variant: str, C: float | str, seed: int,
                  C_grid: Sequence[float] | None = None, cv: int = 5, cv_score: str = "spearman") -> tuple[UDCGTheta | None, str]:
    """``fit_theta``, and when it gives None, why."""
    from udcg.metrics.udcg_theta import UDCGTheta

    graded = _graded_only(records)
    if not graded:
        return None, f"no graded training contexts ({len({r.qid for r in records})} training questions)"
    model = UDCGTheta(variant=variant, C=C, C_grid=None if C_grid is None else tuple(C_grid), cv=cv, cv_score=cv_score,
                      random_state=seed)
    try:
        return fit_model(field_matrix(graded, "utilities", float), outcome_array(graded), np.array([r.qid for r in graded]),
                         field_matrix(graded, "relevant", bool), model), ""
    except InputError as e:
        return None, f"{len({r.qid for r in graded})} training questions: {e}"


def theta_in_sample(from_run: Path, qids: list[str]) -> dict:
    """Whether UDCG_theta loaded from ``from_run`` was trained on questions this run correlates: its
    training questions are the ``split: train`` contexts of its ``contexts.jsonl``; a folder
    without them (a model fitted elsewhere, e.g. by ``udcg fit-theta`` on every question) counts as
    in-sample, since nothing shows it is not."""
    path = from_run / "contexts.jsonl"
    if not path.is_file():
        return {"in_sample": True, "why": f"{from_run.name} holds no contexts.jsonl naming its training questions"}
    train = {json.loads(line)["qid"] for line in path.read_text(encoding="utf-8").splitlines()
             if line.strip() and json.loads(line).get("split") == "train"}
    shared = len(train & set(qids))
    return {"in_sample": bool(shared), "why": f"{shared} of this run's {len(set(qids))} questions trained it"}


SATURATED_NOTE = ("saturated = yes: at least 99% of the training pairs lie inside the SVM margin, so the weights are the "
                  "mean pair difference (cos_mean_diff ~ 1), not a positional effect")


def theta_weights_table(models: dict[str, UDCGTheta]) -> Table:
    """UDCG_theta's weights per position, in utility units, for each fitted model (keyed by a
    name such as ``full-k5``), with the C it was fitted with, the share of its training pairs
    inside the margin, the cosine of its weights with the mean pair difference and whether it is
    saturated (``UDCGTheta.saturated_``: its weights are then no positional effect)."""
    table = Table(["model", "position", "alpha", "beta", "C", "pairs_in_margin", "cos_mean_diff", "saturated"],
                  title=f"UDCG_theta weights per position ({SATURATED_NOTE})")
    for name, m in models.items():
        saturated = "unknown" if math.isnan(m.margin_share_) else "yes" if m.saturated_ else ""
        for i, (a, b) in enumerate(zip(m.alpha_, m.beta_), start=1):
            table.add(model=name, position=i, alpha=float(a), beta=float(b), C=float(m.C_),
                      pairs_in_margin=m.margin_share_, cos_mean_diff=m.cosine_mean_difference_, saturated=saturated)
    return table


CV_RULE_TEXT = {"one-se": "the smallest C (the strongest regularisation) whose mean is within one standard error of the "
                          "best mean",
                "best": "the best mean"}


def theta_cv_table(models: dict[str, UDCGTheta]) -> Table:
    """The validation curve of each model whose C was chosen by cross-validation: mean held-out
    score per C with its standard error over the folds, which C had the best mean and which C the
    model's rule chose (``UDCGTheta``'s ``cv_rule``)."""
    curves = {name: m.cv_results_ for name, m in models.items() if m.cv_results_}
    rules = sorted({cv.get("rule", "best") for cv in curves.values()})
    table = Table(["model", "C", "score", "mean", "se", "folds", "converged", "best", "chosen"],
                  title="UDCG_theta: C chosen by cross-validation grouped by question (held-out mean per-question score); "
                        "chosen: " + "; ".join(f"{CV_RULE_TEXT[r]}" + (f" ({r} rule)" if len(rules) > 1 else "")
                                               for r in rules))
    for name, cv in curves.items():
        m = models[name]
        se = cv.get("se", [None] * len(cv["C"]))
        best = cv.get("best", m.C_ if cv.get("rule", "best") == "best" else None)
        for C, mean, err, ok in zip(cv["C"], cv["mean"], se, cv.get("converged", [True] * len(cv["C"]))):
            table.add(model=name, C=float(C), score=cv["score"], mean=float("nan") if mean is None else float(mean),
                      se=float("nan") if err is None else float(err), folds=cv["folds"], converged="yes" if ok else "no",
                      best="*" if C == best else "", chosen="*" if C == m.C_ else "")
    return table


# ---------------------------------------------------------------- correlation (Tables 3 and 4)


def _graded_values(graded: Sequence[ContextRecord], names: Sequence[str]) -> tuple[dict[str, np.ndarray], int]:
    """{metric: value per graded context, NA as NaN (module docstring)}, and the number of NA values."""
    values = {n: np.array([r.metrics[n] for r in graded], dtype=float) for n in names}  # None -> NaN
    return values, sum(int(np.isnan(v).sum()) for v in values.values())


def _present(records: Sequence[ContextRecord], names: Sequence[str]) -> list[str]:
    """The metrics every record carries (absent ones, e.g. an unfitted UDCG_theta, are left out)."""
    return [n for n in names if records and all(n in (r.metrics or {}) for r in records)]


def per_question_rows(records: Sequence[ContextRecord], names: Sequence[str], constant_metric: str) -> list[dict]:
    """The per-question values behind ``correlate``: one row per (metric, question) with rho,
    tau_b, pair_acc (None where undefined) and the status code of ``correlation.per_question``."""
    names = _present(records, names)
    graded = _graded_only(records)
    if not graded or not names:
        return []
    values, _ = _graded_values(graded, names)
    qids, stats, status = per_question_values(values, outcome_array(graded), np.array([r.qid for r in graded]),
                                              constant_metric)
    out = []
    for n in names:
        for i, q in enumerate(qids):
            out.append({"metric": n, "qid": str(q), **{key: (None if math.isnan(v[i]) else float(v[i]))
                                                       for key, v in stats[n].items()}, "status": int(status[n][i])})
    return out


def circular_metrics(records: Sequence[ContextRecord], names: Sequence[str]) -> tuple[str, ...]:
    """The metrics whose score, on one-passage contexts, is read off the very prompt whose answer is
    graded: a one-passage context is that passage's annotation prompt, so eRAG scores the context's
    own answer, ANSWER_PROB its own likelihood of the reference, and every UDCG variant (UDCG@k,
    UDCG_theta, the ablations) its own abstention probability p_abs. They predict their own
    outcome there, so at k = 1 they are circular (``CIRCULAR_AT_K1``)."""
    if records and all(r.k == 1 for r in records):
        return tuple(n for n in names if metric_family(n) in CIRCULAR_AT_K1)
    return ()


def metric_family(name: str) -> str:
    """The family of a metric name as the config canonicalises it or as the ablations are named:
    ``UDCG@5`` -> UDCG, ``UDCG_theta(rel-only)`` -> UDCG_theta."""
    return re.split(r"[@(]", name, maxsplit=1)[0]


def correlate_records(records: Sequence[ContextRecord], names: Sequence[str], baseline: str | None, constant_metric: str,
              n_boot: int, seed: int, title: str, in_sample: Sequence[str] = ()) -> tuple[Table, dict]:
    """Mean per-question Spearman (and Kendall tau-b, pairwise accuracy) of each metric with the
    outcomes, bootstrap intervals, paired p-values against ``baseline``: the paper's Table 3
    layout; circular metrics (``circular_metrics``) flagged. Metrics absent from every record
    (e.g. UDCG_theta when none could be fitted) are left out. ``in_sample``: metrics fitted on
    these very questions (UDCG_theta loaded from a run that trained on them), flagged as circular.
    "best" marks a metric only where the Holm-corrected tests tell it apart from every other
    (``udcg.flows.correlate.significant_best``). Returns the table and notes."""
    names = _present(records, names)
    graded = _graded_only(records)
    values, n_na = _graded_values(graded, names)
    notes = {"contexts": len(graded), "ungraded_contexts": len(records) - len(graded), "na_values": n_na,
             "questions": len({r.qid for r in graded})}
    if not graded or not names:
        return Table(["metric"], title=title + " (no graded contexts)"), notes
    tests = CorrelationTests(baseline=baseline if baseline in names else None, constant_metric=constant_metric,
                             n_boot=n_boot, seed=seed)
    circular = tuple(dict.fromkeys([*circular_metrics(records, names), *(n for n in in_sample if n in names)]))
    table = correlation_table_of(values, outcome_array(graded), np.array([r.qid for r in graded]), tests, title=title,
                                 circular=circular, best="significant")
    return table, notes


# ---------------------------------------------------------------- Fig. 2, Fig. 1, Table 2


K_SWEEP_COLUMNS = ("metric", "mean_rho", "ci_low", "ci_high", "n_questions", "mean_tau_b", "tau_b_ci_low",
                   "tau_b_ci_high", "pair_acc", "pair_acc_ci_low", "pair_acc_ci_high")
K_SWEEP_STATISTICS = {"mean_rho": "Spearman ρ", "mean_tau_b": "Kendall τ-b", "pair_acc": "pairwise accuracy"}


def k_sweep_table(tables: dict[int, Table]) -> Table:
    """Fig. 2's data: one row per (k, metric) from each k's correlation table: the three
    statistics with their intervals, and ``circular`` ("yes" for ``circular_metrics``: the UDCG
    variants, ANSWER_PROB and eRAG at k = 1)."""
    out = Table(["k", *K_SWEEP_COLUMNS, "circular"],
                title="Fig. 2: correlation with answer outcomes against the context size k (test questions)")
    for k in sorted(tables):
        for row in tables[k].rows:
            if "mean_rho" in row:
                out.add(k=k, **{c: row.get(c, float("nan")) for c in K_SWEEP_COLUMNS}, circular=row.get("circular", ""))
    return out


def pivot_k(table: Table, value: str = "mean_rho") -> Table:
    """The k sweep as one row per metric and one column per k (``value``: mean_rho, mean_tau_b or
    pair_acc), for reading; a circular value is followed by " (circular)"."""
    ks = sorted({r["k"] for r in table.rows})
    name_of = K_SWEEP_STATISTICS.get(value, value)
    out = Table(["metric", *(f"k={k}" for k in ks)], title=f"{table.title}: {name_of}")
    for name in dict.fromkeys(r["metric"] for r in table.rows):
        values = {f"k={r['k']}": (f"{r[value]:.3f} (circular)" if r.get("circular") and r[value] == r[value] else r[value])
                  for r in table.rows if r["metric"] == name}
        out.add(metric=name, **{c: values.get(c, float("nan")) for c in out.columns[1:]})
    return out


def _shares(labels: Sequence[str | None]) -> dict[str, float]:
    graded = [x for x in labels if x in OUTCOME_SCORE]
    n = len(graded)
    return {lab: (100.0 * sum(x == lab for x in graded) / n if n else float("nan")) for lab in OUTCOME_LABELS}


def mcnemar_exact(b: int, c: int) -> float:
    """Two-sided exact McNemar p-value for paired binary outcomes with b and c discordant pairs:
    twice the smaller binomial(b + c, 1/2) tail, capped at 1 (1.0 when there is no discordant pair)."""
    n = b + c
    if n == 0:
        return 1.0
    tail = sum(math.comb(n, i) for i in range(min(b, c) + 1)) / 2.0 ** n
    return min(1.0, 2.0 * tail)


def _graded(records: Sequence[ContextRecord]) -> dict[str, str]:
    """{qid: outcome} of the graded records."""
    return {r.qid: r.label for r in _graded_only(records)}


def _paired_p(a: dict[str, str], b: dict[str, str], label: str) -> float:
    """Exact McNemar p of outcome == label between two {qid: outcome} maps, on their shared
    graded questions (NaN when they share none)."""
    pairs = [(a[q] == label, b[q] == label) for q in a.keys() & b.keys()]
    if not pairs:
        return float("nan")
    return mcnemar_exact(sum(x and not y for x, y in pairs), sum(y and not x for x, y in pairs))


def position_table(records: Sequence[ContextRecord], k: int) -> Table:
    """Fig. 1's data: per position of the single relevant passage (1-based), the outcome shares
    (%) over questions, the 95% Wilson interval of the correct share, the exact McNemar p-value of
    correct-or-not against position 1 on the questions answered at both, and the mean of each
    position-sensitive metric."""
    names = _present(records, POSITION_METRICS)
    table = Table(["position", "n_questions", *OUTCOME_LABELS, "correct_low", "correct_high", "p_vs_1", *names],
                  title=f"Fig. 1: one relevant passage moved through k = {k} positions among irrelevant ones")
    by_pos: dict[int, list[ContextRecord]] = {}
    for r in records:
        by_pos.setdefault(r.relevant.index(True) + 1, []).append(r)
    graded = {pos: _graded(rs) for pos, rs in by_pos.items()}
    for pos in range(1, k + 1):
        rs, outcomes = by_pos.get(pos, []), graded.get(pos, {})
        means = {n: float(np.mean([r.metrics[n] for r in rs])) if rs else float("nan") for n in names}
        low, high = ((100.0 * b for b in wilson_interval(sum(o == "correct" for o in outcomes.values()), len(outcomes), Z95))
                     if outcomes else (float("nan"), float("nan")))
        p_vs_1 = _paired_p(outcomes, graded.get(1, {}), "correct")
        table.add(position=pos, n_questions=len(rs), **_shares([r.label for r in rs]),
                  correct_low=low, correct_high=high, p_vs_1=p_vs_1, **means)
    return table


def oracle_table(records: Sequence[ContextRecord], k: int, reference: str = "binary") -> Table:
    """Table 2: outcome shares (%) when the reader gets the best k pooled passages by each
    selection, the share of those contexts holding >= 1 relevant passage, and the exact McNemar
    p-values of answering correctly and of answering wrongly against the ``reference`` selection,
    paired by question."""
    table = Table(["selection", "n_questions", *OUTCOME_LABELS, "with_relevant", "p_correct", "p_wrong"],
                  title=f"Table 2: oracle choice of {k} pooled passages: correct / abstained / wrong (%); "
                        f"p: exact McNemar against {reference}")
    by_sel: dict[str, list[ContextRecord]] = {}
    for r in records:
        by_sel.setdefault(r.cid.rsplit(":oracle-", 1)[-1], []).append(r)
    graded = {sel: _graded(rs) for sel, rs in by_sel.items()}
    ref = graded.get(reference)
    for sel, rs in by_sel.items():
        with_rel = 100.0 * float(np.mean([any(r.relevant) for r in rs]))
        ps = {f"p_{lab}": (_paired_p(graded[sel], ref, lab) if ref is not None and sel != reference else float("nan"))
              for lab in ("correct", "wrong")}
        table.add(selection=sel, n_questions=len(rs), **_shares([r.label for r in rs]), with_relevant=with_rel, **ps)
    return table
