"""Tests for subaudit.estimation.auc: its parts against independent computations, its validity by
simulation with known epsilon, and its strength against jax_privacy's valid GDP estimator."""

from __future__ import annotations

import math

import numpy as np
import pytest
from scipy import stats

import jax_privacy_reference
from dp_accounting_reference import pld_epsilon
from subaudit.accounting.gdp import gdp_epsilon
from subaudit.estimation import auc as auc_estimator
from subaudit.estimation import estimate_epsilon, mu_lower
from subaudit.estimation.roc import mann_whitney_auc
from subaudit.scenarios.s1 import simulate_s1

DELTA = 1e-5


# ---------------------------------------------------------------------------
# The auc estimator: its parts against independent computations
# ---------------------------------------------------------------------------


@pytest.mark.parametrize("mu", [0.0, 0.4, 1.0, 2.5, 5.0])
def test_binormal_auc_moments_against_scipy_and_integration(mu):
    a, sd = auc_estimator.binormal_auc_moments(np.array(mu), 30, 50)
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
        aucs = np.array([mann_whitney_auc(rng.normal(mu, 1, n_pos), rng.normal(0, 1, n_neg), 0.0)
                         for _ in range(20_000)])
        a, sd = auc_estimator.binormal_auc_moments(np.array(mu), n_pos, n_neg)
        assert aucs.mean() == pytest.approx(a, abs=4 * sd / math.sqrt(20_000))
        assert aucs.std() == pytest.approx(sd, rel=0.03)


def test_auc_mu_is_the_first_mu_the_test_does_not_reject():
    z = stats.norm.isf(0.04)
    for auc, n_pos, n_neg in [(0.8, 500, 500), (0.97, 1000, 200), (1.0, 50, 50)]:
        mu = auc_estimator.auc_mu_lower(auc, n_pos, n_neg, 0.04)
        a, sd = auc_estimator.binormal_auc_moments(np.array(mu), n_pos, n_neg)
        assert a + z * sd == pytest.approx(auc, abs=1e-10)
        grid = np.linspace(0, mu, 200)[:-1]
        a, sd = auc_estimator.binormal_auc_moments(grid, n_pos, n_neg)
        assert np.all(a + z * sd < auc)  # every smaller mu is rejected
    assert auc_estimator.auc_mu_lower(0.5, 100, 100, 0.04) == 0.0  # no evidence: not even mu = 0 is rejected


def test_tail_ranks_and_bounds_by_hand():
    assert auc_estimator.tail_ranks(7).tolist() == [1]
    assert auc_estimator.tail_ranks(1000).tolist() == [1, 2, 4, 8, 16, 32, 64]
    assert auc_estimator.tail_ranks(25_000).tolist() == [2 ** j for j in range(12)]
    neg = np.arange(16.0)                      # 15 is the highest, 14 the 2nd
    pos = np.array([15.5, 14.5, 14.0, 3.0, 20.0])
    thr, fp, fn, fpr_ub, fnr_ub, mu = auc_estimator.tail_bounds(pos, neg, 0.01)
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
    assert r.mu_auc == auc_estimator.auc_mu_lower(r.auc_strict, 400, 400, 0.05 * (1 - auc_estimator.TAIL_SHARE))
    # A canary that acts in 8% of runs, strongly: the AUC barely moves, the top threshold sees it.
    pos = np.r_[rng.normal(0.0, 1.0, 920), rng.normal(50.0, 1.0, 80)]
    neg = rng.normal(0.0, 1.0, 1000)
    r = estimate_epsilon(np.r_[pos, neg], np.r_[np.ones(1000), np.zeros(1000)], DELTA)
    assert r.component == "tail" and r.false_positives == 0 and r.threshold == neg.max()
    assert r.mu == r.mu_tail > r.mu_auc
    _, _, _, fpr_ub, fnr_ub, _ = auc_estimator.tail_bounds(pos, neg, 0.05 * auc_estimator.TAIL_SHARE)
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
# Acceptance: near the truth at the paper's R
# ---------------------------------------------------------------------------


def test_auc_near_the_truth_at_25000_runs():
    a = simulate_s1(89.128, 1.0, 500, 25_000, seed=0)
    r = estimate_epsilon(a.scores[0], a.labels, DELTA)
    true = pld_epsilon(89.128, 1.0, 500)
    print(f"\nS1 q=1 sigma=89.128 T=500 R=25000: auc eps={r.epsilon:.4f} (mu={r.mu:.4f}); true {true:.4f}")
    assert 0.95 * true <= r.epsilon <= true


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
