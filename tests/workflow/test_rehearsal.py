"""The rehearsal of the paper preset (presets/rehearsal.yaml over presets/paper.yaml: the paper's
whole DAG at small sizes) through a real single-node SLURM cluster (scripts/slurm-cluster.sh),
submitted as docs/hpc.md gives it.

Jobs must really pass through sbatch, GPU jobs must ask for a GPU, the light rules must stay
local (exactly those `subaudit plan` counts as local), the run must end complete, and every job
must stay within the memory and time it requested (its own log line, or its benchmark). About 6
minutes on 2 cores (110 jobs): not in the default run of the suite (`pytest -m rehearsal`);
test_slurm.py submits the tiny workflow there.
"""

from __future__ import annotations

import re
import shutil
import subprocess
from pathlib import Path

import pytest

from conftest import job_counts, jobs_over_requests
from slurm_cluster import BIN, SUBMITTED, check_gpu_requests, check_went_through_sbatch, profile_run

pytestmark = [pytest.mark.slow, pytest.mark.slurm, pytest.mark.rehearsal]

# The rehearsal as docs/hpc.md gives it, with natural.device auto (site.yaml here): the GPU jobs
# ask the cluster for a GPU and compute on the CPU, as this node has none.
CONFIG = ("--configfile", "presets/paper.yaml", "presets/rehearsal.yaml", "site.yaml")


@pytest.fixture(scope="module")
def workdir(cluster, tmp_path_factory, repo_root) -> tuple[Path, str]:
    """The rehearsal, submitted from a copy of the workflow with the repository's parameters and
    presets (its wall time printed for the record)."""
    import time

    wd = tmp_path_factory.mktemp("rehearsal")
    for name in ("Snakefile", "workflow", "slurm", "presets", "params.yaml", "environment.yml"):
        src = repo_root / name
        (shutil.copytree if src.is_dir() else shutil.copy)(src, wd / name)
    (wd / "site.yaml").write_text("natural:\n  device: auto\n")
    start = time.monotonic()
    proc = profile_run(wd, *CONFIG)
    assert proc.returncode == 0, proc.stderr[-5000:]
    print(f"the rehearsal through SLURM: {time.monotonic() - start:.0f} s, "
          f"{len(SUBMITTED.findall(proc.stderr))} submissions")
    return wd, proc.stderr


def test_jobs_went_through_sbatch_and_the_light_rules_stayed_local(workdir):
    """Through sbatch; the rules that ran locally are exactly those `subaudit plan` counts as
    local (every local rule has jobs here)."""
    from subaudit.pipeline.plan import local_rules

    wd, log = workdir
    local = check_went_through_sbatch(wd, log, at_least=30)
    assert local == local_rules(wd) and {"acquire", "estimate_natural", "report"} <= local


def test_gpu_jobs_ask_for_a_gpu_and_shards_are_grouped(workdir):
    wd, log = workdir
    check_gpu_requests(log)
    # the training shards went to the cluster in groups (the profile's SHARDS_PER_JOB, 4)
    groups = set(re.findall(r"group_shards_train_\w+/(\d+)\.log", log))
    shard_logs = sorted((wd / "logs/natural").rglob("train_*.log"))
    assert len(shard_logs) > len(groups) > 1 and all(" on cpu:" in p.read_text() for p in shard_logs)


def test_the_rehearsal_is_complete_and_every_job_within_its_request(workdir):
    """Nothing left to do; every figure and the report made; every job (cluster and local) within
    the memory and time it asked for, measured by its own log line or benchmark."""
    wd, _ = workdir
    assert job_counts(wd, *CONFIG) == {}
    figures = {p.stem for p in (wd / "results/figures").glob("*.png")}
    assert {"fig2", "fig3", "fig4", "fig5", "figA1", "figA5", "deep-one-run", "one-run", "reconstruction"} <= figures
    assert (wd / "results/report.json").is_file()
    proc = subprocess.run([BIN / "snakemake", "--dry-run", "--forceall", *CONFIG], cwd=wd,
                          capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr[-3000:]
    checked, over = jobs_over_requests(wd, proc.stdout)
    assert checked > 80 and not over, over
