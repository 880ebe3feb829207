"""One-run audits: lower bounds on epsilon from a single training run with ``m`` canaries.

Setting (both estimators): each of ``m`` canaries takes one of ``k`` values uniformly at
random, independently (``k = 2``: included with probability 1/2, i.e. membership).  After
one training run the auditor guesses the value of ``r`` canaries and abstains on the other
``m - r``; ``v`` of the guesses are correct.  A privacy claim is falsified at significance
``alpha`` when observing ``>= v`` correct guesses has probability ``<= alpha`` under every
mechanism satisfying the claim; the reported epsilon is the largest one falsified.

``"steinke"``
    Steinke, Nasr & Jagielski 2023, "Privacy Auditing with One (1) Training Run"
    (arXiv 2305.08846), Theorem 5.2 with its ``delta > 0`` term and the appendix code
    (``p_value_DP_audit``): for an (eps, delta)-DP mechanism,
    ``P[W >= v] <= beta + 2 m delta * max_{i=1..v} (P[B >= v - i] - beta) / i`` with
    ``B ~ Binomial(r, e^eps / (1 + e^eps))`` and ``beta = P[B >= v]``.  Membership only.
``"mahloujifar"``
    Mahloujifar, Melis & Chaudhuri 2024, "Auditing f-Differential Privacy in One Run"
    (arXiv 2410.22235), the reconstruction bound with abstentions ("audit_rh_with_cap") for a
    claimed trade-off curve f; ``k``-ary games use the paper's
    ``h[i] = max(h[i+1], (k - 1) * fbar^{-1}(r[i+1]))``.  The curve of a candidate (eps, delta)
    is chosen by ``family`` (:data:`FDP_FAMILIES`): by default f_{eps,delta} itself, which every
    (eps, delta)-DP mechanism satisfies, so the bound is valid for every mechanism; as options
    the mu-GDP curve of the Gaussian mechanism exactly (eps, delta)-DP (``"gdp"``: a test of
    "the mechanism is mu-GDP", ``mu = 1 / sigma`` with sigma from
    ``dp_accounting.get_sigma_gaussian``; DP-SGD's curve lies below it in its tail, so it is
    not valid for DP-SGD in general), or DP-SGD's own curve at its q and steps
    (``"dpsgd"``: the accountant's privacy profile; the bound is the epsilon of the smallest
    noise multiplier falsified).

Both p-value computations agree with google-deepmind/jax_privacy (``auditing.py``,
``_epsilon_one_run`` and ``_epsilon_one_run_fdp``, whose family is ``"gdp"``) for ``k = 2`` (see the tests).
"""

from __future__ import annotations

import functools
import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np

# SciPy is imported in the functions that use it: the workflow's Snakefile imports this module
# while Snakemake parses, and every cluster job's Snakemake parses it again.

from subaudit.estimation.guesses import DEFAULT_SEARCH, GUESS_RULES, GuessSearch, default_guess_rule, describe
from subaudit.validation import (
    ParameterError,
    check_choice,
    check_count,
    check_probability,
    check_sampling_rate,
)

__all__ = [
    "FDP_FAMILIES",
    "FDPFamily",
    "ONE_RUN_METHODS",
    "best_one_run_epsilon",
    "DPSGDCurve",
    "fdp_epsilon",
    "one_run_epsilon",
    "one_run_falsifies",
    "perfect_guess_limit",
    "steinke_epsilon",
    "steinke_p_value",
]

#: Absolute tolerance of the root search over epsilon.
_XTOL = 1e-10
#: Doublings of the upper end of the bracket before giving up (2**40 is far beyond any epsilon).
_MAX_DOUBLINGS = 40


# ---------------------------------------------------------------------------
# validation
# ---------------------------------------------------------------------------

def _check_counts(canaries: int, guesses: int, correct: int) -> tuple[int, int, int]:
    m = check_count(canaries, "canaries", 1)
    r = check_count(guesses, "guesses", 0)
    v = check_count(correct, "correct", 0)
    if r > m:
        raise ParameterError("guesses", guesses, f"an integer in [0, canaries = {m}]")
    if v > r:
        raise ParameterError("correct", correct, f"an integer in [0, guesses = {r}]")
    return m, r, v


