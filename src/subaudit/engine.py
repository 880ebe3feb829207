"""Batched DP training: R audit runs of one small model as one computation.

An audit trains the same model many times, half the runs on ``D`` (bit 1, the
target record ``z``) and half on ``D'`` (bit 0, the substitute ``z'``).  This
module trains a chunk of runs at once.  The models are MLPs ``sizes = (d, h1,
..., K)`` with Tanh between layers; a linear head on fixed features is
``(d, K)``.  Every parameter tensor carries a leading run axis.

DP semantics are Opacus' (``GradSampleModule`` + ``DPOptimizer``), checked
against it in ``tests/test_engine.py``:

* Poisson sampling: each of the ``n + 1`` records (the canary is record ``n``)
  joins run r's batch at a step with probability q, drawn as
  ``torch.rand(n + 1) < q`` (Opacus' ``UniformWithReplacementSampler``);
* per-example gradients of the cross-entropy are clipped jointly over all
  parameters by ``min(1, C / (||g_i|| + 1e-6))`` and summed;
* ``N(0, sigma^2 C^2)`` noise is added to the sum, which is divided by the
  expected batch size (default ``q (n + 1)``);
* torch's SGD or (fused) Adam then steps on the privatised gradient (DP-SGD,
  DP-Adam), called in their functional forms (:func:`_optimizer`).  Both are
  elementwise, so one update of the run-batched tensors performs every run's own.

Canaries (paper Algorithm 1) follow one protocol, :class:`Canary`: the records
it adds to a run's data and the gradient it adds to the clipped sum, each for the
run's bit, and a :class:`Score`.  The batching and step code only asks for those,
so a canary of another kind (m canaries per run with a bit each, an input canary
scored on a parameter coordinate) needs no change here.  The two of the paper:

* :class:`InputCanary`: ``z`` or ``z'`` is the run's record ``n``, sampled,
  clipped and noised like every other record.  Score after t steps:
  ``f_{y_z}(x_z; theta_t) - f_{y_z'}(x_z'; theta_t)``, each record's raw logit
  at its own label (for S3, where ``y_z' = y_z``, both are logits of the
  target's true class).
* :class:`GradientCanary`: when record ``n`` is sampled, the fixed vector
  ``g_z`` (bit 1) or ``g_z'`` (bit 0), of norm at most C, is added to the summed
  clipped gradient.  Score: ``<u, theta_t - theta_0>`` with ``u`` the unit
  vector along ``g_z' - g_z``; for the paper's pair ``g_z = +C e_j``,
  ``g_z' = -C e_j`` this is ``theta_0[j] - theta_t[j]``: the paper's
  ``(g_z / C) . (theta_t - theta_0)`` with its sign turned, because descent
  moves ``theta[j]`` against ``g_z``.

Both scores (:class:`LogitDifference`, :class:`Projection`) are larger under
``D``, as :mod:`subaudit.estimation` expects; either canary takes another score
(``scored_by``).  One-run audits hold m canaries per run, each with its own record,
Poisson draw and bit: :class:`InputCanaries` and :class:`OneHotCanaries` (the latter
sparse, through :meth:`Canary.gradient_columns`, and scored by :class:`Coordinates`).

Speed: on the CPU an MLP, and a linear head at small q, train in the compiled kernels
(:mod:`subaudit.kernels`, ``per-run`` batching): each run to its last step before the
next, its parameters and optimiser state in the core's cache, every sampled record on
its own (a sparse first layer at the cost of its non-zeros), the noise drawn straight
into the optimiser's step.  With the records shared by all runs (``dense`` batching)
the first layer's forward and its weight gradient are each one large matrix product
over all runs; per-example gradient norms use the closed form of a linear layer
(``||g_i||^2 = sum_l ||delta_i^l||^2 (||a_i^{l-1}||^2 + 1)``) instead of materialising
per-example gradients, which for R = 256 image heads would take 4 GB.  On a GPU, at
small q, ``gather`` batching packs each run's sampled records into a fixed number of
slots (covering its batch but with probability 1e-3) and works per run (batched matrix
products), doing about q of the dense work; the rare excess goes through overflow
slots, computed only for the blocks that need them.

Determinism: run r's randomness comes only from ``(seed, r)``, through three
generators of its own (:class:`RunStreams`: initialisation on the CPU, sampling
and noise on the training device) consumed in a fixed pattern per step: n + m
uniforms and P normals.  The kernels compute each run on its own in a fixed order;
the batched products are trained in aligned blocks of :data:`MIN_CHUNK` consecutive
indices, run r always in slot ``r % MIN_CHUNK``, and every product has shapes that
depend on neither the other runs nor the chunking (gather and overflow slots depend
only on n and q).  So on one device kind a run's scores are bitwise the same alone,
in a chunk of 7 or of 1,000, and for any thread count (tested).
"""

from __future__ import annotations

import math
import warnings
from collections.abc import Callable, Sequence
from abc import ABC, abstractmethod
from dataclasses import dataclass, field, replace
from typing import ClassVar

import numpy as np
import torch
from torch.optim.adam import adam
from torch.optim.sgd import sgd
from tqdm.auto import tqdm

from subaudit import kernels
from subaudit.schedule import checkpoints
from subaudit.seeding import derive_seed
from subaudit.settings import SWITCHES
from subaudit.validation import (
    ParameterError,
    check_choice,
    check_count,
    check_positive,
    check_sampling_rate,
)

__all__ = [
    "BATCHINGS",
    "MIN_CHUNK",
    "OPTIMIZERS",
    "Canary",
    "Coordinates",
    "DPConfig",
    "GradientCanary",
    "InputCanaries",
    "INPUT_SCORES",
    "InputCanary",
    "LogOddsDifference",
    "LogitDifference",
    "MLP",
    "OneHotCanaries",
    "Projection",
    "Records",
    "RunStreams",
    "Score",
    "TrainResult",
    "choose_basis",
    "choose_batching",
    "draw_step",
    "flat_params",
    "gather_slots",
    "init_params",
    "span_basis",
    "train",
]

OPTIMIZERS: tuple[str, ...] = ("sgd", "adam")
BATCHINGS: tuple[str, ...] = ("auto", "dense", "gather", "sampled", "per-run")
BASES: tuple[str, ...] = ("auto", "full", "span")

#: Runs are trained in aligned blocks of this many consecutive run indices.
#: Batched products round a matrix differently by its position in the batch and
#: by the batch's width (measured: a 500 x 768 by 768 x 10 product alone differs
#: in the last bit from the same rows inside a wider one; a 3 x 62 by 62 x 6
#: product differs by its position among 16), so a run keeps its slot.
MIN_CHUNK = 16

#: Gather slots cover a run's batch except with probability ``_SLOT_MAIN_TAIL`` per step;
#: the rare excess goes through overflow slots that cover it except with ``_SLOT_TAIL``.
_SLOT_MAIN_TAIL = 1e-3
_SLOT_TAIL = 1e-15

#: ``auto`` batching gathers when the slots are fewer than this fraction of the
#: records and the first layer has at least this many outputs.
_GATHER_BELOW = 0.5
_GATHER_MIN_WIDTH = 32
#: ``auto`` batching of a linear head computes only the sampled pairs at q below this.
_SAMPLED_BELOW = 0.15
#: On the CPU, ``auto`` batching trains an MLP with the compiled kernels (``per-run``: each
#: run's sampled records one by one), and a linear head too at q below this; above it a head's
#: records of all runs go through shared matrix products (``dense``), near the machine's
#: matmul rate.  Measured (one thread, 1,000 runs, model-steps of the default's heads):
#: image 1280 -> 10 (span) at q = 0.25 per-run 101 us, dense 101 us, at q = 0.0625 41 us
#: against 101 us; text 384 -> 2 at q = 0.25 per-run 43 us, dense 37 us.  The tabular MLP
#: (one-hot first layer) at q = 0.25: per-run 235 us, dense 1,291 us.
_PER_RUN_BELOW = 0.2
#: ``auto`` basis trains a linear head in its span when that has at most this fraction of d.
_SPAN_BELOW = 0.8

