"""`snakemake --profile slurm` through a real single-node SLURM (scripts/slurm-cluster.sh).

The tiny workflow is submitted with the repository's own profile: jobs must really pass
through sbatch (job ids in Snakemake's output, in the cluster's job records and in squeue),
GPU jobs must ask for a GPU, light rules must stay local, the scores must equal a local run
bit for bit, and a persistent failure must be retried, then stop the run naming the shard
and its log. Needs root to start the cluster; CI sets SUBAUDIT_REQUIRE_SLURM=1 so that a
cluster that cannot start fails the run instead of skipping it.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
from pathlib import Path

import numpy as np
import pytest

from conftest import base_ablations, digests, job_counts, lean, setting_path, tiny, write_params
from slurm_cluster import BIN, SUBMITTED, check_gpu_requests, check_went_through_sbatch, jobcomp
from slurm_cluster import profile_run as submit

pytestmark = [pytest.mark.slow, pytest.mark.slurm]


def slurm_config() -> dict:
    """The tiny config trimmed to what the profile's behaviour needs (each SLURM job costs
    seconds of start-up): the tabular experiment with S2 and S3, its one-run audits and its
    ablations at their base values, one S1 setting, no deep-network phase or reconstruction;
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


def profile_run(workdir: Path, *args: str, **env: str) -> subprocess.CompletedProcess[str]:
    """The profile's run (slurm_cluster.profile_run) with two shards a submission."""
    return submit(workdir, *args, **{"SUBAUDIT_SLURM_SHARDS_PER_JOB": "2", **env})


def merged_path(scenario: str, params: dict | None = None) -> str:
    """The merged scores of a tabular audit setting of the SLURM config."""
    return setting_path("scores", params or slurm_config(), "tabular", scenario)


@pytest.fixture(scope="module")
def workdir(cluster, tmp_path_factory, repo_root) -> tuple[Path, str]:
    wd = tmp_path_factory.mktemp("slurm")
    for name in ("Snakefile", "workflow", "slurm"):
        src = repo_root / name
        (shutil.copytree if src.is_dir() else shutil.copy)(src, wd / name)
    write_params(wd, slurm_config())
    proc = profile_run(wd)
    assert proc.returncode == 0, proc.stderr[-5000:]
    return wd, proc.stderr


def test_jobs_went_through_sbatch(workdir):
    wd, log = workdir
    local = check_went_through_sbatch(wd, log, at_least=10)
    assert {"acquire", "estimate_s1", "estimate_natural", "epsilon_vs_step", "all"} <= local
    assert (wd / "results/figures/fig4.png").is_file()


def test_gpu_jobs_ask_for_a_gpu_and_shards_are_grouped(workdir):
    wd, log = workdir
    check_gpu_requests(log)
    # 4 shards (2 scenarios x 2 shards) in groups of 2
    groups = re.findall(r"group_shards_train_shard/(\d+)\.log", log)
    assert len(set(groups)) == 2
    shard_logs = sorted((wd / "logs/natural").rglob("train_*.log"))
    assert len(shard_logs) == 4 and all(" on cpu:" in p.read_text() for p in shard_logs)


def test_outputs_equal_a_local_run_and_nothing_is_left_to_do(workdir, tiny_run):
    """Every data and audit artifact the SLURM run shares with the session's local run of the
    tiny workflow (same seed, same settings: data, features, calibrations, reference model,
    canaries, merged scores, estimates of the tabular audits) is the same, byte for byte,
    though the cluster trained each setting in two shards and the local run in one.  Not S3's
    scores: locally S3 shares its runs with the target with S4-S6 (train_target, its own seed),
    on the cluster it is alone and trains both worlds: the same law, other draws."""
    wd, _ = workdir
    assert job_counts(wd) == {}
    parts = ("data", "results/natural")
    cluster, local = digests(wd, *parts), digests(tiny_run, *parts)
    shared = sorted(k for k in set(cluster) & set(local) if not re.search(r"/(scores|estimates)/S3_", k))
    assert merged_path("S2") in shared and len(shared) >= 10, shared
    assert setting_path("canary", slurm_config(), "tabular", "S3") in shared
    assert [k for k in shared if cluster[k] != local[k]] == []


def test_persistent_failure_is_retried_then_named_with_its_log(workdir):
    wd, _ = workdir
    canary = wd / setting_path("canary", slurm_config(), "tabular", "S3")
    good = np.load(wd / merged_path("S3"))
    canary.write_bytes(canary.read_bytes()[:-100])           # damaged after it was made

    proc = profile_run(wd, SUBAUDIT_SLURM_RETRIES="1")
    assert proc.returncode != 0
    err = proc.stderr
    assert "Error in rule train_shard" in err, err[-5000:]
    shards = setting_path("shard_dir", slurm_config(), "tabular", "S3")
    assert f"output: {shards}/runs" in err
    key = Path(shards).name
    named = re.findall(rf"log: (logs/natural/tabular/train_{key}_runs\S+\.log)", err)
    assert named and any(f"{canary.relative_to(wd)} is damaged" in (wd / p).read_text()
                         for p in set(named))
    records = jobcomp()
    assert all(records[i]["JobState"] == "FAILED" for i in SUBMITTED.findall(err))
    attempts = set(re.findall(r"group_shards_train_shard/(\d+)\.log", err))
    assert len(attempts) == 2                                        # 1 + 1 retry

    # the damage is found, removed, and the rerun recomputes the same scores
    assert subprocess.run([BIN / "subaudit", "verify", "--remove", "results"], cwd=wd,
                          capture_output=True).returncode == 0
    proc = profile_run(wd)
    assert proc.returncode == 0, proc.stderr[-5000:]
    again = np.load(wd / merged_path("S3"))
    assert np.array_equal(again["scores"], good["scores"])


@pytest.mark.stress
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
    target = merged_path("S2", params)
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
