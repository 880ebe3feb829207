"""The models the engine trains and the records they train on.

An :class:`MLP` ``sizes = (d, h1, ..., K)`` has Tanh between layers; ``(d, K)`` is a linear
head on fixed features.  The engine trains many runs of one model at once, so every
parameter tensor carries a leading run axis ``(R, *shape)``, in the order of
``torch.nn.Sequential(Linear, Tanh, ..., Linear)``: weight ``(out, in)`` then bias ``(out,)``
per layer (:func:`flat_params` lays them out as one ``(R, P)`` row per run).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np
import torch

from subaudit.validation import ParameterError, check_choice, check_count

if TYPE_CHECKING:
    from subaudit.engine.streams import RunStreams

__all__ = ["MLP", "Records", "flat_params", "init_params"]


@dataclass(frozen=True)
class MLP:
    """Layer sizes ``(d, h1, ..., K)`` with Tanh between layers; ``(d, K)`` is a linear head.

    Parameters are ordered as in ``torch.nn.Sequential(Linear, Tanh, ..., Linear)``:
    weight ``(out, in)`` then bias ``(out,)`` per layer.
    """

    sizes: tuple[int, ...]

    def __post_init__(self) -> None:
        sizes = tuple(self.sizes)
        if len(sizes) < 2:
            raise ParameterError("sizes", sizes, "at least two layer sizes (d, ..., K)")
        for i, s in enumerate(sizes):
            check_count(s, f"sizes[{i}]")
        object.__setattr__(self, "sizes", tuple(int(s) for s in sizes))

    @property
    def shapes(self) -> list[tuple[int, ...]]:
        out: list[tuple[int, ...]] = []
        for fan_in, fan_out in zip(self.sizes[:-1], self.sizes[1:]):
            out += [(fan_out, fan_in), (fan_out,)]
        return out

    @property
    def num_params(self) -> int:
        return sum(math.prod(s) for s in self.shapes)

    @property
    def offsets(self) -> np.ndarray:
        """Where each parameter tensor starts in the flat (P,) order, then P."""
        return np.cumsum([0] + [math.prod(s) for s in self.shapes])

    @property
    def num_classes(self) -> int:
        return self.sizes[-1]

    def torch_module(self) -> torch.nn.Sequential:
        """The same model as a plain ``torch.nn.Sequential`` (for Opacus and users)."""
        layers: list[torch.nn.Module] = []
        for i, (fan_in, fan_out) in enumerate(zip(self.sizes[:-1], self.sizes[1:])):
            if i:
                layers.append(torch.nn.Tanh())
            layers.append(torch.nn.Linear(fan_in, fan_out))
        return torch.nn.Sequential(*layers)


@dataclass(frozen=True)
class Records:
    """Features ``x`` (n, d) and integer labels ``y`` (n,)."""

    x: torch.Tensor
    y: torch.Tensor

    def check(self, model: MLP, name: str) -> None:
        x, y = self.x, self.y
        if x.ndim != 2 or x.shape[1] != model.sizes[0]:
            raise ParameterError(f"{name}.x", tuple(x.shape), f"shape (n, {model.sizes[0]})")
        if y.ndim != 1 or y.shape[0] != x.shape[0]:
            raise ParameterError(f"{name}.y", tuple(y.shape), f"shape ({x.shape[0]},)")
        if x.shape[0] < 1:
            raise ParameterError(f"{name}.x", tuple(x.shape), "at least one record")
        if y.dtype.is_floating_point or y.dtype == torch.bool:
            raise ParameterError(f"{name}.y", str(y.dtype), "an integer tensor")
        if int(y.min()) < 0 or int(y.max()) >= model.num_classes:
            bad = int(y.min()) if int(y.min()) < 0 else int(y.max())
            raise ParameterError(f"{name}.y", bad, f"labels in 0..{model.num_classes - 1}")
        if not torch.isfinite(x).all():
            raise ParameterError(f"{name}.x", "non-finite values", "finite features")



def flat_params(params: Sequence[torch.Tensor]) -> torch.Tensor:
    """Run-batched parameters as one (R, P) tensor, in parameter order."""
    return torch.cat([p.reshape(p.shape[0], -1) for p in params], dim=1)


def init_params(
    model: MLP, streams: Sequence[RunStreams], init: str | Sequence[torch.Tensor],
    dtype: torch.dtype = torch.float32,
) -> list[torch.Tensor]:
    """Initial parameters, each ``(R, *shape)``.

    ``"zero"``; ``"random"``: PyTorch's ``nn.Linear`` default, ``U(-1/sqrt(in),
    1/sqrt(in))`` for weight and bias, drawn per run from its ``init`` stream;
    or given tensors (one per parameter), the same for every run.
    """
    R = len(streams)
    shapes = model.shapes
    if isinstance(init, str):
        check_choice(init, "init", ("zero", "random"))
        params = [torch.zeros((R, *s), dtype=dtype) for s in shapes]
        if init == "random":
            fan_ins = [fan_in for fan_in in model.sizes[:-1] for _ in range(2)]
            for r, st in enumerate(streams):
                for p, s, fan_in in zip(params, shapes, fan_ins):
                    bound = 1.0 / math.sqrt(fan_in)
                    p[r] = torch.empty(s).uniform_(-bound, bound, generator=st.init).to(dtype)
        return params
    given = list(init)
    if len(given) != len(shapes):
        raise ParameterError("init", f"{len(given)} tensors", f"{len(shapes)} tensors {shapes}")
    for i, (t, s) in enumerate(zip(given, shapes)):
        if tuple(t.shape) != s:
            raise ParameterError(f"init[{i}]", tuple(t.shape), f"shape {s}")
    return [torch.as_tensor(t, dtype=dtype).expand(R, *s).clone() for t, s in zip(given, shapes)]

