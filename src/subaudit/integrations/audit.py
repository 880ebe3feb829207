"""One-run audits of a user's own Opacus training, in both games.

An auditor holds ``m`` canary slots, each with a record ``z_i`` and a twin ``z'_i``, and a
secret fair bit ``b_i`` per slot (drawn from the audit's own seed, never from the
training's):

* *membership* game (add/remove): ``z_i`` is in the training set when ``b_i = 1``; ``z'_i``
  never is (a held-out twin the pair procedure compares with);
* *substitute* game: slot ``i`` holds ``z_i`` when ``b_i = 1`` and ``z'_i`` otherwise, the
  substitute relation canary by canary (the pair game of Mahloujifar et al. 2024).

Canaries enter through the dataset, and :meth:`OneRunAudit.make_private` builds Opacus' own
DP-SGD on it (its ``GradSampleModule``, ``DPOptimizer``, Poisson ``DPDataLoader`` and the
engine's accountant) with the sampling fixed by the base data alone: sample rate
``q = batch_size / len(base)`` and expected batch size ``batch_size``, the same for every draw
of the bits. ``PrivacyEngine.make_private`` derives both from the dataset's size, which in
the membership game depends on the bits (``z_i`` is in the data when ``b_i = 1``), so the
training's sampling, its update scale and the accountant's q would carry information about the
secret bits; :meth:`OneRunAudit.verify` refuses such a training.
White-box *gradient* canaries (:meth:`OneRunAudit.attach`) are Dirac vectors ``+-C e_j`` on
``m`` coordinates, each Poisson-sampled at the loader's rate at every step and added to the
clipped gradient sum inside the DP optimiser's step, before the noise (as
dpsgd-auditbench's white-box step does); their score is the coordinate's total update.

After training, :meth:`OneRunAudit.finish` scores the canaries from the released model
(:data:`SCORES`), turns the scores into lower bounds on epsilon by each procedure of
:mod:`subaudit.estimation.procedures`, and sets them beside the accountant's epsilon of the
same training under the game's adjacency (eps_AR for membership, eps_S for substitute) and,
for gradient canaries trained with one setting, the final-iterate ceiling.

Usage (see ``examples/audit_opacus.py``)::

    audit = OneRunAudit(pairs, game="substitute", seed=7)
    audit.start(model)                       # checks the model, records initial losses
    model, optimizer, loader = audit.make_private(engine, module=model, optimizer=optimizer,
        base=train, batch_size=256, noise_multiplier=1.0, max_grad_norm=1.0)
    ...  # train as usual
    report = audit.finish(model, data_loader=loader, privacy_engine=engine)
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import torch
from opacus.data_loader import DPDataLoader
from opacus.grad_sample import GradSampleModule
from opacus.optimizers import DPOptimizer
from opacus.validators import ModuleValidator

from subaudit.estimation.one_run import FDP_FAMILIES
from subaudit.estimation.procedures import (
    ADJACENCY,
    GAMES,
    PROCEDURES,
    ScoreSet,
    bound_rows,
    claim_prefix,
    family_of,
    least_canaries,
)
from subaudit.integrations.opacus import is_poisson
from subaudit.scenarios.deep_canaries import SCORES
from subaudit.seeding import derive_seed
from subaudit.validation import ParameterError, check_choice, check_count, check_probability, check_sampling_rate

__all__ = ["AuditError", "AuditReport", "CanaryDataset", "GRADIENT_SCORES", "GradientCanaries",
           "OneRunAudit", "draw_bits", "hypercube_codes"]



#: White-box scores of gradient canaries (:meth:`OneRunAudit.gradient_scores`). ``update`` reads
#: the released model only. ``residual`` reads every step's released noisy gradient sum minus the
#: records' clipped sum, which an adversary who knows the other records and sees every iterate
#: can compute when every record is in every step (full batch, q = 1): then it is the canaries'
#: own Gaussian channel, free of the training's drift. At q < 1 the records' sum depends on a
#: sampling the adversary does not see; the residual is then the channel the accountant's
#: worst case bounds (its bound is still below eps of the training), not what the released
#: iterates show.
GRADIENT_SCORES: tuple[str, ...] = ("update", "residual")


class AuditError(RuntimeError):
    """The audit was used in a way that would void its guarantee."""


def _fingerprint(model: torch.nn.Module) -> tuple[float, ...]:
    """Each parameter's sum and sum of squares (float64): what tells a model trained since from
    the same model untouched."""
    with torch.no_grad():
        return tuple(v for p in model.parameters() for v in (float(p.double().sum()), float(p.double().square().sum())))


def draw_bits(seed: int, slots: int, what: str = "input", values: int = 2) -> np.ndarray:
    """The secret uniform values (``0 .. values - 1``, int64; fair bits by default) of ``slots``
    canary slots, from the audit's seed alone (``what`` separates the input and gradient
    canaries' draws)."""
    rng = np.random.default_rng(derive_seed(seed, "one-run-game", what))
    return rng.integers(0, check_count(values, "values", 2), size=check_count(slots, "slots"))


