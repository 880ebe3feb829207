"""The registry of R-run estimators and the entry points that dispatch to it.

:data:`ESTIMATORS` maps a name to an :class:`Estimator`; adding one is a module with its
``estimate(s, y, delta, alpha) -> AuditEstimate`` on validated scores, one entry here and its
tests.  :func:`estimate_epsilon` validates the scores and labels and runs the named estimator;
:func:`estimate_in_out` and :func:`estimate_over_steps` are its two other shapes of input, and
:func:`step_estimates` the records an audit step writes.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from subaudit.estimation.auc import estimate_auc
from subaudit.estimation.paper import estimate_paper
from subaudit.estimation.result import AuditEstimate
from subaudit.estimation.roc import validate_scores_labels
from subaudit.validation import check_choice, check_probability

__all__ = [
    "DEFAULT_ESTIMATOR",
    "ESTIMATORS",
    "Estimator",
    "estimate_epsilon",
    "estimate_in_out",
    "estimate_over_steps",
    "step_estimates",
]


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
        Estimator("auc", estimate_auc, valid=True, linestyle="-",
                  description="valid and deterministic: binormal AUC test at 0.8 alpha, "
                              "or tail thresholds at fixed out-score ranks at 0.2 alpha"),
        Estimator("paper", estimate_paper, valid=False, linestyle="--",
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
        :func:`~subaudit.estimation.bounds.mu_lower`, and the MAXIMUM over
        thresholds is converted by :func:`~subaudit.accounting.gdp.gdp_epsilon`.
        Taking the maximum over many thresholds without
        any correction for that choice means the per-threshold confidence
        level does not carry over to the reported value: it can overstate
        epsilon (exceed the true epsilon more often than ``alpha``).  It exists
        so that the paper's numbers can be reproduced; do not use it alone.

    Degenerate inputs
    -----------------
    Empty input, mismatched lengths, non-finite scores, labels other than 0/1,
    or only one class present raise ``ValueError``.  Identical scores for all
    runs give epsilon 0.  Perfect separation gives a finite epsilon, the
    estimator's finite-R ceiling (:func:`~subaudit.estimation.planning.finite_r_ceiling`).
    """
    delta = check_probability(delta, "delta")
    alpha = check_probability(alpha, "alpha")
    entry = ESTIMATORS[check_choice(estimator, "estimator", ESTIMATORS)]
    s, y = validate_scores_labels(scores, labels)
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


def step_estimates(scores: np.ndarray, labels: np.ndarray, steps: Sequence[int], delta: float,
                   alpha: float, estimators: Iterable[str]) -> list[dict[str, Any]]:
    """One estimate record per (checkpoint step, estimator) of one audit repeat (any scenario)."""
    records = []
    for name in estimators:
        per_step = estimate_over_steps(np.atleast_2d(scores), labels, delta=delta, alpha=alpha,
                                       estimator=name)
        records += [{"step": int(step), **est.to_dict()} for step, est in zip(steps, per_step)]
    return sorted(records, key=lambda r: r["step"])
