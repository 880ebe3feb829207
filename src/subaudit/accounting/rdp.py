"""The RDP upper bound on epsilon of composed Poisson-sampled Gaussian steps.

Renyi DP adds up over steps and converts to (epsilon, delta) in closed form
(prv-accountant's conversion), so it is a cheap, loose upper bound: it scales the first
(coarse) pass of the accountant (:mod:`subaudit.accounting.error_budget`), brackets the
group-privacy delta' from below (:mod:`subaudit.accounting.group`) and starts the
calibration of sigma (:mod:`subaudit.accounting.calibration`).
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from subaudit.accounting.prv import RDP_ORDERS, Segment, cached_prv

__all__ = ["rdp_epsilon"]


def rdp_epsilon(kind: str, segments: Sequence[Segment], delta: float) -> float:
    """RDP upper bound on epsilon of the composed segments (RDP adds up over steps;
    prv-accountant's conversion); cheap, used to scale the first pass and to start
    calibration."""
    rdp = sum(np.array([cached_prv(kind, s, q).rdp(a) for a in RDP_ORDERS]) * t for s, q, t in segments)
    eps = rdp - np.log(delta * RDP_ORDERS) / (RDP_ORDERS - 1) + np.log1p(-1.0 / RDP_ORDERS)
    return float(max(np.nanmin(eps), 0.0))
