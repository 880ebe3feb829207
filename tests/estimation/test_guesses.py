"""Guess rules and the guess-count search of one-run audits (subaudit.estimation.guesses): hand
examples, ties by index, each registered rule against its function, the search's levels."""

from __future__ import annotations

import numpy as np
import pytest

from subaudit.estimation.guesses import (
    GUESS_RULES,
    GuessSearch,
    default_guess_grid,
    default_guess_rule,
    guesses_from_scores,
    kary_guesses_from_scores,
    magnitude_guesses_from_scores,
)
from subaudit.estimation.one_run import best_one_run_epsilon
from subaudit.validation import ParameterError


def test_guesses_from_scores_hand_example():
    #          0     1     2     3     4     5
    scores = [0.9, 0.1, 0.8, 0.3, 0.5, 0.2]
    inserted = np.array([True, False, False, False, True, True])
    # ranking, highest first: 0 (in), 2 (out), 4 (in), 3 (out), 5 (in), 1 (out)
    assert guesses_from_scores(scores, inserted, 0) == (0, 0)
    assert guesses_from_scores(scores, inserted, 2) == (2, 2)  # + on 0 (right), - on 1 (right)
    assert guesses_from_scores(scores, inserted, 3) == (3, 2)  # + on 0, 2 (1 right), - on 1 (right)
    assert guesses_from_scores(scores, inserted, 4) == (4, 2)  # + on 0, 2; - on 1, 5 (in: wrong)
    assert guesses_from_scores(scores, inserted, 6) == (6, 4)
    assert guesses_from_scores(scores, inserted, 3, one_sided=True) == (3, 2)  # 0, 2, 4
    assert guesses_from_scores(scores, inserted, 1, one_sided=True) == (1, 1)
    # ties broken by index, not by the labels: + on canary 0 (out), - on canary 3 (in)
    assert guesses_from_scores([1.0, 1.0, 1.0, 1.0], np.array([False, True, False, True]), 2) == (2, 0)
    assert guesses_from_scores([1.0, 1.0, 1.0, 1.0], np.array([True, False, False, False]), 2) == (2, 2)
    with pytest.raises(ParameterError) as err:
        guesses_from_scores(scores, inserted, 7)
    assert err.value.name == "guesses"
    with pytest.raises(ParameterError) as err:
        guesses_from_scores(scores, [1, 0, 0, 0, 1, 1], 2)
    assert err.value.name == "inserted"
    with pytest.raises(ParameterError) as err:
        guesses_from_scores([0.1, float("nan")], np.array([True, False]), 1)
    assert err.value.name == "scores"


def test_kary_guesses_from_scores_hand_example():
    scores = np.array([[0.9, 0.0, 0.1],   # guess 0, margin 0.8, truth 0: right
                       [0.2, 0.3, 0.1],   # guess 1, margin 0.1, truth 2: wrong
                       [0.0, 0.1, 0.8],   # guess 2, margin 0.7, truth 1: wrong
                       [0.5, 0.6, 0.0]])  # guess 1, margin 0.1, truth 1: right (a high top score, a close second)
    truth = np.array([0, 2, 1, 1])
    assert kary_guesses_from_scores(scores, truth, 1) == (1, 1)
    assert kary_guesses_from_scores(scores, truth, 2) == (2, 1)
    assert kary_guesses_from_scores(scores, truth, 3) == (3, 1)   # the tie at 0.1 by index: row 1
    assert kary_guesses_from_scores(scores, truth, 4) == (4, 2)


def test_each_guess_rule_counts_what_its_function_does():
    """The registry's rules (types) count the right guesses of their functions, for every r; a
    rule of the other kind of game (pair bits or k-ary values) is refused, naming the rules that fit."""
    rng = np.random.default_rng(3)
    m = 60
    bits = rng.random(m) < 0.5
    scores = bits + rng.standard_normal(m) - 0.5
    values = rng.integers(0, 4, m)
    value_scores = np.eye(4)[values] + rng.standard_normal((m, 4))
    functions = {"top-bottom": lambda r: guesses_from_scores(scores, bits, r),
                 "top": lambda r: guesses_from_scores(scores, bits, r, one_sided=True),
                 "magnitude": lambda r: magnitude_guesses_from_scores(scores, bits, r),
                 "top-value": lambda r: kary_guesses_from_scores(value_scores, values, r)}
    assert set(functions) == set(GUESS_RULES)
    for name, rule in GUESS_RULES.items():
        size, count = rule.counter(value_scores, values) if rule.kary else rule.counter(scores, bits)
        assert size == m and [count(r) for r in range(m + 1)] == [functions[name](r)[1] for r in range(m + 1)], name
        assert rule.description
    assert default_guess_rule(2) == "top-bottom" and default_guess_rule(4) == "top-value"
    with pytest.raises(ParameterError) as err:
        best_one_run_epsilon(value_scores, values, 1e-5, 0.05, "mahloujifar", k=4, rule="magnitude")
    assert (err.value.name, err.value.allowed) == ("rule", "top-value (the rules for k = 4)")
    with pytest.raises(ParameterError) as err:
        best_one_run_epsilon(scores, bits, 1e-5, 0.05, "mahloujifar", rule="top-value")
    assert err.value.name == "rule" and err.value.allowed.startswith("top-bottom or top or magnitude")


def test_a_guess_search_tries_its_counts_each_at_its_level():
    search = GuessSearch(grid=[40, 10, 10, 20])
    assert search.counts(40) == [10, 20, 40] and search.level(0.06, 3) == pytest.approx(0.02)
    assert GuessSearch(bonferroni=False).level(0.05, 11) == 0.05
    assert GuessSearch().counts(2000) == default_guess_grid(2000)
    for grid in ([], [0, 3], [41]):
        with pytest.raises(ParameterError) as err:
            GuessSearch(grid=grid).counts(40)
        assert err.value.name == "grid"
