"""S3, crafted input (Algorithm 3): x' descends the gradient cosine to the target's plus the
squared difference of the gradient norms, from zero, with the target's label; scored by
natural.input_score."""

from __future__ import annotations

from typing import TYPE_CHECKING

from subaudit.scenarios import CraftInputs, Scenario

if TYPE_CHECKING:
    from subaudit.canaries import Crafted


def craft(inputs: CraftInputs) -> Crafted:
    from subaudit.canaries import craft_input

    x, y = inputs.target_record()
    return craft_input(inputs.model, inputs.reference, x, y, steps=inputs.options["craft_steps"],
                       lr=inputs.options["craft_lr"], score=inputs.options["input_score"])


SCENARIO = Scenario(name="S3", label="crafted input", color="#ff7f0e", craft=craft,
                    needs_reference=True, per_q=False, removes_target=True, input_canary=True, in_utility=True,
                    options=("craft_steps", "craft_lr", "input_score"))
