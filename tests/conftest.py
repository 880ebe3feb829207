"""Shared fixtures and helpers: the repository root, the installed console script, the tiny
workflow configuration (``tests/tiny.yaml``) with helpers to run Snakemake on it, and one run
of the tiny workflow per test session (:func:`tiny_run`), shared by every test that reads its
outputs, whatever pytest-xdist worker runs them; tests that change a workflow take a private
copy of it (:func:`tiny_copy`)."""

from __future__ import annotations

import ast
import contextlib
import copy
import functools
import io
import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml

# the local SLURM cluster's fixture (`cluster`) for the modules that submit to it
pytest_plugins = ["slurm_cluster"]

ROOT = Path(__file__).resolve().parents[1]
BIN = Path(sys.executable).parent

#: The tiny configuration of the integration tests (a fresh copy per call of :func:`tiny`).
_TINY = yaml.safe_load((Path(__file__).with_name("tiny.yaml")).read_text())


def records(n: int, d: int, k: int, seed: int, dtype: Any = None) -> Any:
    """``n`` random records of ``d`` features (normal, scale 1.5) and ``k`` classes from
    ``seed``, float64 unless ``dtype`` says otherwise: the engine tests' data."""
    import torch

    from subaudit.engine import Records

    g = torch.Generator().manual_seed(seed)
    x = torch.randn(n, d, generator=g, dtype=torch.float64 if dtype is None else dtype) * 1.5
    return Records(x, torch.randint(0, k, (n,), generator=g))


def tiny() -> dict[str, Any]:
    """A fresh copy of the tiny configuration, to modify freely."""
    return copy.deepcopy(_TINY)


def lean(params: dict[str, Any]) -> dict[str, Any]:
    """``params`` without the phases a workflow test is not about: one S1 setting, one cell of
    Fig A5's grid and no deep-network phase (``deep.source: null``, as presets/core.yaml)."""
    params["s1"].update(sampling_rates=[1.0], target_epsilons=[2], repeats=1)
    params["ratio_grid"].update(sampling_rates=[1.0], noise_multipliers=[3.0])
    params["deep"]["source"] = None
    return params


def base_ablations(params: dict[str, Any], experiment: str) -> None:
    """Ablations of ``experiment`` at its own values only: the ablation figures reuse its base
    audits and train nothing (tests about something else stay small)."""
    exp = params["natural"]["experiments"][experiment]
    params["ablations"].update(experiment=experiment, **{
        k: {"q": exp["sampling_rates"][0], "values": [exp[k]]} for k in ("clip", "steps", "lr")})


#: Modules whose tests run Snakemake (minutes each): collected first, the longest (the paper
#: preset's rehearsal through SLURM, a third of the suite) before all, so that under
#: pytest-xdist's loadscope (make test, with --no-loadscope-reorder: that order, not the
#: modules of most tests first) one worker starts it while the other takes the rest, the short
#: modules fill in at the end and the two workers finish together.
_LONGEST, _LONG = "tests/workflow/test_rehearsal.py", ("tests/workflow/", "tests/data/test_own_features.py")


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    items.sort(key=lambda item: (not item.nodeid.startswith(_LONGEST), not item.nodeid.startswith(_LONG)))


@pytest.fixture(scope="session")
def repo_root() -> Path:
    return ROOT


def run_cli(*args: str, check: bool = True,
            installed: bool = False) -> subprocess.CompletedProcess[str]:
    """Run ``subaudit *args``: by default in this process, through :func:`subaudit.cli.main`
    (what the console script calls) with its stdout, stderr and exit status captured, so that a
    call costs its work and not a new interpreter importing the estimators; ``installed`` runs
    the installed console script in a subprocess instead (``test_cli`` checks that both agree)."""
    if installed:
        proc = subprocess.run([str(BIN / "subaudit"), *args], capture_output=True, text=True)
    else:
        from subaudit.cli import main

        out, err = io.StringIO(), io.StringIO()
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            try:
                code = main(list(args))
            except SystemExit as stop:              # argparse: --help, or a usage error
                code = stop.code if isinstance(stop.code, int) else int(stop.code is not None)
        proc = subprocess.CompletedProcess(["subaudit", *args], code, out.getvalue(),
                                           err.getvalue())
    if check and proc.returncode != 0:
        raise AssertionError(f"subaudit {' '.join(args)} failed:\n{proc.stderr}")
    return proc


