"""The differentiable unrolled training is the engine's training (to 1e-12 in float64)."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from subaudit.engine import MLP, DPConfig, InputCanary, Records, RunStreams, init_params, train
from subaudit.engine.unroll import unroll

F64 = torch.float64


def _data(n: int, d: int = 6, k: int = 4, seed: int = 0) -> Records:
    g = torch.Generator().manual_seed(seed)
    return Records(torch.randn(n, d, generator=g, dtype=F64), torch.randint(0, k, (n,), generator=g))


@pytest.mark.parametrize(
    ("sizes", "optimizer", "init", "q", "n"),
    [
        ((6, 4), "sgd", "zero", 0.3, 20),          # linear head, shared product over all rows
        ((6, 4), "sgd", "zero", 0.04, 200),        # linear head, under n / 8 sampled: gathered
        ((6, 5, 4), "adam", "random", 0.3, 20),    # Tanh MLP with DP-Adam
        ((6, 5, 4), "sgd", "random", 1.0, 20),     # full batch: no masks drawn
        ((6, 5, 4), "adam", "random", 0.1, 60),    # small q: each run's sampled rows gathered
    ],
)
def test_unrolled_training_reproduces_the_engine(sizes, optimizer, init, q, n):
    model, data = MLP(sizes), _data(n)
    canary = InputCanary(torch.randn(2, 6, dtype=F64, generator=torch.Generator().manual_seed(1)),
                         torch.tensor([1, 2]))
    dp = DPConfig(steps=7, sampling_rate=q, noise_multiplier=0.8, clip=0.5, lr=0.05, optimizer=optimizer)
    runs, bits = np.arange(6), np.array([1, 0, 1, 0, 1, 0], dtype=np.int8)
    res = train(model, data, canary, dp, seed=3, runs=runs, bits=bits, score_every=7, init=init,
                dtype=F64, keep_params=True, basis="full", batching="dense", progress=False)
    streams = [RunStreams(3, int(r)) for r in runs]
    rows = 1 - torch.from_numpy(bits).long()          # bit 1: z (row 0), bit 0: z' (row 1)
    final = unroll(model, data, canary.x[rows], canary.y[rows], init_params(model, streams, init, F64),
                   dp, streams, segment=3)
    for got, want in zip(final, res.params):
        np.testing.assert_allclose(got.detach().numpy(), want, rtol=0, atol=1e-12)
