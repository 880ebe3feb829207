"""The ``subaudit`` command line contract: arguments, output, errors and exit status.

Commands run through :func:`subaudit.cli.main` in the test process (``conftest.run_cli``);
:func:`test_the_installed_script_is_the_same_command` checks that the installed console script
gives the same output, errors and exit status. Numbers are checked against independent
computations: dp-accounting's PLD accountant and the closed-form Gaussian mechanism.
"""

from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np
import pytest
from scipy import optimize, stats

from conftest import cli_json, loaded_modules, run_cli


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


def test_the_installed_script_is_the_same_command():
    """The console script (a new interpreter) prints what ``main`` prints, byte for byte, and
    exits as it does: a result, a value error (2) and argparse's usage error (2)."""
    for args, code in ((["account", "--sigma", "1.5", "--q", "0.04", "--steps", "2250",
                         "--delta", "1e-5", "--adjacency", "substitute", "--json"], 0),
                       (["gdp-epsilon", "--mu", "-1", "--delta", "1e-5"], 2),
                       (["account", "--sigma", "1", "--adjacency", "group"], 2)):
        installed = run_cli(*args, check=False, installed=True)
        here = run_cli(*args, check=False)
        assert installed.returncode == here.returncode == code
        assert (installed.stdout, installed.stderr) == (here.stdout, here.stderr)
    assert run_cli("--help", installed=True).stdout == run_cli("--help").stdout


def test_the_command_line_loads_no_accountant_until_a_command_needs_one():
    """``subaudit --help`` and the parsing of every command load neither prv-accountant, SciPy,
    pandas nor torch (their import was most of each `subaudit` process's start: about 0.8 of
    its 1 core-second); a command that accounts loads them when it runs."""
    probe = "from subaudit.cli import build_parser\nbuild_parser().format_help()"
    assert loaded_modules(probe, ("prv_accountant", "scipy", "pandas", "torch")) == []


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
    assert valid["estimator"] == "auc"
    assert 0.9 * out["epsilon"] <= valid["epsilon"] <= out["epsilon"] + 0.2


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


@pytest.mark.parametrize("estimator", ["auc", "paper"])
def test_estimate_identical_scores_is_zero_in_strict_json(tmp_path, estimator):
    same = tmp_path / "same.csv"
    same.write_text("score,label\n" + "1.0,1\n1.0,0\n" * 10)
    out = cli_json("estimate", str(same), "--delta", "1e-5", "--estimator", estimator)
    assert out["epsilon"] == 0.0
    # paper: mu = -inf (no threshold separates the worlds), null in strict JSON; auc: mu 0
    assert out["mu"] == (0.0 if estimator == "auc" else None)
    assert out["auc"] == 0.5 and out["n_positive"] == out["n_negative"] == 10


def _write_scores(path, pos, neg):
    path.write_text("score,label\n" + "".join(f"{float(s)!r},1\n" for s in pos)
                    + "".join(f"{float(s)!r},0\n" for s in neg))


def test_estimate_json_reports_auc_tpr_and_counts(tmp_path):
    rng = np.random.default_rng(3)
    pos, neg = rng.normal(1.5, 1.0, 300), rng.normal(0.0, 1.0, 200)
    path = tmp_path / "s.csv"
    _write_scores(path, pos, neg)
    proc = run_cli("estimate", str(path), "--delta", "1e-5", "--json")
    assert proc.stderr == ""  # not reversed: no warning
    out = json.loads(proc.stdout)
    # independent: the AUC from scikit-learn's definition (pairs, ties 1/2) by brute force
    assert out["auc"] == pytest.approx(np.mean(pos[:, None] > neg[None, :]), abs=1e-12)
    # 200 negatives: FPR <= 1e-3 allows no false positive, FPR <= 1e-2 allows two
    top = np.sort(neg)[::-1]
    assert out["tpr_at_fpr_0.001"] == pytest.approx(np.mean(pos > top[0]))
    assert out["tpr_at_fpr_0.01"] == pytest.approx(np.mean(pos > top[2]))
    assert (out["n_positive"], out["n_negative"]) == (300, 200)
    assert out["estimator"] == "auc" and out["epsilon"] > 0


def test_estimate_warns_when_scores_look_reversed(tmp_path):
    rng = np.random.default_rng(4)
    path = tmp_path / "s.csv"
    _write_scores(path, rng.normal(-1.5, 1.0, 300), rng.normal(0.0, 1.0, 300))  # D scores LOWER
    proc = run_cli("estimate", str(path), "--delta", "1e-5", "--json")
    out = json.loads(proc.stdout)
    assert out["epsilon"] == 0.0 and out["auc"] < 0.2
    assert "reversed" in proc.stderr and "negate" in proc.stderr
    assert len(proc.stderr.strip().splitlines()) == 1


