"""S4, crafted mislabeled (Algorithm 4): the target's input with the label whose gradient is
least aligned with the target's."""

from __future__ import annotations

from typing import TYPE_CHECKING

from subaudit.scenarios.scenario import CraftInputs, Scenario

if TYPE_CHECKING:
    from collections.abc import Sequence

    import torch

    from subaudit.engine import MLP
    from subaudit.scenarios.crafting import Crafted

__all__ = ["SCENARIO", "craft_mislabeled"]


def craft_mislabeled(
    model: MLP, params: Sequence[torch.Tensor], x: torch.Tensor, y: int
) -> Crafted:
    """S4 (Algorithm 4): the label ``y' != y`` with the least gradient cosine at ``x``."""
    import torch

    from subaudit.engine import InputCanary
    from subaudit.scenarios.crafting import Crafted, cosine, pair_info, per_example_grads

    k = model.num_classes
    dtype = params[0].dtype
    labels = torch.arange(k)
    g = per_example_grads(model, params, x.to(dtype)[None].expand(k, -1), labels)
    cos = cosine(g, g[y])
    cos[y] = float("inf")
    y2 = int(torch.argmin(cos))
    canary = InputCanary(torch.stack([x, x]).to(dtype), torch.tensor([y, y2]))
    return Crafted("S4", canary, {**pair_info(model, params, canary.x, canary.y),
                                  "label": int(y), "label_prime": y2})


def craft(inputs: CraftInputs) -> Crafted:
    x, y = inputs.target_record()
    return craft_mislabeled(inputs.model, inputs.reference, x, y)


SCENARIO = Scenario(name="S4", label="crafted mislabeled", color="#8c564b", craft=craft,
                    needs_reference=True, per_q=False, removes_target=True, input_canary=True, shares_target=True)
