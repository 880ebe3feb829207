"""Privacy accounting for DP-SGD (Poisson-sampled Gaussian) under three adjacencies.

Clip norm C = 1 without loss of generality, noise multiplier ``sigma``, Poisson rate
``q`` in (0, 1], ``steps`` compositions, target ``delta``.

* ``"substitute"`` (replace one record): the pair
  P = q N(+1, s^2) + (1 - q) N(0, s^2) vs Q = q N(-1, s^2) + (1 - q) N(0, s^2), s = sigma.
  The pair is symmetric (x -> -x swaps P and Q), so one privacy-loss random variable (PRV)
  L(x) = log p(x)/q(x), X ~ P, covers both directions. L is increasing and L(x) = y has
  the closed form x*(y) = s^2 [y/2 + asinh(k sinh(y/2))], k = (1 - q)/q * exp(1/(2 s^2))
  (the positive root of a quadratic in u = exp(x/s^2), evaluated in log space, odd in
  y). At q = 1, k = 0 and L is the Gaussian PRV of sensitivity 2.
* ``"add-remove"``: the worse of the "remove" direction (q N(1) + (1-q) N(0) vs N(0),
  prv-accountant's ``PoissonSubsampledGaussianMechanism``) and the "add" direction
  (N(0) vs the mixture), each self-composed ``steps`` times; dp-accounting's
  ``ADD_OR_REMOVE_ONE`` does the same.
  Finding: over 458 settings (q in {0.99, 0.9, 0.5, 0.25, 0.0625, 0.01}, T in
  {1, 10, 100, 500, 2000}, sigma in {0.5 .. 30}, delta in {1e-5, 1e-8}; epsilon from
  5e-4 to 600) the add direction never gave a larger epsilon than the remove direction.
  The two come within 1e-4 of each other only where they nearly coincide (q -> 1, or
  sigma so large that epsilon is tiny). There is no proof of dominance for all
  parameters, and a valid add/remove guarantee needs both directions, so for q < 1 both
  are composed and the larger epsilon is returned (this roughly doubles the cost); at
  q = 1 both are the same Gaussian and one is computed. tests/test_accounting.py
  re-checks dominance on a 12-point grid.
* ``"group"`` (Theorem 4.1 of the paper): a substitution is a removal plus an addition,
  so eps_S = 2 eps_AR(delta') with delta' solving (1 + exp(eps_AR(delta'))) delta' =
  delta. An upper bound on the substitute epsilon, never tighter than it.

Numerics. prv-accountant's machinery is used (the ``PrivacyRandomVariable`` interface,
``compute_safe_domain_size`` for the RDP based domain, ``Domain``, the ``Fourier``
composer, ``DiscretePrivacyRandomVariable`` and the error bounds of Gopi et al. 2021,
Thm 5.5), with these changes for speed, and for accuracy at small delta / large epsilon:

* closed-form vectorised float64 CDFs; cell masses differenced on the side of the tail
  (``Phi(-a) - Phi(-b)`` in the upper tail) so tail cells keep their relative precision.
  This replaces ``CellCentred`` + ``PrivacyRandomVariableTruncated`` (same cell-centred
  rule and mean-shift correction; the mean is the untruncated KL divergence by
  quadrature, which differs from the truncated mean by less than delta_error * width);
* RDP by log-space trapezoid quadrature over x (spectrally accurate for these smooth
  Gaussian-type integrands; exact 2 alpha / sigma^2 at q = 1), vectorised over the 150
  default orders and memoised, so domain sizing takes milliseconds;
* domain: prv-accountant sizes it from the right tail only (RDP of the pair). The FFT
  composition is circular, so a heavy *left* tail wraps around onto large losses. The
  add direction has exactly that (its loss is bounded above by -log(1-q) but unbounded
  below), and prv-accountant's sizing gave it spurious epsilons (e.g. 5.5 where the true
  value is below T * (-log(1-q)) = 2.9). The left tail of L under P is bounded by the
  RDP of the reversed pair, so the half-width is the larger of the two safe sizes. The
  length is rounded up to a 5-smooth number (pocketfft is slow on large prime factors);
* eps_error relative to epsilon: a coarse pass (eps_error 3% of the RDP bound) gives an
  estimate, the final pass uses ``REL_EPS_ERROR`` * estimate (at least
  ``MIN_EPS_ERROR``), quantised down onto a geometric grid so nearby requests share a
  cached discretisation. ``Epsilon.epsilon`` is prv-accountant's upper bound
  eps(delta - delta_error) + eps_error, i.e. conservative;
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
* caching (``functools.lru_cache``) of PRVs, discretisations and composed curves, so
  group privacy (many delta' queries) and ``epsilon_over_steps`` (many step counts, one
  discretisation) reuse work, and an epsilon(delta) curve object answers delta queries
  with one cumulative sum.

Changing settings: :func:`epsilon_of_history` composes (sigma, q, steps) segments (an
Opacus accountant's ``history``). Every segment's PRV is discretised on one aligned domain
(mesh of Gopi et al. for the total step count, width from ``compute_safe_domain_size`` over
all segments and their reverses, as Opacus' ``PRVAccountant`` sizes it) and composed by
one product of Fourier powers with the ``Fourier`` composer's roll; the mean-shift of
each segment adds up. Equal segments are merged first (composition commutes), so a
history of one setting is :func:`epsilon` exactly. Checked against dp-accounting's PLD on
three-segment histories (tests).

Range (measured): epsilon up to several hundred (privacy losses must stay below 700),
delta down to about 1e-12 (T = 2250) for substitute/add-remove; group privacy needs
eps_AR at delta' ~ delta * exp(-eps_AR), which limits it to eps_S of about 35 at
delta = 1e-5, T = 500. Cost: 0.1-0.5 s per call on 2 cores (two directions for
add/remove), about 1 s per calibration.

Requests beyond what the numerics deliver raise :class:`AccountingRangeError`
(a ``ValueError``) with an explanation instead of returning a wrong number.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np
from prv_accountant import PrivacyRandomVariable
from prv_accountant.accountant import compute_safe_domain_size
from prv_accountant.composers import Fourier
from prv_accountant.discrete_privacy_random_variable import DiscretePrivacyRandomVariable
from prv_accountant.domain import Domain
from scipy import fft as sp_fft
from scipy import optimize, special

from subaudit.validation import (
    ParameterError,
    check_count,
    check_positive,
    check_probability,
    check_sampling_rate,
)

__all__ = [
    "ADJACENCIES",
    "ADJACENCY_ALIASES",
    "AccountingRangeError",
    "AddPoissonGaussian",
    "Epsilon",
    "RemovePoissonGaussian",
    "SubstitutePoissonGaussian",
    "Segment",
    "calibrate_sigma",
    "canonical_adjacency",
    "clear_cache",
    "epsilon",
    "epsilon_of_history",
    "epsilon_over_steps",
]

ADJACENCIES = ("add-remove", "substitute", "group")

#: Final-pass eps_error relative to epsilon (the upper bound exceeds the estimate by this).
REL_EPS_ERROR = 5e-4
#: Floor of eps_error (absolute), for epsilon near 0.
MIN_EPS_ERROR = 5e-4
#: First-pass eps_error relative to the RDP upper bound on epsilon.
COARSE_REL_EPS_ERROR = 0.03
#: delta_error relative to delta (or to delta' for group privacy).
REL_DELTA_ERROR = 1e-4
#: Largest discretisation (grid points) before eps_error is relaxed to fit.
MAX_DOMAIN_SIZE = 1 << 22
#: Largest accepted round-off estimate, in units of delta_error (100 x 1e-4 = 1% of delta;
#: it is added to the delta slack of the bounds, so it costs accuracy, not validity).
ROUND_OFF_LIMIT = 100.0
#: Sigma range searched by calibrate_sigma.
SIGMA_RANGE = (1e-2, 1e5)
#: RDP orders for domain sizing and RDP bounds (prv-accountant's defaults).
_RDP_ORDERS = np.array([1.0 + x / 10.0 for x in range(1, 100)] + list(range(12, 64)), dtype=float)
_LOG2 = math.log(2.0)


class AccountingRangeError(ValueError):
    """The requested epsilon/delta lies beyond what the numerics resolve reliably."""


# --------------------------------------------------------------------------------------
# Privacy random variables
# --------------------------------------------------------------------------------------


def _cell_masses(z: np.ndarray) -> np.ndarray:
    """Phi(z[i+1]) - Phi(z[i]) for increasing z, differenced on the side of the nearer tail."""
    lo = special.ndtr(z)
    up = special.ndtr(-z)
    return np.where(z[:-1] > 0.0, up[:-1] - up[1:], lo[1:] - lo[:-1])


def _asinh_k_sinh(y: np.ndarray, log_k: float) -> np.ndarray:
    """asinh(k sinh(y/2)) with k = exp(log_k): odd in y, no overflow for large k or y."""
    a = np.abs(y) / 2.0
    with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
        log_z = log_k + a + np.log(-np.expm1(-2.0 * a)) - _LOG2  # log(k sinh a)
        small = log_z < 20.0
        out = np.where(small, np.arcsinh(np.exp(np.where(small, log_z, 0.0))), log_z + _LOG2)
    return np.sign(y) * np.where(a == 0.0, 0.0, out)


def _log_excess(y: np.ndarray, log_q: float, q: float) -> np.ndarray:
    """log((e^y - (1 - q)) / q), and -inf where e^y <= 1 - q."""
    with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
        big = y > 1.0
        yb = np.where(big, y, 1.0)
        v_big = yb + np.log1p((q - 1.0) * np.exp(-yb))
        inner = np.expm1(np.where(big, 0.0, y)) + q
        v_small = np.where(inner > 0.0, np.log(np.where(inner > 0.0, inner, 1.0)), -np.inf)
    return np.where(big, v_big, v_small) - log_q


def _log_phi(x: np.ndarray, s: float) -> np.ndarray:
    return -0.5 * (x / s) ** 2 - math.log(s) - 0.5 * math.log(2.0 * math.pi)


class _PoissonGaussianPRV(PrivacyRandomVariable):
    """Shared parts. The CDF is a mixture sum_j w_j Phi(z_j(t)) with increasing maps z_j
    (``_zs``); ``_log_pq`` gives the log densities of the pair for the quadratures."""

    reverse: str = ""

    def __init__(self, sigma: float, q: float) -> None:
        self.sigma = check_positive(sigma, "sigma")
        self.q = check_sampling_rate(q, "q")
        self.s2 = self.sigma * self.sigma
        self.log_q = math.log(self.q)
        self.log_1mq = math.log1p(-self.q) if self.q < 1.0 else -math.inf
        self._rdp_memo: dict[float, float] = {}
        self._mean: float | None = None

    def __repr__(self) -> str:
        return f"{type(self).__name__}(sigma={self.sigma!r}, q={self.q!r})"

    # CDF -------------------------------------------------------------------------------
    def _zs(self, t: np.ndarray) -> list[tuple[float, np.ndarray]]:
        """(weight, z) pairs with P[L <= t] = sum w Phi(z). Default: X ~ q N(1) + (1-q) N(0)
        (the substitute and remove directions); the add direction overrides it."""
        x = self.x_star(t)
        if self.q == 1.0:
            return [(1.0, (x - 1.0) / self.sigma)]
        return [(self.q, (x - 1.0) / self.sigma), (1.0 - self.q, x / self.sigma)]

    def _log_pq(self, x: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        raise NotImplementedError

    def _kl_q1(self) -> float:
        """KL divergence at q = 1 (Gaussian: mu^2 / 2); rdp(alpha) = alpha * this."""
        raise NotImplementedError

    def cdf(self, t):
        """P(L <= t), closed form, vectorised float64."""
        t = np.asarray(t, dtype=np.float64)
        return sum(w * special.ndtr(z) for w, z in self._zs(t))

    def sf(self, t):
        """P(L > t) with full relative precision in the upper tail."""
        t = np.asarray(t, dtype=np.float64)
        return sum(w * special.ndtr(-z) for w, z in self._zs(t))

    def probability(self, a, b):
        """P(a < L <= b), each normal component differenced on its tail side."""
        a = np.asarray(a, dtype=np.float64)
        b = np.asarray(b, dtype=np.float64)
        out = 0.0
        for (w, za), (_, zb) in zip(self._zs(a), self._zs(b)):
            upper = special.ndtr(-za) - special.ndtr(-zb)
            lower = special.ndtr(zb) - special.ndtr(za)
            out = out + w * np.where(za > 0.0, upper, lower)
        return out

    def cell_masses(self, edges: np.ndarray) -> np.ndarray:
        """Masses of the cells between consecutive increasing ``edges``."""
        edges = np.asarray(edges, dtype=np.float64)
        return sum(w * _cell_masses(z) for w, z in self._zs(edges))

    _centres: tuple[float, ...] = (0.0, 1.0)  # means of P's normal components

    def support(self) -> tuple[float, float]:
        """Losses outside this range have P-probability below 1e-320 (the normal CDF
        underflows there): L at x = component means -/+ 38.5 sigma."""
        x = np.array([min(self._centres) - 38.5 * self.sigma, max(self._centres) + 38.5 * self.sigma])
        with np.errstate(over="ignore", invalid="ignore"):
            t = self.privacy_loss(x)
        t = t[np.isfinite(t)]
        return (float(t.min()), float(t.max())) if len(t) else (-math.inf, math.inf)

    def privacy_loss(self, x):
        """L(x) = log p(x) / q(x)."""
        lp, lq = self._log_pq(np.asarray(x, dtype=np.float64))
        return lp - lq

    # quadratures -----------------------------------------------------------------------
    def _x_grid(self, alpha_max: float) -> tuple[np.ndarray, float]:
        """Trapezoid grid. Integrands are Gaussian-like (scale sigma, centre <= alpha) and
        analytic in a strip of half-width pi sigma^2, so step min(s, s^2)/6 is spectrally
        accurate (error ~ exp(-2 pi^2 6))."""
        s = self.sigma
        lo = -12.0 * s - 1.5
        hi = max(alpha_max, 1.0) + 12.0 * s + 1.5
        n = min(int(math.ceil((hi - lo) / (min(s, self.s2) / 6.0))) + 1, 400_000)
        x = np.linspace(lo, hi, n)
        return x, float(x[1] - x[0])

    def rdp_orders(self, alphas) -> np.ndarray:
        """Renyi divergences D_alpha(P || Q) for orders alpha > 1 (log-space quadrature)."""
        alphas = np.atleast_1d(np.asarray(alphas, dtype=np.float64))
        if np.any(alphas <= 1.0):
            raise ParameterError("alpha", alphas.tolist(), "orders > 1")
        if self.q == 1.0:
            return alphas * self._kl_q1()
        x, h = self._x_grid(float(alphas.max()))
        lp, lq = self._log_pq(x)
        loss = lp - lq
        out = np.empty_like(alphas)
        chunk = max(1, int(4e6 // len(x)))
        for i in range(0, len(alphas), chunk):
            a = alphas[i : i + chunk]
            log_int = special.logsumexp(lq[None, :] + a[:, None] * loss[None, :], axis=1) + math.log(h)
            out[i : i + chunk] = log_int / (a - 1.0)
        return np.maximum(out, 0.0)

    def rdp(self, alpha: float) -> float:
        """RDP of order alpha (prv-accountant uses it to size the domain); memoised, the
        default orders are computed in one vectorised pass."""
        alpha = float(alpha)
        if math.isinf(alpha):
            return math.inf
        if alpha not in self._rdp_memo:
            orders = np.union1d(_RDP_ORDERS, [alpha])
            self._rdp_memo.update(zip(orders.tolist(), self.rdp_orders(orders).tolist()))
        return self._rdp_memo[alpha]

    def mean(self) -> float:
        """E_P[L] = KL(P || Q), by quadrature (closed form at q = 1)."""
        if self._mean is None:
            if self.q == 1.0:
                self._mean = self._kl_q1()
            else:
                x, h = self._x_grid(1.0)
                lp, lq = self._log_pq(x)
                self._mean = float(np.sum(np.exp(lp) * (lp - lq)) * h)
        return self._mean


class SubstitutePoissonGaussian(_PoissonGaussianPRV):
    """PRV of one DP-SGD step under substitution: q N(1, s^2) + (1-q) N(0, s^2) vs
    q N(-1, s^2) + (1-q) N(0, s^2). Symmetric pair, so it covers both directions."""

    reverse = "substitute"

    def __init__(self, sigma: float, q: float) -> None:
        super().__init__(sigma, q)
        self.log_k = (self.log_1mq - self.log_q + 0.5 / self.s2) if self.q < 1.0 else -math.inf

    def x_star(self, y):
        """The x with L(x) = y (closed form, see the module docstring)."""
        y = np.asarray(y, dtype=np.float64)
        if self.q == 1.0:
            return self.s2 * y / 2.0
        return self.s2 * (y / 2.0 + _asinh_k_sinh(y, self.log_k))

    def _log_pq(self, x):
        base = _log_phi(x, self.sigma)
        up = (2.0 * x - 1.0) / (2.0 * self.s2)
        down = (-2.0 * x - 1.0) / (2.0 * self.s2)
        if self.q == 1.0:
            return base + up, base + down
        lp = base + np.logaddexp(self.log_q + up, self.log_1mq)
        return lp, base + np.logaddexp(self.log_q + down, self.log_1mq)

    def _kl_q1(self) -> float:
        return 2.0 / self.s2  # sensitivity 2


class RemovePoissonGaussian(_PoissonGaussianPRV):
    """PRV of the "remove" direction: q N(1, s^2) + (1-q) N(0, s^2) vs N(0, s^2).
    The variable of prv-accountant's ``PoissonSubsampledGaussianMechanism``, in float64."""

    reverse = "add"

    def x_star(self, y):
        """The x with L(x) = y; -inf below the support (y <= log(1-q))."""
        y = np.asarray(y, dtype=np.float64)
        if self.q == 1.0:
            return self.s2 * y + 0.5
        return self.s2 * _log_excess(y, self.log_q, self.q) + 0.5

    def _log_pq(self, x):
        base = _log_phi(x, self.sigma)
        up = (2.0 * x - 1.0) / (2.0 * self.s2)
        if self.q == 1.0:
            return base + up, base
        return base + np.logaddexp(self.log_q + up, self.log_1mq), base

    def _kl_q1(self) -> float:
        return 0.5 / self.s2


