"""UDCG (paper Eq. 4) and UDCG_theta (Eq. 3) — pure functions of utilities, no model.

Utilities come as a matrix ``u`` of shape (n_contexts, k): row = context, column = prompt position,
u = R * (1 - p_abs) in [-1, 1], R = +1 for a relevant passage, -1 otherwise (Eq. 2,
``utilities_from``; the one place it is computed).
The UDCG_theta estimator, ``UDCGTheta``, is in ``udcg.metrics.udcg_theta`` (it needs scikit-learn,
imported only when a theta model is fitted or loaded); its features are built here.
"""

from __future__ import annotations

import math
import numbers

import numpy as np
from scipy.special import expit

from udcg.bounds import MAX_GAMMA  # the largest weight of the distracting passages (why: udcg.bounds)
from udcg.errors import InputError
from udcg.metrics.constants import GAMMA, VARIANTS

AUTHORS_GAMMA = 0.333  # the weight the authors' pipeline script passes (their stored values use it)


def udcg_rows(u: np.ndarray, gamma: float, length: np.ndarray | None = None) -> np.ndarray:
    """Eq. 4 per row, the kernel (no validation: ``udcg`` checks, then calls it). ``length`` (per
    row) is the context size when rows are zero-padded beyond it (a ranking shorter than k); a row
    of length 0 (no passage at all: every slot empty, u = 0, so both sums are 0) is sigma(0) = 0.5,
    the value of a context that neither helps nor misleads (a query the run does not rank)."""
    k = u.shape[1] if length is None else np.asarray(length, dtype=float)
    with np.errstate(invalid="ignore", divide="ignore"):
        score = (np.clip(u, 0, None).sum(1) + gamma * np.clip(u, None, 0).sum(1)) / k
    return expit(np.where(np.asarray(k) > 0, score, 0.0))


def checked_utilities(u: object, name: str = "utilities") -> np.ndarray:
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
    """gamma if it is a number in [0, MAX_GAMMA], else an InputError."""
    ok = not isinstance(gamma, bool) and isinstance(gamma, numbers.Real)
    try:
        ok = ok and math.isfinite(gamma) and 0 <= gamma <= MAX_GAMMA
    except OverflowError:  # an integer too large for a float (10**400)
        ok = False
    if not ok:
        shown = "a huge integer" if isinstance(gamma, int) and gamma.bit_length() > 128 else repr(gamma)
        raise InputError(f"gamma = {shown}: must be a number in [0, {MAX_GAMMA:g}] (the paper uses 1/3)")
    return float(gamma)


def udcg_matrix(utilities: object, gamma: float = GAMMA) -> np.ndarray:
    """UDCG = sigmoid((sum u+ + gamma * sum u-) / k) per context (row). Returns shape (n_contexts,)."""
    return udcg_rows(checked_utilities(utilities), check_gamma(gamma))


def utilities_from(relevant: object, p_abs: object) -> np.ndarray:
    """Eq. 2 vectorised: u = R * (1 - p_abs), R = +1 for a relevant passage, -1 otherwise."""
    r = np.asarray(relevant, dtype=bool)
    p = np.asarray(p_abs, dtype=float)
    return np.where(r, 1.0, -1.0) * (1.0 - p)


def utility(relevant: bool, p_abs: float) -> float:
    """Eq. 2 for one passage (``utilities_from`` on a scalar), as a Python float."""
    return float(utilities_from(relevant, p_abs))


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

