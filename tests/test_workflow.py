"""Integration: the real Snakemake workflow on a tiny config.

Runs the whole DAG once, then checks that a second run does nothing, that changing
one value in params.yaml reruns exactly the jobs that depend on it, and that a bad
value stops the workflow before any job runs, naming the key.
"""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
from pathlib import Path

import pandas as pd
import pytest
import yaml

pytestmark = pytest.mark.slow

TINY = {
    "seed": 7,
    "delta": 1.0e-5,
    "alpha": 0.05,
    "estimators": ["heldout", "paper"],
    "s1": {"steps": 40, "every": 20, "sampling_rates": [1.0, 0.25], "target_epsilons": [2, 4],
           "runs_per_world": 500, "repeats": 2, "adjacency": "substitute"},
    "ratio_grid": {"steps": 40, "sampling_rates": [1.0, 0.25], "noise_multipliers": [3.0, 6.0]},
}


def snakemake(workdir: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "snakemake", "--cores", "2", *args],
                          cwd=workdir, capture_output=True, text=True)


def job_counts(workdir: Path) -> dict[str, int]:
    """Jobs a dry run would execute, by rule ({} when there is nothing to do)."""
    proc = snakemake(workdir, "--dry-run")
    assert proc.returncode == 0, proc.stderr
    text = proc.stdout + proc.stderr
    if "Nothing to be done" in text:
        return {}
    table = text.split("Job stats:", 1)[1]
    counts = {}
    for line in table.splitlines()[3:]:
        m = re.match(r"^(\w+)\s+(\d+)$", line.strip())
        if not m:
            break
        counts[m.group(1)] = int(m.group(2))
    counts.pop("total", None)
    return counts


def write_params(workdir: Path, params: dict) -> None:
    (workdir / "params.yaml").write_text(yaml.safe_dump(params, sort_keys=False))


@pytest.fixture(scope="module")
def workdir(tmp_path_factory, repo_root) -> Path:
    wd = tmp_path_factory.mktemp("wf")
    shutil.copy(repo_root / "Snakefile", wd / "Snakefile")
    shutil.copytree(repo_root / "workflow", wd / "workflow")
    write_params(wd, TINY)
    proc = snakemake(wd)
    assert proc.returncode == 0, proc.stderr[-4000:]
    return wd


def test_default_targets_are_built(workdir):
    for name in ("fig2", "figA5"):
        for ext in ("png", "pdf", "csv"):
            path = workdir / "results" / "figures" / f"{name}.{ext}"
            assert path.is_file() and path.stat().st_size > 0, path
    fig2 = pd.read_csv(workdir / "results/figures/fig2.csv")
    assert set(fig2["q"]) == {1.0, 0.25}
    assert set(fig2["target_epsilon"]) == {2.0, 4.0}
    audit = fig2[fig2["estimator"].notna() & (fig2["estimator"] != "")]
    assert set(audit["estimator"]) == {"heldout", "paper"}
    assert (audit["n_repeats"] == 2).all()
    acc = fig2[fig2["series"] == "eps_S (accounting)"]
    # sigma was calibrated so that the substitute accountant hits the target
    assert (abs(acc["epsilon"] - acc["target_epsilon"]) <= 0.01 * acc["target_epsilon"]).all()
    a5 = pd.read_csv(workdir / "results/figures/figA5.csv")
    assert len(a5) == 4
    assert (a5["ratio"] > 1.0).all()


def test_step_wise_scores_are_recorded(workdir):
    import numpy as np

    data = np.load(workdir / "results/s1/scores/q1_eps2_rep0.npz")
    assert list(data["steps"]) == [20, 40]
    assert data["scores"].shape == (2, 1000)
    assert int(data["labels"].sum()) == 500
    import json

    est = json.loads((workdir / "results/s1/estimates/q1_eps2_rep0.json").read_text())["estimates"]
    assert [(r["step"], r["estimator"]) for r in est] == [
        (20, "heldout"), (20, "paper"), (40, "heldout"), (40, "paper")]
    assert all(r["epsilon"] >= 0 and r["q"] == 1.0 and r["repeat"] == 0 for r in est)


def test_second_run_does_nothing(workdir):
    assert job_counts(workdir) == {}


def test_param_change_reruns_only_dependent_jobs(workdir):
    params = yaml.safe_load((workdir / "params.yaml").read_text())
    try:
        params["s1"]["runs_per_world"] = 600
        write_params(workdir, params)
        assert job_counts(workdir) == {"all": 1, "simulate_s1": 8, "estimate_s1": 8, "fig2": 1}

        params["s1"]["runs_per_world"] = 500
        params["alpha"] = 0.1
        write_params(workdir, params)
        assert job_counts(workdir) == {"all": 1, "estimate_s1": 8, "fig2": 1}

        params["alpha"] = 0.05
        params["ratio_grid"]["noise_multipliers"] = [3.0, 7.0]
        write_params(workdir, params)
        assert job_counts(workdir) == {"all": 1, "ratio_grid_row": 2, "figA5": 1}

        params["ratio_grid"]["noise_multipliers"] = [3.0, 6.0]
        params["s1"]["sampling_rates"] = [1.0, 0.5]
        write_params(workdir, params)
        # only the new q's settings are computed; q = 1 is untouched
        assert job_counts(workdir) == {"all": 1, "calibrate_s1": 2, "simulate_s1": 4,
                                       "estimate_s1": 4, "fig2": 1}
    finally:
        write_params(workdir, TINY)
    assert job_counts(workdir) == {}


@pytest.mark.parametrize(
    ("section", "key", "value", "expected"),
    [
        ("s1", "sampling_rates", [1.0, 1.5], "s1.sampling_rates[1] = 1.5"),
        ("ratio_grid", "noise_multipliers", [-2.0], "ratio_grid.noise_multipliers[0] = -2.0"),
        ("s1", "adjacency", "swap", "s1.adjacency = 'swap'"),
        (None, "scenario", "S9", "unknown key scenario"),
    ],
)
def test_bad_params_fail_before_any_job(tmp_path, repo_root, section, key, value, expected):
    shutil.copy(repo_root / "Snakefile", tmp_path / "Snakefile")
    shutil.copytree(repo_root / "workflow", tmp_path / "workflow")
    params = yaml.safe_load(yaml.safe_dump(TINY))
    (params[section] if section else params)[key] = value
    write_params(tmp_path, params)
    proc = snakemake(tmp_path)
    assert proc.returncode != 0
    assert expected in proc.stderr + proc.stdout
    assert not (tmp_path / "results").exists()
    assert not (tmp_path / "logs").exists()
