"""Score files: run bits, shards, their merging, and the file round trip."""

from __future__ import annotations

import json
from dataclasses import replace

import numpy as np
import pytest
import torch

from subaudit.engine import MLP, DPConfig, InputCanary, Records, train
from subaudit.artifacts import CorruptArtifact, write_npz
from subaudit.pipeline.score_files import Scores, merge_shards, read_scores, run_bits, shard_bounds, write_scores
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
    return Scores(runs=res.runs, bits=res.bits, steps=res.steps, scores=res.scores, sigma=0.8,
                  setting={"lo": lo})


def test_merge_is_the_same_whatever_the_shard_size():
    runs = 40
    merged = {}
    for size in (3, 7, 40):
        parts = [_train(lo, hi) for lo, hi in shard_bounds(runs, size)]
        merged[size] = merge_shards(parts[::-1], runs)     # shard order does not matter
    for size in (3, 7):
        for key in ("runs", "bits", "steps", "scores"):
            assert np.array_equal(getattr(merged[size], key), getattr(merged[40], key))
    assert merged[40].bits.sum() == runs // 2 and merged[40].sigma == 0.8


def test_merge_refuses_incomplete_or_inconsistent_shards():
    a, b = _train(0, 4), _train(4, 8)
    with pytest.raises(ValueError, match="missing"):
        merge_shards([a], 8)
    with pytest.raises(ValueError, match="duplicated"):
        merge_shards([a, a, b], 8)
    with pytest.raises(ValueError, match="bits"):
        merge_shards([a, replace(b, bits=1 - b.bits)], 8)
    with pytest.raises(ValueError, match="checkpoint"):
        merge_shards([a, replace(b, steps=b.steps + 1)], 8)
    with pytest.raises(ValueError, match="sigma"):
        merge_shards([a, replace(b, sigma=0.9)], 8)


def test_merge_takes_the_setting_given():
    merged = merge_shards([_train(0, 4)], 4, {"experiment": "x", "runs": 4})
    assert merged.setting == {"experiment": "x", "runs": 4}
    assert merge_shards([_train(0, 4)], 4).setting == {"lo": 0}


def test_score_files_round_trip_and_refuse_other_files(tmp_path):
    s = _train(0, 6)
    write_scores(tmp_path / "s.npz", s)
    back = read_scores(tmp_path / "s.npz")
    for key in ("runs", "bits", "steps", "scores"):
        assert np.array_equal(getattr(back, key), getattr(s, key)) and (
            getattr(back, key).dtype == getattr(s, key).dtype), key
    assert back.sigma == 0.8 and back.setting == {"lo": 0}
    assert json.loads(str(np.load(tmp_path / "s.npz")["setting"])) == {"lo": 0}
    write_npz(tmp_path / "other.npz", runs=s.runs, scores=s.scores)
    with pytest.raises(CorruptArtifact, match="not a score file"):
        read_scores(tmp_path / "other.npz")
    with pytest.raises(ValueError, match="do not fit"):
        Scores(runs=s.runs, bits=s.bits[:-1], steps=s.steps, scores=s.scores, sigma=1.0)


def test_load_audit_scores_layouts_and_refusals(tmp_path):
    from subaudit.pipeline.score_files import load_audit_scores

    np.savez(tmp_path / "io.npz", in_scores=[3.0, 2.0], out_scores=[1.0])
    s, y = load_audit_scores(tmp_path / "io.npz")
    assert s.tolist() == [3.0, 2.0, 1.0] and y.tolist() == [1, 1, 0]
    (tmp_path / "a.csv").write_text("score,label\n0.5,1\n0.25,0\n")
    s, y = load_audit_scores(tmp_path / "a.csv")
    assert s.tolist() == [0.5, 0.25] and y.tolist() == [1, 0]
    (tmp_path / "b.csv").write_text("s,l\n1,0\n")
    with pytest.raises(ValueError, match="score, label|score,label"):
        load_audit_scores(tmp_path / "b.csv")
    (tmp_path / "c.txt").write_text("1\n")
    with pytest.raises(ValueError, match="not a .csv or .npz"):
        load_audit_scores(tmp_path / "c.txt")
    with pytest.raises(FileNotFoundError):
        load_audit_scores(tmp_path / "none.npz")
