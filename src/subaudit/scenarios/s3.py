"""S3, crafted input (Algorithm 3): x' descends the gradient cosine to the target's plus the
squared difference of the gradient norms, from zero, with the target's label; scored by
natural.input_score."""

from __future__ import annotations

from typing import TYPE_CHECKING

from subaudit.scenarios.scenario import CraftInputs, Scenario
from subaudit.validation import check_count, check_positive

if TYPE_CHECKING:
    from collections.abc import Sequence

    import torch

    from subaudit.engine import MLP
    from subaudit.scenarios.crafting import Crafted

__all__ = ["SCENARIO", "craft_input"]


def craft_input(
    model: MLP, params: Sequence[torch.Tensor], x: torch.Tensor, y: int, *,
    steps: int = 300, lr: float = 0.1, score: str = "logit-difference",
) -> Crafted:
    """S3 (Algorithm 3): ``x'`` from zero by gradient descent; label kept; runs scored by
    ``score`` (:data:`subaudit.engine.INPUT_SCORES`)."""
    import torch

    from subaudit.engine import InputCanary
    from subaudit.scenarios.crafting import Crafted, cosine, input_score, module_of, pair_info, per_example_grads

    scored_by = input_score(score)
    check_count(steps, "craft_steps")
    check_positive(lr, "craft_lr")
    dtype = params[0].dtype
    x = x.to(dtype)
    target = per_example_grads(model, params, x[None], torch.tensor([y]))[0]
    module = module_of(model, params)
    for p in module.parameters():
        p.requires_grad_(True)
    xp = torch.zeros_like(x, requires_grad=True)
    yy = torch.tensor([y])
    history = []
    for _ in range(steps):
        loss = torch.nn.functional.cross_entropy(module(xp[None]), yy)
        g = torch.cat([t.reshape(-1) for t in
                       torch.autograd.grad(loss, list(module.parameters()), create_graph=True)])
        objective = cosine(g, target) + (g.norm() - target.norm()) ** 2
        objective.backward()
        with torch.no_grad():     # torch.optim.SGD's step (its constructor imports torch._dynamo)
            xp.add_(xp.grad, alpha=-lr)
        xp.grad = None
        history.append(float(objective.detach()))
    xp = xp.detach()
    canary = InputCanary(torch.stack([x, xp]), torch.tensor([y, y]), scored_by=scored_by)
    info = {**pair_info(model, params, canary.x, canary.y), "label": int(y), "score": score,
            "objective_first": history[0], "objective_last": history[-1]}
    return Crafted("S3", canary, info)


def craft(inputs: CraftInputs) -> Crafted:
    x, y = inputs.target_record()
    return craft_input(inputs.model, inputs.reference, x, y, steps=inputs.options["craft_steps"],
                       lr=inputs.options["craft_lr"], score=inputs.options["input_score"])


SCENARIO = Scenario(name="S3", label="crafted input", color="#ff7f0e", craft=craft,
                    needs_reference=True, per_q=False, removes_target=True, input_canary=True,
                    in_utility=True, shares_target=True,
                    options=("craft_steps", "craft_lr", "input_score"))
