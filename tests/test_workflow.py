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
    "natural": {
        "target_epsilon": 4.0, "runs": 32, "shard_size": 16, "repeats": 1,
        "scenarios": ["S2", "S3", "S4", "S5"], "device": "cpu", "memory_mb": 512, "craft_steps": 20,
        "craft_lr": 0.1, "utility_runs": 4,
        "experiments": {
            "image": {"source": "mnist-5k", "backbone": "efficientnet-lite0", "resolution": 32,
                      "n_train": 20, "n_aux": 10, "n_test": 10, "per_class": True, "hidden": [],
                      "optimizer": "sgd", "init": "zero", "clip": 2.0, "lr": 0.01, "steps": 4,
                      "every": 2, "sampling_rates": [1.0]},
            "text": {"source": "rotten-tomatoes", "backbone": "minilm-l6-v2", "n_train": 20,
                     "n_aux": 10, "n_test": 10, "per_class": False, "hidden": [],
                     "optimizer": "sgd", "init": "zero", "clip": 2.0, "lr": 0.01, "steps": 4,
                     "every": 2, "sampling_rates": [1.0]},
            "tabular": {"source": "letter", "backbone": "none", "n_train": 40, "n_aux": 10,
                        "n_test": 10, "per_class": False, "hidden": [8], "optimizer": "adam",
                        "init": "random", "clip": 5.0, "lr": 0.01, "steps": 4, "every": 2,
                        "sampling_rates": [0.5]},
        },
    },
}


def snakemake(workdir: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "snakemake", "--cores", "2", *args],
                          cwd=workdir, capture_output=True, text=True)


def job_counts(workdir: Path, *targets: str) -> dict[str, int]:
    """Jobs a dry run would execute, by rule ({} when there is nothing to do)."""
    proc = snakemake(workdir, "--dry-run", *targets)
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
    for name in ("fig2", "figA5", "fig3", "figA6", "fig4", "figA1"):
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


def test_natural_audits_are_built(workdir):
    import json

    import numpy as np

    fig3 = pd.read_csv(workdir / "results/figures/fig3.csv")
    audits = fig3[fig3["scenario"].notna()]
    assert set(audits["scenario"]) == {"S2", "S3", "S4", "S5"}
    assert set(audits["estimator"]) == {"heldout", "paper"}
    assert set(fig3["step"]) == {2, 4}
    acc = fig3[fig3["series"] == "eps_S (accounting)"]
    assert (abs(acc[acc.step == 4]["epsilon"] - 4.0) <= 0.04).all()
    merged = np.load(workdir / "results/natural/image/scores/S3_q1_rep0.npz")
    assert list(merged["runs"]) == list(range(32)) and int(merged["bits"].sum()) == 16
    assert merged["scores"].shape == (2, 32)
    for scenario in ("S3", "S4", "S5"):
        info = json.loads((workdir / f"results/natural/image/canaries/{scenario}.json").read_text())
        assert {"cosine", "norm_z", "norm_z_prime"} <= set(info)
    a1 = pd.read_csv(workdir / "results/figures/figA1.csv")
    assert set(a1["scenario"]) == {"S2", "S3"} and (a1["n_runs"] == 4).all()
    feats = np.load(workdir / "data/features/text.npz")
    assert feats["train_x"].shape == (20, 384)


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
        assert job_counts(workdir) == {"all": 1, "estimate_s1": 8, "fig2": 1,
                                       "estimate_natural": 12, "natural_figure": 3}

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

        params["s1"]["sampling_rates"] = [1.0, 0.25]
        params["natural"]["experiments"]["image"]["sampling_rates"] = [1.0, 0.5]
        write_params(workdir, params)
        # one new q: its calibration, S2 canary, 4 scenarios x 2 shards, merges, estimates,
        # and the figure; features, reference model and S3-S5 canaries are untouched
        assert job_counts(workdir) == {"all": 1, "calibrate_natural": 1, "craft_gradient": 1,
                                       "train_shard": 8, "merge_scores": 4,
                                       "estimate_natural": 4, "natural_figure": 1}

        params["natural"]["experiments"]["image"]["sampling_rates"] = [1.0]
        params["natural"]["target_epsilon"] = 5.0
        write_params(workdir, params)
        # a new noise level retrains every shard but never recomputes features or canaries
        counts = job_counts(workdir)
        assert "features" not in counts and "craft_input" not in counts
        assert "reference" not in counts and counts["train_shard"] == 2 * 4 * 3
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
        ("natural", "scenarios", ["S2", "S9"], "natural.scenarios[1] = 'S9'"),
        ("natural", "runs", 31, "natural.runs = 31"),
    ],
)
def test_bad_params_fail_before_any_job(tmp_path, repo_root, section, key, value, expected):
    _bad_params_fail(tmp_path, repo_root, section, key, value, expected)


@pytest.mark.parametrize(
    ("key", "value", "expected"),
    [
        ("source", "letter", "natural.experiments.image.source = 'letter' is invalid; "
                             "allowed: one of mnist-5k, cifar10"),
        ("sampling_rates", [0.0], "natural.experiments.image.sampling_rates[0] = 0.0"),
        ("backbone", "resnet", "natural.experiments.image.backbone = 'resnet'"),
        ("n_train", 25, "natural.experiments.image.n_train = 25 is invalid"),
    ],
)
def test_bad_experiment_params_fail_before_any_job(tmp_path, repo_root, key, value, expected):
    _bad_params_fail(tmp_path, repo_root, "image", key, value, expected)


def _bad_params_fail(tmp_path, repo_root, section, key, value, expected):
    shutil.copy(repo_root / "Snakefile", tmp_path / "Snakefile")
    shutil.copytree(repo_root / "workflow", tmp_path / "workflow")
    params = yaml.safe_load(yaml.safe_dump(TINY))
    where = params["natural"]["experiments"]["image"] if section == "image" else (
        params[section] if section else params)
    where[key] = value
    write_params(tmp_path, params)
    proc = snakemake(tmp_path)
    assert proc.returncode != 0
    assert expected in proc.stderr + proc.stdout
    assert not (tmp_path / "results").exists()
    assert not (tmp_path / "logs").exists()
