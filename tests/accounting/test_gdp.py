"""Tests for subaudit.accounting.gdp (mu-GDP as (epsilon, delta)) against dp-accounting."""

from __future__ import annotations

import math

import numpy as np
import pytest
from dp_accounting.pld import privacy_loss_distribution, privacy_loss_mechanism
from scipy import stats

from subaudit.accounting.gdp import gdp_delta, gdp_epsilon
from subaudit.validation import ParameterError

DELTA = 1e-5


def gaussian_epsilon(mu: float, delta: float = DELTA) -> float:
    """mu-GDP == Gaussian mechanism with sensitivity 1 and std 1/mu (dp-accounting PLD)."""
    pld = privacy_loss_distribution.from_gaussian_mechanism(
        standard_deviation=1.0 / mu, sensitivity=1.0, value_discretization_interval=1e-4
    )
    return float(pld.get_epsilon_for_delta(delta))


# ---------------------------------------------------------------------------
# GDP conversions
# ---------------------------------------------------------------------------


@pytest.mark.parametrize("mu", [0.05, 0.2, 0.5018, 1.0, 2.0])
@pytest.mark.parametrize("delta", [1e-5, 1e-3, 1e-9])
def test_gdp_epsilon_matches_dp_accounting_pld(mu, delta):
    assert gdp_epsilon(mu, delta) == pytest.approx(gaussian_epsilon(mu, delta), abs=2e-6, rel=1e-6)


@pytest.mark.parametrize("mu", [3.0, 5.0, 8.0, 10.0, 15.0])
@pytest.mark.parametrize("delta", [1e-5, 1e-10])
def test_gdp_epsilon_large_mu_against_dp_accounting_closed_form(mu, delta):
    eps = gdp_epsilon(mu, delta)
    assert eps > 15
    # dp-accounting's closed-form delta of the Gaussian mechanism (std 1/mu, sensitivity 1)
    loss = privacy_loss_mechanism.GaussianPrivacyLoss(1.0 / mu, 1.0)
    assert loss.get_delta_for_epsilon(eps) == pytest.approx(delta, rel=1e-7)
    assert loss.get_delta_for_epsilon(eps * (1 - 1e-6)) > delta
    assert loss.get_delta_for_epsilon(eps * (1 + 1e-6)) < delta


def test_gdp_delta_large_epsilon_is_stable():
    # eps = 60 and beyond: naive Phi(a) - e^eps Phi(b) cancels to 0 or overflows.
    for mu, eps in [(15.0, 60.0), (15.0, 150.0), (10.0, 80.0), (3.0, 60.0)]:
        d = gdp_delta(eps, mu)
        want = privacy_loss_mechanism.GaussianPrivacyLoss(1.0 / mu, 1.0).get_delta_for_epsilon(eps)
        assert d > 0
        assert d == pytest.approx(want, rel=1e-7)
    d_small_mu = gdp_delta(60.0, 1.0)
    assert 0 <= d_small_mu < 1e-300 or d_small_mu == pytest.approx(
        privacy_loss_mechanism.GaussianPrivacyLoss(1.0, 1.0).get_delta_for_epsilon(60.0), rel=1e-6
    )


def test_gdp_delta_known_values_and_monotonicity():
    # delta(0) = 2 Phi(mu/2) - 1
    for mu in (0.1, 1.0, 4.0):
        assert gdp_delta(0.0, mu) == pytest.approx(2 * stats.norm.cdf(mu / 2) - 1, rel=1e-12)
    eps = np.linspace(0, 10, 101)
    d = gdp_delta(eps, 1.5)
    assert d.shape == eps.shape
    assert np.all(np.diff(d) < 0)
    assert gdp_delta(1.0, 2.0) > gdp_delta(1.0, 1.0)
    # round trip
    for mu in (0.3, 1.0, 6.0):
        assert gdp_delta(gdp_epsilon(mu, 1e-5), mu) == pytest.approx(1e-5, rel=1e-9)


def test_gdp_epsilon_zero_cases():
    for bad in (0.0, -1.3, -math.inf, math.nan):
        with pytest.raises(ParameterError) as err:
            gdp_epsilon(bad, DELTA)
        assert err.value.name == "mu"
    # delta(0) = 2 Phi(mu/2) - 1 <= delta -> 0
    assert gdp_epsilon(1e-6, DELTA) == 0.0
    assert gdp_epsilon(2e-5, DELTA) == 0.0  # delta(0) ~ 0.80e-5 <= 1e-5
    assert gdp_epsilon(3e-5, DELTA) > 0.0  # delta(0) ~ 1.20e-5 > 1e-5
    with pytest.raises(ParameterError) as err:
        gdp_epsilon(1.0, 0.0)
    assert err.value.name == "delta"
    with pytest.raises(ParameterError) as err:
        gdp_epsilon(math.inf, DELTA)
    assert err.value.name == "mu"
    with pytest.raises(ParameterError) as err:
        gdp_delta(1.0, 0.0)
    assert err.value.name == "mu"
