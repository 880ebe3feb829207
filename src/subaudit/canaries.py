"""Canary crafting for natural-data audits (paper Section 3.2).

Algorithm 2 (S2, crafted gradient canary): train once without noise, with the
audit's own sampling, clipping, learning rate and optimiser, and pick the
parameter whose accumulated absolute update ``sum_t |theta_{t+1}[j] -
theta_t[j]|`` is smallest; the canary pair is ``-C e_j`` (D) and ``+C e_j``
(D').  The data barely moves that coordinate, so the canary's pushes stand out.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace

import torch

from subaudit.engine import (
    MLP,
    DPConfig,
    GradientCanary,
    Records,
    RunStreams,
    init_params,
    train,
)

__all__ = ["gradient_canary", "least_updated_coordinate"]


def least_updated_coordinate(
    model: MLP, data: Records, dp: DPConfig, *, init: str | Sequence[torch.Tensor] = "zero",
    seed: int = 0,
) -> int:
    """Index (flat, parameter order) of the least-updated parameter in noiseless training."""
    noiseless = replace(dp, noise_multiplier=0.0)
    start = init_params(model, [RunStreams(seed, 0)], init)
    prev = torch.cat([p.reshape(1, -1) for p in start], dim=1)[0]
    total = torch.zeros_like(prev, dtype=torch.float64)

    def observe(_t: int, params: list[torch.Tensor]) -> None:
        nonlocal prev
        now = torch.cat([p.reshape(p.shape[0], -1) for p in params], dim=1)[0].cpu()
        total.add_((now - prev).abs().double())
        prev = now.clone()

    train(model, data, None, noiseless, seed=seed, runs=[0], bits=[0], score_every=dp.steps,
          init=init, observe=observe, progress=False)
    return int(torch.argmin(total))


def gradient_canary(
    model: MLP, data: Records, dp: DPConfig, *, init: str | Sequence[torch.Tensor] = "zero",
    seed: int = 0,
) -> GradientCanary:
    """Algorithm 2's canary pair on the least-updated coordinate."""
    j = least_updated_coordinate(model, data, dp, init=init, seed=seed)
    return GradientCanary.one_hot(model, j, dp.clip)
