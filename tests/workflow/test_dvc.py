"""DVC versioning of the workflow's results with a real local-directory remote.

Flow under test (docs/dvc.md): `dvc repro` on the session's finished run of the tiny workflow
(Snakemake finds nothing to do; the completeness check passes) records dvc.lock; dvc push; a
fresh clone whose git holds no results pulls them byte for byte; `snakemake --touch --forceall`
then gives "nothing to be done" while a later params change is still detected; a pull that
misses one object makes `dvc repro` fail naming it. (That jobs reproduce their outputs byte
for byte is checked where they are recomputed: test_workflow's jobs in their own processes,
test_faults' killed shard, test_rehearsal's cluster run against a local one.)
"""

from __future__ import annotations

import copy
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from conftest import VERSIONED, digests, job_counts, snakemake, write_params

pytestmark = pytest.mark.slow

BIN = Path(sys.executable).parent


def sh(cwd: Path, *cmd: str) -> str:
    env = {**os.environ, "PATH": f"{BIN}{os.pathsep}{os.environ['PATH']}",
           "GIT_AUTHOR_NAME": "t", "GIT_AUTHOR_EMAIL": "t@t", "GIT_COMMITTER_NAME": "t",
           "GIT_COMMITTER_EMAIL": "t@t", "DVC_NO_ANALYTICS": "1"}
    proc = subprocess.run(cmd, cwd=cwd, capture_output=True, text=True, env=env)
    assert proc.returncode == 0, f"{' '.join(cmd)}:\n{proc.stdout[-3000:]}\n{proc.stderr[-3000:]}"
    return proc.stdout + proc.stderr


def versioned_copy(tiny_run: Path, origin: Path, repo_root: Path) -> Path:
    """A git and DVC repository holding a copy of the session's tiny run (timestamps and
    Snakemake's records kept, so it is up to date) with the project's dvc.yaml, Makefile and
    ignore files; nothing recorded yet."""
    shutil.copytree(tiny_run, origin, symlinks=True)
    for name in ("dvc.yaml", ".dvcignore", ".gitignore", "Makefile"):   # git keeps no results/, as the repository
        shutil.copy(repo_root / name, origin / name)
    shutil.copytree(repo_root / "src" / "subaudit", origin / "src" / "subaudit",
                    ignore=shutil.ignore_patterns("__pycache__"))
    sh(origin, "git", "init", "-q")
    sh(origin, "dvc", "init", "-q")
    return origin


def test_a_run_is_versioned_pushed_and_restored(tiny_run, tmp_path, repo_root):
    """`dvc repro` of the session's tiny run versions every output (data, features, scores,
    estimates, figures with their CSVs, the report) as it is, then push, pull and the lost
    object."""
    origin = versioned_copy(tiny_run, tmp_path / "origin", repo_root)
    sh(origin, "dvc", "remote", "add", "-d", "store", str(tmp_path / "remote"))

    out = sh(origin, "dvc", "repro")              # Snakemake, then the completeness check
    assert "Nothing to be done" in out, out[-3000:]
    run = digests(origin, *VERSIONED)
    assert len(run) > 200 and run == digests(tiny_run, *VERSIONED)
    assert (origin / "results/figures/fig2.png").is_file()
    lock = yaml.safe_load((origin / "dvc.lock").read_text())
    assert {o["path"] for o in lock["stages"]["default"]["outs"]} == {
        "results/accounting", "results/s1", "results/natural", "results/one_run", "results/deep",
        "results/reconstruction", "results/figures", "results/report.md", "results/report.html", "results/report.json",
        "data/raw", "data/splits", "data/features"}
    # the report's verdicts are DVC metrics, so `dvc metrics diff` compares versions
    metrics = sh(origin, "dvc", "metrics", "show", "--json")
    assert '"claims"' in metrics and '"code"' in metrics
    sh(origin, "git", "add", "-A")
    sh(origin, "git", "commit", "-qm", "results")
    sh(origin, "git", "tag", "results-v1")
    sh(origin, "dvc", "push")
    published = digests(origin / "results")
    published_data = digests(origin / "data")
    assert any(k.startswith("features/") for k in published_data)
    assert set(published_data) == {k.removeprefix("data/") for k in run if k.startswith("data/")}

    # dvc repro again: nothing changed, nothing deleted or recomputed
    out = sh(origin, "dvc", "repro")
    assert "didn't change" in out or "up to date" in out
    assert digests(origin / "results") == published

    clone = tmp_path / "clone"
    sh(tmp_path, "git", "clone", "-q", str(origin), str(clone))
    sh(clone, "git", "checkout", "-q", "results-v1")
    assert not (clone / "results").exists() and not (clone / "data" / "features").exists()   # none in git
    sh(clone, "dvc", "pull")
    assert digests(clone / "results") == published
    assert digests(clone / "data") == published_data
    # `subaudit compare` with a revision that keeps no reference/ in git: DVC restores its results
    out = sh(clone, "subaudit", "compare", ".", "results-v1", "--repo", str(origin))
    assert "agrees" in out and "report.json" in out

    sh(clone, sys.executable, "-m", "snakemake", "--cores", "1", "--touch", "--forceall")
    assert not (clone / "logs" / "warm-worker.log").exists()     # touching runs no job
    assert job_counts(clone) == {}
    assert digests(clone / "results") == published
    params = yaml.safe_load((clone / "params.yaml").read_text())
    params["alpha"] = 0.1
    write_params(clone, params)
    # 18 base estimates (3 experiments x 6 scenarios) and 6 of the ablations (one new value of
    # each of C, T and lr x 2 scenarios), the deep-network bounds (no training), the figures
    # drawn from them and the report
    assert job_counts(clone) == {"all": 1, "estimate_s1": 2, "estimate_natural": 24,
                                 "epsilon_vs_target": 1, "epsilon_vs_step": 3, "one_run": 2,
                                 "one_run_figure": 1, "ablation_figure": 3, "runs_figure": 1,
                                 "deep_bounds": 5, "deep_figure": 1, "report": 1}

    # a pull that misses one object (an intermediate score file, whose consumers Snakemake
    # finds up to date): dvc repro fails naming it and records nothing
    import hashlib

    lock = (origin / "dvc.lock").read_text()
    lost = next(k for k in sorted(published) if k.startswith("natural/") and "/scores/" in k)
    md5 = hashlib.md5((origin / "results" / lost).read_bytes()).hexdigest()
    for store in (origin / ".dvc" / "cache", tmp_path / "remote"):
        (store / "files" / "md5" / md5[:2] / md5[2:]).unlink()
    (origin / "results" / lost).unlink()
    failed = subprocess.run(["dvc", "pull"], cwd=origin, capture_output=True, text=True,
                            env={**os.environ, "PATH": f"{BIN}{os.pathsep}{os.environ['PATH']}"})
    assert failed.returncode != 0 and not (origin / "results" / lost).exists()
    failed = subprocess.run(["dvc", "repro"], cwd=origin, capture_output=True, text=True,
                            env={**os.environ, "PATH": f"{BIN}{os.pathsep}{os.environ['PATH']}"})
    assert failed.returncode != 0
    assert f"results/{lost}" in failed.stderr and "snakemake --cores all results/" in failed.stderr
    assert (origin / "dvc.lock").read_text() == lock
    # the printed command rebuilds it bit for bit; the stage is then complete again
    assert snakemake(origin, f"results/{lost}").returncode == 0
    assert digests(origin / "results") == published



