"""S7, privacy-backdoor canary (after Feng and Tramer 2024): a crafted start under which
the canary's clipped gradient, whenever it is sampled, lands on one known direction with
norm close to C, opposite for z and z', while the other records contribute almost nothing
there; runs are scored by the parameter change along that direction.

A linear head gets the feature-space pair (M e_k, y) / (-M e_k, y) on its least-used
feature k; a one-hidden-layer MLP on one-hot inputs gets two trap units tuned to the
target's input (``subaudit.scenarios.crafting.backdoor_trap``) and z' = (x, y') with S4's label.
S2 is the idealised form of this canary (a gradient injected on the least-updated
coordinate); S7's direction is silent by construction, so it audits at least as high.  The
crafting info reports how close the construction comes (alignment per step, accuracy
cost)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from subaudit.scenarios.scenario import CraftInputs, Scenario
from subaudit.validation import ParameterError

if TYPE_CHECKING:
    from collections.abc import Mapping, Sequence

    import torch

    from subaudit.engine import MLP, DPConfig, InputCanary, Records
    from subaudit.scenarios.crafting import Crafted

__all__ = ["BACKDOOR_SCALE", "SCENARIO", "TRAP_HEAD", "TRAP_MARGIN", "backdoor_linear", "backdoor_trap",
           "craft_backdoor", "experiment_check"]


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
    import torch

    from subaudit.engine import InputCanary, Projection

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
    import torch

    from subaudit.engine import InputCanary, Projection

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
    import torch

    from subaudit.scenarios.crafting import cosine, per_example_grads

    u = canary.score.direction.to(params[0].dtype)
    g = per_example_grads(model, params, canary.x.to(params[0].dtype), canary.y)
    cos = cosine(-g, torch.stack([u, -u]))       # clipping rescales, the cosine stays
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
    from dataclasses import replace

    import numpy as np
    import torch

    from subaudit.engine import Records, RunStreams, flat_params, init_params, train
    from subaudit.scenarios.crafting import Crafted
    from subaudit.scenarios.s4 import craft_mislabeled

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
                 "trap_sampling_rate": dp.canary_rate,
                 "trap_sampled_share": float(fired.mean()),
                 "trap_sampled_per_step": fired.mean(1).round(6).tolist(),
                 "accuracy_with": acc_with, "accuracy_without": acc_without,
                 "accuracy_cost": acc_without - acc_with})
    return Crafted("S7", canary, info)


def craft(inputs: CraftInputs) -> Crafted:
    assert inputs.dp is not None and inputs.target is not None, "S7 is crafted per q from the target"
    return craft_backdoor(inputs.model, inputs.features, inputs.target, inputs.reference, inputs.dp,
                          init=inputs.init, seed=inputs.seed)


def experiment_check(key: str, experiment: Mapping[str, Any],
                     natural: Mapping[str, Any]) -> tuple[str, Any, str] | None:
    """The trap units sit in the first of at most one hidden layer (:attr:`Scenario.experiment_check`)."""
    if len(experiment["hidden"]) > 1:
        return (f"{key}.hidden", experiment["hidden"],
                "[] or one hidden layer while it audits S7 (its trap units sit in the first of one hidden layer)")
    return None


SCENARIO = Scenario(name="S7", label="privacy backdoor", color="#17becf", craft=craft,
                    needs_reference=True, per_q=True, removes_target=True, input_canary=True,
                    span=False, experiment_check=experiment_check)
