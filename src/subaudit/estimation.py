"""Empirical lower bounds on epsilon from audit scores (Gaussian-DP method).

An audit runs the training algorithm ``R`` times on dataset ``D`` (label 1, the
target ``z`` is present) and ``R`` times on the neighbour ``D'`` (label 0, ``z``
replaced by ``z'`` or removed), and records one score per run: the higher the
score, the more the adversary believes the run used ``D``.

Conventions used throughout this module
---------------------------------------
* Decision rule: at threshold ``tau`` the adversary predicts ``1`` (``D``) when
  ``score >= tau`` and ``0`` otherwise.  Ties therefore count as "predict D".
* ``FPR = FP / #negatives`` (a ``D'`` run predicted ``D``) and
  ``FNR = FN / #positives`` (a ``D`` run predicted ``D'``).
* Candidate thresholds are the distinct observed scores (the ROC thresholds).
  The two trivial rules (predict everything 0 / everything 1) have an upper
  Clopper-Pearson bound of 1 on one of the error rates and hence ``mu = -inf``;
  they never win.

From upper confidence bounds ``FPR_ub``, ``FNR_ub`` the GDP lower bound is
``mu = Phi^-1(1 - FPR_ub) - Phi^-1(FNR_ub)`` (Nasr et al. 2023, eq. 5 of the
paper), converted to epsilon at ``delta`` with the mu-GDP -> (eps, delta)
conversion of Dong et al. (Theorem 5.1 of the paper).

Two estimators are offered (:data:`ESTIMATORS`):

``"auc"`` (default)
    Valid and deterministic: a binormal AUC test of "the mechanism is mu-GDP", hedged by
    thresholds at fixed ranks of the out-scores.  See :func:`estimate_epsilon`.
``"paper"``
    The procedure of the paper's code: the maximum over all ROC thresholds of
    the CP-based mu, with no correction for taking the maximum.  It can report
    more than the true epsilon and exists for reproduction only.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np
from scipy import optimize, special, stats

from subaudit.validation import (
    ParameterError,
    check_choice,
    check_count,
    check_positive,
    check_probability,
)

__all__ = [
    "DEFAULT_ESTIMATOR",
    "ESTIMATORS",
    "TAIL_SHARE",
    "AuditEstimate",
    "Estimator",
    "clopper_pearson_upper",
    "estimate_epsilon",
    "estimate_in_out",
    "estimate_over_steps",
    "expected_estimate",
    "finite_r_ceiling",
    "gdp_delta",
    "gdp_epsilon",
    "gaussian_signal",
    "mu_lower",
    "reversed_evidence",
    "score_summary",
    "tail_ranks",
]

# ---------------------------------------------------------------------------
# Clopper-Pearson
# ---------------------------------------------------------------------------


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


# ---------------------------------------------------------------------------
# Gaussian DP conversions
# ---------------------------------------------------------------------------


def _log1mexp(x: np.ndarray) -> np.ndarray:
    """log(1 - exp(x)) for x <= 0, accurate over the whole range."""
    x = np.asarray(x, dtype=np.float64)
    with np.errstate(divide="ignore", invalid="ignore"):
        return np.where(
            x > -math.log(2.0), np.log(-np.expm1(x)), np.log1p(-np.exp(x))
        )


def _log_gdp_delta(epsilon: np.ndarray, mu: np.ndarray) -> np.ndarray:
    """log delta(eps) for mu-GDP, mu > 0, computed in log space."""
    a = -epsilon / mu + mu / 2.0
    b = -epsilon / mu - mu / 2.0
    l1 = special.log_ndtr(a)
    l2 = epsilon + special.log_ndtr(b)
    # delta = e^{l1} (1 - e^{l2 - l1}); l2 < l1 for mu > 0 in exact arithmetic.
    diff = np.minimum(l2 - l1, 0.0)
    return l1 + _log1mexp(diff)


def gdp_delta(epsilon: Any, mu: Any) -> np.ndarray | float:
    """delta(epsilon) of a mu-GDP mechanism (Dong et al.; Theorem 5.1 of the paper).

    ``delta(eps) = Phi(-eps/mu + mu/2) - e^eps Phi(-eps/mu - mu/2)``,
    evaluated as ``exp(log Phi(a) + log(1 - exp(eps + log Phi(b) - log Phi(a))))``
    so that it stays accurate (no overflow of ``e^eps``, no cancellation to 0)
    for large ``eps / mu``.  Vectorised (broadcasting) over both arguments.

    ``epsilon`` must be >= 0 and finite, ``mu`` > 0 and finite.
    """
    eps = np.asarray(epsilon, dtype=np.float64)
    m = np.asarray(mu, dtype=np.float64)
    if np.any(~np.isfinite(eps)) or np.any(eps < 0):
        raise ParameterError("epsilon", epsilon, "finite numbers >= 0")
    if np.any(~np.isfinite(m)) or np.any(m <= 0):
        raise ParameterError("mu", mu, "finite numbers > 0")
    out = np.exp(_log_gdp_delta(eps, m))
    if out.ndim == 0:
        return float(out)
    return out


def gdp_epsilon(mu: float, delta: float) -> float:
    """Smallest epsilon >= 0 with ``gdp_delta(epsilon, mu) <= delta``.

    ``mu`` must be a finite number > 0 (``ParameterError`` naming ``"mu"``
    otherwise; the estimators map an empirical ``mu <= 0`` to epsilon 0
    themselves).  Inverts :func:`gdp_delta` with ``brentq`` on
    ``log delta(eps) - log delta`` over the bracket
    ``[0, mu^2/2 + mu * Phi^-1(1 - delta)]`` (at the upper end
    ``delta(eps) <= Phi(-eps/mu + mu/2) = delta``).  Returns 0 when
    ``delta(0) = 2 Phi(mu/2) - 1 <= delta``.  Accurate for ``mu`` up to about
    15 and epsilon up to 100 and beyond.
    """
    m = check_positive(mu, "mu")
    delta = check_probability(delta, "delta")
    return _gdp_epsilon_unchecked(m, delta)


def _epsilon_from_mu(mu: float, delta: float) -> float:
    """Estimator helper: epsilon 0 for an empirical mu <= 0 (incl. -inf)."""
    if not mu > 0.0:
        return 0.0
    return _gdp_epsilon_unchecked(float(mu), delta)


def _gdp_epsilon_unchecked(m: float, delta: float) -> float:
    log_delta = math.log(delta)

    def f(e: float) -> float:
        return float(_log_gdp_delta(np.float64(e), np.float64(m))) - log_delta

    if f(0.0) <= 0.0:
        return 0.0
    hi = max(m * m / 2.0 + m * float(stats.norm.isf(delta)), 1e-12)
    # f is decreasing; f(hi) <= 0 analytically, guard against rounding.
    while f(hi) > 0.0:  # pragma: no cover - defensive
        hi *= 2.0
    return float(
        optimize.brentq(f, 0.0, hi, xtol=1e-13, rtol=4 * np.finfo(float).eps, maxiter=500)
    )


def mu_lower(fpr_ub: Any, fnr_ub: Any) -> np.ndarray | float:
    """GDP lower bound ``Phi^-1(1 - FPR_ub) - Phi^-1(FNR_ub)`` (eq. 5 of the paper).

    Computed as ``norm.isf(FPR_ub) - norm.ppf(FNR_ub)`` (same value, accurate
    for small bounds).  An upper bound of 1 on either rate gives ``-inf``.
    Vectorised.
    """
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


# ---------------------------------------------------------------------------
# Result type
# ---------------------------------------------------------------------------


@dataclass(frozen=True)
class AuditEstimate:
    """One empirical lower bound on epsilon: common fields and the estimator's details.

    Attributes
    ----------
    epsilon:
        Reported lower bound on epsilon at ``delta`` (>= 0).
    estimator, alpha, delta:
        How it was computed (registry name, significance, target delta).
    n_positive, n_negative:
        Number of ``D`` (label 1) and ``D'`` (label 0) runs supplied in total.
    details:
        What the estimator adds, readable as attributes too (``est.mu``).  Both
        estimators give ``mu`` (the GDP lower bound behind epsilon; may be <= 0 or ``-inf``,
        epsilon is then 0) and, at the threshold that gave it or the best tail threshold,
        ``threshold`` (``paper``: predict ``D`` when ``score >= threshold``; ``auc``: when
        ``score > threshold``), ``fpr_ub`` and ``fnr_ub`` (upper confidence bounds there) and
        ``false_positives`` and ``false_negatives`` (counts there).  ``auc`` adds
        ``component`` (``"auc"`` or ``"tail"``: which part gave ``mu``), ``auc_strict`` (the
        AUC with ties counted 0), ``mu_auc`` and ``mu_tail``.
    """

    epsilon: float
    estimator: str
    alpha: float
    delta: float
    n_positive: int
    n_negative: int
    details: Mapping[str, Any] = dataclasses.field(default_factory=dict)

    def __post_init__(self) -> None:
        clash = set(self.details) & {f.name for f in dataclasses.fields(self)}
        if clash:
            raise ValueError(f"details may not repeat the common fields: {sorted(clash)}")

    def __getattr__(self, name: str) -> Any:
        details = self.__dict__.get("details", {})
        if name in details:
            return details[name]
        raise AttributeError(f"{type(self).__name__} of estimator "
                             f"{self.__dict__.get('estimator')!r} has no {name!r}")

    def to_dict(self) -> dict[str, Any]:
        """Plain-Python dict: the common fields, then the details (floats may be ``-inf``)."""
        common = {f.name: getattr(self, f.name) for f in dataclasses.fields(self)
                  if f.name != "details"}
        return {**common, **self.details}


# ---------------------------------------------------------------------------
# Core counting
# ---------------------------------------------------------------------------


def _validate_scores_labels(scores: Any, labels: Any) -> tuple[np.ndarray, np.ndarray]:
    s = np.asarray(scores, dtype=np.float64)
    y_raw = np.asarray(labels)
    if s.ndim != 1 or y_raw.ndim != 1:
        raise ValueError(
            f"scores and labels must be 1-D arrays, got shapes {s.shape} and {y_raw.shape}"
        )
    if s.shape[0] != y_raw.shape[0]:
        raise ValueError(
            f"scores and labels differ in length: {s.shape[0]} scores, {y_raw.shape[0]} labels"
        )
    if s.shape[0] == 0:
        raise ValueError("no runs: scores and labels are empty")
    if not np.all(np.isfinite(s)):
        bad = int(np.sum(~np.isfinite(s)))
        raise ValueError(f"scores must be finite; {bad} score(s) are NaN or infinite")
    if y_raw.dtype == np.bool_:
        y = y_raw.astype(np.int8)
    else:
        try:
            y_num = y_raw.astype(np.float64)
        except (TypeError, ValueError):
            raise ValueError("labels must be 0 (D') or 1 (D)") from None
        if not np.all((y_num == 0) | (y_num == 1)):
            raise ValueError("labels must be 0 (D') or 1 (D); found other values")
        y = y_num.astype(np.int8)
    n_pos = int(y.sum())
    n_neg = int(y.shape[0] - n_pos)
    if n_pos == 0 or n_neg == 0:
        raise ValueError(
            "labels contain only one class "
            f"({n_pos} runs on D, {n_neg} runs on D'); both are needed"
        )
    return s, y


def _roc_counts(
    s: np.ndarray, y: np.ndarray
) -> tuple[np.ndarray, np.ndarray, np.ndarray, int, int]:
    """Thresholds (distinct scores, descending) with FP and FN counts.

    For threshold ``tau`` the rule is ``predict 1 iff score >= tau``.
    Returns ``thresholds, fp, fn, n_pos, n_neg``.
    """
    order = np.argsort(-s, kind="stable")
    ss = s[order]
    yy = y[order].astype(np.int64)
    tp_cum = np.cumsum(yy)
    fp_cum = np.arange(1, ss.shape[0] + 1) - tp_cum
    n_pos = int(tp_cum[-1])
    n_neg = int(fp_cum[-1])
    # Last index of each block of equal scores: everything up to it is >= that score.
    last = np.flatnonzero(np.r_[ss[:-1] != ss[1:], True])
    thresholds = ss[last]
    fp = fp_cum[last]
    fn = n_pos - tp_cum[last]
    return thresholds, fp, fn, n_pos, n_neg


def _mu_curve(fp: np.ndarray, fn: np.ndarray, n_pos: int, n_neg: int, alpha: float):
    fpr_ub = clopper_pearson_upper(fp, n_neg, alpha)
    fnr_ub = clopper_pearson_upper(fn, n_pos, alpha)
    return mu_lower(fpr_ub, fnr_ub), np.asarray(fpr_ub), np.asarray(fnr_ub)


def _estimate_paper(s, y, delta, alpha) -> AuditEstimate:
    thresholds, fp, fn, n_pos, n_neg = _roc_counts(s, y)
    mu, fpr_ub, fnr_ub = _mu_curve(fp, fn, n_pos, n_neg, alpha)
    i = int(np.argmax(mu))  # first maximum (highest threshold) on ties
    return AuditEstimate(
        epsilon=_epsilon_from_mu(float(mu[i]), delta), estimator="paper", alpha=alpha, delta=delta,
        n_positive=n_pos, n_negative=n_neg,
        details={"mu": float(mu[i]), "threshold": float(thresholds[i]), "fpr_ub": float(fpr_ub[i]),
                 "fnr_ub": float(fnr_ub[i]), "false_positives": int(fp[i]),
                 "false_negatives": int(fn[i])})


# ---------------------------------------------------------------------------
# The default estimator: binormal AUC test, hedged by tail thresholds
# ---------------------------------------------------------------------------

#: Share of alpha the ``auc`` estimator spends on its tail thresholds (the rest on the AUC test).
TAIL_SHARE = 0.2

_OWEN_A = 1.0 / math.sqrt(3.0)  # Owen's T parameter of correlation 1/2: sqrt((1 - r) / (1 + r))
_MU_GRID = np.linspace(0.0, 40.0, 4001)


def _binormal_auc_moments(mu: np.ndarray, n_pos: int, n_neg: int) -> tuple[np.ndarray, np.ndarray]:
    """AUC of N(mu, 1) against N(0, 1) and the exact standard deviation of its Mann-Whitney estimate.

    ``A = Phi(mu / sqrt 2)``; ``Var = [A (1 - A) + (n_pos + n_neg - 2) (P - A^2)] / (n_pos n_neg)``
    (Bamber 1975), where ``P`` = P(two positives both beat one negative) = P(one positive beats
    two negatives) = Phi_2(h, h; 1/2), h = mu / sqrt 2. ``P - A^2`` is computed as
    ``P(Z1 > h, Z2 > h) - Phi(-h)^2`` with Owen's T, accurate when A is close to 1.
    """
    h = np.asarray(mu, dtype=np.float64) / math.sqrt(2.0)
    a = special.ndtr(h)
    abar = special.ndtr(-h)
    both_above = abar - 2.0 * special.owens_t(h, _OWEN_A)
    cov = np.maximum(both_above - abar * abar, 0.0)
    var = (a * abar + (n_pos + n_neg - 2) * cov) / (n_pos * n_neg)
    return a, np.sqrt(var)


def _mann_whitney_auc(pos: np.ndarray, neg: np.ndarray, ties: float) -> float:
    """Share of (positive, negative) pairs where the positive scores higher; a tie counts ``ties``."""
    neg_sorted = np.sort(neg)
    below = np.searchsorted(neg_sorted, pos, side="left").sum(dtype=np.float64)
    if ties:
        below += ties * (np.searchsorted(neg_sorted, pos, side="right")
                         - np.searchsorted(neg_sorted, pos, side="left")).sum(dtype=np.float64)
    return float(below / (pos.shape[0] * neg.shape[0]))


def _auc_mu(auc: float, n_pos: int, n_neg: int, alpha: float) -> float:
    """Smallest mu >= 0 whose binormal AUC test at level ``alpha`` does not reject ``auc``.

    The test of "the mechanism is mu-GDP" rejects when the observed AUC exceeds
    ``A(mu) + z_(1-alpha) sd(mu)``; every mu below the first crossing is rejected, so the
    first crossing is a lower confidence bound on mu (0 when even mu = 0 is not rejected).
    """
    z = float(stats.norm.isf(alpha))

    def crit(mu: Any) -> Any:
        a, sd = _binormal_auc_moments(mu, n_pos, n_neg)
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


def _tail_bounds(pos: np.ndarray, neg: np.ndarray, alpha: float):
    """GDP bounds at thresholds just above the k-th highest out-score, k in :func:`tail_ranks`.

    The threshold depends on the out-scores only. Its false-positive rate is the k-th smallest
    of n_neg uniforms, Beta(k, n_neg - k + 1) exactly (distribution-free), and given the
    threshold the false negatives are binomial: each of the 2K upper bounds holds with
    probability 1 - alpha / (2K), all together with probability >= 1 - alpha.
    """
    n_pos, n_neg = pos.shape[0], neg.shape[0]
    ks = tail_ranks(n_neg)
    level = alpha / (2 * ks.shape[0])
    thresholds = -np.sort(-neg)[ks - 1]
    fn = np.searchsorted(np.sort(pos), thresholds, side="right")  # positives <= threshold
    fpr_ub = stats.beta.isf(level, ks, n_neg - ks + 1)
    fnr_ub = np.where(fn < n_pos, stats.beta.isf(level, fn + 1, np.maximum(n_pos - fn, 1)), 1.0)
    return thresholds, ks - 1, fn, fpr_ub, fnr_ub, mu_lower(fpr_ub, fnr_ub)


def _estimate_auc(s, y, delta, alpha) -> AuditEstimate:
    pos, neg = s[y == 1], s[y == 0]
    n_pos, n_neg = pos.shape[0], neg.shape[0]
    auc = _mann_whitney_auc(pos, neg, ties=0.0)
    mu_auc = _auc_mu(auc, n_pos, n_neg, alpha * (1.0 - TAIL_SHARE))
    thr, fp, fn, fpr_ub, fnr_ub, mu_t = _tail_bounds(pos, neg, alpha * TAIL_SHARE)
    j = int(np.argmax(mu_t))
    mu_tail = float(mu_t[j])
    mu = max(mu_auc, mu_tail)
    return AuditEstimate(
        epsilon=_epsilon_from_mu(mu, delta), estimator="auc", alpha=alpha, delta=delta,
        n_positive=n_pos, n_negative=n_neg,
        details={"mu": mu, "component": "auc" if mu_auc >= mu_tail else "tail",
                 "auc_strict": auc, "mu_auc": mu_auc, "mu_tail": mu_tail,
                 "threshold": float(thr[j]), "fpr_ub": float(fpr_ub[j]), "fnr_ub": float(fnr_ub[j]),
                 "false_positives": int(fp[j]), "false_negatives": int(fn[j])})


# ---------------------------------------------------------------------------
# Registry
# ---------------------------------------------------------------------------


@dataclass(frozen=True)
class Estimator:
    """A registered estimator: ``estimate(scores, labels, delta, alpha) -> AuditEstimate``.

    ``valid``: its bound is shown valid by simulation (a figure may present it as a lower
    bound); ``linestyle``: its lines in figures.
    """

    name: str
    estimate: Callable[[np.ndarray, np.ndarray, float, float], AuditEstimate]
    valid: bool
    linestyle: str
    description: str


#: Registered estimators by name (the CLI, params.yaml and the figures take names from here).
ESTIMATORS: dict[str, Estimator] = {
    e.name: e for e in (
        Estimator("auc", _estimate_auc, valid=True, linestyle="-",
                  description="valid and deterministic: binormal AUC test at 0.8 alpha, "
                              "or tail thresholds at fixed out-score ranks at 0.2 alpha"),
        Estimator("paper", _estimate_paper, valid=False, linestyle="--",
                  description="the paper's maximum over all thresholds, uncorrected; "
                              "can overstate epsilon (reproduction only)"),
    )
}

#: The estimator used when none is named.
DEFAULT_ESTIMATOR = "auc"


def estimate_epsilon(
    scores: Any,
    labels: Any,
    delta: float,
    alpha: float = 0.05,
    estimator: str = DEFAULT_ESTIMATOR,
) -> AuditEstimate:
    """Empirical lower bound on epsilon at ``delta`` from audit scores.

    Parameters
    ----------
    scores:
        One finite score per run; higher means "more likely ``D``".  The rule
        at threshold ``tau`` is "predict ``D`` iff ``score >= tau``".
    labels:
        1 for a run on ``D`` (positives), 0 for a run on ``D'`` (negatives).
    delta:
        Target delta in (0, 1).
    alpha:
        Significance level in (0, 1).
    estimator:
        ``"auc"`` (default) or ``"paper"``.

    Estimators
    ----------
    ``"auc"`` - valid at level ``alpha``, deterministic.
        Assumption (the one every GDP auditing estimator makes): the audited mechanism is
        mu*-GDP, i.e. its trade-off curve lies above that of N(mu*, 1) against N(0, 1), where
        ``gdp_epsilon(mu*, delta)`` is its true epsilon.  Then the scores' own trade-off curve
        does too (post-processing), whatever their distributions.  Both parts below are
        monotone in the in-scores' ranks among the out-scores, so the least favourable
        score distributions are N(mu*, 1) against N(0, 1) exactly.

        1. AUC test (level ``0.8 alpha``): the Mann-Whitney AUC (ties count 0) against the
           binormal AUC ``Phi(mu / sqrt 2)`` plus ``z_(1-0.8 alpha)`` times its exact standard
           deviation; ``mu_auc`` is the smallest mu not rejected.  Its level rests on the
           normal approximation of the AUC (asymptotic; conservative as the AUC nears 1),
           checked by simulation in the tests.
        2. Tail thresholds (level ``0.2 alpha``): thresholds just above the 1st, 2nd, 4th, ...
           highest out-score (up to ``n_neg / 8``), with the exact Beta bound on the
           false-positive rate and the Clopper-Pearson bound on the false-negative rate,
           Bonferroni over the 2K bounds (exact, distribution-free).  It catches signals in
           the tail of the ROC (a canary that acts in a few runs) that the AUC dilutes.

        ``mu = max(mu_auc, mu_tail)``; by the union bound
        ``P[reported epsilon > true epsilon] <= alpha``.

    ``"paper"`` - reproduction of the paper's code; may overstate epsilon.
        Every ROC threshold (all distinct scores) is scored with two-sided CP
        bounds at ``alpha`` on FPR and FNR computed on all runs, ``mu`` via
        :func:`mu_lower`, and the MAXIMUM over thresholds is converted by
        :func:`gdp_epsilon`.  Taking the maximum over many thresholds without
        any correction for that choice means the per-threshold confidence
        level does not carry over to the reported value: it can overstate
        epsilon (exceed the true epsilon more often than ``alpha``).  It exists
        so that the paper's numbers can be reproduced; do not use it alone.

    Degenerate inputs
    -----------------
    Empty input, mismatched lengths, non-finite scores, labels other than 0/1,
    or only one class present raise ``ValueError``.  Identical scores for all
    runs give epsilon 0.  Perfect separation gives a finite epsilon, the
    estimator's finite-R ceiling (:func:`finite_r_ceiling`).
    """
    delta = check_probability(delta, "delta")
    alpha = check_probability(alpha, "alpha")
    entry = ESTIMATORS[check_choice(estimator, "estimator", ESTIMATORS)]
    s, y = _validate_scores_labels(scores, labels)
    return entry.estimate(s, y, delta, alpha)


def estimate_in_out(
    in_scores: Any,
    out_scores: Any,
    delta: float,
    alpha: float = 0.05,
    estimator: str = DEFAULT_ESTIMATOR,
) -> AuditEstimate:
    """:func:`estimate_epsilon` from the scores of the runs with the target z (``in_scores``,
    world D) and with its substitute z' (``out_scores``, world D'), e.g. score arrays
    computed elsewhere; the result names its estimator (``.estimator``)."""
    s_in = np.asarray(in_scores, dtype=np.float64).reshape(-1)
    s_out = np.asarray(out_scores, dtype=np.float64).reshape(-1)
    labels = np.r_[np.ones(s_in.size, dtype=np.int8), np.zeros(s_out.size, dtype=np.int8)]
    return estimate_epsilon(np.r_[s_in, s_out], labels, delta, alpha, estimator)


def estimate_over_steps(
    score_matrix: Any,
    labels: Any,
    delta: float,
    alpha: float = 0.05,
    estimator: str = DEFAULT_ESTIMATOR,
) -> list[AuditEstimate]:
    """:func:`estimate_epsilon` for each row of ``score_matrix`` (n_steps x n_runs)."""
    m = np.asarray(score_matrix, dtype=np.float64)
    if m.ndim != 2:
        raise ValueError(f"score_matrix must be 2-D (n_steps x n_runs), got shape {m.shape}")
    return [estimate_epsilon(row, labels, delta, alpha=alpha, estimator=estimator) for row in m]


def finite_r_ceiling(n_positive: int, n_negative: int, delta: float, alpha: float = 0.05,
                     estimator: str = DEFAULT_ESTIMATOR) -> float:
    """The largest epsilon ``estimator`` can report from this many runs: perfectly separated scores.

    No audit with ``n_positive`` runs on ``D`` and ``n_negative`` on ``D'`` can show more, whatever
    the canary; an audit whose estimate sits at this value is limited by R, not by its signal.
    """
    n_pos = check_count(n_positive, "n_positive")
    n_neg = check_count(n_negative, "n_negative")
    labels = np.r_[np.ones(n_pos), np.zeros(n_neg)]
    return estimate_epsilon(labels, labels, delta, alpha, estimator).epsilon


def gaussian_signal(mu: float) -> Callable[[np.random.Generator, int], tuple[np.ndarray, np.ndarray]]:
    """Signal model of an exactly mu-GDP audit: ``n`` scores N(mu, 1) with D, ``n`` N(0, 1) with D'."""
    m = float(mu)

    def sample(rng: np.random.Generator, n: int) -> tuple[np.ndarray, np.ndarray]:
        return rng.normal(m, 1.0, n), rng.normal(0.0, 1.0, n)

    return sample


