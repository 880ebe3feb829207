"""Tests for subaudit.estimation (empirical epsilon lower bounds)."""

from __future__ import annotations

import math

import dp_accounting
import numpy as np
import pytest
from dp_accounting.pld import pld_privacy_accountant, privacy_loss_distribution, privacy_loss_mechanism
from scipy import stats

import jax_privacy_reference
from subaudit import estimation as est
from subaudit.estimation import (
    ESTIMATORS,
    AuditEstimate,
    clopper_pearson_upper,
    estimate_epsilon,
    estimate_over_steps,
    gdp_delta,
    gdp_epsilon,
    mu_lower,
)
from subaudit.validation import ParameterError
from subaudit.worst_case import simulate_s1

DELTA = 1e-5


def pld_epsilon(sigma: float, q: float, steps: int, delta: float = DELTA, substitute: bool = True) -> float:
    """True epsilon of the S1 setting from dp-accounting's PLD accountant (independent of subaudit)."""
    relation = (
        dp_accounting.NeighboringRelation.REPLACE_ONE
        if substitute
        else dp_accounting.NeighboringRelation.ADD_OR_REMOVE_ONE
    )
    acc = pld_privacy_accountant.PLDAccountant(relation, value_discretization_interval=1e-4)
    event = dp_accounting.SelfComposedDpEvent(
        dp_accounting.PoissonSampledDpEvent(q, dp_accounting.GaussianDpEvent(sigma)), steps
    )
    acc.compose(event)
    return float(acc.get_epsilon(delta))


def gaussian_epsilon(mu: float, delta: float = DELTA) -> float:
    """mu-GDP == Gaussian mechanism with sensitivity 1 and std 1/mu (dp-accounting PLD)."""
    pld = privacy_loss_distribution.from_gaussian_mechanism(
        standard_deviation=1.0 / mu, sensitivity=1.0, value_discretization_interval=1e-4
    )
    return float(pld.get_epsilon_for_delta(delta))


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


def test_mu_lower():
    assert mu_lower(0.5, 0.5) == pytest.approx(0.0, abs=1e-15)
    assert mu_lower(stats.norm.cdf(-1.0), stats.norm.cdf(-2.0)) == pytest.approx(3.0, rel=1e-12)
    assert mu_lower(1.0, 0.1) == -math.inf
    assert mu_lower(0.1, 1.0) == -math.inf
    np.testing.assert_allclose(mu_lower([1e-20, 0.3], [1e-20, 0.3]),
                               [2 * stats.norm.isf(1e-20), 2 * stats.norm.isf(0.3)])


# ---------------------------------------------------------------------------
# The "paper" estimator on hand-made examples
# ---------------------------------------------------------------------------


def test_paper_estimator_perfect_separation_by_hand():
    # 20 runs per world, perfectly separated: best threshold has FP = FN = 0 and
    # CP upper bound 1 - 0.025^(1/20) on both rates.
    neg = np.arange(20, dtype=float)
    pos = np.arange(20, dtype=float) + 100
    scores = np.r_[pos, neg]
    labels = np.r_[np.ones(20), np.zeros(20)]
    r = estimate_epsilon(scores, labels, DELTA, estimator="paper")
    ub = 1 - 0.025 ** (1 / 20)
    assert r.fpr_ub == pytest.approx(ub, rel=1e-12)
    assert r.fnr_ub == pytest.approx(ub, rel=1e-12)
    assert r.mu == pytest.approx(2 * stats.norm.ppf(0.025 ** (1 / 20)), rel=1e-12)
    assert r.threshold == 100.0  # predict D iff score >= 100
    assert r.false_positives == 0 and r.false_negatives == 0
    assert math.isfinite(r.epsilon) and r.epsilon > 0
    assert gdp_delta(r.epsilon, r.mu) == pytest.approx(DELTA, rel=1e-9)


