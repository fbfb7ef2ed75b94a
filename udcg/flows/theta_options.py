"""The options of ``udcg fit-theta`` and ``udcg.fit_theta``, each declared once (``udcg.options``):
the command's flags and the API's keywords are made from ``FitThetaOptions``; the flow
(``flows/theta.fit_theta_file``) takes the object. Their choice lists and defaults are UDCG_theta's
(``udcg.metrics.constants``, which ``UDCGTheta.__init__`` reads too): ``cv_folds`` is its ``cv``,
``seed`` its ``random_state``."""

from __future__ import annotations

from dataclasses import dataclass

from udcg.metrics.constants import CV_SCORES, THETA_C, THETA_FOLDS, THETA_SEED, VARIANTS
from udcg.options import Options, option


def _C(text: str) -> float | str:
    """A number, else the text as given: its range (> 0, or auto) is checked with every bound (udcg.bounds)."""
    try:
        return float(text)
    except ValueError:
        return text


@dataclass(frozen=True)
class FitThetaOptions(Options):
    """Which contexts UDCG_theta is fitted on (one k), its features, and how its SVM's C is chosen."""

    operation = "fit-theta"

    k: int | None = option(None, "use contexts of exactly this k (default: the only k present)", kind=int)
    variant: str = option(VARIANTS[0], "full: u+ and u- features; rel-only: u+ only; binary: 0/1 relevance instead "
                          "of u+", choices=VARIANTS)
    C: float | str = option(THETA_C, "SVM-rank's C (default {default}, its default), or auto: chosen by "
                            "cross-validation grouped by question over 0.001 ... 1000, the smallest C within one "
                            "standard error of the best", kind=float, parse=_C)
    cv_score: str = option(CV_SCORES[0], "with --C auto: held-out mean per-question Spearman (default) or pairwise "
                           "ordering accuracy", choices=CV_SCORES)
    cv_folds: int = option(THETA_FOLDS, "with --C auto: GroupKFold folds over the questions (default {default})",
                           kind=int)
    seed: int = option(THETA_SEED, "the SVM solver's random_state (default {default})", kind=int)