def expected_estimate(sample: Callable[[np.random.Generator, int], tuple[np.ndarray, np.ndarray]],
                      runs_per_world: int, delta: float, alpha: float = 0.05,
                      estimator: str = DEFAULT_ESTIMATOR, n_sims: int = 200,
                      seed: int = 0) -> dict[str, float]:
    """What an audit of ``runs_per_world`` runs per world can expect to report, by simulation.

    ``sample(rng, n)`` draws the scores of ``n`` runs with D and ``n`` with D' (for example
    :func:`gaussian_signal`); ``n_sims`` audits are estimated.  Returns the mean, the
    10th/50th/90th percentiles and the standard error of the mean: with
    :func:`finite_r_ceiling`, how far an audit at this R is limited by R rather than by its
    canary.
    """
    n = check_count(runs_per_world, "runs_per_world")
    sims = check_count(n_sims, "n_sims", 2)
    rng = np.random.default_rng(seed)
    labels = np.r_[np.ones(n), np.zeros(n)]
    eps = np.array([estimate_epsilon(np.concatenate(sample(rng, n)), labels, delta, alpha, estimator).epsilon
                    for _ in range(sims)])
    p10, p50, p90 = np.percentile(eps, [10, 50, 90])
    return {"mean": float(eps.mean()), "se": float(eps.std(ddof=1) / math.sqrt(sims)),
            "p10": float(p10), "median": float(p50), "p90": float(p90)}


