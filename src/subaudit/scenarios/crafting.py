"""What crafting canaries shares: the crafted pair, per-example gradients, the reference model.

All crafting works in the trained model's input space (for a fine-tuned head, the feature
space) and compares per-example gradients of the cross-entropy with respect to all
parameters (:func:`per_example_grads`) on the reference model ``theta_T``
(:func:`reference_model`: non-DP training, full batch or, as the paper's code, minibatch).
The target ``z`` is the training record the reference model is least confident about,
averaged over its training.  Each scenario module (``s2`` .. ``s7``) holds
its own algorithm and imports this module when it crafts.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import torch

from subaudit.engine import INPUT_SCORES, MLP, DPConfig, GradientCanary, InputCanary, Records, Score, train
from subaudit.validation import check_choice, check_count

__all__ = ["Crafted", "cosine", "input_score", "module_of", "pair_info", "per_example_grads", "reference_model"]


@dataclass(frozen=True)
class Crafted:
    """A canary pair and what to inspect about it (cosine similarity, norms)."""

    scenario: str
    canary: GradientCanary | InputCanary
    info: dict[str, Any]


def per_example_grads(
    model: MLP, params: Sequence[torch.Tensor], x: torch.Tensor, y: torch.Tensor
) -> torch.Tensor:
    """Flat per-example gradients (N, P) of the cross-entropy at ``params``, in the model's
    parameter order (each layer's weight, then its bias).

    Written out with the ATen operations that ``torch.func.vmap(torch.func.grad(loss))`` of the
    model's ``torch.nn.Sequential`` dispatches, in the same order, so the bits are the same
    (``tests/scenarios/test_crafting.py`` checks it against ``torch.func``): a crafting job then
    never imports ``torch._dynamo``, which ``torch.func.grad`` loads at its first call and which
    would be most of a small job's start-up."""
    if len(params) != 2 * (len(model.sizes) - 1):
        raise ValueError(f"{len(params)} parameter tensors for the {len(model.sizes) - 1} layers of {model.sizes}")
    dtype = params[0].dtype
    weights, biases = params[0::2], params[1::2]
    acts = [x.to(dtype)]                                  # each layer's input, then the logits
    for i, (w, b) in enumerate(zip(weights, biases)):
        z = b + torch.mm(acts[-1], w.t())
        acts.append(torch.tanh(z) if i < len(weights) - 1 else z)
    logp = torch.log_softmax(acts[-1], -1)
    # d(-log p_y)/d logp, then back through the log-softmax
    g = torch._log_softmax_backward_data(
        torch.zeros_like(logp).scatter_(-1, y.long()[:, None], -1.0), logp, -1, dtype)
    grads: list[torch.Tensor] = []
    for i in reversed(range(len(weights))):
        # vmap's sum over a record's one row turns a -0.0 bias gradient into +0.0: kept
        grads[:0] = [torch.bmm(g[:, :, None], acts[i][:, None, :]).reshape(x.shape[0], -1),
                     g[:, None, :].sum(1)]
        if i:
            g = torch.ops.aten.tanh_backward(torch.mm(g, weights[i]), acts[i])
    return torch.cat(grads, dim=1)


def cosine(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    """Cosine similarity of the rows of ``a`` with ``b`` (one vector, or a row each)."""
    return torch.nn.functional.cosine_similarity(a, b.expand_as(a) if b.ndim == 1 else b, dim=-1)


def module_of(model: MLP, params: Sequence[torch.Tensor]) -> torch.nn.Sequential:
    """One run's parameters as a ``torch.nn.Sequential`` of the model."""
    module = model.torch_module().to(params[0].dtype)
    with torch.no_grad():
        for p, v in zip(module.parameters(), params):
            p.copy_(v)
    return module


def reference_model(
    model: MLP, data: Records, *, steps: int, lr: float, optimizer: str,
    init: str | Sequence[torch.Tensor] = "zero", seed: int = 0, every: int = 1,
    sampling_rate: float = 1.0,
) -> tuple[list[torch.Tensor], np.ndarray]:
    """Non-DP training on ``data``, full batch (or Poisson-sampled at ``sampling_rate``, as the
    paper's code's minibatch reference): final parameters and mean confidence.

    Confidence of a record is the softmax probability of its label, averaged
    over the checkpoints every ``every`` steps (and the final one).
    """
    dp = DPConfig(steps=steps, sampling_rate=sampling_rate, noise_multiplier=0.0, clip=1e30,
                  lr=lr, optimizer=optimizer)
    check_count(every, "every")
    x, y = data.x, data.y.long()
    total = torch.zeros(x.shape[0], dtype=torch.float64)
    count = 0
    final: list[torch.Tensor] = []

    def observe(t: int, params: list[torch.Tensor], _grads: list[torch.Tensor]) -> None:
        nonlocal count, final
        if t % every == 0 or t == steps:
            with torch.no_grad():
                module = module_of(model, [p[0] for p in params])
                prob = torch.softmax(module(x.to(params[0].dtype)), dim=-1)
                total.add_(prob.gather(1, y[:, None])[:, 0].double().cpu())
            count += 1
        if t == steps:
            final = [p[0].detach().clone() for p in params]

    train(model, data, None, dp, seed=seed, runs=[0], bits=[0], score_every=steps, init=init,
          observe=observe, progress=False)
    return final, (total / count).numpy()


def pair_info(model: MLP, params: Sequence[torch.Tensor], x2: torch.Tensor, y2: torch.Tensor) -> dict[str, float]:
    """The gradient cosine of a pair's two records and their gradient norms, for the crafting info."""
    g = per_example_grads(model, params, x2, y2)
    return {"cosine": float(cosine(g[0], g[1])), "norm_z": float(g[0].norm()),
            "norm_z_prime": float(g[1].norm())}


def input_score(name: str) -> Score:
    """The S3/S5 score called ``name`` (ParameterError naming the allowed ones)."""
    return INPUT_SCORES[check_choice(name, "input_score", INPUT_SCORES)]()
