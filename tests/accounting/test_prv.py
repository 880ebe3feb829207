"""Tests of the privacy random variables (subaudit.accounting.prv): closed forms,
quadratures, and agreement with prv-accountant."""

from __future__ import annotations

import math

import numpy as np
import pytest

from subaudit.accounting import prv as prvs


def test_remove_prv_matches_prv_accountant():
    from prv_accountant import PoissonSubsampledGaussianMechanism

    ours = prvs.RemovePoissonGaussian(1.5, 0.04)
    ref = PoissonSubsampledGaussianMechanism(sampling_probability=0.04, noise_multiplier=1.5)
    t = np.linspace(-0.04, 4.0, 41)
    np.testing.assert_allclose(ours.cdf(t), np.asarray(ref.cdf(t), dtype=float), atol=1e-14)
    for alpha in (1.5, 2.0, 7.3, 32.0, 63.0):
        assert ours.rdp(alpha) == pytest.approx(float(ref.rdp(alpha)), rel=1e-9)


def test_substitute_prv_inverse_and_closed_forms():
    for sigma, q in [(1.5, 0.04), (0.5, 0.3), (30.0, 0.9), (1.0, 1.0), (0.3, 0.01)]:
        prv = prvs.SubstitutePoissonGaussian(sigma, q)
        x = np.linspace(-3, 4, 29) * max(sigma, 1.0)
        y = prv.privacy_loss(x)
        assert np.all(np.diff(y) > 0)
        np.testing.assert_allclose(prv.x_star(y), x, rtol=1e-9, atol=1e-9 * sigma**2)
        # symmetric pair: L(-x) = -L(x)
        np.testing.assert_allclose(prv.privacy_loss(-x), -y, rtol=1e-12, atol=1e-12)
        # CDF = P(X <= x*(y)) under the mixture, and its tail form
        F = prv.cdf(y)
        direct = q * _phi((x - 1) / sigma) + (1 - q) * _phi(x / sigma)
        np.testing.assert_allclose(F, direct, atol=1e-14)
        np.testing.assert_allclose(prv.sf(y), 1 - direct, atol=1e-14)
    g = prvs.SubstitutePoissonGaussian(2.0, 1.0)
    assert g.rdp(3.0) == pytest.approx(2 * 3.0 / 4.0, rel=1e-12)  # 2 alpha / sigma^2
    assert g.mean() == pytest.approx(0.5, rel=1e-12)


def test_substitute_rdp_and_mean_by_quadrature_are_accurate():
    from scipy import integrate

    prv = prvs.SubstitutePoissonGaussian(1.2, 0.2)
    def moment(x: float, alpha: float) -> float:
        return math.exp(prv.log_densities(np.array([x]))[1][0] + alpha * prv.privacy_loss(np.array([x]))[0])

    def mean(x: float) -> float:
        return math.exp(prv.log_densities(np.array([x]))[0][0]) * prv.privacy_loss(np.array([x]))[0]

    for alpha in (2.0, 10.0):
        val, _ = integrate.quad(moment, -40, 60, args=(alpha,), limit=400, epsabs=0, epsrel=1e-12)
        assert prv.rdp(alpha) == pytest.approx(math.log(val) / (alpha - 1), rel=1e-8)
    val, _ = integrate.quad(mean, -40, 40, limit=400, epsabs=1e-15)
    assert prv.mean() == pytest.approx(val, rel=1e-8)
    # near q = 1 the mixture tends to the sensitivity-2 Gaussian
    near = prvs.SubstitutePoissonGaussian(1.2, 1 - 1e-9)
    assert near.rdp(4.0) == pytest.approx(4.0 * 2 / 1.44, rel=1e-6)


def test_substitute_prv_plugs_into_prv_accountant():
    from prv_accountant import PRVAccountant

    prv = prvs.SubstitutePoissonGaussian(1.5, 0.04)
    accountant = PRVAccountant(prvs=[prv], max_self_compositions=[2250], eps_error=0.1, delta_error=1e-9)
    low, est, up = accountant.compute_epsilon(delta=1e-5, num_self_compositions=[2250])
    assert low <= 13.4885 <= up
    assert est == pytest.approx(13.4885, abs=0.02)


def _phi(z):
    from scipy.special import ndtr

    return ndtr(z)


def test_a_direction_must_give_its_inverse_and_densities():
    """The shared base is abstract: a direction without x_star, log_densities or kl_at_full_batch
    cannot be made (it would fail later, inside an accounting); every registered direction has
    them."""
    with pytest.raises(TypeError, match="abstract"):
        prvs.PoissonGaussianPRV(1.0, 0.5)

    class Partial(prvs.PoissonGaussianPRV):
        def x_star(self, y):
            return y

    with pytest.raises(TypeError, match="kl_at_full_batch"):
        Partial(1.0, 0.5)
    for cls in prvs.PRV_CLASSES.values():
        assert not cls.__abstractmethods__ and 0.0 < cls(1.0, 0.5).cdf(0.1) < 1.0