def test_one_run_counts_give_the_published_values():
    # Steinke, Nasr and Jagielski (delta 0) and Mahloujifar, Melis and Chaudhuri (k = 2, delta 1e-5):
    # m = r = 1,000, v = 800, alpha 0.05 (published worked values)
    out = cli_json("one-run", "--method", "steinke", "--canaries", "1000", "--guesses", "1000",
                   "--correct", "800", "--delta", "0")
    assert out["epsilon"] == pytest.approx(1.254330, abs=1e-5) and out["method"] == "steinke"
    out = cli_json("one-run", "--method", "mahloujifar", "--canaries", "1000", "--guesses", "1000",
                   "--correct", "800", "--delta", "1e-5", "--family", "gdp")
    assert out["epsilon"] == pytest.approx(2.333243, abs=1e-5) and out["family"] == "gdp"
    assert "mu-GDP test" in out["tests"]
    text = run_cli("one-run", "--method", "mahloujifar", "--canaries", "1000", "--guesses", "1000", "--correct", "800",
                   "--delta", "1e-5", "--family", "gdp").stdout
    assert text.startswith("mu-GDP test: epsilon >= 2.33324")
    # the default tests the (eps, delta) curve itself: about Steinke's number, valid for every mechanism
    out = cli_json("one-run", "--method", "mahloujifar", "--canaries", "1000", "--guesses", "1000",
                   "--correct", "800", "--delta", "1e-5")
    assert out["family"] == "dp" and 1.2 < out["epsilon"] < 1.3
    out = cli_json("one-run", "--method", "mahloujifar", "--canaries", "1000", "--guesses", "1000", "--correct", "800",
                   "--delta", "1e-5", "--family", "dpsgd", "--q", "1", "--steps", "1")
    assert out["epsilon"] == pytest.approx(2.333243, rel=0.02)  # DP-SGD at q = 1, T = 1 is the Gaussian


def test_one_run_from_scores_matches_the_library(tmp_path):
    from subaudit.estimation.one_run import best_one_run_epsilon

    rng = np.random.default_rng(12)
    inserted = rng.random(2000) < 0.5
    scores = rng.normal(3.0 * inserted, 1.0)
    path = tmp_path / "one.csv"
    path.write_text("score,label\n" + "".join(f"{float(s)!r},{int(b)}\n" for s, b in zip(scores, inserted)))
    out = cli_json("one-run", "--method", "steinke", "--scores", str(path), "--delta", "1e-5")
    assert out["epsilon"] == pytest.approx(best_one_run_epsilon(scores, inserted, 1e-5, 0.05, "steinke"))
    assert out["epsilon"] > 1.0 and out["canaries"] == 2000


@pytest.mark.parametrize(("labels", "message"), [
    (["yes", "no"] * 10, "labels must be 0 (D') or 1 (D)"),
    ([0, 2] * 10, "found other values"),
    ([0, 1, 2] * 7, "found other values"),
    ([1] * 20, "only one class"),
])
def test_one_run_scores_labels_are_checked_like_estimate(tmp_path, labels, message):
    """Labels yes/no gave epsilon >= 0 with exit 0 and {0, 2} gave 4.41 (coerced to bool); now
    one-run --scores refuses what `estimate` refuses, naming the file."""
    path = tmp_path / "bad.csv"
    path.write_text("score,label\n" + "".join(f"{i * 0.5},{b}\n" for i, b in enumerate(labels)))
    proc = run_cli("one-run", "--method", "steinke", "--scores", str(path), "--delta", "1e-5", check=False)
    assert proc.returncode == 2 and message in proc.stderr and str(path) in proc.stderr
    est = run_cli("estimate", str(path), "--delta", "1e-5", check=False)
    assert est.returncode != 0 and message in est.stderr


def test_one_run_pair_differences_by_the_magnitude_rule(tmp_path):
    """Mahloujifar et al.'s procedure from a CSV of pair score differences equals the library's."""
    from subaudit.estimation.procedures import procedure_epsilon

    rng = np.random.default_rng(5)
    bits = rng.integers(0, 2, 1000)
    pair = np.stack([bits + rng.normal(0, 1, 1000), rng.normal(0, 1, 1000)], axis=1)
    path = tmp_path / "pairs.csv"
    path.write_text("score,label\n" + "".join(f"{float(a - b)!r},{int(x)}\n" for (a, b), x in zip(pair, bits)))
    out = cli_json("one-run", "--method", "mahloujifar", "--rule", "magnitude", "--scores", str(path),
                   "--delta", "1e-5")
    assert out["epsilon"] == pytest.approx(procedure_epsilon("mahloujifar", pair, bits, 1e-5, game="membership"),
                                           abs=1e-12)
    assert out["epsilon"] > 0.3 and out["rule"] == "magnitude"


