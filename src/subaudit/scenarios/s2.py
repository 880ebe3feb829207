"""S2, crafted gradient (Algorithm 2): +C e_j* for z, -C e_j* for z', j* the least-updated
coordinate of noiseless training with the audit's own sampling, clipping, lr and T (or, by
natural.s2_coordinate, the paper's code's smallest root of the summed squared gradients)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from subaudit.scenarios import CraftInputs, Scenario

if TYPE_CHECKING:
    from subaudit.canaries import Crafted


def craft(inputs: CraftInputs) -> Crafted:
    from subaudit.canaries import craft_gradient

    assert inputs.dp is not None, "S2 is crafted per (q, C, lr, T)"
    return craft_gradient(inputs.model, inputs.features["train"], inputs.dp, init=inputs.init,
                          seed=inputs.seed, coordinate=inputs.options["s2_coordinate"])


SCENARIO = Scenario(name="S2", label="crafted gradient", color="#d62728", craft=craft,
                    needs_reference=False, per_q=True, removes_target=False, input_canary=False,
                    in_utility=True, options=("s2_coordinate",))
