"""Planning an audit: what R runs per world can show at most, and can expect to show.

:func:`finite_r_ceiling` is the largest epsilon an estimator reports from R runs (perfect
separation); :func:`expected_estimate` simulates audits of a signal model such as
:func:`gaussian_signal` (an exactly mu-GDP audit).
"""

from __future__ import annotations

import math
from collections.abc import Callable

import numpy as np

from subaudit.estimation.registry import DEFAULT_ESTIMATOR, estimate_epsilon
from subaudit.validation import check_count

__all__ = ["expected_estimate", "finite_r_ceiling", "gaussian_signal"]


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
