"""Canary crafting, and the S2 audit it enables on the engine."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from subaudit.accounting import calibrate_sigma, epsilon
from subaudit.canaries import gradient_canary, least_updated_coordinate
from subaudit.engine import MLP, DPConfig, Records, train
from subaudit.estimation import estimate_epsilon


def test_least_updated_coordinate_is_the_one_data_never_moves():
    """A feature that is 0 in every record leaves its weights untouched."""
    g = torch.Generator().manual_seed(0)
    x = torch.randn(50, 6, generator=g)
    x[:, 4] = 0.0
    data = Records(x, torch.randint(0, 3, (50,), generator=g))
    model = MLP((6, 3))
    dp = DPConfig(steps=5, sampling_rate=0.5, noise_multiplier=3.0, clip=1.0, lr=0.1)
    j = least_updated_coordinate(model, data, dp)
    assert j in (4, 10, 16)                 # weight[k, 4] for k = 0, 1, 2 (flat, row-major)
    canary = gradient_canary(model, data, dp)
    assert canary.g[0, j] == -1.0 and canary.g[1, j] == 1.0
    assert canary.g.abs().sum() == 2.0


@pytest.mark.slow
def test_s2_audit_beats_add_remove_epsilon():
    """Issue 3 acceptance: S2 at q = 1 on random features, sigma for eps_S = 4.

    n = 500, d = 768, R = 1,000 (500 per world), T = 100: the paper estimator's
    empirical epsilon exceeds the add/remove epsilon of the same sigma, i.e. the
    audit shows leakage that add/remove accounting says cannot happen.
    """
    g = torch.Generator().manual_seed(11)
    n, d, k, steps, delta = 500, 768, 10, 100, 1e-5
    data = Records(torch.randn(n, d, generator=g) / d**0.5 * 4,
                   torch.randint(0, k, (n,), generator=g))
    sigma = calibrate_sigma(4.0, 1.0, steps, delta, "substitute")
    eps_ar = epsilon(sigma, 1.0, steps, delta, "add-remove").epsilon
    model = MLP((d, k))
    dp = DPConfig(steps=steps, sampling_rate=1.0, noise_multiplier=sigma, clip=1.0, lr=0.5)
    canary = gradient_canary(model, data, dp)
    runs = np.arange(1000)
    res = train(model, data, canary, dp, seed=2026, runs=runs, bits=runs % 2,
                score_every=steps, progress=False)
    est = estimate_epsilon(res.scores[-1], res.bits, delta=delta, alpha=0.05, estimator="paper")
    assert est.epsilon > eps_ar, (est.epsilon, eps_ar)
    assert est.epsilon < 4.0 * 1.2            # and no wild over-estimate of eps_S
