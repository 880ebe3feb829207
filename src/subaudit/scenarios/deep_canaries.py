"""Canary kinds for one-run audits of deep networks (a registry, :data:`DEEP_KINDS`).

Every input kind makes ``m`` canary pairs ``(z_i, z'_i)`` from held-out images (never in
the training set otherwise), as ``x`` (m, 2, C, H, W) float32 in [0, 1] and ``y`` (m, 2)
int64; the games of :mod:`subaudit.integrations.audit` insert ``z_i``, or ``z'_i``, or
neither. The white-box kind has no records: the audit adds Dirac gradients inside the DP
optimiser's step.

``random``
    held-out images with their own labels (Steinke et al. 2023; Mahloujifar et al. 2024).
``mislabeled``
    held-out images, each with another label drawn uniformly (Nasr et al. 2023; Steinke et
    al. 2023): records the model can only fit by memorising them.
``metagradient``
    the mislabeled kind's records (fresh images) optimised as one set by metagradient
    descent through non-private SGD training of a proxy network (a small CNN or ResNet-9;
    :mod:`subaudit.scenarios.canary_optimisation`, the canary-optimisation paper's
    Algorithm 5), then transferred to the audited DP training.
``gradient``
    white-box Dirac canaries ``+-C e_j`` on ``m`` parameter coordinates, scored by the
    coordinate's total update (dpsgd-auditbench's white-box step).

Adding a kind is a function and a :class:`DeepKind` entry. Torch is imported inside the
functions, so the registry loads while the workflow parses.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np

from subaudit.job_requests import UNMEASURED_GPU_MACS_PER_S, job_request
from subaudit.seeding import derive_seed
from subaudit.validation import ParameterError, check_choice, check_count

if TYPE_CHECKING:
    import torch

__all__ = ["CANARY_RECORD_BYTES", "CASE_SELECTIONS", "CASES", "DEEP_KINDS", "NETWORK_COSTS", "NETWORK_NAMES",
           "PRECISIONS", "PROXY_RECORDS", "SCORES", "TRAINING_KEYS", "TRAININGS", "audit_job_resources",
           "canaries_job_resources", "case_audits", "case_setting", "case_training", "case_trainings", "DeepKind",
           "group_canaries", "make_pairs", "NetworkCost", "Pairs", "pretrain_job_resources", "training_groups"]

#: Black-box scores of a canary record under the released model (higher: more likely
#: inserted): ``"loss"`` is minus its final cross-entropy; ``"loss-drop"`` its loss at
#: initialisation minus its final loss (as public one-run code scores). Gradient canaries
#: are scored by their coordinate's update instead.
SCORES: tuple[str, ...] = ("loss", "loss-drop")
#: The deep-network cases: trained from scratch, or fine-tuned from a pretrained network.
CASES: dict[str, str] = {
    "scratch": "DP-SGD from the network's random initialisation",
    "finetune": "DP-SGD from the network pretrained on the public images",
    "gap": "DP-SGD from scratch where eps_S is well above eps_AR (full batch, few steps): the substitute "
           "gap in one training",
}
#: What a case may choose for its own trainings instead of the deep phase's (``deep.cases.<case>``
#: beside its training settings): which kinds and games it audits, how many repeats (of the
#: white-box kinds' own trainings too), and its gradient canaries and their scores.
CASE_SELECTIONS: tuple[str, ...] = ("kinds", "games", "repeats", "white_box_repeats", "gradient_canaries",
                                    "gradient_scores")
#: A case's DP-SGD settings (:class:`subaudit.integrations.deep.Training`).
#: Arithmetic of the deep phase's DP trainings (params.yaml ``deep.precision``). A GPU's rate
#: grows with the narrower ones; the audit stays valid (the noise and clipping are Opacus',
#: in float32 parameters), only its numbers round differently.
PRECISIONS: dict[str, str] = {
    "fp32": "float32 throughout (the default; the same numbers on every machine of one device kind)",
    "tf32": "TF32 matrix products and convolutions on a GPU (float32 on the CPU)",
    "bf16": "the forward in bfloat16 (autocast; the loss, per-example gradients' clipping, noise and "
            "parameters in float32)",
}
TRAINING_KEYS: tuple[str, ...] = ("steps", "batch", "lr", "momentum", "noise_multiplier", "clip", "augmentations")


def case_setting(deep: Mapping[str, Any], case: str) -> dict[str, Any]:
    """What ``case`` audits (:data:`CASE_SELECTIONS`): the case's own choice where it makes one
    (not null: a preset nulls a choice it takes back), else the deep phase's (``deep`` is
    params.yaml's ``deep``)."""
    own = deep["cases"][case]
    return {key: deep[key] if own.get(key) is None else own[key] for key in CASE_SELECTIONS}


