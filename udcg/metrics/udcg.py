"""UDCG (paper Eq. 4) and UDCG_theta (Eq. 3) — pure functions of utilities, no model.

Utilities come as a matrix ``u`` of shape (n_contexts, k): row = context, column = prompt position,
u = R * (1 - p_abs) in [-1, 1] (records.utility).
"""

from __future__ import annotations

import math
import numbers
from pathlib import Path

import numpy as np
from scipy.special import expit

from sklearn.base import BaseEstimator

from udcg.errors import InputError

GAMMA = 1.0 / 3.0
AUTHORS_GAMMA = 0.333  # the weight the authors' pipeline script passes (their stored values use it)
VARIANTS = ("full", "rel-only", "binary")


def _udcg(u: np.ndarray, gamma: float, length: np.ndarray | None = None) -> np.ndarray:
    """Eq. 4 per row. ``length`` (per row) is the context size when rows are zero-padded beyond it
    (a ranking shorter than k); a row of length 0 (no passage at all) is NaN."""
    k = u.shape[1] if length is None else np.asarray(length, dtype=float)
    with np.errstate(invalid="ignore", divide="ignore"):
        score = (np.clip(u, 0, None).sum(1) + gamma * np.clip(u, None, 0).sum(1)) / k
    return expit(np.where(np.asarray(k) > 0, score, np.nan))


def check_utilities(u: object, name: str = "utilities") -> np.ndarray:
    arr = np.asarray(u, dtype=float)
    if arr.ndim == 1:
        arr = arr[None, :]
    if arr.ndim != 2 or arr.shape[1] == 0:
        raise InputError(f"{name}: expected a (n_contexts, k) matrix with k >= 1, got shape {arr.shape}")
    if not np.isfinite(arr).all():
        raise InputError(f"{name}: contains NaN or inf (every passage needs a utility in [-1, 1])")
    if (np.abs(arr) > 1.0 + 1e-12).any():
        raise InputError(f"{name}: values outside [-1, 1] (a utility is R * (1 - p_abs))")
    return arr


def check_gamma(gamma: object) -> float:
    if isinstance(gamma, bool) or not isinstance(gamma, numbers.Real) or not math.isfinite(gamma) or gamma < 0:
        raise InputError(f"gamma = {gamma!r}: must be a finite number >= 0 (the paper uses 1/3)")
    return float(gamma)


def udcg(utilities: object, gamma: float = GAMMA) -> np.ndarray:
    """UDCG = sigmoid((sum u+ + gamma * sum u-) / k) per context (row). Returns shape (n_contexts,)."""
    return _udcg(check_utilities(utilities), check_gamma(gamma))


def utilities_from(relevant: object, p_abs: object) -> np.ndarray:
    """Eq. 2 vectorised: u = (2R - 1) * (1 - p_abs)."""
    r = np.asarray(relevant, dtype=bool)
    p = np.asarray(p_abs, dtype=float)
    return np.where(r, 1.0, -1.0) * (1.0 - p)


# ---------------------------------------------------------------- UDCG_theta


def theta_features(u: np.ndarray, variant: str = "full", relevance: np.ndarray | None = None) -> np.ndarray:
    """[u1+ .. uk+, u1- .. uk-] (full); [u1+ .. uk+] (rel-only); [R1 .. Rk, u1- .. uk-] (binary)."""
    pos, neg = np.clip(u, 0, None), np.clip(u, None, 0)
    if variant == "full":
        return np.hstack([pos, neg])
    if variant == "rel-only":
        return pos
    if variant == "binary":
        rel = (u > 0) if relevance is None else np.asarray(relevance, dtype=bool)
        return np.hstack([rel.astype(float), neg])
    raise InputError(f"variant {variant!r}: unknown (choose one of {', '.join(VARIANTS)})")


