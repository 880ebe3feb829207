"""Score files: run bits, shards, their merging, and the file round trip."""

from __future__ import annotations

import json
from dataclasses import replace

import numpy as np
import pytest
import torch
from scipy import stats

from subaudit.engine import MLP, DPConfig, InputCanary, Records, train
from subaudit.artifacts import CorruptArtifact, write_npz
from subaudit.pipeline.score_files import (Scores, audit_estimates, merge_shards, pool_repeats, pooled_estimates,
                                           read_scores, read_target_scores, run_bits, shard_bounds, world_index,
                                           write_scores, write_target_scores)
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


def _repeat(setting, bits, scores, steps=(10,), sigma=1.5):
    return Scores(runs=np.arange(bits.size), bits=bits, steps=np.array(steps), scores=np.atleast_2d(scores),
                  sigma=sigma, setting=setting)


def test_pool_repeats_joins_each_settings_repeats_in_order():
    bits = run_bits(np.arange(4))
    a0 = _repeat({"scenario": "S2", "q": 1.0, "repeat": 0}, bits, [1.0, 2.0, 3.0, 4.0])
    a1 = _repeat({"scenario": "S2", "q": 1.0, "repeat": 1}, bits, [5.0, 6.0, 7.0, 8.0])
    b0 = _repeat({"scenario": "S3", "q": 1.0, "repeat": 0}, bits, [0.0, 0.0, 0.0, 0.0])
    pooled = pool_repeats([a0, b0, a1])
    assert [p.setting for p in pooled] == [{"scenario": "S2", "q": 1.0, "repeats": 2},
                                           {"scenario": "S3", "q": 1.0, "repeats": 1}]
    assert pooled[0].scores.tolist() == [[1.0, 2.0, 3.0, 4.0, 5.0, 6.0, 7.0, 8.0]]
    assert pooled[0].bits.tolist() == bits.tolist() * 2 and pooled[0].runs.tolist() == list(range(8))
    with pytest.raises(ValueError, match="given twice"):
        pool_repeats([a0, a0])
    with pytest.raises(ValueError, match="disagree"):
        pool_repeats([a0, replace(a1, sigma=2.0)])
    with pytest.raises(ValueError, match="without a repeat"):
        pool_repeats([replace(a0, setting={"scenario": "S2"})])


def test_a_pooled_audit_of_a_known_mechanism_stays_below_its_epsilon_at_the_stated_rate():
    """Scores N(mu, 1) with the target against N(0, 1) without: exactly mu-GDP, the least
    favourable case of the auc estimator's assumption.  Each audit is 3 repeats of 400 runs,
    pooled; at alpha 0.05 the pooled bound may exceed the true epsilon in at most 5% of audits
    (up to binomial noise), and it is stronger than one repeat alone."""
    from subaudit.accounting.gdp import epsilon_from_mu

    mu, delta, alpha, audits, runs = 1.5, 1e-5, 0.05, 300, 400
    true = epsilon_from_mu(mu, delta)
    rng = np.random.default_rng(31)
    bits = run_bits(np.arange(runs))
    exceed, single, pooled = 0, [], []
    for _ in range(audits):
        reps = [_repeat({"scenario": "S3", "repeat": r}, bits, rng.normal(mu * bits, 1.0)) for r in range(3)]
        est = pooled_estimates(reps, delta, alpha, ["auc"])
        assert len(est) == 1 and est[0]["n_positive"] == est[0]["n_negative"] == 3 * runs // 2
        exceed += est[0]["epsilon"] > true
        pooled.append(est[0]["epsilon"])
        single.append(audit_estimates(reps[0], delta, alpha, ["auc"])[0]["epsilon"])
    assert exceed <= stats.binom.ppf(0.999, audits, alpha), f"{exceed} of {audits} above {true:.3g}"
    assert np.mean(pooled) > np.mean(single) + 0.1      # all the runs: a stronger audit


def test_a_target_shard_reads_back_as_each_scenarios_runs_with_z(tmp_path):
    runs = np.array([0, 2, 4])
    scores = {"S3": np.arange(6.0).reshape(2, 3), "S4": -np.arange(6.0).reshape(2, 3)}
    write_target_scores(tmp_path / "t.npz", runs, [5, 10], 1.25, scores, {"experiment": "a", "q": 1.0})
    s4 = read_target_scores(tmp_path / "t.npz", "S4")
    assert s4.runs.tolist() == [0, 2, 4] and s4.bits.tolist() == [1, 1, 1] and s4.sigma == 1.25
    assert np.array_equal(s4.scores, scores["S4"]) and s4.setting == {"experiment": "a", "q": 1.0, "scenario": "S4"}
    odd = Scores(runs=[1, 3, 5], bits=[0, 0, 0], steps=[5, 10], scores=np.ones((2, 3)), sigma=1.25)
    assert merge_shards([odd, s4], 6).bits.tolist() == [1, 0, 1, 0, 1, 0]
    with pytest.raises(CorruptArtifact, match="no scores for S5"):
        read_target_scores(tmp_path / "t.npz", "S5")
    with pytest.raises(ValueError, match="even"):
        write_target_scores(tmp_path / "u.npz", np.array([1]), [5], 1.0, {"S3": np.ones((1, 1))}, {})


def test_one_worlds_runs_fill_the_engines_aligned_blocks():
    from subaudit.engine.batching import MIN_CHUNK

    runs = np.arange(64, 128)
    for bit in (0, 1):
        local = world_index(runs[run_bits(runs) == bit])
        assert local.tolist() == list(range(32, 64)) and local[0] % MIN_CHUNK == 0   # two whole blocks


def test_non_finite_scores_are_never_written(tmp_path):
    """A diverged training's NaN or infinite scores: Diverged naming the file (whose path holds
    the setting) and the run, and no file (nor temporary file) is left."""
    from subaudit.validation import Diverged

    scores = np.zeros((2, 4))
    scores[1, 2] = np.nan
    path = tmp_path / "S2_q1_C2" / "runs0-4.npz"
    with pytest.raises(Diverged, match=r"1 run\(s\) \(first: run 2\).*S2_q1_C2/runs0-4.npz diverged"):
        write_scores(path, Scores(np.arange(4), run_bits(np.arange(4)), [5, 10], scores, 1.0))
    scores[1, 2] = np.inf
    with pytest.raises(Diverged):
        write_target_scores(path, np.array([0, 2, 4, 6]), [5, 10], 1.0, {"S3": scores}, {})
    assert not path.parent.exists() or list(path.parent.iterdir()) == []
