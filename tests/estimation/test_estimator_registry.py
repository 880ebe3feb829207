"""Tests for subaudit.estimation.registry (through the package's re-exports): the registry, the
result every estimator returns, degenerate inputs and the entry points estimate_epsilon,
estimate_in_out, estimate_over_steps and step_estimates."""

from __future__ import annotations

import math

import numpy as np
import pytest

from subaudit import estimation as est
from subaudit.accounting.gdp import gdp_epsilon
from subaudit.estimation import (
    ESTIMATORS,
    AuditEstimate,
    estimate_epsilon,
    estimate_over_steps,
)
from subaudit.scenarios.s1 import simulate_s1
from subaudit.validation import ParameterError

DELTA = 1e-5


# ---------------------------------------------------------------------------
# The registry and the estimates it returns
# ---------------------------------------------------------------------------


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


def test_to_dict_and_frozen():
    r = estimate_epsilon([1.0, 2.0, 3.0, 0.0, -1.0, 0.5], [1, 1, 1, 0, 0, 0], DELTA, estimator="paper")
    d = r.to_dict()
    assert set(d) >= {"epsilon", "mu", "estimator", "alpha", "delta", "threshold", "fpr_ub",
                      "fnr_ub", "n_positive", "n_negative"}
    assert d["epsilon"] == r.epsilon and d["estimator"] == "paper"
    with pytest.raises(AttributeError):
        r.epsilon = 3.0  # type: ignore[misc]
    assert isinstance(r, AuditEstimate)


# ---------------------------------------------------------------------------
# Every estimator: no evidence, degenerate inputs, parameter errors
# ---------------------------------------------------------------------------


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


# ---------------------------------------------------------------------------
# Other shapes of input
# ---------------------------------------------------------------------------


def test_estimate_over_steps():
    a = simulate_s1(5.0, 0.5, 30, 300, seed=3, checkpoints=[5, 15, 30])
    for name in ESTIMATORS:
        out = estimate_over_steps(a.scores, a.labels, DELTA, estimator=name)
        assert len(out) == 3
        for row, r in zip(a.scores, out):
            assert r == estimate_epsilon(row, a.labels, DELTA, estimator=name)
    with pytest.raises(ValueError):
        estimate_over_steps(a.scores[0], a.labels, DELTA)


def test_step_estimates_are_one_record_per_step_and_estimator_in_step_order():
    a = simulate_s1(5.0, 0.5, 30, 300, seed=3, checkpoints=[5, 15, 30])
    records = est.step_estimates(a.scores, a.labels, a.steps, DELTA, 0.05, ["paper", "auc"])
    assert [(r["step"], r["estimator"]) for r in records] == [
        (s, e) for s in (5, 15, 30) for e in ("paper", "auc")]
    for r in records:
        row = a.scores[list(a.steps).index(r["step"])]
        assert r == {"step": r["step"], **estimate_epsilon(row, a.labels, DELTA, 0.05, r["estimator"]).to_dict()}


def test_estimate_in_out_is_estimate_epsilon_with_labels():
    from subaudit.estimation import estimate_in_out

    rng = np.random.default_rng(11)
    pos, neg = rng.normal(2.0, 1.0, 300), rng.normal(0.0, 1.0, 500)
    for estimator in ESTIMATORS:
        got = estimate_in_out(pos, neg, 1e-5, 0.05, estimator)
        ref = estimate_epsilon(np.r_[pos, neg], np.r_[np.ones(300), np.zeros(500)], 1e-5, 0.05, estimator)
        assert got == ref and got.estimator == estimator
        assert (got.n_positive, got.n_negative) == (300, 500)