class AddPoissonGaussian(_PoissonGaussianPRV):
    """PRV of the "add" direction: N(0, s^2) vs q N(1, s^2) + (1-q) N(0, s^2).
    L(x) is decreasing, bounded above by -log(1-q), with a Gaussian-like left tail."""

    reverse = "remove"
    _centres = (0.0,)

    def x_star(self, y):
        """The x with L(x) = y; -inf where y >= -log(1-q)."""
        y = np.asarray(y, dtype=np.float64)
        if self.q == 1.0:
            return -self.s2 * y + 0.5
        return self.s2 * _log_excess(-y, self.log_q, self.q) + 0.5

    def _zs(self, t):
        return [(1.0, -self.x_star(t) / self.sigma)]  # L <= y  <=>  X >= x*(y)

    def _log_pq(self, x):
        base = _log_phi(x, self.sigma)
        up = (2.0 * x - 1.0) / (2.0 * self.s2)
        if self.q == 1.0:
            return base, base + up
        return base, base + np.logaddexp(self.log_q + up, self.log_1mq)

    def _kl_q1(self) -> float:
        return 0.5 / self.s2


_PRV_CLASSES: dict[str, type[_PoissonGaussianPRV]] = {
    "substitute": SubstitutePoissonGaussian,
    "remove": RemovePoissonGaussian,
    "add": AddPoissonGaussian,
}


