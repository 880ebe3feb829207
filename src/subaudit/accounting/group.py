"""Group privacy (Theorem 4.1 of the paper): substitute epsilon from the add/remove one.

A substitution is a removal plus an addition, so eps_S = 2 eps_AR(delta') with delta'
solving (1 + exp(eps_AR(delta'))) delta' = delta. An upper bound on the substitute
epsilon, never tighter than it. This module finds delta' (bracketed from below by the
RDP bound, then located on the composed add/remove curves) and sizes the add/remove
discretisation for it; :mod:`subaudit.accounting.accountant` forms the record.

Range (measured): group privacy needs eps_AR at delta' ~ delta * exp(-eps_AR), which
limits it to eps_S of about 35 at delta = 1e-5, T = 500.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence

from scipy import optimize

from subaudit.accounting.composition import composed_curves, worst_bounds
from subaudit.accounting.error_budget import (
    REL_DELTA_ERROR,
    coarse_eps_error,
    final_eps_error,
    fit_eps_error,
    quantise_down,
)
from subaudit.accounting.prv import Segment, prv_kinds
from subaudit.accounting.rdp import rdp_epsilon
from subaudit.validation import AccountingRangeError

__all__ = ["group_guess", "group_setup", "solve_group_delta"]


def solve_group_delta(eps_of: Callable[[float], float], delta: float, lo: float) -> float:
    """delta' in [lo, delta/2] with (1 + exp(eps_of(delta'))) delta' = delta (log scale)."""

    def g(log_d: float) -> float:
        e = eps_of(math.exp(log_d))
        return log_d + (e + math.log1p(math.exp(-e))) - math.log(delta)

    a, b = math.log(lo), math.log(delta / 2.0)
    if a >= b or g(a) > 0.0:
        raise AccountingRangeError(
            f"group privacy needs an add/remove delta' below {lo:.3g} here, "
            "beyond what the composition resolves; use a larger delta"
        )
    if g(b) <= 0.0:
        return delta / 2.0
    return math.exp(optimize.brentq(g, a, b, xtol=1e-12, rtol=1e-13))


def group_guess(segments: Sequence[Segment], delta: float) -> float:
    """delta' from the RDP bound (an under-estimate, as RDP over-estimates epsilon)."""
    kinds = prv_kinds("group", segments)
    return solve_group_delta(lambda d: max(rdp_epsilon(k, segments, d) for k in kinds),
                              delta, delta * 1e-300)


def group_setup(
    segments: tuple[Segment, ...], delta: float, eps_error: float | None = None
) -> tuple[float, float]:
    """(eps_error, delta_error) of the add/remove discretisation for group privacy.

    delta' is first bracketed from below by RDP, then located with a coarse PRV pass;
    delta_error is REL_DELTA_ERROR times that delta' and eps_error REL_EPS_ERROR times
    eps_AR(delta') (unless given)."""
    kinds = prv_kinds("group", segments)
    d_guess = group_guess(segments, delta)
    d_err_min = quantise_down(REL_DELTA_ERROR * d_guess, per_decade=4)
    coarse = coarse_eps_error(kinds, segments, d_guess)
    # coarse pass; its delta_error shrinks until delta' is in reach (the RDP guess is
    # often orders of magnitude too small, and too small a delta_error costs precision)
    d_err_c = max(REL_DELTA_ERROR * delta * 1e-3, d_err_min)
    below = delta
    while True:
        try:
            c_err = fit_eps_error(kinds, segments, coarse, d_err_c)
            curves = composed_curves(kinds, segments, c_err, d_err_c)
            lo = 1.0001 * max(c.min_delta for c in curves)
            below = lo
            d_est = solve_group_delta(lambda d, c=curves: worst_bounds(c, d)[1], delta, lo)
            break
        except AccountingRangeError as exc:
            if d_err_c <= d_err_min:
                raise AccountingRangeError(
                    f"group privacy: the add/remove guarantee is needed at a delta' below {below:.2g} "
                    f"(RDP puts it above {d_guess:.2g}), beyond what the composition resolves ({exc}); "
                    "the group epsilon is too large here, use a larger delta"
                ) from None
            d_err_c = max(d_err_c * 1e-3, d_err_min)
    d_err = quantise_down(REL_DELTA_ERROR * d_est, per_decade=4)
    if eps_error is None:
        eps_error = final_eps_error(worst_bounds(curves, d_est)[1])
    return fit_eps_error(kinds, segments, eps_error, d_err), d_err
