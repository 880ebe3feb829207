"""Tests for subaudit.estimation.paper: the paper's estimator by hand and on the paper's S1 numbers."""

from __future__ import annotations

import math

import numpy as np
import pytest
from scipy import stats

from dp_accounting_reference import pld_epsilon
from subaudit.accounting.gdp import gdp_delta, gdp_epsilon
from subaudit.estimation import estimate_epsilon
from subaudit.scenarios.s1 import simulate_s1

DELTA = 1e-5


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


def test_q1_true_epsilon_closed_form_agrees_with_accountant():
    # S1 at q = 1 is a Gaussian mechanism: sensitivity 2 T C, noise std sqrt(T) sigma C,
    # i.e. mu = 2 sqrt(T) / sigma GDP.
    mu = 2 * math.sqrt(500) / 89.128
    assert gdp_epsilon(mu, DELTA) == pytest.approx(pld_epsilon(89.128, 1.0, 500), abs=1e-4)
