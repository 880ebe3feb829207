"""One-run procedures on pair scores (subaudit.estimation.procedures): the guess rules by
hand, validity on mechanisms with known epsilon, and the fewest canaries that can show anything."""

from __future__ import annotations

import numpy as np
import pytest
from scipy import stats

from subaudit.accounting.gdp import gdp_epsilon
from subaudit.estimation.one_run import default_guess_grid, fdp_epsilon, steinke_epsilon
from subaudit.estimation.procedures import PROCEDURES, least_canaries, perfect_epsilon, procedure_epsilon
from subaudit.validation import ParameterError

DELTA = 1e-5


def _by_hand(procedure: str, scores: np.ndarray, bits: np.ndarray, alpha: float = 0.05) -> float:
    """The procedure written out: statistic, guesses at each grid size, Bonferroni."""
    m = len(bits)
    grid = default_guess_grid(m)
    best = 0.0
    for r in grid:
        if procedure == "steinke":
            order = np.argsort(-scores[:, 0], kind="stable")
            up, down = order[:r - r // 2], order[m - r // 2:] if r // 2 else order[:0]
            v = int(bits[up].sum() + (1 - bits[down]).sum())
            best = max(best, steinke_epsilon(m, r, v, DELTA, alpha / len(grid)))
        else:
            t = scores[:, 0] - scores[:, 1]
            top = np.argsort(-np.abs(t), kind="stable")[:r]
            v = int(np.sum((t[top] > 0) == (bits[top] == 1)))
            best = max(best, fdp_epsilon(m, r, v, DELTA, alpha / len(grid)))
    return best


@pytest.mark.parametrize("procedure", list(PROCEDURES))
def test_procedure_is_its_rule_and_estimator(procedure):
    rng = np.random.default_rng(1)
    bits = rng.integers(0, 2, 500)
    scores = np.stack([bits + rng.normal(0, 0.7, 500), rng.normal(0, 0.7, 500)], axis=1)
    got = procedure_epsilon(procedure, scores, bits, DELTA)
    assert got == _by_hand(procedure, scores, bits) and got > 0.5


def test_steinke_is_valid_and_tight_on_randomised_response():
    """Randomised response on each bit is exactly eps-DP in both games, and Steinke et al.'s
    bound is tight for it: over 150 audits the bound exceeds eps at most at the 5% rate
    (a binomial tail at 1e-3 allows 15), and a claim 25% below eps is refuted by most."""
    eps, m, runs = 1.0, 2000, 150
    rng = np.random.default_rng(7)
    flip_rate = 1 / (1 + np.exp(eps))
    bounds = []
    for _ in range(runs):
        bits = rng.integers(0, 2, m)
        said = bits ^ (rng.random(m) < flip_rate)
        u = np.where(said == 1, 1.0, -1.0)
        bounds.append(procedure_epsilon("steinke", np.stack([u, -u], axis=1), bits, DELTA))
    bounds = np.array(bounds)
    assert np.sum(bounds > eps) <= stats.binom.isf(1e-3, runs, 0.05)
    assert np.mean(bounds > 0.75 * eps) > 0.9


@pytest.mark.parametrize("game", ["substitute", "membership"])
def test_pair_procedures_are_valid_on_the_gaussian_mechanism(game):
    """Gradient canaries at q = 1, T = 1 are the Gaussian mechanism: substitute scores
    (u, -u), u = +-1 + N(0, s^2), are 2/s-GDP per bit; membership scores (b + N(0, s^2), N(0, s^2))
    are 1/s-GDP. Both procedures stay below eps(delta) at the 5% rate and show half of it."""
    s, m, runs = (2.0, 2000, 40) if game == "substitute" else (1.0, 2000, 40)
    eps = gdp_epsilon(2 / s if game == "substitute" else 1 / s, DELTA)
    rng = np.random.default_rng(3)
    found = {p: [] for p in PROCEDURES}
    for _ in range(runs):
        bits = rng.integers(0, 2, m)
        if game == "substitute":
            u = (2 * bits - 1) + rng.normal(0, s, m)
            scores = np.stack([u, -u], axis=1)
        else:
            scores = np.stack([bits + rng.normal(0, s, m), rng.normal(0, s, m)], axis=1)
        for p in PROCEDURES:
            found[p].append(procedure_epsilon(p, scores, bits, DELTA))
    for p, values in found.items():
        values = np.array(values)
        assert np.sum(values > eps) <= stats.binom.isf(1e-3, runs, 0.05), p
        assert np.median(values) > 0.3 * eps, (p, np.median(values), eps)


@pytest.mark.parametrize("procedure", list(PROCEDURES))
def test_least_canaries_is_where_perfect_guesses_first_show_something(procedure):
    need = least_canaries(procedure, DELTA)
    assert perfect_epsilon(procedure, need - 1, DELTA) == 0.0 < perfect_epsilon(procedure, need, DELTA)
    # more canaries can show more; a sterner confidence needs more of them
    assert perfect_epsilon(procedure, 1000, DELTA) > perfect_epsilon(procedure, 100, DELTA)
    assert least_canaries(procedure, DELTA, 0.001) > need


def test_bad_pair_scores_are_named():
    with pytest.raises(ParameterError, match="scores"):
        procedure_epsilon("steinke", np.zeros((5, 3)), np.zeros(5), DELTA)
    with pytest.raises(ParameterError, match="bits"):
        procedure_epsilon("steinke", np.zeros((5, 2)), np.full(5, 2), DELTA)
    with pytest.raises(ParameterError, match="procedure"):
        procedure_epsilon("nope", np.zeros((5, 2)), np.zeros(5), DELTA)
