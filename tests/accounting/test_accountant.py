"""Tests of the public accountant (subaudit.accounting.accountant) against dp-accounting,
closed forms and published values, and of its input checks and range errors."""

from __future__ import annotations

import math

import pytest
from pld_reference import pld_epsilon

from subaudit import accounting as acc
from subaudit.accounting import (
    ADJACENCIES,
    AccountingRangeError,
    Epsilon,
    calibrate_sigma,
    epsilon,
    epsilon_over_steps,
)
from subaudit.accounting.gdp import gdp_delta, gdp_epsilon
from subaudit.validation import ParameterError


# (sigma, q, steps, delta): epsilons from about 0.5 to 40 under one or both adjacencies
GRID = [
    (100.0, 1.0, 500, 1e-5),
    (20.0, 1.0, 500, 1e-5),
    (6.0, 1.0, 500, 1e-5),
    (40.0, 0.25, 500, 1e-5),
    (8.0, 0.25, 500, 1e-5),
    (2.0, 0.25, 500, 1e-5),
    (10.0, 0.0625, 500, 1e-5),
    (2.0, 0.0625, 500, 1e-5),
    (0.9, 0.0625, 500, 1e-5),
    (0.6, 0.0625, 500, 1e-5),
    (2.0, 0.01, 2000, 1e-5),
    (0.6, 0.01, 2000, 1e-5),
    (0.45, 0.01, 2000, 1e-5),
    (1.5, 0.04, 2250, 1e-8),
    (20.0, 1.0, 500, 1e-8),
    (1.0, 0.25, 100, 1e-8),
    (0.75, 0.0625, 500, 1e-8),
    (0.6, 0.0625, 500, 1e-8),
]


@pytest.mark.parametrize("adjacency", ["add-remove", "substitute"])
@pytest.mark.parametrize("sigma,q,steps,delta", GRID)
def test_agrees_with_dp_accounting_pld(sigma, q, steps, delta, adjacency):
    ref = pld_epsilon(sigma, q, steps, delta, adjacency)
    got = epsilon(sigma, q, steps, delta, adjacency)
    assert got.epsilon == pytest.approx(ref, rel=0.01)
    # PLD's pessimistic estimate is an upper bound (up to 0.3% high at interval 1e-3 and
    # small epsilon); our point estimate sits just below it
    assert ref * (1 - 5e-3) <= got.epsilon_estimate <= ref * (1 + 5e-4)
    assert got.epsilon_lower <= got.epsilon_estimate <= got.epsilon


def test_grid_reaches_large_epsilon_and_small_delta():
    eps = [
        epsilon(0.6, 0.0625, 500, 1e-5, "substitute").epsilon,
        epsilon(0.6, 0.0625, 500, 1e-8, "add-remove").epsilon,
    ]
    assert min(eps) > 35.0  # the grid above really covers epsilon ~ 40, also at delta 1e-8


@pytest.mark.parametrize(
    "sigma,steps,delta", [(168.076, 500, 1e-5), (20.0, 500, 1e-5), (5.0, 100, 1e-5), (8.0, 500, 1e-8)]
)
@pytest.mark.parametrize("adjacency,sensitivity", [("add-remove", 1.0), ("substitute", 2.0)])
def test_q1_equals_closed_form_gaussian(sigma, steps, delta, adjacency, sensitivity):
    mu = sensitivity * math.sqrt(steps) / sigma
    exact = gdp_epsilon(mu, delta)  # closed form, itself checked against dp-accounting
    got = epsilon(sigma, 1.0, steps, delta, adjacency)
    assert got.epsilon == pytest.approx(exact, rel=1e-3)
    assert got.epsilon >= exact * (1 - 1e-6)  # upper bound really is one
    assert got.epsilon_estimate == pytest.approx(exact, rel=1e-5)
    assert gdp_delta(exact, mu) == pytest.approx(delta, rel=1e-9)


def test_public_cross_check_values():
    ar = epsilon(1.5, 0.04, 2250, 1e-5, "add-remove")
    sub = epsilon(1.5, 0.04, 2250, 1e-5, "substitute")
    assert ar.epsilon == pytest.approx(6.7774, rel=1e-3)  # Opacus' test value
    assert sub.epsilon == pytest.approx(13.4885, rel=1e-3)  # dp-accounting PLD
    assert sub.epsilon_estimate == pytest.approx(13.4885, abs=2e-3)


