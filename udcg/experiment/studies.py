"""The analyses of ``udcg validate``, as pure functions of context records (no model).

A context record is one line of the contexts file (``udcg.contextfile``): qid, cid, pids, the
per-position fields (relevant, p_abs, utilities, grades, erag, answer_ll, contains), n_relevant,
corpus_grades, the answer and its outcome, plus ``study`` and ``split``. From them:

- ``score_records``: every metric of every context (adds ``metrics``);
- ``split_questions`` / ``fit_theta``: the train/test split of questions and UDCG_theta per k;
- ``correlate``: the paper's Table 3 (and Table 4) on a set of records;
- ``k_sweep_table`` (Fig. 2), ``position_table`` (Fig. 1), ``oracle_table`` (Table 2).

NA policy in correlations: a metric that is NA for a context (RA-nWG when the question's pool
holds no grade-3+ passage: its oracle gain is 0) is scored 0 there. Every context of such a
question is then 0, so the metric is constant for it (ρ = 0, counted as ``const_metric``). The
number of NA contexts is returned with each table.
"""

from __future__ import annotations

import hashlib
import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from udcg.annotate.sampling import wilson_interval
from udcg.contextfile import ContextRows
from udcg.errors import InputError
from udcg.experiment.correlate import correlation_table
from udcg.metrics.contexts import ContextBatch, parse_metric, score_batch
from udcg.metrics.udcg import UDCGTheta, udcg
from udcg.records import OUTCOME_LABELS, OUTCOME_SCORE
from udcg.report import Table

ABLATIONS = ("UDCG_theta(rel-only)", "UDCG_theta(binary)", "UDCG(rel-only)")
POSITION_METRICS = ("nDCG", "RR", "AP", "P", "UDCG", "UDCG_theta")
Z95 = 1.959964  # the two-sided 95% normal quantile, for Fig. 1's accuracy intervals


@dataclass(frozen=True, slots=True)
class PassageScore:
    """What the pipeline knows about one pooled passage for one question."""

    relevant: bool
    p_abs: float
    contains: bool
    grade: int | None = None  # 1..5, None = the grade judge's reply could not be parsed
    erag: float | None = None  # score of the single-passage answer against the references
    answer_ll: float | None = None  # log P(reference answer | question, passage)

    @property
    def utility(self) -> float:
        return (1.0 if self.relevant else -1.0) * (1.0 - self.p_abs)


def context_record(qid: str, cid: str, study: str, split: str, pids: Sequence[str], scores: dict[str, PassageScore],
                   n_relevant: int, corpus_grades: list[int] | None) -> dict:
    """The contexts-file record of one context (without answer, outcome and metrics)."""
    ps = [scores[pid] for pid in pids]
    rec = {"qid": qid, "cid": cid, "study": study, "split": split, "pids": list(pids),
           "relevant": [p.relevant for p in ps], "p_abs": [p.p_abs for p in ps], "utilities": [p.utility for p in ps],
           "contains": [p.contains for p in ps], "n_relevant": n_relevant}
    if all(p.grade is not None for p in ps) and corpus_grades is not None:
        rec["grades"] = [p.grade for p in ps]
        rec["corpus_grades"] = corpus_grades
    if all(p.erag is not None for p in ps):
        rec["erag"] = [p.erag for p in ps]
    if all(p.answer_ll is not None for p in ps):
        rec["answer_ll"] = [p.answer_ll for p in ps]
    return rec


# ---------------------------------------------------------------- metrics


def _matrix(records: Sequence[dict], name: str, dtype: type) -> np.ndarray | None:
    if not records or not all(name in r for r in records):
        return None
    return np.asarray([r[name] for r in records], dtype=dtype)


def _batch(records: Sequence[dict], n_relevant: str) -> ContextBatch:
    return ContextBatch(relevant=_matrix(records, "relevant", bool), utilities=_matrix(records, "utilities", float),
                        n_relevant=_matrix(records, "n_relevant", float) if n_relevant == "pool" else None,
                        grades=_matrix(records, "grades", int), corpus_counts=_matrix(records, "corpus_grades", float),
                        erag=_matrix(records, "erag", float), answer_ll=_matrix(records, "answer_ll", float),
                        contains=_matrix(records, "contains", bool))


