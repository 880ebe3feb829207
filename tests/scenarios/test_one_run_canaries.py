"""One-run substitute audits (subaudit.scenarios.one_run_canaries): canaries, training, estimates."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch
from scipy import stats

from subaudit.engine import MLP, DPConfig, InputCanaries, OneHotCanaries, Records
from subaudit.accounting.gdp import gdp_epsilon
from subaudit.scenarios.one_run_canaries import (
    CANARY_KINDS,
    gradient_canaries,
    label_canaries,
    one_run_audit,
    one_run_estimates,
)
from subaudit.scenarios import SCENARIOS
from subaudit.validation import ParameterError


def _data(n: int, d: int, k: int, dead: int, seed: int) -> Records:
    """Gaussian features whose last ``dead`` columns are always 0."""
    g = torch.Generator().manual_seed(seed)
    x = torch.randn(n, d, generator=g)
    x[:, d - dead:] = 0.0
    return Records(x, torch.randint(0, k, (n,), generator=g))


def test_registry():
    assert list(CANARY_KINDS) == ["gradient", "label"]
    for kind in CANARY_KINDS.values():
        assert kind.compare_with in SCENARIOS and kind.description


def test_gradient_canaries_sit_on_coordinates_no_record_moves():
    model = MLP((12, 3))
    data = _data(60, 12, 3, dead=4, seed=1)
    dp = DPConfig(steps=10, sampling_rate=0.5, noise_multiplier=1.0, clip=1.0, lr=0.1)
    canaries = gradient_canaries(model, data, data, dp, 9, seed=2)
    assert isinstance(canaries, OneHotCanaries) and canaries.count == 9 and canaries.clip == dp.clip
    # weight (3, 12) row-major: the dead features are columns 8..11 of each class row; they never
    # move in noiseless training, so they are the least updated, taken in index order
    dead = [c * 12 + f for c in range(3) for f in range(8, 12)]
    assert canaries.index.tolist() == dead[:9]
    with pytest.raises(ParameterError, match="canaries"):
        gradient_canaries(model, data, data, dp, model.num_params + 1)


def test_label_canaries():
    model = MLP((5, 4))
    aux = Records(torch.randn(30, 5), torch.randint(0, 4, (30,)))
    c = label_canaries(model, aux, aux, None, 12, seed=3)
    assert isinstance(c, InputCanaries) and c.count == 12
    assert torch.equal(c.x[:, 0], c.x[:, 1])                     # same input, two labels
    assert bool((c.y[:, 0] != c.y[:, 1]).all())
    rows = [int(torch.nonzero((aux.x == c.x[i, 0]).all(1))[0]) for i in range(12)]
    assert len(set(rows)) == 12 and [int(aux.y[r]) for r in rows] == c.y[:, 0].tolist()
    again = label_canaries(model, aux, aux, None, 12, seed=3)
    assert torch.equal(again.x, c.x) and torch.equal(again.y, c.y)
    with pytest.raises(ParameterError, match="auxiliary"):
        label_canaries(model, aux, aux, None, 31)


def test_one_run_gradient_audit_has_the_closed_form_accuracy():
    """On coordinates no record touches, canary i's score after T steps at q = 1 is
    (lr / B)(T C s_i + N(0, T sigma^2 C^2)): its sign is right with probability
    Phi(sqrt(T) / sigma), independently across canaries and runs."""
    model = MLP((30, 3))
    data = _data(50, 30, 3, dead=20, seed=4)
    steps, sigma = 25, 5.0
    dp = DPConfig(steps=steps, sampling_rate=1.0, noise_multiplier=sigma, clip=1.0, lr=0.1)
    canaries = gradient_canaries(model, data, data, dp, 40, seed=5)
    audit = one_run_audit(model, data, canaries, dp, seed=6, repeats=25, dtype=torch.float64)
    assert audit.scores.shape == audit.bits.shape == (25, 40) and audit.seconds > 0
    right = np.mean((audit.scores > 0) == audit.bits.astype(bool))
    want = stats.norm.cdf(math.sqrt(steps) / sigma)
    assert right == pytest.approx(want, abs=4 * math.sqrt(want * (1 - want) / 1000))
    assert 0.4 < audit.bits.mean() < 0.6                           # fair coins
    # the same seed gives the same audit
    again = one_run_audit(model, data, canaries, dp, seed=6, repeats=25, dtype=torch.float64)
    assert np.array_equal(again.scores, audit.scores) and np.array_equal(again.bits, audit.bits)
    # the one-run bounds are valid: below the epsilon of each canary's own mechanism
    # (a Gaussian mechanism, mu = 2 sqrt(T) / sigma, exactly S1 at q = 1), and not empty
    records = one_run_estimates(audit, 1e-5, 0.05, ["steinke", "mahloujifar"])
    assert len(records) == 50 and {r["method"] for r in records} == {"steinke", "mahloujifar"}
    true = gdp_epsilon(2 * math.sqrt(steps) / sigma, 1e-5)
    eps = np.array([r["epsilon"] for r in records])
    assert (eps <= true).all() and np.median(eps) > 0.5
    assert {(r["method"], r["family"]) for r in records} == {("steinke", "dp"), ("mahloujifar", "dp")}
    # the mu-GDP test, labelled so: a Gaussian mechanism here, so it stays below too, and above the default
    gdp = one_run_estimates(audit, 1e-5, 0.05, ["mahloujifar"], family="gdp")
    assert {r["family"] for r in gdp} == {"gdp"}
    gdp_eps = np.array([r["epsilon"] for r in gdp])
    assert (gdp_eps <= true).all() and (gdp_eps >= eps[1::2]).all()
    with pytest.raises(ParameterError):
        one_run_estimates(audit, 1e-5, 0.05, ["lira"])
    with pytest.raises(ParameterError, match="dp"):
        one_run_estimates(audit, 1e-5, 0.05, ["mahloujifar"], family="dpsgd")  # needs the training's DPConfig