#: A one-thread CPU job (the workflow's) keeps a chunk's working set (:func:`_bytes_per_run`
#: times its runs) near the last-level cache: a step makes a few passes over every run's
#: activations, gradients, noise and optimiser state, so a chunk much larger than the cache
#: is bound by memory bandwidth (measured on 2 cores, R = 1,008, one thread: one chunk of all
#: runs trains the tabular MLP at 0.67x (q = 0.25) and 0.92x (q = 0.0625) and the image head
#: at 0.74x (q = 1) and 0.85x (q = 0.0625) the rate of 16-32 MB chunks; two such jobs side by
#: side, 0.6x and 0.8x).  With more threads small chunks lose more to the threads' per-operation
#: hand-offs than they gain (2 threads, R = 256: 0.84-0.9x at q = 0.0625), and on a GPU a
#: chunk is as large as ``memory_mb`` allows, for parallelism.  The numbers are bitwise the
#: same whatever the chunking.
_CPU_CHUNK_BYTES = 24 * 2**20

#: Opacus' clip factor: min(1, C / (||g|| + 1e-6)).
_CLIP_EPS = 1e-6


# --------------------------------------------------------------------------- model


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


# --------------------------------------------------------------------------- canaries
#
# A canary says what it does to a run and how the run is scored; the batching and step
# code below only asks it for rows and gradients.  A run holds ``count`` canaries
# (m = 1 for the paper's audits), each its own record with its own Poisson draw (records
# n .. n + m - 1) and its own bit; the score is one number per (run, canary).


class Score(ABC):
    """How runs are scored from their parameters: larger under D (bit 1)."""

    @abstractmethod
    def bind(self, canary: Canary, start: Sequence[torch.Tensor]
             ) -> Callable[[Sequence[torch.Tensor]], torch.Tensor]:
        """A function of a chunk's parameters giving its scores (R, m), float64;
        ``start`` are the chunk's initial parameters."""


