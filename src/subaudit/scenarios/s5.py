"""S5, adversarial natural (Algorithm 5): the auxiliary record whose gradient is least aligned
with the target's, among the experiment's first s5_pool auxiliary records (all by default);
scored by natural.input_score."""

from __future__ import annotations

from typing import TYPE_CHECKING

from subaudit.scenarios import CraftInputs, Scenario

if TYPE_CHECKING:
    from subaudit.canaries import Crafted


def craft(inputs: CraftInputs) -> Crafted:
    from subaudit.canaries import craft_natural

    x, y = inputs.target_record()
    return craft_natural(inputs.model, inputs.reference, x, y, inputs.features["aux"],
                         pool=inputs.options["s5_pool"], score=inputs.options["input_score"])


SCENARIO = Scenario(name="S5", label="adversarial natural", color="#e377c2", craft=craft,
                    needs_reference=True, per_q=False, removes_target=True, input_canary=True,
                    options=("input_score", "s5_pool"))
