"""S4, crafted mislabeled (Algorithm 4): the target's input with the label whose gradient is
least aligned with the target's."""

from __future__ import annotations

from typing import TYPE_CHECKING

from subaudit.scenarios import CraftInputs, Scenario

if TYPE_CHECKING:
    from subaudit.canaries import Crafted


def craft(inputs: CraftInputs) -> Crafted:
    from subaudit.canaries import craft_mislabeled

    x, y = inputs.target_record()
    return craft_mislabeled(inputs.model, inputs.reference, x, y)


SCENARIO = Scenario(name="S4", label="crafted mislabeled", color="#8c564b", craft=craft,
                    needs_reference=True, per_q=False, removes_target=True, input_canary=True)
