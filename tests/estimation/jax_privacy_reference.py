"""A faithful reading of jax_privacy's valid GDP estimator, for comparison in the tests.

google-deepmind/jax_privacy, ``jax_privacy/auditing.py`` (commit 8967688c, 2026-08-20),
``CanaryScoreAuditor.epsilon_from_gdp``: thresholds at every distinct score plus +inf, reduced
to the Pareto frontier of (false-negative count, true-negative count); one-sided
Clopper-Pearson bounds on FNR and FPR at ``significance / (2 n)`` with n the number of
frontier thresholds (Bonferroni over a data-dependent count); thresholds with either bound
>= 1 - delta dropped; ``mu = max(isf(FPR_ub) - ppf(FNR_ub))``; the mu-GDP epsilon at delta.
Pinned outputs of the package itself are checked in tests/estimation/test_auc.py.
"""

from __future__ import annotations

import numpy as np
from scipy import optimize, stats


def _clopper_pearson_upper(k: np.ndarray, n: int, significance: float) -> np.ndarray:
    return np.where(k < n, stats.beta.ppf(1 - significance, k + 1, np.maximum(n - k, 1)), 1.0)


def _pareto_frontier(points: np.ndarray) -> np.ndarray:
    indices = np.arange(points.shape[0])
    while len(indices) > 2:
        diff = np.diff(points[indices], axis=0)
        cross = diff[:-1, 1] * diff[1:, 0] - diff[1:, 1] * diff[:-1, 0]
        dominated = cross <= 0
        if not np.any(dominated):
            break
        indices = indices[np.r_[True, ~dominated, True]]
    return indices


def _gdp_epsilon(mu: float, delta: float) -> float:
    def gap(eps: float) -> float:
        a = stats.norm.logcdf(-(eps / mu) + mu / 2)
        b = eps + stats.norm.logcdf(-(eps / mu) - mu / 2)
        return a + np.log1p(-np.exp(b - a)) - np.log(delta)

    if gap(0.0) <= 0:
        return 0.0
    if gap(100.0) >= 0:
        return 100.0
    return optimize.brentq(gap, 0.0, 100.0, xtol=1e-6)


def epsilon_from_gdp(in_scores, out_scores, significance: float, delta: float) -> float:
    """jax_privacy ``CanaryScoreAuditor(in_scores, out_scores).epsilon_from_gdp(significance, delta)``."""
    ins, outs = np.asarray(in_scores, float), np.asarray(out_scores, float)
    thresholds = np.concatenate((np.union1d(ins, outs), [np.inf]))
    fn = np.searchsorted(np.sort(ins), thresholds, side="left")
    tn = np.searchsorted(np.sort(outs), thresholds, side="left")
    keep = _pareto_frontier(np.stack([fn, tn], axis=1))
    fn, tn = fn[keep], tn[keep]
    n_pos, n_neg, n = fn[-1], tn[-1], len(fn)
    fnr_ub = _clopper_pearson_upper(fn, n_pos, significance / (2 * n))
    fpr_ub = _clopper_pearson_upper(n_neg - tn, n_neg, significance / (2 * n))
    bounds = np.stack([fpr_ub, fnr_ub], axis=1)
    bounds = bounds[np.max(bounds, axis=1) < 1 - delta]
    if not bounds.size:
        return 0.0
    mu = float(np.max(stats.norm.isf(bounds[:, 0]) - stats.norm.ppf(bounds[:, 1])))
    return 0.0 if mu <= 0 else _gdp_epsilon(mu, delta)
