"""Tests of calibrate_sigma (subaudit.accounting.calibration): round trips through epsilon
and the published sigma table."""

from __future__ import annotations

import pytest

from subaudit.accounting import calibrate_sigma, epsilon
from subaudit.validation import ParameterError


@pytest.mark.parametrize(
    "target,q,steps,delta,adjacency,paper_sigma",
    [
        (2.0, 1.0, 500, 1e-5, "substitute", 89.128),
        (8.0, 0.25, 500, 1e-5, "substitute", 6.694),
        (4.0, 0.0625, 500, 1e-5, "substitute", 3.017),
        (1.0, 0.0625, 500, 1e-5, "substitute", 10.495),
        (3.0, 0.01, 1000, 1e-8, "add-remove", None),
        (6.0, 0.25, 500, 1e-5, "group", None),
    ],
)
def test_calibration_round_trip(target, q, steps, delta, adjacency, paper_sigma):
    sigma = calibrate_sigma(target, q, steps, delta, adjacency)
    got = epsilon(sigma, q, steps, delta, adjacency).epsilon
    assert got <= target
    assert got == pytest.approx(target, rel=2e-3)
    # smallest such sigma, to relative tolerance 1e-4 (plus a little for eps_error steps)
    assert epsilon(sigma * (1 - 3e-4), q, steps, delta, adjacency).epsilon > target
    if paper_sigma is not None:
        assert sigma == pytest.approx(paper_sigma, rel=0.01)


@pytest.mark.parametrize("target", [0.0, -1.0, float("inf")])
def test_bad_target_epsilon(target):
    with pytest.raises(ParameterError) as info:
        calibrate_sigma(target, 0.1, 100, 1e-5, "substitute")
    assert info.value.name == "target_epsilon"