def test_deep_cost_counts_the_examples_of_params_yaml(tmp_path):
    import yaml

    deep = yaml.safe_load((Path(__file__).resolve().parents[1] / "params.yaml").read_text())["deep"]
    out = cli_json("deep-cost", "--device", "cpu", "--batch", "16", "--steps", "1")
    assert deep["trainings"] == "white-box-apart"   # the input kinds' trainings, the gradient's apart
    games, repeats, white = len(deep["games"]), deep["repeats"], deep["white_box_repeats"]
    trainings = {"scratch": games * repeats,        # the scratch case audits the input kinds only
                 "finetune": games * (repeats + white)}
    assert "gradient" not in deep["cases"]["scratch"]["kinds"] and "kinds" not in deep["cases"]["finetune"]
    gap = deep["cases"]["gap"]                      # its own game, kind and repeat: one training
    assert out["examples"] == {**{c: trainings[c] * v["steps"] * v["batch"] * v["augmentations"]
                                  for c, v in deep["cases"].items() if c != "gap"},
                               "gap": gap["steps"] * gap["batch"]}
    assert out["examples_per_second"] > 0 and out["hours"] == pytest.approx(
        out["total_examples"] / out["examples_per_second"] / 3600)
    # a --configfile merges key by key, as Snakemake merges it: one case's steps change, its
    # batch and the other case stay
    extra = tmp_path / "more.yaml"
    extra.write_text(yaml.safe_dump({"deep": {"repeats": 7, "cases": {"scratch": {"steps": 10}}}}))
    out = cli_json("deep-cost", "--device", "cpu", "--batch", "16", "--steps", "1", "--configfile", str(extra))
    games, scratch, finetune = len(deep["games"]), deep["cases"]["scratch"], deep["cases"]["finetune"]
    assert out["examples"] == {"scratch": games * 7 * 10 * scratch["batch"],
                               "finetune": games * (7 + white) * finetune["steps"] * finetune["batch"],
                               "gap": gap["steps"] * gap["batch"]}
    # the Table 2 preset: every augmented view (16 per record) is a pass of WRN-16-4, and each
    # of the 4 kinds has its own training (deep.trainings: each)
    out = cli_json("deep-cost", "--device", "cpu", "--batch", "4", "--steps", "1", "--configfile",
                   str(Path(__file__).resolve().parents[1] / "presets" / "paper.yaml"))
    assert out["examples"] == {"scratch": 4 * 2 * 5 * 3405 * 4096 * 16, "finetune": 4 * 2 * 5 * 1005 * 4096 * 16,
                               "gap": gap["steps"] * 49500}
    # Table 2 alone (a preset that selects): 1 game x 5 repeats x 3 kinds, no gap case; the text
    # names each factor of its count
    presets = [str(Path(__file__).resolve().parents[1] / "presets" / name) for name in ("paper.yaml", "table2.yaml")]
    args = ("deep-cost", "--device", "cpu", "--batch", "4", "--steps", "1", "--configfile", *presets)
    assert cli_json(*args)["examples"] == {"scratch": 15 * 3405 * 4096 * 16, "finetune": 15 * 1005 * 4096 * 16}
    text = run_cli(*args).stdout
    assert f"scratch: {15 * 3405 * 4096 * 16:,} examples (15 DP trainings x 3405 steps x 4096 records x 16 " \
           "augmentation views)" in text


@pytest.mark.parametrize(("args", "flag"), [
    (["--canaries", "10", "--guesses", "20", "--correct", "5"], "--guesses"),
    (["--canaries", "10", "--guesses", "5", "--correct", "6"], "--correct"),
    (["--canaries", "10", "--guesses", "5", "--correct", "3", "--k", "3"], "--k"),
])
def test_one_run_rejects_impossible_counts(args, flag):
    proc = run_cli("one-run", "--method", "steinke", "--delta", "1e-5", *args, check=False)
    assert proc.returncode == 2 and flag in proc.stderr and len(proc.stderr.strip().splitlines()) == 1


