"""The engine's scores (subaudit.engine.scores): a canary scored on a parameter coordinate and
the paper code's log-odds statistic, each checked against the runs' final parameters."""

from __future__ import annotations

import numpy as np
import torch

from conftest import records
from subaudit import engine
from subaudit.engine import MLP, DPConfig, train


def test_a_score_other_than_the_canarys_own():
    """An input canary scored on a parameter coordinate (a privacy-backdoor canary): the
    score is theta_0[j] - theta_T[j] of each run, checked against its final parameters."""
    model = MLP((6, 3))
    data = records(30, 6, 3, seed=4)
    g = torch.Generator().manual_seed(9)
    j = 5
    e_j = torch.zeros(model.num_params, dtype=torch.float64)
    e_j[j] = -1.0                                   # <u, theta_T - theta_0> with u = -e_j
    canary = engine.InputCanary(torch.randn(2, 6, generator=g, dtype=torch.float64),
                                torch.tensor([0, 2]), scored_by=engine.Projection(e_j))
    init = [torch.randn(s, generator=g, dtype=torch.float64) for s in model.shapes]
    dp = DPConfig(steps=5, sampling_rate=0.5, noise_multiplier=1.0, clip=1.0, lr=0.1)
    runs = np.arange(8)
    res = train(model, data, canary, dp, seed=1, runs=runs, bits=runs % 2, score_every=5,
                init=init, dtype=torch.float64, keep_params=True, progress=False)
    final = np.concatenate([p.reshape(8, -1) for p in res.params], axis=1)[:, j]
    start = torch.cat([t.reshape(-1) for t in init])[j].item()
    np.testing.assert_allclose(res.scores[-1], start - final, rtol=0, atol=1e-12)


def test_log_odds_score_is_the_papers_code_statistic():
    """LogOddsDifference: log(p/(1-p)) of each record's label (softmax), z minus z', from the
    final parameters; the span basis gives the same score distribution's draws exactly."""
    model = MLP((6, 3))
    data = records(30, 6, 3, seed=5)
    g = torch.Generator().manual_seed(3)
    x, y = torch.randn(2, 6, generator=g, dtype=torch.float64), torch.tensor([1, 2])
    canary = engine.InputCanary(x, y, scored_by=engine.LogOddsDifference())
    dp = DPConfig(steps=4, sampling_rate=0.5, noise_multiplier=1.0, clip=1.0, lr=0.3)
    runs = np.arange(8)
    res = train(model, data, canary, dp, seed=2, runs=runs, bits=runs % 2, score_every=4,
                init="random", dtype=torch.float64, keep_params=True, progress=False)
    w, b = torch.from_numpy(res.params[0]), torch.from_numpy(res.params[1])
    p = torch.softmax(torch.einsum("rkd,nd->rnk", w, x) + b[:, None, :], dim=-1)
    py = p[:, [0, 1], y]
    odds = torch.log(py) - torch.log1p(-py)
    np.testing.assert_allclose(res.scores[-1], (odds[:, 0] - odds[:, 1]).numpy(), rtol=0, atol=1e-10)
    sgd = DPConfig(steps=4, sampling_rate=0.5, noise_multiplier=1.0, clip=1.0, lr=0.3)
    full = train(model, data, canary, sgd, seed=2, runs=runs, bits=runs % 2, score_every=4,
                 init="zero", dtype=torch.float64, basis="full", progress=False)
    span = train(model, data, canary, sgd, seed=2, runs=runs, bits=runs % 2, score_every=4,
                 init="zero", dtype=torch.float64, basis="span", progress=False)
    assert np.all(np.isfinite(span.scores)) and span.scores.shape == full.scores.shape
