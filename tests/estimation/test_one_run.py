"""One-run audit estimators (subaudit.estimation.one_run): published values, jax_privacy's own functions,
exhaustive enumeration, closed forms, monotonicity and validity checks."""

from __future__ import annotations

import itertools
import math

import numpy as np
import pytest
from scipy import integrate, optimize, special, stats

from subaudit.estimation import one_run
from subaudit.estimation.guesses import GuessSearch, default_guess_grid, guesses_from_scores
from subaudit.estimation.one_run import (
    ONE_RUN_METHODS,
    best_one_run_epsilon,
    fdp_epsilon,
    one_run_epsilon,
    steinke_epsilon,
    steinke_p_value,
)
from subaudit.validation import ParameterError



# ---------------------------------------------------------------------------
# independent helpers
# ---------------------------------------------------------------------------

def gdp_delta(mu: float, eps: float) -> float:
    """delta(eps) of mu-GDP (Dong, Roth & Su, Cor. 2.13), closed form."""
    return float(stats.norm.cdf(-eps / mu + mu / 2) - math.exp(eps) * stats.norm.cdf(-eps / mu - mu / 2))


def eps_of_mu(mu: float, delta: float) -> float:
    """The eps at which mu-GDP has the given delta, by bisection on the closed form."""
    return float(optimize.brentq(lambda e: gdp_delta(mu, e) - delta, 0.0, 200.0, xtol=1e-13))


def paper_p_value(m: int, r: int, v: int, eps: float, delta: float) -> float:
    """``p_value_DP_audit`` of Steinke et al.'s appendix: a running pmf sum, not survival functions."""
    q = 1 / (1 + math.exp(-eps))
    beta = stats.binom.sf(v - 1, r, q)
    alpha = 0.0
    total = 0.0
    for i in range(1, v + 1):
        total += stats.binom.pmf(v - i, r, q)
        if total > i * alpha:
            alpha = total / i
    return min(beta + alpha * delta * 2 * m, 1.0)


# ---------------------------------------------------------------------------
# published worked values
# ---------------------------------------------------------------------------

def test_published_values():
    assert abs(steinke_epsilon(1000, 1000, 800, 0.0, 0.05) - 1.254330) < 1e-5
    assert abs(fdp_epsilon(1000, 1000, 800, 1e-5, 0.05, k=2, family="gdp") - 2.333243) < 1e-5


def test_registry():
    assert ONE_RUN_METHODS["steinke"] is steinke_epsilon
    assert ONE_RUN_METHODS["mahloujifar"] is fdp_epsilon
    # the mu-GDP test claims more than any (eps, delta) test of the same counts
    assert fdp_epsilon(1000, 1000, 800, 1e-5, family="gdp") > 1.5 * fdp_epsilon(1000, 1000, 800, 1e-5)


# ---------------------------------------------------------------------------
# jax_privacy's own functions
# ---------------------------------------------------------------------------

# Outputs of jax_privacy's own _epsilon_one_run / _epsilon_one_run_fdp (google-deepmind/jax_privacy
# jax_privacy/auditing.py, commit 8967688c), pinned: (m, r, v, delta, alpha, jax_privacy's epsilon)
STEINKE_JAX = [
    (1_000, 1_000, 800, 0.0, 0.05, 1.254330356085515),
    (1_000, 1_000, 800, 1e-05, 0.05, 1.2539840913064186),
    (1_000, 1_000, 600, 1e-05, 0.05, 0.2972269575896597),
    (1_000, 200, 180, 1e-05, 0.05, 1.796285070718516),
    (1_000, 100, 100, 0.001, 0.05, 0.8090137853425662),
    (100, 100, 90, 0.0001, 0.01, 1.4273118526978308),
    (100, 10, 10, 0.01, 0.1, 0.0),
    (10_000, 2_000, 1_700, 1e-05, 0.05, 1.6282751987560538),
    (10_000, 10_000, 5_600, 1e-06, 0.05, 0.20781307782681702),
    (100_000, 1_000, 990, 1e-05, 0.05, 3.215049918496379),
    (1_000_000, 1_000, 980, 1e-05, 0.05, 0.4851487201269781),
    (1_000_000, 1_000, 980, 0.0, 0.05, 3.5135150614748727),
]