def pairwise_differences(X: np.ndarray, y: np.ndarray, groups: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """All within-group pairs with different targets: (x_i - x_j, sign(y_i - y_j)); signs alternate
    so both classes are present (the pair set is symmetric, so this changes nothing else)."""
    order = np.argsort(groups, kind="stable")
    g = groups[order]
    bounds = np.flatnonzero(np.r_[True, g[1:] != g[:-1], True])
    diffs, signs = [], []
    for a, b in zip(bounds[:-1], bounds[1:]):
        idx = order[a:b]
        i, j = np.triu_indices(len(idx), 1)
        i, j = idx[i], idx[j]
        keep = y[i] != y[j]
        i, j = i[keep], j[keep]
        diffs.append(X[i] - X[j])
        signs.append(np.sign(y[i] - y[j]))
    if not diffs:
        return np.empty((0, X.shape[1])), np.empty(0)
    D, s = np.vstack(diffs), np.concatenate(signs)
    flip = np.arange(len(s)) % 2 == 1
    D[flip] *= -1
    s[flip] *= -1
    return D, s


class UDCGTheta(BaseEstimator):
    """UDCG_theta: sigmoid(sum_i alpha_i u_i+ + sum_i beta_i u_i-), weights learned per k by a linear
    ranking SVM (Joachims 2002) over pairs of contexts of the same question with different outcome.

    A scikit-learn estimator (clone, get_params, pipelines): ``__init__`` only stores parameters; ``fit(X, y, groups)``
    returns self; learned attributes end in ``_``. X: utilities (n_contexts, k); y: outcome scores
    (correct 2 > abstained 1 > wrong 0); groups: question ids.

    ``C`` follows SVM-rank's convention (default 0.01): its objective divides C by the number of
    training queries, so the underlying hinge-loss SVM over pairs gets C / n_queries.
    The scale of the weights is not identified by ranking; only their direction and ratios are.
    """

    def __init__(self, variant: str = "full", C: float = 0.01, max_iter: int = 100_000, tol: float = 1e-6):
        self.variant = variant
        self.C = C
        self.max_iter = max_iter
        self.tol = tol

    # -- learning
    def fit(self, X: object, y: object, groups: object = None, relevance: object = None) -> UDCGTheta:
        from sklearn.svm import LinearSVC

        u = check_utilities(X, "X")
        y_arr = np.asarray(y, dtype=float)
        if y_arr.shape != (u.shape[0],):
            raise InputError(f"y: expected {u.shape[0]} outcome scores, got shape {y_arr.shape}")
        if groups is None:
            raise InputError("groups: UDCG_theta learns from pairs within a question; pass groups=question ids")
        g = np.asarray(groups)
        if g.shape != (u.shape[0],):
            raise InputError(f"groups: expected {u.shape[0]} question ids, got shape {g.shape}")
        if not (isinstance(self.C, (int, float)) and self.C > 0):
            raise InputError(f"C = {self.C!r}: must be > 0 (SVM-rank's default is 0.01)")
        F = theta_features(u, self.variant, None if relevance is None else np.asarray(relevance))
        D, s = pairwise_differences(F, y_arr, g)
        if len(s) < 2:
            raise InputError(f"{len(s)} pair(s) of contexts of the same question with different outcomes; a ranking "
                             "SVM needs at least 2 (give more questions or more contexts per question)")
        n_queries = len(np.unique(g))
        svm = LinearSVC(C=self.C / n_queries, loss="hinge", fit_intercept=False, max_iter=self.max_iter,
                        tol=self.tol, dual=True)
        svm.fit(D, s)
        self.coef_ = svm.coef_.ravel().copy()
        self.k_ = u.shape[1]
        self.n_features_in_ = u.shape[1]
        self.n_pairs_ = len(s)
        self.n_queries_ = n_queries
        return self

    @property
    def alpha_(self) -> np.ndarray:
        """Positional weights of u+ (or of the 0/1 relevance for the binary variant)."""
        self._check_fitted()
        return self.coef_[: self.k_] if self.variant != "rel-only" else self.coef_

    @property
    def beta_(self) -> np.ndarray:
        """Positional weights of u- (zeros for rel-only)."""
        self._check_fitted()
        return self.coef_[self.k_:] if self.variant != "rel-only" else np.zeros(self.k_)

    def _check_fitted(self) -> None:
        if not hasattr(self, "coef_"):
            from sklearn.exceptions import NotFittedError

            raise NotFittedError("UDCGTheta is not fitted yet; call fit(X, y, groups) or load a saved model")

    def decision_function(self, X: object, relevance: object = None) -> np.ndarray:
        self._check_fitted()
        u = check_utilities(X, "X")
        if u.shape[1] != self.k_:
            raise InputError(f"X has k = {u.shape[1]} positions but this UDCG_theta was fitted for k = {self.k_} (fit one per k)")
        return theta_features(u, self.variant, None if relevance is None else np.asarray(relevance)) @ self.coef_

    def predict(self, X: object, relevance: object = None) -> np.ndarray:
        """UDCG_theta per context: sigmoid of the learned linear score."""
        return expit(self.decision_function(X, relevance))

    # -- persistence
    def to_dict(self) -> dict:
        self._check_fitted()
        return {"type": "UDCGTheta", "params": self.get_params(), "k": self.k_,
                "alpha": self.alpha_.tolist(), "beta": self.beta_.tolist(), "coef": self.coef_.tolist(),
                "n_pairs": self.n_pairs_, "n_queries": self.n_queries_}

    @classmethod
    def from_dict(cls, d: dict, where: str = "model") -> UDCGTheta:
        if d.get("type") != "UDCGTheta" or "coef" not in d or "params" not in d:
            raise InputError(f"{where}: not a saved UDCGTheta model (expected 'type': 'UDCGTheta', 'params', 'coef')")
        model = cls(**d["params"])
        model.coef_ = np.asarray(d["coef"], dtype=float)
        model.k_ = int(d["k"])
        model.n_features_in_ = model.k_
        model.n_pairs_ = int(d.get("n_pairs", 0))
        model.n_queries_ = int(d.get("n_queries", 0))
        return model

    def save(self, path: str | Path) -> None:
        from udcg.io import atomic_write_json

        atomic_write_json(path, self.to_dict())

    @classmethod
    def load(cls, path: str | Path) -> UDCGTheta:
        from udcg.io import read_json

        return cls.from_dict(read_json(path), str(path))
