"""Tests for subaudit.estimation.planning: the finite-R ceiling and the expected estimate at R."""

from __future__ import annotations

import pytest
from scipy import stats

from subaudit.accounting.gdp import gdp_epsilon
from subaudit.estimation import auc as auc_estimator
from subaudit.estimation import planning
from subaudit.validation import ParameterError

DELTA = 1e-5


def test_finite_r_ceiling():
    # paper: perfect separation -> CP bounds 1 - (alpha/2)^(1/n) on both rates (closed form)
    for n in (20, 500):
        mu = 2 * stats.norm.isf(1 - 0.025 ** (1 / n))
        assert planning.finite_r_ceiling(n, n, DELTA, estimator="paper") == pytest.approx(gdp_epsilon(mu, DELTA))
    # auc: the AUC test at AUC = 1 or the top threshold with FP = FN = 0, whichever is larger
    n = 500
    mu_auc = auc_estimator.auc_mu_lower(1.0, n, n, 0.04)
    level = 0.01 / (2 * len(auc_estimator.tail_ranks(n)))
    mu_tail = stats.norm.isf(1 - level ** (1 / n)) - stats.norm.ppf(1 - level ** (1 / n))
    assert planning.finite_r_ceiling(n, n, DELTA) == pytest.approx(gdp_epsilon(max(mu_auc, mu_tail), DELTA))
    ceilings = [planning.finite_r_ceiling(n, n, DELTA) for n in (50, 125, 500, 1250)]
    assert ceilings == sorted(ceilings) and 15 < ceilings[0] and ceilings[-1] < 40
    with pytest.raises(ParameterError) as err:
        planning.finite_r_ceiling(0, 10, DELTA)
    assert err.value.name == "n_positive"


def test_expected_estimate_at_r():
    true = gdp_epsilon(1.0, DELTA)
    small = planning.expected_estimate(planning.gaussian_signal(1.0), 100, DELTA, n_sims=60, seed=1)
    large = planning.expected_estimate(planning.gaussian_signal(1.0), 5000, DELTA, n_sims=60, seed=1)
    # more runs, more evidence: the expected bound rises towards the truth and stays below it
    assert small["mean"] + 3 * small["se"] < large["mean"] < true
    assert large["p90"] < true and large["median"] > 0.9 * true
    assert small["p10"] <= small["median"] <= small["p90"] <= planning.finite_r_ceiling(100, 100, DELTA)
    # no signal: the bound is 0 in all but about alpha of the audits
    none = planning.expected_estimate(planning.gaussian_signal(0.0), 300, DELTA, n_sims=100, seed=2)
    assert none["median"] == 0.0 and none["p90"] == 0.0
    # the same seed gives the same numbers
    assert planning.expected_estimate(planning.gaussian_signal(1.0), 100, DELTA, n_sims=60, seed=1) == small
