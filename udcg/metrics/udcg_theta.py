"""UDCG_theta: the learned positional weights of UDCG (a scikit-learn estimator). Kept apart from
``udcg.metrics.udcg`` so that scoring without a theta model never imports scikit-learn."""

from __future__ import annotations

import math
import numbers
from typing import NamedTuple

import numpy as np
from scipy.special import expit
from sklearn.base import BaseEstimator

from udcg.errors import InputError
from udcg.metrics.constants import CV_SCORES, THETA_C, THETA_FOLDS, THETA_SEED, VARIANTS
from udcg.metrics.udcg import checked_utilities, pairwise_differences, theta_features


C_GRID = (0.001, 0.01, 0.1, 1.0, 10.0, 100.0, 1000.0)  # SVM-rank units (divided by the training questions)
CV_RULES = ("one-se", "best")  # one-se: the smallest C within one standard error of the best mean; best: the best mean
SATURATED_SHARE = 0.99  # a fit with this share of its training pairs inside the margin is saturated


def _finite(x: numbers.Real) -> bool:
    try:
        return math.isfinite(x)
    except OverflowError:  # an integer too large for a float (10**400)
        return False


def _check_C(C: object) -> float | str:
    if isinstance(C, str) and C == "auto":
        return C
    if isinstance(C, bool) or not isinstance(C, numbers.Real) or not _finite(C) or C <= 0:
        shown = "a huge integer" if isinstance(C, int) and C.bit_length() > 128 else repr(C)
        raise InputError(f"C = {shown}: must be a number > 0 (SVM-rank's default is 0.01) or 'auto' "
                         "(chosen by cross-validation grouped by question)")
    return float(C)


class _Fit(NamedTuple):
    coef: np.ndarray  # weights in feature (utility) units
    coef_std: np.ndarray  # weights on the standardised features, the SVM's own space
    scaler: object  # the StandardScaler, or None
    converged: bool  # liblinear converged within max_iter
    margin_share: float  # share of the training pairs inside the margin (s_ij * w . d_ij < 1)
    cosine: float  # cosine of w with the mean oriented pair difference, in the SVM's space


def _margin(D: np.ndarray, s: np.ndarray, w: np.ndarray) -> tuple[float, float]:
    """(share of the pairs inside the margin, cosine of ``w`` with the mean oriented pair difference).
    When every pair is inside the margin, every dual variable sits at its bound C, so w is C times
    the sum of the oriented pair differences: the cosine is 1 and the fit says nothing the mean
    pair difference does not (a saturated fit)."""
    share = float(np.mean(s * (D @ w) < 1.0))
    mean_diff = (s[:, None] * D).mean(0)
    norm = float(np.linalg.norm(w) * np.linalg.norm(mean_diff))
    return share, (float(w @ mean_diff) / norm if norm > 0 else float("nan"))


def _fit_ranking_svm(F: np.ndarray, y: np.ndarray, g: np.ndarray, C: float, standardize: bool, random_state,
                     max_iter: int, tol: float) -> _Fit | None:
    """The pairwise hinge-loss SVM (``_Fit``); None with fewer than 2 pairs. A ConvergenceWarning is
    caught and returned as the ``converged`` flag (large C on overlapping pairs)."""
    import warnings

    from sklearn.exceptions import ConvergenceWarning
    from sklearn.preprocessing import StandardScaler
    from sklearn.svm import LinearSVC

    scaler = StandardScaler().fit(F) if standardize else None
    Z = scaler.transform(F) if scaler is not None else F
    D, s = pairwise_differences(Z, y, g)
    if len(s) < 2:
        return None
    if len(np.unique(s)) < 2:  # alternation left one class (pairs of opposite signs met): every other pair
        D, s = D.copy(), s.copy()  # turned round again, (d, s) -> (-d, -s), which leaves each hinge loss as it is
        D[1::2] *= -1
        s[1::2] *= -1
    svm = LinearSVC(C=C / len(np.unique(g)), loss="hinge", fit_intercept=False, max_iter=max_iter, tol=tol,
                    dual=True, random_state=random_state)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always", ConvergenceWarning)
        svm.fit(D, s)
    converged = not any(issubclass(w.category, ConvergenceWarning) for w in caught)
    coef_std = svm.coef_.ravel().copy()
    coef = coef_std / scaler.scale_ if scaler is not None else coef_std
    return _Fit(coef, coef_std, scaler, converged, *_margin(D, s, coef_std))


