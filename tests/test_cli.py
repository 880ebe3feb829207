"""The ``subaudit`` command line contract, end to end through the installed script.

Numbers are checked against independent computations: dp-accounting's PLD
accountant and the closed-form Gaussian mechanism.
"""

from __future__ import annotations

import json
import math

import pytest
from scipy import optimize, stats

from conftest import cli_json, run_cli


def pld_epsilon(sigma: float, q: float, steps: int, delta: float, relation: str) -> float:
    """Independent epsilon from Google's dp-accounting PLD accountant."""
    import dp_accounting
    from dp_accounting.pld import pld_privacy_accountant

    rel = dp_accounting.NeighboringRelation[relation]
    acc = pld_privacy_accountant.PLDAccountant(rel, value_discretization_interval=1e-3)
    event = dp_accounting.PoissonSampledDpEvent(q, dp_accounting.GaussianDpEvent(sigma))
    acc.compose(dp_accounting.SelfComposedDpEvent(event, steps))
    return acc.get_epsilon(delta)


def gaussian_epsilon(mu: float, delta: float) -> float:
    """Closed form: epsilon of a mu-GDP (Gaussian) mechanism at delta."""
    def gap(eps: float) -> float:
        return (stats.norm.cdf(-eps / mu + mu / 2)
                - math.exp(eps) * stats.norm.cdf(-eps / mu - mu / 2) - delta)
    return optimize.brentq(gap, 0.0, 200.0, xtol=1e-12)


@pytest.mark.parametrize(
    ("sigma", "q", "steps", "adjacency", "relation"),
    [
        (1.5, 0.04, 2250, "add-remove", "ADD_OR_REMOVE_ONE"),
        (1.5, 0.04, 2250, "substitute", "REPLACE_ONE"),
        (0.9, 0.01, 1000, "substitute", "REPLACE_ONE"),
        (3.017, 0.0625, 500, "add-remove", "ADD_OR_REMOVE_ONE"),
    ],
)
def test_account_matches_dp_accounting(sigma, q, steps, adjacency, relation):
    out = cli_json("account", "--sigma", str(sigma), "--q", str(q), "--steps", str(steps),
                   "--delta", "1e-5", "--adjacency", adjacency)
    assert out["adjacency"] == adjacency and out["delta"] == 1e-5
    ref = pld_epsilon(sigma, q, steps, 1e-5, relation)
    assert out["epsilon"] == pytest.approx(ref, rel=0.01)


def test_account_q1_is_a_gaussian_mechanism():
    sigma, steps = 48.403, 500
    for adjacency, sens in (("add-remove", 1.0), ("substitute", 2.0)):
        out = cli_json("account", "--sigma", str(sigma), "--q", "1", "--steps", str(steps),
                       "--delta", "1e-5", "--adjacency", adjacency)
        mu = sens * math.sqrt(steps) / sigma
        assert out["epsilon"] == pytest.approx(gaussian_epsilon(mu, 1e-5), rel=1e-3)


def test_account_group_reports_its_delta():
    out = cli_json("account", "--sigma", "5.578", "--q", "0.0625", "--steps", "500",
                   "--delta", "1e-5", "--adjacency", "group")
    d_ar = out["delta_add_remove"]
    assert 0 < d_ar < 1e-5
    eps_ar = cli_json("account", "--sigma", "5.578", "--q", "0.0625", "--steps", "500",
                      "--delta", repr(d_ar), "--adjacency", "add-remove")["epsilon"]
    assert out["epsilon"] == pytest.approx(2 * eps_ar, rel=2e-3)
    assert (1 + math.exp(eps_ar)) * d_ar == pytest.approx(1e-5, rel=1e-2)


def test_calibrate_round_trip():
    out = cli_json("calibrate", "--target-epsilon", "4", "--q", "0.25", "--steps", "500",
                   "--delta", "1e-5", "--adjacency", "substitute")
    assert out["sigma"] == pytest.approx(12.115, rel=0.01)  # the paper's noise multiplier
    assert out["epsilon"] <= 4.0 + 1e-9
    ref = pld_epsilon(out["sigma"], 0.25, 500, 1e-5, "REPLACE_ONE")
    assert ref == pytest.approx(4.0, rel=0.01)


def test_gdp_epsilon_matches_closed_form():
    out = cli_json("gdp-epsilon", "--mu", "2", "--delta", "1e-5")
    assert out["epsilon"] == pytest.approx(gaussian_epsilon(2.0, 1e-5), rel=1e-6)


