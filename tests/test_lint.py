"""Lint as part of the test command: ruff over the code and `snakemake --lint` over the workflow
(pyproject.toml's [tool.ruff] sets the rules)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

BIN = Path(sys.executable).parent


def test_ruff_finds_nothing(repo_root):
    proc = subprocess.run([BIN / "ruff", "check", "--no-cache", "."], cwd=repo_root,
                          capture_output=True, text=True)
    assert proc.returncode == 0, proc.stdout[-4000:] + proc.stderr[-2000:]


def test_snakemake_lint_finds_nothing(repo_root):
    proc = subprocess.run([sys.executable, "-m", "snakemake", "--lint"], cwd=repo_root,
                          capture_output=True, text=True)
    out = proc.stdout + proc.stderr
    assert proc.returncode == 0 and "Lints for" not in out, out[-4000:]
    assert "Congratulations" in out