def cli_json(*args: str) -> dict:
    """Run ``subaudit ... --json`` and parse its stdout as exactly one JSON object."""
    proc = run_cli(*args, "--json")
    return json.loads(proc.stdout)


# --------------------------------------------------------------------------- workflow


def loaded_modules(code: str, watched: tuple[str, ...], *args: str, cwd: Path | None = None) -> list[str]:
    """Which of ``watched`` a fresh interpreter has imported after running ``code`` (with
    ``args`` as its ``sys.argv[1:]``): what a start-up costs, checked without timing it."""
    probe = code + f"\nimport sys\nprint(sorted(m for m in {watched!r} if m in sys.modules))"
    out = subprocess.run([sys.executable, "-c", probe, *args], capture_output=True, text=True, cwd=cwd)
    assert out.returncode == 0, out.stderr
    return ast.literal_eval(out.stdout.strip().splitlines()[-1])


def snakemake(workdir: Path, *args: str) -> subprocess.CompletedProcess[str]:
    """Run the real Snakemake in ``workdir`` on 2 cores."""
    return subprocess.run([sys.executable, "-m", "snakemake", "--cores", "2", *args],
                          cwd=workdir, capture_output=True, text=True)


def job_table(text: str) -> dict[str, int]:
    """Snakemake's count of a dry run's jobs by rule (its 'Job stats' table, without the total)."""
    counts = {}
    for line in text.split("Job stats:", 1)[1].splitlines()[3:]:
        m = re.match(r"^(\w+)\s+(\d+)$", line.strip())
        if not m:
            break
        counts[m.group(1)] = int(m.group(2))
    counts.pop("total", None)
    return counts


def job_counts(workdir: Path, *targets: str) -> dict[str, int]:
    """Jobs a dry run would execute, by rule ({} when there is nothing to do)."""
    proc = snakemake(workdir, "--dry-run", *targets)
    assert proc.returncode == 0, proc.stderr
    text = proc.stdout + proc.stderr
    return {} if "Nothing to be done" in text else job_table(text)


def jobs_over_requests(workdir: Path, dry_run: str) -> tuple[int, list[tuple[str, float, float, dict[str, str]]]]:
    """Every job of ``dry_run`` (a ``--dry-run --forceall`` output of the run in ``workdir``)
    measured (its log's line from the warm worker or its own process, else its benchmark
    file) against the ``mem_mb`` and ``runtime`` it requests, which every rule must give, and
    its outputs' bytes against the ``out_kb`` its cost model gives (where it has one). The
    number checked, and (rule, peak MB, wall s, request) of each job over its request (peak MB
    replaced by the outputs' kB where those are over). Not the model's seconds (``expected_s``)
    from below: the tiny run's and the rehearsal's jobs are modelled at a second or less and
    take what their start-up takes, and a lower bound on seconds would time this machine."""
    import pandas as pd

    from subaudit.pipeline import warm

    blocks = [b for b in re.split(r"\n(?=(?:local)?rule \w+:)", dry_run) if re.match(r"(?:local)?rule \w+:", b)]
    checked, over = 0, []
    for block in blocks:
        rule = re.match(r"(?:local)?rule (\w+):", block).group(1)
        if rule == "all":
            continue
        resources = block.split("resources:", 1)[-1].split("\n", 1)[0]
        asked = dict(re.findall(r"\b(mem_mb|runtime|out_kb|expected_s)=(\d+)", resources))
        assert {"mem_mb", "runtime"} <= set(asked), (rule, asked)
        log = re.search(r"\n\s+log: ([^\n,]+)", block)
        bench = re.search(r"\n\s+benchmark: ([^\n]+)", block)
        usage = warm.job_usage(workdir / log.group(1).strip()) if log else None
        if usage and "wall_s" in usage:
            peak, wall = usage["max_rss_mb"], usage["wall_s"]
        elif bench and (workdir / bench.group(1).strip()).exists():
            row = pd.read_csv(workdir / bench.group(1).strip(), sep="\t").iloc[0]
            peak, wall = float(row["max_rss"]), float(row["s"])
        else:
            raise AssertionError(f"a job of {rule} was measured neither by the warm worker nor by a benchmark")
        checked += 1
        if peak > int(asked["mem_mb"]) or wall > 60 * int(asked["runtime"]):
            over.append((rule, peak, wall, asked))
        if "out_kb" in asked:
            outputs = re.search(r"\n\s+output: ([^\n]+)", block).group(1).split(", ")
            written = sum(f.stat().st_size for o in outputs for f in
                          ([workdir / o] if (workdir / o).is_file() else (workdir / o).rglob("*")) if f.is_file())
            if written > 1024 * int(asked["out_kb"]):
                over.append((rule, written / 1024, wall, asked))
    return checked, over


