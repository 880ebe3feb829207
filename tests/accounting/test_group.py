"""Tests of group privacy (Theorem 4.1, subaudit.accounting.group) against independent
add/remove computations and dp-accounting."""

from __future__ import annotations

import math

import pytest
from pld_reference import pld_epsilon, pld_history_epsilon

from subaudit import accounting as acc
from subaudit.accounting import epsilon

#: The first history of test_composition.py: sigma and q change.
HISTORY = [(1.0, 0.01, 300), (1.5, 0.05, 200), (0.8, 0.002, 1000)]


@pytest.mark.parametrize(
    "sigma,q,steps", [(1.677, 0.0625, 500), (89.128, 1.0, 500), (1.5, 0.04, 2250), (5.0, 0.25, 200)]
)
def test_group_privacy_theorem(sigma, q, steps):
    delta = 1e-5
    g = epsilon(sigma, q, steps, delta, "group")
    s = epsilon(sigma, q, steps, delta, "substitute")
    assert g.adjacency == "group"
    assert g.epsilon >= s.epsilon
    dp = g.delta_add_remove
    assert dp is not None and 0 < dp < delta / 2
    # (1 + e^{eps_AR(delta')}) delta' = delta, and eps_S = 2 eps_AR(delta')
    assert (1 + math.exp(g.epsilon_add_remove)) * dp == pytest.approx(delta, rel=1e-8)
    assert g.epsilon == pytest.approx(2 * g.epsilon_add_remove, rel=1e-12)
    # eps_AR(delta') agrees with an independent add/remove computation at that delta'
    ar = epsilon(sigma, q, steps, dp, "add-remove")
    assert g.epsilon_add_remove == pytest.approx(ar.epsilon, rel=2e-3)
    assert g.epsilon_add_remove >= ar.epsilon_estimate
    assert s.delta_add_remove is None


def test_group_with_pld_reference():
    # same construction with dp-accounting's add/remove PLD at delta'
    g = epsilon(1.677, 0.0625, 500, 1e-5, "group")
    ref = pld_epsilon(1.677, 0.0625, 500, g.delta_add_remove, "add-remove")
    assert g.epsilon == pytest.approx(2 * ref, rel=0.01)


def test_history_group_is_twice_add_remove_at_its_delta():
    history = HISTORY
    g = acc.epsilon_of_history(history, 1e-5, "group")
    d = g.delta_add_remove
    assert (1 + math.exp(g.epsilon_add_remove)) * d == pytest.approx(1e-5, rel=1e-6)
    assert g.epsilon == pytest.approx(2 * pld_history_epsilon(history, d, "add-remove"), rel=0.01)
    assert g.epsilon > acc.epsilon_of_history(history, 1e-5, "substitute").epsilon
