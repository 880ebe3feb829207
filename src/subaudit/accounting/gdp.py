"""Gaussian differential privacy (Dong, Roth and Su): mu-GDP as (epsilon, delta).

``delta(eps) = Phi(-eps/mu + mu/2) - e^eps Phi(-eps/mu - mu/2)`` (Theorem 5.1 of the paper)
and its inverse in epsilon, accurate in log space for large ``eps / mu``.  The estimators
(:mod:`subaudit.estimation`) and the final-iterate ceilings convert their mu with these.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

# SciPy is imported in the functions that use it: the workflow's Snakefile imports this module
# while Snakemake parses, and every cluster job's Snakemake parses it again.

from subaudit.validation import ParameterError, check_positive, check_probability

__all__ = ["epsilon_from_mu", "gdp_delta", "gdp_epsilon"]




def _log1mexp(x: np.ndarray) -> np.ndarray:
    """log(1 - exp(x)) for x <= 0, accurate over the whole range."""
    x = np.asarray(x, dtype=np.float64)
    with np.errstate(divide="ignore", invalid="ignore"):
        return np.where(
            x > -math.log(2.0), np.log(-np.expm1(x)), np.log1p(-np.exp(x))
        )


def _log_gdp_delta(epsilon: np.ndarray, mu: np.ndarray) -> np.ndarray:
    """log delta(eps) for mu-GDP, mu > 0, computed in log space."""
    from scipy import special
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


#: The largest mu whose epsilon is a finite double (about mu^2 / 2; overflow beyond 1.9e154).
MU_MAX = 1e150


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
    if m > MU_MAX:
        raise ParameterError("mu", mu, f"a number in (0, {MU_MAX:g}] (epsilon grows as mu^2 / 2: beyond, it "
                                       "overflows double precision)")
    delta = check_probability(delta, "delta")
    return _gdp_epsilon_unchecked(m, delta)


def epsilon_from_mu(mu: float, delta: float) -> float:
    """epsilon of an empirical mu: 0 for mu <= 0 (incl. -inf), else :func:`gdp_epsilon`."""
    if not mu > 0.0:
        return 0.0
    return _gdp_epsilon_unchecked(float(mu), delta)


def _gdp_epsilon_unchecked(m: float, delta: float) -> float:
    from scipy import optimize, stats
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