def case_training(deep: Mapping[str, Any], case: str) -> dict[str, Any]:
    """The DP-SGD settings of ``case`` (:data:`TRAINING_KEYS`), without its selections."""
    own = deep["cases"][case]
    return {key: own[key] for key in TRAINING_KEYS if key in own}


def case_audits(deep: Mapping[str, Any]) -> list[tuple[str, str, str, int]]:
    """Every training of the deep phase as (case, game, group, repeat): per case its games,
    its trainings' groups (``deep.trainings`` over its kinds) and its repeats: a white-box
    kind's training apart from the input kinds' repeats ``white_box_repeats`` times (null:
    ``repeats``); a case that audits white-box kinds only keeps its ``repeats``."""
    out = []
    for case in deep["cases"]:
        sel = case_setting(deep, case)
        for game in sel["games"]:
            for group in training_groups(sel["kinds"], deep["trainings"]):
                repeats = sel["repeats"]
                apart = group != ALL and group_canaries(group, sel["kinds"]) == ([], True)
                if apart and sel["white_box_repeats"] is not None:
                    repeats = sel["white_box_repeats"]
                out += [(case, game, group, repeat) for repeat in range(int(repeats))]
    return out


def case_trainings(deep: Mapping[str, Any]) -> dict[str, int]:
    """The DP trainings of each case (:func:`case_audits`, counted), every case named."""
    counts = Counter(case for case, *_ in case_audits(deep))
    return {case: counts[case] for case in deep["cases"]}


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


def _training_job(deep: Mapping[str, Any], device: str, shape: tuple[int, ...], examples: int,
                  in_memory: int, out_bytes: float) -> dict[str, int]:
    """``runtime`` and ``mem_mb`` of a job that trains the deep phase's network on ``examples``
    images of ``shape`` on ``device``, holding ``in_memory`` of them at once: the examples at the
    network's measured Opacus rate (scaled by the input's size), with the margin of
    :func:`subaudit.job_requests.job_request`; :data:`BASE_MEMORY_MB`, and on the CPU the held images'
    per-example gradients; ``expected_s``, the training's seconds at that rate (no margin); and
    ``out_kb``, its ``out_bytes`` (:func:`subaudit.job_requests.job_request`)."""
    cost = NETWORK_COSTS[deep["network"]]
    pixels = int(np.prod(shape))
    kind = "cpu" if device == "cpu" else "cuda"
    rate = cost.rate[kind] * cost.pixels / pixels
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
    physical = deep.get("physical_batch") or int(np.ceil(batch + 4 * np.sqrt(batch))) * views
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
    pairs = inputs * int(deep["canaries"]) * 2 * 4 * int(np.prod(shape))
    if "metagradient" not in deep["kinds"]:
        return job_request(0.0, BASE_MEMORY_MB, pairs)
    net = PROXY_NETWORKS[meta["network"]]
    image = (shape[2] if len(shape) == 3 else 1, shape[0], shape[1])
    width, steps, batch = int(meta["width"]), int(meta["steps"]), int(meta["batch"])
    unroll = steps * batch * net.activations(image, width) * net.unroll_bytes
    rate = net.macs_per_second if device == "cpu" else UNMEASURED_GPU_MACS_PER_S
    seconds = int(meta["metasteps"]) * steps * batch * net.macs(image, width) / rate
    host = UNROLL_MEMORY_MARGIN * unroll / 2**20 if device == "cpu" else 0
    return job_request(seconds, BASE_MEMORY_MB + host, pairs)


