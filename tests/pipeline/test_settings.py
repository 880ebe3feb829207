"""Audit settings: keys, paths, the settings grid with variations, and the derived seeds."""

from __future__ import annotations

import pytest

from subaudit.pipeline import settings as S
from subaudit.scenarios import SCENARIOS
from subaudit.validation import ParameterError

EXPERIMENTS = {
    "image": {"clip": 2.0, "lr": 0.001, "steps": 100, "every": 10,
              "sampling_rates": [1.0, 0.25], "hidden": [], "optimizer": "sgd", "init": "zero"},
    "tab": {"clip": 5.0, "lr": 0.0018, "steps": 100, "every": 10, "sampling_rates": [0.25],
            "hidden": [128], "optimizer": "adam", "init": "random"},
}


def test_fmt_is_short_and_lossless():
    for x in (1.0, 0.25, 0.0625, 4, 0.0018, 1e-05, 0.1 + 0.2, 1234567.0, 2.5e-12):
        assert float(S.fmt(x)) == float(x)
    assert [S.fmt(x) for x in (1.0, 0.0625, 4, 1e-05)] == ["1", "0.0625", "4", "1e-05"]


def test_key_round_trips_and_is_canonical():
    values = {"q": 0.25, "clip": 2.0, "steps": 100, "every": 10, "lr": 0.001,
              "target_epsilon": 4.0, "runs": 256, "repeat": 1}
    key = S.key(S.DEPENDS["scores"], values)
    assert key == "q0.25_C2_T100_k10_lr0.001_eps4_R256_rep1"
    assert S.parse_key(key) == values
    assert S.parse_key(key, S.DEPENDS["scores"]) == values
    assert S.key((), values) == "any" and S.parse_key("any") == {}
    for bad in ("C2_q0.25", "q0.250", "q1_x3", "T1.5", "q1_q2"):
        with pytest.raises(ParameterError):
            S.parse_key(bad)
    with pytest.raises(ParameterError, match="exactly the knobs"):
        S.parse_key("q1_T100", S.DEPENDS["calibration"])


def test_each_artifact_key_holds_exactly_its_knobs():
    s = S.Setting("image", "S2", 1.0, 2.0, 100, 10, 0.001, 4.0, 256, 0)
    assert s.key("reference") == "T100_k10_lr0.001"
    assert s.key("calibration") == "q1_T100_k10_eps4"
    assert s.key("shard") == "q1_C2_T100_k10_lr0.001_eps4_rep0"        # not R: shards are reused
    assert S.path("shard", exp="image", scenario="S2", key=s.key("shard"), lo=0, hi=16) == (
        "results/natural/image/shards/S2_q1_C2_T100_k10_lr0.001_eps4_rep0/runs0-16.npz")
    assert S.canary_knobs(SCENARIOS["S2"]) == ("q", "clip", "steps", "lr")
    # S6 is crafted per q from the reference, against the calibrated noise: every knob of
    # the training but R and the repeat
    assert S.canary_knobs(SCENARIOS["S6"]) == ("q", "clip", "steps", "every", "lr", "target_epsilon")
    assert s.key("canary", S.canary_knobs(SCENARIOS["S6"])) == "q1_C2_T100_k10_lr0.001_eps4"
    for name in ("S3", "S4", "S5"):       # from the reference model only
        assert S.canary_knobs(SCENARIOS[name]) == S.DEPENDS["reference"]
        # the paper's code: one minibatch reference per q, so S3-S5 are crafted per q
        assert S.canary_knobs(SCENARIOS[name], "per-q") == ("q", "steps", "every", "lr")
    assert s.key("reference", reference="per-q") == "q1_T100_k10_lr0.001"
    assert S.depends("target", "per-q") == ("q", "steps", "every", "lr")
    assert S.depends("shard", "per-q") == S.DEPENDS["shard"]
    with pytest.raises(ParameterError, match="reference"):
        S.depends("reference", "minibatch")