def test_paper_estimator_small_example_by_hand():
    # 25 runs per world.  D: 25..44 plus 3.5, 12.5, 21.5, 23.5, 24.5; D': 0..23 plus 26.5.
    # By hand (predict D iff score >= tau): tau = 23.5 misclassifies D' {26.5} -> FP 1
    # and D {3.5, 12.5, 21.5} -> FN 3; its neighbours are worse: tau = 24.5 (FP 1, FN 4),
    # tau = 23 (FP 2, FN 3), tau = 25 (FP 1, FN 5), tau = 21.5 (FP 3, FN 2).
    pos = np.r_[np.arange(20) + 25.0, [3.5, 12.5, 21.5, 23.5, 24.5]]
    neg = np.r_[np.arange(24.0), [26.5]]
    scores = np.r_[pos, neg]
    labels = np.r_[np.ones(25, int), np.zeros(25, int)]
    alpha = 0.05
    # Independent check of every threshold with scipy's binomtest (not clopper_pearson_upper).
    best_mu, best_tau, best_counts = -math.inf, None, None
    for tau in sorted(set(scores.tolist()), reverse=True):
        fp, fn = int(np.sum(neg >= tau)), int(np.sum(pos < tau))
        fpr_ub = stats.binomtest(fp, 25).proportion_ci(1 - alpha, method="exact").high
        fnr_ub = stats.binomtest(fn, 25).proportion_ci(1 - alpha, method="exact").high
        m = stats.norm.ppf(1 - fpr_ub) - stats.norm.ppf(fnr_ub) if fpr_ub < 1 and fnr_ub < 1 else -math.inf
        if m > best_mu + 1e-9:
            best_mu, best_tau, best_counts = m, tau, (fp, fn)
    assert (best_tau, best_counts) == (23.5, (1, 3))
    # closed-form pieces: CP upper for k = 1 of 25 and k = 3 of 25 via the beta quantile
    fpr_ub = stats.beta.ppf(0.975, 2, 24)
    fnr_ub = stats.beta.ppf(0.975, 4, 22)
    mu_hand = stats.norm.ppf(1 - fpr_ub) - stats.norm.ppf(fnr_ub)
    assert best_mu == pytest.approx(mu_hand, rel=1e-8)
    r = estimate_epsilon(scores, labels, DELTA, alpha=alpha, estimator="paper")
    assert r.threshold == 23.5
    assert (r.false_positives, r.false_negatives) == (1, 3)
    assert r.fpr_ub == pytest.approx(fpr_ub, rel=1e-12)
    assert r.fnr_ub == pytest.approx(fnr_ub, rel=1e-12)
    assert r.mu == pytest.approx(mu_hand, rel=1e-10)
    assert r.mu == pytest.approx(1.3187761126859, rel=1e-9)
    assert r.epsilon == pytest.approx(gdp_epsilon(mu_hand, DELTA), rel=1e-10)
    assert gdp_delta(r.epsilon, mu_hand) == pytest.approx(DELTA, rel=1e-9)
    assert r.estimator == "paper"


def test_paper_estimator_tiny_example_is_zero():
    # 3 runs per world cannot give mu > 0 at alpha = 0.05: best is FP 0 / FN 0 with
    # CP bounds 1 - 0.025^(1/3) = 0.708 each -> mu = 2 Phi^-1(0.292) < 0 -> epsilon 0.
    r = estimate_epsilon([5.0, 6.0, 7.0, 1.0, 2.0, 3.0], [1, 1, 1, 0, 0, 0], DELTA, estimator="paper")
    assert r.mu == pytest.approx(2 * stats.norm.ppf(0.025 ** (1 / 3)), rel=1e-12)
    assert r.mu < 0 and r.epsilon == 0.0


def test_ties_count_as_predict_D():
    # One D run and one D' run share score 1.0: at tau = 1 both are predicted D.
    scores = np.array([3.0, 2.0, 1.0, 1.0, 0.0, -1.0])
    labels = np.array([1, 1, 1, 0, 0, 0])
    thr, fp, fn, n_pos, n_neg = est._roc_counts(scores, labels.astype(np.int8))
    assert thr.tolist() == [3.0, 2.0, 1.0, 0.0, -1.0]
    assert fp.tolist() == [0, 0, 1, 2, 3]
    assert fn.tolist() == [2, 1, 0, 0, 0]
    assert (n_pos, n_neg) == (3, 3)


def test_estimator_registry():
    assert list(ESTIMATORS) == ["auc", "paper"] and est.DEFAULT_ESTIMATOR == "auc"
    assert ESTIMATORS["auc"].valid and not ESTIMATORS["paper"].valid
    assert ESTIMATORS["auc"].linestyle != ESTIMATORS["paper"].linestyle


