"""Audit scores: the one artifact type every audit writes, its runs' bits, shards and merging.

A score file holds, for R runs of one audit setting, the run indices, each run's bit
(1: dataset D with the target z; 0: D' with the substitute z'), the checkpoint steps,
the scores (checkpoints x runs; larger under D), the noise multiplier and the setting
(the knob values of its path key).  The S1 simulation, training shards and their merge
all write it; the one estimate step reads it.

Natural-data audits: run r uses z when r is even (bit 1) and z' when it is odd (bit 0),
so an even R splits exactly in half and every shard of consecutive runs is as balanced
as it can be.  Run r's randomness comes from (setting seed, r) only, so a shard's scores
do not depend on how the runs were cut into shards; merging sorts by run index and
refuses gaps, overlaps and disagreeing checkpoints.  A *target shard* holds the runs with z
that several scenarios share (S3-S6, one training), scored for each of them
(:func:`write_target_scores`); a job of one world's runs indexes them within their world
(:func:`world_index`).  The repeats of a setting pool into one audit of all their runs
(:func:`pool_repeats`): the figures' and the report's headline bounds.

Importable without torch (the estimate step only reads scores).
"""

from __future__ import annotations

import json
import zipfile
import zlib
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from subaudit.artifacts import CorruptArtifact, read_npz, write_npz
from subaudit.validation import Diverged, ParameterError, check_count

__all__ = ["Scores", "audit_estimates", "load_audit_scores", "merge_shards", "pool_repeats", "pooled_estimates",
           "read_scores", "read_target_scores", "run_bits", "shard_bounds", "world_index", "write_scores",
           "write_target_scores"]