@functools.lru_cache(maxsize=128)
def _prv(kind: str, sigma: float, q: float) -> _PoissonGaussianPRV:
    return _PRV_CLASSES[kind](sigma, q)


#: One stretch of training at fixed settings: (noise multiplier, Poisson rate, steps),
#: the entries of an Opacus accountant's ``history``.
Segment = tuple[float, float, int]


def _total_steps(segments: Sequence[Segment]) -> int:
    return sum(t for _, _, t in segments)


def _rdp_epsilon(kind: str, segments: Sequence[Segment], delta: float) -> float:
    """RDP upper bound on epsilon of the composed segments (RDP adds up over steps;
    prv-accountant's conversion); cheap, used to scale the first pass and to start
    calibration."""
    rdp = sum(np.array([_prv(kind, s, q).rdp(a) for a in _RDP_ORDERS]) * t for s, q, t in segments)
    eps = rdp - np.log(delta * _RDP_ORDERS) / (_RDP_ORDERS - 1) + np.log1p(-1.0 / _RDP_ORDERS)
    return float(max(np.nanmin(eps), 0.0))


# --------------------------------------------------------------------------------------
# Discretisation, composition, epsilon(delta) curves
# --------------------------------------------------------------------------------------


def _quantise_down(x: float, per_decade: int = 8) -> float:
    """Round x down onto a geometric grid so nearby requests share cached work."""
    v = 10.0 ** (math.floor(math.log10(x) * per_decade + 1e-9) / per_decade)
    return min(v, x)