def test_ceiling_q1_is_the_gaussian_mechanism():
    # q = 1: the final iterate is N(+-T C, T sigma^2 C^2): mu = 2 sqrt(T) / sigma (substitute),
    # sqrt(T) / sigma (add/remove); dp-accounting's Gaussian PLD gives its epsilon independently
    from dp_accounting.pld import privacy_loss_distribution as pld

    for adjacency, sens in (("substitute", 2.0), ("add-remove", 1.0)):
        out = cli_json("ceiling", "--sigma", "20", "--q", "1", "--steps", "100", "--delta", "1e-5",
                       "--adjacency", adjacency)
        want = pld.from_gaussian_mechanism(standard_deviation=20.0 / math.sqrt(100), sensitivity=sens,
                                           value_discretization_interval=1e-5).get_epsilon_for_delta(1e-5)
        assert out["epsilon"] == pytest.approx(want, rel=1e-3)


def test_ceiling_every_kth_step_is_the_library_curve():
    from subaudit.estimation.ceilings import final_iterate_epsilon

    out = cli_json("ceiling", "--sigma", "3", "--q", "0.0625", "--steps", "250", "--delta", "1e-5",
                   "--every", "100")
    assert out["curve_steps"] == [100, 200, 250]
    for t, e in zip(out["curve_steps"], out["curve_epsilon"]):
        assert e == pytest.approx(final_iterate_epsilon(3.0, 0.0625, t, 1e-5, "substitute"), rel=1e-9)
    assert out["epsilon"] == out["curve_epsilon"][-1]
    assert out["curve_epsilon"] == sorted(out["curve_epsilon"])  # more steps, more leakage


def test_ceiling_out_of_reach_fails_at_once_and_long_curves_show_progress():
    proc = run_cli("ceiling", "--sigma", "1", "--q", "0.1", "--steps", "1000000", "--every", "1", "--delta",
                   "1e-5", check=False, installed=True)
    assert proc.returncode == 2 and "--every = 1 is invalid" in proc.stderr and "--max-terms" in proc.stderr
    proc = run_cli("ceiling", "--sigma", "1", "--q", "0.1", "--steps", "40", "--every", "1", "--delta", "1e-5",
                   installed=True)
    assert "ceiling: 100%" in proc.stderr and "terms" in proc.stderr
    proc = run_cli("ceiling", "--sigma", "1", "--q", "0.1", "--steps", "40", "--every", "1", "--delta", "1e-5",
                   "--max-terms", "100", check=False, installed=True)
    assert proc.returncode == 2 and "at most 100 binomial terms (this one sums 860" in proc.stderr


@pytest.mark.parametrize("value", ["nan", "inf", "Infinity"])
def test_non_finite_numbers_are_refused_by_every_command(value):
    """argparse's float takes nan and inf; every number flag refuses them, naming the flag."""
    for args in (["account", "--sigma", value, "--q", "0.1", "--steps", "10", "--delta", "1e-5"],
                 ["ceiling", "--sigma", "1", "--q", value, "--steps", "10", "--delta", "1e-5"],
                 ["one-run", "--method", "steinke", "--canaries", "10", "--guesses", "10", "--correct", "10",
                  "--delta", value]):
        proc = run_cli(*args, check=False)
        assert proc.returncode == 2 and f"expected a finite number, got '{value}'" in proc.stderr, args


def test_statement_json_every_field():
    from pld_reference import pld_history_epsilon

    from subaudit.accounting.statement import ASSUMPTIONS

    out = cli_json("statement", "--sigma", "1.0", "--q", "0.01", "--steps", "1000", "--delta", "1e-5")
    assert set(out) == {"sigma", "q", "steps", "segments", "delta", "epsilon_add_remove",
                        "epsilon_substitute", "epsilon_group", "group_delta_prime",
                        "group_epsilon_add_remove", "group_error", "ratio_substitute_to_add_remove",
                        "bounds", "assumptions", "statement"}
    hist = [(1.0, 0.01, 1000)]
    assert (out["sigma"], out["q"], out["steps"], out["delta"]) == (1.0, 0.01, 1000, 1e-5)
    assert out["segments"] == [[1.0, 0.01, 1000]]
    assert out["epsilon_add_remove"] == pytest.approx(pld_epsilon(1.0, 0.01, 1000, 1e-5, "ADD_OR_REMOVE_ONE"),
                                                      rel=0.01)
    assert out["epsilon_substitute"] == pytest.approx(pld_epsilon(1.0, 0.01, 1000, 1e-5, "REPLACE_ONE"),
                                                      rel=0.01)
    d_prime, e_ar = out["group_delta_prime"], out["group_epsilon_add_remove"]
    assert (1 + math.exp(e_ar)) * d_prime == pytest.approx(1e-5, rel=1e-6)
    assert e_ar == pytest.approx(pld_history_epsilon(hist, d_prime, "add-remove"), rel=0.01)
    assert out["epsilon_group"] == pytest.approx(2 * e_ar, rel=1e-12)
    assert out["group_error"] is None
    assert out["ratio_substitute_to_add_remove"] == pytest.approx(
        out["epsilon_substitute"] / out["epsilon_add_remove"], rel=1e-12)
    for name, key in (("add-remove", "epsilon_add_remove"), ("substitute", "epsilon_substitute"),
                      ("group", "epsilon_group")):
        b = out["bounds"][name]
        assert b["upper"] == out[key] and b["lower"] <= b["estimate"] <= b["upper"]
        assert 0 < b["eps_error"] < 0.01 * b["upper"] and 0 < b["delta_error"] <= 1e-4 * 1e-5
    assert out["assumptions"] == list(ASSUMPTIONS)
    assert f"{out['epsilon_substitute']:.3g}" in out["statement"]
    text = run_cli("statement", "--sigma", "1.0", "--q", "0.01", "--steps", "1000", "--delta",
                   "1e-5").stdout
    assert f"{out['epsilon_substitute']:.5g}" in text and "Assumptions" in text


