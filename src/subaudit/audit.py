"""Natural-data audits (S2-S5): run bits, shards and their merging.

An audit setting (experiment, scenario, q, repeat) trains R runs: run r uses
the target ``z`` when ``r`` is even (bit 1, dataset D) and the canary ``z'``
when it is odd (bit 0, D'), so an even R splits exactly in half, and every
shard of consecutive runs is as balanced as it can be.  Run r's randomness
comes from (setting seed, r) only (:class:`subaudit.engine.RunStreams`), so a
shard's scores do not depend on how the runs were cut into shards; merging
sorts by run index and refuses gaps, overlaps and disagreeing checkpoints.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import torch

from subaudit.engine import MLP, DPConfig, GradientCanary, InputCanary, Records
from subaudit.io import read_csv, read_json, read_npz, write_npz
from subaudit.validation import ParameterError, check_count

__all__ = ["audit_data", "load_canary", "load_features", "load_setting", "merge_shards",
           "model_for", "run_bits", "save_canary", "shard_bounds"]


def run_bits(runs: Sequence[int] | np.ndarray) -> np.ndarray:
    """Bit of each run: 1 (D, target z) for even indices, 0 (D', canary z') for odd."""
    r = np.asarray(runs, dtype=np.int64)
    return (1 - (r % 2)).astype(np.int8)


def shard_bounds(runs: int, shard_size: int) -> list[tuple[int, int]]:
    """Consecutive ``[lo, hi)`` run ranges of at most ``shard_size`` runs."""
    total = check_count(runs, "runs", minimum=2)
    if total % 2:
        raise ParameterError("runs", runs, "an even number (half D, half D')")
    size = check_count(shard_size, "shard_size")
    return [(lo, min(lo + size, total)) for lo in range(0, total, size)]


def merge_shards(parts: Sequence[Mapping[str, Any]], runs: int) -> dict[str, np.ndarray]:
    """Join shard outputs (``runs``, ``bits``, ``steps``, ``scores`` (S, r)) into one audit.

    The result is sorted by run index and must hold every run ``0..runs-1``
    exactly once, with the bits :func:`run_bits` prescribes.
    """
    if not parts:
        raise ValueError("no shards to merge")
    steps = np.asarray(parts[0]["steps"])
    for p in parts[1:]:
        if not np.array_equal(np.asarray(p["steps"]), steps):
            raise ValueError("shards disagree on the checkpoint steps")
    all_runs = np.concatenate([np.asarray(p["runs"], dtype=np.int64) for p in parts])
    order = np.argsort(all_runs, kind="stable")
    all_runs = all_runs[order]
    if not np.array_equal(all_runs, np.arange(runs)):
        missing = sorted(set(range(runs)) - set(all_runs.tolist()))
        dup = sorted({int(r) for r in all_runs[1:][np.diff(all_runs) == 0]})
        raise ValueError(f"shards do not cover runs 0..{runs - 1} exactly once "
                         f"(missing {missing[:10]}, duplicated {dup[:10]})")
    bits = np.concatenate([np.asarray(p["bits"]) for p in parts])[order].astype(np.int8)
    if not np.array_equal(bits, run_bits(all_runs)):
        raise ValueError("shard bits differ from the run-parity rule")
    scores = np.concatenate([np.asarray(p["scores"], dtype=np.float64) for p in parts],
                            axis=1)[:, order]
    return {"runs": all_runs, "bits": bits, "steps": steps, "scores": scores}



# --------------------------------------------------------------------------- experiment files


def load_features(path: str | Path) -> dict[str, Records]:
    """Train, aux and test :class:`Records` of a features file (and ``classes``)."""
    f = read_npz(path)
    out: dict[str, Any] = {
        part: Records(torch.from_numpy(f[f"{part}_x"].astype(np.float32)),
                      torch.from_numpy(f[f"{part}_y"].astype(np.int64)))
        for part in ("train", "aux", "test")}
    out["classes"] = int(f["classes"])
    return out


def model_for(features: Mapping[str, Any], hidden: Sequence[int]) -> MLP:
    """The audited model: features -> hidden (Tanh) -> classes."""
    return MLP((features["train"].x.shape[1], *[int(h) for h in hidden], features["classes"]))


def audit_data(train: Records, target: int, scenario: str) -> Records:
    """The records every run shares: all of D for S2, D without the target z for S3-S5."""
    if scenario == "S2":
        return train
    keep = torch.ones(train.x.shape[0], dtype=torch.bool)
    keep[target] = False
    return Records(train.x[keep], train.y[keep])


def save_canary(path: str | Path, canary: GradientCanary | InputCanary) -> None:
    """One canary pair as .npz (atomic)."""
    if isinstance(canary, GradientCanary):
        arrays = {"kind": np.array("gradient"), "g": canary.g.numpy()}
    else:
        arrays = {"kind": np.array("input"), "x": canary.x.numpy(), "y": canary.y.numpy()}
    write_npz(path, **arrays)


def load_canary(path: str | Path) -> GradientCanary | InputCanary:
    """Inverse of :func:`save_canary`."""
    f = read_npz(path)
    if str(f["kind"]) == "gradient":
        return GradientCanary(torch.from_numpy(f["g"]))
    return InputCanary(torch.from_numpy(f["x"]), torch.from_numpy(f["y"]).long())


def load_setting(
    features: str | Path, target: str | Path, accounting: str | Path, *,
    hidden: Sequence[int], steps: int, q: float, clip: float, lr: float, optimizer: str,
) -> tuple[dict[str, Any], MLP, int, DPConfig]:
    """What a training job needs: features, model, target index, DP config at the calibrated sigma."""
    feats = load_features(features)
    index = int(read_json(target)["target"])
    sigma = float(read_csv(accounting)["sigma"].iloc[0])
    dp = DPConfig(steps=steps, sampling_rate=q, noise_multiplier=sigma, clip=clip, lr=lr,
                  optimizer=optimizer)
    return feats, model_for(feats, hidden), index, dp
