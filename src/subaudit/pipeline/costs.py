"""What the batched engine's DP training costs, for the requests of the jobs that run it
(importable without torch: the workflow reads it while Snakemake parses).

A training job (``train_shard``, ``train_target``, ``utility``) trains ``runs`` models of layer
``sizes`` for ``steps`` steps each, a Poisson batch of expected size ``q x records`` a step. Its
time is modelled per model-step (one run's step): a fixed cost per layer (sampling, noise,
bookkeeping), plus a cost per example and parameter of the expected batch (the per-example
products and their clipping), with per-unit costs measured by device kind
(:data:`ENGINE_COSTS`). :func:`training_job_resources` turns that into a SLURM ``runtime``:
the estimate :data:`RUNTIME_MARGIN` times over plus :data:`RUNTIME_FIXED_MIN` (loading,
scoring; machines of one kind differ by up to 2x); its memory is the engine's budget
(``natural.memory_mb``, which the engine keeps to) and the process's own.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

from subaudit.validation import check_choice

__all__ = ["ENGINE_COSTS", "EngineCost", "PROCESS_MEMORY_MB", "RUNTIME_FIXED_MIN", "RUNTIME_MARGIN",
           "model_parameters", "model_step_seconds", "training_job_resources"]


@dataclass(frozen=True)
class EngineCost:
    """Seconds per layer of a model-step, and per example x parameter of its expected batch, on
    one device kind, and where they were measured."""

    layer_step_s: float
    example_parameter_s: float
    measured: str


#: Per-unit costs by device kind (``cpu``: one thread, as a training job has; ``cuda``: a GPU).
ENGINE_COSTS: dict[str, EngineCost] = {
    "cpu": EngineCost(100e-6, 30e-12,
                      "one thread of a 2-core x86-64 VM (Intel Xeon, AVX-512): the CPU seconds of the "
                      "default run's 211 training shards (2026-11-29), above the slowest shard of each "
                      "experiment and q (linear heads 1280-10 and 384-2, the MLP 256-128-26)"),
    "cuda": EngineCost(42e-6, 0.9e-12,
                       "one H100, fp32 (subaudit bench, code at 7860e35): 24k model-steps/s for the 768-10 "
                       "head at q = 1/16 of 500 records (the layer cost), 5.4k for the 600-128-100 MLP "
                       "(DP-Adam) at q = 0.25 of 5,000"),
}
#: Margin of a job's time limit over its estimate, and the minutes it spends besides training.
RUNTIME_MARGIN, RUNTIME_FIXED_MIN = 3.0, 10
#: Memory of a training process besides the engine's budget (Python, torch, the features).
PROCESS_MEMORY_MB = 2000


def model_parameters(sizes: Sequence[int]) -> int:
    """Weights and biases of a dense network of layer ``sizes`` (inputs, hidden..., classes)."""
    return sum((a + 1) * b for a, b in zip(sizes, sizes[1:]))


def model_step_seconds(sizes: Sequence[int], batch: float, device: str) -> float:
    """Modelled seconds of one model's step at expected batch ``batch`` on ``device`` (cpu, or
    any GPU kind: cuda)."""
    cost = ENGINE_COSTS["cpu" if device == "cpu" else "cuda"]
    return (len(sizes) - 1) * cost.layer_step_s + cost.example_parameter_s * batch * model_parameters(sizes)


def training_job_resources(sizes: Sequence[int], records: int, q: float, runs: int, steps: int,
                           device: str, memory_mb: int) -> dict[str, int]:
    """``runtime`` (minutes) and ``mem_mb`` of a job that trains ``runs`` models of ``sizes`` for
    ``steps`` steps on ``records`` records at sample rate ``q`` (plus one canary) on ``device``
    (cpu, cuda or auto: auto asks for a GPU, so it is costed as one) within the engine's
    ``memory_mb``; ``expected_s``: the modelled seconds of the training, no margin."""
    check_choice(device, "device", ("cpu", "cuda", "auto"))
    seconds = runs * steps * model_step_seconds(sizes, q * records + 1, device)
    return {"runtime": RUNTIME_FIXED_MIN + math.ceil(RUNTIME_MARGIN * seconds / 60),
            "mem_mb": int(memory_mb) + PROCESS_MEMORY_MB, "expected_s": math.ceil(seconds)}
