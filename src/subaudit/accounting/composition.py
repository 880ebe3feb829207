"""Fourier composition of discretised PRVs and the epsilon(delta) curves of the result.

The ``Fourier`` composer of prv-accountant, the ``DiscretePrivacyRandomVariable`` and
the error bounds of Gopi et al. 2021, Thm 5.5 are used, with these changes:

* round-off: the composed PMF is computed in float64, its round-off level estimated from
  the PMF itself (domain size x largest negative mass; true masses are >= 0, and this
  estimate was 1.5-10x the measured float64-vs-long-double error of the tail sums).
  Where it exceeds ``ROUND_OFF_LIMIT`` x delta_error (1% of delta) the composition is
  redone in long double; where even that is not enough, :class:`AccountingRangeError`
  is raised. The estimate is added to the delta_error shift of the bounds.
  (prv-accountant's own criterion, machine eps x domain size, is about 1000x too
  pessimistic in float64 and would refuse delta = 1e-8 at fine meshes.);
* the ``Fourier`` composer's ``F ** T`` (numpy complex power, 6x slower) is replaced by
  repeated squaring in a subclass; roll and domain shift are unchanged;
* caching (``functools.lru_cache``) of discretisations and composed curves, so
  group privacy (many delta' queries) and ``epsilon_over_steps`` (many step counts, one
  discretisation) reuse work, and an epsilon(delta) curve object answers delta queries
  with one cumulative sum (:func:`clear_cache` drops these caches and the PRVs').

Changing settings: a history of (sigma, q, steps) segments (an Opacus accountant's
``history``) is composed with every segment's PRV discretised on one aligned domain
(mesh of Gopi et al. for the total step count, width from ``compute_safe_domain_size``
over all segments and their reverses, as Opacus' ``PRVAccountant`` sizes it) and composed
by one product of Fourier powers with the ``Fourier`` composer's roll; the mean-shift of
each segment adds up. A single segment takes the cached homogeneous path. Checked
against dp-accounting's PLD on three-segment histories (tests).
"""

from __future__ import annotations

import functools
import math
from collections.abc import Callable, Sequence

import numpy as np
from prv_accountant.composers import Fourier
from prv_accountant.discrete_privacy_random_variable import DiscretePrivacyRandomVariable
from scipy import fft as sp_fft

from subaudit.accounting.discretisation import (
    aligned_domain,
    discretise,
    eps_error_of_mesh,
    half_width,
    mesh_of_eps_error,
)
from subaudit.accounting.prv import Segment, cached_prv, total_steps
from subaudit.validation import AccountingRangeError

__all__ = [
    "ROUND_OFF_LIMIT",
    "EpsilonCurve",
    "clear_cache",
    "composed_curve",
    "composed_curves",
    "worst_bounds",
]

#: Largest accepted round-off estimate, in units of delta_error (100 x 1e-4 = 1% of delta;
#: it is added to the delta slack of the bounds, so it costs accuracy, not validity).
ROUND_OFF_LIMIT = 100.0


def _power(f: np.ndarray, n: int) -> np.ndarray:
    """f**n by repeated squaring: about 6x faster than numpy's complex power, and its
    rounding error grows like log(n) rather than n."""
    result = None
    base = f
    while True:
        if n & 1:
            result = base.copy() if result is None else result * base
        n >>= 1
        if not n:
            return result
        base = base * base


class _FastFourier(Fourier):
    """prv-accountant's ``Fourier`` composer with a faster integer power (same roll and
    domain shift as ``Fourier.compute_composition``)."""

    def compute_composition(self, num_self_compositions: Sequence[int]) -> DiscretePrivacyRandomVariable:
        if len(num_self_compositions) != 1:
            raise ValueError("Length of `num_self_compositions` needs to match length of PRVs.")
        n_comp = int(num_self_compositions[0])
        f_n = sp_fft.irfft(_power(self.F, n_comp), n=len(self.prvs[0]))
        m = n_comp - 1
        if n_comp % 2 == 0:
            m += len(f_n) // 2
        f_n = np.roll(f_n, m)
        domain = self.domain.shift_right(self.domain.shifts() * (n_comp - 1))
        log_pmc_inf = sum(prv.log_pmc_inf * n_comp for prv in self.prvs)
        return DiscretePrivacyRandomVariable(f_n, domain, log_pmc_inf=log_pmc_inf)


