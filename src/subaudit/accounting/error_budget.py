"""The error budgets of a computation: eps_error and delta_error, chosen relative to the
answer.

eps_error relative to epsilon: a coarse pass (eps_error 3% of the RDP bound) gives an
estimate, the final pass uses ``REL_EPS_ERROR`` * estimate (at least ``MIN_EPS_ERROR``),
quantised down onto a geometric grid so nearby requests share a cached discretisation.
``Epsilon.epsilon`` is prv-accountant's upper bound eps(delta - delta_error) + eps_error,
i.e. conservative. delta_error is ``REL_DELTA_ERROR`` * delta (* delta' for group
privacy). Where the grid would exceed ``MAX_DOMAIN_SIZE`` points, eps_error is relaxed to
fit (:func:`fit_eps_error`; the bounds stay valid).
"""

from __future__ import annotations

import math
from collections.abc import Sequence

from subaudit.accounting.composition import composed_curves, worst_bounds
from subaudit.accounting.discretisation import MAX_DOMAIN_SIZE, half_width, mesh_of_eps_error
from subaudit.accounting.prv import Segment, total_steps
from subaudit.accounting.rdp import rdp_epsilon

__all__ = [
    "COARSE_REL_EPS_ERROR",
    "MIN_EPS_ERROR",
    "REL_DELTA_ERROR",
    "REL_EPS_ERROR",
    "choose_eps_error",
    "coarse_eps_error",
    "final_eps_error",
    "fit_eps_error",
    "quantise_down",
]

#: Final-pass eps_error relative to epsilon (the upper bound exceeds the estimate by this).
REL_EPS_ERROR = 5e-4
#: Floor of eps_error (absolute), for epsilon near 0.
MIN_EPS_ERROR = 5e-4
#: First-pass eps_error relative to the RDP upper bound on epsilon.
COARSE_REL_EPS_ERROR = 0.03
#: delta_error relative to delta (or to delta' for group privacy).
REL_DELTA_ERROR = 1e-4


def quantise_down(x: float, per_decade: int = 8) -> float:
    """Round x down onto a geometric grid so nearby requests share cached work."""
    v = 10.0 ** (math.floor(math.log10(x) * per_decade + 1e-9) / per_decade)
    return min(v, x)


def fit_eps_error(kinds: tuple[str, ...], segments: Sequence[Segment], eps_error: float, delta_error: float) -> float:
    """Relax eps_error where the grid would exceed MAX_DOMAIN_SIZE (bounds stay valid)."""
    half = max(half_width(k, segments, eps_error, delta_error) for k in kinds)
    n = 2.0 * half / mesh_of_eps_error(eps_error, delta_error, total_steps(segments))
    return eps_error * n / (0.9 * MAX_DOMAIN_SIZE) if n > 0.9 * MAX_DOMAIN_SIZE else eps_error


def final_eps_error(estimate: float) -> float:
    """eps_error of the final pass: REL_EPS_ERROR x the first pass's ``estimate`` (at least
    MIN_EPS_ERROR), quantised down so nearby requests share a discretisation."""
    return quantise_down(max(REL_EPS_ERROR * estimate, MIN_EPS_ERROR))


def coarse_eps_error(kinds: tuple[str, ...], segments: Sequence[Segment], delta_probe: float) -> float:
    """eps_error of a first pass: 3% of the RDP bound at ``delta_probe``."""
    eps_rdp = max(rdp_epsilon(k, segments, delta_probe) for k in kinds)
    return quantise_down(min(max(COARSE_REL_EPS_ERROR * eps_rdp, 10.0 * MIN_EPS_ERROR), 1.0))


def choose_eps_error(
    kinds: tuple[str, ...], segments: tuple[Segment, ...], delta_probe: float, delta_error: float
) -> float:
    """Two passes: a coarse one (3% of the RDP bound) estimates epsilon at ``delta_probe``,
    the final eps_error is REL_EPS_ERROR times that estimate."""
    coarse = fit_eps_error(kinds, segments, coarse_eps_error(kinds, segments, delta_probe), delta_error)
    estimate = worst_bounds(composed_curves(kinds, segments, coarse, delta_error), delta_probe)[1]
    return fit_eps_error(kinds, segments, final_eps_error(estimate), delta_error)
