"""From error counts to a GDP lower bound: Clopper-Pearson upper bounds and ``mu_lower``.

From upper confidence bounds ``FPR_ub``, ``FNR_ub`` the GDP lower bound is
``mu = Phi^-1(1 - FPR_ub) - Phi^-1(FNR_ub)`` (Nasr et al. 2023, eq. 5 of the
paper), converted to epsilon at ``delta`` with the mu-GDP -> (eps, delta)
conversion of Dong et al. (Theorem 5.1 of the paper;
:func:`subaudit.accounting.gdp.epsilon_from_mu`).
"""

from __future__ import annotations

from typing import Any

import numpy as np

# SciPy is imported in the functions that use it: the workflow's Snakefile imports this module
# while Snakemake parses, and every cluster job's Snakemake parses it again.

from subaudit.validation import check_probability

__all__ = ["clopper_pearson_upper", "mu_lower"]


def clopper_pearson_upper(k: Any, n: Any, alpha: float = 0.05) -> np.ndarray | float:
    """Upper limit of the two-sided Clopper-Pearson interval at level ``alpha``.

    Each side of the interval has error ``alpha / 2``, so the returned value is
    a one-sided upper confidence bound at level ``1 - alpha / 2``:
    ``beta.ppf(1 - alpha/2, k + 1, n - k)`` for ``k < n`` and ``1`` for ``k = n``.

    This is exactly the upper end of
    ``scipy.stats.binomtest(k, n).proportion_ci(confidence_level=1 - alpha,
    method="exact")`` (which finds the same root of ``binom.cdf(k, n, p) =
    alpha/2`` with ``brentq``), vectorised over ``k`` and ``n`` through the
    beta-quantile identity.

    Parameters
    ----------
    k, n:
        Counts (broadcastable integer arrays or scalars), ``0 <= k <= n``,
        ``n >= 1``.
    alpha:
        Two-sided significance level in (0, 1).
    """
    from scipy import stats
    alpha = check_probability(alpha, "alpha")
    k_arr = np.asarray(k)
    n_arr = np.asarray(n)
    if k_arr.size and n_arr.size:
        if np.any(n_arr < 1):
            raise ValueError("clopper_pearson_upper: n must be >= 1")
        if np.any(k_arr < 0) or np.any(k_arr > n_arr):
            raise ValueError("clopper_pearson_upper: need 0 <= k <= n")
    k_f = k_arr.astype(np.float64)
    n_f = n_arr.astype(np.float64)
    full = k_f >= n_f
    # Avoid a zero beta parameter where k == n (the result there is 1 anyway).
    b = np.where(full, 1.0, n_f - k_f)
    upper = stats.beta.ppf(1.0 - alpha / 2.0, k_f + 1.0, b)
    upper = np.where(full, 1.0, upper)
    if upper.ndim == 0:
        return float(upper)
    return upper


def mu_lower(fpr_ub: Any, fnr_ub: Any) -> np.ndarray | float:
    """GDP lower bound ``Phi^-1(1 - FPR_ub) - Phi^-1(FNR_ub)`` (eq. 5 of the paper).

    Computed as ``norm.isf(FPR_ub) - norm.ppf(FNR_ub)`` (same value, accurate
    for small bounds).  An upper bound of 1 on either rate gives ``-inf``.
    Vectorised.
    """
    from scipy import stats
    fpr = np.asarray(fpr_ub, dtype=np.float64)
    fnr = np.asarray(fnr_ub, dtype=np.float64)
    if np.any(~((fpr >= 0) & (fpr <= 1))) or np.any(~((fnr >= 0) & (fnr <= 1))):
        raise ValueError("mu_lower: error-rate bounds must lie in [0, 1]")
    with np.errstate(invalid="ignore"):
        out = stats.norm.isf(fpr) - stats.norm.ppf(fnr)
    # inf - inf cannot occur for CP bounds (both > 0); map any NaN to -inf.
    out = np.where(np.isnan(out), -np.inf, out)
    if out.ndim == 0:
        return float(out)
    return out
