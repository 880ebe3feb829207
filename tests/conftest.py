"""Shared fixtures: the repository root and a runner for the installed console script."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
BIN = Path(sys.executable).parent


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