FDP_JAX = [
    (1_000, 1_000, 800, 1e-05, 0.05, 2.3332435930207667),
    (1_000, 1_000, 600, 1e-05, 0.05, 0.5835403679239116),
    (1_000, 200, 180, 1e-05, 0.05, 2.9012429233094306),
    (1_000, 100, 100, 0.001, 0.05, 4.043765679294901),
    (1_000, 1_000, 1_000, 1e-05, 0.05, 12.334570155595598),
    (100, 100, 90, 0.0001, 0.01, 2.312732367363992),
    (100, 10, 10, 0.01, 0.1, 1.0370628203598857),
    (10_000, 2_000, 1_700, 1e-05, 0.05, 2.358008122007446),
    (10_000, 10_000, 5_600, 1e-06, 0.05, 0.40852865054396753),
    (100_000, 1_000, 990, 1e-05, 0.05, 4.856768779809404),
]


def test_steinke_agrees_with_jax_privacy():
    for m, r, v, delta, alpha, theirs in STEINKE_JAX:
        ours = steinke_epsilon(m, r, v, delta, alpha)
        assert ours == pytest.approx(theirs, abs=1e-5), (m, r, v, delta, alpha, ours, theirs)
    assert sum(c[-1] > 0.3 for c in STEINKE_JAX) >= 8  # not a grid of zeros


def test_fdp_agrees_with_jax_privacy():
    for m, r, v, delta, alpha, theirs in FDP_JAX:
        ours = fdp_epsilon(m, r, v, delta, alpha, k=2, family="gdp")  # jax_privacy tests mu-GDP
        assert ours == pytest.approx(theirs, abs=1e-5), (m, r, v, delta, alpha, ours, theirs)
# ---------------------------------------------------------------------------
# exhaustive enumeration and closed forms
# ---------------------------------------------------------------------------

def enumerated_tail(r: int, v: int, eps: float) -> float:
    """P[>= v of r guesses correct], each correct w.p. e^eps/(1+e^eps): sum over all 2^r outcomes."""
    q = math.exp(eps) / (1 + math.exp(eps))
    total = 0.0
    for outcome in itertools.product((0, 1), repeat=r):
        c = sum(outcome)
        if c >= v:
            total += q**c * (1 - q) ** (r - c)
    return total


@pytest.mark.parametrize("alpha", [0.05, 0.2, 0.5])
def test_steinke_exhaustive_small(alpha):
    r = m = 6
    crossings = 0
    for v in range(0, r + 1):
        eps = steinke_epsilon(m, r, v, 0.0, alpha)
        if enumerated_tail(r, v, 0.0) > alpha:
            assert eps == 0.0, (v, eps)
            continue
        crossings += 1
        assert enumerated_tail(r, v, eps) == pytest.approx(alpha, abs=1e-9)
        assert enumerated_tail(r, v, eps - 1e-6) < alpha < enumerated_tail(r, v, eps + 1e-6)
        assert steinke_p_value(m, r, v, eps, 0.0) == pytest.approx(enumerated_tail(r, v, eps), abs=1e-12)
    assert crossings >= 1


@pytest.mark.parametrize("m, r, v", [(1000, 1000, 800), (1_000_000, 1_000, 980), (5000, 300, 260)])
def test_steinke_delta_term_matches_paper_appendix(m, r, v):
    """At the reported eps the appendix's p-value (pmf running sum, 2 m delta) equals alpha."""
    delta, alpha = 1e-5, 0.05
    eps = steinke_epsilon(m, r, v, delta, alpha)
    assert eps > 0
    assert paper_p_value(m, r, v, eps, delta) == pytest.approx(alpha, abs=1e-8)
    assert paper_p_value(m, r, v, eps + 1e-4, delta) > alpha
    assert steinke_p_value(m, r, v, eps, delta) == pytest.approx(paper_p_value(m, r, v, eps, delta), abs=1e-10)


