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

``"heldout"`` (default)
    Statistically valid: threshold chosen on one half of the runs, bounds
    computed on the other half.  See :func:`estimate_epsilon`.
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
    check_positive,
    check_probability,
)

__all__ = [
    "ESTIMATORS",
    "AuditEstimate",
    "Estimator",
    "clopper_pearson_upper",
    "gdp_delta",
    "gdp_epsilon",
    "mu_lower",
    "estimate_epsilon",
    "estimate_over_steps",
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
        What the estimator adds, readable as attributes too (``est.mu``).  The
        GDP threshold estimators (:data:`ESTIMATORS` ``heldout`` and ``paper``) give
        ``mu`` (the GDP lower bound behind epsilon; may be <= 0 or ``-inf``, epsilon is
        then 0), ``threshold`` (predict ``D`` when ``score >= threshold``), ``fpr_ub``
        and ``fnr_ub`` (Clopper-Pearson upper bounds at that threshold),
        ``false_positives`` and ``false_negatives`` (counts there), ``eval_positive``
        and ``eval_negative`` (the runs the bounds were computed from: all runs for
        ``paper``, the evaluation half for ``heldout``) and ``seed`` (of the
        selection/evaluation split; ``None`` for ``paper``).  An estimator without a
        single threshold (a one-run audit) gives its own.
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


def _gdp_estimate(estimator: str, alpha: float, delta: float, mu: float, threshold: float,
                  fpr_ub: float, fnr_ub: float, n_pos: int, n_neg: int, fp: int, fn: int,
                  eval_pos: int, eval_neg: int, seed: int | None) -> AuditEstimate:
    """An estimate from a GDP lower bound ``mu`` at one threshold (heldout, paper)."""
    return AuditEstimate(
        epsilon=_epsilon_from_mu(mu, delta), estimator=estimator, alpha=alpha, delta=delta,
        n_positive=n_pos, n_negative=n_neg,
        details={"mu": mu, "threshold": threshold, "fpr_ub": fpr_ub, "fnr_ub": fnr_ub,
                 "false_positives": fp, "false_negatives": fn, "eval_positive": eval_pos,
                 "eval_negative": eval_neg, "seed": seed})


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


def _estimate_paper(s, y, delta, alpha, seed=None) -> AuditEstimate:
    thresholds, fp, fn, n_pos, n_neg = _roc_counts(s, y)
    mu, fpr_ub, fnr_ub = _mu_curve(fp, fn, n_pos, n_neg, alpha)
    i = int(np.argmax(mu))  # first maximum (highest threshold) on ties
    return _gdp_estimate("paper", alpha, delta, float(mu[i]), float(thresholds[i]),
                         float(fpr_ub[i]), float(fnr_ub[i]), n_pos, n_neg, int(fp[i]),
                         int(fn[i]), n_pos, n_neg, None)


def _split(y: np.ndarray, seed: int) -> tuple[np.ndarray, np.ndarray]:
    """Stratified half/half split -> boolean mask of the selection part.

    Per class (label 1 first, then 0) a permutation from
    ``np.random.default_rng(seed)`` puts ``floor(n_c / 2)`` runs in the
    selection part and the rest in the evaluation part.
    """
    rng = np.random.default_rng(seed)
    select = np.zeros(y.shape[0], dtype=bool)
    for cls in (1, 0):
        idx = np.flatnonzero(y == cls)
        if idx.shape[0] < 2:
            raise ValueError(
                f"the heldout estimator needs at least 2 runs per class; "
                f"label {cls} has {idx.shape[0]}"
            )
        perm = rng.permutation(idx)
        select[perm[: idx.shape[0] // 2]] = True
    return select, ~select


def _estimate_heldout(s, y, delta, alpha, seed) -> AuditEstimate:
    select, evaluate = _split(y, seed)
    # 1) choose the threshold on the selection part
    thr, fp_s, fn_s, np_s, nn_s = _roc_counts(s[select], y[select])
    mu_s, _, _ = _mu_curve(fp_s, fn_s, np_s, nn_s, alpha)
    j = int(np.argmax(mu_s))
    # Any tau in (next lower distinct score, thr[j]] gives the same selection
    # counts; the midpoint generalises better to unseen (evaluation) runs.
    if j + 1 < thr.shape[0]:
        tau = float(thr[j] + (thr[j + 1] - thr[j]) / 2.0)
        if not thr[j + 1] < tau <= thr[j]:  # rounding on adjacent floats
            tau = float(thr[j])
    else:
        tau = float(thr[j])
    # 2) bound the error rates at that single threshold on the evaluation part
    s_e = s[evaluate]
    y_e = y[evaluate]
    pos = s_e[y_e == 1]
    neg = s_e[y_e == 0]
    fp = int(np.count_nonzero(neg >= tau))
    fn = int(np.count_nonzero(pos < tau))
    fpr_ub = float(clopper_pearson_upper(fp, neg.shape[0], alpha))
    fnr_ub = float(clopper_pearson_upper(fn, pos.shape[0], alpha))
    n_pos = int(y.sum())
    return _gdp_estimate("heldout", alpha, delta, float(mu_lower(fpr_ub, fnr_ub)), tau, fpr_ub,
                         fnr_ub, n_pos, int(y.shape[0] - n_pos), fp, fn, int(pos.shape[0]),
                         int(neg.shape[0]), seed)


# ---------------------------------------------------------------------------
# Registry
# ---------------------------------------------------------------------------


@dataclass(frozen=True)
class Estimator:
    """A registered estimator: ``estimate(scores, labels, delta, alpha, seed)``.

    ``valid``: its bound is shown valid by simulation (a figure may present it as a
    lower bound); ``seeded``: it uses ``seed``; ``linestyle``: its lines in figures.
    """

    name: str
    estimate: Callable[[np.ndarray, np.ndarray, float, float, int | None], AuditEstimate]
    valid: bool
    seeded: bool
    linestyle: str
    description: str


#: Registered estimators by name (the CLI, params.yaml and the figures take names from here).
ESTIMATORS: dict[str, Estimator] = {
    e.name: e for e in (
        Estimator("heldout", _estimate_heldout, valid=True, seeded=True, linestyle="-",
                  description="valid: threshold chosen on half of the runs, "
                              "Clopper-Pearson bounds on the other half"),
        Estimator("paper", _estimate_paper, valid=False, seeded=False, linestyle="--",
                  description="the paper's maximum over all thresholds, uncorrected; "
                              "can overstate epsilon (reproduction only)"),
    )
}


def estimate_epsilon(
    scores: Any,
    labels: Any,
    delta: float,
    alpha: float = 0.05,
    estimator: str = "heldout",
    seed: int = 0,
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
        Significance level in (0, 1): two-sided Clopper-Pearson intervals at
        level ``alpha``, i.e. each upper bound holds with probability
        ``>= 1 - alpha/2``.
    estimator:
        ``"heldout"`` (default) or ``"paper"``.
    seed:
        Seed of the stratified split (``"heldout"`` only).

    Estimators
    ----------
    ``"heldout"`` - statistically valid.
        The runs are split, stratified by label and seeded
        (``np.random.default_rng(seed)``), into a selection half (``floor``)
        and an evaluation half (the rest).  On the selection half the ROC
        threshold maximising the Clopper-Pearson-based ``mu`` is chosen (the
        reported ``threshold`` is the midpoint between that selection score and
        the next lower distinct selection score, which gives the same
        selection counts); on the evaluation half the two-sided CP upper bounds on FPR and FNR are
        computed at that single threshold and turned into ``mu`` and epsilon.

        Guarantee: suppose the audited mechanism's trade-off curve is at least
        that of mu*-GDP where ``gdp_epsilon(mu*, delta)`` is its true epsilon
        (DP-SGD's is, approximately, per Nasr et al. 2023 / Dong et al.;
        exactly for the S1 worst case at ``q = 1``, which is a Gaussian
        mechanism).  The threshold is a function of the selection runs only,
        hence independent of the evaluation runs, so each one-sided CP bound
        (level ``alpha/2``) on the evaluation runs is valid and, by the union
        bound, both hold together with probability ``>= 1 - alpha``.  On that
        event the true (FPR, FNR) at the threshold satisfy
        ``Phi^-1(1 - FPR) - Phi^-1(FNR) <= mu*`` and ``mu_lower`` is
        monotone, so ``P[reported epsilon > true epsilon] <= alpha``.

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
    runs give epsilon 0 (no threshold separates the classes: ``mu = -inf``).
    Perfect separation gives a finite epsilon (the CP bounds are > 0).
    ``mu <= 0`` gives epsilon 0.
    """
    delta = check_probability(delta, "delta")
    alpha = check_probability(alpha, "alpha")
    entry = ESTIMATORS[check_choice(estimator, "estimator", ESTIMATORS)]
    s, y = _validate_scores_labels(scores, labels)
    if entry.seeded:
        if isinstance(seed, bool) or not isinstance(seed, (int, np.integer)):
            raise ParameterError("seed", seed, "an integer")
        seed = int(seed)
    return entry.estimate(s, y, delta, alpha, seed)


def estimate_over_steps(
    score_matrix: Any,
    labels: Any,
    delta: float,
    alpha: float = 0.05,
    estimator: str = "heldout",
    seed: int = 0,
) -> list[AuditEstimate]:
    """:func:`estimate_epsilon` for each row of ``score_matrix`` (n_steps x n_runs).

    The same ``labels`` (and, for ``"heldout"``, the same ``seed``, hence the
    same selection/evaluation split of the runs) are used at every step.
    """
    m = np.asarray(score_matrix, dtype=np.float64)
    if m.ndim != 2:
        raise ValueError(f"score_matrix must be 2-D (n_steps x n_runs), got shape {m.shape}")
    return [
        estimate_epsilon(row, labels, delta, alpha=alpha, estimator=estimator, seed=seed)
        for row in m
    ]