def test_grid_is_the_base_grid_then_new_variations():
    base = S.grid(EXPERIMENTS, ["S2", "S3"], target_epsilon=4.0, runs=256, repeats=2)
    assert len(base) == (2 + 1) * 2 * 2
    assert base[0] == S.Setting("image", "S2", 1.0, 2.0, 100, 10, 0.001, 4.0, 256, 0)
    assert {(s.experiment, s.q) for s in base} == {("image", 1.0), ("image", 0.25),
                                                   ("tab", 0.25)}
    more = S.grid(EXPERIMENTS, ["S2", "S3"], target_epsilon=4.0, runs=256, repeats=2,
                  variations=[{"experiments": ["tab"], "clip": [1.0, 5.0], "steps": [50]},
                              {"scenarios": ["S2"], "runs": [256]}])      # the base again
    assert more[:len(base)] == base
    extra = more[len(base):]
    assert len(extra) == 2 * 2 * 2 and len(set(more)) == len(more)
    assert {(s.experiment, s.clip, s.steps, s.lr) for s in extra} == {
        ("tab", 1.0, 50, 0.0018), ("tab", 5.0, 50, 0.0018)}
    with pytest.raises(ParameterError, match="variations.experiments"):
        S.grid(EXPERIMENTS, ["S2"], target_epsilon=4.0, runs=256, repeats=1,
               variations=[{"experiments": ["audio"]}])
    # an experiment that names its scenarios audits those of the list only, in the list's order;
    # null audits all
    own = {**EXPERIMENTS, "tab": {**EXPERIMENTS["tab"], "scenarios": ["S3"]}}
    some = S.grid(own, ["S2", "S3"], target_epsilon=4.0, runs=256, repeats=1)
    assert {(s.experiment, s.scenario) for s in some} == {("image", "S2"), ("image", "S3"), ("tab", "S3")}
    assert S.grid({**own, "tab": {**own["tab"], "scenarios": None}}, ["S2", "S3"], target_epsilon=4.0,
                  runs=256, repeats=1) == S.grid(EXPERIMENTS, ["S2", "S3"], target_epsilon=4.0, runs=256,
                                                 repeats=1)


def test_ablations_vary_one_knob_at_its_q_and_reuse_the_base_audit():
    natural = {"experiments": EXPERIMENTS, "scenarios": ["S2", "S3"], "target_epsilon": 4.0,
               "runs": 256, "repeats": 2}
    ablations = {"experiment": "image", "repeats": 1, "scenarios": ["S2", "S3"],
                 "clip": {"q": 1.0, "values": [1.0, 2.0]},
                 "steps": {"q": 0.25, "values": [100, 500]}, "lr": {"q": 1.0, "values": [0.002]}}
    base = set(S.settings_from_config(natural))
    clip = S.ablation_settings(natural, ablations, "clip")
    assert [(s.scenario, s.clip, s.q, s.repeat) for s in clip] == [
        ("S2", 1.0, 1.0, 0), ("S3", 1.0, 1.0, 0), ("S2", 2.0, 1.0, 0), ("S3", 2.0, 1.0, 0)]
    assert [s in base for s in clip] == [False, False, True, True]   # C = 2 is the base audit
    steps = S.ablation_settings(natural, ablations, "steps")
    assert {(s.steps, s.every) for s in steps} == {(100, 10), (500, 50)}  # k scales with T
    assert all(s.q == 0.25 and s.clip == 2.0 and s.lr == 0.001 for s in steps)
    assert S.ablation_every(EXPERIMENTS["image"], 5) == 1
    with pytest.raises(ParameterError, match="ablation knob"):
        S.ablation_settings(natural, ablations, "runs")
    # only the ablations' scenarios are ablated
    only = S.ablation_settings(natural, {**ablations, "scenarios": ["S3"]}, "clip")
    assert [(s.scenario, s.clip) for s in only] == [("S3", 1.0), ("S3", 2.0)]


def test_switch_settings_name_whose_choice_each_is():
    natural = {"input_score": "log-odds", "s2_coordinate": "least-update", "reference": "per-q",
               "experiments": {"image": {"n_aux": 50, "s5_pool": 20},
                               "tab": {"n_aux": 30, "canary_sampling_rate": 1.0}}}
    out = S.switch_settings(natural)
    assert out["S3/S5 score (natural.input_score)"] == "log-odds (the paper's code)"
    assert out["S2 coordinate (natural.s2_coordinate)"] == "least-update (the paper's text)"
    assert out["reference model (natural.reference)"] == "per-q (the paper's code)"
    assert out["S5 pool, image (s5_pool)"] == "20"
    assert out["S5 pool, tab (s5_pool)"] == "all 30 auxiliary records"
    assert out["input canary rate, tab (canary_sampling_rate)"] == "1.0"
    assert out["input canary rate, image (canary_sampling_rate)"] == "the data's q"


