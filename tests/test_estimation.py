"""Tests for subaudit.estimation (empirical epsilon lower bounds)."""

from __future__ import annotations

import math

import dp_accounting
import numpy as np
import pytest
from dp_accounting.pld import pld_privacy_accountant, privacy_loss_distribution, privacy_loss_mechanism
from scipy import stats

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
    assert r.estimator == "paper" and r.seed is None
    assert r.eval_positive == 25 and r.eval_negative == 25


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
    assert list(ESTIMATORS) == ["heldout", "paper"]
    assert ESTIMATORS["heldout"].valid and ESTIMATORS["heldout"].seeded
    assert not ESTIMATORS["paper"].valid and not ESTIMATORS["paper"].seeded
    assert ESTIMATORS["heldout"].linestyle != ESTIMATORS["paper"].linestyle


def test_estimates_have_common_fields_and_their_own_details():
    rng = np.random.default_rng(0)
    scores = np.r_[rng.normal(1, 1, 200), rng.normal(0, 1, 200)]
    labels = np.r_[np.ones(200), np.zeros(200)]
    for name in ESTIMATORS:
        e = estimate_epsilon(scores, labels, delta=1e-5, estimator=name, seed=3)
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
# Heldout estimator mechanics
# ---------------------------------------------------------------------------


def test_heldout_split_is_stratified_and_threshold_independent_of_evaluation():
    rng = np.random.default_rng(0)
    y = np.r_[np.ones(101, np.int8), np.zeros(99, np.int8)]
    s = rng.normal(size=200) + 1.5 * y
    sel, ev = est._split(y, 5)
    assert sel.sum() == 50 + 49 and ev.sum() == 51 + 50
    assert y[sel].sum() == 50 and y[ev].sum() == 51
    r1 = estimate_epsilon(s, y, DELTA, estimator="heldout", seed=5)
    assert (r1.eval_positive, r1.eval_negative) == (51, 50)
    assert (r1.n_positive, r1.n_negative) == (101, 99)
    # Changing evaluation scores must not move the threshold.
    s2 = s.copy()
    s2[ev] = rng.normal(size=int(ev.sum())) * 10
    r2 = estimate_epsilon(s2, y, DELTA, estimator="heldout", seed=5)
    assert r2.threshold == r1.threshold
    # Evaluation counts are the counts at the threshold on the evaluation part.
    pos, neg = s2[ev & (y == 1)], s2[ev & (y == 0)]
    assert r2.false_positives == int(np.sum(neg >= r2.threshold))
    assert r2.false_negatives == int(np.sum(pos < r2.threshold))
    assert r2.fpr_ub == pytest.approx(clopper_pearson_upper(r2.false_positives, 50, 0.05))
    assert r2.mu == pytest.approx(mu_lower(r2.fpr_ub, r2.fnr_ub))
    # Same seed -> same result; another seed -> another split.
    assert estimate_epsilon(s, y, DELTA, seed=5) == r1
    assert est._split(y, 6)[0].tolist() != sel.tolist()


def test_heldout_perfect_separation_finite():
    scores = np.r_[np.arange(100) + 1000.0, np.arange(100.0)]
    labels = np.r_[np.ones(100), np.zeros(100)]
    r = estimate_epsilon(scores, labels, DELTA)
    # the selected threshold lies in the gap (midpoint rule), so no evaluation run is misclassified
    assert 99.0 < r.threshold < 1000.0
    assert r.false_positives == 0 and r.false_negatives == 0
    ub = 1 - 0.025 ** (1 / 50)
    assert r.fpr_ub == pytest.approx(ub, rel=1e-12) and r.fnr_ub == pytest.approx(ub, rel=1e-12)
    assert math.isfinite(r.epsilon) and r.epsilon > 0
    assert r.epsilon < estimate_epsilon(scores, labels, DELTA, estimator="paper").epsilon