def _mesh(eps_error: float, delta_error: float, steps: int) -> float:
    """Mesh of Gopi et al. 2021, Thm 5.5, as in prv-accountant's ``PRVAccountant``."""
    return eps_error / math.sqrt(steps / 2.0 * math.log(12.0 / delta_error))


def _eps_error_of_mesh(mesh: float, delta_error: float, steps: int) -> float:
    """eps error bound that a mesh gives for ``steps`` compositions (inverse of _mesh)."""
    return mesh * math.sqrt(steps / 2.0 * math.log(12.0 / delta_error))


def _half_width(kind: str, segments: Sequence[Segment], eps_error: float, delta_error: float) -> float:
    """prv-accountant's safe domain size for the composed PRVs and for their reverses
    (left tail)."""
    kinds = {kind, _PRV_CLASSES[kind].reverse}
    return max(
        compute_safe_domain_size([_prv(k, s, q) for s, q, _ in segments], [t for _, _, t in segments],
                                 eps_error=eps_error, delta_error=delta_error)
        for k in kinds
    )


def _aligned_domain(half: float, mesh: float) -> Domain:
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


def _discretise(prv: _PoissonGaussianPRV, domain: Domain) -> DiscretePrivacyRandomVariable:
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
        raise AccountingRangeError("the privacy loss distribution lies outside the domain")
    pmf /= mass
    centres = t_min + dt * np.arange(n, dtype=np.float64)
    mean_shift = prv.mean() - float(np.dot(centres, pmf))
    if not abs(mean_shift) < dt / 2.0:
        raise AccountingRangeError(
            "discrete mean differs from the continuous mean by more than half a cell; "
            "the privacy loss distribution is not resolved by the domain"
        )
    return DiscretePrivacyRandomVariable(pmf, domain.shift_right(mean_shift), log_pmc_inf=0.0)


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
        mesh = _mesh(eps_error, delta_error, max_steps)
        domain = _aligned_domain(_half_width(kind, ((sigma, q, max_steps),), eps_error, delta_error), mesh)
        self.kind = kind
        self.max_steps = max_steps
        self.eps_error = eps_error
        self.delta_error = delta_error
        self.mesh = mesh
        self.size = len(domain)
        self.dprv = _discretise(_prv(kind, sigma, q), domain)
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