class UDCGTheta(BaseEstimator):
    """UDCG_theta: sigmoid(sum_i alpha_i u_i+ + sum_i beta_i u_i-), weights learned per k by a linear
    ranking SVM (Joachims 2002) over pairs of contexts of the same question with different outcome.

    A scikit-learn estimator (clone, get_params, pipelines): ``__init__`` only stores parameters; ``fit(X, y, groups)``
    returns self; learned attributes end in ``_``. X: utilities (n_contexts, k); y: outcome scores
    (correct 2 > abstained 1 > wrong 0); groups: question ids.

    ``C`` follows SVM-rank's convention (default 0.01): its objective divides C by the number of
    training queries, so the underlying hinge-loss SVM over pairs gets C / n_queries. ``C="auto"``
    chooses C from ``C_grid`` (default ``C_GRID``) by ``cv``-fold cross-validation grouped by
    question (``GroupKFold``): each C is fitted on the other folds' questions and scored on the
    held-out questions by ``cv_score`` (the mean per-question Spearman, or pairwise ordering
    accuracy, of the decision value with the outcomes). ``cv_rule`` picks C from the curve:
    ``one-se`` (default) the smallest C, i.e. the strongest regularisation, whose mean over folds is
    within one standard error (over folds) of the best mean; ``best`` the best mean, ties to the
    smaller C. ``C_`` is the C used and ``cv_results_`` the validation curve with its rule (None for
    a fixed C); ``converged_`` says whether liblinear converged within ``max_iter`` (large C on
    overlapping pairs may not; its warning is caught and recorded, per C, in the curve too).

    ``margin_share_``: the share of the training pairs inside the margin (s_ij w.d_ij < 1), and
    ``cosine_mean_difference_`` the cosine of the weights with the mean oriented pair difference
    (both in the SVM's standardised space). ``saturated_`` (share >= ``SATURATED_SHARE``): every
    pair is inside the margin, so the weights are the mean pair difference (cosine 1) — the fit
    found no positional effect beyond the data's average, and its weights must not be read as one.

    ``standardize``: the SVM sees the features scaled by scikit-learn's ``StandardScaler`` (fitted on
    the training contexts), so C penalises every position alike; ``coef_`` is mapped back to
    utility units (``coef_standardized_ / scaler_.scale_``), so UDCG_theta stays Eq. 3 with no
    intercept (a mean shift does not change any within-question ranking). ``random_state`` seeds
    liblinear's coordinate order (numpy's global generator is never touched).
    The scale of the weights is not identified by ranking; only their direction and ratios are.

    ``__init__``'s keywords are its declared options, as scikit-learn's convention wants (``get_params``,
    ``clone`` and ``from_dict`` read every hyperparameter from that signature), so it keeps all ten
    rather than one options object; ``udcg fit-theta``'s options (``udcg.flows.theta_options.FitThetaOptions``)
    and these defaults read the choice lists and values they share from ``udcg.metrics.constants``.
    """

    def __init__(self, variant: str = VARIANTS[0], C: float | str = THETA_C, max_iter: int = 100_000, tol: float = 1e-6,
                 standardize: bool = True, C_grid: tuple[float, ...] | None = None, cv: int = THETA_FOLDS,
                 cv_score: str = CV_SCORES[0], cv_rule: str = "one-se", random_state: int | None = THETA_SEED):
        self.variant = variant
        self.C = C
        self.max_iter = max_iter
        self.tol = tol
        self.standardize = standardize
        self.C_grid = C_grid
        self.cv = cv
        self.cv_score = cv_score
        self.cv_rule = cv_rule
        self.random_state = random_state

    # -- learning
    def fit(self, X: object, y: object, groups: object = None, relevance: object = None) -> UDCGTheta:
        u = checked_utilities(X, "X")
        y_arr = np.asarray(y, dtype=float)
        if y_arr.shape != (u.shape[0],):
            raise InputError(f"y: expected {u.shape[0]} outcome scores, got shape {y_arr.shape}")
        if groups is None:
            raise InputError("groups: UDCG_theta learns from pairs within a question; pass groups=question ids")
        g = np.asarray(groups)
        if g.shape != (u.shape[0],):
            raise InputError(f"groups: expected {u.shape[0]} question ids, got shape {g.shape}")
        C = _check_C(self.C)
        F = theta_features(u, self.variant, None if relevance is None else np.asarray(relevance))
        n_pairs = len(pairwise_differences(F, y_arr, g)[1])
        if n_pairs < 2:
            raise InputError(f"{n_pairs} pair(s) of contexts of the same question with different outcomes; a ranking "
                             "SVM needs at least 2 (give more questions or more contexts per question)")
        self.cv_results_ = None
        if C == "auto":
            C, self.cv_results_ = self._cross_validate(F, y_arr, g)
        fit = self._fit_one(F, y_arr, g, C)
        self.C_ = C
        self.coef_, self.coef_standardized_, self.scaler_, self.converged_ = fit.coef, fit.coef_std, fit.scaler, fit.converged
        self.margin_share_, self.cosine_mean_difference_ = fit.margin_share, fit.cosine
        self.k_ = u.shape[1]
        self.n_features_in_ = u.shape[1]
        self.n_pairs_ = n_pairs
        self.n_queries_ = len(np.unique(g))
        return self

    def _fit_one(self, F: np.ndarray, y: np.ndarray, g: np.ndarray, C: float) -> _Fit | None:
        return _fit_ranking_svm(F, y, g, C, bool(self.standardize), self.random_state, self.max_iter, self.tol)

    def _cross_validate(self, F: np.ndarray, y: np.ndarray, g: np.ndarray) -> tuple[float, dict]:
        """The C of ``C_grid`` chosen by ``cv_rule`` from the held-out scores, and the validation curve."""
        from sklearn.model_selection import GroupKFold

        from udcg.metrics.correlation import per_question

        if self.cv_score not in CV_SCORES:
            raise InputError(f"cv_score = {self.cv_score!r}: use one of {', '.join(CV_SCORES)}")
        if self.cv_rule not in CV_RULES:
            raise InputError(f"cv_rule = {self.cv_rule!r}: use one of {', '.join(CV_RULES)}")
        grid = sorted(_check_C(c) for c in (C_GRID if self.C_grid is None else self.C_grid))
        if not grid or any(isinstance(c, str) for c in grid):
            raise InputError(f"C_grid = {self.C_grid!r}: give one or more numbers > 0")
        n_groups = len(np.unique(g))
        if isinstance(self.cv, bool) or not isinstance(self.cv, numbers.Integral) or self.cv < 2:
            raise InputError(f"cv = {self.cv!r}: the number of folds must be an integer >= 2")
        if n_groups < 2:
            raise InputError("C='auto' needs at least 2 questions to cross-validate (give a fixed C)")
        folds = list(GroupKFold(n_splits=min(int(self.cv), n_groups)).split(F, y, g))
        scores = np.full((len(grid), len(folds)), np.nan)
        converged = np.ones(len(grid), dtype=bool)
        for j, (train, held) in enumerate(folds):
            for i, C in enumerate(grid):
                fitted = self._fit_one(F[train], y[train], g[train], C)
                if fitted is None:
                    continue
                converged[i] &= fitted.converged
                values = per_question(self.cv_score, F[held] @ fitted.coef, y[held], g[held])[1]
                if np.isfinite(values).any():
                    scores[i, j] = float(np.nanmean(values))
        mean, se = _mean_and_se(scores)
        if not np.isfinite(mean).any():
            raise InputError("C='auto': no fold had two training pairs and a held-out question with different "
                             "outcomes (give more questions, or a fixed C)")
        best, chosen = choose_C(mean, se, self.cv_rule)
        curve = {"score": self.cv_score, "folds": len(folds), "C": grid, "rule": self.cv_rule,
                 "mean": _json_floats(mean), "se": _json_floats(se), "best": grid[best],
                 "per_fold": [_json_floats(row) for row in scores], "converged": converged.tolist()}
        return grid[chosen], curve

    @property
    def saturated_(self) -> bool:
        """Every training pair (``SATURATED_SHARE`` of them) inside the margin: the weights are the mean
        pair difference, not a positional effect. False when the share is unknown (a model saved
        before it was recorded)."""
        self._check_fitted()
        return bool(self.margin_share_ >= SATURATED_SHARE)

    @property
    def alpha_(self) -> np.ndarray:
        """Positional weights of u+ (or of the 0/1 relevance for the binary variant), utility units."""
        self._check_fitted()
        return self.coef_[: self.k_] if self.variant != "rel-only" else self.coef_

    @property
    def beta_(self) -> np.ndarray:
        """Positional weights of u- (zeros for rel-only), utility units."""
        self._check_fitted()
        return self.coef_[self.k_:] if self.variant != "rel-only" else np.zeros(self.k_)

    def _check_fitted(self) -> None:
        if not hasattr(self, "coef_"):
            from sklearn.exceptions import NotFittedError

            raise NotFittedError("UDCGTheta is not fitted yet; call fit(X, y, groups) or load a saved model")

    def decision_function(self, X: object, relevance: object = None) -> np.ndarray:
        self._check_fitted()
        u = checked_utilities(X, "X")
        if u.shape[1] != self.k_:
            raise InputError(f"X has k = {u.shape[1]} positions but this UDCG_theta was fitted for k = {self.k_} (fit one per k)")
        return theta_features(u, self.variant, None if relevance is None else np.asarray(relevance)) @ self.coef_

    def predict(self, X: object, relevance: object = None) -> np.ndarray:
        """UDCG_theta per context: sigmoid of the learned linear score."""
        return expit(self.decision_function(X, relevance))

    # -- persistence
    def to_dict(self) -> dict:
        self._check_fitted()
        params = self.get_params()
        if params["C_grid"] is not None:
            params["C_grid"] = [float(c) for c in params["C_grid"]]
        scaler = (None if self.scaler_ is None else
                  {"mean": self.scaler_.mean_.tolist(), "scale": self.scaler_.scale_.tolist(),
                   "n_samples": int(self.scaler_.n_samples_seen_)})
        return {"type": "UDCGTheta", "params": params, "k": self.k_, "C": self.C_, "converged": self.converged_,
                "alpha": self.alpha_.tolist(), "beta": self.beta_.tolist(), "coef": self.coef_.tolist(),
                "coef_standardized": self.coef_standardized_.tolist(), "scaler": scaler, "cv": self.cv_results_,
                "n_pairs": self.n_pairs_, "n_queries": self.n_queries_,
                "margin_share": _json_floats([self.margin_share_])[0],
                "cosine_mean_difference": _json_floats([self.cosine_mean_difference_])[0]}

    @classmethod
    def from_dict(cls, d: dict, where: str = "model") -> UDCGTheta:
        if not isinstance(d, dict) or d.get("type") != "UDCGTheta" or "coef" not in d or "params" not in d:
            raise InputError(f"{where}: not a saved UDCGTheta model (expected an object with 'type': 'UDCGTheta', "
                             "'params', 'k', 'coef'; write one with udcg fit-theta)")
        _check_saved_model(cls, d, where)
        params = dict(d["params"])
        if "scaler" not in d:  # saved before standardisation existed: fitted on raw features
            params.setdefault("standardize", False)
        if isinstance(params.get("C_grid"), list):
            params["C_grid"] = tuple(params["C_grid"])
        params.setdefault("cv_rule", "best")  # saved before the one-SE rule: a C by CV was the best mean
        theta = cls(**params)
        theta.coef_ = np.asarray(d["coef"], dtype=float)
        theta.coef_standardized_ = np.asarray(d.get("coef_standardized", d["coef"]), dtype=float)
        theta.scaler_ = None
        if d.get("scaler"):
            from sklearn.preprocessing import StandardScaler

            sc = d["scaler"]
            theta.scaler_ = StandardScaler()
            theta.scaler_.mean_ = np.asarray(sc["mean"], dtype=float)
            theta.scaler_.scale_ = np.asarray(sc["scale"], dtype=float)
            theta.scaler_.var_ = theta.scaler_.scale_ ** 2
            theta.scaler_.n_features_in_ = len(theta.scaler_.mean_)
            theta.scaler_.n_samples_seen_ = int(sc.get("n_samples", 0))
        theta.C_ = d.get("C", params.get("C"))
        theta.cv_results_ = d.get("cv")
        theta.converged_ = d.get("converged")
        theta.k_ = int(d["k"])
        theta.n_features_in_ = theta.k_
        theta.n_pairs_ = int(d.get("n_pairs", 0))
        theta.n_queries_ = int(d.get("n_queries", 0))
        theta.margin_share_, theta.cosine_mean_difference_ = (  # unknown (NaN) in a model saved before they were
            float("nan") if d.get(f) is None else float(d[f]) for f in ("margin_share", "cosine_mean_difference"))
        return theta