def score_records(records: list[dict], names: Sequence[str], gamma: float, n_relevant: str = "pool",
                  theta: dict[str, UDCGTheta] | None = None, ablations: bool = False) -> None:
    """Add ``metrics`` {name: value or None (NA)} to records that all have the same k.
    ``theta``: fitted UDCG_theta models by variant (``full`` gives UDCG_theta; the others, with
    ``ablations``, the Table 4 rows). A metric that needs a missing field is NA for that context."""
    if not records:
        return
    theta = theta or {}
    ks = {len(r["relevant"]) for r in records}
    if len(ks) != 1:
        raise InputError(f"score_records: contexts of several k {sorted(ks)} (score each k apart)")
    values: dict[str, np.ndarray] = {}
    for name in names:
        metric = parse_metric(name)
        if metric.family == "UDCG_theta":
            if "full" in theta:
                values[name] = theta["full"].predict(_matrix(records, "utilities", float))
            continue
        needs = {"RA-nWG": "grades", "PROC": "grades", "N-Recall4+": "grades", "N-Recall5": "grades",
                 "Precision4+": "grades", "Harm": "grades", "eRAG": "erag", "ANSWER_PROB": "answer_ll",
                 "containment": "contains"}.get(metric.family)
        have = np.array([needs is None or needs in r for r in records])
        out = np.full(len(records), np.nan)
        if have.any():
            subset = [r for r, h in zip(records, have) if h]
            out[have] = score_batch(_batch(subset, n_relevant), [metric], gamma)[str(metric)]
        values[name] = out
    if ablations:
        u = _matrix(records, "utilities", float)
        rel = _matrix(records, "relevant", bool)
        for variant in ("rel-only", "binary"):
            if variant in theta:
                values[f"UDCG_theta({variant})"] = theta[variant].predict(u, rel if variant == "binary" else None)
        values["UDCG(rel-only)"] = udcg(u, 0.0)
    for i, r in enumerate(records):
        r["metrics"] = {n: (None if math.isnan(v[i]) else float(v[i])) for n, v in values.items()}


# ---------------------------------------------------------------- UDCG_theta


def split_questions(qids: Sequence[str], train_share: float, seed: int) -> dict[str, str]:
    """Each question to "train" or "test": the round(train_share * n) questions first in the
    order of sha256(seed:qid) train UDCG_theta. A question's split does not depend on the others'
    order; with train_share 0 every question is "test"."""
    unique = sorted(set(qids), key=lambda q: hashlib.sha256(f"{seed}:{q}".encode()).hexdigest())
    n_train = int(math.floor(train_share * len(unique) + 0.5))
    return {q: ("train" if i < n_train else "test") for i, q in enumerate(unique)}


def outcome_array(records: Sequence[dict]) -> np.ndarray:
    return np.array([OUTCOME_SCORE[r["outcome"]] for r in records])


def fit_theta(records: Sequence[dict], variant: str, C: float, seed: int) -> UDCGTheta | None:
    """UDCG_theta fitted on graded records of one k; None when no question has two contexts with
    different outcomes (nothing to learn). The SVM solver's shuffling is seeded with ``seed``."""
    records = [r for r in records if r.get("outcome") in OUTCOME_SCORE]
    if not records:
        return None
    u = _matrix(records, "utilities", float)
    y = outcome_array(records)
    groups = np.array([r["qid"] for r in records])
    state = np.random.get_state()  # LinearSVC draws liblinear's seed from numpy's global generator
    try:
        np.random.seed(seed)
        return UDCGTheta(variant=variant, C=C).fit(u, y, groups, relevance=_matrix(records, "relevant", bool))
    except InputError:
        return None
    finally:
        np.random.set_state(state)


# ---------------------------------------------------------------- correlation (Tables 3 and 4)


def correlation_rows(records: Sequence[dict], names: Sequence[str]) -> tuple[ContextRows, int]:
    """ContextRows for ``correlation_table``: only graded contexts, metrics in ``names`` order,
    NA scored 0 (module docstring). Returns the rows and the number of NA values filled."""
    graded = [r for r in records if r.get("outcome") in OUTCOME_SCORE]
    rows = ContextRows([], [], [], [])
    n_na = 0
    for r in graded:
        metrics = {}
        for n in names:
            v = r["metrics"].get(n)
            n_na += v is None
            metrics[n] = 0.0 if v is None else v
        rows.where.append(f"{r.get('study', 'main')}:{r['cid']}")
        rows.raw.append({"metrics": metrics})
        rows.qid.append(r["qid"])
        rows.fields.append({"outcome": r["outcome"]})
    return rows, n_na


def correlate(records: Sequence[dict], names: Sequence[str], baseline: str | None, constant_metric: str,
              n_boot: int, seed: int, title: str) -> tuple[Table, dict]:
    """Mean per-question Spearman of each metric with the outcomes, bootstrap interval, paired
    p-values against ``baseline``: the paper's Table 3 layout. Metrics absent from every record
    (e.g. UDCG_theta when none could be fitted) are left out. Returns the table and notes."""
    names = [n for n in names if any(n in r.get("metrics", {}) for r in records)]
    names = [n for n in names if all(n in r["metrics"] for r in records)]
    rows, n_na = correlation_rows(records, names)
    notes = {"contexts": len(rows), "ungraded_contexts": len(records) - len(rows), "na_scored_zero": n_na,
             "questions": len(set(rows.qid))}
    if not rows.qid or not names:
        return Table(["metric"], title=title + " (no graded contexts)"), notes
    table = correlation_table(rows, None, baseline if baseline in names else None, constant_metric=constant_metric,
                              n_boot=n_boot, seed=seed, title=title)
    return table, notes


