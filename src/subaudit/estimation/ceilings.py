"""Final-iterate (hidden-state) ceiling of the S1 worst-case canary.

After ``t`` steps the S1 adversary (:mod:`subaudit.scenarios.s1`) sees one number, the
cumulative canary-coordinate gradient (clip norm ``C = 1``, it cancels)

    X = s K + N(0, v),   K ~ Binomial(t, q),   v = t sigma^2,

with ``s = +1`` under ``D`` (law ``P``) and ``s = -1`` under ``D'`` (law ``Q``, substitute
adjacency) or ``X = N(0, v)`` under ``D'`` (add/remove).  No test on ``X`` can beat the
(epsilon, delta) curve of the pair ``(P, Q)``: the *ceiling* is the smallest ``eps >= 0``
with ``max(H_eps(P||Q), H_eps(Q||P)) <= delta``, ``H_eps(P||Q) = int (p - e^eps q)_+``.
It is what an auditor of the final gradient can at best certify, as opposed to the
accountant's epsilon, which bounds an adversary seeing every step.

Method.  The privacy loss ``L(x) = log p(x) - log q(x)`` is increasing in ``x`` in both
adjacencies (it is the S1 score; for add/remove ``L'(x) = E_post[K] / v >= 0``), so the
optimal test is a threshold on ``x`` and

    H_eps(P||Q) = P(X > x+) - e^eps Q(X > x+),   L(x+) = eps,
    H_eps(Q||P) = Q(X < x-) - e^eps P(X < x-),   L(x-) = -eps,

with ``P(X > x) = sum_k Binom(k; t, q) Phi((k - x)/sqrt v)``.  Tails are summed in log
space (``logsumexp`` of ``log_ndtr`` plus the binomial log-pmf over every ``k`` with a
finite log-pmf, which is exact), so ``log H`` stays accurate for tiny delta and large
epsilon; ``H`` is stationary in the threshold at ``x+-``, so root-finding errors in
``x+-`` enter only at second order.  Epsilon is then the root (``brentq``) of
``log max(H_fwd, H_rev) - log delta``, decreasing in eps.  At ``q = 1`` the pair is a
Gaussian shift: substitute ``mu = 2 sqrt(t)/sigma``, add/remove ``mu = sqrt(t)/sigma``, and
the ceiling is the mu-GDP epsilon (:func:`subaudit.accounting.gdp.gdp_epsilon`).
"""

from __future__ import annotations

import math

import numpy as np
from scipy import optimize, special, stats

from subaudit.accounting.gdp import MU_MAX, gdp_epsilon
from subaudit.schedule import checkpoints
from subaudit.validation import (
    ParameterError,
    check_choice,
    check_count,
    check_noise_multiplier,
    check_probability,
    check_sampling_rate,
)

__all__ = [
    "ADJACENCIES",
    "MAX_TERMS",
    "ceiling_terms",
    "final_iterate_curve",
    "final_iterate_epsilon",
    "final_iterate_hockey_stick",
]

#: Adjacencies of the ceiling (the two of :mod:`subaudit.scenarios.s1`).
ADJACENCIES: tuple[str, ...] = ("substitute", "add-remove")

#: The most binomial terms one request may sum over, all its checkpoints together.  The cost
#: is linear in them: each ceiling at q < 1 sums over the steps + 1 values of K about a
#: hundred times (root finding), measured at about 19,000 terms a second on one core (1e6
#: steps: 53 s), so this is about 20 minutes; memory is a few arrays of the largest step count.
MAX_TERMS = 20_000_000

# log H is clipped below at this value in the epsilon root-finding (a sign-preserving
# guard against log(0) = -inf where H underflows; the root lies where log H = log delta).
_LOG_FLOOR = -1e4


