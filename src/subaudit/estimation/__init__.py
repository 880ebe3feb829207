"""Empirical lower bounds on epsilon from audit scores (Gaussian-DP method).

An audit runs the training algorithm ``R`` times on dataset ``D`` (label 1, the
target ``z`` is present) and ``R`` times on the neighbour ``D'`` (label 0, ``z``
replaced by ``z'`` or removed), and records one score per run: the higher the
score, the more the adversary believes the run used ``D``.  Each estimator bounds
the GDP parameter ``mu`` from below and converts it to epsilon at ``delta`` with
:func:`subaudit.accounting.gdp.epsilon_from_mu`.

Two estimators are offered (:data:`ESTIMATORS`):

``"auc"`` (default)
    Valid and deterministic: a binormal AUC test of "the mechanism is mu-GDP", hedged by
    thresholds at fixed ranks of the out-scores.  See :func:`estimate_epsilon`.
``"paper"``
    The procedure of the paper's code: the maximum over all ROC thresholds of
    the CP-based mu, with no correction for taking the maximum.  It can report
    more than the true epsilon and exists for reproduction only.

Modules
-------
``bounds``       Clopper-Pearson upper bounds and :func:`mu_lower` (error-rate bounds -> mu).
``roc``          validation of (scores, labels), ROC counts, Mann-Whitney AUC; the
                 decision-rule conventions.
``result``       :class:`AuditEstimate`, what every estimator returns.
``paper``        the ``paper`` estimator.
``auc``          the ``auc`` estimator (:data:`TAIL_SHARE`, :func:`tail_ranks`; its AUC test
                 :func:`~subaudit.estimation.auc.auc_mu_lower` and tail bounds).
``registry``     :data:`ESTIMATORS`, :class:`Estimator`, :data:`DEFAULT_ESTIMATOR`,
                 :func:`estimate_epsilon`, :func:`estimate_in_out`, :func:`estimate_over_steps`,
                 :func:`step_estimates`.
``planning``     :func:`finite_r_ceiling`, :func:`gaussian_signal`, :func:`expected_estimate`.
``diagnostics``  :func:`score_summary`, :func:`reversed_evidence`.
``one_run``      one-run estimators (Steinke et al.; f-DP), imported as
                 ``subaudit.estimation.one_run``.
``guesses``      a one-run audit's guess rules (:data:`~subaudit.estimation.guesses.GUESS_RULES`)
                 and guess-count search (:class:`~subaudit.estimation.guesses.GuessSearch`).
``procedures``   the one-run procedures of deep-network audits (their games, statistics, rules).
``ceilings``     final-iterate ceilings of the S1 canary, imported as
                 ``subaudit.estimation.ceilings``.

Public names re-exported here are listed in ``__all__``; the mu-GDP conversions are not
(import them from :mod:`subaudit.accounting.gdp`).  This package may import
:mod:`subaudit.accounting` and the base modules only.
"""

from __future__ import annotations

from subaudit.estimation.auc import TAIL_SHARE, tail_ranks
from subaudit.estimation.bounds import clopper_pearson_upper, mu_lower
from subaudit.estimation.diagnostics import reversed_evidence, score_summary
from subaudit.estimation.planning import expected_estimate, finite_r_ceiling, gaussian_signal
from subaudit.estimation.registry import (
    DEFAULT_ESTIMATOR,
    ESTIMATORS,
    Estimator,
    estimate_epsilon,
    estimate_in_out,
    estimate_over_steps,
    step_estimates,
)
from subaudit.estimation.result import AuditEstimate

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
    "gaussian_signal",
    "mu_lower",
    "reversed_evidence",
    "score_summary",
    "step_estimates",
    "tail_ranks",
]