def hypercube_codes(width: int) -> np.ndarray:
    """The ``2 ** width`` sign vectors of a k-ary gradient slot, (k, width) in {-1, +1}: value
    j's coordinate i is + where bit i of j is 1 (width 1: value 0 is -1, value 1 is +1, the
    binary slot's -C e_j and +C e_j)."""
    w = check_count(width, "gradient_width")
    j = np.arange(2 ** w)[:, None]
    return np.where((j >> np.arange(w)[None, :]) & 1, 1.0, -1.0)


def _label(record: Any, where: str) -> int:
    """A record's label as a class index: an integer (Python, numpy or a 0-d integer tensor)."""
    try:
        y = record[1]
    except (TypeError, IndexError, KeyError):
        raise ParameterError(where, type(record).__name__, "an (input, label) record") from None
    if isinstance(y, torch.Tensor):
        value = y.item() if y.numel() == 1 else y
    elif isinstance(y, np.ndarray):
        value = y.item() if y.size == 1 else y
    else:
        value = y
    if isinstance(value, (bool, np.bool_)) or not isinstance(value, (int, np.integer)):
        raise ParameterError(f"{where} label", y, "a class index (an integer; a float label would be truncated)")
    return int(value)


def _check_records(pairs: Sequence[tuple[Any, Any]]) -> None:
    """Canary records are (input, integer label), inputs of one shape, and no record appears
    twice (a record paired with itself, or in two slots, would make slots dependent)."""
    seen: dict[tuple[Any, ...], str] = {}
    shape = None
    for i, pair in enumerate(pairs):
        for j, record in enumerate(pair):
            where = f"canaries[{i}][{j}]"
            label = _label(record, where)
            try:
                x = torch.as_tensor(record[0])
            except (TypeError, ValueError, RuntimeError) as err:
                raise ParameterError(where, type(record[0]).__name__, f"an input convertible to a tensor ({err})") \
                    from None
            if shape is None:
                shape = tuple(x.shape)
            elif tuple(x.shape) != shape:
                raise ParameterError(where, tuple(x.shape), f"an input of the first canary's shape {shape}")
            key = (shape, x.dtype, x.detach().cpu().numpy().tobytes(), label)
            if key in seen:
                raise ParameterError(where, "a repeated record", f"records that appear once (it equals {seen[key]}): "
                                                                 "every slot needs its own record and twin")
            seen[key] = where


class CanaryDataset(torch.utils.data.Dataset):
    """The base records, then the inserted canary records in slot order."""

    def __init__(self, base: Any, inserted: Sequence[Any]) -> None:
        self.base = base
        self.inserted = list(inserted)

    def __len__(self) -> int:
        return len(self.base) + len(self.inserted)

    def __getitem__(self, index: int) -> Any:
        n = len(self.base)
        return self.base[index] if index < n else self.inserted[index - n]


