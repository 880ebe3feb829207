"""Natural-data audits: the files a training job reads (features, canary, target, sigma).

Score files, run bits and shards are in :mod:`subaudit.pipeline.score_files`.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import torch

from subaudit.engine import INPUT_SCORES, MLP, DPConfig, GradientCanary, InputCanary, Projection, Records
from subaudit.artifacts import read_csv, read_json, read_npz, write_npz
from subaudit.scenarios import get as get_scenario
from subaudit.validation import ParameterError

__all__ = ["audit_data", "load_canary", "load_features", "load_setting", "model_for",
           "save_canary"]


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


def audit_data(train: Records, target: int | None, scenario: str) -> Records:
    """The records every run shares: D, without the target z where the scenario's canary
    replaces it (:attr:`subaudit.scenarios.Scenario.removes_target`)."""
    if not get_scenario(scenario).removes_target:
        return train
    keep = torch.ones(train.x.shape[0], dtype=torch.bool)
    keep[target] = False
    return Records(train.x[keep], train.y[keep])


def save_canary(path: str | Path, canary: GradientCanary | InputCanary) -> None:
    """One canary pair as .npz (atomic); an input canary with the name of its score (or the
    direction of its :class:`Projection` score) and its trap, if any."""
    if isinstance(canary, GradientCanary):
        arrays = {"kind": np.array("gradient"), "g": canary.g.numpy()}
    else:
        names = {cls: name for name, cls in INPUT_SCORES.items()}
        score = canary.score
        arrays = {"kind": np.array("input"), "x": canary.x.numpy(), "y": canary.y.numpy()}
        if isinstance(score, Projection):
            arrays.update(score=np.array("projection"), direction=score.direction.numpy())
        elif type(score) in names:
            arrays["score"] = np.array(names[type(score)])
        else:
            raise ParameterError("canary score", type(score).__name__,
                                 "one of " + ", ".join([*INPUT_SCORES, "a Projection"]))
        for i, (layer, index, values) in enumerate(canary.trap):
            arrays.update({f"trap{i}_layer": np.array(layer), f"trap{i}_index": index.numpy(),
                           f"trap{i}_values": values.numpy()})
    write_npz(path, **arrays)


def load_canary(path: str | Path) -> GradientCanary | InputCanary:
    """Inverse of :func:`save_canary`."""
    f = read_npz(path)
    if str(f["kind"]) == "gradient":
        return GradientCanary(torch.from_numpy(f["g"]))
    name = str(f["score"])
    score = (Projection(torch.from_numpy(f["direction"])) if name == "projection"
             else INPUT_SCORES[name]())
    trap = tuple((int(f[f"trap{i}_layer"]), torch.from_numpy(f[f"trap{i}_index"]),
                  torch.from_numpy(f[f"trap{i}_values"]))
                 for i in range(sum(k.endswith("_layer") for k in f)))
    return InputCanary(torch.from_numpy(f["x"]), torch.from_numpy(f["y"]).long(),
                       scored_by=score, trap=trap)


def load_setting(
    features: str | Path, calibration: str | Path, target: str | Path | None = None, *,
    hidden: Sequence[int], steps: int, q: float, clip: float, lr: float, optimizer: str,
    canary_q: float | None = None,
) -> tuple[dict[str, Any], MLP, int | None, DPConfig]:
    """What a training job needs: features, model, target index (None without a target
    file), DP config at the calibrated sigma (``canary_q``: the canary's own rate)."""
    feats = load_features(features)
    index = None if target is None else int(read_json(target)["target"])
    sigma = float(read_csv(calibration)["sigma"].iloc[0])
    dp = DPConfig(steps=steps, sampling_rate=q, noise_multiplier=sigma, clip=clip, lr=lr,
                  optimizer=optimizer, canary_sampling_rate=canary_q)
    return feats, model_for(feats, hidden), index, dp
