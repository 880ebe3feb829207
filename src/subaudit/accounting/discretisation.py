"""Discretisation of a PRV: the domain (width and mesh) and the cell-centred PMF on it.

prv-accountant's machinery is used (``compute_safe_domain_size`` for the RDP based
domain, ``Domain``, ``DiscretePrivacyRandomVariable`` and the mesh of Gopi et al. 2021,
Thm 5.5), with these changes:

* the closed-form cell masses of :mod:`subaudit.accounting.prv` replace ``CellCentred`` +
  ``PrivacyRandomVariableTruncated`` (same cell-centred rule and mean-shift correction;
  the mean is the untruncated KL divergence by quadrature, which differs from the
  truncated mean by less than delta_error * width);
* domain: prv-accountant sizes it from the right tail only (RDP of the pair). The FFT
  composition is circular, so a heavy *left* tail wraps around onto large losses. The
  add direction has exactly that (its loss is bounded above by -log(1-q) but unbounded
  below), and prv-accountant's sizing gave it spurious epsilons (e.g. 5.5 where the true
  value is below T * (-log(1-q)) = 2.9). The left tail of L under P is bounded by the
  RDP of the reversed pair, so the half-width is the larger of the two safe sizes. The
  length is rounded up to a 5-smooth number (pocketfft is slow on large prime factors).

Requests beyond what the numerics deliver raise :class:`AccountingRangeError` (here and
in the modules built on this one).
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np
from prv_accountant.accountant import compute_safe_domain_size
from prv_accountant.discrete_privacy_random_variable import DiscretePrivacyRandomVariable
from prv_accountant.domain import Domain
from scipy import fft as sp_fft

from subaudit.accounting.prv import PRV_CLASSES, PoissonGaussianPRV, Segment, cached_prv
from subaudit.validation import AccountingRangeError

__all__ = [
    "MAX_DOMAIN_SIZE",
    "AccountingRangeError",     # raised here; defined in subaudit.validation with the other errors
    "aligned_domain",
    "discretise",
    "eps_error_of_mesh",
    "half_width",
    "mesh_of_eps_error",
]

#: Largest discretisation (grid points) before eps_error is relaxed to fit.
MAX_DOMAIN_SIZE = 1 << 22


def mesh_of_eps_error(eps_error: float, delta_error: float, steps: int) -> float:
    """Mesh of Gopi et al. 2021, Thm 5.5, as in prv-accountant's ``PRVAccountant``."""
    return eps_error / math.sqrt(steps / 2.0 * math.log(12.0 / delta_error))


def eps_error_of_mesh(mesh: float, delta_error: float, steps: int) -> float:
    """eps error bound that a mesh gives for ``steps`` compositions (inverse of mesh_of_eps_error)."""
    return mesh * math.sqrt(steps / 2.0 * math.log(12.0 / delta_error))


def half_width(kind: str, segments: Sequence[Segment], eps_error: float, delta_error: float) -> float:
    """prv-accountant's safe domain size for the composed PRVs and for their reverses
    (left tail)."""
    kinds = {kind, PRV_CLASSES[kind].reverse}
    return max(
        compute_safe_domain_size([cached_prv(k, s, q) for s, q, _ in segments], [t for _, _, t in segments],
                                 eps_error=eps_error, delta_error=delta_error)
        for k in kinds
    )


def aligned_domain(half: float, mesh: float) -> Domain:
    """prv-accountant's aligned layout t_i = -(n/2 - 1) dt + i dt (n even), which the
    Fourier composer's roll assumes; n rounded up to a 5-smooth length."""
    n = 2 * sp_fft.next_fast_len(int(math.ceil(half / mesh)) + 1, real=True)
    if n > MAX_DOMAIN_SIZE:
        raise AccountingRangeError(
            f"the discretisation would need {n} grid points (limit {MAX_DOMAIN_SIZE}); "
            "the request (steps, delta, epsilon accuracy) is beyond the supported range"
        )
    m0 = n // 2 - 1
    return Domain(-m0 * mesh, (m0 + 1) * mesh, n)


def discretise(prv: PoissonGaussianPRV, domain: Domain) -> DiscretePrivacyRandomVariable:
    """Cell-centred discretisation of ``prv`` on ``domain``, shifted so that its mean is
    the continuous one (prv-accountant's ``CellCentred`` rule)."""
    n = len(domain)
    dt = domain.dt()
    t_min = float(domain.t_min())
    edges = t_min - dt / 2.0 + dt * np.arange(n + 1, dtype=np.float64)
    # masses underflow to exactly 0 outside the support; evaluate only inside it
    t_lo, t_hi = prv.support()
    i0 = max(int(np.searchsorted(edges, t_lo)) - 1, 0)
    i1 = min(int(np.searchsorted(edges, t_hi)) + 1, n)
    pmf = np.zeros(n, dtype=np.float64)
    if i1 > i0:
        pmf[i0:i1] = prv.cell_masses(edges[i0 : i1 + 1])
    mass = float(pmf.sum())
    if not mass > 0.5:
        raise AccountingRangeError("the privacy loss distribution lies outside the accountant's grid: the noise "
                                   "is far too small (epsilon would be in the hundreds or more)")
    pmf /= mass
    centres = t_min + dt * np.arange(n, dtype=np.float64)
    mean_shift = prv.mean() - float(np.dot(centres, pmf))
    if not abs(mean_shift) < dt / 2.0:
        raise AccountingRangeError(
            "the privacy loss distribution is too narrow for the accountant's grid to resolve (its discrete "
            "mean is off by more than half a cell): the noise is far too small, and epsilon would be in the "
            "hundreds or more"
        )
    return DiscretePrivacyRandomVariable(pmf, domain.shift_right(mean_shift), log_pmc_inf=0.0)
