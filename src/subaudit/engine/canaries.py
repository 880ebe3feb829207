"""The canary protocol (paper Algorithm 1) and the engine's canaries.

A :class:`Canary` says what it does to a run: the records it adds to the run's data and the
gradient it adds to the clipped sum, each for the run's bit, and its :class:`Score`.  The
batching and step code only asks for those, so a canary of another kind needs no change
there.  A run holds ``count`` canaries (m = 1 for the paper's audits), each its own record
with its own Poisson draw (records n .. n + m - 1) and its own bit.

* :class:`InputCanary`: ``z`` or ``z'`` is the run's record ``n``, sampled, clipped and
  noised like every other record; scored by :class:`LogitDifference`,
  ``f_{y_z}(x_z; theta_t) - f_{y_z'}(x_z'; theta_t)``, unless ``scored_by`` says otherwise.
* :class:`GradientCanary`: when record ``n`` is sampled, the fixed vector ``g_z`` (bit 1) or
  ``g_z'`` (bit 0), of norm at most C, is added to the summed clipped gradient.  Score:
  ``<u, theta_t - theta_0>`` with ``u`` the unit vector along ``g_z' - g_z``; for the
  paper's pair ``g_z = +C e_j``, ``g_z' = -C e_j`` this is ``theta_0[j] - theta_t[j]``: the
  paper's ``(g_z / C) . (theta_t - theta_0)`` with its sign turned, because descent moves
  ``theta[j]`` against ``g_z``.
* :class:`InputCanaries` and :class:`OneHotCanaries`: m canaries per run, each with its own
  record, Poisson draw and bit (one-run audits); the latter sparse, through
  :meth:`Canary.gradient_columns`, and scored by :class:`Coordinates`.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING

import torch

from subaudit.engine.model import MLP, Records
from subaudit.engine.scores import Coordinates, LogitDifference, Projection, Score
from subaudit.validation import ParameterError, check_count

if TYPE_CHECKING:
    from subaudit.engine.dpsgd import DPConfig

__all__ = ["Canary", "GradientCanary", "InputCanaries", "InputCanary", "OneHotCanaries"]


class Canary(ABC):
    """What a canary does to a run (paper Algorithm 1): the records it adds to the run's data
    and the gradient it adds to the clipped sum, each for the run's bit, and its score."""

    #: Canaries per run (m): records n .. n + m - 1, one bit each.
    count: int = 1

    def input_rows(self) -> tuple[torch.Tensor, torch.Tensor] | None:
        """``x`` (m, 2, d) and ``y`` (m, 2): records z (index 0, bit 1) and z' (index 1, bit 0)
        of each canary, sampled, clipped and noised like every other record; or None."""
        return None

    def gradients(self) -> torch.Tensor | None:
        """(m, 2, P): ``g_z`` and ``g_z'`` added to the clipped sum when the canary's record
        is sampled (norm at most C), or None."""
        return None

    def gradient_columns(self) -> list[tuple[torch.Tensor, torch.Tensor]] | None:
        """Per canary, the flat parameter columns (ascending) where ``g_z`` or ``g_z'`` is
        non-zero and their values (2, k): what training adds, without the (m, 2, P) tensor.
        The default reads :meth:`gradients`; a canary of many sparse gradients overrides it."""
        g = self.gradients()
        if g is None:
            return None
        out = []
        for gi in g:
            cols = torch.nonzero((gi != 0).any(0))[:, 0]
            out.append((cols, gi[:, cols]))
        return out

    @property
    @abstractmethod
    def score(self) -> Score:
        """How runs with this canary are scored."""

    @abstractmethod
    def check(self, model: MLP, dp: DPConfig) -> None:
        """ParameterError if the canary does not fit the model or the DP settings."""

    def to(self, device: torch.device, dtype: torch.dtype) -> Canary:
        """The canary with its records on ``device`` in ``dtype``."""
        return self

    def initialise(self, params: list[torch.Tensor]) -> None:
        """Set what the canary needs in every run's initial parameters (R, *shape), in place
        (a privacy-backdoor canary's trap); the default sets nothing."""
        return None


@dataclass(frozen=True)
class InputCanary(Canary):
    """Records ``z = (x[0], y[0])`` (bit 1) and ``z' = (x[1], y[1])`` (bit 0); scored by
    :class:`LogitDifference` unless ``scored_by`` says otherwise.  ``trap``: initial values
    (parameter tensor, flat indices, values) written into every run's initialisation, the
    crafted model of a privacy-backdoor canary (the same in both worlds)."""

    x: torch.Tensor
    y: torch.Tensor
    scored_by: Score | None = None
    trap: tuple[tuple[int, torch.Tensor, torch.Tensor], ...] = ()

    def input_rows(self) -> tuple[torch.Tensor, torch.Tensor]:
        return self.x[None], self.y[None]

    @property
    def score(self) -> Score:
        return self.scored_by or LogitDifference()

    def check(self, model: MLP, dp: DPConfig | None = None) -> None:
        if self.x.shape != (2, model.sizes[0]):
            raise ParameterError("canary.x", tuple(self.x.shape), f"shape (2, {model.sizes[0]})")
        Records(self.x, self.y).check(model, "canary")

    def to(self, device: torch.device, dtype: torch.dtype) -> InputCanary:
        return replace(self, x=self.x.to(device, dtype), y=self.y.to(device, torch.long))

    def initialise(self, params: list[torch.Tensor]) -> None:
        for layer, index, values in self.trap:
            flat = params[layer].view(params[layer].shape[0], -1)
            flat[:, index.to(flat.device)] = values.to(flat.device, flat.dtype)