def test_estimates_have_common_fields_and_their_own_details():
    rng = np.random.default_rng(0)
    scores = np.r_[rng.normal(1, 1, 200), rng.normal(0, 1, 200)]
    labels = np.r_[np.ones(200), np.zeros(200)]
    for name in ESTIMATORS:
        e = estimate_epsilon(scores, labels, delta=1e-5, estimator=name)
        d = e.to_dict()
        assert {"epsilon", "estimator", "alpha", "delta", "n_positive", "n_negative"} <= set(d)
        assert d["estimator"] == name and d["n_positive"] == d["n_negative"] == 200
        assert e.mu == d["mu"] == e.details["mu"]            # details read as attributes
        assert e.epsilon == pytest.approx(gdp_epsilon(e.mu, 1e-5) if e.mu > 0 else 0.0)
        with pytest.raises(AttributeError, match="has no 'nonesuch'"):
            e.nonesuch  # noqa: B018
    with pytest.raises(ValueError, match="common fields"):
        AuditEstimate(epsilon=1.0, estimator="x", alpha=0.05, delta=1e-5, n_positive=1,
                      n_negative=1, details={"epsilon": 2.0})


# ---------------------------------------------------------------------------
# The auc estimator: its parts against independent computations
# ---------------------------------------------------------------------------


@pytest.mark.parametrize("mu", [0.0, 0.4, 1.0, 2.5, 5.0])
def test_binormal_auc_moments_against_scipy_and_integration(mu):
    a, sd = est._binormal_auc_moments(np.array(mu), 30, 50)
    h = mu / math.sqrt(2)
    assert a == pytest.approx(stats.norm.cdf(h), rel=1e-14)
    # P(two positives beat one negative) by numerical integration over the negative's score
    from scipy import integrate
    both = integrate.quad(lambda y: stats.norm.pdf(y) * stats.norm.sf(y - mu) ** 2, -np.inf, np.inf,
                          epsabs=0, epsrel=1e-12)[0]
    var = (a * (1 - a) + (30 + 50 - 2) * (both - a * a)) / (30 * 50)
    assert sd ** 2 == pytest.approx(var, rel=1e-7, abs=1e-300)


def test_binormal_auc_sd_is_the_mann_whitney_sd_by_simulation():
    rng = np.random.default_rng(11)
    for mu, n_pos, n_neg in [(0.0, 20, 40), (1.0, 30, 30), (2.0, 15, 60)]:
        aucs = np.array([est._mann_whitney_auc(rng.normal(mu, 1, n_pos), rng.normal(0, 1, n_neg), 0.0)
                         for _ in range(20_000)])
        a, sd = est._binormal_auc_moments(np.array(mu), n_pos, n_neg)
        assert aucs.mean() == pytest.approx(a, abs=4 * sd / math.sqrt(20_000))
        assert aucs.std() == pytest.approx(sd, rel=0.03)


def test_mann_whitney_auc_by_brute_force_with_ties():
    pos = np.array([3.0, 1.0, 1.0, 0.0, 5.0])
    neg = np.array([1.0, 2.0, -1.0, 1.0])
    wins = (pos[:, None] > neg[None, :]).sum()
    ties = (pos[:, None] == neg[None, :]).sum()
    assert est._mann_whitney_auc(pos, neg, 0.0) == wins / 20
    assert est._mann_whitney_auc(pos, neg, 0.5) == (wins + 0.5 * ties) / 20


def test_auc_mu_is_the_first_mu_the_test_does_not_reject():
    z = stats.norm.isf(0.04)
    for auc, n_pos, n_neg in [(0.8, 500, 500), (0.97, 1000, 200), (1.0, 50, 50)]:
        mu = est._auc_mu(auc, n_pos, n_neg, 0.04)
        a, sd = est._binormal_auc_moments(np.array(mu), n_pos, n_neg)
        assert a + z * sd == pytest.approx(auc, abs=1e-10)
        grid = np.linspace(0, mu, 200)[:-1]
        a, sd = est._binormal_auc_moments(grid, n_pos, n_neg)
        assert np.all(a + z * sd < auc)  # every smaller mu is rejected
    assert est._auc_mu(0.5, 100, 100, 0.04) == 0.0  # no evidence: not even mu = 0 is rejected