class _EpsilonCurve:
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
            raise AccountingRangeError("privacy losses beyond 700 (exp overflow): epsilon is far too large")
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
                   delta_error: float) -> _EpsilonCurve:
    """The curve of ``compose(long_double)``: float64, or long double where float64's
    round-off would exceed ``ROUND_OFF_LIMIT`` x delta_error."""
    curve = _EpsilonCurve(compose(False), eps_error, delta_error)
    if curve.round_off > ROUND_OFF_LIMIT * delta_error:  # float64 not enough: long double
        curve = _EpsilonCurve(compose(True), eps_error, delta_error)
        if curve.round_off > ROUND_OFF_LIMIT * delta_error:
            raise AccountingRangeError(
                f"round-off of the composition (about {curve.round_off:.2g}, long double) exceeds 1% of "
                f"delta (delta_error {delta_error:.2g}); delta is too small for this many steps"
            )
    return curve


@functools.lru_cache(maxsize=12)
def _curve(
    kind: str, sigma: float, q: float, max_steps: int, eps_error: float, delta_error: float, steps: int
) -> _EpsilonCurve:
    disc = _discretised(kind, sigma, q, max_steps, eps_error, delta_error)
    return _checked_curve(lambda ld: disc.compose(steps, long_double=ld),
                          _eps_error_of_mesh(disc.mesh, delta_error, steps), delta_error)


@functools.lru_cache(maxsize=6)
def _history_curve(kind: str, segments: tuple[Segment, ...], eps_error: float, delta_error: float
                   ) -> _EpsilonCurve:
    """Heterogeneous composition: every segment discretised on one aligned domain (mesh
    and width of Gopi et al. for the total step count, as prv-accountant's and Opacus'
    ``PRVAccountant`` size it), composed by one product of Fourier powers; the roll and the
    domain shift are those of the ``Fourier`` composer, summed over segments."""
    total = _total_steps(segments)
    mesh = _mesh(eps_error, delta_error, total)
    domain = _aligned_domain(_half_width(kind, segments, eps_error, delta_error), mesh)
    dprvs = [_discretise(_prv(kind, s, q), domain) for s, q, _ in segments]
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

    return _checked_curve(compose, _eps_error_of_mesh(mesh, delta_error, total), delta_error)


