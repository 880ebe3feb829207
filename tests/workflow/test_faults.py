"""Faults: a training shard killed halfway (SIGKILL) leaves nothing a later step could take for
complete, and rerunning recomputes only that shard, giving the uninterrupted result bit for bit."""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest

from conftest import job_counts, setting_path, snakemake, tiny, workflow_copy

pytestmark = pytest.mark.slow


def _config() -> dict:
    params = tiny()
    params["natural"]["shard_size"] = 16            # two shards per setting
    tab = params["natural"]["experiments"]["tabular"]
    tab.update(steps=7000, every=3500)           # shards of about 3 s: killed halfway
    return params


MERGED = setting_path("scores", _config(), "tabular", "S2")
SHARDS = setting_path("shard_dir", _config(), "tabular", "S2")


def test_killed_shard_is_recomputed_alone_and_bit_for_bit(tmp_path):
    whole = workflow_copy(tmp_path / "whole", _config())
    proc = snakemake(whole, MERGED)
    assert proc.returncode == 0, proc.stderr[-3000:]
    expected = np.load(whole / MERGED)

    # the same workflow with everything but the second shard and what follows it done
    wd = Path(shutil.copytree(whole, tmp_path / "killed", symlinks=True))
    first, second = (wd / SHARDS / f"runs{r}.npz" for r in ("0-16", "16-32"))
    log = wd / f"logs/natural/tabular/train_{Path(SHARDS).name}_runs16-32.log"
    for path in (second, wd / MERGED, log):
        path.unlink()
    kept = first.read_bytes()
    job = subprocess.Popen([sys.executable, "-m", "snakemake", "--cores", "1", MERGED],
                           cwd=wd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                           start_new_session=True)
    try:
        deadline = time.time() + 600
        while not log.exists():                      # the shard has started (its log opens
            assert job.poll() is None and time.time() < deadline, "workflow ended early"
            time.sleep(0.05)                         # after its imports): killed at once, so
        assert job.poll() is None and not second.exists()   # no wait assumes how long it trains
    finally:
        os.killpg(job.pid, signal.SIGKILL)
        job.wait()

    assert not second.exists() and not (wd / MERGED).exists()
    assert first.read_bytes() == kept
    leftovers = [p.name for p in (wd / SHARDS).iterdir() if p != first]
    assert all(name.startswith(".") and name.endswith(".tmp.npz") for name in leftovers)
    # only the killed shard, then what follows it
    assert job_counts(wd, MERGED) == {"train_shard": 1, "estimate_natural": 1}
    # Its lock and its job in progress are recorded, as a run still going would leave them: a
    # second run says so before Snakemake's own advice (--rerun-incomplete, wrong while one runs)
    busy = snakemake(wd, MERGED)
    assert busy.returncode != 0 and "--rerun-incomplete" in busy.stderr
    said = busy.stderr.find("Another Snakemake run holds this folder's lock")
    assert 0 <= said < busy.stderr.find("--rerun-incomplete") and "snakemake --unlock" in busy.stderr
    # Snakemake itself was killed: release its lock, as its message says, then rerun.
    assert snakemake(wd, "--unlock").returncode == 0
    proc = snakemake(wd, MERGED)
    assert proc.returncode == 0, proc.stderr[-3000:]
    got = np.load(wd / MERGED)
    for key in ("runs", "bits", "steps", "scores"):
        assert np.array_equal(got[key], expected[key]), key


def test_verify_removes_a_damaged_intermediate_and_its_command_rebuilds_it(tiny_copy, monkeypatch):
    """A damaged intermediate score file (its consumers up to date, so a plain `snakemake`
    would not rebuild it once removed): `subaudit verify --remove` deletes it, keeps a user's
    file beside the outputs, and prints the one command that rebuilds it bit for bit."""
    import json

    from conftest import digests, run_cli

    before = digests(tiny_copy, "results")
    victim = next(tiny_copy.glob("results/natural/*/scores/*.npz"))
    victim.write_bytes(victim.read_bytes()[:-50])
    mine = tiny_copy / "data" / "mine.npz"
    np.savez(mine, x=np.arange(3))
    monkeypatch.chdir(tiny_copy)
    proc = run_cli("verify", "--json", "--remove", "results", "data", check=False)
    out = json.loads(proc.stdout)
    assert out["removed"] == [str(victim.relative_to(tiny_copy))] and mine.exists() and not victim.exists()
    assert job_counts(tiny_copy) == {}            # Snakemake alone would leave it missing
    command = out["rebuild"].split()
    assert command[:3] == ["snakemake", "--cores", "all"]
    proc = snakemake(tiny_copy, *command[3:])
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert digests(tiny_copy, "results") == before


def test_make_run_never_ends_done_with_an_output_missing(tiny_copy):
    """A forced job killed after Snakemake removed its output leaves that output missing while
    its consumers stay up to date, so the next `snakemake` finds "Nothing to be done" and exits
    0; `make run` then fails naming the file (workflow/check_complete.py), and says how to
    rebuild it. The state is made as Snakemake makes it: the forced output removed, nothing else."""
    from conftest import ROOT

    shutil.copy(ROOT / "Makefile", tiny_copy / "Makefile")
    victim = next(tiny_copy.glob("results/natural/*/scores/*.npz"))
    victim.unlink()
    assert job_counts(tiny_copy) == {}                # Snakemake alone: nothing to be done
    proc = subprocess.run(["make", "run", f"VENV={Path(sys.executable).parent.parent}", "STAMP=", "CORES=1"],
                          cwd=tiny_copy, capture_output=True, text=True)
    assert proc.returncode != 0
    assert str(victim.relative_to(tiny_copy)) in proc.stderr and "Nothing to be done" in proc.stdout + proc.stderr