def test_tail_ranks_and_bounds_by_hand():
    assert est.tail_ranks(7).tolist() == [1]
    assert est.tail_ranks(1000).tolist() == [1, 2, 4, 8, 16, 32, 64]
    assert est.tail_ranks(25_000).tolist() == [2 ** j for j in range(12)]
    neg = np.arange(16.0)                      # 15 is the highest, 14 the 2nd
    pos = np.array([15.5, 14.5, 14.0, 3.0, 20.0])
    thr, fp, fn, fpr_ub, fnr_ub, mu = est._tail_bounds(pos, neg, 0.01)
    assert thr.tolist() == [15.0, 14.0] and fp.tolist() == [0, 1]
    assert fn.tolist() == [3, 2]  # predict D iff score > threshold: the D run tied at 14.0 is a false negative
    level = 0.01 / 4
    assert fpr_ub[0] == pytest.approx(1 - level ** (1 / 16), rel=1e-12)  # max of 16 uniforms > u
    assert fpr_ub[1] == pytest.approx(stats.beta.isf(level, 2, 15), rel=1e-12)
    assert fnr_ub[0] == pytest.approx(stats.binomtest(3, 5).proportion_ci(1 - 2 * level, method="exact").high,
                                      rel=1e-9)
    np.testing.assert_allclose(mu, stats.norm.isf(fpr_ub) - stats.norm.ppf(fnr_ub))


def test_tail_fpr_bound_is_exact_by_simulation():
    # The k-th highest of n out-scores has false-positive rate Beta(k, n - k + 1): its upper
    # bound at level 0.05 fails in 5% of draws, whatever the score distribution.
    rng = np.random.default_rng(5)
    n, k, level, draws = 200, 4, 0.05, 40_000
    neg = rng.exponential(size=(draws, n))
    kth = -np.sort(-neg, axis=1)[:, k - 1]
    true_fpr = np.exp(-kth)                               # P(Exp(1) > t)
    ub = stats.beta.isf(level, k, n - k + 1)
    assert np.mean(true_fpr > ub) == pytest.approx(level, abs=4 * math.sqrt(level * (1 - level) / draws))


def test_auc_estimate_details_and_tail_component():
    rng = np.random.default_rng(2)
    pos, neg = rng.normal(1.0, 1.0, 400), rng.normal(0.0, 1.0, 400)
    r = estimate_epsilon(np.r_[pos, neg], np.r_[np.ones(400), np.zeros(400)], DELTA)
    assert r.component == "auc" and r.mu == r.mu_auc > r.mu_tail
    assert r.auc_strict == np.mean(pos[:, None] > neg[None, :])
    assert r.mu_auc == est._auc_mu(r.auc_strict, 400, 400, 0.05 * (1 - est.TAIL_SHARE))
    # A canary that acts in 8% of runs, strongly: the AUC barely moves, the top threshold sees it.
    pos = np.r_[rng.normal(0.0, 1.0, 920), rng.normal(50.0, 1.0, 80)]
    neg = rng.normal(0.0, 1.0, 1000)
    r = estimate_epsilon(np.r_[pos, neg], np.r_[np.ones(1000), np.zeros(1000)], DELTA)
    assert r.component == "tail" and r.false_positives == 0 and r.threshold == neg.max()
    assert r.mu == r.mu_tail > r.mu_auc
    _, _, _, fpr_ub, fnr_ub, _ = est._tail_bounds(pos, neg, 0.05 * est.TAIL_SHARE)
    assert r.mu == pytest.approx(mu_lower(fpr_ub[0], fnr_ub[0]))


def test_auc_estimator_is_deterministic_and_ignores_run_order():
    rng = np.random.default_rng(8)
    s = np.r_[rng.normal(0.8, 1, 300), rng.normal(0, 1, 300)]
    y = np.r_[np.ones(300), np.zeros(300)]
    perm = rng.permutation(600)
    r = estimate_epsilon(s, y, DELTA)
    assert r == estimate_epsilon(s, y, DELTA) == estimate_epsilon(s[perm], y[perm], DELTA)


def test_auc_counts_ties_against_d():
    # Every D run ties a D' run: the AUC with ties counted 0 is 0, no evidence.
    s = np.r_[np.arange(100.0), np.arange(100.0)]
    y = np.r_[np.ones(100), np.zeros(100)]
    r = estimate_epsilon(s, y, DELTA)
    assert r.auc_strict == pytest.approx(np.mean(np.arange(100.0)[:, None] > np.arange(100.0)[None, :]))
    assert r.epsilon == 0.0


# ---------------------------------------------------------------------------
# Finite-R ceiling, score summary, reversed scores
# ---------------------------------------------------------------------------


