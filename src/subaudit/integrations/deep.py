"""One-run audits of deep networks trained with Opacus: the workflow's experiments.

Two cases, as the canary-optimisation paper (its Tables 1 and 2):

* ``scratch``: a network trained from its random initialisation with DP-SGD;
* ``finetune``: the same network pretrained without privacy on public images (disjoint
  from the private ones, as the paper pretrains on CINIC-10 without CIFAR-10), then every
  layer fine-tuned with DP-SGD.

One audit is one DP training (Opacus' ``make_private``, Poisson sampling) whose data hold
the canaries of every input kind of :data:`subaudit.scenarios.deep_canaries.DEEP_KINDS` (each kind
its own ``m`` slots, drawn from disjoint held-out images) and whose optimiser holds ``m``
white-box gradient canaries: the kinds are compared on the same training, so their
difference is not the noise of separate runs. Each kind's slots are a one-run audit of their
own (the other canaries are part of the mechanism), bounded by each procedure of
:mod:`subaudit.estimation.procedures` from each score of
:data:`subaudit.integrations.audit.SCORES` (gradient canaries: their update).
"""

from __future__ import annotations

import contextlib
import json
import time
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import torch
from opacus import PrivacyEngine
from torch.nn import functional as F
from torch.utils.data import DataLoader, TensorDataset
from tqdm.auto import tqdm

from subaudit.artifacts import read_npz, write_npz
from subaudit.data import Dataset, load
from subaudit.devices import fixed_threads
from subaudit.estimation.procedures import ScoreSet, bound_rows
from subaudit.integrations.audit import OneRunAudit
from subaudit.integrations.networks import build
from subaudit.scenarios.deep_canaries import DEEP_KINDS, PROXY_RECORDS, Pairs, make_pairs
from subaudit.scenarios.deep_cases import CASES, PRECISIONS, case_training, case_trainings
from subaudit.seeding import derive_seed
from subaudit.validation import Diverged, ParameterError, check_choice, check_count, check_memory

__all__ = ["DeepAudit", "DeepData", "PrivateTraining", "Training", "accuracy", "audit_examples", "audit_rows",
           "augment", "average_augmentations", "load_audit", "load_canaries", "load_data", "load_weights",
           "make_canaries", "poisson_batches", "pretrain", "run_audit", "save_audit", "save_canaries", "save_weights",
           "split_images", "train_private", "training_rate"]


@dataclass(frozen=True)
class DeepData:
    """Disjoint image sets (float32 (N, C, H, W) in [0, 1], int64 labels): the private
    training set, the held-out canary pool, public images (pretraining and the
    metagradient proxy) and a test set."""

    train: tuple[torch.Tensor, torch.Tensor]
    pool: tuple[torch.Tensor, torch.Tensor]
    public: tuple[torch.Tensor, torch.Tensor]
    test: tuple[torch.Tensor, torch.Tensor]
    classes: int

    @property
    def shape(self) -> tuple[int, int]:
        """(channels, side) of the images."""
        return int(self.train[0].shape[1]), int(self.train[0].shape[2])


def _images(x: np.ndarray) -> torch.Tensor:
    t = torch.from_numpy(np.ascontiguousarray(x)).float() / 255.0
    return t.unsqueeze(1) if t.ndim == 3 else t.permute(0, 3, 1, 2).contiguous()


def split_images(ds: Dataset, sizes: Mapping[str, int], seed: int) -> DeepData:
    """Disjoint ``train``, ``pool``, ``public`` and ``test`` rows of an image dataset (a seeded
    permutation; sizes by name)."""
    if ds.family != "image":
        raise ParameterError("source", ds.source, "an image source")
    names = ("train", "pool", "public", "test")
    counts = [check_count(sizes[k], f"sizes.{k}") for k in names]
    if sum(counts) > len(ds):
        raise ParameterError("sizes", dict(sizes), f"at most {len(ds)} images in all ({ds.source})")
    order = np.random.default_rng(derive_seed(seed, "deep-split", ds.source)).permutation(len(ds))
    parts, start = {}, 0
    for k, c in zip(names, counts):
        rows = np.sort(order[start:start + c])
        parts[k] = (_images(ds.x[rows]), torch.from_numpy(ds.y[rows]))
        start += c
    return DeepData(classes=ds.classes, **parts)