def _check_delta(delta: float, allow_zero: bool) -> float:
    if allow_zero and isinstance(delta, (int, float)) and not isinstance(delta, bool) and delta == 0:
        return 0.0
    try:
        return check_probability(delta, "delta")
    except ParameterError:
        if allow_zero:
            raise ParameterError("delta", delta, "a number in [0, 1)") from None
        raise


# ---------------------------------------------------------------------------
# root search
# ---------------------------------------------------------------------------

def _margin(method: str, family: str, m: int, r: int, v: int, level: float, eps: float, delta: float,
            k: int) -> float:
    """How far one test ``(m, r, v)`` at ``level`` is past rejecting the claim (eps, delta) of
    ``family``'s curve (> 0: falsified): what :func:`steinke_epsilon` and :func:`fdp_epsilon`
    search the largest eps of, and :func:`one_run_falsifies` evaluates at one eps."""
    if method == "steinke":
        return level - _steinke_p(m, r, v, eps, delta)
    return _fdp_margin(m, r, v, level, _claim_fbar_inv(family, eps, delta), k)


def _largest_falsified(objective: Callable[[float], float]) -> float:
    """Largest eps >= 0 with ``objective(eps) > 0`` (falsified), 0 if none.

    The objective is taken to be non-increasing in eps; the bracket doubles from 1 until it is no
    longer falsified, then brentq locates the crossing.
    """
    from scipy import optimize
    if not objective(0.0) > 0:
        return 0.0
    lo, hi = 0.0, 1.0
    for _ in range(_MAX_DOUBLINGS):
        if not objective(hi) > 0:
            return float(optimize.brentq(objective, lo, hi, xtol=_XTOL))
        lo, hi = hi, 2.0 * hi
    raise RuntimeError(f"one-run audit: claim still falsified at eps = {lo:g}")


# ---------------------------------------------------------------------------
# Steinke, Nasr & Jagielski 2023
# ---------------------------------------------------------------------------

#: Up to this many right guesses the delta term's maximum is taken over every i at once;
#: beyond it, by a search whose memory and time do not grow with the count.
_EXACT_WINDOWS = 1 << 20


def _window_excess(r: int, q: float, v: int, beta: float, lo: int, hi: int) -> float:
    """max over i in [lo, hi] of (P[B >= v - i] - beta) / i = P[v - i <= B < v] / i."""
    from scipy import stats
    i = np.arange(lo, hi + 1)
    return float(np.max((stats.binom.sf(v - i - 1, r, q) - beta) / i))


def _steinke_excess(r: int, q: float, v: int, beta: float) -> float:
    """max over i = 1..v of P[v - i <= B < v] / i, B ~ Binomial(r, q) (Thm 5.2's delta term).

    The ratio is the mean of B's unimodal pmf over the window [v - i, v - 1]: as i grows it
    rises while the pmf values it takes in exceed the mean, then falls for good, so beyond
    :data:`_EXACT_WINDOWS` an integer ternary search finds the peak (a zero plateau, where the
    pmf underflows, counts as rising) and every i within 4,096 of it is checked exactly."""
    from scipy import stats
    if v <= _EXACT_WINDOWS:
        return _window_excess(r, q, v, beta, 1, v)

    def g(i: int) -> float:
        return float((stats.binom.sf(v - i - 1, r, q) - beta) / i)

    lo, hi = 1, v
    while hi - lo > 8:
        m1, m2 = lo + (hi - lo) // 3, hi - (hi - lo) // 3
        if g(m1) < g(m2) or g(m2) == 0.0:
            lo = m1 + 1
        else:
            hi = m2
    return _window_excess(r, q, v, beta, max(1, lo - 4096), min(v, hi + 4096))


def _steinke_p(m: int, r: int, v: int, eps: float, delta: float) -> float:
    from scipy import special, stats
    if v == 0:
        return 1.0
    q = float(special.expit(eps))
    beta = float(stats.binom.sf(v - 1, r, q))  # P[B >= v]
    if delta == 0.0:
        return beta
    return min(beta + _steinke_excess(r, q, v, beta) * 2.0 * m * delta, 1.0)