#: What the metagradient kind's proxy may train on (params.yaml ``deep.metagradient.base_from``):
#: the public images, or the audited training's own non-canary records (the paper's choice).
PROXY_RECORDS: tuple[str, ...] = ("public", "train")


@dataclass(frozen=True)
class Pairs:
    """``m`` canary pairs: images ``x`` (m, 2, C, H, W) in [0, 1] and labels ``y`` (m, 2)."""

    x: torch.Tensor
    y: torch.Tensor

    @property
    def count(self) -> int:
        return int(self.x.shape[0])


def _pick(x: torch.Tensor, count: int, seed: int, what: str) -> np.ndarray:
    """2 ``count`` distinct pool rows (a seeded choice)."""
    need = 2 * check_count(count, "canaries")
    if need > x.shape[0]:
        raise ParameterError("canaries", count, f"at most {x.shape[0] // 2} pairs (the pool has {x.shape[0]} images)")
    return np.random.default_rng(derive_seed(seed, "deep-canaries", what)).choice(x.shape[0], size=need, replace=False)


def _wrong_labels(y: torch.Tensor, classes: int, seed: int) -> torch.Tensor:
    import torch

    rng = np.random.default_rng(derive_seed(seed, "deep-canaries", "wrong-labels"))
    shift = torch.from_numpy(rng.integers(1, classes, size=y.shape[0]))
    return (y + shift) % classes


def _as_pairs(x: torch.Tensor, y: torch.Tensor) -> Pairs:
    m = x.shape[0] // 2
    return Pairs(x.reshape(m, 2, *x.shape[1:]).contiguous(), y.reshape(m, 2).contiguous())


def random_pairs(pool_x: torch.Tensor, pool_y: torch.Tensor, count: int, *, classes: int, seed: int,
                 **_: Any) -> Pairs:
    """Held-out images with their own labels."""
    rows = _pick(pool_x, count, seed, "random")
    return _as_pairs(pool_x[rows], pool_y[rows])


def mislabeled_pairs(pool_x: torch.Tensor, pool_y: torch.Tensor, count: int, *, classes: int, seed: int,
                     **_: Any) -> Pairs:
    """Held-out images, each with another label drawn uniformly."""
    rows = _pick(pool_x, count, seed, "mislabeled")
    return _as_pairs(pool_x[rows], _wrong_labels(pool_y[rows], classes, seed))


def metagradient_pairs(pool_x: torch.Tensor, pool_y: torch.Tensor, count: int, *, classes: int, seed: int,
                       base: tuple[torch.Tensor, torch.Tensor], options: Mapping[str, Any],
                       progress: bool = False, device: str = "cpu", **_: Any) -> Pairs:
    """Mislabeled records optimised by metagradient descent through a proxy's non-private
    training on the non-canary records ``base`` (on ``device``); ``options``: ``metasteps``,
    ``canary_lr`` and the :class:`~subaudit.scenarios.canary_optimisation.Proxy` fields."""
    from subaudit.scenarios.canary_optimisation import Proxy, optimise_canaries

    rows = _pick(pool_x, count, seed, "metagradient")
    x0, y0 = pool_x[rows], _wrong_labels(pool_y[rows], classes, seed)
    proxy = Proxy(**{k: v for k, v in options.items() if k in Proxy.__dataclass_fields__})
    out = optimise_canaries(x0, y0, base[0], base[1], classes=classes, metasteps=int(options["metasteps"]),
                            canary_lr=float(options["canary_lr"]), proxy=proxy,
                            seed=derive_seed(seed, "metagradient"), progress=progress, device=device)
    return _as_pairs(out.x, out.y)