@dataclass
class GradientCanaries:
    """Gradient canaries on ``coordinates`` (flat indices over the optimiser's parameters), each
    coordinate in slot ``slots[i]`` with sign ``signs[i]``; a drawn slot adds ``signs * scale`` on
    its coordinates (``scale``: the clip bound C over the square root of the slot's width, so
    every canary has norm C): what :meth:`OneRunAudit.attach` installs in a DP optimiser."""

    coordinates: np.ndarray
    signs: np.ndarray
    sample_rate: float
    scale: float
    seed: int
    slots: np.ndarray
    initial: torch.Tensor = field(init=False)
    draws: int = field(default=0, init=False)
    #: Per parameter holding canaries (canary indices, running sum on the parameter's device) of
    #: the released noisy gradient sum minus the records' clipped sum: the canaries' own channel.
    residual_parts: list[tuple[np.ndarray, torch.Tensor]] = field(default_factory=list, init=False)

    def residual(self) -> np.ndarray:
        """The residual sums of every canary coordinate (read once, after training)."""
        out = np.zeros(self.coordinates.size)
        for which, total in self.residual_parts:
            out[which] = total.cpu().numpy()
        return out

    def locate(self, params: Sequence[torch.Tensor]) -> list[tuple[torch.Tensor, np.ndarray, np.ndarray]]:
        """(parameter, local flat indices, canary indices) for each parameter holding canaries."""
        sizes = np.cumsum([0] + [p.numel() for p in params])
        out = []
        for k, p in enumerate(params):
            inside = np.flatnonzero((self.coordinates >= sizes[k]) & (self.coordinates < sizes[k + 1]))
            if inside.size:
                out.append((p, self.coordinates[inside] - sizes[k], inside))
        return out

    def flat(self, params: Sequence[torch.Tensor]) -> torch.Tensor:
        """The canary coordinates' current values."""
        values = torch.empty(self.coordinates.size, dtype=torch.float64)
        for p, local, which in self.locate(params):
            values[torch.from_numpy(which)] = p.detach().reshape(-1)[torch.from_numpy(local)].double().cpu()
        return values


@dataclass(frozen=True)
class AuditReport:
    """What a one-run audit found: per (canaries, score, procedure) the lower bound (f-DP
    procedures: of the trade-off family in the row's ``family``), beside the accountant's
    epsilon of the same training under the game's adjacency."""

    game: str
    adjacency: str
    delta: float
    alpha: float
    rows: tuple[dict[str, Any], ...]
    accountant: dict[str, float]
    history: tuple[tuple[float, float, int], ...]

    @property
    def reference(self) -> float:
        """The accountant's epsilon under the game's adjacency."""
        return self.accountant[self.adjacency]

    def table(self) -> Any:
        """The rows as a pandas DataFrame."""
        import pandas as pd

        return pd.DataFrame(list(self.rows))

    def __str__(self) -> str:
        lines = [f"one-run audit, {self.game} game (adjacency {self.adjacency}), delta {self.delta:g}, "
                 f"confidence {1 - self.alpha:g}; accountant: " +
                 ", ".join(f"eps_{'AR' if k == 'add-remove' else 'S'} = {v:.4g}" for k, v in self.accountant.items())]
        for r in self.rows:
            ceiling = f", ceiling {r['ceiling']:.4g}" if r.get("ceiling") is not None else ""
            test = f"{r['procedure']} ({FDP_FAMILIES[r['family']].label})"
            claim = claim_prefix(r["family"])
            lines.append(f"  {r['canaries']:<8} {r['score']:<9} {test:<34} {claim} {r['epsilon']:.4g}"
                         f" (m = {r['m']}, most possible {r['perfect']:.4g}{ceiling})")
        return "\n".join(lines)