def steinke_p_value(canaries: int, guesses: int, correct: int, eps: float, delta: float) -> float:
    """P-value of ``>= correct`` right guesses under (eps, delta)-DP (Steinke et al. Thm 5.2).

    Exposed so that a caller can report the p-value of a claimed epsilon, not only the bound.
    """
    m, r, v = _check_counts(canaries, guesses, correct)
    d = _check_delta(delta, allow_zero=True)
    e = float(eps)
    if not (math.isfinite(e) and e >= 0):
        raise ParameterError("eps", eps, "a finite number >= 0")
    return _steinke_p(m, r, v, e, d)


def steinke_epsilon(canaries: int, guesses: int, correct: int, delta: float, alpha: float = 0.05) -> float:
    """Epsilon lower bound of Steinke, Nasr & Jagielski (2023) at confidence ``1 - alpha``.

    The largest eps whose p-value (with the ``2 m delta`` term when ``delta > 0``) is
    ``<= alpha``; 0 if even eps = 0 is not rejected.  ``delta = 0`` is allowed.
    """
    m, r, v = _check_counts(canaries, guesses, correct)
    d = _check_delta(delta, allow_zero=True)
    a = check_probability(alpha, "alpha")
    return _largest_falsified(lambda eps: _margin("steinke", "dp", m, r, v, a, eps, d, 2))


# ---------------------------------------------------------------------------
# Mahloujifar, Melis & Chaudhuri 2024
# ---------------------------------------------------------------------------

@dataclass(frozen=True)
class FDPFamily:
    """A trade-off family a one-run f-DP audit can test: ``label``, printed beside its bounds
    in tables and legends, ``description``, what its bound claims, and ``prefix``, how its
    bound is introduced wherever it is printed (a family that assumes the mechanism says so), and
    ``tag``, the assumption in a few words, beside the name of what its bound audits ("" when it
    assumes nothing)."""

    label: str
    description: str
    prefix: str = "epsilon >="
    tag: str = ""


#: Trade-off families a one-run f-DP audit can test (``family=`` of :func:`fdp_epsilon`).  Only
#: ``"dp"`` is valid for every mechanism; the others assume the mechanism's curve, and their
#: label and prefix say which.
FDP_FAMILIES: dict[str, FDPFamily] = {
    "dp": FDPFamily("(eps, delta)-DP", "(eps, delta)-DP curve f_{eps,delta}: valid for every mechanism"),
    "gdp": FDPFamily("mu-GDP test", "mu-GDP test (the Gaussian mechanism matched to (eps, delta)): valid only "
                                    "for Gaussian mechanisms", "mu-GDP test: epsilon >=", "if mu-GDP"),
    "dpsgd": FDPFamily("DP-SGD curve (assumes DP-SGD at its q, T)",
                       "DP-SGD's own curve at its q and steps (the noise multiplier searched): valid only if "
                       "the training is DP-SGD at that q and T", "if DP-SGD at its q and T: epsilon >=",
                       "if DP-SGD"),
}


@dataclass(frozen=True)
class DPSGDCurve:
    """The audited training as DP-SGD, for ``family="dpsgd"``: Poisson rate ``q``, ``steps``
    and the adjacency its bits change ("add-remove" or "substitute")."""

    q: float
    steps: int
    adjacency: str = "add-remove"


def _dp_fbar_inv(eps: float, delta: float) -> Callable[[float], float]:
    """Inverse of ``1 - f_{eps,delta}``: ``max(0, (y - delta) e^-eps, 1 - delta - e^eps (1 - y))``."""
    up, down = math.exp(eps), math.exp(-eps)
    return lambda y: max(0.0, (y - delta) * down, 1.0 - delta - up * (1.0 - y))


def _gdp_fbar_inv(mu: float) -> Callable[[float], float]:
    """Inverse of the mu-GDP blow-up ``1 - G_mu(x)``: ``Phi(Phi^{-1}(y) - mu)``."""
    from scipy import special
    return lambda y: float(special.ndtr(special.ndtri(y) - mu))