def test_account_segments_and_adjacency_spellings():
    one = cli_json("account", "--sigma", "1.2", "--q", "0.05", "--steps", "300", "--delta", "1e-5",
                   "--adjacency", "substitute")
    for spelling in ("replace-one", "REPLACE_ONE"):
        alias = cli_json("account", "--sigma", "1.2", "--q", "0.05", "--steps", "300", "--delta",
                         "1e-5", "--adjacency", spelling)
        assert alias == one
    split = cli_json("account", "--sigma", "1.2", "--q", "0.05", "--steps", "100", "200",
                     "--delta", "1e-5", "--adjacency", "substitute")
    assert split["epsilon"] == one["epsilon"]  # one value broadcasts; equal settings merge
    bad = run_cli("account", "--sigma", "1", "2", "--q", "0.1", "0.2", "0.3", "--steps", "5",
                  "--delta", "1e-5", "--adjacency", "substitute", check=False)
    assert bad.returncode == 2 and "per segment" in bad.stderr
    bad = run_cli("account", "--sigma", "1", "2", "--q", "0.1", "1.5", "--steps", "5", "--delta",
                  "1e-5", "--adjacency", "substitute", check=False)
    assert bad.returncode == 2 and "--q (segment 2) = 1.5" in bad.stderr


def test_estimate_reads_npz_layouts_like_csv(tmp_path):
    from subaudit.pipeline.score_files import Scores, write_scores

    rng = np.random.default_rng(5)
    pos, neg = rng.normal(1.0, 1.0, 200), rng.normal(0.0, 1.0, 200)
    csv = tmp_path / "s.csv"
    _write_scores(csv, pos, neg)
    ref = cli_json("estimate", str(csv), "--delta", "1e-5")
    labels = np.r_[np.ones(200), np.zeros(200)]
    np.savez(tmp_path / "a.npz", score=np.r_[pos, neg], label=labels)
    np.savez(tmp_path / "b.npz", in_scores=pos, out_scores=neg)
    runs = np.arange(400)
    bits = (1 - runs % 2).astype(np.int8)
    matrix = np.zeros((2, 400))
    matrix[1, bits == 1], matrix[1, bits == 0] = pos, neg
    write_scores(tmp_path / "c.npz", Scores(runs=runs, bits=bits, steps=[5, 10], scores=matrix, sigma=1.0))
    for name in ("a.npz", "b.npz", "c.npz"):
        got = cli_json("estimate", str(tmp_path / name), "--delta", "1e-5")
        assert got["epsilon"] == ref["epsilon"] and got["auc"] == ref["auc"], name
    first = cli_json("estimate", str(tmp_path / "c.npz"), "--delta", "1e-5", "--step", "5")
    assert first["epsilon"] == 0.0 and first["auc"] == 0.5  # all-zero scores at step 5
    bad = run_cli("estimate", str(tmp_path / "c.npz"), "--delta", "1e-5", "--step", "7", check=False)
    assert bad.returncode == 2 and "--step = 7" in bad.stderr and "[5, 10]" in bad.stderr
    np.savez(tmp_path / "d.npz", x=pos)
    bad = run_cli("estimate", str(tmp_path / "d.npz"), "--delta", "1e-5", check=False)
    assert bad.returncode == 2 and "in_scores" in bad.stderr