PAPER_SIGMAS = {
    1.0: [168.076, 89.128, 48.403, 34.130, 26.892],
    0.25: [42.080, 22.348, 12.115, 8.543, 6.694],
    0.0625: [10.495, 5.578, 3.017, 2.132, 1.677],
}
PAPER_TARGETS = [1.0, 2.0, 4.0, 6.0, 8.0]


@pytest.mark.parametrize("q", sorted(PAPER_SIGMAS))
def test_paper_sigma_table_reaches_targets(q):
    for target, sigma in zip(PAPER_TARGETS, PAPER_SIGMAS[q]):
        got = epsilon(sigma, q, 500, 1e-5, "substitute")
        assert got.epsilon == pytest.approx(target, rel=0.01), (q, sigma)


def test_acceptance_values_quoted_elsewhere():
    s = epsilon(89.128, 1.0, 500, 1e-5, "substitute")
    a = epsilon(89.128, 1.0, 500, 1e-5, "add-remove")
    assert round(s.epsilon, 3) == pytest.approx(2.001, abs=1.5e-3)
    assert round(a.epsilon, 2) == 0.93
    s = epsilon(1.677, 0.0625, 500, 1e-5, "substitute")
    a = epsilon(1.677, 0.0625, 500, 1e-5, "add-remove")
    assert round(s.epsilon, 2) == 8.00
    assert round(a.epsilon, 2) == 4.14


def test_epsilon_over_steps_matches_separate_calls():
    steps = [1, 10, 100, 250, 500]
    for adjacency in ("substitute", "add-remove"):
        series = epsilon_over_steps(1.677, 0.0625, steps, 1e-5, adjacency)
        assert [e.steps for e in series] == steps
        values = [e.epsilon for e in series]
        assert values == sorted(values)
        for t, e in zip(steps, series):
            one = epsilon(1.677, 0.0625, t, 1e-5, adjacency)
            assert e.epsilon_estimate == pytest.approx(one.epsilon_estimate, rel=1e-3, abs=1e-3)
            assert abs(e.epsilon - one.epsilon) <= e.eps_error + one.eps_error + 1e-3 * one.epsilon
            assert e.epsilon_lower <= one.epsilon and one.epsilon_lower <= e.epsilon
        full = epsilon(1.677, 0.0625, 500, 1e-5, adjacency)
        assert series[-1].epsilon == pytest.approx(full.epsilon, rel=1e-9)


def test_epsilon_over_steps_group():
    series = epsilon_over_steps(1.677, 0.0625, [100, 500], 1e-5, "group")
    one = epsilon(1.677, 0.0625, 100, 1e-5, "group")
    assert series[0].epsilon == pytest.approx(one.epsilon, rel=3e-3)
    assert series[1].epsilon == pytest.approx(epsilon(1.677, 0.0625, 500, 1e-5, "group").epsilon, rel=1e-9)


def test_epsilon_record_fields():
    e = epsilon(1.5, 0.04, 2250, 1e-5, "substitute")
    assert isinstance(e, Epsilon)
    assert e.adjacency == "substitute" and e.delta == 1e-5 and e.steps == 2250
    assert e.delta_add_remove is None
    assert e.epsilon - e.epsilon_estimate <= 2 * e.eps_error
    assert ADJACENCIES == ("add-remove", "substitute", "group")
    with pytest.raises(AttributeError):
        e.epsilon = 0.0  # frozen


BAD = [
    (dict(sigma=0.0), "sigma"),
    (dict(sigma=-1.0), "sigma"),
    (dict(sigma=float("nan")), "sigma"),
    (dict(q=0.0), "q"),
    (dict(q=1.5), "q"),
    (dict(q="x"), "q"),
    (dict(steps=0), "steps"),
    (dict(steps=2.5), "steps"),
    (dict(delta=0.0), "delta"),
    (dict(delta=1.0), "delta"),
    (dict(adjacency="replace"), "adjacency"),
]


@pytest.mark.parametrize("change,name", BAD)
def test_bad_inputs_name_the_parameter(change, name):
    args = dict(sigma=1.0, q=0.1, steps=10, delta=1e-5, adjacency="substitute")
    args.update(change)
    with pytest.raises(ParameterError) as info:
        epsilon(**args)
    assert info.value.name == name
    assert name in str(info.value)
    if name != "sigma":
        cal = {k: args[k] for k in ("q", "steps", "delta", "adjacency")}
        with pytest.raises(ParameterError) as info:
            calibrate_sigma(1.0, **cal)
        assert info.value.name == name