def clear_cache() -> None:
    """Drop cached PRVs, discretisations and composed curves (memory, or cold timings)."""
    _curve.cache_clear()
    _history_curve.cache_clear()
    _discretised.cache_clear()
    _prv.cache_clear()


def _kinds(adjacency: str, segments: Sequence[Segment]) -> tuple[str, ...]:
    if adjacency == "substitute":
        return ("substitute",)
    # add-remove, and group: both directions unless every step samples everyone
    return ("remove",) if all(q == 1.0 for _, q, _ in segments) else ("remove", "add")


def _fit(kinds: tuple[str, ...], segments: Sequence[Segment], eps_error: float, delta_error: float) -> float:
    """Relax eps_error where the grid would exceed MAX_DOMAIN_SIZE (bounds stay valid)."""
    half = max(_half_width(k, segments, eps_error, delta_error) for k in kinds)
    n = 2.0 * half / _mesh(eps_error, delta_error, _total_steps(segments))
    return eps_error * n / (0.9 * MAX_DOMAIN_SIZE) if n > 0.9 * MAX_DOMAIN_SIZE else eps_error


def _curves(kinds, segments: tuple[Segment, ...], eps_error, delta_error) -> list[_EpsilonCurve]:
    """The composed curve of each direction (one segment: the cached homogeneous path)."""
    if len(segments) == 1:
        (sigma, q, steps), = segments
        return [_curve(k, sigma, q, steps, eps_error, delta_error, steps) for k in kinds]
    return [_history_curve(k, segments, eps_error, delta_error) for k in kinds]


def _bounds(curves: list[_EpsilonCurve], delta: float) -> tuple[float, float, float]:
    """Worst case over directions of (lower, estimate, upper)."""
    b = [c.bounds(delta) for c in curves]
    return max(x[0] for x in b), max(x[1] for x in b), max(x[2] for x in b)


def _final_eps_error(estimate: float) -> float:
    return _quantise_down(max(REL_EPS_ERROR * estimate, MIN_EPS_ERROR))


def _coarse_eps_error(kinds, segments, delta_probe) -> float:
    """eps_error of a first pass: 3% of the RDP bound at ``delta_probe``."""
    eps_rdp = max(_rdp_epsilon(k, segments, delta_probe) for k in kinds)
    return _quantise_down(min(max(COARSE_REL_EPS_ERROR * eps_rdp, 10.0 * MIN_EPS_ERROR), 1.0))


def _choose_eps_error(kinds, segments, delta_probe, delta_error) -> float:
    """Two passes: a coarse one (3% of the RDP bound) estimates epsilon at ``delta_probe``,
    the final eps_error is REL_EPS_ERROR times that estimate."""
    coarse = _fit(kinds, segments, _coarse_eps_error(kinds, segments, delta_probe), delta_error)
    estimate = _bounds(_curves(kinds, segments, coarse, delta_error), delta_probe)[1]
    return _fit(kinds, segments, _final_eps_error(estimate), delta_error)


# --------------------------------------------------------------------------------------
# Group privacy (Theorem 4.1)
# --------------------------------------------------------------------------------------


def _solve_group_delta(eps_of: Callable[[float], float], delta: float, lo: float) -> float:
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


def _group_guess(segments: Sequence[Segment], delta: float) -> float:
    """delta' from the RDP bound (an under-estimate, as RDP over-estimates epsilon)."""
    kinds = _kinds("group", segments)
    return _solve_group_delta(lambda d: max(_rdp_epsilon(k, segments, d) for k in kinds),
                              delta, delta * 1e-300)


def _group_setup(
    segments: tuple[Segment, ...], delta: float, eps_error: float | None = None
) -> tuple[float, float]:
    """(eps_error, delta_error) of the add/remove discretisation for group privacy.

    delta' is first bracketed from below by RDP, then located with a coarse PRV pass;
    delta_error is REL_DELTA_ERROR times that delta' and eps_error REL_EPS_ERROR times
    eps_AR(delta') (unless given)."""
    kinds = _kinds("group", segments)
    d_guess = _group_guess(segments, delta)
    d_err_min = _quantise_down(REL_DELTA_ERROR * d_guess, per_decade=4)
    coarse = _coarse_eps_error(kinds, segments, d_guess)
    # coarse pass; its delta_error shrinks until delta' is in reach (the RDP guess is
    # often orders of magnitude too small, and too small a delta_error costs precision)
    d_err_c = max(REL_DELTA_ERROR * delta * 1e-3, d_err_min)
    below = delta
    while True:
        try:
            c_err = _fit(kinds, segments, coarse, d_err_c)
            curves = _curves(kinds, segments, c_err, d_err_c)
            lo = 1.0001 * max(c.min_delta for c in curves)
            below = lo
            d_est = _solve_group_delta(lambda d, c=curves: _bounds(c, d)[1], delta, lo)
            break
        except AccountingRangeError as exc:
            if d_err_c <= d_err_min:
                raise AccountingRangeError(
                    f"group privacy: the add/remove guarantee is needed at a delta' below {below:.2g} "
                    f"(RDP puts it above {d_guess:.2g}), beyond what the composition resolves ({exc}); "
                    "the group epsilon is too large here, use a larger delta"
                ) from None
            d_err_c = max(d_err_c * 1e-3, d_err_min)
    d_err = _quantise_down(REL_DELTA_ERROR * d_est, per_decade=4)
    if eps_error is None:
        eps_error = _final_eps_error(_bounds(curves, d_est)[1])
    return _fit(kinds, segments, eps_error, d_err), d_err