def test_seeds_are_the_published_derivations():
    """Pinned: the seeds the published default results were made with."""
    root = 20260121
    cases = [
        ("split", {"experiment": "image"}, 1993685039642130060),
        ("reference", {"experiment": "image", "steps": 100}, 8325824050697741462),
        ("canary", {"experiment": "image", "scenario": "S2", "q": 0.25}, 3016031445359962680),
        ("train", {"experiment": "tabular", "scenario": "S3", "q": 0.0625, "repeat": 1,
                   "clip": 5.0}, 3686031972617324860),
        ("utility", {"experiment": "image", "scenario": "S3", "q": 1.0}, 7427081668161594140),
        ("s1", {"q": 0.25, "target_epsilon": 4.0, "repeat": 2}, 611114933970511868),
    ]
    for purpose, values, expected in cases:
        assert S.seed(root, purpose, values) == expected, purpose
    # q enters a canary seed only where the canary key has it (S2, not S3-S5)
    assert S.seed(root, "canary", {"experiment": "image", "scenario": "S3"}) != S.seed(
        root, "canary", {"experiment": "image", "scenario": "S3", "q": 1.0})
    with pytest.raises(ParameterError):
        S.seed(root, "train", {"experiment": "image", "scenario": "S2"})
    with pytest.raises(ParameterError):
        S.seed(root, "bogus", {})


def test_target_groups_share_the_world_of_z_where_two_scenarios_audit_a_setting():
    exps = {"a": {"sampling_rates": [1.0, 0.5], "clip": 1.0, "steps": 10, "every": 5, "lr": 0.1}}
    both = S.grid(exps, ["S2", "S3", "S4", "S7"], target_epsilon=4.0, runs=8, repeats=1)
    groups = S.target_groups(both, SCENARIOS)
    assert groups == {("a", s.key("shard")): ("S3", "S4") for s in both if s.scenario == "S3"}
    assert len(groups) == 2                    # one per q; S2 and S7 train both worlds themselves
    alone = S.grid(exps, ["S2", "S3", "S7"], target_epsilon=4.0, runs=8, repeats=1)
    assert S.target_groups(alone, SCENARIOS) == {}
    assert S.seed(1, "target-world", {"experiment": "a", "q": 1.0, "repeat": 0}) != \
        S.seed(1, "train", {"experiment": "a", "scenario": "S3", "q": 1.0, "repeat": 0})


def test_an_experiments_model_sizes_are_its_data_and_its_head(tmp_path):
    """Inputs: the backbone's features, a tabular source's values, an image's pixels (the loaded
    records' size) or a features file's columns (its header; classes from its labels); then the
    hidden layers and the classes."""
    import numpy as np

    from subaudit import data as D

    assert S.model_sizes({"source": "mnist-5k", "backbone": "efficientnet-lite0", "hidden": []}) == (1280, 10)
    assert S.model_sizes({"source": "sst2", "backbone": "minilm-l6-v2", "hidden": []}) == (384, 2)
    assert S.model_sizes({"source": "letter", "backbone": "none", "hidden": [128]}) == (256, 128, 26)
    assert S.model_sizes({"source": "purchase100", "backbone": "none", "hidden": [128]}) == (600, 128, 100)
    pixels = D.load("cifar10-shaped", D.acquire("cifar10-shaped", tmp_path)).x[0].size
    assert S.model_sizes({"source": "cifar10-shaped", "backbone": "none", "hidden": [8]}) == (pixels, 8, 10)
    path = tmp_path / "own.npz"
    np.savez(path, x=np.zeros((50, 7), np.float32), y=np.arange(50) % 3, test_x=np.zeros((5, 7), np.float32),
             test_y=np.full(5, 4))                       # a class only the test part has
    assert S.model_sizes({"source": "own-features", "features_file": str(path), "checksum": "0" * 64,
                          "hidden": []}) == (7, 5)


def test_the_workflow_names_every_artifact_from_the_paths_table():
    """No rule file types an artifact's path: every data/ and results/ path of workflow/rules
    comes from S.PATHS (logs and benchmarks aside), and path() fills what it is given,
    leaving the other wildcards for Snakemake."""
    import re

    from conftest import ROOT

    for smk in sorted((ROOT / "workflow" / "rules").glob("*.smk")):
        code = re.sub(r'"""[\s\S]*?"""', "", smk.read_text())            # docstrings aside
        typed = re.findall(r'''f?["'](?:data|results)/[^"']*["']''', code)
        assert not typed, (smk.name, typed)
    assert S.path("figure", ext="png") == "results/figures/{name}.png"
    assert S.path("deep_audit", audit="{case}_{game}") == "results/deep/audits/{case}_{game}.npz"
    assert S.path("raw", source="mnist", filename="a.npz") == "data/raw/mnist/a.npz"
    assert all(p.startswith(S.OUTPUT_ROOTS) for p in S.PATHS.values())