@pytest.mark.parametrize("estimator", ESTIMATORS)
def test_identical_scores_give_zero(estimator):
    r = estimate_epsilon(np.full(40, 0.7), np.r_[np.ones(20), np.zeros(20)], DELTA, estimator=estimator)
    assert r.epsilon == 0.0
    assert r.mu == -math.inf


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


def test_heldout_needs_two_runs_per_class():
    with pytest.raises(ValueError, match="at least 2"):
        estimate_epsilon([1.0, 2.0, 3.0], [1, 0, 0], DELTA, estimator="heldout")
    # the paper estimator is defined there
    assert estimate_epsilon([1.0, 2.0, 3.0], [1, 0, 0], DELTA, estimator="paper").epsilon == 0.0


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
        out = estimate_over_steps(a.scores, a.labels, DELTA, estimator=name, seed=9)
        assert len(out) == 3
        for row, r in zip(a.scores, out):
            assert r == estimate_epsilon(row, a.labels, DELTA, estimator=name, seed=9)
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


def test_heldout_not_vacuous_q1():
    a = simulate_s1(89.128, 1.0, 500, 25_000, seed=0)
    r = estimate_epsilon(a.scores[0], a.labels, DELTA, estimator="heldout", seed=1)
    print(f"\nS1 q=1 sigma=89.128 T=500 R=25000: heldout eps={r.epsilon:.4f} (mu={r.mu:.4f})")
    assert r.epsilon > 1.0


def test_q1_true_epsilon_closed_form_agrees_with_accountant():
    # S1 at q = 1 is a Gaussian mechanism: sensitivity 2 T C, noise std sqrt(T) sigma C,
    # i.e. mu = 2 sqrt(T) / sigma GDP.
    mu = 2 * math.sqrt(500) / 89.128
    assert gdp_epsilon(mu, DELTA) == pytest.approx(pld_epsilon(89.128, 1.0, 500), abs=1e-4)


# ---------------------------------------------------------------------------
# Validity of the heldout estimator
# ---------------------------------------------------------------------------

VALIDITY_SETTINGS = [
    # (q, sigma, steps, runs per world, number of audits)
    (1.0, 89.128, 500, 2000, 400),
    (0.25, 12.115, 500, 2000, 300),
]


@pytest.mark.slow
@pytest.mark.parametrize("q,sigma,steps,runs,n_audits", VALIDITY_SETTINGS)
def test_heldout_validity(q, sigma, steps, runs, n_audits):
    alpha = 0.05
    if q == 1.0:
        true = gdp_epsilon(2 * math.sqrt(steps) / sigma, DELTA)  # exact: Gaussian mechanism
        assert true == pytest.approx(pld_epsilon(sigma, q, steps), abs=1e-4)
    else:
        true = pld_epsilon(sigma, q, steps)
    held = np.empty(n_audits)
    paper = np.empty(n_audits)
    for i in range(n_audits):
        a = simulate_s1(sigma, q, steps, runs, seed=10_000 + i)
        held[i] = estimate_epsilon(a.scores[0], a.labels, DELTA, alpha=alpha, estimator="heldout", seed=i).epsilon
        paper[i] = estimate_epsilon(a.scores[0], a.labels, DELTA, alpha=alpha, estimator="paper").epsilon
    n_held = int(np.sum(held > true))
    n_paper = int(np.sum(paper > true))
    limit = int(stats.binom.ppf(0.999, n_audits, alpha))
    print(
        f"\nvalidity q={q} sigma={sigma} T={steps} R={runs}/world, {n_audits} audits, true eps={true:.4f}: "
        f"heldout exceeds {n_held}/{n_audits} ({n_held / n_audits:.3f}), mean {held.mean():.3f}; "
        f"paper exceeds {n_paper}/{n_audits} ({n_paper / n_audits:.3f}), mean {paper.mean():.3f}; "
        f"alpha={alpha}, allowed count <= {limit}"
    )
    assert n_held <= limit
    # the audit is informative: heldout estimates are not all zero
    assert np.median(held) > 0.3 * true
