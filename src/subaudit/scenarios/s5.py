"""S5, adversarial natural (Algorithm 5): the auxiliary record whose gradient is least aligned
with the target's, among the experiment's first s5_pool auxiliary records (all by default);
scored by natural.input_score."""

from __future__ import annotations

from typing import TYPE_CHECKING

from subaudit.scenarios.scenario import CraftInputs, Scenario
from subaudit.validation import ParameterError

if TYPE_CHECKING:
    from collections.abc import Sequence

    import torch

    from subaudit.engine import MLP, Records
    from subaudit.scenarios.crafting import Crafted

__all__ = ["SCENARIO", "craft_natural"]


def craft_natural(
    model: MLP, params: Sequence[torch.Tensor], x: torch.Tensor, y: int, aux: Records, *,
    pool: int | None = None, score: str = "logit-difference",
) -> Crafted:
    """S5 (Algorithm 5): the auxiliary record with the least gradient cosine, among the first
    ``pool`` auxiliary records (all when None); runs scored by ``score``."""
    import torch

    from subaudit.engine import InputCanary, Records
    from subaudit.scenarios.crafting import Crafted, cosine, input_score, pair_info, per_example_grads

    scored_by = input_score(score)
    n = aux.x.shape[0]
    if pool is not None and not 1 <= pool <= n:
        raise ParameterError("s5_pool", pool, f"1..{n} (the auxiliary records)")
    aux = Records(aux.x[:pool], aux.y[:pool]) if pool is not None else aux
    dtype = params[0].dtype
    target = per_example_grads(model, params, x.to(dtype)[None], torch.tensor([y]))[0]
    cos = torch.cat([cosine(per_example_grads(model, params, aux.x[i:i + 1024],
                                               aux.y[i:i + 1024]), target)
                     for i in range(0, aux.x.shape[0], 1024)])
    i = int(torch.argmin(cos))
    canary = InputCanary(torch.stack([x.to(dtype), aux.x[i].to(dtype)]),
                         torch.tensor([y, int(aux.y[i])]), scored_by=scored_by)
    return Crafted("S5", canary, {**pair_info(model, params, canary.x, canary.y),
                                  "aux_index": i, "pool": int(aux.x.shape[0]), "label": int(y),
                                  "label_prime": int(aux.y[i]), "score": score})


def craft(inputs: CraftInputs) -> Crafted:
    x, y = inputs.target_record()
    return craft_natural(inputs.model, inputs.reference, x, y, inputs.features["aux"],
                         pool=inputs.options["s5_pool"], score=inputs.options["input_score"])


SCENARIO = Scenario(name="S5", label="adversarial natural", color="#e377c2", craft=craft,
                    needs_reference=True, per_q=False, removes_target=True, input_canary=True, shares_target=True,
                    options=("input_score", "s5_pool"))
