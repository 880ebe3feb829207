"""The rehearsal of the paper preset (presets/rehearsal.yaml over presets/paper.yaml: the paper's
whole DAG at small sizes) through a real single-node SLURM cluster (scripts/slurm-cluster.sh),
submitted as docs/hpc.md gives it.

Jobs must really pass through sbatch (job ids in Snakemake's output, in the cluster's job
records and in squeue), GPU jobs must ask for a GPU, the light rules must stay local (exactly
those `subaudit plan` counts as local), the run must end complete, every job must stay within
the memory and time it requested (its own log line, or its benchmark), a persistent failure
must be retried, then stop the run naming the job and its log, and the cluster's scores must
equal a local run's in other shards bit for bit. The cost model's per-unit costs, measured on
the cluster's node by the `unit_costs` job submitted with the rehearsal, must agree with the
model (the rehearsal's own jobs are start-up, not units of work); it is submitted beside the
persistent failure's retries, whose waits leave the node's cores free. Needs root to start the
cluster; CI sets SUBAUDIT_REQUIRE_SLURM=1 so that a cluster that cannot start fails the run
instead of skipping it. (test_slurm.py keeps the stress test: hundreds of shard jobs, `pytest -m stress`.)
"""

from __future__ import annotations

import re
import shutil
import subprocess
import time
from pathlib import Path

import numpy as np
import pytest

from conftest import job_counts, jobs_over_requests
from slurm_cluster import (BIN, SUBMITTED, SUBMITTED_RULE, check_gpu_requests, check_went_through_sbatch, jobcomp,
                           profile_run)

pytestmark = [pytest.mark.slow, pytest.mark.slurm]

# The rehearsal as docs/hpc.md gives it, with natural.device auto (site.yaml here): the GPU jobs
# ask the cluster for a GPU and compute on the CPU, as this node has none.
CONFIG = ("--configfile", "presets/paper.yaml", "presets/rehearsal.yaml", "site.yaml")
# Grouped as a site would group short jobs (each submission starts Snakemake twice, about 5 s of
# this node's 2 cores): the deep audits in 2 submissions, the preparations in 8s, shards in 8s.
GROUPING = {"SUBAUDIT_SLURM_AUDITS_PER_JOB": "9", "SUBAUDIT_SLURM_PREPARE_PER_JOB": "8",
            "SUBAUDIT_SLURM_SHARDS_PER_JOB": "8"}
# A tabular audit setting of the rehearsal (one shard of 32 runs on the cluster).
SETTING = "S3_q0.25_C5_T4_k2_lr0.0018_eps10"
CANARY = "results/natural/tabular/canaries/S3_q0.25_T4_k2_lr0.0018.npz"
SCORES = f"results/natural/tabular/scores/{SETTING}_R32_rep0.npz"


def submit(wd: Path, *args: str, **env: str) -> subprocess.CompletedProcess[str]:
    return profile_run(wd, *args, *CONFIG, **{**GROUPING, **env})     # targets first: --configfile takes a list


@pytest.fixture(scope="module")
def workdir(cluster, tmp_path_factory, repo_root) -> tuple[Path, str]:
    """The rehearsal, submitted from a copy of the workflow with the repository's parameters and
    presets (its wall time printed for the record)."""
    wd = tmp_path_factory.mktemp("rehearsal")
    for name in ("Snakefile", "workflow", "slurm", "presets", "params.yaml", "environment.yml"):
        src = repo_root / name
        (shutil.copytree if src.is_dir() else shutil.copy)(src, wd / name)
    (wd / "site.yaml").write_text("natural:\n  device: auto\n")
    start = time.monotonic()
    proc = submit(wd)
    assert proc.returncode == 0, proc.stderr[-5000:]
    print(f"the rehearsal through SLURM: {time.monotonic() - start:.0f} s, "
          f"{len(SUBMITTED.findall(proc.stderr))} submissions")
    return wd, proc.stderr


def test_jobs_went_through_sbatch_and_the_light_rules_stayed_local(workdir):
    """Through sbatch; the rules that ran locally are exactly those `subaudit plan` counts as
    local (every local rule has jobs here)."""
    from subaudit.pipeline.plan import local_rules

    wd, log = workdir
    local = check_went_through_sbatch(wd, log, at_least=15)
    assert local == local_rules(wd) and {"acquire", "estimate_natural", "report"} <= local


def test_gpu_jobs_ask_for_a_gpu_and_jobs_are_grouped(workdir):
    wd, log = workdir
    check_gpu_requests(log)
    # the training shards and the deep audits went to the cluster in groups
    for rule, parts in (("train_\\w+", "shards"), ("deep_audit", "audits")):
        groups = set(re.findall(rf"group_{parts}_{rule}/(\d+)\.log", log))
        assert len(groups) > 1, (rule, groups)
    shard_logs = sorted((wd / "logs/natural").rglob("train_*.log"))
    assert len(shard_logs) > len(set(re.findall(r"group_shards_\w+/(\d+)\.log", log)))
    assert all(" on cpu:" in p.read_text() for p in shard_logs)
    assert len(list((wd / "logs/deep").glob("audit_*.log"))) > len(
        set(re.findall(r"group_audits_deep_audit/(\d+)\.log", log)))


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


