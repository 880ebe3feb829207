"""The `slurm` profile as users type it, without a cluster (dry runs).

`snakemake --profile slurm` must work with no site settings at all, and each
SUBAUDIT_SLURM_* variable must land on the jobs docs/hpc.md says: the account on every job,
the CPU partition on CPU jobs, the GPU partition and model only on jobs that compute on a GPU.
tests/workflow/test_rehearsal.py submits for real; this checks every combination cheaply.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import workflow_copy

SNAKEMAKE = Path(sys.executable).parent / "snakemake"
GPU_RULES = {"features", "train_target", "train_shard", "utility", "one_run", "deep_canaries", "deep_pretrain",
             "deep_audit", "unit_costs"}
RULE = re.compile(r"^\s*rule (\w+):")
RESOURCES = re.compile(r"^\s*resources: (.*)")


@pytest.fixture(scope="module")
def workdir(tmp_path_factory, repo_root) -> Path:
    """The workflow on the tiny config (every rule of the default, a smaller DAG to plan)."""
    wd = workflow_copy(tmp_path_factory.mktemp("profile"))
    for name in ("slurm", "presets"):
        shutil.copytree(repo_root / name, wd / name)
    return wd


def dry_run(wd: Path, *args: str, **env: str) -> list[tuple[str, dict[str, str]]]:
    """(rule, resources) of every job `snakemake --profile slurm -n --forceall` would submit (the
    default target and the on-demand `unit_costs`)."""
    environ = {k: v for k, v in os.environ.items() if not k.startswith("SUBAUDIT_SLURM_")}
    proc = subprocess.run([SNAKEMAKE, "--profile", "slurm", "-n", "--forceall", "all", "unit_costs", *args],
                          cwd=wd, capture_output=True, text=True, env={**environ, **env})
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    jobs, rule = [], None
    for line in proc.stdout.splitlines():
        if m := RULE.match(line):
            rule = m.group(1)
        elif (m := RESOURCES.match(line)) and rule is not None:
            jobs.append((rule, dict(kv.split("=", 1) for kv in m.group(1).split(", "))))
            rule = None
    assert {r for r, _ in jobs} >= GPU_RULES | {"train_shard", "reference", "simulate_s1"}
    return jobs


GROUPED = {"train_target", "train_shard", "deep_audit", "calibrate_s1", "calibrate_natural", "ratio_grid_row",
           "reference", "craft"}


def test_no_site_settings_needed(workdir):
    for rule, res in dry_run(workdir):                         # natural.device: cpu
        assert res.get("gpu", "0") == "0", rule                # the plugin asks for no GPU
        assert not {"slurm_partition", "gpu_model", "slurm_account"} & res.keys(), rule
        # a grouped job takes its submission's one serial slot: a group's jobs run one after
        # another, and the submission asks for the largest job's resources, not their sum
        assert res.get("serial") == ("1" if rule in GROUPED else None), rule


@pytest.mark.parametrize("env", [
    {},
    {"SUBAUDIT_SLURM_GPU_MODEL": "h100"},
    {"SUBAUDIT_SLURM_GPU_PARTITION": "gpux"},
    {"SUBAUDIT_SLURM_ACCOUNT": "proj7", "SUBAUDIT_SLURM_PARTITION": "cpux",
     "SUBAUDIT_SLURM_GPU_PARTITION": "gpux", "SUBAUDIT_SLURM_GPU_MODEL": "h100"},
], ids=["none", "gpu-model", "gpu-partition", "all"])
def test_site_settings_land_where_documented(workdir, env):
    cpu_partition = env.get("SUBAUDIT_SLURM_PARTITION")
    gpu_partition = env.get("SUBAUDIT_SLURM_GPU_PARTITION", cpu_partition)
    for rule, res in dry_run(workdir, "--configfile", "presets/gpu.yaml", **env):
        gpu = rule in GPU_RULES
        assert res.get("gpu") == ("1" if gpu else None), rule
        assert res.get("slurm_partition") == (gpu_partition if gpu else cpu_partition), rule
        assert res.get("gpu_model") == (env.get("SUBAUDIT_SLURM_GPU_MODEL") if gpu else None)
        assert res.get("slurm_account") == env.get("SUBAUDIT_SLURM_ACCOUNT"), rule
