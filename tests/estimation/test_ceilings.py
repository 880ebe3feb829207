"""Tests of subaudit.estimation.ceilings: the final-iterate ceiling of the S1 worst-case canary.

Every number is checked against a computation that shares no code with the module:
dp-accounting's privacy loss distributions (add/remove, q = 1), direct quadrature of the
hockey-stick integral (substitute), and subaudit.accounting's composition (an upper bound
everywhere, and equal to the ceiling at q = 1, where g_T is a sufficient statistic)."""

from __future__ import annotations

import logging
import math
import time

import numpy as np
import pytest
from dp_accounting.pld import privacy_loss_distribution as pld
from dp_accounting.pld import privacy_loss_mechanism as plm
from scipy import integrate, stats

from subaudit import accounting
from subaudit.estimation import ceilings
from subaudit.estimation.ceilings import (
    final_iterate_curve,
    final_iterate_epsilon,
    final_iterate_hockey_stick,
)
from subaudit.schedule import checkpoints
from subaudit.validation import ParameterError

DELTA = 1e-5

# dp-accounting logs a warning per optimistic PLD; quiet it (only pessimistic ones are built)
logging.getLogger().setLevel(logging.ERROR)


# --------------------------------------------------------------------------- references


def _binom(t: int, q: float) -> tuple[np.ndarray, np.ndarray]:
    """Support and pmf of Binomial(t, q), mass > 0 in float64."""
    k = np.arange(t + 1, dtype=np.float64)
    w = stats.binom.pmf(np.arange(t + 1), t, q)
    keep = w > 0.0
    return k[keep], w[keep]


def _quad_hockey(sigma: float, q: float, t: int, eps: float, adjacency: str, reverse: bool = False) -> float:
    """int max(0, p - e^eps q) dx by adaptive quadrature (reverse: p and q swapped), with
    p, q binomial mixtures of normal pdfs; integrated piecewise over sd-wide pieces."""
    k, w = _binom(t, q)
    sd = math.sqrt(t) * sigma
    norm = 1.0 / (sd * math.sqrt(2.0 * math.pi))

    def mix(x: float, sign: float) -> float:
        return norm * float(np.dot(w, np.exp(-0.5 * ((x - sign * k) / sd) ** 2)))

    def dens_q(x: float) -> float:
        if adjacency == "substitute":
            return mix(x, -1.0)
        return norm * math.exp(-0.5 * (x / sd) ** 2)

    if reverse:
        def f(x: float) -> float:
            return max(0.0, dens_q(x) - math.exp(eps) * mix(x, 1.0))
    else:
        def f(x: float) -> float:
            return max(0.0, mix(x, 1.0) - math.exp(eps) * dens_q(x))

    edges = np.arange(-t - 40.0 * sd, t + 40.0 * sd + sd, sd)
    total = 0.0
    for a, b in zip(edges[:-1], edges[1:]):
        val, _ = integrate.quad(f, a, b, epsabs=0.0, epsrel=1e-10, limit=200)
        total += val
    return total


def _pld_mixture_epsilon(sigma: float, q: float, t: int, delta: float) -> float:
    """dp-accounting: mixture of N(k, t sigma^2), k ~ Binom(t, q), vs N(0, t sigma^2), both
    directions (its REMOVE and ADD PMFs), connect-the-dots, pessimistic (an upper bound)."""
    k, w = _binom(t, q)
    keep = w > 1e-30  # dropping mass < 1e-27 in all moves H by far less than 1e-3 delta
    w = w[keep] / w[keep].sum()
    dist = pld.from_mixture_gaussian_mechanism(
        math.sqrt(t) * sigma, k[keep].tolist(), w.tolist(),
        pessimistic_estimate=True, value_discretization_interval=1e-2,
    )
    return float(dist.get_epsilon_for_delta(delta))


