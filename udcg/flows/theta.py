"""UDCG_theta models: fitted on graded contexts (one k), and as files (the fitted model's ``to_dict``
as JSON, read back with every field checked)."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np

from udcg.errors import InputError
from udcg.flows.theta_options import FitThetaOptions
from udcg.io.contexts import ContextFile
from udcg.io.files import atomic_write_json, read_json
from udcg.io.tables import Table
from udcg.records import query_key

if TYPE_CHECKING:  # scikit-learn is imported only when a UDCG_theta is fitted or loaded
    from udcg.metrics.udcg_theta import UDCGTheta


def fit_model(u: np.ndarray, y: np.ndarray, groups: np.ndarray, relevance: np.ndarray | None,
              theta: UDCGTheta) -> UDCGTheta:
    """``model`` (an unfitted UDCG_theta: its hyperparameters) fitted on utilities ``u`` (contexts,
    k), outcome scores ``y`` and question ids ``groups`` (``relevance`` is read by the binary variant
    only). Its ``random_state`` seeds the SVM solver's coordinate order; numpy's global generator is
    never touched."""
    return theta.fit(u, y, groups, relevance=relevance if theta.variant == "binary" else None)


def _row_key(record) -> tuple:
    """A context's place in the canonical order of a training set: its question (``query_key``), its
    id, then what the fit reads of it (two lines with one id are placed by their content)."""
    return query_key(record.qid), record.cid, record.utilities, record.relevant, str(record.label)


def training_set(file: ContextFile, k: int | None, source: str) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """(utilities, outcome scores, question ids, relevance) of the contexts of ``source`` with
    exactly ``k`` passages (None: the only k present); every context needs utilities and those
    used an outcome. The rows are in the canonical order (``_row_key``), not the file's: the SVM's
    pairs, its solver's coordinate order and the cross-validation folds (``GroupKFold``) all follow
    the row order, so a fit never depends on the order of the file's lines."""
    missing = [i for i, r in enumerate(file.records) if r.utilities is None]
    if missing:
        raise InputError(f"{file.where[missing[0]]}: no utilities (annotate first: udcg annotate)")
    ks = np.array([r.k for r in file.records])
    k = k or (int(ks[0]) if len(set(ks)) == 1 else None)
    if k is None:
        raise InputError(f"{source}: contexts have several k ({sorted(set(ks.tolist()))}); choose one with --k")
    idx = np.flatnonzero(ks == k)
    if len(idx) == 0:
        raise InputError(f"{source}: --k {k}: no context has exactly {k} passages (choose a k from {sorted(set(ks.tolist()))})")
    idx = sorted(idx.tolist(), key=lambda i: _row_key(file.records[i]))  # the canonical order (module doc)
    records = [file.records[i] for i in idx]
    u = np.asarray([r.utilities for r in records])
    y = file.outcome_scores()[idx]
    groups = np.asarray([r.qid for r in records])
    rel = np.asarray([r.relevant for r in records], dtype=bool)
    return u, y, groups, rel


def margin_text(theta: UDCGTheta) -> str:
    """The share of the training pairs inside the margin and, for a saturated fit, what that means."""
    if np.isnan(theta.margin_share_):
        return "share of pairs inside the margin unknown (saved before it was recorded: refit)"
    text = (f"{theta.margin_share_:.0%} of the pairs inside the margin, cosine {theta.cosine_mean_difference_:.4f} "
            "with the mean pair difference")
    return text + ("; SATURATED: the weights are the mean pair difference, not a positional effect"
                   if theta.saturated_ else "")


def weights_table(theta: UDCGTheta) -> Table:
    """The fitted weights per position, titled with what they were fitted on and the margin share."""
    table = Table(["position", "alpha", "beta"], title=f"UDCG_theta ({theta.variant}, k={theta.k_}, C = {theta.C_:g}) "
                  f"from {theta.n_queries_} questions, {theta.n_pairs_} pairs; {margin_text(theta)}")
    for i, (a, b) in enumerate(zip(theta.alpha_, theta.beta_), start=1):
        table.add(position=i, alpha=float(a), beta=float(b))
    return table


def validation_curve_table(theta: UDCGTheta) -> Table | None:
    """The mean held-out score per C, with its standard error over the folds, when C was chosen by
    cross-validation (else None); ``chosen`` marks the C of the model's rule, ``best`` the best mean."""
    cv = theta.cv_results_
    if not cv:
        return None
    column = f"mean held-out {cv['score']}"
    rule = cv.get("rule", "best")
    how = ("the smallest C within one standard error of the best mean" if rule == "one-se" else "the best mean")
    table = Table(["C", column, "se", "best", "chosen"],
                  title=f"validation curve ({cv['folds']} folds grouped by question; chosen: {how})")
    best = cv.get("best", theta.C_ if rule == "best" else None)
    for C, mean, se in zip(cv["C"], cv["mean"], cv.get("se", [None] * len(cv["C"]))):
        table.add(**{"C": C, column: float("nan") if mean is None else mean, "se": float("nan") if se is None else se,
                     "best": "*" if C == best else "", "chosen": "*" if C == theta.C_ else ""})
    return table


def save_theta(theta: UDCGTheta, path: str | Path) -> None:
    """Write a fitted UDCG_theta atomically (temporary file + rename)."""
    atomic_write_json(path, theta.to_dict())


def load_theta(path: str | Path) -> UDCGTheta:
    """A saved model; a missing or malformed field is an ``InputError`` naming the file and field."""
    from udcg.metrics.udcg_theta import UDCGTheta

    return UDCGTheta.from_dict(read_json(path), str(path))


MIN_QUESTIONS = 30  # below this, or PAIRS_PER_WEIGHT pairs per weight, fit-theta warns that the weights are unstable
PAIRS_PER_WEIGHT = 20


def fit_theta_file(path: str, output: str | Path, options: FitThetaOptions | None = None) -> tuple[UDCGTheta, list[str]]:
    """UDCG_theta fitted on the judged contexts of ``path`` with exactly ``options.k`` passages (the
    options: ``FitThetaOptions``), saved to ``output``; returns the fitted UDCG_theta and the warnings (too few
    questions or pairs; a saturated fit)."""
    from udcg.flows.scoring import read_contexts
    from udcg.metrics.udcg_theta import UDCGTheta

    o = options or FitThetaOptions()
    u, y, groups, relevance = training_set(read_contexts(path), o.k, path)
    theta = fit_model(u, y, groups, relevance, UDCGTheta(variant=o.variant, C=o.C, cv=o.cv_folds, cv_score=o.cv_score,
                                                          random_state=o.seed))
    save_theta(theta, output)
    warnings = []
    weights = theta.coef_.size
    if theta.n_queries_ < MIN_QUESTIONS or theta.n_pairs_ < PAIRS_PER_WEIGHT * weights:
        warnings.append(f"fitted from {theta.n_queries_} questions and {theta.n_pairs_} context pairs for {weights} "
                        f"weights: too few for stable weights (a rule of thumb: at least {MIN_QUESTIONS} questions "
                        f"with differing outcomes and {PAIRS_PER_WEIGHT} pairs per weight); signs and sizes here may "
                        "be noise, not positional effects")
    if theta.saturated_:
        warnings.append(f"saturated fit: {theta.margin_share_:.0%} of the {theta.n_pairs_} training pairs lie inside "
                        f"the margin, so the weights are the mean pair difference (cosine "
                        f"{theta.cosine_mean_difference_:.4f}), not positional effects; a larger --C fits past the "
                        "average, if the data support it")
    return theta, warnings