def load_data(archive: str, source: str, sizes: Mapping[str, int], seed: int) -> DeepData:
    """The deep-network audits' image sets from a source's verified archive."""
    return split_images(load(source, archive), sizes, seed)


CANARY_THREADS = 2
"""Torch threads the optimised canaries are made with, whatever the process was given: their
pixels depend on it (a reduction's order in the proxy's gradients; 1 thread moved pixels of the
default run's by up to 1.0), so a job given one core (``snakemake --cores 1``) makes the
canaries of a job given two."""


def make_canaries(data: DeepData, kinds: Sequence[str], count: int, *, seed: int,
                  metagradient: Mapping[str, Any] | None = None, progress: bool = False,
                  device: str = "cpu") -> dict[str, Pairs]:
    """Each input kind's ``count`` pairs, from its own block of ``2 count`` pool images (the
    kinds share no image); optimised kinds (``DeepKind.optimised``) optimise on ``device`` with
    the options ``metagradient`` against the images its ``base_from`` names: ``"public"`` (the
    public images) or ``"train"`` (the audited training's own non-canary records, as the paper)."""
    pool_x, pool_y = data.pool
    need = 2 * check_count(count, "canaries")
    if need * len(kinds) > len(pool_y):
        raise ParameterError("sizes.pool", len(pool_y), f"at least {need * len(kinds)} images for {len(kinds)} kinds")
    out = {}
    for k, kind in enumerate(kinds):
        block = slice(k * need, (k + 1) * need)
        optimised = getattr(DEEP_KINDS.get(kind), "optimised", False)
        extra = {"base": _proxy_records(data, metagradient), "options": metagradient,
                 "progress": progress, "device": device} if optimised else {}
        with fixed_threads(CANARY_THREADS) if optimised else contextlib.nullcontext():
            out[kind] = make_pairs(kind, pool_x[block], pool_y[block], count, classes=data.classes,
                                   seed=derive_seed(seed, "deep-kind", kind), **extra)
    return out


def _proxy_records(data: DeepData, options: Mapping[str, Any] | None) -> tuple[torch.Tensor, torch.Tensor]:
    """The non-canary records an optimised kind's proxy trains on (``options["base_from"]``)."""
    if options is None:
        raise ParameterError("metagradient", None, "the optimisation's options")
    source = check_choice(options.get("base_from"), "metagradient.base_from", PROXY_RECORDS)
    return data.public if source == "public" else data.train


def save_canaries(path: str, pairs: Mapping[str, Pairs]) -> None:
    """Every kind's pairs in one checksummed npz (``<kind>_x``, ``<kind>_y``)."""
    arrays = {}
    for kind, p in pairs.items():
        arrays[f"{kind}_x"], arrays[f"{kind}_y"] = p.x.numpy(), p.y.numpy()
    write_npz(path, **arrays)


def load_canaries(path: str) -> dict[str, Pairs]:
    """What :func:`save_canaries` wrote, kinds in their saved order."""
    arrays = read_npz(path)
    kinds = [k[:-2] for k in arrays if k.endswith("_x")]
    return {k: Pairs(torch.from_numpy(arrays[f"{k}_x"]), torch.from_numpy(arrays[f"{k}_y"])) for k in kinds}


def save_weights(path: str, state: Mapping[str, torch.Tensor]) -> None:
    """A network's state dict as a checksummed npz (byte-identical for identical weights)."""
    write_npz(path, **{k: v.detach().cpu().numpy() for k, v in state.items()})


def load_weights(path: str) -> dict[str, torch.Tensor]:
    """What :func:`save_weights` wrote."""
    return {k: torch.from_numpy(v) for k, v in read_npz(path).items()}