def _group_from(curves: list[_EpsilonCurve], segments: tuple[Segment, ...], delta, d_err) -> Epsilon:
    lo = 1.0001 * max(c.min_delta for c in curves)
    d_up = _solve_group_delta(lambda d: _bounds(curves, d)[2], delta, lo)
    d_est = _solve_group_delta(lambda d: _bounds(curves, d)[1], delta, lo)
    d_low = _solve_group_delta(lambda d: _bounds(curves, d)[0], delta, lo)
    e_up = _bounds(curves, d_up)[2]
    return _record(segments, delta, "group", 2.0 * _bounds(curves, d_low)[0],
                   2.0 * _bounds(curves, d_est)[1], 2.0 * e_up, 2.0 * curves[0].eps_error, d_err,
                   delta_add_remove=d_up, epsilon_add_remove=e_up)


# --------------------------------------------------------------------------------------
# Public API
# --------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Epsilon:
    """An (epsilon, delta) guarantee of DP-SGD under one adjacency.

    ``epsilon`` is the conservative upper bound (PRV error bounds included),
    ``epsilon_estimate`` the point estimate and ``epsilon_lower`` the lower bound. For
    ``"group"``, ``delta_add_remove`` is the delta' at which the add/remove guarantee
    ``epsilon_add_remove`` is taken (Theorem 4.1); None otherwise. ``eps_error`` and
    ``delta_error`` are the error budgets of the computation. ``segments`` is the
    composed history of (sigma, q, steps); ``sigma`` and ``q`` are NaN where it has
    several, ``steps`` is its total."""

    epsilon: float
    delta: float
    adjacency: str
    epsilon_lower: float
    epsilon_estimate: float
    delta_add_remove: float | None
    sigma: float = math.nan
    q: float = math.nan
    steps: int = 0
    eps_error: float = math.nan
    delta_error: float = math.nan
    epsilon_add_remove: float | None = None
    segments: tuple[Segment, ...] = ()


def _record(segments: tuple[Segment, ...], delta: float, adjacency: str, lower: float, estimate: float,
            upper: float, eps_error: float, delta_error: float, *, delta_add_remove: float | None = None,
            epsilon_add_remove: float | None = None) -> Epsilon:
    sigma, q = (segments[0][0], segments[0][1]) if len(segments) == 1 else (math.nan, math.nan)
    return Epsilon(epsilon=upper, delta=delta, adjacency=adjacency, epsilon_lower=lower,
                   epsilon_estimate=estimate, delta_add_remove=delta_add_remove, sigma=sigma, q=q,
                   steps=_total_steps(segments), eps_error=eps_error, delta_error=delta_error,
                   epsilon_add_remove=epsilon_add_remove, segments=segments)


#: Other spellings of the adjacency names: dp-accounting's ``NeighboringRelation`` and
#: Flower's (matched ignoring case, with ``_`` read as ``-``).
ADJACENCY_ALIASES = {"add-or-remove-one": "add-remove", "replace-one": "substitute"}


def canonical_adjacency(name: str) -> str:
    """The adjacency ``name`` stands for ("add-remove", "substitute" or "group"), also from
    the spellings ``add-or-remove-one`` / ``ADD_OR_REMOVE_ONE`` and ``replace-one`` /
    ``REPLACE_ONE``; ParameterError naming every accepted spelling otherwise."""
    key = name.strip().lower().replace("_", "-") if isinstance(name, str) else name
    key = ADJACENCY_ALIASES.get(key, key)
    if key not in ADJACENCIES:
        raise ParameterError("adjacency", name, ", ".join([*ADJACENCIES, *ADJACENCY_ALIASES]))
    return key


def _check(sigma: float, q: float, delta: float, adjacency: str) -> tuple[float, float, float, str]:
    return (
        check_positive(sigma, "sigma"),
        check_sampling_rate(q, "q"),
        check_probability(delta, "delta"),
        canonical_adjacency(adjacency),
    )


def _check_segments(history: Sequence[Sequence[float]]) -> tuple[Segment, ...]:
    """Validated segments with equal (sigma, q) merged (composition commutes), in order
    of first appearance."""
    if isinstance(history, (str, bytes)) or not isinstance(history, Sequence) or len(history) == 0:
        raise ParameterError("history", history, "a non-empty sequence of (sigma, q, steps)")
    steps_of: dict[tuple[float, float], int] = {}
    for i, seg in enumerate(history):
        if isinstance(seg, (str, bytes)) or not isinstance(seg, Sequence) or len(seg) != 3:
            raise ParameterError(f"history[{i}]", seg, "a triple (sigma, q, steps)")
        where = "" if len(history) == 1 else f"history[{i}] "  # a segment's value, when several
        key = (check_positive(seg[0], where + "sigma"), check_sampling_rate(seg[1], where + "q"))
        steps_of[key] = steps_of.get(key, 0) + check_count(seg[2], where + "steps")
    return tuple((float(s), float(q), int(t)) for (s, q), t in steps_of.items())