@functools.cache
def paper_dry_run(*extra: str) -> str:
    """``snakemake -n --forceall`` of presets/paper.yaml with gpu.yaml and ``extra`` config files
    (or ``"--", target``): the whole workflow, nothing run; each dry run once per test session,
    shared by the pytest-xdist workers of a session through files in their common temporary
    folder (a file lock each), since several modules read the same ones."""
    import hashlib
    import tempfile

    from filelock import FileLock

    def run() -> str:
        proc = subprocess.run([Path(sys.executable).parent / "snakemake", "-n", "--forceall", "--configfile",
                               "presets/paper.yaml", "presets/gpu.yaml", *extra], cwd=ROOT,
                              capture_output=True, text=True)
        assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
        return proc.stdout

    session = os.environ.get("PYTEST_XDIST_TESTRUNUID")
    if session is None:
        return run()
    folder = Path(tempfile.gettempdir()) / f"subaudit-dry-runs-{session}"
    folder.mkdir(exist_ok=True)
    stem = folder / hashlib.sha256("\0".join(extra).encode()).hexdigest()[:16]
    with FileLock(str(stem.with_suffix(".lock"))):
        out = stem.with_suffix(".txt")
        if not out.exists():
            out.write_text(run())
        return out.read_text()


#: What the DVC stage versions (dvc.yaml's outs and metrics): the outputs that must reproduce
#: bit for bit.
VERSIONED = ("data/raw", "data/splits", "data/features", "results")


def digests(root: Path, *parts: str) -> dict[str, str]:
    """sha256 of every file below ``root / part`` (or of that file) for each of ``parts``
    (default: the whole tree), by path relative to ``root``; DVC's own .gitignore files are not
    outputs."""
    import hashlib

    files = [p for part in (parts or (".",))
             for p in ([root / part] if (root / part).is_file() else sorted((root / part).rglob("*")))]
    return {str(p.relative_to(root)): hashlib.sha256(p.read_bytes()).hexdigest()
            for p in files if p.is_file() and p.name != ".gitignore"}


@pytest.fixture(scope="session")
def tiny_run(tmp_path_factory) -> Path:
    """The tiny workflow, run once per test session from nothing (``snakemake --cores 2``),
    also under pytest-xdist (``make test``): the first worker to ask runs it under a file lock
    in the workers' common temporary directory, the others wait for it and read the same run.
    Shared: tests only read it; a test that changes params, outputs or Snakemake's records
    takes :func:`tiny_copy`. Its versioned outputs are checked unchanged at the end."""
    from filelock import FileLock

    root = tmp_path_factory.getbasetemp()
    if os.environ.get("PYTEST_XDIST_WORKER"):
        root = root.parent                       # shared by the workers of this session
    wd, done = root / "tiny-run", root / "tiny-run.done"
    with FileLock(str(root / "tiny-run.lock")):
        if not done.exists():
            shutil.rmtree(wd, ignore_errors=True)
            workflow_copy(wd)
            proc = snakemake(wd)
            assert proc.returncode == 0, proc.stderr[-4000:]
            done.write_text(json.dumps(digests(wd, *VERSIONED)))
    before = json.loads(done.read_text())
    yield wd
    assert digests(wd, *VERSIONED) == before, "a test changed the shared tiny run: use tiny_copy"


@pytest.fixture
def tiny_copy(tiny_run: Path, tmp_path: Path) -> Path:
    """A private copy of the session's finished tiny run, with its timestamps and Snakemake's
    records, so Snakemake sees it as up to date: change it freely."""
    return Path(shutil.copytree(tiny_run, tmp_path / "wf", symlinks=True))


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
