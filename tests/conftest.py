"""Shared fixtures and helpers: the repository root, the installed console script, and the
tiny workflow configuration (``tests/tiny.yaml``) with helpers to run Snakemake on it."""

from __future__ import annotations

import copy
import json
import re
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml

ROOT = Path(__file__).resolve().parents[1]
BIN = Path(sys.executable).parent

#: The tiny configuration of the integration tests (a fresh copy per call of :func:`tiny`).
_TINY = yaml.safe_load((Path(__file__).with_name("tiny.yaml")).read_text())


def tiny() -> dict[str, Any]:
    """A fresh copy of the tiny configuration, to modify freely."""
    return copy.deepcopy(_TINY)


def base_ablations(params: dict[str, Any], experiment: str) -> None:
    """Ablations of ``experiment`` at its own values only: the ablation figures reuse its base
    audits and train nothing (tests about something else stay small)."""
    exp = params["natural"]["experiments"][experiment]
    params["ablations"].update(experiment=experiment, **{
        k: {"q": exp["sampling_rates"][0], "values": [exp[k]]} for k in ("clip", "steps", "lr")})


@pytest.fixture(scope="session")
def repo_root() -> Path:
    return ROOT


def run_cli(*args: str, check: bool = True) -> subprocess.CompletedProcess[str]:
    """Run the installed ``subaudit`` console script."""
    proc = subprocess.run([str(BIN / "subaudit"), *args], capture_output=True, text=True)
    if check and proc.returncode != 0:
        raise AssertionError(f"subaudit {' '.join(args)} failed:\n{proc.stderr}")
    return proc


def cli_json(*args: str) -> dict:
    """Run ``subaudit ... --json`` and parse its stdout as exactly one JSON object."""
    proc = run_cli(*args, "--json")
    return json.loads(proc.stdout)


# --------------------------------------------------------------------------- workflow


def snakemake(workdir: Path, *args: str) -> subprocess.CompletedProcess[str]:
    """Run the real Snakemake in ``workdir`` on 2 cores."""
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


def workflow_copy(workdir: Path, params: dict | None = None) -> Path:
    """The Snakefile and workflow/ copied into ``workdir``, with ``params`` (default: tiny)."""
    workdir.mkdir(parents=True, exist_ok=True)
    shutil.copy(ROOT / "Snakefile", workdir / "Snakefile")
    shutil.copytree(ROOT / "workflow", workdir / "workflow")
    write_params(workdir, tiny() if params is None else params)
    return workdir


def setting_path(artifact: str, params: dict, exp: str, scenario: str | None = None,
                 **knobs: Any) -> str:
    """Path of a natural-data artifact of ``exp`` in the base grid of ``params``, with
    ``knobs`` (q, repeat, lo/hi) given and the others taken from the experiment."""
    from subaudit.pipeline import settings as S

    base = params["natural"]["experiments"][exp]
    values = {"q": base["sampling_rates"][0], "clip": base["clip"], "steps": base["steps"],
              "every": base["every"], "lr": base["lr"],
              "target_epsilon": params["natural"]["target_epsilon"],
              "runs": params["natural"]["runs"], "repeat": 0, **knobs}
    if artifact in ("canary", "canary_info"):
        from subaudit.scenarios import get

        names = S.canary_knobs(get(scenario))
    else:
        names = S.DEPENDS[artifact.replace("shard_dir", "shard")]
    extra = {k: values[k] for k in ("lo", "hi") if k in values}
    path = S.path("shard" if artifact == "shard_dir" else artifact, exp=exp, scenario=scenario,
                  key=S.key(names, values), lo=extra.get("lo", 0), hi=extra.get("hi", 0))
    return str(Path(path).parent) if artifact == "shard_dir" else path
