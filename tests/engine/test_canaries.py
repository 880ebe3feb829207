"""The engine's canaries (subaudit.engine.canaries): what each kind adds to a run's training,
one or several per run with a bit each, checked against a closed form or against the same
training written another way, and their own checks."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from conftest import records
from subaudit import engine
from subaudit.engine import MLP, DPConfig, GradientCanary, InputCanary, Records, train
from subaudit.validation import ParameterError


def test_canary_moves_the_score_the_right_way():
    """Without noise, D's runs score above D''s (the estimator's convention)."""
    model = MLP((16, 5))
    data = records(30, 16, 5, seed=3, dtype=torch.float32)
    dp = DPConfig(steps=10, sampling_rate=1.0, noise_multiplier=0.0, clip=1.0, lr=0.5)
    for canary in (GradientCanary.one_hot(model, 4, 1.0),
                   InputCanary(torch.randn(2, 16), torch.tensor([2, 4]))):
        res = train(model, data, canary, dp, seed=1, runs=[0, 1], bits=[1, 0],
                    score_every=10, progress=False)
        assert res.scores[-1, 0] > res.scores[-1, 1]


def test_two_canaries_per_run_with_a_bit_each():
    """At q = 1 every record is in every batch, so a run with canaries A (bit a) and B
    (bit b) trains on D + {A's record, B's record}: the same as one canary A with B's
    record for bit b appended to the data (up to the order of the sum)."""
    model = MLP((6, 3))
    data = records(30, 6, 3, seed=2)
    g = torch.Generator().manual_seed(5)
    a = engine.InputCanary(torch.randn(2, 6, generator=g, dtype=torch.float64), torch.tensor([0, 1]))
    b = engine.InputCanary(torch.randn(2, 6, generator=g, dtype=torch.float64), torch.tensor([2, 0]))
    dp = DPConfig(steps=4, sampling_rate=1.0, noise_multiplier=0.7, clip=1.0, lr=0.2,
                  expected_batch_size=32.0)
    runs = np.arange(16)
    bits = np.stack([runs % 2, (runs // 2) % 2], axis=1)
    pair = engine.InputCanaries(torch.stack([a.x, b.x]), torch.stack([a.y, b.y]))
    both = train(model, data, pair, dp, seed=3, runs=runs, bits=bits,
                 score_every=2, dtype=torch.float64, keep_params=True, progress=False)
    assert both.scores.shape == (2, 16, 2) and both.bits.shape == (16, 2)
    for bit_b in (0, 1):
        rows = np.flatnonzero(bits[:, 1] == bit_b)
        extra = Records(torch.cat([data.x, b.x[1 - bit_b][None]]),
                        torch.cat([data.y, b.y[1 - bit_b][None]]))
        one = train(model, extra, a, dp, seed=3, runs=runs[rows], bits=bits[rows, 0],
                    score_every=2, dtype=torch.float64, keep_params=True, progress=False)
        for p2, p1 in zip(both.params, one.params):
            np.testing.assert_allclose(p2[rows], p1, rtol=1e-10, atol=1e-12)
        np.testing.assert_allclose(both.scores[:, rows, 0], one.scores, rtol=1e-9, atol=1e-12)
    with pytest.raises(ParameterError, match="one per run and canary"):
        train(model, data, pair, dp, seed=3, runs=runs, bits=runs % 2,
              score_every=2, progress=False)


def test_one_hot_canaries_add_their_own_signed_coordinates():
    """At q = 1 every canary is in every batch: m one-hot canaries of size C/m with bits b add
    sum_i (2 b_i - 1)(C/m) e_(j_i) per step, the same as one GradientCanary of that vector
    (norm <= C); scores are theta_0[j_i] - theta_T[j_i], read off the final parameters."""
    model = MLP((6, 3))
    data = records(30, 6, 3, seed=4)
    idx = torch.tensor([3, 17, 20])
    m, clip = 3, 1.0
    many = engine.OneHotCanaries(idx, clip / m, model.num_params)
    dp = DPConfig(steps=4, sampling_rate=1.0, noise_multiplier=0.7, clip=clip, lr=0.2,
                  expected_batch_size=33.0)
    runs = np.arange(8)
    bits = np.stack([(runs >> k) & 1 for k in range(m)], axis=1)
    res = train(model, data, many, dp, seed=3, runs=runs, bits=bits, score_every=2, dtype=torch.float64,
                keep_params=True, progress=False)
    assert res.scores.shape == (2, 8, 3)
    final = np.concatenate([p.reshape(8, -1) for p in res.params], axis=1)
    np.testing.assert_allclose(res.scores[-1], -final[:, idx.numpy()], rtol=0, atol=1e-12)  # zero init
    for r in runs:
        g = torch.zeros(2, model.num_params, dtype=torch.float64)
        g[0, idx] = torch.tensor((2.0 * bits[r] - 1) * clip / m)
        g[1] = -g[0]
        one = train(model, data, engine.GradientCanary(g), dp, seed=3, runs=[r], bits=[1], score_every=2,
                    dtype=torch.float64, keep_params=True, progress=False)
        for p_many, p_one in zip(res.params, one.params):
            np.testing.assert_allclose(p_many[r], p_one[0], rtol=1e-10, atol=1e-13)
    # the sparse columns are the support of the dense gradients
    dense = many.gradients()
    for i, (cols, values) in enumerate(many.gradient_columns()):
        assert torch.equal(cols, torch.nonzero((dense[i] != 0).any(0))[:, 0])
        assert torch.equal(values, dense[i][:, cols])


@pytest.mark.parametrize(("index", "clip", "match"), [
    (torch.tensor([1, 1]), 1.0, "distinct"),
    (torch.tensor([0, 99]), 1.0, "coordinates in"),
    (torch.tensor([0, 1]), 2.0, "clip"),
])
def test_one_hot_canaries_are_checked(index, clip, match):
    model = MLP((6, 3))
    dp = DPConfig(steps=2, sampling_rate=1.0, noise_multiplier=1.0, clip=1.0, lr=0.1)
    with pytest.raises(ParameterError, match=match):
        engine.OneHotCanaries(index, clip, model.num_params).check(model, dp)


def test_canary_with_its_own_sampling_rate():
    """At rate 1 the canary is in every batch: with no noise and a feature no record uses,
    its coordinate moves by lr C / (q (n + 1)) every step; at the data's own rate the runs
    are bitwise those of the default."""
    n, d, k = 20, 5, 3
    data = records(n, d, k, seed=6)
    data = Records(torch.cat([data.x[:, :4], torch.zeros(n, 1, dtype=torch.float64)], 1), data.y)
    model = MLP((d, k))
    j = 4                                                       # weight[0, 4]: feature 4
    canary = GradientCanary.one_hot(model, j, 1.0)
    runs = np.arange(16)
    base = dict(steps=6, sampling_rate=0.25, noise_multiplier=0.0, clip=1.0, lr=0.1)
    every = train(model, data, canary, DPConfig(**base, canary_sampling_rate=1.0), seed=3,
                  runs=runs, bits=runs % 2, score_every=6, dtype=torch.float64, progress=False)
    step = 0.1 * 1.0 / (0.25 * (n + 1))
    np.testing.assert_allclose(every.scores[-1], np.where(runs % 2 == 1, 6 * step, -6 * step),
                               rtol=1e-12)
    default = train(model, data, canary, DPConfig(**base), seed=3, runs=runs, bits=runs % 2,
                    score_every=6, dtype=torch.float64, progress=False)
    same = train(model, data, canary, DPConfig(**base, canary_sampling_rate=0.25), seed=3,
                 runs=runs, bits=runs % 2, score_every=6, dtype=torch.float64, progress=False)
    assert np.array_equal(default.scores, same.scores)
    assert not np.allclose(default.scores, every.scores)
    with pytest.raises(ParameterError, match="canary_sampling_rate"):
        DPConfig(**base, canary_sampling_rate=1.5)