@pytest.fixture(scope="module")
def failing_submission(workdir) -> tuple[Path, subprocess.CompletedProcess[str], np.ndarray]:
    """A second submission: a canary damaged after it was made, so that the shard that reads it
    must train again (and fail), and beside it the `unit_costs` job (keep-going: it completes).
    The scores the shard had made, for the rerun's comparison."""
    wd, _ = workdir
    canary = wd / CANARY
    good = np.load(wd / SCORES)["scores"]
    canary.write_bytes(canary.read_bytes()[:-100])
    (wd / SCORES).unlink()                                   # so that the shard must train again
    return wd, submit(wd, SCORES, "unit_costs", SUBAUDIT_SLURM_RETRIES="1"), good


def test_the_cost_models_per_unit_costs_agree_with_what_the_rehearsal_measured(failing_submission):
    """Every per-unit cost the requests scale (the engine's, an accountant evaluation, an S1
    run-step, the rehearsal's backbones, its proxy network and its deep network under Opacus),
    measured on the cluster's node at about a second of work each, within AGREEMENT of the
    model (the earlier S1 rate, 8e-8 s a run-step, measured 0.32 times there and failed), in
    the process's CPU time: beside the other tests' work, the minilm backbone's wall time
    measured 3.16 times the model. The job went through sbatch and stayed within its own
    requests."""
    from subaudit.artifacts import read_json
    from subaudit.pipeline.unit_costs import AGREEMENT

    wd, proc, _ = failing_submission
    assert "unit_costs" in {rule for _, rule in SUBMITTED_RULE.findall(proc.stderr)}
    dry = subprocess.run([BIN / "snakemake", "--dry-run", "--forceall", "unit_costs", *CONFIG], cwd=wd,
                         capture_output=True, text=True)
    assert dry.returncode == 0, dry.stderr[-3000:]
    assert jobs_over_requests(wd, dry.stdout) == (1, [])
    measured = read_json(wd / "logs/benchmarks/unit_costs.json")
    assert measured["device"] == "cpu" and measured["agreement"] == list(AGREEMENT)
    assert measured["clock"] == "process_time"        # the core's work, not the busy node's wall time
    units = measured["units"]
    assert {u["unit"] for u in units} == {"ENGINE_COSTS", "ACCOUNTANT_EVALUATION_S", "S1_RUN_STEP_S",
                                         "Backbone.cpu_macs_per_s", "ProxyNetwork.macs_per_second",
                                         "NETWORK_COSTS"}
    assert {u["setting"].split(",")[0] for u in units if u["unit"] == "Backbone.cpu_macs_per_s"} == \
        {"efficientnet-lite0", "minilm-l6-v2"}
    lo, hi = AGREEMENT
    assert all(lo <= u["measured_s"] / u["modelled_s"] <= hi for u in units), \
        [(u["unit"], u["setting"], round(u["ratio"], 2)) for u in units]


def test_persistent_failure_is_retried_then_named_with_its_log(failing_submission):
    """A canary damaged after it was made: its shard fails on the cluster, is retried once, and
    the run stops naming the job's output and a log that names the damage; `subaudit verify
    --remove` finds it, and a rerun (here, locally) recomputes the same scores."""
    wd, proc, good = failing_submission
    canary = wd / CANARY
    assert proc.returncode != 0
    err = proc.stderr
    assert "Error in rule train_" in err, err[-5000:]
    named = re.findall(r"log: (logs/natural/tabular/train_\S+\.log)", err)
    assert named and any(f"{CANARY} is damaged" in (wd / p).read_text() for p in set(named)), err[-3000:]
    records = jobcomp()
    shards = {i for i, rule in SUBMITTED_RULE.findall(err) if rule != "unit_costs"}
    assert all(records[i]["JobState"] == "FAILED" for i in shards)
    assert len(shards) == 2                                            # 1 + 1 retry

    assert subprocess.run([BIN / "subaudit", "verify", "--remove", "results"], cwd=wd,
                          capture_output=True).returncode == 0
    assert not canary.exists()
    proc = subprocess.run([BIN / "snakemake", "--cores", "2", SCORES, *CONFIG], cwd=wd, capture_output=True,
                          text=True)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert np.array_equal(np.load(wd / SCORES)["scores"], good)


def test_the_clusters_scores_equal_a_local_run_in_other_shards(workdir):
    """A tabular setting's merged scores from the cluster (one shard of 32 runs) and from a local
    run of the same configuration in shards of 8 runs are the same, byte for byte."""
    wd, _ = workdir
    target = SCORES.replace("S3_", "S2_")
    cluster = (wd / target).read_bytes()
    (wd / "shards8.yaml").write_text("natural:\n  shard_size: 8\n")
    proc = subprocess.run([BIN / "snakemake", "--cores", "2", target, *CONFIG, "shards8.yaml"], cwd=wd,
                          capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr[-3000:]
    shards = sorted((wd / f"results/natural/tabular/shards/{SETTING.replace('S3_', 'S2_')}_rep0").glob("runs*.npz"))
    assert [p.name for p in shards] == ["runs0-32.npz", "runs0-8.npz", "runs16-24.npz", "runs24-32.npz",
                                        "runs8-16.npz"]
    assert (wd / target).read_bytes() == cluster