class _Pair:
    """The pair (P, Q) of one setting: binomial weights, the loss and its tails."""

    def __init__(self, sigma: float, q: float, t: int, adjacency: str) -> None:
        k_all = np.arange(t + 1)
        w = stats.binom.logpmf(k_all, t, q)
        keep = np.isfinite(w)
        self.k = k_all[keep].astype(np.float64)
        self.w = w[keep]
        self.v = t * sigma * sigma
        self.sd = math.sqrt(self.v)
        self.substitute = adjacency == "substitute"
        self._base = self.w - self.k * self.k / (2.0 * self.v)
        self._kv = self.k / self.v
        # inf_x L(x): -inf for substitute, log Pr(K = 0) = t log(1 - q) for add/remove
        self.loss_inf = -math.inf if self.substitute or q == 1.0 else t * math.log1p(-q)

    def loss(self, x: float) -> float:
        """L(x) = log p(x) - log q(x) (the S1 score of :mod:`subaudit.scenarios.s1`)."""
        lin = x * self._kv
        out = special.logsumexp(self._base + lin)
        if self.substitute:
            out -= special.logsumexp(self._base - lin)
        return float(out)

    def log_sf(self, x: float, sign: float) -> float:
        """log Pr(X > x) for X = sign * K + N(0, v) (sign 0: no canary)."""
        if sign == 0.0:
            return float(special.log_ndtr(-x / self.sd))
        return float(special.logsumexp(self.w + special.log_ndtr((sign * self.k - x) / self.sd)))

    def log_cdf(self, x: float, sign: float) -> float:
        """log Pr(X < x) for X = sign * K + N(0, v) (sign 0: no canary)."""
        if sign == 0.0:
            return float(special.log_ndtr(x / self.sd))
        return float(special.logsumexp(self.w + special.log_ndtr((x - sign * self.k) / self.sd)))

    def threshold(self, y: float) -> float:
        """The x with L(x) = y (L is increasing; y must exceed inf L)."""
        def f(x: float) -> float:
            return self.loss(x) - y

        lo, hi = -max(1.0, self.sd), max(1.0, self.sd)
        while f(hi) < 0.0:
            lo, hi = hi, 2.0 * hi
        while f(lo) > 0.0:
            lo, hi = 2.0 * lo, lo
        return float(optimize.brentq(f, lo, hi, xtol=1e-12 * max(1.0, abs(lo), abs(hi)), rtol=1e-14))

    def log_hockey_stick(self, eps: float) -> tuple[float, float]:
        """(log H_eps(P||Q), log H_eps(Q||P)); -inf where a divergence is exactly 0."""
        q_sign = -1.0 if self.substitute else 0.0
        x = self.threshold(eps)
        fwd = _log_diff(self.log_sf(x, 1.0), eps + self.log_sf(x, q_sign))
        if -eps <= self.loss_inf:
            rev = -math.inf  # L >= -eps everywhere: Q never exceeds e^eps P
        else:
            x = self.threshold(-eps)
            rev = _log_diff(self.log_cdf(x, q_sign), eps + self.log_cdf(x, 1.0))
        return fwd, rev


def _log_diff(a: float, b: float) -> float:
    """log(e^a - e^b), -inf where b >= a (rounding at the stationary point)."""
    if not b < a:
        return -math.inf
    d = b - a
    return a + (math.log(-math.expm1(d)) if d > -math.log(2.0) else math.log1p(-math.exp(d)))


def _check(sigma: float, q: float, steps: int, adjacency: str) -> tuple[float, float, int, str]:
    return (
        check_noise_multiplier(sigma),
        check_sampling_rate(q, "q"),
        check_count(steps, "steps"),
        check_choice(adjacency, "adjacency", ADJACENCIES),
    )


def final_iterate_hockey_stick(
    sigma: float, q: float, steps: int, epsilon: float, adjacency: str = "substitute"
) -> tuple[float, float]:
    """``(H_eps(P||Q), H_eps(Q||P))`` of the S1 final-iterate pair at ``epsilon``.

    Both directions are returned (not their maximum) so that callers and tests can see
    the mirror symmetry of the substitute pair and the asymmetry of add/remove."""
    sigma, q, steps, adjacency = _check(sigma, q, steps, adjacency)
    eps = float(epsilon)
    if not (math.isfinite(eps) and eps >= 0.0):
        raise ParameterError("epsilon", epsilon, "a finite number >= 0")
    fwd, rev = _Pair(sigma, q, steps, adjacency).log_hockey_stick(eps)
    return math.exp(fwd), math.exp(rev)


def _gaussian_mu(sigma: float, steps: int, adjacency: str) -> float:
    """mu of the q = 1 pair: N(+t, v) vs N(-t, v) (substitute) or vs N(0, v)."""
    return (2.0 if adjacency == "substitute" else 1.0) * math.sqrt(steps) / sigma