def test_finite_r_ceiling():
    # paper: perfect separation -> CP bounds 1 - (alpha/2)^(1/n) on both rates (closed form)
    for n in (20, 500):
        mu = 2 * stats.norm.isf(1 - 0.025 ** (1 / n))
        assert est.finite_r_ceiling(n, n, DELTA, estimator="paper") == pytest.approx(gdp_epsilon(mu, DELTA))
    # auc: the AUC test at AUC = 1 or the top threshold with FP = FN = 0, whichever is larger
    n = 500
    mu_auc = est._auc_mu(1.0, n, n, 0.04)
    level = 0.01 / (2 * len(est.tail_ranks(n)))
    mu_tail = stats.norm.isf(1 - level ** (1 / n)) - stats.norm.ppf(1 - level ** (1 / n))
    assert est.finite_r_ceiling(n, n, DELTA) == pytest.approx(gdp_epsilon(max(mu_auc, mu_tail), DELTA))
    ceilings = [est.finite_r_ceiling(n, n, DELTA) for n in (50, 125, 500, 1250)]
    assert ceilings == sorted(ceilings) and 15 < ceilings[0] and ceilings[-1] < 40
    with pytest.raises(ParameterError) as err:
        est.finite_r_ceiling(0, 10, DELTA)
    assert err.value.name == "n_positive"


def test_expected_estimate_at_r():
    true = gdp_epsilon(1.0, DELTA)
    small = est.expected_estimate(est.gaussian_signal(1.0), 100, DELTA, n_sims=60, seed=1)
    large = est.expected_estimate(est.gaussian_signal(1.0), 5000, DELTA, n_sims=60, seed=1)
    # more runs, more evidence: the expected bound rises towards the truth and stays below it
    assert small["mean"] + 3 * small["se"] < large["mean"] < true
    assert large["p90"] < true and large["median"] > 0.9 * true
    assert small["p10"] <= small["median"] <= small["p90"] <= est.finite_r_ceiling(100, 100, DELTA)
    # no signal: the bound is 0 in all but about alpha of the audits
    none = est.expected_estimate(est.gaussian_signal(0.0), 300, DELTA, n_sims=100, seed=2)
    assert none["median"] == 0.0 and none["p90"] == 0.0
    # the same seed gives the same numbers
    assert est.expected_estimate(est.gaussian_signal(1.0), 100, DELTA, n_sims=60, seed=1) == small


def test_score_summary_by_brute_force():
    rng = np.random.default_rng(9)
    pos, neg = rng.normal(2.0, 1, 2000), rng.normal(0, 1, 3000)
    pos[:5] = neg[:5]  # a few ties
    out = est.score_summary(np.r_[pos, neg], np.r_[np.ones(2000), np.zeros(3000)])
    pairs = (pos[:, None] > neg[None, :]).mean() + 0.5 * (pos[:, None] == neg[None, :]).mean()
    assert out["auc"] == pytest.approx(pairs, abs=1e-12)
    for fpr, key in ((1e-3, "tpr_at_fpr_0.001"), (1e-2, "tpr_at_fpr_0.01")):
        best = max((np.mean(pos >= t) for t in np.r_[pos, neg, np.inf] if np.mean(neg >= t) <= fpr))
        assert out[key] == pytest.approx(best)
    assert (out["n_positive"], out["n_negative"]) == (2000, 3000)


def test_reversed_evidence():
    rng = np.random.default_rng(10)
    s = np.r_[rng.normal(-1.0, 1, 500), rng.normal(0, 1, 500)]
    y = np.r_[np.ones(500), np.zeros(500)]
    assert estimate_epsilon(s, y, DELTA).epsilon == 0.0
    assert est.reversed_evidence(s, y, DELTA) == estimate_epsilon(-s, y, DELTA).epsilon > 1.0
    assert est.reversed_evidence(-s, y, DELTA) == 0.0


@pytest.mark.parametrize("estimator", ESTIMATORS)
def test_identical_scores_give_zero(estimator):
    r = estimate_epsilon(np.full(40, 0.7), np.r_[np.ones(20), np.zeros(20)], DELTA, estimator=estimator)
    assert r.epsilon == 0.0
    assert r.mu == (0.0 if estimator == "auc" else -math.inf)


@pytest.mark.parametrize("estimator", ESTIMATORS)
def test_no_signal_gives_zero(estimator):
    # Scores independent of the label: mu <= 0 at most thresholds; epsilon is 0.
    rng = np.random.default_rng(1)
    r = estimate_epsilon(rng.normal(size=400), np.r_[np.ones(200), np.zeros(200)], DELTA, estimator=estimator)
    assert r.epsilon == 0.0
    assert r.mu <= 0