# ---------------------------------------------------------------------------
# What the scores say besides epsilon
# ---------------------------------------------------------------------------


def score_summary(scores: Any, labels: Any) -> dict[str, Any]:
    """AUC (ties count 1/2), TPR at FPR 1e-3 and 1e-2 (best threshold rule at or below that FPR)
    and the counts of runs: the numbers users compare attacks by."""
    s, y = _validate_scores_labels(scores, labels)
    pos, neg = s[y == 1], s[y == 0]
    _, fp, fn, n_pos, n_neg = _roc_counts(s, y)
    fpr = fp / n_neg
    tpr = 1.0 - fn / n_pos

    def tpr_at(limit: float) -> float:
        ok = fpr <= limit
        return float(tpr[ok].max()) if ok.any() else 0.0

    return {"auc": _mann_whitney_auc(pos, neg, ties=0.5), "tpr_at_fpr_0.001": tpr_at(1e-3),
            "tpr_at_fpr_0.01": tpr_at(1e-2), "n_positive": n_pos, "n_negative": n_neg}


def reversed_evidence(scores: Any, labels: Any, delta: float, alpha: float = 0.05) -> float:
    """Epsilon the default estimator finds in the NEGATED scores (0 when they are not reversed).

    A positive value means label 0 (``D'``) scores significantly higher than label 1: the
    convention of the paper's own code for some scenarios.  subaudit predicts ``D`` for high
    scores, so such scores give epsilon 0 unless negated.
    """
    s, y = _validate_scores_labels(scores, labels)
    return estimate_epsilon(-s, y, delta, alpha).epsilon