def test_ceiling_and_simulation_take_the_adjacency_spellings(tmp_path):
    args = ("--sigma", "2", "--q", "0.25", "--steps", "20", "--delta", "1e-5")
    for canonical, spellings in (("substitute", ("replace-one", "REPLACE_ONE")),
                                 ("add-remove", ("add-or-remove-one", "ADD_OR_REMOVE_ONE"))):
        one = cli_json("ceiling", *args, "--adjacency", canonical)
        assert one["adjacency"] == canonical
        for spelling in spellings:
            assert cli_json("ceiling", *args, "--adjacency", spelling) == one
    sims = []
    for spelling in ("add-remove", "add-or-remove-one"):
        out = tmp_path / f"{spelling}.csv"
        run_cli("simulate-s1", *args[:6], "--runs", "50", "--adjacency", spelling, "--out", str(out),
                "--quiet")
        sims.append(out.read_bytes())
    assert sims[0] == sims[1]
    for command, more in (("ceiling", ("--delta", "1e-5")),
                          ("simulate-s1", ("--runs", "50", "--out", str(tmp_path / "x.csv")))):
        bad = run_cli(command, *args[:6], *more, "--adjacency", "group", check=False)
        assert bad.returncode == 2 and "replace-one" in bad.stderr and "'group'" in bad.stderr


@pytest.mark.parametrize(("args", "words"), [
    (["account", "--sigma", "1e-6", "--q", "0.1", "--steps", "10"], "the noise is far too small"),
    (["account", "--sigma", "0.01", "--q", "0.1", "--steps", "10"], "epsilon is in the hundreds"),
    (["calibrate", "--target-epsilon", "1000", "--q", "1", "--steps", "1"], "target_epsilon = 1000 is beyond"),
])
def test_settings_beyond_the_accountant_are_named_in_plain_words(args, words):
    """Before: "discrete mean differs from the continuous mean by more than half a cell" and
    "epsilon is far too large"; now the message names the flags of the setting and why."""
    proc = run_cli(*args, "--delta", "1e-5", "--adjacency", "substitute", check=False)
    assert proc.returncode == 1 and words in proc.stderr
    assert f"{args[1]} {float(args[2]):g}" in proc.stderr and "--delta 1e-05" in proc.stderr
    assert "half a cell;" not in proc.stderr and "far too large" not in proc.stderr