class OneRunAudit:
    """A one-run audit of one Opacus training (module docstring): the auditor's side.

    ``canaries`` are ``(z_i, z'_i)`` pairs of records in the dataset's own item format;
    ``gradient_canaries`` the number of white-box Dirac canaries (0: none). Too few canaries
    for a positive bound at confidence ``1 - alpha`` by every procedure is an error.
    ``family`` is the trade-off curve the f-DP procedures test
    (:data:`subaudit.estimation.one_run.FDP_FAMILIES`): ``"dp"``, valid for every mechanism,
    by default; ``"gdp"`` is a test of "the mechanism is mu-GDP", reported as such.
    ``gradient_width`` (substitute game only) makes each gradient slot k-ary: it spans that many
    coordinates and hides one of ``k = 2 ** gradient_width`` canary updates, the sign vectors
    (:func:`hypercube_codes`) scaled to norm C; the guess names which (a k-ary one-run audit:
    the f-DP procedures only), so ``gradient_canaries`` slots take ``gradient_canaries x
    gradient_width`` coordinates.
    """

    def __init__(self, canaries: Sequence[tuple[Any, Any]] = (), *, game: str, seed: int,
                 gradient_canaries: int = 0, gradient_width: int = 1, delta: float = 1e-5, alpha: float = 0.05,
                 procedures: Sequence[str] = tuple(PROCEDURES), family: str = "dp") -> None:
        self.game = check_choice(game, "game", GAMES)
        self.seed = check_count(seed, "seed", 0)  # not int(seed): 1.7 would take seed 1's bits
        self._start_fingerprint: tuple[float, ...] | None = None
        self.delta = check_probability(delta, "delta")
        self.alpha = check_probability(alpha, "alpha")
        self.procedures = tuple(check_choice(p, "procedures", PROCEDURES) for p in procedures)
        if not self.procedures:
            raise ParameterError("procedures", procedures, "one or more of " + ", ".join(PROCEDURES))
        self.family = family_of("mahloujifar", family)
        self.pairs = [tuple(pair) for pair in canaries]
        if any(len(pair) != 2 for pair in self.pairs):
            raise ParameterError("canaries", "<pairs>", "a sequence of (record, twin) pairs")
        _check_records(self.pairs)
        self.gradient_count = check_count(gradient_canaries, "gradient_canaries", 0)
        self.gradient_width = check_count(gradient_width, "gradient_width", 1)
        if self.gradient_width > 1 and self.game != "substitute":
            raise ParameterError("gradient_width", gradient_width, "1 in the membership game (a canary there is in "
                                                                   "or out: k-ary slots are substitute slots)")
        if self.gradient_width > 16:
            raise ParameterError("gradient_width", gradient_width, "at most 16 (2 ** 16 values a slot)")
        for count, what in ((len(self.pairs), "canaries"), (self.gradient_count, "gradient_canaries")):
            if count:
                self._check_enough(count, what, 2 ** self.gradient_width if what == "gradient_canaries" else 2)
        if not self.pairs and not self.gradient_count:
            raise ParameterError("canaries", 0, "some canary pairs or gradient_canaries > 0")
        self.bits = draw_bits(self.seed, len(self.pairs), "input") if self.pairs else np.zeros(0, np.int64)
        self.gradient_bits = (draw_bits(self.seed, self.gradient_count, "gradient", 2 ** self.gradient_width)
                              if self.gradient_count else np.zeros(0, np.int64))
        self._dataset: CanaryDataset | None = None
        self._loader: Any = None  # the Poisson loader make_private built (its rate ignores the bits)
        self._initial: np.ndarray | None = None
        self._gradient: GradientCanaries | None = None

    def _check_enough(self, count: int, what: str, k: int = 2) -> None:
        for p in self.procedures:
            if k > 2 and not PROCEDURES[p].kary:
                continue  # no bound of its own for k-ary slots
            need = least_canaries(p, self.delta, self.alpha, family=self.family, k=k)
            if count < need:
                raise ParameterError(what, count, f"at least {need} for a positive bound by {p} at confidence "
                                                  f"{1 - self.alpha:g} (fewer can only ever report 0)")

    # -- before training ------------------------------------------------------------------
    def inserted(self) -> list[Any]:
        """The canary records that go into training, in slot order."""
        if self.game == "membership":
            return [pair[0] for pair, b in zip(self.pairs, self.bits) if b]
        return [pair[0] if b else pair[1] for pair, b in zip(self.pairs, self.bits)]

    def dataset(self, base: Any) -> CanaryDataset:
        """``base`` with this audit's inserted canaries: build the training loader on it.  Asked
        again for the same ``base`` it returns the same dataset; one audit audits one training,
        so another ``base`` is an AuditError."""
        if self._dataset is not None:
            if self._dataset.base is base:
                return self._dataset
            raise AuditError("this audit's dataset was already built on another base dataset: one audit audits "
                             "one training (make a new OneRunAudit for another)")
        self._check_base(base)
        self._dataset = CanaryDataset(base, self.inserted())
        return self._dataset

    def _check_base(self, base: Any) -> None:
        """The base dataset is map-style (a length, items by index) and its first item an
        (input, integer label) record whose input has the canaries' shape (ParameterError or
        AuditError naming what is wrong; the base's own errors are not swallowed)."""
        try:
            size = len(base)
        except TypeError:
            raise ParameterError("base", type(base).__name__, "a map-style dataset (len and indexing), "
                                 "whose items are (input, integer label) records") from None
        if not self.pairs or size == 0:
            return
        try:
            item = base[0]
        except (TypeError, NotImplementedError):
            raise ParameterError("base", type(base).__name__, "a map-style dataset (len and indexing), "
                                 "whose items are (input, integer label) records") from None
        _label(item, "base[0]")
        try:
            shape = tuple(torch.as_tensor(item[0]).shape)
        except (TypeError, ValueError, RuntimeError) as err:
            raise ParameterError("base[0]", type(item[0]).__name__, f"an input convertible to a tensor ({err})") \
                from None
        mine = tuple(torch.as_tensor(self.pairs[0][0][0]).shape)
        if shape != mine:
            raise AuditError(f"the canaries' inputs have shape {mine} but the base dataset's have {shape}: "
                             "make the canaries records of the training data's own format")

    def make_private(self, engine: Any, *, module: torch.nn.Module, optimizer: torch.optim.Optimizer, base: Any,
                     batch_size: int, noise_multiplier: float, max_grad_norm: float,
                     generator: torch.Generator | None = None,
                     noise_generator: torch.Generator | None = None) -> tuple[GradSampleModule, DPOptimizer, Any]:
        """Opacus' DP-SGD on ``base`` with this audit's canaries, sampled independently of the bits.

        What ``engine.make_private(..., poisson_sampling=True)`` builds (flat clipping, per-example
        gradients by hooks, loss reduction "mean"), except that the sample rate is
        ``batch_size / len(base)`` and the expected batch size ``batch_size``, whatever the bits
        (``make_private`` takes both from the dataset's size, which the bits change in the
        membership game); the engine's accountant records every step at that rate.
        ``generator`` drives the Poisson sampling, ``noise_generator`` the noise.
        """
        b = check_count(batch_size, "batch_size")
        q = check_sampling_rate(b / max(len(base), 1), "batch_size / len(base)")
        self.check_model(module)
        model = GradSampleModule(module, batch_first=True, loss_reduction="mean")
        model.forbid_grad_accumulation()
        private = DPOptimizer(optimizer, noise_multiplier=noise_multiplier, max_grad_norm=max_grad_norm,
                              expected_batch_size=b, loss_reduction="mean", generator=noise_generator)
        private.attach_step_hook(engine.accountant.get_optimizer_hook_fn(sample_rate=q))
        loader = DPDataLoader(self.dataset(base), sample_rate=q, generator=generator)
        self._loader = loader
        return model, private, loader

    @staticmethod
    def check_model(model: torch.nn.Module) -> None:
        """AuditError if Opacus cannot train ``model`` privately (its ModuleValidator's errors)."""
        inner = model._module if isinstance(model, GradSampleModule) else model
        errors = ModuleValidator.validate(inner, strict=False)
        if errors:
            listed = "; ".join(str(e) for e in errors)
            raise AuditError(f"Opacus cannot train this model privately: {listed}. "
                             "opacus.validators.ModuleValidator.fix(model) replaces what it can.")

    def start(self, model: torch.nn.Module, *, data_loader: Any = None, batch_size: int = 512) -> None:
        """Before training: check the model (Opacus can train it, it takes the canaries and gives
        one logit per class, the labels among them) and record the canaries' losses at
        initialisation (for ``loss-drop``); with ``data_loader`` (a training built by Opacus'
        own ``make_private``), check the loader too (:meth:`verify_loader`), so that a wrong
        one fails before any training, not at :meth:`finish`."""
        self.check_model(model)
        if self.pairs:
            self._check_outputs(model)
            self._initial = self._losses(model, batch_size)
        if data_loader is not None:
            self.verify_loader(data_loader)
        self._start_fingerprint = _fingerprint(model)

    def _check_outputs(self, model: torch.nn.Module) -> None:
        x = torch.stack([torch.as_tensor(r[0]) for r in self.pairs[0]])
        device = next(model.parameters()).device
        was = model.training
        model.eval()
        try:
            with torch.no_grad():
                logits = model(x.to(device))
        except Exception as err:  # noqa: BLE001 - any failure of the user's forward on a canary
            raise AuditError(f"the model cannot take the canaries' inputs (shape {tuple(x.shape[1:])}): "
                             f"{type(err).__name__}: {err}") from None
        finally:
            model.train(was)
        if logits.ndim != 2 or logits.shape[1] < 2:
            raise AuditError(f"the model gives outputs of shape {tuple(logits.shape)} for 2 canaries: the audit "
                             "scores a record by its cross-entropy, which needs one logit per class (at least 2)")
        classes = int(logits.shape[1])
        labels = [_label(r, "canaries") for pair in self.pairs for r in pair]
        if min(labels) < 0 or max(labels) >= classes:
            raise AuditError(f"canary labels {min(labels)}..{max(labels)} are not classes of a model with "
                             f"{classes} outputs")

    def attach(self, optimizer: DPOptimizer, data_loader: Any, *,
               coordinates: Sequence[int] | None = None) -> GradientCanaries:
        """Install the gradient canaries in ``optimizer`` (after ``make_private``), on
        ``coordinates`` (flat indices over ``optimizer.params``; default a seeded choice)."""
        if not self.gradient_count:
            raise ParameterError("gradient_canaries", 0, "> 0 to attach gradient canaries")
        if not isinstance(optimizer, DPOptimizer):
            raise AuditError("attach() needs the DPOptimizer that make_private returned")
        self._check_loader(data_loader)
        total = sum(p.numel() for p in optimizer.params)
        m, w = self.gradient_count, self.gradient_width
        if m * w > total:
            raise ParameterError("gradient_canaries", m, f"at most the {total} parameters of the model over "
                                                         f"gradient_width {w} (a canary's coordinates are its own)")
        if coordinates is None:
            rng = np.random.default_rng(derive_seed(self.seed, "gradient-coordinates"))
            coords = np.sort(rng.choice(total, size=m * w, replace=False))
        else:
            coords = np.asarray(coordinates, dtype=np.int64)
            if coords.shape != (m * w,) or len(set(coords.tolist())) != m * w or coords.min() < 0 \
                    or coords.max() >= total:
                raise ParameterError("coordinates", "<indices>", f"{m * w} distinct flat indices in [0, {total})")
        if self.game == "substitute":  # slot i holds coordinates i w .. i w + w - 1, its value's sign vector
            signs = hypercube_codes(w)[self.gradient_bits].reshape(-1)
        else:                          # in or out: +C e_j when the bit is 1
            signs = self.gradient_bits.astype(np.float64)
        canaries = GradientCanaries(coords, signs, float(data_loader.sample_rate),
                                    float(optimizer.max_grad_norm) / float(np.sqrt(w)),
                                    derive_seed(self.seed, "gradient-draws"), np.repeat(np.arange(m), w))
        canaries.initial = canaries.flat(optimizer.params)
        rng = np.random.default_rng(canaries.seed)
        located = [(p, which, torch.from_numpy(local).to(p.device), torch.zeros(len(local), dtype=torch.float64,
                                                                                   device=p.device))
                   for p, local, which in canaries.locate(optimizer.params)]
        canaries.residual_parts = [(which, total) for _, which, _, total in located]
        original = optimizer.add_noise

        def add_noise() -> None:  # the clipped sum is complete here, the noise not yet added
            drawn = rng.random(m) < canaries.sample_rate   # one draw a slot: its canary is one record
            canaries.draws += 1
            for p, which, at, total in located:
                add = torch.from_numpy(canaries.signs[which] * drawn[canaries.slots[which]] * canaries.scale)
                flat = p.summed_grad.view(-1)
                total.sub_(flat[at].double())    # minus the records' clipped sum (on the device: no sync)
                flat.index_add_(0, at, add.to(flat.dtype).to(flat.device))
            original()
            for p, _, at, total in located:      # plus the released noisy sum
                total.add_(p.grad.detach().reshape(-1)[at].double())

        optimizer.add_noise = add_noise
        self._gradient = canaries
        return canaries

    # -- after training -------------------------------------------------------------------
    def _losses(self, model: torch.nn.Module, batch_size: int) -> np.ndarray:
        """Cross-entropy of every canary record (slot, member) under ``model``: (m, 2)."""
        records = [r for pair in self.pairs for r in pair]
        device = next(model.parameters()).device
        was = model.training
        model.eval()
        out = []
        try:
            with torch.no_grad():
                for k in range(0, len(records), batch_size):
                    chunk = records[k:k + batch_size]
                    x = torch.stack([torch.as_tensor(r[0]) for r in chunk])
                    y = torch.as_tensor([_label(r, "canaries") for r in chunk])
                    logits = model(x.to(device))
                    out.append(torch.nn.functional.cross_entropy(logits, y.to(device), reduction="none").double().cpu())
        finally:
            model.train(was)
        return torch.cat(out).numpy().reshape(len(self.pairs), 2)

    def scores(self, model: torch.nn.Module, score: str = "loss", *, batch_size: int = 512) -> np.ndarray:
        """Black-box scores (m, 2) of every canary record under the released ``model``."""
        check_choice(score, "score", SCORES)
        final = self._losses(model, batch_size)
        if score == "loss":
            return -final
        if self._initial is None:
            raise AuditError("score 'loss-drop' needs audit.start(model) before training")
        return self._initial - final

    def gradient_scores(self, optimizer: DPOptimizer, score: str = "update") -> np.ndarray:
        """White-box scores, :data:`GRADIENT_SCORES`: ``update``, each canary coordinate's total
        descent (initial minus final value; larger when ``+C e_j`` was drawn), or ``residual``,
        the sum over steps of the released noisy gradient sum minus the records' clipped sum there
        (the canaries' draws and the noise alone); (m, 2) with its negation for the twin
        ``-C e_j``; for k-ary slots (``gradient_width > 1``), (m, k): each slot's coordinates
        projected on each value's sign vector."""
        if self._gradient is None:
            raise AuditError("no gradient canaries attached: call audit.attach(optimizer, data_loader)")
        if check_choice(score, "score", GRADIENT_SCORES) == "residual":
            u = self._gradient.residual()
        else:
            u = (self._gradient.initial - self._gradient.flat(optimizer.params)).numpy()
        if self.gradient_width == 1:
            return np.stack([u, -u], axis=1)
        return u.reshape(self.gradient_count, self.gradient_width) @ hypercube_codes(self.gradient_width).T

    def gradient_score(self, score: str = "update") -> str:
        """A gradient score's name in tables: ``score``, with ``, k = K`` for k-ary slots."""
        return score if self.gradient_width == 1 else f"{score}, k = {2 ** self.gradient_width}"

    def _check_loader(self, data_loader: Any) -> None:
        if not is_poisson(data_loader):
            raise AuditError("the data loader does not sample by Poisson sampling, which the accountant "
                             "assumes: use the loader make_private(..., poisson_sampling=True) returns")

    def verify_loader(self, data_loader: Any) -> None:
        """AuditError unless ``data_loader`` samples this audit's dataset by Poisson sampling at
        a rate the bits cannot change (membership game with input canaries:
        :meth:`make_private`'s loader)."""
        self._check_loader(data_loader)
        if self.pairs and (self._dataset is None or data_loader.dataset is not self._dataset):
            raise AuditError("the canaries are not in the training data: build the loader on "
                             "audit.dataset(base) before make_private, never insert canaries into batches")
        if self.pairs and self.game == "membership" and (self._loader is None or data_loader is not self._loader):
            raise AuditError("in the membership game the dataset's size depends on the secret bits, and "
                             "PrivacyEngine.make_private derives the sample rate and the expected batch size "
                             "from it: build the training with audit.make_private(engine, ..., base=..., "
                             "batch_size=...), whose sampling the bits cannot change")

    def verify(self, model: torch.nn.Module, data_loader: Any) -> None:
        """AuditError unless ``model`` was trained by Opacus on this audit's dataset with
        Poisson sampling (``data_loader``: the loader ``make_private`` returned) at a rate the
        bits cannot change (:meth:`verify_loader`)."""
        self.verify_loader(data_loader)
        if not isinstance(model, GradSampleModule):
            raise AuditError("the model was not trained through make_private (not an Opacus GradSampleModule)")

    def finish(self, model: torch.nn.Module, *, data_loader: Any, privacy_engine: Any,
               optimizer: DPOptimizer | None = None, score: Sequence[str] = SCORES,
               gradient_score: Sequence[str] = ("update",)) -> AuditReport:
        """Score the canaries (input canaries by each of ``score``, gradient canaries by each of
        ``gradient_score``, :data:`GRADIENT_SCORES`), bound epsilon by each procedure and report
        it beside the accountant's epsilon of this training (``privacy_engine.accountant.history``)."""
        self.verify(model, data_loader)
        history = tuple((float(s), float(q), int(t)) for s, q, t in privacy_engine.accountant.history)
        if not history:
            raise AuditError("the privacy engine's accountant has no steps: train before finish()")
        if self._start_fingerprint is not None and _fingerprint(model) == self._start_fingerprint:
            raise AuditError("the model's parameters at finish() are those at start(): call start() before "
                             "training (it records the canaries' losses at initialisation, which loss-drop "
                             "scores against), not after")
        sets: list[ScoreSet] = []
        if self.pairs:
            for s in score:
                if check_choice(s, "score", SCORES) == "loss-drop" and self._initial is None:
                    continue  # no initial losses recorded (audit.start not called)
                sets.append(ScoreSet("input", s, self.scores(model, s), self.bits))
        if self.gradient_count:
            if optimizer is None:
                raise AuditError("gradient canaries are scored from the optimiser: finish(..., optimizer=...)")
            for s in gradient_score:
                sets.append(ScoreSet("gradient", self.gradient_score(s), self.gradient_scores(optimizer, s),
                                     self.gradient_bits, True))
        if not sets:
            raise AuditError(f"nothing to score: score={tuple(score)!r} names no score of the input canaries "
                             f"(allowed: {', '.join(SCORES)}; loss-drop needs audit.start(model)) and there "
                             "are no gradient canaries")
        rows = bound_rows(sets, game=self.game, history=history, delta=self.delta, alpha=self.alpha,
                          procedures=self.procedures, family=self.family)
        adjacency = ADJACENCY[self.game]
        accountant = {"add-remove": rows[0]["eps_add_remove"], "substitute": rows[0]["eps_substitute"]}
        return AuditReport(self.game, adjacency, self.delta, self.alpha, tuple(rows), accountant, history)

