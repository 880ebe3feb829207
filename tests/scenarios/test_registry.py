"""The scenario registry: names, what the workflow reads off each entry, and crafting
through it (each entry hands the right inputs to its algorithm in subaudit.scenarios.crafting)."""

from __future__ import annotations

import subprocess
import sys

import pytest
import torch

from subaudit.scenarios.crafting import reference_model
from subaudit.scenarios.s3 import craft_input
from subaudit.scenarios.s4 import craft_mislabeled
from subaudit.scenarios.s5 import craft_natural
from subaudit.engine import MLP, DPConfig, GradientCanary, InputCanary, Records
from subaudit.scenarios import SCENARIOS, CraftInputs, get
from subaudit.validation import ParameterError


def test_registry_names_and_flags():
    assert list(SCENARIOS) == ["S2", "S3", "S4", "S5", "S6", "S7"]
    assert [s.title for s in SCENARIOS.values()] == [
        "S2 crafted gradient", "S3 crafted input", "S4 crafted mislabeled",
        "S5 adversarial natural", "S6 metagradient substitute", "S7 privacy backdoor"]
    assert {n for n, s in SCENARIOS.items() if s.in_utility} == {"S2", "S3"}
    assert {n for n, s in SCENARIOS.items() if s.per_q} == {"S2", "S6", "S7"}
    assert {n for n, s in SCENARIOS.items() if s.noisy} == {"S6"}
    assert {n for n, s in SCENARIOS.items() if s.input_canary} == {"S3", "S4", "S5", "S6", "S7"}
    # an input canary stands in for the target, so it needs the reference's target
    for s in SCENARIOS.values():
        assert s.removes_target == s.needs_reference
    assert len({s.color for s in SCENARIOS.values()}) == len(SCENARIOS)
    with pytest.raises(ParameterError, match="one of S2, S3, S4, S5, S6, S7"):
        get("S9")


def test_the_registry_imports_no_torch():
    """The workflow checks names against it while parsing, once per cluster job."""
    code = "import sys, subaudit.scenarios, subaudit.pipeline.settings; print('torch' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert out.stdout.strip() == "False", out.stderr


@pytest.fixture(scope="module")
def setup():
    g = torch.Generator().manual_seed(3)
    model = MLP((6, 4))
    train = Records(torch.randn(40, 6, generator=g), torch.randint(0, 4, (40,), generator=g))
    aux = Records(torch.randn(30, 6, generator=g), torch.randint(0, 4, (30,), generator=g))
    feats = {"train": train, "aux": aux, "classes": 4}
    params, _ = reference_model(model, train, steps=20, lr=0.5, optimizer="sgd")
    return model, feats, params


def test_crafting_through_the_registry(setup):
    model, feats, params = setup
    target = 7
    x, y = feats["train"].x[target], int(feats["train"].y[target])
    common = dict(model=model, features=feats, init="zero", seed=1, reference=params,
                  target=target, options={"craft_steps": 5, "craft_lr": 0.1,
                                          "input_score": "logit-difference", "s5_pool": None})
    got = {n: SCENARIOS[n].craft(CraftInputs(**common)) for n in ("S3", "S4", "S5")}
    want = {"S3": craft_input(model, params, x, y, steps=5, lr=0.1),
            "S4": craft_mislabeled(model, params, x, y),
            "S5": craft_natural(model, params, x, y, feats["aux"])}
    for name, crafted in got.items():
        assert isinstance(crafted.canary, InputCanary) and SCENARIOS[name].input_canary
        assert torch.equal(crafted.canary.x, want[name].canary.x), name
        assert torch.equal(crafted.canary.y, want[name].canary.y), name
        assert torch.equal(crafted.canary.x[0], x.to(crafted.canary.x.dtype))   # z first
    dp = DPConfig(steps=5, sampling_rate=0.5, noise_multiplier=0.0, clip=2.0, lr=0.1)
    s2 = SCENARIOS["S2"].craft(CraftInputs(model=model, features=feats, init="zero", seed=1,
                                           dp=dp, options={"s2_coordinate": "least-update"}))
    assert isinstance(s2.canary, GradientCanary) and not SCENARIOS["S2"].input_canary
    assert sorted(s2.canary.g.abs().sum(1).tolist()) == [2.0, 2.0]      # +-C on one coordinate


def test_s6_through_the_registry_is_the_metagradient_crafting(setup):
    from subaudit.engine import LogOddsDifference
    from subaudit.scenarios.s6 import craft_metagradient

    model, feats, params = setup
    dp = DPConfig(steps=4, sampling_rate=0.5, noise_multiplier=1.0, clip=2.0, lr=0.1)
    options = {"s6_metasteps": 2, "s6_runs": 2, "s6_lr": 0.1, "s6_objective": "unrolled",
               "s6_check_runs": 4, "input_score": "log-odds"}
    got = SCENARIOS["S6"].craft(CraftInputs(model=model, features=feats, init="zero", seed=1, dp=dp,
                                            reference=params, target=7, options=options))
    want = craft_metagradient(model, feats, 7, params, dp, init="zero", seed=1, score=LogOddsDifference(),
                              metasteps=2, runs=2, lr=0.1, check_runs=4)
    assert got.scenario == "S6" and torch.equal(got.canary.x, want.canary.x) and got.info == want.info
    assert isinstance(got.canary.score, LogOddsDifference)          # natural.input_score
