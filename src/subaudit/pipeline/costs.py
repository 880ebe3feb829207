"""What each computing job of the workflow costs, for its SLURM requests (importable without
torch: the workflow reads it while Snakemake parses). Every model gives the job's modelled
seconds on its device, its memory and its output from its setting and per-unit costs measured
on a named machine; :func:`subaudit.job_requests.job_request` turns them into requests (a
``runtime`` with its margin, the estimate itself as ``expected_s``, ``out_kb``).

Training (``train_shard``, ``train_target``, ``utility``, ``one_run``, and the non-private
``reference``): a job trains ``runs`` models of layer ``sizes`` for ``steps`` steps each, a
Poisson batch of expected size ``q x records`` a step. Its time is modelled per model-step (one
run's step): a fixed cost per layer (sampling, noise, bookkeeping), plus a cost per example and
parameter of the expected batch (the per-example products and their clipping), with per-unit
costs measured by device kind (:data:`ENGINE_COSTS`); its memory is the engine's budget
(``natural.memory_mb``, which the engine keeps to) and the process's own.

The deep-network jobs (``deep_audit``, ``deep_pretrain``, ``deep_canaries``): examples at the
network's measured Opacus rate (:data:`NETWORK_COSTS`), and the metagradient proxy's unroll.

Features (``features``): the backbone's multiply-accumulates per record at the measured rate
(:class:`subaudit.data.backbones.Backbone`). Crafting (``craft``): the model-steps a scenario's
crafting trains (:attr:`subaudit.scenarios.Scenario.crafting_work`; most scenarios craft in
seconds). S1 (``simulate_s1``): its runs' paths, at a measured rate per run and step.
Accounting (calibrations, the ratio grid): accountant evaluations at a measured rate.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from subaudit.data.backbones import BACKBONES
from subaudit.job_requests import UNMEASURED_GPU_MACS_PER_S, job_request
from subaudit.scenarios.deep_canaries import DEEP_KINDS
from subaudit.scenarios.deep_cases import case_setting
from subaudit.validation import check_choice

__all__ = ["ACCOUNTANT_EVALUATION_S", "BASE_MEMORY_MB", "BYTES_PER_EXAMPLE_PARAMETER", "CALIBRATION_EVALUATIONS",
           "CANARY_RECORD_BYTES", "ENGINE_COSTS", "FORWARD_BATCH", "FORWARD_VALUES_PER_INPUT", "NETWORK_COSTS",
           "NETWORK_NAMES", "PROCESS_MEMORY_MB", "S1_RUN_STEP_S", "SPAN_BELOW", "SPAN_EXTRA_ROWS", "UNIT_COSTS_S",
           "UNROLL_MEMORY_MARGIN", "EngineCost", "NetworkCost", "accountant_evaluation_seconds", "backbone_seconds",
           "accounting_job_resources", "audit_job_resources", "canaries_job_resources", "craft_job_resources",
           "features_job_resources", "metastep_seconds", "model_parameters", "model_step_seconds", "network_rate",
           "pretrain_job_resources", "reference_job_resources", "s1_seconds", "scores_bytes",
           "simulate_s1_job_resources", "trained_parameters", "training_job_resources", "unit_costs_job_resources"]


@dataclass(frozen=True)
class EngineCost:
    """Seconds per layer of a model-step, and per example x parameter of its expected batch, on
    one device kind, and where they were measured."""

    layer_step_s: float
    example_parameter_s: float
    measured: str


#: Per-unit costs by device kind (``cpu``: one thread, as a training job has; ``cuda``: a GPU).
ENGINE_COSTS: dict[str, EngineCost] = {
    "cpu": EngineCost(100e-6, 100e-12,
                      "one thread of a 2-core x86-64 VM (AMD EPYC, AVX-512) under the workflow's "
                      "MKL_CBWR=COMPATIBLE (2026-11-30, subaudit.pipeline.unit_costs): 320 runs of the "
                      "linear heads 1280-10 (q = 1, 0.25, 0.0625) and 384-2 (q = 1, 0.25) and the MLP "
                      "256-128-26 (DP-Adam, q = 0.25, 0.0625) ran 0.46 to 2.5 times what this models, "
                      "the default run's 178 training jobs modelled at 2 s or more 0.31 to 2.1 times; "
                      "the example x parameter cost was 30e-12 s before the workflow took MKL's "
                      "portable path, which made the dense heads 2.4-3.4 times slower"),
    "cuda": EngineCost(42e-6, 0.9e-12,
                       "one H100, fp32 (subaudit bench, code at 7860e35): 24k model-steps/s for the 768-10 "
                       "head at q = 1/16 of 500 records (the layer cost), 5.4k for the 600-128-100 MLP "
                       "(DP-Adam) at q = 0.25 of 5,000"),
}
#: Memory of a training process besides the engine's budget (Python, torch, the features).
PROCESS_MEMORY_MB = 2000


def model_parameters(sizes: Sequence[int]) -> int:
    """Weights and biases of a dense network of layer ``sizes`` (inputs, hidden..., classes)."""
    return sum((a + 1) * b for a, b in zip(sizes, sizes[1:]))


#: The engine trains a linear head by SGD in the span of what it sees (its records, a canary's
#: rows and score directions: at most :data:`SPAN_EXTRA_ROWS` beyond the records here) where that
#: has at most :data:`SPAN_BELOW` of its inputs (:mod:`subaudit.engine.span`; a test ties them).
SPAN_BELOW, SPAN_EXTRA_ROWS = 0.8, 4


def trained_parameters(sizes: Sequence[int], records: int, optimizer: str, span: bool = True) -> int:
    """The parameters a training's per-example work spans: a linear head trained by SGD in the
    span of its ``records`` where that is small enough (``span``: its canary and scores allow
    it, and nothing asks for the full parameters), else all of them."""
    if span and len(sizes) == 2 and optimizer == "sgd" and records + SPAN_EXTRA_ROWS <= SPAN_BELOW * sizes[0]:
        return (records + SPAN_EXTRA_ROWS + 1) * sizes[1]
    return model_parameters(sizes)


def model_step_seconds(sizes: Sequence[int], batch: float, device: str, parameters: int | None = None) -> float:
    """Modelled seconds of one model's step at expected batch ``batch`` on ``device`` (cpu, or
    any GPU kind: cuda), its per-example work over ``parameters`` (default: the model's)."""
    cost = ENGINE_COSTS["cpu" if device == "cpu" else "cuda"]
    parameters = model_parameters(sizes) if parameters is None else parameters
    return (len(sizes) - 1) * cost.layer_step_s + cost.example_parameter_s * batch * parameters


def scores_bytes(runs: int, scores_per_run: int) -> int:
    """A score file's bytes: each run's index, bit and ``scores_per_run`` float64 scores."""
    return runs * (8 * scores_per_run + 9)


def training_job_resources(sizes: Sequence[int], records: int, q: float, runs: int, steps: int,
                           device: str, memory_mb: int, scores_per_run: int = 1,
                           parameters: int | None = None) -> dict[str, int]:
    """``runtime`` (minutes) and ``mem_mb`` of a job that trains ``runs`` models of ``sizes`` for
    ``steps`` steps on ``records`` records at sample rate ``q`` (plus one canary) on ``device``
    (cpu, cuda or auto: auto asks for a GPU, so it is costed as one) within the engine's
    ``memory_mb``, its per-example work over ``parameters`` (:func:`trained_parameters`;
    default: all); ``expected_s``: the modelled seconds of the training, no margin; ``out_kb``:
    ``scores_per_run`` scores of each run."""
    check_choice(device, "device", ("cpu", "cuda", "auto"))
    return job_request(runs * steps * model_step_seconds(sizes, q * records + 1, device, parameters),
                       int(memory_mb) + PROCESS_MEMORY_MB, scores_bytes(runs, scores_per_run))


def _values_mb(values: float) -> float:
    """MB of ``values`` float32 numbers."""
    return 4 * values / 2**20


def reference_job_resources(sizes: Sequence[int], records: int, q: float, steps: int,
                            feature_values: int) -> dict[str, int]:
    """The non-private reference model (``reference``, on the CPU): one training of ``steps``
    steps at sample rate ``q`` (1: full batch) at the engine's per-unit costs (a non-private step
    computes no per-example gradients, so this bounds it), holding the features file's
    ``feature_values`` twice (read, and as tensors) besides the process; it writes the model."""
    return job_request(steps * model_step_seconds(sizes, q * records + 1, "cpu"),
                       PROCESS_MEMORY_MB + 2 * _values_mb(feature_values), 4 * model_parameters(sizes))


#: Records a features job passes through its backbone at once, and float32 values of working
#: memory (activations) per input value of such a batch.
FORWARD_BATCH, FORWARD_VALUES_PER_INPUT = 64, 16


def backbone_seconds(backbone: str, records: int, resolution: int, device: str) -> float:
    """Modelled seconds of ``records`` records through ``backbone`` at ``resolution`` on
    ``device``: their multiply-accumulates at its measured CPU rate (one thread) or, on a GPU, at
    the assumed :data:`~subaudit.job_requests.UNMEASURED_GPU_MACS_PER_S`."""
    bb = BACKBONES[backbone]
    return records * bb.macs_at(resolution) / (bb.cpu_macs_per_s if device == "cpu" else UNMEASURED_GPU_MACS_PER_S)


def features_job_resources(backbone: str, records: int, resolution: int, device: str,
                           record_values: int) -> dict[str, int]:
    """Feature extraction of ``records`` records (``features``) by ``backbone`` (``"none"``:
    the values pass through) at ``resolution`` pixels (images) on ``device``: each record's
    multiply-accumulates (:meth:`~subaudit.data.backbones.Backbone.macs_at`) at the backbone's
    measured CPU rate (one thread, as the job has) or, on a GPU, the assumed
    :data:`~subaudit.job_requests.UNMEASURED_GPU_MACS_PER_S`; memory:
    the weights, the records (``record_values`` each as read) and their features twice, and a
    batch's activations, besides the process; it writes the features (float32)."""
    check_choice(device, "device", ("cpu", "cuda", "auto"))
    if backbone == "none":
        return job_request(0.0, PROCESS_MEMORY_MB + 2 * _values_mb(records * record_values),
                           4 * records * record_values)
    bb = BACKBONES[backbone]
    held = 2 * (bb.parameters + records * (bb.dim + record_values))
    working = FORWARD_BATCH * FORWARD_VALUES_PER_INPUT * bb.input_values(resolution)
    return job_request(backbone_seconds(backbone, records, resolution, device),
                       PROCESS_MEMORY_MB + _values_mb(held + working),
                       4 * records * bb.dim)


def craft_job_resources(work: tuple[float, float], sizes: Sequence[int], records: int,
                        feature_values: int) -> dict[str, int]:
    """A scenario's crafting (``craft``, on the CPU) from its ``work`` (model-steps over all
    ``records`` of the model of ``sizes``, and bytes of autograd graph kept at once;
    :attr:`subaudit.scenarios.Scenario.crafting_work`), at the engine's CPU per-unit costs;
    memory: the graph and the features file's ``feature_values`` twice, besides the process; it
    writes a pair of records."""
    model_steps, graph_bytes = work
    return job_request(model_steps * model_step_seconds(sizes, records + 1, "cpu"),
                       PROCESS_MEMORY_MB + graph_bytes / 2**20 + 2 * _values_mb(feature_values), 8 * sizes[0])


#: An accountant evaluation (an epsilon at one sigma, q and T, either adjacency) costs
#: ``ACCOUNTANT_EVALUATION_S * sqrt(T)`` seconds, times ``q ** -1/3`` when the steps are
#: subsampled (q < 1; finer privacy-loss grids at small q), and a calibration's root search
#: with its three evaluations after it (the S1 record: eps_S, eps_AR, group) costs
#: :data:`CALIBRATION_EVALUATIONS` of them. Measured (2026-11-30, one thread of a 2-core AMD
#: EPYC VM with AVX-512, warm process): an evaluation 0.008-0.021 s at q = 1 and T = 40, 0.016-0.029 at 500,
#: 0.036 at 2,500; 0.027, 0.045 and 0.12 at q = 0.25; 0.062, 0.18 and 0.37 at q = 0.0625; 0.047
#: and 0.14 at q = 0.01 (T = 40, 500); a calibration with its three evaluations 5 to 20 of them
#: (up to 67 at q = 1 and the smallest targets, where the group accountant's delta is tightest).
#: The earlier model (0.15 s an evaluation whatever q and T) overstated the tiny run's S1
#: calibrations 8 times.
ACCOUNTANT_EVALUATION_S, CALIBRATION_EVALUATIONS = 0.002, 15


def accountant_evaluation_seconds(q: float, steps: int) -> float:
    """Modelled seconds of one accountant evaluation at sampling rate ``q`` over ``steps``."""
    return ACCOUNTANT_EVALUATION_S * steps**0.5 * (1.0 if q >= 1 else q ** (-1 / 3))


def accounting_job_resources(q: float, steps: int, calibrations: int, evaluations: int) -> dict[str, int]:
    """An accounting job (``calibrate_s1``, ``calibrate_natural``, ``ratio_grid_row``) at sampling
    rate ``q`` over ``steps``: ``calibrations`` root searches for sigma (each with its record's
    evaluations) and ``evaluations`` more accountant evaluations
    (:func:`accountant_evaluation_seconds` each); the process's memory."""
    seconds = accountant_evaluation_seconds(q, steps) * (calibrations * CALIBRATION_EVALUATIONS + evaluations)
    return job_request(seconds, PROCESS_MEMORY_MB)


#: Seconds per run and step of the S1 simulation (its paths and, at each checkpoint t, a
#: log-sum-exp over t + 1 terms): 6.4e-8 and 7.4e-8 measured at R = 25,000, T = 500, q = 0.25
#: and 0.0625 on one thread of a 2-core Intel Xeon VM (AVX-512, 2026-11-29), 2.6e-8 at R = 10,000,
#: T = 500, q = 0.25 on an AMD EPYC one (2026-11-30): within 3x of this on both. At q = 1 the
#: score is in closed form (no mixture): a checkpoint costs a run-step's worth.
S1_RUN_STEP_S = 5e-8


def s1_seconds(audits: int, runs_per_world: int, checkpoints: Sequence[int], q: float) -> float:
    """Modelled seconds of ``audits`` S1 simulations of 2 x ``runs_per_world`` runs: each run
    the sum of its checkpoints in run-steps at sample rate ``q`` < 1 (one a checkpoint at q = 1)
    at :data:`S1_RUN_STEP_S`."""
    return audits * 2 * runs_per_world * sum(int(t) if q < 1 else 1 for t in checkpoints) * S1_RUN_STEP_S


def simulate_s1_job_resources(audits: int, runs_per_world: int, checkpoints: Sequence[int],
                              q: float) -> dict[str, int]:
    """``simulate_s1``: ``audits`` simulations (targets x repeats) of 2 x ``runs_per_world`` runs
    at sample rate ``q``, each costing the sum of its checkpoints in run-steps (one a checkpoint
    at q = 1) at :data:`S1_RUN_STEP_S`; memory: every run's score at every checkpoint (float64)
    and the paths, besides the process; it writes those scores."""
    runs = 2 * runs_per_world
    return job_request(s1_seconds(audits, runs_per_world, checkpoints, q),
                       PROCESS_MEMORY_MB + 8 * runs * (audits * len(checkpoints) + 4) / 2**20,
                       audits * scores_bytes(runs, len(checkpoints)))


@dataclass(frozen=True)
class NetworkCost:
    """What Opacus' DP-SGD of a network costs, measured at a reference input of ``pixels``
    values (channels x side x side): its trainable ``parameters`` there and examples per
    second by device kind (``cpu``: one thread, as a ``deep_audit`` job has), for the SLURM
    resources of an audit (:func:`audit_job_resources`)."""

    parameters: int
    pixels: int
    rate: Mapping[str, float]
    measured: str


#: The networks of :data:`subaudit.integrations.networks.NETWORKS` (which imports torch) and
#: their costs, readable while the workflow parses; a test holds the names and parameter
#: counts equal to the built networks'.
NETWORK_COSTS: dict[str, NetworkCost] = {
    "sample-convnet": NetworkCost(26_010, 784, {"cpu": 2_857.0, "cuda": 10_492.0},
                                  "cpu: one thread of a 2-core x86-64 VM, batch 64, 28x28x1 (2026-11-27); "
                                  "cuda: one H100, the default's audits at batch 256"),
    "wrn-16-4": NetworkCost(2_748_890, 3_072, {"cpu": 16.2, "cuda": 8_843.0},
                            "cpu: one thread of a 2-core x86-64 VM, batch 32, 32x32x3 (2026-11-27); "
                            "cuda: one H100, fp32, batch 1,024"),
}
NETWORK_NAMES: tuple[str, ...] = tuple(NETWORK_COSTS)
#: Bytes an example of a physical batch holds per parameter on the CPU (Opacus' per-example
#: gradient, float32, with room for the activations), and a job's memory besides.
BYTES_PER_EXAMPLE_PARAMETER, BASE_MEMORY_MB = 12, 3_000
#: Bytes of an audit's output per canary: its scores (loss, loss drop or update) as float64, its
#: bit and its index.
CANARY_RECORD_BYTES = 4 * 8 + 9


def network_rate(network: str, device: str, shape: tuple[int, ...]) -> float:
    """Examples per second of Opacus' DP-SGD of ``network`` on ``device`` (cpu, or any GPU)
    for images of ``shape``: its measured rate scaled by the input's values."""
    cost = NETWORK_COSTS[network]
    return cost.rate["cpu" if device == "cpu" else "cuda"] * cost.pixels / math.prod(shape)


def _training_job(deep: Mapping[str, Any], device: str, shape: tuple[int, ...], examples: int,
                  in_memory: int, out_bytes: float) -> dict[str, int]:
    """``runtime`` and ``mem_mb`` of a job that trains the deep phase's network on ``examples``
    images of ``shape`` on ``device``, holding ``in_memory`` of them at once: the examples at the
    network's measured Opacus rate (scaled by the input's size), with the margin of
    :func:`subaudit.job_requests.job_request`; :data:`BASE_MEMORY_MB`, and on the CPU the held images'
    per-example gradients; ``expected_s``, the training's seconds at that rate (no margin); and
    ``out_kb``, its ``out_bytes`` (:func:`subaudit.job_requests.job_request`)."""
    cost = NETWORK_COSTS[deep["network"]]
    pixels = math.prod(shape)
    kind = "cpu" if device == "cpu" else "cuda"
    rate = network_rate(deep["network"], device, shape)
    per_example = BYTES_PER_EXAMPLE_PARAMETER * cost.parameters * pixels / cost.pixels
    held = in_memory * per_example / 2**20 if kind == "cpu" else 0
    return job_request(examples / rate, BASE_MEMORY_MB + held, out_bytes)


def audit_job_resources(deep: Mapping[str, Any], case: str, device: str, shape: tuple[int, ...]
                        ) -> dict[str, int]:
    """The SLURM ``runtime`` (minutes) and ``mem_mb`` of one deep audit of ``case`` on
    ``device`` (cpu, or any other: a GPU) for images of ``shape`` (:func:`_training_job`): its
    examples (steps x batch x augmentations); on the CPU the memory of a physical batch's
    per-example gradients (``deep.physical_batch``, else the expected Poisson batch and 4
    standard deviations, times the augmentations), on a GPU host memory for the data only; its
    output: each canary's scores, bit and index (:data:`CANARY_RECORD_BYTES`), at most every
    canary of the case in one training."""
    c, sel = deep["cases"][case], case_setting(deep, case)
    views, batch = int(c.get("augmentations", 1)), int(c["batch"])
    physical = deep.get("physical_batch") or math.ceil(batch + 4 * math.sqrt(batch)) * views
    canaries = int(deep["canaries"]) * len([k for k in sel["kinds"] if not DEEP_KINDS[k].white_box])
    canaries += int(sel["gradient_canaries"]) if "gradient" in sel["kinds"] else 0
    return _training_job(deep, device, shape, int(c["steps"]) * batch * views, physical,
                         CANARY_RECORD_BYTES * canaries)


def pretrain_job_resources(deep: Mapping[str, Any], device: str, shape: tuple[int, ...]) -> dict[str, int]:
    """The ``runtime`` (minutes) and ``mem_mb`` of the fine-tuning case's pretraining
    (``deep_pretrain``) on ``device`` for images of ``shape`` (:func:`_training_job`): ``epochs``
    passes over the public images, a batch held at once; bounds, since a non-private step needs
    no per-example gradients; it writes the network's parameters."""
    pre = deep["pretrain"]
    return _training_job(deep, device, shape, int(pre["epochs"]) * int(deep["sizes"]["public"]), int(pre["batch"]),
                         4 * NETWORK_COSTS[deep["network"]].parameters)


#: Margin of the crafting job's memory over its modelled unroll (the model is within 5% at the
#: measured settings; this covers the graph's other tensors at other ones).
UNROLL_MEMORY_MARGIN = 1.25


def metastep_seconds(network: str, image: tuple[int, int, int], width: int, steps: int, batch: int,
                     device: str) -> float:
    """Modelled seconds of one metastep of the proxy ``network`` of ``width`` (``steps`` inner
    steps of ``batch`` images of shape ``image``, C x H x W) on ``device``: its forward
    multiply-accumulates at its measured CPU rate or the assumed GPU one."""
    from subaudit.scenarios.canary_optimisation import PROXY_NETWORKS

    net = PROXY_NETWORKS[network]
    rate = net.macs_per_second if device == "cpu" else UNMEASURED_GPU_MACS_PER_S
    return steps * batch * net.macs(image, width) / rate


def canaries_job_resources(deep: Mapping[str, Any], shape: tuple[int, ...], device: str) -> dict[str, int]:
    """The requests of the job that makes the input canary kinds (``deep_canaries``) for images
    of ``shape`` (H, W[, C]) on ``device``: with the metagradient kind, its ``metasteps`` at the
    proxy's measured CPU rate (on a GPU at the assumed
    :data:`~subaudit.job_requests.UNMEASURED_GPU_MACS_PER_S`), with the margin of
    :func:`subaudit.job_requests.job_request`, and its proxy's kept unroll (``steps`` inner steps
    of ``batch`` images, each the network's measured bytes per activation value, times
    :data:`UNROLL_MEMORY_MARGIN`) over :data:`BASE_MEMORY_MB` (on a GPU the unroll is the GPU's
    memory, not the host's); without it, the base. ``out_kb``: every input kind's pairs (float32
    images)."""
    from subaudit.scenarios.canary_optimisation import PROXY_NETWORKS

    meta = deep["metagradient"]
    inputs = len([k for k in deep["kinds"] if not DEEP_KINDS[k].white_box])
    pairs = inputs * int(deep["canaries"]) * 2 * 4 * math.prod(shape)
    if "metagradient" not in deep["kinds"]:
        return job_request(0.0, BASE_MEMORY_MB, pairs)
    net = PROXY_NETWORKS[meta["network"]]
    image = (shape[2] if len(shape) == 3 else 1, shape[0], shape[1])
    width, steps, batch = int(meta["width"]), int(meta["steps"]), int(meta["batch"])
    unroll = steps * batch * net.activations(image, width) * net.unroll_bytes
    seconds = int(meta["metasteps"]) * metastep_seconds(meta["network"], image, width, steps, batch, device)
    host = UNROLL_MEMORY_MARGIN * unroll / 2**20 if device == "cpu" else 0
    return job_request(seconds, BASE_MEMORY_MB + host, pairs)


#: Seconds the ``unit_costs`` job measures for (:func:`subaudit.pipeline.unit_costs.measure`:
#: about a second of work per cost, each after a warm-up; measured 20 to 30 s on one 2-core VM).
UNIT_COSTS_S = 60.0


def unit_costs_job_resources(network: str | None, batch: int = 32) -> dict[str, int]:
    """The ``unit_costs`` job: :data:`UNIT_COSTS_S`; memory: :data:`BASE_MEMORY_MB` and, with a
    deep ``network``, the per-example gradients of a CPU batch of ``batch`` at its reference
    input (Opacus' rate is measured there); it writes a small JSON."""
    held = 0.0 if network is None else batch * BYTES_PER_EXAMPLE_PARAMETER * NETWORK_COSTS[network].parameters / 2**20
    return job_request(UNIT_COSTS_S, BASE_MEMORY_MB + held)