class _Discretised:
    """A cell-centred discretised PRV on an FFT-friendly aligned domain + its composer."""

    def __init__(
        self, kind: str, sigma: float, q: float, max_steps: int, eps_error: float, delta_error: float
    ) -> None:
        mesh = mesh_of_eps_error(eps_error, delta_error, max_steps)
        domain = aligned_domain(half_width(kind, ((sigma, q, max_steps),), eps_error, delta_error), mesh)
        self.kind = kind
        self.max_steps = max_steps
        self.eps_error = eps_error
        self.delta_error = delta_error
        self.mesh = mesh
        self.size = len(domain)
        self.dprv = discretise(cached_prv(kind, sigma, q), domain)
        self.composer = _FastFourier([self.dprv])
        self._composer_ld: Fourier | None = None

    def compose(self, steps: int, long_double: bool = False) -> DiscretePrivacyRandomVariable:
        """Self-composition ``steps`` times (float64, or long double for lower round-off)."""
        if not 1 <= steps <= self.max_steps:
            raise ValueError(f"steps must be in [1, {self.max_steps}]")
        if not long_double:
            return self.composer.compute_composition([steps])
        if self._composer_ld is None:
            ld = DiscretePrivacyRandomVariable(self.dprv.pmf.astype(np.longdouble), self.dprv.domain)
            self._composer_ld = _FastFourier([ld])
        return self._composer_ld.compute_composition([steps])


class EpsilonCurve:
    """epsilon(delta) of one composed PRV for many delta queries: the arithmetic of
    ``DiscretePrivacyRandomVariable.compute_epsilon``, with a round-off estimate."""

    def __init__(self, dprv: DiscretePrivacyRandomVariable, eps_error: float, delta_error: float) -> None:
        p = np.asarray(dprv.pmf)
        dtype = p.dtype
        if dtype == np.float64:
            t = np.linspace(float(dprv.domain.t_min()), float(dprv.domain.t_max()), len(p))
        else:
            t = np.asarray(dprv.domain.ts(), dtype=dtype)
        if float(np.abs(t[[0, -1]]).max()) > 700.0:
            raise AccountingRangeError("epsilon is beyond what the accountant represents: privacy losses above 700 "
                                       "overflow exp() in double precision, which a setting reaches only when its "
                                       "epsilon is in the hundreds (the noise is far too small)")
        # Round-off level of the PMF: true masses are >= 0, so the largest negative mass
        # is the size of the noise; spread over the whole domain it bounds its sum.
        amp = max(float(-p.min()), float(np.finfo(dtype).eps * p.max()))
        self.round_off = amp * len(p)
        # Only epsilon >= 0 is ever asked for: keep the suffix t >= -1 (suffix sums unchanged).
        start = max(int(np.searchsorted(t, -1.0)) - 1, 0)
        p, t = p[start:], t[start:]
        self.d1 = np.cumsum(p[::-1])[::-1]
        self.d2 = np.cumsum((p * np.exp(-t))[::-1])[::-1]
        # -delta(t), increasing in t; round-off makes it wiggle far in the tails, so it is
        # made monotone for the binary search
        self.ndelta = np.maximum.accumulate(np.exp(t) * self.d2 - self.d1)
        self.t = t.astype(np.float64)
        self.eps_error = eps_error
        self.delta_error = delta_error

    def _find(self, delta: float) -> float:
        i = int(np.searchsorted(self.ndelta, -delta, side="left"))
        if i >= len(self.ndelta):
            raise AccountingRangeError(
                f"epsilon at delta = {delta:.3g} lies beyond the discretisation domain "
                f"(t_max = {self.t[-1]:.3g})"
            )
        if i <= 0:
            return 0.0
        val = float((self.d1[i] - delta) / self.d2[i])
        return max(0.0, math.log(val)) if val > 0.0 else 0.0

    @property
    def min_delta(self) -> float:
        """Smallest delta this curve answers for (delta_error + round-off, doubled)."""
        return 2.0 * (self.delta_error + self.round_off)

    def bounds(self, delta: float) -> tuple[float, float, float]:
        """(lower, estimate, upper) epsilon at ``delta`` (prv-accountant's definitions,
        with the round-off estimate added to the delta_error shift)."""
        if delta <= self.min_delta:
            raise AccountingRangeError(
                f"delta = {delta:.3g} is below what this composition resolves "
                f"(delta_error {self.delta_error:.2g}, round-off about {self.round_off:.2g})"
            )
        slack = self.delta_error + self.round_off
        upper = self._find(delta - slack) + self.eps_error
        lower = max(0.0, self._find(delta + slack) - self.eps_error)
        estimate = self._find(delta)
        if upper > self.t[-1] - 1.0:
            raise AccountingRangeError(
                f"epsilon {upper:.4g} reaches the edge of the discretisation domain ({self.t[-1]:.4g})"
            )
        return lower, estimate, upper


