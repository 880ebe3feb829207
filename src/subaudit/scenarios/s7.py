"""S7, privacy-backdoor canary (after Feng and Tramer 2024): a crafted start under which
the canary's clipped gradient, whenever it is sampled, lands on one known direction with
norm close to C, opposite for z and z', while the other records contribute almost nothing
there; runs are scored by the parameter change along that direction.

A linear head gets the feature-space pair (M e_k, y) / (-M e_k, y) on its least-used
feature k; a one-hidden-layer MLP on one-hot inputs gets two trap units tuned to the
target's input (``subaudit.canaries.backdoor_trap``) and z' = (x, y') with S4's label.
S2 is the idealised form of this canary (a gradient injected on the least-updated
coordinate); S7's direction is silent by construction, so it audits at least as high.  The
crafting info reports how close the construction comes (alignment per step, accuracy
cost)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from subaudit.scenarios import CraftInputs, Scenario

if TYPE_CHECKING:
    from subaudit.canaries import Crafted


def craft(inputs: CraftInputs) -> Crafted:
    from subaudit.canaries import craft_backdoor

    assert inputs.dp is not None and inputs.target is not None, "S7 is crafted per q from the target"
    return craft_backdoor(inputs.model, inputs.features, inputs.target, inputs.reference, inputs.dp,
                          init=inputs.init, seed=inputs.seed)


SCENARIO = Scenario(name="S7", label="privacy backdoor", color="#17becf", craft=craft,
                    needs_reference=True, per_q=True, removes_target=True, input_canary=True)