@pytest.mark.parametrize("estimator", ESTIMATORS)
def test_reversed_scores_give_zero(estimator):
    # Higher score means "more likely D"; scores pointing the other way give nothing.
    scores = np.r_[np.arange(50.0), np.arange(50.0) + 100]
    labels = np.r_[np.ones(50), np.zeros(50)]
    assert estimate_epsilon(scores, labels, DELTA, estimator=estimator).epsilon == 0.0


def test_to_dict_and_frozen():
    r = estimate_epsilon([1.0, 2.0, 3.0, 0.0, -1.0, 0.5], [1, 1, 1, 0, 0, 0], DELTA, estimator="paper")
    d = r.to_dict()
    assert set(d) >= {"epsilon", "mu", "estimator", "alpha", "delta", "threshold", "fpr_ub",
                      "fnr_ub", "n_positive", "n_negative"}
    assert d["epsilon"] == r.epsilon and d["estimator"] == "paper"
    with pytest.raises(AttributeError):
        r.epsilon = 3.0  # type: ignore[misc]
    assert isinstance(r, AuditEstimate)


@pytest.mark.parametrize(
    "scores,labels,match",
    [
        ([], [], "empty"),
        ([1.0, 2.0], [1], "length"),
        ([1.0, 2.0, 3.0], [1, 1, 1], "one class"),
        ([1.0, 2.0, 3.0], [0, 0, 0], "one class"),
        ([1.0, np.nan, 3.0, 4.0], [1, 0, 1, 0], "finite"),
        ([1.0, np.inf, 3.0, 4.0], [1, 0, 1, 0], "finite"),
        ([1.0, 2.0, 3.0, 4.0], [1, 0, 2, 0], "0"),
        ([1.0, 2.0, 3.0, 4.0], [1, 0, 0.5, 0], "0"),
        ([[1.0, 2.0]], [[1, 0]], "1-D"),
    ],
)
@pytest.mark.parametrize("estimator", ESTIMATORS)
def test_degenerate_inputs_raise(scores, labels, match, estimator):
    with pytest.raises(ValueError, match=match):
        estimate_epsilon(scores, labels, DELTA, estimator=estimator)


def test_one_run_per_world_is_defined():
    for name in ESTIMATORS:
        assert estimate_epsilon([1.0, 2.0, 3.0], [1, 0, 0], DELTA, estimator=name).epsilon == 0.0


@pytest.mark.parametrize(
    "kwargs,name",
    [
        (dict(delta=0.0), "delta"),
        (dict(delta=1.0), "delta"),
        (dict(alpha=0.0), "alpha"),
        (dict(alpha=1.2), "alpha"),
        (dict(estimator="max"), "estimator"),
    ],
)
def test_parameter_errors_name_the_parameter(kwargs, name):
    args = dict(scores=[1.0, 2.0, 3.0, 4.0], labels=[1, 1, 0, 0], delta=DELTA)
    args.update(kwargs)
    with pytest.raises(ParameterError) as err:
        estimate_epsilon(**args)
    assert err.value.name == name


def test_boolean_labels_accepted():
    s = np.r_[np.arange(10) + 20.0, np.arange(10.0)]
    y = np.r_[np.ones(10, bool), np.zeros(10, bool)]
    assert estimate_epsilon(s, y, DELTA, estimator="paper") == estimate_epsilon(
        s, y.astype(int), DELTA, estimator="paper")


def test_estimate_over_steps():
    a = simulate_s1(5.0, 0.5, 30, 300, seed=3, checkpoints=[5, 15, 30])
    for name in ESTIMATORS:
        out = estimate_over_steps(a.scores, a.labels, DELTA, estimator=name)
        assert len(out) == 3
        for row, r in zip(a.scores, out):
            assert r == estimate_epsilon(row, a.labels, DELTA, estimator=name)
    with pytest.raises(ValueError):
        estimate_over_steps(a.scores[0], a.labels, DELTA)


# ---------------------------------------------------------------------------
# Acceptance: the paper's S1 numbers (Fig. 1, T = 500, R = 25K per world)
# ---------------------------------------------------------------------------