@functools.lru_cache(maxsize=6)
def _discretised(
    kind: str, sigma: float, q: float, max_steps: int, eps_error: float, delta_error: float
) -> _Discretised:
    return _Discretised(kind, sigma, q, max_steps, eps_error, delta_error)


def _checked_curve(compose: Callable[[bool], DiscretePrivacyRandomVariable], eps_error: float,
                   delta_error: float) -> EpsilonCurve:
    """The curve of ``compose(long_double)``: float64, or long double where float64's
    round-off would exceed ``ROUND_OFF_LIMIT`` x delta_error."""
    curve = EpsilonCurve(compose(False), eps_error, delta_error)
    if curve.round_off > ROUND_OFF_LIMIT * delta_error:  # float64 not enough: long double
        curve = EpsilonCurve(compose(True), eps_error, delta_error)
        if curve.round_off > ROUND_OFF_LIMIT * delta_error:
            raise AccountingRangeError(
                f"round-off of the composition (about {curve.round_off:.2g}, long double) exceeds 1% of "
                f"delta (delta_error {delta_error:.2g}); delta is too small for this many steps"
            )
    return curve


@functools.lru_cache(maxsize=12)
def composed_curve(
    kind: str, sigma: float, q: float, max_steps: int, eps_error: float, delta_error: float, steps: int
) -> EpsilonCurve:
    disc = _discretised(kind, sigma, q, max_steps, eps_error, delta_error)
    return _checked_curve(lambda ld: disc.compose(steps, long_double=ld),
                          eps_error_of_mesh(disc.mesh, delta_error, steps), delta_error)


@functools.lru_cache(maxsize=6)
def _history_curve(kind: str, segments: tuple[Segment, ...], eps_error: float, delta_error: float
                   ) -> EpsilonCurve:
    """Heterogeneous composition: every segment discretised on one aligned domain (mesh
    and width of Gopi et al. for the total step count, as prv-accountant's and Opacus'
    ``PRVAccountant`` size it), composed by one product of Fourier powers; the roll and the
    domain shift are those of the ``Fourier`` composer, summed over segments."""
    total = total_steps(segments)
    mesh = mesh_of_eps_error(eps_error, delta_error, total)
    domain = aligned_domain(half_width(kind, segments, eps_error, delta_error), mesh)
    dprvs = [discretise(cached_prv(kind, s, q), domain) for s, q, _ in segments]
    shift = sum(t * d.domain.shifts() for d, (_, _, t) in zip(dprvs, segments))
    n = len(domain)

    def compose(long_double: bool) -> DiscretePrivacyRandomVariable:
        dtype = np.longdouble if long_double else np.float64
        spectrum = None
        for d, (_, _, t) in zip(dprvs, segments):
            part = _power(sp_fft.rfft(np.asarray(d.pmf, dtype=dtype)), t)
            spectrum = part if spectrum is None else spectrum * part
        roll = total - 1 + (n // 2 if total % 2 == 0 else 0)
        pmf = np.roll(sp_fft.irfft(spectrum, n=n), roll)
        return DiscretePrivacyRandomVariable(pmf, domain.shift_right(shift), log_pmc_inf=0.0)

    return _checked_curve(compose, eps_error_of_mesh(mesh, delta_error, total), delta_error)


def clear_cache() -> None:
    """Drop cached PRVs, discretisations and composed curves (memory, or cold timings)."""
    composed_curve.cache_clear()
    _history_curve.cache_clear()
    _discretised.cache_clear()
    cached_prv.cache_clear()


def composed_curves(
    kinds: tuple[str, ...], segments: tuple[Segment, ...], eps_error: float, delta_error: float
) -> list[EpsilonCurve]:
    """The composed curve of each direction (one segment: the cached homogeneous path)."""
    if len(segments) == 1:
        (sigma, q, steps), = segments
        return [composed_curve(k, sigma, q, steps, eps_error, delta_error, steps) for k in kinds]
    return [_history_curve(k, segments, eps_error, delta_error) for k in kinds]


def worst_bounds(curves: list[EpsilonCurve], delta: float) -> tuple[float, float, float]:
    """Worst case over directions of (lower, estimate, upper)."""
    b = [c.bounds(delta) for c in curves]
    return max(x[0] for x in b), max(x[1] for x in b), max(x[2] for x in b)
