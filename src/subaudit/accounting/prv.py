"""Privacy random variables (PRVs) of one DP-SGD step, the Poisson-sampled Gaussian, in
the three directions the adjacencies compose: substitute, remove and add.

Clip norm C = 1 without loss of generality, noise multiplier ``sigma``, Poisson rate
``q`` in (0, 1].

* ``"substitute"`` (replace one record): the pair
  P = q N(+1, s^2) + (1 - q) N(0, s^2) vs Q = q N(-1, s^2) + (1 - q) N(0, s^2), s = sigma.
  The pair is symmetric (x -> -x swaps P and Q), so one privacy-loss random variable (PRV)
  L(x) = log p(x)/q(x), X ~ P, covers both directions. L is increasing and L(x) = y has
  the closed form x*(y) = s^2 [y/2 + asinh(k sinh(y/2))], k = (1 - q)/q * exp(1/(2 s^2))
  (the positive root of a quadratic in u = exp(x/s^2), evaluated in log space, odd in
  y). At q = 1, k = 0 and L is the Gaussian PRV of sensitivity 2.
* ``"remove"``: q N(1) + (1-q) N(0) vs N(0) (prv-accountant's
  ``PoissonSubsampledGaussianMechanism``); ``"add"``: N(0) vs the mixture. Add/remove
  adjacency composes both (:func:`prv_kinds`).

The classes implement prv-accountant's ``PrivacyRandomVariable`` interface, with

* closed-form vectorised float64 CDFs; cell masses differenced on the side of the tail
  (``Phi(-a) - Phi(-b)`` in the upper tail) so tail cells keep their relative precision;
* RDP by log-space trapezoid quadrature over x (spectrally accurate for these smooth
  Gaussian-type integrands; exact 2 alpha / sigma^2 at q = 1), vectorised over the 150
  default orders (:data:`RDP_ORDERS`) and memoised, so domain sizing takes milliseconds;
* caching (``functools.lru_cache``, :func:`cached_prv`) of PRVs, so that repeated
  requests reuse their memoised RDP and mean.

A :data:`Segment` is one stretch of training at fixed settings, (sigma, q, steps).
"""

from __future__ import annotations

import functools
import math
from abc import abstractmethod
from collections.abc import Sequence

import numpy as np
from prv_accountant import PrivacyRandomVariable
from scipy import special

from subaudit.validation import ParameterError, check_noise_multiplier, check_sampling_rate

__all__ = [
    "PRV_CLASSES",
    "RDP_ORDERS",
    "AddPoissonGaussian",
    "PoissonGaussianPRV",
    "RemovePoissonGaussian",
    "Segment",
    "SubstitutePoissonGaussian",
    "cached_prv",
    "prv_kinds",
    "total_steps",
]

#: RDP orders for domain sizing and RDP bounds (prv-accountant's defaults).
RDP_ORDERS = np.array([1.0 + x / 10.0 for x in range(1, 100)] + list(range(12, 64)), dtype=float)
_LOG2 = math.log(2.0)


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


