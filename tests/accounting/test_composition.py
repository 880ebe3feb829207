"""Tests of the composition (subaudit.accounting.composition, error_budget): both add/remove
directions, and composition over changing settings against dp-accounting."""

from __future__ import annotations

import math

import pytest
from pld_reference import pld_history_epsilon

from subaudit import accounting as acc
from subaudit.accounting import composition, epsilon, error_budget


ADD_GRID = [
    (q, s, t) for q in (0.25, 0.0625, 0.01) for s, t in ((0.6, 500), (1.0, 100), (2.0, 500), (8.0, 2000))
]


@pytest.mark.parametrize("q,sigma,steps", ADD_GRID)
def test_add_direction_never_exceeds_remove_on_grid(q, sigma, steps):
    """The finding documented in the module: the add direction does not dominate.
    Both directions are still computed; this test would flag a change."""
    delta = 1e-5
    d_err = error_budget.REL_DELTA_ERROR * delta
    kinds = ("remove", "add")
    eps_err = error_budget.choose_eps_error(kinds, ((sigma, q, steps),), delta, d_err)
    remove, add = (composition.composed_curve(k, sigma, q, steps, eps_err, d_err, steps).bounds(delta) for k in kinds)
    assert add[1] <= remove[1] + eps_err
    # and the combined add/remove answer is the max over both
    combined = epsilon(sigma, q, steps, delta, "add-remove")
    assert combined.epsilon == pytest.approx(max(remove[2], add[2]), rel=1e-12)


def test_add_direction_stays_below_its_support_bound():
    # add-direction losses are < -log(1-q) each step, so eps_add < T * (-log(1-q));
    # prv-accountant's right-tail-only domain sizing produced 5.5 here (wrapped left tail)
    sigma, q, steps, delta = 0.5, 0.25, 10, 1e-5
    d_err = error_budget.REL_DELTA_ERROR * delta
    eps_err = error_budget.choose_eps_error(("add",), ((sigma, q, steps),), delta, d_err)
    est = composition.composed_curve("add", sigma, q, steps, eps_err, d_err, steps).bounds(delta)[1]
    assert est < -steps * math.log1p(-q)


HISTORIES = [
    [(1.0, 0.01, 300), (1.5, 0.05, 200), (0.8, 0.002, 1000)],   # sigma and q change
    [(4.0, 1.0, 20), (1.2, 0.25, 100), (3.0, 0.0625, 400)],     # a full-batch stretch first
    [(0.9, 0.0625, 100), (0.9, 0.03125, 100), (2.0, 0.0625, 50)],
]


@pytest.mark.parametrize("adjacency", ["substitute", "add-remove"])
@pytest.mark.parametrize("history", HISTORIES)
def test_history_of_three_segments_agrees_with_dp_accounting(history, adjacency):
    ref = pld_history_epsilon(history, 1e-5, adjacency)
    got = acc.epsilon_of_history(history, 1e-5, adjacency)
    assert got.epsilon == pytest.approx(ref, rel=0.01)
    assert ref * (1 - 5e-3) <= got.epsilon_estimate <= ref * (1 + 5e-4)
    assert got.epsilon_lower <= got.epsilon_estimate <= got.epsilon
    assert got.steps == sum(t for *_, t in history) and math.isnan(got.sigma)
    assert got.segments == tuple(history)


def test_history_order_and_splitting_do_not_matter():
    a = acc.epsilon_of_history([(1.0, 0.01, 300), (1.5, 0.05, 200)], 1e-5, "substitute")
    b = acc.epsilon_of_history([(1.5, 0.05, 100), (1.0, 0.01, 300), (1.5, 0.05, 100)], 1e-5,
                               "substitute")
    assert b.segments == ((1.5, 0.05, 200), (1.0, 0.01, 300))
    assert b.epsilon == pytest.approx(a.epsilon, rel=2e-3)
    # one setting split into stretches is the homogeneous composition, exactly
    one = acc.epsilon_of_history([(1.0, 0.01, 100), (1.0, 0.01, 200)], 1e-5, "add-remove")
    assert one == epsilon(1.0, 0.01, 300, 1e-5, "add-remove")


def test_heterogeneous_path_equals_homogeneous_when_settings_nearly_agree():
    # two segments whose settings differ by 1e-12 take the heterogeneous path; they must
    # give the homogeneous answer of the merged training
    het = acc.epsilon_of_history([(1.2, 0.05, 150), (1.2 + 1e-12, 0.05, 150)], 1e-5, "substitute")
    hom = epsilon(1.2, 0.05, 300, 1e-5, "substitute")
    assert len(het.segments) == 2
    assert het.epsilon_estimate == pytest.approx(hom.epsilon_estimate, rel=2e-3)