#: Bad inputs of every command (issue 54's probes and more): (arguments, exit status, what the one
#: line must name). {t} is a folder holding bad files (_bad_files), {p} the repository's
#: params.yaml. Exit 2: the input is wrong (a flag, a file); 1: a valid setting beyond the
#: accountant's reach (AccountingRangeError).
_ACCOUNT = ("--q", "1", "--steps", "1", "--delta", "1e-5")
_BAD_INPUTS = [
    (("account", "--sigma", "1e-200", *_ACCOUNT, "--adjacency", "substitute"), 2, "--sigma = 1e-200"),
    (("account", "--sigma", "1", "--q", "1", "--steps", "100000000000", "--delta", "1e-5", "--adjacency",
      "substitute"), 1, "--steps 100000000000"),
    (("account", "--sigma", "1", "--q", "1", "--steps", "1", "--delta", "1e-300", "--adjacency", "substitute"),
     1, "--delta 1e-300"),
    (("account", "--sigma", "1", *_ACCOUNT, "--adjacency", "neighbours"), 2, "--adjacency = 'neighbours'"),
    (("statement", "--sigma", "1", "1e-200", "--q", "1", "--steps", "1", "--delta", "1e-5"), 2,
     "--sigma (segment 2) = 1e-200"),
    (("calibrate", "--target-epsilon", "1e200", *_ACCOUNT, "--adjacency", "substitute"), 1, "--target-epsilon 1e+200"),
    (("gdp-epsilon", "--mu", "1e308", "--delta", "1e-5"), 2, "--mu = 1e+308"),
    (("gdp-epsilon", "--mu", "1", "--delta", "1"), 2, "--delta = 1.0"),
    (("estimate", "{t}/bad.npz", "--delta", "1e-5"), 2, "SCORES {t}/bad.npz: not an .npz archive"),
    (("estimate", "{t}/truncated.npz", "--delta", "1e-5"), 2, "SCORES {t}/truncated.npz: "),
    (("estimate", "{t}/objects.npz", "--delta", "1e-5"), 2, "SCORES {t}/objects.npz: "),
    (("estimate", "{t}/bytes.csv", "--delta", "1e-5"), 2, "SCORES {t}/bytes.csv: not a readable CSV"),
    (("estimate", "{t}/words.csv", "--delta", "1e-5"), 2, "SCORES {t}/words.csv: column score is not numbers"),
    (("estimate", "{t}/empty.csv", "--delta", "1e-5"), 2, "SCORES {t}/empty.csv: not a readable CSV"),
    (("estimate", "{t}", "--delta", "1e-5"), 2, "SCORES {t}: a folder, not a scores file"),
    (("estimate", "{t}/none.csv", "--delta", "1e-5"), 2, "SCORES {t}/none.csv: no such file"),
    (("estimate", "{t}/scores.txt", "--delta", "1e-5"), 2, "SCORES {t}/scores.txt: not a .csv or .npz file"),
    (("ceiling", "--sigma", "1", "--q", "0.5", "--steps", "10", "--delta", "1e-5", "--max-terms", "-1"), 2,
     "--max-terms = -1"),
    (("ceiling", "--sigma", "1e-200", "--q", "1", "--steps", "10", "--delta", "1e-5"), 2, "--sigma = 1e-200"),
    (("ceiling", "--sigma", "1e-149", "--q", "1", "--steps", "100000000", "--delta", "1e-5"), 2,
     "--sigma = 1e-149"),
    (("one-run", "--scores", "{t}/bad.npz", "--method", "mahloujifar", "--delta", "1e-5"), 2,
     "--scores {t}/bad.npz: not an .npz archive"),
    (("one-run", "--scores", "{t}", "--method", "mahloujifar", "--delta", "1e-5"), 2, "--scores {t}: a folder"),
    (("one-run", "--method", "mahloujifar", "--family", "dpsgd", "--q", "1", "--steps", "1000000000000", "--canaries",
      "100", "--guesses", "10", "--correct", "9", "--delta", "1e-5"), 2, "--family dpsgd --q 1 --steps 1000000000000"),
    (("one-run", "--method", "steinke", "--canaries", "10", "--guesses", "20", "--correct", "5", "--delta",
      "1e-5"), 2, "--guesses = 20"),
    (("deep-cost", "--params", "{p}", "--batch", "-5"), 2, "--batch = -5"),
    (("deep-cost", "--params", "{p}", "--batch", "100000000"), 2, "--batch = 100000000 is invalid; allowed: a size "
                                                                   "that fits in memory: this one needs about"),
    (("deep-cost",), 2, "--params params.yaml: no such file"),
    (("deep-cost", "--params", "{t}"), 2, "--params {t}: a folder"),
    (("deep-cost", "--params", "{t}/broken.yaml"), 2, "--params {t}/broken.yaml: not valid YAML (line 2"),
    (("deep-cost", "--params", "{t}/tag.yaml"), 2,
     "--params {t}/tag.yaml: not valid YAML (line 1, column 7): could not determine a constructor"),
    (("deep-cost", "--params", "{t}/list.yaml"), 2, "--params {t}/list.yaml: expected a mapping"),
    (("deep-cost", "--params", "{t}/unknown.yaml"), 2, "{t}/unknown.yaml: unknown key"),
    (("compare", "{t}/none", "{r}/reference"), 2, "{t}/none: no results here"),
    (("compare", "{r}/reference", "no-such-revision", "--repo", "{t}"), 2,
     "REFERENCE = 'no-such-revision' is invalid; allowed: a results folder, or a git revision of {t}"),
    (("compare", "{r}/reference", "{r}/reference", "--limit", "-1"), 2, "--limit = -1"),
    (("plan",), 2, "--root = '.'"),
    (("plan", "--root", "{r}", "--configfile", "{t}/broken.yaml"), 2, "--configfile {t}/broken.yaml: not valid"),
    (("plan", "--root", "{r}", "--configfile", "{t}/none.yaml"), 2, "--configfile {t}/none.yaml: no such file"),
    (("prefetch",), 2, "--params params.yaml: no such file"),
    (("prefetch", "--params", "{t}/tag.yaml"), 2, "--params {t}/tag.yaml: not valid YAML"),
    (("prefetch", "--params", "{p}", "--root", "{t}/bad.npz"), 2, "--root = '{t}/bad.npz'"),
    (("prefetch", "--params", "{p}", "--configfile", "{t}/broken.yaml"), 2, "--configfile {t}/broken.yaml: not valid"),
    (("prefetch", "--params", "{p}", "--configfile", "{t}/none.yaml"), 2, "--configfile {t}/none.yaml: no such file"),
    (("simulate-s1", "--sigma", "1", "--q", "1", "--steps", "1", "--runs", "10000000000000", "--out", "{t}/x.csv"),
     2, "--runs = 10000000000000 is invalid; allowed: a size that fits in memory: this one needs about"),
    (("simulate-s1", "--sigma", "1", "--q", "1", "--steps", "1", "--runs", "10", "--out", "{t}"), 2,
     "--out = '{t}'"),
    (("simulate-s1", "--sigma", "1e-200", "--q", "0.5", "--steps", "3", "--runs", "10", "--out", "{t}/x.csv"), 2,
     "--sigma = 1e-200"),
    (("simulate-s1", "--sigma", "1", "--q", "1", "--steps", "1", "--runs", "10", "--out", "{t}/bad.npz/x.csv"), 2,
     "{t}/bad.npz"),
    (("bench", "--device", "tpu"), 2, "--device = 'tpu'"),
    (("verify", "{t}/none"), 2, "PATH = '{t}/none'"),
]