class PoissonGaussianPRV(PrivacyRandomVariable):
    """Shared parts. The CDF is a mixture sum_j w_j Phi(z_j(t)) with increasing maps z_j
    (``_zs``); :meth:`log_densities` gives the log densities of the pair for the quadratures. A
    direction (substitute, remove, add) gives :meth:`x_star`, :meth:`log_densities` and
    :meth:`kl_at_full_batch`: it cannot be made without them."""

    reverse: str = ""

    def __init__(self, sigma: float, q: float) -> None:
        self.sigma = check_noise_multiplier(sigma)
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

    def _mixed(self, shift: np.ndarray) -> np.ndarray:
        """log(q exp(shift) + 1 - q): the log density ratio of the mixture q N(mu) + (1-q) N(0)
        to N(0) from the shifted component's ``shift``; at q = 1 exactly ``shift`` (log q = 0
        and log(1-q) = -inf, which logaddexp returns the other argument for, bit for bit)."""
        return np.logaddexp(self.log_q + shift, self.log_1mq)

    @abstractmethod
    def x_star(self, y):
        """The x at which the privacy loss L(x) equals ``y`` (L is monotone in x)."""

    @abstractmethod
    def log_densities(self, x: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Log densities (log p(x), log q(x)) of the pair, for the quadratures."""

    @abstractmethod
    def kl_at_full_batch(self) -> float:
        """KL divergence at q = 1 (Gaussian: mu^2 / 2); rdp(alpha) = alpha * this."""

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
        lp, lq = self.log_densities(np.asarray(x, dtype=np.float64))
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
            return alphas * self.kl_at_full_batch()
        x, h = self._x_grid(float(alphas.max()))
        lp, lq = self.log_densities(x)
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
            orders = np.union1d(RDP_ORDERS, [alpha])
            self._rdp_memo.update(zip(orders.tolist(), self.rdp_orders(orders).tolist()))
        return self._rdp_memo[alpha]

    def mean(self) -> float:
        """E_P[L] = KL(P || Q), by quadrature (closed form at q = 1)."""
        if self._mean is None:
            if self.q == 1.0:
                self._mean = self.kl_at_full_batch()
            else:
                x, h = self._x_grid(1.0)
                lp, lq = self.log_densities(x)
                self._mean = float(np.sum(np.exp(lp) * (lp - lq)) * h)
        return self._mean


class SubstitutePoissonGaussian(PoissonGaussianPRV):
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

    def log_densities(self, x):
        base = _log_phi(x, self.sigma)
        up = (2.0 * x - 1.0) / (2.0 * self.s2)
        down = (-2.0 * x - 1.0) / (2.0 * self.s2)
        return base + self._mixed(up), base + self._mixed(down)

    def kl_at_full_batch(self) -> float:
        return 2.0 / self.s2  # sensitivity 2


class RemovePoissonGaussian(PoissonGaussianPRV):
    """PRV of the "remove" direction: q N(1, s^2) + (1-q) N(0, s^2) vs N(0, s^2).
    The variable of prv-accountant's ``PoissonSubsampledGaussianMechanism``, in float64."""

    reverse = "add"

    def x_star(self, y):
        """The x with L(x) = y; -inf below the support (y <= log(1-q))."""
        y = np.asarray(y, dtype=np.float64)
        if self.q == 1.0:
            return self.s2 * y + 0.5
        return self.s2 * _log_excess(y, self.log_q, self.q) + 0.5

    def log_densities(self, x):
        base = _log_phi(x, self.sigma)
        return base + self._mixed((2.0 * x - 1.0) / (2.0 * self.s2)), base

    def kl_at_full_batch(self) -> float:
        return 0.5 / self.s2


class AddPoissonGaussian(PoissonGaussianPRV):
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

    def log_densities(self, x):
        base = _log_phi(x, self.sigma)
        return base, base + self._mixed((2.0 * x - 1.0) / (2.0 * self.s2))

    def kl_at_full_batch(self) -> float:
        return 0.5 / self.s2


PRV_CLASSES: dict[str, type[PoissonGaussianPRV]] = {
    "substitute": SubstitutePoissonGaussian,
    "remove": RemovePoissonGaussian,
    "add": AddPoissonGaussian,
}


@functools.lru_cache(maxsize=128)
def cached_prv(kind: str, sigma: float, q: float) -> PoissonGaussianPRV:
    """The PRV of direction ``kind`` (a key of :data:`PRV_CLASSES`), cached so that its
    memoised RDP and mean are reused."""
    return PRV_CLASSES[kind](sigma, q)


#: One stretch of training at fixed settings: (noise multiplier, Poisson rate, steps),
#: the entries of an Opacus accountant's ``history``.
Segment = tuple[float, float, int]


def total_steps(segments: Sequence[Segment]) -> int:
    """Steps of all segments together."""
    return sum(t for _, _, t in segments)


def prv_kinds(adjacency: str, segments: Sequence[Segment]) -> tuple[str, ...]:
    """The PRV directions (keys of :data:`PRV_CLASSES`) that ``adjacency`` composes; the
    add/remove (and group) answer is the worse of them."""
    if adjacency == "substitute":
        return ("substitute",)
    # add-remove, and group: both directions unless every step samples everyone
    return ("remove",) if all(q == 1.0 for _, q, _ in segments) else ("remove", "add")