@pytest.mark.parametrize("k, alpha", [(2, 0.9), (2, 0.7), (3, 0.9), (5, 0.9), (50, 0.05), (100, 0.05)])
def test_fdp_single_canary_closed_form(k, alpha):
    """m = r = v = 1: a correct guess falsifies mu-GDP iff (k-1) Phi(Phi^-1(alpha) - mu) > 1 - alpha,
    so the bound is the eps of mu = Phi^-1(alpha) - Phi^-1((1 - alpha)/(k - 1))."""
    delta = 1e-5
    mu = special.ndtri(alpha) - special.ndtri((1 - alpha) / (k - 1))
    assert mu > 0
    assert fdp_epsilon(1, 1, 1, delta, alpha, k, family="gdp") == pytest.approx(eps_of_mu(mu, delta), abs=1e-6)


@pytest.mark.parametrize("k, mu0", [(3, 1.0), (3, 2.0), (5, 1.0)])
def test_fdp_kary_valid_for_one_hot_gaussian(k, mu0):
    """The one-hot Gaussian mechanism (value j -> mu0/sqrt(2) e_j + N(0, I)) is mu0-GDP; its argmax guess
    is right w.p. P_s.  Below alpha = P_s one correct guess must not falsify mu0 (a bound using k instead
    of k - 1 would)."""
    delta = 1e-5
    p_s = integrate.quad(lambda z: stats.norm.pdf(z) * special.ndtr(z + mu0 / math.sqrt(2)) ** (k - 1),
                         -np.inf, np.inf)[0]
    eps0 = eps_of_mu(mu0, delta)
    assert fdp_epsilon(1, 1, 1, delta, p_s - 1e-3, k, family="gdp") <= eps0
    assert fdp_epsilon(1, 1, 1, delta, min(p_s + 0.1, 0.999), k, family="gdp") > 0


# ---------------------------------------------------------------------------
# monotonicity, chance level, the m delta penalty, NaN
# ---------------------------------------------------------------------------

@pytest.mark.parametrize("method", ["steinke", "mahloujifar"])
def test_monotone_in_correct_and_alpha(method):
    fn = ONE_RUN_METHODS[method]
    m = r = 500
    eps = [fn(m, r, v, 1e-5, 0.05) for v in range(250, 501, 25)]
    assert all(b >= a for a, b in zip(eps, eps[1:]))
    positive = [e for e in eps if e > 0]
    assert len(positive) >= 8 and all(b > a for a, b in zip(positive, positive[1:]))
    by_alpha = [fn(m, r, 400, 1e-5, a) for a in (0.001, 0.01, 0.05, 0.2, 0.5)]
    assert all(b > a for a, b in zip(by_alpha, by_alpha[1:]))


def test_fdp_monotone_in_k():
    eps = [fdp_epsilon(1000, 1000, 600, 1e-5, 0.05, k) for k in (2, 3, 4, 10, 100)]
    assert all(b > a for a, b in zip(eps, eps[1:])), eps