def _pld_gaussian_epsilon(sigma: float, t: int, delta: float, sensitivity: float) -> float:
    """dp-accounting Gaussian mechanism: t steps of N(0, sigma^2) = one of std sigma / sqrt(t)."""
    dist = pld.from_gaussian_mechanism(
        sigma / math.sqrt(t), sensitivity=sensitivity, value_discretization_interval=1e-3
    )
    return float(dist.get_epsilon_for_delta(delta))


# --------------------------------------------------------------------------- add/remove


@pytest.mark.parametrize(
    "sigma,q,t",
    [(1.0, 0.25, 10), (2.0, 0.25, 100), (1.0, 0.0625, 100), (0.5, 0.01, 100), (1.0, 0.01, 500)],
)
def test_add_remove_matches_dp_accounting_pld(sigma, q, t):
    ours = final_iterate_epsilon(sigma, q, t, DELTA, "add-remove")
    ref = _pld_mixture_epsilon(sigma, q, t, DELTA)
    print(f"add-remove sigma={sigma} q={q} t={t}: ours {ours:.8f} dp-accounting(upper) {ref:.8f} "
          f"rel {ref / ours - 1:.2e}")
    assert ours > 0.5  # an absolute 1e-2 loss mesh is then well within 1e-3 relative
    assert ours <= ref * (1.0 + 1e-9)  # pessimistic PLD is an upper bound
    assert ref <= ours * (1.0 + 1e-3)


@pytest.mark.parametrize("sigma,q,t", [(1.0, 0.25, 10), (0.7, 0.0625, 50), (1.0, 0.01, 500)])
def test_add_remove_each_direction_by_quadrature(sigma, q, t):
    """H(P||Q) and H(Q||P) separately against quadrature, at eps = 0.1, eps*/2, eps*.
    (dp-accounting's own closed-form ``get_delta_for_epsilon`` is not used: its
    ``inverse_privacy_losses`` misses the threshold for mixtures with many components,
    e.g. it inverts L = 0.1 to a point where L = 0.133 at sigma 0.7, q 1/16, t 50.)"""
    eps_star = final_iterate_epsilon(sigma, q, t, DELTA, "add-remove")
    for eps in (0.1, 0.5 * eps_star, eps_star):
        fwd, rev = final_iterate_hockey_stick(sigma, q, t, eps, "add-remove")
        assert _quad_hockey(sigma, q, t, eps, "add-remove") == pytest.approx(fwd, rel=1e-6)
        assert _quad_hockey(sigma, q, t, eps, "add-remove", reverse=True) == pytest.approx(rev, rel=1e-6)
        assert fwd != pytest.approx(rev, rel=1e-2)  # the pair is not symmetric
    assert max(final_iterate_hockey_stick(sigma, q, t, eps_star, "add-remove")) == pytest.approx(DELTA, rel=1e-9)


@pytest.mark.parametrize("sigma,q,t", [(0.7, 0.0625, 50), (1.0, 0.01, 500)])
def test_add_remove_loss_matches_dp_accounting(sigma, q, t):
    """The privacy loss behind the threshold, against dp-accounting's (its REMOVE pair is
    the mirror image x -> -x of ours)."""
    k, w = _binom(t, q)
    remove = plm.MixtureGaussianPrivacyLoss(
        math.sqrt(t) * sigma, k.tolist(), w.tolist(), adjacency_type=plm.AdjacencyType.REMOVE
    )
    pair = ceilings._Pair(sigma, q, t, "add-remove")
    for x in (-30.0, -3.0, 0.0, 2.5, 10.0, 40.0):
        assert pair.loss(x) == pytest.approx(remove.privacy_loss(-x), rel=1e-9, abs=1e-12)
    for eps in (0.1, 1.0, 3.0):  # dp-accounting's loss at our threshold is eps
        assert remove.privacy_loss(-pair.threshold(eps)) == pytest.approx(eps, rel=1e-9)


# --------------------------------------------------------------------------- substitute