def test_dvc_records_only_what_the_configuration_owns(tiny_run, tmp_path, repo_root):
    """A parameter changed, run, reverted and run again (`make run` each time) leaves the changed
    setting's outputs nowhere DVC versions: they are moved to stale/, named, so `dvc repro`
    records dvc.lock byte for byte as before the change. Without that, Snakemake leaves them
    beside the configuration's own outputs and DVC records them (more files, other hashes)."""
    origin = versioned_copy(tiny_run, tmp_path / "origin", repo_root)
    sh(origin, "dvc", "commit", "--force", "--quiet")     # the finished run as a version (what repro records)
    lock = (origin / "dvc.lock").read_text()
    published = digests(origin, *VERSIONED)
    params = yaml.safe_load((origin / "params.yaml").read_text())
    assert params["s1"]["target_epsilons"] == [2, 4]
    make_run = ("make", "run", f"VENV={BIN.parent}", "STAMP=", "CORES=2")

    changed = copy.deepcopy(params)
    changed["s1"]["target_epsilons"] = [2, 3]
    write_params(origin, changed)
    out = sh(origin, *make_run)
    moved = sorted(p for p in published if "eps4" in p and p.startswith(("results/s1/", "results/accounting/s1/")))
    assert len(moved) > 4
    assert "moved to stale/" in out and all(p in out for p in moved[:40])
    made = digests(origin, *VERSIONED)
    assert not set(made) & set(moved) and any("eps3" in p for p in made)

    write_params(origin, params)                  # reverted: the eps4 setting again, eps3 stale
    out = sh(origin, *make_run)
    assert all(p in out for p in sorted(set(made) - set(published))[:40])
    assert digests(origin, *VERSIONED) == published
    out = sh(origin, "dvc", "repro")
    assert (origin / "dvc.lock").read_text() == lock
    assert sorted(str(p.relative_to(origin)).split("/", 2)[2] for p in (origin / "stale").rglob("*")
                  if p.is_file()) == sorted(set(published) ^ set(made))


def test_the_check_refuses_targets(tmp_path, repo_root):
    """Targets would narrow what the configuration owns to their jobs and move every other
    output to stale/: the check refuses them before reading anything."""
    (tmp_path / "results" / "s1").mkdir(parents=True)
    kept = tmp_path / "results" / "s1" / "x.npz"
    kept.write_bytes(b"x")
    for options in (["--", "results/figures/fig2.png"], ["--configfile", "p.yaml", "results/s1/x.npz"]):
        proc = subprocess.run([sys.executable, str(repo_root / "workflow" / "check_complete.py"), *options],
                              cwd=tmp_path, capture_output=True, text=True)
        assert proc.returncode == 2 and "not targets" in proc.stderr and kept.exists()
