"""The training engine: R audit runs of one small model, trained with DP-SGD or DP-Adam as one
computation, and scored.

An audit trains the same model many times, half the runs on ``D`` (bit 1, the target ``z``)
and half on ``D'`` (bit 0, the substitute ``z'``); the models are MLPs with Tanh between
layers, a linear head on fixed features being the one-layer case.  DP semantics are Opacus'
(``GradSampleModule`` + ``DPOptimizer``: Poisson sampling, per-example clipping, Gaussian
noise, division by the expected batch size), checked against Opacus in the tests.

Modules, one concept each:

* :mod:`~subaudit.engine.model`: :class:`MLP`, :class:`Records`, the parameter layout;
* :mod:`~subaudit.engine.dpsgd`: :class:`DPConfig` and each DP-SGD operation, defined once
  (clip and sum, noise, SGD and Adam), differentiable and in place;
* :mod:`~subaudit.engine.scores` and :mod:`~subaudit.engine.canaries`: the canary protocol
  (paper Algorithm 1) and how runs are scored;
* :mod:`~subaudit.engine.streams`: each run's random streams, from ``(seed, run)`` only;
* :mod:`~subaudit.engine.batching` and :mod:`~subaudit.engine.span`: what a step computes;
* :mod:`~subaudit.engine.training`: :func:`train`;
* :mod:`~subaudit.engine.unroll`: the same training, differentiable (S6's metagradient);
* :mod:`~subaudit.engine.kernels` (``_kernels.cpp``) and :mod:`~subaudit.engine.generator`:
  the compiled CPU kernels and the numpy twin of their generator, used where the library is
  not built (no C++ compiler) or ``SUBAUDIT_KERNELS=none``;
* :mod:`~subaudit.engine.device_streams` (:mod:`~subaudit.engine.device_kernels`): the same
  generator on a GPU as Triton kernels, every run's draws of a step in one launch;
* :mod:`~subaudit.engine.bench`: throughput against Opacus and the machine's matmul rate.

Determinism: a run's numbers depend only on ``(seed, run)`` and its settings, not on the
chunking, the thread count, the kernels' instruction set or the device's kind for its random
draws (tested).

May import: the base modules (:mod:`subaudit.validation`, :mod:`subaudit.seeding`,
:mod:`subaudit.schedule`, :mod:`subaudit.devices`), numpy, torch, tqdm, triton (where
installed).  Nothing of the
workflow (pipeline, reporting) or of the scenarios.
"""

from subaudit.engine.batching import BATCHINGS, MIN_CHUNK, choose_batching, gather_slots
from subaudit.engine.canaries import Canary, GradientCanary, InputCanaries, InputCanary, OneHotCanaries
from subaudit.engine.dpsgd import OPTIMIZERS, DPConfig
from subaudit.engine.model import MLP, Records, flat_params, init_params
from subaudit.engine.scores import (
    INPUT_SCORES,
    Coordinates,
    LogitDifference,
    LogOddsDifference,
    Projection,
    Score,
)
from subaudit.engine.span import BASES, choose_basis, span_basis
from subaudit.engine.streams import RunStreams, draw_step
from subaudit.engine.training import Observer, TrainResult, train

__all__ = [
    "BASES",
    "BATCHINGS",
    "INPUT_SCORES",
    "MIN_CHUNK",
    "OPTIMIZERS",
    "MLP",
    "Canary",
    "Coordinates",
    "DPConfig",
    "GradientCanary",
    "InputCanaries",
    "InputCanary",
    "LogOddsDifference",
    "LogitDifference",
    "Observer",
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