def _epsilon_numeric(sigma: float, q: float, steps: int, delta: float, adjacency: str) -> float:
    """The ceiling by the tail/threshold method (valid at q = 1 too; checked inputs)."""
    pair = _Pair(sigma, q, steps, adjacency)
    log_delta = math.log(delta)

    def f(eps: float) -> float:
        return max(max(pair.log_hockey_stick(eps)), _LOG_FLOOR) - log_delta

    if f(0.0) <= 0.0:
        return 0.0
    lo, hi = 0.0, 1.0
    while f(hi) > 0.0:
        lo, hi = hi, 2.0 * hi
    return float(optimize.brentq(f, lo, hi, xtol=1e-13, rtol=1e-12, maxiter=200))


def ceiling_terms(q: float, steps: int, every: int | None = None) -> int:
    """Binomial terms the ceiling after ``steps`` (``every``: and after every ``every``-th step)
    sums over, its cost (:data:`MAX_TERMS`); 0 at ``q = 1`` (a closed form)."""
    if q == 1.0:
        return 0
    if every is None:
        return steps + 1
    n = steps // every
    return n + every * n * (n + 1) // 2 + (steps + 1 if steps % every else 0)


def _check_cost(q: float, steps: int, every: int | None, max_terms: int) -> None:
    max_terms = check_count(max_terms, "max_terms", minimum=0)
    terms = ceiling_terms(q, steps, every)
    if terms > max_terms:
        name, value = ("every", every) if every is not None else ("steps", steps)
        raise ParameterError(name, value, f"a request of at most {max_terms:,} binomial terms (this one sums "
                             f"{terms:,}: about {terms / 19_000 / 3600:.2g} hours at one core's measured "
                             "19,000 terms/s); fewer checkpoints (a larger every) or fewer steps, or raise "
                             "max_terms (--max-terms)")


def final_iterate_epsilon(
    sigma: float, q: float, steps: int, delta: float, adjacency: str = "substitute", *,
    max_terms: int = MAX_TERMS,
) -> float:
    """Epsilon of the best test on the final S1 gradient ``g_steps`` at ``delta``.

    The smallest ``eps >= 0`` with ``max(H_eps(P||Q), H_eps(Q||P)) <= delta`` for the
    pair of laws of ``g_steps`` under ``D`` and ``D'`` (module docstring): the ceiling of
    any audit that sees only the final iterate of the worst-case canary, to compare with
    the accountant's epsilon (which composes every step).  ``q = 1`` uses the closed
    mu-GDP form; 0.0 when even eps = 0 meets ``delta``.  Relative accuracy about 1e-9.
    A request beyond ``max_terms`` binomial terms (:func:`ceiling_terms`) is refused."""
    sigma, q, steps, adjacency = _check(sigma, q, steps, adjacency)
    delta = check_probability(delta, "delta")
    _check_cost(q, steps, None, max_terms)
    if q == 1.0:
        mu = _gaussian_mu(sigma, steps, adjacency)
        if mu > MU_MAX:
            raise ParameterError("sigma", sigma, f"a noise multiplier >= {sigma * mu / MU_MAX:.3g} at {steps} steps "
                                                 "(below, the ceiling overflows double precision)")
        return gdp_epsilon(mu, delta)
    return _epsilon_numeric(sigma, q, steps, delta, adjacency)


def final_iterate_curve(
    sigma: float, q: float, steps: int, every: int, delta: float, adjacency: str = "substitute", *,
    max_terms: int = MAX_TERMS, progress: bool = False,
) -> tuple[np.ndarray, np.ndarray]:
    """Ceiling after ``every, 2 every, ...`` steps and after ``steps`` itself.

    The step list is :func:`subaudit.schedule.checkpoints` (the "score every k-th step"
    schedule), so the curve lines up with step-wise audit scores.  Returns
    ``(steps_array int64, eps_array float64)``.  A request beyond ``max_terms`` binomial
    terms in all (:func:`ceiling_terms`) is refused before any work; ``progress`` shows a
    bar weighted by each checkpoint's cost."""
    from tqdm.auto import tqdm

    sigma, q, steps, adjacency = _check(sigma, q, steps, adjacency)
    every = check_count(every, "every")
    delta = check_probability(delta, "delta")
    _check_cost(q, steps, every, max_terms)
    ts = checkpoints(steps, every)
    eps = np.empty(ts.size, dtype=np.float64)
    with tqdm(total=max(ceiling_terms(q, steps, every), ts.size), desc="ceiling", unit=" terms", unit_scale=True,
              disable=not progress) as bar:
        for j, t in enumerate(ts):
            eps[j] = final_iterate_epsilon(sigma, q, int(t), delta, adjacency, max_terms=max_terms)
            bar.update(int(t) + 1 if q < 1.0 else 1)
    return ts, eps