def _profile_fbar_inv(eps: np.ndarray, delta: np.ndarray) -> Callable[[float], float]:
    """Inverse of ``1 - f`` for the curve ``f = max_j f_{eps_j, delta_j}`` of a mechanism that is
    (eps_j, delta_j)-DP for every j (a privacy profile): the largest of the pairs' inverses."""
    up, down, one = np.exp(eps), np.exp(-eps), 1.0 - delta
    return lambda y: max(0.0, float(np.max(np.maximum((y - delta) * down, one - up * (1.0 - y)))))


@functools.lru_cache(maxsize=4096)
def _gaussian_mu(eps: float, delta: float) -> float:
    """mu of the Gaussian mechanism that is exactly (eps, delta)-DP (sensitivity 1)."""
    import dp_accounting  # 1 s to import: not while the workflow parses

    return 1.0 / float(dp_accounting.get_sigma_gaussian(eps, delta))


#: The deltas of the privacy profile that stands for DP-SGD's trade-off curve (``"dpsgd"``).
_PROFILE_DELTAS = tuple(float(d) for d in np.geomspace(1e-10, 0.5, 61))


@functools.lru_cache(maxsize=256)
def _dpsgd_profile(sigma: float, q: float, steps: int, adjacency: str) -> tuple[np.ndarray, np.ndarray]:
    """(eps_j, delta_j) arrays that DP-SGD at ``sigma`` satisfies (the accountant's privacy
    profile, :func:`subaudit.accounting.epsilon_profile`)."""
    from subaudit.accounting import epsilon_profile

    pairs = epsilon_profile(sigma, q, steps, _PROFILE_DELTAS, adjacency)
    if not pairs:
        raise ParameterError("sigma", sigma, "a noise multiplier the accountant resolves")
    eps, deltas = zip(*pairs)
    return np.asarray(eps), np.asarray(deltas)


def _fdp_margin(m: int, r: int, v: int, alpha: float, fbar_inv: Callable[[float], float], k: int) -> float:
    """``r[0] + h[0] - r / m`` of the paper's "audit_rh_with_cap"; > 0 means the curve is falsified.

    ``fbar_inv`` is the inverse of the curve's blow-up ``1 - f(x)``.  The running value ``rr``
    is a probability: it is clamped to 1 (past which ``Phi^{-1}`` would return NaN).
    """
    rr = alpha * v / m
    h = alpha * (r - v) / m
    km1 = k - 1
    for i in range(v - 1, -1, -1):
        h_new = max(h, km1 * fbar_inv(rr))
        if h_new == h:  # neither h nor rr can change any more
            break
        rr = min(rr + (i / (r - i)) * (h_new - h), 1.0)
        h = h_new
    return rr + h - r / m


def _claim_fbar_inv(family: str, eps: float, delta: float) -> Callable[[float], float]:
    return _dp_fbar_inv(eps, delta) if family == "dp" else _gdp_fbar_inv(_gaussian_mu(eps, delta))


def _check_family(family: str, mechanism: DPSGDCurve | None) -> str:
    name = check_choice(family, "family", FDP_FAMILIES)
    if (name == "dpsgd") != (mechanism is not None):
        raise ParameterError("mechanism", mechanism, "a DPSGDCurve(q, steps, adjacency) with family 'dpsgd', "
                                                     "none otherwise")
    if mechanism is not None:
        from subaudit.accounting import canonical_adjacency

        check_sampling_rate(mechanism.q, "mechanism.q")
        check_count(mechanism.steps, "mechanism.steps")
        if canonical_adjacency(mechanism.adjacency) == "group":
            raise ParameterError("mechanism.adjacency", mechanism.adjacency, "add-remove or substitute")
    return name


#: Steps per octave of the noise multipliers ``_dpsgd_epsilon`` tries: every search visits points
#: ``2^(j / _SIGMA_STEPS)`` of one lattice, so audits of one training share their accountings
#: (memoised by :func:`_dpsgd_profile`), and the bound is that of a noise multiplier within 0.3%
#: of the smallest falsified one, on its falsified side (valid, never above the exact search's).
_SIGMA_STEPS = 256