@pytest.mark.parametrize("steps", [[], [0, 5], "10", 7])
def test_bad_steps_sequence(steps):
    with pytest.raises(ParameterError) as info:
        epsilon_over_steps(1.0, 0.1, steps, 1e-5, "substitute")
    assert info.value.name == "steps"


@pytest.mark.parametrize(
    "sigma,q,steps,delta,adjacency",
    [
        (1.5, 0.04, 2250, 1e-30, "substitute"),  # delta below the round-off of the composition
        (0.05, 1.0, 500, 1e-5, "substitute"),  # epsilon in the thousands
        (0.8, 0.0625, 500, 1e-5, "group"),  # delta' ~ 1e-20 needed
    ],
)
def test_beyond_numerical_range_raises_clear_error(sigma, q, steps, delta, adjacency):
    with pytest.raises(AccountingRangeError) as info:
        epsilon(sigma, q, steps, delta, adjacency)
    assert isinstance(info.value, ValueError)
    assert len(str(info.value)) > 30


def test_tiny_epsilon_is_zero_not_negative():
    e = epsilon(1e4, 0.01, 10, 1e-5, "add-remove")
    assert e.epsilon_estimate == 0.0 and 0.0 <= e.epsilon < 1e-2


@pytest.mark.parametrize("alias,canonical", [
    ("replace-one", "substitute"), ("REPLACE_ONE", "substitute"), ("add-or-remove-one", "add-remove"),
    ("ADD_OR_REMOVE_ONE", "add-remove"), ("Substitute", "substitute"), ("group", "group")])
def test_adjacency_spellings_of_dp_accounting_and_flower(alias, canonical):
    assert acc.canonical_adjacency(alias) == canonical
    assert epsilon(2.0, 0.25, 50, 1e-5, alias) == epsilon(2.0, 0.25, 50, 1e-5, canonical)


@pytest.mark.parametrize("history,name", [
    ([], "history"), ([(1.0, 0.1)], "history[0]"), ([(1.0, 0.1, 10), (1.0, 1.5, 10)], "history[1] q"),
    ([(0.0, 0.1, 10)], "sigma"), ([(1.0, 0.1, 0)], "steps"), ("1,0.1,10", "history")])
def test_bad_history_names_the_segment(history, name):
    with pytest.raises(ParameterError) as err:
        acc.epsilon_of_history(history, 1e-5, "substitute")
    assert err.value.name == name
    with pytest.raises(ParameterError, match="replace-one"):
        acc.canonical_adjacency("swap")


def test_epsilon_profile_is_the_accountant_at_each_delta():
    """The privacy profile behind the one-run 'dpsgd' family: one composition, queried at many
    deltas, gives the accountant's conservative epsilon at each (to its error budget) and upper
    bounds dp-accounting's PLD (add/remove, Poisson-subsampled Gaussian)."""
    import dp_accounting
    from dp_accounting.pld import pld_privacy_accountant

    from subaudit.accounting import epsilon, epsilon_profile

    sigma, q, steps = 1.1, 0.05, 200
    deltas = [1e-9, 1e-7, 1e-5, 1e-3, 0.1]
    pairs = epsilon_profile(sigma, q, steps, deltas, "add-remove")
    assert [d for _, d in pairs] == deltas
    assert all(a[0] > b[0] for a, b in zip(pairs, pairs[1:]))  # epsilon falls as delta grows
    pld = pld_privacy_accountant.PLDAccountant()
    pld.compose(dp_accounting.PoissonSampledDpEvent(q, dp_accounting.GaussianDpEvent(sigma)), steps)
    for eps, d in pairs:
        assert eps == pytest.approx(epsilon(sigma, q, steps, d, "add-remove").epsilon, rel=0.02, abs=1e-3)
        theirs = pld.get_epsilon(d)
        assert theirs - 1e-3 <= eps <= theirs * 1.03 + 1e-3
    unresolved = epsilon_profile(sigma, q, steps, [1e-30, 1e-5], "substitute")
    assert [d for _, d in unresolved] == [1e-5]  # a delta the composition cannot resolve is left out