# ---------------------------------------------------------------- Fig. 2, Fig. 1, Table 2


def k_sweep_table(tables: dict[int, Table]) -> Table:
    """Fig. 2's data: one row per (k, metric) from each k's correlation table."""
    out = Table(["k", "metric", "mean_rho", "ci_low", "ci_high", "n_questions"],
                title="Fig. 2: Spearman with answer outcomes against the context size k (test questions)")
    for k in sorted(tables):
        for row in tables[k].rows:
            if "mean_rho" in row:
                out.add(k=k, **{c: row[c] for c in ("metric", "mean_rho", "ci_low", "ci_high", "n_questions")})
    return out


def pivot_k(table: Table) -> Table:
    """The k sweep as one row per metric and one column per k (mean rho), for reading."""
    ks = sorted({r["k"] for r in table.rows})
    out = Table(["metric", *(f"k={k}" for k in ks)], title=table.title)
    for name in dict.fromkeys(r["metric"] for r in table.rows):
        values = {f"k={r['k']}": r["mean_rho"] for r in table.rows if r["metric"] == name}
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


def _graded(records: Sequence[dict]) -> dict[str, str]:
    """{qid: outcome} of the graded records."""
    return {r["qid"]: r["outcome"] for r in records if r.get("outcome") in OUTCOME_SCORE}


def _paired_p(a: dict[str, str], b: dict[str, str], label: str) -> float:
    """Exact McNemar p of outcome == label between two {qid: outcome} maps, on their shared
    graded questions (NaN when they share none)."""
    pairs = [(a[q] == label, b[q] == label) for q in a.keys() & b.keys()]
    if not pairs:
        return float("nan")
    return mcnemar_exact(sum(x and not y for x, y in pairs), sum(y and not x for x, y in pairs))


def position_table(records: Sequence[dict], k: int) -> Table:
    """Fig. 1's data: per position of the single relevant passage (1-based), the outcome shares
    (%) over questions, the 95% Wilson interval of the correct share, the exact McNemar p-value of
    correct-or-not against position 1 on the questions answered at both, and the mean of each
    position-sensitive metric."""
    names = [n for n in POSITION_METRICS if records and all(n in r["metrics"] for r in records)]
    table = Table(["position", "n_questions", *OUTCOME_LABELS, "correct_low", "correct_high", "p_vs_1", *names],
                  title=f"Fig. 1: one relevant passage moved through k = {k} positions among irrelevant ones")
    by_pos: dict[int, list[dict]] = {}
    for r in records:
        by_pos.setdefault(int(np.flatnonzero(r["relevant"])[0]) + 1, []).append(r)
    graded = {pos: _graded(rs) for pos, rs in by_pos.items()}
    for pos in range(1, k + 1):
        rs, outcomes = by_pos.get(pos, []), graded.get(pos, {})
        means = {n: float(np.mean([r["metrics"][n] for r in rs])) if rs else float("nan") for n in names}
        low, high = ((100.0 * b for b in wilson_interval(sum(o == "correct" for o in outcomes.values()), len(outcomes), Z95))
                     if outcomes else (float("nan"), float("nan")))
        p_vs_1 = _paired_p(outcomes, graded.get(1, {}), "correct")
        table.add(position=pos, n_questions=len(rs), **_shares([r.get("outcome") for r in rs]),
                  correct_low=low, correct_high=high, p_vs_1=p_vs_1, **means)
    return table


def oracle_table(records: Sequence[dict], k: int, reference: str = "binary") -> Table:
    """Table 2: outcome shares (%) when the reader gets the best k pooled passages by each
    selection, the share of those contexts holding >= 1 relevant passage, and the exact McNemar
    p-values of answering correctly and of answering wrongly against the ``reference`` selection,
    paired by question."""
    table = Table(["selection", "n_questions", *OUTCOME_LABELS, "with_relevant", "p_correct", "p_wrong"],
                  title=f"Table 2: oracle choice of {k} pooled passages: correct / abstained / wrong (%); "
                        f"p: exact McNemar against {reference}")
    by_sel: dict[str, list[dict]] = {}
    for r in records:
        by_sel.setdefault(r["cid"].rsplit(":oracle-", 1)[-1], []).append(r)
    graded = {sel: _graded(rs) for sel, rs in by_sel.items()}
    ref = graded.get(reference)
    for sel, rs in by_sel.items():
        with_rel = 100.0 * float(np.mean([any(r["relevant"]) for r in rs]))
        ps = {f"p_{lab}": (_paired_p(graded[sel], ref, lab) if ref is not None and sel != reference else float("nan"))
              for lab in ("correct", "wrong")}
        table.add(selection=sel, n_questions=len(rs), **_shares([r.get("outcome") for r in rs]), with_relevant=with_rel, **ps)
    return table