@dataclass(frozen=True)
class DeepKind:
    """A canary kind of the deep-network audits: how its pairs are made (None: white-box);
    ``optimised``: ``make`` also takes the non-canary records to optimise against, the
    optimisation's options, a progress switch and the device it optimises on (``base``,
    ``options``, ``progress``, ``device``)."""

    name: str
    label: str
    make: Callable[..., Pairs] | None
    description: str
    optimised: bool = False

    @property
    def white_box(self) -> bool:
        return self.make is None


#: Deep-network canary kinds by name (params.yaml ``deep.kinds`` takes names from here).
DEEP_KINDS: dict[str, DeepKind] = {k.name: k for k in (
    DeepKind("random", "random", random_pairs, "held-out images with their own labels"),
    DeepKind("mislabeled", "mislabeled", mislabeled_pairs, "held-out images with another label"),
    DeepKind("metagradient", "metagradient", metagradient_pairs,
             "mislabeled records optimised through a proxy network's non-private training", optimised=True),
    DeepKind("gradient", "gradient (white-box)", None, "Dirac canaries +-C e_j inside the DP step"),
)}


#: How an audit's canary kinds share its DP trainings (params.yaml ``deep.trainings``):
#: ``together``, every kind in each training (the kinds compared on the same trainings);
#: ``white-box-apart``, the input kinds together and the white-box gradient canaries in a
#: training of their own (their Dirac updates on thousands of coordinates cost the network
#: accuracy, which would weaken the input kinds beside them); ``each``, one kind per training
#: (Table 2 of the canary-optimisation paper).
TRAININGS: dict[str, str] = {
    "together": "every kind in each training",
    "white-box-apart": "the input kinds in one training, the white-box gradient canaries in another",
    "each": "one kind per training (as Table 2)",
}
#: The group of a training holding every kind, and of one holding every input kind.
ALL, INPUTS = "all", "inputs"


def training_groups(kinds: list[str] | tuple[str, ...], trainings: str) -> list[str]:
    """The trainings of one audit, by group name: ``all`` (every kind; also when only one side,
    input or white-box, is audited under ``white-box-apart``), ``inputs`` and the white-box
    kinds' own names, or each kind's name."""
    how = check_choice(trainings, "deep.trainings", TRAININGS)
    if how == "each":
        return list(kinds)
    white = [k for k in kinds if DEEP_KINDS[k].white_box]
    if how == "together" or not white or len(white) == len(kinds):
        return [ALL]
    return [INPUTS, *white]


def group_canaries(group: str, kinds: list[str] | tuple[str, ...]) -> tuple[list[str], bool]:
    """The input kinds a training of ``group`` holds and whether it holds the white-box gradient
    canaries."""
    inputs = [k for k in kinds if not DEEP_KINDS[k].white_box]
    white = any(DEEP_KINDS[k].white_box for k in kinds)
    if group == ALL:
        return inputs, white
    if group == INPUTS:
        return inputs, False
    entry = DEEP_KINDS[check_choice(group, "group", DEEP_KINDS)]
    return ([] if entry.white_box else [group]), entry.white_box


def make_pairs(kind: str, pool_x: torch.Tensor, pool_y: torch.Tensor, count: int, *, classes: int, seed: int,
               **extra: Any) -> Pairs:
    """The ``count`` canary pairs of an input ``kind`` from the held-out ``pool``."""
    entry = DEEP_KINDS[check_choice(kind, "kind", DEEP_KINDS)]
    if entry.make is None:
        raise ParameterError("kind", kind, "an input kind (" + ", ".join(k for k, e in DEEP_KINDS.items()
                                                                    if not e.white_box) + ")")
    return entry.make(pool_x, pool_y, count, classes=classes, seed=seed, **extra)