def test_acceptance_paper_q1():
    a = simulate_s1(89.128, 1.0, 500, 25_000, seed=0)
    r = estimate_epsilon(a.scores[0], a.labels, DELTA, estimator="paper")
    true = pld_epsilon(89.128, 1.0, 500)
    print(f"\nS1 q=1 sigma=89.128 T=500 R=25000: paper eps={r.epsilon:.4f} (mu={r.mu:.4f}); true eps_S={true:.4f}")
    assert 1.8 <= r.epsilon <= 2.15


def test_acceptance_paper_q00625():
    a = simulate_s1(1.677, 0.0625, 500, 25_000, seed=0)
    r = estimate_epsilon(a.scores[0], a.labels, DELTA, estimator="paper")
    true = pld_epsilon(1.677, 0.0625, 500)
    print(f"\nS1 q=0.0625 sigma=1.677 T=500 R=25000: paper eps={r.epsilon:.4f} (mu={r.mu:.4f}); true eps_S={true:.4f}")
    assert 7.0 <= r.epsilon <= 8.3


def test_auc_near_the_truth_at_25000_runs():
    a = simulate_s1(89.128, 1.0, 500, 25_000, seed=0)
    r = estimate_epsilon(a.scores[0], a.labels, DELTA)
    true = pld_epsilon(89.128, 1.0, 500)
    print(f"\nS1 q=1 sigma=89.128 T=500 R=25000: auc eps={r.epsilon:.4f} (mu={r.mu:.4f}); true {true:.4f}")
    assert 0.95 * true <= r.epsilon <= true


def test_q1_true_epsilon_closed_form_agrees_with_accountant():
    # S1 at q = 1 is a Gaussian mechanism: sensitivity 2 T C, noise std sqrt(T) sigma C,
    # i.e. mu = 2 sqrt(T) / sigma GDP.
    mu = 2 * math.sqrt(500) / 89.128
    assert gdp_epsilon(mu, DELTA) == pytest.approx(pld_epsilon(89.128, 1.0, 500), abs=1e-4)


# ---------------------------------------------------------------------------
# Validity of the auc estimator, by simulation with known epsilon
# ---------------------------------------------------------------------------


def _exceed_limit(n_audits: int, alpha: float = 0.05) -> int:
    """Largest exceedance count a level-alpha estimator shows with probability 0.999."""
    return int(stats.binom.ppf(0.999, n_audits, alpha))


@pytest.mark.slow
def test_auc_validity_on_gaussian_scores():
    # N(mu, 1) against N(0, 1) is exactly mu-GDP, the least favourable case of the assumption.
    rows, total, n_audits = [], 0, 300
    for mu in (0.0, 0.5, 1.0, 2.0, 3.0):
        true = gdp_epsilon(mu, DELTA) if mu > 0 else 0.0
        for n_pos, n_neg in ((50, 50), (300, 300), (100, 1000), (2000, 2000)):
            rng = np.random.default_rng([int(mu * 10), n_pos, n_neg])
            y = np.r_[np.ones(n_pos), np.zeros(n_neg)]
            eps = np.array([estimate_epsilon(np.r_[rng.normal(mu, 1, n_pos), rng.normal(0, 1, n_neg)], y,
                                             DELTA).epsilon for _ in range(n_audits)])
            k = int(np.sum(eps > true))
            rows.append(f"mu={mu} n={n_pos},{n_neg}: {k}/{n_audits}")
            total += k
            assert k <= _exceed_limit(n_audits), rows[-1]
    print("\nauc exceedances (alpha 0.05): " + "; ".join(rows))
    assert total / (20 * n_audits) <= 0.05


S1_VALIDITY = [
    # (q, target eps_S, runs per world, audits): sigma calibrated with subaudit's accountant,
    # the true epsilon from dp-accounting's PLD (independent)
    (1.0, 4.0, 1000, 400),
    (0.25, 4.0, 1000, 300),
    (0.0625, 4.0, 1000, 300),
    (0.0625, 8.0, 500, 300),
]