class _RecordDifference(Score):
    """A statistic of z's record minus the same statistic of z''s, per canary (larger under
    D); subclasses give the statistic of a few rows for every run, (R, rows)."""

    #: What the score is called in errors.
    name: ClassVar[str] = ""

    @staticmethod
    @abstractmethod
    def statistic(params: Sequence[torch.Tensor], x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
        """The statistic of rows (x, y) for every run, (R, rows)."""

    def bind(self, canary: Canary, start: Sequence[torch.Tensor]):
        rows = canary.input_rows()
        if rows is None:
            raise ParameterError("canary score", self.name, "a canary with input records")
        x, y = rows[0].reshape(-1, rows[0].shape[-1]), rows[1].reshape(-1)

        def score(params: Sequence[torch.Tensor]) -> torch.Tensor:
            value = self.statistic(params, x, y)                               # (R, 2m)
            return (value[:, 0::2] - value[:, 1::2]).double()

        return score


@dataclass(frozen=True)
class LogitDifference(_RecordDifference):
    """``f_{y_z}(x_z) - f_{y_z'}(x_z')``: each record's raw logit at its own label."""

    name = "logit difference"

    @staticmethod
    def statistic(params: Sequence[torch.Tensor], x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
        return _logits_at(params, x, y)


@dataclass(frozen=True)
class LogOddsDifference(_RecordDifference):
    """``l_{y_z}(x_z) - l_{y_z'}(x_z')`` with ``l_y(x) = log p_y(x) - log(1 - p_y(x))`` the
    log-odds of the softmax probability of the record's label: the paper's code's S3/S5
    score (its text writes the raw logit difference, :class:`LogitDifference`)."""

    name = "log-odds difference"

    @staticmethod
    def statistic(params: Sequence[torch.Tensor], x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
        return _log_odds_at(params, x, y)


#: S3/S5 scores by name (params.yaml natural.input_score): the paper's text, the paper's code.
INPUT_SCORES: dict[str, type[Score]] = dict(zip(SWITCHES["input_score"][1:],
                                                (LogitDifference, LogOddsDifference)))


@dataclass(frozen=True)
class Projection(Score):
    """``<u, theta_t - theta_0>`` along the unit vector of ``direction`` (P,), or one
    direction per canary (m, P): a parameter coordinate (``direction = e_j``) or the
    difference ``g_z' - g_z`` of a gradient canary."""

    direction: torch.Tensor

    def bind(self, canary: Canary, start: Sequence[torch.Tensor]):
        u = torch.atleast_2d(self.direction.double())
        u = (u / torch.linalg.vector_norm(u, dim=1, keepdim=True)).to(start[0].device,
                                                                     start[0].dtype)

        def project(params: Sequence[torch.Tensor]) -> torch.Tensor:
            flat = flat_params(params)
            return torch.stack([flat @ ui for ui in u], dim=1)   # one product per canary

        at_start = project(start)
        return lambda params: (project(params) - at_start).double()


@dataclass(frozen=True)
class Coordinates(Score):
    """``sign * (theta_t - theta_0)[index[i]]`` for canary i: one parameter coordinate per
    canary, without an (m, P) direction matrix (m one-hot gradient canaries)."""

    index: torch.Tensor
    sign: float = -1.0

    def bind(self, canary: Canary, start: Sequence[torch.Tensor]):
        idx = self.index.to(start[0].device, torch.long)
        at_start = flat_params(start)[:, idx]
        return lambda params: (self.sign * (flat_params(params)[:, idx] - at_start)).double()


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


@dataclass(frozen=True)
class DPConfig:
    """DP-SGD / DP-Adam hyper-parameters of one audit setting."""

    steps: int
    sampling_rate: float
    noise_multiplier: float
    clip: float
    lr: float
    optimizer: str = "sgd"
    betas: tuple[float, float] = (0.9, 0.999)
    eps: float = 1e-8
    expected_batch_size: float | None = None
    #: Poisson rate of the canary records (None: ``sampling_rate``); the paper's code samples
    #: its Purchase100 input canary at a rate of its own.
    canary_sampling_rate: float | None = None

    def __post_init__(self) -> None:
        check_count(self.steps, "steps")
        check_sampling_rate(self.sampling_rate, "sampling_rate")
        if not (math.isfinite(self.noise_multiplier) and self.noise_multiplier >= 0):
            raise ParameterError("noise_multiplier", self.noise_multiplier, "a finite number >= 0")
        check_positive(self.clip, "clip")
        check_positive(self.lr, "lr")
        check_choice(self.optimizer, "optimizer", OPTIMIZERS)
        if self.expected_batch_size is not None:
            check_positive(self.expected_batch_size, "expected_batch_size")
        if self.canary_sampling_rate is not None:
            check_sampling_rate(self.canary_sampling_rate, "canary_sampling_rate")


@dataclass
class TrainResult:
    """Scores per checkpoint and run (larger under ``D``), and optional extras."""

    runs: np.ndarray                 # (R,) run indices
    bits: np.ndarray                 # (R,) 1 = D (z), 0 = D' (z')
    steps: np.ndarray                # (S,) checkpoints: training steps done
    scores: np.ndarray               # (S, R) float64
    accuracy_steps: np.ndarray = field(default_factory=lambda: np.zeros(0, np.int64))
    accuracy: np.ndarray = field(default_factory=lambda: np.zeros((0, 0)))  # (A, R)
    params: list[np.ndarray] | None = None  # final parameters, each (R, *shape)


# --------------------------------------------------------------------------- randomness


class _KernelStream:
    """One of a run's CPU streams (a row and purpose of a :class:`kernels.StreamBlock`), with
    the ``get_state`` / ``set_state`` of a torch generator."""

    def __init__(self, block: kernels.StreamBlock, row: int, purpose: int) -> None:
        self.block, self.row, self.purpose = block, row, purpose

    def get_state(self) -> np.ndarray:
        return self.block.state[self.row, self.purpose].copy()

    def set_state(self, state: np.ndarray) -> None:
        self.block.state[self.row, self.purpose] = state


class RunStreams:
    """The three random streams of one run, derived only from ``(seed, run)``.

    Per step the engine draws exactly ``n_records`` uniforms (float32; none when q and the
    canary's rate are 1, where every record is sampled) from ``mask`` and P standard normals
    from ``noise`` (parameters in order, weight then bias per layer); ``init`` is used once.
    Tests feed Opacus from the same streams.

    ``mask`` and ``noise`` live on ``device``, where the model is trained: on the CPU the
    compiled kernels' generator (:mod:`subaudit.kernels`: xoroshiro128++ lanes, 24-bit
    uniforms, ziggurat normals; float32 normals are the float64 ones rounded), on a GPU
    torch's Philox (so a GPU step copies no random numbers from the host).  The two kinds
    draw different numbers from one seed; on one device kind a run's numbers are the same
    alone or in any chunk.  ``init`` (used once) is always a torch CPU generator.
    """

    def __init__(self, seed: int, run: int, device: str | torch.device = "cpu",
                 block: kernels.StreamBlock | None = None, row: int = 0) -> None:
        run = int(run)
        self.init = torch.Generator().manual_seed(derive_seed(seed, "run", run, "init"))
        self.block: kernels.StreamBlock | None = None
        if torch.device(device).type == "cpu":
            self.block = block or kernels.StreamBlock([_stream_seeds(seed, run)])
            self.row = row if block is not None else 0
            self.mask: torch.Generator | _KernelStream = _KernelStream(self.block, self.row, _MASK)
            self.noise: torch.Generator | _KernelStream = _KernelStream(self.block, self.row, _NOISE)
        else:
            self.mask = torch.Generator(device).manual_seed(derive_seed(seed, "run", run, "mask"))
            self.noise = torch.Generator(device).manual_seed(derive_seed(seed, "run", run, "noise"))

    @classmethod
    def for_runs(cls, seed: int, runs: Sequence[int], device: str | torch.device = "cpu"
                 ) -> list[RunStreams]:
        """The streams of ``runs``; on the CPU in one block, so that a step draws every run's
        numbers in one call (:func:`draw_step`)."""
        if torch.device(device).type != "cpu":
            return [cls(seed, int(r), device) for r in runs]
        block = kernels.StreamBlock([_stream_seeds(seed, int(r)) for r in runs])
        return [cls(seed, int(r), device, block, i) for i, r in enumerate(runs)]

    def draw_uniform(self, out: torch.Tensor) -> torch.Tensor:
        """One step's sampling uniforms (float32, one per record); ``< q`` samples."""
        if self.block is None:
            return torch.rand(out.shape, generator=self.mask, out=out)
        return self.block.uniform(_MASK, out, slice(self.row, self.row + 1))

    def draw_noise(self, out: torch.Tensor) -> torch.Tensor:
        """One step's standard normal noise, P values in parameter order."""
        if self.block is None:
            return out.normal_(generator=self.noise)
        return self.block.normal(_NOISE, out, slice(self.row, self.row + 1))


#: Columns of a run's CPU streams in a :class:`kernels.StreamBlock`.
_MASK, _NOISE = 0, 1


def _stream_seeds(seed: int, run: int) -> list[int]:
    return [derive_seed(seed, "run", run, "mask"), derive_seed(seed, "run", run, "noise")]


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


# --------------------------------------------------------------------------- batching


def gather_slots(n: int, q: float, tail: float = _SLOT_TAIL) -> int:
    """Slots covering a run's sample but with probability ``tail``: the ``1 - tail``
    quantile of Binomial(n, q), rounded up to a multiple of 8.

    A function of n and q only, so products have the same shapes in every chunk.
    """
    if q >= 1.0:
        return n
    from scipy import stats  # here, not at import: 0.5 s of every training job's start-up

    k = int(stats.binom.isf(tail, n, q)) + 1
    return min(n, max(8, -(-k // 8) * 8))


def choose_batching(batching: str, model: MLP, n: int, q: float, device: torch.device,
                     observed: bool = False) -> str:
    """``auto``: on the CPU, ``per-run`` (the compiled kernels: each run trained to the end in
    turn, its sampled records one at a time) for an MLP, and for a linear head at small q, else
    ``dense``; ``observed`` (an observer sees every step) rules ``per-run`` out.  On a GPU,
    for a linear head, ``sampled`` at small q, else ``dense``; for an MLP, ``gather`` when the
    slots are few and the first layer is wide.

    Gathering copies each sampled row (d values) for ``2 * sizes[1]`` flops per
    value and per pass; with a narrow first layer (a linear head with K = 10)
    the copy and the narrow per-run products cost more than dense batching
    saves (measured: 768 -> 10 head, n = 500, q = 0.0625: dense 7,200,
    gather 4,100 model-steps/s; 600 -> 128 -> 100 MLP, n = 5,000, q = 0.25:
    dense 47, gather 141).  ``sampled`` computes a linear head's logits and weight
    gradients of the sampled (run, record) pairs only, without copying rows.
    """
    check_choice(batching, "batching", BATCHINGS)
    linear = len(model.sizes) == 2
    if batching == "sampled" and not linear:
        raise ParameterError("batching", batching, "'auto', 'dense', 'gather' or 'per-run' for an MLP "
                             "('sampled' needs a linear head)")
    if batching == "per-run" and (device.type != "cpu" or observed):
        raise ParameterError("batching", batching, "'auto', 'dense', 'gather' or 'sampled' on a GPU "
                             "or with an observer ('per-run' is the CPU kernels, which train each "
                             "run to the end)")
    if len(model.sizes) > 17:
        raise ParameterError("sizes", len(model.sizes), "at most 16 layers")
    if batching != "auto":
        return batching
    if device.type == "cpu" and not observed:
        return "per-run" if q < _PER_RUN_BELOW or not linear else "dense"
    if linear:
        return "sampled" if q < _SAMPLED_BELOW else "dense"
    few = gather_slots(n, q) < _GATHER_BELOW * (n + 1)
    return "gather" if few and model.sizes[1] >= _GATHER_MIN_WIDTH else "dense"


@dataclass
class _Batch:
    """One step's rows: shared ``x`` (N, d) or per-run ``x`` (R, B, d), with weights."""

    x: torch.Tensor
    y: torch.Tensor            # (N,) or (R, B): labels
    x_sq: torch.Tensor         # (N,) or (R, B): ||x||^2 + 1 (weight and bias of layer 1)
    weight: torch.Tensor       # (R, rows): 1 where the record is in the batch
    shared: bool


# --------------------------------------------------------------------------- maths


def _forward(params: Sequence[torch.Tensor], x: torch.Tensor, shared: bool):
    """Activations ``a_0..a_{L-1}`` (a_0 = x) and logits (R, rows, K)."""
    acts = [x]
    L = len(params) // 2
    a = x
    for layer in range(L):
        w, b = params[2 * layer], params[2 * layer + 1]
        R, out, fan_in = w.shape
        if layer == 0 and shared:
            # One product for all runs; stored rows-major (rows, R, out), seen as (R, rows, out).
            z = (x @ w.reshape(R * out, fan_in).T).view(x.shape[0], R, out)
            z = z.add_(b).transpose(0, 1)
        else:
            z = torch.baddbmm(b[:, None, :], a, w.transpose(1, 2))
        if layer < L - 1:
            # Per-run contiguous: a batched product over a strided view picks kernels
            # by the stride (that is, by the number of runs), and rounds differently.
            a = z.tanh_() if z.is_contiguous() else torch.tanh(z).contiguous()
            acts.append(a)
        else:
            return acts, z
    raise AssertionError  # pragma: no cover


def _sub_one_hot_(p: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    """``p - one_hot(y)`` in place over the last axis (``y`` broadcasts to ``p``'s other
    axes): -1 added at each label is the same float operation as subtracting the one-hot
    row, without a (rows, K) one-hot table to build or gather."""
    labels = y.expand(p.shape[:-1])[..., None]
    minus_one = torch.full((1,), -1.0, dtype=p.dtype, device=p.device)
    return p.scatter_add_(-1, labels, minus_one.expand(labels.shape))


def _softmax_(z: torch.Tensor) -> torch.Tensor:
    """Softmax over the last axis, in place (K is small: torch.softmax is 6x slower here)."""
    e = z.sub_(z.amax(-1, keepdim=True)).exp_()
    return e.div_(e.sum(-1, keepdim=True))


def _clipped_sum(
    params: Sequence[torch.Tensor], batch: _Batch, clip: float, grads: Sequence[torch.Tensor],
    scale: float = 1.0,
) -> None:
    """Write the sum of the batch's clipped per-example gradients, times ``scale``, into
    ``grads``."""
    acts, z = _forward(params, batch.x, batch.shared)
    delta = _sub_one_hot_(_softmax_(z), batch.y)              # dloss/dlogits, (R, rows, K)
    L = len(params) // 2
    deltas = [delta]
    a_sq = [None] + [a * a for a in acts[1:]]
    for layer in range(L - 1, 0, -1):
        delta = torch.bmm(delta, params[2 * layer]).mul_(1 - a_sq[layer])
        deltas.append(delta)
    deltas.reverse()
    # ||g_i||^2 = sum_l ||delta_l||^2 (||a_{l-1}||^2 + 1), the closed form of linear layers.
    sq = (deltas[0] * deltas[0]).sum(-1) * batch.x_sq
    for layer in range(1, L):
        sq = sq + (deltas[layer] * deltas[layer]).sum(-1) * (a_sq[layer].sum(-1) + 1)
    factor = (clip / (sq.sqrt() + _CLIP_EPS)).clamp(max=1.0).mul_(batch.weight).mul_(scale)
    for layer in range(L):
        wd = deltas[layer].mul_(factor[..., None])                             # (R, rows, out)
        gw, gb = grads[2 * layer], grads[2 * layer + 1]
        R, out, fan_in = gw.shape
        if layer == 0 and batch.shared:
            rows = batch.x.shape[0]
            flat = wd.transpose(0, 1).reshape(rows, R * out)
            torch.mm(flat.T, batch.x, out=gw.view(R * out, fan_in))
        else:
            torch.bmm(wd.transpose(1, 2), acts[layer], out=gw)
        torch.sum(wd, dim=1, out=gb)


def _clipped_sum_sampled(
    params: Sequence[torch.Tensor], batch: _Batch, clip: float, grads: Sequence[torch.Tensor],
    scale: float = 1.0,
) -> None:
    """:func:`_clipped_sum` of a linear head over the sampled (run, record) pairs only.

    The logits of the pairs are one sampled matrix product (CSR pattern: row (r, k), a
    column per record of run r's batch); each run's weight gradient is, per class, a
    weighted sum of its sampled rows (an embedding bag).  The class-sized steps in
    between (softmax, norms, clipping) work on the pairs, (pairs, K).  Every pair and
    every bag is computed on its own and each run's sums run over its own pairs in
    record order, so a run's numbers do not depend on the other runs.
    """
    w, b = params
    gw, gb = grads
    R, K, d = w.shape
    x, dev = batch.x, batch.x.device
    run, rec = batch.weight.nonzero(as_tuple=True)            # sampled pairs, by run then record
    counts = torch.bincount(run, minlength=R)
    start = torch.cumsum(counts, 0) - counts
    rank = torch.arange(run.numel(), device=dev) - start[run]
    # CSR entry of (pair, class): row (r, k) holds run r's records in order.
    entry = ((start[run] * K + rank)[:, None]
             + torch.arange(K, device=dev)[None, :] * counts[run][:, None]).reshape(-1)
    cols = torch.empty(run.numel() * K, dtype=torch.long, device=dev)
    cols[entry] = rec.repeat_interleave(K)
    bias = torch.empty(run.numel() * K, dtype=x.dtype, device=dev)
    bias[entry] = b[run].reshape(-1)
    offsets = torch.zeros(R * K + 1, dtype=torch.long, device=dev)
    torch.cumsum(counts.repeat_interleave(K), 0, out=offsets[1:])
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", "Sparse CSR tensor support is in beta")
        pattern = torch.sparse_csr_tensor(offsets, cols, bias, size=(R * K, x.shape[0]),
                                          check_invariants=False)
    z = torch.sparse.sampled_addmm(pattern, w.reshape(R * K, d), x.T).values()[entry].view(-1, K)
    delta = _sub_one_hot_(_softmax_(z), batch.y[rec])                       # (pairs, K)
    sq = (delta * delta).sum(1) * batch.x_sq[rec]
    factor = (clip / (sq.sqrt() + _CLIP_EPS)).clamp(max=1.0).mul_(scale)
    wd = delta.mul_(factor[:, None])
    gb.zero_().index_add_(0, run, wd)
    weights = torch.empty_like(bias)
    weights[entry] = wd.reshape(-1)
    sums = torch.nn.functional.embedding_bag(cols, x, offsets[:-1], mode="sum",
                                             per_sample_weights=weights)
    gw.view(R * K, d).copy_(sums)


def _logits_at(params: Sequence[torch.Tensor], x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    """Raw logits ``f_{y_i}(x_i)`` of a few rows for every run, (R, rows).

    Per-run products (not one shared product): with so few rows the BLAS picks
    kernels by the number of runs, and the scores must not depend on it.
    """
    R = params[0].shape[0]
    _, z = _forward(params, x.expand(R, *x.shape), shared=False)
    return z.gather(2, y.view(1, -1, 1).expand(R, -1, 1)).squeeze(2)


def _log_odds_at(params: Sequence[torch.Tensor], x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    """Log-odds ``log p_{y_i}(x_i) - log(1 - p_{y_i}(x_i))`` of a few rows for every run,
    (R, rows), float64: the label's logit minus the log-sum-exp of the other logits."""
    R = params[0].shape[0]
    _, z = _forward(params, x.expand(R, *x.shape), shared=False)
    z = z.double()
    at = z.gather(2, y.view(1, -1, 1).expand(R, -1, 1)).squeeze(2)
    others = z.scatter(2, y.view(1, -1, 1).expand(R, -1, 1), float("-inf"))
    return at - torch.logsumexp(others, dim=2)


def _accuracy(params: Sequence[torch.Tensor], test: Records, rows_per_pass: int) -> torch.Tensor:
    correct = torch.zeros(params[0].shape[0], dtype=torch.float64, device=params[0].device)
    for lo in range(0, test.x.shape[0], rows_per_pass):
        x, y = test.x[lo:lo + rows_per_pass], test.y[lo:lo + rows_per_pass]
        _, z = _forward(params, x, shared=True)
        correct += (z.argmax(-1) == y.view(1, -1)).sum(1).double()
    return correct / test.x.shape[0]


# --------------------------------------------------------------------------- span basis
#
# A linear head trained by DP-SGD on fixed features moves, apart from noise, only along the
# records it sees: each clipped gradient is delta (x) x_i.  Split the noise of the weight
# matrix into its part in V = span(records, canary rows, score directions) and the rest:
# the rest never changes a logit of a record, a clipping norm or a score, and SGD is linear,
# so training the coordinates in an orthonormal basis of V, with standard normal noise
# there, gives every score exactly the distribution of full training (and exactly the
# scores of full training whose noise has that V part: tested against Opacus).  With
# d = 1280 features and 500 records this is 2.5x less work and noise.  Adam is not
# rotation-invariant, and test accuracy or final parameters need the rest: those train
# in full.


def span_basis(model: MLP, data: Records, canary: Canary | None) -> torch.Tensor | None:
    """Orthonormal basis (d, v), float64 on the CPU, of the input directions a linear
    head's training and scores depend on: the records, the canary's input rows and the
    input-space rows of its gradients and of its score direction.  None for an MLP or a
    canary or score of a kind this module does not know."""
    if len(model.sizes) != 2:
        return None
    d, K = model.sizes
    vecs = [data.x.detach().double().cpu()]
    if canary is not None:
        score = canary.score
        if type(canary) not in (InputCanary, GradientCanary) or getattr(canary, "trap", ()) or \
                type(score) not in (LogitDifference, LogOddsDifference, Projection):
            return None
        rows = canary.input_rows()
        flats = [] if canary.gradients() is None else [canary.gradients().reshape(-1, model.num_params)]
        if isinstance(score, Projection):
            flats.append(torch.atleast_2d(score.direction))
        if rows is not None:
            vecs.append(rows[0].reshape(-1, d).detach().double().cpu())
        vecs += [f[:, :K * d].reshape(-1, d).detach().double().cpu() for f in flats]
    a = torch.cat(vecs)
    threads = torch.get_num_threads()
    torch.set_num_threads(1)     # one thread: the same basis whatever the thread count
    try:
        _, sv, vh = torch.linalg.svd(a, full_matrices=False)
    finally:
        torch.set_num_threads(threads)
    keep = sv > sv[0] * max(a.shape) * torch.finfo(torch.float64).eps
    keep[0] = True
    return vh[keep].T.contiguous()


def _in_span(flat: torch.Tensor, basis: torch.Tensor, K: int) -> torch.Tensor:
    """Flat parameter vectors (..., K d + K) in span coordinates (..., K v + K)."""
    d = basis.shape[0]
    w = flat[..., :K * d].double().cpu().reshape(*flat.shape[:-1], K, d) @ basis
    out = torch.cat([w.reshape(*flat.shape[:-1], -1), flat[..., K * d:].double().cpu()], dim=-1)
    return out.to(flat.dtype)


def _canary_in_span(canary: Canary | None, basis: torch.Tensor, K: int) -> Canary | None:
    if canary is None:
        return None
    score = canary.scored_by
    if isinstance(score, Projection):
        score = Projection(_in_span(score.direction, basis, K))
    if isinstance(canary, InputCanary):
        x = (canary.x.double().cpu() @ basis).to(canary.x.dtype)
        return InputCanary(x, canary.y, scored_by=score)
    return GradientCanary(_in_span(canary.g, basis, K), scored_by=score)


def choose_basis(basis: str, model: MLP, data: Records, canary: Canary | None, dp: DPConfig,
                 needs_full: bool = False) -> torch.Tensor | None:
    """The span basis :func:`train` trains in (``basis`` is ``auto``, ``full`` or ``span``;
    ``needs_full``: test accuracy, final parameters or an observer are asked for), or None."""
    check_choice(basis, "basis", BASES)
    if basis == "full":
        return None
    span = None if dp.optimizer != "sgd" or needs_full else span_basis(model, data, canary)
    if basis == "span" and span is None:
        raise ParameterError("basis", basis, "'auto' or 'full' here ('span' needs a linear head "
                             "trained with SGD, a canary of this module scored by LogitDifference, "
                             "LogOddsDifference or Projection, and no test, keep_params or observe)")
    if basis == "auto" and span is not None and span.shape[1] > _SPAN_BELOW * model.sizes[0]:
        return None
    return span


# --------------------------------------------------------------------------- driver


@dataclass
class _Setup:
    model: MLP
    data: Records
    canary: Canary | None
    dp: DPConfig
    batching: str
    slots: int          # gather slots per run, then ``overflow`` more for the rare excess
    overflow: int
    device: torch.device
    dtype: torch.dtype
    full: MLP                        # the model as given (``model`` may be its span form)
    basis: torch.Tensor | None       # span basis (d, v), or None: training in full
    workspace: dict = field(default_factory=dict)   # reused gather buffers, by shape

    @property
    def n(self) -> int:
        return self.data.x.shape[0]

    @property
    def m(self) -> int:
        """Canaries per run."""
        return 0 if self.canary is None else self.canary.count

    @property
    def n_records(self) -> int:
        """Records a run samples from: the data and its canaries (records n .. n + m - 1)."""
        return self.n + self.m


def _bytes_per_run(s: _Setup, test_rows: int, snapshots: int = 0) -> int:
    """Rough peak memory of one run in a chunk (activations, gradients, state); the
    ``per-run`` kernels hold one run's records at a time, outside the chunk, and keep the
    run's parameters at its ``snapshots`` checkpoints."""
    rows = {"gather": s.slots + s.m, "per-run": 0}.get(s.batching, s.n + 2 * s.m)
    width = sum(s.model.sizes[1:])
    per_row = 5 * width + 4 + (s.model.sizes[0] if s.batching == "gather" else 0)
    params = s.model.num_params * (6 + (2 if s.dp.optimizer == "adam" else 0)
                                   + (snapshots if s.batching == "per-run" else 0))
    item = torch.empty(0, dtype=s.dtype).element_size()
    return item * (max(rows, test_rows) * per_row + params)


def _input_rows(s: _Setup) -> tuple[torch.Tensor, torch.Tensor] | None:
    return None if s.canary is None else s.canary.input_rows()


def _shared_rows(s: _Setup) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """Dense batching's rows: the data, then z and z' of each input canary."""
    x, y = s.data.x, s.data.y
    rows = _input_rows(s)
    if rows is not None:
        x = torch.cat([x, rows[0].reshape(-1, x.shape[1])])
        y = torch.cat([y, rows[1].reshape(-1).to(y.device, y.dtype)])
    return x, y, (x * x).sum(-1) + 1


def _shared_weight(s: _Setup, masks: torch.Tensor, bits: torch.Tensor) -> torch.Tensor:
    """Which rows of :func:`_shared_rows` are in each run's batch, (R, rows) bool: the
    sampled data, then z (bit 1) or z' (bit 0) of each sampled input canary."""
    weight = masks[:, :s.n]
    if _input_rows(s) is None:
        return weight
    cols = [weight]
    for i in range(s.m):
        canary_in = masks[:, s.n + i]
        cols += [(canary_in & bits[:, i])[:, None], (canary_in & ~bits[:, i])[:, None]]
    return torch.cat(cols, dim=1)


def _make_batch(s: _Setup, masks: torch.Tensor, bits: torch.Tensor, table) -> _Batch:
    """This step's rows and weights for a chunk; ``masks`` is (R, n_records) bool, ``bits``
    (R, m) bool and ``table`` the rows of :func:`_shared_rows`.  Gather batching packs each
    run's first ``s.slots`` sampled records (ascending) and its canary rows."""
    n = s.n
    rows = _input_rows(s)
    if s.batching in ("dense", "sampled"):
        x, y, x_sq = table
        return _Batch(x, y, x_sq, _shared_weight(s, masks, bits).to(s.dtype), shared=True)
    idx, weight = _slots(masks[:, :n], 0, s.slots)
    if rows is not None:
        # z of canary i is table row n + 2i, z' row n + 2i + 1.
        pick = n + 2 * torch.arange(s.m, device=masks.device) + (~bits).long()
        idx = torch.cat([idx, pick], dim=1)
        weight = torch.cat([weight, masks[:, n:n + s.m]], dim=1)
    return _gathered(table, idx, weight, s.dtype, s.workspace)


def _slots(base: torch.Tensor, lo: int, width: int) -> tuple[torch.Tensor, torch.Tensor]:
    """Row indices (R, width) of each run's sampled records number lo .. lo + width - 1
    (ascending; unused slots point at row 0) and whether each slot holds one."""
    R, n = base.shape
    pos = base.cumsum(1) - 1
    take = base & (pos >= lo) & (pos < lo + width)
    slot = torch.where(take, pos - lo, width)                      # column ``width``: discarded
    idx = torch.zeros(R, width + 1, dtype=torch.long, device=base.device)
    idx.scatter_(1, slot, torch.arange(n, device=base.device).expand(R, n))
    counts = base.sum(1, keepdim=True)
    weight = torch.arange(lo, lo + width, device=base.device)[None, :] < counts
    return idx[:, :width], weight


def _gathered(table, idx: torch.Tensor, weight: torch.Tensor, dtype: torch.dtype,
              workspace: dict | None = None) -> _Batch:
    """The rows of ``idx`` (R, width) from the shared rows ``table``; the rows are copied
    into ``workspace``'s buffer of their shape when one is given (a fresh tensor of
    100 MB per step costs more in page faults than the copy: measured 66 ms against 7 ms
    for 42,560 x 600 floats)."""
    x, y, x_sq = table
    R, width = idx.shape
    flat = idx.reshape(-1)
    shape = (R * width, x.shape[1])
    out = None
    if workspace is not None:
        out = workspace.get(shape)
        if out is None:
            out = workspace[shape] = torch.empty(shape, dtype=x.dtype, device=x.device)
    rows = torch.index_select(x, 0, flat, out=out)
    return _Batch(rows.view(R, width, x.shape[1]), y[flat].view(R, width),
                  x_sq[flat].view(R, width), weight.to(dtype), shared=False)


def _add_overflow(s: _Setup, params: Sequence[torch.Tensor], masks: torch.Tensor, table,
                  clip: float, grads: Sequence[torch.Tensor], scale: float) -> None:
    """Add the clipped gradients of records beyond a run's ``s.slots`` gather slots.

    Only aligned blocks holding such a run are computed (each run in its own slot of
    ``MIN_CHUNK``, with ``s.overflow`` more slots), and only those runs' sums change, so a
    run's numbers still depend on its own sample alone.
    """
    base = masks[:, :s.n]
    counts = base.sum(1)
    over = counts > s.slots
    if not bool(over.any()):
        return
    blocks = torch.unique(torch.nonzero(over)[:, 0] // MIN_CHUNK)
    sub = (blocks[:, None] * MIN_CHUNK + torch.arange(MIN_CHUNK, device=masks.device)).reshape(-1)
    width = max(s.overflow, int(counts.max()) - s.slots)  # more only with probability < 1e-15
    idx, weight = _slots(base[sub], s.slots, width)
    sub_params = [p[sub] for p in params]
    extra = [torch.empty_like(p) for p in sub_params]
    _clipped_sum(sub_params, _gathered(table, idx, weight, s.dtype), clip, extra, scale)
    has = over[sub]
    for g, e in zip(grads, extra):
        g[sub[has]] += e[has]


def flat_params(params: Sequence[torch.Tensor]) -> torch.Tensor:
    """Run-batched parameters as one (R, P) tensor, in parameter order."""
    return torch.cat([p.reshape(p.shape[0], -1) for p in params], dim=1)


Observer = Callable[[int, list[torch.Tensor], list[torch.Tensor]], None]


def _train_chunk(
    s: _Setup, runs: np.ndarray, bits_np: np.ndarray, real: np.ndarray, seed: int,
    init: str | Sequence[torch.Tensor], steps_out: np.ndarray, acc_steps: np.ndarray,
    test: Records | None, test_rows: int, bar: tqdm, observe: Observer | None,
) -> tuple[np.ndarray, np.ndarray, list[np.ndarray]]:
    """Train the runs of whole aligned blocks; ``real`` marks those asked for."""
    R, dev, dt, dp = len(runs), s.device, s.dtype, s.dp
    streams = RunStreams.for_runs(seed, runs, dev)
    bits = torch.as_tensor(bits_np.astype(bool)).reshape(R, -1).to(dev)      # (R, m)
    keep = torch.as_tensor(np.flatnonzero(real)).to(dev)

    params = init_params(s.full, streams, init, dt)
    if s.canary is not None:
        s.canary.initialise(params)
    if s.basis is not None:
        params[0] = (params[0].double() @ s.basis).to(dt)
    params = [p.to(dev) for p in params]
    table = _shared_rows(s)
    records = kernels.RecordTable(*table) if s.batching == "per-run" else None
    if s.canary is None:
        scorer = lambda _params: torch.full((R, 1), math.nan, dtype=torch.float64)  # noqa: E731
    else:
        scorer = s.canary.score.bind(s.canary, params)
    std = dp.noise_multiplier * dp.clip
    scale = 1.0 / (dp.expected_batch_size or dp.sampling_rate * s.n_records)
    canary_g = _canary_gradients(s, bits, scale)
    # At q = 1 every record is in every batch: no uniforms are drawn.  Canary records at a
    # rate of their own compare their uniforms with that rate.
    q_canary = dp.sampling_rate if dp.canary_sampling_rate is None else dp.canary_sampling_rate
    uniforms = None if dp.sampling_rate == 1.0 == q_canary else torch.empty(R, s.n_records, device=dev)
    rates: float | torch.Tensor = dp.sampling_rate
    if q_canary != dp.sampling_rate:
        rates = torch.full((s.n_records,), dp.sampling_rate, device=dev)
        rates[s.n:] = q_canary
    all_in = torch.ones(R, s.n_records, dtype=torch.bool, device=dev)
    scores = np.empty((len(steps_out), R, max(s.m, 1)))
    accuracy = np.empty((len(acc_steps), R))
    want_scores = {int(t): i for i, t in enumerate(steps_out)}
    want_acc = {int(t): i for i, t in enumerate(acc_steps)}

    def record(t: int, at: Sequence[torch.Tensor]) -> None:
        if t in want_scores:
            scores[want_scores[t]] = scorer(at).cpu().numpy()
        if t in want_acc and test is not None:
            accuracy[want_acc[t]] = _accuracy(at, test, test_rows).cpu().numpy()

    if s.batching == "per-run":
        at_steps = sorted(want_scores.keys() | want_acc.keys())
        snaps = kernels.train_runs(
            params, records, streams[0].block, n=s.n, bits=bits, input_canary=_input_rows(s) is not None,
            q=dp.sampling_rate, q_canary=q_canary, clip=dp.clip, scale=scale, std_scale=std * scale,
            steps=dp.steps, optimizer=dp.optimizer, lr=dp.lr, betas=dp.betas, eps=dp.eps,
            gradient_canary=_flat_canary_gradients(s, canary_g), checkpoints=at_steps)
        offsets = s.model.offsets
        for snap, t in zip(snaps, at_steps):
            record(t, [snap[:, lo:hi].reshape(R, *sh)
                       for sh, lo, hi in zip(s.model.shapes, offsets[:-1], offsets[1:])])
        bar.update(len(keep) * dp.steps)
        return scores[:, real], accuracy[:, real], [p[keep].cpu().numpy() for p in params]

    grads = [torch.empty_like(p) for p in params]
    noisy_step = _noisy_step(dp, params, streams, std * scale)
    for t in range(dp.steps + 1):
        record(t, params)
        if t == dp.steps:
            break
        if uniforms is not None:
            draw_step(streams, uniforms, None)
        masks = all_in if uniforms is None else uniforms < rates
        # Gradients are divided by the expected batch size as they are made.
        batch = _make_batch(s, masks, bits, table)
        if s.batching == "sampled":
            _clipped_sum_sampled(params, batch, dp.clip, grads, scale)
        elif len(params) == 2 and batch.shared and dev.type == "cpu":
            kernels.head_clipped_sum(params, batch.x, batch.y, batch.x_sq, batch.weight, dp.clip, grads, scale)
        else:
            _clipped_sum(params, batch, dp.clip, grads, scale)
        if s.batching == "gather":
            _add_overflow(s, params, masks, table, dp.clip, grads, scale)
        for i, layer, cols, values in canary_g:
            grads[layer].view(R, -1).index_add_(1, cols, values * masks[:, s.n + i, None].to(dt))
        noisy_step(grads, t + 1)
        if observe is not None:
            observe(t + 1, [p[keep] for p in params], [g[keep] for g in grads])
        bar.update(len(keep))
    final = [p[keep].cpu().numpy() for p in params]
    return scores[:, real], accuracy[:, real], final


def _noisy_step(dp: DPConfig, params: list[torch.Tensor], streams: Sequence[RunStreams],
                std_scale: float) -> Callable[[list[torch.Tensor], int], None]:
    """``step(grads, t)``: each run's P noise values times ``std_scale`` added to its
    gradients, then the optimiser's t-th step; on the CPU one pass of the compiled kernels
    (:func:`kernels.noise_step`), on a GPU the device's draws and torch's optimiser."""
    if streams[0].block is not None:
        block = streams[0].block
        moments = None
        if dp.optimizer == "adam":
            moments = ([torch.zeros_like(p) for p in params], [torch.zeros_like(p) for p in params])

        def cpu_step(grads: list[torch.Tensor], t: int) -> None:
            kernels.noise_step(params, grads, block, _NOISE, std_scale, dp.optimizer, dp.lr,
                               moments=moments, betas=dp.betas, eps=dp.eps, step=t)
        return cpu_step
    offsets = np.cumsum([0] + [p[0].numel() for p in params])
    noise = torch.empty(len(streams), int(offsets[-1]), dtype=params[0].dtype, device=params[0].device)
    step_params = _optimizer(dp, params)

    def device_step(grads: list[torch.Tensor], t: int) -> None:
        draw_step(streams, None, noise)
        for gr, lo, hi in zip(grads, offsets[:-1], offsets[1:]):
            gr.add_(noise[:, lo:hi].reshape(gr.shape), alpha=std_scale)
        step_params(grads)
    return device_step


def _optimizer(dp: DPConfig, params: list[torch.Tensor]) -> Callable[[list[torch.Tensor]], None]:
    """One optimiser step on ``params`` from gradients ``grads``: what
    ``torch.optim.SGD(params, lr)`` or ``torch.optim.Adam(params, lr, betas, eps, fused=True)``
    do, bit for bit, through the functional forms their ``step`` calls.  The classes import
    ``torch._dynamo`` on first use, 1.5 s of start-up in every training job."""
    if dp.optimizer == "sgd":
        buffers: list[torch.Tensor | None] = [None] * len(params)
        return lambda grads: sgd(params, grads, buffers, weight_decay=0.0, momentum=0.0,
                                 lr=dp.lr, dampening=0.0, nesterov=False, maximize=False)
    exp_avgs = [torch.zeros_like(p) for p in params]
    exp_avg_sqs = [torch.zeros_like(p) for p in params]
    counts = [torch.zeros((), dtype=torch.float32, device=p.device) for p in params]
    beta1, beta2 = dp.betas
    return lambda grads: adam(params, grads, exp_avgs, exp_avg_sqs, [], counts, fused=True,
                              amsgrad=False, beta1=beta1, beta2=beta2, lr=dp.lr,
                              weight_decay=0.0, eps=dp.eps, maximize=False)


def _flat_canary_gradients(s: _Setup, canary_g: list[tuple[int, int, torch.Tensor, torch.Tensor]]
                           ) -> tuple[np.ndarray, np.ndarray, torch.Tensor] | None:
    """:func:`_canary_gradients` as :func:`kernels.train_runs` takes them: per entry its canary
    and flat column, and the values (R, entries)."""
    if not canary_g:
        return None
    offsets = s.model.offsets
    which = np.concatenate([np.full(len(cols), i) for i, _, cols, _ in canary_g])
    cols = np.concatenate([offsets[layer] + cols.cpu().numpy() for _, layer, cols, _ in canary_g])
    return which, cols, torch.cat([values for *_, values in canary_g], dim=1)


def _canary_gradients(s: _Setup, bits: torch.Tensor, scale: float
                      ) -> list[tuple[int, int, torch.Tensor, torch.Tensor]]:
    """What each gradient canary adds to a run's gradient when sampled, on its support:
    (canary, parameter tensor, flat columns, values (R, columns) times ``scale``).  The
    paper's canary is one coordinate, so a step touches R numbers, not R x P."""
    columns = None if s.canary is None else s.canary.gradient_columns()
    if columns is None:
        return []
    offsets = s.model.offsets
    out = []
    for i, (cols, values) in enumerate(columns):
        cols = cols.to(s.device)
        values = values.to(s.device, s.dtype)
        chosen = torch.where(bits[:, i, None], values[0], values[1]) * scale    # (R, k)
        for layer, (lo, hi) in enumerate(zip(offsets[:-1], offsets[1:])):
            inside = (cols >= int(lo)) & (cols < int(hi))
            if bool(inside.any()):
                out.append((i, layer, cols[inside] - int(lo), chosen[:, inside].contiguous()))
    return out


def _one_block(streams: Sequence[RunStreams]) -> slice | None:
    """The rows of the streams' shared CPU block when they are consecutive rows of one."""
    block = streams[0].block
    if block is None or any(st.block is not block for st in streams):
        return None
    lo = streams[0].row
    if any(st.row != lo + i for i, st in enumerate(streams)):
        return None
    return slice(lo, lo + len(streams))


def draw_step(
    streams: Sequence[RunStreams], uniforms: torch.Tensor | None, noise: torch.Tensor | None
) -> None:
    """Each run's uniforms and noise for one step, into row r of ``uniforms`` (or None at
    q = 1) and ``noise`` (or None); on the CPU in one call per block of streams, the runs
    split over threads.

    Every run owns its generators and its rows, so the split changes nothing but the wall
    time.
    """
    rows = _one_block(streams)
    if rows is not None:
        if uniforms is not None:
            streams[0].block.uniform(_MASK, uniforms, rows)
        if noise is not None:
            streams[0].block.normal(_NOISE, noise, rows)
        return

    def work(lo: int, hi: int) -> None:
        for r in range(lo, hi):
            if uniforms is not None:
                streams[r].draw_uniform(uniforms[r])
            if noise is not None:
                streams[r].draw_noise(noise[r])

    if streams[0].block is None:     # a device's generators: one after another
        work(0, len(streams))
    else:
        kernels.over_runs(len(streams), work)


def train(
    model: MLP,
    data: Records,
    canary: Canary | None,
    dp: DPConfig,
    *,
    seed: int,
    runs: Sequence[int] | np.ndarray,
    bits: Sequence[int] | np.ndarray,
    score_every: int,
    init: str | Sequence[torch.Tensor] = "zero",
    test: Records | None = None,
    accuracy_steps: Sequence[int] = (),
    batching: str = "auto",
    basis: str = "auto",
    device: str | torch.device = "cpu",
    dtype: torch.dtype = torch.float32,
    memory_mb: float = 2048,
    keep_params: bool = False,
    observe: Observer | None = None,
    progress: bool = True,
) -> TrainResult:
    """Train runs ``runs`` (bits ``bits``: 1 = D with z, 0 = D' with z') and score them.

    ``bits`` holds one bit per run, or (R, m) for a canary of ``count`` m > 1 (one bit
    per run and canary; scores are then (S, R, m)).  Scores are recorded after every
    ``score_every`` steps and after the last
    (:func:`subaudit.schedule.checkpoints`); test accuracy after each step count in
    ``accuracy_steps`` (0 = before training).  ``canary=None`` trains on the
    data alone (scores are NaN).  ``observe(t, params, grads)`` is called after
    every step with the chunk's parameters and the privatised gradients of that step.
    Runs are processed in chunks that fit ``memory_mb`` (on one CPU thread, also the cache:
    :data:`_CPU_CHUNK_BYTES`); results do not depend on the chunking.  ``basis``: ``span``
    trains a linear head with SGD in the span of what it sees (:func:`span_basis`; the same
    score distribution for less work), ``full`` in all d dimensions, ``auto`` the span where
    it is allowed and has at most 0.8 d dimensions.
    """
    model = MLP(tuple(model.sizes))
    data.check(model, "data")
    if canary is not None:
        if not isinstance(canary, Canary):
            raise ParameterError("canary", type(canary).__name__, "a Canary (subaudit.engine) or None")
        canary.check(model, dp)
    m = 1 if canary is None else check_count(canary.count, "canary.count")
    if test is not None:
        test.check(model, "test")
    runs_np = np.asarray(runs, dtype=np.int64).reshape(-1)
    bits_np = np.asarray(bits)
    if runs_np.size == 0:
        raise ParameterError("runs", [], "at least one run index")
    if bits_np.shape not in ({runs_np.shape, (runs_np.size, m)} if m == 1 else {(runs_np.size, m)}):
        raise ParameterError("bits", f"shape {bits_np.shape}",
                             f"one per run ({runs_np.size},)" if m == 1
                             else f"one per run and canary ({runs_np.size}, {m})")
    if not np.isin(bits_np, (0, 1)).all():
        raise ParameterError("bits", sorted(set(bits_np.tolist())), "0 or 1 per run")
    if len(np.unique(runs_np)) != runs_np.size or (runs_np < 0).any():
        raise ParameterError("runs", "duplicate or negative indices", "distinct indices >= 0")
    acc = np.asarray(sorted({int(a) for a in accuracy_steps}), dtype=np.int64)
    if acc.size and (acc[0] < 0 or acc[-1] > dp.steps):
        raise ParameterError("accuracy_steps", acc.tolist(), f"step counts in 0..{dp.steps}")
    if acc.size and test is None:
        raise ParameterError("test", None, "test records when accuracy_steps is given")
    check_positive(memory_mb, "memory_mb")
    if dtype not in (torch.float32, torch.float64):
        raise ParameterError("dtype", str(dtype), "torch.float32 or torch.float64")
    dev = torch.device(device)

    full = model
    span = choose_basis(basis, model, data, canary, dp,
                        needs_full=test is not None or keep_params or observe is not None)
    if span is not None:
        K = model.num_classes
        model = MLP((span.shape[1], K))
        data = Records((data.x.double().cpu() @ span).to(data.x.dtype), data.y)
        canary = _canary_in_span(canary, span, K)
    n = data.x.shape[0]
    mode = choose_batching(batching, model, n, dp.sampling_rate, dev, observed=observe is not None)
    data = Records(data.x.to(dev, dtype), data.y.to(dev, torch.long))
    if canary is not None:
        canary = canary.to(dev, dtype)
    slots = gather_slots(n, dp.sampling_rate, _SLOT_MAIN_TAIL)
    setup = _Setup(model, data, canary, dp, mode, slots,
                   gather_slots(n, dp.sampling_rate) - slots, dev, dtype, full, span)
    steps_out = checkpoints(dp.steps, score_every)
    test_rows = n + 2 if test is None else min(test.x.shape[0], n + 2)
    test_dev = None if test is None else Records(test.x.to(dev, dtype), test.y.to(dev, torch.long))
    budget = memory_mb * 2**20
    if dev.type == "cpu" and torch.get_num_threads() == 1 and mode != "per-run":
        budget = min(budget, _CPU_CHUNK_BYTES)
    snapshots = len(set(steps_out.tolist()) | set(acc.tolist()))
    per_chunk = max(1, int(budget // _bytes_per_run(setup, test_rows, snapshots)) // MIN_CHUNK)

    # Runs are trained in aligned blocks of MIN_CHUNK consecutive indices, run r in slot
    # r % MIN_CHUNK: batched products may round a slot differently by its position, so
    # a run keeps its position whatever else is trained.  Unrequested runs of a block
    # are trained too and dropped.
    order = np.argsort(runs_np, kind="stable")
    blocks = np.unique(runs_np // MIN_CHUNK)
    scores = np.empty((len(steps_out), runs_np.size, m))
    accuracy = np.empty((len(acc), runs_np.size))
    finals: list[list[np.ndarray]] = []
    with torch.no_grad(), tqdm(total=runs_np.size * dp.steps, unit="model-step",
                               disable=not progress, desc="DP training", mininterval=1.0) as bar:
        for i in range(0, len(blocks), per_chunk):
            slot_runs = (blocks[i:i + per_chunk, None] * MIN_CHUNK
                         + np.arange(MIN_CHUNK)).reshape(-1)
            asked = np.isin(slot_runs, runs_np)
            where = order[np.searchsorted(runs_np[order], slot_runs[asked])]
            slot_bits = np.zeros((slot_runs.size, m), dtype=np.int64)
            slot_bits[asked] = bits_np[where].reshape(-1, m)
            sc, ac, fin = _train_chunk(
                setup, slot_runs, slot_bits, asked, seed, init, steps_out, acc,
                test_dev, test_rows, bar, observe)
            scores[:, where] = sc
            accuracy[:, where] = ac
            finals.append([where, *fin])
    params = None
    if keep_params:
        params = [np.empty((runs_np.size, *shape), dtype=np.float64 if dtype == torch.float64
                           else np.float32) for shape in model.shapes]
        for where, *fin in finals:
            for out, f in zip(params, fin):
                out[where] = f
    return TrainResult(runs=runs_np, bits=bits_np.astype(np.int8), steps=steps_out,
                       scores=scores[..., 0] if m == 1 else scores, accuracy_steps=acc,
                       accuracy=accuracy, params=params)