@pytest.mark.parametrize(
    "sigma,q,t,delta",
    [
        (1.0, 0.25, 10, DELTA),
        (3.0, 0.5, 50, DELTA),
        (2.0, 0.0625, 100, DELTA),
        (1.0, 0.01, 500, DELTA),
        (1.5, 0.0625, 200, 1e-10),
    ],
)
def test_substitute_by_quadrature(sigma, q, t, delta):
    eps = final_iterate_epsilon(sigma, q, t, delta, "substitute")
    h_fwd = _quad_hockey(sigma, q, t, eps, "substitute")
    h_rev = _quad_hockey(sigma, q, t, eps, "substitute", reverse=True)
    below = _quad_hockey(sigma, q, t, eps * (1.0 - 1e-3), "substitute")
    print(f"substitute sigma={sigma} q={q} t={t} delta={delta:g}: eps {eps:.6f} quad H/delta - 1 "
          f"{h_fwd / delta - 1:.1e} (reverse {h_rev / delta - 1:.1e}); at eps(1-1e-3) {below / delta:.6f}")
    assert h_fwd == pytest.approx(delta, rel=1e-7)
    assert h_rev == pytest.approx(delta, rel=1e-7)  # mirror symmetry, independently
    assert below > delta * (1.0 + 1e-3)


@pytest.mark.parametrize("sigma,q,t", [(1.0, 0.25, 10), (2.0, 0.0625, 100), (0.8, 0.01, 2500), (4.0, 1.0, 30)])
def test_substitute_directions_are_equal(sigma, q, t):
    for eps in (0.0, 0.3, 2.0, 7.0):
        fwd, rev = final_iterate_hockey_stick(sigma, q, t, eps, "substitute")
        assert fwd > 0.0
        assert rev == pytest.approx(fwd, rel=1e-9)


# --------------------------------------------------------------------------- q = 1


@pytest.mark.parametrize("sigma,t", [(1.0, 1), (3.0, 50), (10.0, 500), (40.0, 2500)])
def test_q1_gaussian_against_dp_accounting(sigma, t):
    for adjacency, sens in (("add-remove", 1.0), ("substitute", 2.0)):
        ours = final_iterate_epsilon(sigma, 1.0, t, DELTA, adjacency)
        ref = _pld_gaussian_epsilon(sigma, t, DELTA, sens)
        assert ours == pytest.approx(ref, rel=1e-6)
        # the general tail/threshold path agrees with the closed form
        assert ceilings._epsilon_numeric(sigma, 1.0, t, DELTA, adjacency) == pytest.approx(ours, rel=1e-9)


@pytest.mark.parametrize("sigma", [10.0, 30.0, 100.0])
@pytest.mark.parametrize("adjacency", ["substitute", "add-remove"])
def test_q1_equals_composition(sigma, adjacency):
    """At q = 1 the cumulative gradient is sufficient: the ceiling IS the accountant's
    epsilon, so it must lie within the accountant's error bounds."""
    res = accounting.epsilon(sigma, 1.0, 500, DELTA, adjacency)
    ours = final_iterate_epsilon(sigma, 1.0, 500, DELTA, adjacency)
    assert res.epsilon_lower <= ours <= res.epsilon
    assert ours == pytest.approx(res.epsilon_estimate, rel=1e-6)


# --------------------------------------------------------------------------- shape


@pytest.mark.parametrize("adjacency", ["substitute", "add-remove"])
def test_monotone_in_steps_and_sigma(adjacency):
    ts, eps = final_iterate_curve(1.0, 0.0625, 500, 50, DELTA, adjacency)
    assert np.all(np.diff(eps) > 0.0)
    by_sigma = [final_iterate_epsilon(s, 0.0625, 500, DELTA, adjacency) for s in (0.5, 1.0, 2.0, 4.0, 8.0)]
    assert np.all(np.diff(by_sigma) < 0.0)