def _dpsgd_epsilon(tests: Sequence[tuple[int, int, int, float]], delta: float, k: int,
                   mechanism: DPSGDCurve) -> float:
    """Epsilon at ``delta`` of the smallest noise multiplier of the lattice ``2^(j / 256)`` whose
    DP-SGD curve is falsified by any of ``tests`` ((m, r, v, alpha) each), 0 if none is.

    A larger noise multiplier is a stronger claim, so the falsified set is an interval
    ``[sigma*, inf)``: octaves from 1 bracket it, bisection on the lattice's exponents
    closes it, and the bound is the accountant's lower bound on epsilon at the falsified end
    (0 when the claim of noise multiplier 64 stands)."""
    from subaudit.accounting import canonical_adjacency, epsilon

    adjacency = canonical_adjacency(mechanism.adjacency)

    def falsified(j: int) -> bool:
        sigma = 2.0 ** (j / _SIGMA_STEPS)
        fbar_inv = _profile_fbar_inv(*_dpsgd_profile(sigma, mechanism.q, mechanism.steps, adjacency))
        return any(_fdp_margin(m, r, v, a, fbar_inv, k) > 0 for m, r, v, a in tests)

    top, floor = 6 * _SIGMA_STEPS, -5 * _SIGMA_STEPS  # sigma 64 (the strongest claim tried), 1/32
    if falsified(0):  # octaves from sigma 1 (the accountings of large sigma are slow: seconds each)
        hi = 0
        while falsified(lo := hi - _SIGMA_STEPS):
            if lo <= floor:
                raise RuntimeError("one-run audit: DP-SGD still falsified at noise multiplier "
                                   f"{2.0 ** (lo / _SIGMA_STEPS):g}")
            hi = lo
    else:
        lo = 0
        while not falsified(hi := lo + _SIGMA_STEPS):
            if hi >= top:
                return 0.0
            lo = hi
    while hi - lo > 1:
        mid = (lo + hi) // 2
        lo, hi = (lo, mid) if falsified(mid) else (mid, hi)
    return float(epsilon(2.0 ** (hi / _SIGMA_STEPS), mechanism.q, mechanism.steps, delta, adjacency).epsilon_lower)


def fdp_epsilon(canaries: int, guesses: int, correct: int, delta: float, alpha: float = 0.05, k: int = 2, *,
                family: str = "dp", mechanism: DPSGDCurve | None = None) -> float:
    """Epsilon lower bound of Mahloujifar, Melis & Chaudhuri (2024) at confidence ``1 - alpha``.

    ``correct`` right guesses out of ``guesses`` on ``canaries`` ``k``-ary canaries (``k = 2``:
    membership) falsify a trade-off curve; the bound is the largest epsilon whose curve of
    ``family`` (:data:`FDP_FAMILIES`) is falsified, 0 if none:

    * ``"dp"`` (default): f_{eps,delta} itself, which every (eps, delta)-DP mechanism satisfies,
      so the bound is valid whatever the mechanism;
    * ``"gdp"``: the mu-GDP curve of the Gaussian mechanism that is exactly (eps, delta)-DP, a
      test of "the mechanism is mu-GDP": stronger, valid only for mechanisms whose curve lies
      above it (DP-SGD's does not in its tail);
    * ``"dpsgd"``: DP-SGD's own curve (``mechanism``: its q, steps and adjacency) at a
      searched noise multiplier; the bound is the epsilon of the smallest falsified one.

    ``delta`` must be > 0.
    """
    m, r, v = _check_counts(canaries, guesses, correct)
    d = _check_delta(delta, allow_zero=False)
    a = check_probability(alpha, "alpha")
    kk = check_count(k, "k", 2)
    name = _check_family(family, mechanism)
    if name == "dpsgd":
        return _dpsgd_epsilon([(m, r, v, a)], d, kk, mechanism)
    return _largest_falsified(lambda eps: _margin("mahloujifar", name, m, r, v, a, eps, d, kk))


