"""The examples users copy run, and print numbers that agree with the library and the CLI."""

from __future__ import annotations

import json
import math
import re
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


NUMBER = re.compile(r"-?\d+(?:\.\d+)?(?:e[-+]?\d+)?")


def same_output(text: str, captured: str) -> bool:
    """The same lines with the same words, and numbers equal within 10% or 0.1 (another
    processor's float rounding may move a bound a little, not the output's form)."""
    if NUMBER.sub("#", text) != NUMBER.sub("#", captured):
        return False
    return all(math.isclose(float(a), float(b), rel_tol=0.1, abs_tol=0.1)
               for a, b in zip(NUMBER.findall(text), NUMBER.findall(captured)))


@pytest.mark.parametrize("game", ["substitute", "membership"])
def test_audit_opacus_example(game):
    """The tutorial's one-run audit of a user's own Opacus training, in both games as the
    tutorial runs it: its accountant epsilons are the CLI's for the history Opacus recorded,
    its bounds lie below what m canaries can show, the white-box canaries find a real signal
    below the final-iterate ceiling, and it prints what the tutorial shows (examples/output/)."""
    proc = subprocess.run([sys.executable, str(EXAMPLES / "audit_opacus.py"), "--json", "--game", game],
                          capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr
    out = json.loads(proc.stdout)
    (sigma, q, steps), = out["history"]
    adjacency = {"substitute": "substitute", "membership": "add-remove"}[game]
    assert steps == 150 and out["game"] == game and out["adjacency"] == adjacency
    for adj in ("substitute", "add-remove"):
        cli = cli_json("account", "--sigma", repr(sigma), "--q", repr(q), "--steps", str(steps),
                       "--delta", "1e-5", "--adjacency", adj)
        assert out["accountant"][adj] == cli["epsilon"]
    rows = {(r["canaries"], r["score"], r["procedure"]): r for r in out["rows"]}
    assert set(rows) == {(c, s, p) for c, s in (("input", "loss"), ("input", "loss-drop"), ("gradient", "update"))
                         for p in ("steinke", "mahloujifar")}
    for r in rows.values():
        assert 0 <= r["epsilon"] <= r["perfect"] and r["reference"] == out["accountant"][adjacency]
    ceiling = cli_json("ceiling", "--sigma", repr(sigma), "--q", repr(q), "--steps", str(steps), "--delta", "1e-5",
                       "--adjacency", adjacency)
    grad = rows[("gradient", "update", "mahloujifar")]
    assert grad["ceiling"] == pytest.approx(ceiling["epsilon"]) and 0 < grad["epsilon"] < grad["ceiling"]
    path = EXAMPLES / "output" / f"audit_opacus-{game}.txt"
    captured = path.read_text().rstrip("\n")
    assert same_output(out["text"], captured), f"{out['text']}\n--- {path.name}:\n{captured}"