def test_curve_schedule_and_values():
    ts, eps = final_iterate_curve(2.0, 0.25, 95, 20, DELTA)
    assert ts.tolist() == [20, 40, 60, 80, 95]
    assert ts.tolist() == checkpoints(95, 20).tolist()
    assert ts.dtype == np.int64 and eps.dtype == np.float64
    for t, e in zip(ts, eps):
        assert e == final_iterate_epsilon(2.0, 0.25, int(t), DELTA)
    ts, _ = final_iterate_curve(2.0, 0.25, 100, 20, DELTA, "add-remove")
    assert ts.tolist() == [20, 40, 60, 80, 100]


def test_zero_when_delta_met_at_eps_zero():
    sigma, q, t = 1e4, 0.01, 10
    for adjacency in ("substitute", "add-remove"):
        assert max(final_iterate_hockey_stick(sigma, q, t, 0.0, adjacency)) <= DELTA  # total variation
        assert final_iterate_epsilon(sigma, q, t, DELTA, adjacency) == 0.0
    assert final_iterate_epsilon(1e4, 1.0, 1, 0.5) == 0.0
    # just above: positive
    assert final_iterate_epsilon(1.0, q, t, DELTA) > 0.0


def test_fast_at_large_t_small_q():
    for adjacency in ("substitute", "add-remove"):
        t0 = time.perf_counter()
        eps = final_iterate_epsilon(0.8, 0.01, 2500, 1e-8, adjacency)
        assert time.perf_counter() - t0 < 1.0
        assert 0.0 < eps < 100.0


# --------------------------------------------------------------------------- vs accountant


#: accounting.calibrate_sigma(eps_S, q, 500, 1e-5, "substitute") for eps_S = 1, 2, 4, 8
#: (stored to keep the test fast; the test re-checks that each reaches its eps_S).
_S1_SIGMAS = {
    1.0: (166.912715, 89.197727, 48.372456, 26.85335),
    0.25: (41.725971, 22.296428, 12.085551, 6.69949),
    0.0625: (10.429628, 5.570965, 3.017271, 1.67738),
}


def test_ceiling_vs_accountant_at_s1_settings():
    """T = 500, sigma calibrated to eps_S in {1, 2, 4, 8}: the ceiling is at most the
    composed epsilon (g_T is a post-processing of the transcript) and close to it. eps_S is
    the accountant's conservative upper bound (0.05% above its estimate, hence ratios of
    0.9996 at q = 1, where the two are equal in exact arithmetic)."""
    steps = 500
    lines = []
    for q, sigmas in _S1_SIGMAS.items():
        for target, sigma in zip((1.0, 2.0, 4.0, 8.0), sigmas):
            res_s = accounting.epsilon(sigma, q, steps, DELTA, "substitute")
            eps_s = res_s.epsilon
            assert eps_s == pytest.approx(target, rel=1e-3)
            eps_ar = accounting.epsilon(sigma, q, steps, DELTA, "add-remove").epsilon
            ceil_s = final_iterate_epsilon(sigma, q, steps, DELTA, "substitute")
            ceil_ar = final_iterate_epsilon(sigma, q, steps, DELTA, "add-remove")
            lines.append(f"q={q:<6} eps_S={target:<3} sigma={sigma:9.4f}  ceiling_S/eps_S={ceil_s / eps_s:.4f} "
                         f"(/estimate {ceil_s / res_s.epsilon_estimate:.4f})  "
                         f"ceiling_AR/eps_AR={ceil_ar / eps_ar:.4f} ({ceil_ar:.4f}/{eps_ar:.4f})")
            assert ceil_s <= eps_s
            assert ceil_ar <= eps_ar
            assert ceil_s / eps_s >= 0.9
    print("\n" + "\n".join(lines))


@pytest.mark.slow
def test_calibration_of_stored_sigmas():
    """The stored sigmas are what calibrate_sigma returns (one per q, the costliest)."""
    for q, sigmas in _S1_SIGMAS.items():
        assert accounting.calibrate_sigma(8.0, q, 500, DELTA, "substitute") == pytest.approx(sigmas[-1], rel=1e-4)


