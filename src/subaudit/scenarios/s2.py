"""S2, crafted gradient (Algorithm 2): +C e_j* for z, -C e_j* for z', j* the least-updated
coordinate of noiseless training with the audit's own sampling, clipping, lr and T (or, by
natural.s2_coordinate, the paper's code's smallest root of the summed squared gradients)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from subaudit.scenarios.scenario import CraftInputs, Scenario
from subaudit.validation import ParameterError, check_choice, check_count

if TYPE_CHECKING:
    from collections.abc import Sequence

    import numpy as np
    import torch

    from subaudit.engine import MLP, DPConfig, GradientCanary, Records
    from subaudit.scenarios.crafting import Crafted

__all__ = ["S2_COORDINATES", "SCENARIO", "craft_gradient", "gradient_canary",
           "least_updated_coordinate", "least_updated_coordinates"]


#: How S2 picks its coordinate in noiseless training (params.yaml natural.s2_coordinate):
#: Algorithm 2's smallest accumulated |update|, or the paper's code's smallest root of the
#: summed squared (clipped, averaged) gradients.
S2_COORDINATES: tuple[str, ...] = ("least-update", "gradient-rms")


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
    from dataclasses import replace

    import torch

    from subaudit.engine import RunStreams, flat_params, init_params, train

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
    from subaudit.engine import GradientCanary
    from subaudit.scenarios.crafting import Crafted

    j, moved = least_updated_coordinate(model, data, dp, init=init, seed=seed,
                                        statistic=coordinate)
    canary = GradientCanary.one_hot(model, j, dp.clip)
    return Crafted("S2", canary, {"coordinate": j, "statistic": coordinate, "value": moved,
                                  "cosine": -1.0, "norm_z": dp.clip, "norm_z_prime": dp.clip})


def craft(inputs: CraftInputs) -> Crafted:
    assert inputs.dp is not None, "S2 is crafted per (q, C, lr, T)"
    return craft_gradient(inputs.model, inputs.features["train"], inputs.dp, init=inputs.init,
                          seed=inputs.seed, coordinate=inputs.options["s2_coordinate"])


SCENARIO = Scenario(name="S2", label="crafted gradient", color="#d62728", craft=craft,
                    needs_reference=False, per_q=True, removes_target=False, input_canary=False,
                    in_utility=True, options=("s2_coordinate",))
