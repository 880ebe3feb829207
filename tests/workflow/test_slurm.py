"""`snakemake --profile slurm` at a scale: hundreds of shard jobs of the tiny workflow through a
real single-node SLURM (scripts/slurm-cluster.sh), none lost and none run twice (`pytest -m
stress`). What a submission must do (sbatch, GPU requests, local rules, retries, the same bits
as a local run) is tested on the paper preset's rehearsal, workflow/test_rehearsal.py.
"""

from __future__ import annotations

import os
import shutil

import numpy as np
import pytest

from conftest import base_ablations, lean, setting_path, tiny, write_params
from slurm_cluster import SUBMITTED, jobcomp, profile_run

pytestmark = [pytest.mark.slow, pytest.mark.slurm, pytest.mark.stress]


def slurm_config() -> dict:
    """The tiny config trimmed to the tabular experiment with S2 and S3, its one-run audits and
    its ablations at their base values, one S1 setting, no deep-network phase or reconstruction;
    device auto: GPU jobs ask the cluster for a GPU."""
    params = lean(tiny())
    nat = params["natural"]
    nat.update(scenarios=["S2", "S3"], device="auto", shard_size=16)   # two shards a setting
    nat["experiments"] = {"tabular": nat["experiments"]["tabular"]}
    params["one_run"]["experiment"] = "tabular"
    params["reconstruction"]["experiment"] = None
    params["ablations"]["scenarios"] = ["S2", "S3"]
    base_ablations(params, "tabular")
    return params


def test_stress_hundreds_of_shards_lose_and_duplicate_no_run(cluster, tmp_path, repo_root):
    """SUBAUDIT_STRESS_SHARDS shards (default 200) of 16 runs, one setting, each shard its
    own job, SUBAUDIT_SLURM_SHARDS_PER_JOB of them per sbatch submission (default 1)."""
    shards = int(os.environ.get("SUBAUDIT_STRESS_SHARDS", "200"))
    per_job = os.environ.get("SUBAUDIT_SLURM_SHARDS_PER_JOB", "1")
    wd = tmp_path / "stress"
    wd.mkdir()
    for name in ("Snakefile", "workflow", "slurm"):
        src = repo_root / name
        (shutil.copytree if src.is_dir() else shutil.copy)(src, wd / name)
    params = slurm_config()
    params["natural"].update(runs=16 * shards, shard_size=16)
    write_params(wd, params)
    target = setting_path("scores", params, "tabular", "S2")
    proc = profile_run(wd, target, SUBAUDIT_SLURM_SHARDS_PER_JOB=per_job,
                       SUBAUDIT_SLURM_JOBS="500")
    assert proc.returncode == 0, proc.stderr[-5000:]
    ids = SUBMITTED.findall(proc.stderr)
    records = jobcomp()
    assert len(set(ids)) == len(ids) and all(records[i]["JobState"] == "COMPLETED" for i in ids)
    shard_dir = wd / setting_path("shard_dir", params, "tabular", "S2")
    assert len(list(shard_dir.glob("runs*.npz"))) == shards
    merged = np.load(wd / target)
    assert merged["runs"].tolist() == list(range(16 * shards))      # none lost, none twice
    assert int(merged["bits"].sum()) == 8 * shards
    print(f"{shards} shards, {len(ids)} sbatch submissions")