@pytest.mark.slow
@pytest.mark.parametrize("q,target,runs,n_audits", S1_VALIDITY)
def test_auc_validity_on_s1(q, target, runs, n_audits):
    from subaudit.accounting import calibrate_sigma

    sigma = calibrate_sigma(target, q, 500, DELTA, "substitute")
    true = pld_epsilon(sigma, q, 500)
    auc = np.empty(n_audits)
    paper = np.empty(n_audits)
    for i in range(n_audits):
        a = simulate_s1(sigma, q, 500, runs, seed=10_000 + i)
        auc[i] = estimate_epsilon(a.scores[0], a.labels, DELTA).epsilon
        paper[i] = estimate_epsilon(a.scores[0], a.labels, DELTA, estimator="paper").epsilon
    k, k_paper = int(np.sum(auc > true)), int(np.sum(paper > true))
    print(f"\nS1 q={q} sigma={sigma:.4f} T=500 {runs}/world, {n_audits} audits, true eps {true:.4f}: auc exceeds "
          f"{k}/{n_audits}, median {np.median(auc):.3f}; paper exceeds {k_paper}/{n_audits}, "
          f"median {np.median(paper):.3f}; allowed <= {_exceed_limit(n_audits)}")
    assert k <= _exceed_limit(n_audits)
    assert np.median(auc) > 0.8 * true  # informative, not valid by being empty


# ---------------------------------------------------------------------------
# Stronger than the best public valid estimator (jax_privacy's GDP-Bonferroni)
# ---------------------------------------------------------------------------


def test_jax_privacy_reading_reproduces_the_package():
    """Outputs of jax_privacy's own ``epsilon_from_gdp`` (commit 8967688c), pinned."""
    rng = np.random.default_rng(20261123)
    for mu, n, expected in ((0.5, 1000, 1.1249762570395574), (1.0, 1000, 3.5145875945959264),
                            (1.0, 10000, 4.006948628053536)):
        pos, neg = rng.normal(mu, 1, n), rng.normal(0, 1, n)
        assert jax_privacy_reference.epsilon_from_gdp(pos, neg, 0.05, DELTA) == pytest.approx(expected, abs=2e-6)


def _beats_jax_privacy(draw, n_sets, what):
    """auc against jax_privacy's GDP estimator on the same score sets: higher median and p10."""
    ours, theirs = np.empty(n_sets), np.empty(n_sets)
    for i in range(n_sets):
        pos, neg = draw(i)
        ours[i] = estimate_epsilon(np.r_[pos, neg], np.r_[np.ones(len(pos)), np.zeros(len(neg))], DELTA).epsilon
        theirs[i] = jax_privacy_reference.epsilon_from_gdp(pos, neg, 0.05, DELTA)
    print(f"\n{what}, {n_sets} sets: auc median {np.median(ours):.3f} p10 {np.percentile(ours, 10):.3f}; "
          f"jax_privacy GDP median {np.median(theirs):.3f} p10 {np.percentile(theirs, 10):.3f}")
    assert np.median(ours) > np.median(theirs)
    assert np.percentile(ours, 10) > np.percentile(theirs, 10)


@pytest.mark.slow
@pytest.mark.parametrize("mu,n", [(0.5, 1000), (1.0, 1000), (1.0, 10_000)])
def test_auc_beats_jax_privacy_on_gaussian_scores(mu, n):
    def draw(i):
        rng = np.random.default_rng([7, i])
        return rng.normal(mu, 1, n), rng.normal(0, 1, n)

    _beats_jax_privacy(draw, 60, f"N({mu},1) vs N(0,1), {n} per world, true {gdp_epsilon(mu, DELTA):.3f}")


@pytest.mark.slow
@pytest.mark.parametrize("q,sigma,runs", [(1.0, 89.128, 5000), (1.0, 89.128, 1000), (0.0625, 3.0172, 1000)])
def test_auc_beats_jax_privacy_on_s1_scores(q, sigma, runs):
    def draw(i):
        a = simulate_s1(sigma, q, 500, runs, seed=500 + i)
        return a.scores[0][a.labels == 1], a.scores[0][a.labels == 0]

    _beats_jax_privacy(draw, 30, f"S1 q={q} sigma={sigma} {runs}/world")


def test_estimate_in_out_is_estimate_epsilon_with_labels():
    from subaudit.estimation import estimate_in_out

    rng = np.random.default_rng(11)
    pos, neg = rng.normal(2.0, 1.0, 300), rng.normal(0.0, 1.0, 500)
    for estimator in ESTIMATORS:
        got = estimate_in_out(pos, neg, 1e-5, 0.05, estimator)
        ref = estimate_epsilon(np.r_[pos, neg], np.r_[np.ones(300), np.zeros(500)], 1e-5, 0.05, estimator)
        assert got == ref and got.estimator == estimator
        assert (got.n_positive, got.n_negative) == (300, 500)