def _mean_and_se(scores: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Per row of ``scores`` (C x folds, NaN = no score): the mean over the folds with a score and its
    standard error (sample sd / sqrt(folds); NaN with fewer than 2 folds)."""
    counts = np.isfinite(scores).sum(1)
    mean = np.where(counts > 0, np.nansum(scores, axis=1) / np.maximum(counts, 1), np.nan)
    dev = np.where(np.isfinite(scores), scores - mean[:, None], 0.0)
    var = (dev ** 2).sum(1) / np.maximum(counts - 1, 1)
    se = np.where(counts >= 2, np.sqrt(var / np.maximum(counts, 1)), np.nan)
    return mean, se


def choose_C(mean: np.ndarray, se: np.ndarray, rule: str) -> tuple[int, int]:
    """(index of the best mean, index chosen by ``rule``) on a grid sorted by increasing C (NaN
    means are never chosen). ``best``: the first maximum. ``one-se``: the first index (the smallest
    C: the strongest regularisation) whose mean is at least the best mean minus the best's standard
    error (its SE counted 0 where unknown)."""
    best = int(np.nanargmax(mean))  # the first maximum: the smallest C among equals
    if rule == "best":
        return best, best
    threshold = mean[best] - (se[best] if np.isfinite(se[best]) else 0.0)
    return best, int(np.flatnonzero(np.isfinite(mean) & (mean >= threshold))[0])


def _json_floats(values: object) -> list[float | None]:
    return [None if not np.isfinite(v) else float(v) for v in values]


def _check_saved_model(cls: type, d: dict, where: str) -> None:
    """Every field a saved UDCG_theta model needs, with its type and size, before any is used."""
    import inspect

    def bad(field: str, expected: str) -> InputError:
        return InputError(f"{where}: field {field!r} = {str(d.get(field))[:80]} (expected {expected}; "
                          "refit with udcg fit-theta rather than editing the file)")

    params = d["params"]
    known = set(inspect.signature(cls.__init__).parameters) - {"self"}
    if not isinstance(params, dict) or not set(params) <= known:
        raise bad("params", f"an object with keys among {', '.join(sorted(known))}")
    if params.get("variant", "full") not in VARIANTS:
        raise InputError(f"{where}: params.variant = {params.get('variant')!r} (expected one of {', '.join(VARIANTS)})")
    k = d.get("k")
    if isinstance(k, bool) or not isinstance(k, int) or not 1 <= k <= 10_000:
        raise bad("k", "the number of passages per context, an integer in 1..10000")
    n = k if params.get("variant", "full") == "rel-only" else 2 * k
    for field in ("coef", "coef_standardized"):
        value = d.get(field, d["coef"])
        if (not isinstance(value, list) or len(value) != n
                or not all(isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v) for v in value)):
            raise bad(field, f"{n} finite numbers, one weight per feature of k = {k}")
    scaler = d.get("scaler")
    if scaler:
        ok = isinstance(scaler, dict) and all(
            isinstance(scaler.get(f), list) and len(scaler[f]) == n
            and all(isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v) for v in scaler[f])
            for f in ("mean", "scale"))
        if not ok or any(v <= 0 for v in scaler["scale"]):
            raise bad("scaler", f"an object with 'mean' and 'scale' lists of {n} finite numbers (scale > 0)")
    for field in ("n_pairs", "n_queries"):
        if field in d and (isinstance(d[field], bool) or not isinstance(d[field], int) or d[field] < 0):
            raise bad(field, "a non-negative integer")
    if params.get("cv_rule", "best") not in CV_RULES:
        raise bad("params", f"params.cv_rule one of {', '.join(CV_RULES)}")
    for field, low in (("margin_share", 0.0), ("cosine_mean_difference", -1.0)):
        value = d.get(field)
        if value is not None and (isinstance(value, bool) or not isinstance(value, (int, float))
                                  or not low - 1e-9 <= value <= 1.0 + 1e-9):
            raise bad(field, f"null or a number in [{low:g}, 1]")
