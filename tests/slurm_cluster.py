"""The local SLURM cluster of the tests (scripts/slurm-cluster.sh, the fixture ``cluster``, a
plugin of conftest.py) and how they submit to it: shared by workflow/test_rehearsal.py (the
paper preset's DAG) and workflow/test_slurm.py (the stress test)."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

BIN = Path(sys.executable).parent
JOBCOMP = Path(os.environ.get("SUBAUDIT_SLURM_STATE", "/var/tmp/subaudit-slurm")) / "jobcomp.log"
SUBMITTED = re.compile(r"submitted with SLURM jobid (\d+)")
#: (SLURM job id, rule or group) of each submission in Snakemake's output
SUBMITTED_RULE = re.compile(r"submitted with SLURM jobid (\d+) \(log: \S*/slurm_logs/(?:rule|group)_(\w+?)/")


@pytest.fixture(scope="module")
def cluster(repo_root):
    script = repo_root / "scripts" / "slurm-cluster.sh"
    required = os.environ.get("SUBAUDIT_REQUIRE_SLURM") == "1"
    if subprocess.run([script, "status"], capture_output=True).returncode == 0:
        yield  # somebody else's running cluster: use it, leave it running
        return
    if os.geteuid() != 0 or not shutil.which("apt-get"):
        if required:
            pytest.fail("SUBAUDIT_REQUIRE_SLURM=1 but the cluster needs root and apt-get")
        pytest.skip("a local SLURM cluster needs root and apt-get (scripts/slurm-cluster.sh)")
    proc = subprocess.run([script, "start"], capture_output=True, text=True)
    if proc.returncode != 0:
        msg = f"scripts/slurm-cluster.sh start failed:\n{proc.stderr[-3000:]}"
        pytest.fail(msg) if required else pytest.skip(msg)
    yield
    subprocess.run([script, "stop"], capture_output=True)


def profile_run(workdir: Path, *args: str, **env: str) -> subprocess.CompletedProcess[str]:
    """`snakemake --profile slurm` as a user types it, site settings from the environment; the
    first status check after 1 s instead of the profile's 10 (jobs here take seconds: checks
    every 10 s or more, as the plugin spaces them while nothing finishes, would be most of the
    test's time), given on the command line, which wins over the profile."""
    environ = {**os.environ, "PATH": f"{BIN}{os.pathsep}{os.environ['PATH']}",
               "SUBAUDIT_SLURM_STATUS": "squeue",       # no slurmdbd here (see the script)
               "SUBAUDIT_SLURM_GPU_PARTITION": "gpu", **env}
    return subprocess.run(["snakemake", "--profile", "slurm",
                           "--slurm-init-seconds-before-status-checks", "1", *args], cwd=workdir,
                          capture_output=True, text=True, env=environ)


def jobcomp() -> dict[str, dict[str, str]]:
    """The cluster's record of finished jobs, by job id."""
    rows = [dict(re.findall(r"(\w+)=(\S*)", line)) for line in JOBCOMP.read_text().splitlines()]
    return {r["JobId"]: r for r in rows}


def scontrol_job(job_id: str) -> str:
    return subprocess.run(["scontrol", "show", "job", job_id], capture_output=True,
                          text=True).stdout


def check_went_through_sbatch(wd: Path, log: str, at_least: int) -> set[str]:
    """A finished profile run of ``wd`` (its Snakemake ``log``): at least ``at_least`` jobs went
    through sbatch and completed (in the cluster's records and in squeue, which the profile's
    status checks read), each with its own SLURM log; the light rules ran where the workflow
    was started, in the warm worker (those that started after it had loaded: the report, last,
    always), and no cluster job ran there (on this one node they reach its socket and are
    refused: their environment holds SLURM's variables). The rules that ran locally."""
    ids = SUBMITTED.findall(log)
    assert len(ids) >= at_least, log[-3000:]
    records = jobcomp()
    assert all(records[i]["JobState"] == "COMPLETED" for i in ids)
    listed = subprocess.run(["squeue", "-h", "-t", "all", "-o", "%i", "-j", ",".join(ids)],
                            capture_output=True, text=True).stdout.split()
    assert set(listed) == set(ids)
    logs = list((wd / ".snakemake" / "slurm_logs").rglob("*.log"))
    assert {p.stem for p in logs} >= set(ids)
    local = set(re.findall(r"^localrule (\w+):", log, re.M))
    worker = (wd / "logs" / "warm-worker.log").read_text()
    took = set(re.findall(r"^\S+ job \w+\.(\w+)\.py: pid", worker, re.M))   # Snakemake's tmpXXX.<script>.py
    refused = set(re.findall(r"^\S+ refused \w+\.(\w+)\.py: its environment differs in .*SLURM_JOB_ID",
                             worker, re.M))
    assert "report" in took and took <= local and not refused & local, worker[-3000:]
    return local


def check_gpu_requests(log: str) -> None:
    """The run's GPU jobs asked the GPU partition for one GPU; its CPU jobs the CPU partition
    for none; both kinds were submitted."""
    gpu_jobs, cpu_jobs = [], []
    for job_id in SUBMITTED.findall(log):
        info = scontrol_job(job_id)
        (gpu_jobs if "TresPerJob=gres:gpu:1" in info else cpu_jobs).append(info)
    assert gpu_jobs and cpu_jobs
    assert all("Partition=gpu" in j for j in gpu_jobs)
    assert all("Partition=cpu" in j and "gpu" not in j.replace("Partition=cpu", "") for j in cpu_jobs)
