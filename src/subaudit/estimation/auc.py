"""The ``auc`` estimator (the default): a binormal AUC test of "the mechanism is mu-GDP",
hedged by thresholds at fixed ranks of the out-scores.

Valid and deterministic; the argument is in
:func:`subaudit.estimation.registry.estimate_epsilon`.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

# SciPy is imported in the functions that use it: the workflow's Snakefile imports this module
# while Snakemake parses, and every cluster job's Snakemake parses it again.

from subaudit.accounting.gdp import epsilon_from_mu
from subaudit.estimation.bounds import mu_lower
from subaudit.estimation.result import AuditEstimate
from subaudit.estimation.roc import mann_whitney_auc

__all__ = ["TAIL_SHARE", "auc_mu_lower", "binormal_auc_moments", "estimate_auc", "tail_bounds", "tail_ranks"]


#: Share of alpha the ``auc`` estimator spends on its tail thresholds (the rest on the AUC test).
TAIL_SHARE = 0.2

_OWEN_A = 1.0 / math.sqrt(3.0)  # Owen's T parameter of correlation 1/2: sqrt((1 - r) / (1 + r))
_MU_GRID = np.linspace(0.0, 40.0, 4001)


def binormal_auc_moments(mu: np.ndarray, n_pos: int, n_neg: int) -> tuple[np.ndarray, np.ndarray]:
    """AUC of N(mu, 1) against N(0, 1) and the exact standard deviation of its Mann-Whitney estimate.

    ``A = Phi(mu / sqrt 2)``; ``Var = [A (1 - A) + (n_pos + n_neg - 2) (P - A^2)] / (n_pos n_neg)``
    (Bamber 1975), where ``P`` = P(two positives both beat one negative) = P(one positive beats
    two negatives) = Phi_2(h, h; 1/2), h = mu / sqrt 2. ``P - A^2`` is computed as
    ``P(Z1 > h, Z2 > h) - Phi(-h)^2`` with Owen's T, accurate when A is close to 1.
    """
    from scipy import special
    h = np.asarray(mu, dtype=np.float64) / math.sqrt(2.0)
    a = special.ndtr(h)
    abar = special.ndtr(-h)
    both_above = abar - 2.0 * special.owens_t(h, _OWEN_A)
    cov = np.maximum(both_above - abar * abar, 0.0)
    var = (a * abar + (n_pos + n_neg - 2) * cov) / (n_pos * n_neg)
    return a, np.sqrt(var)


def auc_mu_lower(auc: float, n_pos: int, n_neg: int, alpha: float) -> float:
    """Smallest mu >= 0 whose binormal AUC test at level ``alpha`` does not reject ``auc``.

    The test of "the mechanism is mu-GDP" rejects when the observed AUC exceeds
    ``A(mu) + z_(1-alpha) sd(mu)``; every mu below the first crossing is rejected, so the
    first crossing is a lower confidence bound on mu (0 when even mu = 0 is not rejected).
    """
    from scipy import optimize, stats
    z = float(stats.norm.isf(alpha))

    def crit(mu: Any) -> Any:
        a, sd = binormal_auc_moments(mu, n_pos, n_neg)
        return a + z * sd

    above = np.flatnonzero(crit(_MU_GRID) >= auc)
    if above.size == 0:  # pragma: no cover - crit(40) exceeds 1 for any n below ~1e300
        return float(_MU_GRID[-1])
    i = int(above[0])
    if i == 0:
        return 0.0
    return float(optimize.brentq(lambda m: float(crit(m)) - auc, _MU_GRID[i - 1], _MU_GRID[i],
                                 xtol=1e-12))


def tail_ranks(n_neg: int) -> np.ndarray:
    """Out-score order statistics the ``auc`` estimator thresholds at: 1, 2, 4, ... <= max(1, n_neg / 8)."""
    top = max(1, n_neg // 8)
    return 2 ** np.arange(int(math.log2(top)) + 1)


def tail_bounds(pos: np.ndarray, neg: np.ndarray, alpha: float):
    """GDP bounds at thresholds just above the k-th highest out-score, k in :func:`tail_ranks`.

    The threshold depends on the out-scores only. Its false-positive rate is the k-th smallest
    of n_neg uniforms, Beta(k, n_neg - k + 1) exactly (distribution-free), and given the
    threshold the false negatives are binomial: each of the 2K upper bounds holds with
    probability 1 - alpha / (2K), all together with probability >= 1 - alpha.
    """
    from scipy import stats
    n_pos, n_neg = pos.shape[0], neg.shape[0]
    ks = tail_ranks(n_neg)
    level = alpha / (2 * ks.shape[0])
    thresholds = -np.sort(-neg)[ks - 1]
    fn = np.searchsorted(np.sort(pos), thresholds, side="right")  # positives <= threshold
    fpr_ub = stats.beta.isf(level, ks, n_neg - ks + 1)
    fnr_ub = np.where(fn < n_pos, stats.beta.isf(level, fn + 1, np.maximum(n_pos - fn, 1)), 1.0)
    return thresholds, ks - 1, fn, fpr_ub, fnr_ub, mu_lower(fpr_ub, fnr_ub)


def estimate_auc(s, y, delta, alpha) -> AuditEstimate:
    """The ``auc`` estimate from validated scores ``s`` and labels ``y`` (the registry's entry)."""
    pos, neg = s[y == 1], s[y == 0]
    n_pos, n_neg = pos.shape[0], neg.shape[0]
    auc = mann_whitney_auc(pos, neg, ties=0.0)
    mu_auc = auc_mu_lower(auc, n_pos, n_neg, alpha * (1.0 - TAIL_SHARE))
    thr, fp, fn, fpr_ub, fnr_ub, mu_t = tail_bounds(pos, neg, alpha * TAIL_SHARE)
    j = int(np.argmax(mu_t))
    mu_tail = float(mu_t[j])
    mu = max(mu_auc, mu_tail)
    return AuditEstimate(
        epsilon=epsilon_from_mu(mu, delta), estimator="auc", alpha=alpha, delta=delta,
        n_positive=n_pos, n_negative=n_neg,
        details={"mu": mu, "component": "auc" if mu_auc >= mu_tail else "tail",
                 "auc_strict": auc, "mu_auc": mu_auc, "mu_tail": mu_tail,
                 "threshold": float(thr[j]), "fpr_ub": float(fpr_ub[j]), "fnr_ub": float(fnr_ub[j]),
                 "false_positives": int(fp[j]), "false_negatives": int(fn[j])})
