"""Target selection and canary crafting for natural-data audits (paper Section 3.2).

All crafting works in the trained model's input space (for a fine-tuned head,
the feature space) and compares per-example gradients of the cross-entropy
with respect to all parameters, computed with ``torch.func`` (``vmap`` of
``grad``) on the reference model ``theta_T``:

* S2, crafted gradient (Algorithm 2): train once without noise, with the
  audit's own sampling, clipping, learning rate and optimiser, and take the
  parameter ``j*`` whose accumulated absolute update is smallest; the pair is
  ``g_z = +C e_j*`` (D) and ``g_z' = -C e_j*`` (D').
* S3, crafted input (Algorithm 3): ``x'`` starts at zero and descends
  ``cos(g_z, g_z') + (||g_z'|| - ||g_z||)^2``, keeping the target's label.  The
  paper's line 5 writes the second term as the MSE between the two gradients;
  with the cosine pushing ``g_z'`` to ``-c g_z`` that MSE is smallest at
  ``c = 0`` (a vanishing gradient), against the text's stated aim that
  ``g_z'`` be "similar in scale to g_z".  We implement the stated aim: the
  squared difference of the norms.
* S4, crafted mislabeled (Algorithm 4): the label ``y' != y`` minimising the
  gradient cosine similarity at ``x``.
* S5, adversarial natural (Algorithm 5): the auxiliary record minimising it.

The target ``z`` is the training record the reference model (non-DP, full
batch) is least confident about, averaged over its training.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import Any

import numpy as np
import torch
from torch.func import functional_call, grad, vmap

from subaudit.engine import (
    MLP,
    DPConfig,
    GradientCanary,
    INPUT_SCORES,
    InputCanary,
    Projection,
    Records,
    RunStreams,
    Score,
    flat_params,
    init_params,
    train,
)
from subaudit.settings import SWITCHES
from subaudit.validation import ParameterError, check_choice, check_count, check_positive

__all__ = [
    "S2_COORDINATES",
    "Crafted",
    "craft_gradient",
    "craft_input",
    "craft_mislabeled",
    "craft_backdoor",
    "craft_natural",
    "gradient_canary",
    "least_updated_coordinate",
    "least_updated_coordinates",
    "per_example_grads",
    "reference_model",
]

@dataclass(frozen=True)
class Crafted:
    """A canary pair and what to inspect about it (cosine similarity, norms)."""

    scenario: str
    canary: GradientCanary | InputCanary
    info: dict[str, Any]


# --------------------------------------------------------------------------- gradients


def _names(model: MLP) -> list[str]:
    return [f"{2 * i}.{kind}" for i in range(len(model.sizes) - 1) for kind in ("weight", "bias")]


def per_example_grads(
    model: MLP, params: Sequence[torch.Tensor], x: torch.Tensor, y: torch.Tensor
) -> torch.Tensor:
    """Flat per-example gradients (N, P) of the cross-entropy at ``params``."""
    module = model.torch_module().to(params[0].dtype)
    names = _names(model)

    def loss(p: dict[str, torch.Tensor], xi: torch.Tensor, yi: torch.Tensor) -> torch.Tensor:
        out = functional_call(module, p, (xi[None],))
        return torch.nn.functional.cross_entropy(out, yi[None])

    p = {k: v.detach() for k, v in zip(names, params)}
    g = vmap(grad(loss), in_dims=(None, 0, 0))(p, x.to(params[0].dtype), y.long())
    return torch.cat([g[k].reshape(x.shape[0], -1) for k in names], dim=1)


def _cosine(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    return torch.nn.functional.cosine_similarity(a, b.expand_as(a) if b.ndim == 1 else b, dim=-1)


# --------------------------------------------------------------------------- reference model


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
                module = _module(model, [p[0] for p in params])
                prob = torch.softmax(module(x.to(params[0].dtype)), dim=-1)
                total.add_(prob.gather(1, y[:, None])[:, 0].double().cpu())
            count += 1
        if t == steps:
            final = [p[0].detach().clone() for p in params]

    train(model, data, None, dp, seed=seed, runs=[0], bits=[0], score_every=steps, init=init,
          observe=observe, progress=False)
    return final, (total / count).numpy()


def _module(model: MLP, params: Sequence[torch.Tensor]) -> torch.nn.Sequential:
    module = model.torch_module().to(params[0].dtype)
    with torch.no_grad():
        for p, v in zip(module.parameters(), params):
            p.copy_(v)
    return module


# --------------------------------------------------------------------------- S2


#: How S2 picks its coordinate in noiseless training (params.yaml natural.s2_coordinate):
#: Algorithm 2's smallest accumulated |update|, or the paper's code's smallest root of the
#: summed squared (clipped, averaged) gradients.
S2_COORDINATES = SWITCHES["s2_coordinate"][1:]


def least_updated_coordinate(
    model: MLP, data: Records, dp: DPConfig, *, init: str | Sequence[torch.Tensor] = "zero",
    seed: int = 0, statistic: str = "least-update",
) -> tuple[int, float]:
    """Algorithm 2: the least-updated parameter (flat index) in noiseless training.

    Returns the index and its statistic (:data:`S2_COORDINATES`).
    """
    index, moved = least_updated_coordinates(model, data, dp, 1, init=init, seed=seed,
                                             statistic=statistic)
    return int(index[0]), float(moved[0])


def least_updated_coordinates(
    model: MLP, data: Records, dp: DPConfig, count: int, *,
    init: str | Sequence[torch.Tensor] = "zero", seed: int = 0, statistic: str = "least-update",
) -> tuple[np.ndarray, np.ndarray]:
    """Algorithm 2 for ``count`` canaries: the ``count`` parameters (flat indices, least
    first, ties by index) with the smallest ``statistic`` in noiseless training, and its
    values: the accumulated absolute update (``least-update``) or the root of the summed
    squared gradients (``gradient-rms``, the paper's code)."""
    count = check_count(count, "canaries")
    check_choice(statistic, "s2_coordinate", S2_COORDINATES)
    if count > model.num_params:
        raise ParameterError("canaries", count, f"at most the {model.num_params} parameters")
    noiseless = replace(dp, noise_multiplier=0.0)
    start = init_params(model, [RunStreams(seed, 0)], init)
    prev = flat_params(start)[0]
    total = torch.zeros_like(prev, dtype=torch.float64)

    def observe(_t: int, params: list[torch.Tensor], grads: list[torch.Tensor]) -> None:
        nonlocal prev
        if statistic == "gradient-rms":
            total.add_(flat_params(grads)[0].cpu().double() ** 2)
            return
        now = flat_params(params)[0].cpu()
        total.add_((now - prev).abs().double())
        prev = now.clone()

    train(model, data, None, noiseless, seed=seed, runs=[0], bits=[0], score_every=dp.steps,
          init=init, observe=observe, progress=False)
    value = total.sqrt() if statistic == "gradient-rms" else total
    order = torch.argsort(value, stable=True)[:count]
    return order.numpy(), value[order].numpy()


def gradient_canary(
    model: MLP, data: Records, dp: DPConfig, *, init: str | Sequence[torch.Tensor] = "zero",
    seed: int = 0,
) -> GradientCanary:
    """Algorithm 2's canary pair on the least-updated coordinate."""
    return craft_gradient(model, data, dp, init=init, seed=seed).canary  # type: ignore[return-value]


def craft_gradient(
    model: MLP, data: Records, dp: DPConfig, *, init: str | Sequence[torch.Tensor] = "zero",
    seed: int = 0, coordinate: str = "least-update",
) -> Crafted:
    """S2: ``g_z = +C e_j*``, ``g_z' = -C e_j*`` (Algorithm 2), ``j*`` chosen by
    ``coordinate`` (:data:`S2_COORDINATES`)."""
    j, moved = least_updated_coordinate(model, data, dp, init=init, seed=seed,
                                        statistic=coordinate)
    canary = GradientCanary.one_hot(model, j, dp.clip)
    return Crafted("S2", canary, {"coordinate": j, "statistic": coordinate, "value": moved,
                                  "cosine": -1.0, "norm_z": dp.clip, "norm_z_prime": dp.clip})


# --------------------------------------------------------------------------- S3-S5


def _pair_info(model: MLP, params, x2: torch.Tensor, y2: torch.Tensor) -> dict[str, float]:
    g = per_example_grads(model, params, x2, y2)
    return {"cosine": float(_cosine(g[0], g[1])), "norm_z": float(g[0].norm()),
            "norm_z_prime": float(g[1].norm())}


def craft_input(
    model: MLP, params: Sequence[torch.Tensor], x: torch.Tensor, y: int, *,
    steps: int = 300, lr: float = 0.1, score: str = "logit-difference",
) -> Crafted:
    """S3 (Algorithm 3): ``x'`` from zero by gradient descent; label kept; runs scored by
    ``score`` (:data:`subaudit.engine.INPUT_SCORES`)."""
    scored_by = _input_score(score)
    check_count(steps, "craft_steps")
    check_positive(lr, "craft_lr")
    dtype = params[0].dtype
    x = x.to(dtype)
    target = per_example_grads(model, params, x[None], torch.tensor([y]))[0]
    module = _module(model, params)
    for p in module.parameters():
        p.requires_grad_(True)
    xp = torch.zeros_like(x, requires_grad=True)
    opt = torch.optim.SGD([xp], lr=lr)
    yy = torch.tensor([y])
    history = []
    for _ in range(steps):
        opt.zero_grad()
        loss = torch.nn.functional.cross_entropy(module(xp[None]), yy)
        g = torch.cat([t.reshape(-1) for t in
                       torch.autograd.grad(loss, list(module.parameters()), create_graph=True)])
        objective = _cosine(g, target) + (g.norm() - target.norm()) ** 2
        objective.backward()
        opt.step()
        history.append(float(objective.detach()))
    xp = xp.detach()
    canary = InputCanary(torch.stack([x, xp]), torch.tensor([y, y]), scored_by=scored_by)
    info = {**_pair_info(model, params, canary.x, canary.y), "label": int(y), "score": score,
            "objective_first": history[0], "objective_last": history[-1]}
    return Crafted("S3", canary, info)


def craft_mislabeled(
    model: MLP, params: Sequence[torch.Tensor], x: torch.Tensor, y: int
) -> Crafted:
    """S4 (Algorithm 4): the label ``y' != y`` with the least gradient cosine at ``x``."""
    k = model.num_classes
    dtype = params[0].dtype
    labels = torch.arange(k)
    g = per_example_grads(model, params, x.to(dtype)[None].expand(k, -1), labels)
    cos = _cosine(g, g[y])
    cos[y] = float("inf")
    y2 = int(torch.argmin(cos))
    canary = InputCanary(torch.stack([x, x]).to(dtype), torch.tensor([y, y2]))
    return Crafted("S4", canary, {**_pair_info(model, params, canary.x, canary.y),
                                  "label": int(y), "label_prime": y2})


def craft_natural(
    model: MLP, params: Sequence[torch.Tensor], x: torch.Tensor, y: int, aux: Records, *,
    pool: int | None = None, score: str = "logit-difference",
) -> Crafted:
    """S5 (Algorithm 5): the auxiliary record with the least gradient cosine, among the first
    ``pool`` auxiliary records (all when None); runs scored by ``score``."""
    scored_by = _input_score(score)
    n = aux.x.shape[0]
    if pool is not None and not 1 <= pool <= n:
        raise ParameterError("s5_pool", pool, f"1..{n} (the auxiliary records)")
    aux = Records(aux.x[:pool], aux.y[:pool]) if pool is not None else aux
    dtype = params[0].dtype
    target = per_example_grads(model, params, x.to(dtype)[None], torch.tensor([y]))[0]
    cos = torch.cat([_cosine(per_example_grads(model, params, aux.x[i:i + 1024],
                                               aux.y[i:i + 1024]), target)
                     for i in range(0, aux.x.shape[0], 1024)])
    i = int(torch.argmin(cos))
    canary = InputCanary(torch.stack([x.to(dtype), aux.x[i].to(dtype)]),
                         torch.tensor([y, int(aux.y[i])]), scored_by=scored_by)
    return Crafted("S5", canary, {**_pair_info(model, params, canary.x, canary.y),
                                  "aux_index": i, "pool": int(aux.x.shape[0]), "label": int(y),
                                  "label_prime": int(aux.y[i]), "score": score})


def _input_score(name: str) -> Score:
    """The S3/S5 score called ``name`` (ParameterError naming the allowed ones)."""
    return INPUT_SCORES[check_choice(name, "input_score", INPUT_SCORES)]()


# --------------------------------------------------------------------------- S7


#: Input norm M of the linear-head backdoor pair (M e_k, -M e_k): the clipped gradient
#: lies along column k up to 1 / M.
BACKDOOR_SCALE = 100.0
#: Tabular trap: pre-activation margin s per mismatched attribute (others sit at <= -2 s,
#: tanh' <= 2e-8) and head weight a of the two trap units (their input gradient dominates).
TRAP_MARGIN = 5.0
TRAP_HEAD = 5.0


def backdoor_linear(model: MLP, data: Records, y: int, scale: float = BACKDOOR_SCALE
                    ) -> tuple[InputCanary, dict[str, Any]]:
    """S7 for a linear head (d -> K) from a zero start: ``z = (M e_k, y)``, ``z' = (-M e_k, y)``
    on the feature k least used by ``data`` (smallest total |x_k|).  Column k of the head
    then moves only by the canary and the noise; the clipped gradients of z and z' point
    along ``-/+ (p_0 - e_y)`` in that column, p_0 = softmax(0) uniform, and runs are
    scored by the parameter change along it."""
    if len(model.sizes) != 2:
        raise ParameterError("model", model.sizes, "a linear head (d, K) for the feature-space backdoor")
    d, k_classes = model.sizes
    mass = data.x.double().abs().sum(0)
    k = int(torch.argmin(mass))
    x = torch.zeros(2, d, dtype=data.x.dtype)
    x[0, k], x[1, k] = scale, -scale
    direction = torch.zeros(model.num_params, dtype=torch.float64)
    column = torch.full((k_classes,), -1.0 / k_classes, dtype=torch.float64)
    column[y] += 1.0
    direction[torch.arange(k_classes) * d + k] = column          # weight (K, d), row-major
    canary = InputCanary(x, torch.tensor([y, y]), scored_by=Projection(direction))
    return canary, {"feature": k, "feature_mass": float(mass[k] / data.x.shape[0]), "scale": scale}


def backdoor_trap(model: MLP, data: Records, x: torch.Tensor, y: int, y_prime: int,
                  margin: float = TRAP_MARGIN, head: float = TRAP_HEAD
                  ) -> tuple[InputCanary, dict[str, Any]]:
    """S7 for a one-hidden-layer Tanh MLP on binary (one-hot) inputs: ``z = (x, y)``,
    ``z' = (x, y')`` and two trap units j1, j2 (the last two hidden units) initialised to
    ``w = s (2 x - 1)``, ``b = -s |x|``: pre-activation 0 at x (tanh' = 1), at most -2 s at
    any input differing from x in an attribute (saturated at -1).  Their head columns are
    ``+/- a (e_y - e_y')``, so for saturated records they cancel (no utility cost) and at x
    the activation is 0 (no head gradient); the gradient of z on (w, b) of j1 is
    ``a (p_y - p_y' - 1) (x, 1)`` and of z' ``a (p_y - p_y' + 1) (x, 1)``, opposite in sign,
    mirrored on j2.  Runs are scored by the change of (w, b) along ``(x, 1)`` on j1 and
    ``-(x, 1)`` on j2."""
    if len(model.sizes) != 3:
        raise ParameterError("model", model.sizes, "one hidden layer (d, h, K) for the trap units")
    d, h, k_classes = model.sizes
    if not (torch.isin(data.x, torch.tensor([0.0, 1.0], dtype=data.x.dtype)).all()
            and torch.isin(x, torch.tensor([0.0, 1.0], dtype=x.dtype)).all()):
        raise ParameterError("features", "non-binary values", "0/1 (one-hot) inputs for the trap units")
    if y == y_prime or h < 3:
        raise ParameterError("trap", (y, y_prime, h), "two labels and at least 3 hidden units")
    xd = x.double()
    w = margin * (2.0 * xd - 1.0)
    b = -margin * float(xd.sum())
    j1, j2 = h - 2, h - 1
    cols = torch.arange(d)
    classes = torch.arange(k_classes)
    pull = torch.zeros(k_classes, dtype=torch.float64)
    pull[y], pull[y_prime] = head, -head
    trap = ((0, torch.cat([j1 * d + cols, j2 * d + cols]), torch.cat([w, w])),
            (1, torch.tensor([j1, j2]), torch.tensor([b, b], dtype=torch.float64)),
            (2, torch.cat([classes * h + j1, classes * h + j2]), torch.cat([pull, -pull])))
    direction = torch.zeros(model.num_params, dtype=torch.float64)
    direction[j1 * d + cols], direction[j2 * d + cols] = xd, -xd
    direction[h * d + j1], direction[h * d + j2] = 1.0, -1.0
    canary = InputCanary(torch.stack([x, x]).to(data.x.dtype), torch.tensor([y, y_prime]),
                         scored_by=Projection(direction), trap=trap)
    pre = data.x.double() @ w + b
    return canary, {"trap_units": [j1, j2], "margin": margin, "head": head,
                    "duplicates": int((pre > -margin).sum()),
                    "max_leak": float((1.0 - torch.tanh(pre[pre <= -margin]) ** 2).max())
                    if bool((pre <= -margin).any()) else 0.0}


def _alignment(model: MLP, params: Sequence[torch.Tensor], canary: InputCanary) -> tuple[float, float]:
    """Cosine of each record's update direction -clip(g) with its score direction (+u for z,
    -u for z'), one run's parameters."""
    u = canary.score.direction.to(params[0].dtype)
    g = per_example_grads(model, params, canary.x.to(params[0].dtype), canary.y)
    cos = _cosine(-g, torch.stack([u, -u]))       # clipping rescales, the cosine stays
    return float(cos[0]), float(cos[1])


def craft_backdoor(model: MLP, features: dict[str, Any], target: int, reference: Sequence[torch.Tensor],
                   dp: DPConfig, *, init: str, seed: int, probe_runs: int = 4) -> Crafted:
    """S7, the privacy-backdoor canary: :func:`backdoor_linear` for a linear head,
    :func:`backdoor_trap` (with S4's label y') for a one-hidden-layer MLP.

    The info reports what the construction achieves in noiseless training with the audit's
    q, C, lr, T and optimiser over ``probe_runs`` runs: the alignment of z's and z''s update
    with the score direction at every step (z in runs with bit 1, z' with bit 0), the rate at
    which the trap receives the canary's gradient (the canary's Poisson rate, and the share
    of the probe runs' steps where the trap's direction moved: the realised sampling, per step
    and overall), and the test accuracy with the canary (and its trap) against the same runs
    without it."""
    train_records = features["train"]
    x, y = train_records.x[target], int(train_records.y[target])
    keep = torch.ones(train_records.x.shape[0], dtype=torch.bool)
    keep[target] = False
    data = Records(train_records.x[keep], train_records.y[keep])
    if len(model.sizes) == 2:
        canary, info = backdoor_linear(model, data, y)
    else:
        y_prime = craft_mislabeled(model, reference, x, y).info["label_prime"]
        canary, info = backdoor_trap(model, data, x, y, y_prime)
    dp0 = replace(dp, noise_multiplier=0.0)
    runs = np.arange(probe_runs)
    bits = (1 - runs % 2).astype(np.int8)
    per_step: list[list[float]] = []
    along: list[torch.Tensor] = []           # each step's gradient along the score direction
    u = canary.score.direction.double()

    def observe(_t: int, params: list[torch.Tensor], grads: list[torch.Tensor]) -> None:
        per_step.append([_alignment(model, [p[r] for p in params], canary)[1 - int(bits[r])]
                         for r in range(len(runs))])
        along.append((flat_params(grads).double() @ u).abs())

    start = init_params(model, RunStreams.for_runs(seed, runs), init, torch.float64)
    canary.initialise(start)
    at_start = [_alignment(model, [p[r] for p in start], canary)[1 - int(bits[r])]
                for r in range(len(runs))]
    test = features.get("test")
    test = test if test is not None and test.x.shape[0] else None     # no test records: no accuracy
    at = [dp.steps] if test is not None else []
    with_canary = train(model, data, canary, dp0, seed=seed, runs=runs, bits=bits,
                        score_every=dp.steps, init=init, test=test, accuracy_steps=at,
                        observe=observe, progress=False)
    steps = np.asarray([at_start, *per_step])                           # (T + 1, runs)
    # Noiseless, the trap's direction moves only when the canary is in the batch (the other
    # records leave it at rounding level): the steps at which the trap was realised.
    along_t = torch.stack(along)                                        # (T, runs)
    fired = (along_t > 1e-3 * along_t.max()).double().numpy() if bool(along_t.max() > 0) \
        else np.zeros(tuple(along_t.shape))
    acc_with = acc_without = float("nan")
    if test is not None:
        without = train(model, data, None, dp0, seed=seed, runs=runs, bits=bits, score_every=dp.steps,
                        init=init, test=test, accuracy_steps=at, progress=False)
        acc_with, acc_without = float(with_canary.accuracy.mean()), float(without.accuracy.mean())
    info.update({"label": y, "label_prime": int(canary.y[1]),
                 "alignment_start": float(steps[0].mean()),
                 "alignment_mean": float(steps.mean()), "alignment_min": float(steps.min()),
                 "alignment_per_step": steps.mean(1).round(6).tolist(),
                 "trap_sampling_rate": dp.canary_sampling_rate or dp.sampling_rate,
                 "trap_sampled_share": float(fired.mean()),
                 "trap_sampled_per_step": fired.mean(1).round(6).tolist(),
                 "accuracy_with": acc_with, "accuracy_without": acc_without,
                 "accuracy_cost": acc_without - acc_with})
    return Crafted("S7", canary, info)