def perfect_guess_limit(canaries: int, delta: float, alpha: float = 0.05, k: int = 2) -> float:
    """The most any valid one-run test can show: the largest epsilon that guessing all
    ``canaries`` ``k``-ary slots right falsifies at significance ``alpha``, against every
    (eps, delta)-DP mechanism.

    The most probable all-right outcome any such mechanism allows is
    ``(1 - delta) (1 + (k - 1) e^-eps)^-m + delta`` (attained by one that reveals every slot
    with probability delta and otherwise answers each by k-ary randomised response at eps),
    so the limit solves ``(1 - delta) (1 + (k - 1) e^-eps)^-m + delta = alpha``:
    ``ln(k - 1) - ln(expm1(ln((1 - delta) / (alpha - delta)) / m))``, about
    ``ln(m / ln(1 / alpha)) + ln(k - 1)``: it grows by ln 10 per decade of m, with no ceiling at
    ln(1 / delta). The f-DP test of one pre-set guess count attains it (:func:`fdp_epsilon` with
    ``r = v = m``); a search over guess counts pays its correction, and Steinke et al.'s bound,
    whose delta term grows as ``2 m delta``, peaks near m = 10^4 and falls after. 0 when
    ``alpha <= delta`` leaves nothing to falsify."""
    m = check_count(canaries, "canaries", 1)
    d = _check_delta(delta, allow_zero=True)
    a = check_probability(alpha, "alpha")
    kk = check_count(k, "k", 2)
    if a <= d:
        return 0.0
    return max(0.0, math.log(kk - 1) - math.log(math.expm1(math.log((1.0 - d) / (a - d)) / m)))


#: Name -> estimator, for ``--method`` options.  Both take (canaries, guesses, correct, delta, alpha);
#: ``"mahloujifar"`` also takes ``k``.
ONE_RUN_METHODS: dict[str, Callable[..., float]] = {
    "steinke": steinke_epsilon,
    "mahloujifar": fdp_epsilon,
}


def _check_method(method: str, k: int, family: str, mechanism: DPSGDCurve | None) -> tuple[str, int, str]:
    """A bound's (method, k, family), checked together: Steinke et al.'s is for membership
    (k = 2) and the (eps, delta) curve; the f-DP bound takes any."""
    name = check_choice(method, "method", ONE_RUN_METHODS)
    fam = _check_family(family, mechanism)
    if name == "steinke" and fam != "dp":
        raise ParameterError("family", family, "dp (the Steinke et al. bound is for (eps, delta)-DP)")
    kk = check_count(k, "k", 2)
    if name == "steinke" and kk != 2:
        raise ParameterError("k", k, "2 (the Steinke et al. bound is for membership)")
    return name, kk, fam


def one_run_epsilon(canaries: int, guesses: int, correct: int, delta: float, alpha: float = 0.05,
                    method: str = "steinke", k: int = 2, *, family: str = "dp",
                    mechanism: DPSGDCurve | None = None) -> float:
    """The bound of ``method`` (:data:`ONE_RUN_METHODS`) from one test's counts: ``correct``
    right of ``guesses`` made on ``canaries`` ``k``-ary canaries, the combination of method, k
    and family checked first (Steinke et al.'s: k = 2 and family ``"dp"`` only)."""
    name, kk, fam = _check_method(method, k, family, mechanism)
    if name == "steinke":
        return steinke_epsilon(canaries, guesses, correct, delta, alpha)
    return fdp_epsilon(canaries, guesses, correct, delta, alpha, kk, family=fam, mechanism=mechanism)


def _one_run_tests(scores, inserted, alpha: float, method: str, k: int, *, rule: str | None,
                   search: GuessSearch, family: str,
                   mechanism: DPSGDCurve | None) -> tuple[str, str, int, list[tuple[int, int, int, float]]]:
    """What :func:`best_one_run_epsilon` and :func:`one_run_falsifies` both search: the method,
    the family, k and one test ``(m, r, v, level)`` per guess count of ``search``, the guesses
    chosen by ``rule`` (None: :func:`default_guess_rule` of k)."""
    name, kk, fam = _check_method(method, k, family, mechanism)
    a = check_probability(alpha, "alpha")
    guess = GUESS_RULES[check_choice(default_guess_rule(kk) if rule is None else rule, "rule", GUESS_RULES)]
    if guess.kary != (kk > 2):
        fits = [n for n, g in GUESS_RULES.items() if g.kary == (kk > 2)]
        raise ParameterError("rule", rule, " or ".join(fits) + f" (the rules for k = {kk})")
    if guess.kary:
        s2 = np.asarray(scores, dtype=float)
        if s2.ndim != 2 or s2.shape[1] != kk:
            raise ParameterError("scores", describe(s2), f"an (m, k = {kk}) array")
    m, count = guess.counter(scores, inserted)
    rs = search.counts(m)
    level = search.level(a, len(rs))
    return name, fam, kk, [(m, r, count(r), level) for r in rs]


