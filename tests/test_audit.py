"""Run bits, shards and their merging; experiment helpers."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from subaudit.audit import (
    audit_data,
    load_canary,
    merge_shards,
    run_bits,
    save_canary,
    shard_bounds,
)
from subaudit.engine import MLP, DPConfig, GradientCanary, InputCanary, Records, train
from subaudit.validation import ParameterError


def test_bits_split_every_even_audit_exactly_in_half():
    for runs in (2, 10, 500):
        bits = run_bits(np.arange(runs))
        assert bits.sum() == runs // 2 and set(bits.tolist()) == {0, 1}


def test_shard_bounds():
    assert shard_bounds(10, 4) == [(0, 4), (4, 8), (8, 10)]
    assert shard_bounds(10, 100) == [(0, 10)]
    with pytest.raises(ParameterError) as err:
        shard_bounds(11, 4)
    assert err.value.name == "runs"


def _train(lo, hi, seed=5):
    g = torch.Generator().manual_seed(0)
    model = MLP((10, 6, 3))
    data = Records(torch.randn(60, 10, generator=g), torch.randint(0, 3, (60,), generator=g))
    canary = InputCanary(torch.randn(2, 10, generator=g), torch.tensor([0, 2]))
    dp = DPConfig(steps=6, sampling_rate=0.3, noise_multiplier=0.8, clip=1.0, lr=0.05,
                  optimizer="adam")
    runs = np.arange(lo, hi)
    res = train(model, data, canary, dp, seed=seed, runs=runs, bits=run_bits(runs),
                score_every=2, init="random", progress=False)
    return {"runs": res.runs, "bits": res.bits, "steps": res.steps, "scores": res.scores}


def test_merge_is_the_same_whatever_the_shard_size():
    runs = 40
    merged = {}
    for size in (3, 7, 40):
        parts = [_train(lo, hi) for lo, hi in shard_bounds(runs, size)]
        merged[size] = merge_shards(parts[::-1], runs)     # shard order does not matter
    for size in (3, 7):
        for key in ("runs", "bits", "steps", "scores"):
            assert np.array_equal(merged[size][key], merged[40][key]), (size, key)
    assert merged[40]["bits"].sum() == runs // 2


def test_merge_refuses_incomplete_or_inconsistent_shards():
    a, b = _train(0, 4), _train(4, 8)
    with pytest.raises(ValueError, match="missing"):
        merge_shards([a], 8)
    with pytest.raises(ValueError, match="duplicated"):
        merge_shards([a, a, b], 8)
    bad = dict(b, bits=1 - b["bits"])
    with pytest.raises(ValueError, match="bits"):
        merge_shards([a, bad], 8)
    with pytest.raises(ValueError, match="checkpoint"):
        merge_shards([a, dict(b, steps=b["steps"] + 1)], 8)


def test_audit_data_drops_the_target_for_input_canaries():
    data = Records(torch.arange(12.0).view(6, 2), torch.arange(6) % 2)
    assert audit_data(data, 2, "S2") is data
    s3 = audit_data(data, 2, "S3")
    assert s3.x.shape == (5, 2) and not (s3.x == data.x[2]).all(1).any()


def test_canary_files_round_trip(tmp_path):
    g = GradientCanary.one_hot(MLP((4, 3)), 5, 2.0)
    i = InputCanary(torch.randn(2, 4), torch.tensor([1, 2]))
    for c, name in ((g, "g.npz"), (i, "i.npz")):
        save_canary(tmp_path / name, c)
        back = load_canary(tmp_path / name)
        assert type(back) is type(c)
        for field in ("g",) if isinstance(c, GradientCanary) else ("x", "y"):
            assert torch.equal(getattr(back, field), getattr(c, field))