def accuracy(model: torch.nn.Module, x: torch.Tensor, y: torch.Tensor, batch: int = 1024) -> float:
    """Share of ``x`` that ``model`` classifies right."""
    was = model.training
    model.eval()
    try:
        with torch.no_grad():
            right = sum(int((model(x[k:k + batch]).argmax(1) == y[k:k + batch]).sum())
                        for k in range(0, len(y), batch))
    finally:
        model.train(was)
    return right / len(y)


def pretrain(network: str, data: DeepData, *, epochs: int, batch: int, lr: float, seed: int,
             device: str = "cpu", progress: bool = False) -> dict[str, torch.Tensor]:
    """Non-private pretraining of ``network`` on the public images (SGD with momentum 0.9) on
    ``device``: the starting point of the ``finetune`` case (weights returned on the CPU)."""
    channels, side = data.shape
    model = build(network, classes=data.classes, channels=channels, size=side,
                  seed=derive_seed(seed, "pretrain-init")).to(device)
    x, y = (t.to(device) for t in data.public)
    gen = torch.Generator().manual_seed(derive_seed(seed, "pretrain-order"))
    opt = torch.optim.SGD(model.parameters(), lr=lr, momentum=0.9)
    for _ in tqdm(range(check_count(epochs, "epochs")), desc="pretrain", disable=not progress):
        order = torch.randperm(len(y), generator=gen)
        for k in range(0, len(y), batch):
            rows = order[k:k + batch].to(device)
            opt.zero_grad()
            F.cross_entropy(model(x[rows]), y[rows]).backward()
            opt.step()
    return {k: v.detach().cpu().clone() for k, v in model.state_dict().items()}


def augment(x: torch.Tensor, copies: int, generator: torch.Generator, pad: int = 4) -> torch.Tensor:
    """``copies`` augmentations of each image of ``x`` (B, C, H, W), in record order (B * copies, C,
    H, W): a random crop of the zero-padded image (``pad`` pixels each side) and a horizontal flip
    with probability 1/2, the standard CIFAR-10 augmentation of De et al. 2022; drawn from
    ``generator``."""
    b, _, h, w = x.shape
    n = b * check_count(copies, "augmentations")
    padded = torch.nn.functional.pad(x, (pad, pad, pad, pad)).repeat_interleave(copies, dim=0)
    dy = torch.randint(0, 2 * pad + 1, (n,), generator=generator)
    dx = torch.randint(0, 2 * pad + 1, (n,), generator=generator)
    flip = torch.rand(n, generator=generator) < 0.5
    rows = (dy[:, None] + torch.arange(h)[None, :]).to(x.device)        # (n, h)
    cols = (dx[:, None] + torch.arange(w)[None, :]).to(x.device)        # (n, w)
    cols = torch.where(flip.to(x.device)[:, None], cols.flip(1), cols)
    index = torch.arange(n, device=x.device)[:, None, None]
    out = padded.permute(0, 2, 3, 1)[index, rows[:, :, None], cols[:, None, :]]  # (n, h, w, C)
    return out.permute(0, 3, 1, 2).contiguous()