def _epsilon(
    segments: tuple[Segment, ...], delta: float, adjacency: str, eps_error: float | None = None
) -> Epsilon:
    """:func:`epsilon_of_history` on checked inputs; ``eps_error`` skips the first pass."""
    kinds = _kinds(adjacency, segments)
    if adjacency == "group":
        eps_err, d_err = _group_setup(segments, delta, eps_error)
        return _group_from(_curves(kinds, segments, eps_err, d_err), segments, delta, d_err)
    d_err = REL_DELTA_ERROR * delta
    if eps_error is None:
        eps_error = _choose_eps_error(kinds, segments, delta, d_err)
    else:
        eps_error = _fit(kinds, segments, eps_error, d_err)
    return _result(_curves(kinds, segments, eps_error, d_err), segments, delta, adjacency, d_err)


def _result(curves: list[_EpsilonCurve], segments: tuple[Segment, ...], delta: float,
            adjacency: str, d_err: float) -> Epsilon:
    """The Epsilon record of composed curves (add-remove or substitute) at ``delta``."""
    low, est, up = _bounds(curves, delta)
    return _record(segments, delta, adjacency, low, est, up, curves[0].eps_error, d_err,
                   epsilon_add_remove=up if adjacency == "add-remove" else None)


def epsilon(sigma: float, q: float, steps: int, delta: float, adjacency: str) -> Epsilon:
    """Epsilon of ``steps`` DP-SGD steps with noise multiplier ``sigma`` and Poisson rate
    ``q`` at ``delta`` under ``adjacency`` ("add-remove", "substitute" or "group", or an
    alias of :data:`ADJACENCY_ALIASES`)."""
    sigma, q, delta, adjacency = _check(sigma, q, delta, adjacency)
    return _epsilon(((sigma, q, check_count(steps, "steps")),), delta, adjacency)


def epsilon_of_history(history: Sequence[Sequence[float]], delta: float, adjacency: str) -> Epsilon:
    """Epsilon of a training whose settings changed: ``history`` holds (sigma, q, steps)
    segments, the format of an Opacus accountant's ``history``. The segments' PRVs are
    composed on one discretisation (order does not matter; equal settings are merged),
    so a one-segment history is :func:`epsilon`."""
    segments = _check_segments(history)
    delta = check_probability(delta, "delta")
    return _epsilon(segments, delta, canonical_adjacency(adjacency))


def epsilon_over_steps(
    sigma: float, q: float, steps: Sequence[int], delta: float, adjacency: str
) -> list[Epsilon]:
    """Epsilon after each step count in ``steps`` (for step-wise figures), from one
    discretisation sized for max(steps). The mesh's eps error bound scales with
    sqrt(step count) (Gopi et al. Thm 5.5), so shorter runs get tighter bounds."""
    sigma, q, delta, adjacency = _check(sigma, q, delta, adjacency)
    if isinstance(steps, (str, bytes)) or not isinstance(steps, Sequence) or len(steps) == 0:
        raise ParameterError("steps", steps, "a non-empty sequence of integers >= 1")
    counts = [check_count(s, "steps") for s in steps]
    t_max = max(counts)
    longest = ((sigma, q, t_max),)
    kinds = _kinds(adjacency, longest)

    def curves(t: int, eps_err: float, d_err: float) -> list[_EpsilonCurve]:
        return [_curve(k, sigma, q, t_max, eps_err, d_err, t) for k in kinds]

    if adjacency == "group":
        eps_err, d_err = _group_setup(longest, delta)  # t_max has the smallest delta'
        return [_group_from(curves(t, eps_err, d_err), ((sigma, q, t),), delta, d_err) for t in counts]
    d_err = REL_DELTA_ERROR * delta
    eps_err = _choose_eps_error(kinds, longest, delta, d_err)
    return [_result(curves(t, eps_err, d_err), ((sigma, q, t),), delta, adjacency, d_err) for t in counts]


def _rdp_sigma(target: float, q: float, steps: int, delta: float, adjacency: str) -> float:
    """Noise multiplier at which the RDP bound reaches ``target`` (cheap starting point;
    RDP over-estimates epsilon, so the answer lies at or below it)."""

    def eps_rdp(log_s: float) -> float:
        segments = ((math.exp(log_s), q, steps),)
        kinds = _kinds(adjacency, segments)
        if adjacency != "group":
            return max(_rdp_epsilon(k, segments, delta) for k in kinds)
        try:
            d = _group_guess(segments, delta)
        except AccountingRangeError:
            return math.inf  # delta' below 1e-300: epsilon is huge
        return 2.0 * max(_rdp_epsilon(k, segments, d) for k in kinds)

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
    coarse = _quantise_down(max(4.0 * REL_EPS_ERROR * eps_ar, MIN_EPS_ERROR))
    log_rdp = math.log(_rdp_sigma(target, q, steps, delta, adjacency))
    log_min, log_max = (math.log(v) for v in SIGMA_RANGE)

    def g(log_s: float) -> float:  # coarse point estimate minus target (decreasing)
        try:
            return _epsilon(((math.exp(log_s), q, steps),), delta, adjacency, coarse).epsilon_estimate - target
        except AccountingRangeError:
            if log_s < log_rdp - 0.2:
                return 1e6  # far below the RDP answer: epsilon beyond the numerics, > target
            raise

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