def test_known_shortfall_q00625_t100_eps10():
    """The setting where an ideal two-sided canary was seen elsewhere to reach only 0.785
    eps_S (sigma calibrated there to eps_S = 10 at T = 100, q = 0.0625)."""
    sigma = 0.7599736672380748  # accounting.calibrate_sigma(10, 0.0625, 100, 1e-5, "substitute")
    eps_s = accounting.epsilon(sigma, 0.0625, 100, DELTA, "substitute").epsilon
    assert eps_s == pytest.approx(10.0, rel=1e-3)
    ratio = final_iterate_epsilon(sigma, 0.0625, 100, DELTA) / eps_s
    print(f"q=0.0625 T=100 eps_S=10: ceiling/eps_S = {ratio:.4f}")
    assert ratio == pytest.approx(0.785, abs=0.005)


# --------------------------------------------------------------------------- validation


@pytest.mark.parametrize(
    "kwargs,name",
    [
        (dict(sigma=0.0), "sigma"),
        (dict(sigma=-1.0), "sigma"),
        (dict(sigma=math.nan), "sigma"),
        (dict(q=0.0), "q"),
        (dict(q=1.5), "q"),
        (dict(steps=0), "steps"),
        (dict(steps=2.5), "steps"),
        (dict(delta=0.0), "delta"),
        (dict(delta=1.0), "delta"),
        (dict(adjacency="group"), "adjacency"),
    ],
)
def test_bad_input_names_parameter(kwargs, name):
    args = dict(sigma=1.0, q=0.1, steps=10, delta=DELTA, adjacency="substitute") | kwargs
    with pytest.raises(ParameterError) as exc:
        final_iterate_epsilon(**args)
    assert exc.value.name == name
    with pytest.raises(ParameterError) as exc:
        final_iterate_curve(every=5, **args)
    assert exc.value.name == name


def test_bad_every_and_epsilon():
    with pytest.raises(ParameterError) as exc:
        final_iterate_curve(1.0, 0.1, 10, 0, DELTA)
    assert exc.value.name == "every"
    with pytest.raises(ParameterError) as exc:
        final_iterate_hockey_stick(1.0, 0.1, 10, -0.1)
    assert exc.value.name == "epsilon"


@pytest.mark.parametrize(("steps", "every"), [(1, None), (100, None), (100, 1), (100, 7), (100, 100), (5, 9),
                                              (1000, 10)])
def test_the_cost_is_the_terms_summed_at_every_checkpoint(steps, every):
    """ceiling_terms counts the steps + 1 values of K summed at each checkpoint (from the
    schedule itself), and 0 at q = 1 (a closed form)."""
    points = [steps] if every is None else checkpoints(steps, every).tolist()
    assert ceilings.ceiling_terms(0.1, steps, every) == sum(t + 1 for t in points)
    assert ceilings.ceiling_terms(1.0, steps, every) == 0


def test_requests_out_of_reach_are_refused_before_any_work():
    """--every 1 over 1e6 steps (5e11 terms, thousands of hours) and one ceiling at 1e9 steps
    (an 8 GB array): refused at once, naming the knob and the cost; max_terms lifts the cap."""
    start = time.monotonic()
    with pytest.raises(ParameterError) as err:
        final_iterate_curve(1.0, 0.1, 10**6, 1, 1e-5)
    assert err.value.name == "every" and "500,001,500,000" in str(err.value)
    with pytest.raises(ParameterError) as err:
        final_iterate_epsilon(1.0, 0.1, 10**9, 1e-5)
    assert err.value.name == "steps" and "1,000,000,001" in str(err.value)
    assert time.monotonic() - start < 1.0
    with pytest.raises(ParameterError):
        final_iterate_epsilon(1.0, 0.1, 100, 1e-5, max_terms=100)
    assert final_iterate_epsilon(1.0, 0.1, 100, 1e-5, max_terms=101) == final_iterate_epsilon(1.0, 0.1, 100, 1e-5)
    assert final_iterate_epsilon(1.0, 1.0, 10**9, 1e-5, max_terms=1) > 0       # q = 1: closed form, free