@dataclass(frozen=True)
class GradientCanary(Canary):
    """Gradient vectors ``g[0] = g_z`` (bit 1) and ``g[1] = g_z'`` (bit 0), flat (2, P);
    scored by :class:`Projection` on ``g_z' - g_z`` unless ``scored_by`` says otherwise."""

    g: torch.Tensor
    scored_by: Score | None = None

    @classmethod
    def one_hot(cls, model: MLP, index: int, clip: float) -> GradientCanary:
        """The paper's pair (Algorithm 2): ``g_z = +C e_j``, ``g_z' = -C e_j``."""
        j = check_count(index, "canary index", minimum=0)
        if j >= model.num_params:
            raise ParameterError("canary index", index, f"0..{model.num_params - 1}")
        g = torch.zeros(2, model.num_params, dtype=torch.float64)
        g[0, j], g[1, j] = clip, -clip
        return cls(g)

    def gradients(self) -> torch.Tensor:
        return self.g[None]

    @property
    def score(self) -> Score:
        return self.scored_by or Projection(self.g[1] - self.g[0])

    def check(self, model: MLP, dp: DPConfig) -> None:
        if self.g.shape != (2, model.num_params):
            raise ParameterError("canary.g", tuple(self.g.shape), f"shape (2, {model.num_params})")
        norms = torch.linalg.vector_norm(self.g.double(), dim=1)
        if bool((norms > dp.clip * (1 + 1e-6)).any()):
            raise ParameterError("canary.g", f"norms {norms.tolist()}", f"norm <= clip = {dp.clip}")
        if bool(torch.equal(self.g[0], self.g[1])):
            raise ParameterError("canary.g", "g_z == g_z'", "two different vectors")


@dataclass(frozen=True)
class InputCanaries(Canary):
    """m input canaries per run: records ``(x[i, 0], y[i, 0])`` (bit 1) and
    ``(x[i, 1], y[i, 1])`` (bit 0) of canary i, each with its own Poisson draw and bit
    (a one-run audit); scored by :class:`LogitDifference` per canary."""

    x: torch.Tensor
    y: torch.Tensor

    @property
    def count(self) -> int:  # type: ignore[override]
        return int(self.x.shape[0])

    def input_rows(self) -> tuple[torch.Tensor, torch.Tensor]:
        return self.x, self.y

    @property
    def score(self) -> Score:
        return LogitDifference()

    def check(self, model: MLP, dp: DPConfig | None = None) -> None:
        if self.x.ndim != 3 or self.x.shape[1:] != (2, model.sizes[0]) or self.x.shape[0] < 1:
            raise ParameterError("canaries.x", tuple(self.x.shape), f"shape (m, 2, {model.sizes[0]})")
        if self.y.shape != self.x.shape[:2]:
            raise ParameterError("canaries.y", tuple(self.y.shape), f"shape ({self.x.shape[0]}, 2)")
        Records(self.x.reshape(-1, self.x.shape[2]), self.y.reshape(-1)).check(model, "canaries")

    def to(self, device: torch.device, dtype: torch.dtype) -> InputCanaries:
        return replace(self, x=self.x.to(device, dtype), y=self.y.to(device, torch.long))


@dataclass(frozen=True)
class OneHotCanaries(Canary):
    """m gradient canaries per run, canary i on its own coordinate ``index[i]``:
    ``g_z = +C e_j`` (bit 1), ``g_z' = -C e_j`` (bit 0), as the paper's S2 pair; scored by
    :class:`Coordinates` (``theta_0[j] - theta_t[j]``, larger under D)."""

    index: torch.Tensor
    clip: float
    num_params: int

    @property
    def count(self) -> int:  # type: ignore[override]
        return int(self.index.shape[0])

    def gradients(self) -> torch.Tensor:
        g = torch.zeros(self.count, 2, self.num_params, dtype=torch.float64)
        rows = torch.arange(self.count)
        g[rows, 0, self.index], g[rows, 1, self.index] = self.clip, -self.clip
        return g

    def gradient_columns(self) -> list[tuple[torch.Tensor, torch.Tensor]]:
        values = torch.tensor([[self.clip], [-self.clip]], dtype=torch.float64)
        return [(self.index[i:i + 1].long(), values) for i in range(self.count)]

    @property
    def score(self) -> Score:
        return Coordinates(self.index)

    def check(self, model: MLP, dp: DPConfig) -> None:
        idx = self.index
        if idx.ndim != 1 or idx.shape[0] < 1 or idx.dtype.is_floating_point:
            raise ParameterError("canaries.index", tuple(idx.shape), "a 1-D integer tensor of coordinates")
        if int(idx.min()) < 0 or int(idx.max()) >= model.num_params or self.num_params != model.num_params:
            raise ParameterError("canaries.index", "out of range", f"coordinates in 0..{model.num_params - 1}")
        if torch.unique(idx).shape[0] != idx.shape[0]:
            raise ParameterError("canaries.index", "repeated coordinates", "distinct coordinates")
        if not 0 < self.clip <= dp.clip * (1 + 1e-6):
            raise ParameterError("canaries.clip", self.clip, f"in (0, clip = {dp.clip}]")
