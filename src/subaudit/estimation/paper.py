"""The ``paper`` estimator: the maximum over all ROC thresholds of the CP-based mu, uncorrected.

The procedure of the paper's code, with no correction for taking the maximum.  It can report
more than the true epsilon and exists for reproduction only (see
:func:`subaudit.estimation.registry.estimate_epsilon`).
"""

from __future__ import annotations

import numpy as np

from subaudit.accounting.gdp import epsilon_from_mu
from subaudit.estimation.bounds import clopper_pearson_upper, mu_lower
from subaudit.estimation.result import AuditEstimate
from subaudit.estimation.roc import roc_counts

__all__ = ["estimate_paper"]


def _mu_curve(fp: np.ndarray, fn: np.ndarray, n_pos: int, n_neg: int, alpha: float):
    fpr_ub = clopper_pearson_upper(fp, n_neg, alpha)
    fnr_ub = clopper_pearson_upper(fn, n_pos, alpha)
    return mu_lower(fpr_ub, fnr_ub), np.asarray(fpr_ub), np.asarray(fnr_ub)


def estimate_paper(s, y, delta, alpha) -> AuditEstimate:
    """The ``paper`` estimate from validated scores ``s`` and labels ``y`` (the registry's entry)."""
    thresholds, fp, fn, n_pos, n_neg = roc_counts(s, y)
    mu, fpr_ub, fnr_ub = _mu_curve(fp, fn, n_pos, n_neg, alpha)
    i = int(np.argmax(mu))  # first maximum (highest threshold) on ties
    return AuditEstimate(
        epsilon=epsilon_from_mu(float(mu[i]), delta), estimator="paper", alpha=alpha, delta=delta,
        n_positive=n_pos, n_negative=n_neg,
        details={"mu": float(mu[i]), "threshold": float(thresholds[i]), "fpr_ub": float(fpr_ub[i]),
                 "fnr_ub": float(fnr_ub[i]), "false_positives": int(fp[i]),
                 "false_negatives": int(fn[i])})