def test_json_prints_exactly_one_object():
    proc = run_cli("gdp-epsilon", "--mu", "1", "--delta", "1e-5", "--json")
    assert proc.stdout.count("\n") == 1
    assert isinstance(json.loads(proc.stdout), dict)


@pytest.mark.slow
@pytest.mark.parametrize(
    ("sigma", "q", "low", "high"),
    [(89.128, 1.0, 1.8, 2.15), (1.677, 0.0625, 7.0, 8.3)],
)
def test_simulate_then_paper_estimate_reproduces_s1(tmp_path, sigma, q, low, high):
    scores = tmp_path / "scores.csv"
    run_cli("simulate-s1", "--sigma", str(sigma), "--q", str(q), "--steps", "500",
            "--runs", "25000", "--adjacency", "substitute", "--seed", "1", "--out", str(scores),
            "--quiet")
    lines = scores.read_text().splitlines()
    assert lines[0] == "score,label" and len(lines) == 50001
    out = cli_json("estimate", str(scores), "--delta", "1e-5", "--estimator", "paper")
    assert out["estimator"] == "paper"
    assert low <= out["epsilon"] <= high
    valid = cli_json("estimate", str(scores), "--delta", "1e-5")
    assert valid["estimator"] == "heldout"
    assert 0 < valid["epsilon"] <= out["epsilon"] + 0.5


@pytest.mark.parametrize(
    ("args", "flag", "allowed"),
    [
        (["account", "--sigma", "1", "--q", "1.5", "--steps", "10", "--delta", "1e-5",
          "--adjacency", "substitute"], "--q", "(0, 1]"),
        (["account", "--sigma", "-1", "--q", "0.5", "--steps", "10", "--delta", "1e-5",
          "--adjacency", "substitute"], "--sigma", "> 0"),
        (["account", "--sigma", "1", "--q", "0.5", "--steps", "0", "--delta", "1e-5",
          "--adjacency", "substitute"], "--steps", ">= 1"),
        (["account", "--sigma", "1", "--q", "0.5", "--steps", "10", "--delta", "2",
          "--adjacency", "substitute"], "--delta", "(0, 1)"),
        (["account", "--sigma", "1", "--q", "0.5", "--steps", "10", "--delta", "1e-5",
          "--adjacency", "swap"], "--adjacency", "add-remove"),
        (["calibrate", "--target-epsilon", "0", "--q", "0.5", "--steps", "10", "--delta", "1e-5",
          "--adjacency", "substitute"], "--target-epsilon", "> 0"),
        (["gdp-epsilon", "--mu", "-1", "--delta", "1e-5"], "--mu", "> 0"),
        (["simulate-s1", "--sigma", "1", "--q", "0", "--steps", "10", "--runs", "5",
          "--out", "x.csv"], "--q", "(0, 1]"),
        (["simulate-s1", "--sigma", "1", "--q", "0.5", "--steps", "10", "--runs", "0",
          "--out", "x.csv"], "--runs", ">= 1"),
    ],
)
def test_invalid_values_give_one_line_naming_the_flag(tmp_path, args, flag, allowed):
    proc = run_cli(*args, check=False)
    assert proc.returncode != 0
    err = proc.stderr.strip()
    assert len(err.splitlines()) == 1, err
    assert flag in err and allowed in err, err
    assert proc.stdout == ""


def test_estimate_rejects_bad_files(tmp_path):
    missing = run_cli("estimate", str(tmp_path / "none.csv"), "--delta", "1e-5", check=False)
    assert missing.returncode != 0 and "no such file" in missing.stderr
    bad = tmp_path / "bad.csv"
    bad.write_text("s,l\n1,0\n")
    proc = run_cli("estimate", str(bad), "--delta", "1e-5", check=False)
    assert proc.returncode != 0 and "score,label" in proc.stderr
    one_class = tmp_path / "one.csv"
    one_class.write_text("score,label\n1.0,1\n2.0,1\n")
    proc = run_cli("estimate", str(one_class), "--delta", "1e-5", check=False)
    assert proc.returncode != 0 and len(proc.stderr.strip().splitlines()) == 1


@pytest.mark.parametrize("estimator", ["heldout", "paper"])
def test_estimate_identical_scores_is_zero_in_strict_json(tmp_path, estimator):
    same = tmp_path / "same.csv"
    same.write_text("score,label\n" + "1.0,1\n1.0,0\n" * 10)
    out = cli_json("estimate", str(same), "--delta", "1e-5", "--estimator", estimator)
    assert out["epsilon"] == 0.0
    assert out["mu"] is None  # -inf: no threshold separates the worlds; null in strict JSON