def average_augmentations(params: Any, copies: int) -> None:
    """Augmentation multiplicity (De et al. 2022) inside Opacus: after a backward pass over
    ``copies`` augmentations of each record (in record order, :func:`augment`), replace each
    parameter's per-sample gradients (``p.grad_sample``, B * copies rows) by their mean over
    each record's copies (B rows), so that the DP optimiser clips one averaged gradient per
    record. Call between ``loss.backward()`` and ``optimizer.step()``."""
    k = check_count(copies, "augmentations")
    for p in params:
        g = getattr(p, "grad_sample", None)
        if g is not None and k > 1:
            p.grad_sample = g.reshape(g.shape[0] // k, k, *g.shape[1:]).mean(1)


@dataclass(frozen=True)
class Training:
    """The DP training of one audit: Opacus' settings (params.yaml ``deep.cases.<case>``);
    ``augmentations`` is the augmentation multiplicity K (1: none); ``physical_batch`` the most
    records one forward and backward pass holds (``deep.physical_batch``; None: the whole
    Poisson batch); ``precision`` its arithmetic (``deep.precision``, :data:`PRECISIONS`)."""

    steps: int
    batch: int
    lr: float
    momentum: float
    noise_multiplier: float
    clip: float
    augmentations: int = 1
    physical_batch: int | None = None
    precision: str = "fp32"


@contextlib.contextmanager
def arithmetic(precision: str, device: str) -> Iterator[None]:
    """The arithmetic of ``precision`` (:data:`~subaudit.scenarios.deep_cases.PRECISIONS`) for what runs
    inside: TF32 products on a GPU (restored after), or a bfloat16 autocast of the forward."""
    check_choice(precision, "precision", PRECISIONS)
    cuda = str(device).startswith("cuda")
    if precision == "bf16":
        with torch.autocast("cuda" if cuda else "cpu", dtype=torch.bfloat16):
            yield
        return
    if precision == "tf32" and cuda:
        before = torch.backends.cuda.matmul.allow_tf32, torch.backends.cudnn.allow_tf32
        torch.backends.cuda.matmul.allow_tf32 = torch.backends.cudnn.allow_tf32 = True
        try:
            yield
        finally:
            torch.backends.cuda.matmul.allow_tf32, torch.backends.cudnn.allow_tf32 = before
        return
    yield


@dataclass(frozen=True)
class DeepAudit:
    """One audit: the scores (m, 2) and secret bits of each canary kind (scores by kind, then
    score), its training's history of (sigma, q, steps) for the accountant, a description
    (case, game, repeat, settings, test accuracy, examples processed) and the seconds of
    training (for logs only, never in versioned results)."""

    scores: dict[str, dict[str, np.ndarray]]
    bits: dict[str, np.ndarray]
    history: tuple[tuple[float, float, int], ...]
    info: dict[str, Any]
    seconds: float


@dataclass(frozen=True)
class PrivateTraining:
    """What :func:`train_private` leaves: Opacus' private model, optimiser (its gradient
    canaries' state), Poisson loader and engine (its accountant's history), and the records
    the training processed."""

    model: Any
    optimizer: Any
    loader: Any
    engine: PrivacyEngine
    examples: int


def poisson_batches(loader: Iterable[Any], steps: int) -> Iterator[Any]:
    """The first ``steps`` batches of ``loader``, epoch after epoch (Opacus' Poisson loader has
    no fixed length): after the last it draws one more, as a loop over epochs that stops at
    ``steps`` does, so the sampler's generator ends where it always has."""
    done = 0
    while done < steps:
        for batch in loader:
            if done == steps:
                return
            yield batch
            done += 1


def _clipped_step(model: Any, optimizer: Any, xb: torch.Tensor, yb: torch.Tensor, k: int, physical: int | None,
                  precision: str, device: str) -> None:
    """One DP-SGD step on the Poisson batch ``xb`` (``k`` views a record, adjacent): in physical
    batches of at most ``physical`` records, every one but the last a skipped step of Opacus'
    optimiser that only clips and sums its per-sample gradients."""
    records = len(yb) // k
    cuts = list(range(0, records, physical)) if physical and records > physical else [0]
    for j, start in enumerate(cuts):
        end = cuts[j + 1] if j + 1 < len(cuts) else records
        optimizer.zero_grad()          # keeps the clipped sum after a skipped step
        if j + 1 < len(cuts):
            optimizer.signal_skip_step(do_skip=True)
        rows = slice(start * k, end * k)
        with arithmetic(precision, device):
            logits = model(xb[rows].to(device))
        F.cross_entropy(logits.float(), yb[rows].to(device)).backward()
        average_augmentations(model.parameters(), k)
        optimizer.step()


def train_private(model: torch.nn.Module, audit: OneRunAudit, base: TensorDataset, training: Training, *,
                  seed: int, gradient: bool, device: str = "cpu", progress: bool = False) -> PrivateTraining:
    """Train ``model`` (on ``device``) with Opacus on ``audit.dataset(base)`` for
    ``training.steps`` Poisson batches at the rate ``training.batch / len(base)``, whatever the
    bits (:meth:`OneRunAudit.make_private`).

    With ``training.physical_batch``, a Poisson batch larger than it is processed in physical
    batches of at most that many records (all K views of a record in one): every pass but the
    last is a skipped step of Opacus' DP optimiser, which clips and sums its per-sample
    gradients and takes no step (what its ``BatchMemoryManager`` does), so the noise, the
    gradient canaries and the accountant's step come once per Poisson batch and the update
    equals the unsplit one to float rounding, in a memory bounded by the physical batch. (Not
    through ``BatchMemoryManager`` itself: it splits a batch into near-equal parts
    (``np.array_split``) where this cuts at the physical batch, so the clipped sums would add in
    another order and the deep phase's versioned results would change in their last bits; and
    the augmented views are drawn per Poisson batch, after the loader.)"""
    physical = None if training.physical_batch is None else check_count(training.physical_batch, "physical_batch")
    model.to(device)
    audit.start(model)
    engine = PrivacyEngine(accountant="prv")
    optimizer = torch.optim.SGD(model.parameters(), lr=training.lr, momentum=training.momentum)
    model, optimizer, loader = audit.make_private(
        engine, module=model, optimizer=optimizer, base=base, batch_size=training.batch,
        noise_multiplier=training.noise_multiplier, max_grad_norm=training.clip,
        generator=torch.Generator().manual_seed(derive_seed(seed, "dp-sampling")),
        noise_generator=torch.Generator(device=device).manual_seed(derive_seed(seed, "dp-noise")))
    if gradient:
        audit.attach(optimizer, loader)
    examples, k = 0, check_count(training.augmentations, "augmentations")
    views = torch.Generator().manual_seed(derive_seed(seed, "augmentations"))
    for xb, yb in tqdm(poisson_batches(loader, training.steps), total=training.steps, desc="DP training",
                       disable=not progress):
        examples += len(yb)
        if k > 1:
            xb, yb = augment(xb, k, views), yb.repeat_interleave(k)
        _clipped_step(model, optimizer, xb, yb, k, physical, training.precision, device)
    return PrivateTraining(model, optimizer, loader, engine, examples)


def run_audit(case: str, game: str, repeat: int, *, data: DeepData, pairs: Mapping[str, Pairs], network: str,
              training: Training, gradient_canaries: int, init: Mapping[str, torch.Tensor] | None,
              scores: Sequence[str], seed: int, group: str = "all", gradient_width: int = 1,
              gradient_scores: Sequence[str] = ("update",), device: str = "cpu", progress: bool = False) -> DeepAudit:
    """One audit: one DP training of ``network`` holding the canaries of ``pairs`` (its input
    kinds) and ``gradient_canaries`` white-box ones; their scores and secret bits kind by kind
    (bounds: :func:`audit_rows`, so that a change of delta, alpha or procedure retrains nothing).
    ``group`` names the training's canaries (:func:`subaudit.scenarios.deep_cases.training_groups`:
    "all", every kind together; "inputs", the input kinds; else the one kind it holds, as
    Table 2 trains them) and enters its seeds, so each group's trainings are its own.
    ``gradient_width`` > 1 makes the substitute game's gradient slots k-ary (``k = 2 **
    gradient_width`` values, :class:`~subaudit.integrations.audit.OneRunAudit`); the membership
    game's stay binary. ``gradient_scores``: the white-box scores the gradient canaries are read
    by (:data:`~subaudit.integrations.audit.GRADIENT_SCORES`)."""
    check_choice(case, "case", CASES)
    if (case == "finetune") != (init is not None):
        raise ParameterError("init", "given" if init is not None else None,
                             "pretrained weights for finetune, none for scratch")
    key = (case, game, int(repeat)) if group == "all" else (case, game, int(repeat), group)
    if not pairs and not gradient_canaries:
        raise ParameterError("pairs", {}, "some input canaries or gradient_canaries > 0")
    channels, side = data.shape
    model = build(network, classes=data.classes, channels=channels, size=side,
                  seed=derive_seed(seed, "deep-init", *key))
    if init is not None:
        model.load_state_dict(init)
    kinds = list(pairs)
    records = [((pairs[k].x[i, 0], pairs[k].y[i, 0]), (pairs[k].x[i, 1], pairs[k].y[i, 1]))
               for k in kinds for i in range(pairs[k].count)]
    audit = OneRunAudit(records, game=game, seed=derive_seed(seed, "deep-game", *key),
                        gradient_canaries=gradient_canaries,
                        gradient_width=gradient_width if game == "substitute" else 1)
    start = time.perf_counter()
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(derive_seed(seed, "deep-train", *key))
        trained = train_private(model, audit, TensorDataset(*data.train), training,
                                seed=derive_seed(seed, "deep-train", *key), gradient=gradient_canaries > 0,
                                device=device, progress=progress)
    model = trained.model
    seconds = time.perf_counter() - start
    setting = (f"deep.cases.{case} (lr {training.lr:g}, clip {training.clip:g}, noise multiplier "
               f"{training.noise_multiplier:g}; {game} game, canaries {group}, repeat {repeat})")
    hint = f"lower deep.cases.{case}.lr or clip"
    if not all(bool(torch.isfinite(p).all()) for p in model.parameters()):
        raise Diverged("the network's parameters", setting, hint)
    audit.verify(model, trained.loader)
    by_score = {s: audit.scores(model, s) for s in scores} if kinds else {}
    kept_scores: dict[str, dict[str, np.ndarray]] = {}
    kept_bits: dict[str, np.ndarray] = {}
    offset = 0
    for k in kinds:
        m = pairs[k].count
        kept_bits[k] = audit.bits[offset:offset + m]
        kept_scores[k] = {s: by_score[s][offset:offset + m] for s in scores}
        offset += m
    if gradient_canaries:
        kept_scores["gradient"] = {audit.gradient_score(s): audit.gradient_scores(trained.optimizer, s)
                                   for s in gradient_scores}
        kept_bits["gradient"] = audit.gradient_bits
    for k, by in kept_scores.items():
        for s, values in by.items():
            if not np.isfinite(values).all():
                raise Diverged(f"the {k} canaries' {s} scores", setting, hint)
    history = tuple((float(s), float(q), int(t)) for s, q, t in trained.engine.accountant.history)
    info = {"case": case, "game": game, "group": group, "repeat": int(repeat), "steps": training.steps,
            "noise_multiplier": training.noise_multiplier, "sample_rate": history[0][1],
            "test_accuracy": accuracy(model, data.test[0].to(device), data.test[1].to(device)),
            "examples": trained.examples, **({"precision": training.precision} if training.precision != "fp32" else {})}
    return DeepAudit(kept_scores, kept_bits, history, info, seconds)


def save_audit(path: str, audit: DeepAudit) -> None:
    """An audit's scores, bits, history and description as one checksummed npz."""
    arrays = {"history": np.asarray(audit.history, dtype=float), "info": np.asarray(json.dumps(audit.info))}
    for kind, by_score in audit.scores.items():
        arrays[f"{kind}.bits"] = audit.bits[kind]
        for score, values in by_score.items():
            arrays[f"{kind}.{score}"] = values
    write_npz(path, **arrays)


def load_audit(path: str) -> DeepAudit:
    """What :func:`save_audit` wrote (seconds are not saved: NaN)."""
    arrays = read_npz(path)
    scores: dict[str, dict[str, np.ndarray]] = {}
    bits: dict[str, np.ndarray] = {}
    for name, values in arrays.items():
        if "." not in name:
            continue
        kind, what = name.split(".", 1)
        if what == "bits":
            bits[kind] = values
        else:
            scores.setdefault(kind, {})[what] = values
    history = tuple((float(s), float(q), int(t)) for s, q, t in arrays["history"])
    return DeepAudit(scores, bits, history, json.loads(str(arrays["info"])), float("nan"))


def audit_rows(audit: DeepAudit, *, delta: float, alpha: float, procedures: Sequence[str],
               family: str = "dp", white_box_families: Sequence[str] = (),
               bonferroni: bool = True) -> list[dict[str, Any]]:
    """An audit's rows (per kind, score and procedure: the bound, of ``family``'s curve for the
    f-DP procedures and, for white-box kinds, of each of ``white_box_families``' too, beside the
    accountant's epsilon of its training and, for gradient canaries, the ceiling), with its
    description. ``bonferroni=False``: the papers' uncorrected best guess count, not valid
    (reproduction only)."""
    sets = [ScoreSet(kind, score, values, audit.bits[kind], DEEP_KINDS[kind].white_box)
            for kind, by_score in audit.scores.items() for score, values in by_score.items()]
    rows = bound_rows(sets, game=audit.info["game"], history=audit.history, delta=delta, alpha=alpha,
                      procedures=procedures, family=family, white_box_families=white_box_families,
                      bonferroni=bonferroni)
    described = {k: v for k, v in audit.info.items() if k != "examples"}
    return [{**described, "kind": r.pop("canaries"), **r} for r in rows]


def training_rate(network: str, *, classes: int, channels: int, side: int, batch: int, steps: int = 5,
                  device: str = "cpu", precision: str = "fp32",
                  clock: Callable[[], float] = time.perf_counter) -> float:
    """Examples per second (of ``clock``) of Opacus' DP-SGD on ``network`` at ``batch`` on
    ``device`` (random images, after one warm-up step) in ``precision``'s arithmetic: what the
    cost of an audit scales with.  A batch
    whose images (four batches, on the host) and per-example gradients (on ``device``) do not
    fit in memory is refused first (ParameterError naming ``batch``, with the size)."""
    batch = check_count(batch, "batch")
    steps = check_count(steps, "steps")
    model = build(network, classes=classes, channels=channels, size=side, seed=0)
    images = 4 * batch * channels * side * side * 4
    gradients = 3 * batch * sum(p.numel() for p in model.parameters()) * 4   # Opacus' grad_sample, clipped, summed
    if device.startswith("cuda"):
        check_memory(batch, "batch", images)
        check_memory(batch, "batch", gradients, torch.cuda.mem_get_info(torch.device(device))[0])
    else:
        check_memory(batch, "batch", images + gradients)
    model = model.to(device)
    n = batch * 4
    loader = DataLoader(TensorDataset(torch.rand(n, channels, side, side), torch.randint(0, classes, (n,))),
                        batch_size=batch)
    engine = PrivacyEngine(accountant="prv")
    model, optimizer, loader = engine.make_private(module=model, optimizer=torch.optim.SGD(model.parameters(), lr=0.1),
                                                   data_loader=loader, noise_multiplier=1.0, max_grad_norm=1.0)
    start, examples = clock(), 0
    for done, (xb, yb) in enumerate(poisson_batches(loader, steps + 1)):
        if done == 1:  # the first step warms up
            if device.startswith("cuda"):
                torch.cuda.synchronize()
            start, examples = clock(), 0
        examples += len(yb)
        _clipped_step(model, optimizer, xb, yb, 1, None, precision, device)
    if device.startswith("cuda"):
        torch.cuda.synchronize()
    seconds = clock() - start
    return examples / seconds


def audit_examples(deep_params: Mapping[str, Any]) -> dict[str, int]:
    """Examples the DP trainings of a ``deep`` configuration process, per case (all its
    trainings: games x groups (``deep.trainings``) x repeats, a case's own where it chooses
    them, each steps x batch x augmentations in expectation: every augmented view is a forward
    and backward pass)."""
    return {case: n * int(c["steps"]) * int(c["batch"]) * int(c.get("augmentations", 1))
            for case, n in case_trainings(deep_params).items() for c in [case_training(deep_params, case)]}
