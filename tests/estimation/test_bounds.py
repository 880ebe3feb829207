"""Tests for subaudit.estimation.bounds: Clopper-Pearson upper bounds and mu_lower."""

from __future__ import annotations

import math

import numpy as np
import pytest
from scipy import stats

from subaudit.estimation.bounds import clopper_pearson_upper, mu_lower
from subaudit.validation import ParameterError


# ---------------------------------------------------------------------------
# Clopper-Pearson
# ---------------------------------------------------------------------------


@pytest.mark.parametrize("alpha", [0.05, 0.01, 0.2])
def test_clopper_pearson_matches_binomtest(alpha):
    cases = [(0, 1), (1, 1), (0, 5), (3, 5), (5, 5), (0, 100), (1, 100), (50, 100), (99, 100),
             (100, 100), (7, 12500), (12000, 12500)]
    k = np.array([c[0] for c in cases])
    n = np.array([c[1] for c in cases])
    got = clopper_pearson_upper(k, n, alpha)
    assert isinstance(got, np.ndarray) and got.shape == k.shape
    for (kk, nn), g in zip(cases, got):
        ci = stats.binomtest(int(kk), int(nn)).proportion_ci(confidence_level=1 - alpha, method="exact")
        assert g == pytest.approx(ci.high, abs=1e-10, rel=1e-9), (kk, nn)
        # scalar call gives the same
        assert clopper_pearson_upper(int(kk), int(nn), alpha) == pytest.approx(g, abs=1e-15)


def test_clopper_pearson_closed_forms():
    # k = 0: upper = 1 - (alpha/2)^(1/n); k = n - 1: upper = (1 - alpha/2)^(1/n); k = n: 1.
    n = np.array([1, 2, 10, 1000])
    np.testing.assert_allclose(clopper_pearson_upper(0 * n, n, 0.05), 1 - 0.025 ** (1 / n), rtol=1e-12)
    np.testing.assert_allclose(clopper_pearson_upper(n - 1, n, 0.05), 0.975 ** (1 / n), rtol=1e-12)
    np.testing.assert_array_equal(clopper_pearson_upper(n, n, 0.05), np.ones(4))


def test_clopper_pearson_rejects_bad_input():
    with pytest.raises(ValueError):
        clopper_pearson_upper(3, 2, 0.05)
    with pytest.raises(ValueError):
        clopper_pearson_upper(0, 0, 0.05)
    with pytest.raises(ParameterError) as err:
        clopper_pearson_upper(1, 2, 1.5)
    assert err.value.name == "alpha"


# ---------------------------------------------------------------------------
# GDP lower bound from error-rate bounds
# ---------------------------------------------------------------------------


def test_mu_lower():
    assert mu_lower(0.5, 0.5) == pytest.approx(0.0, abs=1e-15)
    assert mu_lower(stats.norm.cdf(-1.0), stats.norm.cdf(-2.0)) == pytest.approx(3.0, rel=1e-12)
    assert mu_lower(1.0, 0.1) == -math.inf
    assert mu_lower(0.1, 1.0) == -math.inf
    np.testing.assert_allclose(mu_lower([1e-20, 0.3], [1e-20, 0.3]),
                               [2 * stats.norm.isf(1e-20), 2 * stats.norm.isf(0.3)])