def best_one_run_epsilon(
    scores,
    inserted,
    delta: float,
    alpha: float = 0.05,
    method: str = "steinke",
    k: int = 2,
    *,
    rule: str | None = None,
    search: GuessSearch = DEFAULT_SEARCH,
    family: str = "dp",
    mechanism: DPSGDCurve | None = None,
) -> float:
    """Largest one-run epsilon bound over the guess counts of ``search``, as in the papers' experiments.

    For each guess count ``r`` of ``search`` (:class:`GuessSearch`; by default
    :func:`default_guess_grid`, Bonferroni-corrected, so the reported bound holds at confidence
    ``1 - alpha``) the guesses are chosen from the scores by ``rule`` (a name of
    :data:`GUESS_RULES`; by default ``"top-bottom"`` for ``k = 2``, where ``scores`` is (m,)
    and ``inserted`` the bits, and ``"top-value"`` for ``k > 2``, where ``scores`` is (m, k)
    and ``inserted`` the true values' indices) and the bound of ``method`` is computed.
    ``family`` and ``mechanism`` choose the curve the ``"mahloujifar"`` method tests
    (:func:`fdp_epsilon`).
    """
    name, fam, kk, tests = _one_run_tests(scores, inserted, alpha, method, k, rule=rule, search=search,
                                          family=family, mechanism=mechanism)
    d = _check_delta(delta, allow_zero=(name == "steinke"))
    if name == "steinke":
        return max(steinke_epsilon(m, r, v, d, level) for m, r, v, level in tests)
    if fam == "dpsgd":
        return _dpsgd_epsilon(tests, d, kk, mechanism)
    return max(fdp_epsilon(m, r, v, d, level, kk, family=fam) for m, r, v, level in tests)


@functools.lru_cache(maxsize=1 << 16)
def _falsified(method: str, family: str, m: int, r: int, v: int, level: float, eps: float, delta: float,
               k: int) -> bool:
    """Whether one test ``(m, r, v)`` at ``level`` rejects the claim (eps, delta) (memoised: audits
    of one size share their counts)."""
    return _margin(method, family, m, r, v, level, eps, delta, k) > 0


def one_run_falsifies(scores, inserted, epsilon: float, delta: float, alpha: float = 0.05, method: str = "steinke",
                      k: int = 2, *, rule: str | None = None, search: GuessSearch = DEFAULT_SEARCH,
                      family: str = "dp") -> bool:
    """Whether the audit falsifies "the training is (``epsilon``, ``delta``)-DP" (for ``family``
    ``"gdp"``: mu-GDP at that (eps, delta)) at confidence ``1 - alpha``: whether some guess
    count's test of :func:`best_one_run_epsilon` rejects it, that is, whether that bound
    exceeds ``epsilon`` (falsification is monotone in epsilon). One test per guess count instead
    of a root search each, so a simulation can check thousands of audits against a mechanism's
    true epsilon; arguments as :func:`best_one_run_epsilon` (family ``"dpsgd"`` claims a noise
    multiplier, not an epsilon: not here)."""
    if family == "dpsgd":
        raise ParameterError("family", family, "dp or gdp (a DP-SGD claim is a noise multiplier)")
    name, fam, kk, tests = _one_run_tests(scores, inserted, alpha, method, k, rule=rule, search=search,
                                          family=family, mechanism=None)
    d = _check_delta(delta, allow_zero=(name == "steinke"))
    e = float(epsilon)
    if not (math.isfinite(e) and e >= 0):
        raise ParameterError("epsilon", epsilon, "a finite number >= 0")
    return any(_falsified(name, fam, m, r, v, level, e, d, kk) for m, r, v, level in tests)