@dataclass(frozen=True)
class Scores:
    """Scores of R runs at S checkpoints, with their bits, sigma and setting."""

    runs: np.ndarray          # (R,) int64 run indices
    bits: np.ndarray          # (R,) int8: 1 = D (z), 0 = D' (z')
    steps: np.ndarray         # (S,) int64 checkpoints: training steps done
    scores: np.ndarray        # (S, R) float64
    sigma: float
    setting: Mapping[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        object.__setattr__(self, "runs", np.asarray(self.runs, dtype=np.int64).reshape(-1))
        object.__setattr__(self, "bits", np.asarray(self.bits).astype(np.int8).reshape(-1))
        object.__setattr__(self, "steps", np.asarray(self.steps, dtype=np.int64).reshape(-1))
        object.__setattr__(self, "scores", np.atleast_2d(np.asarray(self.scores,
                                                                    dtype=np.float64)))
        R, S = self.runs.size, self.steps.size
        if self.bits.shape != (R,) or self.scores.shape != (S, R):
            raise ValueError(f"scores: {R} runs, {self.bits.size} bits, {S} steps and a "
                             f"{self.scores.shape} score matrix do not fit together")


def _check_finite(path: str | Path, scores: np.ndarray, runs: np.ndarray) -> None:
    """Refuse non-finite scores (a diverged training) before anything is written."""
    bad = ~np.isfinite(scores)
    if bad.any():
        which = runs[bad.any(axis=tuple(range(bad.ndim - 1)))]
        raise Diverged(f"the scores of {which.size} run(s) (first: run {int(which[0])})", str(path),
                       "lower its experiment's lr or clip in natural.experiments (the path holds the setting)")


def write_scores(path: str | Path, scores: Scores) -> None:
    """Write a score file (atomic, with its digest; :func:`subaudit.artifacts.write_npz`);
    :class:`~subaudit.validation.Diverged` if a score is not finite."""
    _check_finite(path, scores.scores, scores.runs)
    write_npz(path, runs=scores.runs, bits=scores.bits, steps=scores.steps,
              scores=scores.scores, sigma=np.float64(scores.sigma),
              setting=np.array(json.dumps(dict(scores.setting), sort_keys=True)))


def write_target_scores(path: str | Path, runs: np.ndarray, steps: np.ndarray, sigma: float,
                        scores: Mapping[str, np.ndarray], setting: Mapping[str, Any]) -> None:
    """Write a shard of runs with the target z scored for several scenarios (``scores``:
    scenario -> (S, R)), each read back as its own :class:`Scores` by
    :func:`read_target_scores` (atomic, with its digest)."""
    names = list(scores)
    runs = np.asarray(runs, dtype=np.int64)
    if not np.all(run_bits(runs) == 1):
        raise ValueError("a target shard holds runs with z only (even indices)")
    for k in names:
        _check_finite(path, np.asarray(scores[k], dtype=np.float64), runs)
    write_npz(path, runs=runs, steps=np.asarray(steps, dtype=np.int64),
              scores=np.stack([np.asarray(scores[k], dtype=np.float64) for k in names]),
              scenarios=np.array(names), sigma=np.float64(sigma),
              setting=np.array(json.dumps(dict(setting), sort_keys=True)))


def read_target_scores(path: str | Path, scenario: str) -> Scores:
    """The runs of a target shard (:func:`write_target_scores`) as scored for ``scenario``."""
    data = read_npz(path)
    names = [str(n) for n in data["scenarios"]]
    if scenario not in names:
        raise CorruptArtifact(path, f"no scores for {scenario} (it has {', '.join(names)})")
    runs = data["runs"]
    return Scores(runs=runs, bits=run_bits(runs), steps=data["steps"], scores=data["scores"][names.index(scenario)],
                  sigma=float(data["sigma"]), setting={**json.loads(str(data["setting"])), "scenario": scenario})


def read_scores(path: str | Path) -> Scores:
    """Read a score file written by :func:`write_scores` (CorruptArtifact if it is not one)."""
    data = read_npz(path)
    missing = {"runs", "bits", "steps", "scores", "sigma", "setting"} - set(data)
    if missing:
        raise CorruptArtifact(path, f"not a score file: no {', '.join(sorted(missing))}")
    return Scores(runs=data["runs"], bits=data["bits"], steps=data["steps"],
                  scores=data["scores"], sigma=float(data["sigma"]),
                  setting=json.loads(str(data["setting"])))


#: The layouts :func:`load_audit_scores` reads, in words (for messages and help).
SCORE_LAYOUTS = ("CSV with columns score,label (label 1: a run with the target z, world D; 0: with z')",
                 ".npz with 1-D arrays score and label",
                 ".npz with 1-D arrays in_scores (runs on D) and out_scores (runs on D')",
                 "a subaudit score file (results/.../scores/*.npz; --step picks the checkpoint)")


def load_audit_scores(path: str | Path, step: int | None = None) -> tuple[np.ndarray, np.ndarray]:
    """(scores, labels) of an audit from a file in one of :data:`SCORE_LAYOUTS`; ``step``
    chooses a subaudit score file's checkpoint (default: the last). ValueError naming the
    layouts otherwise."""
    import pandas as pd

    path = Path(path)
    if path.is_dir():
        raise ValueError(f"{path}: a folder, not a scores file")
    if not path.is_file():
        raise FileNotFoundError(f"{path}: no such file")
    expected = "expected one of: " + "; ".join(SCORE_LAYOUTS)
    if path.suffix.lower() == ".csv":
        try:
            frame = pd.read_csv(path)
        except (UnicodeDecodeError, pd.errors.ParserError, pd.errors.EmptyDataError) as err:
            raise ValueError(f"{path}: not a readable CSV ({' '.join(str(err).split())}); {expected}") from None
        missing = {"score", "label"} - set(frame.columns)
        if missing:
            raise ValueError(f"{path}: missing column(s) {', '.join(sorted(missing))}; {expected}")
        try:
            return frame["score"].to_numpy(float), frame["label"].to_numpy()
        except (ValueError, TypeError) as err:
            raise ValueError(f"{path}: column score is not numbers ({err})") from None
    if path.suffix.lower() != ".npz":
        raise ValueError(f"{path}: not a .csv or .npz file; {expected}")
    try:
        with np.load(path, allow_pickle=False) as data:
            keys = set(data.files)
    except (ValueError, OSError, zipfile.BadZipFile) as err:   # not a zip (np.load then refuses a pickle)
        raise ValueError(f"{path}: not an .npz archive (numpy cannot open it: {' '.join(str(err).split())[:200]})") \
            from None
    if {"runs", "bits", "steps", "scores"} <= keys:
        audit = read_scores(path)
        row = len(audit.steps) - 1 if step is None else np.flatnonzero(audit.steps == step)
        if np.size(row) == 0:
            raise ParameterError("step", step, f"a checkpoint of this file: {audit.steps.tolist()}")
        return audit.scores[int(np.ravel(row)[0])], audit.bits
    try:
        with np.load(path, allow_pickle=False) as data:
            if {"score", "label"} <= keys:
                return data["score"].astype(float), data["label"]
            if {"in_scores", "out_scores"} <= keys:
                s_in, s_out = data["in_scores"].reshape(-1), data["out_scores"].reshape(-1)
                return (np.r_[s_in, s_out].astype(float),
                        np.r_[np.ones(s_in.size, np.int8), np.zeros(s_out.size, np.int8)])
    except (OSError, zipfile.BadZipFile, zlib.error, EOFError) as err:    # a damaged member
        raise ValueError(f"{path}: damaged ({type(err).__name__}: {' '.join(str(err).split())[:200]})") from None
    except ValueError as err:                                          # object arrays, text scores
        raise ValueError(f"{path}: {err}") from None
    raise ValueError(f"{path}: arrays {sorted(keys)}; {expected}")


def run_bits(runs: Sequence[int] | np.ndarray) -> np.ndarray:
    """Bit of each run: 1 (D, target z) for even indices, 0 (D', canary z') for odd."""
    r = np.asarray(runs, dtype=np.int64)
    return (1 - (r % 2)).astype(np.int8)


def world_index(runs: Sequence[int] | np.ndarray) -> np.ndarray:
    """Each run's index among the runs of its own world (r // 2): what a job that trains one
    world only (the shared runs with z, or a scenario's runs with z') gives the engine as run
    indices, so that its runs fill the engine's aligned blocks instead of every other slot (a
    run's randomness is then that of (the job's seed, r // 2))."""
    return np.asarray(runs, dtype=np.int64) // 2


def shard_bounds(runs: int, shard_size: int) -> list[tuple[int, int]]:
    """Consecutive ``[lo, hi)`` run ranges of at most ``shard_size`` runs."""
    total = check_count(runs, "runs", minimum=2)
    if total % 2:
        raise ParameterError("runs", runs, "an even number (half D, half D')")
    size = check_count(shard_size, "shard_size")
    return [(lo, min(lo + size, total)) for lo in range(0, total, size)]


def merge_shards(parts: Sequence[Scores], runs: int,
                 setting: Mapping[str, Any] | None = None) -> Scores:
    """Join shards into one audit of ``runs`` runs, sorted by run index.

    The result must hold every run ``0..runs-1`` exactly once, with the bits
    :func:`run_bits` prescribes; the shards must agree on the checkpoints and sigma.
    ``setting`` (default: the first shard's) is the merged audit's.
    """
    if not parts:
        raise ValueError("no shards to merge")
    steps, sigma = parts[0].steps, parts[0].sigma
    for p in parts[1:]:
        if not np.array_equal(p.steps, steps):
            raise ValueError("shards disagree on the checkpoint steps")
        if p.sigma != sigma:
            raise ValueError(f"shards disagree on sigma ({p.sigma} vs {sigma})")
    all_runs = np.concatenate([p.runs for p in parts])
    order = np.argsort(all_runs, kind="stable")
    all_runs = all_runs[order]
    if not np.array_equal(all_runs, np.arange(runs)):
        missing = sorted(set(range(runs)) - set(all_runs.tolist()))
        dup = sorted({int(r) for r in all_runs[1:][np.diff(all_runs) == 0]})
        raise ValueError(f"shards do not cover runs 0..{runs - 1} exactly once "
                         f"(missing {missing[:10]}, duplicated {dup[:10]})")
    bits = np.concatenate([p.bits for p in parts])[order]
    if not np.array_equal(bits, run_bits(all_runs)):
        raise ValueError("shard bits differ from the run-parity rule")
    scores = np.concatenate([p.scores for p in parts], axis=1)[:, order]
    return Scores(runs=all_runs, bits=bits, steps=steps, scores=scores, sigma=sigma,
                  setting=parts[0].setting if setting is None else setting)


def pool_repeats(repeats: Sequence[Scores]) -> list[Scores]:
    """The repeats of each audit setting joined into one audit: every run of every repeat.

    Repeats of a setting train the same pair (z, z') from independent seeds, so their runs
    are independent draws from the same two worlds and the pooled runs are one larger audit
    of the same mechanism: a valid estimator stays valid on them, with the power of all the
    runs.  Audits are grouped by their setting less ``repeat`` (in first-seen order); the
    pooled setting says ``repeats`` (how many were joined) and its runs are numbered
    ``0..R-1`` in the order of the repeats.  Repeats must agree on checkpoints and sigma.
    """
    groups: dict[str, list[Scores]] = {}
    for audit in repeats:
        if "repeat" not in audit.setting:
            raise ValueError(f"an audit without a repeat in its setting: {dict(audit.setting)}")
        rest = {k: v for k, v in audit.setting.items() if k != "repeat"}
        groups.setdefault(json.dumps(rest, sort_keys=True), []).append(audit)
    pooled = []
    for rest, parts in groups.items():
        reps = [p.setting["repeat"] for p in parts]
        if len(set(reps)) != len(reps):
            raise ValueError(f"repeat(s) {sorted({r for r in reps if reps.count(r) > 1})} of {rest} given twice")
        for p in parts[1:]:
            if not np.array_equal(p.steps, parts[0].steps) or p.sigma != parts[0].sigma:
                raise ValueError(f"repeats of {rest} disagree on the checkpoints or sigma")
        bits = np.concatenate([p.bits for p in parts])
        pooled.append(Scores(runs=np.arange(bits.size), bits=bits, steps=parts[0].steps,
                             scores=np.concatenate([p.scores for p in parts], axis=1),
                             sigma=parts[0].sigma, setting={**json.loads(rest), "repeats": len(parts)}))
    return pooled


def audit_estimates(audit: Scores, delta: float, alpha: float, estimators: Sequence[str]) -> list[dict[str, Any]]:
    """One record per (checkpoint, estimator) of an audit: the estimate (its epsilon and
    counts of runs per world) with the audit's setting and sigma."""
    from subaudit.estimation import step_estimates

    records = step_estimates(audit.scores, audit.bits, audit.steps, delta, alpha, estimators)
    for rec in records:
        rec.update(audit.setting, sigma=audit.sigma)
    return records


def pooled_estimates(repeats: Sequence[Scores], delta: float, alpha: float,
                     estimators: Sequence[str]) -> list[dict[str, Any]]:
    """:func:`audit_estimates` of each setting's repeats pooled into one audit
    (:func:`pool_repeats`): the headline bounds of the figures and the report."""
    return [rec for audit in pool_repeats(repeats) for rec in audit_estimates(audit, delta, alpha, estimators)]
