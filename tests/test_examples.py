"""The examples users copy run, and print numbers that agree with the library and the CLI."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import cli_json

EXAMPLES = Path(__file__).resolve().parents[1] / "examples"


def test_opacus_substitute_example():
    proc = subprocess.run([sys.executable, str(EXAMPLES / "opacus_substitute.py"), "--runs", "1000",
                           "--json"], capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr
    out = json.loads(proc.stdout)
    (sigma, q, steps), = out["history"]
    assert (q, steps) == (pytest.approx(1 / 30), 90) and out["sigma"] == sigma
    # Opacus calibrated through the substitute accountant: the target from below
    assert 4.0 - 0.01 <= out["eps_substitute"] <= 4.0
    for adjacency, key in (("substitute", "eps_substitute"), ("add-remove", "eps_add_remove")):
        cli = cli_json("account", "--sigma", repr(sigma), "--q", repr(q), "--steps", str(steps),
                       "--delta", "1e-5", "--adjacency", adjacency)
        assert out[key] == cli["epsilon"]
    ceiling = cli_json("ceiling", "--sigma", repr(sigma), "--q", repr(q), "--steps", str(steps),
                       "--delta", "1e-5")["epsilon"]
    assert out["final_iterate_ceiling"] == ceiling
    # a real signal, below what the final model can reveal at all
    assert out["estimator"] == "auc" and out["confidence"] == 0.95
    assert 1.0 < out["eps_lower_bound"] < ceiling < out["eps_substitute"]
    assert out["test_accuracy"] > 0.6


def test_audit_opacus_example():
    """The one-run audit of a user's own Opacus training: its accountant epsilons are the CLI's
    for the history Opacus recorded, its bounds lie below what m canaries can show, and the
    white-box canaries find a real signal below the final-iterate ceiling."""
    proc = subprocess.run([sys.executable, str(EXAMPLES / "audit_opacus.py"), "--json", "--steps", "60"],
                          capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr
    out = json.loads(proc.stdout)
    (sigma, q, steps), = out["history"]
    assert steps == 60 and out["game"] == "substitute" and out["adjacency"] == "substitute"
    for adjacency in ("substitute", "add-remove"):
        cli = cli_json("account", "--sigma", repr(sigma), "--q", repr(q), "--steps", str(steps),
                       "--delta", "1e-5", "--adjacency", adjacency)
        assert out["accountant"][adjacency] == cli["epsilon"]
    rows = {(r["canaries"], r["score"], r["procedure"]): r for r in out["rows"]}
    assert set(rows) == {(c, s, p) for c, s in (("input", "loss"), ("input", "loss-drop"), ("gradient", "update"))
                         for p in ("steinke", "mahloujifar")}
    for r in rows.values():
        assert 0 <= r["epsilon"] <= r["perfect"] and r["reference"] == out["accountant"]["substitute"]
    ceiling = cli_json("ceiling", "--sigma", repr(sigma), "--q", repr(q), "--steps", str(steps), "--delta", "1e-5")
    grad = rows[("gradient", "update", "mahloujifar")]
    assert grad["ceiling"] == pytest.approx(ceiling["epsilon"]) and 0 < grad["epsilon"] < grad["ceiling"]