def _bad_files(folder: Path) -> None:
    """The bad files the table names."""
    (folder / "bad.npz").write_bytes(b"not a zip archive")
    np.savez(folder / "truncated.npz", score=np.arange(1000.0), label=np.arange(1000) % 2)
    whole = (folder / "truncated.npz").read_bytes()
    (folder / "truncated.npz").write_bytes(whole[:len(whole) // 2])
    np.savez(folder / "objects.npz", score=np.array([{"a": 1}, None], dtype=object), label=np.array([1, 0]))
    (folder / "bytes.csv").write_bytes(b"score,label\n0.5,1\n\xff\xfe,0\n")
    (folder / "words.csv").write_text("score,label\nhigh,1\nlow,0\n")
    (folder / "empty.csv").write_text("")
    (folder / "scores.txt").write_text("0.5 1\n")
    (folder / "broken.yaml").write_text("seed: [1, 2\n")
    (folder / "tag.yaml").write_text('seed: !!python/object/apply:os.system ["echo hi"]\n')
    (folder / "list.yaml").write_text("- 1\n- 2\n")
    (folder / "unknown.yaml").write_text("seed: 1\ncolour: blue\n")


def test_every_command_gives_one_line_for_each_bad_input(tmp_path, monkeypatch, repo_root):
    """Each bad input of the table: one line on stderr naming the flag or file (a traceback, a
    second line or an unnamed error fails), nothing on stdout, the table's exit status; the table
    covers every command."""
    from subaudit.cli import build_parser

    sub = next(a for a in build_parser()._actions if a.dest == "command")
    assert {args[0] for args, _, _ in _BAD_INPUTS} == set(sub.choices)
    folder = tmp_path / "bad"
    folder.mkdir()
    _bad_files(folder)
    monkeypatch.chdir(tmp_path)                 # no params.yaml here
    fill = {"t": str(folder), "p": str(repo_root / "params.yaml"), "r": str(repo_root)}
    for args, status, named in _BAD_INPUTS:
        argv = [a.format(**fill) for a in args]
        proc = run_cli(*argv, check=False)
        err = proc.stderr.strip()
        assert (proc.returncode, len(err.splitlines())) == (status, 1), (argv, proc.returncode, err)
        assert err.startswith(f"subaudit {args[0]}: error: ") and named.format(**fill) in err, (argv, err)
        assert proc.stdout == "", argv
    assert sorted(p.name for p in folder.iterdir()) == sorted(  # nothing written, nothing half-written
        ["bad.npz", "truncated.npz", "objects.npz", "bytes.csv", "words.csv", "empty.csv", "scores.txt", "broken.yaml",
         "tag.yaml", "list.yaml", "unknown.yaml"])


def test_a_full_disk_is_named_with_the_file(tmp_path):
    """`simulate-s1 --out` on a full file system (a 64 KiB tmpfs, mounted as root as CI runs):
    one line naming the file and the system's words, exit 1 (the input is fine, the disk is not),
    and no file or temporary left behind."""
    import os
    import subprocess

    disk = tmp_path / "disk"
    disk.mkdir()
    if os.geteuid() != 0 or subprocess.run(["mount", "-t", "tmpfs", "-o", "size=64k", "tmpfs", str(disk)],
                                           capture_output=True).returncode:
        pytest.skip("mounting a small tmpfs needs root (CI runs as root)")
    try:
        proc = run_cli("simulate-s1", "--sigma", "1", "--q", "1", "--steps", "1", "--runs", "20000", "--out",
                       str(disk / "x.csv"), check=False)
        err = proc.stderr.strip()
        assert proc.returncode == 1 and len(err.splitlines()) == 1, err
        assert str(disk) in err and "No space left on device" in err, err
        assert list(disk.iterdir()) == []
    finally:
        subprocess.run(["umount", str(disk)], check=True)
