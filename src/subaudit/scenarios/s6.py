"""S6, metagradient-optimised substitute (after "Optimizing canaries for privacy auditing
with metagradient descent"): z is the target, z' = (x', y') with S4's label y' and x'
improved from x by gradient ascent on the audit score's mean gap over its spread,
differentiated through the audit's own DP training (its q, C, lr, T, optimiser and
calibrated noise; ``subaudit.metagradient``).  Crafting runs and the fresh check runs use
seeds of their own, disjoint from the audit's runs; the optimised pair is kept only if the
check runs find it no worse than its start (S4's pair).  Scored by natural.input_score."""

from __future__ import annotations

from typing import TYPE_CHECKING

from subaudit.scenarios import CraftInputs, Scenario

if TYPE_CHECKING:
    from subaudit.canaries import Crafted


def craft(inputs: CraftInputs) -> Crafted:
    from subaudit.engine import INPUT_SCORES
    from subaudit.metagradient import craft_metagradient

    assert inputs.dp is not None and inputs.target is not None, "S6 is crafted per q from the target"
    o = inputs.options
    return craft_metagradient(inputs.model, inputs.features, inputs.target, inputs.reference, inputs.dp,
                              init=inputs.init, seed=inputs.seed, score=INPUT_SCORES[o["input_score"]](),
                              metasteps=o["s6_metasteps"], runs=o["s6_runs"], lr=o["s6_lr"],
                              objective_kind=o["s6_objective"], check_runs=o["s6_check_runs"])


SCENARIO = Scenario(name="S6", label="metagradient substitute", color="#bcbd22", craft=craft,
                    needs_reference=True, per_q=True, removes_target=True, input_canary=True, noisy=True,
                    options=("s6_metasteps", "s6_runs", "s6_lr", "s6_objective", "s6_check_runs", "input_score"))
