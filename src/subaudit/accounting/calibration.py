"""Calibration: the smallest noise multiplier that meets a target epsilon.

About 1 s per calibration on 2 cores: the cheap RDP bound brackets sigma, a coarse
discretisation locates it, and a few fine evaluations of :func:`epsilon` settle it.
"""

from __future__ import annotations

import math

from scipy import optimize

from subaudit.accounting.accountant import canonical_adjacency, epsilon, epsilon_of_segments
from subaudit.accounting.error_budget import MIN_EPS_ERROR, REL_EPS_ERROR, quantise_down
from subaudit.accounting.group import group_guess
from subaudit.accounting.prv import prv_kinds
from subaudit.accounting.rdp import rdp_epsilon
from subaudit.validation import (
    AccountingRangeError,
    check_count,
    check_positive,
    check_probability,
    check_sampling_rate,
)

__all__ = ["SIGMA_RANGE", "calibrate_sigma"]

#: Sigma range searched by calibrate_sigma.
SIGMA_RANGE = (1e-2, 1e5)


def _rdp_sigma(target: float, q: float, steps: int, delta: float, adjacency: str) -> float:
    """Noise multiplier at which the RDP bound reaches ``target`` (cheap starting point;
    RDP over-estimates epsilon, so the answer lies at or below it)."""

    def eps_rdp(log_s: float) -> float:
        segments = ((math.exp(log_s), q, steps),)
        kinds = prv_kinds(adjacency, segments)
        if adjacency != "group":
            return max(rdp_epsilon(k, segments, delta) for k in kinds)
        try:
            d = group_guess(segments, delta)
        except AccountingRangeError:
            return math.inf  # delta' below 1e-300: epsilon is huge
        return 2.0 * max(rdp_epsilon(k, segments, d) for k in kinds)

    # bracket by doubling from sigma = 1 (the ends of SIGMA_RANGE are costly for RDP
    # quadrature at tiny sigma)
    log_min, log_max = (math.log(v) for v in SIGMA_RANGE)
    lo = hi = 0.0
    if eps_rdp(0.0) > target:
        while eps_rdp(hi) > target:
            lo, hi = hi, hi + math.log(2.0)
            if hi > log_max:
                raise AccountingRangeError(f"target_epsilon = {target} needs sigma > {SIGMA_RANGE[1]:g}")
    else:
        while eps_rdp(lo) <= target:
            hi, lo = lo, lo - math.log(2.0)
            if lo < log_min:
                return SIGMA_RANGE[0]
    return math.exp(optimize.brentq(lambda x: eps_rdp(x) - target, lo, hi, xtol=1e-3))


def calibrate_sigma(target_epsilon: float, q: float, steps: int, delta: float, adjacency: str) -> float:
    """Smallest noise multiplier (relative tolerance 1e-4) whose conservative
    ``epsilon(...).epsilon`` is at most ``target_epsilon``.

    Brent's method on log sigma, twice: first on the point estimate with a 4x coarser
    discretisation (bracketed from the cheap RDP bound), then on the public upper bound
    in the narrow bracket that this leaves, so that only a few fine evaluations are
    needed. The returned sigma is checked through :func:`epsilon` itself."""
    target = check_positive(target_epsilon, "target_epsilon")
    q = check_sampling_rate(q, "q")
    steps = check_count(steps, "steps")
    delta = check_probability(delta, "delta")
    adjacency = canonical_adjacency(adjacency)
    rtol = 1e-4
    eps_ar = target / 2.0 if adjacency == "group" else target
    coarse = quantise_down(max(4.0 * REL_EPS_ERROR * eps_ar, MIN_EPS_ERROR))
    log_rdp = math.log(_rdp_sigma(target, q, steps, delta, adjacency))
    log_min, log_max = (math.log(v) for v in SIGMA_RANGE)

    def g(log_s: float) -> float:  # coarse point estimate minus target (decreasing)
        try:
            segments = ((math.exp(log_s), q, steps),)
            return epsilon_of_segments(segments, delta, adjacency, coarse).epsilon_estimate - target
        except AccountingRangeError as err:
            if log_s < log_rdp - 0.2:
                return 1e6  # far below the RDP answer: epsilon beyond the numerics, > target
            raise AccountingRangeError(
                f"target_epsilon = {target:g} is beyond what the accountant resolves at q = {q:g} and {steps} "
                f"steps: the noise multiplier it needs (about {math.exp(log_rdp):.3g} by RDP) gives privacy "
                "losses that overflow (epsilon up to a few hundred is resolved)") from err

    # bracket [lo, hi] with g(lo) > 0 >= g(hi); RDP over-estimates epsilon, so the
    # answer is at or below the RDP sigma
    hi, lo = log_rdp, log_rdp - 0.3
    while g(hi) > 0.0:
        lo, hi = hi, hi + 0.3
        if hi > log_max:
            raise AccountingRangeError(f"target_epsilon = {target} needs sigma > {SIGMA_RANGE[1]:g}")
    while g(lo) <= 0.0:
        hi, lo = lo, lo - 0.3
        if lo < log_min:
            raise AccountingRangeError(f"target_epsilon = {target} is met only by sigma < {SIGMA_RANGE[0]:g}")
    x_est = optimize.brentq(g, lo, hi, xtol=rtol / 10.0)

    def h(log_s: float) -> float:  # public conservative epsilon minus target
        return epsilon(math.exp(log_s), q, steps, delta, adjacency).epsilon - target

    # The upper bound exceeds the estimate by about 0.1%: predict the root from the
    # local slope d eps / d log sigma, then bracket it to relative width rtol.
    slope = (g(x_est + 0.01) - g(x_est)) / 0.01
    r = epsilon(math.exp(x_est), q, steps, delta, adjacency)
    guess = x_est + (r.epsilon - target) / -slope if slope < 0 else x_est
    a, b = guess - rtol / 2.0, guess + rtol / 2.0
    fa, fb = h(a), h(b)
    step = rtol
    while fa <= 0.0:  # a is feasible too: move the bracket down
        b, fb = a, fa
        step *= 2.0
        a = b - step
        fa = h(a)
    while fb > 0.0:  # b is not feasible: move the bracket up
        a, fa = b, fb
        step *= 2.0
        b = a + step
        if b > log_max:
            raise AccountingRangeError(f"target_epsilon = {target} needs sigma > {SIGMA_RANGE[1]:g}")
        fb = h(b)
    while b - a > rtol:  # h(a) > 0 >= h(b): bisect in log sigma
        m = 0.5 * (a + b)
        fm = h(m)
        if fm > 0.0:
            a, fa = m, fm
        else:
            b, fb = m, fm
    return math.exp(b)