def test_zero_at_chance_level():
    for m, r in [(1000, 1000), (1000, 400), (10_000, 10_000)]:
        assert steinke_epsilon(m, r, r // 2, 1e-5) == 0.0
        assert steinke_epsilon(m, r, r // 2, 0.0) == 0.0
        for k in (2, 3, 4, 10):
            assert fdp_epsilon(m, r, r // k, 1e-5, 0.05, k) == 0.0
        assert fdp_epsilon(m, r, r // 10 + r // 20, 1e-5, 0.05, 10) > 0  # 15% > 10% chance is not


def test_steinke_m_delta_penalty_collapses():
    """r = 1,000 guesses, 980 correct: 3.51 with delta = 0 but 0.49 when the 2 m delta term has m = 10^6."""
    assert steinke_epsilon(1_000_000, 1000, 980, 0.0) == pytest.approx(3.5135, abs=1e-3)
    assert steinke_epsilon(1_000, 1000, 980, 0.0) == steinke_epsilon(1_000_000, 1000, 980, 0.0)
    assert steinke_epsilon(1_000_000, 1000, 980, 1e-5) == pytest.approx(0.4851, abs=1e-3)
    assert steinke_epsilon(1_000, 1000, 980, 1e-5) > 3.4  # 2 m delta = 0.02: little loss


def test_no_nan_on_grid():
    values = []
    for m in (1, 10, 1000):
        for r in sorted({0, 1, m}):
            for v in sorted({0, 1, r // 2, r} & set(range(r + 1))):
                for delta in (1e-10, 0.5):
                    for alpha in (0.01, 0.99):
                        values.append(steinke_epsilon(m, r, v, delta, alpha))
                        for k in (2, 1000):
                            values.append(fdp_epsilon(m, r, v, delta, alpha, k))
    arr = np.array(values)
    assert np.all(np.isfinite(arr)) and np.all(arr >= 0)
    assert np.count_nonzero(arr) > 20
    # the clamp: with k = 1000 the running value reaches 1 (Phi^-1 would give NaN past it)
    for mu in (0.1, 1.0, 3.0, 3.85, 4.0, 10.0):
        assert math.isfinite(one_run._fdp_margin(1000, 1000, 1000, 0.05, one_run._gdp_fbar_inv(mu), 1000))


# ---------------------------------------------------------------------------
# validation
# ---------------------------------------------------------------------------

@pytest.mark.parametrize("args, name", [
    ((0, 0, 0, 1e-5), "canaries"),
    ((10, 11, 0, 1e-5), "guesses"),
    ((10, 5, 6, 1e-5), "correct"),
    ((10, -1, 0, 1e-5), "guesses"),
    ((10, 5, 2.5, 1e-5), "correct"),
    ((10, 5, 3, -1e-5), "delta"),
    ((10, 5, 3, 1.0), "delta"),
    ((10, 5, 3, float("nan")), "delta"),
])
def test_parameter_errors(args, name):
    for fn in (steinke_epsilon, fdp_epsilon, lambda *a: fdp_epsilon(*a, family="gdp")):
        with pytest.raises(ParameterError) as err:
            fn(*args)
        assert err.value.name == name


def test_parameter_errors_specific():
    with pytest.raises(ParameterError) as err:
        fdp_epsilon(10, 5, 3, 0.0)  # the f-DP audit needs delta > 0
    assert err.value.name == "delta"
    assert steinke_epsilon(10, 5, 3, 0.0) == 0.0  # delta = 0 is fine for Steinke
    for bad in (0.0, 1.0, 1.5):
        with pytest.raises(ParameterError) as err:
            steinke_epsilon(10, 5, 3, 1e-5, bad)
        assert err.value.name == "alpha"
    with pytest.raises(ParameterError) as err:
        fdp_epsilon(10, 5, 3, 1e-5, 0.05, k=1)
    assert err.value.name == "k"
    with pytest.raises(ParameterError) as err:
        best_one_run_epsilon(np.zeros(4), np.zeros(4, bool), 1e-5, method="nope")
    assert err.value.name == "method"
    with pytest.raises(ParameterError) as err:
        best_one_run_epsilon(np.zeros(4), np.zeros(4, bool), 1e-5, method="steinke", k=3)
    assert err.value.name == "k"


# ---------------------------------------------------------------------------
# guesses from scores and the search over guess counts
# ---------------------------------------------------------------------------

def test_best_one_run_is_bonferroni_max_over_grid():
    rng = np.random.default_rng(0)
    m = 2000
    inserted = rng.random(m) < 0.5
    scores = 1.5 * inserted + rng.standard_normal(m)
    grid = default_guess_grid(m)
    assert grid[0] == 20 and grid[-1] == m and len(grid) == 11
    for method in ("steinke", "mahloujifar"):
        manual = max(ONE_RUN_METHODS[method](m, *guesses_from_scores(scores, inserted, r), 1e-5, 0.05 / len(grid))
                     for r in grid)
        corrected = best_one_run_epsilon(scores, inserted, 1e-5, 0.05, method)
        uncorrected = best_one_run_epsilon(scores, inserted, 1e-5, 0.05, method, search=GuessSearch(bonferroni=False))
        assert corrected == pytest.approx(manual, abs=1e-12)
        assert 0 < corrected < uncorrected
        one_sided = best_one_run_epsilon(scores, inserted, 1e-5, 0.05, method, rule="top")
        assert one_sided > 0 and one_sided != corrected
        manual = max(ONE_RUN_METHODS[method](m, *guesses_from_scores(scores, inserted, r, one_sided=True), 1e-5, 0.05)
                     for r in (5, 50, 500))
        assert best_one_run_epsilon(scores, inserted, 1e-5, 0.05, method, rule="top",
                                    search=GuessSearch(grid=(500, 5, 50), bonferroni=False)) == manual


def test_one_run_epsilon_is_the_methods_bound_and_checks_the_combination():
    assert one_run_epsilon(1000, 1000, 800, 1e-5, 0.05, "steinke") == steinke_epsilon(1000, 1000, 800, 1e-5, 0.05)
    assert one_run_epsilon(1000, 600, 500, 1e-5, 0.05, "mahloujifar", 3, family="gdp") == \
        fdp_epsilon(1000, 600, 500, 1e-5, 0.05, 3, family="gdp")
    for kwargs, name in (({"k": 3}, "k"), ({"family": "gdp"}, "family"), ({"method": "nope"}, "method")):
        with pytest.raises(ParameterError) as err:
            one_run_epsilon(100, 10, 9, 1e-5, 0.05, **{"method": "steinke", **kwargs})
        assert err.value.name == name


def test_best_one_run_valid_for_gaussian_scores():
    """Scores mu * inserted + N(0, 1) come from a mu-GDP mechanism: the bound stays below its eps."""
    delta = 1e-5
    for mu, seed in [(1.0, 1), (2.0, 2), (3.0, 3), (4.0, 4)]:
        rng = np.random.default_rng(seed)
        m = 1000
        inserted = rng.random(m) < 0.5
        scores = mu * inserted + rng.standard_normal(m)
        true_eps = eps_of_mu(mu, delta)
        for method, family in (("steinke", "dp"), ("mahloujifar", "dp"), ("mahloujifar", "gdp")):
            est = best_one_run_epsilon(scores, inserted, delta, 0.05, method, family=family)
            assert est <= true_eps, (mu, method, est, true_eps)
            if mu >= 3:
                assert est > 1.0  # power: one-run bounds are loose at large eps, but not vacuous
    # k-ary: one-hot Gaussian, mu0-GDP under a change of one canary's value
    k, mu0, m = 10, 4.0, 1000
    rng = np.random.default_rng(7)
    truth = rng.integers(0, k, m)
    scores = mu0 / math.sqrt(2) * np.eye(k)[truth] + rng.standard_normal((m, k))
    for family in ("dp", "gdp"):
        est = best_one_run_epsilon(scores, truth, delta, 0.05, "mahloujifar", k=k, family=family)
        assert 0 < est <= eps_of_mu(mu0, delta)


@pytest.mark.parametrize("r", [1000, 30000, 400000])
@pytest.mark.parametrize("eps", [0.2, 1.0, 3.0])
def test_steinke_delta_term_search_equals_every_window(monkeypatch, r, eps):
    """Beyond 2^20 right guesses the delta term's max over i = 1..v is found by a search (not
    an array of v terms): forced on here, it equals the max over every i, including peaks
    inside (v above the binomial's mode) and far tails where the pmf underflows."""
    q = float(special.expit(eps))
    sd = math.sqrt(r * q * (1 - q))
    interior = 0
    for k in (-3, 0, 0.5, 2, 5, 20, 40, 80):
        v = int(min(r, max(1, r * q + k * sd)))
        beta = float(stats.binom.sf(v - 1, r, q))
        i = np.arange(1, v + 1)
        every = (stats.binom.sf(v - i - 1, r, q) - beta) / i
        interior += 1 < int(np.argmax(every)) + 1 < v
        monkeypatch.setattr(one_run, "_EXACT_WINDOWS", 0)
        assert one_run._steinke_excess(r, q, v, beta) == float(every.max()), (v, k)
        monkeypatch.undo()
    assert interior >= 2


def test_a_billion_canaries_take_bounded_memory_and_time(tmp_path):
    """`one-run --method steinke` at 1e9 canaries, guesses and right guesses needed 24 GB (an
    array of v terms) and was killed; under a 3 GB address-space limit it now answers in
    seconds, and for a billion-guess audit at 52% right too."""
    import json
    import resource
    import subprocess
    import sys
    import time
    from pathlib import Path

    def limit() -> None:
        resource.setrlimit(resource.RLIMIT_AS, (3 * 2**30, 3 * 2**30))

    exe = Path(sys.executable).parent / "subaudit"
    for correct, low, high in ((10**9, 7.8, 7.9), (520_000_000, 0.07, 0.09)):
        start = time.monotonic()
        proc = subprocess.run([exe, "one-run", "--method", "steinke", "--canaries", str(10**9), "--guesses",
                               str(10**9), "--correct", str(correct), "--delta", "1e-5", "--json"],
                              capture_output=True, text=True, preexec_fn=limit, timeout=120)
        assert proc.returncode == 0, proc.stderr[-2000:]
        assert low < float(json.loads(proc.stdout)["epsilon"]) < high
        assert time.monotonic() - start < 60


@pytest.mark.parametrize("m", [50, 1000, 10_000, 100_000])
@pytest.mark.parametrize("k", [2, 16])
def test_perfect_guess_limit_is_attained_by_the_fdp_test(m, k):
    """The closed-form limit of perfect guessing is what the f-DP recursion reports for r = v = m
    (one pre-set test), and it is the epsilon at which the mechanism that reveals every slot with
    probability delta, else answers by k-ary randomised response, guesses all m right with
    probability alpha; it grows by about ln 10 a decade of m, and k-ary slots add ln(k - 1)."""
    delta, alpha = 1e-5, 0.05
    cap = one_run.perfect_guess_limit(m, delta, alpha, k)
    assert fdp_epsilon(m, m, m, delta, alpha, k) == pytest.approx(cap, abs=1e-6)
    right = math.exp(cap) / (math.exp(cap) + k - 1)      # k-ary randomised response at eps = cap
    assert (1 - delta) * right ** m + delta == pytest.approx(alpha, rel=1e-9)
    assert cap == pytest.approx(math.log(m / math.log(1 / alpha)) + math.log(k - 1), abs=0.1 if m > 100 else 0.5)
    assert one_run.perfect_guess_limit(m, delta, delta, k) == 0.0


def test_steinke_bound_falls_where_the_limit_keeps_growing():
    """Its 2 m delta term: perfect guesses of one pre-set test give less at m = 10^6 than at
    10^5 (the search over guess counts peaks near 10^4: the docs' table), while the limit of any
    valid test grows by ln 10 a decade."""
    steinke = {m: steinke_epsilon(m, m, m, 1e-5) for m in (10**5, 10**6)}
    assert steinke[10**6] < steinke[10**5] < one_run.perfect_guess_limit(10**5, 1e-5) - 2
    assert one_run.perfect_guess_limit(10**6, 1e-5) - one_run.perfect_guess_limit(10**5, 1e-5) == pytest.approx(
        math.log(10), abs=0.01)


def test_the_dpsgd_bound_lies_on_the_falsified_side_of_its_lattice():
    """The DP-SGD bound is the epsilon of a noise multiplier 2^(j/256) whose curve the audit
    falsifies while that of 2^((j-1)/256) stands (checked here by the curve's own test), so it is
    valid and within 0.3% in sigma of the exact search's."""
    from subaudit.accounting import epsilon

    m, r, v, q, steps = 2000, 600, 560, 0.1, 50
    curve = one_run.DPSGDCurve(q, steps, "add-remove")
    bound = fdp_epsilon(m, r, v, 1e-5, family="dpsgd", mechanism=curve)

    def falsified(sigma: float) -> bool:
        inv = one_run._profile_fbar_inv(*one_run._dpsgd_profile(sigma, q, steps, "add-remove"))
        return one_run._fdp_margin(m, r, v, 0.05, inv, 2) > 0

    def eps(j: int) -> float:
        return epsilon(2.0 ** (j / 256), q, steps, 1e-5, "add-remove").epsilon_lower

    lo, hi = -4 * 256, 6 * 256   # the lattice point whose epsilon the bound is (epsilon falls as sigma grows)
    while hi - lo > 1:
        mid = (lo + hi) // 2
        lo, hi = (mid, hi) if eps(mid) > bound else (lo, mid)
    assert bound == eps(hi) > 0
    assert falsified(2.0 ** (hi / 256)) and not falsified(2.0 ** ((hi - 1) / 256))
